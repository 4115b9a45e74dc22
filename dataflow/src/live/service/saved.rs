//! What the service keeps beside the index so that a start-up reads it instead of
//! recomputing it (`INDEX/serve-state.bin`): the ids of the index's documents by hash, and
//! the clusters of its documents, by document and by cluster.
//!
//! The simple version recomputes all of it at every start: every document's id into a
//! sorted list, every document's neighbours found in the index and the clusters built from
//! them. That is work in proportion to the index (about 2 s a million documents, and the
//! clusters' state in memory), before the first answer. Here the start-up of an index whose
//! state is saved maps the file (the page cache holds it, not the heap) and checks its
//! checksum once: a start that checked it whole records so beside it ([`CHECKED_FILE`]:
//! the file's checksum and what the file system says of it), and a later start over the
//! same file reads only its header, as the index's own files are checked once
//! (`neardup_io::index::verified`): reading 2.4 GB at 100M documents cost a start from
//! disk 2 to 5 s, and would cost 20 to 50 s at a billion. The clusters enter the live
//! dataflow only when a write touches them (`touch` in the service module).
//!
//! The state is made for one state of the index: its stamp is a hash of the manifest's
//! generations (their numbers, directories and checksums), so any change to the index (a
//! checkpoint, a run adding a batch, a compaction) leaves it stale, and a start-up that finds
//! it stale, damaged or absent computes it again ([`compute`]) and writes it. Each checkpoint
//! writes the state of the generation it commits.
//!
//! Layout (little-endian 64-bit words after an 8-byte magic): a header of
//! [`HEADER_WORDS`] (version, stamp, k, ids, clustered documents, clusters, whether the
//! index's own cluster column differs, 0), then `(hash of the id, doc)` for every document
//! with an id, sorted; `(doc, label)` for every document in a cluster of two or more, sorted
//! (the label is the smallest document of its cluster); the same pairs as `(label, doc)`,
//! sorted; then the xxh3-64 of all that precedes.

use std::io::Write;
use std::ops::Range;
use std::path::Path;

use memmap2::Mmap;
use neardup_io::index::verified::Identity;
use neardup_io::index::{Index, Manifest};
use serde::{Deserialize, Serialize};

use super::ServiceError;

/// The state's file name inside the index directory.
pub const STATE_FILE: &str = "serve-state.bin";

/// The record that [`STATE_FILE`] was checked whole, beside it (JSON: its checksum and its
/// [`Identity`] then). A record that is absent, damaged or of another file vouches for
/// nothing: the file is checked again.
pub const CHECKED_FILE: &str = "serve-state.checked";

/// What [`CHECKED_FILE`] holds.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Checked {
    /// The file's own checksum (its last word).
    xxh3: u64,
    identity: Identity,
}

const MAGIC: [u8; 8] = *b"NDSTATE\0";
const VERSION: u64 = 1;
/// Words of the header after the magic.
const HEADER_WORDS: usize = 8;
const HEADER_BYTES: usize = 8 + 8 * HEADER_WORDS;

/// The stamp of an index's state: a hash of its manifest's generations.
pub fn stamp(manifest: &Manifest) -> u64 {
    let json = serde_json::to_vec(&manifest.generations).expect("generations serialize");
    xxhash_rust::xxh3::xxh3_64(&json)
}

/// The saved state of one state of the index, mapped (see the module docs).
pub struct Saved {
    map: Bytes,
    k: u32,
    ids: usize,
    clustered: usize,
    clusters: u64,
    reclustered: bool,
}

