//! Reading a run's outputs back, for the tests.
#![allow(dead_code, unused_imports)]

#[path = "../../../tests/common/shared.rs"]
mod shared;
pub use shared::shared_corpus;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use arrow::array::AsArray;
use arrow::datatypes::{Int64Type, UInt32Type, UInt64Type, UInt8Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// Every row of every part in `dir`, as record batches.
pub fn read_parts(dir: &Path) -> Vec<arrow::record_batch::RecordBatch> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    assert!(
        paths
            .iter()
            .all(|p| p.extension().is_some_and(|e| e == "parquet")),
        "stray files in {}: {paths:?}",
        dir.display()
    );
    paths
        .iter()
        .flat_map(|p| {
            ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(p).unwrap())
                .unwrap()
                .build()
                .unwrap()
                .map(|b| b.unwrap())
        })
        .collect()
}

pub type PairSet = BTreeSet<(u64, u64, u8, String)>;

pub fn read_pairs(out: &Path) -> Vec<(u64, u64, u8, String)> {
    let mut pairs = Vec::new();
    for b in read_parts(&out.join("pairs")) {
        let a = b
            .column_by_name("doc_a")
            .unwrap()
            .as_primitive::<UInt64Type>();
        let bb = b
            .column_by_name("doc_b")
            .unwrap()
            .as_primitive::<UInt64Type>();
        let h = b
            .column_by_name("hamming")
            .unwrap()
            .as_primitive::<UInt8Type>();
        let k = b.column_by_name("kind").unwrap().as_string::<i32>();
        for i in 0..b.num_rows() {
            pairs.push((a.value(i), bb.value(i), h.value(i), k.value(i).to_string()));
        }
    }
    pairs
}

/// doc_id -> (cluster_id, size, keep)
pub fn read_clusters(out: &Path) -> BTreeMap<u64, (i64, u32, bool)> {
    let mut rows = BTreeMap::new();
    for b in read_parts(&out.join("clusters")) {
        let d = b
            .column_by_name("doc_id")
            .unwrap()
            .as_primitive::<UInt64Type>();
        let c = b
            .column_by_name("cluster_id")
            .unwrap()
            .as_primitive::<Int64Type>();
        let s = b
            .column_by_name("cluster_size")
            .unwrap()
            .as_primitive::<UInt32Type>();
        let k = b.column_by_name("keep").unwrap().as_boolean();
        for i in 0..b.num_rows() {
            assert!(
                rows.insert(d.value(i), (c.value(i), s.value(i), k.value(i)))
                    .is_none(),
                "doc {} twice",
                d.value(i)
            );
        }
    }
    rows
}

/// Every row of every part of the table in `dir`, each a line of its columns' names and
/// values, sorted: two runs' tables compare equal whatever rows each part holds.
pub fn table_rows(dir: &Path) -> Vec<String> {
    use arrow::util::display::array_value_to_string;
    let mut rows = Vec::new();
    for b in read_parts(dir) {
        let schema = b.schema();
        // Times as their numbers (a time zone would need chrono-tz to print).
        let columns: Vec<arrow::array::ArrayRef> = b
            .columns()
            .iter()
            .map(|c| match c.data_type() {
                arrow::datatypes::DataType::Timestamp(_, _) => {
                    arrow::compute::cast(c, &arrow::datatypes::DataType::Int64).unwrap()
                }
                _ => c.clone(),
            })
            .collect();
        for i in 0..b.num_rows() {
            let row: Vec<String> = (0..b.num_columns())
                .map(|c| {
                    let value = array_value_to_string(&columns[c], i).unwrap();
                    format!("{}={value}", schema.field(c).name())
                })
                .collect();
            rows.push(row.join(" "));
        }
    }
    rows.sort();
    rows
}
