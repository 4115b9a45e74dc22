//! A finished run read back as a generation of an index: its documents (`fingerprints/`),
//! their clusters (`clusters/`), and what made them (the tables' metadata).
//!
//! The index is built from the committed run directory, after the job, by one process: the
//! run's tables are the same whatever the number of workers (each document once, numbered by
//! its file and record), and the index sorts everything it writes, so its content does not
//! depend on the parallelism either.

use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, TimestampMicrosecondType, UInt64Type};
use serde_json::Value;

use super::build::{ByDocNumber, DocEntry};
use super::FILE_SHIFT;
use crate::error::IoError;
use crate::parquet_in::{u64_column, TableFile};
use crate::parquet_out::{TableTag, PARAM_FINGERPRINT, PARAM_SEARCH};
use crate::run_dir::{committed_parts, RunDir, Table};
use crate::spill::{ExternalSort, Merged, SortStats, SpillRecord};

/// What an index needs of a run.
#[derive(Debug, Default)]
pub struct RunDocuments {
    /// The scheme and `fingerprint` parameters of its `fingerprints/` table.
    pub scheme: String,
    pub fingerprint: Value,
    /// The `search` parameters of its `clusters/` table (k, tables, ...).
    pub search: Value,
    /// Every document, with the run's doc numbers, cluster ids and keep decisions (a
    /// document in no cluster is kept), sorted by doc number.
    pub docs: Vec<DocEntry>,
    /// Input files the run numbered (one more than the largest file number seen).
    pub files: u64,
}

/// Where the sorts of a run's documents keep their records: `budget` bytes in memory, the
/// rest in sorted runs under `dir` (removed as they are merged).
#[derive(Clone, Debug)]
pub struct SortMemory {
    pub budget: usize,
    pub dir: PathBuf,
}

impl SortMemory {
    /// No bound: everything in memory (the simple version), `dir` never written.
    pub fn unbounded(dir: &Path) -> SortMemory {
        SortMemory {
            budget: usize::MAX,
            dir: dir.to_path_buf(),
        }
    }

    /// `share` of the budget, its runs in `dir/name`.
    pub fn part(&self, share: f64, name: &str) -> SortMemory {
        SortMemory {
            dir: self.dir.join(name),
            ..self.share(share)
        }
    }

    /// `share` of the budget, its runs in the same `dir` (for sorts that remove their own
    /// directory, so that nothing is left between them and `dir`).
    pub fn share(&self, share: f64) -> SortMemory {
        SortMemory {
            budget: match self.budget {
                usize::MAX => usize::MAX,
                b => ((b as f64 * share) as usize).max(1),
            },
            dir: self.dir.clone(),
        }
    }

    pub fn sort<T: SpillRecord>(&self) -> ExternalSort<T> {
        ExternalSort::new(self.dir.clone(), self.budget)
    }
}

/// The documents of a `neardup search` over the fingerprint tables `fingerprints`, whose run
/// at `dir` has committed its parts and not yet written `_SUCCESS` (a step that runs before
/// it; see `neardup_dataflow::finish`): `doc_id` and `simhash` are needed;
/// `id`, `source`, `url` and `empty` are read where the tables have them.
pub fn read_search_documents(
    dir: &Path,
    fingerprints: &[PathBuf],
) -> Result<RunDocuments, IoError> {
    collect(search_documents(
        dir,
        fingerprints,
        &SortMemory::unbounded(dir),
    )?)
}

/// The documents of a run from its own `fingerprints/` table, its parts committed and its
/// `_SUCCESS` not written yet (a step that runs before it; see `neardup_dataflow::finish`).
pub fn read_committed_parts(dir: &Path) -> Result<RunDocuments, IoError> {
    collect(committed_documents(dir, &SortMemory::unbounded(dir))?)
}

/// [`read_search_documents`] as a stream within `memory` (see [`RunDocumentStream`]).
pub fn search_documents(
    dir: &Path,
    fingerprints: &[PathBuf],
    memory: &SortMemory,
) -> Result<RunDocumentStream, IoError> {
    RunDocumentStream::open(dir, fingerprints, memory)
}

