//! A saved index: the permutation tables of a run kept on disk, sorted, so that one
//! fingerprint's neighbours are found by probing each table at its key
//! ([`neardup_core::query`]), and later batches can be added as generations.
//!
//! ```text
//! INDEX/
//!   manifest.json              the commit point: format, scheme, k, tables, generations, checksums
//!   gen-00000/
//!     docs.bin                 the generation's documents, sorted by doc number (memory-mapped)
//!     table-000.bin ...        one file per table: permuted fingerprints, sorted, with their rows
//!     clusters.bin             cluster changes of earlier generations' documents
//!     keep.bin                 keep decisions of earlier generations' documents it changed
//!     documents.parquet        doc_id, id, source, url, cluster_id, simhash (for other programs)
//!   gen-00001/ ...
//!   .neardup-index.lock        while a writer holds it (crate::lock)
//! ```
//!
//! The idea: the tables of a search are the same for every query, so they are built once,
//! written sorted, and mapped into memory by every later reader; opening an index reads the
//! manifest and maps the files, nothing more (checksums are read on request, [`Verify`]).
//!
//! **Writing is atomic.** A generation is written into a hidden directory
//! (`.gen-00001.tmp`), synced and renamed; then the new manifest replaces the old one
//! ([`crate::atomic::write_atomically`]). Readers only look at the generations the manifest
//! names, so a writer that dies at any point leaves the index as it was (the next writer
//! removes its leftovers). One writer at a time: a writer holds [`INDEX_LOCK`] for as long
//! as it exists ([`crate::lock::DirLock`]).
//!
//! **Document numbers** stay unique across generations: a generation's documents keep the
//! numbers of the run that made them (`file << 40 | record`) shifted by the files indexed
//! before it (`file_offset` in the manifest), as if every batch had been one run over all the
//! files in batch order.
//!
//! **Clusters** follow the runs' rule, the smallest doc number of a component is its id, so
//! a cluster that only grows keeps its id and two that merge take the smaller. A later
//! generation records the new cluster of every earlier document whose cluster changed in its
//! `clusters.bin`; a reader takes the latest.
//!
//! **Keep decisions**: a generation written by this neardup records which of its documents
//! its run (or batch) kept (`docs.bin`'s flag bit 6 marks the removed ones) and, in its
//! `keep.bin`, the earlier documents whose decision it changed; its manifest entry says so
//! (`keep_decisions`). `run --against` under verified or star clusters removes a new
//! document only for an indexed document that is kept, so it needs every generation to
//! record them.
//!
//! **MinHash indexes** (`minhash`, `minhash-oph` runs) hold, instead of permutation tables,
//! one sorted table per LSH band (the band's key and the document's row: a query probes
//! each band at its own key, and the documents sharing a key with it in some band are its
//! candidates, as in a run), every document's signature, and with `--index-shingles` its
//! shingle set, so that candidates are verified as the run verified its pairs: exact
//! Jaccard over the shingle sets, else the signatures' estimate ([`MinHashParams`]).
//!
//! The byte layout of every file is in docs/index.md; [`mod@write`] and [`mod@read`] follow it.
//! Queries are answered, the same way for every caller, by [`mod@answer`].

pub mod answer;
mod build;
mod carry;
pub mod matches;
pub mod merge;
pub mod read;
pub mod run;
pub mod verified;
pub mod write;

use std::path::{Path, PathBuf};

use neardup_core::TableDesign;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::IoError;

pub use build::{
    sorted_changes, ByDocNumber, DocEntry, IndexDocumentRow, COLUMN_BUFFER, DEFAULT_WRITE_MEMORY,
};
pub use matches::{MatchRow, MergeRow};
pub use merge::{background_merge, MergePlan, MergedGeneration};
pub use read::{DocView, Index, Match, MinHashMatch, Verify};
pub use write::{
    merge_count, Checkpoint, Generation as NewGeneration, GenerationBuilder, IndexSpec,
    IndexWriter, MINHASH_TABLES,
};

