//! Writing one generation's files document by document, within a memory budget.
//!
//! The simple version holds the generation's documents in a `Vec` sorted by doc number and
//! writes each file from it: `docs.bin` column after column, then every permutation table
//! (or band table) sorted in memory. That holds every document, and every table, at once:
//! at 35M documents some 10 GB.
//!
//! [`GenerationFiles`] takes the documents one at a time, in ascending doc number (a row is
//! its position). As a document passes, each column of `docs.bin` (and of `signatures.bin`
//! and `shingles.bin`) is appended to its own temporary file, its row goes to
//! `documents.parquet`, and its `(key, row)` entry of each table goes to that table's
//! [`ExternalSort`], which holds its share of the budget and spills sorted runs past it.
//! [`GenerationFiles::finish`] writes each file's header (the counts are known only then),
//! appends its columns, and merges each table's sort into its file. The files are byte for
//! byte those of the simple version: the same columns in the same order, and a table's
//! entries in the order of `(key, row)`, which is what the simple version's sort gave.
//!
//! Memory: the tables' sorts (the budget, split evenly), one write buffer per column
//! ([`COLUMN_BUFFER`], fourteen at most) and the Parquet writer's row group. Disk beyond the
//! generation itself: its columns once more while they wait to be joined, and the tables'
//! spilled runs (16 bytes an entry) in the spill directory (by default the hidden
//! generation directory); both go as soon as their file is written.

use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int64Array, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use neardup_core::minhash::Banding;
use neardup_core::query::{bucket_and_tag, directory_bits, permutations, Permutation};
use serde::{Deserialize, Serialize};
use serde_json::json;
use xxhash_rust::xxh3::Xxh3;

use super::{
    band_file, design_of, generation_dir, table_file, FileSum, GenerationEntry, Manifest,
    MinHashParams, CLUSTERS_FILE, COMPACT_TABLES_FORMAT, DELETED_FILE, DOCS_FILE,
    DOCUMENTS_PARQUET, FLAG_BYTES, FLAG_DIGEST, FLAG_EMPTY, FLAG_FETCHED_AT, FLAG_HAS_ID,
    FLAG_RANK, FLAG_REMOVED, HEADER_BYTES, KEEP_FILE, KIND_BAND, KIND_CLUSTERS, KIND_DELETED,
    KIND_DOCS, KIND_KEEP, KIND_SHINGLES, KIND_SIGNATURES, KIND_TABLE, MAGIC, MANIFEST,
    SHINGLES_FILE, SIGNATURES_FILE,
};
use crate::atomic::sync_parent;
use crate::error::IoError;
use crate::parquet_out::{OutputRow, PartWriter, TableMeta, PARAM_FINGERPRINT};
use crate::spill::{ExternalSort, SortStats, SpillRecord};

/// Write buffer of each temporary column file.
pub const COLUMN_BUFFER: usize = 64 << 10;

/// Memory an index writer gives a generation's table sorts unless told otherwise
/// ([`super::IndexWriter::set_memory`]): 256 MiB, which sorts a 16-table generation of
/// 1M documents without spilling (16 bytes an entry).
pub const DEFAULT_WRITE_MEMORY: usize = 256 << 20;

/// What a generation is, fixed before its first document.
pub(super) struct GenerationPlan<'a> {
    /// The index's directory and manifest (its format, tables and MinHash parameters).
    pub dir: &'a Path,
    pub manifest: &'a Manifest,
    pub number: u32,
    /// The files the generation's doc numbers lie in: `file_offset..file_offset + files`.
    pub file_offset: u64,
    pub files: u64,
    /// The keep policy its ranks follow (`None`: no ranks stored).
    pub keep: Option<String>,
    /// Whether it records its keep decisions (the removed flag, `keep.bin`).
    pub decisions: bool,
    /// The tables' sorts' memory, and where they spill (`None`: the hidden generation
    /// directory).
    pub budget: usize,
    pub spill: Option<&'a Path>,
}

/// The files of one generation being written (see the module docs). Dropped before
/// [`GenerationFiles::finish`], it removes its hidden directory.
pub(super) struct GenerationFiles {
    dir: PathBuf,
    tmp: PathBuf,
    name: String,
    number: u32,
    format: u32,
    file_offset: u64,
    files: u64,
    keep: Option<String>,
    decisions: bool,
    minhash: Option<MinHashParams>,
    keys: Keys,
    /// One sort of `(key, row)` per table (or band).
    tables: Vec<ExternalSort<(u64, u64)>>,
    columns: DocColumns,
    sketches: Option<SketchColumns>,
    parquet: Option<PartWriter<IndexDocumentRow>>,
    documents: u64,
    indexed: u64,
    last: Option<u64>,
    /// Earlier documents the generation deletes, `(doc number, was indexed)`
    /// ([`GenerationFiles::delete`]).
    deleted: Vec<(u64, bool)>,
    done: bool,
}

