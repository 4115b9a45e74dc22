//! Reading a finished run back: what `neardup eval` needs of it ([`read_run`]), its
//! repeated passages ([`read_substrings`]), and every batch of one of its tables
//! ([`each_part_batch`]). Every part read must be of the table its directory names and of
//! the same job as the others (see `Origin`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float32Type, Int64Type};

use super::layout::{committed_parts, RunDir, Table};
use crate::error::IoError;
use crate::parquet_in::{u64_column, TableFile};
use crate::parquet_out::{PairKind, TableTag, PARAM_FINGERPRINT, PARAM_SEARCH};

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
    /// doc_id -> the verified Jaccard similarity with the document kept in its place
    /// (`clusters/`' `jaccard`, where the run measured it).
    pub jaccard_to_kept: HashMap<u64, f32>,
    /// What made the run's `pairs/` and `clusters/` (their metadata), if they say.
    pub meta: Option<crate::parquet_out::TableMeta>,
}

/// The parts of one run read so far: every part with neardup's metadata must be of the table
/// its directory names and come from the same job as the others (same scheme and
/// fingerprint parameters; `pairs/` and `clusters/` also the same search parameters), so
/// that parts of two runs, or a table moved into another's place, are never read as one
/// result. Parts without metadata (older neardup versions) are read as before.
#[derive(Default)]
struct Origin {
    fingerprint: Option<(PathBuf, TableTag)>,
    search: Option<(PathBuf, TableTag)>,
}

impl Origin {
    fn check(&mut self, path: &Path, table: Table, tag: Option<TableTag>) -> Result<(), IoError> {
        let Some(tag) = tag else {
            return Ok(());
        };
        tag.expect_table(path, table.dir_name())?;
        let agree = |first: &mut Option<(PathBuf, TableTag)>, part| match first {
            Some((first_path, first_tag)) => {
                tag.expect_same_origin(path, first_tag, first_path, Some(part))
            }
            None => {
                *first = Some((path.to_path_buf(), tag.clone()));
                Ok(())
            }
        };
        agree(&mut self.fingerprint, PARAM_FINGERPRINT)?;
        if table != Table::Fingerprints {
            agree(&mut self.search, PARAM_SEARCH)?;
        }
        Ok(())
    }
}

/// Calls `f` on every batch of the part at `path` of `table`, reading only `columns` (each
/// of which it must have), once its tag has been checked against the parts read before.
fn batches(
    path: &Path,
    table: Table,
    origin: &mut Origin,
    columns: &[&str],
    f: impl FnMut(&RecordBatch) -> Result<(), IoError>,
) -> Result<(), IoError> {
    batches_with(path, table, origin, columns, &[], f)
}

/// [`batches`], also reading the `optional` columns where a part has them (columns added
/// to a table in a later version).
fn batches_with(
    path: &Path,
    table: Table,
    origin: &mut Origin,
    columns: &[&str],
    optional: &[&str],
    mut f: impl FnMut(&RecordBatch) -> Result<(), IoError>,
) -> Result<(), IoError> {
    let file = TableFile::open(path)?;
    origin.check(path, table, file.tag()?)?;
    let wanted: Vec<&str> = columns.iter().chain(optional).copied().collect();
    file.columns(&wanted).for_each_batch(|batch| {
        for c in columns {
            if batch.column_by_name(c).is_none() {
                return Err(IoError::BadTable {
                    path: path.to_path_buf(),
                    reason: format!("no column {c:?}"),
                });
            }
        }
        f(batch)
    })
}

/// Calls `f` with the path and every batch of every committed part of the table directory
/// `dir` (see [`committed_parts`]), in part order, reading only `columns` (those of them a
/// part has; a missing one is `f`'s to notice), or all of them with `None`. Parts are not
/// checked against each other (see [`read_run`] for that).
pub fn each_part_batch(
    dir: &Path,
    columns: Option<&[&str]>,
    mut f: impl FnMut(&Path, &RecordBatch) -> Result<(), IoError>,
) -> Result<(), IoError> {
    for path in committed_parts(dir)? {
        let mut file = TableFile::open(&path)?;
        if let Some(columns) = columns {
            file = file.columns(columns);
        }
        file.for_each_batch(|batch| f(&path, batch))?;
    }
    Ok(())
}

/// The UInt64 column `name` of a batch of the part at `path`.
fn u64s<'a>(
    batch: &'a RecordBatch,
    name: &str,
    path: &Path,
) -> Result<&'a arrow::array::UInt64Array, IoError> {
    u64_column(batch, name, path, |name| {
        format!("column {name:?} is not UInt64")
    })
}

/// Reads a run directory; refuses one without `_SUCCESS` (incomplete or failed), and parts
/// whose metadata says they belong elsewhere (see `Origin`).
pub fn read_run(dir: &Path) -> Result<RunOutputs, IoError> {
    let run = RunDir::new(dir);
    if !run.success().exists() {
        return Err(IoError::BadTable {
            path: dir.to_path_buf(),
            reason: "no _SUCCESS: the run is incomplete or failed".into(),
        });
    }
    read_run_parts(dir)
}

