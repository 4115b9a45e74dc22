//! The indexed members of the clusters a batch joined, found by one scan of the index.
//!
//! Both rules end the same way: some indexed clusters (or indexed documents alone) were
//! joined by new documents, and every indexed member of each must be found, to be written
//! as a row of its cluster and to have its cluster or decision changed. The index has no
//! map from a cluster to its members, so the step scans every indexed document once.
//!
//! The simple version holds the joined clusters in a sorted `Vec` and looks each scanned
//! document's cluster up in it: 16 bytes a joined cluster, which grows with the batch. Here
//! the joined clusters stay in a sorted file on disk ([`members`]'s `joined`), and the scan
//! asks a Bloom filter of them instead (about 2 bytes a joined cluster, never more than its
//! share of the memory: [`FILTER_BITS_PER_KEY`]). A document that passes goes to a sort by
//! its cluster, whose merge is joined with the sorted file: the filter's false positives
//! find no partner there and are dropped. A full filter only lets more documents through;
//! the answer never depends on it.

use std::io;

use fastbloom::BloomFilter;
use neardup_core::mix::mix64;
use neardup_io::index::run::SortMemory;
use neardup_io::index::Index;
use neardup_io::spill::{Merged, SortStats, SortedFile, SortedReader, SpillRecord};
use serde::{Deserialize, Serialize};

use super::{indexed_rank, node, release_now};
use crate::config::KeepPolicy;
use crate::operators::sort::ordered_by;

/// Bits of the filter a joined cluster: with the hashes the filter picks for them, about
/// 0.5% of the other indexed documents pass it (a false positive costs a record in the
/// candidates' sort, some 40 bytes of disk).
pub(super) const FILTER_BITS_PER_KEY: usize = 12;

/// The filter's smallest size in bits (a few joined clusters), where its share allows.
const FILTER_MIN_BITS: usize = 1 << 12;

/// An indexed document as the rules need it: the node it stands for (its cluster, itself
/// when alone: [`node`]), its doc number, its cluster, its recorded keep decision and its
/// keep rank under the run's policy ([`indexed_rank`]).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(super) struct IndexedMember {
    pub node: u64,
    pub doc: u64,
    pub cluster: Option<i64>,
    pub kept: Option<bool>,
    pub rank: Option<u64>,
}

ordered_by!(IndexedMember, |m| (m.node, m.doc));
impl SpillRecord for IndexedMember {}

/// The name of the candidates' sort in the run's summary.
pub(super) const CANDIDATES: &str = "against indexed candidates";

/// Every indexed document of the nodes in `joined` (sorted by `key`, a node any number of
/// times), by node then doc number, each with the first record of its node in `joined`;
/// and the number of distinct nodes. `policy`: the run's keep policy (the members' ranks);
/// `memory`: the filter's and the candidates' sort's (half each). Simply: a scan of the
/// index looking each document's node up in a sorted `Vec` of `joined`.
pub(super) fn members<T: SpillRecord + Copy>(
    index: &Index,
    joined: &SortedFile<T>,
    key: fn(&T) -> u64,
    policy: &KeepPolicy,
    memory: &SortMemory,
) -> io::Result<Members<T>> {
    // Sized for every record of `joined` (a node may come more than once), within its half.
    let records = joined.stats().records;
    let bits = (records as usize)
        .saturating_mul(FILTER_BITS_PER_KEY)
        .max(FILTER_MIN_BITS)
        .min(memory.budget.saturating_mul(4))
        .max(64);
    let mut filter = BloomFilter::with_num_bits(bits).expected_items(records.max(1) as usize);
    let (mut nodes, mut last) = (0, None);
    for t in joined.records()? {
        let n = key(&t?);
        if last != Some(n) {
            filter.insert_hash(mix64(n));
            (nodes, last) = (nodes + 1, Some(n));
        }
    }
    let mut candidates = memory.part(0.5, "indexed").sort();
    for g in 0..index.generations() {
        let generation_keep = index.generation_keep(g);
        for row in 0..index.generation_documents(g) {
            release_now(index, row);
            let old = index.doc(g, row as u32);
            let n = node(old.cluster_id, old.doc_id);
            // A document a later generation deleted (`neardup serve`) is in no cluster.
            if !filter.contains_hash(mix64(n)) || index.is_deleted(old.doc_id) {
                continue;
            }
            candidates.push(IndexedMember {
                node: n,
                doc: old.doc_id,
                cluster: old.cluster_id,
                kept: old.kept,
                rank: indexed_rank(policy, generation_keep, &old),
            })?;
        }
    }
    drop(filter);
    Ok(Members {
        candidates: candidates.finish()?,
        joined: joined.records()?.peekable(),
        key,
        nodes,
    })
}

/// The indexed members of the joined nodes, as [`members`] finds them: an iterator of each
/// with its node's record.
pub(super) struct Members<T: SpillRecord> {
    candidates: Merged<IndexedMember>,
    joined: std::iter::Peekable<SortedReader<T>>,
    key: fn(&T) -> u64,
    nodes: u64,
}

