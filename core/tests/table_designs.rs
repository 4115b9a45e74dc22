//! Property tests of the table designs against brute force: every pair within `k` bits meets
//! in at least one table, and is reported from exactly one.

use neardup_core::search::{brute_force_pairs, find_pairs, BucketSearch, Item};
use neardup_core::{hamming, TableDesign};
use proptest::prelude::*;

fn designs() -> Vec<TableDesign> {
    vec![
        TableDesign::for_k(0).unwrap(),
        TableDesign::blocks(3, 1).unwrap(),
        TableDesign::manku16(),
        TableDesign::blocks(6, 3).unwrap(),
        TableDesign::blocks(5, 3).unwrap(),
        TableDesign::blocks(4, 3).unwrap(),
        TableDesign::for_k(6).unwrap(),
        TableDesign::for_k(8).unwrap(),
        TableDesign::blocks(9, 8).unwrap(),
    ]
}

/// Flips `distance` distinct bits chosen by `positions`.
fn neighbour(fp: u64, distance: u32, positions: &[u8]) -> u64 {
    let mut out = fp;
    let mut flipped = 0;
    for &p in positions {
        if flipped == distance {
            break;
        }
        let bit = 1u64 << (p % 64);
        if (out ^ fp) & bit == 0 {
            out ^= bit;
            flipped += 1;
        }
    }
    // Not enough distinct positions drawn: flip the lowest unflipped bits.
    let mut p = 0;
    while flipped < distance {
        if (out ^ fp) & (1 << p) == 0 {
            out ^= 1 << p;
            flipped += 1;
        }
        p += 1;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn planted_neighbours_meet_in_a_table_and_are_reported_once(
        fp in any::<u64>(),
        positions in prop::collection::vec(any::<u8>(), 16),
        which in 0usize..9,
        distance_seed in any::<u32>(),
    ) {
        let design = &designs()[which];
        let distance = distance_seed % (design.k() + 1);
        let other = neighbour(fp, distance, &positions);
        prop_assert_eq!(hamming(fp, other), distance);
        let shared: Vec<usize> = design.keys(fp).zip(design.keys(other))
            .filter(|((_, a), (_, b))| a == b)
            .map(|((t, _), _)| t)
            .collect();
        prop_assert!(!shared.is_empty(), "{} missed a pair at distance {}", design, distance);
        let first = design.first_shared_table(fp, other);
        prop_assert_eq!(first, Some(shared[0]));
        // Reported once: exactly one of the shared tables passes the first-table rule.
        let reporting = shared.iter().filter(|&&t| design.first_shared_table(fp, other) == Some(t)).count();
        prop_assert_eq!(reporting, 1);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn search_equals_brute_force(
        seeds in prop::collection::vec((any::<u64>(), 0u32..10, prop::collection::vec(any::<u8>(), 10)), 1..60),
        which in 0usize..9,
        leaf_size in prop::sample::select(vec![2usize, 4, 64]),
    ) {
        let design = &designs()[which];
        let mut items = Vec::new();
        for (fp, spread, positions) in &seeds {
            items.push(Item { fp: *fp, doc: items.len() as u64 });
            // Plant a small family around each seed: distances up to k + 1.
            for d in 0..(spread % 4) {
                let distance = (spread + d) % (design.k() + 2);
                items.push(Item { fp: neighbour(*fp, distance, &positions[d as usize..]), doc: items.len() as u64 });
            }
        }
        let search = BucketSearch { k: design.k(), leaf_size };
        let (pairs, _) = find_pairs(design, &items, &search);
        prop_assert_eq!(pairs, brute_force_pairs(&items, design.k()));
    }
}
