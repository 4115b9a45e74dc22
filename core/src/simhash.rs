//! Charikar's simhash: many weighted 64-bit feature hashes folded into one 64-bit
//! fingerprint, so that similar feature sets give fingerprints a few bits apart.
//!
//! The simple definition: 64 signed counters `V`; for each feature with weight `w` and hash
//! `h`, `V[i] += w` where bit `i` of `h` is 1 and `V[i] -= w` where it is 0; bit `i` of the
//! fingerprint is 1 iff `V[i] > 0` (a tie gives 0). Bit 0 is the least significant.
//!
//! The code counts instead, per bit, the weight of the features that have it set (`ones`)
//! and the total weight: `V[i] = ones[i] - (total - ones[i])`, so `V[i] > 0` iff
//! `2 * ones[i] > total`. Same result, and the inner loop has no branch.

use fxhash::FxHashMap as HashMap;
use std::f64::consts::PI;

/// How much each feature counts.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Weighting {
    /// Each distinct feature counts once (the simhash-doc default; see docs/fingerprints.md
    /// for why it beats term frequency on templated text).
    #[default]
    Set,
    /// Each feature counts as often as it occurs.
    Tf,
    /// Term frequency times inverse document frequency, from a table built over the corpus.
    TfIdf(std::sync::Arc<IdfTable>),
}

/// Inverse document frequencies by feature hash. `idf(h) = ln(N / df(h))`; a feature the
/// table has not seen gets the largest idf, `ln(N)`: it is in at most one document.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct IdfTable {
    documents: u64,
    idf: HashMap<u64, f64>,
}

/// TF-IDF weights are integers: `tf * round(IDF_SCALE * idf)`, so folding stays exact and
/// independent of summation order.
pub const IDF_SCALE: f64 = 1000.0;

impl IdfTable {
    /// Builds the table from document frequencies over `documents` documents.
    pub fn from_document_frequencies(
        documents: u64,
        df: impl IntoIterator<Item = (u64, u64)>,
    ) -> Self {
        let n = documents.max(1) as f64;
        let idf = df
            .into_iter()
            .map(|(h, d)| (h, (n / d.max(1) as f64).ln()))
            .collect();
        IdfTable { documents, idf }
    }

    pub fn idf(&self, feature: u64) -> f64 {
        match self.idf.get(&feature) {
            Some(&v) => v,
            None => (self.documents.max(1) as f64).ln(),
        }
    }

    /// The integer weight of a feature that occurs `tf` times.
    pub fn weight(&self, feature: u64, tf: u64) -> u64 {
        tf * (IDF_SCALE * self.idf(feature)).round().max(0.0) as u64
    }

    pub fn len(&self) -> usize {
        self.idf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.idf.is_empty()
    }
}

/// `SPREAD[v]` has byte `k` equal to bit `k` of `v`: adding it to a `u64` adds one bit of
/// `v` to each of eight byte-wide counters.
const fn spread_table() -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut v = 0;
    while v < 256 {
        let mut k = 0;
        while k < 8 {
            table[v] |= (((v >> k) & 1) as u64) << (8 * k);
            k += 1;
        }
        v += 1;
    }
    table
}

static SPREAD: [u64; 256] = spread_table();

/// Folds feature hashes of weight 1 each (the set weighting: pass distinct hashes).
///
/// The 64 bit counts are kept as 64 byte-wide counters in eight `u64` words: each byte of a
/// hash adds its eight bits at once through `SPREAD`. Every 255 hashes, before a byte can
/// overflow, the byte counters are moved into wide ones.
pub fn fold_unweighted(hashes: &[u64]) -> u64 {
    let mut ones = [0u64; 64];
    for chunk in hashes.chunks(255) {
        let mut packed = [0u64; 8];
        for &h in chunk {
            for (j, word) in packed.iter_mut().enumerate() {
                *word += SPREAD[((h >> (8 * j)) & 0xff) as usize];
            }
        }
        for (j, word) in packed.iter().enumerate() {
            for k in 0..8 {
                ones[8 * j + k] += (word >> (8 * k)) & 0xff;
            }
        }
    }
    fingerprint_from_counts(&ones, hashes.len() as u64)
}