/// How a document's table keys are made.
enum Keys {
    Simhash(Vec<Permutation>),
    Bands(Banding),
}

/// The temporary files of `docs.bin`'s columns, in the file's order.
struct DocColumns {
    doc_id: Column,
    simhash: Column,
    cluster: Column,
    id_end: Column,
    digest: Column,
    rank: Column,
    bytes: Column,
    fetched_at: Column,
    flags: Column,
    ids: Column,
}

/// The temporary files of `signatures.bin` and `shingles.bin` (a MinHash index's).
struct SketchColumns {
    signatures: Column,
    /// Where the index keeps the shingle sets: each set's end, and the sets.
    shingles: Option<(Column, Column)>,
    shingle_total: u64,
}

impl GenerationFiles {
    /// Creates the generation's hidden directory (replacing one a writer that died left).
    pub fn create(plan: GenerationPlan) -> Result<GenerationFiles, IoError> {
        let manifest = plan.manifest;
        let name = generation_dir(plan.number);
        let tmp = plan.dir.join(format!(".{name}.tmp"));
        let write = |cause| IoError::Write {
            path: tmp.clone(),
            cause,
        };
        if tmp.exists() {
            fs::remove_dir_all(&tmp).map_err(write)?;
        }
        fs::create_dir_all(&tmp).map_err(write)?;
        // From here on, an error drops what was made, and with it the directory.
        let keys = match &manifest.minhash {
            None => Keys::Simhash(permutations(&design_of(
                manifest,
                &plan.dir.join(MANIFEST),
            )?)),
            Some(m) => Keys::Bands(Banding {
                bands: m.bands,
                rows: m.rows,
            }),
        };
        let count = match &keys {
            Keys::Simhash(p) => p.len(),
            Keys::Bands(b) => b.bands,
        };
        let spill = plan.spill.unwrap_or(&tmp);
        let stem = format!(".{name}-sort");
        let tables = (0..count)
            .map(|t| {
                ExternalSort::new(
                    spill.join(&stem).join(format!("table-{t:03}")),
                    plan.budget / count.max(1),
                )
            })
            .collect();
        let column = |name: &str| Column::create(&tmp.join(format!(".col-{name}")));
        let sketches = match &manifest.minhash {
            None => None,
            Some(m) => Some(SketchColumns {
                signatures: column("signatures")?,
                shingles: match m.shingles {
                    true => Some((column("shingle-ends")?, column("shingles")?)),
                    false => None,
                },
                shingle_total: 0,
            }),
        };
        let columns = DocColumns {
            doc_id: column("doc-id")?,
            simhash: column("simhash")?,
            cluster: column("cluster")?,
            id_end: column("id-end")?,
            digest: column("digest")?,
            rank: column("rank")?,
            bytes: column("bytes")?,
            fetched_at: column("fetched-at")?,
            flags: column("flags")?,
            ids: column("ids")?,
        };
        let parquet = PartWriter::<IndexDocumentRow>::create_file(
            &tmp.join(DOCUMENTS_PARQUET),
            &documents_meta(manifest),
        )?;
        Ok(GenerationFiles {
            dir: plan.dir.to_path_buf(),
            tmp,
            name,
            number: plan.number,
            format: manifest.write_format(),
            file_offset: plan.file_offset,
            files: plan.files,
            keep: plan.keep,
            decisions: plan.decisions,
            minhash: manifest.minhash.clone(),
            keys,
            tables,
            columns,
            sketches,
            parquet: Some(parquet),
            documents: 0,
            indexed: 0,
            last: None,
            deleted: Vec::new(),
            done: false,
        })
    }

    /// Adds the next document: its doc number above the last one's, within the
    /// generation's files, with a signature (and shingle set) where the index holds them.
    pub fn push(&mut self, mut doc: DocEntry) -> Result<(), IoError> {
        self.check(&doc)?;
        self.last = Some(doc.doc_id);
        let row = self.documents;
        self.documents += 1;
        if !doc.empty {
            self.indexed += 1;
            let sort = |cause| IoError::Write {
                path: self.tmp.clone(),
                cause,
            };
            match &self.keys {
                Keys::Simhash(permutations) => {
                    for (t, p) in permutations.iter().enumerate() {
                        self.tables[t]
                            .push((p.permute(doc.simhash), row))
                            .map_err(sort)?;
                    }
                }
                Keys::Bands(banding) => {
                    for (band, key) in banding.band_keys(&doc.signature).enumerate() {
                        self.tables[band].push((key, row)).map_err(sort)?;
                    }
                }
            }
        }
        if let (Some(s), Some(m)) = (&mut self.sketches, &self.minhash) {
            s.push(&mut doc, m.permutations)?;
        }
        self.columns
            .push(&doc, self.keep.is_some(), self.decisions)?;
        let parquet = self
            .parquet
            .as_mut()
            .expect("documents.parquet being written");
        parquet.push(IndexDocumentRow {
            doc_id: doc.doc_id,
            id: doc.id,
            source: doc.source,
            url: doc.url,
            cluster_id: doc.cluster_id,
            simhash: doc.simhash,
            empty: doc.empty,
        })
    }

