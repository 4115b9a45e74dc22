//! JSONL: one JSON object per line.
//!
//! A compressed JSONL file is one unit (a compressed stream cannot be split), and so is
//! an uncompressed one of up to [`SPLIT_BYTES`]. Record numbers are then line numbers
//! from 0. A larger uncompressed file is cut into pieces of about [`SPLIT_BYTES`] at line
//! starts (found by reading a few bytes after each cut, never the whole file), so that
//! several workers read it at once; its record numbers are the byte offsets of its lines'
//! starts, which the reader of a piece knows without the pieces before it
//! ([`numbered_by_offset`]). Either way the numbering depends only on the file, never on
//! the number of workers.
//!
//! A reader streams lines ([`crate::stream::LineReader`]) and ships each one
//! unparsed ([`Payload::Raw`]): the worker that fingerprints the document
//! parses it, so parsing is spread over every worker along with hashing.
//! Lines holding only whitespace are [`Payload::Blank`], not records.
//!
//! [`parse_record`] pulls the few fields a run needs out of one line. Records
//! often carry large fields we never look at (HTML, metadata, token arrays),
//! so instead of building a JSON tree it walks the object once, keeps the
//! wanted keys and skips every other value without allocating
//! ([`serde::de::IgnoredAny`]).

use std::collections::HashSet;
use std::fmt;
use std::fmt::Write as _;
use std::fs::File;
use std::io::Write;
use std::path::Path;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{whole_file_of, Payload, ReadCost, RecordReader, SourceKind, SourceRecord, UnitSpec};
use super::{Kept, Strikes};
use crate::compress::Compression;
use crate::error::{shown, IoError};
use crate::file::InputFile;
use crate::record::{parse_number, FieldSpec, Record, RecordError, NON_NUMERIC_STRING};
use crate::stream::LineReader;

/// The JSONL source kind.
pub struct Jsonl;

/// Uncompressed JSONL files larger than this are read in pieces of about this size, and
/// numbered by byte offset. 32 MiB: at about 300 MB/s of reading and fingerprinting per core
/// (docs/performance.md) a piece is a tenth of a second of work, small enough to balance a
/// few workers over one big file, and large enough that per-piece costs (an open, a seek)
/// vanish; files below it (the shards of most corpora) keep line numbers.
pub const SPLIT_BYTES: u64 = 32 << 20;

/// Whether `file`'s records are numbered by the byte offsets of their lines (an
/// uncompressed regular file larger than [`SPLIT_BYTES`]) rather than by line numbers.
pub fn numbered_by_offset(file: &InputFile) -> bool {
    file.compression == Compression::None
        && !file.is_stdin()
        && std::fs::metadata(&file.path).is_ok_and(|m| m.is_file() && m.len() > SPLIT_BYTES)
}

/// The pieces of an uncompressed file of `size` bytes: each starts after the end of the line
/// holding the byte `piece` bytes after the previous start (a line longer than a piece makes
/// fewer pieces).
fn pieces(file: &InputFile, size: u64, piece: u64) -> Result<Vec<UnitSpec>, IoError> {
    use std::io::{BufRead, BufReader, Seek, SeekFrom};
    let open_err = |cause| IoError::Open {
        path: file.path.clone(),
        cause,
    };
    let mut starts = vec![0u64];
    let mut raw = BufReader::with_capacity(64 << 10, File::open(&file.path).map_err(open_err)?);
    let mut cut = piece;
    while cut < size {
        // The piece starts after the end of the line holding byte `cut - 1`.
        raw.seek(SeekFrom::Start(cut - 1)).map_err(open_err)?;
        let mut skipped = Vec::new();
        let n = raw.read_until(b'\n', &mut skipped).map_err(open_err)?;
        let start = cut - 1 + n as u64;
        if start >= size {
            break;
        }
        starts.push(start);
        cut = start + piece;
    }
    starts.push(size);
    Ok(starts
        .windows(2)
        .enumerate()
        .map(|(index, w)| UnitSpec {
            index,
            weight: w[1] - w[0],
            locator: super::Locator::Bytes {
                start: w[0],
                end: w[1],
            },
        })
        .collect())
}

impl SourceKind for Jsonl {
    fn name(&self) -> &'static str {
        "JSONL"
    }

    fn claims(&self, lower_name: &str) -> Option<Compression> {
        let (stem, compression) = Compression::split_suffix(lower_name);
        [".jsonl", ".json", ".ndjson"]
            .iter()
            .any(|ext| stem.ends_with(ext))
            .then_some(compression)
    }

    fn units(&self, file: &InputFile) -> Result<Vec<UnitSpec>, IoError> {
        if numbered_by_offset(file) {
            let size = std::fs::metadata(&file.path)
                .map_err(|cause| IoError::Open {
                    path: file.path.clone(),
                    cause,
                })?
                .len();
            pieces(file, size, SPLIT_BYTES)
        } else {
            Ok(vec![UnitSpec::whole_file(file)])
        }
    }

    fn open(
        &self,
        file: &InputFile,
        unit: &UnitSpec,
        fields: &FieldSpec,
    ) -> Result<Box<dyn RecordReader>, IoError> {
        let max_line = fields
            .max_doc_bytes
            .saturating_mul(crate::web::JSONL_LINE_FACTOR);
        let lines = match unit.locator {
            super::Locator::Bytes { start, end } => LineReader::open_bytes(file, start, end)?,
            // A whole file large enough to be split (`neardup hash` reads whole files of
            // any kind this way too) is numbered like its pieces.
            _ if numbered_by_offset(file) => {
                whole_file_of(self, file, unit)?;
                LineReader::open_bytes(file, 0, u64::MAX)?
            }
            _ => {
                whole_file_of(self, file, unit)?;
                LineReader::open(file)?
            }
        };
        Ok(Box::new(LineRecords(lines, max_line)))
    }

    fn parse_into(
        &self,
        raw: &[u8],
        fields: &FieldSpec,
        out: &mut Record,
    ) -> Result<(), RecordError> {
        parse_record_into(raw, fields, out)
    }

    fn record_error(&self, path: &Path, record: u64, error: RecordError) -> IoError {
        let file = InputFile {
            path: path.to_path_buf(),
            format: super::Format::Jsonl,
            compression: Compression::split_suffix(&path.to_string_lossy().to_lowercase()).1,
        };
        if numbered_by_offset(&file) {
            IoError::RecordAtByte {
                path: path.to_path_buf(),
                offset: record,
                cause: error,
            }
        } else {
            IoError::record(path, record + 1, error)
        }
    }

    fn record_name(&self, file: &InputFile, record: u64, out: &mut String) {
        if numbered_by_offset(file) {
            write!(out, "{}:@{record}", shown(&file.path)).expect("writing to a String");
        } else {
            write!(out, "{}:{}", shown(&file.path), record + 1).expect("writing to a String");
        }
    }

    fn read_cost(&self, file: &InputFile) -> Option<ReadCost> {
        Some(ReadCost::of_stream(file))
    }

    fn write_kept(
        &self,
        file: &InputFile,
        removed: &HashSet<u64>,
        tmp: &Path,
    ) -> Result<Kept, IoError> {
        write_jsonl(file, removed, None, tmp)
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
        write_jsonl(file, removed, Some((strikes, fields)), tmp)
    }
}

