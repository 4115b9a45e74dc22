//! The run directory: its one owner.
//!
//! ```text
//! OUT/
//!   fingerprints/part-00000.parquet ...   one part per worker
//!   pairs/part-00000.parquet ...
//!   clusters/part-00000.parquet ...
//!   summary.json
//!   _SUCCESS                              written last, only when everything is complete
//! ```
//!
//! A deduplicated corpus (`--write-dedup DIR`) is a directory of the same
//! kind: the kept files, [`REMOVED`] and [`SUCCESS`].
//!
//! Parts are written under hidden temporary names and renamed when complete
//! (see [`crate::parquet_out`]). A directory without `_SUCCESS` is an
//! incomplete or failed run, whatever else it holds, and [`read_run`] refuses
//! it. Everything that writes a run ([`prepare`], the part writers through
//! [`RunDir::table`] and [`part_file_name`], [`commit`]) and everything that
//! reads one back ([`read_run`], [`committed_parts`]) takes the names from
//! here.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float32Type, Int64Type, UInt64Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::atomic::write_atomically;
use crate::error::IoError;

/// The commit marker's name.
pub const SUCCESS: &str = "_SUCCESS";
/// The summary's name.
pub const SUMMARY: &str = "summary.json";
/// The table of removed documents beside a deduplicated corpus.
pub const REMOVED: &str = "removed.parquet";

/// A table of a run: a directory of part files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    Fingerprints,
    Pairs,
    Clusters,
}

impl Table {
    /// The table's directory name.
    pub fn dir_name(self) -> &'static str {
        match self {
            Table::Fingerprints => "fingerprints",
            Table::Pairs => "pairs",
            Table::Clusters => "clusters",
        }
    }
}

/// The committed name of part `part` of a table.
pub fn part_file_name(part: usize) -> String {
    format!("part-{part:05}.parquet")
}

/// The paths of one run directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunDir {
    root: PathBuf,
}

impl RunDir {
    pub fn new(root: &Path) -> Self {
        RunDir {
            root: root.to_path_buf(),
        }
    }

    /// The directory of a table.
    pub fn table(&self, table: Table) -> PathBuf {
        self.root.join(table.dir_name())
    }

    /// The commit marker.
    pub fn success(&self) -> PathBuf {
        self.root.join(SUCCESS)
    }

    /// The summary.
    pub fn summary(&self) -> PathBuf {
        self.root.join(SUMMARY)
    }
}

/// Makes `dir` ready for a run: refuses an existing non-empty directory unless `overwrite`,
/// in which case its contents are removed first (the `_SUCCESS` marker before anything else,
/// so an interrupted clean-up never leaves a directory that looks complete). Then creates
/// the directories of `tables`.
pub fn prepare(dir: &Path, overwrite: bool, tables: &[Table]) -> Result<(), IoError> {
    let prepare_err = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| IoError::Prepare {
            action,
            path,
            cause: source,
        }
    };
    if dir.exists() {
        if !dir.is_dir() {
            return Err(IoError::NotADirectory {
                path: dir.to_path_buf(),
            });
        }
        let non_empty = std::fs::read_dir(dir)
            .map_err(prepare_err("cannot read", dir))?
            .next()
            .is_some();
        if non_empty {
            if !overwrite {
                return Err(IoError::NotEmpty {
                    path: dir.to_path_buf(),
                });
            }
            let marker = dir.join(SUCCESS);
            if marker.exists() {
                std::fs::remove_file(&marker)
                    .map_err(prepare_err("cannot remove _SUCCESS in", dir))?;
            }
            for entry in std::fs::read_dir(dir).map_err(prepare_err("cannot read", dir))? {
                let path = entry.map_err(prepare_err("cannot read", dir))?.path();
                let removed = if path.is_dir() {
                    std::fs::remove_dir_all(&path)
                } else {
                    std::fs::remove_file(&path)
                };
                removed.map_err(prepare_err("cannot remove", &path))?;
            }
        }
    }
    std::fs::create_dir_all(dir).map_err(prepare_err("cannot create", dir))?;
    for &table in tables {
        let sub = dir.join(table.dir_name());
        std::fs::create_dir_all(&sub).map_err(prepare_err("cannot create", &sub))?;
    }
    Ok(())
}

/// Writes `summary.json` (the bytes given), then `_SUCCESS` if the run succeeded; each
/// appears whole or not at all.
pub fn commit(dir: &Path, summary_json: &[u8], succeeded: bool) -> Result<(), IoError> {
    let run = RunDir::new(dir);
    write_atomically(&run.summary(), summary_json)?;
    if succeeded {
        write_atomically(&run.success(), b"")?;
    }
    Ok(())
}

