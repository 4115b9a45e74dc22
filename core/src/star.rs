//! Stars: clusters in which every removed document is a duplicate of the one kept.
//!
//! Connected components join A and C when A~B and B~C, even if A and C have little in
//! common; long chains build giant clusters, and a user who deletes every document but the
//! kept one deletes documents unlike it. In a *star* a document joins a cluster only if it
//! is a duplicate of the cluster's *center*, the document that is kept: every removal is
//! backed by a pair the run verified (an exact pair, a Hamming distance within `k`, a
//! Jaccard similarity at or above the threshold).
//!
//! Which documents become centers decides how many are removed. Two rules:
//!
//! - [`Centers::Coverage`] (`--cluster verified`, the default): as few centers as can be
//!   found, which is a minimum dominating set of the duplicate graph. First the greedy rule:
//!   repeatedly, the unassigned document with the most unassigned neighbours becomes a
//!   center and takes them all (within a factor `ln(degree)` of the optimum; ties go to the
//!   better keep rank, `--keep`, then the smaller `doc_id`). Then, in every connected
//!   component of at most [`EXACT_COVER_UNITS`] units, a branch-and-bound search for fewer
//!   centers (`fewest_cover`, bounded by a count of steps, not by time, so that the
//!   result never depends on the machine). Finally every other document goes to the
//!   center it is most similar to (highest Jaccard similarity, then smallest Hamming
//!   distance, then the center's keep rank).
//! - [`Centers::Rank`] (`--cluster star`): documents are taken in the keep order (smallest
//!   `(rank, doc_id)` first); a document not yet placed becomes a center and every unplaced
//!   neighbour joins it. The kept documents are the keep policy's first choices, and fewer
//!   documents are removed.
//!
//! Documents that are one text are placed together as one *unit*, represented by their
//! best member: exact duplicates (identical normalized text), and in simhash mode documents
//! with one fingerprint (the search lists only their representative's near pairs, and they
//! are exactly as far from every other document). Under [`Centers::Rank`] the captures of
//! one URL are a unit too, as they always were for `--cluster star`; under
//! [`Centers::Coverage`] a `url` pair is not a duplicate by itself (a page that changed is
//! not removed for having the same address), so it does not link.
//!
//! The simple version: for every document, the set of its verified neighbours; try every
//! set of centers, smallest first, until one covers all. [`stars`] is that where it can be
//! afforded (components of up to [`EXACT_COVER_UNITS`] units, searched with pruning), and
//! the greedy rule, with a lazy priority queue, where it cannot; the tests compare it with
//! the enumeration.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use fxhash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::unionfind::UnionFind;

/// Why two documents are linked, as the cluster stage sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    /// The same normalized text.
    Exact,
    /// The same simhash (a group of one fingerprint, linked to its representative).
    SameFingerprint,
    /// A near pair: within `k` bits, or verified at or above the Jaccard threshold.
    Near,
    /// The same normalized URL, whatever the content.
    Url,
}

/// A pair of documents and what the run measured of it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    pub a: u64,
    pub b: u64,
    pub kind: LinkKind,
    /// The Hamming distance of the two simhashes (0 in MinHash mode).
    pub hamming: u8,
    /// The verified Jaccard similarity, when the run verified its pairs.
    pub jaccard: Option<f32>,
}

/// How the centers (the kept documents) are chosen; see the module doc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Centers {
    /// Greedy by the number of unassigned neighbours, then the keep rank.
    Coverage,
    /// By the keep rank alone.
    Rank,
}

/// A clustered document: its cluster (labelled by its smallest `doc_id`), the document kept
/// for it, and how similar the two are (`None` for the kept document itself, and where the
/// run measured no pair between them: a Jaccard similarity within a group of one
/// fingerprint, a capture of one URL under [`Centers::Rank`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Member {
    pub doc: u64,
    pub cluster: u64,
    pub kept: u64,
    pub hamming: Option<u8>,
    pub jaccard: Option<f32>,
}

