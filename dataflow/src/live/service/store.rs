//! The documents present, as queries read them: the saved index (memory-mapped, as
//! `neardup query` reads it) less the documents removed from it since, plus the documents
//! written since, kept in memory in tables of the same design.
//!
//! The written documents' tables ([`WrittenDocs`]) are keyed by a table's key (the
//! fingerprint's bits under the table's mask): a query looks its key up in every table,
//! and reports a document only from the first table in which the two share a key
//! ([`TableDesign::first_shared_table`]), exactly the rule of the saved tables, so the two
//! halves together answer as one index over the documents present would.
//!
//! Only the writer thread changes a store (under the service's write lock); queries share it.

use std::sync::Arc;

use fxhash::{FxHashMap, FxHashSet};
use neardup_core::TableDesign;
use neardup_io::index::{merge_count, Checkpoint, DocEntry, DocView, Index};
use serde::Serialize;

use super::saved::{id_hash, partition, Saved};
use super::state::State;
use super::written::{Written, WrittenDocs};

/// One document within `k` of a query or of a document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Neighbour {
    /// Its id (`None`: an indexed document that had none).
    pub id: Option<String>,
    pub doc_id: u64,
    pub hamming: u32,
    /// Whether its content digest equals the query's (only when the query had a digest).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact: Option<bool>,
    /// Its cluster (the smallest doc number in it), `None` when it is alone.
    pub cluster_id: Option<u64>,
}

/// The documents present (see the module docs).
pub struct Store {
    /// Shared with the puts that asked it beforehand ([`base_within`]), which the writer
    /// trusts only while it is still this one.
    base: Arc<Index>,
    design: TableDesign,
    /// Documents of the index replaced or deleted since it was opened.
    removed: FxHashSet<u64>,
    /// The documents written since the index was opened (or last checkpointed), with
    /// their digests and tables.
    written: WrittenDocs,
    /// The digests of the index's documents that its `docs.bin` does not hold: those of a
    /// format-1 index where the service wrote them (`serve-digests.bin`). The rest are read
    /// from `docs.bin` when asked.
    digest_of: FxHashMap<u64, u128>,
    /// The index's saved state (mapped, with a checkpoint's changes while its file is
    /// written: [`State`]): its ids by hash (an id names the index's largest
    /// document number that has it, unless that one was replaced or deleted since: see
    /// [`Store::doc_of`]), and its clusters as they were when it was written.
    saved: State,
    /// The saved clusters that writes have touched since: their documents are in the live
    /// clusters' dataflow, and [`Store::labels`] says where they are now.
    loaded: FxHashSet<u64>,
    /// Cluster label of every document of the live clusters in a cluster of two or more
    /// (LiveClusters' labels: the smallest doc number of its cluster). The rest are as
    /// saved (a cluster not [`Store::loaded`]), or alone.
    labels: FxHashMap<u64, u64>,
    /// Members per label of [`Store::labels`].
    sizes: FxHashMap<u64, u64>,
    /// Clusters of two or more documents, and the documents in them.
    clusters: u64,
    clustered: u64,
    documents: u64,
    indexed: u64,
}

/// The documents of the index `base` within `k` of `fp`, as `(doc, hamming)`, removed ones
/// included: the index's half of [`Store::within`], which a put asks before it reaches the
/// writer (the service's `Asked`).
pub(crate) fn base_within(base: &Index, fp: u64, k: u32) -> Vec<(u64, u32)> {
    let mut out = Vec::new();
    base.query(fp, k, |m| {
        out.push((base.doc_id(m.generation, m.row), m.hamming))
    });
    out
}

/// A document's content digest as the index records it.
///
/// Index format 2 stores each document's content digest in `docs.bin` (the run's
/// exact-duplicate key, the same `DocFingerprint::exact_key` the service computes), so an
/// indexed page answers `exact` as the service's own writes do. Format 1 has none; the
/// digests of the documents the service wrote are kept beside the index by its checkpoints
/// (`serve-digests.bin`).
fn indexed_digest(view: &DocView<'_>) -> Option<u128> {
    view.digest
}

impl Store {
    /// The documents of `base` with its `saved` state, and `digests` (doc -> digest) for
    /// those of them it knows.
    pub(crate) fn new(base: Index, saved: Saved, digests: &FxHashMap<u64, u128>) -> Store {
        let design = base
            .design()
            .expect("the service refuses MinHash indexes before it opens them (Writer::open)")
            .clone();
        let mut store = Store {
            base: Arc::new(base),
            removed: FxHashSet::default(),
            written: WrittenDocs::new(design.tables()),
            design,
            digest_of: FxHashMap::default(),
            saved: State::saved(saved),
            loaded: FxHashSet::default(),
            labels: FxHashMap::default(),
            sizes: FxHashMap::default(),
            clusters: 0,
            clustered: 0,
            documents: 0,
            indexed: 0,
        };
        store.take_base(digests);
        store
    }

