//! Connected components on disk, for duplicate graphs whose documents do not fit in memory.
//!
//! The simple version is a union-find over the graph's documents
//! ([`neardup_core::unionfind::SortedUnionFind`], 13 bytes a document): it grows with the
//! documents that have a duplicate, the one state of the clusters that did. Where it would
//! take more than its share of the limit, the components are found by sorting instead, with
//! the *alternating* algorithm of Kiveris, Lattanzi, Mirrokni, Rastogi and Vassilvitskii
//! ("Connected Components in MapReduce and Beyond", SoCC 2014). The graph is kept as its
//! edges in both directions, sorted by `(node, neighbour)`, so that every node's neighbours
//! come together, smallest first. Each round rewrites the edges twice:
//!
//! - **large star**: a node `u` whose smallest neighbour `m` is smaller than itself
//!   (`m = u` otherwise) hands each neighbour `v > u` over to `m`: the edge `{u, v}`
//!   becomes `{v, m}`;
//! - **small star**: a node `u` with neighbours smaller than itself, the smallest `m`,
//!   hands itself and those neighbours over to `m`: each edge `{u, v}` with `v < u` becomes
//!   `{v, m}`, and `{u, m}` stays.
//!
//! Neither step changes which documents are connected, and each needs of a node only its
//! first neighbour, so a step is one pass over the sorted edges into the next sort. When a
//! round changes no edge (no node has both a smaller and a larger neighbour, and none has
//! two smaller ones), every component is a star around its smallest document: a document's
//! component is its one smaller neighbour, or itself where it has none. The paper bounds
//! the rounds by O(log² n); a path of 2,000 documents in random order takes 10
//! (`components_on_disk_are_the_union_finds`).
//!
//! What is held at once: two sorts' budgets (the one read from and the one written).
//! Disk: the edges twice in each direction, 16 bytes each (about 64 bytes an edge).

use std::io;
use std::iter::Peekable;

use neardup_core::unionfind::SortedUnionFind;
use neardup_io::spill::{ExternalSort, Merged, SortStats, SortedFile, SortedReader};

/// The graph's edges, gathered for [`ComponentsOnDisk::finish`].
pub struct ComponentsOnDisk<F> {
    edges: ExternalSort<(u64, u64)>,
    /// A new, empty sort for a step's edges: `true` for the large step's input.
    sort: F,
}

/// What the rounds did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rounds {
    pub rounds: u32,
    /// The sorts of the large and the small steps, added up over the rounds.
    pub large: SortStats,
    pub small: SortStats,
}

impl<F: FnMut(bool) -> ExternalSort<(u64, u64)>> ComponentsOnDisk<F> {
    /// Components of the edges to come; `sort(large)` makes the sort that holds a large
    /// (`true`) or small step's input. The two must not share a directory: one is written
    /// while the other is read.
    pub fn new(mut sort: F) -> Self {
        ComponentsOnDisk {
            edges: sort(true),
            sort,
        }
    }

    /// Adds the edge `{a, b}` (an edge from a document to itself adds nothing).
    pub fn add(&mut self, a: u64, b: u64) -> io::Result<()> {
        if a != b {
            self.edges.push((a, b))?;
            self.edges.push((b, a))?;
        }
        Ok(())
    }

    /// Runs the rounds until no edge changes; returns each document's component.
    pub fn finish(mut self) -> io::Result<(Labels, Rounds)> {
        let mut rounds = Rounds::default();
        let mut edges = self.edges;
        loop {
            rounds.rounds += 1;
            let mut small = (self.sort)(false);
            let merged = edges.finish()?;
            add(&mut rounds.large, merged.stats());
            let changed_large = step(merged, &mut small, true)?;
            let mut next = (self.sort)(true);
            let merged = small.finish()?;
            add(&mut rounds.small, merged.stats());
            let changed_small = step(merged, &mut next, false)?;
            if !(changed_large || changed_small) {
                // The last large step's input is never read by one: it is the stars, sealed.
                add(&mut rounds.large, next.stats());
                return Ok((
                    Labels {
                        stars: next.seal()?,
                    },
                    rounds,
                ));
            }
            edges = next;
        }
    }
}

/// Adds one sort's stats to the rounds' `total`.
fn add(total: &mut SortStats, one: SortStats) {
    total.budget_bytes = one.budget_bytes;
    total.records += one.records;
    total.runs += one.runs;
    total.spilled_bytes += one.spilled_bytes;
}

