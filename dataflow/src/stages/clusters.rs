//! Clusters: the kept documents, and writing `clusters/`.
//!
//! Every kind of cluster is made in [`crate::stages::stars`], one connected component at a
//! time, within the sorts' budgets: stars (`--cluster verified`, the default, and `--cluster
//! star`), where every removed document is a pair of the run with the one kept in its place,
//! and whole components (`--cluster components`), each labelled with its smallest `doc_id`
//! and kept at its smallest `(rank, doc_id)`. This module holds what they share: [`Tally`],
//! what they add up to for summary.json.
//!
//! Under `--keep canonical-host` the kept documents are chosen twice, because the mirror
//! groups they depend on are found from the clusters: worker 0 first picks by the inner
//! policy (the clusters go to the mirror stage) and gives each clustered document's rank
//! on, and once the mirror stage has named the clustered documents on mirroring hosts,
//! [`prefer_canonical_hosts`] moves each cluster's kept document to the smallest `(on a
//! mirroring host, rank, doc_id)`, by two sorts within their budgets. The clusters
//! themselves do not change, and the ranks never leave worker 0.

use fxhash::FxHashMap as HashMap;
use std::rc::Rc;

use neardup_io::spill::SpillRecord;
use serde::{Deserialize, Serialize};
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::vec::Map;
use timely::dataflow::operators::Concat;
use timely::dataflow::StreamVec;

use crate::config::{ClusterMode, STARS_SORT_SHARE, SUMMARY_TOP};
use crate::operators::sort::ordered_by;
use crate::operators::SortComplete;
use crate::records::Assignment;
use crate::report::{ClusterInfo, Removal};
use crate::worker::WorkerCtx;

/// Whether the clustering verifies pairs the search did not find ([`neardup_core::star::unlinked_pairs`]):
/// under `--cluster verified`, when a search by bands (which misses some pairs above its
/// threshold) has its pairs verified.
pub fn probes_unlinked(config: &crate::config::JobConfig) -> bool {
    config.cluster == ClusterMode::Verified && config.lsh.is_some() && config.verify.is_some()
}

/// What the clusters add up to, for summary.json: the clusters, the largest of them and
/// the evidence for the removals, gathered whole clusters at a time (the stars give one
/// connected component at a time).
#[derive(Default)]
pub struct Tally {
    /// What connected components over the same links would remove.
    pub components_would_remove: u64,
    /// Unlinked pairs the clustering sent to be verified, and those that passed.
    pub probes_checked: u64,
    pub probes_verified: u64,
    clusters: u64,
    clustered: u64,
    largest: Vec<ClusterInfo>,
    lowest_jaccard: Option<f32>,
    highest_hamming: Option<u8>,
    removed_unmeasured: u64,
}

impl Tally {
    /// Fills in the cluster sizes of `assignments`, which hold every document of their
    /// clusters, and counts them.
    pub fn add(&mut self, assignments: &mut [Assignment]) {
        let mut size: HashMap<u64, u32> = HashMap::default();
        for a in assignments.iter() {
            *size.entry(a.cluster_id).or_default() += 1;
        }
        for a in assignments.iter_mut() {
            a.cluster_size = size[&a.cluster_id];
        }
        self.clusters += size.len() as u64;
        self.clustered += assignments.len() as u64;
        self.largest.extend(size.iter().map(|(&c, &s)| ClusterInfo {
            cluster_id: c,
            size: s as u64,
        }));
        if self.largest.len() > 4 * SUMMARY_TOP {
            self.keep_largest();
        }
        for a in assignments.iter().filter(|a| !a.keep) {
            if let Some(j) = a.jaccard {
                self.lowest_jaccard = Some(self.lowest_jaccard.map_or(j, |l| l.min(j)));
            }
            self.highest_hamming = self.highest_hamming.max(a.hamming);
            self.removed_unmeasured += u64::from(a.hamming.is_none() && a.jaccard.is_none());
        }
    }

    fn keep_largest(&mut self) {
        let largest = &mut self.largest;
        largest.sort_by(|a, b| b.size.cmp(&a.size).then(a.cluster_id.cmp(&b.cluster_id)));
        largest.truncate(SUMMARY_TOP);
    }

    /// Writes the totals into the worker's report.
    pub fn report(mut self, ctx: &WorkerCtx) {
        self.keep_largest();
        let mut report = ctx.report.borrow_mut();
        report.clusters = self.clusters;
        report.clustered_documents = self.clustered;
        report.largest_clusters = self.largest;
        report.removal = Some(Removal {
            rule: ctx.shared.config.cluster.name().to_string(),
            components_would_remove: self.components_would_remove,
            lowest_jaccard: self.lowest_jaccard,
            highest_hamming: self.highest_hamming,
            removed_unmeasured: self.removed_unmeasured,
            unlinked_pairs_checked: self.probes_checked,
            unlinked_pairs_verified: self.probes_verified,
        });
    }
}

