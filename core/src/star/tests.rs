use super::*;
use crate::mix::splitmix64;

fn ranks(docs: &[(u64, u64)]) -> HashMap<u64, u64> {
    docs.iter().copied().collect()
}

fn near(a: u64, b: u64, hamming: u8, jaccard: Option<f32>) -> Link {
    Link {
        a,
        b,
        kind: LinkKind::Near,
        hamming,
        jaccard,
    }
}

fn link(a: u64, b: u64, kind: LinkKind) -> Link {
    Link {
        a,
        b,
        kind,
        hamming: 0,
        jaccard: None,
    }
}

/// `(doc, cluster, kept)` of each member.
fn placed(members: &[Member]) -> Vec<(u64, u64, u64)> {
    members.iter().map(|m| (m.doc, m.cluster, m.kept)).collect()
}

#[test]
fn rank_centers_chain_apart_and_keep_the_best_ranked() {
    // 1~2~3~4: 1 is a center and takes 2; 3 becomes a center and takes 4. Components would
    // make one cluster of 4.
    let r = ranks(&[(1, 0), (2, 0), (3, 0), (4, 0)]);
    let links = [
        near(1, 2, 1, None),
        near(2, 3, 1, None),
        near(3, 4, 1, None),
    ];
    let got = stars(&r, &links, Centers::Rank);
    assert_eq!(placed(&got), [(1, 1, 1), (2, 1, 1), (3, 3, 3), (4, 3, 3)]);
    assert_eq!(components_would_remove(&links), 3);
}

#[test]
fn coverage_centers_remove_what_rank_centers_keep() {
    // 5 is near 1, 2, 3 and 4, which are not near each other. By rank, 1 is the center and
    // takes 5; 2, 3 and 4 are left alone (one removal). By coverage, 5 takes all four.
    let r = ranks(&[(1, 0), (2, 0), (3, 0), (4, 0), (5, 9)]);
    let links: Vec<Link> = (1..=4).map(|d| near(d, 5, 2, None)).collect();
    assert_eq!(
        placed(&stars(&r, &links, Centers::Rank)),
        [(1, 1, 1), (5, 1, 1)]
    );
    let got = stars(&r, &links, Centers::Coverage);
    assert_eq!(
        placed(&got),
        [(1, 1, 5), (2, 1, 5), (3, 1, 5), (4, 1, 5), (5, 1, 5)]
    );
    assert!(got.iter().all(|m| m.hamming == (m.doc != 5).then_some(2)));
    assert_eq!(components_would_remove(&links), 4);
}

#[test]
fn ties_go_to_the_keep_rank_then_the_smaller_doc() {
    // A pair: both cover 2. The better rank is kept; with equal ranks, the smaller doc.
    let links = [near(3, 8, 0, None)];
    let kept = |r: &[(u64, u64)]| stars(&ranks(r), &links, Centers::Coverage)[0].kept;
    assert_eq!(kept(&[(3, 5), (8, 1)]), 8);
    assert_eq!(kept(&[(3, 1), (8, 1)]), 3);
}

#[test]
fn a_unit_joins_whole_and_every_member_knows_its_similarity() {
    // 2 and 6 are one text (exact); 6 and 7 have one fingerprint; the unit {2, 6, 7} is
    // represented in the near search by 2, which is near 5 (3 bits, Jaccard 0.9).
    let r = ranks(&[(2, 9), (5, 1), (6, 9), (7, 9)]);
    let links = [
        Link {
            jaccard: Some(1.0),
            ..link(2, 6, LinkKind::Exact)
        },
        Link {
            jaccard: Some(0.95),
            ..link(6, 7, LinkKind::SameFingerprint)
        },
        near(2, 5, 3, Some(0.9)),
    ];
    for centers in [Centers::Coverage, Centers::Rank] {
        let got = stars(&r, &links, centers);
        let want = [
            (2, Some(3), Some(0.9)),
            (5, None, None),
            // An exact copy of 2: what is known of 2 is known of it.
            (6, Some(3), Some(0.9)),
            // The same simhash as 2 and 6: the same distance; its Jaccard with 5 was never
            // measured.
            (7, Some(3), None),
        ];
        let seen: Vec<_> = got.iter().map(|m| (m.doc, m.hamming, m.jaccard)).collect();
        assert_eq!(seen, want, "{centers:?}");
        assert!(got.iter().all(|m| m.kept == 5 && m.cluster == 2));
    }
}

