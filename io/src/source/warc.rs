//! WARC 1.0 and 1.1 archives (`.warc`, `.warc.gz`, `.warc.zst`): the format of crawls since
//! 2009 (ISO 28500), Common Crawl's and the Internet Archive's among them.
//!
//! A WARC file is a sequence of records, each a version line (`WARC/1.0`), named header
//! fields, a blank line, a block of `Content-Length` bytes and two line ends. A `response`
//! record's block is the HTTP response as it came over the wire; `resource` and
//! `conversion` records (WET files) hold their payload directly, with the WARC
//! `Content-Type` saying what it is. Which records become documents, and why others are
//! skipped, is in [`crate::web`]; a record's number is its position among all the records of
//! its file, so numbers never depend on which records are kept.
//!
//! Some archives (the Wayback Machine's exports among them) leave the HTTP head out of
//! `response` records: a block that does not begin with `HTTP/` is taken as the payload,
//! typed by the WARC `Content-Type`, as warcio does.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use super::{Kept, Payload, ReadCost, RecordReader, SourceKind, SourceRecord, UnitSpec};
use crate::compress::Compression;
use crate::error::{shown, IoError};
use crate::file::InputFile;
use crate::html::{self, HtmlMode, DEFAULT_HTML_MODE};
use crate::record::{FieldSpec, Origin, Record, RecordError};
use crate::web::http::{self, HeadError};
use crate::web::stream::{ArchiveStream, RecordStart, MAX_HEADER_LINE};
use crate::web::{self, SkipReason, WebPayload};

/// The most header fields a WARC record may have; more is a broken record.
const MAX_FIELDS: usize = 1024;

/// Bytes kept beyond `--max-doc-bytes` for the HTTP head in front of the payload.
const HEAD_ALLOWANCE: usize = 64 * 1024;

/// The WARC source kind.
pub struct Warc;