/// The newest index layout version, written into the manifest and every binary file's
/// header. A reader refuses a newer one (a newer neardup's index is never misread) and reads
/// every format from [`OLDEST_INDEX_FORMAT`] on. Format 2 added each document's content
/// digest, keep rank, bytes and capture time to `docs.bin`, and each generation's format and
/// keep policy to the manifest. Format 3 is the MinHash index (band tables, signatures,
/// shingle sets, the manifest's `minhash`), so that an older neardup refuses a MinHash
/// index by its format instead of misreading it. Format 4 is the simhash index with compact
/// tables ([`neardup_core::query::CompactTable`]: 6 bytes an entry where format 2 has 12);
/// `docs.bin` is as in format 2. Format 5 is a simhash generation that deletes earlier
/// documents (`neardup serve`'s incremental checkpoints): format 4 and [`DELETED_FILE`];
/// only such a generation, and the manifest of an index holding one, are written in it, so
/// that an older neardup refuses the index instead of answering deleted documents.
pub const INDEX_FORMAT: u32 = 5;

/// The format a simhash index's new generations are written in (format 4: compact tables).
pub const SIMHASH_INDEX_FORMAT: u32 = 4;

/// The format of every generation of a MinHash index.
pub const MINHASH_INDEX_FORMAT: u32 = 3;

/// The first format whose simhash tables are compact (a directory, then a 16-bit tag and a
/// 32-bit row an entry; docs/index.md); before it, a table holds each entry's permuted
/// fingerprint and row.
pub const COMPACT_TABLES_FORMAT: u32 = 4;

/// The format of a simhash generation that deletes earlier documents ([`DELETED_FILE`]).
pub const DELETIONS_FORMAT: u32 = 5;

/// The oldest format this neardup reads.
pub const OLDEST_INDEX_FORMAT: u32 = 1;

/// The refusal of an index (or one of its files) in a format this neardup does not read.
pub(crate) fn unreadable_format(path: PathBuf, found: impl ToString) -> IoError {
    IoError::IndexFormat {
        path,
        found: found.to_string(),
        oldest: OLDEST_INDEX_FORMAT,
        newest: INDEX_FORMAT,
    }
}

/// The manifest's file name.
pub const MANIFEST: &str = "manifest.json";

/// The lock a writer holds inside the index directory.
pub const INDEX_LOCK: &str = ".neardup-index.lock";

/// The first 8 bytes of every binary file of an index.
pub const MAGIC: [u8; 8] = *b"NDINDEX\0";

/// The size of every binary file's header (see docs/index.md): magic, format, kind, count,
/// an extra word, zero padding to a cache line.
pub const HEADER_BYTES: usize = 64;

/// File kinds, the header's `kind` word.
pub const KIND_DOCS: u32 = 1;
pub const KIND_TABLE: u32 = 2;
pub const KIND_CLUSTERS: u32 = 3;
/// MinHash indexes (format 3): one LSH band's keys, the signatures, the shingle sets.
pub const KIND_BAND: u32 = 4;
pub const KIND_SIGNATURES: u32 = 5;
pub const KIND_SHINGLES: u32 = 6;
/// Keep decisions of earlier generations' documents that a generation changed.
pub const KIND_KEEP: u32 = 7;
/// Earlier generations' documents that a generation deletes.
pub const KIND_DELETED: u32 = 8;

/// The bits of a doc number below the file number (as a run numbers its documents).
pub const FILE_SHIFT: u32 = 40;

/// The most input files an index numbers (the file number's 24 bits).
pub const MAX_FILES: u64 = 1 << 24;

/// A generation's directory name.
pub fn generation_dir(number: u32) -> String {
    format!("gen-{number:05}")
}

/// A table file's name.
pub fn table_file(table: usize) -> String {
    format!("table-{table:03}.bin")
}

/// A MinHash index's band table file name.
pub fn band_file(band: usize) -> String {
    format!("band-{band:03}.bin")
}

pub const DOCS_FILE: &str = "docs.bin";
pub const SIGNATURES_FILE: &str = "signatures.bin";
pub const SHINGLES_FILE: &str = "shingles.bin";
pub const CLUSTERS_FILE: &str = "clusters.bin";
pub const KEEP_FILE: &str = "keep.bin";
/// The earlier documents a generation deletes (format 5; docs/index.md).
pub const DELETED_FILE: &str = "deleted.bin";
pub const DOCUMENTS_PARQUET: &str = "documents.parquet";

