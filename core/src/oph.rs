//! One-permutation MinHash with optimal densification (the `minhash-oph` scheme).
//!
//! Classic MinHash ([`crate::minhash`]) applies `K` independent permutations to every feature:
//! `K` multiply-and-minimum steps per shingle, a quarter of a threshold-mode run even
//! vectorized. One-permutation hashing (Li, Owen and Zhang, NIPS 2012) hashes each feature
//! once and uses the hash twice: its top bits choose one of `K` bins, and each bin keeps the
//! smallest hash that falls into it. Two sets agree in a bin with probability `J` as long as
//! the bin is non-empty in both. Short documents leave bins empty; *optimal densification*
//! (Shrivastava, ICML 2017) fills each empty bin `i` from the bin chosen by a hash of
//! `(i, attempt)`, trying `attempt = 1, 2, ...` until the chosen bin is non-empty. Because
//! the choices depend only on `i`, the attempt and which bins are empty, two sets copy from
//! the same bins wherever their emptiness agrees, and the fraction of equal positions remains
//! an unbiased estimate of `J` with nearly the variance of `K` independent permutations.
//!
//! Exactly, with `K` bins and a 64-bit `seed` (docs/fingerprints.md):
//!
//! 1. each distinct feature hash `x` becomes `h = mix64(x ^ seed)` (the splitmix64 finalizer,
//!    a bijection, so equal values mean the same feature);
//! 2. its bin is `floor(h * K / 2^64)` (the top bits), and the bin keeps the minimum `h`;
//! 3. an empty bin `i` takes the value of bin `floor(mix2(seed ^ i, t) * K / 2^64)` for the
//!    first `t = 1, 2, ...` that names a non-empty bin (the value *before* densification);
//! 4. a set with no features gets `u64::MAX` in every bin.
//!
//! A bin's value also names its bin (its top bits), so a copied value never equals the
//! value another document found in the bin itself: agreement means the same feature.
//!
//! The signature has the same shape as a `minhash` signature (`K` 64-bit values), so
//! banding, verification and the index treat both alike; the values differ, so the two
//! schemes are never compared with each other (table metadata records which one made a
//! table).

use crate::mix::{mix2, mix64};

/// Computes one-permutation signatures of `bins` values.
#[derive(Clone, Debug)]
pub struct OnePermutation {
    bins: usize,
    seed: u64,
}

/// The bin of a 64-bit value among `bins`: its top bits, by a multiply-high.
#[inline(always)]
fn bin_of(h: u64, bins: usize) -> usize {
    ((h as u128 * bins as u128) >> 64) as usize
}

/// Bins whose "filled" bits are kept on the stack (the largest `--permutations` accepted).
const MAX_STACK_BINS: usize = 4096;

impl OnePermutation {
    pub fn new(bins: usize, seed: u64) -> Self {
        assert!(bins > 0, "a signature needs at least one bin");
        OnePermutation { bins, seed }
    }

    pub fn bins(&self) -> usize {
        self.bins
    }

    /// Writes the signature of a set of feature hashes (repeats do not matter) into `out`,
    /// which must have `bins()` slots.
    pub fn signature_into(&self, features: &[u64], out: &mut [u64]) {
        assert_eq!(
            out.len(),
            self.bins,
            "signature buffer has the wrong length"
        );
        out.fill(u64::MAX);
        if features.is_empty() {
            return;
        }
        // Which bins the pass filled: a value cannot say it (one feature hashes to u64::MAX).
        // On the stack up to MAX_STACK_BINS bins, the largest `--permutations` accepted.
        let words = self.bins.div_ceil(64);
        let mut stack = [0u64; MAX_STACK_BINS / 64];
        let mut heap = Vec::new();
        let filled: &mut [u64] = if words <= stack.len() {
            &mut stack[..words]
        } else {
            heap.resize(words, 0);
            &mut heap
        };
        for &x in features {
            let h = mix64(x ^ self.seed);
            let bin = bin_of(h, self.bins);
            out[bin] = out[bin].min(h);
            filled[bin / 64] |= 1 << (bin % 64);
        }
        let is_filled = |bin: usize| filled[bin / 64] >> (bin % 64) & 1 == 1;
        // Densification writes only empty bins and reads only filled ones, so it sees the
        // values before densification without a copy.
        for i in 0..self.bins {
            if is_filled(i) {
                continue;
            }
            let mut attempt = 1u64;
            loop {
                let j = bin_of(mix2(self.seed ^ i as u64, attempt), self.bins);
                if is_filled(j) {
                    out[i] = out[j];
                    break;
                }
                attempt += 1;
            }
        }
    }

