//! Clusters: the kept documents, and writing `clusters/`.
//!
//! Stars (`--cluster verified`, the default, and `--cluster star`): every worker sends its
//! edges, with what was measured of them (the Hamming distance, the verified Jaccard
//! similarity), to worker 0, which builds the clusters around their kept documents with
//! [`neardup_core::star`], so that every removed document is a pair of the run with the
//! one kept in its place, and sends each clustered document's assignment (its kept
//! document and their similarity) to its home worker. Worker 0 also counts what connected
//! components of the same edges would remove, for summary.json's `removal`. The edges are
//! sorted first, so the clusters do not depend on the order they arrived in.
//!
//! Components (`--cluster components`): each worker runs union-find over the edges it found and sends only its
//! forest (one link per document it saw, fewer than its edges) to worker 0, which runs
//! union-find again over all forests. Measured, this beats iterative label propagation by
//! orders of magnitude for a one-shot job (see the notes in docs/design.md). Worker 0 then
//! labels each component with its smallest `doc_id`, picks the kept document (the smallest
//! `(rank, doc_id)`), and sends every clustered document's assignment to its home worker,
//! which writes one `clusters/` row per document it fingerprinted.
//!
//! Under `--keep canonical-host` the kept documents are chosen twice, because the mirror
//! groups they depend on are found from the clusters: worker 0 first picks by the inner
//! policy (the clusters go to the mirror stage), keeps the ranks, and once the mirror stage
//! has named the clustered documents on mirroring hosts, [`prefer_canonical_hosts`] moves
//! each cluster's kept document to the smallest `(on a mirroring host, rank, doc_id)`. The
//! clusters themselves do not change, and the ranks never leave worker 0.

use fxhash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::cell::RefCell;
use std::rc::Rc;

use neardup_core::unionfind::UnionFind;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::StreamVec;

use crate::config::{ClusterMode, SUMMARY_TOP};
use crate::operators::CollectComplete;
use crate::records::{Assignment, Edge, EdgeKind, ForestMsg};
use crate::report::{ClusterInfo, Removal};
use crate::worker::WorkerCtx;
use neardup_core::star::{components_would_remove, stars, unlinked_pairs, Centers, Link, Member};
use neardup_core::Method;

/// Local union-find over this worker's edges; emits its forest and the ranks of the
/// documents in it. Under stars (`--cluster verified`, `star`) it emits the edges
/// themselves, with what was measured of them.
pub fn local_forest<'s>(
    edges: StreamVec<'s, u64, Edge>,
    ctx: Rc<WorkerCtx>,
) -> StreamVec<'s, u64, ForestMsg> {
    let stars = ctx.shared.config.cluster.stars();
    let state: (UnionFind, HashMap<u64, u64>, Vec<ForestMsg>) = Default::default();
    edges.collect_complete(
        Pipeline,
        "LocalForest",
        state,
        move |(uf, ranks, kept_edges), data| {
            for e in data.drain(..) {
                if stars {
                    kept_edges.push(ForestMsg::Edge(e));
                } else {
                    uf.union(e.a, e.b);
                }
                ranks.insert(e.a, e.rank_a);
                ranks.insert(e.b, e.rank_b);
            }
        },
        |(mut uf, ranks, kept_edges), session| {
            // Everything is moved out, so this worker's forest is freed before worker 0
            // builds the merged one.
            session.give_iterator(kept_edges.into_iter());
            let links = uf.forest_edges();
            drop(uf);
            session.give_iterator(
                links
                    .into_iter()
                    .map(|(doc, root)| ForestMsg::Link { doc, root }),
            );
            session.give_iterator(
                ranks
                    .into_iter()
                    .map(|(doc, rank)| ForestMsg::Rank { doc, rank }),
            );
        },
    )
}

/// The keep ranks of the clustered documents, handed inside worker 0 from
/// [`merge_forests`] to [`prefer_canonical_hosts`] (filled only under `--keep
/// canonical-host`).
pub type KeepRanks = Rc<RefCell<HashMap<u64, u64>>>;

