//! Writing an index: creating one, adding a generation, compacting generations into one.
//!
//! Every write follows one protocol (see the module docs of [`crate::index`]): take the lock,
//! write the generation's files into a hidden directory while hashing them, sync, rename the
//! directory into place, then replace the manifest. The manifest is the commit point.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int64Array, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use neardup_core::minhash::Banding;
use neardup_core::query::permutations;
use neardup_core::TableDesign;
use serde_json::{json, Value};
use xxhash_rust::xxh3::Xxh3;

use super::{
    band_file, design_of, entries, generation_dir, table_file, FileSum, GenerationEntry, Manifest,
    MinHashParams, CLUSTERS_FILE, DOCS_FILE, DOCUMENTS_PARQUET, FILE_SHIFT, FLAG_BYTES,
    FLAG_DIGEST, FLAG_EMPTY, FLAG_FETCHED_AT, FLAG_HAS_ID, FLAG_RANK, FLAG_REMOVED, HEADER_BYTES,
    INDEX_LOCK, KEEP_FILE, KIND_BAND, KIND_CLUSTERS, KIND_DOCS, KIND_KEEP, KIND_SHINGLES,
    KIND_SIGNATURES, KIND_TABLE, MAGIC, MANIFEST, MAX_FILES, SHINGLES_FILE, SIGNATURES_FILE,
};
use crate::atomic::{sync_parent, write_atomically};
use crate::error::IoError;
use crate::lock::DirLock;
use crate::parquet_in::TableFile;
use crate::parquet_out::{OutputRow, PartWriter, TableMeta, PARAM_FINGERPRINT};

/// One document of a new generation. `doc_id` and `cluster_id` are index numbers (the run's
/// numbers shifted by [`IndexWriter::file_offset`]); `cluster_id` is `None` for a document
/// in no cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// The keep rank under the generation's [`Generation::keep`] policy (smaller is kept).
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
    /// that records its keep decisions ([`Generation::decisions`]).
    pub removed: bool,
}

/// A batch to add as a generation.
#[derive(Clone, Debug, Default)]
pub struct Generation {
    /// Input files the batch numbered (its doc numbers' file parts are below this).
    pub files: u64,
    /// Its documents, in any order.
    pub docs: Vec<DocEntry>,
    /// `(doc number, new cluster id)` of earlier generations' documents whose cluster the
    /// batch changed (joined or merged).
    pub cluster_changes: Vec<(u64, i64)>,
    /// The keep policy the documents' ranks follow (`None`: their ranks are unknown and not
    /// stored).
    pub keep: Option<String>,
    /// The keep decisions: `Some` when the documents' [`DocEntry::removed`] are those of
    /// the run (or batch) that made them, with `(doc number, kept)` of every earlier
    /// generation's document whose decision the batch changed (in any order; a document
    /// at most once); `None` when they are not known (nothing is recorded, and the index
    /// no longer knows which of its documents are kept: see
    /// [`super::GenerationEntry::keep_decisions`]).
    pub decisions: Option<Vec<(u64, bool)>>,
}

/// What an index is made of, fixed when it is created.
#[derive(Clone, Debug)]
pub struct IndexSpec {
    pub scheme: String,
    /// The `fingerprint` parameters of the run's tables.
    pub fingerprint: Value,
    /// A simhash index's permutation tables (ignored for a MinHash index).
    pub design: TableDesign,
    /// A MinHash index's banding and verification (`None`: a simhash index).
    pub minhash: Option<MinHashParams>,
}

/// The one writer of an index: holds its lock while it lives.
pub struct IndexWriter {
    dir: PathBuf,
    manifest: Manifest,
    _lock: DirLock,
}