impl SourceKind for Warc {
    fn name(&self) -> &'static str {
        "WARC"
    }

    fn claims(&self, lower_name: &str) -> Option<Compression> {
        let (stem, compression) = Compression::split_suffix(lower_name);
        stem.ends_with(".warc").then_some(compression)
    }

    fn open(
        &self,
        file: &InputFile,
        unit: &UnitSpec,
        fields: &FieldSpec,
    ) -> Result<Box<dyn RecordReader>, IoError> {
        super::whole_file_of(self, file, unit)?;
        Ok(Box::new(WarcReader {
            records: WarcRecords::open(file)?,
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
        let mut records = WarcRecords::open(file)?;
        copy_kept(|raw| records.next_raw(raw), file, removed, tmp)
    }
}

/// What reading an archive costs per byte of file, relative to fingerprinting a byte of
/// text: the decompression, plus HTML parsing of about as many bytes as are decompressed.
pub(crate) fn archive_cost(file: &InputFile) -> ReadCost {
    let stream = ReadCost::of_stream(file);
    ReadCost {
        read_per_weight: stream.read_per_weight + file.compression.expansion(),
        // About a fifth of an HTML page is text.
        text_per_weight: stream.text_per_weight / 5.0,
    }
}

/// One record's header fields, in order, names as written.
#[derive(Debug, Default)]
pub struct WarcHeader {
    pub version: String,
    pub fields: Vec<(String, String)>,
}

impl WarcHeader {
    /// The value of field `name` (case-insensitive), if present.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The records of a WARC file, header by header.
pub struct WarcRecords {
    stream: ArchiveStream,
    next: u64,
    line: Vec<u8>,
    /// The current record's header lines exactly as read, for `--write-dedup`.
    raw_head: Vec<u8>,
    /// After an error nothing more can be read (an uncompressed archive cannot resync).
    done: bool,
}

/// A record's header and where it began.
pub struct RecordHead {
    pub number: u64,
    pub start: RecordStart,
    pub header: WarcHeader,
    pub content_length: u64,
}

impl WarcRecords {
    pub fn open(file: &InputFile) -> Result<WarcRecords, IoError> {
        Ok(WarcRecords {
            stream: ArchiveStream::open(file)?,
            next: 0,
            line: Vec::new(),
            raw_head: Vec::new(),
            done: false,
        })
    }

    fn malformed(&self, offset: u64, what: impl Into<String>) -> IoError {
        IoError::Archive {
            path: self.stream.path().to_path_buf(),
            offset,
            what: what.into(),
        }
    }

    /// Reads the next record's header; `None` at the end of the archive. Empty lines
    /// between records are skipped.
    pub fn next_head(&mut self) -> Result<Option<RecordHead>, IoError> {
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
        self.raw_head.clear();
        self.raw_head.extend_from_slice(&self.line);
        let version = trim_line(&self.line);
        if !(version.starts_with("WARC/1.") && version.len() <= 10) {
            let shown: String = version.chars().take(40).collect();
            return Err(self.malformed(
                at,
                format!("expected a WARC record (\"WARC/1.0\" or \"WARC/1.1\"), found {shown:?}"),
            ));
        }
        let mut header = WarcHeader {
            version: version.to_owned(),
            fields: Vec::new(),
        };
        loop {
            if !self.stream.read_line(&mut self.line, MAX_HEADER_LINE)? {
                return Err(self.malformed(at, "the archive ends inside a WARC header"));
            }
            self.raw_head.extend_from_slice(&self.line);
            let line = trim_line(&self.line);
            if line.is_empty() {
                break;
            }
            if line.starts_with([' ', '\t']) {
                // A continuation line (WARC 1.0 allows folded fields).
                match header.fields.last_mut() {
                    Some((_, v)) => {
                        v.push(' ');
                        v.push_str(line.trim());
                    }
                    None => {
                        return Err(
                            self.malformed(at, "a WARC header begins with a continuation line")
                        )
                    }
                }
                continue;
            }
            let Some((name, value)) = line.split_once(':') else {
                let shown: String = line.chars().take(40).collect();
                return Err(
                    self.malformed(at, format!("a WARC header line without a colon: {shown:?}"))
                );
            };
            if header.fields.len() == MAX_FIELDS {
                return Err(
                    self.malformed(at, format!("more than {MAX_FIELDS} WARC header fields"))
                );
            }
            header
                .fields
                .push((name.trim().to_owned(), value.trim().to_owned()));
        }
        let content_length = match header.get("Content-Length").map(str::parse::<u64>) {
            Some(Ok(n)) => n,
            Some(Err(_)) => {
                let v = header.get("Content-Length").unwrap_or_default().to_owned();
                return Err(self.malformed(at, format!("Content-Length {v:?} is not a number")));
            }
            None => return Err(self.malformed(at, "a WARC record without Content-Length")),
        };
        Ok(Some(RecordHead {
            number,
            start,
            header,
            content_length,
        }))
    }

    /// Reads the block of the record `head` (keeping at most `keep` bytes of it in `out`),
    /// and the line ends after it. Returns the record's `(offset, length)` in the file, if
    /// it has one.
    pub fn read_block(
        &mut self,
        head: &RecordHead,
        keep: usize,
        out: &mut Vec<u8>,
    ) -> Result<Option<(u64, u64)>, IoError> {
        let got = self.stream.read_block(head.content_length, keep, out)?;
        if got < head.content_length {
            let at = head
                .start
                .file_offset
                .unwrap_or_else(|| self.stream.error_offset());
            return Err(self.malformed(
                at,
                format!(
                    "Content-Length {} runs past the end of the file ({got} bytes follow the header)",
                    head.content_length
                ),
            ));
        }
        self.stream.skip_newlines()?;
        self.stream.end_record(head.start)
    }

    /// After an error: moves to the next gzip member, or gives up on an uncompressed or
    /// single-stream archive. `true` if reading can go on.
    pub fn recover(&mut self) -> bool {
        let ok = matches!(self.stream.resync(), Ok(true));
        self.done = !ok;
        ok
    }

    /// The next record as stored (decompressed): header lines and block exactly, then the
    /// two line ends the standard puts after a record; its number, or `None` at the end.
    pub fn next_raw(&mut self, raw: &mut Vec<u8>) -> Result<Option<u64>, IoError> {
        raw.clear();
        let Some(head) = self.next_head()? else {
            return Ok(None);
        };
        raw.extend_from_slice(&self.raw_head);
        self.read_block(&head, usize::MAX, raw)?;
        raw.extend_from_slice(b"\r\n\r\n");
        Ok(Some(head.number))
    }
}

/// The record's `WARC-Target-URI` (WARC 1.0 examples write it in angle brackets).
fn target_uri(header: &WarcHeader) -> Option<String> {
    header
        .get("WARC-Target-URI")
        .map(|u| u.trim_matches(['<', '>']).to_owned())
}

/// The line without its line end, as text (lossy: header values are ASCII in practice).
fn trim_line(line: &[u8]) -> &str {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    std::str::from_utf8(line).unwrap_or("\u{FFFD}")
}

/// Reads documents out of a WARC file.
struct WarcReader {
    records: WarcRecords,
    mode: HtmlMode,
    max: u64,
}

impl RecordReader for WarcReader {
    fn next_into(&mut self, out: &mut SourceRecord) -> Result<bool, IoError> {
        let number = self.records.next;
        let read = self.next_record(out);
        or_invalid(number, read, || self.records.recover(), out)
    }
}

/// What reading record `number` gave, or, where it met a broken archive, an invalid record
/// at the place of the damage: reported as an error, or a counted skip with `--skip-invalid`,
/// after `recover` has moved on to the next gzip member if there is one. Other errors (the
/// file cannot be read at all) stay errors.
pub(crate) fn or_invalid(
    number: u64,
    read: Result<bool, IoError>,
    recover: impl FnOnce() -> bool,
    out: &mut SourceRecord,
) -> Result<bool, IoError> {
    let e = match read {
        Ok(more) => return Ok(more),
        Err(e) => e,
    };
    let (offset, what) = match e {
        IoError::Archive { offset, what, .. } => (offset, what),
        IoError::ArchiveRead { offset, .. } => (offset, error_text(&e)),
        other => return Err(other),
    };
    recover();
    out.record = number;
    out.payload = Payload::Invalid(RecordError::Malformed { offset, what });
    Ok(true)
}

/// The last steps of a page record, the same for WARC and ARC: the body cut at `max`
/// (counted as truncated), a skip if it is not text after all, else the document.
pub(crate) fn page(mut payload: WebPayload, max: u64, mode: HtmlMode) -> Payload {
    if payload.body.len() as u64 > max {
        payload.body.truncate(max as usize);
        payload.cut = true;
    }
    match web::classify(payload.content_type.as_deref()) {
        Some(is_html) if !html::looks_binary(&payload.body) => {
            Payload::Fields(web::document(payload, is_html, mode))
        }
        _ => Payload::Skipped(SkipReason::NotText),
    }
}

/// An archive read error's message without its path and offset (the record error adds
/// them back).
pub(crate) fn error_text(e: &IoError) -> String {
    match e {
        IoError::ArchiveRead {
            compression, cause, ..
        } => match compression {
            Compression::None => format!("read failed: {cause}"),
            c => format!("{} data is truncated or corrupt: {cause}", c.name()),
        },
        other => other.to_string(),
    }
}

impl WarcReader {
    fn next_record(&mut self, out: &mut SourceRecord) -> Result<bool, IoError> {
        let Some(head) = self.records.next_head()? else {
            return Ok(false);
        };
        out.record = head.number;
        let kind = head
            .header
            .get("WARC-Type")
            .unwrap_or("")
            .to_ascii_lowercase();
        let skip = match kind.as_str() {
            "response" | "resource" | "conversion" => None,
            "revisit" => Some(SkipReason::Revisit),
            _ => Some(SkipReason::OtherType),
        }
        .or_else(|| {
            head.header
                .get("WARC-Truncated")
                .map(|_| SkipReason::Truncated)
        });
        let mut block = Vec::new();
        if skip == Some(SkipReason::Revisit) {
            // An identical-payload revisit names its capture by digest: a document with no
            // text of its own, linked to that capture as an exact duplicate by the run.
            let profile = head.header.get("WARC-Profile").unwrap_or("");
            let digest = head.header.get("WARC-Payload-Digest");
            if let (true, Some(digest)) = (profile.contains("identical-payload-digest"), digest) {
                let digest = digest.to_owned();
                self.records.read_block(&head, 0, &mut block)?;
                let url = target_uri(&head.header);
                out.payload = Payload::Fields(Record {
                    id: url.clone(),
                    origin: Some(Box::new(Origin {
                        url,
                        fetched_at: head.header.get("WARC-Date").and_then(web::parse_warc_date),
                        payload_digest: Some(digest),
                        revisit: true,
                        ..Origin::default()
                    })),
                    ..Record::default()
                });
                return Ok(true);
            }
        }
        if let Some(reason) = skip {
            self.records.read_block(&head, 0, &mut block)?;
            out.payload = Payload::Skipped(reason);
            return Ok(true);
        }
        let keep = usize::try_from(self.max)
            .unwrap_or(usize::MAX)
            .saturating_add(HEAD_ALLOWANCE);
        let place = self.records.read_block(&head, keep, &mut block)?;
        let block_cut = (block.len() as u64) < head.content_length;
        let warc_type = head.header.get("Content-Type");
        let at = head.start.file_offset.unwrap_or(head.start.pos);
        let (content_type, body) = if kind == "response" && http::starts_like_http(&block) {
            match http_payload(block, self.max, at) {
                Ok((content_type, body, cut)) => (content_type, (body, cut)),
                Err(payload) => {
                    out.payload = payload;
                    return Ok(true);
                }
            }
        } else {
            (warc_type.map(str::to_owned), (block, false))
        };
        let (body, cut) = body;
        let payload = WebPayload {
            url: target_uri(&head.header),
            fetched_at: head.header.get("WARC-Date").and_then(web::parse_warc_date),
            offset: place.map(|p| p.0),
            length: place.map(|p| p.1),
            content_type,
            body,
            cut: cut || block_cut,
            payload_digest: head.header.get("WARC-Payload-Digest").map(str::to_owned),
        };
        out.payload = page(payload, self.max, self.mode);
        Ok(true)
    }
}

/// The payload of an HTTP response block: its Content-Type, the body with its transfer
/// and content encodings undone (at most `max` bytes), and whether it was cut; or what to
/// report instead (a skip, or a malformed record at byte `at`). A head that does not end
/// before the block does (the record ends first, or the part of a huge block that is read)
/// is the `truncated` skip of docs/inputs.md, like a record marked `WARC-Truncated`.
pub(crate) fn http_payload(
    mut block: Vec<u8>,
    max: u64,
    at: u64,
) -> Result<(Option<String>, Vec<u8>, bool), Payload> {
    let malformed = |what: String| Payload::Invalid(RecordError::Malformed { offset: at, what });
    let head = match http::parse_head(&block) {
        Ok(h) => h,
        Err(HeadError::Incomplete) => return Err(Payload::Skipped(SkipReason::Truncated)),
        Err(HeadError::Malformed(why)) => {
            return Err(malformed(format!("malformed HTTP head: {why}")))
        }
    };
    if !(200..300).contains(&head.status) {
        return Err(Payload::Skipped(SkipReason::Status));
    }
    let mut body = block.split_off(head.len);
    if head.chunked {
        body = http::dechunk(&body);
    }
    let mut cut = false;
    let limit = usize::try_from(max).unwrap_or(usize::MAX);
    let (body, how) = http::decode_content(body, head.content_encoding.as_deref(), limit, &mut cut);
    if how == http::Decoding::Unknown {
        return Err(Payload::Skipped(SkipReason::NotText));
    }
    Ok((head.content_type, body, cut))
}

/// Copies the records `next_raw` yields (number, bytes as stored) to `tmp`, in `file`'s
/// compression, but those in `removed`: `--write-dedup` of an archive.
pub(crate) fn copy_kept(
    mut next_raw: impl FnMut(&mut Vec<u8>) -> Result<Option<u64>, IoError>,
    file: &InputFile,
    removed: &HashSet<u64>,
    tmp: &Path,
) -> Result<Kept, IoError> {
    let mut out = KeptWriter::create(tmp, file.compression)?;
    let mut kept = Kept::default();
    let mut raw = Vec::new();
    while let Some(number) = next_raw(&mut raw)? {
        if removed.contains(&number) {
            kept.removed += 1;
        } else {
            kept.kept += 1;
            out.record(&raw)?;
        }
    }
    out.finish()?;
    Ok(kept)
}

/// Writes kept records, one gzip member per record for gzip archives (so each can still be
/// cut out alone), as they were for uncompressed ones, in one zstd stream for zstd.
pub(crate) struct KeptWriter {
    path: std::path::PathBuf,
    compression: Compression,
    out: Option<KeptOut>,
}

enum KeptOut {
    Plain(std::io::BufWriter<std::fs::File>),
    Zstd(zstd::stream::write::Encoder<'static, std::io::BufWriter<std::fs::File>>),
}

impl KeptWriter {
    pub(crate) fn create(path: &Path, compression: Compression) -> Result<KeptWriter, IoError> {
        let f = std::fs::File::create(path).map_err(|cause| IoError::Write {
            path: path.to_path_buf(),
            cause,
        })?;
        let w = std::io::BufWriter::new(f);
        let out = match compression {
            Compression::Zstd => {
                KeptOut::Zstd(zstd::stream::write::Encoder::new(w, 3).map_err(|cause| {
                    IoError::Write {
                        path: path.to_path_buf(),
                        cause,
                    }
                })?)
            }
            _ => KeptOut::Plain(w),
        };
        Ok(KeptWriter {
            path: path.to_path_buf(),
            compression,
            out: Some(out),
        })
    }

    fn err(&self, cause: std::io::Error) -> IoError {
        IoError::Write {
            path: self.path.clone(),
            cause,
        }
    }

    pub(crate) fn record(&mut self, raw: &[u8]) -> Result<(), IoError> {
        let result = match (self.out.as_mut().expect("not finished"), self.compression) {
            (KeptOut::Plain(w), Compression::Gzip) => {
                let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
                gz.write_all(raw).and_then(|_| gz.finish().map(|_| ()))
            }
            (KeptOut::Plain(w), _) => w.write_all(raw),
            (KeptOut::Zstd(z), _) => z.write_all(raw),
        };
        result.map_err(|e| self.err(e))
    }

    pub(crate) fn finish(mut self) -> Result<(), IoError> {
        let result = match self.out.take().expect("not finished") {
            KeptOut::Plain(mut w) => w.flush(),
            KeptOut::Zstd(z) => z.finish().and_then(|mut w| w.flush()),
        };
        result.map_err(|e| self.err(e))
    }
}

/// `FILE:record N` names an archive record in messages that need a name.
pub(crate) fn name_record(file: &InputFile, record: u64, out: &mut String) {
    use std::fmt::Write as _;
    write!(out, "{}:record {record}", shown(&file.path)).expect("writing to a String");
}
