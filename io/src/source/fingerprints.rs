//! Reading a fingerprint table back.
//!
//! `neardup search` can run over fingerprints computed earlier (by
//! `neardup fingerprint`, see [`crate::parquet_out::FingerprintRow`]) or by
//! another tool. Only `doc_id` and `simhash` are required, plus `bytes` when
//! present (it helps choose which duplicate to keep). Other tools, and
//! engines without unsigned integers (Spark, Java), store 64-bit hashes as
//! Int64, so both Int64 and UInt64 are accepted and reinterpreted bit for bit:
//! a simhash is a bit pattern, not a quantity.
//!
//! Files are read by row group, like [`super::parquet`], so the same
//! [`RowGroupUnit`]s shard the work. A row's record number is its row in the
//! file, but its document number is its own `doc_id`: the fingerprints keep
//! the numbers of the run that computed them.

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Int64Type, UInt64Type};
use arrow::record_batch::RecordBatch;
use serde::{Deserialize, Serialize};

use super::parquet::{
    open_parquet, projected_position, resolve, row_group_units, RowGroupBatches, RowGroupUnit,
    DEFAULT_READ_BATCH_ROWS,
};
use super::Kept;
use super::{row_group_of, Payload, ReadCost, RecordReader, SourceKind, SourceRecord, UnitSpec};
use crate::compress::Compression;
use crate::error::IoError;
use crate::file::InputFile;
use crate::record::FieldSpec;

/// The fingerprint-table source kind (`neardup search`).
pub struct Fingerprints;

impl SourceKind for Fingerprints {
    fn name(&self) -> &'static str {
        "fingerprint table"
    }

    /// Fingerprint tables are Parquet files like any other: only the command
    /// says a file is one.
    fn claims(&self, _lower_name: &str) -> Option<Compression> {
        None
    }

    fn units(&self, file: &InputFile) -> Result<Vec<UnitSpec>, IoError> {
        row_group_units(&file.path)
    }

    fn open(
        &self,
        file: &InputFile,
        unit: &UnitSpec,
        _fields: &FieldSpec,
    ) -> Result<Box<dyn RecordReader>, IoError> {
        let rg = row_group_of(self, file, unit)?;
        Ok(Box::new(FingerprintReader::open(&file.path, &rg)?))
    }

    /// Fingerprints are read, not fingerprinted: nothing to balance.
    fn read_cost(&self, _file: &InputFile) -> Option<ReadCost> {
        None
    }

    fn write_kept(
        &self,
        file: &InputFile,
        _removed: &HashSet<u64>,
        _tmp: &Path,
    ) -> Result<Kept, IoError> {
        Err(IoError::NotSupported {
            path: file.path.clone(),
            what: "a fingerprint table has no documents to write",
        })
    }
}

/// One row of a fingerprint table, as needed for search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FingerprintIn {
    /// The document's number.
    pub doc_id: u64,
    /// Its 64-bit simhash.
    pub simhash: u64,
    /// Its size in bytes, if the table has a `bytes` column (and it is not null).
    pub bytes: Option<u64>,
    /// Whether the document had no tokens, if the table has an `empty` column: such a
    /// fingerprint (0) must never be matched.
    pub empty: bool,
}

const U64_OR_I64: &str = "UInt64 or Int64";

fn is_64_bit_integer(data_type: &DataType) -> bool {
    matches!(data_type, DataType::UInt64 | DataType::Int64)
}

/// Reads `doc_id`, `simhash` and (if present) `bytes` from one row group,
/// calling `f` for every row.
///
/// Nulls in `doc_id` or `simhash`, and negative `bytes`, are errors naming
/// the file, row and column: a fingerprint table with holes is damaged.
pub fn read_fingerprint_row_group(
    path: &Path,
    unit: &RowGroupUnit,
    mut f: impl FnMut(FingerprintIn),
) -> Result<(), IoError> {
    let mut reader = FingerprintReader::open(path, unit)?;
    let mut record = SourceRecord::default();
    while reader.next_into(&mut record)? {
        if let Payload::Fingerprint(fp) = record.payload {
            f(fp);
        }
    }
    Ok(())
}

/// The rows of one row group of a fingerprint table, decoded a batch at a time.
struct FingerprintReader {
    path: PathBuf,
    batches: RowGroupBatches,
    /// Root column indices.
    doc_id: usize,
    simhash: usize,
    bytes: Option<usize>,
    empty: Option<usize>,
    roots: Vec<usize>,
    pending: VecDeque<FingerprintIn>,
    /// The number in the file of the next row decoded, and of the next handed out.
    decoded: u64,
    row: u64,
}