    /// Refuses a document out of order, outside the generation's files, or without the
    /// sketches the index holds.
    fn check(&self, doc: &DocEntry) -> Result<(), IoError> {
        let invalid = |reason: String| IoError::IndexInput {
            path: self.dir.clone(),
            reason,
        };
        match self.last {
            Some(last) if last == doc.doc_id => {
                return Err(invalid(format!("doc number {} is given twice", doc.doc_id)))
            }
            Some(last) if last > doc.doc_id => {
                return Err(invalid(format!(
                    "doc number {} comes after doc number {last}: a generation's documents are added in ascending doc number",
                    doc.doc_id
                )))
            }
            _ => {}
        }
        let (start, end) = (self.file_offset, self.file_offset + self.files);
        if !(start..end).contains(&(doc.doc_id >> super::FILE_SHIFT)) {
            return Err(invalid(format!(
                "doc number {} is outside the generation's files {start}..{end}",
                doc.doc_id
            )));
        }
        match &self.minhash {
            Some(m) => check_sketch(&self.dir, m, doc),
            None => Ok(()),
        }
    }

    /// Makes the generation delete the earlier documents `deleted` (`(doc number, was
    /// indexed)`, in any order): it is then written in [`super::DELETIONS_FORMAT`] with a
    /// [`DELETED_FILE`]. A simhash index's only (`neardup serve`'s checkpoints).
    pub fn delete(&mut self, mut deleted: Vec<(u64, bool)>) {
        debug_assert!(
            self.minhash.is_none(),
            "a MinHash generation deletes nothing"
        );
        deleted.sort_unstable();
        deleted.dedup_by_key(|d| d.0);
        if !deleted.is_empty() {
            self.format = super::DELETIONS_FORMAT;
        }
        self.deleted = deleted;
    }

    /// Writes the generation's files, the earlier documents' cluster `changes` and keep
    /// `decisions` (with [`GenerationPlan::decisions`]; each by doc number, the first of a
    /// document counting: [`sorted_changes`] makes them of a `Vec`) beside them, and
    /// renames the directory into place; returns its manifest entry and what the table
    /// sorts did.
    pub fn finish(
        self,
        changes: impl Iterator<Item = Result<(u64, i64), IoError>>,
        decisions: impl Iterator<Item = Result<(u64, bool), IoError>>,
    ) -> Result<(GenerationEntry, SortStats), IoError> {
        let number = self.number;
        let (unplaced, stats) = self.finish_unplaced(changes, decisions)?;
        Ok((unplaced.place(number)?, stats))
    }