#[test]
fn a_url_pair_links_only_under_rank_centers() {
    // 1 and 2 are captures of one URL whose content changed; 2 is near 3.
    let r = ranks(&[(1, 0), (2, 1), (3, 2)]);
    let links = [link(1, 2, LinkKind::Url), near(2, 3, 1, None)];
    // By rank, the captures are one unit (as --cluster star always did).
    assert_eq!(
        placed(&stars(&r, &links, Centers::Rank)),
        [(1, 1, 1), (2, 1, 1), (3, 1, 1)]
    );
    // Verified: 1 is no duplicate of anything it was compared with, so it stays.
    assert_eq!(
        placed(&stars(&r, &links, Centers::Coverage)),
        [(2, 2, 2), (3, 2, 2)]
    );
}

/// The fewest documents whose closed neighbourhoods cover every document of a pair: every
/// subset, smallest first (the simple version of a minimum dominating set).
fn fewest_by_enumeration(near: &[(u64, u64)]) -> usize {
    let mut docs: Vec<u64> = near.iter().flat_map(|&(a, b)| [a, b]).collect();
    docs.sort_unstable();
    docs.dedup();
    let at = |d: u64| docs.binary_search(&d).unwrap();
    let mut closed: Vec<u32> = (0..docs.len()).map(|i| 1 << i).collect();
    for &(a, b) in near {
        closed[at(a)] |= 1 << at(b);
        closed[at(b)] |= 1 << at(a);
    }
    let all = (1u32 << docs.len()) - 1;
    (0u32..=all)
        .filter(|set| {
            (0..docs.len())
                .filter(|i| set >> i & 1 == 1)
                .fold(0, |covered, i| covered | closed[i])
                == all
        })
        .map(|set| set.count_ones() as usize)
        .min()
        .unwrap()
}

#[test]
fn coverage_centers_are_the_fewest_and_every_removal_is_a_pair() {
    let mut state = 17u64;
    for round in 0..300 {
        let n = 2 + splitmix64(&mut state) % 13;
        let r: HashMap<u64, u64> = (0..n).map(|d| (d, splitmix64(&mut state) % 4)).collect();
        let pairs: HashSet<(u64, u64)> = (0..1 + splitmix64(&mut state) % (2 * n))
            .map(|_| (splitmix64(&mut state) % n, splitmix64(&mut state) % n))
            .filter(|(a, b)| a != b)
            .map(|(a, b)| ordered(a, b))
            .collect();
        if pairs.is_empty() {
            continue;
        }
        let pairs: Vec<(u64, u64)> = pairs.into_iter().collect();
        let links: Vec<Link> = pairs.iter().map(|&(a, b)| near(a, b, 1, None)).collect();
        let got = stars(&r, &links, Centers::Coverage);
        for m in got.iter().filter(|m| m.doc != m.kept) {
            assert!(
                pairs.contains(&ordered(m.doc, m.kept)),
                "round {round}: {m:?}"
            );
        }
        // Documents of a pair that are kept: the centers (alone ones are in no cluster).
        let in_pairs: HashSet<u64> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
        let removed = got.iter().filter(|m| m.doc != m.kept).count();
        let centers = in_pairs.len() - removed;
        assert_eq!(
            centers,
            fewest_by_enumeration(&pairs),
            "round {round}: {pairs:?}"
        );
        assert!(removed as u64 <= components_would_remove(&links));
    }
}