/// The manifest: everything a reader needs to know before it maps a file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`INDEX_FORMAT`].
    pub format: u32,
    /// The neardup version that wrote it (for people; never checked).
    pub neardup_version: String,
    /// The fingerprint scheme's name (`simhash-doc`, ...), as tables record it.
    pub scheme: String,
    /// What defines a fingerprint: the `fingerprint` parameters every neardup table records.
    pub fingerprint: Value,
    /// The design's k: queries may ask for less, never more (0 in a MinHash index).
    pub k: u32,
    /// The table design's name (`manku16`, `blocks:5`; `lsh` in a MinHash index).
    pub tables: String,
    /// Each table's key mask, as 16 hex digits (none in a MinHash index).
    pub masks: Vec<String>,
    /// A MinHash index's banding and verification (absent in a simhash index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minhash: Option<MinHashParams>,
    /// Documents in all generations, and those in the tables (not empty).
    pub documents: u64,
    pub indexed: u64,
    /// Input files numbered so far: the next generation's `file_offset`.
    pub files: u64,
    /// The number the next generation gets.
    pub next_generation: u32,
    pub generations: Vec<GenerationEntry>,
    /// Generation directories this manifest replaced (a compaction, a checkpoint), which
    /// a writer removes: the only directories below `next_generation` it ever deletes.
    /// Absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retired: Vec<String>,
}

/// One generation in the manifest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GenerationEntry {
    pub number: u32,
    /// Its directory, relative to the index.
    pub dir: String,
    /// Added to the file number of the run's doc numbers (see the module docs).
    pub file_offset: u64,
    pub files: u64,
    pub documents: u64,
    pub indexed: u64,
    /// Earlier documents whose cluster this generation changed.
    pub cluster_changes: u64,
    /// Every file of the generation, with its size and xxh3-64.
    pub checksums: Vec<FileSum>,
    /// The layout of the generation's files (absent in format 1 manifests: 1). An index
    /// may hold generations of several formats: a generation is never rewritten in place.
    #[serde(default = "format_one")]
    pub format: u32,
    /// The keep policy (`first`, `longest`, `max:score`, ...) whose ranks `docs.bin` holds;
    /// `None`: no ranks (format 1, a search over fingerprint tables, or compacted
    /// generations of several policies).
    #[serde(default)]
    pub keep: Option<String>,
    /// The batch the generation holds, as the run that added it names it (`neardup run`:
    /// xxh3-128 of its job record, the inputs and parameters `--resume` compares), so that
    /// a run of the same job that did not finish, resumed or run again, finds its batch
    /// there and does not add it twice ([`Manifest::before_batch`]); absent for other
    /// generations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
    /// Whether the generation records its keep decisions: which of its documents are kept
    /// (`docs.bin`'s flag bit 6 marks the removed ones) and, in [`KEEP_FILE`], the earlier
    /// documents whose decision it changed. Absent (false) in generations written before
    /// neardup recorded them, in those of `neardup serve`, and in a compaction of such
    /// generations; an older neardup that writes to the index drops it from every
    /// generation (it rewrites the manifest from what it knows), so that its own changes
    /// are never taken for recorded ones.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_decisions: bool,
    /// Documents of earlier generations that this generation deletes (its [`DELETED_FILE`],
    /// format 5: `neardup serve`'s deletes and replacements), and how many of them were
    /// indexed (not empty). Their rows stay where they are; no reader answers them. Absent
    /// when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub deleted: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub deleted_indexed: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn format_one() -> u32 {
    1
}

/// What a MinHash index was made with, beyond the fingerprint parameters: its LSH banding,
/// and how candidates are verified (as the run that made it verified its pairs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MinHashParams {
    /// The signature's length (as the fingerprint parameters say).
    pub permutations: usize,
    /// The LSH banding: `bands` tables, each keyed by `rows` signature values.
    pub bands: usize,
    pub rows: usize,
    /// Candidates with a similarity below this are no matches: the run's verification
    /// threshold. Queries may ask for more, never less.
    pub threshold: f64,
    /// The run's verification: [`VERIFY_JACCARD`] (exact Jaccard of shingle sets) or
    /// [`VERIFY_ESTIMATE`] (the signatures' agreement).
    pub verify: String,
    /// The n of the word shingles exact-Jaccard verification compares.
    pub shingle: usize,
    /// Whether every generation holds the shingle sets (`shingles.bin`): without them a
    /// candidate is verified by the signatures' estimate.
    pub shingles: bool,
}

/// [`MinHashParams::verify`]: exact Jaccard of shingle sets, or the signatures' estimate.
pub const VERIFY_JACCARD: &str = "jaccard";
pub const VERIFY_ESTIMATE: &str = "minhash";

impl MinHashParams {
    /// Whether a candidate is verified by exact Jaccard: the run verified so and the
    /// shingle sets are stored.
    pub fn exact(&self) -> bool {
        self.verify == VERIFY_JACCARD && self.shingles
    }
}

