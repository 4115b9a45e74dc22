//! The batch's own pairs as `--against` clusters them: joined with their documents, and
//! (under stars) grouped by connected component, on disk.
//!
//! The simple version holds every new document in a pair in a `Vec` by doc number (its
//! simhash, keep rank and whether it was removed for an indexed document), looks each of
//! the batch's pairs' two documents up there, and holds the links the stars are made from
//! in a `Vec`, with a union-find over their documents to group them by component. All of
//! that grows with the documents in a pair. Here:
//!
//! 1. The documents in a pair go to a sort by doc number as the probe reads them
//!    ([`Held`], in order already), sealed into one file that is read twice.
//! 2. The batch's pairs, sorted by their first document ([`BatchPair`]), are walked beside
//!    that file: each takes its first document's fields ([`HalfPair`]) and goes to a sort
//!    by its second document, walked beside the file again ([`join_pairs`]): each pair
//!    meets both its documents, as the pairs' rows and the links need them.
//! 3. Under stars, each link between two documents not removed for an indexed one goes to
//!    a sort by its first document ([`LinkRecord`], with its documents' ranks), and its two
//!    documents to one of their own ([`StarLinks`]). Their components are found as the
//!    run finds its own ([`crate::stages::components::Labelling`]: a union-find over the
//!    documents up to its share of the step's memory, else by sorting), and each link,
//!    labelled with its component, goes to a sort by component ([`StarLinks::by_component`]),
//!    whose walk hands the stars one component's links at a time ([`each_component`]).
//!
//! What is held: the sorts' budgets, the union-find where it fits, and the largest
//! component's links.

use std::io;
use std::iter::Peekable;

use neardup_core::star::{Link, LinkKind};
use neardup_io::index::run::SortMemory;
use neardup_io::parquet_out::{PairKind, PairRow};
use neardup_io::spill::{ExternalSort, Merged, SortStats, SortedFile, SortedReader, SpillRecord};
use serde::{Deserialize, Serialize};

use crate::operators::sort::ordered_by;
use crate::stages::components::{Labelling, UNION_FIND_BYTES};

/// A new document in a pair (with an indexed document, or with another new one), as the
/// clusters need it: 32 bytes on disk, by doc number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(super) struct Held {
    pub doc_id: u64,
    pub simhash: u64,
    /// Its keep rank under the run's policy.
    pub rank: Option<u64>,
    /// Whether it is removed for a kept indexed document (under stars).
    pub chosen: bool,
}

impl SpillRecord for Held {}

/// One of the batch's own pairs (in the index's numbering), sorted by its first document.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(super) struct BatchPair {
    pub a: u64,
    pub b: u64,
    pub kind: PairKind,
    pub jaccard: Option<f32>,
}

ordered_by!(BatchPair, |p| (
    p.a,
    p.b,
    p.kind as u8,
    p.jaccard.map(f32::to_bits)
));
impl SpillRecord for BatchPair {}

/// A batch pair with its first document's fields, sorted by its second document.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(super) struct HalfPair {
    pair: BatchPair,
    first: Held,
}

ordered_by!(HalfPair, |h| (
    h.pair.b,
    h.pair.a,
    h.pair.kind as u8,
    h.pair.jaccard.map(f32::to_bits)
));
impl SpillRecord for HalfPair {}

/// A link of the stars with its two documents' keep ranks, sorted by `(a, b, kind)` (the
/// order the simple version sorts the links in; the rest only makes it total).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(super) struct LinkRecord {
    pub a: u64,
    pub b: u64,
    /// [`LinkKind`] as `u8`.
    kind: u8,
    hamming: u8,
    jaccard: Option<f32>,
    /// The keep ranks of `a` and `b`.
    pub ranks: [Option<u64>; 2],
}

impl LinkRecord {
    fn key(&self) -> (u64, u64, u8, u8, Option<u32>) {
        let jaccard = self.jaccard.map(f32::to_bits);
        (self.a, self.b, self.kind, self.hamming, jaccard)
    }

    /// `link`, its documents ranked `ranks`.
    pub fn new(link: &Link, ranks: [Option<u64>; 2]) -> LinkRecord {
        LinkRecord {
            a: link.a,
            b: link.b,
            kind: link.kind as u8,
            hamming: link.hamming,
            jaccard: link.jaccard,
            ranks,
        }
    }