#[test]
fn a_removed_document_goes_to_its_most_similar_kept_one() {
    // 1 and 4 must both be kept (each is the only duplicate of 0 and 5); 2 is near both,
    // closer to 4 by its Jaccard similarity; 3 likewise, closer to 1 by its Hamming distance.
    let r = ranks(&[(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (5, 0)]);
    let links = [
        near(0, 1, 1, Some(0.9)),
        near(4, 5, 1, Some(0.9)),
        near(1, 2, 1, Some(0.85)),
        near(2, 4, 1, Some(0.95)),
        near(1, 3, 1, None),
        near(3, 4, 2, None),
    ];
    let got = stars(&r, &links, Centers::Coverage);
    let kept_for: Vec<(u64, u64)> = got.iter().map(|m| (m.doc, m.kept)).collect();
    assert_eq!(kept_for, [(0, 1), (1, 1), (2, 4), (3, 1), (4, 4), (5, 4)]);
}

#[test]
fn every_member_is_a_neighbour_of_its_center_under_both_rules() {
    let mut state = 29u64;
    for _ in 0..100 {
        let n = 30u64;
        let r: HashMap<u64, u64> = (0..n).map(|d| (d, splitmix64(&mut state) % 5)).collect();
        let mut links: Vec<Link> = (0..40)
            .map(|_| (splitmix64(&mut state) % n, splitmix64(&mut state) % n))
            .filter(|(a, b)| a != b)
            .map(|(a, b)| near(a, b, 2, Some(0.8)))
            .collect();
        links.push(Link {
            jaccard: Some(1.0),
            ..link(0, 1, LinkKind::Exact)
        });
        let exact = |d: u64| if d == 1 { 0 } else { d };
        let linked = |a: u64, b: u64| {
            exact(a) == exact(b)
                || links.iter().any(|l| {
                    l.kind == LinkKind::Near
                        && ordered(exact(l.a), exact(l.b)) == ordered(exact(a), exact(b))
                })
        };
        for centers in [Centers::Coverage, Centers::Rank] {
            for m in stars(&r, &links, centers) {
                assert!(linked(m.doc, m.kept), "{centers:?}: {m:?}");
                let measured = (m.doc != m.kept).then_some(());
                assert_eq!(m.jaccard.map(|_| ()), measured, "{m:?}");
            }
        }
    }
}

#[test]
fn unlinked_pairs_are_those_of_components_that_need_more_than_one_center() {
    // A path 1~2~3~4 needs two centers: its unlinked pairs are offered (by their smallest
    // documents: 3 and 30 are one text). A triangle 5~6~7 needs one: nothing to gain.
    let r = ranks(&[
        (1, 0),
        (2, 0),
        (3, 0),
        (30, 0),
        (4, 0),
        (5, 0),
        (6, 0),
        (7, 0),
    ]);
    let links = [
        near(1, 2, 0, Some(0.9)),
        near(2, 3, 0, Some(0.9)),
        Link {
            jaccard: Some(1.0),
            ..link(3, 30, LinkKind::Exact)
        },
        near(30, 4, 0, Some(0.9)),
        near(5, 6, 0, Some(0.9)),
        near(6, 7, 0, Some(0.9)),
        near(5, 7, 0, Some(0.9)),
    ];
    assert_eq!(unlinked_pairs(&r, &links), [(1, 3), (1, 4), (2, 4)]);
    // With 2~4 verified too, 2 covers the whole path: one center, nothing left to offer.
    let mut more = links.to_vec();
    more.push(near(2, 4, 0, Some(0.85)));
    let got = stars(&r, &more, Centers::Coverage);
    assert!(
        got.iter()
            .all(|m| m.kept == if m.doc < 5 || m.doc == 30 { 2 } else { 5 }),
        "{got:?}"
    );
    assert!(unlinked_pairs(&r, &more).is_empty());
}

#[test]
fn a_whole_component_is_labelled_by_its_smallest_doc_and_keeps_the_best_ranked() {
    // Ranks tie between 7 and 9: the smaller doc is kept; the label is the smallest doc,
    // whatever its rank.
    let r = ranks(&[(9, 1), (3, 5), (7, 1), (12, 2)]);
    assert_eq!(
        placed(&whole_component(&r)),
        vec![(3, 3, 7), (7, 3, 7), (9, 3, 7), (12, 3, 7)]
    );
    assert!(whole_component(&r)
        .iter()
        .all(|m| m.hamming.is_none() && m.jaccard.is_none()));
}
