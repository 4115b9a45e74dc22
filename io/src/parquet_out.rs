//! The output tables, written as part files committed atomically.
//!
//! Each worker writes its own part file of each table, `part-00003.parquet`,
//! so workers never coordinate on a file. A part is written under a hidden
//! temporary name (`.part-00003.parquet.tmp`) and renamed into place only
//! after its footer is written and the data is synced to disk; readers that
//! glob `*.parquet` (Spark, DuckDB, Polars, or [`crate::input`]) therefore
//! never see a half-written part, and a crashed run leaves no file that looks
//! complete. A [`PartWriter`] dropped without [`PartWriter::commit`] deletes
//! its temporary file.
//!
//! Small files (`summary.json`, `_SUCCESS`) go through
//! [`crate::atomic::write_atomically`], which follows the same write–sync–rename protocol.
//!
//! # Schemas
//!
//! Columns are listed in file order; every column is non-nullable unless
//! marked nullable.
//!
//! **fingerprints** ([`FingerprintRow`]): one row per input document.
//!
//! | column     | type    | meaning |
//! |------------|---------|---------|
//! | `doc_id`   | UInt64  | the document's number, unique within the run |
//! | `id`       | Utf8, nullable | the document's own id field, if one was read |
//! | `source`   | Utf8    | the input file it came from |
//! | `record`   | UInt64  | its 0-based record number in that file: JSONL line - 1, or Parquet row |
//! | `simhash`  | UInt64  | its 64-bit simhash |
//! | `n_tokens` | UInt32  | number of tokens hashed |
//! | `bytes`    | UInt64  | length of the text in bytes |
//! | `empty`    | Boolean | true if the text had no tokens |
//! | `url`, `host`, `fetched_at`, `offset`, `length` | nullable | where it came from (see [`FingerprintRow`]) |
//! | `url_normalized` | Utf8, nullable | `url` after `--url-normalize` (`neardup_core::urlnorm`) |
//!
//! **pairs** ([`PairRow`]): one row per duplicate pair found.
//!
//! | column    | type    | meaning |
//! |-----------|---------|---------|
//! | `doc_a`   | UInt64  | the first document |
//! | `doc_b`   | UInt64  | the second document |
//! | `hamming` | UInt8   | Hamming distance of their simhashes |
//! | `kind`    | Utf8    | `"exact"`, `"near"` or `"url"` (the same normalized URL) |
//! | `jaccard` | Float32, nullable | verified token Jaccard similarity, if computed |
//!
//! **clusters** ([`ClusterRow`]): one row per document in a duplicate cluster.
//!
//! | column         | type    | meaning |
//! |----------------|---------|---------|
//! | `doc_id`       | UInt64  | the document |
//! | `cluster_id`   | Int64   | its cluster |
//! | `cluster_size` | UInt32  | number of documents in the cluster |
//! | `keep`         | Boolean | true for the one document of the cluster to keep |
//!
//! **mirrors** ([`MirrorRow`]) and **hosts** ([`HostRow`]): mirror hosts, see
//! `neardup_core::mirrors` and docs/outputs.md.
//!
//! # Table metadata
//!
//! Every part carries, in its Parquet key-value metadata, what it is and what made it, so that
//! a table read back later cannot be mistaken for another (MinHash fingerprints searched as
//! simhashes, a `pairs/` part of one run beside the `clusters/` of another):
//!
//! | key | value |
//! |---|---|
//! | `neardup.format` | [`TABLE_FORMAT`], the layout and meaning of neardup's tables; readers refuse any other |
//! | `neardup.version` | the neardup version that wrote it (for people; never checked) |
//! | `neardup.table` | [`OutputRow::TABLE`]: `fingerprints`, `pairs`, `clusters`, `mirrors`, `hosts` or `removed` |
//! | `neardup.scheme` | the fingerprint scheme: `simhash-doc`, `simhash-shingles`, `minhash`, or `unknown` (a search over fingerprints without metadata) |
//! | `neardup.params` | JSON: `{"fingerprint": {...}}` (what defines a fingerprint) and, for the tables a search makes, `"search": {...}` (k, tables, verification, ...) |
//!
//! The writer is given a [`TableMeta`] (scheme and parameters) and adds the rest itself; a
//! reader gets a [`TableTag`] back with [`TableTag::of_file`], or `None` for a table written
//! by another tool (a user's own `doc_id`/`simhash` Parquet), which readers accept as before.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Float32Array, Float64Array, Int64Array, StringArray,
    TimestampMicrosecondArray, UInt32Array, UInt64Array, UInt8Array,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::atomic::sync_parent;
use crate::error::IoError;

/// Rows buffered by a [`PartWriter`] before they are converted to one Arrow
/// [`RecordBatch`] and handed to the Parquet writer.
pub const DEFAULT_BATCH_ROWS: usize = 8 * 1024;

/// Maximum rows per Parquet row group. Large groups compress well and keep
/// the footer small; readers shard work by row group, and a million rows of
/// these narrow tables is only tens of megabytes.
pub const DEFAULT_ROW_GROUP_ROWS: usize = 1_000_000;

/// zstd level for all output: level 3 (zstd's default) compresses hashes and
/// ids well at a speed that keeps writing off the critical path.
pub const ZSTD_LEVEL: i32 = 3;

/// One row of the fingerprints table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FingerprintRow {
    pub doc_id: u64,
    pub id: Option<String>,
    pub source: String,
    pub record: u64,
    pub simhash: u64,
    pub n_tokens: u32,
    pub bytes: u64,
    pub empty: bool,
    /// Where the document came from (web archives, `--url-field`, `--time-field`); null
    /// when the input does not say. See [`crate::record::Origin`].
    pub url: Option<String>,
    pub host: Option<String>,
    /// Microseconds since the Unix epoch, UTC (a Parquet timestamp).
    pub fetched_at: Option<i64>,
    pub offset: Option<u64>,
    pub length: Option<u64>,
    /// `url` normalized by `--url-normalize` (see `neardup_core::urlnorm`); null when the
    /// document has no URL or it does not parse.
    pub url_normalized: Option<String>,
}

/// Whether a pair is byte-identical after normalisation or merely close.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PairKind {
    Exact,
    Near,
    /// The same normalized URL (`--url-normalize`), whatever the content.
    Url,
}

impl PairKind {
    /// The value written to the `kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            PairKind::Exact => "exact",
            PairKind::Near => "near",
            PairKind::Url => "url",
        }
    }
}