/// Stars over `links`: every document of a cluster of at least two, sorted by doc. `ranks`
/// holds the keep rank of every document that appears in a link (a missing one ranks
/// last).
pub fn stars(ranks: &HashMap<u64, u64>, links: &[Link], centers: Centers) -> Vec<Member> {
    let graph = Graph::new(ranks, links, centers);
    let chosen = match centers {
        Centers::Coverage => graph.by_coverage(),
        Centers::Rank => graph.by_rank(),
    };
    graph.members(chosen)
}

/// One connected component as one cluster (`--cluster components`): every document of
/// `ranks` (all of one component, at least two), labelled by its smallest `doc_id`, with the
/// smallest `(rank, doc_id)` kept for all. Sorted by doc; no similarities, since a removed
/// document need not have been compared with the kept one.
pub fn whole_component(ranks: &HashMap<u64, u64>) -> Vec<Member> {
    let cluster = ranks.keys().copied().min().unwrap_or(0);
    let kept = ranks
        .iter()
        .map(|(&doc, &rank)| (rank, doc))
        .min()
        .map_or(0, |(_, doc)| doc);
    let mut members: Vec<Member> = ranks
        .keys()
        .map(|&doc| Member {
            doc,
            cluster,
            kept,
            hamming: None,
            jaccard: None,
        })
        .collect();
    members.sort_unstable_by_key(|m| m.doc);
    members
}

/// The pairs of documents no link joins that could let [`Centers::Coverage`] keep fewer: in
/// every connected component of 2 to [`EXACT_COVER_UNITS`] units that needs more than one
/// center, every two units that are not neighbours, each named by its smallest document.
///
/// A search by bands (MinHash LSH) misses some pairs above its threshold, and a component
/// that it found connected through other documents is where such a pair would let one kept
/// document stand for more. The caller verifies these pairs as it verified the search's, and
/// gives the ones that pass to [`stars`] with the rest.
pub fn unlinked_pairs(ranks: &HashMap<u64, u64>, links: &[Link]) -> Vec<(u64, u64)> {
    let graph = Graph::new(ranks, links, Centers::Coverage);
    let center_of = graph.by_coverage();
    let mut out = Vec::new();
    for component in graph.components() {
        let centers = component.iter().filter(|u| center_of[u] == **u).count();
        if centers < 2 || component.len() > EXACT_COVER_UNITS {
            continue;
        }
        for (i, &u) in component.iter().enumerate() {
            let around = graph.neighbours(u);
            for &v in &component[i + 1..] {
                if around.binary_search(&v).is_err() {
                    out.push(ordered(graph.members[&u][0], graph.members[&v][0]));
                }
            }
        }
    }
    out.sort_unstable();
    out
}

/// How many documents connected components over `links` would remove: the documents in a
/// link, less one per component.
pub fn components_would_remove(links: &[Link]) -> u64 {
    let mut uf = UnionFind::new();
    for l in links {
        uf.union(l.a, l.b);
    }
    let docs = uf.len() as u64;
    let roots: HashSet<u64> = links.iter().map(|l| uf.find(l.a)).collect();
    docs - roots.len() as u64
}

/// The most search steps spent on one component before its best cover so far is taken:
/// the search is exact within it, and the result does not depend on time or threads.
pub const COVER_SEARCH_STEPS: u64 = 200_000;

/// The largest component (in units) whose fewest centers are searched for exactly; a larger
/// one keeps the greedy centers.
pub const EXACT_COVER_UNITS: usize = 128;