/// A file's size and checksum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSum {
    pub name: String,
    pub bytes: u64,
    /// xxh3-64 of the whole file, 16 hex digits.
    pub xxh3: String,
}

impl Manifest {
    /// The format this index's new generations and manifests are written in:
    /// [`MINHASH_INDEX_FORMAT`] for a MinHash index, [`SIMHASH_INDEX_FORMAT`] otherwise.
    pub fn write_format(&self) -> u32 {
        if self.minhash.is_some() {
            MINHASH_INDEX_FORMAT
        } else {
            SIMHASH_INDEX_FORMAT
        }
    }

    /// The format the manifest itself must be written in: [`Manifest::write_format`], or
    /// the newest of its generations' where one is newer (a generation that deletes,
    /// [`DELETIONS_FORMAT`]), so that a neardup that cannot read a generation refuses the
    /// whole index by its manifest.
    pub fn required_format(&self) -> u32 {
        let newest = self.generations.iter().map(|g| g.format).max();
        newest.unwrap_or(0).max(self.write_format())
    }

    /// The documents present, and those of them indexed (not empty): the generations'
    /// less those a later generation deleted ([`GenerationEntry::deleted`]).
    pub fn present(&self) -> (u64, u64) {
        let deleted: u64 = self.generations.iter().map(|g| g.deleted).sum();
        let deleted_indexed: u64 = self.generations.iter().map(|g| g.deleted_indexed).sum();
        (
            self.documents.saturating_sub(deleted),
            self.indexed.saturating_sub(deleted_indexed),
        )
    }

    /// The index as it was before the generation holding `batch` was added (see
    /// [`GenerationEntry::batch`]), with that generation's number; the index itself and
    /// `None` when no generation holds it. Only the manifest changes: the generations it
    /// names are those of the index then (open it with [`crate::index::Index::open_as`]).
    pub fn before_batch(&self, batch: &str) -> (Manifest, Option<u32>) {
        let Some(at) = self
            .generations
            .iter()
            .position(|g| g.batch.as_deref() == Some(batch))
        else {
            return (self.clone(), None);
        };
        let entry = &self.generations[at];
        let mut before = self.clone();
        before.generations.truncate(at);
        before.documents = before.generations.iter().map(|g| g.documents).sum();
        before.indexed = before.generations.iter().map(|g| g.indexed).sum();
        before.files = entry.file_offset;
        // Numbered before the batch's, unless a merge committed after it is among them.
        let newest = before.generations.iter().map(|g| g.number + 1).max();
        before.next_generation = newest.unwrap_or(0).max(entry.number);
        (before, Some(entry.number))
    }

    /// The first generation that does not record its keep decisions
    /// ([`GenerationEntry::keep_decisions`]): while there is one, which indexed documents
    /// are kept is not known.
    pub fn without_keep_decisions(&self) -> Option<&GenerationEntry> {
        self.generations.iter().find(|g| !g.keep_decisions)
    }

    /// The table masks as numbers.
    pub fn mask_values(&self, path: &Path) -> Result<Vec<u64>, IoError> {
        self.masks
            .iter()
            .map(|m| {
                u64::from_str_radix(m, 16)
                    .map_err(|_| corrupt(path, format!("mask {m:?} is not hex")))
            })
            .collect()
    }