/// A state's bytes: the file mapped, or (where it could not be written) in memory.
enum Bytes {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// Why a state file is not used (a start-up then computes it again).
#[derive(Debug, PartialEq, Eq)]
pub enum Unused {
    Absent,
    Stale,
    Damaged(String),
}

impl Saved {
    /// Maps the state of the index at `dir` whose stamp is `stamp` and whose design's k is
    /// `k`, checking its checksum.
    pub fn open(dir: &Path, stamp: u64, k: u32) -> Result<Saved, Unused> {
        let path = dir.join(STATE_FILE);
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unused::Absent),
            Err(e) => return Err(Unused::Damaged(e.to_string())),
        };
        let identity = file
            .metadata()
            .map(|meta| Identity::of(&meta))
            .map_err(|e| Unused::Damaged(e.to_string()))?;
        // SAFETY: the file is the service's own, replaced only by renaming a new one over
        // it (never written in place), so the mapped bytes do not change under us.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Unused::Damaged(e.to_string()))?;
        let record = dir.join(CHECKED_FILE);
        let vouched = std::fs::read(&record)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Checked>(&bytes).ok())
            .filter(|then| identity.same_as(&then.identity))
            .map(|then| then.xxh3);
        let saved = Saved::parse(Bytes::Mapped(map), stamp, k, vouched)?;
        if vouched.is_none() {
            // Checked whole: recorded, so that the next start need not read it. A record
            // not written costs that start the check, nothing more.
            let checked = Checked {
                xxh3: saved.checksum(),
                identity,
            };
            let json = serde_json::to_vec(&checked).expect("a record serializes");
            let _ = neardup_io::atomic::write_atomically(&record, &json);
        }
        Ok(saved)
    }

    /// The state's checksum, its last word.
    fn checksum(&self) -> u64 {
        let at = self.map.len() - 8;
        u64::from_le_bytes(self.map[at..].try_into().unwrap())
    }

    /// A state of the layout in the module docs, checked: the header always, the checksum
    /// unless `vouched` is the one it ends with (a record that this very file was checked
    /// whole before).
    fn parse(map: Bytes, stamp: u64, k: u32, vouched: Option<u64>) -> Result<Saved, Unused> {
        let damaged = |what: &str| Unused::Damaged(what.to_string());
        if map.len() < HEADER_BYTES + 8 || map[..8] != MAGIC {
            return Err(damaged("not a state file of neardup serve"));
        }
        let word = |i: usize| u64::from_le_bytes(map[8 + 8 * i..16 + 8 * i].try_into().unwrap());
        if word(0) != VERSION || word(1) != stamp || word(2) != u64::from(k) {
            return Err(Unused::Stale);
        }
        let (ids, clustered) = (word(3) as usize, word(4) as usize);
        let body = HEADER_BYTES + 16 * ids + 32 * clustered;
        if map.len() != body + 8 {
            return Err(damaged("its length does not match its header"));
        }
        let sum = u64::from_le_bytes(map[body..].try_into().unwrap());
        if vouched != Some(sum) && xxhash_rust::xxh3::xxh3_64(&map[..body]) != sum {
            return Err(damaged("checksum mismatch"));
        }
        Ok(Saved {
            k,
            clusters: word(5),
            reclustered: word(6) != 0,
            ids,
            clustered,
            map,
        })
    }

    /// Writes a state for the index at `dir` (atomically): `ids` as `(hash of the id,
    /// doc)`, `labels` as `(doc, label)` of every clustered document; both are sorted here.
    pub fn write(
        dir: &Path,
        stamp: u64,
        k: u32,
        ids: &mut [(u64, u64)],
        labels: &mut [(u64, u64)],
        reclustered: bool,
    ) -> Result<(), ServiceError> {
        neardup_io::atomic::write_atomically_with(&dir.join(STATE_FILE), |out| {
            encode(out, stamp, k, ids, labels, reclustered)
        })?;
        Ok(())
    }

    /// [`Saved::write`]'s state kept in memory instead, where it could not be written (the
    /// next start-up computes it again).
    pub fn in_memory(
        stamp: u64,
        k: u32,
        ids: &mut [(u64, u64)],
        labels: &mut [(u64, u64)],
        reclustered: bool,
    ) -> Saved {
        let mut bytes = Vec::new();
        encode(&mut bytes, stamp, k, ids, labels, reclustered).expect("writes to memory");
        Saved::parse(Bytes::Owned(bytes), stamp, k, None).expect("a state just encoded reads back")
    }

    /// The `i`th pair of the array starting at byte `from`.
    fn pair(&self, from: usize, i: usize) -> (u64, u64) {
        let map = &self.map;
        let at = from + 16 * i;
        (
            u64::from_le_bytes(map[at..at + 8].try_into().unwrap()),
            u64::from_le_bytes(map[at + 8..at + 16].try_into().unwrap()),
        )
    }

    /// The rows `0..n` of the array at `from` whose first word is `key`.
    fn equal(&self, from: usize, n: usize, key: u64) -> Range<usize> {
        let lo = partition(n, |i| self.pair(from, i).0 < key);
        let hi = lo + partition(n - lo, |i| self.pair(from, lo + i).0 <= key);
        lo..hi
    }

    fn ids_at(&self) -> usize {
        HEADER_BYTES
    }

    fn by_doc_at(&self) -> usize {
        HEADER_BYTES + 16 * self.ids
    }

    fn by_label_at(&self) -> usize {
        self.by_doc_at() + 16 * self.clustered
    }

    /// Where `list` starts in the file, and its rows.
    fn list(&self, list: List) -> (usize, usize) {
        match list {
            List::Ids => (self.ids_at(), self.ids),
            List::ByDoc => (self.by_doc_at(), self.clustered),
            List::ByLabel => (self.by_label_at(), self.clustered),
        }
    }

    /// The rows of `list`.
    pub fn rows(&self, list: List) -> usize {
        self.list(list).1
    }

    /// Row `i` of `list`.
    pub fn row(&self, list: List, i: usize) -> (u64, u64) {
        self.pair(self.list(list).0, i)
    }

    /// The rows `range` of `list`, as the file holds them.
    pub fn row_bytes(&self, list: List, range: Range<usize>) -> &[u8] {
        let from = self.list(list).0;
        &self.map[from + 16 * range.start..from + 16 * range.end]
    }

    /// The rows of `list` whose first word is `key`.
    pub fn rows_of(&self, list: List, key: u64) -> Range<usize> {
        let (from, n) = self.list(list);
        if n == 0 {
            return 0..0;
        }
        self.equal(from, n, key)
    }

    /// Every `(hash of an id, doc)` saved, in that order.
    pub fn id_pairs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        (0..self.ids).map(move |i| self.pair(self.ids_at(), i))
    }

    /// Every `(doc, label)` of a clustered document saved, by doc.
    pub fn label_pairs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        (0..self.clustered).map(move |i| self.pair(self.by_doc_at(), i))
    }

    /// Every `(label, doc)` of a clustered document saved, by label.
    #[cfg(test)]
    pub fn member_pairs(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        (0..self.clustered).map(move |i| self.pair(self.by_label_at(), i))
    }

    /// The documents whose id hashes to `hash`, in document order.
    pub fn ids(&self, hash: u64) -> impl DoubleEndedIterator<Item = u64> + '_ {
        let rows = if self.ids == 0 {
            0..0
        } else {
            self.equal(self.ids_at(), self.ids, hash)
        };
        rows.map(move |i| self.pair(self.ids_at(), i).1)
    }

    /// A document's cluster as saved: its label, `None` when it was alone.
    pub fn label(&self, doc: u64) -> Option<u64> {
        if self.clustered == 0 {
            return None;
        }
        let rows = self.equal(self.by_doc_at(), self.clustered, doc);
        (!rows.is_empty()).then(|| self.pair(self.by_doc_at(), rows.start).1)
    }

    /// The documents of the saved cluster `label`, in order.
    pub fn members(&self, label: u64) -> impl Iterator<Item = u64> + '_ {
        let rows = if self.clustered == 0 {
            0..0
        } else {
            self.equal(self.by_label_at(), self.clustered, label)
        };
        rows.map(move |i| self.pair(self.by_label_at(), i).1)
    }

    /// The size of the saved cluster `label` (0: no such cluster).
    pub fn size(&self, label: u64) -> u64 {
        if self.clustered == 0 {
            return 0;
        }
        self.equal(self.by_label_at(), self.clustered, label).len() as u64
    }

    /// Clusters of two or more, and the documents in them.
    pub fn counts(&self) -> (u64, u64) {
        (self.clusters, self.clustered as u64)
    }

    /// The documents with an id.
    pub fn id_count(&self) -> usize {
        self.ids
    }

    /// The distance the clusters were made for.
    pub fn k(&self) -> u32 {
        self.k
    }

    /// Whether the index's own cluster column differs from these clusters (a run may
    /// cluster otherwise than the service): then a checkpoint has something to write.
    pub fn reclustered(&self) -> bool {
        self.reclustered
    }
}

