//! Reading an index: open (map every file, check sizes and headers, and with
//! [`Verify::Checksums`] every byte), then query fingerprints and look documents up.
//!
//! Opening does not read the tables: they are memory-mapped, and a query touches only the
//! pages its binary searches land on (about `log2(n)` per table and generation).
//!
//! A MinHash index ([`Index::query_minhash`]) is probed band by band: the documents whose
//! key in some band equals the query's are its candidates (one binary search per band and
//! generation), each verified once against the query as the run verified its pairs.

use std::fs::{File, Metadata};
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use neardup_core::minhash::{jaccard_estimate, Banding};
use neardup_core::query::{
    self, directory_bits, permutations, CompactTable, Permutation, Prefetch, Table,
};
use neardup_core::similarity::jaccard;
use neardup_core::TableDesign;

use super::verified::Record;
use super::{
    band_file, corrupt, design_of, generation_file, table_file, FileSum, GenerationEntry, Manifest,
    MinHashParams, CLUSTERS_FILE, COMPACT_TABLES_FORMAT, DELETED_FILE, DOCS_FILE,
    DOCUMENTS_PARQUET, FLAG_BYTES, FLAG_DIGEST, FLAG_EMPTY, FLAG_FETCHED_AT, FLAG_HAS_ID,
    FLAG_RANK, FLAG_REMOVED, HEADER_BYTES, KEEP_FILE, KIND_BAND, KIND_CLUSTERS, KIND_DELETED,
    KIND_DOCS, KIND_KEEP, KIND_SHINGLES, KIND_SIGNATURES, KIND_TABLE, MAGIC, MANIFEST,
    MINHASH_INDEX_FORMAT, SHINGLES_FILE, SIGNATURES_FILE,
};
use crate::error::IoError;

/// How much of an index [`Index::open`] checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    /// Every file's size and header (catches truncation and files swapped between indexes).
    Sizes,
    /// Also every file's checksum (catches any damaged byte; reads the whole index once).
    Checksums,
    /// [`Verify::Checksums`] for each file not checked before, per the index's record of
    /// the files it checked whole (`verified.json`, [`super::verified`]); a file the
    /// record vouches for (the same checksum, size, inode and times as when it was checked)
    /// gets [`Verify::Sizes`]. Then records what it checked, so that a restart over an
    /// unchanged index reads none of it again.
    ChecksumsOnce,
}

/// What an open checks, file by file: [`Verify`], and for [`Verify::ChecksumsOnce`] the
/// record that says which files were checked before.
struct Checks {
    verify: Verify,
    record: Option<Record>,
}

impl Checks {
    fn new(dir: &Path, verify: Verify) -> Checks {
        let record = (verify == Verify::ChecksumsOnce).then(|| Record::load(dir));
        Checks { verify, record }
    }

    /// How much of the file of `entry` named `name` (the manifest's checksum `sum`, the
    /// metadata `meta`) to check: [`Verify::Sizes`] or [`Verify::Checksums`].
    fn level(
        &mut self,
        entry: &GenerationEntry,
        name: &str,
        sum: &FileSum,
        meta: &Metadata,
    ) -> Verify {
        if let Some(record) = &mut self.record {
            if record.vouches(&record_key(entry, name), sum, meta) {
                return Verify::Sizes;
            }
        }
        match self.verify {
            Verify::Sizes => Verify::Sizes,
            Verify::Checksums | Verify::ChecksumsOnce => Verify::Checksums,
        }
    }

    /// Notes that the file was checked whole (what [`Checks::level`] said to do).
    fn checked(&mut self, entry: &GenerationEntry, name: &str, sum: &FileSum, meta: &Metadata) {
        if let Some(record) = &mut self.record {
            record.checked(&record_key(entry, name), sum, meta);
        }
    }
}

/// A file's name in the record: its path inside the index.
fn record_key(entry: &GenerationEntry, name: &str) -> String {
    format!("{}/{name}", entry.dir)
}

/// An open index.
pub struct Index {
    dir: PathBuf,
    manifest: Manifest,
    /// A simhash index's permutation tables (`None`: a MinHash index).
    design: Option<TableDesign>,
    permutations: Vec<Permutation>,
    generations: Vec<GenerationMap>,
    /// The generations' `clusters.bin` and `keep.bin` that hold changes, newest first: a
    /// document's latest cluster and keep decision (kept: 1) where a later generation
    /// changed them. Mapped, as the tables are: an index holds no memory of its own that
    /// grows with its changes (simply: two hash maps, filled on opening).
    changes: Vec<ChangeFile>,
    keep_changes: Vec<ChangeFile>,
    /// The generations' `deleted.bin` (format 5): the documents a later generation deleted,
    /// which no query, pair or listing reports (their rows stay in place).
    deleted: Vec<ChangeFile>,
}

/// A generation's `clusters.bin`, `keep.bin` or `deleted.bin`, mapped: `n` doc numbers ascending, then
/// each one's value.
struct ChangeFile {
    map: Mmap,
    n: usize,
    /// Its generation (among the manifest's) and its name, for [`Index::verify`].
    generation: usize,
    name: &'static str,
}

impl ChangeFile {
    /// The value the file gives `doc`, if it names it (a binary search of its doc numbers).
    fn get(&self, doc: u64) -> Option<u64> {
        let docs = words(&self.map, HEADER_BYTES, self.n);
        let at = docs.binary_search(&doc).ok()?;
        Some(words(&self.map, HEADER_BYTES + 8 * self.n, self.n)[at])
    }
}

/// The latest value `files` (newest first) give `doc`.
fn latest(files: &[ChangeFile], doc: u64) -> Option<u64> {
    files.iter().find_map(|f| f.get(doc))
}

