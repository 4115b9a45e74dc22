//! Source kinds: one abstraction for every input format.
//!
//! A run reads its input in *units* that workers take independently, and
//! every unit yields *records* with a number that never changes: the same
//! file gives the same record numbers whichever worker reads which unit. What
//! differs between formats is only how a file is cut into units and how a
//! unit yields its records, and that is what a [`SourceKind`] says:
//!
//! * [`SourceKind::claims`] recognises the kind's files by name, for
//!   directory scans ([`detect`] asks every registered kind);
//! * [`SourceKind::units`] cuts a file into [`UnitSpec`]s: a whole JSONL or
//!   plain file (a compressed stream cannot be split), or one Parquet row
//!   group, each with a weight for balancing;
//! * [`SourceKind::open`] gives a [`RecordReader`] for one unit, which yields
//!   [`SourceRecord`]s: the record's 0-based number within its file and its
//!   [`Payload`];
//! * [`SourceKind::parse_into`] parses a [`Payload::Raw`] record later and
//!   elsewhere: JSONL lines travel unparsed to the worker that fingerprints
//!   them, which spreads the parsing along with the hashing;
//! * [`SourceKind::write_kept`] copies the records a deduplication keeps, in
//!   the file's own format (`--write-dedup`);
//! * [`SourceKind::read_cost`] tells the planner how expensive a unit's weight
//!   is to read and how much text it holds.
//!
//! [`Format`] is the registry key and [`kind`] the registration: adding a
//! format is one new file in this directory, a [`Format`] variant, and one arm
//! of [`kind`] (plus [`Format::ALL`]).
//!
//! ```
//! use neardup_io::input::expand_inputs;
//! use neardup_io::record::FieldSpec;
//! use neardup_io::source::{Format, Payload, SourceRecord};
//! use neardup_io::IoError;
//!
//! # fn main() -> Result<(), IoError> {
//! # let dir = tempfile::tempdir().unwrap();
//! # std::fs::write(dir.path().join("docs.jsonl"), "{\"id\": 7, \"text\": \"hello\"}\n\n").unwrap();
//! # let corpus = dir.path().to_string_lossy().into_owned();
//! let fields = FieldSpec {
//!     text_field: "text".into(),
//!     id_field: Some("id".into()),
//!     extra_field: None,
//!     ..Default::default()
//! };
//! let (mut texts, mut blank) = (Vec::new(), 0);
//! for file in expand_inputs(&[corpus], false)? {
//!     assert_eq!(file.format, Format::Jsonl);
//!     let kind = file.format.kind();
//!     for unit in kind.units(&file)? {
//!         let mut reader = kind.open(&file, &unit, &fields)?;
//!         let mut record = SourceRecord::default();
//!         while reader.next_into(&mut record)? {
//!             match &record.payload {
//!                 Payload::Raw(line) => {
//!                     let mut parsed = Default::default();
//!                     kind.parse_into(line, &fields, &mut parsed)
//!                         .map_err(|e| kind.record_error(&file.path, record.record, e))?;
//!                     texts.push((record.record, parsed.id, parsed.text));
//!                 }
//!                 Payload::Blank(_) => blank += 1,
//!                 _ => unreachable!("JSONL yields raw lines and blank lines"),
//!             }
//!         }
//!     }
//! }
//! assert_eq!(texts, [(0, Some("7".to_string()), "hello".to_string())]);
//! assert_eq!(blank, 1);
//! # Ok(())
//! # }
//! ```

pub mod arc;
mod archive;
pub mod fingerprints;
pub mod jsonl;
pub mod parquet;
pub mod plain;
pub mod warc;

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::compress::Compression;
use crate::error::{shown, IoError};
pub use crate::file::Format;
use crate::file::InputFile;
use crate::record::{FieldSpec, Record, RecordError};

pub use fingerprints::FingerprintIn;
pub use parquet::RowGroupUnit;

