//! Generating test corpora: records, JSON lines, compressed and Parquet files, and the one
//! seeded random generator of the tests ([`SeededRng`], shared with the other crates' tests
//! through `neardup_core::testing`).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use arrow::array::{ArrayRef, RecordBatch};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use serde_json::{json, Value};

pub use neardup_core::testing::SeededRng;

/// One input record.
#[derive(Clone, Debug)]
pub struct Doc {
    pub id: Value,
    pub text: String,
}

pub fn doc(id: impl Into<Value>, text: impl Into<String>) -> Doc {
    Doc {
        id: id.into(),
        text: text.into(),
    }
}

/// JSON lines `{"id": ..., "text": ...}` of `docs`.
pub fn jsonl(docs: &[Doc]) -> Vec<u8> {
    jsonl_values(
        &docs
            .iter()
            .map(|d| json!({"id": d.id, "text": d.text}))
            .collect::<Vec<_>>(),
    )
}

/// JSON lines, serialized by serde_json so every escape is right.
pub fn jsonl_values(records: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        serde_json::to_writer(&mut out, r).unwrap();
        out.push(b'\n');
    }
    out
}

/// Writes one JSON line `{"id": id, "text": text}`.
pub fn jsonl_line(out: &mut impl Write, id: u64, text: &str) {
    serde_json::to_writer(&mut *out, &json!({"id": id, "text": text})).unwrap();
    out.write_all(b"\n").unwrap();
}

/// Every file and directory under `dir` with its contents (empty for a directory), sorted: equal
/// snapshots before and after a command show it changed nothing there.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.push((path.clone(), Vec::new()));
            files.extend(snapshot(&path));
        } else {
            files.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    files.sort();
    files
}

pub fn write(path: &Path, bytes: &[u8]) -> PathBuf {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(path, bytes).unwrap();
    path.to_path_buf()
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

pub fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::encode_all(data, 3).unwrap()
}

/// Writes a Parquet file with row groups of `row_group_rows`.
pub fn write_parquet(path: &Path, columns: Vec<(&str, ArrayRef)>, row_group_rows: usize) {
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(row_group_rows))
        .build();
    let mut writer =
        ArrowWriter::try_new(File::create(path).unwrap(), batch.schema(), Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

/// Writes a Parquet file of one row group whose columns use `codec`.
pub fn write_parquet_with(
    path: &Path,
    columns: Vec<(&str, ArrayRef)>,
    codec: parquet::basic::Compression,
) {
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let props = WriterProperties::builder().set_compression(codec).build();
    let mut writer =
        ArrowWriter::try_new(File::create(path).unwrap(), batch.schema(), Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}