impl IndexWriter {
    /// Creates a new index at `dir`, which must not exist or be empty (an index that is there
    /// already is added to with [`IndexWriter::open`], never replaced). Nothing but the lock
    /// is written until the first [`IndexWriter::add`].
    pub fn create(dir: &Path, spec: &IndexSpec) -> Result<IndexWriter, IoError> {
        if dir.join(MANIFEST).exists() {
            return Err(IoError::IndexExists {
                path: dir.to_path_buf(),
            });
        }
        if dir.exists() && !dir.is_dir() {
            return Err(IoError::NotADirectory {
                path: dir.to_path_buf(),
            });
        }
        fs::create_dir_all(dir).map_err(|cause| IoError::Prepare {
            action: "cannot create the index directory",
            path: dir.to_path_buf(),
            cause,
        })?;
        let lock = DirLock::acquire(dir, INDEX_LOCK, "index directory")?;
        // Only what an interrupted writer of ours leaves (the lock, hidden temporaries, a
        // generation the manifest never named) may be there.
        let foreign: Vec<String> = entries(dir)?
            .into_iter()
            .filter(|name| !is_ours(name))
            .collect();
        if !foreign.is_empty() {
            return Err(IoError::NotEmptyIndex {
                path: dir.to_path_buf(),
                entries: foreign,
            });
        }
        if dir.join(MANIFEST).exists() {
            return Err(IoError::IndexExists {
                path: dir.to_path_buf(),
            });
        }
        let (k, tables, masks) = match &spec.minhash {
            Some(_) => (0, MINHASH_TABLES.to_string(), Vec::new()),
            None => (
                spec.design.k(),
                spec.design.name().to_string(),
                spec.design
                    .masks()
                    .iter()
                    .map(|m| format!("{m:016x}"))
                    .collect(),
            ),
        };
        let mut manifest = Manifest {
            format: 0,
            neardup_version: env!("CARGO_PKG_VERSION").to_string(),
            scheme: spec.scheme.clone(),
            fingerprint: spec.fingerprint.clone(),
            k,
            tables,
            masks,
            minhash: spec.minhash.clone(),
            documents: 0,
            indexed: 0,
            files: 0,
            next_generation: 0,
            generations: Vec::new(),
            retired: Vec::new(),
        };
        manifest.format = manifest.write_format();
        let writer = IndexWriter {
            dir: dir.to_path_buf(),
            manifest,
            _lock: lock,
        };
        writer.remove_leftovers()?;
        Ok(writer)
    }

