//! `--against` under connected components (`--cluster components`), on disk.
//!
//! The batch's pairs and its pairs with indexed documents join the indexed clusters: each
//! indexed cluster (or indexed document alone) is one node of the graph, named by its id,
//! each new document in a pair another. A component of the graph is one cluster, named by
//! its smallest node (a merge takes the smaller id), and keeps its smallest keep key.
//!
//! The simple version joins the pairs in a union-find as they are found, maps every node to
//! its component's smallest, gathers each component's members in a map (the indexed ones
//! by one scan of the index) and decides each. All of that grows with the documents in a
//! pair. Here:
//!
//! 1. Every edge goes to a sort as it is found, and its two nodes to one of their own
//!    ([`Graph`]).
//! 2. The components are found as the run finds its own
//!    ([`crate::stages::components::Labelling`]: a union-find of 13 bytes a node up to its
//!    share of the memory, else by sorting); each node, asked in ascending order, goes with
//!    its component to a sort by component, whose walk gives each node its component's
//!    smallest node, its label, into a sort by node ([`Graph::labels`]).
//! 3. That sort is walked once: the indexed nodes come first (the batch's numbers come after
//!    every indexed one) and go with their labels to a sort of their own, whose members one
//!    scan of the index finds ([`super::indexed::members`]); the new documents come next,
//!    beside the held documents (by doc number), each to a sort of members by label and
//!    keep key ([`Member`]). The scan of the index adds the indexed members, and the
//!    indexed documents' changes and the merged clusters go to sorts.
//! 4. The members' sort is walked one component at a time: its first member is the kept
//!    one; the rows, the new documents' decisions and the indexed documents' changed
//!    decisions follow ([`decide`]).

use std::io;

use neardup_io::index::run::SortMemory;
use neardup_io::index::Index;
use neardup_io::parquet_out::ClusterRow;
use neardup_io::spill::{ExternalSort, SortedFile, SpillRecord};
use serde::{Deserialize, Serialize};

use super::links::{each_group, Decision, Held, HeldCursor, Sorted};
use super::{indexed, AgainstKeep, AgainstSummary, Decided};
use crate::operators::sort::ordered_by;
use crate::stages::components::{Labelling, UNION_FIND_BYTES};

/// The order in which `neardup run --against` keeps the documents of a cluster (smallest
/// first): new after indexed (without `--keep`), the rank, the doc number.
type KeepKey = (bool, u64, u64);

/// The shares of the graph's memory: the edges' sort, the nodes', each of the steps of the
/// components on disk, the sorts by component and by node, the members'; the union-find.
const EDGES_SHARE: f64 = 0.1;
const NODES_SHARE: f64 = 0.05;
const STEP_SHARE: f64 = 0.1;
const UNION_FIND_SHARE: f64 = 0.4;
/// The shares of the indexed nodes' sort and of the scan for their members (its filter and
/// its sort).
const JOINED_SHARE: f64 = 0.02;
const MEMBERS_SHARE: f64 = 0.1;

/// The graph of the batch's pairs and its pairs with indexed documents, gathered until every
/// pair is in (module docs, step 1).
pub(super) struct Graph {
    edges: ExternalSort<(u64, u64)>,
    nodes: ExternalSort<u64>,
    memory: SortMemory,
}

impl Graph {
    /// No edges yet; the graph's sorts take `memory`.
    pub fn new(memory: SortMemory) -> Graph {
        Graph {
            edges: memory.part(EDGES_SHARE, "edges").sort(),
            nodes: memory.part(NODES_SHARE, "nodes").sort(),
            memory,
        }
    }

    /// Adds the edge between the nodes `a` and `b`.
    pub fn add(&mut self, a: u64, b: u64) -> io::Result<()> {
        self.nodes.push(a)?;
        self.nodes.push(b)?;
        self.edges.push((a, b))
    }

