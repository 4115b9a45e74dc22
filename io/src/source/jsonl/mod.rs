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
//!
//! The code, a file per concept: `pieces` (units and numbering), this module (the kind and
//! its line reader), `parse` (one line to a record: the `fast` scanner of the common lines,
//! the `serde_path` for the rest and for every error), `write` (kept and struck lines
//! written back).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::Path;

use super::{whole_file_of, Payload, ReadCost, RecordReader, SourceKind, SourceRecord, UnitSpec};
use super::{Kept, Strikes};
use crate::compress::Compression;
use crate::error::{shown, IoError};
use crate::file::InputFile;
use crate::record::{FieldSpec, Record, RecordError};
use crate::stream::LineReader;

mod fast;
mod parse;
mod pieces;
mod serde_path;
mod write;

pub use parse::{parse_record, parse_record_into};
use pieces::pieces;
pub use pieces::size_of;
pub use pieces::{numbered_by_offset, SPLIT_BYTES};
use write::write_jsonl;

/// The JSONL source kind.
pub struct Jsonl;

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
            let size = pieces::size_of(file)?.unwrap_or(0);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    fn spec(id: Option<&str>, extra: Option<&str>) -> FieldSpec {
        FieldSpec {
            text_field: "text".into(),
            id_field: id.map(Into::into),
            extra_field: extra.map(Into::into),
            ..Default::default()
        }
    }

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
}