/// The lines of a JSONL file as records.
struct LineRecords(LineReader, u64);

impl RecordReader for LineRecords {
    fn next_into(&mut self, out: &mut SourceRecord) -> Result<bool, IoError> {
        let mut line = match std::mem::take(&mut out.payload) {
            Payload::Raw(buf) | Payload::Blank(buf) => buf,
            _ => Vec::new(),
        };
        let Some((number, too_long)) = self.0.next_line_within(&mut line, self.1)? else {
            out.payload = Payload::Raw(line);
            return Ok(false);
        };
        out.record = number - 1;
        out.payload = if too_long {
            Payload::Skipped(crate::web::SkipReason::TooLong)
        } else if line.iter().all(u8::is_ascii_whitespace) {
            Payload::Blank(line)
        } else {
            Payload::Raw(line)
        };
        Ok(true)
    }
}

fn write_err(path: &Path) -> impl Fn(std::io::Error) -> IoError + '_ {
    move |source| IoError::Write {
        path: path.to_path_buf(),
        cause: source,
    }
}

/// The kept lines, unchanged, in the input's compression; blank lines are not records and
/// are left out. With `strike`, the lines with ranges get their text field rewritten
/// ([`strike_line`]).
fn write_jsonl(
    file: &InputFile,
    removed: &HashSet<u64>,
    strike: Option<(&Strikes, &FieldSpec)>,
    tmp: &Path,
) -> Result<Kept, IoError> {
    let mut out = super::create_compressed(tmp, file.compression)?;
    let mut reader = if numbered_by_offset(file) {
        LineReader::open_bytes(file, 0, u64::MAX)?
    } else {
        LineReader::open(file)?
    };
    let mut line = Vec::new();
    let mut kept = Kept::default();
    while let Some(number) = reader.next_line(&mut line)? {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if removed.contains(&(number - 1)) {
            kept.removed += 1;
            continue;
        }
        let ranges = strike.and_then(|(strikes, fields)| {
            strikes
                .get(&(number - 1))
                .map(|ranges| (ranges.as_slice(), fields))
        });
        if let Some((ranges, fields)) = ranges {
            let struck = strike_line(&line, ranges, fields).map_err(|reason| IoError::Strike {
                path: file.path.clone(),
                record: format!("line {number}"),
                reason,
            })?;
            line = struck;
        }
        out.write_all(&line)
            .and_then(|_| out.write_all(b"\n"))
            .map_err(write_err(tmp))?;
        kept.kept += 1;
    }
    out.flush().map_err(write_err(tmp))?;
    drop(out);
    Ok(kept)
}

/// A JSON object's members as written: each key with its raw value, in order.
struct RawObject<'a>(Vec<(String, &'a serde_json::value::RawValue)>);

impl<'de> serde::Deserialize<'de> for RawObject<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = RawObject<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    members.push((key, map.next_value()?));
                }
                Ok(RawObject(members))
            }
        }
        d.deserialize_map(Members)
    }
}

/// One JSONL line with `ranges` struck from its text field: the text is read back as a run
/// reads it (`fields`), the ranges are checked against it, and the line is written again
/// with the text field replaced and every other member's value as it was (keys are written
/// again with JSON's standard escaping).
fn strike_line(line: &[u8], ranges: &[(u64, u64)], fields: &FieldSpec) -> Result<Vec<u8>, String> {
    let record = parse_record(line, fields).map_err(|e| e.to_string())?;
    let struck = super::strike_text(&record.text, ranges)?;
    let object: RawObject = serde_json::from_slice(line).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(line.len());
    out.push(b'{');
    for (i, (key, value)) in object.0.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, key).map_err(|e| e.to_string())?;
        out.push(b':');
        if *key == fields.text_field {
            serde_json::to_writer(&mut out, &struck).map_err(|e| e.to_string())?;
        } else {
            out.extend_from_slice(value.get().as_bytes());
        }
    }
    out.push(b'}');
    Ok(out)
}

/// Parses one JSONL line and extracts the fields named in `spec`.
///
/// Keys other than the wanted ones are skipped without being built. If a key
/// appears twice, the last value wins (as in most JSON libraries).
pub fn parse_record(line: &[u8], spec: &FieldSpec) -> Result<Record, RecordError> {
    let mut record = Record::default();
    parse_record_into(line, spec, &mut record)?;
    Ok(record)
}

