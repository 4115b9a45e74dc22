//! Star clustering: a guard against chaining.
//!
//! Connected components join A and C when A~B and B~C, even if A and C have little in
//! common; long chains build giant clusters. In a star clustering, a document joins a
//! cluster only if it is a duplicate of the cluster's *center*, the document that is kept.
//!
//! Greedy and deterministic: take documents best first (smallest `(rank, doc)`, the keep
//! order); a document not yet placed becomes a center, and every unplaced neighbour joins it.
//! Exact duplicates are identical texts, so they are placed together as one unit (their
//! best member stands for them).

use fxhash::FxHashMap as HashMap;

use crate::unionfind::UnionFind;

/// Clusters of at least two documents as `(doc, label)`, the label being the smallest doc in
/// the cluster, sorted by doc. `ranks` must hold every document that appears in an edge.
pub fn star_clusters(
    ranks: &HashMap<u64, u64>,
    exact: &[(u64, u64)],
    near: &[(u64, u64)],
) -> Vec<(u64, u64)> {
    // Exact groups first: a unit is represented by its best member.
    let mut groups = UnionFind::new();
    for &doc in ranks.keys() {
        groups.union(doc, doc);
    }
    for &(a, b) in exact {
        groups.union(a, b);
    }
    let key = |doc: u64| (ranks.get(&doc).copied().unwrap_or(u64::MAX), doc);
    let mut best: HashMap<u64, (u64, u64)> = HashMap::default();
    let mut members: HashMap<u64, Vec<u64>> = HashMap::default();
    for &doc in ranks.keys() {
        let g = groups.find(doc);
        best.entry(g)
            .and_modify(|b| *b = (*b).min(key(doc)))
            .or_insert(key(doc));
        members.entry(g).or_default().push(doc);
    }
    let mut neighbours: HashMap<u64, Vec<u64>> = HashMap::default();
    for &(a, b) in near {
        let (ga, gb) = (groups.find(a), groups.find(b));
        if ga != gb {
            neighbours.entry(ga).or_default().push(gb);
            neighbours.entry(gb).or_default().push(ga);
        }
    }
    let mut order: Vec<u64> = best.keys().copied().collect();
    order.sort_by_key(|g| best[g]);
    let mut center_of: HashMap<u64, u64> = HashMap::default();
    for &g in &order {
        if center_of.contains_key(&g) {
            continue;
        }
        center_of.insert(g, g);
        for &n in neighbours.get(&g).map_or(&[][..], |v| &v[..]) {
            center_of.entry(n).or_insert(g);
        }
    }
    // Stars: every group of a center, with its documents.
    let mut stars: HashMap<u64, Vec<u64>> = HashMap::default();
    for (&g, &center) in &center_of {
        stars.entry(center).or_default().extend(&members[&g]);
    }
    let mut out: Vec<(u64, u64)> = stars
        .into_values()
        .filter(|docs| docs.len() > 1)
        .flat_map(|docs| {
            let label = *docs.iter().min().expect("non-empty");
            docs.into_iter().map(move |d| (d, label))
        })
        .collect();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranks(docs: &[(u64, u64)]) -> HashMap<u64, u64> {
        docs.iter().copied().collect()
    }

    #[test]
    fn chains_do_not_join() {
        // 1~2~3~4 by near edges, ranks by doc: 1 is a center, takes 2; 3 becomes a center,
        // takes 4. Components would make one cluster of 4.
        let r = ranks(&[(1, 0), (2, 0), (3, 0), (4, 0)]);
        let stars = star_clusters(&r, &[], &[(1, 2), (2, 3), (3, 4)]);
        assert_eq!(stars, vec![(1, 1), (2, 1), (3, 3), (4, 3)]);
    }

    #[test]
    fn the_best_ranked_document_is_the_center_and_exact_groups_stay_together() {
        // 5 is best; 6 is an exact copy of 2; 2 is near 5; 7 is near 6 only.
        let r = ranks(&[(2, 9), (5, 1), (6, 9), (7, 9)]);
        let stars = star_clusters(&r, &[(2, 6)], &[(2, 5), (6, 7)]);
        // {2, 6} is one unit, near 5 (via 2): it joins 5's star whole. 7 is near the unit but
        // not the center, so it stays out (alone: in no cluster).
        assert_eq!(stars, vec![(2, 2), (5, 2), (6, 2)]);
    }

    #[test]
    fn every_member_is_a_neighbour_of_its_center() {
        let mut state = 17u64;
        for _ in 0..50 {
            let n = 30u64;
            let r: HashMap<u64, u64> = (0..n)
                .map(|d| (d, crate::mix::splitmix64(&mut state) % 5))
                .collect();
            let near: Vec<(u64, u64)> = (0..40)
                .map(|_| {
                    (
                        crate::mix::splitmix64(&mut state) % n,
                        crate::mix::splitmix64(&mut state) % n,
                    )
                })
                .filter(|(a, b)| a != b)
                .collect();
            let stars = star_clusters(&r, &[], &near);
            let mut by_label: HashMap<u64, Vec<u64>> = HashMap::default();
            for (d, l) in &stars {
                by_label.entry(*l).or_default().push(*d);
            }
            for docs in by_label.values() {
                let center = *docs.iter().min_by_key(|d| (r[d], **d)).unwrap();
                for d in docs.iter().filter(|d| **d != center) {
                    assert!(
                        near.contains(&(*d, center)) || near.contains(&(center, *d)),
                        "{d} not a neighbour of {center}"
                    );
                }
            }
        }
    }
}