impl Format {
    /// The source kind that reads this format.
    pub fn kind(self) -> &'static dyn SourceKind {
        kind(self)
    }
}

/// The registration: the source kind of each format.
pub fn kind(format: Format) -> &'static dyn SourceKind {
    match format {
        Format::Jsonl => &jsonl::Jsonl,
        Format::Parquet => &parquet::Parquet,
        Format::Plain => &plain::Plain,
        Format::Fingerprints => &fingerprints::Fingerprints,
        Format::Warc => &warc::Warc,
        Format::Arc => &arc::Arc,
    }
}

/// The format and compression of a file whose (lower-cased) name a registered
/// kind claims, or `None`: the rule of directory scans.
pub fn detect(lower_name: &str) -> Option<(Format, Compression)> {
    Format::ALL
        .iter()
        .find_map(|&format| kind(format).claims(lower_name).map(|c| (format, c)))
}

/// Where a unit lies in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Locator {
    /// The whole file (a stream that cannot be split).
    Whole,
    /// One row group of a Parquet file.
    RowGroup(RowGroupUnit),
    /// The lines starting in bytes `start..end` of an uncompressed line file large enough to
    /// be split (see [`jsonl::SPLIT_BYTES`]); `start` and `end` are line starts (or the end).
    Bytes { start: u64, end: u64 },
}

/// One unit of reading: a piece of a file that any worker can read alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UnitSpec {
    /// The unit's index within its file (0 for a whole file).
    pub index: usize,
    /// Relative cost, for balancing: bytes for whole files, rows for row groups.
    pub weight: u64,
    /// Where the unit is.
    pub locator: Locator,
}

impl UnitSpec {
    /// The bytes of `file` that reading this unit streams from its start to its end (an
    /// object of a store is then read by one [`crate::store::open_range`]), or `None` for a
    /// unit read by random access (a Parquet row group) or from stdin.
    pub fn streamed_bytes(&self, file: &InputFile) -> Option<(u64, u64)> {
        match self.locator {
            _ if file.is_stdin() => None,
            Locator::Whole if file.format != crate::file::Format::Parquet => Some((0, u64::MAX)),
            Locator::Bytes { start, end } => Some((start, end)),
            Locator::Whole | Locator::RowGroup(_) => None,
        }
    }

    /// The unit of a whole file, weighed by its size in bytes (0 if unknown, as for stdin).
    pub fn whole_file(file: &InputFile) -> UnitSpec {
        UnitSpec {
            index: 0,
            weight: jsonl::size_of(file).ok().flatten().unwrap_or(0),
            locator: Locator::Whole,
        }
    }
}

/// What a unit of a kind costs, per unit of its weight, relative to
/// fingerprinting one byte of text with simhash-doc. A rough model (see
/// [`Compression::read_cost_per_byte`]) that moves load, never correctness.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadCost {
    /// Reading (and decompressing, and decoding) cost.
    pub read_per_weight: f64,
    /// Bytes of text to fingerprint.
    pub text_per_weight: f64,
}

impl ReadCost {
    /// The cost of a whole file read as a byte stream (JSONL, plain text): its compression's
    /// reading cost per byte, or that of a plain copy, and how much text a byte holds.
    pub fn of_stream(file: &InputFile) -> ReadCost {
        ReadCost {
            read_per_weight: file.compression.read_cost_per_byte().unwrap_or(0.1),
            text_per_weight: file.compression.expansion(),
        }
    }
}

/// One record of a unit.
#[derive(Debug, Default)]
pub struct SourceRecord {
    /// The record's 0-based number within its file: JSONL line - 1, Parquet
    /// row, 0 for a plain file.
    pub record: u64,
    pub payload: Payload,
}

