//! `--against` under stars (`--cluster verified`, the default, and `star`): every new
//! document removed is a verified pair of the document kept for it, and that one is kept.
//!
//! The indexed documents were deduplicated by their own runs (and batches), whose decisions
//! the index records (`DocView::kept`): they stay as they are. Then:
//!
//! 1. A new document with a pair with an indexed document that is kept (within `k` bits,
//!    or a Jaccard similarity at or above the threshold, as the probe verified it; the same
//!    content is such a pair) is removed for the most similar such one (the highest Jaccard
//!    similarity, then the smallest Hamming distance, then the keep rank, then the smaller
//!    doc number) and joins its cluster. A pair with a removed indexed document counts for
//!    nothing: the document kept in that one's place may be unlike the new one.
//! 2. The other new documents form stars among themselves from the batch's own pairs
//!    between them ([`neardup_core::star::stars`], the run's rule and keep ranks). Under
//!    `--cluster verified` in MinHash mode, as in the run, the pairs the bands missed within
//!    components that need more than one kept document ([`unlinked_pairs`]) are verified
//!    (from the sketches the index keeps: where it holds no shingle sets of a run verified
//!    by exact Jaccard, they are not) and those that pass are pairs too. The sketches are
//!    on disk, by document (the probe wrote them there): each pair's two sketches are
//!    brought together by a sorted join ([`verify_unlinked`]).
//!
//! No indexed document's cluster changes, but for one alone until now: its new duplicates
//! join it in a cluster named by its doc number. No cluster merges; no indexed decision
//! changes. The result depends only on the committed run and the index, sorted as it is
//! read: not on the number of workers or processes.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::io;

use neardup_core::minhash::jaccard_estimate;
use neardup_core::similarity::jaccard;
use neardup_core::star::{stars, unlinked_pairs, Centers, Link, LinkKind};
use neardup_io::index::run::SortMemory;
use neardup_io::index::{DocView, Index};
use neardup_io::parquet_out::ClusterRow;
use neardup_io::spill::{ExternalSort, SpillRecord};
use serde::{Deserialize, Serialize};

use super::links::{
    each_component, ranks_of, Decision, InComponent, LinkRecord, Sorted, StarLinks,
};
use super::output::Joined;
use super::{indexed, IndexedMatch};
use super::{indexed_rank, AgainstSummary, Comparison, Decided};
use crate::config::KeepPolicy;
use crate::operators::sort::ordered_by;
use crate::stages::fingerprint::resume::SketchByDoc;

/// How the stars are made: the run's centers, its keep policy (the indexed documents' ranks
/// break ties between equally similar ones), and whether the index is a simhash one (its
/// pairs have a Hamming distance; a MinHash pair's is not measured).
pub(super) struct Rule<'a> {
    pub centers: Centers,
    pub policy: &'a KeepPolicy,
    pub simhash: bool,
    /// How the unlinked pairs of the new documents are verified (`None`: they are not).
    pub unlinked: Option<Unlinked>,
}

/// The run's verification of a pair: its threshold, by the exact Jaccard similarity of the
/// shingle sets or by the signatures' estimate.
pub(super) struct Unlinked {
    pub threshold: f64,
    pub exact: bool,
}

/// The kept indexed document a new one is removed for, its cluster, their similarity.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(super) struct Chosen {
    kept: u64,
    cluster: i64,
    hamming: Option<u8>,
    jaccard: Option<f32>,
}

/// A new document removed for a kept indexed one, by doc number (the probe finds them in
/// that order).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(super) struct ChosenFor {
    pub doc: u64,
    pub chosen: Chosen,
}

ordered_by!(ChosenFor, |c| c.doc);
impl SpillRecord for ChosenFor {}

/// The order of a new document's kept indexed pairs, best first: the highest Jaccard
/// similarity, the smallest Hamming distance, the keep rank, the doc number.
pub(super) type BestKey = (Reverse<Option<u32>>, u32, u64, u64);

/// How the kept indexed document a new document is removed for is chosen (step 1 of the
/// module doc): by the run's keep `policy` among equally similar ones; `simhash`: whether
/// the pairs have a Hamming distance.
pub(super) struct Best {
    pub policy: KeepPolicy,
    pub simhash: bool,
}