/// [`read_committed_parts`] as a stream within `memory` (see [`RunDocumentStream`]).
pub fn committed_documents(dir: &Path, memory: &SortMemory) -> Result<RunDocumentStream, IoError> {
    let parts = committed_parts(&RunDir::new(dir).table(Table::Fingerprints))?;
    RunDocumentStream::open(dir, &parts, memory)
}

fn collect(stream: RunDocumentStream) -> Result<RunDocuments, IoError> {
    let mut out = RunDocuments {
        scheme: stream.scheme.clone(),
        fingerprint: stream.fingerprint.clone(),
        search: stream.search.clone(),
        docs: Vec::new(),
        files: stream.files,
    };
    for doc in stream {
        out.docs.push(doc?);
    }
    Ok(out)
}

/// A run's documents in ascending doc number, each with its cluster and keep decision, read
/// within a memory budget.
///
/// The simple version gathers every clustered document's cluster in a map, then every
/// document in a `Vec`, sorted. This one puts each part's documents through an external
/// sort by doc number, and the clusters' rows through another, and walks the two merged
/// sequences side by side: what it holds is the sorts' budget and their runs' read buffers.
pub struct RunDocumentStream {
    /// The scheme and `fingerprint` parameters of its `fingerprints/` table.
    pub scheme: String,
    pub fingerprint: Value,
    /// The `search` parameters of its `clusters/` table (k, tables, ...).
    pub search: Value,
    /// Input files the run numbered (one more than the largest file number seen).
    pub files: u64,
    docs: Merged<ByDocNumber>,
    /// `(doc, cluster, kept)` of every clustered document, ascending.
    clusters: std::iter::Peekable<Merged<(u64, u64, u64)>>,
    sorted: SortStats,
    spill: PathBuf,
}

impl RunDocumentStream {
    fn open(
        dir: &Path,
        fingerprints: &[PathBuf],
        memory: &SortMemory,
    ) -> Result<RunDocumentStream, IoError> {
        let run = RunDir::new(dir);
        let clusters_memory = memory.part(0.2, "clusters");
        let docs_memory = memory.part(0.8, "documents");
        let spilled = |memory: &SortMemory| {
            let dir = memory.dir.clone();
            move |cause| IoError::Write { path: dir, cause }
        };
        let mut search = Value::Null;
        let mut clusters = clusters_memory.sort::<(u64, u64, u64)>();
        for path in committed_parts(&run.table(Table::Clusters))? {
            each_batch(&path, "clusters", |tag, b| {
                if let Some(tag) = tag {
                    search = tag.meta.params[PARAM_SEARCH].clone();
                }
                let docs = column_u64(b, "doc_id", &path)?;
                let ids = b
                    .column_by_name("cluster_id")
                    .and_then(|c| c.as_primitive_opt::<Int64Type>())
                    .ok_or_else(|| bad(&path, "no Int64 column \"cluster_id\""))?;
                let keep = b
                    .column_by_name("keep")
                    .and_then(|c| c.as_boolean_opt())
                    .ok_or_else(|| bad(&path, "no Boolean column \"keep\""))?;
                for i in 0..b.num_rows() {
                    if ids.value(i) >= 0 {
                        let row = (docs.value(i), ids.value(i) as u64, u64::from(keep.value(i)));
                        clusters.push(row).map_err(spilled(&clusters_memory))?;
                    }
                }
                Ok(())
            })?;
        }
        let sorted = clusters.stats();
        let clusters = clusters.finish().map_err(spilled(&clusters_memory))?;
        let (mut scheme, mut fingerprint, mut files) = (String::new(), Value::Null, 0);
        let mut docs = docs_memory.sort::<ByDocNumber>();
        for path in fingerprints {
            let path = path.clone();
            each_batch(&path, "fingerprints", |tag, b| {
                if let Some(tag) = tag {
                    scheme = tag.meta.scheme.clone();
                    fingerprint = tag.meta.params[PARAM_FINGERPRINT].clone();
                }
                for doc in fingerprint_rows(&path, b)? {
                    files = files.max((doc.doc_id >> FILE_SHIFT) + 1);
                    docs.push(ByDocNumber(doc)).map_err(spilled(&docs_memory))?;
                }
                Ok(())
            })?;
        }
        let sorted = sorted.plus(docs.stats());
        Ok(RunDocumentStream {
            scheme,
            fingerprint,
            search,
            files,
            docs: docs.finish().map_err(spilled(&docs_memory))?,
            clusters: clusters.peekable(),
            sorted,
            spill: memory.dir.clone(),
        })
    }

