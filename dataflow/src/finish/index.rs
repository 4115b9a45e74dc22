//! `--index DIR`: the run's documents saved as a generation of an index (docs/index.md).
//!
//! The index is created (and locked) before the job, so that a directory it cannot go into,
//! or a run it cannot hold, is refused before the work ([`IndexStep::create`],
//! [`IndexStep::for_tables`]). Process 0 writes the generation once every part is committed
//! and before `_SUCCESS` (`IndexStep::write`, step 4 of [`crate::finish`]): a run with
//! `_SUCCESS` always has its index.
//!
//! What the generation holds is read back from the committed run: the documents and their
//! clusters are spread over every worker's parts (of every process), and process 0 only sees
//! them all together there. What no output table holds (each document's content digest,
//! keep rank, and for a MinHash index its signature and shingle set) comes from the resume
//! parts every worker wrote beside them ([`batch_documents`]).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use neardup_core::{Method, Weighting};
use neardup_io::index::run::{RunDocumentStream, RunDocuments, SortMemory};
use neardup_io::index::{DocEntry, IndexSpec, IndexWriter, Manifest, FILE_SHIFT};
use neardup_io::index::{MinHashParams, VERIFY_ESTIMATE, VERIFY_JACCARD};
use neardup_io::spill::SortStats;

use super::{chain, refused, FinishError, IndexWritten};
use crate::config::{sort_budget, IndexSketches, JobConfig, INDEX_SORT_SHARE};
use crate::stages::fingerprint::resume::{self, kill_at, Sketch, SketchByDoc};

/// Refuses, before any work, a run an index cannot hold (queries must be able to
/// fingerprint text exactly as the run did, and verify candidates as it verified its
/// pairs); returns a MinHash run's index parameters (`None`: a simhash run). `shingles`:
/// `--index-shingles`, the shingle sets kept for exact-Jaccard verification.
pub fn check_indexable(
    config: &JobConfig,
    shingles: bool,
) -> Result<Option<MinHashParams>, FinishError> {
    match &config.scheme.method {
        Method::MinHash { permutations, .. } => {
            let (Some(banding), Some(verify)) = (config.lsh, config.verify) else {
                return Err(refused(
                    "--index of a MinHash run needs its candidates verified (--verify jaccard or minhash): an index verifies a query's candidates as the run verified its pairs",
                ));
            };
            if shingles && verify.estimate {
                return Err(refused(
                    "--index-shingles keeps the shingle sets exact-Jaccard verification compares, but this run verifies by the signatures' estimate (--verify minhash): use --verify jaccard, or leave --index-shingles out",
                ));
            }
            Ok(Some(MinHashParams {
                permutations: *permutations,
                bands: banding.bands,
                rows: banding.rows,
                threshold: verify.min_jaccard,
                verify: if verify.estimate {
                    VERIFY_ESTIMATE
                } else {
                    VERIFY_JACCARD
                }
                .to_string(),
                shingle: verify.shingle,
                shingles,
            }))
        }
        Method::Simhash(Weighting::TfIdf(_)) => Err(refused(
            "--index cannot hold tf-idf fingerprints: their weights come from the corpus, so a query could not be fingerprinted alike; use --weights set or tf",
        )),
        Method::Simhash(_) if shingles => Err(refused(
            "--index-shingles is for MinHash indexes (--scheme minhash or minhash-oph): a simhash index compares fingerprints",
        )),
        Method::Simhash(_) => Ok(None),
    }
}

/// What a MinHash index needs the workers to keep beside the resume parts, which no output
/// table holds: each document's signature (and shingle set). For `--index` (`shingles`:
/// `--index-shingles`) the run's own parameters, refused as [`check_indexable`] refuses
/// them (every process checks so that the index can hold the run); for `--against DIR` the
/// index's. `None`: a simhash run, or no index.
pub fn sketches_to_keep(
    config: &JobConfig,
    index: Option<bool>,
    against: Option<&Path>,
) -> Result<Option<IndexSketches>, FinishError> {
    let minhash = match (index, against) {
        (Some(shingles), _) => check_indexable(config, shingles)?,
        (None, Some(dir)) => Manifest::load(dir)?.minhash,
        (None, None) => None,
    };
    Ok(minhash.map(|m| IndexSketches {
        shingles: m.shingles,
    }))
}