/// One step over `edges` (sorted, both directions, maybe repeated) into `out`, the large
/// one or the small one (module docs); returns whether it changed an edge. A node's
/// neighbours come smallest first, and each step needs only the first of them to know where
/// the others go: they are handed over as they come, none held.
fn step(
    edges: Merged<(u64, u64)>,
    out: &mut ExternalSort<(u64, u64)>,
    large: bool,
) -> io::Result<bool> {
    let mut changed = false;
    // The node whose neighbours are coming, its first (smallest) and last neighbour, and
    // how many were smaller than it.
    let mut at: Option<(u64, u64, u64, u64)> = None;
    let mut emit = |a: u64, b: u64| -> io::Result<()> {
        out.push((a, b))?;
        out.push((b, a))
    };
    for edge in edges {
        let (u, v) = edge?;
        let (first, smaller) = match at {
            Some((node, _, last, _)) if node == u && last == v => continue, // repeated
            Some((node, first, _, smaller)) if node == u => (first, smaller),
            _ => (v, 0),
        };
        if large {
            // Each larger neighbour goes to the smallest of the node and its neighbours.
            let m = first.min(u);
            if v > u {
                emit(v, m)?;
                changed |= m < u;
            }
        } else if v < u {
            // The node and each smaller neighbour go to its smallest neighbour.
            if smaller == 0 {
                emit(u, v)?;
            } else {
                emit(v, first)?;
                changed = true;
            }
        }
        at = Some((u, first, v, smaller + u64::from(v < u)));
    }
    Ok(changed)
}

/// Each document's component once the rounds are done: the stars, each edge in both
/// directions, sorted.
pub struct Labels {
    stars: SortedFile<(u64, u64)>,
}

impl Labels {
    /// A reader of the components, for documents asked in ascending order.
    pub fn cursor(&self) -> io::Result<Cursor> {
        Ok(Cursor {
            stars: self.stars.records()?.peekable(),
        })
    }
}

/// Reads [`Labels`] for documents in ascending order.
pub struct Cursor {
    stars: Peekable<SortedReader<(u64, u64)>>,
}

impl Cursor {
    /// The component of `doc` (its smallest document), `doc` not smaller than the one
    /// asked before.
    pub fn component(&mut self, doc: u64) -> io::Result<u64> {
        while let Some(next) = self.stars.peek() {
            match next {
                Ok((u, _)) if *u < doc => {
                    self.stars.next();
                }
                Ok((u, v)) if *u == doc && *v < doc => return Ok(*v),
                Ok(_) => return Ok(doc),
                Err(_) => {
                    return Err(self
                        .stars
                        .next()
                        .and_then(Result::err)
                        .expect("the error just seen"))
                }
            }
        }
        Ok(doc)
    }
}

/// Bytes a document takes in the union-find ([`SortedUnionFind`]: its id, its parent's
/// index and a rank).
pub const UNION_FIND_BYTES: usize = 13;

/// Each document's component, by whichever fits: a union-find over the documents where
/// they fit its budget, else [`ComponentsOnDisk`]. Simply: one
/// [`neardup_core::unionfind::UnionFind`] (about 50 bytes a document, however many).
///
/// Made from the graph's documents, sorted; then every edge is joined
/// ([`Labelling::join`]); then the documents are asked their component in ascending order
/// ([`Labelling::component`]), again from the smallest after [`Labelling::rewind`].
pub struct Labelling<F> {
    state: State<F>,
}

enum State<F> {
    InMemory(SortedUnionFind),
    Gathering(ComponentsOnDisk<F>),
    OnDisk(Labels, Cursor),
    /// Between two of the others, while the rounds run.
    Moving,
}

impl<F: FnMut(bool) -> ExternalSort<(u64, u64)>> Labelling<F> {
    /// The components of the documents `documents` (sorted, repeats allowed): a union-find
    /// where at most `fits` distinct ones come, else on disk with the sorts of `sort` (see
    /// [`ComponentsOnDisk::new`]).
    pub fn new(
        documents: impl Iterator<Item = io::Result<u64>>,
        fits: usize,
        sort: F,
    ) -> io::Result<Self> {
        let mut ids = Vec::new();
        let mut fitted = true;
        for id in documents {
            let id = id?;
            if ids.last() != Some(&id) {
                if ids.len() == fits {
                    (ids, fitted) = (Vec::new(), false);
                    break;
                }
                ids.push(id);
            }
        }
        let state = match fitted {
            true => State::InMemory(SortedUnionFind::new(ids)),
            false => State::Gathering(ComponentsOnDisk::new(sort)),
        };
        Ok(Labelling { state })
    }

    /// Whether the components are found on disk.
    pub fn on_disk(&self) -> bool {
        !matches!(self.state, State::InMemory(_))
    }

    /// Joins the documents of the edge `{a, b}` (before any is asked its component).
    pub fn join(&mut self, a: u64, b: u64) -> io::Result<()> {
        match &mut self.state {
            State::InMemory(uf) => {
                uf.union(a, b);
                Ok(())
            }
            State::Gathering(edges) => edges.add(a, b),
            _ => panic!("an edge joined after a component was asked"),
        }
    }