/// One row of the pairs table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairRow {
    pub doc_a: u64,
    pub doc_b: u64,
    pub hamming: u8,
    pub kind: PairKind,
    pub jaccard: Option<f32>,
}

/// One row of the clusters table.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClusterRow {
    pub doc_id: u64,
    pub cluster_id: i64,
    pub cluster_size: u32,
    pub keep: bool,
}

/// The committed name of part `part` of a table (in a run directory's table folder).
pub fn part_file_name(part: usize) -> String {
    format!("part-{part:05}.parquet")
}

/// The layout and meaning of neardup's tables, written into every part as `neardup.format`.
/// Bumped whenever a column changes its meaning or type (the numbering of documents, what
/// `simhash` holds, ...): a reader refuses every format but its own rather than misread one.
pub const TABLE_FORMAT: u32 = 1;

/// The metadata keys (see the module docs, "Table metadata").
pub const KEY_FORMAT: &str = "neardup.format";
pub const KEY_VERSION: &str = "neardup.version";
pub const KEY_TABLE: &str = "neardup.table";
pub const KEY_SCHEME: &str = "neardup.scheme";
pub const KEY_PARAMS: &str = "neardup.params";

/// The parts of `neardup.params`: what defines a fingerprint, and how a search used them.
pub const PARAM_FINGERPRINT: &str = "fingerprint";
pub const PARAM_SEARCH: &str = "search";
/// `fingerprint.method`: `simhash` or `minhash` (what the `simhash` column holds).
pub const PARAM_METHOD: &str = "method";

/// The scheme recorded for a table of documents, which holds no fingerprints
/// (`neardup extract`).
pub const NO_SCHEME: &str = "none";
/// The parameters of `neardup extract`: how records became text.
pub const PARAM_EXTRACT: &str = "extract";

/// The scheme recorded for a search over fingerprints that carry no metadata.
pub const UNKNOWN_SCHEME: &str = "unknown";

