//! The records that travel between workers.

use serde::{Deserialize, Serialize};

use crate::wire;

/// Bits of `doc_id` that number records within a file: `doc_id = (file << 40) | record`.
pub const RECORD_BITS: u32 = 40;

/// The stable document number: unique, independent of the number of workers, computed
/// without a global pass.
pub fn doc_id(file: u32, record: u64) -> u64 {
    ((file as u64) << RECORD_BITS) | record
}

/// A document number in its compact form: file and record, each a varint.
fn put_doc(out: &mut Vec<u8>, doc: u64) {
    wire::put_split(out, doc, RECORD_BITS);
}

fn get_doc(bytes: &mut dyn FnMut() -> Option<u8>) -> Option<u64> {
    wire::get_split(bytes, RECORD_BITS)
}

/// A document as a reader found it, on its way to the worker that fingerprints it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RawDoc {
    pub doc_id: u64,
    pub file: u32,
    /// 0-based record number in the file (JSONL line - 1, or Parquet row).
    pub record: u64,
    pub body: RawBody,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum RawBody {
    /// A record whose source kind defers parsing (a JSONL line), parsed by the
    /// fingerprinting worker (parsing is spread, like hashing).
    Raw(Vec<u8>),
    /// Fields already decoded (Parquet rows, plain files, archive records).
    Fields(neardup_io::record::Record),
    /// A fingerprint read from an existing table (`neardup search`).
    Fingerprint {
        simhash: u64,
        bytes: Option<u64>,
        empty: bool,
    },
    /// A record the reader could not decode; the message names what was wrong.
    Invalid(String),
}

/// A fingerprinted document: what the exact and near stages need of it.
///
/// Between processes it travels in its compact form ([`crate::wire`]): the fields that are
/// absent take a bit, not a byte, and a simhash document without URLs 39 bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocFp {
    pub doc_id: u64,
    pub simhash: u64,
    /// Exact-duplicate key (0 when exact folding is off or unknown).
    pub exact_key: u128,
    /// The keep rank (smaller is preferred).
    pub rank: u64,
    pub empty: bool,
    /// Hash of the user's id, to count duplicate ids.
    pub id_hash: Option<u64>,
    /// LSH band keys of the MinHash signature (MinHash mode only; empty otherwise).
    pub bands: Vec<u64>,
    /// The archive payload digest (xxh3-128 of `WARC-Payload-Digest`) and whether this is a
    /// revisit record naming it (see [`crate::stages::revisits`]).
    pub digest: Option<(u128, bool)>,
    /// xxh3-128 of the normalized URL, when the document has one (see
    /// [`crate::stages::urls`]).
    pub url_key: Option<u128>,
    /// xxh3-64 of the normalized URL's host (or the raw URL's host when it does not
    /// normalize): to count pairs that cross hosts.
    pub host_hash: Option<u64>,
    /// The host and the path (with query) of the normalized URL, for mirror detection
    /// ([`crate::stages::mirrors`]); boxed, since many corpora have no URLs.
    pub page: Option<Box<(String, String)>>,
}

/// Which of [`DocFp`]'s optional fields its compact form holds.
mod has {
    pub const EMPTY: u8 = 1;
    pub const EXACT_KEY: u8 = 1 << 1;
    pub const ID_HASH: u8 = 1 << 2;
    pub const DIGEST: u8 = 1 << 3;
    pub const REVISIT: u8 = 1 << 4;
    pub const URL_KEY: u8 = 1 << 5;
    pub const HOST_HASH: u8 = 1 << 6;
    pub const PAGE: u8 = 1 << 7;
}

impl wire::Compact for DocFp {
    const MAX_BYTES: usize = 64;

    fn encode(&self, out: &mut Vec<u8>) {
        encode_doc(self, &self.bands, out);
    }

    fn decode(bytes: &mut dyn FnMut() -> Option<u8>) -> Option<Self> {
        let (mut doc, bands) = decode_doc(bytes, Vec::with_capacity)?;
        doc.bands = bands;
        Some(doc)
    }
}

