//! Reading and writing neardup's data: input corpora in, Parquet tables out.
//!
//! ```
//! use neardup_io::input::{expand_inputs, Format};
//! use neardup_io::jsonl::{parse_record, FieldSpec, LineReader};
//! use neardup_io::IoError;
//!
//! # fn main() -> Result<(), IoError> {
//! # let dir = tempfile::tempdir().unwrap();
//! # std::fs::write(dir.path().join("docs.jsonl"), "{\"id\": 7, \"text\": \"hello\"}\n").unwrap();
//! # let corpus = dir.path().to_string_lossy().into_owned();
//! let spec = FieldSpec {
//!     text_field: "text".into(),
//!     id_field: Some("id".into()),
//!     extra_field: None,
//! };
//! let mut texts = Vec::new();
//! for file in expand_inputs(&[corpus], false)? {
//!     assert_eq!(file.format, Format::Jsonl);
//!     let mut reader = LineReader::open(&file)?;
//!     let mut line = Vec::new();
//!     while let Some(n) = reader.next_line(&mut line)? {
//!         let record = parse_record(&line, &spec).map_err(|e| IoError::record(&file.path, n, e))?;
//!         texts.push((record.id, record.text));
//!     }
//! }
//! assert_eq!(texts, [(Some("7".to_string()), "hello".to_string())]);
//! # Ok(())
//! # }
//! ```
//!
//! The pieces, in the order a run uses them:
//!
//! * [`input`] expands the command line's files, directories and globs into
//!   [`input::InputFile`]s, each with a format (JSONL, Parquet, plain text)
//!   and a compression (none, gzip, zstd).
//! * [`jsonl`] streams the lines of a file, decompressing as it goes, and
//!   pulls the text, id and extra fields out of each JSON record without
//!   building the rest of it.
//! * [`parquet_in`] lists a Parquet file's row groups (the unit of parallel
//!   work) and decodes one row group into the same [`jsonl::Record`]s.
//! * [`plain`] reads a whole file as one document.
//! * [`parquet_out`] writes the output tables (fingerprints, pairs,
//!   clusters) as part files that appear atomically, and small files such
//!   as `summary.json` the same way.
//! * [`fingerprints_in`] reads a fingerprint table back, for searching
//!   fingerprints computed by an earlier run or another tool.
//!
//! Every failure is an [`IoError`] whose message names the file, and the
//! line or row where there is one. Problems with a single record are a
//! separate [`jsonl::RecordError`], handed to the caller with the record's
//! position so it can decide whether to stop or to skip and count.

pub mod dedup_out;
pub mod error;
pub mod fingerprints_in;
pub mod input;
pub mod jsonl;
pub mod parquet_in;
pub mod parquet_out;
pub mod plain;
pub mod run_in;

pub use error::IoError;
pub use jsonl::RecordError;

#[cfg(test)]
mod test_util;

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync<T: Send + Sync + 'static>() {}
    fn send<T: Send>() {}

    /// Dataflow workers run on threads and errors end up in `anyhow`.
    #[test]
    fn errors_and_readers_can_cross_threads() {
        send_sync::<IoError>();
        send_sync::<RecordError>();
        send::<jsonl::LineReader>();
        send::<parquet_out::PartWriter<parquet_out::FingerprintRow>>();
    }
}