/// [`parse_record`] into `record`, reusing its buffers: one call per line allocates
/// nothing once the buffers are large enough. On error `record` holds no useful value.
///
/// The common lines (an object whose wanted fields are strings, or an id that is a
/// non-negative integer, and whose other values are strings, numbers, booleans or null)
/// are read by a direct scanner; any other line, and every line with an error, goes
/// through serde_json, so results and error messages are the same either way.
pub fn parse_record_into(
    line: &[u8],
    spec: &FieldSpec,
    record: &mut Record,
) -> Result<(), RecordError> {
    // SIMD validation (several times std's speed on long lines); `compat` reports the same
    // offset as `std::str::from_utf8` for an invalid line.
    let text = simdutf8::compat::from_utf8(line).map_err(|e| RecordError::InvalidUtf8 {
        offset: e.valid_up_to(),
    })?;
    if text.trim().is_empty() {
        return Err(RecordError::EmptyLine);
    }
    let simple =
        spec.extra_field.is_none() && spec.url_field.is_none() && spec.time_field.is_none();
    if simple && fast::parse(text, spec, record).is_some() {
        // The record is reused: what the fast path does not set is reset here.
        record.extra = None;
        record.origin = None;
        record.truncated = false;
        crate::record::finish_text(record, spec);
        return Ok(());
    }
    *record = parse_record_serde(text, spec)?;
    Ok(())
}

/// The general path of [`parse_record_into`]: serde_json over the whole line.
fn parse_record_serde(text: &str, spec: &FieldSpec) -> Result<Record, RecordError> {
    let malformed = |e: serde_json::Error| RecordError::MalformedJson(e.to_string());
    let mut de = serde_json::Deserializer::from_str(text);
    let slots = RecordSeed(spec)
        .deserialize(&mut de)
        .map_err(malformed)?
        .ok_or(RecordError::NotAnObject)?;
    de.end().map_err(malformed)?;
    slots.into_record(spec)
}

/// The direct scanner of the common lines. Every function returns `None` as soon as the
/// line is not of the simple kind it reads (or is not valid JSON): the caller then hands
/// the line to serde_json.
mod fast {
    use super::{FieldSpec, Record};

    const QUOTES: u64 = 0x2222_2222_2222_2222;
    const BACKSLASHES: u64 = 0x5c5c_5c5c_5c5c_5c5c;
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;

    /// Bytes of `x` that are zero get their high bit set (exact for the lowest one).
    #[inline(always)]
    fn zero_bytes(x: u64) -> u64 {
        x.wrapping_sub(ONES) & !x & HIGHS
    }