/// A state's three lists of pairs, each sorted and with its length (as its header says it),
/// and its number of clusters: what [`Saved::write_lists`] writes as they come.
/// A piece of a list written ([`Lists`]): a pair, or rows copied whole from a saved
/// state's list (16 bytes each, as the file holds them).
pub enum Piece<'a> {
    Pair(u64, u64),
    Rows(&'a [u8]),
}

/// One of a saved state's three lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum List {
    /// `(hash of the id, doc)`, by hash.
    Ids,
    /// `(doc, label)`, by doc.
    ByDoc,
    /// `(label, doc)`, by label.
    ByLabel,
}

pub struct Lists<A, B, C> {
    /// `(hash of the id, doc)`.
    pub ids: (usize, A),
    /// `(doc, label)` of every clustered document.
    pub by_doc: (usize, B),
    /// The same as `(label, doc)`.
    pub by_label: (usize, C),
    pub clusters: u64,
}

impl Saved {
    /// Writes a state for the index at `dir` (atomically) from `lists` (sorted, of the
    /// lengths they say: a list of another length fails the write), without holding them.
    pub fn write_lists<'a, A, B, C>(
        dir: &Path,
        stamp: u64,
        k: u32,
        lists: Lists<A, B, C>,
        reclustered: bool,
    ) -> Result<(), ServiceError>
    where
        A: Iterator<Item = Piece<'a>>,
        B: Iterator<Item = Piece<'a>>,
        C: Iterator<Item = Piece<'a>>,
    {
        neardup_io::atomic::write_atomically_with(&dir.join(STATE_FILE), move |out| {
            encode_lists(out, (stamp, k, reclustered), lists)
        })?;
        Ok(())
    }
}