    /// [`GenerationFiles::finish`] up to the rename: the generation's files written and
    /// synced in its hidden directory, which [`Unplaced::place`] renames into place under
    /// a number given then (a merge written while the writer goes on learns its number
    /// when it is committed).
    pub fn finish_unplaced(
        mut self,
        changes: impl Iterator<Item = Result<(u64, i64), IoError>>,
        decisions: impl Iterator<Item = Result<(u64, bool), IoError>>,
    ) -> Result<(Unplaced, SortStats), IoError> {
        let format = self.format;
        let tmp = self.tmp.clone();
        let mut checksums = vec![self.write_docs()?];
        let kind = self.table_kind();
        let mut stats = SortStats::default();
        for (t, sort) in std::mem::take(&mut self.tables).into_iter().enumerate() {
            let (file, extra) = match &self.keys {
                Keys::Simhash(p) => (table_file(t), p[t].mask()),
                Keys::Bands(_) => (band_file(t), t as u64),
            };
            let path = tmp.join(file);
            let (sum, sorted) = if kind == KIND_TABLE && format >= COMPACT_TABLES_FORMAT {
                write_compact_table(&path, format, extra, sort)?
            } else {
                write_table(&path, format, kind, extra, sort)?
            };
            checksums.push(sum);
            stats = stats.plus(sorted);
        }
        if let (Some(sketches), Some(m)) = (self.sketches.take(), &self.minhash) {
            checksums.extend(sketches.finish(&tmp, format, self.documents, m.permutations)?);
        }
        let changes = changes.map(|c| c.map(|(doc, cluster)| (doc, cluster as u64)));
        let clusters = tmp.join(CLUSTERS_FILE);
        let (sum, cluster_changes) = write_changes(&clusters, (format, KIND_CLUSTERS), changes)?;
        checksums.push(sum);
        if self.decisions {
            let decisions = decisions.map(|c| c.map(|(doc, kept)| (doc, u64::from(kept))));
            let keep = tmp.join(KEEP_FILE);
            checksums.push(write_changes(&keep, (format, KIND_KEEP), decisions)?.0);
        }
        let (mut deleted, mut deleted_indexed) = (0, 0);
        if !self.deleted.is_empty() {
            let path = tmp.join(DELETED_FILE);
            deleted_indexed = self.deleted.iter().filter(|d| d.1).count() as u64;
            let docs = self
                .deleted
                .iter()
                .map(|&(doc, indexed)| Ok((doc, u64::from(indexed))));
            let (sum, n) = write_changes(&path, (format, KIND_DELETED), docs)?;
            checksums.push(sum);
            deleted = n;
        }
        if let Some(parquet) = self.parquet.take() {
            parquet.commit()?;
        }
        checksums.push(sum_of_file(&tmp.join(DOCUMENTS_PARQUET))?);
        let entry = GenerationEntry {
            number: self.number,
            dir: self.name.clone(),
            file_offset: self.file_offset,
            files: self.files,
            documents: self.documents,
            indexed: self.indexed,
            cluster_changes,
            checksums,
            format,
            keep: self.keep.clone(),
            batch: None,
            keep_decisions: self.decisions,
            deleted,
            deleted_indexed,
        };
        // From here on the hidden directory is the `Unplaced`'s to remove.
        self.done = true;
        let unplaced = Unplaced {
            dir: self.dir.clone(),
            tmp,
            entry,
            placed: false,
        };
        Ok((unplaced, stats))
    }

    fn table_kind(&self) -> u32 {
        match self.keys {
            Keys::Simhash(_) => KIND_TABLE,
            Keys::Bands(_) => KIND_BAND,
        }
    }

    /// `docs.bin` (format 2, docs/index.md): eight words per document (doc number, simhash,
    /// cluster, id end, digest in two words, rank, bytes, capture time), a flags byte each,
    /// then the id bytes.
    fn write_docs(&mut self) -> Result<FileSum, IoError> {
        let c = &mut self.columns;
        let id_bytes = c.ids.bytes;
        let mut f = HashedFile::create(&self.tmp.join(DOCS_FILE), self.format)?;
        f.header(KIND_DOCS, self.documents, id_bytes)?;
        for column in [
            &mut c.doc_id,
            &mut c.simhash,
            &mut c.cluster,
            &mut c.id_end,
            &mut c.digest,
            &mut c.rank,
            &mut c.bytes,
            &mut c.fetched_at,
            &mut c.flags,
        ] {
            f.append(std::mem::replace(column, Column::none()))?;
        }
        f.align()?;
        f.append(std::mem::replace(&mut c.ids, Column::none()))?;
        f.finish()
    }
}

impl Drop for GenerationFiles {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_dir_all(&self.tmp);
        }
    }
}

/// A generation written in its hidden directory, not yet in place
/// ([`GenerationFiles::finish_unplaced`]). Dropped before [`Unplaced::place`], it removes
/// the directory.
pub(super) struct Unplaced {
    dir: PathBuf,
    tmp: PathBuf,
    entry: GenerationEntry,
    placed: bool,
}

impl Unplaced {
    /// The generation's entry as it will be placed (its number and directory aside).
    pub fn entry(&self) -> &GenerationEntry {
        &self.entry
    }

    /// Renames the generation into place as generation `number`, and gives its manifest
    /// entry; the manifest that names it is the commit.
    pub fn place(mut self, number: u32) -> Result<GenerationEntry, IoError> {
        let name = generation_dir(number);
        let target = self.dir.join(&name);
        if target.exists() {
            // A generation of this number the manifest never named (see remove_leftovers).
            let _ = fs::remove_dir_all(&target);
        }
        fs::rename(&self.tmp, &target).map_err(|cause| IoError::Write {
            path: target.clone(),
            cause,
        })?;
        self.placed = true;
        sync_parent(&target);
        let mut entry = self.entry.clone();
        (entry.number, entry.dir) = (number, name);
        Ok(entry)
    }
}

