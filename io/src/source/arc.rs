//! ARC archives (`.arc`, `.arc.gz`): the Internet Archive's format before WARC, in which the
//! older crawls (Common Crawl's of 2008 to 2012, the Wayback Machine's) are kept.
//!
//! An ARC file begins with a `filedesc://` record describing the file, then holds one record
//! per capture: a header line `URL IP-address Archive-date Content-type Archive-length`
//! (version 1; version 2 adds fields between the type and the length, which is always the
//! last field), `Archive-length` bytes of HTTP response (head and body), and a line end.
//! The date is `YYYYMMDDhhmmss` in UTC. Records become documents by the same rules as WARC
//! `response` records ([`crate::web`]), and are numbered by their position in the file, the
//! `filedesc` record being record 0.

use std::collections::HashSet;
use std::path::Path;

use super::warc::{archive_cost, copy_kept, http_payload, name_record, or_invalid, page};
use super::{Kept, Payload, ReadCost, RecordReader, SourceKind, SourceRecord, UnitSpec};
use crate::compress::Compression;
use crate::error::IoError;
use crate::file::InputFile;
use crate::html::{HtmlMode, DEFAULT_HTML_MODE};
use crate::record::{FieldSpec, RecordError};
use crate::web::http;
use crate::web::stream::{ArchiveStream, RecordStart, MAX_HEADER_LINE};
use crate::web::{self, SkipReason, WebPayload};

/// The ARC source kind.
pub struct Arc;

impl SourceKind for Arc {
    fn name(&self) -> &'static str {
        "ARC"
    }

    fn claims(&self, lower_name: &str) -> Option<Compression> {
        let (stem, compression) = Compression::split_suffix(lower_name);
        stem.ends_with(".arc").then_some(compression)
    }

    fn open(
        &self,
        file: &InputFile,
        unit: &UnitSpec,
        fields: &FieldSpec,
    ) -> Result<Box<dyn RecordReader>, IoError> {
        super::whole_file_of(self, file, unit)?;
        Ok(Box::new(ArcReader {
            records: ArcRecords::open(file)?,
            mode: fields.html.unwrap_or(DEFAULT_HTML_MODE),
            max: fields.max_doc_bytes,
        }))
    }

    fn read_cost(&self, file: &InputFile) -> Option<ReadCost> {
        Some(archive_cost(file))
    }

    fn record_name(&self, file: &InputFile, record: u64, out: &mut String) {
        name_record(file, record, out);
    }

    fn record_error(&self, path: &Path, record: u64, error: RecordError) -> IoError {
        IoError::ArchiveRecord {
            path: path.to_path_buf(),
            record,
            cause: error,
        }
    }

    fn write_kept(
        &self,
        file: &InputFile,
        removed: &HashSet<u64>,
        tmp: &Path,
    ) -> Result<Kept, IoError> {
        let mut records = ArcRecords::open(file)?;
        copy_kept(|raw| records.next_raw(raw), file, removed, tmp)
    }
}

/// An ARC record's header line.
#[derive(Debug, Clone)]
pub struct ArcHead {
    pub number: u64,
    pub start: RecordStart,
    pub url: String,
    pub date: String,
    pub content_type: String,
    pub length: u64,
}

/// The records of an ARC file, header line by header line.
pub struct ArcRecords {
    stream: ArchiveStream,
    next: u64,
    /// The current header line as read (with its line end).
    line: Vec<u8>,
    done: bool,
}

impl ArcRecords {
    pub fn open(file: &InputFile) -> Result<ArcRecords, IoError> {
        Ok(ArcRecords {
            stream: ArchiveStream::open(file)?,
            next: 0,
            line: Vec::new(),
            done: false,
        })
    }

    fn malformed(&self, offset: u64, what: String) -> IoError {
        IoError::Archive {
            path: self.stream.path().to_path_buf(),
            offset,
            what,
        }
    }

