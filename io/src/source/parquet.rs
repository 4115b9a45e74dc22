//! Parquet documents, sharded by row group.
//!
//! A row group is the unit of parallel work for Parquet input: its rows are
//! stored together, so any worker can decode one without touching the rest of
//! the file. [`row_groups`] lists a file's row groups from its footer, with
//! the number of the first row of each, so every row keeps a stable number
//! (its position in the file) whichever worker reads it. A unit's reader
//! decodes its row group a batch at a time, projecting only the columns a run
//! needs: text corpora are wide, and reading only the text and id columns
//! skips the rest of the data on disk.
//!
//! Column types are checked once, against the file's schema, before any data
//! is read, so a wrong column name or type fails fast with a message that
//! says what the file does have.

use std::collections::{HashSet, VecDeque};
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, GenericStringArray, StringViewArray,
};
use arrow::compute::{can_cast_types, cast, filter_record_batch};
use arrow::datatypes::{DataType, Float64Type, Schema};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::{Compression as ParquetCompression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};

use super::{
    row_group_of, Locator, Payload, ReadCost, RecordReader, SourceKind, SourceRecord, UnitSpec,
};
use super::{Kept, Strikes};
use crate::compress::Compression;
use crate::error::IoError;
use crate::file::InputFile;
use crate::record::{parse_number, FieldSpec, Record, RecordError, NON_NUMERIC_STRING};
use crate::store::ObjectBytes;

/// The Parquet document source kind.
pub struct Parquet;

impl SourceKind for Parquet {
    fn name(&self) -> &'static str {
        "Parquet"
    }

    fn claims(&self, lower_name: &str) -> Option<Compression> {
        // A compressed Parquet file is not something we can read by row group.
        let (stem, compression) = Compression::split_suffix(lower_name);
        (stem.ends_with(".parquet") && compression == Compression::None).then_some(compression)
    }

    fn units(&self, file: &InputFile) -> Result<Vec<UnitSpec>, IoError> {
        row_group_units(&file.path)
    }

    fn open(
        &self,
        file: &InputFile,
        unit: &UnitSpec,
        fields: &FieldSpec,
    ) -> Result<Box<dyn RecordReader>, IoError> {
        let rg = row_group_of(self, file, unit)?;
        Ok(Box::new(RowGroupReader::open(
            &file.path,
            &rg,
            fields,
            DEFAULT_READ_BATCH_ROWS,
        )?))
    }

    fn read_cost(&self, file: &InputFile) -> Option<ReadCost> {
        // Weights are rows here; the figures treat them like bytes (a rough model).
        Some(ReadCost {
            read_per_weight: file.compression.read_cost_per_byte().unwrap_or(0.3),
            text_per_weight: file.compression.expansion(),
        })
    }

    fn write_kept(
        &self,
        file: &InputFile,
        removed: &HashSet<u64>,
        tmp: &Path,
    ) -> Result<Kept, IoError> {
        write_parquet(&file.path, removed, None, tmp)
    }

    fn write_struck(
        &self,
        file: &InputFile,
        removed: &HashSet<u64>,
        strikes: &Strikes,
        fields: &FieldSpec,
        tmp: &Path,
    ) -> Result<Kept, IoError> {
        super::refuse_strike_of_html(file, fields)?;
        write_parquet(&file.path, removed, Some((strikes, fields)), tmp)
    }
}

/// The row groups of `path` as units, weighed by their rows.
pub(crate) fn row_group_units(path: &Path) -> Result<Vec<UnitSpec>, IoError> {
    Ok(row_groups(path)?
        .into_iter()
        .map(|rg| UnitSpec {
            index: rg.row_group,
            weight: rg.rows,
            locator: Locator::RowGroup(rg),
        })
        .collect())
}

/// Rows per decoded batch when the caller has no better idea.
pub const DEFAULT_READ_BATCH_ROWS: usize = 8 * 1024;

/// One row group of a Parquet file: the unit of parallel reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RowGroupUnit {
    /// Index of the row group in the file's footer.
    pub row_group: usize,
    /// Number (from 0) of the row group's first row within the file.
    pub first_row: u64,
    /// Number of rows in the row group.
    pub rows: u64,
}

