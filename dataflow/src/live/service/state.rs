//! The service's state between a checkpoint and the writing of its state file: the saved
//! state of the index before the checkpoint, and what the checkpoint changed in it.
//!
//! A checkpoint writes the documents written since the last one as a new index generation
//! (work in proportion to the writes), and the state of the new index (`Saved`: every id
//! by hash and every clustered document, 2.4 GB at 100M documents): work in proportion to
//! the index. The simple version writes both before the next write is taken: at 100M
//! documents, writes waited 12 to 26 s for each checkpoint, most of it the state.
//!
//! But the new state is a function of two things that no longer change once the
//! generation is committed: the old state (a mapped file, never written in place) and the
//! checkpoint's changes ([`Pending`]: the ids written and removed, the saved clusters that
//! writes touched and the clusters that replaced them). So the checkpoint keeps both as a
//! [`State`] that answers every question the new state file would ([`State::ids`],
//! [`State::label`], [`State::members`], ...), hands the writer thread back to the writes,
//! and a background thread writes the file from them ([`State::lists`]) and puts it in their
//! place ([`State::settled`]): a swap of two equal answers, so that readers never see the
//! difference. A checkpoint that comes before the file is written first waits for it: the
//! state under a [`Pending`] is always a plain saved state.

use std::ops::Range;
use std::sync::Arc;

use fxhash::FxHashSet;

use super::saved::{partition, List, Lists, Piece, Saved};

/// What a checkpoint changed in the saved state (see the module docs).
pub(crate) struct Pending {
    /// Documents of the saved state replaced or deleted: their ids are gone.
    pub removed: FxHashSet<u64>,
    /// `(hash of the id, doc)` of those with an id, sorted: the saved state's rows they
    /// leave, found without reading the others (see [`State::lists`]).
    pub removed_ids: Vec<(u64, u64)>,
    /// `(hash of the id, doc)` of the documents written, sorted.
    pub new_ids: Vec<(u64, u64)>,
    /// The labels of the saved clusters that writes touched: their documents are as
    /// [`Pending::live`] says (alone where it says nothing).
    pub loaded: FxHashSet<u64>,
    /// `(doc, label)` of every document in a live cluster of two or more, sorted.
    pub live: Vec<(u64, u64)>,
    /// The same as `(label, doc)`, sorted.
    pub live_by_label: Vec<(u64, u64)>,
    /// Clusters of two or more after the checkpoint, and the documents in them.
    pub counts: (u64, u64),
}

impl Pending {
    /// The changes of a checkpoint to `saved`: the documents `removed` since it, the ids
    /// written (`new_ids`, sorted), the saved clusters `loaded` into the live clusters,
    /// and `live`: `(doc, label)` of every document of a live cluster of two or more,
    /// sorted.
    pub fn new(
        saved: &Saved,
        (removed, removed_ids): (FxHashSet<u64>, Vec<(u64, u64)>),
        new_ids: Vec<(u64, u64)>,
        loaded: FxHashSet<u64>,
        live: Vec<(u64, u64)>,
    ) -> Pending {
        let mut live_by_label: Vec<(u64, u64)> = live.iter().map(|&(d, l)| (l, d)).collect();
        live_by_label.sort_unstable();
        let live_clusters = live_by_label
            .chunk_by(|a, b| a.0 == b.0)
            .filter(|c| c.len() >= 2)
            .count() as u64;
        let (clusters, clustered) = saved.counts();
        let touched: u64 = loaded.iter().map(|&label| saved.size(label)).sum();
        let counts = (
            clusters.saturating_sub(loaded.len() as u64) + live_clusters,
            clustered.saturating_sub(touched) + live.len() as u64,
        );
        Pending {
            removed,
            removed_ids,
            new_ids,
            loaded,
            live,
            live_by_label,
            counts,
        }
    }
}

/// The service's state: a saved one, and the changes of a checkpoint not yet written into
/// it (see the module docs). Cheap to clone.
#[derive(Clone)]
pub(crate) struct State {
    saved: Arc<Saved>,
    pending: Option<Arc<Pending>>,
}

/// The rows of a sorted list of pairs whose first is `key`.
fn equal(pairs: &[(u64, u64)], key: u64) -> Range<usize> {
    let lo = pairs.partition_point(|p| p.0 < key);
    lo..lo + pairs[lo..].partition_point(|p| p.0 <= key)
}

