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
//! the numbers of the run that computed them. A `doc_id` must be a number from 0 to
//! 2^63 - 1 (`clusters/` labels a cluster with its smallest `doc_id` as an Int64): a negative
//! one, or a UInt64 beyond that, is an error naming the file and row. Duplicates are found
//! where every copy meets, at the document's home worker in the dataflow
//! ([`IoError::DuplicateDocId`]).
//!
//! A table neardup wrote says in its metadata which scheme made it
//! ([`crate::parquet_out::TableTag`]). Only simhash fingerprints can be searched: a
//! `fingerprints/` table of a MinHash run (whose `simhash` column is all 0), a `pairs/` or
//! `clusters/` table, or a table of another format version is refused, naming the file, and
//! so are tables that disagree with each other on the scheme or its parameters
//! ([`check_tables`]). A table without neardup's metadata (another tool's) is read as before.

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
use crate::parquet_out::{FingerprintRow, OutputRow, TableTag, PARAM_FINGERPRINT, PARAM_METHOD};
use crate::record::FieldSpec;

/// The schemes whose tables `neardup search` can read, for messages.
pub const SEARCHABLE_SCHEMES: &str = "simhash-doc or simhash-shingles";

/// The value of `neardup.params` `fingerprint.method` of the searchable tables.
const SIMHASH_METHOD: &str = "simhash";

/// Checks the metadata of one fingerprint table: `None` for a table without neardup's
/// metadata, its tag for a neardup `fingerprints` table of a simhash scheme, and an error
/// naming the file for anything else (another table, a MinHash table, another format).
pub fn check_table(path: &Path) -> Result<Option<TableTag>, IoError> {
    let tag = TableTag::of_file(path)?;
    if let Some(tag) = &tag {
        check_tag(path, tag)?;
    }
    Ok(tag)
}

fn check_tag(path: &Path, tag: &TableTag) -> Result<(), IoError> {
    tag.expect_table(path, FingerprintRow::TABLE)?;
    let method = tag.meta.params[PARAM_FINGERPRINT][PARAM_METHOD].as_str();
    if method != Some(SIMHASH_METHOD) {
        return Err(IoError::WrongScheme {
            path: path.to_path_buf(),
            found: tag.meta.scheme.clone(),
            expected: SEARCHABLE_SCHEMES.to_string(),
            why: format!(
                "the search compares 64-bit simhashes, and {} fingerprints have none",
                tag.meta.scheme
            ),
        });
    }
    Ok(())
}

/// Checks the metadata of every fingerprint table a search reads ([`check_table`]), and
/// that the tables with metadata agree on the scheme and its parameters: distances between
/// fingerprints made differently mean nothing. Returns the first table with metadata and
/// its tag, or `None` when no table has any.
pub fn check_tables(paths: &[PathBuf]) -> Result<Option<(PathBuf, TableTag)>, IoError> {
    let mut first: Option<(PathBuf, TableTag)> = None;
    for path in paths {
        let Some(tag) = check_table(path)? else {
            continue;
        };
        match &first {
            Some((first_path, first_tag)) => {
                tag.expect_same_origin(path, first_tag, first_path, Some(PARAM_FINGERPRINT))?
            }
            None => first = Some((path.clone(), tag)),
        }
    }
    Ok(first)
}

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
        check_table(&file.path)?;
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