    /// Opens the existing index at `dir` for adding to it: takes the lock (refused while
    /// another writer holds it), reads the manifest, removes what an interrupted writer left.
    pub fn open(dir: &Path) -> Result<IndexWriter, IoError> {
        // The manifest first: a directory that is no index gets no lock file.
        Manifest::load(dir)?;
        let lock = DirLock::acquire(dir, INDEX_LOCK, "index directory")?;
        let manifest = Manifest::load(dir)?;
        super::check_directory(dir, &manifest)?;
        let writer = IndexWriter {
            dir: dir.to_path_buf(),
            manifest,
            _lock: lock,
        };
        writer.remove_leftovers()?;
        Ok(writer)
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file offset the next generation's doc numbers get: its run's doc number `d`
    /// becomes `d + (file_offset << 40)`.
    pub fn file_offset(&self) -> u64 {
        self.manifest.files
    }

    /// Writes `batch` as a new generation and commits it (see the module docs).
    pub fn add(&mut self, batch: Generation) -> Result<(), IoError> {
        self.add_named(batch, None)
    }

    /// [`IndexWriter::add`], the generation's manifest entry naming the batch it holds
    /// (`name`, see [`super::GenerationEntry::batch`]).
    pub fn add_named(&mut self, mut batch: Generation, name: Option<&str>) -> Result<(), IoError> {
        let offset = self.manifest.files;
        let end = offset + batch.files;
        if end > MAX_FILES {
            return Err(IoError::IndexFull {
                path: self.dir.clone(),
                files: end,
            });
        }
        batch.docs.sort_unstable_by_key(|d| d.doc_id);
        for pair in batch.docs.windows(2) {
            if pair[0].doc_id == pair[1].doc_id {
                return Err(invalid(
                    &self.dir,
                    format!("doc number {} is given twice", pair[0].doc_id),
                ));
            }
        }
        if let Some(bad) = batch
            .docs
            .iter()
            .find(|d| !(offset..end).contains(&(d.doc_id >> FILE_SHIFT)))
        {
            return Err(invalid(
                &self.dir,
                format!(
                    "doc number {} is outside the generation's files {offset}..{end}",
                    bad.doc_id
                ),
            ));
        }
        check_sketches(&self.dir, &self.manifest, &batch.docs)?;
        let number = self.manifest.next_generation;
        let mut entry = write_generation(&self.dir, number, &self.manifest, &batch, offset)?;
        entry.batch = name.map(str::to_string);
        let mut next = self.manifest.clone();
        next.format = next.write_format();
        next.documents += entry.documents;
        next.indexed += entry.indexed;
        next.files = end;
        next.next_generation = number + 1;
        next.generations.push(entry);
        self.commit(next)
    }

    /// Replaces every generation by one holding all their documents, with the latest cluster
    /// of each, so that a query probes each table once. Doc numbers and clusters do not
    /// change. The old generations are removed once the new manifest is in place.
    pub fn compact(&mut self) -> Result<(), IoError> {
        if self.manifest.generations.len() <= 1 {
            return Ok(());
        }
        let index = super::read::Index::open(&self.dir, super::read::Verify::Checksums)?;
        let mut docs = Vec::with_capacity(self.manifest.documents as usize);
        for g in 0..index.generations() {
            for row in 0..index.generation_documents(g) {
                let view = index.doc(g, row as u32);
                docs.push(DocEntry {
                    doc_id: view.doc_id,
                    id: view.id.map(str::to_string),
                    source: String::new(),
                    url: None,
                    simhash: view.simhash,
                    empty: view.empty,
                    cluster_id: view.cluster_id,
                    digest: view.digest,
                    rank: view.rank,
                    bytes: view.bytes,
                    fetched_at: view.fetched_at,
                    signature: view.signature.to_vec(),
                    shingles: view.shingles.map(<[u64]>::to_vec),
                    removed: view.kept == Some(false),
                });
            }
        }
        // Ranks stay only when every generation ranked by the same policy.
        let policies: std::collections::BTreeSet<Option<&String>> = self
            .manifest
            .generations
            .iter()
            .map(|g| g.keep.as_ref())
            .collect();
        let keep = match policies.into_iter().collect::<Vec<_>>()[..] {
            [Some(policy)] => Some(policy.clone()),
            _ => {
                for doc in &mut docs {
                    doc.rank = None;
                }
                None
            }
        };
        // Sources and urls live in the Parquet tables only: carried over from there.
        let origins = read_origins(&self.dir, &self.manifest)?;
        for doc in &mut docs {
            if let Some((source, url)) = origins.get(&doc.doc_id) {
                doc.source = source.clone();
                doc.url = url.clone();
            }
        }
        // The latest decision of every document, where every generation recorded them.
        let decided = self.manifest.without_keep_decisions().is_none();
        drop(index);
        docs.sort_unstable_by_key(|d| d.doc_id);
        self.replace_generations(Generation {
            files: self.manifest.files,
            docs,
            cluster_changes: Vec::new(),
            keep,
            decisions: decided.then(Vec::new),
        })?;
        Ok(())
    }

    /// Replaces every generation by one holding exactly `docs`, with the doc numbers and
    /// clusters given, their file numbers below `files`: the checkpoint of a service that
    /// keeps the documents present in memory (`neardup serve`). A document whose `source` is
    /// empty takes its source and url from the generation that held it, if any. The old
    /// generations are removed once the new manifest is in place. Returns the new
    /// generation's number.
    pub fn rewrite(&mut self, mut docs: Vec<DocEntry>, files: u64) -> Result<u32, IoError> {
        let files = files.max(self.manifest.files);
        if files > MAX_FILES {
            return Err(IoError::IndexFull {
                path: self.dir.clone(),
                files,
            });
        }
        docs.sort_unstable_by_key(|d| d.doc_id);
        for pair in docs.windows(2) {
            if pair[0].doc_id == pair[1].doc_id {
                return Err(invalid(
                    &self.dir,
                    format!("doc number {} is given twice", pair[0].doc_id),
                ));
            }
        }
        if let Some(bad) = docs.iter().find(|d| d.doc_id >> FILE_SHIFT >= files) {
            return Err(invalid(
                &self.dir,
                format!("doc number {} is outside the files 0..{files}", bad.doc_id),
            ));
        }
        if docs.iter().any(|d| d.source.is_empty()) {
            let origins = read_origins(&self.dir, &self.manifest)?;
            for doc in docs.iter_mut().filter(|d| d.source.is_empty()) {
                if let Some((source, url)) = origins.get(&doc.doc_id) {
                    doc.source = source.clone();
                    if doc.url.is_none() {
                        doc.url = url.clone();
                    }
                }
            }
        }
        check_sketches(&self.dir, &self.manifest, &docs)?;
        // The service's documents were ranked by no keep policy, and kept by no decision:
        // neither is recorded.
        self.replace_generations(Generation {
            files,
            docs,
            cluster_changes: Vec::new(),
            keep: None,
            decisions: None,
        })
    }

    /// Replaces every generation by one holding `batch` (its documents sorted by doc
    /// number), for [`IndexWriter::compact`] and [`IndexWriter::rewrite`]: the generation is
    /// written, the new manifest committed, and only then are the old generations removed.
    /// Returns the new generation's number.
    fn replace_generations(&mut self, batch: Generation) -> Result<u32, IoError> {
        let number = self.manifest.next_generation;
        let entry = write_generation(&self.dir, number, &self.manifest, &batch, 0)?;
        let old: Vec<String> = self
            .manifest
            .generations
            .iter()
            .map(|g| g.dir.clone())
            .collect();
        let mut next = self.manifest.clone();
        next.format = next.write_format();
        next.documents = entry.documents;
        next.indexed = entry.indexed;
        next.files = batch.files;
        next.next_generation = number + 1;
        next.generations = vec![entry];
        // Named as retired in the manifest that replaces them, so that a writer that dies
        // before removing them leaves them to the next one.
        next.retired.extend(old.iter().cloned());
        self.commit(next)?;
        for dir in old {
            let _ = fs::remove_dir_all(self.dir.join(dir));
        }
        Ok(number)
    }

    /// Commits `next` as the index's manifest. Retired generations already removed are no
    /// longer named.
    fn commit(&mut self, mut next: Manifest) -> Result<(), IoError> {
        next.retired.retain(|name| self.dir.join(name).exists());
        let mut text = serde_json::to_vec_pretty(&next).map_err(|e| IoError::Write {
            path: self.dir.join(MANIFEST),
            cause: std::io::Error::other(e),
        })?;
        text.push(b'\n');
        write_atomically(&self.dir.join(MANIFEST), &text)?;
        self.manifest = next;
        Ok(())
    }

    /// Removes what a writer that died left, and only what is provably a writer's: hidden
    /// temporaries, generations numbered from `next_generation` on (written, never
    /// committed: no manifest ever named them), and the generations the manifest names as
    /// retired (replaced by a compaction or a checkpoint). A generation below
    /// `next_generation` that the manifest neither names nor retires is never removed
    /// ([`super::check_directory`] refuses the index instead).
    fn remove_leftovers(&self) -> Result<(), IoError> {
        let next = self.manifest.next_generation;
        for name in entries(&self.dir)? {
            let uncommitted = super::parse_generation_dir(&name).is_some_and(|n| n >= next);
            let leftover = (name.starts_with(".gen-") && name.ends_with(".tmp"))
                || (name.starts_with(&format!(".{MANIFEST}.")) && name.ends_with(".tmp"))
                || uncommitted
                || self.manifest.retired.contains(&name);
            if leftover {
                let path = self.dir.join(&name);
                // A symbolic link is removed itself, never followed.
                let directory = fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
                let _ = if directory {
                    fs::remove_dir_all(&path)
                } else {
                    fs::remove_file(&path)
                };
            }
        }
        Ok(())
    }
}

/// The `tables` a MinHash index's manifest records (its tables are LSH bands, see
/// [`MinHashParams`]).
pub const MINHASH_TABLES: &str = "lsh";

/// Refuses documents that do not fit a MinHash index: a non-empty one without a signature
/// of the index's length, or without a shingle set where the index holds them.
fn check_sketches(dir: &Path, manifest: &Manifest, docs: &[DocEntry]) -> Result<(), IoError> {
    let Some(m) = &manifest.minhash else {
        return Ok(());
    };
    for d in docs {
        if d.empty && d.signature.is_empty() {
            continue;
        }
        if d.signature.len() != m.permutations {
            return Err(invalid(
                dir,
                format!(
                    "doc number {} has a signature of {} values; the index's have {}",
                    d.doc_id,
                    d.signature.len(),
                    m.permutations
                ),
            ));
        }
        if m.shingles && !d.empty && d.shingles.is_none() {
            return Err(invalid(
                dir,
                format!(
                    "doc number {} has no shingle set; the index holds them",
                    d.doc_id
                ),
            ));
        }
    }
    Ok(())
}

/// Names an index writer may leave behind in a directory that has no manifest yet.
fn is_ours(name: &str) -> bool {
    name == INDEX_LOCK
        || super::parse_generation_dir(name).is_some()
        || (name.starts_with('.') && name.ends_with(".tmp"))
}

fn invalid(dir: &Path, reason: String) -> IoError {
    IoError::IndexInput {
        path: dir.to_path_buf(),
        reason,
    }
}

/// Writes generation `number` (sorted docs) into a hidden directory, renames it into place,
/// and returns its manifest entry.
fn write_generation(
    dir: &Path,
    number: u32,
    manifest: &Manifest,
    batch: &Generation,
    file_offset: u64,
) -> Result<GenerationEntry, IoError> {
    let format = manifest.write_format();
    let name = generation_dir(number);
    let tmp = dir.join(format!(".{name}.tmp"));
    if tmp.exists() {
        fs::remove_dir_all(&tmp).map_err(|cause| IoError::Write {
            path: tmp.clone(),
            cause,
        })?;
    }
    fs::create_dir_all(&tmp).map_err(|cause| IoError::Write {
        path: tmp.clone(),
        cause,
    })?;
    let result = (|| {
        let mut checksums = vec![write_docs(&tmp.join(DOCS_FILE), format, batch)?];
        let indexed: Vec<(u64, u32)> = batch
            .docs
            .iter()
            .enumerate()
            .filter(|(_, d)| !d.empty)
            .map(|(row, d)| (d.simhash, row as u32))
            .collect();
        match &manifest.minhash {
            None => {
                let design = design_of(manifest, &dir.join(MANIFEST))?;
                for (t, permutation) in permutations(&design).iter().enumerate() {
                    let mut entries: Vec<(u64, u32)> = indexed
                        .iter()
                        .map(|&(fp, row)| (permutation.permute(fp), row))
                        .collect();
                    entries.sort_unstable();
                    checksums.push(write_table(
                        &tmp.join(table_file(t)),
                        format,
                        KIND_TABLE,
                        permutation.mask(),
                        &entries,
                    )?);
                }
            }
            Some(m) => checksums.extend(write_minhash(&tmp, format, m, &batch.docs)?),
        }
        let mut changes = batch.cluster_changes.clone();
        changes.sort_unstable();
        changes.dedup_by_key(|c| c.0);
        checksums.push(write_clusters(&tmp.join(CLUSTERS_FILE), format, &changes)?);
        if let Some(decisions) = &batch.decisions {
            let mut decisions = decisions.clone();
            decisions.sort_unstable();
            decisions.dedup_by_key(|c| c.0);
            checksums.push(write_keep(&tmp.join(KEEP_FILE), format, &decisions)?);
        }
        checksums.push(write_documents_parquet(
            &tmp.join(DOCUMENTS_PARQUET),
            manifest,
            &batch.docs,
        )?);
        Ok(GenerationEntry {
            number,
            dir: name.clone(),
            file_offset,
            files: batch.files,
            documents: batch.docs.len() as u64,
            indexed: indexed.len() as u64,
            cluster_changes: changes.len() as u64,
            checksums,
            format,
            keep: batch.keep.clone(),
            batch: None,
            keep_decisions: batch.decisions.is_some(),
        })
    })();
    let entry = match result {
        Ok(entry) => entry,
        Err(e) => {
            let _ = fs::remove_dir_all(&tmp);
            return Err(e);
        }
    };
    let target = dir.join(&name);
    if target.exists() {
        // A generation of this number the manifest never named (see remove_leftovers).
        let _ = fs::remove_dir_all(&target);
    }
    fs::rename(&tmp, &target).map_err(|cause| IoError::Write {
        path: target.clone(),
        cause,
    })?;
    sync_parent(&target);
    Ok(entry)
}

/// A file being written: buffered, hashed as it goes, synced at the end.
struct HashedFile {
    path: PathBuf,
    /// The format its header names.
    format: u32,
    out: BufWriter<File>,
    hash: Xxh3,
    bytes: u64,
}

impl HashedFile {
    fn create(path: &Path, format: u32) -> Result<HashedFile, IoError> {
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

    fn words(&mut self, values: impl Iterator<Item = u64>) -> Result<(), IoError> {
        let mut chunk = Vec::with_capacity(8 * 4096);
        for v in values {
            chunk.extend_from_slice(&v.to_le_bytes());
            if chunk.len() == chunk.capacity() {
                self.put(&chunk)?;
                chunk.clear();
            }
        }
        self.put(&chunk)
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

/// `docs.bin` (format 2, docs/index.md): eight words per document (doc number, simhash,
/// cluster, id end, digest in two words, rank, bytes, capture time), a flags byte each,
/// then the id bytes. A rank is stored only where the generation has a keep policy, the
/// removed flag only where it records its keep decisions.
fn write_docs(path: &Path, format: u32, batch: &Generation) -> Result<FileSum, IoError> {
    let (docs, ranks) = (&batch.docs[..], batch.keep.is_some());
    let decided = batch.decisions.is_some();
    let id_bytes: u64 = docs
        .iter()
        .map(|d| d.id.as_ref().map_or(0, |id| id.len() as u64))
        .sum();
    let mut f = HashedFile::create(path, format)?;
    f.header(KIND_DOCS, docs.len() as u64, id_bytes)?;
    f.words(docs.iter().map(|d| d.doc_id))?;
    f.words(docs.iter().map(|d| d.simhash))?;
    f.words(docs.iter().map(|d| d.cluster_id.unwrap_or(-1) as u64))?;
    let mut end = 0u64;
    f.words(docs.iter().map(|d| {
        end += d.id.as_ref().map_or(0, |id| id.len() as u64);
        end
    }))?;
    // The digest as a little-endian u128: its low word first.
    f.words(docs.iter().flat_map(|d| {
        let digest = d.digest.unwrap_or(0);
        [digest as u64, (digest >> 64) as u64]
    }))?;
    let rank = |d: &DocEntry| d.rank.filter(|_| ranks);
    f.words(docs.iter().map(|d| rank(d).unwrap_or(u64::MAX)))?;
    f.words(docs.iter().map(|d| d.bytes.unwrap_or(0)))?;
    f.words(docs.iter().map(|d| d.fetched_at.unwrap_or(i64::MIN) as u64))?;
    let flag = |on: bool, bit: u8| if on { bit } else { 0 };
    let flags: Vec<u8> = docs
        .iter()
        .map(|d| {
            flag(d.id.is_some(), FLAG_HAS_ID)
                | flag(d.empty, FLAG_EMPTY)
                | flag(d.digest.is_some(), FLAG_DIGEST)
                | flag(rank(d).is_some(), FLAG_RANK)
                | flag(d.bytes.is_some(), FLAG_BYTES)
                | flag(d.fetched_at.is_some(), FLAG_FETCHED_AT)
                | flag(decided && d.removed, FLAG_REMOVED)
        })
        .collect();
    f.put(&flags)?;
    f.align()?;
    for d in docs {
        if let Some(id) = &d.id {
            f.put(id.as_bytes())?;
        }
    }
    f.finish()
}

/// A sorted table of `(key, row)` entries: a simhash index's permutation table (`extra`:
/// its mask) or a MinHash index's band table (`extra`: the band number).
fn write_table(
    path: &Path,
    format: u32,
    kind: u32,
    extra: u64,
    entries: &[(u64, u32)],
) -> Result<FileSum, IoError> {
    let mut f = HashedFile::create(path, format)?;
    f.header(kind, entries.len() as u64, extra)?;
    f.words(entries.iter().map(|e| e.0))?;
    let mut rows = Vec::with_capacity(4 * 8192);
    for chunk in entries.chunks(8192) {
        rows.clear();
        for e in chunk {
            rows.extend_from_slice(&e.1.to_le_bytes());
        }
        f.put(&rows)?;
    }
    f.align()?;
    f.finish()
}

/// A MinHash generation's files beside `docs.bin`: one band table per band (the key of the
/// band of every non-empty document and its row, sorted), `signatures.bin` and, where the
/// index holds them, `shingles.bin` (docs/index.md).
fn write_minhash(
    tmp: &Path,
    format: u32,
    m: &MinHashParams,
    docs: &[DocEntry],
) -> Result<Vec<FileSum>, IoError> {
    let banding = Banding {
        bands: m.bands,
        rows: m.rows,
    };
    let mut tables: Vec<Vec<(u64, u32)>> = vec![Vec::new(); m.bands];
    for (row, d) in docs.iter().enumerate().filter(|(_, d)| !d.empty) {
        for (band, key) in banding.band_keys(&d.signature).enumerate() {
            tables[band].push((key, row as u32));
        }
    }
    let mut sums = Vec::with_capacity(m.bands + 2);
    for (band, mut entries) in tables.into_iter().enumerate() {
        entries.sort_unstable();
        sums.push(write_table(
            &tmp.join(band_file(band)),
            format,
            KIND_BAND,
            band as u64,
            &entries,
        )?);
    }
    let mut f = HashedFile::create(&tmp.join(SIGNATURES_FILE), format)?;
    f.header(KIND_SIGNATURES, docs.len() as u64, m.permutations as u64)?;
    let empty = vec![u64::MAX; m.permutations];
    for d in docs {
        let signature = if d.signature.is_empty() {
            &empty
        } else {
            &d.signature
        };
        f.words(signature.iter().copied())?;
    }
    sums.push(f.finish()?);
    if m.shingles {
        let sets: Vec<Vec<u64>> = docs
            .iter()
            .map(|d| {
                let mut set = d.shingles.clone().unwrap_or_default();
                set.sort_unstable();
                set.dedup();
                set
            })
            .collect();
        let total: u64 = sets.iter().map(|s| s.len() as u64).sum();
        let mut f = HashedFile::create(&tmp.join(SHINGLES_FILE), format)?;
        f.header(KIND_SHINGLES, docs.len() as u64, total)?;
        let mut end = 0u64;
        f.words(sets.iter().map(|s| {
            end += s.len() as u64;
            end
        }))?;
        for set in &sets {
            f.words(set.iter().copied())?;
        }
        sums.push(f.finish()?);
    }
    Ok(sums)
}

fn write_clusters(path: &Path, format: u32, changes: &[(u64, i64)]) -> Result<FileSum, IoError> {
    let mut f = HashedFile::create(path, format)?;
    f.header(KIND_CLUSTERS, changes.len() as u64, 0)?;
    f.words(changes.iter().map(|c| c.0))?;
    f.words(changes.iter().map(|c| c.1 as u64))?;
    f.finish()
}

/// `keep.bin` (docs/index.md): the doc numbers whose keep decision the generation changed,
/// sorted, then each one's new decision (1: kept, 0: removed).
fn write_keep(path: &Path, format: u32, decisions: &[(u64, bool)]) -> Result<FileSum, IoError> {
    let mut f = HashedFile::create(path, format)?;
    f.header(KIND_KEEP, decisions.len() as u64, 0)?;
    f.words(decisions.iter().map(|c| c.0))?;
    f.words(decisions.iter().map(|c| u64::from(c.1)))?;
    f.finish()
}

/// One row of a generation's `documents.parquet`.
pub struct IndexDocumentRow<'a>(&'a DocEntry);

impl OutputRow for IndexDocumentRow<'_> {
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
            Arc::new(rows.iter().map(|r| r.0.doc_id).collect::<UInt64Array>()),
            Arc::new(
                rows.iter()
                    .map(|r| r.0.id.as_deref())
                    .collect::<StringArray>(),
            ),
            Arc::new(
                rows.iter()
                    .map(|r| Some(r.0.source.as_str()))
                    .collect::<StringArray>(),
            ),
            Arc::new(
                rows.iter()
                    .map(|r| r.0.url.as_deref())
                    .collect::<StringArray>(),
            ),
            Arc::new(rows.iter().map(|r| r.0.cluster_id).collect::<Int64Array>()),
            Arc::new(rows.iter().map(|r| r.0.simhash).collect::<UInt64Array>()),
            Arc::new(
                rows.iter()
                    .map(|r| Some(r.0.empty))
                    .collect::<BooleanArray>(),
            ),
        ];
        RecordBatch::try_new(Self::schema(), columns)
    }
}