impl State {
    /// A saved state with nothing pending.
    pub fn saved(saved: Saved) -> State {
        State {
            saved: Arc::new(saved),
            pending: None,
        }
    }

    /// This state, with nothing pending, changed by a checkpoint (see [`Pending::new`]).
    pub fn with_changes(
        &self,
        removed: (FxHashSet<u64>, Vec<(u64, u64)>),
        new_ids: Vec<(u64, u64)>,
        loaded: FxHashSet<u64>,
        live: Vec<(u64, u64)>,
    ) -> State {
        debug_assert!(
            self.pending.is_none(),
            "a checkpoint waits for the last state"
        );
        let pending = Pending::new(&self.saved, removed, new_ids, loaded, live);
        State {
            saved: self.saved.clone(),
            pending: Some(Arc::new(pending)),
        }
    }

    /// The distance the clusters were made for.
    pub fn k(&self) -> u32 {
        self.saved.k()
    }

    /// Whether a checkpoint's changes are still to be written.
    pub fn is_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// `saved`, written from this state, in its place, where this state is still
    /// `written_from` (the one it was written from): the two answer alike.
    pub fn settle(&mut self, written_from: &State, saved: Saved) -> bool {
        let same = match (&self.pending, &written_from.pending) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        if same {
            *self = State::saved(saved);
        }
        same
    }

    fn removed(&self, doc: u64) -> bool {
        self.pending
            .as_ref()
            .is_some_and(|p| p.removed.contains(&doc))
    }

    fn untouched(&self, label: u64) -> bool {
        !self
            .pending
            .as_ref()
            .is_some_and(|p| p.loaded.contains(&label))
    }

