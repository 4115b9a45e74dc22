//! Anchors: which windows can possibly repeat, decided from a sample of short k-grams.
//!
//! # The simple version first
//!
//! Every distinct window of `N` bytes could be sent to the owner of its key, and the owner
//! could count. That is exact, but natural text has nearly one distinct window per byte, so
//! it moves and holds one 32-byte record per byte of text (the search's whole cost).
//!
//! # Why the real search first exchanges anchors
//!
//! A window is `w = N - k + 1` overlapping k-grams. Its *anchor* is the k-gram whose hash
//! is the smallest among them (the leftmost one on a tie): a function of the window's
//! content alone, at a fixed offset inside it (winnowing: Schleimer, Wilkerson and Aiken,
//! SIGMOD 2003). Two copies of a window therefore have anchors with the same content at two
//! different positions. So a window can only occur twice in the corpus when its anchor's
//! hash occurs at two or more anchor positions: anchors are counted first (one small record
//! per *selected* k-gram: about `2 / (w + 1)` of the positions), and only windows whose
//! anchor is *hot* (seen twice or more) are keyed, sent and resolved. A hash collision of
//! anchors only makes an anchor falsely hot, which costs a record and changes no answer.
//!
//! With `N = 50` and `k = N / 2`, one position in 13 is an anchor, and on dev-medium the
//! windows sent drop from one per byte to those of repeated text plus a few percent.
//! Below [`MIN_FILTERED_BYTES`] the anchors would be nearly every position, and every
//! window is sent as in the simple version.

/// The shortest `N` for which anchors are used: below it `w` is too small for the anchor
/// round to save anything.
pub const MIN_FILTERED_BYTES: usize = 16;

/// The k-gram length for windows of `n` bytes, or `None` when every window is sent.
pub fn anchor_bytes(n: usize) -> Option<usize> {
    (n >= MIN_FILTERED_BYTES).then_some(n / 2)
}

/// The multiplier of the rolling k-gram hash (odd, from the golden ratio).
const ROLL: u64 = 0x9E37_79B9_7F4A_7C15;