    fn take_base(&mut self, digests: &FxHashMap<u64, u128>) {
        (self.documents, self.indexed) = self.base.manifest().present();
        (self.clusters, self.clustered) = self.saved.counts();
        if digests.is_empty() {
            return;
        }
        let known: Vec<(u64, u128)> = self
            .base
            .docs()
            .filter(|view| !view.empty && indexed_digest(view).is_none())
            .filter_map(|view| Some((view.doc_id, *digests.get(&view.doc_id)?)))
            .collect();
        self.digest_of.extend(known);
    }

    /// Replaces the index by `base`, which holds exactly the documents present (a
    /// checkpoint, `saving` its changes to the state): the written documents' tables are
    /// emptied, and the clusters are the saved ones again (the caller starts its live
    /// clusters afresh). The state is the saved one with the changes pending; it is given
    /// back to be written ([`Store::settle`] puts it in place).
    pub(crate) fn rebase(&mut self, base: Index, saving: Saving) -> State {
        debug_assert_eq!(base.manifest().present().0, self.documents);
        self.base = Arc::new(base);
        let removed = std::mem::take(&mut self.removed);
        let loaded = std::mem::take(&mut self.loaded);
        let removed = (removed, saving.removed_ids);
        self.saved = (self.saved).with_changes(removed, saving.new_ids, loaded, saving.live);
        // Every present document is in the new index, which names each id's latest.
        self.written = WrittenDocs::new(self.design.tables());
        self.labels = FxHashMap::default();
        self.sizes = FxHashMap::default();
        debug_assert_eq!(self.saved.counts(), (self.clusters, self.clustered));
        (self.clusters, self.clustered) = self.saved.counts();
        self.saved.clone()
    }

    /// The state: saved, or with a checkpoint's changes pending.
    pub(crate) fn state(&self) -> &State {
        &self.saved
    }

    /// `saved`, written from `written_from`, in its place where the store's state is still
    /// that one (the two answer alike).
    pub(crate) fn settle(&mut self, written_from: &State, saved: Saved) -> bool {
        self.saved.settle(written_from, saved)
    }

    pub fn base(&self) -> &Index {
        &self.base
    }

    /// The index, to ask outside the lock ([`base_within`]).
    pub(crate) fn shared_base(&self) -> &Arc<Index> {
        &self.base
    }

    pub fn k(&self) -> u32 {
        self.design.k()
    }

    /// The documents present, and those of them that are not empty.
    pub fn documents(&self) -> u64 {
        self.documents
    }

    pub fn indexed(&self) -> u64 {
        self.indexed
    }

    /// The documents written since the index was last written.
    pub fn written(&self) -> usize {
        self.written.len()
    }

    /// Clusters of two or more documents, and the documents in them.
    pub fn clusters(&self) -> (u64, u64) {
        (self.clusters, self.clustered)
    }

    /// The present document with this id: a written one, else the index's largest
    /// document number with it, unless that one was replaced or deleted (the simple
    /// version: a map of every present document's id, where a replaced or deleted
    /// document's id is removed).
    pub fn doc_of(&self, id: &str) -> Option<u64> {
        if let Some(doc) = self.written.doc_of(id) {
            return Some(doc);
        }
        let doc = self.saved.ids(id_hash(id)).rev().find(|&doc| {
            self.find_base_any(doc)
                .is_some_and(|(g, row)| self.base.doc(g, row).id == Some(id))
        })?;
        (!self.removed.contains(&doc) && !self.base.is_deleted(doc)).then_some(doc)
    }

    /// Where a present document of the index is: its generation and row.
    fn find_base(&self, doc: u64) -> Option<(usize, u32)> {
        if self.removed.contains(&doc) || self.base.is_deleted(doc) {
            return None;
        }
        self.find_base_any(doc)
    }

    /// Where a document of the index is, present or not.
    fn find_base_any(&self, doc: u64) -> Option<(usize, u32)> {
        let base = &self.base;
        (0..base.generations()).find_map(|g| {
            let n = base.generation_documents(g);
            // A generation's doc numbers ascend: one whose range leaves `doc` out is skipped.
            if n == 0 || doc < base.doc_id(g, 0) || doc > base.doc_id(g, n as u32 - 1) {
                return None;
            }
            let row = partition(n, |r| base.doc_id(g, r as u32) < doc);
            (row < n && base.doc_id(g, row as u32) == doc).then_some((g, row as u32))
        })
    }

