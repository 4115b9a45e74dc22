//! MinHash signatures (Broder 1997) and LSH banding.
//!
//! For a random permutation `π` of the hash space, `P[min π(A) = min π(B)] = J(A, B)`, the
//! Jaccard similarity of the sets. A signature keeps the minimum under `P` independent
//! permutations; the fraction of equal positions is an unbiased estimate of `J`.
//!
//! Permutation `i` is `π_i(x) = g(a_i * x + b_i)` over 64-bit words, with `a_i` odd (so the
//! affine map is a bijection) and `g(y) = y ^ (y >> 32)` (also a bijection) to spread the
//! high bits into the low ones. The inputs are xxh3 feature hashes, which already look random;
//! `a_i`, `b_i` come from splitmix64 seeded with [`DEFAULT_SEED`].
//!
//! LSH: the signature is cut into `bands` bands of `rows` rows; two documents are candidates
//! when some band is identical, which happens with probability `1 - (1 - J^rows)^bands`.

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::mix::splitmix64;

/// The default number of permutations.
pub const DEFAULT_PERMUTATIONS: usize = 128;
/// The seed of the permutation parameters.
pub const DEFAULT_SEED: u64 = 0x6e65_6172_6475_7031; // "neardup1"

/// Computes MinHash signatures with a fixed family of permutations.
#[derive(Clone, Debug)]
pub struct MinHasher {
    a: Vec<u64>,
    b: Vec<u64>,
}

impl MinHasher {
    pub fn new(permutations: usize, seed: u64) -> Self {
        let mut state = seed;
        let (mut a, mut b) = (
            Vec::with_capacity(permutations),
            Vec::with_capacity(permutations),
        );
        for _ in 0..permutations {
            a.push(splitmix64(&mut state) | 1);
            b.push(splitmix64(&mut state));
        }
        MinHasher { a, b }
    }

    pub fn permutations(&self) -> usize {
        self.a.len()
    }

    /// Writes the signature of a set of feature hashes (repeats do not matter) into `out`,
    /// which must have `permutations()` slots. An empty set gives all `u64::MAX`.
    pub fn signature_into(&self, features: &[u64], out: &mut [u64]) {
        assert_eq!(
            out.len(),
            self.a.len(),
            "signature buffer has the wrong length"
        );
        out.fill(u64::MAX);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
        {
            // SAFETY: the processor has just been found to support AVX-512 F and DQ.
            unsafe { signature_blocks_avx512(&self.a, &self.b, features, out) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor has just been found to support AVX2.
            unsafe { signature_blocks_avx2(&self.a, &self.b, features, out) };
            return;
        }
        signature_blocks(&self.a, &self.b, features, out);
    }

    pub fn signature(&self, features: &[u64]) -> Vec<u64> {
        let mut out = vec![0; self.a.len()];
        self.signature_into(features, &mut out);
        out
    }
}

/// Permutations handled together: their minima stay in registers while the features
/// stream past.
const BLOCK: usize = 32;

/// `out[i] = min(out[i], min over x of g(a[i] * x + b[i]))`, [`BLOCK`] permutations at a
/// time.
#[inline(always)]
fn signature_blocks(a: &[u64], b: &[u64], features: &[u64], out: &mut [u64]) {
    let done = out.len() - out.len() % BLOCK;
    for (k, block) in out[..done].chunks_exact_mut(BLOCK).enumerate() {
        let a: &[u64; BLOCK] = a[k * BLOCK..(k + 1) * BLOCK].try_into().unwrap();
        let b: &[u64; BLOCK] = b[k * BLOCK..(k + 1) * BLOCK].try_into().unwrap();
        let mut min: [u64; BLOCK] = block.try_into().unwrap();
        for &x in features {
            for j in 0..BLOCK {
                let y = a[j].wrapping_mul(x).wrapping_add(b[j]);
                min[j] = min[j].min(y ^ (y >> 32));
            }
        }
        block.copy_from_slice(&min);
    }
    for &x in features {
        for ((slot, &a), &b) in out[done..].iter_mut().zip(&a[done..]).zip(&b[done..]) {
            let y = a.wrapping_mul(x).wrapping_add(b);
            *slot = (*slot).min(y ^ (y >> 32));
        }
    }
}

/// [`signature_blocks`] compiled for AVX-512, whose 64-bit multiply and unsigned minimum
/// work on 8 permutations per instruction.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
fn signature_blocks_avx512(a: &[u64], b: &[u64], features: &[u64], out: &mut [u64]) {
    signature_blocks(a, b, features, out)
}

/// [`signature_blocks`] compiled for AVX2, which has no 64-bit multiply or unsigned 64-bit
/// minimum: the compiler builds them from 32-bit multiplies and signed compares, four
/// permutations per instruction, which still beats one scalar multiply per permutation.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn signature_blocks_avx2(a: &[u64], b: &[u64], features: &[u64], out: &mut [u64]) {
    signature_blocks(a, b, features, out)
}