/// The neardup version that writes tables (the workspace's one version).
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What made a table: the fingerprint scheme and the parameters (a JSON object, see the
/// module docs). Every [`PartWriter`] is given one.
#[derive(Debug, Clone, PartialEq)]
pub struct TableMeta {
    pub scheme: String,
    pub params: Value,
}

impl TableMeta {
    /// The key-value metadata of a part of table `table`.
    fn key_values(&self, table: &str) -> Vec<KeyValue> {
        [
            (KEY_FORMAT, TABLE_FORMAT.to_string()),
            (KEY_VERSION, VERSION.to_string()),
            (KEY_TABLE, table.to_string()),
            (KEY_SCHEME, self.scheme.clone()),
            (KEY_PARAMS, self.params.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| KeyValue::new(k.to_string(), v))
        .collect()
    }
}

/// The metadata of the tests' tables: simhash-doc fingerprints, searched at k = 3.
#[cfg(test)]
pub(crate) fn test_meta() -> TableMeta {
    TableMeta {
        scheme: "simhash-doc".into(),
        params: serde_json::json!({
            PARAM_FINGERPRINT: {PARAM_METHOD: "simhash", "features": "words"},
            PARAM_SEARCH: {"k": 3},
        }),
    }
}

/// A neardup table's metadata, as read back from a file.
#[derive(Debug, Clone, PartialEq)]
pub struct TableTag {
    /// Which table: `fingerprints`, `pairs`, `clusters`, `removed`.
    pub table: String,
    /// The neardup version that wrote it.
    pub version: String,
    pub meta: TableMeta,
}

impl TableTag {
    /// The tag in a file's key-value metadata: `None` when it has no `neardup.` key (a table
    /// another tool wrote). A table of another [`TABLE_FORMAT`], or with some of the keys
    /// missing or unreadable, is an error naming the file.
    pub fn from_key_values(
        path: &Path,
        key_values: Option<&Vec<KeyValue>>,
    ) -> Result<Option<TableTag>, IoError> {
        let get = |key: &str| {
            key_values
                .into_iter()
                .flatten()
                .find(|kv| kv.key == key)
                .and_then(|kv| kv.value.clone())
        };
        let tagged = key_values
            .into_iter()
            .flatten()
            .any(|kv| kv.key.starts_with("neardup."));
        if !tagged {
            return Ok(None);
        }
        let damaged = |reason: String| IoError::BadTableMeta {
            path: path.to_path_buf(),
            reason,
        };
        let required = |key: &str| get(key).ok_or_else(|| damaged(format!("no {key}")));
        let format = required(KEY_FORMAT)?;
        let version = get(KEY_VERSION).unwrap_or_else(|| "unknown".to_string());
        if format != TABLE_FORMAT.to_string() {
            return Err(IoError::TableFormat {
                path: path.to_path_buf(),
                found: format,
                version,
                reads: TABLE_FORMAT,
            });
        }
        let table = required(KEY_TABLE)?;
        let scheme = required(KEY_SCHEME)?;
        let params_text = required(KEY_PARAMS)?;
        let params: Value = serde_json::from_str(&params_text)
            .map_err(|e| damaged(format!("{KEY_PARAMS} is not JSON: {e}")))?;
        if !params.is_object() {
            return Err(damaged(format!("{KEY_PARAMS} is not a JSON object")));
        }
        Ok(Some(TableTag {
            table,
            version,
            meta: TableMeta { scheme, params },
        }))
    }

    /// Reads the tag from the footer of the Parquet file at `path`.
    pub fn of_file(path: &Path) -> Result<Option<TableTag>, IoError> {
        let file = File::open(path).map_err(|source| IoError::Open {
            path: path.to_path_buf(),
            cause: source,
        })?;
        let reader = parquet::file::serialized_reader::SerializedFileReader::new(file).map_err(
            |source| IoError::Parquet {
                path: path.to_path_buf(),
                cause: source,
            },
        )?;
        use parquet::file::reader::FileReader;
        Self::from_key_values(path, reader.metadata().file_metadata().key_value_metadata())
    }

    /// Refuses a tag of another table than `expected` (a `pairs/` part read as clusters).
    pub fn expect_table(&self, path: &Path, expected: &'static str) -> Result<(), IoError> {
        if self.table == expected {
            return Ok(());
        }
        Err(IoError::WrongTable {
            path: path.to_path_buf(),
            found: self.table.clone(),
            expected,
        })
    }

    /// Refuses a table made differently from `other` (the tag of `other_path`): another
    /// scheme, or other parameters under `part` of `neardup.params` (`"fingerprint"`, or
    /// `None` for all of them). Tables that are read together must agree.
    pub fn expect_same_origin(
        &self,
        path: &Path,
        other: &TableTag,
        other_path: &Path,
        part: Option<&str>,
    ) -> Result<(), IoError> {
        if self.meta.scheme != other.meta.scheme {
            return Err(IoError::WrongScheme {
                path: path.to_path_buf(),
                found: self.meta.scheme.clone(),
                expected: other.meta.scheme.clone(),
                why: format!(
                    "as in {}: tables made by different schemes cannot be used together",
                    other_path.display()
                ),
            });
        }
        let pick = |tag: &TableTag| match part {
            Some(key) => tag.meta.params.get(key).cloned().unwrap_or(Value::Null),
            None => tag.meta.params.clone(),
        };
        let differences = differences(&pick(self), &pick(other));
        if differences.is_empty() {
            return Ok(());
        }
        Err(IoError::WrongParams {
            path: path.to_path_buf(),
            other: other_path.to_path_buf(),
            differences,
        })
    }
}

/// The parameters that differ between two `neardup.params` values, as `name (a vs b)`,
/// nested names joined by dots.
fn differences(a: &Value, b: &Value) -> Vec<String> {
    fn walk(prefix: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
                keys.sort();
                keys.dedup();
                for key in keys {
                    let name = if prefix.is_empty() {
                        key.clone()
                    } else {
                        format!("{prefix}.{key}")
                    };
                    let (va, vb) = (
                        x.get(key).unwrap_or(&Value::Null),
                        y.get(key).unwrap_or(&Value::Null),
                    );
                    walk(&name, va, vb, out);
                }
            }
            _ if a != b => out.push(format!("{prefix} ({a} vs {b})")),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk("", a, b, &mut out);
    out
}

/// A row type that can be written as a Parquet table.
pub trait OutputRow: Sized {
    /// The table's name in its metadata (`neardup.table`).
    const TABLE: &'static str;
    /// The table's Arrow schema.
    fn schema() -> SchemaRef;
    /// Converts rows into one batch with [`OutputRow::schema`].
    fn to_batch(rows: &[Self]) -> Result<RecordBatch, ArrowError>;
}

fn field(name: &str, data_type: DataType, nullable: bool) -> Field {
    Field::new(name, data_type, nullable)
}

/// Builds one column from a field of every row.
fn column<R, T, A>(rows: &[R], get: impl Fn(&R) -> T) -> ArrayRef
where
    A: From<Vec<T>> + arrow::array::Array + 'static,
{
    Arc::new(A::from(rows.iter().map(get).collect::<Vec<T>>()))
}

/// Where a document came from, as fingerprints/ and documents/ both write it.
struct Origin<'a> {
    url: Option<&'a str>,
    host: Option<&'a str>,
    fetched_at: Option<i64>,
    offset: Option<u64>,
    length: Option<u64>,
}

/// The columns of [`Origin`]: `url`, `host`, `fetched_at` (microseconds, UTC), `offset`,
/// `length`, all nullable.
fn origin_fields() -> [Field; 5] {
    [
        field("url", DataType::Utf8, true),
        field("host", DataType::Utf8, true),
        field(
            "fetched_at",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        field("offset", DataType::UInt64, true),
        field("length", DataType::UInt64, true),
    ]
}

/// The arrays of [`origin_fields`] for `rows`.
fn origin_columns<R>(rows: &[R], get: impl Fn(&R) -> Origin<'_>) -> [ArrayRef; 5] {
    let origins: Vec<Origin> = rows.iter().map(get).collect();
    let fetched = origins.iter().map(|o| o.fetched_at).collect::<Vec<_>>();
    [
        Arc::new(origins.iter().map(|o| o.url).collect::<StringArray>()),
        Arc::new(origins.iter().map(|o| o.host).collect::<StringArray>()),
        Arc::new(TimestampMicrosecondArray::from(fetched).with_timezone("UTC")),
        Arc::new(origins.iter().map(|o| o.offset).collect::<UInt64Array>()),
        Arc::new(origins.iter().map(|o| o.length).collect::<UInt64Array>()),
    ]
}

impl OutputRow for FingerprintRow {
    const TABLE: &'static str = "fingerprints";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(
            vec![
                field("doc_id", DataType::UInt64, false),
                field("id", DataType::Utf8, true),
                field("source", DataType::Utf8, false),
                field("record", DataType::UInt64, false),
                field("simhash", DataType::UInt64, false),
                field("n_tokens", DataType::UInt32, false),
                field("bytes", DataType::UInt64, false),
                field("empty", DataType::Boolean, false),
            ]
            .into_iter()
            .chain(origin_fields())
            .chain([field("url_normalized", DataType::Utf8, true)])
            .collect::<Vec<_>>(),
        ))
    }

    fn to_batch(rows: &[Self]) -> Result<RecordBatch, ArrowError> {
        let ids: StringArray = rows.iter().map(|r| r.id.as_deref()).collect();
        let sources: StringArray = rows.iter().map(|r| Some(r.source.as_str())).collect();
        let mut columns = vec![
            column::<_, _, UInt64Array>(rows, |r| r.doc_id),
            Arc::new(ids),
            Arc::new(sources),
            column::<_, _, UInt64Array>(rows, |r| r.record),
            column::<_, _, UInt64Array>(rows, |r| r.simhash),
            column::<_, _, UInt32Array>(rows, |r| r.n_tokens),
            column::<_, _, UInt64Array>(rows, |r| r.bytes),
            column::<_, _, BooleanArray>(rows, |r| r.empty),
        ];
        columns.extend(origin_columns(rows, |r| Origin {
            url: r.url.as_deref(),
            host: r.host.as_deref(),
            fetched_at: r.fetched_at,
            offset: r.offset,
            length: r.length,
        }));
        columns.push(Arc::new(
            rows.iter()
                .map(|r| r.url_normalized.as_deref())
                .collect::<StringArray>(),
        ));
        RecordBatch::try_new(Self::schema(), columns)
    }
}