    /// What the sorts did (their records, runs and spilled bytes, summed).
    pub fn sorted(&self) -> SortStats {
        self.sorted
    }
}

impl Iterator for RunDocumentStream {
    type Item = Result<DocEntry, IoError>;

    fn next(&mut self) -> Option<Self::Item> {
        let failed = |cause| IoError::Write {
            path: self.spill.clone(),
            cause,
        };
        let mut doc = match self.docs.next()? {
            Ok(ByDocNumber(doc)) => doc,
            Err(e) => return Some(Err(failed(e))),
        };
        loop {
            match self.clusters.peek() {
                Some(Ok((d, _, _))) if *d < doc.doc_id => {}
                Some(Ok((d, cluster, kept))) if *d == doc.doc_id => {
                    doc.cluster_id = Some(*cluster as i64);
                    doc.removed = *kept == 0;
                }
                Some(Err(_)) => {
                    let Some(Err(e)) = self.clusters.next() else {
                        unreachable!("peeked an error")
                    };
                    return Some(Err(failed(e)));
                }
                _ => break,
            }
            self.clusters.next();
        }
        Some(Ok(doc))
    }
}

/// The documents of one batch of a `fingerprints` part at `path` (no cluster yet).
fn fingerprint_rows(path: &Path, b: &RecordBatch) -> Result<Vec<DocEntry>, IoError> {
    let docs = column_u64(b, "doc_id", path)?;
    let simhashes = column_u64(b, "simhash", path)?;
    let string = |name: &str| {
        b.column_by_name(name)
            .and_then(|c| c.as_string_opt::<i32>())
    };
    let text = |column: Option<&arrow::array::StringArray>, i: usize| {
        column.and_then(|c| c.is_valid(i).then(|| c.value(i).to_string()))
    };
    let (ids, sources, urls) = (string("id"), string("source"), string("url"));
    let empty = b.column_by_name("empty").and_then(|c| c.as_boolean_opt());
    let sizes = b
        .column_by_name("bytes")
        .and_then(|c| c.as_primitive_opt::<UInt64Type>());
    let times = b
        .column_by_name("fetched_at")
        .and_then(|c| c.as_primitive_opt::<TimestampMicrosecondType>());
    let source = path.display().to_string();
    Ok((0..b.num_rows())
        .map(|i| DocEntry {
            doc_id: docs.value(i),
            id: text(ids, i),
            source: text(sources, i).unwrap_or_else(|| source.clone()),
            url: text(urls, i),
            simhash: simhashes.value(i),
            empty: empty.is_some_and(|e| e.value(i)),
            bytes: sizes.and_then(|c| c.is_valid(i).then(|| c.value(i))),
            fetched_at: times.and_then(|c| c.is_valid(i).then(|| c.value(i))),
            ..Default::default()
        })
        .collect())
}

fn bad(path: &Path, reason: &str) -> IoError {
    IoError::BadTable {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// The UInt64 column `name` of a batch of the part at `path`.
fn column_u64<'a>(
    b: &'a RecordBatch,
    name: &str,
    path: &Path,
) -> Result<&'a arrow::array::UInt64Array, IoError> {
    u64_column(b, name, path, |name| format!("no UInt64 column {name:?}"))
}

/// Calls `f` with each batch of the part at `path`, and its tag (checked to be `table`).
fn each_batch(
    path: &Path,
    table: &'static str,
    mut f: impl FnMut(Option<&TableTag>, &RecordBatch) -> Result<(), IoError>,
) -> Result<(), IoError> {
    let file = TableFile::open(path)?;
    let tag = file.tag()?;
    if let Some(tag) = &tag {
        tag.expect_table(path, table)?;
    }
    file.for_each_batch(|batch| f(tag.as_ref(), batch))
}