impl Best {
    /// The pair `m` of a new document with the indexed document `old` (of `index`), as a
    /// candidate to be removed for: `None` where `old` is not kept. The probe keeps each new
    /// document's smallest [`BestKey`] (simply: every pair in a list, the best of each new
    /// document picked at the end).
    pub fn candidate(
        &self,
        index: &Index,
        m: &IndexedMatch,
        old: &DocView,
    ) -> Option<(BestKey, Chosen)> {
        if old.kept != Some(true) {
            return None;
        }
        let rank = indexed_rank(&self.policy, index.generation_keep(m.generation), old);
        let key = (
            Reverse(m.jaccard.map(f32::to_bits)),
            m.hamming,
            rank.unwrap_or(u64::MAX),
            old.doc_id,
        );
        let chosen = Chosen {
            kept: old.doc_id,
            cluster: old.cluster_id.unwrap_or(old.doc_id as i64),
            hamming: self.simhash.then_some(m.hamming as u8),
            jaccard: m.jaccard,
        };
        Some((key, chosen))
    }
}

/// The clusters of the batch's new documents under `rule`, from the pairs `found` and the
/// batch's links between new documents `links`: each new document in a cluster gets its
/// decision, and each row goes to the rows' sort (both in `decided`). `sketches`: where
/// `rule` verifies the unlinked pairs, the sketches of the documents in the batch's pairs
/// ([`super::probe::Probe`]); their join and the links' second sort by component take
/// `memory` ([`UNLINKED_SHARE`], [`AGAIN_SHARE`]). An error is a sort's.
pub(super) fn decide(
    index: &Index,
    (found, links): (&mut Comparison, StarLinks),
    rule: &Rule,
    (sketches, memory): (Option<ExternalSort<SketchByDoc>>, &SortMemory),
    mut decided: Decided,
) -> io::Result<Decided> {
    if let Some(chosen) = found.chosen.take() {
        joined(
            index,
            chosen,
            (rule, memory),
            &mut found.summary,
            &mut decided,
        )?;
    }
    // The other new documents: stars of the batch's links between them, one connected
    // component at a time (a star never crosses one: `crate::stages::stars`), so that only
    // one component's graph is held. Simply: `stars(&ranks, &links, rule.centers)`.
    let (mut by_component, sorts) = links.by_component()?;
    decided.sorts.extend(sorts);
    let mut name = BY_COMPONENT;
    if let (Some(unlinked), Some(sketches)) = (&rule.unlinked, sketches) {
        // The unlinked pairs of each component, verified; those that pass join it.
        let mut again = memory.part(AGAIN_SHARE, "links again").sort();
        let mut probes = Vec::new();
        let mut components = Vec::new();
        let sorted = by_component.finish()?;
        decided.sorts.push((BY_COMPONENT, sorted.stats()));
        each_component(sorted, |c| {
            let links: Vec<Link> = c.iter().map(|r| r.link.link()).collect();
            for probe in unlinked_pairs(&ranks_of(c), &links) {
                probes.push(probe);
                components.push(c[0].component);
            }
            c.iter().try_for_each(|r| again.push(*r))
        })?;
        let join = memory.part(UNLINKED_SHARE, "unlinked");
        let (verified, sorts) = verify_unlinked(sketches, probes, unlinked, &join)?;
        decided.sorts.extend(sorts);
        for (at, link) in verified {
            again.push(InComponent {
                component: components[at],
                verified: true,
                link: LinkRecord::new(&link, [None, None]),
            })?;
        }
        (by_component, name) = (again, AGAIN);
    }
    let sorted = by_component.finish()?;
    decided.sorts.push((name, sorted.stats()));
    each_component(sorted, |c| {
        let links: Vec<Link> = c.iter().map(|r| r.link.link()).collect();
        let members = stars(&ranks_of(c), &links, rule.centers);
        let mut size: HashMap<u64, u32> = HashMap::new();
        for m in &members {
            *size.entry(m.cluster).or_default() += 1;
        }
        for m in members {
            let removed = m.kept != m.doc;
            decided.removed += u64::from(removed);
            decided.new_docs.push(Decision {
                doc: m.doc,
                cluster: m.cluster as i64,
                removed,
            })?;
            decided.rows.push(ClusterRow {
                doc_id: m.doc,
                cluster_id: m.cluster as i64,
                cluster_size: size[&m.cluster],
                keep: !removed,
                kept_doc_id: m.kept,
                hamming: m.hamming.filter(|_| rule.simhash),
                jaccard: m.jaccard,
            })?;
        }
        Ok(())
    })?;
    Ok(decided)
}