/// Writes a state (see the module docs), sorting `ids` and `labels` first.
fn encode(
    out: &mut dyn Write,
    stamp: u64,
    k: u32,
    ids: &mut [(u64, u64)],
    labels: &mut [(u64, u64)],
    reclustered: bool,
) -> std::io::Result<()> {
    // Radix sorts: a state holds a pair a document (and two a clustered one).
    radsort::sort_by_key(ids, |&pair| pair);
    radsort::sort_by_key(labels, |&pair| pair);
    let mut by_label: Vec<(u64, u64)> = labels.iter().map(|&(d, l)| (l, d)).collect();
    radsort::sort_by_key(&mut by_label, |&pair| pair);
    let mut clusters = 0u64;
    for (i, &(label, _)) in by_label.iter().enumerate() {
        if i == 0 || by_label[i - 1].0 != label {
            clusters += 1;
        }
    }
    fn pairs(list: &[(u64, u64)]) -> impl Iterator<Item = Piece<'static>> + '_ {
        list.iter().map(|&(a, b)| Piece::Pair(a, b))
    }
    let lists = Lists {
        ids: (ids.len(), pairs(ids)),
        by_doc: (labels.len(), pairs(labels)),
        by_label: (by_label.len(), pairs(&by_label)),
        clusters,
    };
    encode_lists(out, (stamp, k, reclustered), lists)
}