/// One row of `neardup extract`'s `documents.parquet`: a document as extracted, with where
/// it came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DocumentRow {
    pub source: String,
    pub record: u64,
    pub url: Option<String>,
    pub host: Option<String>,
    pub fetched_at: Option<i64>,
    pub offset: Option<u64>,
    pub length: Option<u64>,
    pub content_type: Option<String>,
    pub charset: Option<String>,
    pub title: Option<String>,
    pub text: String,
}

impl OutputRow for DocumentRow {
    const TABLE: &'static str = "documents";
    fn schema() -> SchemaRef {
        Arc::new(Schema::new(
            vec![
                field("source", DataType::Utf8, false),
                field("record", DataType::UInt64, false),
            ]
            .into_iter()
            .chain(origin_fields())
            .chain([
                field("content_type", DataType::Utf8, true),
                field("charset", DataType::Utf8, true),
                field("title", DataType::Utf8, true),
                field("text", DataType::Utf8, false),
            ])
            .collect::<Vec<_>>(),
        ))
    }

    fn to_batch(rows: &[Self]) -> Result<RecordBatch, ArrowError> {
        let strings = |get: &dyn Fn(&DocumentRow) -> Option<&str>| -> ArrayRef {
            Arc::new(rows.iter().map(get).collect::<StringArray>())
        };
        let mut columns = vec![
            strings(&|r| Some(r.source.as_str())),
            column::<_, _, UInt64Array>(rows, |r| r.record),
        ];
        columns.extend(origin_columns(rows, |r| Origin {
            url: r.url.as_deref(),
            host: r.host.as_deref(),
            fetched_at: r.fetched_at,
            offset: r.offset,
            length: r.length,
        }));
        columns.extend([
            strings(&|r| r.content_type.as_deref()),
            strings(&|r| r.charset.as_deref()),
            strings(&|r| r.title.as_deref()),
            strings(&|r| Some(r.text.as_str())),
        ]);
        RecordBatch::try_new(Self::schema(), columns)
    }
}

impl OutputRow for PairRow {
    const TABLE: &'static str = "pairs";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            field("doc_a", DataType::UInt64, false),
            field("doc_b", DataType::UInt64, false),
            field("hamming", DataType::UInt8, false),
            field("kind", DataType::Utf8, false),
            field("jaccard", DataType::Float32, true),
        ]))
    }

    fn to_batch(rows: &[Self]) -> Result<RecordBatch, ArrowError> {
        let kinds: StringArray = rows.iter().map(|r| Some(r.kind.as_str())).collect();
        RecordBatch::try_new(
            Self::schema(),
            vec![
                column::<_, _, UInt64Array>(rows, |r| r.doc_a),
                column::<_, _, UInt64Array>(rows, |r| r.doc_b),
                column::<_, _, UInt8Array>(rows, |r| r.hamming),
                Arc::new(kinds),
                column::<_, _, Float32Array>(rows, |r| r.jaccard),
            ],
        )
    }
}

impl OutputRow for ClusterRow {
    const TABLE: &'static str = "clusters";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            field("doc_id", DataType::UInt64, false),
            field("cluster_id", DataType::Int64, false),
            field("cluster_size", DataType::UInt32, false),
            field("keep", DataType::Boolean, false),
        ]))
    }

    fn to_batch(rows: &[Self]) -> Result<RecordBatch, ArrowError> {
        RecordBatch::try_new(
            Self::schema(),
            vec![
                column::<_, _, UInt64Array>(rows, |r| r.doc_id),
                column::<_, _, Int64Array>(rows, |r| r.cluster_id),
                column::<_, _, UInt32Array>(rows, |r| r.cluster_size),
                column::<_, _, BooleanArray>(rows, |r| r.keep),
            ],
        )
    }
}

/// One row of `mirrors/`: `host_b/prefix_b/p` copies `host_a/prefix_a/p` for
/// `shared_paths` paths `p` (see `neardup_core::mirrors`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MirrorRow {
    pub host_a: String,
    pub prefix_a: String,
    pub host_b: String,
    pub prefix_b: String,
    pub shared_paths: u64,
    pub paths_a: u64,
    pub paths_b: u64,
    pub share_a: f64,
    pub share_b: f64,
    pub identical_paths: u64,
    pub near_paths: u64,
    /// `mirror` or `partial`.
    pub verdict: String,
}

impl OutputRow for MirrorRow {
    const TABLE: &'static str = "mirrors";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            field("host_a", DataType::Utf8, false),
            field("prefix_a", DataType::Utf8, false),
            field("host_b", DataType::Utf8, false),
            field("prefix_b", DataType::Utf8, false),
            field("shared_paths", DataType::UInt64, false),
            field("paths_a", DataType::UInt64, false),
            field("paths_b", DataType::UInt64, false),
            field("share_a", DataType::Float64, false),
            field("share_b", DataType::Float64, false),
            field("identical_paths", DataType::UInt64, false),
            field("near_paths", DataType::UInt64, false),
            field("verdict", DataType::Utf8, false),
        ]))
    }

    fn to_batch(rows: &[Self]) -> Result<RecordBatch, ArrowError> {
        let strings = |get: &dyn Fn(&MirrorRow) -> &str| -> ArrayRef {
            Arc::new(rows.iter().map(|r| Some(get(r))).collect::<StringArray>())
        };
        RecordBatch::try_new(
            Self::schema(),
            vec![
                strings(&|r| &r.host_a),
                strings(&|r| &r.prefix_a),
                strings(&|r| &r.host_b),
                strings(&|r| &r.prefix_b),
                column::<_, _, UInt64Array>(rows, |r| r.shared_paths),
                column::<_, _, UInt64Array>(rows, |r| r.paths_a),
                column::<_, _, UInt64Array>(rows, |r| r.paths_b),
                column::<_, _, Float64Array>(rows, |r| r.share_a),
                column::<_, _, Float64Array>(rows, |r| r.share_b),
                column::<_, _, UInt64Array>(rows, |r| r.identical_paths),
                column::<_, _, UInt64Array>(rows, |r| r.near_paths),
                strings(&|r| &r.verdict),
            ],
        )
    }
}

/// One row of `hosts/`: a host of the documents' URLs and its mirror group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRow {
    pub host: String,
    /// Documents whose (normalized) URL has this host.
    pub documents: u64,
    /// Distinct paths among them.
    pub paths: u64,
    /// The canonical host of its mirror group (itself when it mirrors no host).
    pub canonical_host: String,
    /// Hosts in its mirror group (1 when it mirrors no host).
    pub group_size: u64,
}

