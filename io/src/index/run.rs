//! A finished run read back as a generation of an index: its documents (`fingerprints/`),
//! their clusters (`clusters/`), and what made them (the tables' metadata).
//!
//! The index is built from the committed run directory, after the job, by one process: the
//! run's tables are the same whatever the number of workers (each document once, numbered by
//! its file and record), and the index sorts everything it writes, so its content does not
//! depend on the parallelism either.

use std::collections::HashMap;
use std::path::Path;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, TimestampMicrosecondType, UInt64Type};
use serde_json::Value;

use super::write::DocEntry;
use super::FILE_SHIFT;
use crate::error::IoError;
use crate::parquet_in::{u64_column, TableFile};
use crate::parquet_out::{TableTag, PARAM_FINGERPRINT, PARAM_SEARCH};
use crate::run_dir::{committed_parts, RunDir, Table};

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

/// The documents of a `neardup search` over the fingerprint tables `fingerprints`, whose run
/// at `dir` has committed its parts and not yet written `_SUCCESS` (a step that runs before
/// it; see `neardup_dataflow::finish`): `doc_id` and `simhash` are needed;
/// `id`, `source`, `url` and `empty` are read where the tables have them.
pub fn read_search_documents(
    dir: &Path,
    fingerprints: &[std::path::PathBuf],
) -> Result<RunDocuments, IoError> {
    read_parts(dir, fingerprints)
}

/// The documents of a run from its own `fingerprints/` table, its parts committed and its
/// `_SUCCESS` not written yet (a step that runs before it; see `neardup_dataflow::finish`).
pub fn read_committed_parts(dir: &Path) -> Result<RunDocuments, IoError> {
    let parts = committed_parts(&RunDir::new(dir).table(Table::Fingerprints))?;
    read_parts(dir, &parts)
}

fn read_parts(dir: &Path, fingerprints: &[std::path::PathBuf]) -> Result<RunDocuments, IoError> {
    let run = RunDir::new(dir);
    let mut out = RunDocuments::default();
    // doc -> (cluster, kept) of every clustered document.
    let mut clusters: HashMap<u64, (i64, bool)> = HashMap::new();
    for path in committed_parts(&run.table(Table::Clusters))? {
        each_batch(&path, "clusters", |tag, b| {
            if let Some(tag) = tag {
                out.search = tag.meta.params[PARAM_SEARCH].clone();
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
                    clusters.insert(docs.value(i), (ids.value(i), keep.value(i)));
                }
            }
            Ok(())
        })?;
    }
    for path in fingerprints {
        let path = path.clone();
        each_batch(&path, "fingerprints", |tag, b| {
            if let Some(tag) = tag {
                out.scheme = tag.meta.scheme.clone();
                out.fingerprint = tag.meta.params[PARAM_FINGERPRINT].clone();
            }
            let docs = column_u64(b, "doc_id", &path)?;
            let simhashes = column_u64(b, "simhash", &path)?;
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
            for i in 0..b.num_rows() {
                let doc_id = docs.value(i);
                out.files = out.files.max((doc_id >> FILE_SHIFT) + 1);
                out.docs.push(DocEntry {
                    doc_id,
                    id: text(ids, i),
                    source: text(sources, i).unwrap_or_else(|| source.clone()),
                    url: text(urls, i),
                    simhash: simhashes.value(i),
                    empty: empty.is_some_and(|e| e.value(i)),
                    cluster_id: clusters.get(&doc_id).map(|c| c.0),
                    removed: clusters.get(&doc_id).is_some_and(|c| !c.1),
                    bytes: sizes.and_then(|c| c.is_valid(i).then(|| c.value(i))),
                    fetched_at: times.and_then(|c| c.is_valid(i).then(|| c.value(i))),
                    ..Default::default()
                });
            }
            Ok(())
        })?;
    }
    out.docs.sort_unstable_by_key(|d| d.doc_id);
    Ok(out)
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
