//! Reading a finished run's outputs back (for `neardup eval`): the document ids from
//! `fingerprints/`, the pairs from `pairs/`, the cluster labels from `clusters/`.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float32Type, Int64Type, UInt64Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::IoError;

/// What `neardup eval` needs of a run.
#[derive(Debug, Default)]
pub struct RunOutputs {
    /// doc_id -> the user's id (if the input had one).
    pub ids: HashMap<u64, Option<String>>,
    /// doc_id -> simhash.
    pub simhashes: HashMap<u64, u64>,
    /// (doc_a, doc_b, kind) for every pair.
    pub pairs: Vec<(u64, u64, String)>,
    /// (doc_a, doc_b) -> verified Jaccard, for pairs that have one.
    pub jaccard: HashMap<(u64, u64), f32>,
    /// doc_id -> cluster_id, for documents in a cluster.
    pub clusters: HashMap<u64, u64>,
    /// The kept document of each cluster.
    pub kept: HashMap<u64, u64>,
}

/// The committed parts of one table of a run.
fn parts(dir: &Path) -> Result<Vec<PathBuf>, IoError> {
    let entries = std::fs::read_dir(dir).map_err(|source| IoError::Open {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut parts: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("part-") && n.ends_with(".parquet"))
        })
        .collect();
    parts.sort();
    Ok(parts)
}

fn batches(
    path: &Path,
    columns: &[&str],
    mut f: impl FnMut(&RecordBatch) -> Result<(), IoError>,
) -> Result<(), IoError> {
    let file = File::open(path).map_err(|source| IoError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let parquet = |source| IoError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet)?;
    let mask =
        parquet::arrow::ProjectionMask::columns(builder.parquet_schema(), columns.iter().copied());
    for batch in builder.with_projection(mask).build().map_err(parquet)? {
        let batch = batch.map_err(|e| IoError::BadTable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        for c in columns {
            if batch.column_by_name(c).is_none() {
                return Err(IoError::BadTable {
                    path: path.to_path_buf(),
                    reason: format!("no column {c:?}"),
                });
            }
        }
        f(&batch)?;
    }
    Ok(())
}

fn u64s<'a>(
    batch: &'a RecordBatch,
    name: &str,
    path: &Path,
) -> Result<&'a arrow::array::UInt64Array, IoError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_primitive_opt::<UInt64Type>())
        .ok_or_else(|| IoError::BadTable {
            path: path.to_path_buf(),
            reason: format!("column {name:?} is not UInt64"),
        })
}

/// Reads a run directory; refuses one without `_SUCCESS` (incomplete or failed).
pub fn read_run(dir: &Path) -> Result<RunOutputs, IoError> {
    if !dir.join("_SUCCESS").exists() {
        return Err(IoError::BadTable {
            path: dir.to_path_buf(),
            reason: "no _SUCCESS: the run is incomplete or failed".into(),
        });
    }
    let mut out = RunOutputs::default();
    for path in parts(&dir.join("fingerprints"))? {
        batches(&path, &["doc_id", "id", "simhash"], |b| {
            let docs = u64s(b, "doc_id", &path)?;
            let simhashes = u64s(b, "simhash", &path)?;
            let ids = b.column_by_name("id").expect("checked").as_string::<i32>();
            for i in 0..b.num_rows() {
                out.ids.insert(
                    docs.value(i),
                    ids.is_valid(i).then(|| ids.value(i).to_string()),
                );
                out.simhashes.insert(docs.value(i), simhashes.value(i));
            }
            Ok(())
        })?;
    }
    for path in parts(&dir.join("pairs"))? {
        batches(&path, &["doc_a", "doc_b", "kind", "jaccard"], |b| {
            let (a, c) = (u64s(b, "doc_a", &path)?, u64s(b, "doc_b", &path)?);
            let kind = b
                .column_by_name("kind")
                .expect("checked")
                .as_string::<i32>();
            let jaccard = b
                .column_by_name("jaccard")
                .expect("checked")
                .as_primitive_opt::<Float32Type>();
            out.pairs.extend(
                (0..b.num_rows()).map(|i| (a.value(i), c.value(i), kind.value(i).to_string())),
            );
            if let Some(j) = jaccard {
                for i in (0..b.num_rows()).filter(|&i| j.is_valid(i)) {
                    out.jaccard.insert((a.value(i), c.value(i)), j.value(i));
                }
            }
            Ok(())
        })?;
    }
    for path in parts(&dir.join("clusters"))? {
        batches(&path, &["doc_id", "cluster_id", "keep"], |b| {
            let docs = u64s(b, "doc_id", &path)?;
            let clusters = b
                .column_by_name("cluster_id")
                .and_then(|c| c.as_primitive_opt::<Int64Type>())
                .ok_or_else(|| IoError::BadTable {
                    path: path.clone(),
                    reason: "column \"cluster_id\" is not Int64".into(),
                })?;
            let keep = b.column_by_name("keep").expect("checked").as_boolean();
            for i in 0..b.num_rows() {
                if clusters.value(i) >= 0 {
                    out.clusters.insert(docs.value(i), clusters.value(i) as u64);
                    if keep.value(i) {
                        out.kept.insert(clusters.value(i) as u64, docs.value(i));
                    }
                }
            }
            Ok(())
        })?;
    }
    Ok(out)
}