/// The fraction of positions where two signatures agree: the Jaccard estimate.
pub fn jaccard_estimate(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() || a.len() != b.len() {
        return 0.0;
    }
    let equal = a.iter().zip(b).filter(|(x, y)| x == y).count();
    equal as f64 / a.len() as f64
}

/// An LSH banding of a signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Banding {
    pub bands: usize,
    pub rows: usize,
}

impl Banding {
    /// The key of each band: xxh3 of the band's rows (little-endian), seeded with the band
    /// index, so equal rows in different bands give different keys.
    pub fn band_keys<'a>(&self, signature: &'a [u64]) -> impl Iterator<Item = u64> + 'a {
        let rows = self.rows;
        signature
            .chunks_exact(rows)
            .take(self.bands)
            .enumerate()
            .map(move |(band, chunk)| {
                let mut bytes = [0u8; 8 * 64];
                let mut buf = Vec::new();
                let slice: &[u8] = if rows <= 64 {
                    for (i, v) in chunk.iter().enumerate() {
                        bytes[8 * i..8 * i + 8].copy_from_slice(&v.to_le_bytes());
                    }
                    &bytes[..8 * rows]
                } else {
                    buf.extend(chunk.iter().flat_map(|v| v.to_le_bytes()));
                    &buf
                };
                xxh3_64_with_seed(slice, band as u64)
            })
    }

    /// The probability that two documents of Jaccard similarity `s` share a band.
    pub fn candidate_probability(&self, s: f64) -> f64 {
        1.0 - (1.0 - s.powi(self.rows as i32)).powi(self.bands as i32)
    }

    /// The (bands, rows) with `bands * rows <= permutations` that minimize the false-positive
    /// area below `threshold` plus the false-negative area above it (equal weights), the rule
    /// datasketch's `MinHashLSH` uses.
    pub fn optimal(threshold: f64, permutations: usize) -> Banding {
        Self::optimal_weighted(threshold, permutations, 0.5, 0.5)
    }

    pub fn optimal_weighted(
        threshold: f64,
        permutations: usize,
        fp_weight: f64,
        fn_weight: f64,
    ) -> Banding {
        let mut best = Banding {
            bands: 1,
            rows: permutations.max(1),
        };
        let mut best_error = f64::INFINITY;
        for bands in 1..=permutations {
            for rows in 1..=permutations / bands {
                let banding = Banding { bands, rows };
                let fp = integrate(|s| banding.candidate_probability(s), 0.0, threshold);
                let fn_ = integrate(|s| 1.0 - banding.candidate_probability(s), threshold, 1.0);
                let error = fp_weight * fp + fn_weight * fn_;
                if error < best_error {
                    best_error = error;
                    best = banding;
                }
            }
        }
        best
    }
}