    /// Each node with its label (its component's smallest node), in a sort by node (module
    /// docs, step 2); what the sorts did. Simply: `UnionFind::components_by_min`.
    fn labels(self) -> io::Result<(Labels, Vec<Sorted>)> {
        let memory = self.memory;
        let nodes = self.nodes.seal()?;
        let edges = self.edges.finish()?;
        let mut sorts = vec![
            ("against graph nodes", nodes.stats()),
            ("against graph edges", edges.stats()),
        ];
        let fits = memory.share(UNION_FIND_SHARE).budget / UNION_FIND_BYTES;
        let (large, small) = (
            memory.part(STEP_SHARE, "components (large)"),
            memory.part(STEP_SHARE, "components (small)"),
        );
        let steps = |l: bool| if l { large.sort() } else { small.sort() };
        let mut labelling = Labelling::new(nodes.records()?, fits, steps)?;
        for edge in edges {
            let (a, b) = edge?;
            labelling.join(a, b)?;
        }
        if let Some(rounds) = labelling.joined()? {
            sorts.push(("against graph components (large)", rounds.large));
            sorts.push(("against graph components (small)", rounds.small));
        }
        // (component, node), then each node with its component's smallest.
        let mut by_component = memory.part(STEP_SHARE, "by component").sort();
        let mut last = None;
        for n in nodes.records()? {
            let n = n?;
            if last != Some(n) {
                by_component.push((labelling.component(n)?, n))?;
                last = Some(n);
            }
        }
        drop(labelling);
        let by_component = by_component.finish()?;
        sorts.push(("against graph by component", by_component.stats()));
        let mut labels = memory.part(STEP_SHARE, "labels").sort();
        let mut at: Option<(u64, u64)> = None;
        for c in by_component {
            let (component, n) = c?;
            let label = match at {
                Some((c, label)) if c == component => label,
                _ => n,
            };
            at = Some((component, label));
            labels.push((n, label))?;
        }
        Ok((labels, sorts))
    }
}

/// Each node with its label, sorted by node ([`Graph::labels`]).
type Labels = ExternalSort<(u64, u64)>;

/// A member of a component, sorted by its label then its keep key: the first of each
/// component is kept. `was_kept`: an indexed document's recorded decision (`None` for a new
/// document).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Member {
    label: u64,
    key: KeepKey,
    was_kept: Option<Option<bool>>,
}

ordered_by!(Member, |m| (m.label, m.key));
impl SpillRecord for Member {}

impl Member {
    fn doc(&self) -> u64 {
        self.key.2
    }
}

/// The clusters of the components of `graph`: every new document in a pair (`held`, by doc
/// number) and every indexed document of a component the batch touched gets its row; each
/// new document in a cluster its decision, each indexed one whose cluster or decision
/// changed its change (all in `decided`). An error is a sort's.
pub(super) fn decide(
    index: &Index,
    (graph, held): (Graph, &SortedFile<Held>),
    keep: &AgainstKeep,
    (summary, shift): (&mut AgainstSummary, u64),
    mut decided: Decided,
) -> io::Result<Decided> {
    let memory = graph.memory.clone();
    let key = |new: bool, rank: Option<u64>, doc: u64| {
        let rank = rank.unwrap_or(u64::MAX);
        (new && !keep.given, rank, doc)
    };
    let (labels, sorts) = graph.labels()?;
    decided.sorts.extend(sorts);
    let labels = labels.finish()?;
    decided.sorts.push(("against graph labels", labels.stats()));
    // The indexed nodes, to a sort of their own; the new documents, to the members.
    let mut members = memory.part(STEP_SHARE, "members").sort();
    let mut joined = memory.part(JOINED_SHARE, "joined").sort::<(u64, u64)>();
    let mut docs = HeldCursor::new(held)?;
    for l in labels {
        let (n, label) = l?;
        if n < shift {
            joined.push((n, label))?;
            continue;
        }
        let doc = docs.get(n)?;
        members.push(Member {
            label,
            key: key(true, doc.rank, n),
            was_kept: None,
        })?;
    }
    let joined = joined.seal()?;
    decided.sorts.push(("against joined", joined.stats()));
    // The indexed members, by one scan of the index.
    let memory_of_scan = memory.part(MEMBERS_SHARE, "indexed");
    let mut indexed = indexed::members(index, &joined, |j| j.0, &keep.policy, &memory_of_scan)?;
    summary.joined = indexed.nodes();
    let mut merged = None;
    for m in indexed.by_ref() {
        let ((_, l), old) = m?;
        summary.unranked += u64::from(old.rank.is_none());
        members.push(Member {
            label: l,
            key: key(false, old.rank, old.doc),
            was_kept: Some(old.kept),
        })?;
        if old.cluster != Some(l as i64) {
            decided.changes.push((old.doc, l as i64))?;
        }
        // A cluster's members come together (by node): its merge is pushed once.
        if let Some(c) = old.cluster.filter(|&c| c as u64 != l && merged != Some(c)) {
            decided.merges.push((c, l as i64))?;
            summary.merges += 1;
            merged = Some(c);
        }
    }
    decided.sorts.push((indexed::CANDIDATES, indexed.stats()));
    drop(indexed);
    let members = members.finish()?;
    decided
        .sorts
        .push(("against graph members", members.stats()));
    each_group(
        members,
        |a, b| a.label == b.label,
        |c| cluster(c, &mut decided),
    )?;
    Ok(decided)
}