/// The fewest units of one component whose closed neighbourhoods cover it (a minimum
/// dominating set), if there are fewer than `upper`: `closed[i]` is the bit set of unit `i`
/// and its neighbours. Branch and bound: the first unit not yet covered (by the fewest
/// units that can cover it) must be covered by one of them; each is tried, those covering
/// most first, and a branch ends when even units covering as many as the best one can
/// not beat `upper`.
fn fewest_cover(closed: &[u128], upper: usize) -> Option<u128> {
    struct Search<'a> {
        closed: &'a [u128],
        best: usize,
        found: Option<u128>,
        steps: u64,
    }
    impl Search<'_> {
        fn go(&mut self, open: u128, chosen: u128, count: usize) {
            if self.steps == 0 {
                return;
            }
            self.steps -= 1;
            if open == 0 {
                if count < self.best {
                    self.best = count;
                    self.found = Some(chosen);
                }
                return;
            }
            let widest = self
                .closed
                .iter()
                .map(|c| (c & open).count_ones())
                .max()
                .unwrap_or(1)
                .max(1) as usize;
            if count + (open.count_ones() as usize).div_ceil(widest) >= self.best {
                return;
            }
            let hardest = (0..self.closed.len())
                .filter(|&v| open >> v & 1 == 1)
                .min_by_key(|&v| (self.closed[v].count_ones(), v))
                .expect("open is not empty");
            let mut options: Vec<usize> = (0..self.closed.len())
                .filter(|&u| self.closed[hardest] >> u & 1 == 1)
                .collect();
            options.sort_by_key(|&u| (std::cmp::Reverse((self.closed[u] & open).count_ones()), u));
            for u in options {
                self.go(open & !self.closed[u], chosen | 1 << u, count + 1);
            }
        }
    }
    let all = if closed.len() == 128 {
        u128::MAX
    } else {
        (1u128 << closed.len()) - 1
    };
    let mut search = Search {
        closed,
        best: upper,
        found: None,
        steps: COVER_SEARCH_STEPS,
    };
    search.go(all, 0, 0);
    search.found
}

/// The duplicate graph on units, with what is known of the pairs between documents.
struct Graph {
    /// Each document's unit, fingerprint group and exact group (three nested partitions).
    unit: HashMap<u64, u64>,
    fingerprint: HashMap<u64, u64>,
    exact: HashMap<u64, u64>,
    /// Each unit's documents (sorted) and best `(rank, doc)`.
    members: HashMap<u64, Vec<u64>>,
    best: HashMap<u64, (u64, u64)>,
    /// Each unit's distinct neighbour units (sorted).
    neighbours: HashMap<u64, Vec<u64>>,
    /// The closest pair measured between two units (keys ordered): the highest Jaccard
    /// similarity, then the smallest Hamming distance.
    closest: HashMap<(u64, u64), (Option<f32>, u8)>,
    /// The smallest Hamming distance measured between two fingerprint groups, and the
    /// Jaccard similarity between two exact groups (keys ordered).
    hamming: HashMap<(u64, u64), u8>,
    jaccard: HashMap<(u64, u64), f32>,
    /// The Jaccard similarity the run gives exact duplicates (1.0 when it verifies pairs).
    exact_jaccard: Option<f32>,
}

fn ordered(a: u64, b: u64) -> (u64, u64) {
    (a.min(b), a.max(b))
}

/// The closer of two measured pairs: the higher Jaccard similarity, then the smaller
/// Hamming distance.
fn closer(x: (Option<f32>, u8), y: (Option<f32>, u8)) -> (Option<f32>, u8) {
    let key = |(j, h): (Option<f32>, u8)| (j.map(f32::to_bits), Reverse(h));
    if key(y) > key(x) {
        y
    } else {
        x
    }
}