/// `doc`'s compact form, with `bands` as its band keys (`doc`'s own are not read).
fn encode_doc(doc: &DocFp, bands: &[u64], out: &mut Vec<u8>) {
    let flag = |on: bool, bit: u8| if on { bit } else { 0 };
    let flags = flag(doc.empty, has::EMPTY)
        | flag(doc.exact_key != 0, has::EXACT_KEY)
        | flag(doc.id_hash.is_some(), has::ID_HASH)
        | flag(doc.digest.is_some(), has::DIGEST)
        | flag(matches!(doc.digest, Some((_, true))), has::REVISIT)
        | flag(doc.url_key.is_some(), has::URL_KEY)
        | flag(doc.host_hash.is_some(), has::HOST_HASH)
        | flag(doc.page.is_some(), has::PAGE);
    out.push(flags);
    put_doc(out, doc.doc_id);
    wire::put_u64(out, doc.simhash);
    if doc.exact_key != 0 {
        wire::put_u128(out, doc.exact_key);
    }
    wire::put_rank(out, doc.rank);
    if let Some(h) = doc.id_hash {
        wire::put_u64(out, h);
    }
    wire::put_varint(out, bands.len() as u64);
    for &band in bands {
        wire::put_u64(out, band);
    }
    if let Some((digest, _)) = doc.digest {
        wire::put_u128(out, digest);
    }
    if let Some(key) = doc.url_key {
        wire::put_u128(out, key);
    }
    if let Some(h) = doc.host_hash {
        wire::put_u64(out, h);
    }
    if let Some(page) = &doc.page {
        wire::put_str(out, &page.0);
        wire::put_str(out, &page.1);
    }
}

/// Reads back what [`encode_doc`] wrote: the document without band keys, and its band
/// keys in a container `with_capacity` makes for their number.
fn decode_doc<B: Extend<u64>>(
    bytes: &mut dyn FnMut() -> Option<u8>,
    with_capacity: impl FnOnce(usize) -> B,
) -> Option<(DocFp, B)> {
    let flags = bytes()?;
    let on = |bit: u8| flags & bit != 0;
    let doc_id = get_doc(bytes)?;
    let simhash = wire::get_u64(bytes)?;
    let exact_key = if on(has::EXACT_KEY) {
        wire::get_u128(bytes)?
    } else {
        0
    };
    let rank = wire::get_rank(bytes)?;
    let id_hash = if on(has::ID_HASH) {
        Some(wire::get_u64(bytes)?)
    } else {
        None
    };
    let bands_len = wire::get_varint(bytes)?;
    // A signature has at most a few hundred bands: a longer count is a corrupt record,
    // and must not reserve memory.
    let mut bands = with_capacity(bands_len.min(1024) as usize);
    for _ in 0..bands_len {
        bands.extend(std::iter::once(wire::get_u64(bytes)?));
    }
    let digest = if on(has::DIGEST) {
        Some((wire::get_u128(bytes)?, on(has::REVISIT)))
    } else {
        None
    };
    let url_key = if on(has::URL_KEY) {
        Some(wire::get_u128(bytes)?)
    } else {
        None
    };
    let host_hash = if on(has::HOST_HASH) {
        Some(wire::get_u64(bytes)?)
    } else {
        None
    };
    let page = if on(has::PAGE) {
        Some(Box::new((wire::get_str(bytes)?, wire::get_str(bytes)?)))
    } else {
        None
    };
    let doc = DocFp {
        doc_id,
        simhash,
        exact_key,
        rank,
        empty: on(has::EMPTY),
        id_hash,
        bands: Vec::new(),
        digest,
        url_key,
        host_hash,
        page,
    };
    Some((doc, bands))
}

wire::serde_by_compact!(DocFp);

/// Band keys a [`HeldDoc`] keeps inline: MinHash mode's tuned banding has 9 bands at
/// `--threshold 0.8` and 16 or fewer down to 0.5 (128 permutations); more go to the heap.
pub const INLINE_BANDS: usize = 16;