impl OutputRow for HostRow {
    const TABLE: &'static str = "hosts";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            field("host", DataType::Utf8, false),
            field("documents", DataType::UInt64, false),
            field("paths", DataType::UInt64, false),
            field("canonical_host", DataType::Utf8, false),
            field("group_size", DataType::UInt64, false),
        ]))
    }

    fn to_batch(rows: &[Self]) -> Result<RecordBatch, ArrowError> {
        RecordBatch::try_new(
            Self::schema(),
            vec![
                Arc::new(
                    rows.iter()
                        .map(|r| Some(r.host.as_str()))
                        .collect::<StringArray>(),
                ),
                column::<_, _, UInt64Array>(rows, |r| r.documents),
                column::<_, _, UInt64Array>(rows, |r| r.paths),
                Arc::new(
                    rows.iter()
                        .map(|r| Some(r.canonical_host.as_str()))
                        .collect::<StringArray>(),
                ),
                column::<_, _, UInt64Array>(rows, |r| r.group_size),
            ],
        )
    }
}

/// One document removed by deduplication, and the document kept in its place
/// (`removed.parquet` beside a deduplicated corpus).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemovedRow {
    pub doc_id: u64,
    pub id: Option<String>,
    pub kept_doc_id: u64,
    pub kept_id: Option<String>,
    /// Hamming distance of the two simhashes.
    pub hamming: u8,
    /// Exact Jaccard of the two, when they were a verified pair.
    pub jaccard: Option<f32>,
}

impl OutputRow for RemovedRow {
    const TABLE: &'static str = "removed";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            field("doc_id", DataType::UInt64, false),
            field("id", DataType::Utf8, true),
            field("kept_doc_id", DataType::UInt64, false),
            field("kept_id", DataType::Utf8, true),
            field("hamming", DataType::UInt8, false),
            field("jaccard", DataType::Float32, true),
        ]))
    }

    fn to_batch(rows: &[Self]) -> Result<RecordBatch, ArrowError> {
        RecordBatch::try_new(
            Self::schema(),
            vec![
                column::<_, _, UInt64Array>(rows, |r| r.doc_id),
                Arc::new(StringArray::from(
                    rows.iter().map(|r| r.id.as_deref()).collect::<Vec<_>>(),
                )),
                column::<_, _, UInt64Array>(rows, |r| r.kept_doc_id),
                Arc::new(StringArray::from(
                    rows.iter()
                        .map(|r| r.kept_id.as_deref())
                        .collect::<Vec<_>>(),
                )),
                column::<_, _, UInt8Array>(rows, |r| r.hamming),
                column::<_, _, Float32Array>(rows, |r| r.jaccard),
            ],
        )
    }
}

/// Columns of document numbers: nearly unique and mostly increasing within a part, so a
/// dictionary only costs time (it fills up and falls back), while deltas pack them into a
/// few bits each. Every reader we document (DuckDB, pyarrow, Polars, Spark) decodes
/// DELTA_BINARY_PACKED.
const DELTA_COLUMNS: [&str; 5] = ["doc_id", "doc_a", "doc_b", "kept_doc_id", "record"];

/// Columns of random 64-bit values: no dictionary, plain values.
const PLAIN_COLUMNS: [&str; 1] = ["simhash"];

/// The writer settings shared by all tables, with the key-value metadata `key_values`.
fn writer_properties(
    key_values: Vec<KeyValue>,
) -> Result<WriterProperties, parquet::errors::ParquetError> {
    let mut builder = WriterProperties::builder()
        .set_key_value_metadata(Some(key_values))
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(ZSTD_LEVEL)?))
        .set_max_row_group_row_count(Some(DEFAULT_ROW_GROUP_ROWS));
    for name in DELTA_COLUMNS {
        builder = builder
            .set_column_dictionary_enabled(ColumnPath::from(name), false)
            .set_column_encoding(ColumnPath::from(name), Encoding::DELTA_BINARY_PACKED);
    }
    for name in PLAIN_COLUMNS {
        builder = builder.set_column_dictionary_enabled(ColumnPath::from(name), false);
    }
    Ok(builder.build())
}

/// Writes one part file of a table; see the module docs for the protocol.
pub struct PartWriter<R: OutputRow> {
    tmp_path: PathBuf,
    final_path: PathBuf,
    writer: Option<ArrowWriter<File>>,
    buffer: Vec<R>,
    rows: u64,
    committed: bool,
}

impl<R: OutputRow> PartWriter<R> {
    /// Creates `dir` if needed and opens `dir/.part-{part:05}.parquet.{pid}.tmp`, a part
    /// whose metadata says `meta` (see "Table metadata" above).
    /// A stale temporary file from a crashed run is overwritten.
    pub fn create(dir: &Path, part: usize, meta: &TableMeta) -> Result<Self, IoError> {
        Self::create_file(&dir.join(part_file_name(part)), meta)
    }

    /// Opens a hidden temporary file beside `final_path`, renamed to it on commit: for a
    /// table that is a single file.
    pub fn create_file(final_path: &Path, meta: &TableMeta) -> Result<Self, IoError> {
        let dir = final_path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(|source| IoError::Write {
            path: dir.to_path_buf(),
            cause: source,
        })?;
        let name = final_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let final_path = final_path.to_path_buf();
        // Unique to this process (as `write_atomically`'s are): two runs can never write,
        // or rename, one another's temporary parts (`run_dir::temporary_of` reads the name).
        let tmp_path = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let file = File::create(&tmp_path).map_err(|source| IoError::Write {
            path: tmp_path.clone(),
            cause: source,
        })?;
        let parquet_err = |source| IoError::ParquetWrite {
            path: tmp_path.clone(),
            cause: source,
        };
        let props = writer_properties(meta.key_values(R::TABLE)).map_err(parquet_err)?;
        let writer = ArrowWriter::try_new(file, R::schema(), Some(props));
        let mut this = PartWriter {
            tmp_path: tmp_path.clone(),
            final_path,
            writer: None,
            buffer: Vec::with_capacity(DEFAULT_BATCH_ROWS),
            rows: 0,
            committed: false,
        };
        // Assigned after construction so that Drop removes the file on error.
        this.writer = Some(writer.map_err(parquet_err)?);
        Ok(this)
    }