/// Worker 0, under `--cluster components`: merges all forests, labels components, picks
/// the kept documents, and sends each clustered document's assignment to its home. Under
/// `--keep canonical-host` it leaves the ranks in `keep_ranks` for
/// [`prefer_canonical_hosts`].
pub fn merge_forests<'s>(
    forest: StreamVec<'s, u64, ForestMsg>,
    ctx: Rc<WorkerCtx>,
    keep_ranks: KeepRanks,
) -> StreamVec<'s, u64, Assignment> {
    let state: (UnionFind, HashMap<u64, u64>) = Default::default();
    forest.collect_complete(
        Exchange::new(ctx.meter("clusters", |_: &ForestMsg| 0)),
        "MergeForests",
        state,
        |(uf, ranks), data| {
            for msg in data.drain(..) {
                match msg {
                    ForestMsg::Link { doc, root } => uf.union(doc, root),
                    ForestMsg::Rank { doc, rank } => {
                        ranks.insert(doc, rank);
                    }
                    ForestMsg::Edge(_) => unreachable!("components send forests"),
                }
            }
        },
        move |(mut uf, ranks), session| {
            for &doc in ranks.keys() {
                uf.union(doc, doc);
            }
            let members = uf.components_by_min();
            drop(uf);
            let assignments = assign(by_rank(members, &ranks), None, &ctx);
            if ctx.shared.config.keep.prefers_canonical_hosts() {
                *keep_ranks.borrow_mut() = ranks;
            }
            session.give_iterator(assignments.into_iter());
            ctx.stage_done("cluster");
        },
    )
}

/// What worker 0 holds under stars between gathering the edges ([`gather_edges`]) and
/// making the stars ([`make_stars`]): the ranks, the links (sorted), and how many unlinked
/// pairs it sent to be verified.
pub type Gathered = Rc<RefCell<(HashMap<u64, u64>, Vec<Link>, u64)>>;

/// Whether the clustering verifies pairs the search did not find ([`unlinked_pairs`]):
/// under `--cluster verified`, when a search by bands (which misses some pairs above its
/// threshold) has its pairs verified.
pub fn probes_unlinked(config: &crate::config::JobConfig) -> bool {
    config.cluster == ClusterMode::Verified && config.lsh.is_some() && config.verify.is_some()
}

/// Worker 0, under stars: gathers every edge, with what was measured of it, and every rank.
/// With [`probes_unlinked`] it sends the unlinked pairs worth verifying, as edges (to
/// verification, then [`make_stars`]); the rest waits in `gathered`.
pub fn gather_edges<'s>(
    forest: StreamVec<'s, u64, ForestMsg>,
    ctx: Rc<WorkerCtx>,
    gathered: Gathered,
) -> StreamVec<'s, u64, Edge> {
    let state: (HashMap<u64, u64>, Vec<Link>) = Default::default();
    forest.collect_complete(
        Exchange::new(ctx.meter("clusters", |_: &ForestMsg| 0)),
        "GatherEdges",
        state,
        |(ranks, links), data| {
            for msg in data.drain(..) {
                match msg {
                    ForestMsg::Edge(edge) => links.push(edge.link()),
                    ForestMsg::Rank { doc, rank } => {
                        ranks.insert(doc, rank);
                    }
                    ForestMsg::Link { .. } => unreachable!("stars send edges"),
                }
            }
        },
        move |(ranks, mut links), session| {
            // The same clusters whatever order the edges came in.
            links.sort_unstable_by_key(|l| (l.a, l.b, l.kind as u8));
            let probes = match probes_unlinked(&ctx.shared.config) {
                true => unlinked_pairs(&ranks, &links),
                false => Vec::new(),
            };
            let rank = |doc: u64| (doc, ranks.get(&doc).copied().unwrap_or(u64::MAX));
            session.give_iterator(
                probes
                    .iter()
                    .map(|&(a, b)| Edge::new(rank(a), rank(b), 0, EdgeKind::Near)),
            );
            *gathered.borrow_mut() = (ranks, links, probes.len() as u64);
        },
    )
}

/// Worker 0, under stars: the gathered edges, and the unlinked pairs that passed
/// verification, make the stars ([`neardup_core::star`]); each clustered document's
/// assignment goes to its home.
pub fn make_stars<'s>(
    verified: StreamVec<'s, u64, Edge>,
    ctx: Rc<WorkerCtx>,
    gathered: Gathered,
) -> StreamVec<'s, u64, Assignment> {
    verified.collect_complete(
        Exchange::new(ctx.meter("clusters", |_: &Edge| 0)),
        "MakeStars",
        Vec::<Link>::new(),
        |found, data| found.extend(data.drain(..).map(|e| e.link())),
        move |mut found, session| {
            let (ranks, mut links, probed) = std::mem::take(&mut *gathered.borrow_mut());
            found.sort_unstable_by_key(|l| (l.a, l.b));
            let probes = Probes {
                pairs: probed,
                verified: found.len() as u64,
            };
            links.append(&mut found);
            let centers = match ctx.shared.config.cluster {
                ClusterMode::Star => Centers::Rank,
                _ => Centers::Coverage,
            };
            let members = stars(&ranks, &links, centers);
            let components = components_would_remove(&links);
            drop(links);
            let simhash = matches!(ctx.shared.config.scheme.method, Method::Simhash(_));
            let assignments = assign(from_stars(members, simhash, components), Some(probes), &ctx);
            session.give_iterator(assignments.into_iter());
            ctx.stage_done("cluster");
        },
    )
}

