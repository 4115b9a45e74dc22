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
//!    by exact Jaccard, they are not) and those that pass are pairs too.
//!
//! No indexed document's cluster changes, but for one alone until now: its new duplicates
//! join it in a cluster named by its doc number. No cluster merges; no indexed decision
//! changes. The result depends only on the committed run and the index, sorted as it is
//! read: not on the number of workers or processes.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

use neardup_core::minhash::jaccard_estimate;
use neardup_core::similarity::jaccard;
use neardup_core::star::{stars, unlinked_pairs, Centers, Link, LinkKind};
use neardup_io::index::{DocEntry, Index};
use neardup_io::parquet_out::ClusterRow;

use super::{indexed_rank, AgainstSummary, Comparison, Decided, IndexedMatch};
use crate::config::KeepPolicy;

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
#[derive(Clone, Copy, Debug)]
struct Chosen {
    kept: u64,
    cluster: i64,
    hamming: Option<u8>,
    jaccard: Option<f32>,
}

/// The clusters of the batch's new documents `docs` (in the index's numbering) under
/// `rule`, from the pairs `found`; each new document gets its cluster and decision.
pub(super) fn decide(
    index: &Index,
    docs: &mut [DocEntry],
    found: &mut Comparison,
    rule: &Rule,
) -> Decided {
    let chosen = best_kept(index, &found.matches, rule);
    let mut decided = Decided::default();
    joined(index, &chosen, rule, &mut found.summary, &mut decided);
    // The other new documents: stars of the batch's pairs between them.
    let mut links: Vec<Link> = found
        .links
        .iter()
        .filter(|l| !chosen.contains_key(&l.a) && !chosen.contains_key(&l.b))
        .copied()
        .collect();
    let ranks: fxhash::FxHashMap<u64, u64> = docs
        .iter()
        .filter_map(|d| d.rank.map(|r| (d.doc_id, r)))
        .collect();
    if let Some(unlinked) = &rule.unlinked {
        links.extend(verify_unlinked(docs, &ranks, &links, unlinked));
        links.sort_unstable_by_key(|l| (l.a, l.b, l.kind as u8));
    }
    let members = stars(&ranks, &links, rule.centers);
    let mut size: HashMap<u64, u32> = HashMap::new();
    for m in &members {
        *size.entry(m.cluster).or_default() += 1;
    }
    let mut clustered: HashMap<u64, (i64, bool)> = HashMap::new();
    for m in members {
        clustered.insert(m.doc, (m.cluster as i64, m.kept != m.doc));
        decided.rows.push(ClusterRow {
            doc_id: m.doc,
            cluster_id: m.cluster as i64,
            cluster_size: size[&m.cluster],
            keep: m.kept == m.doc,
            kept_doc_id: m.kept,
            hamming: m.hamming.filter(|_| rule.simhash),
            jaccard: m.jaccard,
        });
    }
    for doc in docs.iter_mut() {
        let (cluster, removed) = match chosen.get(&doc.doc_id) {
            Some(c) => (Some(c.cluster), true),
            None => match clustered.get(&doc.doc_id) {
                Some(&(cluster, removed)) => (Some(cluster), removed),
                None => (None, false),
            },
        };
        (doc.cluster_id, doc.removed) = (cluster, removed);
    }
    decided
        .rows
        .sort_unstable_by_key(|r| (r.cluster_id, r.doc_id));
    decided
}

/// The unlinked pairs of `links` ([`unlinked_pairs`]) whose documents' sketches (`docs`)
/// pass the run's verification, as pairs.
fn verify_unlinked(
    docs: &[DocEntry],
    ranks: &fxhash::FxHashMap<u64, u64>,
    links: &[Link],
    verify: &Unlinked,
) -> Vec<Link> {
    let probes = unlinked_pairs(ranks, links);
    if probes.is_empty() {
        return Vec::new();
    }
    let at: HashMap<u64, usize> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| (d.doc_id, i))
        .collect();
    // The shingle sets, sorted and without repeats, of the documents probed.
    let mut sets: HashMap<u64, Vec<u64>> = HashMap::new();
    if verify.exact {
        for doc in probes.iter().flat_map(|&(a, b)| [a, b]) {
            sets.entry(doc).or_insert_with(|| {
                let mut set = docs[at[&doc]].shingles.clone().unwrap_or_default();
                set.sort_unstable();
                set.dedup();
                set
            });
        }
    }
    let mut found = Vec::new();
    for (a, b) in probes {
        let similarity = if verify.exact {
            jaccard(&sets[&a], &sets[&b])
        } else {
            jaccard_estimate(&docs[at[&a]].signature, &docs[at[&b]].signature)
        };
        if similarity >= verify.threshold {
            found.push(Link {
                a,
                b,
                kind: LinkKind::Near,
                hamming: 0,
                jaccard: Some(similarity as f32),
            });
        }
    }
    found
}

