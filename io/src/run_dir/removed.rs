//! The documents a run removes, each with the one it duplicates, read back from the run's
//! tables within a memory budget: what `--write-dedup` needs.
//!
//! The simple version reads every table into maps (`doc -> id`, `doc -> simhash`, `doc ->
//! cluster`, `cluster -> kept`, `(a, b) -> jaccard`) and walks the clusters: it holds every
//! document of the corpus at once. Here each map becomes a sorted sequence, and each lookup a
//! merge of two sequences sorted by the same key ([`neardup_io::spill::ExternalSort`], runs
//! on local disk beyond the budget):
//!
//! 1. `fingerprints/` sorted by document: `(doc, simhash, id)`, sealed to be read twice;
//! 2. the removed documents of `clusters/` (`keep = false`) by document, with their kept
//!    document and the Jaccard similarity the clustering measured; merged with (1) for
//!    their own simhash and id;
//! 3. the same by kept document, merged with (1) for the kept one's;
//! 4. by the pair `(smaller, larger)`, merged with the `pairs/` rows that have a Jaccard
//!    similarity, for the removed documents the clustering gave none (connected components
//!    in MinHash mode);
//! 5. by document again: the rows of `removed.parquet`, in doc order, and the record numbers
//!    to leave out of each input file, one file after another.
//!
//! Memory: one sort's budget at a time, plus one input file's removed record numbers.

use std::io;
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch, UInt64Array};
use arrow::datatypes::{Float32Type, Int64Type, UInt64Type};
use serde::{Deserialize, Serialize};

use super::layout::{RunDir, Table};
use super::read::each_part_batch;
use crate::error::IoError;
use crate::parquet_out::RemovedRow;
use crate::spill::{ExternalSort, SortStats, SortedFile, SpillRecord};

/// A document of `fingerprints/`: its simhash and id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Doc {
    doc: u64,
    simhash: u64,
    id: Option<String>,
}

impl SpillRecord for Doc {
    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.id.as_ref().map_or(0, String::capacity)
    }
}

/// A removed document, as it goes through the merges; ordered by `key` (the document, the
/// kept one, or the pair), then the document.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Removed {
    key: (u64, u64),
    doc: u64,
    kept: u64,
    /// The Jaccard similarity's bits (an `f32`, kept as bits to be ordered).
    jaccard: Option<u32>,
    simhash: u64,
    id: Option<String>,
    kept_simhash: u64,
    kept_id: Option<String>,
}

impl SpillRecord for Removed {
    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.id.as_ref().map_or(0, String::capacity)
            + self.kept_id.as_ref().map_or(0, String::capacity)
    }
}

impl Removed {
    fn by(mut self, key: (u64, u64)) -> Removed {
        self.key = key;
        self
    }

    fn row(self) -> RemovedRow {
        RemovedRow {
            doc_id: self.doc,
            id: self.id,
            kept_doc_id: self.kept,
            kept_id: self.kept_id,
            hamming: (self.simhash ^ self.kept_simhash).count_ones() as u8,
            jaccard: self.jaccard.map(f32::from_bits),
        }
    }
}

/// A pair of `pairs/` with a Jaccard similarity, by `(smaller, larger)` document.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Measured {
    pair: (u64, u64),
    jaccard: u32,
}

impl SpillRecord for Measured {}

/// The removed documents of the committed run at `run`, by document, sorted within `budget`
/// bytes in `dir` (created and removed here).
pub struct RemovedRows {
    rows: SortedFile<Removed>,
    /// What the sorts did, summed.
    pub stats: SortStats,
}