/// What a record holds, as its reader found it.
#[derive(Debug)]
pub enum Payload {
    /// Unparsed bytes (a JSONL line), for [`SourceKind::parse_into`].
    Raw(Vec<u8>),
    /// A JSONL line holding only ASCII whitespace: not a record. Runs count
    /// these; `neardup hash` reports them as empty lines.
    Blank(Vec<u8>),
    /// A record decoded by the reader (Parquet rows, plain files).
    Fields(Record),
    /// A row of a fingerprint table.
    Fingerprint(FingerprintIn),
    /// A record that could not be decoded; wrap it with
    /// [`SourceKind::record_error`] to name file and position.
    Invalid(RecordError),
    /// A record that is not a document (an archive's request record, a redirect, an
    /// image, a line too long to parse): counted by reason, never an error.
    Skipped(crate::web::SkipReason),
}

impl Default for Payload {
    fn default() -> Self {
        Payload::Raw(Vec::new())
    }
}

impl Payload {
    /// The document this record holds, for a command that reads documents: a raw line
    /// parsed by `kind` into `record`, or decoded fields swapped into it (the payload keeps
    /// `record`'s old buffers). `Some(Err)` for a record that does not decode, and for a
    /// blank line ([`RecordError::EmptyLine`]); `None` for a record that holds no document
    /// (skipped by reason, a fingerprint row).
    pub fn document_into(
        &mut self,
        kind: &dyn SourceKind,
        spec: &FieldSpec,
        record: &mut Record,
    ) -> Option<Result<(), RecordError>> {
        match self {
            Payload::Raw(raw) => Some(kind.parse_into(raw, spec, record)),
            Payload::Fields(fields) => {
                std::mem::swap(record, fields);
                Some(Ok(()))
            }
            Payload::Blank(_) => Some(Err(RecordError::EmptyLine)),
            Payload::Invalid(e) => Some(Err(e.clone())),
            Payload::Fingerprint(_) | Payload::Skipped(_) => None,
        }
    }
}

/// Yields the records of one unit, in order.
pub trait RecordReader: Send {
    /// Reads the next record into `out` (reusing its buffers where it can) and
    /// returns `true`, or returns `false` at the end of the unit.
    fn next_into(&mut self, out: &mut SourceRecord) -> Result<bool, IoError>;
}

/// How many records of a file were written and left out.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    pub kept: u64,
    pub removed: u64,
}

/// One input format: how its files split into units, and how a unit yields
/// records. See the module docs.
pub trait SourceKind: Sync {
    /// A short name for messages ("JSONL", "Parquet", ...).
    fn name(&self) -> &'static str;

    /// The compression of a file whose lower-cased name says it is of this
    /// kind, or `None`. Used for directory scans, where only claimed files are
    /// taken.
    fn claims(&self, lower_name: &str) -> Option<Compression>;

    /// The units of `file`, in record order. By default the whole file is one unit (a
    /// compressed stream cannot be split); kinds with a row-group layout cut it finer.
    fn units(&self, file: &InputFile) -> Result<Vec<UnitSpec>, IoError> {
        Ok(vec![UnitSpec::whole_file(file)])
    }

    /// A reader of one unit of `file`. `fields` names the text, id and extra
    /// fields of documents; kinds whose columns are fixed ignore it.
    fn open(
        &self,
        file: &InputFile,
        unit: &UnitSpec,
        fields: &FieldSpec,
    ) -> Result<Box<dyn RecordReader>, IoError>;

    /// Parses a [`Payload::Raw`] record of this kind into `out`, reusing its
    /// buffers. Kinds that never yield raw records refuse.
    fn parse_into(
        &self,
        raw: &[u8],
        fields: &FieldSpec,
        out: &mut Record,
    ) -> Result<(), RecordError> {
        let _ = (raw, fields, out);
        Err(RecordError::NotRaw { kind: self.name() })
    }

    /// A record error with the file and the record's position as this kind
    /// counts it: the row from 0 unless the kind says otherwise (JSONL: the
    /// line from 1).
    fn record_error(&self, path: &Path, record: u64, error: RecordError) -> IoError {
        IoError::row(path, record, error)
    }