/// The largest document number a fingerprint table may hold: `clusters/` labels each cluster
/// with its smallest `doc_id` in an Int64 column (-1 meaning "in no cluster"), so larger
/// numbers would come out negative there.
pub const MAX_DOC_ID: u64 = i64::MAX as u64;

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
        let key_values = meta.metadata().file_metadata().key_value_metadata();
        if let Some(tag) = TableTag::from_key_values(path, key_values)? {
            check_tag(path, &tag)?;
        }
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
                doc_id: doc_ids.doc_number(i, row)?,
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

    /// A document number: not null, from 0 to [`MAX_DOC_ID`].
    fn doc_number(&self, i: usize, row: u64) -> Result<u64, IoError> {
        match self.get(i) {
            None => Err(self.bad(row, "is null".to_owned())),
            Some((v, true)) => Err(self.bad(
                row,
                format!("is negative ({}); document numbers are 0 or more", v as i64),
            )),
            Some((v, false)) if v > MAX_DOC_ID => Err(self.bad(
                row,
                format!("is {v}, beyond 2^63 - 1 (clusters/ holds document numbers as Int64)"),
            )),
            Some((v, false)) => Ok(v),
        }
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

    /// A fingerprint table as neardup writes it, made by `scheme` with `fingerprint` params.
    fn neardup_table(path: &Path, scheme: &str, fingerprint: serde_json::Value) {
        use crate::parquet_out::{PartWriter, TableMeta};
        let meta = TableMeta {
            scheme: scheme.into(),
            params: serde_json::json!({ "fingerprint": fingerprint }),
        };
        let mut writer = PartWriter::<FingerprintRow>::create_file(path, &meta).unwrap();
        for doc in 0..3u64 {
            writer
                .push(FingerprintRow {
                    doc_id: doc,
                    id: None,
                    source: "a.jsonl".into(),
                    record: doc,
                    simhash: 0,
                    n_tokens: 5,
                    bytes: 20,
                    empty: false,
                    ..Default::default()
                })
                .unwrap();
        }
        writer.commit().unwrap();
    }

    fn simhash_params(shingle: Option<usize>) -> serde_json::Value {
        serde_json::json!({"method": "simhash", "shingle": shingle})
    }

    #[test]
    fn minhash_tables_and_other_tables_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let minhash = dir.path().join("minhash.parquet");
        neardup_table(
            &minhash,
            "minhash",
            serde_json::json!({"method": "minhash", "shingle": 5}),
        );
        let expected = format!(
            "{}: scheme minhash, expected simhash-doc or simhash-shingles (the search compares \
             64-bit simhashes, and minhash fingerprints have none)",
            minhash.display()
        );
        assert_eq!(check_table(&minhash).unwrap_err().to_string(), expected);
        // The plan (units) and the reader refuse it too, whoever calls them.
        let file = InputFile {
            path: minhash.clone(),
            format: crate::file::Format::Parquet,
            compression: Compression::None,
        };
        assert_eq!(Fingerprints.units(&file).unwrap_err().to_string(), expected);
        assert_eq!(read_all(&minhash).unwrap_err().to_string(), expected);

        let clusters = dir.path().join("clusters.parquet");
        let meta = crate::parquet_out::test_meta();
        let writer = crate::parquet_out::PartWriter::<crate::parquet_out::ClusterRow>::create_file(
            &clusters, &meta,
        )
        .unwrap();
        writer.commit().unwrap();
        assert_eq!(
            check_table(&clusters).unwrap_err().to_string(),
            format!(
                "{}: a neardup clusters table, expected a fingerprints table",
                clusters.display()
            )
        );
    }

    #[test]
    fn tables_read_together_must_agree() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.parquet");
        let b = dir.path().join("b.parquet");
        let c = dir.path().join("c.parquet");
        let other = dir.path().join("other.parquet");
        neardup_table(&a, "simhash-shingles", simhash_params(Some(3)));
        neardup_table(&b, "simhash-shingles", simhash_params(Some(5)));
        neardup_table(&c, "simhash-doc", simhash_params(None));
        write_parquet(
            &other,
            vec![
                ("doc_id", Arc::new(UInt64Array::from(vec![9])) as ArrayRef),
                ("simhash", Arc::new(UInt64Array::from(vec![1])) as ArrayRef),
            ],
            10,
        );
        // Tables without metadata go with anything.
        let (first, tag) = check_tables(&[other.clone(), a.clone()]).unwrap().unwrap();
        assert_eq!(
            (first, tag.meta.scheme.as_str()),
            (a.clone(), "simhash-shingles")
        );
        assert_eq!(check_tables(std::slice::from_ref(&other)).unwrap(), None);
        assert_eq!(
            check_tables(&[a.clone(), other.clone(), b.clone()])
                .unwrap_err()
                .to_string(),
            format!(
                "{}: made with other parameters than {}: shingle (5 vs 3); tables made \
                 differently cannot be used together",
                b.display(),
                a.display()
            )
        );
        assert_eq!(
            check_tables(&[a.clone(), c.clone()])
                .unwrap_err()
                .to_string(),
            format!(
                "{}: scheme simhash-doc, expected simhash-shingles (as in {}: tables made by \
                 different schemes cannot be used together)",
                c.display(),
                a.display()
            )
        );
    }

    #[test]
    fn document_numbers_must_fit_an_int64_and_not_be_negative() {
        let dir = tempfile::tempdir().unwrap();
        let signed = dir.path().join("signed.parquet");
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("doc_id", Arc::new(Int64Array::from(vec![1, 2, -5]))),
            ("simhash", Arc::new(Int64Array::from(vec![7, 7, 7]))),
        ];
        write_parquet(&signed, columns, 2);
        assert_eq!(
            read_all(&signed).unwrap_err().to_string(),
            format!(
                "{}: row 2: column \"doc_id\" is negative (-5); document numbers are 0 or more",
                signed.display()
            )
        );
        let unsigned = dir.path().join("unsigned.parquet");
        let columns: Vec<(&str, ArrayRef)> = vec![
            (
                "doc_id",
                Arc::new(UInt64Array::from(vec![MAX_DOC_ID, MAX_DOC_ID + 1])),
            ),
            ("simhash", Arc::new(UInt64Array::from(vec![7, 7]))),
        ];
        write_parquet(&unsigned, columns, 10);
        assert_eq!(
            read_all(&unsigned).unwrap_err().to_string(),
            format!(
                "{}: row 1: column \"doc_id\" is 9223372036854775808, beyond 2^63 - 1 \
                 (clusters/ holds document numbers as Int64)",
                unsigned.display()
            )
        );
    }
}
