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

/// A WARC (`dir/site.warc.gz`) of two hosts, for site templates (issue 38): twenty pages of
/// `docs.example` that share ten long template lines (no markup names them boilerplate),
/// each with a short text of its own, and one story of `news.example` under eight URLs.
pub fn template_site(dir: &Path) -> PathBuf {
    use neardup_io::web::testing::{gzip_members, http, warc};
    let template = [
        "Welcome to the example documentation site for every version of the tool",
        "This manual is maintained by the example project and its many contributors",
        "Report problems with these pages to the project tracker on the main site",
        "All text is available under the terms of the free documentation licence",
        "Built with a static site generator from sources kept in version control",
        "Search the whole manual from the box at the top of every page of the site",
        "Older versions of this manual are kept in the archive of earlier releases",
        "Translations of these pages into other languages are welcome from readers",
        "The project thanks its sponsors for the servers that host these documents",
        "Every page of this manual can be printed or saved for reading without a network",
    ];
    let words = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra",
        "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
    ];
    let mut records = Vec::new();
    for page in 0..20usize {
        let own: Vec<&str> = (0..9)
            .map(|i| words[(page * 7 + i * i * 3 + i) % 26])
            .collect();
        let html = format!(
            "<html><head><title>Page {page}</title></head><body>{}<div><p>Page {page} says {}.</p></div></body></html>",
            template.map(|l| format!("<div>{l}</div>")).concat(),
            own.join(" ")
        );
        let url = format!("http://docs.example/page{page}.html");
        records.push(warc(
            "response",
            Some(&url),
            "application/http; msgtype=response",
            &http(200, "text/html", html.as_bytes()),
        ));
    }
    let article = "<p>One article of the news site, long enough to be a page of its own, found under several addresses that no rule folds into one.</p>";
    for copy in 0..8 {
        let url = format!("http://news.example/story?ref={copy}");
        records.push(warc(
            "response",
            Some(&url),
            "application/http; msgtype=response",
            &http(200, "text/html", article.as_bytes()),
        ));
    }
    let path = dir.join("site.warc.gz");
    std::fs::write(&path, gzip_members(&records)).unwrap();
    path
}
