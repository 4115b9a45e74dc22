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

use crate::error::IoError;
use crate::html::HtmlRules;
use crate::record::{Origin, Record};
use crate::web::http;
use crate::web::records::{ArchiveFormat, ArchiveRecords, HeadReader, RecordHead};
use crate::web::{self, SkipReason, WebPayload};

use super::archive::{http_payload, page, ArchiveKind};
use super::Payload;

/// The most header fields a WARC record may have; more is a broken record.
const MAX_FIELDS: usize = 1024;

/// Bytes kept beyond `--max-doc-bytes` for the HTTP head in front of the payload.
const HEAD_ALLOWANCE: usize = 64 * 1024;

/// The WARC source kind.
pub struct Warc;

/// The records of a WARC file, header by header.
pub type WarcRecords = ArchiveRecords<Warc>;

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

impl ArchiveFormat for Warc {
    type Fields = WarcHeader;
    const LENGTH_NAME: &'static str = "Content-Length";
    const HEAD_NAME: &'static str = "the header";
    const RECORD_END: &'static [u8] = b"\r\n\r\n";

    /// The version line, then header fields (folded lines joined) up to a blank line.
    fn read_head(head: &mut HeadReader<'_>) -> Result<(WarcHeader, u64), IoError> {
        head.next_line()?;
        let version = trim_line(head.line());
        if !(version.starts_with("WARC/1.") && version.len() <= 10) {
            let shown: String = version.chars().take(40).collect();
            return Err(head.malformed(format!(
                "expected a WARC record (\"WARC/1.0\" or \"WARC/1.1\"), found {shown:?}"
            )));
        }
        let mut header = WarcHeader {
            version: version.to_owned(),
            fields: Vec::new(),
        };
        loop {
            if !head.next_line()? {
                return Err(head.malformed("the archive ends inside a WARC header"));
            }
            let line = trim_line(head.line());
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
                        return Err(head.malformed("a WARC header begins with a continuation line"))
                    }
                }
                continue;
            }
            let Some((name, value)) = line.split_once(':') else {
                let shown: String = line.chars().take(40).collect();
                return Err(
                    head.malformed(format!("a WARC header line without a colon: {shown:?}"))
                );
            };
            if header.fields.len() == MAX_FIELDS {
                return Err(head.malformed(format!("more than {MAX_FIELDS} WARC header fields")));
            }
            header
                .fields
                .push((name.trim().to_owned(), value.trim().to_owned()));
        }
        let content_length = match header.get("Content-Length").map(str::parse::<u64>) {
            Some(Ok(n)) => n,
            Some(Err(_)) => {
                let v = header.get("Content-Length").unwrap_or_default().to_owned();
                return Err(head.malformed(format!("Content-Length {v:?} is not a number")));
            }
            None => return Err(head.malformed("a WARC record without Content-Length")),
        };
        Ok((header, content_length))
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

impl ArchiveKind for Warc {
    const NAME: &'static str = "WARC";
    const EXTENSION: &'static str = ".warc";

    /// `response`, `resource` and `conversion` records are pages; an identical-payload
    /// `revisit` is a document without text, linked to its capture by digest; every other
    /// record is skipped.
    fn read_record(
        records: &mut WarcRecords,
        head: RecordHead<WarcHeader>,
        max: u64,
        html: &HtmlRules,
    ) -> Result<Payload, IoError> {
        let kind = head
            .fields
            .get("WARC-Type")
            .unwrap_or("")
            .to_ascii_lowercase();
        // A crawler's own files (GNU Wget's log and arguments) are `resource` records
        // under `metadata://` URIs: not pages of the crawl.
        let crawler_file = kind == "resource"
            && head
                .fields
                .get("WARC-Target-URI")
                .is_some_and(|u| u.trim_start_matches('<').starts_with("metadata://"));
        let skip = match kind.as_str() {
            _ if crawler_file => Some(SkipReason::OtherType),
            "response" | "resource" | "conversion" => None,
            "revisit" => Some(SkipReason::Revisit),
            _ => Some(SkipReason::OtherType),
        }
        .or_else(|| {
            head.fields
                .get("WARC-Truncated")
                .map(|_| SkipReason::Truncated)
        });
        let mut block = Vec::new();
        if skip == Some(SkipReason::Revisit) {
            // An identical-payload revisit names its capture by digest: a document with no
            // text of its own, linked to that capture as an exact duplicate by the run.
            let profile = head.fields.get("WARC-Profile").unwrap_or("");
            let digest = head.fields.get("WARC-Payload-Digest");
            if let (true, Some(digest)) = (profile.contains("identical-payload-digest"), digest) {
                let digest = digest.to_owned();
                records.read_block(&head, 0, &mut block)?;
                let url = target_uri(&head.fields);
                return Ok(Payload::Fields(Record {
                    id: url.clone(),
                    origin: Some(Box::new(Origin {
                        url,
                        fetched_at: head.fields.get("WARC-Date").and_then(web::parse_warc_date),
                        payload_digest: Some(digest),
                        revisit: true,
                        ..Origin::default()
                    })),
                    ..Record::default()
                }));
            }
        }
        if let Some(reason) = skip {
            records.read_block(&head, 0, &mut block)?;
            return Ok(Payload::Skipped(reason));
        }
        let keep = usize::try_from(max)
            .unwrap_or(usize::MAX)
            .saturating_add(HEAD_ALLOWANCE);
        let place = records.read_block(&head, keep, &mut block)?;
        let block_cut = (block.len() as u64) < head.length;
        let warc_type = head.fields.get("Content-Type");
        let at = head.start.file_offset.unwrap_or(head.start.pos);
        let (content_type, body) = if kind == "response" && http::starts_like_http(&block) {
            match http_payload(block, max, at) {
                Ok((content_type, body, cut)) => (content_type, (body, cut)),
                Err(payload) => return Ok(payload),
            }
        } else {
            (warc_type.map(str::to_owned), (block, false))
        };
        let (body, cut) = body;
        let payload = WebPayload {
            url: target_uri(&head.fields),
            fetched_at: head.fields.get("WARC-Date").and_then(web::parse_warc_date),
            offset: place.map(|p| p.0),
            length: place.map(|p| p.1),
            content_type,
            body,
            cut: cut || block_cut,
            payload_digest: head.fields.get("WARC-Payload-Digest").map(str::to_owned),
        };
        Ok(page(payload, max, html))
    }
}