/// A [`DocFp`] as an external sort holds it: the band keys inline, so that a record owns
/// no heap memory of its own (where its page, a web document's host and path, is none).
///
/// The simple version sorts `DocFp`s, each with its band keys in a `Vec` of their own: one
/// small allocation per record held, freed in sorted order when a run is written, so the
/// allocator's heap was left in pieces that the next run's records and the records in
/// flight only partly reused. Threshold mode's exact stage at 50 GB of text (nine runs of
/// the signatures' sort per worker, one at 10 GB) peaked 0.3 GB above the 10 GB run's,
/// with 0.5 GB of freed heap kept by the allocator (docs/performance.md). A sort's records
/// are now one block of memory, given back whole when a run is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldDoc {
    /// The document, its `bands` empty (no allocation).
    doc: DocFp,
    bands: smallvec::SmallVec<[u64; INLINE_BANDS]>,
}

impl HeldDoc {
    /// The document, its band keys excepted (see [`HeldDoc::bands`]).
    pub fn doc(&self) -> &DocFp {
        &self.doc
    }

    pub fn bands(&self) -> &[u64] {
        &self.bands
    }

    /// The document as it travels, its band keys back in their `Vec`.
    pub fn into_doc(self) -> DocFp {
        let mut doc = self.doc;
        doc.bands = self.bands.into_vec();
        doc
    }

    /// Bytes the record takes in memory, its heap included (band keys past
    /// [`INLINE_BANDS`], a page).
    pub fn memory_bytes(&self) -> usize {
        let spilled = if self.bands.spilled() {
            8 * self.bands.capacity()
        } else {
            0
        };
        std::mem::size_of::<HeldDoc>() + self.doc.memory_bytes() - std::mem::size_of::<DocFp>()
            + spilled
    }
}

impl From<DocFp> for HeldDoc {
    fn from(mut doc: DocFp) -> Self {
        let bands = smallvec::SmallVec::from_slice(&doc.bands);
        doc.bands = Vec::new();
        HeldDoc { doc, bands }
    }
}

impl wire::Compact for HeldDoc {
    const MAX_BYTES: usize = DocFp::MAX_BYTES;

    fn encode(&self, out: &mut Vec<u8>) {
        encode_doc(&self.doc, &self.bands, out);
    }

    fn decode(bytes: &mut dyn FnMut() -> Option<u8>) -> Option<Self> {
        let (doc, bands) = decode_doc(bytes, smallvec::SmallVec::with_capacity)?;
        Some(HeldDoc { doc, bands })
    }
}

wire::serde_by_compact!(HeldDoc);

/// Why two documents are paired.
/// A set of document numbers as a bit per number, by input file: what a home keeps of
/// "which of my documents ..." (need a set for verification, are removed), at an eighth of
/// a byte per document where a hash set of numbers takes 16 or more.
#[derive(Debug, Default)]
pub struct DocBits {
    files: std::collections::HashMap<u32, Vec<u64>>,
    count: u64,
}

impl DocBits {
    fn split(doc: u64) -> (u32, usize) {
        (
            (doc >> RECORD_BITS) as u32,
            (doc & ((1 << RECORD_BITS) - 1)) as usize,
        )
    }

    pub fn insert(&mut self, doc: u64) {
        let (file, record) = DocBits::split(doc);
        let bits = self.files.entry(file).or_default();
        if bits.len() <= record / 64 {
            bits.resize(record / 64 + 1, 0);
        }
        let word = &mut bits[record / 64];
        if *word & (1 << (record % 64)) == 0 {
            *word |= 1 << (record % 64);
            self.count += 1;
        }
    }

    pub fn contains(&self, doc: u64) -> bool {
        let (file, record) = DocBits::split(doc);
        self.files
            .get(&file)
            .and_then(|bits| bits.get(record / 64))
            .is_some_and(|word| word & (1 << (record % 64)) != 0)
    }