impl Drop for Unplaced {
    fn drop(&mut self) {
        if !self.placed {
            let _ = fs::remove_dir_all(&self.tmp);
        }
    }
}

impl DocColumns {
    fn push(&mut self, d: &DocEntry, ranks: bool, decided: bool) -> Result<(), IoError> {
        self.doc_id.word(d.doc_id)?;
        self.simhash.word(d.simhash)?;
        self.cluster.word(d.cluster_id.unwrap_or(-1) as u64)?;
        if let Some(id) = &d.id {
            self.ids.put(id.as_bytes())?;
        }
        self.id_end.word(self.ids.bytes)?;
        // The digest as a little-endian u128: its low word first.
        let digest = d.digest.unwrap_or(0);
        self.digest.word(digest as u64)?;
        self.digest.word((digest >> 64) as u64)?;
        let rank = d.rank.filter(|_| ranks);
        self.rank.word(rank.unwrap_or(u64::MAX))?;
        self.bytes.word(d.bytes.unwrap_or(0))?;
        self.fetched_at
            .word(d.fetched_at.unwrap_or(i64::MIN) as u64)?;
        let flag = |on: bool, bit: u8| if on { bit } else { 0 };
        let flags = flag(d.id.is_some(), FLAG_HAS_ID)
            | flag(d.empty, FLAG_EMPTY)
            | flag(d.digest.is_some(), FLAG_DIGEST)
            | flag(rank.is_some(), FLAG_RANK)
            | flag(d.bytes.is_some(), FLAG_BYTES)
            | flag(d.fetched_at.is_some(), FLAG_FETCHED_AT)
            | flag(decided && d.removed, FLAG_REMOVED);
        self.flags.put(&[flags])
    }
}

impl SketchColumns {
    /// A document's signature (an empty one's: the all-`u64::MAX` signature of an empty
    /// set) and, where kept, its shingle set, sorted and without repeats.
    fn push(&mut self, d: &mut DocEntry, permutations: usize) -> Result<(), IoError> {
        if d.signature.is_empty() {
            for _ in 0..permutations {
                self.signatures.word(u64::MAX)?;
            }
        } else {
            for &v in &d.signature {
                self.signatures.word(v)?;
            }
        }
        if let Some((ends, values)) = &mut self.shingles {
            // Taken, not copied: the set is written here and nowhere else.
            let mut set = d.shingles.take().unwrap_or_default();
            set.sort_unstable();
            set.dedup();
            self.shingle_total += set.len() as u64;
            ends.word(self.shingle_total)?;
            for v in set {
                values.word(v)?;
            }
        }
        Ok(())
    }

    /// `signatures.bin` and, where kept, `shingles.bin` (docs/index.md).
    fn finish(
        self,
        tmp: &Path,
        format: u32,
        documents: u64,
        permutations: usize,
    ) -> Result<Vec<FileSum>, IoError> {
        let permutations = permutations as u64;
        let mut f = HashedFile::create(&tmp.join(SIGNATURES_FILE), format)?;
        f.header(KIND_SIGNATURES, documents, permutations)?;
        f.append(self.signatures)?;
        let mut sums = vec![f.finish()?];
        if let Some((ends, values)) = self.shingles {
            let mut f = HashedFile::create(&tmp.join(SHINGLES_FILE), format)?;
            f.header(KIND_SHINGLES, documents, self.shingle_total)?;
            f.append(ends)?;
            f.append(values)?;
            sums.push(f.finish()?);
        }
        Ok(sums)
    }
}

/// Refuses a document that does not fit a MinHash index: a non-empty one without a
/// signature of the index's length, or without a shingle set where the index holds them.
pub(super) fn check_sketch(dir: &Path, m: &MinHashParams, d: &DocEntry) -> Result<(), IoError> {
    let invalid = |reason: String| IoError::IndexInput {
        path: dir.to_path_buf(),
        reason,
    };
    if d.empty && d.signature.is_empty() {
        return Ok(());
    }
    if d.signature.len() != m.permutations {
        return Err(invalid(format!(
            "doc number {} has a signature of {} values; the index's have {}",
            d.doc_id,
            d.signature.len(),
            m.permutations
        )));
    }
    if m.shingles && !d.empty && d.shingles.is_none() {
        return Err(invalid(format!(
            "doc number {} has no shingle set; the index holds them",
            d.doc_id
        )));
    }
    Ok(())
}