    /// The documents whose id hashes to `hash`, in document order (those written at the
    /// checkpoint are numbered after every saved one).
    pub fn ids(&self, hash: u64) -> impl DoubleEndedIterator<Item = u64> + '_ {
        let new: &[(u64, u64)] = match &self.pending {
            Some(p) => &p.new_ids[equal(&p.new_ids, hash)],
            None => &[],
        };
        (self.saved.ids(hash))
            .filter(move |&doc| !self.removed(doc))
            .chain(new.iter().map(|&(_, doc)| doc))
    }

    /// A document's cluster: its label, `None` when it is alone.
    pub fn label(&self, doc: u64) -> Option<u64> {
        if let Some(p) = &self.pending {
            let rows = equal(&p.live, doc);
            if !rows.is_empty() {
                return Some(p.live[rows.start].1);
            }
        }
        self.saved.label(doc).filter(|&label| self.untouched(label))
    }

    /// The documents of the cluster `label`, in order: a saved cluster no write touched,
    /// or a live one (never both: a live cluster's label is one of its documents, whose
    /// saved cluster, if any, the write that linked it touched).
    pub fn members(&self, label: u64) -> impl Iterator<Item = u64> + '_ {
        let live: &[(u64, u64)] = match &self.pending {
            Some(p) => &p.live_by_label[equal(&p.live_by_label, label)],
            None => &[],
        };
        let saved = self.untouched(label).then(|| self.saved.members(label));
        (saved.into_iter().flatten()).chain(live.iter().map(|&(_, doc)| doc))
    }

    /// The size of the cluster `label` (0: no such cluster).
    pub fn size(&self, label: u64) -> u64 {
        match &self.pending {
            None => self.saved.size(label),
            Some(_) => self.members(label).count() as u64,
        }
    }

    /// Clusters of two or more, and the documents in them.
    pub fn counts(&self) -> (u64, u64) {
        match &self.pending {
            None => self.saved.counts(),
            Some(p) => p.counts,
        }
    }

    /// Whether the index's own cluster column differs from these clusters: never after a
    /// checkpoint, which writes the service's.
    pub fn reclustered(&self) -> bool {
        self.pending.is_none() && self.saved.reclustered()
    }

    /// Every `(hash of an id, doc)`, in that order.
    pub fn id_pairs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let new: &[(u64, u64)] = self.pending.as_ref().map_or(&[], |p| &p.new_ids);
        Merge::new(
            (self.saved.id_pairs()).filter(|&(_, doc)| !self.removed(doc)),
            new.iter().copied(),
        )
    }

    /// Every `(doc, label)` of a clustered document, by doc.
    pub fn label_pairs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let live: &[(u64, u64)] = self.pending.as_ref().map_or(&[], |p| &p.live);
        Merge::new(
            (self.saved.label_pairs()).filter(|&(_, label)| self.untouched(label)),
            live.iter().copied(),
        )
    }

    /// Every `(label, doc)` of a clustered document, by label (the tests' simple version of the list [`State::lists`] writes).
    #[cfg(test)]
    pub fn member_pairs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let live: &[(u64, u64)] = self.pending.as_ref().map_or(&[], |p| &p.live_by_label);
        Merge::new(
            (self.saved.member_pairs()).filter(|&(label, _)| self.untouched(label)),
            live.iter().copied(),
        )
    }

    /// This state's lists, counted, as [`Saved::write_lists`] writes them: each saved list
    /// with the rows the checkpoint removed left out and its new pairs merged in, the rows
    /// between two changes copied whole (the simple version, [`State::id_pairs`] and the
    /// others, reads every row and asks the changes about each: twice the time at 100M
    /// documents).
    pub fn lists(
        &self,
    ) -> Lists<
        impl Iterator<Item = Piece<'_>> + '_,
        impl Iterator<Item = Piece<'_>> + '_,
        impl Iterator<Item = Piece<'_>> + '_,
    > {
        let saved = &self.saved;
        let (clusters, clustered) = self.counts();
        let Some(p) = &self.pending else {
            let whole = |list| vec![Piece::Rows(saved.row_bytes(list, 0..saved.rows(list)))];
            return Lists {
                ids: (saved.id_count(), whole(List::Ids).into_iter()),
                by_doc: (clustered as usize, whole(List::ByDoc).into_iter()),
                by_label: (clustered as usize, whole(List::ByLabel).into_iter()),
                clusters,
            };
        };
        let row_of = |list, (key, value): (u64, u64)| {
            (saved.rows_of(list, key)).find(|&i| saved.row(list, i).1 == value)
        };
        let gone_ids: Vec<usize> = (p.removed_ids.iter())
            .filter_map(|&pair| row_of(List::Ids, pair))
            .collect();
        debug_assert_eq!(
            gone_ids.len(),
            (saved.id_pairs())
                .filter(|&(_, doc)| p.removed.contains(&doc))
                .count(),
            "every removed document's id is among removed_ids"
        );
        let mut gone_by_doc = Vec::new();
        let mut gone_by_label = Vec::new();
        for &label in &p.loaded {
            let rows = saved.rows_of(List::ByLabel, label);
            gone_by_label.extend(rows.clone());
            let members = rows.map(|i| saved.row(List::ByLabel, i).1);
            gone_by_doc.extend(members.filter_map(|doc| row_of(List::ByDoc, (doc, label))));
        }
        let ids = saved.id_count() - gone_ids.len() + p.new_ids.len();
        Lists {
            ids: (
                ids,
                spliced(saved, List::Ids, gone_ids, &p.new_ids).into_iter(),
            ),
            by_doc: (
                clustered as usize,
                spliced(saved, List::ByDoc, gone_by_doc, &p.live).into_iter(),
            ),
            by_label: (
                clustered as usize,
                spliced(saved, List::ByLabel, gone_by_label, &p.live_by_label).into_iter(),
            ),
            clusters,
        }
    }
}

/// The saved `list` less its rows `gone`, with the pairs `add` (sorted) merged in, as
/// pieces: the rows between two changes as one piece each. As [`Merge`] orders them: a
/// saved row before an equal pair.
fn spliced<'a>(
    saved: &'a Saved,
    list: List,
    mut gone: Vec<usize>,
    add: &[(u64, u64)],
) -> Vec<Piece<'a>> {
    gone.sort_unstable();
    gone.dedup();
    let n = saved.rows(list);
    let mut pieces = Vec::with_capacity(2 * (gone.len() + add.len()) + 1);
    let (mut row, mut next_gone) = (0, 0);
    // The saved rows from `row` up to `end`, less those gone.
    let mut up_to = |pieces: &mut Vec<Piece<'a>>, row: &mut usize, end: usize| {
        while *row < end {
            while next_gone < gone.len() && gone[next_gone] < *row {
                next_gone += 1;
            }
            let stop = match gone.get(next_gone) {
                Some(&g) if g < end => g,
                _ => end,
            };
            if stop > *row {
                pieces.push(Piece::Rows(saved.row_bytes(list, *row..stop)));
            }
            // Past the gone row at `stop`, if there is one.
            *row = if stop < end { stop + 1 } else { stop };
        }
    };
    for &pair in add {
        let at = row + partition(n - row, |i| saved.row(list, row + i) <= pair);
        up_to(&mut pieces, &mut row, at);
        pieces.push(Piece::Pair(pair.0, pair.1));
    }
    up_to(&mut pieces, &mut row, n);
    pieces
}