    /// Appends the name of a record that has no id of its own to `out`:
    /// `FILE:ROW` unless the kind says otherwise (JSONL: `FILE:LINE`).
    fn record_name(&self, file: &InputFile, record: u64, out: &mut String) {
        write!(out, "{}:{record}", shown(&file.path)).expect("writing to a String");
    }

    /// The cost of reading `file`'s units, per unit of weight; `None` for
    /// kinds whose records are not fingerprinted (nothing to balance).
    fn read_cost(&self, file: &InputFile) -> Option<ReadCost>;

    /// Writes the records of `file` whose record number is not in `removed`
    /// to `tmp`, unchanged and in the file's own format, and counts them. The
    /// caller renames `tmp` into place (see [`crate::dedup_out::write_kept`]).
    fn write_kept(
        &self,
        file: &InputFile,
        removed: &HashSet<u64>,
        tmp: &Path,
    ) -> Result<Kept, IoError>;

    /// Writes the records of `file` whose record number is not in `removed` to `tmp`, as
    /// [`Self::write_kept`] does, with the byte ranges `strikes` lists for a record taken out
    /// of its text (`--strike substrings`). The text is read back with `fields` and every
    /// range is checked against it ([`strike_text`]); records without ranges are written as
    /// `write_kept` writes them. Kinds whose text is extracted from the record (archives,
    /// `--html`) refuse: the ranges are positions in the extracted text, not in the record.
    fn write_struck(
        &self,
        file: &InputFile,
        removed: &HashSet<u64>,
        strikes: &Strikes,
        fields: &FieldSpec,
        tmp: &Path,
    ) -> Result<Kept, IoError> {
        let _ = (removed, strikes, fields, tmp);
        Err(IoError::NotSupported {
            path: file.path.clone(),
            what: NO_STRIKE,
        })
    }

    /// Whether an output file with no record left is still written (an empty
    /// JSONL file, a Parquet table with no rows). A plain file is one
    /// document: removed, it leaves nothing to write.
    fn keeps_empty_output(&self) -> bool {
        true
    }
}

/// Why a format's records cannot have passages struck (see [`SourceKind::write_struck`]).
pub const NO_STRIKE: &str = "repeated passages cannot be struck from this format: its text is extracted from the record (--strike substrings needs JSONL, Parquet or plain text, without --html)";

/// The refusal every text format shares: with `--html`, a record's text is extracted from
/// HTML, so ranges in that text are not ranges of the record.
pub(crate) fn refuse_strike_of_html(file: &InputFile, fields: &FieldSpec) -> Result<(), IoError> {
    if fields
        .html
        .is_some_and(|m| m != crate::html::HtmlMode::None)
    {
        return Err(IoError::NotSupported {
            path: file.path.clone(),
            what: NO_STRIKE,
        });
    }
    Ok(())
}

/// The byte ranges `[start, end)` to take out of each record's text, by record number,
/// sorted and disjoint (rows of `substrings/`).
pub type Strikes = std::collections::HashMap<u64, Vec<(u64, u64)>>;

/// `text` without the byte ranges `ranges` (sorted, disjoint, inside the text, on character
/// boundaries), or why the ranges do not fit it.
pub fn strike_text(text: &str, ranges: &[(u64, u64)]) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut at = 0usize;
    for &(start, end) in ranges {
        let (s, e) = (start as usize, end as usize);
        if s < at || e <= s || e > text.len() {
            return Err(format!(
                "the range [{start}, {end}) does not fit a text of {} bytes (or overlaps the one before): the input changed since the ranges were found?",
                text.len()
            ));
        }
        if !text.is_char_boundary(s) || !text.is_char_boundary(e) {
            return Err(format!(
                "the range [{start}, {end}) cuts a UTF-8 character: the input changed since the ranges were found?"
            ));
        }
        out.push_str(&text[at..s]);
        at = e;
    }
    out.push_str(&text[at..]);
    Ok(out)
}