/// A sorted table of `(key, row)` entries from `sort`: a simhash index's permutation table
/// (`extra`: its mask) or a MinHash index's band table (`extra`: the band number). The keys
/// go straight to the file, the rows (4 bytes each) to a column joined after them.
fn write_table(
    path: &Path,
    format: u32,
    kind: u32,
    extra: u64,
    sort: ExternalSort<(u64, u64)>,
) -> Result<(FileSum, SortStats), IoError> {
    let failed = |cause| IoError::Write {
        path: path.to_path_buf(),
        cause,
    };
    let mut f = HashedFile::create(path, format)?;
    f.header(kind, sort.len(), extra)?;
    let mut rows = Column::create(&path.with_extension("rows"))?;
    let mut merged = sort.finish().map_err(failed)?;
    for entry in merged.by_ref() {
        let (key, row) = entry.map_err(failed)?;
        f.put(&key.to_le_bytes())?;
        rows.put(&(row as u32).to_le_bytes())?;
    }
    let stats = merged.stats();
    drop(merged);
    f.append(rows)?;
    f.align()?;
    Ok((f.finish()?, stats))
}

/// A compact table (format 4, docs/index.md) of `(permuted, row)` entries from `sort`, a
/// simhash index's table of mask `mask`: each entry's tag goes straight to the file, its
/// row to a column joined after them, and the directory (half a byte an entry, counted as the
/// entries pass) last.
fn write_compact_table(
    path: &Path,
    format: u32,
    mask: u64,
    sort: ExternalSort<(u64, u64)>,
) -> Result<(FileSum, SortStats), IoError> {
    let failed = |cause| IoError::Write {
        path: path.to_path_buf(),
        cause,
    };
    let n = sort.len();
    let d = directory_bits(mask.count_ones(), n as usize);
    let mut f = HashedFile::create(path, format)?;
    f.header(KIND_TABLE, n, mask)?;
    let mut rows = Column::create(&path.with_extension("rows"))?;
    let mut starts = vec![0u64; (1usize << d) + 1];
    let mut tags: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut merged = sort.finish().map_err(failed)?;
    for entry in merged.by_ref() {
        let (permuted, row) = entry.map_err(failed)?;
        let (bucket, tag) = bucket_and_tag(permuted, d);
        starts[bucket as usize + 1] += 1;
        tags.extend_from_slice(&tag.to_le_bytes());
        if tags.len() >= 1 << 16 {
            f.put(&tags)?;
            tags.clear();
        }
        rows.put(&(row as u32).to_le_bytes())?;
    }
    f.put(&tags)?;
    let stats = merged.stats();
    drop(merged);
    f.align()?;
    f.append(rows)?;
    f.align()?;
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let directory: Vec<u8> = starts.iter().flat_map(|s| s.to_le_bytes()).collect();
    f.put(&directory)?;
    Ok((f.finish()?, stats))
}

/// `clusters.bin`, `keep.bin` or `deleted.bin` (docs/index.md): the doc numbers whose
/// cluster (or keep decision, 1: kept, 0: removed) the generation changed, or that it
/// deletes (1: the document was indexed, 0: it was empty), sorted, then each one's
/// value; `changes` by doc number, the first of a document counting. Returns the file's
/// checksum and the number of documents. The two columns go to files of their own as they
/// come, joined behind the header once the count is known: what is held does not grow
/// with the changes.
fn write_changes(
    path: &Path,
    (format, kind): (u32, u32),
    changes: impl Iterator<Item = Result<(u64, u64), IoError>>,
) -> Result<(FileSum, u64), IoError> {
    let mut docs = Column::create(&path.with_extension("docs"))?;
    let mut values = Column::create(&path.with_extension("values"))?;
    let (mut n, mut last) = (0, None);
    for change in changes {
        let (doc, value) = change?;
        if last.is_some_and(|l| l > doc) {
            return Err(IoError::IndexInput {
                path: path.to_path_buf(),
                reason: format!("changes out of order: doc number {doc} after {last:?}"),
            });
        }
        if last != Some(doc) {
            docs.word(doc)?;
            values.word(value)?;
            n += 1;
            last = Some(doc);
        }
    }
    let mut f = HashedFile::create(path, format)?;
    f.header(kind, n, 0)?;
    f.append(docs)?;
    f.append(values)?;
    Ok((f.finish()?, n))
}

/// Earlier generations' document changes (`(doc number, value)`, a cluster or a keep
/// decision) as [`super::GenerationBuilder::commit`] takes them, from a `Vec` in any order: sorted
/// by doc number, the smallest value of a document counting.
pub fn sorted_changes<T: Ord + Copy>(
    mut changes: Vec<(u64, T)>,
) -> impl Iterator<Item = Result<(u64, T), IoError>> {
    changes.sort_unstable();
    changes.dedup_by_key(|c| c.0);
    changes.into_iter().map(Ok)
}

