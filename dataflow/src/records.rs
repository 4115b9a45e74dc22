//! The records that travel between workers.

use serde::{Deserialize, Serialize};

/// Bits of `doc_id` that number records within a file: `doc_id = (file << 40) | record`.
pub const RECORD_BITS: u32 = 40;

/// The stable document number: unique, independent of the number of workers, computed
/// without a global pass.
pub fn doc_id(file: u32, record: u64) -> u64 {
    ((file as u64) << RECORD_BITS) | record
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableRecord {
    pub base: u32,
    pub lanes: u64,
    pub value: u64,
    pub doc_id: u64,
    pub rank: u64,
}

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
}