fn write_documents_parquet(
    path: &Path,
    manifest: &Manifest,
    docs: &[DocEntry],
) -> Result<FileSum, IoError> {
    let mut index = json!({"k": manifest.k, "tables": manifest.tables});
    if let Some(m) = &manifest.minhash {
        index["minhash"] = json!(m);
    }
    let meta = TableMeta {
        scheme: manifest.scheme.clone(),
        params: json!({
            PARAM_FINGERPRINT: manifest.fingerprint,
            "index": index,
        }),
    };
    let mut writer = PartWriter::<IndexDocumentRow>::create_file(path, &meta)?;
    for doc in docs {
        writer.push(IndexDocumentRow(doc))?;
    }
    writer.commit()?;
    let bytes = fs::read(path).map_err(|cause| IoError::Open {
        path: path.to_path_buf(),
        cause,
    })?;
    Ok(FileSum {
        name: file_name(path),
        bytes: bytes.len() as u64,
        xxh3: format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes)),
    })
}

/// Opens file `name` of generation `g` after checking it against the manifest's size and
/// checksum (a generation is only ever rewritten from data that verified).
fn open_verified(dir: &Path, g: &GenerationEntry, name: &str) -> Result<File, IoError> {
    use std::io::{Read, Seek};
    let path = super::generation_file(dir, g, name);
    let open = |cause| IoError::Open {
        path: path.clone(),
        cause,
    };
    if !fs::symlink_metadata(&path).map_err(open)?.is_file() {
        return Err(super::corrupt(
            &path,
            "not a file inside the index (a symbolic link or a directory)".into(),
        ));
    }
    let mut file = File::open(&path).map_err(open)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(open)?;
    let found = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes));
    match g.checksums.iter().find(|s| s.name == name) {
        Some(sum) if sum.bytes == bytes.len() as u64 && sum.xxh3 == found => {}
        Some(sum) => {
            return Err(super::corrupt(
                &path,
                format!(
                    "{} bytes of checksum {found}, the manifest says {} bytes of checksum {}",
                    bytes.len(),
                    sum.bytes,
                    sum.xxh3
                ),
            ))
        }
        None => {
            return Err(super::corrupt(
                &dir.join(MANIFEST),
                format!("no checksum of {}/{name}", g.dir),
            ))
        }
    }
    file.rewind().map_err(open)?;
    Ok(file)
}

