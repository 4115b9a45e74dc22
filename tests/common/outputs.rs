//! Reading a run's outputs: the Parquet parts of its tables, summary.json, and the rows of
//! fingerprints/, pairs/ and clusters/.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{Float32Type, Int64Type, UInt32Type, UInt64Type, UInt8Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;

/// The run's summary.json.
pub fn summary(out: &Path) -> Value {
    let text = std::fs::read_to_string(out.join("summary.json"))
        .unwrap_or_else(|e| panic!("{}/summary.json: {e}", out.display()));
    serde_json::from_str(&text).unwrap()
}

/// Every committed part of a table (hidden temporary files are not parts), in name order.
pub fn parts(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("part-") && name.ends_with(".parquet"),
            "unexpected file {name} in {} (temporary files must be gone)",
            dir.display()
        );
    }
    files
}

/// Every record batch of a table's parts.
pub fn batches(dir: &Path) -> Vec<RecordBatch> {
    parts(dir)
        .iter()
        .flat_map(|path| {
            let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
                .unwrap()
                .build()
                .unwrap();
            reader.map(|b| b.unwrap()).collect::<Vec<_>>()
        })
        .collect()
}

pub fn column<'a>(batch: &'a RecordBatch, name: &str) -> &'a ArrayRef {
    batch
        .column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name} in {:?}", batch.schema()))
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FpRow {
    pub doc_id: u64,
    pub id: Option<String>,
    pub source: String,
    pub record: u64,
    pub simhash: u64,
    pub n_tokens: u32,
    pub bytes: u64,
    pub empty: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PairRow {
    pub doc_a: u64,
    pub doc_b: u64,
    pub hamming: u8,
    pub kind: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ClusterRow {
    pub doc_id: u64,
    pub cluster_id: i64,
    pub cluster_size: u32,
    pub keep: bool,
}

pub fn fingerprints(out: &Path) -> Vec<FpRow> {
    let mut rows = Vec::new();
    for b in batches(&out.join("fingerprints")) {
        let u64s = |name| column(&b, name).as_primitive::<UInt64Type>();
        let ids = column(&b, "id").as_string::<i32>();
        let sources = column(&b, "source").as_string::<i32>();
        for i in 0..b.num_rows() {
            rows.push(FpRow {
                doc_id: u64s("doc_id").value(i),
                id: ids.is_valid(i).then(|| ids.value(i).to_owned()),
                source: sources.value(i).to_owned(),
                record: u64s("record").value(i),
                simhash: u64s("simhash").value(i),
                n_tokens: column(&b, "n_tokens").as_primitive::<UInt32Type>().value(i),
                bytes: u64s("bytes").value(i),
                empty: column(&b, "empty").as_boolean().value(i),
            });
        }
    }
    rows.sort();
    rows
}

pub fn pairs(out: &Path) -> Vec<PairRow> {
    let mut rows = Vec::new();
    for b in batches(&out.join("pairs")) {
        let u64s = |name| column(&b, name).as_primitive::<UInt64Type>();
        let kinds = column(&b, "kind").as_string::<i32>();
        let jaccard = column(&b, "jaccard").as_primitive::<Float32Type>();
        for i in 0..b.num_rows() {
            // Set by verification only (web pages are verified by default; their URL and
            // revisit pairs are not).
            assert!(
                jaccard.is_null(i) || (0.0..=1.0).contains(&jaccard.value(i)),
                "jaccard is a similarity when verification sets it"
            );
            rows.push(PairRow {
                doc_a: u64s("doc_a").value(i),
                doc_b: u64s("doc_b").value(i),
                hamming: column(&b, "hamming").as_primitive::<UInt8Type>().value(i),
                kind: kinds.value(i).to_owned(),
            });
        }
    }
    let n = rows.len();
    rows.sort();
    rows.dedup();
    assert_eq!(rows.len(), n, "a pair is listed twice");
    rows
}

pub fn clusters(out: &Path) -> Vec<ClusterRow> {
    let mut rows = Vec::new();
    for b in batches(&out.join("clusters")) {
        for i in 0..b.num_rows() {
            rows.push(ClusterRow {
                doc_id: column(&b, "doc_id").as_primitive::<UInt64Type>().value(i),
                cluster_id: column(&b, "cluster_id")
                    .as_primitive::<Int64Type>()
                    .value(i),
                cluster_size: column(&b, "cluster_size")
                    .as_primitive::<UInt32Type>()
                    .value(i),
                keep: column(&b, "keep").as_boolean().value(i),
            });
        }
    }
    rows.sort();
    rows
}

pub fn pair_set(rows: &[PairRow]) -> BTreeSet<(u64, u64)> {
    rows.iter().map(|p| (p.doc_a, p.doc_b)).collect()
}

pub fn near_set(rows: &[PairRow]) -> BTreeSet<(u64, u64)> {
    rows.iter()
        .filter(|p| p.kind == "near")
        .map(|p| (p.doc_a, p.doc_b))
        .collect()
}

pub fn doc_ids_of_fingerprints(rows: &[FpRow]) -> Vec<u64> {
    rows.iter().map(|r| r.doc_id).collect()
}