/// Writes a state of `lists` (see the module docs), in chunks.
fn encode_lists<'a, A, B, C>(
    out: &mut dyn Write,
    (stamp, k, reclustered): (u64, u32, bool),
    lists: Lists<A, B, C>,
) -> std::io::Result<()>
where
    A: Iterator<Item = Piece<'a>>,
    B: Iterator<Item = Piece<'a>>,
    C: Iterator<Item = Piece<'a>>,
{
    let Lists {
        ids,
        by_doc,
        by_label,
        clusters,
    } = lists;
    let header = [
        VERSION,
        stamp,
        u64::from(k),
        ids.0 as u64,
        by_doc.0 as u64,
        clusters,
        u64::from(reclustered),
        0,
    ];
    let mut out = Summed {
        out,
        hash: xxhash_rust::xxh3::Xxh3::new(),
    };
    out.write_all(&MAGIC)?;
    let words: Vec<u8> = header.iter().flat_map(|w| w.to_le_bytes()).collect();
    out.write_all(&words)?;
    let mut chunk = Vec::with_capacity(CHUNK_BYTES + 16);
    put_list(&mut out, &mut chunk, ids)?;
    put_list(&mut out, &mut chunk, by_doc)?;
    put_list(&mut out, &mut chunk, by_label)?;
    let sum = out.hash.digest();
    out.out.write_all(&sum.to_le_bytes())
}

/// Bytes of pairs gathered before they are hashed and written (one call each, where a pair
/// at a time spent a quarter of a checkpoint's time in the calls at 100M documents).
const CHUNK_BYTES: usize = 1 << 16;

/// Writes the `n` pairs of `pieces` through `chunk` (rows copied whole go straight
/// through); fails where there are not `n`.
fn put_list<'a>(
    out: &mut Summed<'_>,
    chunk: &mut Vec<u8>,
    (n, pieces): (usize, impl Iterator<Item = Piece<'a>>),
) -> std::io::Result<()> {
    let mut count = 0;
    for piece in pieces {
        match piece {
            Piece::Pair(a, b) => {
                chunk.extend_from_slice(&a.to_le_bytes());
                chunk.extend_from_slice(&b.to_le_bytes());
                count += 1;
                if chunk.len() >= CHUNK_BYTES {
                    out.write_all(chunk)?;
                    chunk.clear();
                }
            }
            Piece::Rows(rows) => {
                out.write_all(chunk)?;
                chunk.clear();
                out.write_all(rows)?;
                count += rows.len() / 16;
            }
        }
    }
    out.write_all(chunk)?;
    chunk.clear();
    if count != n {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a state list of {count} pairs where {n} were counted"),
        ));
    }
    Ok(())
}

/// Hashes what passes through to the file.
struct Summed<'a> {
    out: &'a mut dyn Write,
    hash: xxhash_rust::xxh3::Xxh3,
}

impl Write for Summed<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// A state computed from an index, for [`Saved::write`].
pub struct Computed {
    /// `(hash of the id, doc)` of every document with an id.
    pub ids: Vec<(u64, u64)>,
    /// `(doc, label)` of every document in a cluster of two or more.
    pub labels: Vec<(u64, u64)>,
    /// Whether the index's own cluster column differs from these clusters.
    pub reclustered: bool,
}