/// Lists the row groups of `path` from its footer.
pub fn row_groups(path: &Path) -> Result<Vec<RowGroupUnit>, IoError> {
    let (_, meta) = open_parquet(path)?;
    let mut first_row = 0u64;
    let mut units = Vec::new();
    for (row_group, rg) in meta.metadata().row_groups().iter().enumerate() {
        let rows = u64::try_from(rg.num_rows()).map_err(|_| IoError::Corrupt {
            path: path.to_path_buf(),
            reason: format!("row group {row_group} has {} rows", rg.num_rows()),
        })?;
        units.push(RowGroupUnit {
            row_group,
            first_row,
            rows,
        });
        first_row += rows;
    }
    Ok(units)
}

/// Reads one row group, calling `f(row_in_file, record)` for every row.
///
/// Only the text column and the id and extra columns named in `spec` are
/// decoded. Text must be a string column; a null text is handed to `f` as
/// [`RecordError::TextNotString`] with `found: "null"`, and a null id as
/// [`RecordError::MissingId`], so the caller decides whether to stop or skip
/// (wrap with [`IoError::row`]). The id may be any string or integer column
/// (integers become decimal text); the extra column any numeric column, a
/// temporal column (its raw value, e.g. microseconds since the epoch) or a
/// string column holding numbers.
pub fn read_row_group(
    path: &Path,
    unit: &RowGroupUnit,
    spec: &FieldSpec,
    batch_rows: usize,
    mut f: impl FnMut(u64, Result<Record, RecordError>) -> Result<(), IoError>,
) -> Result<(), IoError> {
    let mut reader = RowGroupReader::open(path, unit, spec, batch_rows)?;
    let mut record = SourceRecord::default();
    while reader.next_into(&mut record)? {
        match std::mem::take(&mut record.payload) {
            Payload::Fields(r) => f(record.record, Ok(r))?,
            Payload::Invalid(e) => f(record.record, Err(e))?,
            _ => unreachable!("a row group reader yields fields or invalid records"),
        }
    }
    Ok(())
}

/// The records of one row group of documents, decoded a batch at a time.
struct RowGroupReader {
    path: PathBuf,
    spec: FieldSpec,
    batches: RowGroupBatches,
    /// Root column indices of text, id and extra, and all of them.
    text: usize,
    id: Option<usize>,
    extra: Option<usize>,
    /// Root column indices of `--url-field` and `--time-field`.
    url: Option<usize>,
    time: Option<usize>,
    roots: Vec<usize>,
    /// Rows of the current batch not yet handed out.
    pending: VecDeque<Result<Record, RecordError>>,
    /// The number in the file of the next row handed out.
    row: u64,
}

impl RowGroupReader {
    fn open(
        path: &Path,
        unit: &RowGroupUnit,
        spec: &FieldSpec,
        batch_rows: usize,
    ) -> Result<Self, IoError> {
        let (file, meta) = open_parquet(path)?;
        let schema = meta.schema().clone();
        let text = resolve(path, &schema, &spec.text_field, is_string, STRING)?;
        let id = match &spec.id_field {
            Some(name) => Some(resolve(path, &schema, name, is_id_type, ID)?),
            None => None,
        };
        let extra = match &spec.extra_field {
            Some(name) => Some(resolve(path, &schema, name, is_extra_type, EXTRA)?),
            None => None,
        };
        let url = match &spec.url_field {
            Some(name) => Some(resolve(path, &schema, name, is_string, STRING)?),
            None => None,
        };
        let time = match &spec.time_field {
            Some(name) => Some(resolve(path, &schema, name, is_time_type, TIME)?),
            None => None,
        };
        let mut roots: Vec<usize> = [Some(text), id, extra].into_iter().flatten().collect();
        for more in [url, time].into_iter().flatten() {
            if !roots.contains(&more) {
                roots.push(more);
            }
        }
        let batches = RowGroupBatches::open(path, file, meta, unit, &roots, batch_rows)?;
        Ok(RowGroupReader {
            path: path.to_path_buf(),
            spec: spec.clone(),
            batches,
            text,
            id,
            extra,
            url,
            time,
            roots,
            pending: VecDeque::new(),
            row: unit.first_row,
        })
    }