    /// Buffers a row; every [`DEFAULT_BATCH_ROWS`] rows are written out.
    pub fn push(&mut self, row: R) -> Result<(), IoError> {
        self.buffer.push(row);
        self.rows += 1;
        if self.buffer.len() >= DEFAULT_BATCH_ROWS {
            self.write_buffer()?;
        }
        Ok(())
    }

    /// Rows pushed so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The path the part will have once committed.
    pub fn final_path(&self) -> &Path {
        &self.final_path
    }

    /// Writes the remaining rows and the footer, syncs the file and renames
    /// it to `part-{part:05}.parquet`, replacing any file of that name.
    /// Returns the final path.
    pub fn commit(mut self) -> Result<PathBuf, IoError> {
        self.write_buffer()?;
        let writer = self
            .writer
            .take()
            .ok_or_else(|| writer_closed(&self.tmp_path))?;
        let file = writer
            .into_inner()
            .map_err(|source| IoError::ParquetWrite {
                path: self.tmp_path.clone(),
                cause: source,
            })?;
        let write_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| IoError::Write {
                path,
                cause: source,
            }
        };
        file.sync_all().map_err(write_err(&self.tmp_path))?;
        drop(file);
        fs::rename(&self.tmp_path, &self.final_path).map_err(write_err(&self.final_path))?;
        self.committed = true;
        sync_parent(&self.final_path);
        Ok(self.final_path.clone())
    }

    fn write_buffer(&mut self) -> Result<(), IoError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let batch = R::to_batch(&self.buffer).map_err(|source| IoError::Arrow {
            path: self.tmp_path.clone(),
            cause: source,
        })?;
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| writer_closed(&self.tmp_path))?;
        writer
            .write(&batch)
            .map_err(|source| IoError::ParquetWrite {
                path: self.tmp_path.clone(),
                cause: source,
            })?;
        self.buffer.clear();
        Ok(())
    }
}

/// The writer is only taken by `commit`, which consumes the `PartWriter`, so
/// this cannot happen; it is an error rather than a panic all the same.
fn writer_closed(path: &Path) -> IoError {
    IoError::Write {
        path: path.to_path_buf(),
        cause: std::io::Error::other("Parquet writer already closed"),
    }
}

impl<R: OutputRow> Drop for PartWriter<R> {
    fn drop(&mut self) {
        if !self.committed {
            // Close our handle first; then the half-written part must go.
            drop(self.writer.take());
            let _ = fs::remove_file(&self.tmp_path);
        }
    }
}

/// One repeated passage of a document (`substrings/`): bytes `[start, end)` of its UTF-8
/// text, half-open; `id` is the document's id as written, when it has one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SubstringRow {
    pub doc_id: u64,
    pub id: Option<String>,
    pub start: u64,
    pub end: u64,
}