    /// Every edge is in: where the components are on disk, runs their rounds (and returns
    /// what they did). Asking a component does it too.
    pub fn joined(&mut self) -> io::Result<Option<Rounds>> {
        if !matches!(self.state, State::Gathering(_)) {
            return Ok(None);
        }
        let State::Gathering(edges) = std::mem::replace(&mut self.state, State::Moving) else {
            unreachable!("matched above")
        };
        let (labels, rounds) = edges.finish()?;
        let cursor = labels.cursor()?;
        self.state = State::OnDisk(labels, cursor);
        Ok(Some(rounds))
    }

    /// The component of `doc` (a document of it), `doc` not smaller than the one asked
    /// before since the last [`Labelling::rewind`].
    pub fn component(&mut self, doc: u64) -> io::Result<u64> {
        self.joined()?;
        match &mut self.state {
            State::InMemory(uf) => Ok(uf.find(doc)),
            State::OnDisk(_, cursor) => cursor.component(doc),
            _ => Err(io::Error::other("the components on disk failed before")),
        }
    }

    /// Documents are asked from the smallest again.
    pub fn rewind(&mut self) -> io::Result<()> {
        if let State::OnDisk(labels, cursor) = &mut self.state {
            *cursor = labels.cursor()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_core::mix::mix64;
    use neardup_core::unionfind::UnionFind;

    /// Each document of `edges` with its component, found on disk with sorts of `budget`
    /// bytes, and the rounds it took.
    fn on_disk(edges: &[(u64, u64)], budget: usize) -> (Vec<(u64, u64)>, u32) {
        let dir = tempfile::tempdir().unwrap();
        // As a worker's sorts: the last one removed takes their parent with it.
        let sorts = dir.path().join("sorts");
        let (large, small) = (sorts.join("large"), sorts.join("small"));
        let mut cc = ComponentsOnDisk::new(|l| {
            ExternalSort::new(if l { large.clone() } else { small.clone() }, budget)
        });
        for &(a, b) in edges {
            cc.add(a, b).unwrap();
        }
        let (labels, rounds) = cc.finish().unwrap();
        let mut docs: Vec<u64> = edges.iter().flat_map(|&(a, b)| [a, b]).collect();
        docs.sort_unstable();
        docs.dedup();
        let mut cursor = labels.cursor().unwrap();
        let found = docs
            .iter()
            .map(|&d| (d, cursor.component(d).unwrap()))
            .collect();
        drop((cursor, labels));
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "every run file and directory removed"
        );
        (found, rounds.rounds)
    }

    /// The simple version: a union-find, each document labelled with its set's smallest.
    fn oracle(edges: &[(u64, u64)]) -> Vec<(u64, u64)> {
        let mut uf = UnionFind::new();
        for &(a, b) in edges {
            uf.union(a, b);
        }
        uf.components_by_min()
    }

    #[test]
    fn components_on_disk_are_the_union_finds() {
        // A path of 2,000 documents whose ids are in random order: the longest chains.
        let ids: Vec<u64> = (0..2000).map(|i| mix64(i) >> 8).collect();
        let path: Vec<(u64, u64)> = ids.windows(2).map(|w| (w[0], w[1])).collect();
        let (found, rounds) = on_disk(&path, 1 << 10);
        assert_eq!(found, oracle(&path));
        assert!(found.iter().all(|&(_, c)| c == *ids.iter().min().unwrap()));
        assert_eq!(rounds, 10, "the rounds the module docs give");
        // Random graphs from sparse (many components) to dense (one), edges repeated and in
        // both directions, at budgets from a few edges a run to all in memory.
        for (seed, nodes, edges) in [(1, 50, 20), (2, 300, 250), (3, 300, 600), (4, 40, 400)] {
            let graph: Vec<(u64, u64)> = (0..edges)
                .map(|i| {
                    let r = mix64(seed * 1_000_003 + i);
                    (r % nodes * 7 + 3, (r >> 32) % nodes * 7 + 3)
                })
                .collect();
            let with_loops: Vec<(u64, u64)> = graph.iter().copied().chain([(3, 3)]).collect();
            for budget in [64, 1 << 10, usize::MAX] {
                let (found, _) = on_disk(&with_loops, budget);
                assert_eq!(found, oracle(&with_loops), "seed {seed}, budget {budget}");
            }
        }
        // A star of 5,000 leaves around its largest document, and a complete graph.
        let star: Vec<(u64, u64)> = (0..5000).map(|i| (10_000, i)).collect();
        assert_eq!(on_disk(&star, 1 << 10).0, oracle(&star));
        let complete: Vec<(u64, u64)> = (0..60)
            .flat_map(|a| (0..60).filter(move |&b| b != a).map(move |b| (a, b)))
            .collect();
        assert_eq!(on_disk(&complete, 1 << 12).0, oracle(&complete));
    }
}