/// Keeps the first occurrence of each value of `hashes` at its front, in order of first
/// occurrence, and returns how many distinct values there are. `table` is scratch space
/// (an open-addressing set, reused between calls).
pub fn dedup_unsorted(hashes: &mut [u64], table: &mut Vec<u64>) -> usize {
    if hashes.len() < 2 {
        return hashes.len();
    }
    // At most a quarter full, so that most lookups end at their first slot; 0 marks an
    // empty slot, so the value 0 is tracked on the side.
    let bits = (4 * hashes.len()).next_power_of_two().trailing_zeros();
    let mask = (1usize << bits) - 1;
    table.clear();
    table.resize(1 << bits, 0);
    let mut seen_zero = false;
    let mut kept = 0;
    for i in 0..hashes.len() {
        let h = hashes[i];
        if h == 0 {
            if !std::mem::replace(&mut seen_zero, true) {
                hashes[kept] = 0;
                kept += 1;
            }
            continue;
        }
        // Feature hashes are well mixed, but a multiply keeps crafted ones from clustering.
        let mut slot = (h.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize;
        loop {
            let t = table[slot];
            // One branch, mostly taken (a collision is rare), instead of the two the
            // compiler makes of `t == 0 || t == h`, the first of which is a coin toss.
            if std::hint::black_box((t == 0) | (t == h)) {
                // New or seen: both stores are harmless when seen, and the count decides
                // without a branch.
                table[slot] = h;
                hashes[kept] = h;
                kept += usize::from(t == 0);
                break;
            }
            slot = (slot + 1) & mask;
        }
    }
    kept
}

/// Folds `(hash, weight)` pairs.
pub fn fold_weighted(features: impl IntoIterator<Item = (u64, u64)>) -> u64 {
    let mut ones = [0u64; 64];
    let mut total = 0u64;
    for (h, w) in features {
        total += w;
        for (i, count) in ones.iter_mut().enumerate() {
            *count += ((h >> i) & 1) * w;
        }
    }
    fingerprint_from_counts(&ones, total)
}

fn fingerprint_from_counts(ones: &[u64; 64], total: u64) -> u64 {
    ones.iter()
        .enumerate()
        .filter(|(_, &count)| 2 * count > total)
        .fold(0u64, |fp, (i, _)| fp | (1 << i))
}

/// Folds feature hashes (one per occurrence, any order) under a weighting. Sorts `hashes`.
pub fn simhash(hashes: &mut [u64], weighting: &Weighting) -> u64 {
    hashes.sort_unstable();
    simhash_of_sorted(hashes, weighting)
}

/// Folds sorted feature hashes (one per occurrence) under a weighting, without changing
/// them: callers that also need the distinct set sort once and dedup afterwards.
pub fn simhash_of_sorted(sorted: &[u64], weighting: &Weighting) -> u64 {
    match weighting {
        Weighting::Set => fold_weighted(runs(sorted).map(|(h, _)| (h, 1))),
        Weighting::Tf => fold_weighted(runs(sorted)),
        Weighting::TfIdf(table) => {
            fold_weighted(runs(sorted).map(|(h, tf)| (h, table.weight(h, tf))))
        }
    }
}

/// Moves the distinct values of a sorted slice to its front; returns how many there are.
pub fn dedup_sorted(sorted: &mut [u64]) -> usize {
    if sorted.is_empty() {
        return 0;
    }
    let mut kept = 1;
    for i in 1..sorted.len() {
        if sorted[i] != sorted[kept - 1] {
            sorted[kept] = sorted[i];
            kept += 1;
        }
    }
    kept
}

/// `(value, count)` for each run of equal values in a sorted slice.
fn runs(sorted: &[u64]) -> impl Iterator<Item = (u64, u64)> + '_ {
    sorted
        .chunk_by(|a, b| a == b)
        .map(|run| (run[0], run.len() as u64))
}