/// For every new document with a pair with a kept indexed one, the best such one (see the
/// module doc), by new document.
fn best_kept(index: &Index, matches: &[IndexedMatch], rule: &Rule) -> BTreeMap<u64, Chosen> {
    type Key = (Reverse<Option<u32>>, u32, u64, u64);
    let mut best: BTreeMap<u64, (Key, Chosen)> = BTreeMap::new();
    for m in matches {
        let old = index.doc(m.generation, m.row);
        if old.kept != Some(true) {
            continue;
        }
        let rank = indexed_rank(rule.policy, index.generation_keep(m.generation), &old);
        let key = (
            Reverse(m.jaccard.map(f32::to_bits)),
            m.hamming,
            rank.unwrap_or(u64::MAX),
            old.doc_id,
        );
        let chosen = Chosen {
            kept: old.doc_id,
            cluster: old.cluster_id.unwrap_or(old.doc_id as i64),
            hamming: rule.simhash.then_some(m.hamming as u8),
            jaccard: m.jaccard,
        };
        match best.get(&m.doc) {
            Some((held, _)) if *held <= key => {}
            _ => {
                best.insert(m.doc, (key, chosen));
            }
        }
    }
    best.into_iter().map(|(doc, (_, c))| (doc, c)).collect()
}

/// The rows of the indexed clusters new documents joined (`chosen`): every indexed member
/// as the index holds it (a removed one with its cluster's kept document), and the new
/// documents removed for one of them; an indexed document alone until now gets its cluster.
fn joined(
    index: &Index,
    chosen: &BTreeMap<u64, Chosen>,
    rule: &Rule,
    summary: &mut AgainstSummary,
    decided: &mut Decided,
) {
    let mut joining: BTreeMap<i64, Vec<ClusterRow>> = BTreeMap::new();
    for (&doc, c) in chosen {
        joining.entry(c.cluster).or_default().push(ClusterRow {
            doc_id: doc,
            cluster_id: c.cluster,
            cluster_size: 0,
            keep: false,
            kept_doc_id: c.kept,
            hamming: c.hamming,
            jaccard: c.jaccard,
        });
    }
    summary.joined = joining.len() as u64;
    let mut clusters: BTreeMap<i64, Vec<ClusterRow>> = BTreeMap::new();
    for g in 0..index.generations() {
        let policy = index.generation_keep(g);
        for row in 0..index.generation_documents(g) {
            let old = index.doc(g, row as u32);
            let label = old.cluster_id.unwrap_or(old.doc_id as i64);
            if !joining.contains_key(&label) {
                continue;
            }
            summary.unranked += u64::from(indexed_rank(rule.policy, policy, &old).is_none());
            if old.cluster_id.is_none() {
                decided.changes.push((old.doc_id, label));
            }
            clusters.entry(label).or_default().push(ClusterRow {
                doc_id: old.doc_id,
                cluster_id: label,
                cluster_size: 0,
                keep: old.kept == Some(true),
                kept_doc_id: old.doc_id,
                hamming: None,
                jaccard: None,
            });
        }
    }
    for (label, rows) in &mut clusters {
        // The cluster's kept document: the one new documents joined (the smallest, should
        // an index hold a cluster of several).
        let kept = rows
            .iter()
            .filter(|r| r.keep)
            .map(|r| r.doc_id)
            .min()
            .expect("a joined cluster has a kept document");
        for r in rows.iter_mut().filter(|r| !r.keep) {
            r.kept_doc_id = kept;
        }
        rows.append(joining.get_mut(label).expect("a joined cluster"));
        let size = rows.len() as u32;
        for r in rows.iter_mut() {
            r.cluster_size = size;
        }
    }
    decided.rows.extend(clusters.into_values().flatten());
}