/// A writer of `tmp` in `compression` (what a kept JSONL or plain file is written with).
pub(crate) fn create_compressed(
    tmp: &Path,
    compression: Compression,
) -> Result<Box<dyn std::io::Write>, IoError> {
    let write_err = |cause| IoError::Write {
        path: tmp.to_path_buf(),
        cause,
    };
    let sink = std::io::BufWriter::new(std::fs::File::create(tmp).map_err(write_err)?);
    Ok(match compression {
        Compression::None => Box::new(sink),
        Compression::Gzip => Box::new(flate2::write::GzEncoder::new(
            sink,
            flate2::Compression::default(),
        )),
        Compression::Zstd => Box::new(
            zstd::Encoder::new(sink, 3)
                .map_err(write_err)?
                .auto_finish(),
        ),
    })
}

/// The row group a unit must be for row-group kinds.
pub(crate) fn row_group_of(
    kind: &dyn SourceKind,
    file: &InputFile,
    unit: &UnitSpec,
) -> Result<RowGroupUnit, IoError> {
    match unit.locator {
        Locator::RowGroup(rg) => Ok(rg),
        Locator::Whole | Locator::Bytes { .. } => Err(IoError::WrongUnit {
            path: file.path.clone(),
            kind: kind.name(),
        }),
    }
}