    /// The next record's header line; `None` at the end.
    pub fn next_head(&mut self) -> Result<Option<ArcHead>, IoError> {
        if self.done {
            return Ok(None);
        }
        loop {
            if self.stream.fill()?.is_empty() {
                return Ok(None);
            }
            self.stream.skip_newlines()?;
            if !self.stream.fill()?.is_empty() {
                break;
            }
        }
        let start = self.stream.begin_record();
        let number = self.next;
        self.next += 1;
        let at = start
            .file_offset
            .unwrap_or_else(|| self.stream.error_offset());
        self.stream.read_line(&mut self.line, MAX_HEADER_LINE)?;
        let text = String::from_utf8_lossy(&self.line);
        let fields: Vec<&str> = text.split_ascii_whitespace().collect();
        let bad = |why: &str| {
            let shown: String = text.trim_end().chars().take(60).collect();
            format!("{why} in the ARC record line {shown:?}")
        };
        if fields.len() < 5 {
            return Err(self.malformed(at, bad("fewer than 5 fields")));
        }
        let Ok(length) = fields[fields.len() - 1].parse::<u64>() else {
            return Err(self.malformed(at, bad("a length that is not a number")));
        };
        // Version 1 has 5 fields and version 2 has 10; a URL with spaces in it (it happens)
        // makes more, and the last four are then the IP, date, type and length.
        let (url, date, content_type) = if fields.len() == 10 {
            (fields[0].to_owned(), fields[2], fields[3])
        } else {
            let n = fields.len();
            (fields[..n - 4].join("%20"), fields[n - 3], fields[n - 2])
        };
        Ok(Some(ArcHead {
            number,
            start,
            url,
            date: date.to_owned(),
            content_type: content_type.to_owned(),
            length,
        }))
    }

    /// Reads the record's content (keeping at most `keep` bytes in `out`) and the line end
    /// after it; its `(offset, length)` in the file, if it has one.
    pub fn read_block(
        &mut self,
        head: &ArcHead,
        keep: usize,
        out: &mut Vec<u8>,
    ) -> Result<Option<(u64, u64)>, IoError> {
        let got = self.stream.read_block(head.length, keep, out)?;
        if got < head.length {
            let at = head
                .start
                .file_offset
                .unwrap_or_else(|| self.stream.error_offset());
            return Err(self.malformed(
                at,
                format!(
                    "Archive-length {} runs past the end of the file ({got} bytes follow the record line)",
                    head.length
                ),
            ));
        }
        self.stream.skip_newlines()?;
        self.stream.end_record(head.start)
    }

    /// The next record as stored: its header line, its content and a line end; its number,
    /// or `None` at the end.
    pub fn next_raw(&mut self, raw: &mut Vec<u8>) -> Result<Option<u64>, IoError> {
        raw.clear();
        let Some(head) = self.next_head()? else {
            return Ok(None);
        };
        raw.extend_from_slice(&self.line);
        self.read_block(&head, usize::MAX, raw)?;
        raw.push(b'\n');
        Ok(Some(head.number))
    }

    fn recover(&mut self) -> bool {
        self.done = !matches!(self.stream.resync(), Ok(true));
        !self.done
    }
}

/// Reads documents out of an ARC file.
struct ArcReader {
    records: ArcRecords,
    mode: HtmlMode,
    max: u64,
}

impl RecordReader for ArcReader {
    fn next_into(&mut self, out: &mut SourceRecord) -> Result<bool, IoError> {
        let number = self.records.next;
        let read = self.next_record(out);
        or_invalid(number, read, || self.records.recover(), out)
    }
}

impl ArcReader {
    fn next_record(&mut self, out: &mut SourceRecord) -> Result<bool, IoError> {
        let Some(head) = self.records.next_head()? else {
            return Ok(false);
        };
        out.record = head.number;
        let mut block = Vec::new();
        if head.url.starts_with("filedesc:") || head.url.starts_with("dns:") {
            self.records.read_block(&head, 0, &mut block)?;
            out.payload = Payload::Skipped(SkipReason::OtherType);
            return Ok(true);
        }
        let keep = usize::try_from(self.max)
            .unwrap_or(usize::MAX)
            .saturating_add(64 * 1024);
        let place = self.records.read_block(&head, keep, &mut block)?;
        let block_cut = (block.len() as u64) < head.length;
        let at = head.start.file_offset.unwrap_or(head.start.pos);
        let (content_type, body, cut) = if http::starts_like_http(&block) {
            match http_payload(block, self.max, at) {
                Ok(p) => p,
                Err(payload) => {
                    out.payload = payload;
                    return Ok(true);
                }
            }
        } else {
            // Old crawls stored some payloads without their HTTP head.
            (Some(head.content_type.clone()), block, false)
        };
        let payload = WebPayload {
            url: Some(head.url),
            fetched_at: web::parse_arc_date(&head.date),
            offset: place.map(|p| p.0),
            length: place.map(|p| p.1),
            content_type: content_type.or(Some(head.content_type)),
            body,
            cut: cut || block_cut,
            payload_digest: None,
        };
        out.payload = page(payload, self.max, self.mode);
        Ok(true)
    }
}