/// Midpoint-rule integral with a fixed step (smooth integrands on [0, 1]).
fn integrate(f: impl Fn(f64) -> f64, a: f64, b: f64) -> f64 {
    const STEPS: usize = 200;
    let h = (b - a) / STEPS as f64;
    (0..STEPS).map(|i| f(a + (i as f64 + 0.5) * h)).sum::<f64>() * h
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::mix::mix64;

    /// Two sets of known Jaccard similarity: `shared` common elements plus `only` each.
    pub(crate) fn sets(shared: u64, only: u64, salt: u64) -> (Vec<u64>, Vec<u64>) {
        let common: Vec<u64> = (0..shared).map(|i| mix64(i ^ (salt << 40))).collect();
        let mut a = common.clone();
        let mut b = common;
        a.extend((0..only).map(|i| mix64((1 << 32) + i + (salt << 40))));
        b.extend((0..only).map(|i| mix64((2 << 32) + i + (salt << 40))));
        (a, b)
    }

    #[test]
    fn estimate_is_unbiased_within_statistical_bounds() {
        // J = shared / (shared + 2 * only). Averaged over many independent set pairs the
        // estimate of a 128-permutation signature must be within 4 standard errors of J.
        let hasher = MinHasher::new(DEFAULT_PERMUTATIONS, DEFAULT_SEED);
        for (shared, only) in [(80u64, 10u64), (50, 25), (20, 40), (100, 0), (0, 50)] {
            let j = shared as f64 / (shared + 2 * only) as f64;
            let trials = 200;
            let mean: f64 = (0..trials)
                .map(|t| {
                    let (a, b) = sets(shared, only, t);
                    jaccard_estimate(&hasher.signature(&a), &hasher.signature(&b))
                })
                .sum::<f64>()
                / trials as f64;
            let std_error = (j * (1.0 - j) / (128.0 * trials as f64)).sqrt().max(1e-9);
            assert!(
                (mean - j).abs() <= 4.0 * std_error + 1e-9,
                "J = {j}: mean estimate {mean}, allowed {}",
                4.0 * std_error
            );
        }
    }

    /// The definition, one permutation at a time: the oracle of the blocked and vectorized
    /// loops.
    fn reference_signature(hasher: &MinHasher, features: &[u64]) -> Vec<u64> {
        (0..hasher.permutations())
            .map(|i| {
                features
                    .iter()
                    .map(|&x| {
                        let y = hasher.a[i].wrapping_mul(x).wrapping_add(hasher.b[i]);
                        y ^ (y >> 32)
                    })
                    .min()
                    .unwrap_or(u64::MAX)
            })
            .collect()
    }

    #[test]
    fn blocked_signatures_equal_the_definition() {
        let mut state = 3u64;
        for permutations in [1, 31, 32, 33, 64, 128, 130] {
            let hasher = MinHasher::new(permutations, DEFAULT_SEED);
            for n in [0, 1, 2, 7, 100] {
                let features: Vec<u64> =
                    (0..n).map(|_| crate::mix::splitmix64(&mut state)).collect();
                let expected = reference_signature(&hasher, &features);
                assert_eq!(hasher.signature(&features), expected);
                let mut portable = vec![u64::MAX; permutations];
                signature_blocks(&hasher.a, &hasher.b, &features, &mut portable);
                assert_eq!(portable, expected);
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2") {
                    let mut avx2 = vec![u64::MAX; permutations];
                    // SAFETY: AVX2 was just detected.
                    unsafe { signature_blocks_avx2(&hasher.a, &hasher.b, &features, &mut avx2) };
                    assert_eq!(avx2, expected, "AVX2 path");
                }
            }
        }
    }

    #[test]
    fn identical_sets_have_identical_signatures() {
        let hasher = MinHasher::new(64, 1);
        let (a, _) = sets(30, 0, 3);
        let mut shuffled = a.clone();
        shuffled.reverse();
        shuffled.extend_from_slice(&a[..5]);
        assert_eq!(hasher.signature(&a), hasher.signature(&shuffled));
    }

    #[test]
    fn band_keys_differ_by_band_and_content() {
        let banding = Banding { bands: 4, rows: 2 };
        let sig = vec![1, 2, 1, 2, 1, 2, 9, 9];
        let keys: Vec<u64> = banding.band_keys(&sig).collect();
        assert_eq!(keys.len(), 4);
        assert_ne!(
            keys[0], keys[1],
            "equal rows in different bands must not collide"
        );
        let other = vec![1, 2, 0, 0, 0, 0, 0, 0];
        let other_keys: Vec<u64> = banding.band_keys(&other).collect();
        assert_eq!(keys[0], other_keys[0]);
        assert_ne!(keys[1], other_keys[1]);
    }

    #[test]
    fn optimal_banding_puts_the_s_curve_at_the_threshold() {
        for threshold in [0.5, 0.8, 0.9] {
            let banding = Banding::optimal(threshold, 128);
            assert!(banding.bands * banding.rows <= 128);
            // The curve's steepest point (1/b)^(1/r) sits near the threshold.
            let knee = (1.0 / banding.bands as f64).powf(1.0 / banding.rows as f64);
            assert!(
                (knee - threshold).abs() < 0.12,
                "t={threshold}: {banding:?} knee {knee}"
            );
            let (above, below) = ((threshold + 0.1f64).min(1.0), threshold - 0.2);
            assert!(
                banding.candidate_probability(above) > 0.75,
                "t={threshold}: {banding:?}"
            );
            assert!(
                banding.candidate_probability(below) < 0.25,
                "t={threshold}: {banding:?}"
            );
        }
    }
}
