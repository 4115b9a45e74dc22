//! Helpers the end-to-end tests share: reading a run's output tables.
// Each test binary uses some of these, never all.
#![allow(dead_code)]

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{ArrayRef, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;

/// A temporary path as the `&str` a command line takes.
pub fn s(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

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