    /// Numbers in the set.
    pub fn len(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

impl DocFp {
    /// Bytes the document takes in memory, its heap included: what an external sort
    /// counts against its budget.
    pub fn memory_bytes(&self) -> usize {
        let page = self.page.as_ref().map_or(0, |p| {
            std::mem::size_of::<(String, String)>() + p.0.capacity() + p.1.capacity()
        });
        std::mem::size_of::<DocFp>() + 8 * self.bands.capacity() + page
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EdgeKind {
    Exact,
    Near,
    /// A document whose fingerprint (the whole simhash) another document of its bucket has
    /// too, linked to the group's representative, the smallest `doc_id`
    /// ([`neardup_core::search::fold_identical`]): written as a `near` pair at distance 0.
    /// The group is one unit for star clustering, like an exact group.
    SameFingerprint,
    /// The same normalized URL, whatever the content (a recrawl of one page).
    Url,
}

/// A duplicate pair, `a < b`, with both documents' keep ranks (for the cluster stage).
///
/// Between processes it travels in its compact form ([`crate::wire`]): about 12 bytes for
/// a near pair under `--keep first` where the derived layout took 38.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Edge {
    pub a: u64,
    pub b: u64,
    pub hamming: u8,
    pub kind: EdgeKind,
    pub rank_a: u64,
    pub rank_b: u64,
    /// Exact Jaccard similarity of the two documents' shingle sets, when verified.
    pub jaccard: Option<f32>,
}

impl wire::Compact for Edge {
    const MAX_BYTES: usize = 48;

    fn encode(&self, out: &mut Vec<u8>) {
        let kind = match self.kind {
            EdgeKind::Exact => 0,
            EdgeKind::Near => 1,
            EdgeKind::SameFingerprint => 2,
            EdgeKind::Url => 3,
        };
        out.push(kind | if self.jaccard.is_some() { 4 } else { 0 });
        put_doc(out, self.a);
        put_doc(out, self.b);
        out.push(self.hamming);
        wire::put_rank(out, self.rank_a);
        wire::put_rank(out, self.rank_b);
        if let Some(j) = self.jaccard {
            out.extend_from_slice(&j.to_bits().to_le_bytes());
        }
    }

    fn decode(bytes: &mut dyn FnMut() -> Option<u8>) -> Option<Self> {
        let flags = bytes()?;
        let kind = match flags & 3 {
            0 => EdgeKind::Exact,
            1 => EdgeKind::Near,
            2 => EdgeKind::SameFingerprint,
            _ => EdgeKind::Url,
        };
        if flags >> 3 != 0 {
            return None;
        }
        let (a, b) = (get_doc(bytes)?, get_doc(bytes)?);
        let hamming = bytes()?;
        let (rank_a, rank_b) = (wire::get_rank(bytes)?, wire::get_rank(bytes)?);
        let jaccard = if flags & 4 != 0 {
            let le = [bytes()?, bytes()?, bytes()?, bytes()?];
            Some(f32::from_bits(u32::from_le_bytes(le)))
        } else {
            None
        };
        Some(Edge {
            a,
            b,
            hamming,
            kind,
            rank_a,
            rank_b,
            jaccard,
        })
    }
}

wire::serde_by_compact!(Edge);

impl Edge {
    /// The edge as the cluster stage sees it.
    pub fn link(&self) -> neardup_core::star::Link {
        use neardup_core::star::LinkKind;
        neardup_core::star::Link {
            a: self.a,
            b: self.b,
            kind: match self.kind {
                EdgeKind::Exact => LinkKind::Exact,
                EdgeKind::SameFingerprint => LinkKind::SameFingerprint,
                EdgeKind::Near => LinkKind::Near,
                EdgeKind::Url => LinkKind::Url,
            },
            hamming: self.hamming,
            jaccard: self.jaccard,
        }
    }

    pub fn new(x: (u64, u64), y: (u64, u64), hamming: u32, kind: EdgeKind) -> Self {
        let ((a, rank_a), (b, rank_b)) = if x.0 < y.0 { (x, y) } else { (y, x) };
        Edge {
            a,
            b,
            hamming: hamming as u8,
            kind,
            rank_a,
            rank_b,
            jaccard: None,
        }
    }
}

/// A fingerprint's entry in the tables ("lanes") `base + i` for every bit `i` of `lanes`,
/// all of which route the fingerprint to the same worker.
///
/// The simple version is one record per table, `(table, fingerprint, doc_id, rank)`. Tables
/// whose keys send a fingerprint to the same worker share one record instead, so with few
/// workers most of the per-table copies never exist (with one worker, one record carries
/// all 16 tables of manku16). In MinHash mode a lane is an LSH band, each record carries
/// one, and `value` is the band's key rather than the fingerprint.
///
/// Between processes it travels in its compact form ([`crate::wire`]), about 16 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableRecord {
    pub base: u32,
    pub lanes: u64,
    pub value: u64,
    pub doc_id: u64,
    pub rank: u64,
}

impl wire::Compact for TableRecord {
    // base, lanes, value, file, record within the file, rank.
    const MAX_BYTES: usize = 5 + 10 + 8 + 4 + 6 + 10;

    fn encode(&self, out: &mut Vec<u8>) {
        wire::put_varint(out, self.base as u64);
        wire::put_varint(out, self.lanes);
        wire::put_u64(out, self.value);
        put_doc(out, self.doc_id);
        wire::put_rank(out, self.rank);
    }

    fn decode(bytes: &mut dyn FnMut() -> Option<u8>) -> Option<Self> {
        let base = u32::try_from(wire::get_varint(bytes)?).ok()?;
        let lanes = wire::get_varint(bytes)?;
        let value = wire::get_u64(bytes)?;
        let doc_id = get_doc(bytes)?;
        Some(TableRecord {
            base,
            lanes,
            value,
            doc_id,
            rank: wire::get_rank(bytes)?,
        })
    }
}

wire::serde_by_compact!(TableRecord);

impl TableRecord {
    /// The lowest lane the record is entered in.
    #[inline]
    pub fn first_lane(&self) -> u32 {
        self.base + self.lanes.trailing_zeros()
    }
}

/// A clustered document's final assignment, sent to the document's home worker.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    pub doc_id: u64,
    pub cluster_id: u64,
    pub cluster_size: u32,
    pub keep: bool,
    /// The document kept in this one's place (itself when `keep`).
    pub kept_doc_id: u64,
    /// How similar the document is to the kept one, where the run measured it (stars
    /// only: components do not compare a removed document with the kept one).
    pub hamming: Option<u8>,
    pub jaccard: Option<f32>,
}

/// A candidate pair on its way to verification, carrying the first document's shingle set.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Candidate {
    pub edge: Edge,
    pub shingles_a: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bits hold exactly the numbers inserted, against a hash set, across files and
    /// records far apart.
    #[test]
    fn doc_bits_hold_what_a_hash_set_holds() {
        let mut bits = DocBits::default();
        let mut simple = std::collections::HashSet::new();
        let mut state = 3u64;
        for _ in 0..5000 {
            let file = (neardup_core::mix::splitmix64(&mut state) % 4) as u32;
            let record = neardup_core::mix::splitmix64(&mut state) % 100_000;
            let doc = doc_id(file, record);
            bits.insert(doc);
            simple.insert(doc);
        }
        assert_eq!(bits.len(), simple.len() as u64);
        for file in 0..5u32 {
            for record in 0..100_001 {
                let doc = doc_id(file, record);
                assert_eq!(bits.contains(doc), simple.contains(&doc), "{file} {record}");
            }
        }
    }