    pub fn link(&self) -> Link {
        let kind = [
            LinkKind::Exact,
            LinkKind::SameFingerprint,
            LinkKind::Near,
            LinkKind::Url,
        ];
        debug_assert!(kind.iter().enumerate().all(|(i, k)| *k as usize == i));
        Link {
            a: self.a,
            b: self.b,
            kind: kind[self.kind as usize],
            hamming: self.hamming,
            jaccard: self.jaccard,
        }
    }
}

ordered_by!(LinkRecord, |l| l.key());
impl SpillRecord for LinkRecord {}

/// A link with its connected component (a document of it), sorted by component, then as
/// [`LinkRecord`]; `verified`: an unlinked pair that passed verification (after a link of
/// the batch of the same documents and kind, which there never is).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(super) struct InComponent {
    pub component: u64,
    pub verified: bool,
    pub link: LinkRecord,
}

ordered_by!(InComponent, |c| (c.component, c.link.key(), c.verified));
impl SpillRecord for InComponent {}

/// Reads the held documents for documents asked in ascending order.
pub(super) struct HeldCursor {
    records: Peekable<SortedReader<Held>>,
}

impl HeldCursor {
    pub fn new(held: &SortedFile<Held>) -> io::Result<HeldCursor> {
        Ok(HeldCursor {
            records: held.records()?.peekable(),
        })
    }

    /// The held document `doc`, not smaller than the one asked before.
    pub fn get(&mut self, doc: u64) -> io::Result<Held> {
        loop {
            match self.records.peek() {
                Some(Ok(h)) if h.doc_id < doc => {
                    self.records.next();
                }
                Some(Ok(h)) if h.doc_id == doc => return Ok(*h),
                Some(Ok(_)) | None => {
                    return Err(io::Error::other(format!(
                        "document {doc} of a pair of the batch was not read back"
                    )))
                }
                Some(Err(_)) => return Err(self.records.next().and_then(Result::err).unwrap()),
            }
        }
    }
}

/// Each of the batch's pairs `pairs` with both its documents from `held` (module docs, step
/// 2): `each` gets its row of `against-pairs.parquet` (as the run's `pairs/` lists it:
/// `exact`, `near` or `url`) and, unless a document is removed for an indexed one, its
/// link with the two documents' ranks. `by_second`: the sort of the second walk; `simhash`:
/// whether the index is a simhash one (a MinHash pair's Hamming distance is not measured,
/// and a simhash near pair at distance 0 is two documents of one fingerprint). Returns
/// what the two sorts did.
pub(super) fn join_pairs(
    held: &SortedFile<Held>,
    pairs: ExternalSort<BatchPair>,
    mut by_second: ExternalSort<HalfPair>,
    simhash: bool,
    mut each: impl FnMut(PairRow, Option<LinkRecord>) -> io::Result<()>,
) -> io::Result<[SortStats; 2]> {
    let pairs = pairs.finish()?;
    let first_stats = pairs.stats();
    let mut cursor = HeldCursor::new(held)?;
    for pair in pairs {
        let pair = pair?;
        let first = cursor.get(pair.a)?;
        by_second.push(HalfPair { pair, first })?;
    }
    let halves = by_second.finish()?;
    let second_stats = halves.stats();
    let mut cursor = HeldCursor::new(held)?;
    for half in halves {
        let HalfPair { pair, first } = half?;
        let second = cursor.get(pair.b)?;
        let h = neardup_core::hamming(first.simhash, second.simhash);
        let row = PairRow {
            doc_a: pair.a,
            doc_b: pair.b,
            hamming: h as u8,
            kind: pair.kind,
            jaccard: pair.jaccard,
        };
        let link = Link {
            a: pair.a.min(pair.b),
            b: pair.a.max(pair.b),
            kind: match pair.kind {
                PairKind::Exact => LinkKind::Exact,
                PairKind::Url => LinkKind::Url,
                _ if simhash && h == 0 => LinkKind::SameFingerprint,
                PairKind::Near => LinkKind::Near,
            },
            hamming: if simhash { h as u8 } else { 0 },
            jaccard: pair.jaccard,
        };
        let ranks = match pair.a < pair.b {
            true => [first.rank, second.rank],
            false => [second.rank, first.rank],
        };
        let link = (!first.chosen && !second.chosen).then(|| LinkRecord::new(&link, ranks));
        each(row, link)?;
    }
    Ok([first_stats, second_stats])
}