/// The batch as an index names it (the job's [`crate::config::resume::record_id`] in hex):
/// a run of the same job finds it there, and a batch is never added twice (docs/index.md).
pub fn batch_name(config: &JobConfig) -> String {
    format!("{:032x}", crate::config::resume::record_id(config))
}

/// What a run writes to its index before `_SUCCESS` (process 0).
pub struct IndexStep {
    dir: PathBuf,
    writer: Mutex<IndexWriter>,
    what: Documents,
    /// The memory of its sorts ([`step_memory`]).
    memory: SortMemory,
}

/// Where a generation's documents come from.
enum Documents {
    /// `neardup run --index`: the run's documents with what only its resume parts hold,
    /// ranked by `keep`, the generation named `batch`.
    Run {
        minhash: Option<MinHashParams>,
        job: u128,
        keep: String,
        batch: String,
    },
    /// `neardup search --index`: the search over these fingerprint tables (no keep ranks).
    Search { tables: Vec<PathBuf> },
}

impl IndexStep {
    /// `neardup run --index DIR`: creates the index at `dir` for the run `config` (locked
    /// from now on), unless `dir` is an index holding just this run's batch and the output
    /// directory is an unfinished run of this job with every fingerprint committed: its run
    /// was stopped after writing the index and before its `_SUCCESS`, and the index is left
    /// as it is (`None`), so that the run, resumed or run again there, does not write it
    /// twice. An index anywhere else is refused as a new one would be.
    pub fn create(
        dir: &Path,
        config: &JobConfig,
        shingles: bool,
    ) -> Result<Option<IndexStep>, FinishError> {
        use crate::config::resume::{examine, Examined};
        let batch = batch_name(config);
        if let Ok(manifest) = Manifest::load(dir) {
            let holding = matches!(&manifest.generations[..], [only] if only.batch.as_deref() == Some(batch.as_str()));
            if holding && matches!(examine(config), Ok(Examined::Fingerprints { .. })) {
                check_indexable(config, shingles)?;
                return Ok(None);
            }
        }
        let minhash = check_indexable(config, shingles)?;
        let writer = IndexWriter::create(
            dir,
            &IndexSpec {
                scheme: config.scheme.name.as_str().to_string(),
                fingerprint: config.scheme.params(),
                design: config.design.clone(),
                minhash: minhash.clone(),
            },
        )?;
        Ok(Some(IndexStep {
            dir: dir.to_path_buf(),
            writer: Mutex::new(writer),
            memory: step_memory(config),
            what: Documents::Run {
                minhash,
                job: crate::config::resume::record_id(config),
                keep: config.keep.describe(),
                batch,
            },
        }))
    }

    /// `neardup search --index DIR`: creates the index at `dir` for a search over the
    /// fingerprint tables `tables`, with the scheme their metadata names (`unknown` for
    /// tables without it: such an index answers fingerprint queries only).
    pub fn for_tables(
        dir: &Path,
        tables: &[PathBuf],
        config: &JobConfig,
    ) -> Result<IndexStep, FinishError> {
        let design = &config.design;
        use neardup_io::parquet_out::{TableTag, PARAM_FINGERPRINT, UNKNOWN_SCHEME};
        let tag = tables
            .iter()
            .find_map(|path| TableTag::of_file(path).ok().flatten());
        let (scheme, fingerprint) = match tag {
            Some(tag) => (tag.meta.scheme, tag.meta.params[PARAM_FINGERPRINT].clone()),
            None => (UNKNOWN_SCHEME.to_string(), serde_json::Value::Null),
        };
        let writer = IndexWriter::create(
            dir,
            &IndexSpec {
                scheme,
                fingerprint,
                design: design.clone(),
                minhash: None,
            },
        )?;
        Ok(IndexStep {
            dir: dir.to_path_buf(),
            writer: Mutex::new(writer),
            memory: step_memory(config),
            what: Documents::Search {
                tables: tables.to_vec(),
            },
        })
    }