/// Computes the state of `index` from scratch: the service's clusters are the connected components of the graph
/// whose edges join two non-empty documents within `k` bits, each labelled with its
/// smallest document.
///
/// The simple version adds every edge to the live clusters' dataflow (what a start-up did
/// before the state was saved: 136 bytes of heap a document at 1M). Here union-find over the
/// documents' positions (4 bytes a document, for the computation only) finds the same
/// components, from the index's pairs within `k` ([`Index::self_pairs`]: each table walked
/// once, where asking every document as a query sorted the whole index once a table).
pub fn compute(index: &Index, k: u32) -> Computed {
    let starts: Vec<usize> = (0..index.generations())
        .scan(0, |at, g| {
            let start = *at;
            *at += index.generation_documents(g);
            Some(start)
        })
        .collect();
    let n = starts
        .last()
        .map_or(0, |&s| s + index.generation_documents(starts.len() - 1));
    let mut parent: Vec<u32> = (0..n as u32).collect();
    fn root(parent: &mut [u32], mut x: u32) -> u32 {
        while parent[x as usize] != x {
            let up = parent[parent[x as usize] as usize];
            parent[x as usize] = up;
            x = up;
        }
        x
    }
    index.self_pairs(k, |a, b, _| {
        let a = root(&mut parent, (starts[a.generation] + a.row as usize) as u32);
        let b = root(&mut parent, (starts[b.generation] + b.row as usize) as u32);
        if a != b {
            // The larger position under the smaller: any rule gives the same sets.
            parent[a.max(b) as usize] = a.min(b);
        }
    });
    // Each component's smallest document and size, at its root; and the ids. A document a
    // later generation deleted is in no pair, and in no list.
    let rows = || {
        (0..index.generations())
            .flat_map(move |g| (0..index.generation_documents(g) as u32).map(move |row| (g, row)))
    };
    let present = |(g, row): (usize, u32)| !index.is_deleted(index.doc_id(g, row));
    let mut ids = Vec::new();
    let mut smallest: Vec<u64> = vec![u64::MAX; n];
    let mut size: Vec<u32> = vec![0; n];
    for (g, row) in rows().filter(|&at| present(at)) {
        let view = index.doc(g, row);
        if let Some(id) = view.id {
            ids.push((id_hash(id), view.doc_id));
        }
        let r = root(&mut parent, (starts[g] + row as usize) as u32) as usize;
        smallest[r] = smallest[r].min(view.doc_id);
        size[r] += 1;
    }
    let mut labels = Vec::new();
    let mut reclustered = false;
    for (g, row) in rows().filter(|&at| present(at)) {
        let view = index.doc(g, row);
        let r = root(&mut parent, (starts[g] + row as usize) as u32) as usize;
        let label = (size[r] >= 2).then_some(smallest[r]);
        if let Some(l) = label {
            labels.push((view.doc_id, l));
        }
        reclustered |= view.cluster_id != label.map(|l| l as i64);
    }
    Computed {
        ids,
        labels,
        reclustered,
    }
}

/// The hash of an id in the state (and in the store's lookups).
pub fn id_hash(id: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(id.as_bytes())
}

