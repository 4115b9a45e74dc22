//! Writing an index: creating one, adding a generation, compacting generations into one.
//!
//! Every write follows one protocol (see the module docs of [`crate::index`]): take the lock,
//! write the generation's files into a hidden directory while hashing them, sync, rename the
//! directory into place, then replace the manifest. The manifest is the commit point.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use neardup_core::TableDesign;
use serde_json::Value;

use super::build::{
    sorted_changes, DocEntry, GenerationFiles, GenerationPlan, DEFAULT_WRITE_MEMORY,
};
use super::carry::{changes_of, entry_of, read_origins};
use super::merge::{MergePlan, MergedGeneration};
use super::read::Index;
use super::{
    entries, GenerationEntry, Manifest, MinHashParams, FILE_SHIFT, INDEX_LOCK, MANIFEST, MAX_FILES,
};
use crate::atomic::write_atomically;
use crate::error::IoError;
use crate::lock::DirLock;
use crate::spill::SortStats;

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

/// What a checkpoint of `neardup serve` adds to its index ([`IndexWriter::checkpoint`]):
/// the changes since the last checkpoint, never the documents that did not change.
#[derive(Clone, Debug, Default)]
pub struct Checkpoint {
    /// The documents written since the last checkpoint, in the writer's numbering, within
    /// the files from the index's [`Manifest::files`] up to `files`.
    pub docs: Vec<DocEntry>,
    /// The files numbered after the checkpoint (at least the index's).
    pub files: u64,
    /// `(doc number, cluster)` of earlier documents whose cluster changed (-1: alone now).
    pub cluster_changes: Vec<(u64, i64)>,
    /// `(doc number, was indexed)` of earlier documents deleted (or replaced).
    pub deleted: Vec<(u64, bool)>,
    /// How many of the newest generations the new one replaces, their present documents
    /// taken into it (0: it is added after them); see [`merge_count`].
    pub merge: usize,
}

