//! Near-duplicate clusters kept up to date while documents arrive, change and go.
//!
//! The simple version: after every change, run union-find over the edges of every document
//! present and label each component with its smallest document number (what the batch job
//! does once, `stages/clusters.rs`). A service answering thousands of requests a second
//! cannot redo that per request, and cannot do it incrementally either: union-find only
//! merges, and a replaced or deleted document that held a cluster together (a bridge) must
//! split it again.
//!
//! Differential dataflow maintains the same labels under additions *and* retractions: the
//! linked documents enter as `(doc, doc)` labels, the edges in both directions, and
//! `propagate` (minimum-label propagation to a fixed point) keeps, for every document, the
//! smallest document number it is connected to. Each [`LiveClusters::commit`] advances the
//! input by one step and runs until that step is done; differential then does work in
//! proportion to what changed, and reports only the labels that changed, which are applied
//! to a plain map that queries read ([`LiveClusters::cluster_of`]).
//!
//! **Only linked documents are held.** A document without an edge is a cluster of its own,
//! and most documents of a crawl's index are: it costs nothing here. A document enters the
//! dataflow with its first edge and leaves it with its last, so memory and the work of a
//! start-up grow with the clustered documents, not with the index. The caller knows which
//! documents are present and links only those.
//!
//! The structure runs one timely worker on the calling thread (it is not `Send`): the
//! service owns it on a thread of its own and sends it the changes.
//!
//! ```
//! use neardup_dataflow::live::clusters::LiveClusters;
//!
//! let mut live = LiveClusters::new();
//! live.add_edge(1, 2);
//! live.add_edge(2, 3);
//! live.commit();
//! assert_eq!(live.cluster_of(3), Some(1));
//! // Document 2 was the bridge: without it, 1 and 3 are alone again.
//! live.remove_document(2);
//! live.commit();
//! assert_eq!((live.cluster_of(1), live.cluster_of(3)), (None, None));
//! ```

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::rc::Rc;

use differential_dataflow::algorithms::graphs::propagate::propagate;
use differential_dataflow::input::InputSession;
use timely::communication::allocator::thread::Thread;
use timely::communication::allocator::Allocator;
use timely::dataflow::operators::probe::Handle as ProbeHandle;
use timely::worker::Worker;

/// What the dataflow reported since the last commit: `((doc, label), diff)`.
type Reported = Rc<RefCell<Vec<((u64, u64), isize)>>>;

/// A label change: the document, its cluster label before and after (`None`: in no cluster
/// of two or more, or not present).
pub type LabelChange = (u64, Option<u64>, Option<u64>);

/// Clusters of the documents present, maintained incrementally (see the module docs).
pub struct LiveClusters {
    worker: Worker,
    nodes: InputSession<u64, (u64, u64), isize>,
    edges: InputSession<u64, (u64, u64), isize>,
    probe: ProbeHandle<u64>,
    /// What the dataflow reported since the last commit: `((doc, label), diff)`.
    reported: Reported,
    /// Each linked document's label: the smallest document number of its cluster.
    labels: HashMap<u64, u64>,
    /// The members of each label's cluster.
    members: HashMap<u64, BTreeSet<u64>>,
    /// The linked documents and their neighbours (the edges, both ways): never an empty
    /// set.
    adjacent: HashMap<u64, HashSet<u64>>,
}

impl Default for LiveClusters {
    fn default() -> Self {
        Self::new()
    }
}

impl LiveClusters {
    /// No documents.
    pub fn new() -> Self {
        let alloc = Allocator::Thread(Thread::default());
        let mut worker = Worker::new(
            timely::WorkerConfig::default(),
            alloc,
            Some(std::time::Instant::now()),
        );
        let mut nodes = InputSession::new();
        let mut edges = InputSession::new();
        let probe = ProbeHandle::new();
        let reported: Reported = Rc::default();
        let sink = reported.clone();
        let probe_in = probe.clone();
        worker.dataflow::<u64, _, _>(|scope| {
            let nodes = nodes.to_collection(scope);
            let edges = edges.to_collection(scope);
            propagate(edges, nodes)
                .consolidate()
                .inspect(move |&((doc, label), _time, diff)| {
                    sink.borrow_mut().push(((doc, label), diff))
                })
                .probe_with(&probe_in);
        });
        LiveClusters {
            worker,
            nodes,
            edges,
            probe,
            reported,
            labels: HashMap::new(),
            members: HashMap::new(),
            adjacent: HashMap::new(),
        }
    }