    /// Decodes the rows of one batch into `pending`.
    fn decode(&mut self, batch: &RecordBatch) -> Result<(), IoError> {
        let path = self.path.as_path();
        let roots = &self.roots;
        let col = |root| batch.column(projected_position(roots, root)).clone();
        let to_io = |e| arrow_err(path, e);
        let text_col = to_text(col(self.text)).map_err(to_io)?;
        let id_col = self.id.map(|r| to_id(col(r))).transpose().map_err(to_io)?;
        let extra_col = self
            .extra
            .map(|r| to_extra(col(r)))
            .transpose()
            .map_err(to_io)?;
        let view = BatchView::new(&text_col, id_col.as_ref(), extra_col.as_ref())
            .ok_or_else(|| layout_err(path, batch))?;
        let url_col = self
            .url
            .map(|r| to_text(col(r)))
            .transpose()
            .map_err(to_io)?;
        let urls = url_col.as_deref().and_then(Strings::new);
        let time_col = self.time.map(col);
        let times = time_col
            .as_ref()
            .map(time_values)
            .transpose()
            .map_err(to_io)?;
        let time_field = self.spec.time_field.clone().unwrap_or_default();
        self.pending.extend((0..batch.num_rows()).map(|i| {
            let mut record = view.record(i, &self.spec)?;
            let url = urls.as_ref().and_then(|u| u.get(i)).map(str::to_owned);
            let fetched_at = match &times {
                Some(t) => t.get(i, &time_field)?,
                None => None,
            };
            if url.is_some() || fetched_at.is_some() {
                let origin = record.origin.get_or_insert_with(Default::default);
                origin.url = url;
                origin.fetched_at = fetched_at;
            }
            Ok(record)
        }));
        Ok(())
    }
}

