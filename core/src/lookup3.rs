//! Bob Jenkins' lookup3 `hashlittle2`, the feature hash of the simhash-doc scheme.
//!
//! `hashlittle2` hashes a byte string into two 32-bit values, `c` (primary) and `b`
//! (secondary). simhash-doc composes them as `(c << 32) | b` with both initial values 0
//! ([`feature_hash`]). This is a straight port of the byte-at-a-time reading of
//! lookup3.c (the result is the same as the aligned fast paths on little-endian machines);
//! the golden vectors in the tests come from lookup3.c's own self-test.

#[inline(always)]
fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

#[inline(always)]
fn final_mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(14));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(11));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(25));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(16));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(4));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(14));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(24));
}

/// Reads up to 4 bytes as a little-endian word, zero-padded (lookup3's tail handling).
#[inline(always)]
fn le_word(bytes: &[u8]) -> u32 {
    let mut word = [0u8; 4];
    word[..bytes.len()].copy_from_slice(bytes);
    u32::from_le_bytes(word)
}

/// lookup3 `hashlittle2(key, length, &pc, &pb)`: returns `(c, b)`, the primary and
/// secondary hash, given initial values `pc` and `pb`.
pub fn hashlittle2(key: &[u8], pc: u32, pb: u32) -> (u32, u32) {
    let init = 0xdead_beef_u32
        .wrapping_add(key.len() as u32)
        .wrapping_add(pc);
    let (mut a, mut b, mut c) = (init, init, init.wrapping_add(pb));
    let mut rest = key;
    while rest.len() > 12 {
        a = a.wrapping_add(le_word(&rest[0..4]));
        b = b.wrapping_add(le_word(&rest[4..8]));
        c = c.wrapping_add(le_word(&rest[8..12]));
        mix(&mut a, &mut b, &mut c);
        rest = &rest[12..];
    }
    if rest.is_empty() {
        // lookup3 returns without the final mix for a zero-length tail.
        return (c, b);
    }
    // The last 1 to 12 bytes, zero-padded: adding a zero word is adding nothing.
    let mut tail = [0u8; 12];
    tail[..rest.len()].copy_from_slice(rest);
    a = a.wrapping_add(le_word(&tail[0..4]));
    b = b.wrapping_add(le_word(&tail[4..8]));
    c = c.wrapping_add(le_word(&tail[8..12]));
    final_mix(&mut a, &mut b, &mut c);
    (c, b)
}

/// The simhash-doc feature hash: `hashlittle2` with both initial values 0, composed as
/// `(c << 32) | b`.
#[inline]
pub fn feature_hash(token: &[u8]) -> u64 {
    let (c, b) = hashlittle2(token, 0, 0);
    ((c as u64) << 32) | b as u64
}

/// [`feature_hash`] of `buf[start..end]`. When the key is 1 to 12 bytes long and `buf`
/// has at least 16 bytes from `start` on (callers pad their buffers), the key is read with
/// one 16-byte load and masked, instead of byte-wise.
#[inline]
pub fn feature_hash_in(buf: &[u8], start: usize, end: usize) -> u64 {
    match short_key_state(buf, start, end) {
        Some([mut a, mut b, mut c]) => {
            final_mix(&mut a, &mut b, &mut c);
            ((c as u64) << 32) | b as u64
        }
        None => feature_hash(&buf[start..end]),
    }
}

/// The state `(a, b, c)` just before the final mix for the key `buf[start..end]`, when it
/// is 1 to 12 bytes long and 16 bytes can be read from `start` (one load, masked to the
/// key); `None` otherwise.
#[inline(always)]
fn short_key_state(buf: &[u8], start: usize, end: usize) -> Option<[u32; 3]> {
    let len = end.wrapping_sub(start);
    let window = buf.get(start..start + 16)?;
    if !(1..=12).contains(&len) || end > buf.len() {
        return None;
    }
    let words = u128::from_le_bytes(window.try_into().unwrap()) & ((1u128 << (8 * len)) - 1);
    let init = 0xdead_beef_u32.wrapping_add(len as u32);
    Some([
        init.wrapping_add(words as u32),
        init.wrapping_add((words >> 32) as u32),
        init.wrapping_add((words >> 64) as u32),
    ])
}

/// Keys hashed together by [`feature_hashes_in`]: one 512-bit vector of 32-bit lanes.
pub const LANES: usize = 16;