    /// A document as a sort holds it reads back as the document it was made from, through
    /// bincode (a run file) and directly, whatever its number of band keys (none, inline,
    /// and past [`INLINE_BANDS`]) and its optional fields; it writes the same bytes as the
    /// document, and owns no heap memory where its bands fit inline.
    #[test]
    fn held_documents_are_the_documents_they_hold() {
        let mut state = 17u64;
        let mut r = || neardup_core::mix::splitmix64(&mut state);
        for bands in [0, 1, 9, INLINE_BANDS, INLINE_BANDS + 1, 40] {
            let doc = DocFp {
                doc_id: doc_id(3, r() % 1000),
                simhash: r(),
                exact_key: (r() as u128) << 64 | r() as u128,
                rank: r(),
                empty: false,
                id_hash: Some(r()),
                bands: (0..bands).map(|_| r()).collect(),
                digest: Some((r() as u128, true)),
                url_key: None,
                host_hash: Some(r()),
                page: (bands == 9).then(|| Box::new(("a.example".into(), "/x?y".into()))),
            };
            let held = HeldDoc::from(doc.clone());
            assert_eq!(held.bands(), &doc.bands[..]);
            assert!(held.doc().bands.is_empty());
            let bytes = bincode::serialize(&held).unwrap();
            assert_eq!(bytes, bincode::serialize(&doc).unwrap(), "{bands} bands");
            let back: HeldDoc = bincode::deserialize(&bytes).unwrap();
            assert_eq!(back, held);
            assert_eq!(back.into_doc(), doc);
            let as_doc: DocFp = bincode::deserialize(&bytes).unwrap();
            assert_eq!(as_doc, doc);
            let heap = held.memory_bytes() - std::mem::size_of::<HeldDoc>();
            match (bands, doc.page.is_some()) {
                (b, false) if b <= INLINE_BANDS => assert_eq!(heap, 0),
                (b, false) => assert!(heap >= 8 * b, "{heap} bytes for {b} bands"),
                (_, true) => assert!(heap > 0),
            }
        }
    }