    /// The offset of the first `"`, `\` or control character (below 0x20) at or after
    /// `i`, or `bytes.len()`.
    #[inline]
    fn next_special(bytes: &[u8], mut i: usize) -> usize {
        while i + 8 <= bytes.len() {
            let x = u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap());
            // Below 0x20: x - 0x20 borrows, for bytes that are not >= 0x80.
            let control = x.wrapping_sub(0x2020_2020_2020_2020) & !x & HIGHS;
            let hits = zero_bytes(x ^ QUOTES) | zero_bytes(x ^ BACKSLASHES) | control;
            if hits != 0 {
                return i + (hits.trailing_zeros() / 8) as usize;
            }
            i += 8;
        }
        while i < bytes.len() && !matches!(bytes[i], b'"' | b'\\' | 0..=0x1f) {
            i += 1;
        }
        i
    }

    #[inline]
    fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
        while i < bytes.len() && matches!(bytes[i], b' ' | b'\t' | b'\n' | b'\r') {
            i += 1;
        }
        i
    }

    fn hex4(bytes: &[u8], i: usize) -> Option<u32> {
        let digits = bytes.get(i..i + 4)?;
        let mut v = 0;
        for &d in digits {
            v = v * 16 + (d as char).to_digit(16)?;
        }
        Some(v)
    }

    /// Reads the string whose opening quote is at `i - 1`, unescaped into `out` if given;
    /// returns the offset after the closing quote.
    fn string(text: &str, mut i: usize, mut out: Option<&mut String>) -> Option<usize> {
        let bytes = text.as_bytes();
        loop {
            let j = next_special(bytes, i);
            if let Some(out) = out.as_deref_mut() {
                out.push_str(text.get(i..j)?);
            }
            match *bytes.get(j)? {
                b'"' => return Some(j + 1),
                b'\\' => {}
                _ => return None, // a control character
            }
            let unescaped = match *bytes.get(j + 1)? {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => {
                    let first = hex4(bytes, j + 2)?;
                    if (0xd800..0xdc00).contains(&first) {
                        // A surrogate pair, written as two escapes.
                        if bytes.get(j + 6..j + 8)? != b"\\u" {
                            return None;
                        }
                        let second = hex4(bytes, j + 8)?;
                        if !(0xdc00..0xe000).contains(&second) {
                            return None;
                        }
                        i = j + 12;
                        let c = 0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00);
                        if let Some(out) = out.as_deref_mut() {
                            out.push(char::from_u32(c)?);
                        }
                        continue;
                    }
                    i = j + 6;
                    // A lone low surrogate gives None here.
                    let c = char::from_u32(first)?;
                    if let Some(out) = out.as_deref_mut() {
                        out.push(c);
                    }
                    continue;
                }
                _ => return None,
            };
            if let Some(out) = out.as_deref_mut() {
                out.push(unescaped);
            }
            i = j + 2;
        }
    }

    /// Reads a non-negative integer without fraction or exponent that fits a u64 (what
    /// serde_json reads as a u64): returns it and the offset after it.
    fn unsigned(bytes: &[u8], i: usize) -> Option<(u64, usize)> {
        let mut j = i;
        let mut v: u64 = 0;
        while let Some(d @ b'0'..=b'9') = bytes.get(j) {
            v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            j += 1;
        }
        let digits = j - i;
        if digits == 0 || (digits > 1 && bytes[i] == b'0') {
            return None;
        }
        if matches!(bytes.get(j), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some((v, j))
    }

    /// Skips a value that is not wanted: strings, plain numbers, booleans and null.
    fn skip_value(text: &str, i: usize) -> Option<usize> {
        let bytes = text.as_bytes();
        match *bytes.get(i)? {
            b'"' => string(text, i + 1, None),
            b'-' => unsigned(bytes, i + 1).map(|(_, j)| j),
            b'0'..=b'9' => unsigned(bytes, i).map(|(_, j)| j),
            b't' if bytes[i..].starts_with(b"true") => Some(i + 4),
            b'f' if bytes[i..].starts_with(b"false") => Some(i + 5),
            b'n' if bytes[i..].starts_with(b"null") => Some(i + 4),
            _ => None,
        }
    }

    /// The id as [`super::id_text`] writes it, or the text; fills `record`.
    pub(super) fn parse(text: &str, spec: &FieldSpec, record: &mut Record) -> Option<()> {
        let bytes = text.as_bytes();
        let mut i = skip_ws(bytes, 0);
        if bytes.get(i) != Some(&b'{') {
            return None;
        }
        i = skip_ws(bytes, i + 1);
        let mut have_text = false;
        let mut id = record.id.take().unwrap_or_default();
        let mut have_id = false;
        record.text.clear();
        loop {
            if bytes.get(i) != Some(&b'"') {
                return None;
            }
            let key_start = i + 1;
            let key_end = next_special(bytes, key_start);
            if bytes.get(key_end) != Some(&b'"') {
                return None; // an escaped key: serde_json unescapes it
            }
            let key = &text[key_start..key_end];
            i = skip_ws(bytes, key_end + 1);
            if bytes.get(i) != Some(&b':') {
                return None;
            }
            i = skip_ws(bytes, i + 1);
            let is_text = key == spec.text_field;
            let is_id = spec.id_field.as_deref() == Some(key);
            if is_text || is_id {
                match *bytes.get(i)? {
                    b'"' => {
                        let target = if is_text { &mut record.text } else { &mut id };
                        target.clear();
                        i = string(text, i + 1, Some(target))?;
                        if is_text && is_id {
                            id.clone_from(&record.text);
                        }
                    }
                    b'0'..=b'9' if !is_text => {
                        // `unsigned` refuses leading zeros, so the digits as written
                        // are the number as `id_text` would write it: no formatting.
                        let (_, j) = unsigned(bytes, i)?;
                        id.clear();
                        id.push_str(&text[i..j]);
                        i = j;
                    }
                    _ => return None,
                }
                have_text |= is_text;
                have_id |= is_id;
            } else {
                i = skip_value(text, i)?;
            }
            i = skip_ws(bytes, i);
            match *bytes.get(i)? {
                b',' => i = skip_ws(bytes, i + 1),
                b'}' => break,
                _ => return None,
            }
        }
        if skip_ws(bytes, i + 1) != bytes.len() || !have_text {
            return None;
        }
        match spec.id_field {
            Some(_) if !have_id => return None,
            Some(_) => record.id = Some(id),
            None => record.id = None,
        }
        record.extra = None;
        Some(())
    }
}

/// A JSON value reduced to what we need to know about it.
#[derive(Debug, Clone, PartialEq)]
enum Scalar {
    Str(String),
    U64(u64),
    I64(i64),
    F64(f64),
    /// An integer beyond 64 bits, as written (an id field's value only: see
    /// [`id_scalar`]).
    BigInt(String),
    Bool,
    Null,
    Array,
    Object,
}

impl Scalar {
    fn kind(&self) -> &'static str {
        match self {
            Scalar::Str(_) => "string",
            Scalar::U64(_) | Scalar::I64(_) | Scalar::F64(_) | Scalar::BigInt(_) => "number",
            Scalar::Bool => "boolean",
            Scalar::Null => "null",
            Scalar::Array => "array",
            Scalar::Object => "object",
        }
    }
}