/// The number of bits in which two fingerprints differ.
#[inline]
pub fn hamming(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

/// Charikar's estimate of the cosine similarity of two feature vectors from the Hamming
/// distance of their 64-bit simhashes: P[bit equal] = 1 - theta / pi, so
/// theta = pi * hamming / 64 and the estimate is cos(theta).
pub fn cosine_estimate(hamming: u32) -> f64 {
    (PI * hamming as f64 / 64.0).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, literally: signed counters.
    fn reference(features: &[(u64, i64)]) -> u64 {
        let mut v = [0i64; 64];
        for &(h, w) in features {
            for (i, vi) in v.iter_mut().enumerate() {
                *vi += if (h >> i) & 1 == 1 { w } else { -w };
            }
        }
        (0..64)
            .filter(|&i| v[i] > 0)
            .fold(0, |fp, i| fp | (1u64 << i))
    }

    #[test]
    fn counting_equals_signed_counters() {
        let mut state = 0x1234_5678_9abc_def0u64;
        for n in 0..50 {
            let features: Vec<(u64, i64)> = (0..n)
                .map(|_| {
                    (
                        crate::mix::splitmix64(&mut state),
                        (crate::mix::splitmix64(&mut state) % 5) as i64,
                    )
                })
                .collect();
            let weighted = fold_weighted(features.iter().map(|&(h, w)| (h, w as u64)));
            assert_eq!(weighted, reference(&features));
            let hashes: Vec<u64> = features.iter().map(|f| f.0).collect();
            let ones: Vec<(u64, i64)> = hashes.iter().map(|&h| (h, 1)).collect();
            assert_eq!(fold_unweighted(&hashes), reference(&ones));
        }
    }

    /// The per-bit loop the byte-wide counters replace.
    fn simple_fold(hashes: &[u64]) -> u64 {
        let mut ones = [0u64; 64];
        for &h in hashes {
            for (i, count) in ones.iter_mut().enumerate() {
                *count += (h >> i) & 1;
            }
        }
        fingerprint_from_counts(&ones, hashes.len() as u64)
    }

    proptest::proptest! {
        #[test]
        fn packed_fold_equals_the_simple_fold(
            hashes in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..1200),
            biased in proptest::prelude::any::<u64>(),
        ) {
            proptest::prop_assert_eq!(fold_unweighted(&hashes), simple_fold(&hashes));
            // Correlated bits, so that counts land near the ties and near 255.
            let skewed: Vec<u64> = hashes.iter().map(|h| h | biased).collect();
            proptest::prop_assert_eq!(fold_unweighted(&skewed), simple_fold(&skewed));
            let masked: Vec<u64> = hashes.iter().map(|h| h & biased).collect();
            proptest::prop_assert_eq!(fold_unweighted(&masked), simple_fold(&masked));
        }

        #[test]
        fn dedup_unsorted_keeps_first_occurrences(
            values in proptest::collection::vec(0u64..40, 0..300),
            spread in proptest::prelude::any::<u64>(),
        ) {
            // Few distinct values, many repeats, 0 included; also spread over all 64 bits.
            for hashes in [values.clone(), values.iter().map(|v| v.wrapping_mul(spread)).collect()] {
                let mut expected: Vec<u64> = Vec::new();
                for &h in &hashes {
                    if !expected.contains(&h) {
                        expected.push(h);
                    }
                }
                let mut got = hashes.clone();
                let n = dedup_unsorted(&mut got, &mut Vec::new());
                proptest::prop_assert_eq!(&got[..n], &expected[..]);
            }
        }
    }

    #[test]
    fn fold_handles_long_inputs() {
        let mut state = 42u64;
        for n in [254usize, 255, 256, 510, 511, 5000] {
            let hashes: Vec<u64> = (0..n)
                .map(|_| crate::mix::splitmix64(&mut state) | 0x8000_0000_0000_0001)
                .collect();
            assert_eq!(fold_unweighted(&hashes), simple_fold(&hashes), "{n}");
        }
    }

    #[test]
    fn ties_give_zero() {
        assert_eq!(fold_unweighted(&[u64::MAX, 0]), 0);
        assert_eq!(fold_unweighted(&[]), 0);
    }

    #[test]
    fn set_counts_each_feature_once_and_tf_counts_repeats() {
        let mut set = vec![1u64, 1, 1, 2];
        let mut tf = set.clone();
        assert_eq!(
            simhash(&mut set, &Weighting::Set),
            reference(&[(1, 1), (2, 1)])
        );
        assert_eq!(
            simhash(&mut tf, &Weighting::Tf),
            reference(&[(1, 3), (2, 1)])
        );
    }

    #[test]
    fn tfidf_scales_weights() {
        let table = IdfTable::from_document_frequencies(100, [(1u64, 100u64), (2, 1)]);
        assert_eq!(
            table.weight(1, 5),
            0,
            "a feature in every document weighs nothing"
        );
        assert_eq!(table.weight(2, 1), (IDF_SCALE * 100f64.ln()).round() as u64);
        assert_eq!(
            table.weight(3, 1),
            table.weight(2, 1),
            "unseen features get the largest idf"
        );
        let mut hashes = vec![1u64, 1, 2];
        let fp = simhash(&mut hashes, &Weighting::TfIdf(std::sync::Arc::new(table)));
        assert_eq!(fp, 2, "only feature 2 carries weight");
    }

    #[test]
    fn cosine_estimate_endpoints() {
        assert!((cosine_estimate(0) - 1.0).abs() < 1e-12);
        assert!(cosine_estimate(32).abs() < 1e-12);
        assert!((cosine_estimate(64) + 1.0).abs() < 1e-12);
    }
}