    fn table_record(state: &mut u64) -> TableRecord {
        let mut r = || neardup_core::mix::splitmix64(state);
        let ranks = [0, r() % 1000, u64::MAX - r() % 100_000, r(), u64::MAX];
        TableRecord {
            base: (r() % 130) as u32,
            lanes: r() >> (r() % 64),
            value: r(),
            doc_id: doc_id((r() % 5000) as u32, r() >> (24 + r() % 40)),
            rank: ranks[(r() % 5) as usize],
        }
    }

    /// Table records between processes: what bincode (timely's serialization) writes
    /// reads back the same, record by record inside a batch, against the derived layout's
    /// 36 bytes; and a simhash record of a typical run takes 16.
    #[test]
    fn table_records_cross_processes_whole_and_small() {
        let mut state = 11u64;
        let batch: Vec<TableRecord> = (0..20_000).map(|_| table_record(&mut state)).collect();
        let bytes = bincode::serialize(&batch).unwrap();
        let back: Vec<TableRecord> = bincode::deserialize(&bytes).unwrap();
        assert_eq!(back, batch);
        assert_eq!(
            bincode::serialized_size(&batch).unwrap(),
            bytes.len() as u64
        );
        assert!(bytes.len() < 36 * batch.len(), "{} bytes", bytes.len());
        // serde's other formats read it too (a JSON array of bytes).
        let json = serde_json::to_string(&batch[..50]).unwrap();
        assert_eq!(
            serde_json::from_str::<Vec<TableRecord>>(&json).unwrap(),
            batch[..50]
        );

        // manku16 at 16 workers: tables 0..16, a mask of a few of them; file 3, record
        // 40,000 of it; `--keep first`.
        let typical = TableRecord {
            base: 0,
            lanes: 0b1000_0100_0001,
            value: 0x9e37_79b9_7f4a_7c15,
            doc_id: doc_id(3, 40_000),
            rank: 0,
        };
        assert_eq!(bincode::serialized_size(&typical).unwrap(), 16);
    }