    /// Removes a document and all its edges (nothing if it has none).
    pub fn remove_document(&mut self, doc: u64) {
        let Some(neighbours) = self.adjacent.remove(&doc) else {
            return;
        };
        for other in neighbours {
            self.unlink_one_way(other, doc);
            self.edges.remove((doc, other));
            self.edges.remove((other, doc));
        }
        self.nodes.remove((doc, doc));
    }

    /// Links two present documents (nothing if they are linked): each enters the
    /// dataflow with its first edge.
    pub fn add_edge(&mut self, a: u64, b: u64) {
        if a == b || self.adjacent.get(&a).is_some_and(|n| n.contains(&b)) {
            return;
        }
        for (x, y) in [(a, b), (b, a)] {
            self.adjacent
                .entry(x)
                .or_insert_with(|| {
                    self.nodes.insert((x, x));
                    HashSet::new()
                })
                .insert(y);
        }
        self.edges.insert((a, b));
        self.edges.insert((b, a));
    }

    /// Unlinks two documents (nothing if they are not linked): each leaves the dataflow
    /// with its last edge.
    pub fn remove_edge(&mut self, a: u64, b: u64) {
        if !self.adjacent.get(&a).is_some_and(|n| n.contains(&b)) {
            return;
        }
        self.unlink_one_way(a, b);
        self.unlink_one_way(b, a);
        self.edges.remove((a, b));
        self.edges.remove((b, a));
    }

    /// Removes `b` from `a`'s neighbours, and `a` from the dataflow if that was its last.
    fn unlink_one_way(&mut self, a: u64, b: u64) {
        if let Some(theirs) = self.adjacent.get_mut(&a) {
            theirs.remove(&b);
            if theirs.is_empty() {
                self.adjacent.remove(&a);
                self.nodes.remove((a, a));
            }
        }
    }

    /// Applies the changes made since the last commit and returns the documents whose
    /// label changed (sorted by document).
    pub fn commit(&mut self) -> Vec<LabelChange> {
        let next = self.nodes.time() + 1;
        self.nodes.advance_to(next);
        self.edges.advance_to(next);
        self.nodes.flush();
        self.edges.flush();
        let (probe, nodes) = (&self.probe, &self.nodes);
        self.worker.step_while(|| probe.less_than(nodes.time()));
        let mut reported = std::mem::take(&mut *self.reported.borrow_mut());
        // Retractions first: a document's old label goes before its new one comes.
        reported.sort_by_key(|&((doc, label), diff)| (diff > 0, doc, label));
        let mut before: HashMap<u64, Option<u64>> = HashMap::new();
        for ((doc, label), diff) in reported {
            before
                .entry(doc)
                .or_insert_with(|| self.labels.get(&doc).copied());
            if diff < 0 {
                if self.labels.get(&doc) == Some(&label) {
                    self.labels.remove(&doc);
                }
                if let Some(m) = self.members.get_mut(&label) {
                    m.remove(&doc);
                    if m.is_empty() {
                        self.members.remove(&label);
                    }
                }
            } else {
                self.labels.insert(doc, label);
                self.members.entry(label).or_default().insert(doc);
            }
        }
        let mut changes: Vec<LabelChange> = before
            .into_iter()
            .map(|(doc, old)| (doc, old, self.labels.get(&doc).copied()))
            .filter(|(_, old, new)| old != new)
            .collect();
        changes.sort_unstable();
        changes
    }

    /// The label of a linked document's cluster (the smallest document number in it), as
    /// of the last commit; `None` for a document alone (or absent).
    pub fn cluster_of(&self, doc: u64) -> Option<u64> {
        self.labels.get(&doc).copied()
    }