impl RecordReader for RowGroupReader {
    fn next_into(&mut self, out: &mut SourceRecord) -> Result<bool, IoError> {
        loop {
            if let Some(record) = self.pending.pop_front() {
                out.record = self.row;
                out.payload = match record {
                    Ok(r) => Payload::Fields(r),
                    Err(e) => Payload::Invalid(e),
                };
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

const STRING: &str = "a string type (Utf8, LargeUtf8 or Utf8View)";
const ID: &str = "a string or integer type";
const EXTRA: &str = "a numeric, temporal or string type";
const TIME: &str = "a timestamp, date, numeric (seconds since 1970) or string type";

fn is_time_type(data_type: &DataType) -> bool {
    is_extra_type(data_type)
}

/// A time column, ready to read row by row as microseconds since the epoch.
enum Times {
    /// Microseconds already (timestamps and dates, cast).
    Micros(arrow::array::Int64Array),
    /// Seconds since the epoch.
    Seconds(Float64Array),
    /// Dates as text ([`crate::web::parse_time_text`]).
    Text(ArrayRef),
}

impl Times {
    fn get(&self, i: usize, field: &str) -> Result<Option<i64>, RecordError> {
        match self {
            Times::Micros(a) => Ok(a.is_valid(i).then(|| a.value(i))),
            Times::Seconds(a) => Ok(if a.is_valid(i) {
                crate::web::seconds_to_micros(a.value(i))
            } else {
                None
            }),
            Times::Text(a) => {
                let Some(text) = Strings::new(a.as_ref()).and_then(|s| s.get(i)) else {
                    return Ok(None);
                };
                crate::web::parse_time_text(text)
                    .map(Some)
                    .ok_or_else(|| RecordError::BadTime {
                        field: field.to_owned(),
                        value: format!("{:?}", text.chars().take(40).collect::<String>()),
                    })
            }
        }
    }
}

/// Reads a time column: timestamps (any unit, any zone: they are instants) and dates as
/// microseconds, numbers as seconds, strings parsed per row.
fn time_values(array: &ArrayRef) -> Result<Times, arrow::error::ArrowError> {
    use arrow::datatypes::TimeUnit;
    let data_type = array.data_type();
    if is_string(data_type) {
        return Ok(Times::Text(to_text(array.clone())?));
    }
    if data_type.is_temporal() {
        let micros = cast(array, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
        let micros = cast(&micros, &DataType::Int64)?;
        return Ok(Times::Micros(
            micros.as_primitive::<arrow::datatypes::Int64Type>().clone(),
        ));
    }
    let seconds = cast(array, &DataType::Float64)?;
    Ok(Times::Seconds(
        seconds.as_primitive::<Float64Type>().clone(),
    ))
}

/// Opens a Parquet file and reads its footer.
pub(crate) fn open_parquet(path: &Path) -> Result<(ObjectBytes, ArrowReaderMetadata), IoError> {
    let file = ObjectBytes::open(path)?;
    let meta = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new()).map_err(|source| {
        IoError::Parquet {
            path: path.to_path_buf(),
            cause: source,
        }
    })?;
    Ok((file, meta))
}

/// Finds top-level column `name` and checks its type with `accepts`;
/// returns its index (which is also its Parquet root column index).
pub(crate) fn resolve(
    path: &Path,
    schema: &Schema,
    name: &str,
    accepts: fn(&DataType) -> bool,
    expected: &'static str,
) -> Result<usize, IoError> {
    let Some(index) = schema.fields().iter().position(|f| f.name() == name) else {
        return Err(IoError::MissingColumn {
            path: path.to_path_buf(),
            column: name.to_owned(),
            available: schema.fields().iter().map(|f| f.name().clone()).collect(),
        });
    };
    let data_type = schema.field(index).data_type();
    if !accepts(data_type) {
        return Err(IoError::ColumnType {
            path: path.to_path_buf(),
            column: name.to_owned(),
            found: data_type.to_string(),
            expected,
        });
    }
    Ok(index)
}

/// The batches of the given root columns of one row group; checks at the end
/// that the row group had the number of rows the unit promised.
pub(crate) struct RowGroupBatches {
    path: PathBuf,
    unit: RowGroupUnit,
    reader: Option<ParquetRecordBatchReader>,
    rows: u64,
}

impl RowGroupBatches {
    pub(crate) fn open(
        path: &Path,
        file: ObjectBytes,
        meta: ArrowReaderMetadata,
        unit: &RowGroupUnit,
        roots: &[usize],
        batch_rows: usize,
    ) -> Result<Self, IoError> {
        let count = meta.metadata().num_row_groups();
        if unit.row_group >= count {
            return Err(IoError::NoSuchRowGroup {
                path: path.to_path_buf(),
                row_group: unit.row_group,
                count,
            });
        }
        let mask = ProjectionMask::roots(meta.parquet_schema(), roots.iter().copied());
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(file, meta)
            .with_row_groups(vec![unit.row_group])
            .with_projection(mask)
            .with_batch_size(batch_rows.max(1))
            .build()
            .map_err(|source| IoError::Parquet {
                path: path.to_path_buf(),
                cause: source,
            })?;
        Ok(RowGroupBatches {
            path: path.to_path_buf(),
            unit: *unit,
            reader: Some(reader),
            rows: 0,
        })
    }

    /// The next batch, or `None` once the row group is read (and its row count checked).
    pub(crate) fn next_batch(&mut self) -> Result<Option<RecordBatch>, IoError> {
        let Some(reader) = self.reader.as_mut() else {
            return Ok(None);
        };
        match reader.next() {
            Some(batch) => {
                let batch = batch.map_err(|source| IoError::Decode {
                    path: self.path.clone(),
                    row_group: self.unit.row_group,
                    cause: source,
                })?;
                self.rows += batch.num_rows() as u64;
                Ok(Some(batch))
            }
            None => {
                self.reader = None;
                if self.rows != self.unit.rows {
                    return Err(IoError::RowCount {
                        path: self.path.clone(),
                        row_group: self.unit.row_group,
                        expected: self.unit.rows,
                        found: self.rows,
                    });
                }
                Ok(None)
            }
        }
    }
}

/// Where root column `root` ended up in a batch projected to `roots`: the
/// reader keeps file order and drops duplicates.
pub(crate) fn projected_position(roots: &[usize], root: usize) -> usize {
    let mut selected: Vec<usize> = roots.to_vec();
    selected.sort_unstable();
    selected.dedup();
    selected.iter().position(|&r| r == root).unwrap_or(0)
}

fn arrow_err(path: &Path, source: arrow::error::ArrowError) -> IoError {
    IoError::Arrow {
        path: path.to_path_buf(),
        cause: source,
    }
}

/// The schema promised types we can read, but the decoded data disagrees.
fn layout_err(path: &Path, batch: &RecordBatch) -> IoError {
    IoError::Corrupt {
        path: path.to_path_buf(),
        reason: format!("decoded columns have unexpected types: {}", batch.schema()),
    }
}

fn dictionary_values(data_type: &DataType) -> Option<&DataType> {
    match data_type {
        DataType::Dictionary(_, values) => Some(values),
        _ => None,
    }
}

fn is_plain_string(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    )
}

fn is_string(data_type: &DataType) -> bool {
    is_plain_string(data_type) || dictionary_values(data_type).is_some_and(is_plain_string)
}

fn is_id_type(data_type: &DataType) -> bool {
    let plain = |t: &DataType| is_plain_string(t) || t.is_integer();
    plain(data_type) || dictionary_values(data_type).is_some_and(plain)
}

fn is_extra_type(data_type: &DataType) -> bool {
    is_string(data_type) || to_float_steps(data_type).is_some()
}

/// The casts that turn a numeric or temporal type into Float64: temporal
/// values go through Int64 so we keep their raw count (e.g. microseconds).
fn to_float_steps(data_type: &DataType) -> Option<&'static [DataType]> {
    if data_type.is_numeric() && can_cast_types(data_type, &DataType::Float64) {
        Some(&[DataType::Float64])
    } else if data_type.is_temporal() && can_cast_types(data_type, &DataType::Int64) {
        Some(&[DataType::Int64, DataType::Float64])
    } else {
        None
    }
}

/// Text as a plain string array (dictionaries are unpacked).
fn to_text(array: ArrayRef) -> Result<ArrayRef, arrow::error::ArrowError> {
    match dictionary_values(array.data_type()) {
        Some(values) => cast(&array, &values.clone()),
        None => Ok(array),
    }
}

/// Ids as a string array: integers become their decimal text.
fn to_id(array: ArrayRef) -> Result<ArrayRef, arrow::error::ArrowError> {
    if is_plain_string(array.data_type()) {
        Ok(array)
    } else {
        cast(&array, &DataType::Utf8)
    }
}

/// Extra values: either strings to parse per row, or Float64.
fn to_extra(array: ArrayRef) -> Result<ArrayRef, arrow::error::ArrowError> {
    if is_string(array.data_type()) {
        return to_text(array);
    }
    let mut array = array;
    for step in to_float_steps(array.data_type()).unwrap_or(&[]) {
        array = cast(&array, step)?;
    }
    Ok(array)
}

/// Borrowed view of any of the three Arrow string layouts.
enum Strings<'a> {
    Small(&'a GenericStringArray<i32>),
    Large(&'a GenericStringArray<i64>),
    View(&'a StringViewArray),
}

impl<'a> Strings<'a> {
    fn new(array: &'a dyn Array) -> Option<Self> {
        if let Some(a) = array.as_string_opt::<i32>() {
            Some(Strings::Small(a))
        } else if let Some(a) = array.as_string_opt::<i64>() {
            Some(Strings::Large(a))
        } else {
            array.as_string_view_opt().map(Strings::View)
        }
    }

    fn get(&self, i: usize) -> Option<&'a str> {
        match self {
            Strings::Small(a) => a.is_valid(i).then(|| a.value(i)),
            Strings::Large(a) => a.is_valid(i).then(|| a.value(i)),
            Strings::View(a) => a.is_valid(i).then(|| a.value(i)),
        }
    }
}

/// The extra column of one batch, ready to read row by row.
enum Extra<'a> {
    Strings(Strings<'a>),
    Floats(&'a Float64Array),
}

/// The wanted columns of one batch, downcast once so rows are cheap.
struct BatchView<'a> {
    text: Strings<'a>,
    id: Option<Strings<'a>>,
    extra: Option<Extra<'a>>,
}

impl<'a> BatchView<'a> {
    /// `None` if a normalised column does not have the layout it should.
    fn new(
        text: &'a ArrayRef,
        id: Option<&'a ArrayRef>,
        extra: Option<&'a ArrayRef>,
    ) -> Option<Self> {
        let extra = match extra {
            None => None,
            Some(a) => Some(match Strings::new(a) {
                Some(s) => Extra::Strings(s),
                None => Extra::Floats(a.as_primitive_opt::<Float64Type>()?),
            }),
        };
        Some(BatchView {
            text: Strings::new(text)?,
            id: match id {
                Some(a) => Some(Strings::new(a)?),
                None => None,
            },
            extra,
        })
    }

    fn record(&self, i: usize, spec: &FieldSpec) -> Result<Record, RecordError> {
        let text = self.text.get(i).ok_or_else(|| RecordError::TextNotString {
            field: spec.text_field.clone(),
            found: "null",
        })?;
        let id = match (&self.id, &spec.id_field) {
            (Some(ids), Some(field)) => Some(
                ids.get(i)
                    .ok_or_else(|| RecordError::MissingId(field.clone()))?
                    .to_owned(),
            ),
            _ => None,
        };
        let extra = match (&self.extra, &spec.extra_field) {
            (Some(values), Some(field)) => extra_value(values, i, field)?,
            _ => None,
        };
        let mut record = Record {
            id,
            text: text.to_owned(),
            extra,
            ..Record::default()
        };
        crate::record::finish_text(&mut record, spec);
        Ok(record)
    }
}

/// Null extras are `None`, like a missing JSON field.
fn extra_value(values: &Extra<'_>, i: usize, field: &str) -> Result<Option<f64>, RecordError> {
    let not_numeric = |found| RecordError::ExtraNotNumeric {
        field: field.to_owned(),
        found,
    };
    match values {
        Extra::Strings(strings) => match strings.get(i) {
            None => Ok(None),
            Some(s) => parse_number(s)
                .map(Some)
                .ok_or_else(|| not_numeric(NON_NUMERIC_STRING)),
        },
        Extra::Floats(floats) if floats.is_null(i) => Ok(None),
        Extra::Floats(floats) => {
            let x = floats.value(i);
            if x.is_finite() {
                Ok(Some(x))
            } else {
                Err(not_numeric("non-finite number"))
            }
        }
    }
}

fn write_err(path: &Path) -> impl Fn(std::io::Error) -> IoError + '_ {
    move |source| IoError::Write {
        path: path.to_path_buf(),
        cause: source,
    }
}

/// The kept rows with the file's whole schema, zstd-compressed.
fn write_parquet(
    path: &Path,
    removed: &HashSet<u64>,
    strike: Option<(&Strikes, &FieldSpec)>,
    tmp: &Path,
) -> Result<Kept, IoError> {
    let open = ObjectBytes::open(path)?;
    let parquet_err = |source| IoError::Parquet {
        path: path.to_path_buf(),
        cause: source,
    };
    let reader = ParquetRecordBatchReaderBuilder::try_new(open).map_err(parquet_err)?;
    let schema = reader.schema().clone();
    let props = WriterProperties::builder()
        .set_compression(ParquetCompression::ZSTD(
            ZstdLevel::try_new(3).expect("valid level"),
        ))
        .build();
    let sink = File::create(tmp).map_err(write_err(tmp))?;
    let write_parquet_err = |source| IoError::ParquetWrite {
        path: tmp.to_path_buf(),
        cause: source,
    };
    let mut writer = ArrowWriter::try_new(sink, schema, Some(props)).map_err(write_parquet_err)?;
    let mut row = 0u64;
    let mut kept = Kept::default();
    for batch in reader.build().map_err(parquet_err)? {
        let batch: RecordBatch = batch.map_err(|e| IoError::Corrupt {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let keep: BooleanArray = (0..batch.num_rows() as u64)
            .map(|i| Some(!removed.contains(&(row + i))))
            .collect();
        let batch = match strike {
            Some((strikes, fields)) => strike_batch(path, batch, row, strikes, fields)?,
            None => batch,
        };
        row += batch.num_rows() as u64;
        let filtered = filter_record_batch(&batch, &keep).map_err(|e| IoError::Corrupt {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        kept.kept += filtered.num_rows() as u64;
        kept.removed += (batch.num_rows() - filtered.num_rows()) as u64;
        writer.write(&filtered).map_err(write_parquet_err)?;
    }
    writer.close().map_err(write_parquet_err)?;
    Ok(kept)
}

/// `batch` (whose first row is row `first_row` of the file) with the ranges of `strikes`
/// taken out of the text column, which keeps its type. Every range is checked against the
/// text read back; batches without ranges are returned as they are.
fn strike_batch(
    path: &Path,
    batch: RecordBatch,
    first_row: u64,
    strikes: &Strikes,
    fields: &FieldSpec,
) -> Result<RecordBatch, IoError> {
    let rows = first_row..first_row + batch.num_rows() as u64;
    if !strikes.keys().any(|r| rows.contains(r)) {
        return Ok(batch);
    }
    let corrupt = |reason: String| IoError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let Some((index, _)) = batch.schema().column_with_name(&fields.text_field) else {
        return Err(corrupt(format!(
            "no text column {:?} to strike repeated passages from",
            fields.text_field
        )));
    };
    let column = batch.column(index);
    let texts = cast(column, &DataType::Utf8).map_err(|e| corrupt(e.to_string()))?;
    let texts = texts.as_string::<i32>();
    let mut struck = Vec::with_capacity(texts.len());
    for i in 0..texts.len() {
        let row = first_row + i as u64;
        match (strikes.get(&row), texts.is_null(i)) {
            (None, true) => struck.push(None),
            (None, false) => struck.push(Some(texts.value(i).to_string())),
            (Some(ranges), null) => {
                let text = if null { None } else { Some(texts.value(i)) };
                let text = text.ok_or_else(|| "the text is null".to_string());
                let done = text
                    .and_then(|t| super::strike_text(t, ranges))
                    .map_err(|reason| IoError::Strike {
                        path: path.to_path_buf(),
                        record: format!("row {row}"),
                        reason,
                    })?;
                struck.push(Some(done));
            }
        }
    }
    let struck: ArrayRef = std::sync::Arc::new(GenericStringArray::<i32>::from(struck));
    let struck = cast(&struck, column.data_type()).map_err(|e| corrupt(e.to_string()))?;
    let mut columns = batch.columns().to_vec();
    columns[index] = struck;
    RecordBatch::try_new(batch.schema(), columns).map_err(|e| corrupt(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::write_parquet;
    use arrow::array::{
        Int32Array, Int64Array, StringArray, TimestampMicrosecondArray, UInt64Array,
    };
    use std::sync::Arc;

    fn spec(text: &str, id: Option<&str>, extra: Option<&str>) -> FieldSpec {
        FieldSpec {
            text_field: text.into(),
            id_field: id.map(Into::into),
            extra_field: extra.map(Into::into),
            ..Default::default()
        }
    }

    /// 7 rows in row groups of 3: (3, 3, 1).
    /// The text column has type `text_type`; row 4's text is null.
    fn corpus(dir: &Path, text_type: &DataType) -> std::path::PathBuf {
        let texts: Vec<Option<String>> = (0..7)
            .map(|i| (i != 4).then(|| format!("doc {i}")))
            .collect();
        let text = cast(&StringArray::from(texts), text_type).unwrap();
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("url", Arc::new(StringArray::from(vec!["u"; 7]))),
            ("text", text),
            ("id", Arc::new(Int64Array::from_iter_values(100..107))),
            (
                "score",
                Arc::new(Int32Array::from(vec![
                    Some(1),
                    None,
                    Some(3),
                    Some(4),
                    Some(5),
                    Some(6),
                    Some(7),
                ])),
            ),
            (
                "ts",
                Arc::new(TimestampMicrosecondArray::from_iter_values(1_000..1_007)),
            ),
        ];
        let path = dir.join(format!(
            "{}.parquet",
            text_type.to_string().replace(['(', ')', ',', ' '], "_")
        ));
        write_parquet(&path, columns, 3);
        // The file's embedded Arrow schema must bring the type back.
        let (_, meta) = open_parquet(&path).unwrap();
        assert_eq!(meta.schema().field(1).data_type(), text_type);
        path
    }

    type Rows = Vec<(u64, Result<Record, RecordError>)>;

    fn read_all(path: &Path, spec: &FieldSpec) -> Result<Rows, IoError> {
        let mut out = Vec::new();
        for unit in row_groups(path)? {
            read_row_group(path, &unit, spec, 2, |row, rec| {
                out.push((row, rec));
                Ok(())
            })?;
        }
        Ok(out)
    }

    #[test]
    fn row_groups_number_rows_across_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = corpus(dir.path(), &DataType::Utf8);
        let units = row_groups(&path).unwrap();
        let want = [(0, 0, 3), (1, 3, 3), (2, 6, 1)];
        let got: Vec<(usize, u64, u64)> = units
            .iter()
            .map(|u| (u.row_group, u.first_row, u.rows))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn reads_every_string_layout_with_integer_ids() {
        let dir = tempfile::tempdir().unwrap();
        let dictionary = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        for text_type in [
            DataType::Utf8,
            DataType::LargeUtf8,
            DataType::Utf8View,
            dictionary,
        ] {
            let path = corpus(dir.path(), &text_type);
            let got = read_all(&path, &spec("text", Some("id"), Some("score"))).unwrap();
            assert_eq!(got.len(), 7);
            for (i, (row, rec)) in got.into_iter().enumerate() {
                assert_eq!(row, i as u64);
                if i == 4 {
                    let err = rec.unwrap_err();
                    assert_eq!(
                        err.to_string(),
                        r#"field "text" is null, expected a string"#
                    );
                    let wrapped = IoError::row(&path, row, err);
                    assert!(wrapped
                        .to_string()
                        .starts_with(&format!("{}: row 4: ", path.display())));
                    continue;
                }
                let want = Record {
                    id: Some((100 + i).to_string()),
                    text: format!("doc {i}"),
                    extra: (i != 1).then_some(i as f64 + 1.0),
                    ..Record::default()
                };
                assert_eq!(rec.unwrap(), want);
            }
        }
    }

    #[test]
    fn timestamps_give_their_raw_value_and_ids_are_optional() {
        let dir = tempfile::tempdir().unwrap();
        let path = corpus(dir.path(), &DataType::Utf8);
        let got = read_all(&path, &spec("text", None, Some("ts"))).unwrap();
        let rec = got[6].1.clone().unwrap();
        assert_eq!(
            rec,
            Record {
                id: None,
                text: "doc 6".into(),
                extra: Some(1_006.0),
                ..Record::default()
            }
        );
    }

    #[test]
    fn a_single_row_group_can_be_read_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = corpus(dir.path(), &DataType::Utf8);
        let unit = row_groups(&path).unwrap()[1];
        let mut rows = Vec::new();
        read_row_group(
            &path,
            &unit,
            &spec("text", Some("url"), None),
            100,
            |row, rec| {
                rows.push((row, rec.map(|r| (r.id, r.text))));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(rows[0], (3, Ok((Some("u".into()), "doc 3".into()))));
        assert_eq!(rows.len(), 3);
    }

    #[test]
    fn callback_errors_stop_reading() {
        let dir = tempfile::tempdir().unwrap();
        let path = corpus(dir.path(), &DataType::Utf8);
        let unit = row_groups(&path).unwrap()[1];
        let mut seen = 0;
        let err = read_row_group(&path, &unit, &spec("text", None, None), 10, |row, rec| {
            seen += 1;
            rec.map(|_| ()).map_err(|e| IoError::row(&path, row, e))
        })
        .unwrap_err();
        assert_eq!(seen, 2);
        assert!(matches!(err, IoError::Row { row: 4, .. }), "{err}");
    }

    #[test]
    fn missing_column_lists_what_exists() {
        let dir = tempfile::tempdir().unwrap();
        let path = corpus(dir.path(), &DataType::Utf8);
        let err = read_all(&path, &spec("content", None, None)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: no column \"content\"; the file has columns: url, text, id, score, ts",
                path.display()
            )
        );
    }

    #[test]
    fn wrong_column_types_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = corpus(dir.path(), &DataType::Utf8);
        let err = read_all(&path, &spec("id", None, None)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: column \"id\" has type Int64, expected a string type (Utf8, LargeUtf8 or Utf8View)",
                path.display()
            )
        );
        let err = read_all(&path, &spec("text", Some("ts"), None)).unwrap_err();
        assert!(
            matches!(err, IoError::ColumnType { ref column, .. } if column == "ts"),
            "{err}"
        );
    }

    #[test]
    fn string_extra_values_are_parsed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.parquet");
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("text", Arc::new(StringArray::from(vec!["a", "b"]))),
            ("q", Arc::new(StringArray::from(vec!["0.5", "high"]))),
            (
                "id",
                Arc::new(UInt64Array::from(vec![Some(u64::MAX), None])),
            ),
        ];
        write_parquet(&path, columns, 10);
        let got = read_all(&path, &spec("text", None, Some("q"))).unwrap();
        assert_eq!(got[0].1.as_ref().unwrap().extra, Some(0.5));
        assert_eq!(
            got[1].1.clone().unwrap_err().to_string(),
            r#"field "q" is a non-numeric string, expected a number or a numeric string"#
        );
        let got = read_all(&path, &spec("text", Some("id"), None)).unwrap();
        assert_eq!(
            got[0].1.as_ref().unwrap().id.as_deref(),
            Some("18446744073709551615")
        );
        assert_eq!(got[1].1, Err(RecordError::MissingId("id".into())));
    }

    #[test]
    fn non_parquet_files_and_bad_units_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fake.parquet");
        std::fs::write(&path, b"{\"text\": \"not parquet\"}\n").unwrap();
        let err = row_groups(&path).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("{}: cannot read as Parquet: ", path.display())),
            "{err}"
        );

        let path = corpus(dir.path(), &DataType::Utf8);
        let bad = RowGroupUnit {
            row_group: 9,
            first_row: 0,
            rows: 1,
        };
        let err =
            read_row_group(&path, &bad, &spec("text", None, None), 10, |_, _| Ok(())).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: row group 9 does not exist (the file has 3)",
                path.display()
            )
        );
        let stale = RowGroupUnit {
            row_group: 2,
            first_row: 6,
            rows: 5,
        };
        let err = read_row_group(&path, &stale, &spec("text", None, None), 10, |_, _| Ok(()))
            .unwrap_err();
        assert!(
            matches!(
                err,
                IoError::RowCount {
                    expected: 5,
                    found: 1,
                    ..
                }
            ),
            "{err}"
        );
    }
}