impl FingerprintReader {
    fn open(path: &Path, unit: &RowGroupUnit) -> Result<Self, IoError> {
        let (file, meta) = open_parquet(path)?;
        let schema = meta.schema().clone();
        let doc_id = resolve(path, &schema, "doc_id", is_64_bit_integer, U64_OR_I64)?;
        let simhash = resolve(path, &schema, "simhash", is_64_bit_integer, U64_OR_I64)?;
        let bytes = match schema.index_of("bytes") {
            Ok(_) => Some(resolve(
                path,
                &schema,
                "bytes",
                is_64_bit_integer,
                U64_OR_I64,
            )?),
            Err(_) => None,
        };
        let empty = match schema.index_of("empty") {
            Ok(_) => Some(resolve(
                path,
                &schema,
                "empty",
                |t| *t == DataType::Boolean,
                "Boolean",
            )?),
            Err(_) => None,
        };
        let roots: Vec<usize> = [Some(doc_id), Some(simhash), bytes, empty]
            .into_iter()
            .flatten()
            .collect();
        let batches =
            RowGroupBatches::open(path, file, meta, unit, &roots, DEFAULT_READ_BATCH_ROWS)?;
        Ok(FingerprintReader {
            path: path.to_path_buf(),
            batches,
            doc_id,
            simhash,
            bytes,
            empty,
            roots,
            pending: VecDeque::new(),
            decoded: unit.first_row,
            row: unit.first_row,
        })
    }

    /// Decodes one batch into `pending`; a bad value fails the whole batch.
    fn decode(&mut self, batch: &RecordBatch) -> Result<(), IoError> {
        let path = self.path.as_path();
        let roots = &self.roots;
        let column = |root, name| Column::new(path, batch, projected_position(roots, root), name);
        let doc_ids = column(self.doc_id, "doc_id")?;
        let simhashes = column(self.simhash, "simhash")?;
        let sizes = self.bytes.map(|root| column(root, "bytes")).transpose()?;
        let empties = self.empty.map(|root| {
            batch
                .column(projected_position(roots, root))
                .as_boolean()
                .clone()
        });
        let mut rows = Vec::with_capacity(batch.num_rows());
        let mut row = self.decoded;
        for i in 0..batch.num_rows() {
            rows.push(FingerprintIn {
                doc_id: doc_ids.required(i, row)?,
                simhash: simhashes.required(i, row)?,
                bytes: sizes
                    .as_ref()
                    .map(|s| s.size(i, row))
                    .transpose()?
                    .flatten(),
                empty: empties
                    .as_ref()
                    .is_some_and(|e| e.is_valid(i) && e.value(i)),
            });
            row += 1;
        }
        self.decoded = row;
        self.pending.extend(rows);
        Ok(())
    }
}

impl RecordReader for FingerprintReader {
    fn next_into(&mut self, out: &mut SourceRecord) -> Result<bool, IoError> {
        loop {
            if let Some(fp) = self.pending.pop_front() {
                out.record = self.row;
                out.payload = Payload::Fingerprint(fp);
                self.row += 1;
                return Ok(true);
            }
            match self.batches.next_batch()? {
                Some(batch) => self.decode(&batch)?,
                None => return Ok(false),
            }
        }
    }
}

/// A UInt64 or Int64 column of one batch.
struct Column<'a> {
    path: &'a Path,
    name: &'static str,
    values: Values<'a>,
}