    pub fn signature(&self, features: &[u64]) -> Vec<u64> {
        let mut out = vec![0; self.bins];
        self.signature_into(features, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::minhash::tests::sets;
    use crate::minhash::{jaccard_estimate, DEFAULT_SEED};

    /// The definition written plainly: every bin's members listed, minima taken, empty bins
    /// filled by trying bins in the documented order. The oracle of the single pass above.
    fn reference(bins: usize, seed: u64, features: &[u64]) -> Vec<u64> {
        let mut members: Vec<Vec<u64>> = vec![Vec::new(); bins];
        for &x in features {
            let h = mix64(x ^ seed);
            let bin = ((h as u128 * bins as u128) >> 64) as usize;
            members[bin].push(h);
        }
        let minima: Vec<Option<u64>> = members.iter().map(|m| m.iter().copied().min()).collect();
        if minima.iter().all(Option::is_none) {
            return vec![u64::MAX; bins];
        }
        (0..bins)
            .map(|i| match minima[i] {
                Some(v) => v,
                None => (1u64..)
                    .find_map(|t| {
                        let j = ((mix2(seed ^ i as u64, t) as u128 * bins as u128) >> 64) as usize;
                        minima[j]
                    })
                    .unwrap(),
            })
            .collect()
    }

    #[test]
    fn signatures_equal_the_definition() {
        let mut state = 11u64;
        for bins in [1, 2, 7, 64, 128, 130] {
            let hasher = OnePermutation::new(bins, DEFAULT_SEED);
            for n in [0, 1, 2, 5, 50, 1000] {
                let features: Vec<u64> =
                    (0..n).map(|_| crate::mix::splitmix64(&mut state)).collect();
                assert_eq!(
                    hasher.signature(&features),
                    reference(bins, DEFAULT_SEED, &features),
                    "bins {bins}, {n} features"
                );
            }
        }
    }

    #[test]
    fn the_feature_hashing_to_the_maximum_counts_as_present() {
        // The one x with mix64(x ^ seed) == u64::MAX lands in the last bin with that value:
        // the bin is not empty, so no other bin may be densified from outside it.
        let seed = 5;
        // mix64 is a bijection; find its preimage of u64::MAX by inverting the steps.
        fn unmix(mut z: u64) -> u64 {
            fn unshift(z: u64, s: u32) -> u64 {
                let mut x = z;
                for _ in 0..64 / s + 1 {
                    x = z ^ (x >> s);
                }
                x
            }
            z = unshift(z, 31);
            z = z.wrapping_mul(0x3196_42b2_d24d_8ec3); // inverse of 0x94d0_49bb_1331_11eb
            z = unshift(z, 27);
            z = z.wrapping_mul(0x96de_1b17_3f11_9089); // inverse of 0xbf58_476d_1ce4_e5b9
            unshift(z, 30)
        }
        let x = unmix(u64::MAX) ^ seed;
        assert_eq!(mix64(x ^ seed), u64::MAX);
        let hasher = OnePermutation::new(4, seed);
        assert_eq!(hasher.signature(&[x]), vec![u64::MAX; 4]);
        for y in 0..64u64 {
            assert_eq!(
                hasher.signature(&[x, y]),
                reference(4, seed, &[x, y]),
                "y = {y}"
            );
        }
    }

    #[test]
    fn estimate_is_unbiased_within_statistical_bounds() {
        // As for classic MinHash: over many independent set pairs, the mean estimate of a
        // 128-bin signature is within 4 standard errors of J, for large sets (few empty
        // bins) and small ones (most bins densified).
        let hasher = OnePermutation::new(128, DEFAULT_SEED);
        for (shared, only) in [
            (800u64, 100u64),
            (500, 250),
            (200, 400),
            (1000, 0),
            (0, 500),
            (16, 4),
            (10, 10),
            (3, 6),
        ] {
            let j = shared as f64 / (shared + 2 * only) as f64;
            let trials = 300;
            let mean: f64 = (0..trials)
                .map(|t| {
                    let (a, b) = sets(shared, only, t);
                    jaccard_estimate(&hasher.signature(&a), &hasher.signature(&b))
                })
                .sum::<f64>()
                / trials as f64;
            // Densified bins are correlated, so the per-trial variance can exceed the
            // binomial one; bound it by the worst case of one effective sample per set
            // element, which is still far tighter than any bias would pass.
            let effective = 128.0f64.min((shared + 2 * only).max(1) as f64);
            let std_error = (j * (1.0 - j) / (effective * trials as f64))
                .sqrt()
                .max(1e-9);
            assert!(
                (mean - j).abs() <= 4.0 * std_error + 1e-9,
                "shared {shared}, only {only}: J = {j}, mean estimate {mean}, allowed {}",
                4.0 * std_error
            );
        }
    }

    #[test]
    fn identical_sets_have_identical_signatures_and_order_does_not_matter() {
        let hasher = OnePermutation::new(64, 1);
        let (a, _) = sets(30, 0, 3);
        let mut shuffled = a.clone();
        shuffled.reverse();
        shuffled.extend_from_slice(&a[..5]);
        assert_eq!(hasher.signature(&a), hasher.signature(&shuffled));
        assert_eq!(hasher.signature(&[]), vec![u64::MAX; 64]);
    }
}