impl Graph {
    fn new(ranks: &HashMap<u64, u64>, links: &[Link], centers: Centers) -> Graph {
        let mut exact = UnionFind::new();
        let mut fingerprint = UnionFind::new();
        let mut unit = UnionFind::new();
        let mut exact_jaccard = None;
        for l in links {
            for uf in [&mut exact, &mut fingerprint, &mut unit] {
                uf.union(l.a, l.a);
                uf.union(l.b, l.b);
            }
            match l.kind {
                LinkKind::Exact => {
                    exact.union(l.a, l.b);
                    fingerprint.union(l.a, l.b);
                    unit.union(l.a, l.b);
                    exact_jaccard = exact_jaccard.or(l.jaccard);
                }
                LinkKind::SameFingerprint => {
                    fingerprint.union(l.a, l.b);
                    unit.union(l.a, l.b);
                }
                LinkKind::Url if centers == Centers::Rank => unit.union(l.a, l.b),
                LinkKind::Near | LinkKind::Url => {}
            }
        }
        let mut docs: Vec<u64> = links.iter().flat_map(|l| [l.a, l.b]).collect();
        docs.sort_unstable();
        docs.dedup();
        let mut graph = Graph {
            unit: HashMap::default(),
            fingerprint: HashMap::default(),
            exact: HashMap::default(),
            members: HashMap::default(),
            best: HashMap::default(),
            neighbours: HashMap::default(),
            closest: HashMap::default(),
            hamming: HashMap::default(),
            jaccard: HashMap::default(),
            exact_jaccard,
        };
        for &doc in &docs {
            let u = unit.find(doc);
            graph.unit.insert(doc, u);
            graph.fingerprint.insert(doc, fingerprint.find(doc));
            graph.exact.insert(doc, exact.find(doc));
            graph.members.entry(u).or_default().push(doc);
            let key = (ranks.get(&doc).copied().unwrap_or(u64::MAX), doc);
            graph
                .best
                .entry(u)
                .and_modify(|b| *b = (*b).min(key))
                .or_insert(key);
        }
        for l in links {
            let (fa, fb) = (graph.fingerprint[&l.a], graph.fingerprint[&l.b]);
            if l.kind != LinkKind::Url && fa != fb {
                graph
                    .hamming
                    .entry(ordered(fa, fb))
                    .and_modify(|h| *h = (*h).min(l.hamming))
                    .or_insert(l.hamming);
            }
            let (ea, eb) = (graph.exact[&l.a], graph.exact[&l.b]);
            if let (Some(j), true) = (l.jaccard, l.kind != LinkKind::Url && ea != eb) {
                graph.jaccard.entry(ordered(ea, eb)).or_insert(j);
            }
            let (ua, ub) = (graph.unit[&l.a], graph.unit[&l.b]);
            if l.kind == LinkKind::Near && ua != ub {
                graph.neighbours.entry(ua).or_default().push(ub);
                graph.neighbours.entry(ub).or_default().push(ua);
                let close = (l.jaccard, l.hamming);
                graph
                    .closest
                    .entry(ordered(ua, ub))
                    .and_modify(|c| *c = closer(*c, close))
                    .or_insert(close);
            }
        }
        for list in graph.neighbours.values_mut() {
            list.sort_unstable();
            list.dedup();
        }
        graph
    }

    fn neighbours(&self, unit: u64) -> &[u64] {
        self.neighbours.get(&unit).map_or(&[], |v| &v[..])
    }

    /// Units in the keep order.
    fn in_rank_order(&self) -> Vec<u64> {
        let mut order: Vec<u64> = self.best.keys().copied().collect();
        order.sort_by_key(|u| self.best[u]);
        order
    }

    /// Each unit's center unit, under [`Centers::Rank`].
    fn by_rank(&self) -> HashMap<u64, u64> {
        let mut center_of: HashMap<u64, u64> = HashMap::default();
        for u in self.in_rank_order() {
            if center_of.contains_key(&u) {
                continue;
            }
            center_of.insert(u, u);
            for &n in self.neighbours(u) {
                center_of.entry(n).or_insert(u);
            }
        }
        center_of
    }

    /// Each unit's center unit, under [`Centers::Coverage`]: the greedy centers, then in
    /// every component of at most [`EXACT_COVER_UNITS`] units the fewest centers there are
    /// (if the greedy ones were not), and every other unit with its closest center.
    fn by_coverage(&self) -> HashMap<u64, u64> {
        let greedy = self.greedy_centers();
        let mut centers: HashSet<u64> = greedy.values().copied().collect();
        for component in self.components() {
            if component.len() < 2 || component.len() > EXACT_COVER_UNITS {
                continue;
            }
            let at: HashMap<u64, usize> =
                component.iter().enumerate().map(|(i, &u)| (u, i)).collect();
            let closed: Vec<u128> = component
                .iter()
                .map(|&u| {
                    let around = self.neighbours(u).iter().map(|n| 1u128 << at[n]);
                    around.fold(1u128 << at[&u], |set, bit| set | bit)
                })
                .collect();
            let upper = component.iter().filter(|u| centers.contains(u)).count();
            if let Some(chosen) = fewest_cover(&closed, upper) {
                for (i, u) in component.iter().enumerate() {
                    if chosen >> i & 1 == 1 {
                        centers.insert(*u);
                    } else {
                        centers.remove(u);
                    }
                }
            }
        }
        let mut center_of: HashMap<u64, u64> = HashMap::default();
        for &u in self.best.keys() {
            let center = if centers.contains(&u) {
                u
            } else {
                *self
                    .neighbours(u)
                    .iter()
                    .filter(|n| centers.contains(n))
                    .min_by_key(|&&c| {
                        let (jaccard, hamming) = self.closest[&ordered(u, c)];
                        (Reverse(jaccard.map(f32::to_bits)), hamming, self.best[&c])
                    })
                    .expect("every unit is a center or next to one")
            };
            center_of.insert(u, center);
        }
        center_of
    }

