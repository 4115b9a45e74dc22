//! The row types of the output tables, one per table, each with its Arrow schema and its
//! conversion to a batch ([`OutputRow`]). The columns are documented in the [module
//! docs](super), "Schemas". A table's row is written once: `mirrors/` writes core's
//! [`Mirror`] as it is.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Float32Array, Float64Array, Int64Array, StringArray,
    TimestampMicrosecondArray, UInt32Array, UInt64Array, UInt8Array,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use neardup_core::mirrors::Mirror;
use serde::{Deserialize, Serialize};

/// A row type that can be written as a Parquet table.
pub trait OutputRow: Sized {
    /// The table's name in its metadata (`neardup.table`).
    const TABLE: &'static str;
    /// The table's Arrow schema.
    fn schema() -> SchemaRef;
    /// Converts rows into one batch with [`OutputRow::schema`].
    fn to_batch(rows: &[Self]) -> Result<RecordBatch, ArrowError>;
}

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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterRow {
    pub doc_id: u64,
    pub cluster_id: i64,
    pub cluster_size: u32,
    pub keep: bool,
    /// The document kept in this one's place: itself when `keep`.
    pub kept_doc_id: u64,
    /// How similar the document is to `kept_doc_id`, where the run measured it: null for
    /// the kept documents, and under `--cluster components` (see docs/outputs.md).
    pub hamming: Option<u8>,
    pub jaccard: Option<f32>,
}

impl ClusterRow {
    /// The row of a document in no cluster: kept, alone.
    pub fn alone(doc_id: u64) -> ClusterRow {
        ClusterRow {
            doc_id,
            cluster_id: -1,
            cluster_size: 1,
            keep: true,
            kept_doc_id: doc_id,
            hamming: None,
            jaccard: None,
        }
    }
}

fn field(name: &str, data_type: DataType, nullable: bool) -> Field {
    Field::new(name, data_type, nullable)
}

/// Builds one column from a field of every row (a text column from `Option<&str>`s
/// borrowed from the rows).
fn column<'a, R, T, A>(rows: &'a [R], get: impl Fn(&'a R) -> T) -> ArrayRef
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
        let mut columns = vec![
            column::<_, _, UInt64Array>(rows, |r| r.doc_id),
            column::<_, _, StringArray>(rows, |r| r.id.as_deref()),
            column::<_, _, StringArray>(rows, |r| Some(r.source.as_str())),
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
        RecordBatch::try_new(
            Self::schema(),
            vec![
                column::<_, _, UInt64Array>(rows, |r| r.doc_a),
                column::<_, _, UInt64Array>(rows, |r| r.doc_b),
                column::<_, _, UInt8Array>(rows, |r| r.hamming),
                column::<_, _, StringArray>(rows, |r| Some(r.kind.as_str())),
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
            field("kept_doc_id", DataType::UInt64, false),
            field("hamming", DataType::UInt8, true),
            field("jaccard", DataType::Float32, true),
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
                column::<_, _, UInt64Array>(rows, |r| r.kept_doc_id),
                column::<_, _, UInt8Array>(rows, |r| r.hamming),
                column::<_, _, Float32Array>(rows, |r| r.jaccard),
            ],
        )
    }
}

/// One row of `mirrors/`: `host_b/prefix_b/p` copies `host_a/prefix_a/p` for
/// `shared_paths` paths `p`. The row is core's [`Mirror`] itself, written as it is found
/// (see `neardup_core::mirrors`); the verdict column holds [`Verdict::as_str`].
///
/// [`Verdict::as_str`]: neardup_core::mirrors::Verdict::as_str
pub type MirrorRow = Mirror;

impl OutputRow for Mirror {
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
        let strings = |get: &dyn Fn(&Mirror) -> &str| -> ArrayRef {
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
                strings(&|r| r.verdict.as_str()),
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
                column::<_, _, StringArray>(rows, |r| r.id.as_deref()),
                column::<_, _, UInt64Array>(rows, |r| r.kept_doc_id),
                column::<_, _, StringArray>(rows, |r| r.kept_id.as_deref()),
                column::<_, _, UInt8Array>(rows, |r| r.hamming),
                column::<_, _, Float32Array>(rows, |r| r.jaccard),
            ],
        )
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
                column::<_, _, StringArray>(rows, |r| r.id.as_deref()),
                column::<_, _, UInt64Array>(rows, |r| r.start),
                column::<_, _, UInt64Array>(rows, |r| r.end),
            ],
        )
    }
}