impl RemovedRows {
    /// Reads the run's tables and joins them (see the module docs).
    pub fn read(run: &Path, dir: &Path, budget: usize) -> Result<RemovedRows, IoError> {
        let fail = |e: io::Error| sort_error(dir, e);
        let tables = RunDir::new(run);
        let mut stats = SortStats::default();
        let docs = documents(&tables, dir.join("documents"), budget)?;
        add(&mut stats, docs.stats());
        // 2: the removed documents, by document, merged with their own fingerprints.
        let removed = removed_documents(&tables, dir.join("removed"), budget)?;
        add(&mut stats, removed.stats());
        let mut by_kept = ExternalSort::new(dir.join("by-kept"), budget);
        join(removed.records().map_err(fail)?, &docs, |mut r, d| {
            (r.simhash, r.id) = (d.simhash, d.id.clone());
            let key = (r.kept, r.doc);
            by_kept.push(r.by(key))
        })
        .map_err(fail)?;
        drop(removed);
        add(&mut stats, by_kept.stats());
        // 3: by kept document, merged with the kept ones' fingerprints.
        let mut by_pair = ExternalSort::new(dir.join("by-pair"), budget);
        join(by_kept.finish().map_err(fail)?, &docs, |mut r, d| {
            (r.kept_simhash, r.kept_id) = (d.simhash, d.id.clone());
            let key = (r.doc.min(r.kept), r.doc.max(r.kept));
            by_pair.push(r.by(key))
        })
        .map_err(fail)?;
        drop(docs);
        add(&mut stats, by_pair.stats());
        // 4: by pair, merged with the measured pairs for those without a similarity.
        let measured = measured_pairs(&tables, dir.join("pairs"), budget)?;
        add(&mut stats, measured.stats());
        let mut by_doc = ExternalSort::new(dir.join("by-doc"), budget);
        let mut pairs = measured.records().map_err(fail)?.peekable();
        for r in by_pair.finish().map_err(fail)? {
            let mut r = r.map_err(fail)?;
            while let Some(p) = pairs.next_if(|p| p.as_ref().map_or(true, |p| p.pair < r.key)) {
                p.map_err(fail)?;
            }
            if r.jaccard.is_none() {
                if let Some(Ok(p)) = pairs
                    .peek()
                    .filter(|p| matches!(p, Ok(p) if p.pair == r.key))
                {
                    r.jaccard = Some(p.jaccard);
                }
            }
            let key = (r.doc, 0);
            by_doc.push(r.by(key)).map_err(fail)?;
        }
        add(&mut stats, by_doc.stats());
        // 5: by document, to be walked once per input file's turn.
        let rows = by_doc.seal().map_err(fail)?;
        Ok(RemovedRows { rows, stats })
    }

    /// The rows of `removed.parquet`, in doc order.
    pub fn rows(
        &self,
        dir: &Path,
    ) -> Result<impl Iterator<Item = Result<RemovedRow, IoError>>, IoError> {
        let dir = dir.to_path_buf();
        let records = self.rows.records().map_err(|e| sort_error(&dir, e))?;
        Ok(records.map(move |r| r.map(Removed::row).map_err(|e| sort_error(&dir, e))))
    }
}

fn add(total: &mut SortStats, stats: SortStats) {
    total.budget_bytes = total.budget_bytes.max(stats.budget_bytes);
    total.records += stats.records;
    total.runs += stats.runs;
    total.spilled_bytes += stats.spilled_bytes;
}

/// The error of a sort's run file that could not be written or read.
fn sort_error(dir: &Path, e: io::Error) -> IoError {
    IoError::Write {
        path: dir.to_path_buf(),
        cause: e,
    }
}

/// The records `rows` makes of each batch of the run's `table` (reading `columns`), sorted
/// within `budget` in `dir` and sealed.
fn sort_table<T: SpillRecord>(
    run: &RunDir,
    (table, columns): (Table, &[&str]),
    dir: PathBuf,
    budget: usize,
    mut rows: impl FnMut(&Path, &RecordBatch, &mut Vec<T>) -> Result<(), IoError>,
) -> Result<SortedFile<T>, IoError> {
    let mut sort = ExternalSort::new(dir.clone(), budget);
    let (mut batch, mut failed) = (Vec::new(), None);
    each_part_batch(&run.table(table), Some(columns), |path, b| {
        rows(path, b, &mut batch)?;
        for r in batch.drain(..) {
            if let Err(e) = sort.push(r) {
                failed.get_or_insert(e);
            }
        }
        Ok(())
    })?;
    if let Some(e) = failed {
        return Err(sort_error(&dir, e));
    }
    sort.seal().map_err(|e| sort_error(&dir, e))
}

/// The UInt64 column `name` of a batch of the part at `path`.
fn u64s<'a>(b: &'a RecordBatch, name: &str, path: &Path) -> Result<&'a UInt64Array, IoError> {
    b.column_by_name(name)
        .and_then(|c| c.as_primitive_opt::<UInt64Type>())
        .ok_or_else(|| bad(path, &format!("no UInt64 column {name:?}")))
}

