//! Measuring a run against ground truth: pair-level precision, recall and F1, and the
//! adjusted Rand index of two clusterings.
//!
//! Pairs are unordered pairs of item numbers, stored as `(min, max)`.

use std::collections::{HashMap, HashSet};

/// An unordered pair, smaller item first.
pub fn pair(a: u64, b: u64) -> (u64, u64) {
    (a.min(b), a.max(b))
}

/// Precision, recall and F1 of predicted pairs against true pairs.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct PairScores {
    pub predicted: u64,
    pub truth: u64,
    pub true_positives: u64,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

pub fn pair_scores(predicted: &HashSet<(u64, u64)>, truth: &HashSet<(u64, u64)>) -> PairScores {
    let tp = predicted.iter().filter(|p| truth.contains(p)).count() as u64;
    let precision = if predicted.is_empty() {
        1.0
    } else {
        tp as f64 / predicted.len() as f64
    };
    let recall = if truth.is_empty() {
        1.0
    } else {
        tp as f64 / truth.len() as f64
    };
    let f1 = if precision + recall == 0.0 {
        0.0
    } else {
        2.0 * precision * recall / (precision + recall)
    };
    PairScores {
        predicted: predicted.len() as u64,
        truth: truth.len() as u64,
        true_positives: tp,
        precision,
        recall,
        f1,
    }
}

/// Every pair inside each group of items with the same label.
pub fn pairs_within_groups(labels: &HashMap<u64, u64>) -> HashSet<(u64, u64)> {
    let mut groups: HashMap<u64, Vec<u64>> = HashMap::new();
    for (&item, &label) in labels {
        groups.entry(label).or_default().push(item);
    }
    let mut pairs = HashSet::new();
    for members in groups.values() {
        for (i, &a) in members.iter().enumerate() {
            for &b in &members[i + 1..] {
                pairs.insert(pair(a, b));
            }
        }
    }
    pairs
}

/// A cluster label `(0, cluster)`, or `(1, item)` for an item in no cluster.
type Label = (u8, u64);

fn choose2(n: u64) -> f64 {
    (n as f64) * (n as f64 - 1.0) / 2.0
}

/// The adjusted Rand index of two clusterings of the same `n` items. Items missing from a
/// map are singletons in that clustering. 1 is identical, about 0 is chance.
pub fn adjusted_rand_index(n: u64, a: &HashMap<u64, u64>, b: &HashMap<u64, u64>) -> f64 {
    // A singleton is labelled by itself, apart from every cluster label.
    let label = |m: &HashMap<u64, u64>, item: u64| -> Label {
        m.get(&item).map_or((1u8, item), |&l| (0u8, l))
    };
    let items: HashSet<u64> = a.keys().chain(b.keys()).copied().collect();
    let mut joint: HashMap<(Label, Label), u64> = HashMap::new();
    let mut sizes_a: HashMap<Label, u64> = HashMap::new();
    let mut sizes_b: HashMap<Label, u64> = HashMap::new();
    for &item in &items {
        let (la, lb) = (label(a, item), label(b, item));
        *joint.entry((la, lb)).or_default() += 1;
        *sizes_a.entry(la).or_default() += 1;
        *sizes_b.entry(lb).or_default() += 1;
    }
    // Items in neither map are singletons in both: they add nothing to any sum but n.
    let index: f64 = joint.values().map(|&c| choose2(c)).sum();
    let sum_a: f64 = sizes_a.values().map(|&c| choose2(c)).sum();
    let sum_b: f64 = sizes_b.values().map(|&c| choose2(c)).sum();
    let total = choose2(n);
    let expected = sum_a * sum_b / total;
    let max = (sum_a + sum_b) / 2.0;
    if max == expected {
        1.0
    } else {
        (index - expected) / (max - expected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_scores_count_overlaps() {
        let predicted: HashSet<_> = [(1, 2), (2, 3), (4, 5)].into();
        let truth: HashSet<_> = [(1, 2), (2, 3), (6, 7), (8, 9)].into();
        let s = pair_scores(&predicted, &truth);
        assert_eq!(s.true_positives, 2);
        assert!((s.precision - 2.0 / 3.0).abs() < 1e-12);
        assert!((s.recall - 0.5).abs() < 1e-12);
        assert!((s.f1 - 2.0 * (2.0 / 3.0) * 0.5 / (2.0 / 3.0 + 0.5)).abs() < 1e-12);
    }

    /// ARI from the definition over all pairs of items (the oracle).
    fn brute_ari(n: u64, a: &HashMap<u64, u64>, b: &HashMap<u64, u64>) -> f64 {
        let la = |i: u64| a.get(&i).map_or((1, i), |&l| (0, l));
        let lb = |i: u64| b.get(&i).map_or((1, i), |&l| (0, l));
        let (mut both, mut only_a, mut only_b) = (0f64, 0f64, 0f64);
        for i in 0..n {
            for j in i + 1..n {
                let (sa, sb) = (la(i) == la(j), lb(i) == lb(j));
                both += f64::from(u8::from(sa && sb));
                only_a += f64::from(u8::from(sa));
                only_b += f64::from(u8::from(sb));
            }
        }
        let total = choose2(n);
        let expected = only_a * only_b / total;
        (both - expected) / ((only_a + only_b) / 2.0 - expected)
    }

    #[test]
    fn ari_matches_the_pair_counting_definition() {
        let mut state = 9u64;
        for _ in 0..30 {
            let n = 40;
            let mut a = HashMap::new();
            let mut b = HashMap::new();
            for i in 0..n {
                let r = crate::mix::splitmix64(&mut state);
                if !r.is_multiple_of(3) {
                    a.insert(i, r % 7);
                }
                if !r.is_multiple_of(5) {
                    b.insert(i, (r >> 8) % 6);
                }
            }
            assert!((adjusted_rand_index(n, &a, &b) - brute_ari(n, &a, &b)).abs() < 1e-9);
        }
        let same: HashMap<u64, u64> = [(0, 1), (1, 1), (2, 2), (3, 2)].into();
        assert!((adjusted_rand_index(6, &same, &same) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn pairs_within_groups_lists_all_pairs() {
        let labels: HashMap<u64, u64> = [(1, 0), (2, 0), (3, 0), (4, 1)].into();
        let pairs = pairs_within_groups(&labels);
        assert_eq!(pairs, [(1, 2), (1, 3), (2, 3)].into());
    }
}