impl<T: SpillRecord + Copy> Members<T> {
    /// The number of distinct joined nodes.
    pub fn nodes(&self) -> u64 {
        self.nodes
    }

    /// What the candidates' sort did.
    pub fn stats(&self) -> SortStats {
        self.candidates.stats()
    }
}

impl<T: SpillRecord + Copy> Iterator for Members<T> {
    type Item = io::Result<(T, IndexedMember)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let m = match self.candidates.next()? {
                Ok(m) => m,
                Err(e) => return Some(Err(e)),
            };
            // The joined records before the candidate's node are passed; the first of its
            // node stays for the node's other members.
            loop {
                match self.joined.peek() {
                    None => return None,
                    Some(Err(_)) => return self.joined.next().map(|e| Err(e.err().unwrap())),
                    Some(Ok(t)) if (self.key)(t) < m.node => {
                        self.joined.next();
                    }
                    Some(Ok(t)) if (self.key)(t) == m.node => return Some(Ok((*t, m))),
                    Some(Ok(_)) => break,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index of two generations of 300 documents each: every third in a cluster (of a
    /// few), the rest alone; the second generation moves some of the first's into its
    /// clusters (cluster changes, which the scan reads through).
    fn two_generations(dir: &std::path::Path) -> Index {
        use neardup_io::index::{DocEntry, IndexSpec, IndexWriter, NewGeneration, FILE_SHIFT};
        let spec = IndexSpec {
            scheme: "simhash-doc".into(),
            fingerprint: serde_json::json!({"test": true}),
            design: neardup_core::TableDesign::for_k(3).unwrap(),
            minhash: None,
        };
        let mut writer = IndexWriter::create(dir, &spec).unwrap();
        for file in 0..2u64 {
            let docs = (0..300u64)
                .map(|i| {
                    let doc = (file << FILE_SHIFT) + i;
                    let cluster = i
                        .is_multiple_of(3)
                        .then(|| ((file << FILE_SHIFT) + i / 9 * 9) as i64);
                    DocEntry {
                        doc_id: doc,
                        source: "t.jsonl".into(),
                        simhash: mix64(doc),
                        cluster_id: cluster,
                        ..Default::default()
                    }
                })
                .collect();
            let cluster_changes = match file {
                0 => Vec::new(),
                _ => (0..300u64)
                    .step_by(7)
                    .map(|i| (i, (FILE_SHIFT + 9) as i64))
                    .collect(),
            };
            (writer.add(NewGeneration {
                files: 1,
                docs,
                cluster_changes,
                keep: None,
                decisions: None,
            }))
            .unwrap();
        }
        drop(writer);
        Index::open(dir, neardup_io::index::Verify::Checksums).unwrap()
    }

    /// The filter and the join keep exactly the documents whose node is joined, as a sorted
    /// lookup does (the simple version), with and without spilling, the filter at its
    /// smallest (almost every document passes) and sized to the nodes.
    #[test]
    fn members_are_those_of_a_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let index = two_generations(&dir.path().join("index"));
        let all: Vec<(u64, u64)> = (0..index.generations())
            .flat_map(|g| {
                let index = &index;
                (0..index.generation_documents(g)).map(move |r| {
                    let d = index.doc(g, r as u32);
                    (node(d.cluster_id, d.doc_id), d.doc_id)
                })
            })
            .collect();
        let nodes: Vec<u64> = {
            let mut n: Vec<u64> = all.iter().map(|a| a.0).collect();
            n.sort_unstable();
            n.dedup();
            n
        };
        for (every, budget) in [(1, usize::MAX), (3, 1 << 10), (2, 64)] {
            let mut joined: Vec<(u64, u64)> = (nodes.iter().step_by(every))
                .flat_map(|&n| [(n, 1), (n, 2)])
                .collect();
            joined.push((u64::MAX - 1, 0)); // joined by no indexed document
            joined.sort_unstable();
            let memory = SortMemory {
                budget,
                dir: dir.path().join(format!("spill{every}")),
            };
            let mut sort = memory.part(0.1, "joined").sort();
            for &j in &joined {
                sort.push(j).unwrap();
            }
            let sealed = sort.seal().unwrap();
            let found = members(&index, &sealed, |j| j.0, &KeepPolicy::First, &memory).unwrap();
            assert_eq!(
                found.nodes(),
                nodes.iter().step_by(every).count() as u64 + 1
            );
            let found: Vec<(u64, u64, u64)> = found
                .map(|m| m.map(|(j, m)| (m.node, m.doc, j.1)).unwrap())
                .collect();
            let joined_nodes: std::collections::BTreeSet<u64> =
                joined.iter().map(|j| j.0).collect();
            let mut oracle: Vec<(u64, u64, u64)> = (all.iter())
                .filter(|a| joined_nodes.contains(&a.0))
                .map(|&(n, d)| (n, d, 1))
                .collect();
            oracle.sort_unstable();
            assert!(!oracle.is_empty());
            assert_eq!(found, oracle, "every {every}th node, budget {budget}");
        }
    }
}