/// How many of the newest generations `generations` a checkpoint of `written` documents
/// merges ([`Checkpoint::merge`]), `present[i]` being the documents generation `i` still
/// holds (not deleted since: what a merge rewrites; [`Index::present_rows`]): going back
/// from the newest, each while it holds no more documents than the checkpoint and the
/// generations already taken together, and the documents taken from earlier generations
/// stay within `limit`. Sizes then at least double from newest to oldest, so that the service's
/// checkpoints leave a number of generations logarithmic in its writes (each adds a probe a
/// table to every query), each document is rewritten at most about `log2(limit / written)`
/// times, and no merge rewrites more than `limit` documents: never a large index built by
/// `run --index`. A generation whose documents were all replaced since holds none, and goes
/// with the next checkpoint.
pub fn merge_count(
    generations: &[GenerationEntry],
    present: &[u64],
    written: u64,
    limit: u64,
) -> usize {
    let (mut taken, mut carried, mut merge) = (written, 0, 0);
    for (g, &n) in generations.iter().zip(present).rev() {
        if n > taken || carried + n > limit || g.keep_decisions {
            break;
        }
        (taken, carried, merge) = (taken + n, carried + n, merge + 1);
    }
    merge
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
    /// The memory of a generation's table sorts, and where they spill
    /// ([`IndexWriter::set_memory`]).
    budget: usize,
    spill: Option<PathBuf>,
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
            budget: DEFAULT_WRITE_MEMORY,
            spill: None,
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
            budget: DEFAULT_WRITE_MEMORY,
            spill: None,
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

    /// Bounds the memory a new generation's tables are sorted in (default
    /// [`super::DEFAULT_WRITE_MEMORY`]) and says where they spill past it (`None`: beside the
    /// generation, in its hidden directory). Writing a generation holds this, a few column
    /// buffers and a Parquet row group, whatever its size.
    pub fn set_memory(&mut self, budget: usize, spill: Option<PathBuf>) {
        self.budget = budget.max(1);
        self.spill = spill;
    }

    /// Begins a new generation to be written document by document (see
    /// [`GenerationBuilder`]): `files` input files numbered from [`IndexWriter::file_offset`],
    /// ranks following `keep` (`None`: not stored), and with `decisions` its keep decisions
    /// recorded (see [`Generation::decisions`]).
    pub fn begin(
        &mut self,
        files: u64,
        keep: Option<String>,
        decisions: bool,
    ) -> Result<GenerationBuilder<'_>, IoError> {
        let offset = self.manifest.files;
        let end = offset + files;
        if end > MAX_FILES {
            return Err(IoError::IndexFull {
                path: self.dir.clone(),
                files: end,
            });
        }
        let generation = GenerationFiles::create(GenerationPlan {
            dir: &self.dir,
            manifest: &self.manifest,
            number: self.manifest.next_generation,
            file_offset: offset,
            files,
            keep,
            decisions,
            budget: self.budget,
            spill: self.spill.as_deref(),
        })?;
        Ok(GenerationBuilder {
            writer: self,
            generation,
        })
    }

    /// Writes `batch` as a new generation and commits it (see the module docs).
    pub fn add(&mut self, batch: Generation) -> Result<(), IoError> {
        self.add_named(batch, None)
    }

    /// [`IndexWriter::add`], the generation's manifest entry naming the batch it holds
    /// (`name`, see [`super::GenerationEntry::batch`]).
    pub fn add_named(&mut self, mut batch: Generation, name: Option<&str>) -> Result<(), IoError> {
        batch.docs.sort_unstable_by_key(|d| d.doc_id);
        let mut builder = self.begin(batch.files, batch.keep, batch.decisions.is_some())?;
        for doc in batch.docs {
            builder.push(doc)?;
        }
        builder.commit(
            sorted_changes(batch.cluster_changes),
            sorted_changes(batch.decisions.unwrap_or_default()),
            name,
        )?;
        Ok(())
    }

    /// Commits generation `entry` (written) as the next one.
    fn commit_added(&mut self, entry: GenerationEntry) -> Result<(), IoError> {
        let mut next = self.manifest.clone();
        next.documents += entry.documents;
        next.indexed += entry.indexed;
        next.files = entry.file_offset + entry.files;
        next.next_generation = entry.number + 1;
        next.generations.push(entry);
        next.format = next.required_format();
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
        // The documents present: those a later generation deleted are left out.
        let mut docs: Vec<DocEntry> = index.docs().map(|view| entry_of(&view)).collect();
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
        let origins = read_origins(&self.dir, &self.manifest.generations)?;
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

    /// Writes the changes of a checkpoint of `neardup serve` (see [`Checkpoint`]) as a new
    /// generation, which replaces the newest `checkpoint.merge` generations (their present
    /// documents, with their latest clusters, sources and urls, taken into it); the
    /// generations before stay as they are, and are not read. `index` is this index as
    /// opened (read for the merged generations' documents, which are checked against their
    /// checksums first). The replaced generations are removed once the new manifest is in
    /// place. Returns the new generation's number.
    ///
    /// The simple equivalent writes every document present as one generation replacing all
    /// the others (what checkpoints did before), at the cost of the whole index at every
    /// checkpoint; the oracle test compares the index with a model of the documents present.
    pub fn checkpoint(&mut self, index: &Index, checkpoint: Checkpoint) -> Result<u32, IoError> {
        self.checkpoint_merging(index, checkpoint, None)
    }

    /// [`IndexWriter::checkpoint`], committing with it a merged generation written since
    /// the last one ([`super::merge`]) in the place of the generations it merged: the
    /// merged generation is numbered after the checkpoint's, and one manifest names both
    /// (so the index's next generation is then two after the checkpoint's). The
    /// checkpoint's own merge takes none of the generations merged. Refused, with nothing
    /// written, where `merged` no longer fits the index ([`MergedGeneration::fits`]).
    pub fn checkpoint_merging(
        &mut self,
        index: &Index,
        checkpoint: Checkpoint,
        background: Option<MergedGeneration>,
    ) -> Result<u32, IoError> {
        if background.as_ref().is_some_and(|m| !m.fits(&self.manifest)) {
            return Err(invalid(
                &self.dir,
                "the generations a merge took changed since it was planned".into(),
            ));
        }
        let Checkpoint {
            mut docs,
            files,
            cluster_changes,
            deleted,
            merge,
        } = checkpoint;
        let files = files.max(self.manifest.files);
        if files > MAX_FILES {
            return Err(IoError::IndexFull {
                path: self.dir.clone(),
                files,
            });
        }
        let generations = &self.manifest.generations;
        if index.manifest().generations != *generations {
            return Err(invalid(
                &self.dir,
                "the index given is not the index as the writer holds it".into(),
            ));
        }
        // The checkpoint's own merge stops at the generations `merged` replaces.
        let floor = background.as_ref().map_or(0, |m| m.range().end);
        let kept = generations.len() - merge.min(generations.len() - floor);
        let merged = &generations[kept..];
        // The first file of the new generation: documents below it are in generations kept.
        let first_file = merged
            .first()
            .map_or(self.manifest.files, |g| g.file_offset);
        let earlier = |doc: u64| doc >> FILE_SHIFT < first_file;
        self.check_new_files(&docs, files)?;
        // Deletions and cluster changes of documents in the merged generations apply to
        // them; those of earlier documents are recorded (a merged generation's first).
        let (mut changes, mut gone) = changes_of(index, kept..generations.len());
        changes.extend(cluster_changes);
        gone.extend(deleted);
        if !merged.is_empty() {
            index.verify_from(kept)?;
            let origins = read_origins(&self.dir, merged)?;
            docs.extend(merged_documents(index, kept, &changes, &gone, &origins));
        }
        docs.sort_unstable_by_key(|d| d.doc_id);
        if let Some(pair) = docs.windows(2).find(|p| p[0].doc_id == p[1].doc_id) {
            return Err(invalid(
                &self.dir,
                format!("doc number {} is given twice", pair[0].doc_id),
            ));
        }
        let number = self.manifest.next_generation;
        let mut generation = GenerationFiles::create(GenerationPlan {
            dir: &self.dir,
            manifest: &self.manifest,
            number,
            file_offset: first_file,
            files: files - first_file,
            keep: None,
            decisions: false,
            budget: self.budget,
            spill: self.spill.as_deref(),
        })?;
        generation.delete(gone.into_iter().filter(|&(doc, _)| earlier(doc)).collect());
        for doc in docs {
            generation.push(doc)?;
        }
        let changes = changes
            .into_iter()
            .filter(|&(doc, _)| earlier(doc))
            .collect();
        let (entry, _) = generation.finish(sorted_changes(changes), std::iter::empty())?;
        let background = (background.map(|m| (m.range(), m.place(number + 1))))
            .map(|(range, placed)| placed.map(|entry| (range, entry)))
            .transpose()?;
        self.commit_replacing(kept, entry, files, background)?;
        Ok(number)
    }

    /// Commits `entry` (written) in place of the generations from `kept` on, the index's
    /// files then numbered up to `files`; removes the generations replaced once the new
    /// manifest is in place (named as retired in it, for a writer that dies before).
    /// Refuses a checkpoint's document numbered outside the files it adds.
    fn check_new_files(&self, docs: &[DocEntry], files: u64) -> Result<(), IoError> {
        let outside = |d: &&DocEntry| {
            let file = d.doc_id >> FILE_SHIFT;
            file < self.manifest.files || file >= files
        };
        match docs.iter().find(outside) {
            Some(bad) => Err(invalid(
                &self.dir,
                format!(
                    "doc number {} is outside the new files {}..{files}",
                    bad.doc_id, self.manifest.files
                ),
            )),
            None => Ok(()),
        }
    }

    /// With `background`, a merged generation replaces the generations of its range as well
    /// (below `kept`), and the next generation is numbered after it.
    fn commit_replacing(
        &mut self,
        kept: usize,
        entry: GenerationEntry,
        files: u64,
        background: Option<(std::ops::Range<usize>, GenerationEntry)>,
    ) -> Result<(), IoError> {
        let mut next = self.manifest.clone();
        let mut old: Vec<String> = (next.generations.drain(kept..)).map(|g| g.dir).collect();
        next.next_generation = entry.number + 1;
        next.generations.push(entry);
        if let Some((range, merged)) = background {
            next.next_generation = next.next_generation.max(merged.number + 1);
            let replaced = next.generations.splice(range, std::iter::once(merged));
            old.extend(replaced.map(|g| g.dir));
        }
        next.documents = next.generations.iter().map(|g| g.documents).sum();
        next.indexed = next.generations.iter().map(|g| g.indexed).sum();
        next.files = files;
        next.format = next.required_format();
        next.retired.extend(old.iter().cloned());
        self.commit(next)?;
        for dir in old {
            let _ = fs::remove_dir_all(self.dir.join(dir));
        }
        Ok(())
    }

    /// Replaces every generation by one holding `batch` (its documents sorted by doc
    /// number), for [`IndexWriter::compact`]: the generation is
    /// written, the new manifest committed, and only then are the old generations removed.
    /// Returns the new generation's number.
    fn replace_generations(&mut self, batch: Generation) -> Result<u32, IoError> {
        let number = self.manifest.next_generation;
        let files = batch.files;
        let entry = write_generation(self, number, batch, 0)?;
        let old: Vec<String> = self
            .manifest
            .generations
            .iter()
            .map(|g| g.dir.clone())
            .collect();
        let mut next = self.manifest.clone();
        next.documents = entry.documents;
        next.indexed = entry.indexed;
        next.files = files;
        next.next_generation = number + 1;
        next.generations = vec![entry];
        next.format = next.required_format();
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
                || (name.starts_with(&format!(".{}.", super::verified::VERIFIED_FILE))
                    && name.ends_with(".tmp"))
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

/// A new generation being written, document by document in ascending doc number, within
/// the writer's memory ([`IndexWriter::begin`]); nothing is in the index until
/// [`GenerationBuilder::commit`]. Dropped before, it leaves nothing behind.
///
/// ```
/// # use neardup_io::index::{DocEntry, IndexSpec, IndexWriter};
/// let dir = tempfile::tempdir().unwrap();
/// let spec = IndexSpec {
///     scheme: "simhash-doc".into(),
///     fingerprint: serde_json::json!({}),
///     design: neardup_core::TableDesign::manku16(),
///     minhash: None,
/// };
/// let mut writer = IndexWriter::create(&dir.path().join("index"), &spec).unwrap();
/// writer.set_memory(1 << 10, None); // 1 KiB: the tables spill sorted runs
/// let mut generation = writer.begin(1, None, false).unwrap();
/// for n in 0..1000u64 {
///     let doc = DocEntry { doc_id: n, simhash: n.wrapping_mul(0x9e37_79b9_7f4a_7c15), ..Default::default() };
///     generation.push(doc).unwrap();
/// }
/// let (changes, decisions) = (std::iter::empty(), std::iter::empty()); // none changed
/// let (documents, sorted) = generation.commit(changes, decisions, None).unwrap();
/// assert_eq!(documents, 1000);
/// assert!(sorted.spilled_bytes > 0);
/// assert_eq!(writer.manifest().documents, 1000);
/// ```
pub struct GenerationBuilder<'w> {
    writer: &'w mut IndexWriter,
    generation: GenerationFiles,
}

impl GenerationBuilder<'_> {
    /// Adds the next document: doc numbers ascending, in the writer's numbering (the
    /// batch's shifted by [`IndexWriter::file_offset`]), within the generation's files.
    pub fn push(&mut self, doc: DocEntry) -> Result<(), IoError> {
        self.generation.push(doc)
    }

    /// Writes the generation's files with the earlier documents' cluster `changes` and keep
    /// `decisions` (see [`Generation`]; each by doc number, the first of a document
    /// counting: [`sorted_changes`] makes them of a `Vec`), and commits it, its manifest
    /// entry naming the batch `name`; returns its document count and what its table sorts
    /// did.
    pub fn commit(
        self,
        changes: impl Iterator<Item = Result<(u64, i64), IoError>>,
        decisions: impl Iterator<Item = Result<(u64, bool), IoError>>,
        name: Option<&str>,
    ) -> Result<(u64, SortStats), IoError> {
        let (mut entry, sorted) = self.generation.finish(changes, decisions)?;
        entry.batch = name.map(str::to_string);
        let documents = entry.documents;
        self.writer.commit_added(entry)?;
        Ok((documents, sorted))
    }
}