/// The whole-file unit a unit must be for whole-file kinds.
pub(crate) fn whole_file_of(
    kind: &dyn SourceKind,
    file: &InputFile,
    unit: &UnitSpec,
) -> Result<(), IoError> {
    match unit.locator {
        Locator::Whole => Ok(()),
        Locator::RowGroup(_) | Locator::Bytes { .. } => Err(IoError::WrongUnit {
            path: file.path.clone(),
            kind: kind.name(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::expand_inputs;
    use crate::test_util::write_parquet;
    use arrow::array::{ArrayRef, StringArray, UInt64Array};
    use std::sync::Arc;

    fn fields() -> FieldSpec {
        FieldSpec {
            text_field: "text".into(),
            id_field: None,
            extra_field: None,
            ..Default::default()
        }
    }

    /// Every record of every unit: (record number, what it held).
    fn read_all(file: &InputFile) -> Vec<(u64, String)> {
        let kind = file.format.kind();
        let mut out = Vec::new();
        for unit in kind.units(file).unwrap() {
            let mut reader = kind.open(file, &unit, &fields()).unwrap();
            let mut record = SourceRecord::default();
            while reader.next_into(&mut record).unwrap() {
                let shown = match &record.payload {
                    Payload::Raw(raw) => {
                        let mut parsed = Record::default();
                        kind.parse_into(raw, &fields(), &mut parsed).unwrap();
                        format!("raw {}", parsed.text)
                    }
                    Payload::Blank(b) => format!("blank {}", b.len()),
                    Payload::Fields(r) => format!("fields {:?} {}", r.id, r.text),
                    Payload::Fingerprint(fp) => format!("fp {} {}", fp.doc_id, fp.simhash),
                    Payload::Invalid(e) => format!("invalid {e}"),
                    Payload::Skipped(reason) => format!("skipped {}", reason.name()),
                };
                out.push((record.record, shown));
            }
        }
        out
    }

    fn file(path: &Path, format: Format) -> InputFile {
        InputFile {
            path: path.to_path_buf(),
            format,
            compression: Compression::None,
        }
    }

    #[test]
    fn every_registered_kind_round_trips_with_stable_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let mut seen = HashSet::new();
        for format in Format::ALL {
            let got = match format {
                Format::Jsonl => {
                    let path = dir.path().join("a.jsonl.zst");
                    let body = "{\"text\": \"a\"}\n \n{\"text\": \"b\"}\n";
                    std::fs::write(&path, zstd::encode_all(body.as_bytes(), 3).unwrap()).unwrap();
                    let files = expand_inputs(&[path.display().to_string()], false).unwrap();
                    assert_eq!(files[0].format, format);
                    read_all(&files[0])
                }
                Format::Parquet => {
                    let path = dir.path().join("b.parquet");
                    let texts: ArrayRef = Arc::new(StringArray::from(vec!["x", "y", "z"]));
                    write_parquet(&path, vec![("text", texts)], 2);
                    let files = expand_inputs(&[path.display().to_string()], false).unwrap();
                    assert_eq!(files[0].format, format);
                    assert_eq!(format.kind().units(&files[0]).unwrap().len(), 2);
                    read_all(&files[0])
                }
                Format::Plain => {
                    let path = dir.path().join("c.txt");
                    std::fs::write(&path, "whole").unwrap();
                    let files = expand_inputs(&[path.display().to_string()], true).unwrap();
                    assert_eq!(files[0].format, format);
                    read_all(&files[0])
                }
                Format::Fingerprints => {
                    let path = dir.path().join("d.parquet");
                    let columns: Vec<(&str, ArrayRef)> = vec![
                        ("doc_id", Arc::new(UInt64Array::from(vec![9, 4, 7]))),
                        ("simhash", Arc::new(UInt64Array::from(vec![1, 2, 3]))),
                    ];
                    write_parquet(&path, columns, 2);
                    read_all(&file(&path, format))
                }
                Format::Warc => {
                    let path = dir.path().join("e.warc.gz");
                    let records = [
                        crate::web::testing::warc(
                            "warcinfo",
                            None,
                            "application/warc-fields",
                            b"software: x\r\n",
                        ),
                        crate::web::testing::warc(
                            "response",
                            Some("http://a.example/"),
                            "application/http; msgtype=response",
                            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\npage a",
                        ),
                        crate::web::testing::warc(
                            "request",
                            Some("http://a.example/"),
                            "application/http; msgtype=request",
                            b"GET / HTTP/1.1\r\n\r\n",
                        ),
                        crate::web::testing::warc(
                            "resource",
                            Some("http://b.example/t.txt"),
                            "text/plain",
                            b"text b",
                        ),
                    ];
                    std::fs::write(&path, crate::web::testing::gzip_members(&records)).unwrap();
                    let files = expand_inputs(&[path.display().to_string()], false).unwrap();
                    assert_eq!(files[0].format, format);
                    read_all(&files[0])
                }
                Format::Arc => {
                    let path = dir.path().join("f.arc");
                    std::fs::write(
                        &path,
                        crate::web::testing::arc(&[(
                            "http://c.example/",
                            "text/plain",
                            &b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\npage c"[..],
                        )]),
                    )
                    .unwrap();
                    let files = expand_inputs(&[path.display().to_string()], false).unwrap();
                    assert_eq!(files[0].format, format);
                    read_all(&files[0])
                }
            };
            seen.insert(format);
            let path = |name: &str| dir.path().join(name).display().to_string();
            let want: Vec<(u64, String)> = match format {
                Format::Jsonl => vec![
                    (0, "raw a".into()),
                    (1, "blank 1".into()),
                    (2, "raw b".into()),
                ],
                Format::Parquet => vec![
                    (0, "fields None x".into()),
                    (1, "fields None y".into()),
                    (2, "fields None z".into()),
                ],
                Format::Plain => vec![(0, format!("fields Some({:?}) whole", path("c.txt")))],
                Format::Fingerprints => vec![
                    (0, "fp 9 1".into()),
                    (1, "fp 4 2".into()),
                    (2, "fp 7 3".into()),
                ],
                Format::Warc => vec![
                    (0, "skipped other type".into()),
                    (1, "fields Some(\"http://a.example/\") page a".into()),
                    (2, "skipped other type".into()),
                    (3, "fields Some(\"http://b.example/t.txt\") text b".into()),
                ],
                Format::Arc => vec![
                    (0, "skipped other type".into()),
                    (1, "fields Some(\"http://c.example/\") page c".into()),
                ],
            };
            assert_eq!(got, want, "{format:?}");
        }
        assert_eq!(seen.len(), Format::ALL.len());
    }

    #[test]
    fn detection_asks_the_registered_kinds() {
        let cases = [
            ("a.jsonl", Some((Format::Jsonl, Compression::None))),
            ("a.json.gz", Some((Format::Jsonl, Compression::Gzip))),
            ("a.ndjson.zst", Some((Format::Jsonl, Compression::Zstd))),
            ("a.parquet", Some((Format::Parquet, Compression::None))),
            ("a.parquet.gz", None),
            ("a.txt", None),
            ("a.warc", Some((Format::Warc, Compression::None))),
            ("a.warc.gz", Some((Format::Warc, Compression::Gzip))),
            ("a.warc.zst", Some((Format::Warc, Compression::Zstd))),
            ("a.arc.gz", Some((Format::Arc, Compression::Gzip))),
            ("a.wat.gz", None),
            ("a.zst", None),
            ("part-00000", None),
        ];
        for (name, want) in cases {
            assert_eq!(detect(name), want, "{name}");
        }
    }

    #[test]
    fn numbering_and_names_follow_the_kind() {
        let jsonl = InputFile::stdin(false);
        let mut name = String::new();
        kind(Format::Jsonl).record_name(&jsonl, 4, &mut name);
        assert_eq!(name, "<stdin>:5");
        assert_eq!(
            kind(Format::Jsonl)
                .record_error(Path::new("a.jsonl"), 4, RecordError::EmptyLine)
                .to_string(),
            "a.jsonl:5: empty line"
        );
        let parquet = file(Path::new("t.parquet"), Format::Parquet);
        name.clear();
        kind(Format::Parquet).record_name(&parquet, 4, &mut name);
        assert_eq!(name, "t.parquet:4");
        assert_eq!(
            kind(Format::Parquet)
                .record_error(Path::new("t.parquet"), 4, RecordError::EmptyLine)
                .to_string(),
            "t.parquet: row 4: empty line"
        );
        assert_eq!(
            kind(Format::Parquet).parse_into(b"{}", &fields(), &mut Record::default()),
            Err(RecordError::NotRaw { kind: "Parquet" })
        );
    }

    #[test]
    fn a_unit_of_another_shape_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        std::fs::write(&path, "{\"text\": \"a\"}\n").unwrap();
        let jsonl = file(&path, Format::Jsonl);
        let row_group = UnitSpec {
            index: 0,
            weight: 1,
            locator: Locator::RowGroup(RowGroupUnit {
                row_group: 0,
                first_row: 0,
                rows: 1,
            }),
        };
        let Err(err) = kind(Format::Jsonl).open(&jsonl, &row_group, &fields()) else {
            panic!("opened a row group of a JSONL file");
        };
        assert_eq!(
            err.to_string(),
            format!("{}: not a unit of a JSONL file", path.display())
        );
    }

    #[test]
    fn costs_keep_the_measured_constants() {
        let cost = |format: Format, compression| {
            let f = InputFile {
                path: "x".into(),
                format,
                compression,
            };
            kind(format)
                .read_cost(&f)
                .map(|c| (c.read_per_weight, c.text_per_weight))
        };
        assert_eq!(cost(Format::Jsonl, Compression::Zstd), Some((1.5, 3.5)));
        assert_eq!(cost(Format::Jsonl, Compression::Gzip), Some((4.0, 3.5)));
        assert_eq!(cost(Format::Jsonl, Compression::None), Some((0.1, 1.0)));
        assert_eq!(cost(Format::Plain, Compression::None), Some((0.1, 1.0)));
        assert_eq!(cost(Format::Parquet, Compression::None), Some((0.3, 1.0)));
        assert_eq!(cost(Format::Fingerprints, Compression::None), None);
    }
}