    /// Writes the committed run at `run` (its `_SUCCESS` not written yet) to the index as a
    /// new generation; an error is the run's (it fails, without `_SUCCESS`).
    pub(super) fn write(&self, run: &Path) -> Result<IndexWritten, String> {
        let mut writer = self.writer.lock().expect("the index writer");
        writer.set_memory(self.memory.budget, Some(self.memory.dir.clone()));
        let on_dir = |e: FinishError| format!("--index {}: {}", self.dir.display(), chain(&e));
        let written = match &self.what {
            Documents::Run {
                minhash,
                job,
                keep,
                batch,
            } => {
                let read = batch_documents(run, minhash.as_ref(), *job, &self.memory)
                    .map_err(|e| format!("--index: {}", chain(&e)))?;
                let read_sorts = read.sorted();
                let meta = (&read.fingerprint().clone(), read.files());
                let (documents, tables) = add_documents(
                    &mut writer,
                    run,
                    meta,
                    read,
                    Some(keep.clone()),
                    Some(batch),
                )
                .map_err(on_dir)?;
                kill_at("index");
                (documents, read_sorts, tables)
            }
            Documents::Search { tables } => {
                let read = neardup_io::index::run::search_documents(run, tables, &self.memory)
                    .map_err(|e| on_dir(e.into()))?;
                let read_sorts = read.sorted();
                let meta = (&read.fingerprint.clone(), read.files);
                let docs = read.map(|d| d.map_err(FinishError::from));
                let (documents, tables) =
                    add_documents(&mut writer, run, meta, docs, None, None).map_err(on_dir)?;
                (documents, read_sorts, tables)
            }
        };
        remove_step_dirs(&self.memory);
        let (documents, read, tables) = written;
        Ok(IndexWritten {
            dir: self.dir.clone(),
            documents,
            sorts: vec![
                ("index read".to_string(), read),
                ("index tables".to_string(), tables),
            ],
        })
    }
}

/// The memory of the sorts of `--index` and `--against` (process 0, after the job): a
/// [`INDEX_SORT_SHARE`] of the limit (or the sorts' fixed memory where a test sets it),
/// spilling under the job's spill directory.
pub fn step_memory(config: &JobConfig) -> SortMemory {
    SortMemory {
        budget: config
            .sort_memory
            .unwrap_or_else(|| sort_budget(config.memory_limit, 1, INDEX_SORT_SHARE)),
        dir: crate::stages::near::spill::sort_dir(&config.spill_root(), 0, "index"),
    }
}

/// Removes the directories [`step_memory`]'s sorts were under, once empty (their runs go
/// with the sorts; nothing else is ever removed).
pub fn remove_step_dirs(memory: &SortMemory) {
    for dir in memory.dir.ancestors().take(3) {
        let _ = std::fs::remove_dir(dir);
    }
}

/// The documents of the run at `run`, whose parts are committed and whose `_SUCCESS` is not
/// written yet (a step of [`crate::finish`] before it), in ascending doc number, with what
/// only its resume parts hold: each document's content digest and keep rank, and for a
/// MinHash index (`minhash`) its signature and, where the index keeps them, its shingle
/// set. The resume parts must be those of the job `job`
/// ([`crate::config::resume::record_id`]). The sorts behind it keep `memory`.
pub fn batch_documents(
    run: &Path,
    minhash: Option<&MinHashParams>,
    job: u128,
    memory: &SortMemory,
) -> Result<BatchDocuments, FinishError> {
    let docs = neardup_io::index::run::committed_documents(run, &memory.part(0.5, "documents"))?;
    let extras = resume::document_extras(run, minhash.is_some(), job, &memory.part(0.5, "extras"))
        .map_err(FinishError::Refused)?;
    Ok(BatchDocuments {
        run: run.to_path_buf(),
        minhash: minhash.cloned(),
        docs,
        extras,
    })
}

/// A run's documents with their resume parts' extras ([`batch_documents`]): the two sorted
/// sequences walked side by side.
pub struct BatchDocuments {
    run: PathBuf,
    minhash: Option<MinHashParams>,
    docs: RunDocumentStream,
    extras: resume::DocumentExtras,
}

impl BatchDocuments {
    /// Input files the run numbered.
    pub fn files(&self) -> u64 {
        self.docs.files
    }

    /// The `fingerprint` parameters of its `fingerprints/` table.
    pub fn fingerprint(&self) -> &serde_json::Value {
        &self.docs.fingerprint
    }

    /// What the sorts behind it did, summed.
    pub fn sorted(&self) -> SortStats {
        self.docs.sorted().plus(self.extras.sorted)
    }