/// The documents present of the generations of `index` from `kept` on, as a checkpoint
/// merging them writes them: with the cluster `changes` give them (-1: alone), without those
/// `gone` deletes, with their `origins` (source and url), and no keep rank or decision (the
/// service's documents have none).
fn merged_documents(
    index: &Index,
    kept: usize,
    changes: &HashMap<u64, i64>,
    gone: &HashMap<u64, bool>,
    origins: &HashMap<u64, (String, Option<String>)>,
) -> Vec<DocEntry> {
    let mut docs = Vec::new();
    for g in kept..index.generations() {
        for row in 0..index.generation_documents(g) as u32 {
            let doc = index.doc_id(g, row);
            if index.is_deleted(doc) || gone.contains_key(&doc) {
                continue;
            }
            let mut entry = entry_of(&index.doc(g, row));
            if let Some(&cluster) = changes.get(&doc) {
                entry.cluster_id = (cluster >= 0).then_some(cluster);
            }
            (entry.rank, entry.removed) = (None, false);
            if let Some((source, url)) = origins.get(&doc) {
                (entry.source, entry.url) = (source.clone(), url.clone());
            }
            docs.push(entry);
        }
    }
    docs
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

/// Writes `batch` (its documents sorted by doc number) as generation `number`, within the
/// writer's memory, into a hidden directory renamed into place; returns its manifest entry.
fn write_generation(
    writer: &IndexWriter,
    number: u32,
    batch: Generation,
    file_offset: u64,
) -> Result<GenerationEntry, IoError> {
    let mut files = GenerationFiles::create(GenerationPlan {
        dir: &writer.dir,
        manifest: &writer.manifest,
        number,
        file_offset,
        files: batch.files,
        keep: batch.keep,
        decisions: batch.decisions.is_some(),
        budget: writer.budget,
        spill: writer.spill.as_deref(),
    })?;
    for doc in batch.docs {
        files.push(doc)?;
    }
    let (entry, _) = files.finish(
        sorted_changes(batch.cluster_changes),
        sorted_changes(batch.decisions.unwrap_or_default()),
    )?;
    Ok(entry)
}

impl IndexWriter {
    /// Plans the merge of the generations `range` (see the module docs); refused where the
    /// range is not one of at least two generations of the index, or holds keep decisions
    /// (whose merge [`IndexWriter::compact`] makes).
    pub fn plan_merge(&self, range: std::ops::Range<usize>) -> Result<MergePlan, IoError> {
        let generations = &self.manifest.generations;
        let invalid = |reason: String| IoError::IndexInput {
            path: self.dir.clone(),
            reason,
        };
        if range.len() < 2 || range.end > generations.len() {
            return Err(invalid(format!(
                "a merge of generations {range:?} of {}",
                generations.len()
            )));
        }
        if let Some(g) = generations[range.clone()].iter().find(|g| g.keep_decisions) {
            return Err(invalid(format!(
                "generation {} records keep decisions: `neardup index compact` merges it",
                g.dir
            )));
        }
        let replaced = generations[range.clone()].to_vec();
        let memory = (self.budget, self.spill.clone());
        Ok(MergePlan::new(self.dir.clone(), range, replaced, memory))
    }
}