/// One generation's mapped files.
struct GenerationMap {
    docs: Mmap,
    count: usize,
    tables: Vec<Mmap>,
    indexed: usize,
    /// The layout of its files (docs/index.md): 1, 2, or 3 (MinHash).
    format: u32,
    /// A MinHash generation's `signatures.bin` and `shingles.bin` (the band tables are in
    /// `tables`).
    signatures: Option<Mmap>,
    shingles: Option<Mmap>,
    /// Whether its `docs.bin` records which documents are kept
    /// ([`GenerationEntry::keep_decisions`]).
    decisions: bool,
}

impl GenerationMap {
    /// Table (or band) `t`'s rows, in its order.
    fn rows(&self, t: usize) -> &[u32] {
        let n = self.indexed;
        u32s(&self.tables[t], rows_at(self.format, n), n)
    }

    /// A simhash generation's tables as queries read them: format 4's compact tables over
    /// its documents' fingerprints, or the permuted fingerprints of earlier formats.
    fn key_tables<'a>(&'a self, permutations: &[Permutation]) -> Vec<Table<'a>> {
        let n = self.indexed;
        if self.format < COMPACT_TABLES_FORMAT {
            return self
                .tables
                .iter()
                .map(|m| Table::Keys(words(m, HEADER_BYTES, n)))
                .collect();
        }
        let fingerprints = words(&self.docs, HEADER_BYTES + 8 * self.count, self.count);
        self.tables
            .iter()
            .zip(permutations)
            .enumerate()
            .map(|(t, (map, p))| {
                let d = directory_bits(64 - p.free_bits(), n);
                let tags = u16s(map, HEADER_BYTES, n);
                let starts = (1usize << d) + 1;
                let directory = words(map, compact_directory_at(n), starts);
                Table::Compact(CompactTable::new(
                    d,
                    directory,
                    tags,
                    self.rows(t),
                    fingerprints,
                ))
            })
            .collect()
    }
}

/// Where the rows of a table (or band) of `n` entries start in `format`: after the tags
/// (u16, padded to 8 bytes) of a compact table, after the keys (u64) of earlier formats.
fn rows_at(format: u32, n: usize) -> usize {
    if format >= COMPACT_TABLES_FORMAT {
        HEADER_BYTES + padded8(2 * n)
    } else {
        HEADER_BYTES + 8 * n
    }
}

/// Where a compact table's directory starts: after its header, `tag[n]` (u16) and `row[n]`
/// (u32), each padded to 8 bytes.
fn compact_directory_at(n: usize) -> usize {
    HEADER_BYTES + padded8(2 * n) + padded8(4 * n)
}

/// The bytes of a table file of `n` entries for a key of `key_bits` in `format`.
pub(crate) fn table_bytes(format: u32, n: usize, key_bits: u32) -> usize {
    if format >= COMPACT_TABLES_FORMAT {
        compact_directory_at(n) + 8 * ((1usize << directory_bits(key_bits, n)) + 1)
    } else {
        HEADER_BYTES + 8 * n + padded8(4 * n)
    }
}

/// Words per document before `docs.bin`'s flags: doc number, simhash, cluster, id end; and
/// from format 2 the digest (two words), rank, bytes and capture time.
fn doc_words(format: u32) -> usize {
    if format >= 2 {
        9
    } else {
        4
    }
}

/// A stored document of a MinHash index that passed verification against a query: where
/// it is, its similarity, and whether that is the exact Jaccard of the shingle sets (else the
/// signatures' estimate).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MinHashMatch {
    pub generation: usize,
    pub row: u32,
    pub jaccard: f64,
    pub exact: bool,
}

/// A stored document within `k` of a query: where it is, and how far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Match {
    pub generation: usize,
    pub row: u32,
    pub hamming: u32,
}

/// A document of the index, borrowed from the mapped files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DocView<'a> {
    pub doc_id: u64,
    pub id: Option<&'a str>,
    pub simhash: u64,
    pub empty: bool,
    pub cluster_id: Option<i64>,
    /// From format 2, where the run made them (see [`super::DocEntry`]): the content
    /// digest, the keep rank under its generation's policy ([`Index::generation_keep`]),
    /// the text bytes and the capture time.
    pub digest: Option<u128>,
    pub rank: Option<u64>,
    pub bytes: Option<u64>,
    pub fetched_at: Option<i64>,
    /// A MinHash index's: the signature (empty in a simhash index), and the sorted shingle
    /// set where the index holds them.
    pub signature: &'a [u64],
    pub shingles: Option<&'a [u64]>,
    /// Whether it is kept, by the latest decision the index records: its generation's
    /// (its run's or batch's), or a later generation's that changed it; `None` where no
    /// generation recorded one ([`GenerationEntry::keep_decisions`]).
    pub kept: Option<bool>,
}

/// `n` little-endian words of `bytes` from byte `at` (8-aligned in a page-aligned map).
/// Hands the pages of the read-only `map` back to the kernel (`MADV_DONTNEED`): they leave
/// the process's resident memory and stay in the page cache ([`Index::release_pages`]).
fn release_map(map: &Mmap) {
    // SAFETY: the maps are read-only views of files never changed in place (see
    // `map_checked`): a page given back is read again from the same file, with the same
    // bytes, so what borrows from the map stays as it was. A map the kernel refuses the
    // advice for (an empty one) keeps its pages.
    let _ = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
}

fn words(bytes: &[u8], at: usize, n: usize) -> &[u64] {
    let slice = &bytes[at..at + 8 * n];
    // SAFETY: every bit pattern is a valid u64; `align_to` only yields the aligned middle.
    let (head, middle, _) = unsafe { slice.align_to::<u64>() };
    assert!(head.is_empty(), "index words are 8-aligned");
    &middle[..n]
}