    /// Every document, in memory (the simple version; `--against` holds them so).
    pub fn collect(self) -> Result<RunDocuments, FinishError> {
        let mut out = RunDocuments {
            scheme: self.docs.scheme.clone(),
            fingerprint: self.docs.fingerprint.clone(),
            search: self.docs.search.clone(),
            docs: Vec::new(),
            files: self.docs.files,
        };
        for doc in self {
            out.docs.push(doc?);
        }
        Ok(out)
    }

    /// `doc` with its digest, rank and sketch.
    fn complete(&mut self, mut doc: DocEntry) -> Result<DocEntry, FinishError> {
        let spill = |e: std::io::Error| {
            FinishError::Refused(format!(
                "--index: cannot read the sorted resume entries: {e}"
            ))
        };
        let mut entry = false;
        while let Some(key) = self
            .extras
            .keys
            .next_if(|k| k.as_ref().map_or(true, |k| k.0 <= doc.doc_id))
        {
            let (d, digest, rank) = key.map_err(spill)?;
            if d == doc.doc_id {
                doc.digest = (digest != 0).then_some(digest);
                doc.rank = Some(rank);
                entry = true;
            }
        }
        // Every document the run committed has its entry, unless a worker could not write
        // its part (a full disk: the run went on with a warning, as resuming is a
        // convenience). Without it the document's digest and rank would be missing, and
        // the index would hold it unranked and without its exact key.
        if !entry {
            return Err(FinishError::Refused(format!(
                "{}: the resume parts hold no entry of document {}: a worker could not write its part (the run's warnings say why), and --index and --against take each document's content digest and keep rank from them; run again",
                self.run.display(),
                doc.doc_id
            )));
        }
        let Some(m) = &self.minhash else {
            return Ok(doc);
        };
        let mut sketch = Sketch::default();
        if let Some(sketches) = &mut self.extras.sketches {
            while let Some(s) =
                sketches.next_if(|s| s.as_ref().map_or(true, |s| s.0.doc_id <= doc.doc_id))
            {
                let SketchByDoc(s) = s.map_err(spill)?;
                if s.doc_id == doc.doc_id {
                    sketch = s;
                }
            }
        }
        if !doc.empty
            && (sketch.signature.len() != m.permutations
                || (m.shingles && sketch.shingles.is_none()))
        {
            return Err(FinishError::Refused(format!(
                "{}: the resume parts hold no signature{} of document {} (a run resumed from one made without --index or --against?)",
                self.run.display(),
                if m.shingles { " and shingle set" } else { "" },
                doc.doc_id
            )));
        }
        doc.signature = sketch.signature;
        doc.shingles = sketch.shingles.filter(|_| m.shingles);
        Ok(doc)
    }
}

impl Iterator for BatchDocuments {
    type Item = Result<DocEntry, FinishError>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(match self.docs.next()? {
            Ok(doc) => self.complete(doc),
            Err(e) => Err(e.into()),
        })
    }
}

/// Adds a run's documents (`docs`, in the run's numbering and ascending doc number, of its
/// `files` input files and made with the `fingerprint` parameters) to the index as a new
/// generation whose ranks follow `keep`, named `batch` in the manifest, document by
/// document; returns its document count and what the index's table sorts did.
fn add_documents(
    writer: &mut IndexWriter,
    run: &Path,
    (fingerprint, files): (&serde_json::Value, u64),
    docs: impl Iterator<Item = Result<DocEntry, FinishError>>,
    keep: Option<String>,
    batch: Option<&str>,
) -> Result<(u64, SortStats), FinishError> {
    if !fingerprint.is_null() && fingerprint != &writer.manifest().fingerprint {
        return Err(FinishError::Refused(format!(
            "{}: the run's fingerprints were made with other parameters than the index's",
            run.display()
        )));
    }
    let shift = writer.file_offset() << FILE_SHIFT;
    // Every document's decision, from the run's clusters/.
    let mut generation = writer.begin(files, keep, true)?;
    for doc in docs {
        let mut doc = doc?;
        doc.doc_id += shift;
        doc.cluster_id = doc.cluster_id.map(|c| c + shift as i64);
        generation.push(doc)?;
    }
    Ok(generation.commit(std::iter::empty(), std::iter::empty(), batch)?)
}