/// Step 1: every document of `fingerprints/`, by document.
fn documents(run: &RunDir, dir: PathBuf, budget: usize) -> Result<SortedFile<Doc>, IoError> {
    let columns = (Table::Fingerprints, &["doc_id", "simhash", "id"][..]);
    sort_table(run, columns, dir, budget, |path, b, out| {
        let (docs, simhashes) = (u64s(b, "doc_id", path)?, u64s(b, "simhash", path)?);
        let ids = b
            .column_by_name("id")
            .and_then(|c| c.as_string_opt::<i32>());
        out.extend((0..b.num_rows()).map(|i| {
            Doc {
                doc: docs.value(i),
                simhash: simhashes.value(i),
                id: ids
                    .filter(|c| c.is_valid(i))
                    .map(|c| c.value(i).to_string()),
            }
        }));
        Ok(())
    })
}

/// Step 2's input: every removed document of `clusters/` (`keep = false` in a cluster), by
/// document, with its kept document and the similarity the clustering gave.
fn removed_documents(
    run: &RunDir,
    dir: PathBuf,
    budget: usize,
) -> Result<SortedFile<Removed>, IoError> {
    let columns = ["doc_id", "cluster_id", "keep", "kept_doc_id", "jaccard"];
    sort_table(
        run,
        (Table::Clusters, &columns),
        dir,
        budget,
        |path, b, out| {
            let (docs, kept) = (u64s(b, "doc_id", path)?, u64s(b, "kept_doc_id", path)?);
            let clusters = b
                .column_by_name("cluster_id")
                .and_then(|c| c.as_primitive_opt::<Int64Type>())
                .ok_or_else(|| bad(path, "no Int64 column \"cluster_id\""))?;
            let keep = b
                .column_by_name("keep")
                .and_then(|c| c.as_boolean_opt())
                .ok_or_else(|| bad(path, "no Boolean column \"keep\""))?;
            let jaccard = b
                .column_by_name("jaccard")
                .and_then(|c| c.as_primitive_opt::<Float32Type>());
            let removed = (0..b.num_rows()).filter(|&i| clusters.value(i) >= 0 && !keep.value(i));
            out.extend(removed.map(|i| {
                Removed {
                    key: (docs.value(i), 0),
                    doc: docs.value(i),
                    kept: kept.value(i),
                    jaccard: jaccard
                        .filter(|j| j.is_valid(i))
                        .map(|j| j.value(i).to_bits()),
                    simhash: 0,
                    id: None,
                    kept_simhash: 0,
                    kept_id: None,
                }
            }));
            Ok(())
        },
    )
}

/// Step 4's input: the pairs of `pairs/` with a Jaccard similarity, by pair.
fn measured_pairs(
    run: &RunDir,
    dir: PathBuf,
    budget: usize,
) -> Result<SortedFile<Measured>, IoError> {
    let columns = (Table::Pairs, &["doc_a", "doc_b", "jaccard"][..]);
    sort_table(run, columns, dir, budget, |path, b, out| {
        let (a, c) = (u64s(b, "doc_a", path)?, u64s(b, "doc_b", path)?);
        let Some(j) = b
            .column_by_name("jaccard")
            .and_then(|c| c.as_primitive_opt::<Float32Type>())
        else {
            return Ok(());
        };
        out.extend((0..b.num_rows()).filter(|&i| j.is_valid(i)).map(|i| {
            let (x, y) = (a.value(i), c.value(i));
            Measured {
                pair: (x.min(y), x.max(y)),
                jaccard: j.value(i).to_bits(),
            }
        }));
        Ok(())
    })
}

/// Merges `left` (sorted by its key's first number) with the documents `docs` (sorted by
/// document, each once): `f` gets each record with its key's document.
fn join(
    left: impl Iterator<Item = io::Result<Removed>>,
    docs: &SortedFile<Doc>,
    mut f: impl FnMut(Removed, &Doc) -> io::Result<()>,
) -> io::Result<()> {
    let mut docs = docs.records()?.peekable();
    for r in left {
        let r = r?;
        while let Some(d) = docs.next_if(|d| d.as_ref().map_or(true, |d| d.doc < r.key.0)) {
            d?;
        }
        match docs.peek() {
            Some(Ok(d)) if d.doc == r.key.0 => {
                let d = d.clone();
                f(r, &d)?;
            }
            Some(Err(_)) => return Err(docs.next().expect("peeked").expect_err("an error")),
            // A clustered document without a fingerprint row: the tables are not of one
            // run (read_run's checks would have refused them).
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "document {} is in clusters/ but not in fingerprints/",
                        r.key.0
                    ),
                ))
            }
        }
    }
    Ok(())
}

fn bad(path: &Path, reason: &str) -> IoError {
    IoError::BadTable {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}