enum Values<'a> {
    Unsigned(&'a arrow::array::UInt64Array),
    Signed(&'a arrow::array::Int64Array),
}

impl<'a> Column<'a> {
    fn new(
        path: &'a Path,
        batch: &'a RecordBatch,
        position: usize,
        name: &'static str,
    ) -> Result<Self, IoError> {
        let array = batch.column(position);
        let values = if let Some(a) = array.as_primitive_opt::<UInt64Type>() {
            Values::Unsigned(a)
        } else if let Some(a) = array.as_primitive_opt::<Int64Type>() {
            Values::Signed(a)
        } else {
            return Err(IoError::ColumnType {
                path: path.to_path_buf(),
                column: name.to_owned(),
                found: array.data_type().to_string(),
                expected: U64_OR_I64,
            });
        };
        Ok(Column { path, name, values })
    }

    /// The value at `i` as stored, or `None` if null.
    fn get(&self, i: usize) -> Option<(u64, bool)> {
        match self.values {
            Values::Unsigned(a) => a.is_valid(i).then(|| (a.value(i), false)),
            // Bit-for-bit: a hash stored as Int64 keeps its bits.
            Values::Signed(a) => a.is_valid(i).then(|| (a.value(i) as u64, a.value(i) < 0)),
        }
    }

    fn required(&self, i: usize, row: u64) -> Result<u64, IoError> {
        self.get(i)
            .map(|(v, _)| v)
            .ok_or_else(|| self.bad(row, "is null".to_owned()))
    }

    /// A size: may be null, may not be negative.
    fn size(&self, i: usize, row: u64) -> Result<Option<u64>, IoError> {
        match self.get(i) {
            Some((v, true)) => Err(self.bad(row, format!("is negative ({})", v as i64))),
            Some((v, false)) => Ok(Some(v)),
            None => Ok(None),
        }
    }

    fn bad(&self, row: u64, reason: String) -> IoError {
        IoError::BadValue {
            path: self.path.to_path_buf(),
            column: self.name.to_owned(),
            row,
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::parquet::row_groups;
    use super::*;
    use crate::test_util::write_parquet;
    use arrow::array::{ArrayRef, Int64Array, StringArray, UInt64Array};
    use std::sync::Arc;

    fn read_all(path: &Path) -> Result<Vec<FingerprintIn>, IoError> {
        let mut out = Vec::new();
        for unit in row_groups(path)? {
            read_fingerprint_row_group(path, &unit, |fp| out.push(fp))?;
        }
        Ok(out)
    }

    #[test]
    fn reads_unsigned_columns_with_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fp.parquet");
        let columns: Vec<(&str, ArrayRef)> = vec![
            (
                "bytes",
                Arc::new(UInt64Array::from(vec![Some(10), None, Some(30)])),
            ),
            ("source", Arc::new(StringArray::from(vec!["a", "b", "c"]))),
            (
                "simhash",
                Arc::new(UInt64Array::from(vec![u64::MAX, 0, 1 << 63])),
            ),
            ("doc_id", Arc::new(UInt64Array::from(vec![7, 8, 9]))),
        ];
        write_parquet(&path, columns, 2);
        let want = vec![
            FingerprintIn {
                doc_id: 7,
                simhash: u64::MAX,
                bytes: Some(10),
                empty: false,
            },
            FingerprintIn {
                doc_id: 8,
                simhash: 0,
                bytes: None,
                empty: false,
            },
            FingerprintIn {
                doc_id: 9,
                simhash: 1 << 63,
                bytes: Some(30),
                empty: false,
            },
        ];
        assert_eq!(read_all(&path).unwrap(), want);
    }

    #[test]
    fn signed_columns_are_reinterpreted_bit_for_bit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fp.parquet");
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("doc_id", Arc::new(Int64Array::from(vec![1, 2]))),
            ("simhash", Arc::new(Int64Array::from(vec![-1, i64::MIN]))),
        ];
        write_parquet(&path, columns, 10);
        let want = vec![
            FingerprintIn {
                doc_id: 1,
                simhash: u64::MAX,
                bytes: None,
                empty: false,
            },
            FingerprintIn {
                doc_id: 2,
                simhash: 1 << 63,
                bytes: None,
                empty: false,
            },
        ];
        assert_eq!(read_all(&path).unwrap(), want);
    }

    #[test]
    fn missing_columns_nulls_and_negative_sizes_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.parquet");
        write_parquet(
            &path,
            vec![("doc_id", Arc::new(UInt64Array::from(vec![1])) as ArrayRef)],
            10,
        );
        assert_eq!(
            read_all(&path).unwrap_err().to_string(),
            format!(
                "{}: no column \"simhash\"; the file has columns: doc_id",
                path.display()
            )
        );

        let path = dir.path().join("b.parquet");
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("doc_id", Arc::new(UInt64Array::from(vec![1, 2, 3]))),
            (
                "simhash",
                Arc::new(UInt64Array::from(vec![Some(1), Some(2), None])),
            ),
        ];
        write_parquet(&path, columns, 2);
        assert_eq!(
            read_all(&path).unwrap_err().to_string(),
            format!("{}: row 2: column \"simhash\" is null", path.display())
        );

        let path = dir.path().join("c.parquet");
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("doc_id", Arc::new(UInt64Array::from(vec![1]))),
            ("simhash", Arc::new(StringArray::from(vec!["ff"]))),
        ];
        write_parquet(&path, columns, 2);
        assert_eq!(
            read_all(&path).unwrap_err().to_string(),
            format!(
                "{}: column \"simhash\" has type Utf8, expected UInt64 or Int64",
                path.display()
            )
        );

        let path = dir.path().join("d.parquet");
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("doc_id", Arc::new(UInt64Array::from(vec![1]))),
            ("simhash", Arc::new(UInt64Array::from(vec![1]))),
            ("bytes", Arc::new(Int64Array::from(vec![-5]))),
        ];
        write_parquet(&path, columns, 2);
        assert_eq!(
            read_all(&path).unwrap_err().to_string(),
            format!(
                "{}: row 0: column \"bytes\" is negative (-5)",
                path.display()
            )
        );
    }

    #[test]
    fn reads_the_empty_flag_when_present() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fp.parquet");
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("doc_id", Arc::new(UInt64Array::from(vec![1, 2, 3]))),
            ("simhash", Arc::new(UInt64Array::from(vec![0, 5, 0]))),
            (
                "empty",
                Arc::new(arrow::array::BooleanArray::from(vec![
                    Some(true),
                    Some(false),
                    None,
                ])),
            ),
        ];
        write_parquet(&path, columns, 2);
        let empties: Vec<bool> = read_all(&path).unwrap().iter().map(|f| f.empty).collect();
        assert_eq!(empties, vec![true, false, false]);
    }
}
