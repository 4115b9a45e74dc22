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
//!
//! The code: `rows` (a row type per table, [`OutputRow`]), `tags` (the metadata,
//! [`TableMeta`] and [`TableTag`]) and `writer` (the [`PartWriter`] and its settings).
//! **Adding an output table**: its row type and [`OutputRow`] impl in `rows`, its name in
//! [`crate::run_dir::Table`].

mod rows;
mod tags;
mod writer;

pub use rows::{
    ClusterRow, DocumentRow, FingerprintRow, HostRow, MirrorRow, OutputRow, PairKind, PairRow,
    RemovedRow, SubstringRow,
};
#[cfg(test)]
pub(crate) use tags::test_meta;
pub use tags::{
    TableMeta, TableTag, KEY_FORMAT, KEY_PARAMS, KEY_SCHEME, KEY_TABLE, KEY_VERSION, NO_SCHEME,
    PARAM_EXTRACT, PARAM_FINGERPRINT, PARAM_METHOD, PARAM_SEARCH, TABLE_FORMAT, UNKNOWN_SCHEME,
};
pub use writer::{
    part_file_name, PartWriter, DEFAULT_BATCH_ROWS, DEFAULT_ROW_GROUP_ROWS, ZSTD_LEVEL,
};

#[cfg(test)]
mod tests;