    /// A present document's id, fingerprint, and whether it is empty.
    pub fn doc(&self, doc: u64) -> Option<(Option<&str>, u64, bool)> {
        if let Some((w, _)) = self.written.get(doc) {
            return Some((Some(&w.id), w.simhash, w.empty));
        }
        let (g, row) = self.find_base(doc)?;
        let view = self.base.doc(g, row);
        Some((view.id, view.simhash, view.empty))
    }

    /// The url and fetch time of a document written since the last checkpoint.
    pub fn origin(&self, doc: u64) -> (Option<&str>, Option<&str>) {
        match self.written.get(doc) {
            Some((w, _)) => (w.url.as_deref(), w.time.as_deref()),
            None => (None, None),
        }
    }

    /// A present document's content digest, where known.
    pub fn digest(&self, doc: u64) -> Option<u128> {
        if let Some((w, digest)) = self.written.get(doc) {
            return (!w.empty).then_some(digest);
        }
        self.digest_of.get(&doc).copied().or_else(|| {
            let (g, row) = self.find_base(doc)?;
            let view = self.base.doc(g, row);
            indexed_digest(&view).filter(|_| !view.empty)
        })
    }

    /// A present document's cluster (`None` when alone) and its size (1 when alone): as
    /// the live clusters say, else as saved where no write has touched its saved cluster.
    pub fn cluster(&self, doc: u64) -> (Option<u64>, u64) {
        if let Some(&label) = self.labels.get(&doc) {
            return match self.sizes.get(&label).copied().unwrap_or(1) {
                1 => (None, 1),
                n => (Some(label), n),
            };
        }
        match self.untouched_cluster(doc) {
            Some(label) => (Some(label), self.saved.size(label)),
            None => (None, 1),
        }
    }

    /// `(doc, cluster)` of every present document of the index whose cluster is not the one
    /// the index gives it (-1: alone now): of those of the saved clusters a write touched
    /// and those in the live clusters, or, where the index's clusters are not the service's
    /// ([`Store::reclustered`]), of all.
    fn cluster_changes(&self) -> Vec<(u64, i64)> {
        let mut changes = Vec::new();
        let mut changed = |doc: u64, now: Option<u64>, had: Option<i64>| {
            if now.map(|c| c as i64) != had {
                changes.push((doc, now.map_or(-1, |c| c as i64)));
            }
        };
        let base = &self.base;
        if self.saved.reclustered() {
            // Every present document of the index, in doc order, beside the saved labels
            // (in doc order too): one pass over each, no search.
            let mut saved = self.saved.label_pairs().peekable();
            for g in 0..base.generations() {
                for row in 0..base.generation_documents(g) as u32 {
                    let doc = base.doc_id(g, row);
                    if self.removed.contains(&doc) || base.is_deleted(doc) {
                        continue;
                    }
                    while saved.next_if(|&(d, _)| d < doc).is_some() {}
                    let label = saved.next_if(|&(d, _)| d == doc).map(|(_, label)| label);
                    changed(doc, self.cluster_as(doc, label), base.cluster_id(g, row));
                }
            }
        } else {
            let mut touched: Vec<u64> = (self.loaded.iter())
                .flat_map(|&label| self.saved.members(label))
                .chain(self.labels.keys().copied())
                .collect();
            touched.sort_unstable();
            touched.dedup();
            for doc in touched {
                if let Some((g, row)) = self.find_base(doc) {
                    changed(doc, self.cluster(doc).0, base.cluster_id(g, row));
                }
            }
        }
        changes
    }

    /// [`Store::cluster`]'s label of a document whose saved label is `saved` (found by the
    /// caller).
    fn cluster_as(&self, doc: u64, saved: Option<u64>) -> Option<u64> {
        match self.labels.get(&doc) {
            Some(&label) => (self.sizes.get(&label).copied().unwrap_or(1) >= 2).then_some(label),
            None => saved.filter(|label| !self.loaded.contains(label)),
        }
    }

    /// The saved cluster of a document of the index, where no write has touched it (its
    /// documents are not in the live clusters).
    pub(crate) fn untouched_cluster(&self, doc: u64) -> Option<u64> {
        self.saved
            .label(doc)
            .filter(|label| !self.loaded.contains(label))
    }