/// The links of the stars (module docs, step 3), gathered until every one is in.
pub(super) struct StarLinks {
    links: ExternalSort<LinkRecord>,
    documents: ExternalSort<u64>,
    memory: SortMemory,
}

/// A sort's name in the run's summary, and what it did.
pub(super) type Sorted = (&'static str, SortStats);

/// The shares of the links' memory: the links' sort, and each of the two that follow it
/// (one is read while the next is written); the documents' sort; the union-find.
const LINKS_SHARE: f64 = 0.1;
const DOCUMENTS_SHARE: f64 = 0.05;
const UNION_FIND_SHARE: f64 = 0.5;

impl StarLinks {
    /// No links yet; their sorts, and the components', take `memory`.
    pub fn new(memory: SortMemory) -> StarLinks {
        StarLinks {
            links: memory.part(LINKS_SHARE, "links").sort(),
            documents: memory.part(DOCUMENTS_SHARE, "link documents").sort(),
            memory,
        }
    }

    pub fn push(&mut self, link: LinkRecord) -> io::Result<()> {
        self.documents.push(link.a)?;
        self.documents.push(link.b)?;
        self.links.push(link)
    }

    /// Every link, labelled with its connected component, in a sort by component (to be
    /// walked with [`each_component`]), and what the sorts did. Simply: a union-find over
    /// the links' documents, and the links sorted by `(find(a), a, b, kind)`.
    pub fn by_component(self) -> io::Result<(ExternalSort<InComponent>, Vec<Sorted>)> {
        let memory = self.memory;
        let fits = memory.share(UNION_FIND_SHARE).budget / UNION_FIND_BYTES;
        let (large, small) = (
            memory.part(LINKS_SHARE, "component stars (large)"),
            memory.part(LINKS_SHARE, "component stars (small)"),
        );
        let steps = |l: bool| if l { large.sort() } else { small.sort() };
        let documents = self.documents.finish()?;
        let mut sorts = vec![("against link documents", documents.stats())];
        let mut labelling = Labelling::new(documents, fits, steps)?;
        // The links wait in a sort (already in order) until every one is joined.
        let links = self.links.finish()?;
        sorts.push(("against links", links.stats()));
        let mut labelled = memory.part(LINKS_SHARE, "labelled links").sort();
        for link in links {
            let link: LinkRecord = link?;
            labelling.join(link.a, link.b)?;
            labelled.push(link)?;
        }
        if let Some(rounds) = labelling.joined()? {
            sorts.push(("against components (large)", rounds.large));
            sorts.push(("against components (small)", rounds.small));
        }
        let labelled = labelled.finish()?;
        sorts.push(("against labelled links", labelled.stats()));
        let mut by_component = memory.part(LINKS_SHARE, "links by component").sort();
        for link in labelled {
            let link = link?;
            by_component.push(InComponent {
                component: labelling.component(link.a)?,
                verified: false,
                link,
            })?;
        }
        Ok((by_component, sorts))
    }
}

/// Calls `f` with each component's links of `sorted` (sorted by component), in order: one
/// component's held at a time.
pub(super) fn each_component(
    sorted: Merged<InComponent>,
    f: impl FnMut(&[InComponent]) -> io::Result<()>,
) -> io::Result<()> {
    each_group(sorted, |a, b| a.component == b.component, f)
}

/// Calls `f` with each group of consecutive records of `sorted` that are `same` as each
/// other, in order: one group held at a time.
pub(super) fn each_group<T>(
    sorted: impl Iterator<Item = io::Result<T>>,
    same: impl Fn(&T, &T) -> bool,
    mut f: impl FnMut(&[T]) -> io::Result<()>,
) -> io::Result<()> {
    let mut group: Vec<T> = Vec::new();
    for record in sorted {
        let record = record?;
        if group.last().is_some_and(|last| !same(last, &record)) {
            f(&group)?;
            group.clear();
        }
        group.push(record);
    }
    if !group.is_empty() {
        f(&group)?;
    }
    Ok(())
}

/// The keep ranks of the documents of a component's links (simply: every held document's
/// in one map).
pub(super) fn ranks_of(component: &[InComponent]) -> fxhash::FxHashMap<u64, u64> {
    let mut ranks = fxhash::FxHashMap::default();
    for c in component {
        for (doc, rank) in [c.link.a, c.link.b].into_iter().zip(c.link.ranks) {
            if let Some(rank) = rank {
                ranks.insert(doc, rank);
            }
        }
    }
    ranks
}

/// A new document's cluster and whether it is removed, as the rule decided, by doc number
/// (for the generation `--update-index` writes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(super) struct Decision {
    pub doc: u64,
    pub cluster: i64,
    pub removed: bool,
}