/// Marks a directory complete: writes `_SUCCESS`.
pub fn mark_complete(dir: &Path) -> Result<(), IoError> {
    write_atomically(&RunDir::new(dir).success(), b"")
}

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

/// The committed parts of one table of a run (`part-*.parquet`, sorted; temporary files of
/// parts being written are hidden and not listed).
pub fn committed_parts(dir: &Path) -> Result<Vec<PathBuf>, IoError> {
    let entries = std::fs::read_dir(dir).map_err(|source| IoError::Open {
        path: dir.to_path_buf(),
        cause: source,
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
        cause: source,
    })?;
    let parquet = |source| IoError::Parquet {
        path: path.to_path_buf(),
        cause: source,
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
    let run = RunDir::new(dir);
    if !run.success().exists() {
        return Err(IoError::BadTable {
            path: dir.to_path_buf(),
            reason: "no _SUCCESS: the run is incomplete or failed".into(),
        });
    }
    let mut out = RunOutputs::default();
    for path in committed_parts(&run.table(Table::Fingerprints))? {
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
    for path in committed_parts(&run.table(Table::Pairs))? {
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
    for path in committed_parts(&run.table(Table::Clusters))? {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parquet_out::{ClusterRow, FingerprintRow, PairKind, PairRow, PartWriter};

    #[test]
    fn prepare_refuses_or_clears_and_creates_the_tables() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        prepare(&out, false, &[Table::Pairs]).unwrap();
        assert!(out.join("pairs").is_dir());
        std::fs::write(out.join(SUCCESS), b"").unwrap();
        assert_eq!(
            prepare(&out, false, &[]).unwrap_err().to_string(),
            format!(
                "output directory {} exists and is not empty (pass --overwrite to replace it)",
                out.display()
            )
        );
        prepare(&out, true, &[Table::Fingerprints]).unwrap();
        let names: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["fingerprints"]);
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(
            prepare(&file, true, &[]).unwrap_err().to_string(),
            format!("{} exists and is not a directory", file.display())
        );
    }

    #[test]
    fn a_committed_run_reads_back_and_an_uncommitted_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        let tables = [Table::Fingerprints, Table::Pairs, Table::Clusters];
        prepare(&out, false, &tables).unwrap();
        let run = RunDir::new(&out);
        let mut fps =
            PartWriter::<FingerprintRow>::create(&run.table(Table::Fingerprints), 1).unwrap();
        for doc in [3u64, 5] {
            fps.push(FingerprintRow {
                doc_id: doc,
                id: (doc == 3).then(|| "three".to_string()),
                source: "a.jsonl".into(),
                record: doc,
                simhash: doc * 10,
                n_tokens: 1,
                bytes: 1,
                empty: false,
            })
            .unwrap();
        }
        assert!(fps
            .final_path()
            .ends_with("fingerprints/part-00001.parquet"));
        fps.commit().unwrap();
        let mut pairs = PartWriter::<PairRow>::create(&run.table(Table::Pairs), 0).unwrap();
        pairs
            .push(PairRow {
                doc_a: 3,
                doc_b: 5,
                hamming: 2,
                kind: PairKind::Near,
                jaccard: Some(0.5),
            })
            .unwrap();
        pairs.commit().unwrap();
        let mut clusters =
            PartWriter::<ClusterRow>::create(&run.table(Table::Clusters), 0).unwrap();
        for (doc, keep) in [(3, true), (5, false)] {
            clusters
                .push(ClusterRow {
                    doc_id: doc,
                    cluster_id: 3,
                    cluster_size: 2,
                    keep,
                })
                .unwrap();
        }
        clusters.commit().unwrap();

        let err = read_run(&out).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: no _SUCCESS: the run is incomplete or failed",
                out.display()
            )
        );
        commit(&out, b"{}", true).unwrap();
        assert_eq!(std::fs::read(run.summary()).unwrap(), b"{}");
        let got = read_run(&out).unwrap();
        assert_eq!(got.ids[&3].as_deref(), Some("three"));
        assert_eq!(got.ids[&5], None);
        assert_eq!(got.simhashes[&5], 50);
        assert_eq!(got.pairs, [(3, 5, "near".to_string())]);
        assert_eq!(got.jaccard[&(3, 5)], 0.5);
        assert_eq!(got.clusters[&5], 3);
        assert_eq!(got.kept[&3], 3);
    }

    #[test]
    fn a_failed_run_gets_a_summary_but_no_marker() {
        let dir = tempfile::tempdir().unwrap();
        commit(dir.path(), b"{\"errors\": 1}", false).unwrap();
        assert!(dir.path().join(SUMMARY).exists());
        assert!(!dir.path().join(SUCCESS).exists());
    }
}