/// doc number -> (source, url), from every generation's `documents.parquet`.
fn read_origins(
    dir: &Path,
    manifest: &Manifest,
) -> Result<std::collections::HashMap<u64, (String, Option<String>)>, IoError> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::UInt64Type;
    let mut out = std::collections::HashMap::new();
    for g in &manifest.generations {
        let path = super::generation_file(dir, g, DOCUMENTS_PARQUET);
        let file = open_verified(dir, g, DOCUMENTS_PARQUET)?;
        TableFile::of_file(&path, file)?.for_each_batch(|batch| {
            let bad = || IoError::BadTable {
                path: path.clone(),
                reason: "not an index documents table".into(),
            };
            let docs = batch
                .column_by_name("doc_id")
                .and_then(|c| c.as_primitive_opt::<UInt64Type>())
                .ok_or_else(bad)?;
            let sources = batch
                .column_by_name("source")
                .and_then(|c| c.as_string_opt::<i32>())
                .ok_or_else(bad)?;
            let urls = batch
                .column_by_name("url")
                .and_then(|c| c.as_string_opt::<i32>())
                .ok_or_else(bad)?;
            for i in 0..batch.num_rows() {
                out.insert(
                    docs.value(i),
                    (
                        sources.value(i).to_string(),
                        urls.is_valid(i).then(|| urls.value(i).to_string()),
                    ),
                );
            }
            Ok(())
        })?;
    }
    Ok(out)
}