/// A bijective finalizer (splitmix64's), so that the rolling hash's weak low bits do not
/// bias which k-gram is the smallest.
fn finish(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The hash of one k-gram, written plainly (what the rolling hash computes).
pub fn kgram_hash(kgram: &[u8]) -> u64 {
    finish(kgram.iter().fold(0u64, |h, &b| {
        h.wrapping_mul(ROLL).wrapping_add(u64::from(b) + 1)
    }))
}

/// Selects anchors for windows of `n` bytes (reused between documents).
#[derive(Debug)]
pub struct Winnow {
    n: usize,
    k: usize,
    /// `ROLL^(k-1)`, to take the leaving byte out of the rolling hash.
    top: u64,
    /// The hash of every k-gram of the current document.
    hashes: Vec<u64>,
}

impl Winnow {
    /// Anchors for windows of `n` bytes, or `None` below [`MIN_FILTERED_BYTES`].
    pub fn new(n: usize) -> Option<Self> {
        let k = anchor_bytes(n)?;
        let top = (1..k).fold(1u64, |p, _| p.wrapping_mul(ROLL));
        Some(Winnow {
            n,
            k,
            top,
            hashes: Vec::new(),
        })
    }

    /// Calls `f(window start, anchor start, anchor hash)` for every window of `text` (one
    /// document), in order of window start.
    ///
    /// The textbook sliding minimum keeps a deque of candidates; here the k-grams' hashes are
    /// computed first (one rolling pass) and the minimum is kept until it leaves the window,
    /// when the window is scanned again. A new k-gram replaces it only when strictly smaller,
    /// so the leftmost of equal hashes stays. The minimum of random hashes leaves about twice
    /// per `w + 1` steps, so the rescans cost about two comparisons per byte, in straight
    /// loops. (On dev-medium the packing stage, mostly this, took 1.9 s with the deque and
    /// 1.0 s so: two runs each.)
    pub fn windows(&mut self, text: &[u8], mut f: impl FnMut(usize, usize, u64)) {
        let (n, k) = (self.n, self.k);
        if text.len() < n {
            return;
        }
        let w = n - k + 1;
        let hashes = &mut self.hashes;
        hashes.clear();
        let mut h = 0u64;
        for &b in &text[..k - 1] {
            h = h.wrapping_mul(ROLL).wrapping_add(u64::from(b) + 1);
        }
        for j in 0..=text.len() - k {
            // Add the k-gram's last byte, hash, then take its first byte out.
            h = h
                .wrapping_mul(ROLL)
                .wrapping_add(u64::from(text[j + k - 1]) + 1);
            hashes.push(finish(h));
            h = h.wrapping_sub((u64::from(text[j]) + 1).wrapping_mul(self.top));
        }
        let leftmost_min = |from: usize| {
            let mut at = from;
            for (i, &x) in hashes[from + 1..from + w].iter().enumerate() {
                if x < hashes[at] {
                    at = from + 1 + i;
                }
            }
            at
        };
        let mut m = leftmost_min(0);
        f(0, m, hashes[m]);
        for p in 1..=text.len() - n {
            let new = p + w - 1;
            if m < p {
                m = leftmost_min(p);
            } else if hashes[new] < hashes[m] {
                m = new;
            }
            f(p, m, hashes[m]);
        }
    }

    /// Calls `f(anchor start, hash)` once for every k-gram of `text` that is some window's
    /// anchor, in order of start.
    pub fn anchors(&mut self, text: &[u8], mut f: impl FnMut(usize, u64)) {
        let mut last = None;
        self.windows(text, |_, a, hash| {
            if last != Some(a) {
                last = Some(a);
                f(a, hash);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The anchor of every window written plainly: hash every k-gram, take the leftmost
    /// smallest.
    fn plain(text: &[u8], n: usize) -> Vec<(usize, usize, u64)> {
        let k = anchor_bytes(n).unwrap();
        let w = n - k + 1;
        if text.len() < n {
            return Vec::new();
        }
        (0..=text.len() - n)
            .map(|p| {
                let (a, h) = (p..p + w)
                    .map(|s| (s, kgram_hash(&text[s..s + k])))
                    .min_by_key(|&(s, h)| (h, s))
                    .unwrap();
                (p, a, h)
            })
            .collect()
    }

    #[test]
    fn the_rolling_selection_equals_the_plain_one() {
        let mut seed = 3u64;
        let mut texts: Vec<Vec<u8>> = vec![
            Vec::new(),
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".to_vec(),
            "abcabcabcabcabcabcabc€€€€€€€€ ñ ñ ñ".repeat(3).into_bytes(),
            (0..=255u8).collect(),
        ];
        for len in [15, 16, 17, 31, 49, 50, 51, 120, 700] {
            texts.push(
                (0..len)
                    .map(|_| {
                        seed = finish(seed.wrapping_add(ROLL));
                        b"ab \xff"[(seed % 4) as usize]
                    })
                    .collect(),
            );
        }
        for n in [16, 17, 24, 50, 64] {
            let mut winnow = Winnow::new(n).unwrap();
            for t in &texts {
                let mut got = Vec::new();
                winnow.windows(t, |p, a, h| got.push((p, a, h)));
                assert_eq!(got, plain(t, n), "n = {n}, text of {} bytes", t.len());
                // Each anchor once, in order.
                let mut anchors = Vec::new();
                winnow.anchors(t, |a, h| anchors.push((a, h)));
                let mut want: Vec<(usize, u64)> = got.iter().map(|&(_, a, h)| (a, h)).collect();
                want.dedup();
                assert_eq!(anchors, want);
            }
        }
    }

    #[test]
    fn copies_of_a_window_have_anchors_of_equal_content_at_the_same_offset() {
        let passage = b"a passage of fifty bytes or more, copied twice....";
        let mut text = b"lead-in ".to_vec();
        text.extend_from_slice(passage);
        text.extend_from_slice(b" and between, ");
        let second = text.len();
        text.extend_from_slice(passage);
        let mut at = std::collections::HashMap::new();
        Winnow::new(50).unwrap().windows(&text, |p, a, h| {
            at.insert(p, (a - p, h));
        });
        assert_eq!(at[&8], at[&second]);
    }

    #[test]
    fn short_windows_are_not_filtered() {
        assert!(Winnow::new(MIN_FILTERED_BYTES - 1).is_none());
        assert_eq!(anchor_bytes(50), Some(25));
    }
}
