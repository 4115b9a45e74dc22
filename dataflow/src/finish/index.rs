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

use neardup_core::{Method, TableDesign, Weighting};
use neardup_io::index::run::RunDocuments;
use neardup_io::index::{IndexSpec, IndexWriter, Manifest, NewGeneration, FILE_SHIFT};
use neardup_io::index::{MinHashParams, VERIFY_ESTIMATE, VERIFY_JACCARD};

use super::{chain, refused, FinishError, IndexWritten};
use crate::config::{IndexSketches, JobConfig};
use crate::stages::fingerprint::resume::{self, kill_at};

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
        design: &TableDesign,
    ) -> Result<IndexStep, FinishError> {
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
            what: Documents::Search {
                tables: tables.to_vec(),
            },
        })
    }

    /// Writes the committed run at `run` (its `_SUCCESS` not written yet) to the index as a
    /// new generation; an error is the run's (it fails, without `_SUCCESS`).
    pub(super) fn write(&self, run: &Path) -> Result<IndexWritten, String> {
        let mut writer = self.writer.lock().expect("the index writer");
        let on_dir = |e: FinishError| format!("--index {}: {}", self.dir.display(), chain(&e));
        let documents = match &self.what {
            Documents::Run {
                minhash,
                job,
                keep,
                batch,
            } => {
                let read = batch_documents(run, minhash.as_ref(), *job)
                    .map_err(|e| format!("--index: {}", chain(&e)))?;
                let documents =
                    add_documents(&mut writer, run, read, Some(keep.clone()), Some(batch))
                        .map_err(on_dir)?;
                kill_at("index");
                documents
            }
            Documents::Search { tables } => {
                let read = neardup_io::index::run::read_search_documents(run, tables)
                    .map_err(|e| on_dir(e.into()))?;
                add_documents(&mut writer, run, read, None, None).map_err(on_dir)?
            }
        };
        Ok(IndexWritten {
            dir: self.dir.clone(),
            documents,
        })
    }
}

/// The documents of the run at `run`, whose parts are committed and whose `_SUCCESS` is not
/// written yet (a step of [`crate::finish`] before it), with what only its resume parts
/// hold: each document's content digest and keep rank, and for a MinHash index (`minhash`)
/// its signature and, where the index keeps them, its shingle set. The resume parts must be
/// those of the job `job` ([`crate::config::resume::record_id`]).
pub fn batch_documents(
    run: &Path,
    minhash: Option<&MinHashParams>,
    job: u128,
) -> Result<RunDocuments, FinishError> {
    let mut read = neardup_io::index::run::read_committed_parts(run)?;
    let mut extras =
        resume::document_extras(run, minhash.is_some(), job).map_err(FinishError::Refused)?;
    for doc in &mut read.docs {
        if let Some(&(digest, rank)) = extras.keys.get(&doc.doc_id) {
            doc.digest = (digest != 0).then_some(digest);
            doc.rank = Some(rank);
        }
    }
    if let Some(m) = minhash {
        for doc in &mut read.docs {
            let sketch = extras.sketches.remove(&doc.doc_id).unwrap_or_default();
            if !doc.empty
                && (sketch.signature.len() != m.permutations
                    || (m.shingles && sketch.shingles.is_none()))
            {
                return Err(FinishError::Refused(format!(
                    "{}: the resume parts hold no signature{} of document {} (a run resumed from one made without --index or --against?)",
                    run.display(),
                    if m.shingles { " and shingle set" } else { "" },
                    doc.doc_id
                )));
            }
            doc.signature = sketch.signature;
            doc.shingles = sketch.shingles.filter(|_| m.shingles);
        }
    }
    Ok(read)
}

/// Adds a run's documents (`read`, in the run's numbering) to the index as a new
/// generation whose ranks follow `keep`, named `batch` in the manifest; returns its
/// document count.
fn add_documents(
    writer: &mut IndexWriter,
    run: &Path,
    read: RunDocuments,
    keep: Option<String>,
    batch: Option<&str>,
) -> Result<u64, FinishError> {
    if !read.fingerprint.is_null() && read.fingerprint != writer.manifest().fingerprint {
        return Err(FinishError::Refused(format!(
            "{}: the run's fingerprints were made with other parameters than the index's",
            run.display()
        )));
    }
    let shift = writer.file_offset() << FILE_SHIFT;
    let mut docs = read.docs;
    for doc in &mut docs {
        doc.doc_id += shift;
        doc.cluster_id = doc.cluster_id.map(|c| c + shift as i64);
    }
    let n = docs.len() as u64;
    let generation = NewGeneration {
        files: read.files,
        docs,
        cluster_changes: Vec::new(),
        keep,
        // Every document's decision, from the run's clusters/.
        decisions: Some(Vec::new()),
    };
    writer.add_named(generation, batch)?;
    Ok(n)
}