/// The names of the links' sorts by component in the run's summary: the first, and the
/// second with the unlinked pairs that passed verification.
const BY_COMPONENT: &str = "against links by component";
const AGAIN: &str = "against links by component, verified";

/// The shares of the step's memory of the unlinked pairs' join and of the links' second
/// sort by component (which fills beside it).
const UNLINKED_SHARE: f64 = 0.25;
const AGAIN_SHARE: f64 = 0.03;

/// One document of an unlinked pair to verify, with its sketch (its shingle set, or its
/// signature): sorted by pair, then side, a pair's two come together.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct PairSide {
    /// The pair's place among the pairs to verify.
    pair: u64,
    /// 0 for its first document, 1 for its second.
    side: u8,
    sketch: Vec<u64>,
}

impl SpillRecord for PairSide {
    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + 8 * self.sketch.capacity()
    }
}

/// The unlinked pairs `probes` ([`unlinked_pairs`]) whose documents' sketches pass the run's
/// verification, as pairs, each with its place in `probes`, in their order.
///
/// The simple version holds every sketch in a map and looks each pair's two up. Here the
/// sketches are read once, by document, beside the pairs' documents sorted the same way;
/// each pair's side goes with its sketch to a sort by pair (`memory`), whose merge brings
/// each pair's two sides together. What is held: the pairs' documents (24 bytes each) and
/// the sort's budget. Also returns what the sketches' sort and the pairs' did.
fn verify_unlinked(
    sketches: ExternalSort<SketchByDoc>,
    probes: Vec<(u64, u64)>,
    verify: &Unlinked,
    memory: &SortMemory,
) -> io::Result<(Verified, [Sorted; 2])> {
    let mut sides = memory.sort::<PairSide>();
    if probes.is_empty() {
        let sorts = [(SKETCHES, sketches.stats()), (UNLINKED, sides.stats())];
        return Ok((Vec::new(), sorts));
    }
    // (document, pair, side), by document.
    let mut ends: Vec<(u64, u64, u8)> = (0..probes.len())
        .flat_map(|i| [(probes[i].0, i as u64, 0), (probes[i].1, i as u64, 1)])
        .collect();
    ends.sort_unstable();
    let mut ends = ends.into_iter().peekable();
    let sketches = sketches.finish()?;
    let sketched = sketches.stats();
    for sketch in sketches {
        let SketchByDoc(sketch) = sketch?;
        // Every document of a pair has its sketch (it is in the batch's pairs).
        while ends.next_if(|e| e.0 < sketch.doc_id).is_some() {
            debug_assert!(false, "a document of an unlinked pair without a sketch");
        }
        while let Some((_, pair, side)) = ends.next_if(|e| e.0 == sketch.doc_id) {
            let sketch = match verify.exact {
                true => sketch.shingles.clone().unwrap_or_default(),
                false => sketch.signature.clone(),
            };
            sides.push(PairSide { pair, side, sketch })?;
        }
    }
    let sides = sides.finish()?;
    let sorted = sides.stats();
    let mut sides = sides.peekable();
    let mut found = Vec::new();
    while let Some(first) = sides.next() {
        let first = first?;
        let Some(second) = sides.next_if(|s| s.as_ref().is_ok_and(|s| s.pair == first.pair)) else {
            continue;
        };
        let second = second?;
        let similarity = if verify.exact {
            jaccard(&first.sketch, &second.sketch)
        } else {
            jaccard_estimate(&first.sketch, &second.sketch)
        };
        if similarity >= verify.threshold {
            let (a, b) = probes[first.pair as usize];
            let link = Link {
                a,
                b,
                kind: LinkKind::Near,
                hamming: 0,
                jaccard: Some(similarity as f32),
            };
            found.push((first.pair as usize, link));
        }
    }
    Ok((found, [(SKETCHES, sketched), (UNLINKED, sorted)]))
}

/// The unlinked pairs that passed verification, each with its place among those probed.
type Verified = Vec<(usize, Link)>;

