//! What the archive source kinds (WARC, ARC) share, written once: the source kind itself
//! ([`ArchiveKind`]: every archive is one unit, read by an [`ArchiveReader`], named and
//! written back alike), a damaged record turned into an invalid one, the last steps of a
//! page, the HTTP payload of a response, and copying kept records for `--write-dedup`.
//! Each format (`warc.rs`, `arc.rs`) has only its head parsing
//! ([`crate::web::records::ArchiveFormat`]) and the rules by which its records become
//! documents ([`ArchiveKind::read_record`]).

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use super::{Kept, Payload, ReadCost, RecordReader, SourceKind, SourceRecord, UnitSpec};
use crate::compress::Compression;
use crate::error::{shown, IoError};
use crate::file::InputFile;
use crate::html::{self, HtmlRules, DEFAULT_HTML_MODE};
use crate::record::{FieldSpec, RecordError};
use crate::web::http::{self, HeadError};
use crate::web::records::{ArchiveFormat, ArchiveRecords, RecordHead};
use crate::web::{self, SkipReason, WebPayload};

/// An archive format as a source kind: a [`SourceKind`] for every one of them.
pub trait ArchiveKind: ArchiveFormat + Sync + Sized + 'static {
    /// The format's name in messages (`WARC`).
    const NAME: &'static str;
    /// The file name extension the kind claims (`.warc`), before any compression suffix.
    const EXTENSION: &'static str;

    /// Reads the rest of the record `head` (its block) from `records` and says what it
    /// is: a document, a skip, or an invalid record. `max`: `--max-doc-bytes`; `html`:
    /// `--html` and the run's site templates.
    fn read_record(
        records: &mut ArchiveRecords<Self>,
        head: RecordHead<Self::Fields>,
        max: u64,
        html: &HtmlRules,
    ) -> Result<Payload, IoError>;
}

impl<K: ArchiveKind> SourceKind for K {
    fn name(&self) -> &'static str {
        K::NAME
    }

    fn claims(&self, lower_name: &str) -> Option<Compression> {
        let (stem, compression) = Compression::split_suffix(lower_name);
        stem.ends_with(K::EXTENSION).then_some(compression)
    }

    fn open(
        &self,
        file: &InputFile,
        unit: &UnitSpec,
        fields: &FieldSpec,
    ) -> Result<Box<dyn RecordReader>, IoError> {
        super::whole_file_of(self, file, unit)?;
        Ok(Box::new(ArchiveReader::<K> {
            records: ArchiveRecords::open(file)?,
            html: fields.html_rules(DEFAULT_HTML_MODE),
            max: fields.max_doc_bytes,
        }))
    }

    fn read_cost(&self, file: &InputFile) -> Option<ReadCost> {
        Some(archive_cost(file))
    }

    fn record_name(&self, file: &InputFile, record: u64, out: &mut String) {
        use std::fmt::Write as _;
        write!(out, "{}:record {record}", shown(&file.path)).expect("writing to a String");
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
        let mut records = ArchiveRecords::<K>::open(file)?;
        copy_kept(|raw| records.next_raw(raw), file, removed, tmp)
    }
}

/// Reads documents out of an archive of kind `K`.
pub struct ArchiveReader<K: ArchiveKind> {
    records: ArchiveRecords<K>,
    html: HtmlRules,
    max: u64,
}

impl<K: ArchiveKind> RecordReader for ArchiveReader<K> {
    fn next_into(&mut self, out: &mut SourceRecord) -> Result<bool, IoError> {
        let number = self.records.next_number();
        let read = self.next_record(out);
        or_invalid(number, read, || self.records.recover(), out)
    }
}

impl<K: ArchiveKind> ArchiveReader<K> {
    fn next_record(&mut self, out: &mut SourceRecord) -> Result<bool, IoError> {
        let Some(head) = self.records.next_head()? else {
            return Ok(false);
        };
        out.record = head.number;
        out.payload = K::read_record(&mut self.records, head, self.max, &self.html)?;
        Ok(true)
    }
}

/// What reading an archive costs per byte of file, relative to fingerprinting a byte of
/// text: the decompression, plus HTML parsing of about as many bytes as are decompressed.
fn archive_cost(file: &InputFile) -> ReadCost {
    let stream = ReadCost::of_stream(file);
    ReadCost {
        read_per_weight: stream.read_per_weight + file.compression.expansion(),
        // About a fifth of an HTML page is text.
        text_per_weight: stream.text_per_weight / 5.0,
    }
}

/// What reading record `number` gave, or, where it met a broken archive, an invalid record
/// at the place of the damage: reported as an error, or a counted skip with `--skip-invalid`,
/// after `recover` has moved on to the next gzip member if there is one. Other errors (the
/// file cannot be read at all) stay errors.
fn or_invalid(
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
pub(super) fn page(mut payload: WebPayload, max: u64, html: &HtmlRules) -> Payload {
    if payload.body.len() as u64 > max {
        payload.body.truncate(max as usize);
        payload.cut = true;
    }
    match web::classify(payload.content_type.as_deref()) {
        Some(is_html) if !html::looks_binary_labelled(&payload.body, is_html) => {
            Payload::Fields(web::document(payload, is_html, html))
        }
        _ => Payload::Skipped(SkipReason::NotText),
    }
}

/// An archive read error's message without its path and offset (the record error adds
/// them back).
fn error_text(e: &IoError) -> String {
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

/// The payload of an HTTP response block: its Content-Type, the body with its transfer
/// and content encodings undone (at most `max` bytes), and whether it was cut; or what to
/// report instead (a skip, or a malformed record at byte `at`). A head that does not end
/// before the block does (the record ends first, or the part of a huge block that is read)
/// is the `truncated` skip of docs/inputs.md, like a record marked `WARC-Truncated`.
pub(super) fn http_payload(
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
fn copy_kept(
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
struct KeptWriter {
    path: std::path::PathBuf,
    compression: Compression,
    out: Option<KeptOut>,
}

enum KeptOut {
    Plain(std::io::BufWriter<std::fs::File>),
    Zstd(zstd::stream::write::Encoder<'static, std::io::BufWriter<std::fs::File>>),
}

impl KeptWriter {
    fn create(path: &Path, compression: Compression) -> Result<KeptWriter, IoError> {
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

    fn record(&mut self, raw: &[u8]) -> Result<(), IoError> {
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

    fn finish(mut self) -> Result<(), IoError> {
        let result = match self.out.take().expect("not finished") {
            KeptOut::Plain(mut w) => w.flush(),
            KeptOut::Zstd(z) => z.finish().and_then(|mut w| w.flush()),
        };
        result.map_err(|e| self.err(e))
    }
}