/// `out.extend(spans.map(|(s, e)| feature_hash_in(buf, s, e)))`, [`LANES`] keys at a time.
///
/// The simple version hashes one key after another: each short key is one final mix, a
/// chain of 21 dependent operations. Here the words of [`LANES`] keys are gathered first and
/// the final mix runs on all of them at once, which the compiler turns into vector
/// instructions (16 lanes with AVX-512, 8 with AVX2, chosen at run time). Keys longer than
/// 12 bytes, or too near the end of `buf` for a 16-byte load, take the one-at-a-time path;
/// the results are the same either way (tested against [`feature_hash`]).
pub fn feature_hashes_in(buf: &[u8], spans: &[(u32, u32)], out: &mut Vec<u64>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the processor has just been found to support AVX-512 F.
        unsafe { feature_hashes_avx512(buf, spans, out) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has just been found to support AVX2.
        unsafe { feature_hashes_avx2(buf, spans, out) };
        return;
    }
    feature_hashes_lanes(buf, spans, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn feature_hashes_avx512(buf: &[u8], spans: &[(u32, u32)], out: &mut Vec<u64>) {
    feature_hashes_lanes(buf, spans, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn feature_hashes_avx2(buf: &[u8], spans: &[(u32, u32)], out: &mut Vec<u64>) {
    feature_hashes_lanes(buf, spans, out)
}

#[inline(always)]
fn feature_hashes_lanes(buf: &[u8], spans: &[(u32, u32)], out: &mut Vec<u64>) {
    out.reserve(spans.len());
    let mut chunks = spans.chunks_exact(LANES);
    for chunk in &mut chunks {
        let (mut a, mut b, mut c) = ([0u32; LANES], [0u32; LANES], [0u32; LANES]);
        // Lanes whose key is not 1 to 12 bytes with 16 readable bytes from its start.
        let mut slow = 0u32;
        for (lane, &(start, end)) in chunk.iter().enumerate() {
            match short_key_state(buf, start as usize, end as usize) {
                Some([x, y, z]) => (a[lane], b[lane], c[lane]) = (x, y, z),
                None => slow |= 1 << lane,
            }
        }
        for lane in 0..LANES {
            final_mix(&mut a[lane], &mut b[lane], &mut c[lane]);
        }
        for (lane, &(start, end)) in chunk.iter().enumerate() {
            out.push(if slow & (1 << lane) != 0 {
                feature_hash(&buf[start as usize..end as usize])
            } else {
                ((c[lane] as u64) << 32) | b[lane] as u64
            });
        }
    }
    out.extend(
        chunks
            .remainder()
            .iter()
            .map(|&(s, e)| feature_hash_in(buf, s as usize, e as usize)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOUR_SCORE: &[u8] = b"Four score and seven years ago";

    #[test]
    fn golden_vectors_from_lookup3_self_test() {
        assert_eq!(hashlittle2(b"", 0, 0), (0xdeadbeef, 0xdeadbeef));
        assert_eq!(hashlittle2(FOUR_SCORE, 0, 0), (0x17770551, 0xce7226e6));
        assert_eq!(hashlittle2(FOUR_SCORE, 0, 1), (0xe3607cae, 0xbd371de4));
        assert_eq!(hashlittle2(FOUR_SCORE, 1, 0), (0xcd628161, 0x6cbea4b3));
    }

    #[test]
    fn feature_hash_golden_vector() {
        assert_eq!(feature_hash(b"the"), 0x0717627632fcc083);
    }

    /// lookup3.c's byte-at-a-time reading, the reference of the word-wise tails.
    fn reference_hashlittle2(key: &[u8], pc: u32, pb: u32) -> (u32, u32) {
        let init = 0xdead_beef_u32
            .wrapping_add(key.len() as u32)
            .wrapping_add(pc);
        let (mut a, mut b, mut c) = (init, init, init.wrapping_add(pb));
        let mut rest = key;
        while rest.len() > 12 {
            a = a.wrapping_add(le_word(&rest[0..4]));
            b = b.wrapping_add(le_word(&rest[4..8]));
            c = c.wrapping_add(le_word(&rest[8..12]));
            mix(&mut a, &mut b, &mut c);
            rest = &rest[12..];
        }
        if rest.is_empty() {
            return (c, b);
        }
        a = a.wrapping_add(le_word(&rest[..rest.len().min(4)]));
        if rest.len() > 4 {
            b = b.wrapping_add(le_word(&rest[4..rest.len().min(8)]));
        }
        if rest.len() > 8 {
            c = c.wrapping_add(le_word(&rest[8..]));
        }
        final_mix(&mut a, &mut b, &mut c);
        (c, b)
    }

    proptest::proptest! {
        #[test]
        fn fast_paths_match_the_byte_wise_reading(
            buf in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            start in 0usize..64,
            len in 0usize..40,
        ) {
            let start = start.min(buf.len());
            let end = (start + len).min(buf.len());
            let (c, b) = reference_hashlittle2(&buf[start..end], 0, 0);
            let expected = ((c as u64) << 32) | b as u64;
            proptest::prop_assert_eq!(hashlittle2(&buf[start..end], 0, 0), (c, b));
            proptest::prop_assert_eq!(feature_hash_in(&buf, start, end), expected);
        }
    }

    proptest::proptest! {
        #[test]
        fn lanes_match_one_key_at_a_time(
            buf in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            spans in proptest::collection::vec((0u32..220, 0u32..30), 0..70),
        ) {
            // Spans of every length from 0 to 29, some running past the 16-byte reads at
            // the end of `buf`, some beyond it clipped to it.
            let n = buf.len() as u32;
            let spans: Vec<(u32, u32)> = spans
                .iter()
                .map(|&(s, len)| (s.min(n), (s + len).min(n)))
                .collect();
            let expected: Vec<u64> = spans
                .iter()
                .map(|&(s, e)| feature_hash(&buf[s as usize..e as usize]))
                .collect();
            let mut got = vec![7];
            feature_hashes_in(&buf, &spans, &mut got);
            proptest::prop_assert_eq!(got[0], 7);
            proptest::prop_assert_eq!(&got[1..], &expected[..]);
            let mut portable = Vec::new();
            feature_hashes_lanes(&buf, &spans, &mut portable);
            proptest::prop_assert_eq!(&portable[..], &expected[..]);
        }
    }

    #[test]
    fn padded_reads_cover_every_short_length() {
        let buf: Vec<u8> = (1u8..=60).collect();
        for start in 0..20 {
            for end in start..start + 14 {
                assert_eq!(
                    feature_hash_in(&buf, start, end),
                    feature_hash(&buf[start..end])
                );
            }
        }
    }

    #[test]
    fn every_tail_length_is_hashed_differently() {
        // Each tail length (0..=12 bytes after the last full block) takes its own path.
        let data: Vec<u8> = (0u8..40).collect();
        let hashes: std::collections::HashSet<u64> =
            (0..=data.len()).map(|n| feature_hash(&data[..n])).collect();
        assert_eq!(hashes.len(), data.len() + 1);
    }
}