/// One component's cluster, its `members` sorted by keep key: the rows, the new documents'
/// decisions and the indexed ones' changed decisions.
fn cluster(members: &[Member], decided: &mut Decided) -> io::Result<()> {
    let kept = members[0].doc();
    for m in members {
        let d = m.doc();
        match m.was_kept {
            Some(was) if was != Some(d == kept) => decided.decisions.push((d, d == kept))?,
            Some(_) => {}
            None => {
                decided.removed += u64::from(d != kept);
                decided.new_docs.push(Decision {
                    doc: d,
                    cluster: m.label as i64,
                    removed: d != kept,
                })?;
            }
        }
        decided.rows.push(ClusterRow {
            doc_id: d,
            cluster_id: m.label as i64,
            cluster_size: members.len() as u32,
            keep: d == kept,
            kept_doc_id: kept,
            hamming: None,
            jaccard: None,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_core::mix::mix64;
    use neardup_core::unionfind::UnionFind;

    /// Each node's label ([`Graph::labels`]) is its component's smallest node, as the union-
    /// find labels them (the simple version), in memory and with every sort spilled and the
    /// components found on disk; repeated edges and both directions included.
    #[test]
    fn labels_are_the_union_finds_smallest() {
        for (seed, nodes, edges) in [(1, 50, 20), (2, 400, 300), (3, 300, 900), (4, 30, 200)] {
            let graph: Vec<(u64, u64)> = (0..edges)
                .map(|i| {
                    let r = mix64(seed * 1_000_003 + i);
                    (r % nodes * 5 + 2, (r >> 32) % nodes * 5 + 2)
                })
                .collect();
            let mut uf = UnionFind::new();
            for &(a, b) in &graph {
                uf.union(a, b);
            }
            let oracle = uf.components_by_min();
            for budget in [usize::MAX, 1 << 9] {
                let dir = tempfile::tempdir().unwrap();
                let memory = SortMemory {
                    budget,
                    dir: dir.path().join("graph"),
                };
                let mut g = Graph::new(memory);
                for &(a, b) in &graph {
                    g.add(a, b).unwrap();
                }
                let (labels, sorts) = g.labels().unwrap();
                let on_disk = sorts.iter().any(|s| s.0.contains("(large)"));
                assert_eq!(on_disk, budget != usize::MAX, "seed {seed}");
                let found: Vec<(u64, u64)> = labels.finish().unwrap().map(Result::unwrap).collect();
                assert_eq!(found, oracle, "seed {seed}, budget {budget}");
            }
        }
    }
}