/// Two ascending iterators as one ascending iterator (a merge).
pub(crate) struct Merge<A: Iterator, B: Iterator> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<A: Iterator<Item = (u64, u64)>, B: Iterator<Item = (u64, u64)>> Merge<A, B> {
    pub fn new(a: A, b: B) -> Self {
        Merge {
            a: a.peekable(),
            b: b.peekable(),
        }
    }
}

impl<A: Iterator<Item = (u64, u64)>, B: Iterator<Item = (u64, u64)>> Iterator for Merge<A, B> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        match (self.a.peek(), self.b.peek()) {
            (Some(a), Some(b)) if b < a => self.b.next(),
            (Some(_), _) => self.a.next(),
            (None, _) => self.b.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_core::testing::SeededRng;
    use std::collections::{BTreeMap, BTreeSet};

    /// A checkpoint's changes over a random saved state, and what the state after it is,
    /// from scratch: `(hash, doc)` of every document with an id, `doc -> label` of every
    /// clustered one.
    struct Case {
        removed: FxHashSet<u64>,
        removed_ids: Vec<(u64, u64)>,
        new_ids: Vec<(u64, u64)>,
        loaded: FxHashSet<u64>,
        live: Vec<(u64, u64)>,
        ids: BTreeSet<(u64, u64)>,
        labels: BTreeMap<u64, u64>,
    }

    /// Clusters (label: the smallest member) of `docs` split at random, those of two or
    /// more.
    fn clusters(docs: &[u64], rng: &mut SeededRng) -> BTreeMap<u64, u64> {
        let mut groups: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for &doc in docs {
            groups
                .entry(rng.next_u64() % (docs.len() as u64 / 3 + 1))
                .or_default()
                .push(doc);
        }
        let mut labels = BTreeMap::new();
        for members in groups.values().filter(|m| m.len() >= 2) {
            let label = *members.iter().min().unwrap();
            labels.extend(members.iter().map(|&d| (d, label)));
        }
        labels
    }

    fn case(seed: u64) -> (Saved, Case) {
        let mut rng = SeededRng::new(seed);
        let n = 1 + rng.next_u64() % 200;
        // Hashes from a small range: ids share them.
        let hash = |rng: &mut SeededRng| rng.next_u64() % 64;
        let saved_docs: Vec<u64> = (0..n).map(|d| d * 3).collect();
        let mut saved_ids: Vec<(u64, u64)> = Vec::new();
        for &d in &saved_docs {
            if !rng.next_u64().is_multiple_of(7) {
                saved_ids.push((hash(&mut rng), d));
            }
        }
        let saved_labels = clusters(&saved_docs, &mut rng);
        let saved = Saved::in_memory(
            1,
            3,
            &mut saved_ids.clone(),
            &mut saved_labels
                .iter()
                .map(|(&d, &l)| (d, l))
                .collect::<Vec<_>>(),
            rng.next_u64().is_multiple_of(2),
        );
        // Writes touch some saved clusters; they remove documents of those and some
        // alone; the live clusters link what the touched clusters held, some documents
        // alone and the new ones.
        let labels: BTreeSet<u64> = saved_labels.values().copied().collect();
        let loaded: FxHashSet<u64> = labels
            .into_iter()
            .filter(|_| rng.next_u64().is_multiple_of(3))
            .collect();
        let free: Vec<u64> = (saved_docs.iter().copied())
            .filter(|d| saved_labels.get(d).is_none_or(|l| loaded.contains(l)))
            .collect();
        let removed: FxHashSet<u64> = free
            .iter()
            .copied()
            .filter(|_| rng.next_u64().is_multiple_of(4))
            .collect();
        let new_docs: Vec<u64> = (0..rng.next_u64() % 50).map(|i| 1000 + i).collect();
        let mut new_ids: Vec<(u64, u64)> = new_docs.iter().map(|&d| (hash(&mut rng), d)).collect();
        new_ids.sort_unstable();
        let linked: Vec<u64> = (free.iter().copied())
            .filter(|d| !removed.contains(d))
            .chain(new_docs.iter().copied())
            .collect();
        let live_labels = clusters(&linked, &mut rng);
        let live: Vec<(u64, u64)> = live_labels.iter().map(|(&d, &l)| (d, l)).collect();
        // The state after it, from scratch.
        let ids = (saved_ids.iter().copied())
            .filter(|(_, d)| !removed.contains(d))
            .chain(new_ids.iter().copied())
            .collect();
        let mut labels: BTreeMap<u64, u64> = (saved_labels.into_iter())
            .filter(|(_, l)| !loaded.contains(l))
            .collect();
        labels.extend(live_labels);
        let mut removed_ids: Vec<(u64, u64)> = (saved_ids.iter().copied())
            .filter(|(_, d)| removed.contains(d))
            .collect();
        removed_ids.sort_unstable();
        let case = Case {
            removed,
            removed_ids,
            new_ids,
            loaded,
            live,
            ids,
            labels,
        };
        (saved, case)
    }