    /// Bytes that end inside a record, or name a document number out of range, are an
    /// error, not a record.
    #[test]
    fn cut_or_bad_table_records_are_errors() {
        let mut state = 5u64;
        let record = table_record(&mut state);
        let bytes = bincode::serialize(&record).unwrap();
        for cut in 0..bytes.len() {
            assert!(
                bincode::deserialize::<TableRecord>(&bytes[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let mut too_big = Vec::new();
        wire::put_varint(&mut too_big, 0); // base
        wire::put_varint(&mut too_big, 1); // lanes
        wire::put_u64(&mut too_big, 7); // value
        wire::put_varint(&mut too_big, 0); // file
        wire::put_varint(&mut too_big, 1 << RECORD_BITS); // record: one bit too many
        wire::put_rank(&mut too_big, 0);
        assert!(bincode::deserialize::<TableRecord>(&too_big).is_err());
    }

    fn doc_fp(state: &mut u64) -> DocFp {
        let mut r = || neardup_core::mix::splitmix64(state);
        let flags = r();
        let on = |bit: u32| flags & (1 << bit) != 0;
        let bands = (0..(if on(0) { r() % 20 } else { 0 }))
            .map(|_| r())
            .collect();
        DocFp {
            doc_id: doc_id((r() % 70_000) as u32, r() >> (24 + r() % 40)),
            simhash: r(),
            exact_key: if on(1) {
                (r() as u128) << 64 | r() as u128
            } else {
                0
            },
            rank: [0, r() % 1000, u64::MAX - r() % 100_000, r()][(r() % 4) as usize],
            empty: on(2),
            id_hash: on(3).then(&mut r),
            bands,
            digest: on(4).then(|| ((r() as u128) << 64 | r() as u128, on(5))),
            url_key: on(6).then(|| (r() as u128) << 64 | r() as u128),
            host_hash: on(7).then(&mut r),
            page: on(8)
                .then(|| Box::new((format!("h{}.example", r() % 100), format!("/p/{}?é", r())))),
        }
    }

    /// Documents between processes and in resume parts: every combination of the optional
    /// fields reads back the same through bincode, inside a batch; a simhash document
    /// without URLs takes 39 bytes where the derived layout took 62; cut bytes are errors.
    #[test]
    fn documents_cross_processes_whole_and_small() {
        let mut state = 17u64;
        let batch: Vec<DocFp> = (0..5_000).map(|_| doc_fp(&mut state)).collect();
        let bytes = bincode::serialize(&batch).unwrap();
        assert_eq!(bincode::deserialize::<Vec<DocFp>>(&bytes).unwrap(), batch);
        let json = serde_json::to_string(&batch[..50]).unwrap();
        assert_eq!(
            serde_json::from_str::<Vec<DocFp>>(&json).unwrap(),
            batch[..50]
        );

        let typical = DocFp {
            doc_id: doc_id(3, 40_000),
            simhash: 0x9e37_79b9_7f4a_7c15,
            exact_key: 0x0123_4567_89ab_cdef_0123_4567_89ab_cdef,
            rank: 0,
            empty: false,
            id_hash: Some(0x1234_5678_9abc_def0),
            bands: Vec::new(),
            digest: None,
            url_key: None,
            host_hash: None,
            page: None,
        };
        // flags 1, file 1, record 3, simhash 8, exact key 16, rank 1, id hash 8, bands 1.
        assert_eq!(bincode::serialized_size(&typical).unwrap(), 39);
        let one = bincode::serialize(&batch[7]).unwrap();
        for cut in 0..one.len() {
            assert!(
                bincode::deserialize::<DocFp>(&one[..cut]).is_err(),
                "cut at {cut}"
            );
        }
    }

    /// Edges (and the candidates that carry them) between processes: every kind, with and
    /// without a Jaccard similarity, reads back the same through bincode; a near pair under
    /// `--keep first` takes 10 to 12 bytes; cut bytes and unknown flags are errors.
    #[test]
    fn edges_cross_processes_whole_and_small() {
        let mut state = 23u64;
        let mut r = || neardup_core::mix::splitmix64(&mut state);
        let kinds = [
            EdgeKind::Exact,
            EdgeKind::Near,
            EdgeKind::SameFingerprint,
            EdgeKind::Url,
        ];
        let candidates: Vec<Candidate> = (0..5_000)
            .map(|i| Candidate {
                edge: Edge {
                    a: doc_id((r() % 70_000) as u32, r() >> (24 + r() % 40)),
                    b: doc_id((r() % 70_000) as u32, r() >> (24 + r() % 40)),
                    hamming: r() as u8,
                    kind: kinds[i % 4],
                    rank_a: [0, r(), u64::MAX - r() % 9999][(r() % 3) as usize],
                    rank_b: r(),
                    jaccard: (i % 3 == 0).then(|| (r() % 1000) as f32 / 999.0),
                },
                shingles_a: (0..r() % 5).map(|_| r()).collect(),
            })
            .collect();
        let bytes = bincode::serialize(&candidates).unwrap();
        let back: Vec<Candidate> = bincode::deserialize(&bytes).unwrap();
        assert_eq!(back.len(), candidates.len());
        for (x, y) in back.iter().zip(&candidates) {
            assert_eq!((x.edge, &x.shingles_a), (y.edge, &y.shingles_a));
        }
        let near = Edge::new((doc_id(3, 40_000), 0), (doc_id(9, 7), 0), 3, EdgeKind::Near);
        // flags 1, a 4 (file 1, record 3), b 2, hamming 1, the two ranks 1 each.
        assert_eq!(bincode::serialized_size(&near).unwrap(), 10);
        let one = bincode::serialize(&back[3].edge).unwrap();
        for cut in 0..one.len() {
            assert!(
                bincode::deserialize::<Edge>(&one[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let mut unknown = one.clone();
        unknown[0] |= 8;
        assert!(bincode::deserialize::<Edge>(&unknown).is_err());
    }
}