impl OutputRow for SubstringRow {
    const TABLE: &'static str = "substrings";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            field("doc_id", DataType::UInt64, false),
            field("id", DataType::Utf8, true),
            field("start", DataType::UInt64, false),
            field("end", DataType::UInt64, false),
        ]))
    }

    fn to_batch(rows: &[Self]) -> Result<RecordBatch, ArrowError> {
        RecordBatch::try_new(
            Self::schema(),
            vec![
                column::<_, _, UInt64Array>(rows, |r| r.doc_id),
                Arc::new(StringArray::from(
                    rows.iter().map(|r| r.id.as_deref()).collect::<Vec<_>>(),
                )),
                column::<_, _, UInt64Array>(rows, |r| r.start),
                column::<_, _, UInt64Array>(rows, |r| r.end),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Float32Type, Int64Type, UInt32Type, UInt64Type, UInt8Type};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    /// Reads a whole file back, checking the schema on the way.
    fn read_back<R: OutputRow>(path: &Path) -> (RecordBatch, usize) {
        let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
        let row_groups = builder.metadata().num_row_groups();
        assert_eq!(builder.schema().fields(), R::schema().fields());
        let batches: Vec<RecordBatch> = builder.build().unwrap().map(|b| b.unwrap()).collect();
        let batch = arrow::compute::concat_batches(&R::schema(), &batches).unwrap();
        (batch, row_groups)
    }

    fn tmp_files(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    fn fingerprint(i: u64) -> FingerprintRow {
        FingerprintRow {
            doc_id: i,
            id: (!i.is_multiple_of(3)).then(|| format!("id-{i}")),
            source: format!("in/{}.jsonl", i % 2),
            record: i + 1,
            simhash: i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            n_tokens: i as u32 * 2,
            bytes: i * 10,
            empty: i.is_multiple_of(5),
            url: i
                .is_multiple_of(2)
                .then(|| format!("http://h{}.example/{i}", i % 7)),
            host: i.is_multiple_of(2).then(|| format!("h{}.example", i % 7)),
            fetched_at: (!i.is_multiple_of(4)).then(|| i as i64 * 1_000_000 - 5),
            offset: i.is_multiple_of(2).then_some(i * 100),
            length: i.is_multiple_of(2).then_some(i + 3),
            url_normalized: i
                .is_multiple_of(2)
                .then(|| format!("http://h{}.example/{i}", i % 7)),
        }
    }

    #[test]
    fn fingerprints_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("fingerprints");
        let mut writer = PartWriter::<FingerprintRow>::create(&out, 3, &test_meta()).unwrap();
        assert_eq!(
            tmp_files(&out),
            [format!(".part-00003.parquet.{}.tmp", std::process::id())]
        );
        // More than one batch, so buffering and flushing are both exercised.
        let n = DEFAULT_BATCH_ROWS as u64 * 2 + 17;
        for i in 0..n {
            writer.push(fingerprint(i)).unwrap();
        }
        assert_eq!(writer.rows(), n);
        let path = writer.commit().unwrap();
        assert_eq!(path, out.join("part-00003.parquet"));
        assert!(tmp_files(&out).is_empty());

        let (batch, _) = read_back::<FingerprintRow>(&path);
        assert_eq!(batch.num_rows() as u64, n);
        let c = |i: usize| batch.column(i);
        for row in 0..batch.num_rows() {
            let ids = c(1).as_string::<i32>();
            let got = FingerprintRow {
                doc_id: c(0).as_primitive::<UInt64Type>().value(row),
                id: ids.is_valid(row).then(|| ids.value(row).to_owned()),
                source: c(2).as_string::<i32>().value(row).to_owned(),
                record: c(3).as_primitive::<UInt64Type>().value(row),
                simhash: c(4).as_primitive::<UInt64Type>().value(row),
                n_tokens: c(5).as_primitive::<UInt32Type>().value(row),
                bytes: c(6).as_primitive::<UInt64Type>().value(row),
                empty: c(7).as_boolean().value(row),
                url: c(8)
                    .as_string::<i32>()
                    .is_valid(row)
                    .then(|| c(8).as_string::<i32>().value(row).to_owned()),
                host: c(9)
                    .as_string::<i32>()
                    .is_valid(row)
                    .then(|| c(9).as_string::<i32>().value(row).to_owned()),
                fetched_at: c(10)
                    .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                    .is_valid(row)
                    .then(|| {
                        c(10)
                            .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                            .value(row)
                    }),
                offset: c(11)
                    .as_primitive::<UInt64Type>()
                    .is_valid(row)
                    .then(|| c(11).as_primitive::<UInt64Type>().value(row)),
                length: c(12)
                    .as_primitive::<UInt64Type>()
                    .is_valid(row)
                    .then(|| c(12).as_primitive::<UInt64Type>().value(row)),
                url_normalized: c(13)
                    .as_string::<i32>()
                    .is_valid(row)
                    .then(|| c(13).as_string::<i32>().value(row).to_owned()),
            };
            assert_eq!(got, fingerprint(row as u64));
        }
    }

    #[test]
    fn pairs_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let rows = vec![
            PairRow {
                doc_a: 1,
                doc_b: 2,
                hamming: 0,
                kind: PairKind::Exact,
                jaccard: None,
            },
            PairRow {
                doc_a: 3,
                doc_b: u64::MAX,
                hamming: 64,
                kind: PairKind::Near,
                jaccard: Some(0.75),
            },
        ];
        let mut writer = PartWriter::<PairRow>::create(dir.path(), 0, &test_meta()).unwrap();
        for row in rows.clone() {
            writer.push(row).unwrap();
        }
        let (batch, _) = read_back::<PairRow>(&writer.commit().unwrap());
        let c = |i: usize| batch.column(i);
        let got: Vec<PairRow> = (0..batch.num_rows())
            .map(|row| {
                let jaccard = c(4).as_primitive::<Float32Type>();
                PairRow {
                    doc_a: c(0).as_primitive::<UInt64Type>().value(row),
                    doc_b: c(1).as_primitive::<UInt64Type>().value(row),
                    hamming: c(2).as_primitive::<UInt8Type>().value(row),
                    kind: match c(3).as_string::<i32>().value(row) {
                        "exact" => PairKind::Exact,
                        "near" => PairKind::Near,
                        other => panic!("unexpected kind {other}"),
                    },
                    jaccard: jaccard.is_valid(row).then(|| jaccard.value(row)),
                }
            })
            .collect();
        assert_eq!(got, rows);
    }

    #[test]
    fn clusters_round_trip_in_row_groups_of_a_million() {
        let dir = tempfile::tempdir().unwrap();
        let n = DEFAULT_ROW_GROUP_ROWS as u64 + 5;
        let row = |i: u64| ClusterRow {
            doc_id: i,
            cluster_id: -(i as i64) / 3,
            cluster_size: (i % 7) as u32,
            keep: i.is_multiple_of(3),
        };
        let mut writer = PartWriter::<ClusterRow>::create(dir.path(), 12, &test_meta()).unwrap();
        for i in 0..n {
            writer.push(row(i)).unwrap();
        }
        let (batch, row_groups) = read_back::<ClusterRow>(&writer.commit().unwrap());
        assert_eq!(row_groups, 2);
        assert_eq!(batch.num_rows() as u64, n);
        let c = |i: usize| batch.column(i);
        for i in (0..n).step_by(9973).chain([n - 1]) {
            let r = i as usize;
            let got = ClusterRow {
                doc_id: c(0).as_primitive::<UInt64Type>().value(r),
                cluster_id: c(1).as_primitive::<Int64Type>().value(r),
                cluster_size: c(2).as_primitive::<UInt32Type>().value(r),
                keep: c(3).as_boolean().value(r),
            };
            assert_eq!(got, row(i));
        }
    }

    #[test]
    fn document_numbers_are_delta_encoded_and_fingerprints_plain() {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let dir = tempfile::tempdir().unwrap();
        let mut writer = PartWriter::<PairRow>::create(dir.path(), 0, &test_meta()).unwrap();
        for i in 0..10_000u64 {
            writer
                .push(PairRow {
                    doc_a: i,
                    doc_b: i + 1 + i % 5,
                    hamming: (i % 4) as u8,
                    kind: PairKind::Near,
                    jaccard: None,
                })
                .unwrap();
        }
        let path = writer.commit().unwrap();
        let reader = SerializedFileReader::new(fs::File::open(&path).unwrap()).unwrap();
        let group = reader.metadata().row_group(0);
        let encodings = |name: &str| {
            let column = (0..group.num_columns())
                .map(|i| group.column(i))
                .find(|c| c.column_path().string() == name)
                .expect("column");
            column.encodings().collect::<Vec<_>>()
        };
        for name in ["doc_a", "doc_b"] {
            let used = encodings(name);
            assert!(
                used.contains(&Encoding::DELTA_BINARY_PACKED),
                "{name}: {used:?}"
            );
            assert!(
                !used.contains(&Encoding::RLE_DICTIONARY),
                "{name}: {used:?}"
            );
        }
        // Small repeated values keep their dictionary.
        assert!(encodings("hamming").contains(&Encoding::RLE_DICTIONARY));

        let mut writer = PartWriter::<FingerprintRow>::create(dir.path(), 1, &test_meta()).unwrap();
        for i in 0..1000 {
            writer.push(fingerprint(i)).unwrap();
        }
        let path = writer.commit().unwrap();
        let reader = SerializedFileReader::new(fs::File::open(&path).unwrap()).unwrap();
        let group = reader.metadata().row_group(0);
        let simhash = (0..group.num_columns())
            .map(|i| group.column(i))
            .find(|c| c.column_path().string() == "simhash")
            .expect("simhash column");
        let used: Vec<_> = simhash.encodings().collect();
        assert!(!used.contains(&Encoding::RLE_DICTIONARY), "{used:?}");
    }

    #[test]
    fn dropped_writer_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = PartWriter::<ClusterRow>::create(dir.path(), 1, &test_meta()).unwrap();
        writer
            .push(ClusterRow {
                doc_id: 1,
                cluster_id: 1,
                cluster_size: 1,
                keep: true,
            })
            .unwrap();
        assert_eq!(tmp_files(dir.path()).len(), 1);
        drop(writer);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn empty_parts_are_valid_files() {
        let dir = tempfile::tempdir().unwrap();
        let writer = PartWriter::<PairRow>::create(dir.path(), 0, &test_meta()).unwrap();
        let (batch, _) = read_back::<PairRow>(&writer.commit().unwrap());
        assert_eq!(batch.num_rows(), 0);
    }

    /// Key-value pairs as a file would hold them.
    fn kv(pairs: &[(&str, &str)]) -> Vec<KeyValue> {
        pairs
            .iter()
            .map(|(k, v)| KeyValue::new(k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_part_says_what_it_is_and_what_made_it() {
        let dir = tempfile::tempdir().unwrap();
        let meta = test_meta();
        let fps = PartWriter::<FingerprintRow>::create(&dir.path().join("f"), 0, &meta).unwrap();
        let pairs = PartWriter::<PairRow>::create(&dir.path().join("p"), 0, &meta).unwrap();
        let clusters = PartWriter::<ClusterRow>::create(&dir.path().join("c"), 0, &meta).unwrap();
        let removed =
            PartWriter::<RemovedRow>::create_file(&dir.path().join("removed.parquet"), &meta)
                .unwrap();
        let paths = [
            fps.commit().unwrap(),
            pairs.commit().unwrap(),
            clusters.commit().unwrap(),
            removed.commit().unwrap(),
        ];
        for (path, table) in paths
            .iter()
            .zip(["fingerprints", "pairs", "clusters", "removed"])
        {
            let tag = TableTag::of_file(path).unwrap().expect("tagged");
            assert_eq!(tag.table, table);
            assert_eq!(tag.version, env!("CARGO_PKG_VERSION"));
            assert_eq!(tag.meta, meta);
            // The raw keys, as any Parquet reader sees them.
            let file = File::open(path).unwrap();
            let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
            let kvs = builder
                .metadata()
                .file_metadata()
                .key_value_metadata()
                .unwrap();
            let value = |key: &str| {
                kvs.iter()
                    .find(|kv| kv.key == key)
                    .and_then(|kv| kv.value.clone())
                    .unwrap_or_else(|| panic!("{key} missing"))
            };
            assert_eq!(value("neardup.format"), "1");
            assert_eq!(value("neardup.table"), table);
            assert_eq!(value("neardup.scheme"), "simhash-doc");
            let params: Value = serde_json::from_str(&value("neardup.params")).unwrap();
            assert_eq!(params["fingerprint"]["method"], "simhash");
            assert_eq!(params["search"]["k"], 3);
        }
    }

    #[test]
    fn tables_of_other_tools_have_no_tag() {
        let path = Path::new("t.parquet");
        assert_eq!(TableTag::from_key_values(path, None).unwrap(), None);
        let other = kv(&[("ARROW:schema", "xyz"), ("writer", "spark")]);
        assert_eq!(TableTag::from_key_values(path, Some(&other)).unwrap(), None);
    }

    #[test]
    fn another_format_and_damaged_metadata_are_refused() {
        let path = Path::new("fp/part-00000.parquet");
        let future = kv(&[
            ("neardup.format", "2"),
            ("neardup.version", "9.0.0"),
            ("neardup.table", "fingerprints"),
        ]);
        assert_eq!(
            TableTag::from_key_values(path, Some(&future))
                .unwrap_err()
                .to_string(),
            format!(
                "fp/part-00000.parquet: neardup table format 2 (written by neardup 9.0.0), but \
                 this neardup ({}) reads format 1; read it with the neardup that wrote it, or rerun",
                env!("CARGO_PKG_VERSION")
            )
        );
        let no_scheme = kv(&[("neardup.format", "1"), ("neardup.table", "pairs")]);
        assert_eq!(
            TableTag::from_key_values(path, Some(&no_scheme))
                .unwrap_err()
                .to_string(),
            "fp/part-00000.parquet: damaged neardup table metadata: no neardup.scheme"
        );
        let bad_json = kv(&[
            ("neardup.format", "1"),
            ("neardup.table", "pairs"),
            ("neardup.scheme", "minhash"),
            ("neardup.params", "{k: 3"),
        ]);
        let message = TableTag::from_key_values(path, Some(&bad_json))
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with(
                "fp/part-00000.parquet: damaged neardup table metadata: neardup.params is not JSON: "
            ),
            "{message}"
        );
    }

    #[test]
    fn tables_of_other_origins_are_told_apart() {
        let tag = |scheme: &str, params: Value| TableTag {
            table: "fingerprints".into(),
            version: "0.1.0".into(),
            meta: TableMeta {
                scheme: scheme.into(),
                params,
            },
        };
        let (a, b) = (Path::new("a.parquet"), Path::new("b.parquet"));
        let doc = tag(
            "simhash-doc",
            serde_json::json!({"fingerprint": {"shingle": null}}),
        );
        let shingles = tag(
            "simhash-shingles",
            serde_json::json!({"fingerprint": {"shingle": 3}}),
        );
        assert_eq!(
            shingles
                .expect_same_origin(b, &doc, a, Some("fingerprint"))
                .unwrap_err()
                .to_string(),
            "b.parquet: scheme simhash-shingles, expected simhash-doc (as in a.parquet: tables \
             made by different schemes cannot be used together)"
        );
        let five = tag(
            "simhash-shingles",
            serde_json::json!({"fingerprint": {"shingle": 5}, "search": {"k": 6}}),
        );
        assert_eq!(
            five.expect_same_origin(b, &shingles, a, Some("fingerprint"))
                .unwrap_err()
                .to_string(),
            "b.parquet: made with other parameters than a.parquet: shingle (5 vs 3); tables \
             made differently cannot be used together"
        );
        // Only the part asked for is compared.
        let three = tag(
            "simhash-shingles",
            serde_json::json!({"fingerprint": {"shingle": 3}, "search": {"k": 6}}),
        );
        three
            .expect_same_origin(b, &shingles, a, Some("fingerprint"))
            .unwrap();
        assert!(three.expect_same_origin(b, &shingles, a, None).is_err());
        assert_eq!(
            doc.expect_table(a, "pairs").unwrap_err().to_string(),
            "a.parquet: a neardup fingerprints table, expected a pairs table"
        );
    }
}