/// The names of the sketches' sort and the unlinked pairs' in the run's summary.
const SKETCHES: &str = "against sketches";
const UNLINKED: &str = "against unlinked";

/// The rows of the indexed clusters new documents joined (`chosen`, by new document):
/// every indexed member as the index holds it (a removed one with its cluster's kept
/// document), and the new documents removed for one of them, with their decisions; an
/// indexed document alone until now gets its cluster.
///
/// Simply: the joined clusters' rows in a map by cluster, completed (their size, their
/// kept document) once the index has been scanned. Here the rows go to the rows' sort as
/// they are found; the joined clusters' labels go to a sort on disk, whose indexed members
/// one scan of the index finds ([`indexed::members`]); and each joined cluster
/// ([`Joined`]) goes to a sort by label, to complete its rows as they are written
/// ([`super::output`]). `memory`: the step's.
fn joined(
    index: &Index,
    chosen: ExternalSort<ChosenFor>,
    (rule, memory): (&Rule, &SortMemory),
    summary: &mut AgainstSummary,
    decided: &mut Decided,
) -> io::Result<()> {
    let chosen = chosen.finish()?;
    decided.sorts.push(("against chosen", chosen.stats()));
    let mut labels = memory.part(JOINED_SHARE, "joined").sort::<u64>();
    for c in chosen {
        let ChosenFor { doc, chosen: c } = c?;
        labels.push(c.cluster as u64)?;
        decided.removed += 1;
        decided.new_docs.push(Decision {
            doc,
            cluster: c.cluster,
            removed: true,
        })?;
        let row = ClusterRow {
            doc_id: doc,
            cluster_id: c.cluster,
            cluster_size: 0,
            keep: false,
            kept_doc_id: c.kept,
            hamming: c.hamming,
            jaccard: c.jaccard,
        };
        decided.rows.push(row)?;
    }
    let labels = labels.seal()?;
    decided.sorts.push(("against joined", labels.stats()));
    let memory_of_members = memory.part(MEMBERS_SHARE, "members");
    let mut members = indexed::members(index, &labels, |&l| l, rule.policy, &memory_of_members)?;
    summary.joined = members.nodes();
    // The new documents of each cluster, counted from `labels` as its members come.
    let mut new = labels.records()?.peekable();
    let mut clusters = memory.part(JOINED_SHARE, "joined clusters").sort();
    let mut at: Option<Joined> = None;
    for m in members.by_ref() {
        let (label, old) = m?;
        if at.is_none_or(|j| j.label as u64 != label) {
            if let Some(j) = at.take() {
                clusters.push(j)?;
            }
            let mut size = 0;
            while let Some(l) = new.next_if(|l| l.as_ref().is_ok_and(|&l| l <= label)) {
                size += u32::from(l? == label);
            }
            if let Some(Err(_)) = new.peek() {
                return Err(new.next().and_then(Result::err).expect("an error"));
            }
            at = Some(Joined {
                label: label as i64,
                size,
                kept: u64::MAX,
            });
        }
        let cluster = at.as_mut().expect("the member's cluster");
        summary.unranked += u64::from(old.rank.is_none());
        if old.cluster.is_none() {
            decided.changes.push((old.doc, cluster.label))?;
        }
        let keep = old.kept == Some(true);
        cluster.size += 1;
        // The cluster's kept document: the one new documents joined (the smallest,
        // should an index hold a cluster of several).
        if keep {
            cluster.kept = cluster.kept.min(old.doc);
        }
        let row = ClusterRow {
            doc_id: old.doc,
            cluster_id: cluster.label,
            cluster_size: 0,
            keep,
            kept_doc_id: old.doc,
            hamming: None,
            jaccard: None,
        };
        match keep {
            true => decided.rows.push(row)?,
            false => decided.rows.push_to_fill(row)?,
        }
    }
    if let Some(j) = at {
        clusters.push(j)?;
    }
    decided.sorts.push((indexed::CANDIDATES, members.stats()));
    drop(members);
    decided.rows.joined(clusters);
    Ok(())
}

/// The shares of the step's memory: the joined clusters' labels, and then each joined
/// cluster ([`Joined`]); the scan for their members (its filter and its sort).
const JOINED_SHARE: f64 = 0.02;
const MEMBERS_SHARE: f64 = 0.1;