    /// Reads `dir`'s manifest: refuses a directory without one, a damaged one, and one of
    /// another [`INDEX_FORMAT`].
    pub fn load(dir: &Path) -> Result<Manifest, IoError> {
        let path = dir.join(MANIFEST);
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(IoError::NotAnIndex {
                    path: dir.to_path_buf(),
                })
            }
            Err(cause) => return Err(IoError::Open { path, cause }),
        };
        // The format first, so that a newer layout is named as such, not as damage.
        let value: Value =
            serde_json::from_slice(&text).map_err(|e| corrupt(&path, format!("not JSON: {e}")))?;
        let format = value.get("format").and_then(Value::as_u64);
        match format {
            Some(f) if (u64::from(OLDEST_INDEX_FORMAT)..=u64::from(INDEX_FORMAT)).contains(&f) => {}
            Some(f) => return Err(unreadable_format(path, f)),
            None => return Err(corrupt(&path, "no format".into())),
        }
        let manifest: Manifest =
            serde_json::from_value(value).map_err(|e| corrupt(&path, e.to_string()))?;
        if let Some(g) = manifest
            .generations
            .iter()
            .find(|g| !(OLDEST_INDEX_FORMAT..=INDEX_FORMAT).contains(&g.format))
        {
            return Err(unreadable_format(dir.join(&g.dir), g.format));
        }
        manifest.check_generations(&path)?;
        let method = manifest.fingerprint.get("method").and_then(Value::as_str);
        let minhash_method = matches!(method, Some("minhash" | "minhash-oph"));
        if manifest.minhash.is_some() != minhash_method {
            return Err(corrupt(
                &path,
                format!(
                    "fingerprints of method {method:?} {} a minhash member",
                    if minhash_method { "without" } else { "with" }
                ),
            ));
        }
        if let Some(m) = &manifest.minhash {
            if let Some(g) = manifest
                .generations
                .iter()
                .find(|g| g.format != MINHASH_INDEX_FORMAT)
            {
                return Err(corrupt(
                    &path,
                    format!(
                        "a MinHash index, but its generation {} has format {} (MinHash generations are format {MINHASH_INDEX_FORMAT})",
                        g.dir, g.format
                    ),
                ));
            }
            if m.bands == 0 || m.rows == 0 || m.bands * m.rows > m.permutations {
                return Err(corrupt(
                    &path,
                    format!(
                        "{} bands of {} rows do not fit signatures of {} values",
                        m.bands, m.rows, m.permutations
                    ),
                ));
            }
        }
        Ok(manifest)
    }
}

impl Manifest {
    /// Refuses a manifest whose generations do not add up: a directory that is not the
    /// plain name `gen-NNNNN` of its entry's number (so nothing outside the index is ever
    /// read or removed), numbers given twice or not below `next_generation` (they rise
    /// with the generations' places, except where a background merge's generation,
    /// numbered when it was committed, took the place of those it merged), file numbers
    /// that do not follow on from one generation to the next up to `files`, and totals of
    /// documents and indexed documents other than the sums of the generations' (an entry
    /// removed or damaged).
    fn check_generations(&self, path: &Path) -> Result<(), IoError> {
        let mut numbers = std::collections::HashSet::new();
        let (mut files, mut documents, mut indexed) = (0u64, 0u64, 0u64);
        for (i, g) in self.generations.iter().enumerate() {
            let entry = || {
                format!(
                    "generation entry {i} (number {}, dir {:?})",
                    g.number, g.dir
                )
            };
            if g.dir != generation_dir(g.number) {
                return Err(corrupt(
                    path,
                    format!(
                        "{}: a generation's dir must be {:?}, a plain name inside the index",
                        entry(),
                        generation_dir(g.number)
                    ),
                ));
            }
            if !numbers.insert(g.number) || g.number >= self.next_generation {
                return Err(corrupt(
                    path,
                    format!(
                        "{}: numbers must differ, below next_generation {}",
                        entry(),
                        self.next_generation
                    ),
                ));
            }
            if g.file_offset != files {
                return Err(corrupt(
                    path,
                    format!(
                        "{}: its files start at {}, but the generations before it end at {files} (an entry is missing)",
                        entry(),
                        g.file_offset
                    ),
                ));
            }
            self.check_deletions(g, path, &entry())?;
            if g.indexed > g.documents {
                return Err(corrupt(
                    path,
                    format!(
                        "{}: {} indexed of {} documents",
                        entry(),
                        g.indexed,
                        g.documents
                    ),
                ));
            }
            files = files.saturating_add(g.files);
            documents = documents.saturating_add(g.documents);
            indexed = indexed.saturating_add(g.indexed);
        }
        let totals = [
            ("files", files, self.files),
            ("documents", documents, self.documents),
            ("indexed documents", indexed, self.indexed),
        ];
        for (what, sum, total) in totals {
            if sum != total {
                return Err(corrupt(
                    path,
                    format!(
                        "the generations hold {sum} {what}, the manifest's total is {total} (an entry is missing or damaged)"
                    ),
                ));
            }
        }
        for name in &self.retired {
            let retired = parse_generation_dir(name).filter(|&n| n < self.next_generation);
            if retired.is_none() || self.generations.iter().any(|g| &g.dir == name) {
                return Err(corrupt(
                    path,
                    format!("retired {name:?} is not a replaced generation of the index"),
                ));
            }
        }
        Ok(())
    }