/// What [`prefer_canonical_hosts`] sorts first, by document: that the document is on a
/// mirroring host (`tag` [`MIRRORING`]), its rank ([`RANK`]), its assignment
/// ([`ASSIGNED`]), in that order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ByDocument {
    doc: u64,
    tag: u8,
    rank: u64,
    assignment: Option<Assignment>,
}

pub const MIRRORING: u8 = 0;
pub const RANK: u8 = 1;
pub const ASSIGNED: u8 = 2;

ordered_by!(ByDocument, |r| (r.doc, r.tag));
impl SpillRecord for ByDocument {}

/// Then, by cluster: each assignment with what its document was found to be, in the order
/// of the kept document's choice.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ByCluster {
    mirroring: bool,
    rank: u64,
    assignment: Assignment,
}

ordered_by!(ByCluster, |r| (
    r.assignment.cluster_id,
    r.mirroring,
    r.rank,
    r.assignment.doc_id
));
impl SpillRecord for ByCluster {}

/// The walk by document: what is known of the current document so far.
#[derive(Default)]
struct DocumentWalk {
    doc: Option<u64>,
    mirroring: bool,
    rank: u64,
}

impl DocumentWalk {
    /// Takes the next record in document order; an assignment comes out with its document's
    /// mirroring and rank (`u64::MAX` when none was given, as for a document without one).
    fn step(&mut self, r: ByDocument) -> Option<ByCluster> {
        if self.doc != Some(r.doc) {
            *self = DocumentWalk {
                doc: Some(r.doc),
                mirroring: false,
                rank: u64::MAX,
            };
        }
        match r.tag {
            MIRRORING => self.mirroring = true,
            RANK => self.rank = r.rank,
            _ => {
                return r.assignment.map(|assignment| ByCluster {
                    mirroring: self.mirroring,
                    rank: self.rank,
                    assignment,
                })
            }
        }
        None
    }
}

/// The walk by cluster: the first record of a cluster is its kept document.
#[derive(Default)]
struct ClusterWalk {
    cluster: Option<u64>,
    kept: u64,
    /// Clusters whose kept document changed.
    moved: u64,
}

impl ClusterWalk {
    fn step(&mut self, r: ByCluster) -> Assignment {
        let mut a = r.assignment;
        if self.cluster != Some(a.cluster_id) {
            self.cluster = Some(a.cluster_id);
            self.kept = a.doc_id;
        }
        let keep = self.kept == a.doc_id;
        self.moved += u64::from(a.keep && !keep);
        a.keep = keep;
        a.kept_doc_id = self.kept;
        a
    }
}

/// Worker 0, under `--keep canonical-host`: the assignments of
/// [`make_stars`](crate::stages::stars::make_stars) (all at worker 0), their documents'
/// ranks (its second stream) and the clustered documents on mirroring hosts (from the
/// mirror stage) give each cluster's kept document again, the smallest `(on a mirroring
/// host, rank, doc_id)`: a copy off mirroring hosts if the cluster has one, the inner
/// policy's choice among them. Counts the clusters whose kept document moved
/// (`keep_moved_to_canonical_host`).
///
/// The simple version gathers the assignments, a hash set of the mirroring documents and a
/// hash map of the ranks, and takes each cluster's smallest (`rekeep` in the tests). Here
/// the three are sorted together by document, which gives each assignment its document's
/// mirroring and rank as the sort is walked, and those are sorted by cluster in the order
/// of the choice, so that each cluster's first is its kept document: two sorts within
/// their budgets, and nothing held per document.
pub fn prefer_canonical_hosts<'s>(
    assignments: StreamVec<'s, u64, Assignment>,
    mirroring: StreamVec<'s, u64, u64>,
    ranks: StreamVec<'s, u64, (u64, u64)>,
    ctx: Rc<WorkerCtx>,
) -> StreamVec<'s, u64, Assignment> {
    let by_document = mirroring
        .map(|doc| ByDocument {
            doc,
            tag: MIRRORING,
            rank: 0,
            assignment: None,
        })
        .concat(ranks.map(|(doc, rank)| ByDocument {
            doc,
            tag: RANK,
            rank,
            assignment: None,
        }))
        .concat(assignments.map(|a| ByDocument {
            doc: a.doc_id,
            tag: ASSIGNED,
            rank: 0,
            assignment: Some(a),
        }));
    let (fail, done) = (ctx.clone(), ctx.clone());
    let (tagged, _) = by_document.sort_complete_split::<ByDocument, ByCluster, (), _, _>(
        Exchange::new(ctx.meter("clusters", |_: &ByDocument| 0)),
        "CanonicalHostsByDocument",
        ctx.sort("canonical hosts by document", STARS_SORT_SHARE),
        DocumentWalk::default(),
        |_, _| {},
        |walk, r, out, _| {
            if let Some(c) = walk.step(r) {
                out.give(c);
            }
        },
        move |_, stats, _, _| done.sorted("canonical hosts by document", stats),
        move |e| fail.sort_failed("canonical hosts by document", e),
    );
    let (fail, done) = (ctx.clone(), ctx.clone());
    tagged
        .sort_complete_split::<ByCluster, Assignment, (), _, _>(
            Pipeline,
            "CanonicalHostsByCluster",
            ctx.sort("canonical hosts by cluster", STARS_SORT_SHARE),
            ClusterWalk::default(),
            |_, _| {},
            |walk, r, out, _| out.give(walk.step(r)),
            move |walk, stats, _, _| {
                done.report.borrow_mut().keep_moved_to_canonical_host += walk.moved;
                done.sorted("canonical hosts by cluster", stats);
            },
            move |e| fail.sort_failed("canonical hosts by cluster", e),
        )
        .0
}