    /// The documents of the cluster labelled `label`, in order, as of the last commit.
    pub fn members(&self, label: u64) -> impl Iterator<Item = u64> + '_ {
        self.members.get(&label).into_iter().flatten().copied()
    }

    /// The number of linked documents (in clusters of two or more), as of now.
    pub fn linked(&self) -> usize {
        self.adjacent.len()
    }

    /// The neighbours of a document.
    pub fn neighbours(&self, doc: u64) -> impl Iterator<Item = u64> + '_ {
        self.adjacent.get(&doc).into_iter().flatten().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_core::unionfind::UnionFind;
    use proptest::prelude::*;

    /// The simple version: union-find over the documents present and their edges, from
    /// scratch, each labelled with the smallest document of its component; a document
    /// alone has no label.
    fn from_scratch(present: &BTreeSet<u64>, edges: &BTreeSet<(u64, u64)>) -> HashMap<u64, u64> {
        let mut uf = UnionFind::new();
        for &d in present {
            uf.find(d);
        }
        for &(a, b) in edges {
            uf.union(a, b);
        }
        let mut smallest: HashMap<u64, u64> = HashMap::new();
        let mut size: HashMap<u64, usize> = HashMap::new();
        for &d in present {
            let root = uf.find(d);
            let s = smallest.entry(root).or_insert(d);
            *s = (*s).min(d);
            *size.entry(root).or_default() += 1;
        }
        let mut labels = HashMap::new();
        for &d in present {
            let root = uf.find(d);
            if size[&root] >= 2 {
                labels.insert(d, smallest[&root]);
            }
        }
        labels
    }

    #[derive(Clone, Debug)]
    enum Op {
        Add(u64),
        Remove(u64),
        Link(u64, u64),
        Unlink(u64, u64),
        Commit,
    }

    fn op() -> impl Strategy<Value = Op> {
        let doc = 0u64..12;
        prop_oneof![
            3 => doc.clone().prop_map(Op::Add),
            1 => doc.clone().prop_map(Op::Remove),
            4 => (doc.clone(), doc.clone()).prop_map(|(a, b)| Op::Link(a, b)),
            2 => (doc.clone(), doc).prop_map(|(a, b)| Op::Unlink(a, b)),
            2 => Just(Op::Commit),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// After any sequence of inserts, deletes, links and unlinks (links of present
        /// documents only, as the service makes them), the labels, members and reported
        /// changes equal a from-scratch computation, and only linked documents are held.
        #[test]
        fn labels_equal_a_from_scratch_run_after_every_commit(ops in prop::collection::vec(op(), 1..80)) {
            let mut live = LiveClusters::new();
            let mut present: BTreeSet<u64> = BTreeSet::new();
            let mut edges: BTreeSet<(u64, u64)> = BTreeSet::new();
            let mut seen: HashMap<u64, u64> = HashMap::new();
            for op in ops.into_iter().chain([Op::Commit]) {
                match op {
                    Op::Add(d) => {
                        present.insert(d);
                    }
                    Op::Remove(d) => {
                        present.remove(&d);
                        edges.retain(|&(a, b)| a != d && b != d);
                        live.remove_document(d);
                    }
                    Op::Link(a, b) => {
                        if a != b && present.contains(&a) && present.contains(&b) {
                            edges.insert((a.min(b), a.max(b)));
                            live.add_edge(a, b);
                        }
                    }
                    Op::Unlink(a, b) => {
                        edges.remove(&(a.min(b), a.max(b)));
                        live.remove_edge(a, b);
                    }
                    Op::Commit => {
                        let changes = live.commit();
                        let want = from_scratch(&present, &edges);
                        for d in 0..12 {
                            let label = want.get(&d).copied();
                            prop_assert_eq!(live.cluster_of(d), label, "doc {}", d);
                            if let Some(label) = label {
                                prop_assert!(live.members(label).any(|m| m == d));
                            }
                        }
                        prop_assert_eq!(live.labels.len(), want.len());
                        prop_assert_eq!(live.linked(), want.len());
                        let total: usize = live.members.values().map(|m| m.len()).sum();
                        prop_assert_eq!(total, want.len());
                        // The changes are exactly the difference from the last commit.
                        let mut docs: BTreeSet<u64> = seen.keys().copied().collect();
                        docs.extend(want.keys().copied());
                        let expected: Vec<LabelChange> = docs
                            .into_iter()
                            .map(|d| (d, seen.get(&d).copied(), want.get(&d).copied()))
                            .filter(|(_, a, b)| a != b)
                            .collect();
                        prop_assert_eq!(changes, expected);
                        seen = want;
                    }
                }
            }
        }
    }

    #[test]
    fn a_removed_bridge_splits_its_cluster_and_a_new_one_joins_two() {
        let mut live = LiveClusters::new();
        for (a, b) in [(10, 11), (11, 12), (13, 14), (14, 15)] {
            live.add_edge(a, b);
        }
        live.commit();
        assert_eq!(live.members(10).collect::<Vec<_>>(), [10, 11, 12]);
        assert_eq!(live.members(13).collect::<Vec<_>>(), [13, 14, 15]);
        live.add_edge(12, 13);
        assert_eq!(
            live.commit(),
            [
                (13, Some(13), Some(10)),
                (14, Some(13), Some(10)),
                (15, Some(13), Some(10))
            ]
        );
        live.remove_document(11);
        let changes = live.commit();
        // 10 is alone now: no cluster, and nothing held for it.
        assert_eq!(live.members(10).count(), 0);
        assert_eq!(live.cluster_of(10), None);
        assert_eq!(live.members(12).collect::<Vec<_>>(), [12, 13, 14, 15]);
        assert!(changes.contains(&(11, Some(10), None)));
        assert!(changes.contains(&(10, Some(10), None)));
        assert_eq!(live.linked(), 4);
    }
}