    /// The greedy centers: repeatedly, the unit with the most unassigned units around it.
    fn greedy_centers(&self) -> HashMap<u64, u64> {
        let mut center_of: HashMap<u64, u64> = HashMap::default();
        let unassigned_around = |u: u64, center_of: &HashMap<u64, u64>| {
            1 + self
                .neighbours(u)
                .iter()
                .filter(|n| !center_of.contains_key(n))
                .count()
        };
        // (unassigned units around, the unit's best (rank, doc) reversed, the unit)
        type Entry = (usize, Reverse<(u64, u64)>, u64);
        let mut queue: BinaryHeap<Entry> = self
            .best
            .iter()
            .map(|(&u, &best)| (1 + self.neighbours(u).len(), Reverse(best), u))
            .collect();
        while let Some((count, best, u)) = queue.pop() {
            if center_of.contains_key(&u) {
                continue;
            }
            let now = unassigned_around(u, &center_of);
            if now < count {
                queue.push((now, best, u));
                continue;
            }
            center_of.insert(u, u);
            for &n in self.neighbours(u) {
                center_of.entry(n).or_insert(u);
            }
        }
        center_of
    }

    /// The connected components of the unit graph, each in the keep order of its units.
    fn components(&self) -> Vec<Vec<u64>> {
        let mut seen: HashSet<u64> = HashSet::default();
        let mut out = Vec::new();
        for start in self.in_rank_order() {
            if !seen.insert(start) {
                continue;
            }
            let mut component = vec![start];
            let mut next = 0;
            while next < component.len() {
                for &n in self.neighbours(component[next]) {
                    if seen.insert(n) {
                        component.push(n);
                    }
                }
                next += 1;
            }
            component.sort_by_key(|u| self.best[u]);
            out.push(component);
        }
        out
    }

    /// The clustered documents, given each unit's center unit.
    fn members(&self, center_of: HashMap<u64, u64>) -> Vec<Member> {
        let mut stars: HashMap<u64, Vec<u64>> = HashMap::default();
        for (&u, &center) in &center_of {
            stars.entry(center).or_default().extend(&self.members[&u]);
        }
        let mut out = Vec::new();
        for (center_unit, docs) in stars {
            if docs.len() < 2 {
                continue;
            }
            let kept = self.best[&center_unit].1;
            let cluster = *docs.iter().min().expect("non-empty");
            out.extend(docs.into_iter().map(|doc| {
                let (hamming, jaccard) = if doc == kept {
                    (None, None)
                } else {
                    (self.hamming_of(doc, kept), self.jaccard_of(doc, kept))
                };
                Member {
                    doc,
                    cluster,
                    kept,
                    hamming,
                    jaccard,
                }
            }));
        }
        out.sort_unstable_by_key(|m| m.doc);
        out
    }

    fn hamming_of(&self, a: u64, b: u64) -> Option<u8> {
        let (fa, fb) = (self.fingerprint[&a], self.fingerprint[&b]);
        if fa == fb {
            Some(0)
        } else {
            self.hamming.get(&ordered(fa, fb)).copied()
        }
    }

    fn jaccard_of(&self, a: u64, b: u64) -> Option<f32> {
        let (ea, eb) = (self.exact[&a], self.exact[&b]);
        if ea == eb {
            self.exact_jaccard
        } else {
            self.jaccard.get(&ordered(ea, eb)).copied()
        }
    }
}

#[cfg(test)]
mod tests;