/// A temporary column file: written through a buffer, joined into its file by
/// [`HashedFile::append`], which removes it.
struct Column {
    path: PathBuf,
    out: Option<BufWriter<File>>,
    bytes: u64,
}

impl Column {
    fn create(path: &Path) -> Result<Column, IoError> {
        let file = File::create(path).map_err(|cause| IoError::Write {
            path: path.to_path_buf(),
            cause,
        })?;
        Ok(Column {
            path: path.to_path_buf(),
            out: Some(BufWriter::with_capacity(COLUMN_BUFFER, file)),
            bytes: 0,
        })
    }

    /// A column taken out of its place (nothing to write or join).
    fn none() -> Column {
        Column {
            path: PathBuf::new(),
            out: None,
            bytes: 0,
        }
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), IoError> {
        self.bytes += bytes.len() as u64;
        let out = self.out.as_mut().expect("a column being written");
        out.write_all(bytes).map_err(|cause| IoError::Write {
            path: self.path.clone(),
            cause,
        })
    }

    fn word(&mut self, v: u64) -> Result<(), IoError> {
        self.put(&v.to_le_bytes())
    }
}

/// A file being written: buffered, hashed as it goes, synced at the end.
pub(super) struct HashedFile {
    path: PathBuf,
    /// The format its header names.
    format: u32,
    out: BufWriter<File>,
    hash: Xxh3,
    bytes: u64,
}

impl HashedFile {
    pub(super) fn create(path: &Path, format: u32) -> Result<HashedFile, IoError> {
        let file = File::create(path).map_err(|cause| IoError::Write {
            path: path.to_path_buf(),
            cause,
        })?;
        Ok(HashedFile {
            path: path.to_path_buf(),
            format,
            out: BufWriter::with_capacity(1 << 20, file),
            hash: Xxh3::new(),
            bytes: 0,
        })
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), IoError> {
        self.hash.update(bytes);
        self.bytes += bytes.len() as u64;
        self.out.write_all(bytes).map_err(|cause| IoError::Write {
            path: self.path.clone(),
            cause,
        })
    }

    fn header(&mut self, kind: u32, count: u64, extra: u64) -> Result<(), IoError> {
        let mut header = [0u8; HEADER_BYTES];
        header[0..8].copy_from_slice(&MAGIC);
        header[8..12].copy_from_slice(&self.format.to_le_bytes());
        header[12..16].copy_from_slice(&kind.to_le_bytes());
        header[16..24].copy_from_slice(&count.to_le_bytes());
        header[24..32].copy_from_slice(&extra.to_le_bytes());
        self.put(&header)
    }

    /// Appends the bytes of `column`, then removes its file.
    fn append(&mut self, column: Column) -> Result<(), IoError> {
        let Some(out) = column.out else {
            return Ok(());
        };
        let failed = |cause| IoError::Write {
            path: column.path.clone(),
            cause,
        };
        let mut file = out.into_inner().map_err(|e| failed(e.into_error()))?;
        drop(file);
        file = File::open(&column.path).map_err(failed)?;
        let mut chunk = vec![0u8; 1 << 20];
        loop {
            let n = file.read(&mut chunk).map_err(failed)?;
            if n == 0 {
                break;
            }
            self.put(&chunk[..n])?;
        }
        drop(file);
        fs::remove_file(&column.path).map_err(failed)
    }

    /// Zero bytes up to the next multiple of 8.
    fn align(&mut self) -> Result<(), IoError> {
        let pad = (8 - (self.bytes % 8) as usize) % 8;
        self.put(&[0u8; 8][..pad])
    }

    fn finish(mut self) -> Result<FileSum, IoError> {
        let err = |cause| IoError::Write {
            path: self.path.clone(),
            cause,
        };
        self.out.flush().map_err(err)?;
        self.out.get_ref().sync_all().map_err(err)?;
        Ok(FileSum {
            name: file_name(&self.path),
            bytes: self.bytes,
            xxh3: format!("{:016x}", self.hash.digest()),
        })
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The size and checksum of the file at `path`, read through a buffer.
fn sum_of_file(path: &Path) -> Result<FileSum, IoError> {
    let failed = |cause| IoError::Open {
        path: path.to_path_buf(),
        cause,
    };
    let mut file = File::open(path).map_err(failed)?;
    let (mut hash, mut bytes) = (Xxh3::new(), 0u64);
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut chunk).map_err(failed)?;
        if n == 0 {
            break;
        }
        hash.update(&chunk[..n]);
        bytes += n as u64;
    }
    Ok(FileSum {
        name: file_name(path),
        bytes,
        xxh3: format!("{:016x}", hash.digest()),
    })
}