/// [`read_run`] without the check for `_SUCCESS`: for a step that runs between the last
/// committed part and `_SUCCESS` (every part is committed then, `_SUCCESS` not yet written).
pub fn read_run_parts(dir: &Path) -> Result<RunOutputs, IoError> {
    let run = RunDir::new(dir);
    let mut out = RunOutputs::default();
    let mut origin = Origin::default();
    for path in committed_parts(&run.table(Table::Fingerprints))? {
        batches(
            &path,
            Table::Fingerprints,
            &mut origin,
            &["doc_id", "id", "simhash"],
            |b| {
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
            },
        )?;
    }
    read_pairs(&run, &mut out, &mut origin)?;
    for path in committed_parts(&run.table(Table::Clusters))? {
        let columns = ["doc_id", "cluster_id", "keep"];
        let similarity = ["jaccard"];
        batches_with(
            &path,
            Table::Clusters,
            &mut origin,
            &columns,
            &similarity,
            |b| {
                let docs = u64s(b, "doc_id", &path)?;
                let clusters = b
                    .column_by_name("cluster_id")
                    .and_then(|c| c.as_primitive_opt::<Int64Type>())
                    .ok_or_else(|| IoError::BadTable {
                        path: path.clone(),
                        reason: "column \"cluster_id\" is not Int64".into(),
                    })?;
                let keep = b.column_by_name("keep").expect("checked").as_boolean();
                let jaccard = b
                    .column_by_name("jaccard")
                    .and_then(|c| c.as_primitive_opt::<Float32Type>());
                for i in 0..b.num_rows() {
                    if let Some(j) = jaccard.filter(|j| j.is_valid(i)) {
                        out.jaccard_to_kept.insert(docs.value(i), j.value(i));
                    }
                    if clusters.value(i) >= 0 {
                        out.clusters.insert(docs.value(i), clusters.value(i) as u64);
                        if keep.value(i) {
                            out.kept.insert(clusters.value(i) as u64, docs.value(i));
                        }
                    }
                }
                Ok(())
            },
        )?;
    }
    out.meta = origin.search.map(|(_, tag)| tag.meta);
    Ok(out)
}

/// One pair of a run's `pairs/` as [`each_run_pair`] reads it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunPair {
    pub doc_a: u64,
    pub doc_b: u64,
    /// Its verified Jaccard similarity, where the run measured one.
    pub jaccard: Option<f32>,
    pub kind: PairKind,
}

/// Calls `f` with each of a run's pairs alone, in the order of its parts, its parts
/// committed and its `_SUCCESS` not necessarily written (see [`read_run_parts`]): a step
/// that streams the documents holds none of the run, neither its documents nor its pairs.
/// A `kind` other than `exact` and `url` is a near pair.
pub fn each_run_pair(dir: &Path, mut f: impl FnMut(RunPair)) -> Result<(), IoError> {
    each_pair(
        &RunDir::new(dir),
        &mut Origin::default(),
        |doc_a, doc_b, kind, jaccard| {
            let kind = match kind {
                "exact" => PairKind::Exact,
                "url" => PairKind::Url,
                _ => PairKind::Near,
            };
            f(RunPair {
                doc_a,
                doc_b,
                jaccard,
                kind,
            });
        },
    )
}

/// Adds the committed parts of the run's `pairs/` to `out`.
fn read_pairs(run: &RunDir, out: &mut RunOutputs, origin: &mut Origin) -> Result<(), IoError> {
    each_pair(run, origin, |a, b, kind, jaccard| {
        out.pairs.push((a, b, kind.to_string()));
        if let Some(j) = jaccard {
            out.jaccard.insert((a, b), j);
        }
    })
}

/// Calls `f` with each pair of the committed parts of the run's `pairs/`: its documents,
/// kind and verified Jaccard similarity (where it has one).
fn each_pair(
    run: &RunDir,
    origin: &mut Origin,
    mut f: impl FnMut(u64, u64, &str, Option<f32>),
) -> Result<(), IoError> {
    for path in committed_parts(&run.table(Table::Pairs))? {
        let columns = ["doc_a", "doc_b", "kind", "jaccard"];
        batches(&path, Table::Pairs, origin, &columns, |b| {
            let (a, c) = (u64s(b, "doc_a", &path)?, u64s(b, "doc_b", &path)?);
            let kind = b
                .column_by_name("kind")
                .expect("checked")
                .as_string::<i32>();
            let jaccard = b
                .column_by_name("jaccard")
                .expect("checked")
                .as_primitive_opt::<Float32Type>();
            for i in 0..b.num_rows() {
                let j = jaccard.filter(|j| j.is_valid(i)).map(|j| j.value(i));
                f(a.value(i), c.value(i), kind.value(i), j);
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// What made a run's `pairs/` and `clusters/` (their metadata): that of the first committed
/// part that has it, `pairs/` first ([`RunOutputs::meta`] without reading every table).
pub fn search_meta(dir: &Path) -> Result<Option<crate::parquet_out::TableMeta>, IoError> {
    let run = RunDir::new(dir);
    for table in [Table::Pairs, Table::Clusters] {
        for path in committed_parts(&run.table(table))? {
            if let Some(tag) = TableFile::open(&path)?.tag()? {
                return Ok(Some(tag.meta));
            }
        }
    }
    Ok(None)
}

/// The ranges of a run's `substrings/` as `(doc_id, start, end)`, sorted; the run must be
/// complete (`_SUCCESS`).
pub fn read_substrings(dir: &Path) -> Result<Vec<(u64, u64, u64)>, IoError> {
    let run = RunDir::new(dir);
    if !run.success().exists() {
        return Err(IoError::BadTable {
            path: dir.to_path_buf(),
            reason: "no _SUCCESS: the run is incomplete or failed".into(),
        });
    }
    let mut out = Vec::new();
    let mut origin = Origin::default();
    for path in committed_parts(&run.table(Table::Substrings))? {
        let columns = ["doc_id", "start", "end"];
        batches(&path, Table::Substrings, &mut origin, &columns, |b| {
            let docs = u64s(b, "doc_id", &path)?;
            let starts = u64s(b, "start", &path)?;
            let ends = u64s(b, "end", &path)?;
            out.extend((0..b.num_rows()).map(|i| (docs.value(i), starts.value(i), ends.value(i))));
            Ok(())
        })?;
    }
    out.sort_unstable();
    Ok(out)
}