/// The documents a run removes, at their home worker: filled by
/// [`write_clusters`](super::cluster_rows::write_clusters) when asked, read by the search for
/// repeated passages of `run --substrings`, which runs after.
pub type RemovedAtHome = Rc<std::cell::RefCell<crate::records::DocBits>>;

#[cfg(test)]
mod tests {
    use super::*;
    use fxhash::FxHashSet as HashSet;

    /// The simple version: sets `keep` on the smallest `(on a mirroring host, rank, doc_id)`
    /// of each cluster; returns how many clusters' kept document changed.
    fn rekeep(
        assigned: &mut [Assignment],
        ranks: &HashMap<u64, u64>,
        mirroring: &HashSet<u64>,
    ) -> u64 {
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

    /// What [`prefer_canonical_hosts`] does, its sorts made by sorting vectors: the walk by
    /// document, then the walk by cluster. Each mirroring document is named twice, as the
    /// mirror stage may.
    fn by_sorted_walks(
        assigned: &[Assignment],
        ranks: &HashMap<u64, u64>,
        mirroring: &HashSet<u64>,
    ) -> (Vec<Assignment>, u64) {
        let mut records: Vec<ByDocument> = mirroring
            .iter()
            .chain(mirroring.iter())
            .map(|&doc| ByDocument {
                doc,
                tag: MIRRORING,
                rank: 0,
                assignment: None,
            })
            .chain(ranks.iter().map(|(&doc, &rank)| ByDocument {
                doc,
                tag: RANK,
                rank,
                assignment: None,
            }))
            .chain(assigned.iter().map(|&a| ByDocument {
                doc: a.doc_id,
                tag: ASSIGNED,
                rank: 0,
                assignment: Some(a),
            }))
            .collect();
        records.sort();
        let mut by_document = DocumentWalk::default();
        let mut tagged: Vec<ByCluster> = records
            .into_iter()
            .filter_map(|r| by_document.step(r))
            .collect();
        tagged.sort();
        let mut by_cluster = ClusterWalk::default();
        let walked = tagged.into_iter().map(|r| by_cluster.step(r)).collect();
        (walked, by_cluster.moved)
    }

    /// The sorted walks keep what the simple version keeps, and count the same moves, on
    /// random clusters where some documents lack a rank, some mirror, and some mirroring
    /// documents are in no cluster.
    #[test]
    fn sorted_walks_keep_what_the_simple_version_keeps() {
        let mut state = 41u64;
        let mut r = move || neardup_core::mix::splitmix64(&mut state);
        for _ in 0..300 {
            let docs = 1 + r() % 60;
            let clusters = 1 + r() % 8;
            let mut assigned: Vec<Assignment> = (0..docs)
                .map(|d| assignment(d * 3 + r() % 3, r() % clusters, false))
                .collect();
            assigned.sort_by_key(|a| a.doc_id);
            assigned.dedup_by_key(|a| a.doc_id);
            // The inner policy's choice: the smallest document of each cluster.
            let mut first: HashMap<u64, u64> = HashMap::default();
            for a in &assigned {
                first.entry(a.cluster_id).or_insert(a.doc_id);
            }
            for a in assigned.iter_mut() {
                a.keep = first[&a.cluster_id] == a.doc_id;
            }
            let mut ranks: HashMap<u64, u64> = HashMap::default();
            for a in &assigned {
                if r() % 5 != 0 {
                    ranks.insert(a.doc_id, r() % 4);
                }
            }
            let mirroring: HashSet<u64> = (0..docs * 3 + 5).filter(|_| r() % 3 == 0).collect();
            let mut simple = assigned.clone();
            let moved = rekeep(&mut simple, &ranks, &mirroring);
            let (mut walked, walked_moved) = by_sorted_walks(&assigned, &ranks, &mirroring);
            walked.sort_by_key(|a| a.doc_id);
            assert_eq!(walked, simple);
            assert_eq!(walked_moved, moved);
        }
    }

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