/// One document of a new generation. `doc_id` and `cluster_id` are index numbers (the run's
/// numbers shifted by [`super::IndexWriter::file_offset`]); `cluster_id` is `None` for a document
/// in no cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocEntry {
    pub doc_id: u64,
    pub id: Option<String>,
    pub source: String,
    pub url: Option<String>,
    pub simhash: u64,
    pub empty: bool,
    pub cluster_id: Option<i64>,
    /// The content digest (the run's exact-duplicate key: xxh3-128 of the normalized token
    /// stream); `None` when the run did not make one (`--no-exact`, fingerprint tables).
    pub digest: Option<u128>,
    /// The keep rank under the generation's [`super::NewGeneration::keep`] policy (smaller is kept).
    pub rank: Option<u64>,
    /// The document's text bytes, and its capture time (microseconds since the Unix epoch),
    /// where known: what `--keep longest|shortest|newest|oldest` ranks by.
    pub bytes: Option<u64>,
    pub fetched_at: Option<i64>,
    /// A MinHash index's: the document's signature (empty for an empty document, which
    /// gets the all-`u64::MAX` signature of an empty set), and with `--index-shingles` its
    /// shingle set (the feature hashes verification compares; any order, repeats allowed).
    pub signature: Vec<u64>,
    pub shingles: Option<Vec<u64>>,
    /// Whether its run (or batch) removed it (`keep = false`); stored only in a generation
    /// that records its keep decisions ([`super::NewGeneration::decisions`]).
    pub removed: bool,
}

/// A [`DocEntry`] ordered by its doc number alone, for an external sort of documents.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ByDocNumber(pub DocEntry);

impl PartialEq for ByDocNumber {
    fn eq(&self, other: &Self) -> bool {
        self.0.doc_id == other.0.doc_id
    }
}

impl Eq for ByDocNumber {}

impl PartialOrd for ByDocNumber {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByDocNumber {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.doc_id.cmp(&other.0.doc_id)
    }
}

impl SpillRecord for ByDocNumber {
    fn memory_bytes(&self) -> usize {
        let d = &self.0;
        let text = |s: &Option<String>| s.as_ref().map_or(0, String::capacity);
        std::mem::size_of::<Self>()
            + text(&d.id)
            + d.source.capacity()
            + text(&d.url)
            + 8 * d.signature.capacity()
            + d.shingles.as_ref().map_or(0, |s| 8 * s.capacity())
    }
}

/// One row of a generation's `documents.parquet`.
pub struct IndexDocumentRow {
    doc_id: u64,
    id: Option<String>,
    source: String,
    url: Option<String>,
    cluster_id: Option<i64>,
    simhash: u64,
    empty: bool,
}

impl OutputRow for IndexDocumentRow {
    const TABLE: &'static str = "index-documents";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("doc_id", DataType::UInt64, false),
            Field::new("id", DataType::Utf8, true),
            Field::new("source", DataType::Utf8, false),
            Field::new("url", DataType::Utf8, true),
            Field::new("cluster_id", DataType::Int64, true),
            Field::new("simhash", DataType::UInt64, false),
            Field::new("empty", DataType::Boolean, false),
        ]))
    }

    fn to_batch(rows: &[Self]) -> Result<RecordBatch, ArrowError> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(rows.iter().map(|r| r.doc_id).collect::<UInt64Array>()),
            Arc::new(
                rows.iter()
                    .map(|r| r.id.as_deref())
                    .collect::<StringArray>(),
            ),
            Arc::new(
                rows.iter()
                    .map(|r| Some(r.source.as_str()))
                    .collect::<StringArray>(),
            ),
            Arc::new(
                rows.iter()
                    .map(|r| r.url.as_deref())
                    .collect::<StringArray>(),
            ),
            Arc::new(rows.iter().map(|r| r.cluster_id).collect::<Int64Array>()),
            Arc::new(rows.iter().map(|r| r.simhash).collect::<UInt64Array>()),
            Arc::new(rows.iter().map(|r| Some(r.empty)).collect::<BooleanArray>()),
        ];
        RecordBatch::try_new(Self::schema(), columns)
    }
}

/// The metadata of a generation's `documents.parquet`: the index's scheme and parameters.
fn documents_meta(manifest: &Manifest) -> TableMeta {
    let mut index = json!({"k": manifest.k, "tables": manifest.tables});
    if let Some(m) = &manifest.minhash {
        index["minhash"] = json!(m);
    }
    TableMeta {
        scheme: manifest.scheme.clone(),
        params: json!({
            PARAM_FINGERPRINT: manifest.fingerprint,
            "index": index,
        }),
    }
}