    /// Refuses a generation entry (`entry` names it) newer than the manifest, or one that
    /// deletes documents outside [`DELETIONS_FORMAT`] or counts more indexed deletions than
    /// deletions.
    fn check_deletions(
        &self,
        g: &GenerationEntry,
        path: &Path,
        entry: &str,
    ) -> Result<(), IoError> {
        if g.deleted_indexed > g.deleted || (g.deleted > 0 && g.format < DELETIONS_FORMAT) {
            return Err(corrupt(
                path,
                format!(
                    "{entry}: deletes {} documents ({} indexed) in format {} (deletions are format {DELETIONS_FORMAT})",
                    g.deleted, g.deleted_indexed, g.format
                ),
            ));
        }
        if g.format > self.format {
            return Err(corrupt(
                path,
                format!(
                    "{entry}: format {}, newer than the manifest's {}",
                    g.format, self.format
                ),
            ));
        }
        Ok(())
    }
}

/// The number of a generation directory's name (`gen-00012`: 12); `None` for any other name.
pub(crate) fn parse_generation_dir(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("gen-")?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let number = digits.parse().ok()?;
    (generation_dir(number) == name).then_some(number)
}

/// The names in the index directory `dir`, sorted.
pub(crate) fn entries(dir: &Path) -> Result<Vec<String>, IoError> {
    let listing = std::fs::read_dir(dir).map_err(|cause| IoError::Open {
        path: dir.to_path_buf(),
        cause,
    })?;
    let mut names: Vec<String> = listing
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(names)
}

/// Checks the index directory `dir` against its manifest: every generation the manifest
/// names is a directory there (not a symbolic link, which could lead out of the index), and
/// no directory that looks like a generation numbered below `next_generation` is there
/// unnamed and not retired: its entry was taken out of the manifest, and answering from the
/// others would lose its documents. (A generation numbered from `next_generation` on is what
/// a writer interrupted before its manifest leaves; readers ignore it and the next writer
/// removes it.)
pub(crate) fn check_directory(dir: &Path, manifest: &Manifest) -> Result<(), IoError> {
    for g in &manifest.generations {
        let path = dir.join(&g.dir);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(corrupt(
                    &path,
                    "not a directory inside the index (a symbolic link or a file)".into(),
                ))
            }
            Err(cause) => return Err(IoError::Open { path, cause }),
        }
    }
    let unnamed: Vec<String> = entries(dir)?
        .into_iter()
        .filter(|name| {
            parse_generation_dir(name).is_some_and(|n| n < manifest.next_generation)
                && !manifest.generations.iter().any(|g| &g.dir == name)
                && !manifest.retired.contains(name)
        })
        .collect();
    match unnamed.first() {
        None => Ok(()),
        Some(name) => Err(corrupt(
            &dir.join(MANIFEST),
            format!(
                "{name} is a generation the manifest does not name (below its next_generation {}): its entry was removed, so its documents would be missing; restore manifest.json, or move {name} out of the index if it is not wanted",
                manifest.next_generation
            ),
        )),
    }
}

/// A damaged index file.
pub(crate) fn corrupt(path: &Path, reason: String) -> IoError {
    IoError::IndexCorrupt {
        path: path.to_path_buf(),
        reason,
    }
}

/// The path of a file of generation `entry` in the index at `dir`.
pub(crate) fn generation_file(dir: &Path, entry: &GenerationEntry, name: &str) -> PathBuf {
    dir.join(&entry.dir).join(name)
}

/// The flags byte of a document in `docs.bin`: which of its optional fields are there.
pub(crate) const FLAG_HAS_ID: u8 = 1;
pub(crate) const FLAG_EMPTY: u8 = 2;
pub(crate) const FLAG_DIGEST: u8 = 4;
pub(crate) const FLAG_RANK: u8 = 8;
pub(crate) const FLAG_BYTES: u8 = 16;
pub(crate) const FLAG_FETCHED_AT: u8 = 32;
/// Removed (`keep = false`) by the run or batch that added it, in a generation that records
/// its keep decisions ([`GenerationEntry::keep_decisions`]); an older neardup ignores it.
pub(crate) const FLAG_REMOVED: u8 = 64;

/// The design a manifest describes: its name and k, whose masks must be the recorded ones.
pub(crate) fn design_of(manifest: &Manifest, path: &Path) -> Result<TableDesign, IoError> {
    let design = TableDesign::parse(&manifest.tables, manifest.k)
        .map_err(|e| corrupt(path, format!("table design: {e}")))?;
    if design.masks() != manifest.mask_values(path)? {
        return Err(corrupt(
            path,
            format!("the masks are not those of {}", manifest.tables),
        ));
    }
    Ok(design)
}

#[cfg(test)]
mod tests;
