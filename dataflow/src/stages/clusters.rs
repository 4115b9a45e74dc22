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
//! policy (the clusters go to the mirror stage), keeps the ranks, and once the mirror stage
//! has named the clustered documents on mirroring hosts, [`prefer_canonical_hosts`] moves
//! each cluster's kept document to the smallest `(on a mirroring host, rank, doc_id)`. The
//! clusters themselves do not change, and the ranks never leave worker 0.

use fxhash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::cell::RefCell;
use std::rc::Rc;

use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::StreamVec;

use crate::config::{ClusterMode, SUMMARY_TOP};
use crate::operators::CollectComplete;
use crate::records::Assignment;
use crate::report::{ClusterInfo, Removal};
use crate::worker::WorkerCtx;

/// The keep ranks of the clustered documents, handed inside worker 0 from
/// [`make_stars`](crate::stages::stars::make_stars) to [`prefer_canonical_hosts`] (filled
/// only under `--keep canonical-host`).
pub type KeepRanks = Rc<RefCell<HashMap<u64, u64>>>;

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

/// Worker 0, under `--keep canonical-host`: the assignments of [`make_stars`](crate::stages::stars::make_stars) (all at
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