fn u16s(bytes: &[u8], at: usize, n: usize) -> &[u16] {
    let slice = &bytes[at..at + 2 * n];
    // SAFETY: as in `words`.
    let (head, middle, _) = unsafe { slice.align_to::<u16>() };
    assert!(head.is_empty(), "index tags are 2-aligned");
    &middle[..n]
}

fn u32s(bytes: &[u8], at: usize, n: usize) -> &[u32] {
    let slice = &bytes[at..at + 4 * n];
    // SAFETY: as in `words`.
    let (head, middle, _) = unsafe { slice.align_to::<u32>() };
    assert!(head.is_empty(), "index rows are 4-aligned");
    &middle[..n]
}

const fn padded8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

impl Index {
    /// Opens the index at `dir`: the manifest, then every file of every generation it names,
    /// each checked as `verify` says. Refuses an index of another format, a missing,
    /// truncated or damaged file, naming it.
    pub fn open(dir: &Path, verify: Verify) -> Result<Index, IoError> {
        Index::open_as(dir, Manifest::load(dir)?, verify)
    }

    /// [`Index::open`] with the generations `manifest` names (the index's own manifest, or
    /// one of its earlier states: [`Manifest::before_batch`]).
    pub fn open_as(dir: &Path, manifest: Manifest, verify: Verify) -> Result<Index, IoError> {
        #[cfg(target_endian = "big")]
        return Err(corrupt(
            dir,
            "index files are little-endian; this machine is not".into(),
        ));
        super::check_directory(dir, &manifest)?;
        let design = match manifest.minhash {
            None => Some(design_of(&manifest, &dir.join(MANIFEST))?),
            Some(_) => None,
        };
        let mut generations = Vec::with_capacity(manifest.generations.len());
        let (mut changes, mut keep_changes, mut deleted) = (Vec::new(), Vec::new(), Vec::new());
        let mut checks = Checks::new(dir, verify);
        for (i, entry) in manifest.generations.iter().enumerate() {
            let generation = map_generation(dir, entry, &manifest, design.as_ref(), &mut checks)?;
            let clusters = (CLUSTERS_FILE, KIND_CLUSTERS, Some(entry.cluster_changes));
            changes.extend(map_changes(dir, (i, entry), &mut checks, clusters)?);
            if entry.keep_decisions {
                let keep = (KEEP_FILE, KIND_KEEP, None);
                keep_changes.extend(map_changes(dir, (i, entry), &mut checks, keep)?);
            }
            if entry.deleted > 0 {
                let gone = (DELETED_FILE, KIND_DELETED, Some(entry.deleted));
                deleted.extend(map_changes(dir, (i, entry), &mut checks, gone)?);
            }
            // The Parquet table is for other programs; its size and checksum are checked too.
            drop(map_checked(dir, entry, DOCUMENTS_PARQUET, &mut checks)?);
            generations.push(generation);
        }
        if let Some(record) = checks.record {
            // Not written (a read-only index): the next open checks everything again.
            let _ = record.save(dir, &manifest);
        }
        changes.reverse();
        keep_changes.reverse();
        Ok(Index {
            dir: dir.to_path_buf(),
            permutations: design.as_ref().map(permutations).unwrap_or_default(),
            manifest,
            design,
            generations,
            changes,
            keep_changes,
            deleted,
        })
    }

    /// Checks every mapped file again against the checksum the manifest gives it: what was
    /// read since [`Index::open`] is what the writer wrote, unless a file was changed in
    /// place under the map (outside the index's contract, see `map_checked`). A
    /// checkpoint of `neardup serve` calls it before it writes what it read from here.
    pub fn verify(&self) -> Result<(), IoError> {
        self.verify_from(0)
    }

    /// [`Index::verify`] for the generations from `from` on only (the change files of
    /// those generations included): what a merge of the newest generations reads.
    pub fn verify_from(&self, from: usize) -> Result<(), IoError> {
        self.verify_generations(from..self.generations.len())
    }

    /// [`Index::verify`] for the generations `range` only (their change files included):
    /// what a merge of them reads.
    pub fn verify_generations(&self, range: std::ops::Range<usize>) -> Result<(), IoError> {
        let all = self.generations.iter().zip(&self.manifest.generations);
        for (generation, entry) in all.skip(range.start).take(range.len()) {
            let names = table_names(&self.manifest, self.design.as_ref());
            let mut files: Vec<(&str, &Mmap)> = vec![(DOCS_FILE, &generation.docs)];
            files.extend(names.iter().map(String::as_str).zip(&generation.tables));
            files.extend(generation.signatures.iter().map(|m| (SIGNATURES_FILE, m)));
            files.extend(generation.shingles.iter().map(|m| (SHINGLES_FILE, m)));
            for (name, map) in files {
                let sum = checksum_of(&self.dir, entry, name)?;
                check_sum(&generation_file(&self.dir, entry, name), map, sum)?;
            }
        }
        let changes = self.changes.iter().chain(&self.keep_changes);
        for f in changes
            .chain(&self.deleted)
            .filter(|f| range.contains(&f.generation))
        {
            let entry = &self.manifest.generations[f.generation];
            let sum = checksum_of(&self.dir, entry, f.name)?;
            check_sum(&generation_file(&self.dir, entry, f.name), &f.map, sum)?;
        }
        Ok(())
    }