impl<'de> de::Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
        Ok(Scalar::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Scalar, E> {
        Ok(Scalar::Str(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
        Ok(Scalar::U64(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
        Ok(Scalar::I64(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Scalar, E> {
        Ok(Scalar::F64(v))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Scalar, E> {
        Ok(Scalar::Bool)
    }
    fn visit_unit<E>(self) -> Result<Scalar, E> {
        Ok(Scalar::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::Array)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Object)
    }
}

/// Which of the wanted fields a key is (a key may be several at once).
#[derive(Clone, Copy, Default)]
struct Roles {
    text: bool,
    id: bool,
    extra: bool,
    url: bool,
    time: bool,
}

impl Roles {
    fn any(self) -> bool {
        self.text || self.id || self.extra || self.url || self.time
    }
}

/// Deserializes an object key and says which wanted fields it names.
struct KeySeed<'a>(&'a FieldSpec);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Roles;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Roles, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed<'_> {
    type Value = Roles;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E>(self, key: &str) -> Result<Roles, E> {
        let spec = self.0;
        Ok(Roles {
            text: key == spec.text_field,
            id: spec.id_field.as_deref() == Some(key),
            extra: spec.extra_field.as_deref() == Some(key),
            url: spec.url_field.as_deref() == Some(key),
            time: spec.time_field.as_deref() == Some(key),
        })
    }
}

/// The values of the wanted fields, as found.
#[derive(Default)]
struct Slots {
    text: Option<Scalar>,
    id: Option<Scalar>,
    extra: Option<Scalar>,
    url: Option<Scalar>,
    time: Option<Scalar>,
}

/// Walks the top-level value; yields `None` if it is not an object.
struct RecordSeed<'a>(&'a FieldSpec);

impl<'de> DeserializeSeed<'de> for RecordSeed<'_> {
    type Value = Option<Slots>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<Slots>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for RecordSeed<'_> {
    type Value = Option<Slots>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Slots>, A::Error> {
        let mut slots = Slots::default();
        while let Some(roles) = map.next_key_seed(KeySeed(self.0))? {
            if !roles.any() {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let value: Scalar = if roles.id {
                id_scalar(map.next_value()?).map_err(de::Error::custom)?
            } else {
                map.next_value()?
            };
            if roles.id {
                slots.id = Some(value.clone());
            }
            if roles.extra {
                slots.extra = Some(value.clone());
            }
            if roles.url {
                slots.url = Some(value.clone());
            }
            if roles.time {
                slots.time = Some(value.clone());
            }
            if roles.text {
                slots.text = Some(value);
            }
        }
        Ok(Some(slots))
    }
    // Every other top-level value is "not an object"; arrays must still be
    // consumed so that a malformed one is reported as malformed.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<Slots>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Option<Slots>, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Option<Slots>, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Option<Slots>, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Option<Slots>, E> {
        Ok(None)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Option<Slots>, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Option<Slots>, E> {
        Ok(None)
    }
}

impl Slots {
    fn into_record(self, spec: &FieldSpec) -> Result<Record, RecordError> {
        let text = match self.text {
            Some(Scalar::Str(s)) => s,
            Some(other) => {
                return Err(RecordError::TextNotString {
                    field: spec.text_field.clone(),
                    found: other.kind(),
                })
            }
            None => return Err(RecordError::MissingText(spec.text_field.clone())),
        };
        let id = match &spec.id_field {
            Some(field) => Some(id_text(field, self.id)?),
            None => None,
        };
        let extra = match &spec.extra_field {
            Some(field) => extra_number(field, self.extra)?,
            None => None,
        };
        let url = match (&spec.url_field, self.url) {
            (Some(_), None | Some(Scalar::Null)) | (None, _) => None,
            (Some(_), Some(Scalar::Str(s))) => Some(s),
            (Some(field), Some(other)) => {
                return Err(RecordError::FieldType {
                    field: field.clone(),
                    found: other.kind(),
                    expected: "a string",
                })
            }
        };
        let fetched_at = match (&spec.time_field, self.time) {
            (Some(_), None | Some(Scalar::Null)) | (None, _) => None,
            (Some(field), Some(value)) => Some(time_value(field, value)?),
        };
        let mut record = Record {
            id,
            text,
            extra,
            ..Record::default()
        };
        if url.is_some() || fetched_at.is_some() {
            record.origin = Some(Box::new(crate::record::Origin {
                url,
                fetched_at,
                ..Default::default()
            }));
        }
        crate::record::finish_text(&mut record, spec);
        Ok(record)
    }
}

/// A time field's value as microseconds since the epoch: a number is seconds, a string
/// a date ([`crate::web::parse_time_text`]).
fn time_value(field: &str, value: Scalar) -> Result<i64, RecordError> {
    let parsed = match &value {
        Scalar::U64(n) => crate::web::seconds_to_micros(*n as f64),
        Scalar::I64(n) => crate::web::seconds_to_micros(*n as f64),
        Scalar::F64(x) => crate::web::seconds_to_micros(*x),
        Scalar::Str(s) => crate::web::parse_time_text(s),
        _ => None,
    };
    parsed.ok_or_else(|| RecordError::BadTime {
        field: field.to_owned(),
        value: match value {
            Scalar::Str(s) => format!("{:?}", s.chars().take(40).collect::<String>()),
            other => with_kind(other.kind()),
        },
    })
}

fn with_kind(kind: &str) -> String {
    match kind {
        "null" => kind.to_owned(),
        k if k.starts_with(['a', 'e', 'i', 'o', 'u']) => format!("an {k}"),
        k => format!("a {k}"),
    }
}

/// An id field's value, read from its raw JSON text: integers beyond 64 bits, which serde_json
/// would round through `f64` (so that distinct ids collide), keep their digits as written.
fn id_scalar(raw: &serde_json::value::RawValue) -> Result<Scalar, serde_json::Error> {
    let value: Scalar = serde_json::from_str(raw.get())?;
    if let Scalar::F64(_) = value {
        let text = raw.get();
        let digits = text.strip_prefix('-').unwrap_or(text);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            return Ok(Scalar::BigInt(text.to_owned()));
        }
    }
    Ok(value)
}

/// The id as text. Integers keep their digits, whatever their size; floats use Rust's
/// shortest round-trip form, so `1.50` becomes `1.5` and `1e3` becomes `1000`; ids are
/// normally strings or integers anyway.
fn id_text(field: &str, value: Option<Scalar>) -> Result<String, RecordError> {
    match value {
        Some(Scalar::Str(s)) => Ok(s),
        Some(Scalar::U64(n)) => Ok(n.to_string()),
        Some(Scalar::I64(n)) => Ok(n.to_string()),
        Some(Scalar::F64(x)) => Ok(x.to_string()),
        Some(Scalar::BigInt(digits)) => Ok(digits),
        None | Some(Scalar::Null) => Err(RecordError::MissingId(field.to_owned())),
        Some(other) => Err(RecordError::BadId {
            field: field.to_owned(),
            found: other.kind(),
        }),
    }
}

/// The extra value as a number; missing and null are `None`.
fn extra_number(field: &str, value: Option<Scalar>) -> Result<Option<f64>, RecordError> {
    let not_numeric = |found| RecordError::ExtraNotNumeric {
        field: field.to_owned(),
        found,
    };
    match value {
        None | Some(Scalar::Null) => Ok(None),
        Some(Scalar::U64(n)) => Ok(Some(n as f64)),
        Some(Scalar::I64(n)) => Ok(Some(n as f64)),
        Some(Scalar::F64(x)) => Ok(Some(x)),
        Some(Scalar::BigInt(digits)) => Ok(digits.parse().ok()),
        Some(Scalar::Str(s)) => parse_number(&s)
            .map(Some)
            .ok_or_else(|| not_numeric(NON_NUMERIC_STRING)),
        Some(other) => Err(not_numeric(other.kind())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line of `bytes` with the byte offset of its start, as a whole-file reader numbered
    /// by offset must give them (the simple version: split on `\n`).
    fn lines_by_offset(bytes: &[u8]) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        let mut start = 0usize;
        while start < bytes.len() {
            let end = bytes[start..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |i| start + i + 1);
            let mut line = bytes[start..end].to_vec();
            if line.last() == Some(&b'\n') {
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
            }
            if start == 0 && line.starts_with(b"\xEF\xBB\xBF") {
                line.drain(..3);
            }
            out.push((start as u64, line));
            start = end;
        }
        out
    }

    #[test]
    fn pieces_cut_at_line_starts_and_read_every_line_once_numbered_by_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.jsonl");
        // Lines of varied length, one far longer than a piece, CRLF, a BOM, and no final
        // newline.
        let mut bytes = b"\xEF\xBB\xBF{\"text\":\"bom\"}\n".to_vec();
        for i in 0..400 {
            let len = if i == 150 { 900 } else { (i * 7919) % 53 };
            let end = if i % 9 == 0 { "\r\n" } else { "\n" };
            bytes.extend(format!("{{\"text\":\"{}\"}}{end}", "x".repeat(len)).bytes());
        }
        bytes.extend(b"{\"text\":\"last\"}");
        std::fs::write(&path, &bytes).unwrap();
        let file = InputFile {
            path: path.clone(),
            format: super::super::Format::Jsonl,
            compression: Compression::None,
        };
        let want = lines_by_offset(&bytes);
        for piece in [1u64, 2, 37, 64, 500, 1000, 10_000, 1 << 20] {
            let units = pieces(&file, bytes.len() as u64, piece).unwrap();
            // Contiguous, covering the file, each starting at a line start.
            let mut at = 0;
            for (i, unit) in units.iter().enumerate() {
                let super::super::Locator::Bytes { start, end } = unit.locator else {
                    panic!("not a byte range: {unit:?}");
                };
                assert_eq!((unit.index, start, unit.weight), (i, at, end - start));
                assert!(
                    start == 0 || bytes[start as usize - 1] == b'\n',
                    "piece {piece}"
                );
                at = end;
            }
            assert_eq!(at, bytes.len() as u64);
            let mut got = Vec::new();
            for unit in &units {
                let mut reader = Jsonl.open(&file, unit, &spec(None, None)).unwrap();
                let mut rec = SourceRecord::default();
                while reader.next_into(&mut rec).unwrap() {
                    let (Payload::Raw(line) | Payload::Blank(line)) = &rec.payload else {
                        panic!("{:?}", rec.payload);
                    };
                    got.push((rec.record, line.clone()));
                }
            }
            assert_eq!(got, want, "piece {piece}");
        }
    }

    #[test]
    fn only_large_uncompressed_files_are_numbered_by_offset() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small.jsonl");
        std::fs::write(&small, "{\"text\":\"a\"}\n").unwrap();
        let big = dir.path().join("big.jsonl");
        let f = File::create(&big).unwrap();
        f.set_len(SPLIT_BYTES + 1).unwrap();
        let file = |path: &Path, compression| InputFile {
            path: path.to_path_buf(),
            format: super::super::Format::Jsonl,
            compression,
        };
        assert!(!numbered_by_offset(&file(&small, Compression::None)));
        assert!(numbered_by_offset(&file(&big, Compression::None)));
        assert!(!numbered_by_offset(&file(&big, Compression::Gzip)));
        assert_eq!(
            Jsonl.units(&file(&small, Compression::None)).unwrap().len(),
            1
        );
        // A sparse file of zeros is one line: one piece.
        assert_eq!(
            Jsonl.units(&file(&big, Compression::None)).unwrap().len(),
            1
        );
        // Errors and names say where the line starts.
        let err = Jsonl
            .record_error(&big, 1234, RecordError::EmptyLine)
            .to_string();
        assert!(err.contains("line at byte 1234"), "{err}");
        let mut name = String::new();
        Jsonl.record_name(&file(&big, Compression::None), 1234, &mut name);
        assert!(name.ends_with(":@1234"), "{name}");
    }

    fn spec(id: Option<&str>, extra: Option<&str>) -> FieldSpec {
        FieldSpec {
            text_field: "text".into(),
            id_field: id.map(Into::into),
            extra_field: extra.map(Into::into),
            ..Default::default()
        }
    }

    fn parse(line: &str, id: Option<&str>, extra: Option<&str>) -> Result<Record, RecordError> {
        parse_record(line.as_bytes(), &spec(id, extra))
    }

    #[test]
    fn invalid_utf8_is_reported_at_the_offset_std_finds() {
        // Long lines, so that the vectorized validation's blocks and their tails are all
        // exercised; bad sequences: a lone continuation byte, a truncated 2- and 4-byte
        // character, an overlong encoding, a surrogate.
        let spec = FieldSpec {
            text_field: "text".into(),
            id_field: None,
            extra_field: None,
            ..Default::default()
        };
        let bad: [&[u8]; 5] = [
            b"\x80",
            b"\xc3",
            b"\xf0\x9f\x98",
            b"\xc0\xaf",
            b"\xed\xa0\x80",
        ];
        let mut record = Record::default();
        for prefix in (0..300).step_by(7) {
            for suffix in [0usize, 1, 15, 31, 64, 200] {
                for sequence in bad {
                    let mut line = br#"{"text": ""#.to_vec();
                    line.extend(std::iter::repeat_n(b'a', prefix));
                    line.extend_from_slice("é".as_bytes());
                    line.extend_from_slice(sequence);
                    line.extend(std::iter::repeat_n(b'b', suffix));
                    line.extend_from_slice(br#""}"#);
                    let offset = std::str::from_utf8(&line).unwrap_err().valid_up_to();
                    assert_eq!(
                        parse_record_into(&line, &spec, &mut record),
                        Err(RecordError::InvalidUtf8 { offset }),
                        "prefix {prefix}, suffix {suffix}, {sequence:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn unescapes_text_and_keeps_unicode() {
        let r = parse(
            r#"{"text": "a\"b\\c\n\u00e9\ud83d\ude00 ünï", "other": {"text": 1}}"#,
            None,
            None,
        )
        .unwrap();
        assert_eq!(r.text, "a\"b\\c\né😀 ünï");
        assert_eq!(r.id, None);
        assert_eq!(r.extra, None);
    }

    #[test]
    fn integer_ids_beyond_64_bits_keep_their_digits() {
        let id_of = |line: &str| parse(line, Some("id"), None).unwrap().id.unwrap();
        for digits in [
            "123456789012345678901234567890",
            "123456789012345678901234567891",
            "18446744073709551616",
            "-9223372036854775809",
            "-123456789012345678901234567890",
        ] {
            assert_eq!(
                id_of(&format!(r#"{{"id": {digits}, "text": "x"}}"#)),
                digits
            );
            // With the extra field (the serde path), and with id and text in either order.
            let line = format!(r#"{{"text": "x", "id": {digits}, "n": 2}}"#);
            let r = parse(&line, Some("id"), Some("n")).unwrap();
            assert_eq!(r.id.as_deref(), Some(digits));
            assert_eq!(r.extra, Some(2.0));
        }
        // Ordinary ids are unchanged: 64-bit integers, negative ones, floats in Rust's
        // shortest form, exponents as floats.
        assert_eq!(
            id_of(r#"{"id": 18446744073709551615, "text": "x"}"#),
            "18446744073709551615"
        );
        assert_eq!(id_of(r#"{"id": -42, "text": "x"}"#), "-42");
        assert_eq!(id_of(r#"{"id": 1.50, "text": "x"}"#), "1.5");
        assert_eq!(id_of(r#"{"id": 1e3, "text": "x"}"#), "1000");
        assert_eq!(id_of(r#"{"id": -0, "text": "x"}"#), "-0");
        assert_eq!(id_of(r#"{"id": "007", "text": "x"}"#), "007");
        // A big integer as the extra value is its number; as the text, a number.
        let r = parse(
            r#"{"id": 123456789012345678901234567890, "text": "x", "n": 123456789012345678901234567890}"#,
            Some("id"),
            Some("n"),
        )
        .unwrap();
        assert_eq!(r.extra, Some(1.2345678901234568e29));
        assert_eq!(
            parse(
                r#"{"text": 123456789012345678901234567890}"#,
                Some("text"),
                None
            ),
            Err(RecordError::TextNotString {
                field: "text".into(),
                found: "number"
            })
        );
    }

    /// The direct scanner against serde_json on generated lines, well-formed and not.
    #[test]
    fn fast_path_equals_serde_json() {
        let keys = [
            "\"text\"",
            "\"id\"",
            "\"other\"",
            "\"te\\u0078t\"",
            "\"\"",
            "\"i\\td\"",
        ];
        let pieces = [
            "plain",
            "\\n",
            "\\\"",
            "\\\\",
            "\\/",
            "\\b\\f\\r\\t",
            "\\u00e9",
            "\\u0000",
            "\\ud83d\\ude00",
            "\\ud83d",
            "\\udc00x",
            "\\ud83dx\\u0041",
            "\\x",
            "\\u12",
            "\t",
            "é",
            "😀",
            "\u{7f}",
            "{",
            ",",
            " ",
        ];
        let others = [
            "0",
            "7",
            "007",
            "-3",
            "-0",
            "-",
            "1.5",
            "1e3",
            "18446744073709551615",
            "18446744073709551616",
            "true",
            "false",
            "null",
            "nul",
            "truex",
            "{\"a\": 1}",
            "[1, 2]",
            "[]",
            "12abc",
            "\"unterminated",
        ];
        let spaces = ["", " ", "\t", "\r\n ", "\u{a0}"];
        let specs = [
            spec(Some("id"), None),
            spec(None, None),
            FieldSpec {
                text_field: "text".into(),
                id_field: Some("text".into()),
                extra_field: None,
                ..Default::default()
            },
        ];
        let mut state = 0x0123_4567_u64;
        let mut next = |n: usize| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) as usize) % n
        };
        let mut record = Record::default();
        for round in 0..20_000 {
            let mut line = String::from(spaces[next(2)]);
            line.push('{');
            for field in 0..next(4) {
                if field > 0 {
                    line.push_str([",", ", ", " ,"][next(3)]);
                }
                line.push_str(keys[next(keys.len())]);
                line.push_str([":", " : ", ":\t"][next(3)]);
                if next(2) == 0 {
                    line.push('"');
                    for _ in 0..next(6) {
                        line.push_str(pieces[next(pieces.len())]);
                    }
                    line.push('"');
                } else {
                    line.push_str(others[next(others.len())]);
                }
            }
            line.push_str(["}", " }", "", "}}", "} x", "}\t"][next(6)]);
            line.push_str(spaces[next(spaces.len())]);
            let cut = if round % 5 == 4 {
                next(line.len() + 1)
            } else {
                line.len()
            };
            let line = &line.as_bytes()[..cut];
            for spec in &specs {
                let expected = std::str::from_utf8(line)
                    .map_err(|e| RecordError::InvalidUtf8 {
                        offset: e.valid_up_to(),
                    })
                    .and_then(|text| {
                        if text.trim().is_empty() {
                            Err(RecordError::EmptyLine)
                        } else {
                            parse_record_serde(text, spec)
                        }
                    });
                let got = parse_record_into(line, spec, &mut record).map(|()| record.clone());
                assert_eq!(got, expected, "{}", String::from_utf8_lossy(line));
            }
        }
    }

    #[test]
    fn escaped_keys_are_matched() {
        let r = parse(r#"{"te\u0078t": "x"}"#, None, None).unwrap();
        assert_eq!(r.text, "x");
    }

    #[test]
    fn ids_may_be_strings_or_numbers() {
        let id = |line: &str| parse(line, Some("id"), None).unwrap().id.unwrap();
        assert_eq!(id(r#"{"id": "doc-7", "text": ""}"#), "doc-7");
        assert_eq!(
            id(r#"{"id": 18446744073709551615, "text": ""}"#),
            "18446744073709551615"
        );
        assert_eq!(id(r#"{"id": -42, "text": ""}"#), "-42");
        assert_eq!(id(r#"{"id": 1.5, "text": ""}"#), "1.5");
    }

    #[test]
    fn extra_accepts_numbers_and_numeric_strings() {
        let extra = |line: &str| parse(line, None, Some("ts")).unwrap().extra;
        assert_eq!(extra(r#"{"text": "", "ts": 3}"#), Some(3.0));
        assert_eq!(extra(r#"{"text": "", "ts": -2.5}"#), Some(-2.5));
        assert_eq!(extra(r#"{"text": "", "ts": " 17.25 "}"#), Some(17.25));
        assert_eq!(extra(r#"{"text": "", "ts": null}"#), None);
        assert_eq!(extra(r#"{"text": ""}"#), None);
    }

    #[test]
    fn a_key_can_serve_two_roles_and_last_duplicate_wins() {
        let s = FieldSpec {
            text_field: "t".into(),
            id_field: Some("t".into()),
            extra_field: None,
            ..Default::default()
        };
        let r = parse_record(br#"{"t": "first", "t": "second"}"#, &s).unwrap();
        assert_eq!(r.text, "second");
        assert_eq!(r.id.as_deref(), Some("second"));
    }

    #[test]
    fn every_error_has_a_clear_message() {
        let cases: Vec<(&[u8], RecordError, &str)> = vec![
            (
                b"{\"text\": \"a\xff\"}",
                RecordError::InvalidUtf8 { offset: 11 },
                "invalid UTF-8 at byte 11 of the line",
            ),
            (b"  \t ", RecordError::EmptyLine, "empty line"),
            (b"[1, 2]", RecordError::NotAnObject, "not a JSON object"),
            (b"\"text\"", RecordError::NotAnObject, "not a JSON object"),
            (
                br#"{"id": 1}"#,
                RecordError::MissingText("text".into()),
                r#"record has no field "text""#,
            ),
            (
                br#"{"text": 5}"#,
                RecordError::TextNotString {
                    field: "text".into(),
                    found: "number",
                },
                r#"field "text" is a number, expected a string"#,
            ),
            (
                br#"{"text": null}"#,
                RecordError::TextNotString {
                    field: "text".into(),
                    found: "null",
                },
                r#"field "text" is null, expected a string"#,
            ),
            (
                br#"{"text": ["x"]}"#,
                RecordError::TextNotString {
                    field: "text".into(),
                    found: "array",
                },
                r#"field "text" is an array, expected a string"#,
            ),
            (
                br#"{"text": "", "id": null}"#,
                RecordError::MissingId("id".into()),
                r#"record has no field "id" (or it is null)"#,
            ),
            (
                br#"{"text": "", "id": true}"#,
                RecordError::BadId {
                    field: "id".into(),
                    found: "boolean",
                },
                r#"field "id" is a boolean, expected a string or a number"#,
            ),
            (
                br#"{"text": "", "id": 1, "ts": "2024-01-01T00:00:00Z"}"#,
                RecordError::ExtraNotNumeric {
                    field: "ts".into(),
                    found: NON_NUMERIC_STRING,
                },
                r#"field "ts" is a non-numeric string, expected a number or a numeric string"#,
            ),
            (
                br#"{"text": "", "id": 1, "ts": {"a": 1}}"#,
                RecordError::ExtraNotNumeric {
                    field: "ts".into(),
                    found: "object",
                },
                r#"field "ts" is an object, expected a number or a numeric string"#,
            ),
            (
                br#"{"text": "", "id": 1, "ts": "NaN"}"#,
                RecordError::ExtraNotNumeric {
                    field: "ts".into(),
                    found: NON_NUMERIC_STRING,
                },
                r#"field "ts" is a non-numeric string, expected a number or a numeric string"#,
            ),
        ];
        let s = spec(Some("id"), Some("ts"));
        for (line, want, message) in cases {
            let got = parse_record(line, &s).unwrap_err();
            assert_eq!(got, want, "{}", String::from_utf8_lossy(line));
            assert_eq!(got.to_string(), message);
        }
    }

    #[test]
    fn malformed_json_is_reported_with_its_column() {
        for line in [
            r#"{"text": "a""#,
            r#"{"text": "a"} x"#,
            r#"[1, 2"#,
            "{'text': 1}",
        ] {
            let err = parse(line, None, None).unwrap_err();
            let RecordError::MalformedJson(msg) = &err else {
                panic!("{line}: {err:?}");
            };
            assert!(msg.contains("column"), "{msg}");
            assert!(err.to_string().starts_with("malformed JSON: "));
        }
    }

    #[test]
    fn record_errors_wrap_with_file_and_line() {
        let err = IoError::record("in/a.jsonl", 12, RecordError::EmptyLine);
        assert_eq!(err.to_string(), "in/a.jsonl:12: empty line");
    }
}
