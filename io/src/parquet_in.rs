//! Reading Parquet tables back: the one way neardup opens a table it (or a user) wrote and
//! walks its batches, so that every reader names the file in its errors alike.
//!
//! A table is read in three steps, each with its own error: the file is opened
//! ([`IoError::Open`]), its footer is read ([`IoError::Parquet`]), then its batches are
//! decoded, a damaged batch being an [`IoError::BadTable`] naming the file. Between the
//! second and the third, a reader may look at what the footer says: the table's
//! [`TableTag`] (what made it), whether it has a column, and which columns to read.
//!
//! ```
//! # use neardup_io::parquet_out::{ClusterRow, PartWriter, TableMeta};
//! # use neardup_io::parquet_in::TableFile;
//! # let dir = tempfile::tempdir().unwrap();
//! # let meta = TableMeta { scheme: "simhash-doc".into(), params: serde_json::json!({}) };
//! # let mut writer = PartWriter::<ClusterRow>::create(dir.path(), 0, &meta).unwrap();
//! # writer.push(ClusterRow::alone(7)).unwrap();
//! # let path = writer.commit().unwrap();
//! let table = TableFile::open(&path)?;
//! assert_eq!(table.tag()?.unwrap().table, "clusters");
//! let mut rows = 0;
//! table.columns(&["doc_id"]).for_each_batch(|batch| {
//!     rows += batch.num_rows();
//!     Ok(())
//! })?;
//! assert_eq!(rows, 1);
//! # Ok::<(), neardup_io::IoError>(())
//! ```
//!
//! Within a batch, [`u64_column`] takes a UInt64 column by name, the one check every reader
//! of neardup's tables makes (a missing or mistyped column is a [`IoError::BadTable`] too).

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{AsArray, UInt64Array};
use arrow::datatypes::{SchemaRef, UInt64Type};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use crate::error::IoError;
use crate::parquet_out::TableTag;
use crate::store::ObjectBytes;

/// One Parquet file opened for reading: its footer is read, its batches not yet.
pub struct TableFile {
    path: PathBuf,
    builder: ParquetRecordBatchReaderBuilder<ObjectBytes>,
}

impl TableFile {
    /// Opens the Parquet file at `path` and reads its footer.
    pub fn open(path: &Path) -> Result<TableFile, IoError> {
        TableFile::of_bytes(path, ObjectBytes::open(path)?)
    }

    /// Reads the footer of `file`, already open (a file checked on the way, as the index's
    /// are), which is the Parquet file at `path`.
    pub fn of_file(path: &Path, file: File) -> Result<TableFile, IoError> {
        TableFile::of_bytes(path, ObjectBytes::Local(file))
    }

    /// Reads the footer of the table whose bytes `file` gives (a local file or an object).
    fn of_bytes(path: &Path, file: ObjectBytes) -> Result<TableFile, IoError> {
        let builder =
            ParquetRecordBatchReaderBuilder::try_new(file).map_err(|cause| IoError::Parquet {
                path: path.to_path_buf(),
                cause,
            })?;
        Ok(TableFile {
            path: path.to_path_buf(),
            builder,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the file's metadata says made it (see [`TableTag::from_key_values`]): `None`
    /// for a table another tool wrote.
    pub fn tag(&self) -> Result<Option<TableTag>, IoError> {
        let key_values = self.builder.metadata().file_metadata().key_value_metadata();
        TableTag::from_key_values(&self.path, key_values)
    }

    /// The file's schema, as Arrow reads it.
    pub fn schema(&self) -> &SchemaRef {
        self.builder.schema()
    }

    /// Whether the file's schema has a column of this name.
    pub fn has_column(&self, name: &str) -> bool {
        self.builder.schema().column_with_name(name).is_some()
    }

    /// Reads only `columns` (those of them the file has; a missing one is the caller's to
    /// notice in the batches).
    pub fn columns(mut self, columns: &[&str]) -> TableFile {
        let mask = ProjectionMask::columns(self.builder.parquet_schema(), columns.iter().copied());
        self.builder = self.builder.with_projection(mask);
        self
    }

    /// Calls `f` on every batch, in order; a batch that cannot be decoded is an
    /// [`IoError::BadTable`] naming the file.
    pub fn for_each_batch(
        self,
        mut f: impl FnMut(&RecordBatch) -> Result<(), IoError>,
    ) -> Result<(), IoError> {
        let path = self.path;
        let reader = self.builder.build().map_err(|cause| IoError::Parquet {
            path: path.clone(),
            cause,
        })?;
        for batch in reader {
            let batch = batch.map_err(|e| IoError::BadTable {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            f(&batch)?;
        }
        Ok(())
    }
}

/// The column `name` of `batch` (read from the table at `path`) as UInt64. A batch without
/// it, or with a column of another type, is an [`IoError::BadTable`] naming the file, whose
/// reason is `reason(name)`: each reader keeps the words its messages have always had.
pub fn u64_column<'a>(
    batch: &'a RecordBatch,
    name: &str,
    path: &Path,
    reason: impl FnOnce(&str) -> String,
) -> Result<&'a UInt64Array, IoError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_primitive_opt::<UInt64Type>())
        .ok_or_else(|| IoError::BadTable {
            path: path.to_path_buf(),
            reason: reason(name),
        })
}