    /// The documents of a saved cluster.
    pub(crate) fn saved_members(&self, label: u64) -> impl Iterator<Item = u64> + '_ {
        self.saved.members(label)
    }

    /// The fingerprint of a document of the index, present or not.
    pub(crate) fn base_simhash(&self, doc: u64) -> Option<u64> {
        let (g, row) = self.find_base_any(doc)?;
        Some(self.base.simhash(g, row))
    }

    /// Whether a document of the index was removed since it was opened.
    pub(crate) fn is_removed(&self, doc: u64) -> bool {
        self.removed.contains(&doc)
    }

    /// Whether the index's own cluster column differs from the service's clusters as
    /// saved.
    pub(crate) fn reclustered(&self) -> bool {
        self.saved.reclustered()
    }

    /// The present, non-empty documents within `k` bits of `fp` (`k` at most the index's),
    /// sorted by doc number, as `(doc, hamming)`.
    pub fn within(&self, fp: u64, k: u32) -> Vec<(u64, u32)> {
        let k = k.min(self.design.k());
        let mut out = base_within(&self.base, fp, k);
        out.retain(|(doc, _)| !self.removed.contains(doc));
        self.written
            .within(&self.design, fp, k, |doc, d| out.push((doc, d)));
        out.sort_unstable();
        out
    }

    /// [`Store::neighbours`] at the index's k where the index's part was asked beforehand:
    /// `base`, the index's documents within k of `fp` as `(doc, hamming)`, removed ones
    /// included (a replay asks a whole chunk of the log's puts at once; a write's caller
    /// asks before the writer takes it).
    pub(crate) fn neighbours_from(
        &self,
        fp: u64,
        base: Vec<(u64, u32)>,
        digest: Option<u128>,
    ) -> Vec<Neighbour> {
        let mut out: Vec<(u64, u32)> = base
            .into_iter()
            .filter(|(doc, _)| !self.removed.contains(doc))
            .collect();
        self.written
            .within(&self.design, fp, self.design.k(), |doc, d| {
                out.push((doc, d))
            });
        out.sort_unstable();
        out.into_iter()
            .map(|(doc, hamming)| self.neighbour(doc, hamming, digest))
            .collect()
    }

    /// [`Store::within`] with each document's id, cluster, and (given the query's digest)
    /// whether it is an exact duplicate.
    pub fn neighbours(&self, fp: u64, k: u32, digest: Option<u128>) -> Vec<Neighbour> {
        self.within(fp, k)
            .into_iter()
            .map(|(doc, hamming)| self.neighbour(doc, hamming, digest))
            .collect()
    }

    pub(crate) fn neighbour(&self, doc: u64, hamming: u32, digest: Option<u128>) -> Neighbour {
        Neighbour {
            id: self.doc(doc).and_then(|d| d.0).map(str::to_string),
            doc_id: doc,
            hamming,
            exact: digest.map(|d| self.digest(doc) == Some(d)),
            cluster_id: self.cluster(doc).0,
        }
    }

    /// Adds a written document (its number is new; its id is no present document's).
    pub(crate) fn insert(&mut self, doc: u64, written: Written, digest: u128) {
        self.documents += 1;
        if !written.empty {
            self.indexed += 1;
        }
        self.written.insert(&self.design, doc, written, digest);
    }

    /// Removes a present document; returns whether it was present.
    pub(crate) fn remove(&mut self, doc: u64) -> bool {
        let empty = match self.written.remove(&self.design, doc) {
            Some(w) => w.empty,
            None => match self.doc(doc) {
                Some((_, _, empty)) => {
                    self.removed.insert(doc);
                    self.digest_of.remove(&doc);
                    empty
                }
                None => return false,
            },
        };
        self.documents -= 1;
        if !empty {
            self.indexed -= 1;
        }
        true
    }

    /// Applies cluster label changes `(doc, before, after)` from `LiveClusters::commit`,
    /// which includes the documents of the saved clusters `loaded` into it since the last
    /// commit (their documents were taken out of the saved counts then, and come back
    /// here).
    pub(crate) fn relabel(
        &mut self,
        changes: &[crate::live::clusters::LabelChange],
        loaded: impl IntoIterator<Item = u64>,
    ) {
        for label in loaded {
            if self.loaded.insert(label) {
                self.clusters -= 1;
                self.clustered -= self.saved.size(label);
            }
        }
        for &(doc, before, after) in changes {
            if let Some(old) = before {
                self.labels.remove(&doc);
                let n = self.sizes.get_mut(&old).expect("a label has a size");
                *n -= 1;
                let n = *n;
                if n == 0 {
                    self.sizes.remove(&old);
                }
                self.count(n + 1, n);
            }
            if let Some(new) = after {
                self.labels.insert(doc, new);
                let n = self.sizes.entry(new).or_default();
                *n += 1;
                let n = *n;
                self.count(n - 1, n);
            }
        }
    }

    /// Keeps the cluster counts as one cluster's size goes from `from` to `to` (by one).
    fn count(&mut self, from: u64, to: u64) {
        let clustered = |n: u64| if n >= 2 { n } else { 0 };
        self.clustered = self.clustered + clustered(to) - clustered(from);
        match (from >= 2, to >= 2) {
            (false, true) => self.clusters += 1,
            (true, false) => self.clusters -= 1,
            _ => {}
        }
    }

    /// What a checkpoint writes ([`Checkpoint`]): the documents written since the last one
    /// (with `source`), the index's documents removed since, and the index's documents whose
    /// cluster is no longer the one the index gives them (where the index's clusters are not
    /// the service's, [`Store::reclustered`], every document's is compared); the newest
    /// generations of at most `merge_limit` documents in all merged ([`merge_count`]), none
    /// below `floor` (a background merge takes those).
    /// With it, the changes to the saved state: `(hash of the id, doc)` of every document
    /// written, and `(doc, label)` of every one in a live cluster of two or more.
    ///
    /// The simple version writes every document present, rewritten.
    pub(crate) fn checkpoint(
        &self,
        source: &str,
        files: u64,
        merge_limit: u64,
        floor: usize,
    ) -> Saving {
        let mut docs = Vec::with_capacity(self.written.len());
        let mut new_ids = Vec::with_capacity(self.written.len());
        for (doc, w, digest) in self.written.iter() {
            new_ids.push((id_hash(&w.id), doc));
            docs.push(written_entry(doc, w, digest, source, self.cluster(doc).0));
        }
        new_ids.sort_unstable();
        let mut removed_ids = Vec::new();
        let deleted: Vec<(u64, bool)> = (self.removed.iter())
            .map(|&doc| {
                let view = self.find_base_any(doc).map(|(g, r)| self.base.doc(g, r));
                if let Some(id) = view.as_ref().and_then(|v| v.id) {
                    removed_ids.push((id_hash(id), doc));
                }
                (doc, view.is_some_and(|v| !v.empty))
            })
            .collect();
        removed_ids.sort_unstable();
        let cluster_changes = self.cluster_changes();
        let mut live: Vec<(u64, u64)> = (self.labels.iter())
            .filter(|(_, label)| self.sizes.get(label).is_some_and(|&n| n >= 2))
            .map(|(&doc, &label)| (doc, label))
            .collect();
        live.sort_unstable();
        // The documents each generation still holds: less those removed since.
        let mut present = self.base.present_rows();
        for &doc in &self.removed {
            if let Some(n) = self.base.generation_of(doc).map(|g| &mut present[g]) {
                *n = n.saturating_sub(1);
            }
        }
        let entries = &self.base.manifest().generations;
        let (entries, present) = (&entries[floor..], &present[floor..]);
        let merge = merge_count(entries, present, docs.len() as u64, merge_limit);
        Saving {
            checkpoint: Checkpoint {
                docs,
                files,
                cluster_changes,
                deleted,
                merge,
            },
            new_ids,
            live,
            removed_ids,
        }
    }
}

/// What [`Store::checkpoint`] gives: the checkpoint, and the changes to the saved state
/// ([`Store::save_state`]).
pub(crate) struct Saving {
    pub checkpoint: Checkpoint,
    /// `(hash of the id, doc)` of the documents written, sorted.
    pub new_ids: Vec<(u64, u64)>,
    /// `(doc, label)` of the documents in the live clusters of two or more, sorted.
    pub live: Vec<(u64, u64)>,
    /// `(hash of the id, doc)` of the index's documents removed since the last checkpoint
    /// that have an id, sorted.
    pub removed_ids: Vec<(u64, u64)>,
}

/// A written document as a checkpoint writes it, in `cluster`.
fn written_entry(
    doc: u64,
    w: &Written,
    digest: u128,
    source: &str,
    cluster: Option<u64>,
) -> DocEntry {
    DocEntry {
        doc_id: doc,
        id: Some(w.id.to_string()),
        source: source.to_string(),
        url: w.url.as_deref().map(str::to_string),
        simhash: w.simhash,
        empty: w.empty,
        cluster_id: cluster.map(|c| c as i64),
        digest: (!w.empty).then_some(digest),
        // Written documents carry no keep rank, size or parsed capture time yet.
        ..Default::default()
    }
}
