//! The answer of a query, as `neardup query` writes it (JSON lines, or Parquet with
//! `--output`): one row per indexed document within `k` of a query document (a simhash
//! index), or sharing a band with it and verified at the threshold (a MinHash index).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray, UInt64Array, UInt8Array,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use serde::Serialize;

use crate::parquet_out::OutputRow;

/// One match: the query's name, the indexed document (its number and own id), their
/// Hamming distance (a simhash index) or Jaccard similarity (a MinHash index: exact when
/// `jaccard_exact`, else the signatures' estimate), and the document's cluster (`None`: in
/// no cluster). The fields an index does not give are left out of a JSON line and null in
/// Parquet.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MatchRow {
    pub query: String,
    pub id: Option<String>,
    pub doc_id: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hamming: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jaccard: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jaccard_exact: Option<bool>,
    pub cluster_id: Option<i64>,
}

impl OutputRow for MatchRow {
    const TABLE: &'static str = "matches";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("query", DataType::Utf8, false),
            Field::new("id", DataType::Utf8, true),
            Field::new("doc_id", DataType::UInt64, false),
            Field::new("hamming", DataType::UInt8, true),
            Field::new("jaccard", DataType::Float64, true),
            Field::new("jaccard_exact", DataType::Boolean, true),
            Field::new("cluster_id", DataType::Int64, true),
        ]))
    }

    fn to_batch(rows: &[Self]) -> Result<RecordBatch, ArrowError> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(
                rows.iter()
                    .map(|r| Some(r.query.as_str()))
                    .collect::<StringArray>(),
            ),
            Arc::new(
                rows.iter()
                    .map(|r| r.id.as_deref())
                    .collect::<StringArray>(),
            ),
            Arc::new(rows.iter().map(|r| r.doc_id).collect::<UInt64Array>()),
            Arc::new(rows.iter().map(|r| r.hamming).collect::<UInt8Array>()),
            Arc::new(rows.iter().map(|r| r.jaccard).collect::<Float64Array>()),
            Arc::new(
                rows.iter()
                    .map(|r| r.jaccard_exact)
                    .collect::<BooleanArray>(),
            ),
            Arc::new(rows.iter().map(|r| r.cluster_id).collect::<Int64Array>()),
        ];
        RecordBatch::try_new(Self::schema(), columns)
    }
}

/// One merge of an incremental run (`neardup run --against`): an indexed cluster that the
/// batch joined to another, and the id of the cluster they form (the smaller).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MergeRow {
    pub cluster_id: i64,
    pub into_cluster_id: i64,
}

impl OutputRow for MergeRow {
    const TABLE: &'static str = "merges";

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("cluster_id", DataType::Int64, false),
            Field::new("into_cluster_id", DataType::Int64, false),
        ]))
    }

    fn to_batch(rows: &[Self]) -> Result<RecordBatch, ArrowError> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(rows.iter().map(|r| r.cluster_id).collect::<Int64Array>()),
            Arc::new(
                rows.iter()
                    .map(|r| r.into_cluster_id)
                    .collect::<Int64Array>(),
            ),
        ];
        RecordBatch::try_new(Self::schema(), columns)
    }
}