/// Unlinked pairs the clustering sent to be verified, and those that passed.
struct Probes {
    pairs: u64,
    verified: u64,
}

/// Components' assignments: each cluster's kept document is its smallest `(rank, doc_id)`.
fn by_rank(members: Vec<(u64, u64)>, ranks: &HashMap<u64, u64>) -> (Vec<Assignment>, u64) {
    let mut best: HashMap<u64, (u64, u64)> = HashMap::default();
    for &(doc, cluster) in &members {
        let candidate = (ranks.get(&doc).copied().unwrap_or(u64::MAX), doc);
        best.entry(cluster)
            .and_modify(|b| *b = (*b).min(candidate))
            .or_insert(candidate);
    }
    let assignments: Vec<Assignment> = members
        .into_iter()
        .map(|(doc, cluster)| {
            let kept = best[&cluster].1;
            Assignment {
                doc_id: doc,
                cluster_id: cluster,
                cluster_size: 0,
                keep: kept == doc,
                kept_doc_id: kept,
                hamming: None,
                jaccard: None,
            }
        })
        .collect();
    let removed = assignments.iter().filter(|a| !a.keep).count() as u64;
    (assignments, removed)
}

/// Stars' assignments (the Hamming distance only in simhash mode: MinHash pairs have none),
/// and what components would have removed.
fn from_stars(members: Vec<Member>, simhash: bool, components: u64) -> (Vec<Assignment>, u64) {
    let assignments = members
        .into_iter()
        .map(|m| Assignment {
            doc_id: m.doc,
            cluster_id: m.cluster,
            cluster_size: 0,
            keep: m.kept == m.doc,
            kept_doc_id: m.kept,
            hamming: m.hamming.filter(|_| simhash),
            jaccard: m.jaccard,
        })
        .collect();
    (assignments, components)
}

/// Fills in the cluster sizes, and reports the clusters and the evidence for the removals
/// (`probes`: under stars).
fn assign(
    (mut assignments, components_would_remove): (Vec<Assignment>, u64),
    probes: Option<Probes>,
    ctx: &WorkerCtx,
) -> Vec<Assignment> {
    let mut size: HashMap<u64, u32> = HashMap::default();
    for a in &assignments {
        *size.entry(a.cluster_id).or_default() += 1;
    }
    for a in &mut assignments {
        a.cluster_size = size[&a.cluster_id];
    }
    let mut report = ctx.report.borrow_mut();
    report.clusters = size.len() as u64;
    report.clustered_documents = assignments.len() as u64;
    let mut largest: Vec<ClusterInfo> = size
        .iter()
        .map(|(&c, &s)| ClusterInfo {
            cluster_id: c,
            size: s as u64,
        })
        .collect();
    largest.sort_by(|a, b| b.size.cmp(&a.size).then(a.cluster_id.cmp(&b.cluster_id)));
    largest.truncate(SUMMARY_TOP);
    report.largest_clusters = largest;
    let mut removal = removal(
        &assignments,
        ctx.shared.config.cluster,
        components_would_remove,
    );
    if let Some(probes) = probes {
        removal.unlinked_pairs_checked = probes.pairs;
        removal.unlinked_pairs_verified = probes.verified;
    }
    report.removal = Some(removal);
    assignments
}

/// summary.json's `removal`: the lowest similarity between a removed document and its kept
/// one, and how many removals have none measured.
fn removal(assignments: &[Assignment], mode: ClusterMode, components_would_remove: u64) -> Removal {
    let removed = || assignments.iter().filter(|a| !a.keep);
    let lowest_jaccard = removed().filter_map(|a| a.jaccard).reduce(f32::min);
    Removal {
        rule: mode.name().to_string(),
        components_would_remove,
        lowest_jaccard,
        highest_hamming: removed().filter_map(|a| a.hamming).max(),
        removed_unmeasured: removed()
            .filter(|a| a.hamming.is_none() && a.jaccard.is_none())
            .count() as u64,
        unlinked_pairs_checked: 0,
        unlinked_pairs_verified: 0,
    }
}