impl SpillRecord for Decision {}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_core::star::{stars, unlinked_pairs, Centers};
    use neardup_core::testing::SeededRng;

    /// The stars made one component at a time ([`StarLinks::by_component`],
    /// [`each_component`]) are the stars of the whole graph at once (the simple version),
    /// and so are the unlinked pairs, under both rules: random graphs of many small
    /// components and a few large ones, with ties of rank and of similarity, with budgets
    /// that keep everything in memory and that spill every sort and find the components on
    /// disk. (Two links of one pair and kind would be ordered by chance by either; a run has
    /// none.)
    #[test]
    fn stars_a_component_at_a_time_are_the_whole_graphs() {
        let mut rng = SeededRng::new(32);
        let (mut components_seen, mut probes_seen, mut on_disk) = (0, 0, 0);
        for round in 0..30 {
            let docs = 20 + rng.below(300);
            let edges = docs * (3 + rng.below(10)) / 10;
            let mut links = Vec::new();
            for _ in 0..edges {
                let (a, b) = (rng.below(docs), rng.below(docs));
                if a == b {
                    continue;
                }
                let kind = match rng.below(4) {
                    0 => LinkKind::Exact,
                    1 => LinkKind::SameFingerprint,
                    _ => LinkKind::Near,
                };
                // Exact pairs are of one content: similarity 1 (the graph keeps one for all).
                let jaccard = match kind {
                    LinkKind::Exact => 1.0,
                    _ => 0.5 + rng.below(5) as f32 / 10.0,
                };
                links.push(Link {
                    a: a.min(b),
                    b: a.max(b),
                    kind,
                    hamming: rng.below(4) as u8,
                    jaccard: Some(jaccard),
                });
            }
            // A run's `pairs/` lists a pair once a kind.
            links.sort_unstable_by_key(|l| (l.a, l.b, l.kind as u8));
            links.dedup_by_key(|l| (l.a, l.b, l.kind as u8));
            let mut ranks = fxhash::FxHashMap::default();
            for d in 0..docs {
                if rng.below(3) > 0 {
                    ranks.insert(d, rng.below(5));
                }
            }
            let rank = |d: u64| ranks.get(&d).copied();
            let dir = tempfile::tempdir().unwrap();
            let budget = [usize::MAX, 1 << 11][round % 2];
            let memory = SortMemory {
                budget,
                dir: dir.path().join("stars"),
            };
            let mut star_links = StarLinks::new(memory);
            // Pushed in another order than sorted: the sorts order them.
            for l in links.iter().rev() {
                star_links
                    .push(LinkRecord::new(l, [rank(l.a), rank(l.b)]))
                    .unwrap();
            }
            let (sort, sorts) = star_links.by_component().unwrap();
            on_disk += usize::from(sorts.iter().any(|s| s.0.contains("components")));
            let mut components = Vec::new();
            each_component(sort.finish().unwrap(), |c| {
                components.push(c.to_vec());
                Ok(())
            })
            .unwrap();
            components_seen += components.len();
            for centers in [Centers::Coverage, Centers::Rank] {
                let mut each = Vec::new();
                for c in &components {
                    let component: Vec<Link> = c.iter().map(|r| r.link.link()).collect();
                    each.extend(stars(&ranks_of(c), &component, centers));
                }
                each.sort_unstable_by_key(|m| m.doc);
                let whole = stars(&ranks, &links, centers);
                assert_eq!(each, whole, "round {round}, {centers:?}");
            }
            let mut each = Vec::new();
            for c in &components {
                let component: Vec<Link> = c.iter().map(|r| r.link.link()).collect();
                each.extend(unlinked_pairs(&ranks_of(c), &component));
            }
            let mut whole = unlinked_pairs(&ranks, &links);
            each.sort_unstable();
            whole.sort_unstable();
            assert_eq!(each, whole, "round {round}");
            probes_seen += whole.len();
            drop(components);
            assert!(
                !dir.path().join("stars").exists()
                    || std::fs::read_dir(dir.path().join("stars")).unwrap().count() == 0,
                "no run file left"
            );
        }
        assert!(
            components_seen > 300 && probes_seen > 20 && on_disk > 5,
            "{components_seen} {probes_seen} {on_disk}"
        );
    }
}