/// The first `i` in `0..n` for which `less(i)` is false (`less` true then false).
pub fn partition(n: usize, less: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if less(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_core::unionfind::UnionFind;
    use neardup_core::{hamming, TableDesign};
    use neardup_io::index::{DocEntry, IndexSpec, IndexWriter, NewGeneration, Verify, FILE_SHIFT};
    use serde_json::json;
    use std::collections::HashMap;

    const K: u32 = 3;

    /// A document of [`index`]: its number, id, fingerprint, and whether it is empty.
    type Doc = (u64, Option<String>, u64, bool);

    /// An index of two generations: centres with near copies (some chains: a copy near
    /// the previous copy, not the centre), far documents, empty ones, some without ids,
    /// some ids given twice; the cluster column as a run might have it (every fourth
    /// document's differs from the service's).
    fn index(dir: &Path, seed: u64) -> Vec<Doc> {
        let spec = IndexSpec {
            scheme: "simhash-doc".into(),
            fingerprint: json!({"test": true}),
            design: TableDesign::for_k(K).unwrap(),
            minhash: None,
        };
        let mut writer = IndexWriter::create(dir, &spec).unwrap();
        let mut rng = neardup_core::testing::SeededRng::new(seed);
        let mut all = Vec::new();
        let mut centres: Vec<u64> = Vec::new();
        for file in 0..2u64 {
            let mut docs = Vec::new();
            for i in 0..60u64 {
                let doc = (file << FILE_SHIFT) + i * 2;
                let r = rng.next_u64();
                let simhash = if centres.is_empty() || r.is_multiple_of(3) {
                    let c = rng.next_u64();
                    centres.push(c);
                    c
                } else {
                    // Near the last centre, which then moves: chains of copies.
                    let c = centres.last_mut().unwrap();
                    *c ^= 1 << (r % 64);
                    if r.is_multiple_of(5) {
                        *c ^= 1 << ((r >> 8) % 64);
                    }
                    *c
                };
                let empty = r.is_multiple_of(17);
                let id = (!r.is_multiple_of(7)).then(|| format!("d{}", (r >> 20) % 90));
                all.push((doc, id.clone(), simhash, empty));
                docs.push(DocEntry {
                    doc_id: doc,
                    id,
                    source: "t.jsonl".into(),
                    simhash,
                    empty,
                    cluster_id: (i % 4 == 0).then_some(i as i64),
                    ..Default::default()
                });
            }
            writer
                .add(NewGeneration {
                    files: 1,
                    docs,
                    cluster_changes: Vec::new(),
                    keep: None,
                    decisions: None,
                })
                .unwrap();
        }
        all
    }

    /// The simple version: union-find over every pair of non-empty documents within k.
    fn brute_force(all: &[Doc]) -> Vec<(u64, u64)> {
        let mut uf = UnionFind::new();
        let live: Vec<_> = all.iter().filter(|d| !d.3).collect();
        for a in &live {
            uf.find(a.0);
            for b in &live {
                if hamming(a.2, b.2) <= K {
                    uf.union(a.0, b.0);
                }
            }
        }
        let mut members: HashMap<u64, Vec<u64>> = HashMap::new();
        for d in &live {
            members.entry(uf.find(d.0)).or_default().push(d.0);
        }
        let mut out = Vec::new();
        for m in members.values().filter(|m| m.len() >= 2) {
            let label = *m.iter().min().unwrap();
            out.extend(m.iter().map(|&d| (d, label)));
        }
        out.sort_unstable();
        out
    }

    #[test]
    fn computed_clusters_and_ids_equal_brute_force() {
        for seed in 1..6 {
            let tmp = tempfile::tempdir().unwrap();
            let all = index(tmp.path(), seed);
            let base = Index::open(tmp.path(), Verify::Checksums).unwrap();
            {
                let Computed {
                    mut ids,
                    mut labels,
                    reclustered,
                } = compute(&base, K);
                labels.sort_unstable();
                ids.sort_unstable();
                let want = brute_force(&all);
                assert!(want.len() > 10, "seed {seed}: too few clustered to test");
                assert_eq!(labels, want, "seed {seed}");
                let mut want_ids: Vec<(u64, u64)> = all
                    .iter()
                    .filter_map(|d| Some((id_hash(d.1.as_deref()?), d.0)))
                    .collect();
                want_ids.sort_unstable();
                assert_eq!(ids, want_ids);
                assert!(reclustered, "the cluster column differs from the service's");
            }
        }
    }

    /// The index of `seed` at `dir` ([`index`]'s documents), its stamp, and its state
    /// computed.
    fn computed(dir: &Path, seed: u64) -> (Vec<Doc>, u64, Computed) {
        let all = index(dir, seed);
        let base = Index::open(dir, Verify::Checksums).unwrap();
        (all, stamp(base.manifest()), compute(&base, K))
    }

    #[test]
    fn a_state_reads_back_and_a_stale_or_damaged_one_is_not_used() {
        let tmp = tempfile::tempdir().unwrap();
        let (
            all,
            stamp,
            Computed {
                mut ids,
                mut labels,
                ..
            },
        ) = computed(tmp.path(), 3);
        let dir = tmp.path();
        assert_eq!(Saved::open(dir, stamp, K).err(), Some(Unused::Absent));
        Saved::write(dir, stamp, K, &mut ids, &mut labels, true).unwrap();
        let in_memory = Saved::in_memory(stamp, K, &mut ids, &mut labels, true);
        let saved = Saved::open(dir, stamp, K).unwrap();
        let want = brute_force(&all);
        for state in [&saved, &in_memory] {
            assert!(state.reclustered());
            let mut sizes: HashMap<u64, u64> = HashMap::new();
            for &(_, l) in &want {
                *sizes.entry(l).or_default() += 1;
            }
            assert_eq!(state.counts(), (sizes.len() as u64, want.len() as u64));
            for &(doc, ..) in &all {
                let label = want.iter().find(|w| w.0 == doc).map(|w| w.1);
                assert_eq!(state.label(doc), label, "doc {doc}");
                if let Some(l) = label {
                    assert_eq!(state.size(l), sizes[&l]);
                    let members: Vec<u64> = state.members(l).collect();
                    let expected: Vec<u64> =
                        want.iter().filter(|w| w.1 == l).map(|w| w.0).collect();
                    assert_eq!(members, expected);
                }
            }
            for (doc, id, ..) in &all {
                if let Some(id) = id {
                    assert!(state.ids(id_hash(id)).any(|d| d == *doc), "{id}");
                }
            }
            assert_eq!(state.ids(id_hash("no such id")).count(), 0);
        }
        // Another state of the index, another k: stale.
        assert_eq!(Saved::open(dir, stamp ^ 1, K).err(), Some(Unused::Stale));
        assert_eq!(Saved::open(dir, stamp, K + 1).err(), Some(Unused::Stale));
        // One byte changed, or the file cut short: damaged (written in place, the file's
        // times move, so the record of its check no longer vouches for it; a tick of the
        // file system's clock first).
        let path = dir.join(STATE_FILE);
        let bytes = std::fs::read(&path).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        for at in [HEADER_BYTES + 5, bytes.len() - 20, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            std::fs::write(&path, &bad).unwrap();
            assert!(
                matches!(Saved::open(dir, stamp, K), Err(Unused::Damaged(_))),
                "byte {at}"
            );
        }
        std::fs::write(&path, &bytes[..bytes.len() - 8]).unwrap();
        assert!(matches!(
            Saved::open(dir, stamp, K),
            Err(Unused::Damaged(_))
        ));
        std::fs::write(&path, b"NDSTATE").unwrap();
        assert!(matches!(
            Saved::open(dir, stamp, K),
            Err(Unused::Damaged(_))
        ));
    }

    /// A start that checked the state whole records it; a later one reads only the header
    /// of the file the record names (shown by a damaged byte the record was made to vouch
    /// for, as a byte changed beneath the file system would be: taken), and checks again a
    /// file the record does not name.
    #[test]
    fn a_state_is_checked_whole_once() {
        let tmp = tempfile::tempdir().unwrap();
        let (
            _,
            stamp,
            Computed {
                mut ids,
                mut labels,
                ..
            },
        ) = computed(tmp.path(), 4);
        let dir = tmp.path();
        Saved::write(dir, stamp, K, &mut ids, &mut labels, false).unwrap();
        let (path, record) = (dir.join(STATE_FILE), dir.join(CHECKED_FILE));
        assert!(!record.exists());
        let sum = Saved::open(dir, stamp, K).unwrap().checksum();
        let checked: Checked = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(
            checked,
            Checked {
                xxh3: sum,
                identity: Identity::of(&meta)
            }
        );

        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER_BYTES + 3] ^= 0x10;
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&path, &bytes).unwrap();
        let now = Identity::of(&std::fs::metadata(&path).unwrap());
        assert!(
            !now.same_as(&checked.identity),
            "a write in place moves the file's times"
        );
        let vouch = |identity: Identity| {
            let json = serde_json::to_vec(&Checked {
                xxh3: sum,
                identity,
            })
            .unwrap();
            std::fs::write(&record, json).unwrap();
        };
        vouch(now.clone());
        assert!(Saved::open(dir, stamp, K).is_ok(), "vouched for: not read");
        vouch(checked.identity);
        assert!(matches!(
            Saved::open(dir, stamp, K),
            Err(Unused::Damaged(_))
        ));
        std::fs::write(&record, b"{").unwrap();
        assert!(matches!(
            Saved::open(dir, stamp, K),
            Err(Unused::Damaged(_))
        ));
    }
}
