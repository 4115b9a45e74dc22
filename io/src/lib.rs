//! Reading and writing neardup's data: input corpora in, Parquet tables out.
//!
//! ```
//! use neardup_io::input::expand_inputs;
//! use neardup_io::record::{FieldSpec, Record};
//! use neardup_io::source::{Format, Payload, SourceRecord};
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
//!     ..Default::default()
//! };
//! let mut texts = Vec::new();
//! for file in expand_inputs(&[corpus], false)? {
//!     assert_eq!(file.format, Format::Jsonl);
//!     let kind = file.format.kind();
//!     for unit in kind.units(&file)? {
//!         let mut reader = kind.open(&file, &unit, &spec)?;
//!         let mut next = SourceRecord::default();
//!         while reader.next_into(&mut next)? {
//!             let mut record = Record::default();
//!             match &next.payload {
//!                 Payload::Raw(line) => kind
//!                     .parse_into(line, &spec, &mut record)
//!                     .map_err(|e| kind.record_error(&file.path, next.record, e))?,
//!                 Payload::Fields(fields) => record = fields.clone(),
//!                 _ => continue,
//!             }
//!             texts.push((record.id, record.text));
//!         }
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
//!   [`input::InputFile`]s, each with a [`source::Format`] and a
//!   [`compress::Compression`] (none, gzip, zstd).
//! * [`source`] is the one input abstraction: a source kind per format
//!   (JSONL, Parquet, plain text, fingerprint tables) says how a file splits
//!   into units of parallel work and how a unit yields numbered records.
//! * [`record`] is what every kind yields: the text, id and extra fields of a
//!   document ([`record::Record`]), or why they could not be had
//!   ([`record::RecordError`]).
//! * [`compress`] undoes gzip and zstd and streams lines, for every kind that
//!   reads a byte stream.
//! * [`parquet_out`] writes the output tables (fingerprints, pairs,
//!   clusters) as part files that appear atomically, and small files such
//!   as `summary.json` the same way.
//! * [`parquet_in`] reads a Parquet table back ([`parquet_in::TableFile`]), with the same
//!   errors (the file named) for every reader.
//! * [`run_dir`] owns the layout of a run's output directory: table and part
//!   names, `summary.json`, `_SUCCESS`, preparing and committing it, and
//!   reading a finished run back.
//! * [`index`] is a saved index: the sorted permutation tables of runs, memory-mapped for
//!   queries, with generations added atomically (docs/index.md).
//! * [`lock`] takes the exclusive lock a run holds on every directory it writes.
//! * [`secret`] reads a file holding a secret, refused when others may read it.
//! * [`dedup_out`] writes a deduplicated corpus, each file in its own format.
//! * [`html`] turns web payloads into text: bytes to UTF-8 by the WHATWG charset rules,
//!   then HTML to visible text or to main content.
//!
//! Every failure is an [`IoError`] whose message names the file, and the
//! line or row where there is one. Problems with a single record are a
//! separate [`record::RecordError`], handed to the caller with the record's
//! position so it can decide whether to stop or to skip and count.

pub mod atomic;
pub mod compress;
pub mod dedup_out;
pub mod error;
pub mod file;
pub mod html;
pub mod index;
pub mod input;
pub mod lock;
pub mod parquet_in;
pub mod parquet_out;
pub mod readahead;
pub mod record;
pub mod run_dir;
pub mod secret;
pub mod source;
pub mod spill;
pub mod store;
pub mod stream;
pub mod wal;
pub mod web;

pub use error::IoError;
pub use record::RecordError;

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
        send::<stream::LineReader>();
        send::<Box<dyn source::RecordReader>>();
        send::<parquet_out::PartWriter<parquet_out::FingerprintRow>>();
    }
}
