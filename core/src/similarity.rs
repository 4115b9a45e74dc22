//! Exact set similarities of feature sets, for comparing two documents and for verifying
//! candidate pairs.
//!
//! The sets are given as sorted, deduplicated slices of feature hashes, so intersection is
//! a linear merge.

/// Documents whose Jaccard similarity reaches this are near-duplicates: the default
/// threshold of MinHash mode and verification, of `neardup compare`'s verdict, and of the
/// positives of `neardup eval`: the shared corpora's planted near-duplicates are the pairs
/// with word 3-gram Jaccard at least 0.8 (docs/quality.md).
pub const DEFAULT_JACCARD: f64 = 0.8;

/// The default `n` of the word shingles an exact Jaccard similarity is measured over
/// (`neardup compare --shingle-jaccard`): word 3-grams, as for [`DEFAULT_JACCARD`].
pub const DEFAULT_JACCARD_SHINGLE: usize = 3;

/// |A ∩ B| of two sorted, deduplicated slices.
pub fn intersection_size(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut common) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    common
}

/// Jaccard similarity |A ∩ B| / |A ∪ B|; two empty sets have similarity 0 (empty documents
/// are never duplicates).
pub fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    let common = intersection_size(a, b);
    let union = a.len() + b.len() - common;
    if union == 0 {
        0.0
    } else {
        common as f64 / union as f64
    }
}

/// Containment of A in B: |A ∩ B| / |A| (how much of A appears in B); 0 for an empty A.
pub fn containment(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() {
        0.0
    } else {
        intersection_size(a, b) as f64 / a.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn matches_hash_set_arithmetic() {
        let mut state = 99u64;
        for _ in 0..200 {
            let mut draw = |n: u64| -> Vec<u64> {
                let mut v: Vec<u64> = (0..n)
                    .map(|_| crate::mix::splitmix64(&mut state) % 40)
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            let (a, b) = (draw(20), draw(25));
            let (sa, sb): (HashSet<_>, HashSet<_>) = (a.iter().collect(), b.iter().collect());
            let inter = sa.intersection(&sb).count();
            let union = sa.union(&sb).count();
            assert_eq!(intersection_size(&a, &b), inter);
            assert!((jaccard(&a, &b) - inter as f64 / union as f64).abs() < 1e-12);
            assert!((containment(&a, &b) - inter as f64 / a.len() as f64).abs() < 1e-12);
        }
    }

    #[test]
    fn empty_sets() {
        assert_eq!(jaccard(&[], &[]), 0.0);
        assert_eq!(containment(&[], &[1]), 0.0);
        assert_eq!(jaccard(&[1, 2], &[1, 2]), 1.0);
    }
}