    /// Hands back the pages of the index's files this process has read, so that they leave
    /// its resident memory: they stay in the page cache, and a later read maps them again.
    /// Without it every page a long pass touched (the probes of `run --against`, its scans
    /// of every document) would count in the process's resident memory until the index is
    /// closed, as much as the index's size, whatever the pass holds itself.
    pub fn release_pages(&self) {
        for g in &self.generations {
            let maps = std::iter::once(&g.docs)
                .chain(&g.tables)
                .chain(&g.signatures)
                .chain(&g.shingles);
            maps.for_each(release_map);
        }
        for f in self
            .changes
            .iter()
            .chain(&self.keep_changes)
            .chain(&self.deleted)
        {
            release_map(&f.map);
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// A simhash index's table design (`None`: a MinHash index).
    pub fn design(&self) -> Option<&TableDesign> {
        self.design.as_ref()
    }

    /// A MinHash index's banding and verification (`None`: a simhash index).
    pub fn minhash(&self) -> Option<&MinHashParams> {
        self.manifest.minhash.as_ref()
    }

    /// The index's k: the largest a query may ask for (0 in a MinHash index).
    pub fn k(&self) -> u32 {
        self.design.as_ref().map_or(0, TableDesign::k)
    }

    pub fn generations(&self) -> usize {
        self.generations.len()
    }

    pub fn generation_documents(&self, generation: usize) -> usize {
        self.generations[generation].count
    }

    /// The `(doc number, value)` pairs that generation `generation`'s `clusters.bin`
    /// (`deleted: false`; the value is the new cluster, an `i64` as its bits) or
    /// `deleted.bin` (`deleted: true`; 1: the document was indexed) holds, by doc number.
    pub fn generation_changes(&self, generation: usize, deleted: bool) -> Vec<(u64, u64)> {
        let files = if deleted {
            &self.deleted
        } else {
            &self.changes
        };
        let Some(f) = files.iter().find(|f| f.generation == generation) else {
            return Vec::new();
        };
        let docs = words(&f.map, HEADER_BYTES, f.n);
        let values = words(&f.map, HEADER_BYTES + 8 * f.n, f.n);
        docs.iter().copied().zip(values.iter().copied()).collect()
    }

    /// The documents each generation holds that no later generation deleted.
    pub fn present_rows(&self) -> Vec<u64> {
        let mut present: Vec<u64> = self.generations.iter().map(|g| g.count as u64).collect();
        for f in &self.deleted {
            for &doc in words(&f.map, HEADER_BYTES, f.n) {
                if let Some(n) = self.generation_of(doc).map(|g| &mut present[g]) {
                    *n = n.saturating_sub(1);
                }
            }
        }
        present
    }

    /// The generation whose files the doc number `doc` lies in (`None`: past them all).
    pub fn generation_of(&self, doc: u64) -> Option<usize> {
        let file = doc >> super::FILE_SHIFT;
        let entries = &self.manifest.generations;
        // File offsets rise from one generation to the next.
        let g = entries.partition_point(|e| e.file_offset + e.files <= file);
        (g < entries.len()).then_some(g)
    }

    /// Whether a later generation deleted the document numbered `doc` (its row stays in
    /// its generation; no query, pair or listing reports it).
    pub fn is_deleted(&self, doc: u64) -> bool {
        self.deleted.iter().any(|f| f.get(doc).is_some())
    }

    /// Whether the row `row` of generation `generation` holds a document present: not
    /// deleted by a later generation, nor a row past the documents (a table damaged and not
    /// verified).
    fn present(&self, generation: usize, row: u32) -> bool {
        let g = &self.generations[generation];
        (row as usize) < g.count
            && (self.deleted.is_empty() || !self.is_deleted(self.doc_id(generation, row)))
    }

    /// The keep policy whose ranks generation `generation`'s documents carry (`None`: no
    /// ranks stored).
    pub fn generation_keep(&self, generation: usize) -> Option<&str> {
        self.manifest.generations[generation].keep.as_deref()
    }

    /// Calls `found` once for every indexed document within `k` bits of `fp` (`k` at most
    /// [`Index::k`]; the caller checks), generation by generation. A MinHash index has no
    /// simhashes: nothing is found ([`Index::query_minhash`] asks it).
    pub fn query(&self, fp: u64, k: u32, mut found: impl FnMut(Match)) {
        let Some(design) = &self.design else { return };
        let k = k.min(design.k());
        let tables: Vec<Vec<Table>> = (self.generations.iter())
            .map(|g| g.key_tables(&self.permutations))
            .collect();
        // Every probe's first reads started before any waits for them (`query::prefetch`).
        for stage in [Prefetch::Directory, Prefetch::Run] {
            for t in &tables {
                query::prefetch(&self.permutations, t, fp, stage);
            }
        }
        for (g, (generation, tables)) in self.generations.iter().zip(&tables).enumerate() {
            query::query(design, &self.permutations, tables, fp, k, |m| {
                let row = generation.rows(m.table)[m.position];
                if self.present(g, row) {
                    found(Match {
                        generation: g,
                        row,
                        hamming: m.hamming,
                    })
                }
            });
        }
    }

    /// [`Index::query`] for a batch of fingerprints: calls `found(i, m)` once for every
    /// indexed document `m` within `k` of `fps[i]`, in no particular order. Each table of
    /// each generation is walked once, left to right, for the whole batch
    /// ([`query::query_batch`]): for large batches much cheaper than one query at a time.
    pub fn query_batch(&self, fps: &[u64], k: u32, found: impl FnMut(usize, Match)) {
        self.query_batch_by_table(fps, k, found, false);
    }

    /// [`Index::query_batch`] for a pass over an index that need not fit in memory: each
    /// table's pages are handed back once the batch has walked it (see
    /// [`Index::release_pages`]), so that a batch keeps one table's pages resident, where
    /// it would keep every table's (6 bytes a document a table, 12 in format 2; a compact
    /// table's candidates also read the documents' simhashes, 8 bytes a document, handed
    /// back with it).
    pub fn query_batch_releasing(&self, fps: &[u64], k: u32, found: impl FnMut(usize, Match)) {
        self.query_batch_by_table(fps, k, found, true);
    }

    fn query_batch_by_table(
        &self,
        fps: &[u64],
        k: u32,
        mut found: impl FnMut(usize, Match),
        release: bool,
    ) {
        let Some(design) = &self.design else { return };
        let k = k.min(design.k());
        for (g, generation) in self.generations.iter().enumerate() {
            let keys = generation.key_tables(&self.permutations);
            let walked = |t: usize| {
                if release {
                    release_map(&generation.tables[t]);
                    // A compact table's candidates read the documents' simhashes.
                    if generation.format >= COMPACT_TABLES_FORMAT {
                        release_map(&generation.docs);
                    }
                }
            };
            let found = |m: query::BatchMatch| {
                let row = generation.rows(m.table)[m.position];
                if self.present(g, row) {
                    let hamming = m.hamming;
                    found(
                        m.query,
                        Match {
                            generation: g,
                            row,
                            hamming,
                        },
                    )
                }
            };
            let tables = (&self.permutations[..], &keys[..]);
            query::query_batch_by_table(design, tables.0, tables.1, fps, k, found, walked);
        }
    }

    /// Calls `found(a, b, hamming)` once for every pair of indexed documents within `k`
    /// bits of each other (`k` at most [`Index::k`]), in no particular order: each table
    /// walked once, every generation's merged in order ([`query::self_join`]), where
    /// asking every document as a query sorts the whole index once a table. A MinHash
    /// index finds nothing.
    pub fn self_pairs(&self, k: u32, mut found: impl FnMut(Match, Match, u32)) {
        let Some(design) = &self.design else { return };
        let k = k.min(design.k());
        let sets: Vec<Vec<Table<'_>>> = self
            .generations
            .iter()
            .map(|g| g.key_tables(&self.permutations))
            .collect();
        query::self_join(design, &self.permutations, &sets, k, |m| {
            let at = |(g, position): (usize, usize)| {
                let row = self.generations[g].rows(m.table)[position];
                self.present(g, row).then_some(Match {
                    generation: g,
                    row,
                    hamming: m.hamming,
                })
            };
            if let (Some(a), Some(b)) = (at(m.a), at(m.b)) {
                found(a, b, m.hamming);
            }
        });
    }

    /// Calls `found` once for every indexed document of a MinHash index that shares a band
    /// key with `signature` and whose similarity to the query reaches `threshold`: the exact
    /// Jaccard of `shingles` (the query's shingle set, sorted and without repeats) and the
    /// stored set where the index holds shingle sets and `shingles` is given, else the
    /// signatures' estimate, as the run that made the index verified its pairs. Generation
    /// by generation, each generation's matches in row order. A simhash index finds
    /// nothing.
    pub fn query_minhash(
        &self,
        signature: &[u64],
        shingles: Option<&[u64]>,
        threshold: f64,
        mut found: impl FnMut(MinHashMatch),
    ) {
        let Some(m) = &self.manifest.minhash else {
            return;
        };
        if signature.len() != m.permutations {
            return;
        }
        let banding = Banding {
            bands: m.bands,
            rows: m.rows,
        };
        let keys: Vec<u64> = banding.band_keys(signature).collect();
        let exact = m.exact() && shingles.is_some();
        let mut rows: Vec<u32> = Vec::new();
        for (g, generation) in self.generations.iter().enumerate() {
            let n = generation.indexed;
            rows.clear();
            for (t, (table, &key)) in generation.tables.iter().zip(&keys).enumerate() {
                let sorted = words(table, HEADER_BYTES, n);
                let run = query::equal_range(sorted, key);
                rows.extend_from_slice(&generation.rows(t)[run]);
            }
            rows.retain(|&row| self.present(g, row));
            rows.sort_unstable();
            rows.dedup();
            for &row in &rows {
                let doc = self.doc(g, row);
                let jaccard = match (exact, shingles, doc.shingles) {
                    (true, Some(query), Some(stored)) => jaccard(query, stored),
                    _ => jaccard_estimate(signature, doc.signature),
                };
                if jaccard >= threshold {
                    found(MinHashMatch {
                        generation: g,
                        row,
                        jaccard,
                        exact,
                    });
                }
            }
        }
    }

    /// The doc number at `row` of generation `generation`: [`Index::doc`]'s `doc_id`,
    /// reading that column only (a whole [`DocView`] reads a dozen places of the file: a
    /// search by doc number over a mapped generation of millions would miss the cache at
    /// each of them at every step).
    pub fn doc_id(&self, generation: usize, row: u32) -> u64 {
        let g = &self.generations[generation];
        words(&g.docs, HEADER_BYTES, g.count)[row as usize]
    }

    /// The fingerprint at `row` of generation `generation`: [`Index::doc`]'s `simhash`,
    /// reading that column only.
    pub fn simhash(&self, generation: usize, row: u32) -> u64 {
        let g = &self.generations[generation];
        words(&g.docs, HEADER_BYTES + 8 * g.count, g.count)[row as usize]
    }

    /// The cluster of the document at `row` of generation `generation`: [`Index::doc`]'s
    /// `cluster_id` (the latest a generation gave it), reading that column only.
    pub fn cluster_id(&self, generation: usize, row: u32) -> Option<i64> {
        let g = &self.generations[generation];
        match latest(&self.changes, self.doc_id(generation, row)) {
            Some(c) => (c as i64 >= 0).then_some(c as i64),
            None => {
                let stored = words(&g.docs, HEADER_BYTES + 16 * g.count, g.count)[row as usize];
                (stored as i64 >= 0).then_some(stored as i64)
            }
        }
    }

    /// The document at `row` of generation `generation`.
    pub fn doc(&self, generation: usize, row: u32) -> DocView<'_> {
        let g = &self.generations[generation];
        let (n, r) = (g.count, row as usize);
        let bytes = &g.docs[..];
        let column = |i: usize| words(bytes, HEADER_BYTES + 8 * i * n, n);
        let doc_id = column(0)[r];
        let simhash = column(1)[r];
        let stored = column(2)[r] as i64;
        let ends = column(3);
        let flags_at = HEADER_BYTES + 8 * doc_words(g.format) * n;
        let flags = bytes[flags_at + r];
        let ids_at = flags_at + padded8(n);
        let start = if r == 0 { 0 } else { ends[r - 1] as usize };
        let id = (flags & FLAG_HAS_ID != 0).then(|| {
            // Id ends are checked on open with checksums; without, a damaged one gives a
            // placeholder, never a read outside the file.
            (ids_at.checked_add(start))
                .zip(ids_at.checked_add(ends[r] as usize))
                .and_then(|(from, to)| bytes.get(from..to))
                .map_or("<id damaged>", |id| {
                    std::str::from_utf8(id).unwrap_or("<id not UTF-8>")
                })
        });
        let cluster_id = match latest(&self.changes, doc_id) {
            // A change to -1: the document is alone now (a checkpoint's, format 5).
            Some(c) => (c as i64 >= 0).then_some(c as i64),
            None => (stored >= 0).then_some(stored),
        };
        let (mut digest, mut rank, mut size, mut fetched_at) = (None, None, None, None);
        if g.format >= 2 {
            let digests = words(bytes, HEADER_BYTES + 32 * n, 2 * n);
            let has = |bit: u8| flags & bit != 0;
            digest = has(FLAG_DIGEST)
                .then(|| u128::from(digests[2 * r]) | u128::from(digests[2 * r + 1]) << 64);
            rank = has(FLAG_RANK).then(|| column(6)[r]);
            size = has(FLAG_BYTES).then(|| column(7)[r]);
            fetched_at = has(FLAG_FETCHED_AT).then(|| column(8)[r] as i64);
        }
        let (mut signature, mut shingles): (&[u64], _) = (&[], None);
        if let (Some(map), Some(m)) = (&g.signatures, &self.manifest.minhash) {
            let p = m.permutations;
            signature = &words(map, HEADER_BYTES, n * p)[r * p..(r + 1) * p];
        }
        if let Some(map) = &g.shingles {
            let ends = words(map, HEADER_BYTES, n);
            let total = ends.last().map_or(0, |&e| e as usize);
            let hashes = words(map, HEADER_BYTES + 8 * n, total);
            let start = if r == 0 { 0 } else { ends[r - 1] as usize };
            shingles = Some(&hashes[start..ends[r] as usize]);
        }
        let kept = match latest(&self.keep_changes, doc_id) {
            Some(kept) => Some(kept != 0),
            None => g.decisions.then_some(flags & FLAG_REMOVED == 0),
        };
        DocView {
            doc_id,
            id,
            simhash,
            empty: flags & FLAG_EMPTY != 0,
            cluster_id,
            digest,
            rank,
            bytes: size,
            fetched_at,
            signature,
            shingles,
            kept,
        }
    }

    /// Every document present (none a later generation deleted), generation by
    /// generation, in doc-number order within each.
    pub fn docs(&self) -> impl Iterator<Item = DocView<'_>> + '_ {
        (0..self.generations.len()).flat_map(move |g| {
            (0..self.generations[g].count as u32)
                .filter(move |&r| self.present(g, r))
                .map(move |r| self.doc(g, r))
        })
    }
}

/// The table files of a generation: a simhash index's permutation tables, a MinHash
/// index's band tables.
fn table_names(manifest: &Manifest, design: Option<&TableDesign>) -> Vec<String> {
    match (design, &manifest.minhash) {
        (Some(design), _) => (0..design.tables()).map(table_file).collect(),
        (None, Some(m)) => (0..m.bands).map(band_file).collect(),
        (None, None) => unreachable!("a simhash index has a design"),
    }
}

/// Maps one generation's documents and tables (and a MinHash generation's sketches),
/// checking each file's size, header and, with [`Verify::Checksums`], checksum and the
/// positions it holds (id ends, table rows), so that no read of it leaves its file.
fn map_generation(
    dir: &Path,
    entry: &GenerationEntry,
    manifest: &Manifest,
    design: Option<&TableDesign>,
    checks: &mut Checks,
) -> Result<GenerationMap, IoError> {
    let format = entry.format;
    let (docs, verify) = map_checked(dir, entry, DOCS_FILE, checks)?;
    let path = generation_file(dir, entry, DOCS_FILE);
    let (count, id_bytes) = header(&docs, &path, KIND_DOCS, format)?;
    expect(&path, "documents", count, entry.documents)?;
    let count = count as usize;
    let size = HEADER_BYTES + 8 * doc_words(format) * count + padded8(count) + id_bytes as usize;
    expect(&path, "bytes", docs.len() as u64, size as u64)?;
    if verify == Verify::Checksums {
        check_id_ends(&docs, &path, count, id_bytes)?;
    }
    // A simhash index's tables say their masks, a MinHash index's their bands.
    let tables_format = if design.is_some() {
        format
    } else {
        format.min(MINHASH_INDEX_FORMAT)
    };
    let (kind, extras): (u32, Vec<u64>) = match design {
        Some(design) => (KIND_TABLE, design.masks().to_vec()),
        None => (
            KIND_BAND,
            (0..table_names(manifest, None).len() as u64).collect(),
        ),
    };
    let mut tables = Vec::with_capacity(extras.len());
    for (name, &extra) in table_names(manifest, design).iter().zip(&extras) {
        let (map, verify) = map_checked(dir, entry, name, checks)?;
        let path = generation_file(dir, entry, name);
        let (n, recorded) = header(&map, &path, kind, format)?;
        expect(&path, "entries", n, entry.indexed)?;
        if recorded != extra {
            let what = if kind == KIND_TABLE {
                format!("mask {recorded:016x}, expected {extra:016x}")
            } else {
                format!("band {recorded}, expected {extra}")
            };
            return Err(corrupt(&path, what));
        }
        let key_bits = if kind == KIND_TABLE {
            extra.count_ones()
        } else {
            64
        };
        let size = table_bytes(tables_format, n as usize, key_bits);
        expect(&path, "bytes", map.len() as u64, size as u64)?;
        if verify == Verify::Checksums {
            check_table(&map, &path, (tables_format, key_bits), n as usize, count)?;
        }
        tables.push(map);
    }
    let (signatures, shingles) = match &manifest.minhash {
        Some(m) => map_minhash(dir, entry, m, count, checks)?,
        None => (None, None),
    };
    Ok(GenerationMap {
        docs,
        count,
        tables,
        indexed: entry.indexed as usize,
        format,
        signatures,
        shingles,
        decisions: entry.keep_decisions,
    })
}

/// Maps a generation's file `name` of `kind` laid out as `n` doc numbers ascending then a
/// word for each (`clusters.bin`, `keep.bin`), checking its size (and `n` against `count`
/// where the manifest records it), and with [`Verify::Checksums`] its order; `None` where
/// it names no document.
fn map_changes(
    dir: &Path,
    (generation, entry): (usize, &GenerationEntry),
    checks: &mut Checks,
    (name, kind, count): (&'static str, u32, Option<u64>),
) -> Result<Option<ChangeFile>, IoError> {
    let (map, verify) = map_checked(dir, entry, name, checks)?;
    let path = generation_file(dir, entry, name);
    let (n, _) = header(&map, &path, kind, entry.format)?;
    if let Some(count) = count {
        expect(&path, "changes", n, count)?;
    }
    expect(
        &path,
        "bytes",
        map.len() as u64,
        HEADER_BYTES as u64 + 16 * n,
    )?;
    let n = n as usize;
    if verify == Verify::Checksums {
        let docs = words(&map, HEADER_BYTES, n);
        if let Some(at) = docs.windows(2).position(|w| w[0] >= w[1]) {
            let what = format!(
                "change {} names doc number {} after {}",
                at + 1,
                docs[at + 1],
                docs[at]
            );
            return Err(corrupt(&path, what));
        }
    }
    Ok((n > 0).then_some(ChangeFile {
        map,
        n,
        generation,
        name,
    }))
}

/// Refuses a `docs.bin` whose id ends (its fourth column, in every format) fall or pass
/// its id bytes.
fn check_id_ends(docs: &[u8], path: &Path, count: usize, id_bytes: u64) -> Result<(), IoError> {
    let ends = words(docs, HEADER_BYTES + 24 * count, count);
    let mut previous = 0;
    for (row, &end) in ends.iter().enumerate() {
        if end < previous || end > id_bytes {
            return Err(corrupt(
                path,
                format!(
                    "document {row}'s id ends at byte {end}, after {previous} and within {id_bytes} expected"
                ),
            ));
        }
        previous = end;
    }
    Ok(())
}

/// Refuses a table (or band) whose rows name a document past the generation's `count`,
/// or a compact table whose directory does not rise from 0 to its entries or whose tags
/// fall within a bucket.
fn check_table(
    table: &[u8],
    path: &Path,
    (format, key_bits): (u32, u32),
    n: usize,
    count: usize,
) -> Result<(), IoError> {
    let rows = u32s(table, rows_at(format, n), n);
    if let Some(entry) = rows.iter().position(|&row| row as usize >= count) {
        return Err(corrupt(
            path,
            format!(
                "entry {entry} names row {}, but the generation has {count} documents",
                rows[entry]
            ),
        ));
    }
    if format < COMPACT_TABLES_FORMAT {
        return Ok(());
    }
    let d = directory_bits(key_bits, n);
    let starts = words(table, compact_directory_at(n), (1usize << d) + 1);
    let tags = u16s(table, HEADER_BYTES, n);
    if starts[0] != 0 || starts[starts.len() - 1] != n as u64 {
        let what = format!(
            "its directory spans entries {} to {}, not 0 to {n}",
            starts[0],
            starts[starts.len() - 1]
        );
        return Err(corrupt(path, what));
    }
    for (b, w) in starts.windows(2).enumerate() {
        if w[1] > n as u64 {
            let what = format!(
                "its directory's bucket {b} ends at entry {}, past its {n}",
                w[1]
            );
            return Err(corrupt(path, what));
        }
        if w[0] > w[1] {
            let what = format!(
                "its directory's bucket {b} ends at entry {} before its start {}",
                w[1], w[0]
            );
            return Err(corrupt(path, what));
        }
        let bucket = &tags[w[0] as usize..w[1] as usize];
        if let Some(at) = bucket.windows(2).position(|t| t[0] > t[1]) {
            let entry = w[0] as usize + at + 1;
            return Err(corrupt(
                path,
                format!("entry {entry}'s tag falls within its bucket"),
            ));
        }
    }
    Ok(())
}

/// Maps a MinHash generation's `signatures.bin` and, where the index holds them,
/// `shingles.bin`, checking their headers and sizes, and that the shingle sets' ends rise
/// to the recorded total (so that reading a set never leaves the file).
fn map_minhash(
    dir: &Path,
    entry: &GenerationEntry,
    m: &MinHashParams,
    count: usize,
    checks: &mut Checks,
) -> Result<(Option<Mmap>, Option<Mmap>), IoError> {
    let (map, _) = map_checked(dir, entry, SIGNATURES_FILE, checks)?;
    let path = generation_file(dir, entry, SIGNATURES_FILE);
    let (n, permutations) = header(&map, &path, KIND_SIGNATURES, entry.format)?;
    expect(&path, "signatures", n, count as u64)?;
    expect(
        &path,
        "values per signature",
        permutations,
        m.permutations as u64,
    )?;
    let size = HEADER_BYTES as u64 + 8 * n * permutations;
    expect(&path, "bytes", map.len() as u64, size)?;
    if !m.shingles {
        return Ok((Some(map), None));
    }
    let (sets, _) = map_checked(dir, entry, SHINGLES_FILE, checks)?;
    let path = generation_file(dir, entry, SHINGLES_FILE);
    let (n, total) = header(&sets, &path, KIND_SHINGLES, entry.format)?;
    expect(&path, "shingle sets", n, count as u64)?;
    let size = HEADER_BYTES as u64 + 8 * n + 8 * total;
    expect(&path, "bytes", sets.len() as u64, size)?;
    let ends = words(&sets, HEADER_BYTES, count);
    let mut previous = 0;
    for (i, &end) in ends.iter().enumerate() {
        if end < previous || end > total {
            return Err(corrupt(
                &path,
                format!(
                    "shingle set {i} ends at {end}, after {previous} and within {total} expected"
                ),
            ));
        }
        previous = end;
    }
    expect(&path, "shingles in all", previous, total)?;
    Ok((Some(map), Some(sets)))
}

/// The checksum the manifest gives file `name` of generation `entry`.
fn checksum_of<'a>(
    dir: &Path,
    entry: &'a GenerationEntry,
    name: &str,
) -> Result<&'a FileSum, IoError> {
    entry
        .checksums
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| {
            corrupt(
                &dir.join(MANIFEST),
                format!("no checksum of {}/{name}", entry.dir),
            )
        })
}