    /// `state` answers as the state `case` describes, for every hash, document and label.
    fn check(state: &State, case: &Case, what: &str) {
        for h in 0..64 {
            let want: Vec<u64> = case.ids.iter().filter(|p| p.0 == h).map(|p| p.1).collect();
            assert_eq!(state.ids(h).collect::<Vec<_>>(), want, "{what}: ids of {h}");
            let rev: Vec<u64> = state.ids(h).rev().collect();
            assert_eq!(
                rev,
                want.iter().rev().copied().collect::<Vec<_>>(),
                "{what}: reversed"
            );
        }
        let mut members: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for (&d, &l) in &case.labels {
            members.entry(l).or_default().push(d);
        }
        for doc in 0..1100 {
            assert_eq!(
                state.label(doc),
                case.labels.get(&doc).copied(),
                "{what}: label of {doc}"
            );
            let want = members.get(&doc).cloned().unwrap_or_default();
            assert_eq!(
                state.members(doc).collect::<Vec<_>>(),
                want,
                "{what}: members of {doc}"
            );
            assert_eq!(state.size(doc), want.len() as u64, "{what}: size of {doc}");
        }
        assert_eq!(
            state.counts(),
            (members.len() as u64, case.labels.len() as u64),
            "{what}"
        );
        let pairs: Vec<(u64, u64)> = case.labels.iter().map(|(&d, &l)| (d, l)).collect();
        assert_eq!(state.label_pairs().collect::<Vec<_>>(), pairs, "{what}");
        let mut by_label: Vec<(u64, u64)> = pairs.iter().map(|&(d, l)| (l, d)).collect();
        by_label.sort_unstable();
        assert_eq!(state.member_pairs().collect::<Vec<_>>(), by_label, "{what}");
        let ids: Vec<(u64, u64)> = case.ids.iter().copied().collect();
        assert_eq!(state.id_pairs().collect::<Vec<_>>(), ids, "{what}");
    }

    /// A state with a checkpoint's changes pending answers every question as the state
    /// after the checkpoint, computed from scratch, does; and the file written from it
    /// (which the service puts in its place) answers the same. It fails where the pending
    /// changes are ignored by a lookup, or miscounted in the lists the file is written from
    /// (a list of another length than its header fails the write).
    #[test]
    fn a_pending_state_answers_as_the_state_written_from_it() {
        let dir = tempfile::tempdir().unwrap();
        for seed in 0..300 {
            let (saved, case) = case(seed);
            let state = State::saved(Saved::in_memory(1, 3, &mut [], &mut [], false));
            let plain = State::saved(saved);
            let pending = plain.with_changes(
                (case.removed.clone(), case.removed_ids.clone()),
                case.new_ids.clone(),
                case.loaded.clone(),
                case.live.clone(),
            );
            assert!(pending.is_pending() && !pending.reclustered());
            check(&pending, &case, &format!("seed {seed}, pending"));
            Saved::write_lists(dir.path(), 7, 3, pending.lists(), false).unwrap();
            let written = Saved::open(dir.path(), 7, 3).unwrap();
            let mut settled = pending.clone();
            // A state is put in place only over the one it was written from.
            let mut other = state.clone();
            assert!(!other.settle(&pending, Saved::open(dir.path(), 7, 3).unwrap()));
            assert!(settled.settle(&pending, written));
            assert!(!settled.is_pending());
            check(&settled, &case, &format!("seed {seed}, written"));
            // A state with nothing pending writes its lists whole.
            Saved::write_lists(dir.path(), 8, 3, settled.lists(), false).unwrap();
            let again = State::saved(Saved::open(dir.path(), 8, 3).unwrap());
            check(&again, &case, &format!("seed {seed}, written again"));
        }
    }
}