/// Worker 0, under `--keep canonical-host`: the assignments of [`merge_forests`] (all at
/// worker 0) and the clustered documents on mirroring hosts (from the mirror stage) give
/// each cluster's kept document again, the smallest `(on a mirroring host, rank, doc_id)`:
/// a copy off mirroring hosts if the cluster has one, the inner policy's choice among them.
/// Counts the clusters whose kept document moved (`keep_moved_to_canonical_host`).
pub fn prefer_canonical_hosts<'s>(
    assignments: StreamVec<'s, u64, Assignment>,
    mirroring: StreamVec<'s, u64, u64>,
    keep_ranks: KeepRanks,
    ctx: Rc<WorkerCtx>,
) -> StreamVec<'s, u64, Assignment> {
    let state: (Vec<Assignment>, HashSet<u64>) = Default::default();
    assignments.collect_complete_with(
        mirroring,
        Pipeline,
        Exchange::new(ctx.meter("clusters", |_: &u64| 0)),
        "PreferCanonicalHosts",
        state,
        |(assigned, _), data| assigned.append(data),
        |(_, mirroring), data| mirroring.extend(data.drain(..)),
        move |(mut assigned, mirroring), session| {
            let ranks = std::mem::take(&mut *keep_ranks.borrow_mut());
            let moved = rekeep(&mut assigned, &ranks, &mirroring);
            drop(mirroring);
            ctx.report.borrow_mut().keep_moved_to_canonical_host += moved;
            session.give_iterator(assigned.into_iter());
        },
    )
}

/// Sets `keep` on the smallest `(on a mirroring host, rank, doc_id)` of each cluster;
/// returns how many clusters' kept document changed.
fn rekeep(assigned: &mut [Assignment], ranks: &HashMap<u64, u64>, mirroring: &HashSet<u64>) -> u64 {
    let order = |doc: u64| {
        (
            mirroring.contains(&doc),
            ranks.get(&doc).copied().unwrap_or(u64::MAX),
            doc,
        )
    };
    let mut best: HashMap<u64, (bool, u64, u64)> = HashMap::default();
    for a in assigned.iter() {
        let candidate = order(a.doc_id);
        best.entry(a.cluster_id)
            .and_modify(|b| *b = (*b).min(candidate))
            .or_insert(candidate);
    }
    let mut moved = 0;
    for a in assigned.iter_mut() {
        let kept = best[&a.cluster_id].2;
        moved += u64::from(a.keep && kept != a.doc_id);
        a.keep = kept == a.doc_id;
        a.kept_doc_id = kept;
    }
    moved
}

/// The documents a run removes, at their home worker: filled by
/// [`write_clusters`](super::cluster_rows::write_clusters) when asked, read by the search for
/// repeated passages of `run --substrings`, which runs after.
pub type RemovedAtHome = Rc<std::cell::RefCell<crate::records::DocBits>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn assignment(doc_id: u64, cluster_id: u64, keep: bool) -> Assignment {
        Assignment {
            doc_id,
            cluster_id,
            cluster_size: 3,
            keep,
            kept_doc_id: 0,
            hamming: None,
            jaccard: None,
        }
    }

    #[test]
    fn rekeep_prefers_copies_off_mirroring_hosts_then_the_rank() {
        // Cluster 1: the inner policy keeps 1 (rank 0), on a mirroring host; of 2 and 3,
        // off mirroring hosts, 3 has the better rank. Cluster 4: every copy mirrors, the
        // inner choice stays. Cluster 7: the inner choice is off mirroring hosts already.
        let mut assigned = vec![
            assignment(1, 1, true),
            assignment(2, 1, false),
            assignment(3, 1, false),
            assignment(4, 4, false),
            assignment(5, 4, true),
            assignment(7, 7, true),
            assignment(8, 7, false),
        ];
        let ranks: HashMap<u64, u64> = [(1, 0), (2, 9), (3, 5), (4, 3), (5, 1), (7, 1), (8, 2)]
            .into_iter()
            .collect();
        let mirroring: HashSet<u64> = [1, 4, 5, 8].into_iter().collect();
        let moved = rekeep(&mut assigned, &ranks, &mirroring);
        let kept: Vec<u64> = assigned
            .iter()
            .filter(|a| a.keep)
            .map(|a| a.doc_id)
            .collect();
        assert_eq!(kept, [3, 5, 7]);
        assert_eq!(moved, 1);
        // Without mirroring hosts the inner choice comes back (cluster 1 moves back).
        let moved = rekeep(&mut assigned, &ranks, &HashSet::default());
        let kept: Vec<u64> = assigned
            .iter()
            .filter(|a| a.keep)
            .map(|a| a.doc_id)
            .collect();
        assert_eq!((kept, moved), (vec![1, 5, 7], 1));
    }
}