/// Refuses `bytes` (the file at `path`) unless its xxh3-64 is `sum`'s.
fn check_sum(path: &Path, bytes: &[u8], sum: &FileSum) -> Result<(), IoError> {
    same_sum(path, xxhash_rust::xxh3::xxh3_64(bytes), sum)
}

/// Refuses a file whose xxh3 is `digest` where the manifest gives `sum`.
fn same_sum(path: &Path, digest: u64, sum: &FileSum) -> Result<(), IoError> {
    let found = format!("{digest:016x}");
    if found != sum.xxh3 {
        return Err(corrupt(
            path,
            format!("checksum {found}, the manifest says {}", sum.xxh3),
        ));
    }
    Ok(())
}

/// Maps one file of a generation after checking its size (and checksum) against the manifest.
fn map_checked(
    dir: &Path,
    entry: &GenerationEntry,
    name: &str,
    checks: &mut Checks,
) -> Result<(Mmap, Verify), IoError> {
    let path = generation_file(dir, entry, name);
    let sum = checksum_of(dir, entry, name)?;
    let open = |cause| IoError::Open {
        path: path.clone(),
        cause,
    };
    // Not through a symbolic link, which could lead out of the index.
    if !std::fs::symlink_metadata(&path).map_err(open)?.is_file() {
        return Err(corrupt(
            &path,
            "not a file inside the index (a symbolic link or a directory)".into(),
        ));
    }
    let file = File::open(&path).map_err(open)?;
    let meta = file.metadata().map_err(open)?;
    let size = meta.len();
    if size != sum.bytes {
        let what = if size < sum.bytes {
            "truncated"
        } else {
            "too long"
        };
        return Err(corrupt(
            &path,
            format!("{what}: {size} bytes, the manifest says {}", sum.bytes),
        ));
    }
    // SAFETY: the index's files are never changed in place (a writer writes new files and
    // renames them); a file changed by someone else under the map is outside that contract
    // (reads stay within the map; [`Index::verify`] finds such a change).
    let map = unsafe { Mmap::map(&file) }.map_err(open)?;
    let verify = checks.level(entry, name, sum, &meta);
    if verify == Verify::Checksums {
        check_sum_read(&path, &file, sum)?;
        // Recorded now: the checks of what it holds come after, and a failure of any of
        // them fails the open, whose record is then not written.
        checks.checked(entry, name, sum, &meta);
    }
    Ok((map, verify))
}

