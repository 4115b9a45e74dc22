//! The part writer: one part file of a table, written under a hidden temporary name and
//! renamed into place once complete (see the [module docs](super)).

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use super::rows::OutputRow;
use super::tags::TableMeta;
use crate::atomic::sync_parent;
use crate::error::IoError;

/// Rows buffered by a [`PartWriter`] before they are converted to one Arrow
/// [`RecordBatch`](arrow::record_batch::RecordBatch) and handed to the Parquet writer.
pub const DEFAULT_BATCH_ROWS: usize = 8 * 1024;

/// Maximum rows per Parquet row group. Large groups compress well and keep
/// the footer small; readers shard work by row group, and a million rows of
/// these narrow tables is only tens of megabytes.
pub const DEFAULT_ROW_GROUP_ROWS: usize = 1_000_000;

/// zstd level for all output: level 3 (zstd's default) compresses hashes and
/// ids well at a speed that keeps writing off the critical path.
pub const ZSTD_LEVEL: i32 = 3;

/// The committed name of part `part` of a table (in a run directory's table folder).
pub fn part_file_name(part: usize) -> String {
    format!("part-{part:05}.parquet")
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
        crate::store::publish::published(&self.final_path)?;
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