/// [`check_sum`] of the file `file` at `path`, read from its start in chunks rather than
/// through its map: hashing the map would leave every page of the index resident in this
/// process after [`Index::open`] (its whole size in the resident memory of a step that then
/// reads a few pages of it, such as `run --against`); read, the pages stay in the page cache
/// only.
fn check_sum_read(path: &Path, mut file: &File, sum: &FileSum) -> Result<(), IoError> {
    use std::io::Read;
    let mut hash = xxhash_rust::xxh3::Xxh3::new();
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut chunk).map_err(|cause| IoError::Open {
            path: path.to_path_buf(),
            cause,
        })?;
        if n == 0 {
            break;
        }
        hash.update(&chunk[..n]);
    }
    same_sum(path, hash.digest(), sum)
}

/// Checks a binary file's header (its kind, and the format its generation has); returns
/// its count and extra word.
fn header(bytes: &[u8], path: &Path, kind: u32, format: u32) -> Result<(u64, u64), IoError> {
    if bytes.len() < HEADER_BYTES {
        return Err(corrupt(
            path,
            format!("{} bytes, shorter than a header", bytes.len()),
        ));
    }
    if bytes[0..8] != MAGIC {
        return Err(corrupt(path, "not a neardup index file (bad magic)".into()));
    }
    let word32 = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let word64 = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let found = word32(8);
    if found > super::INDEX_FORMAT {
        return Err(super::unreadable_format(path.to_path_buf(), found));
    }
    if found != format {
        return Err(corrupt(
            path,
            format!("file format {found}, but the manifest says {format}"),
        ));
    }
    if word32(12) != kind {
        return Err(corrupt(
            path,
            format!("file kind {}, expected {kind}", word32(12)),
        ));
    }
    Ok((word64(16), word64(24)))
}

fn expect(path: &Path, what: &str, found: u64, expected: u64) -> Result<(), IoError> {
    if found == expected {
        return Ok(());
    }
    Err(corrupt(
        path,
        format!("{found} {what}, expected {expected}"),
    ))
}
