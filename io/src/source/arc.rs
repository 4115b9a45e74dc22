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

use crate::error::IoError;
use crate::html::HtmlRules;
use crate::web::http;
use crate::web::records::{ArchiveFormat, ArchiveRecords, HeadReader, RecordHead};
use crate::web::{self, SkipReason, WebPayload};

use super::archive::{http_payload, page, ArchiveKind};
use super::Payload;

/// The ARC source kind.
pub struct Arc;

/// The records of an ARC file, header line by header line.
pub type ArcRecords = ArchiveRecords<Arc>;

/// What an ARC record's header line says besides its length.
#[derive(Debug, Clone)]
pub struct ArcHead {
    pub url: String,
    pub date: String,
    pub content_type: String,
}

impl ArchiveFormat for Arc {
    type Fields = ArcHead;
    const LENGTH_NAME: &'static str = "Archive-length";
    const HEAD_NAME: &'static str = "the record line";
    const RECORD_END: &'static [u8] = b"\n";

    /// One line: `URL IP-address Archive-date Content-type [...] Archive-length`.
    fn read_head(head: &mut HeadReader<'_>) -> Result<(ArcHead, u64), IoError> {
        head.next_line()?;
        let text = String::from_utf8_lossy(head.line());
        let fields: Vec<&str> = text.split_ascii_whitespace().collect();
        let bad = |why: &str| {
            let shown: String = text.trim_end().chars().take(60).collect();
            format!("{why} in the ARC record line {shown:?}")
        };
        if fields.len() < 5 {
            return Err(head.malformed(bad("fewer than 5 fields")));
        }
        let Ok(length) = fields[fields.len() - 1].parse::<u64>() else {
            return Err(head.malformed(bad("a length that is not a number")));
        };
        // Version 1 has 5 fields and version 2 has 10; a URL with spaces in it (it happens)
        // makes more, and the last four are then the IP, date, type and length.
        let (url, date, content_type) = if fields.len() == 10 {
            (fields[0].to_owned(), fields[2], fields[3])
        } else {
            let n = fields.len();
            (fields[..n - 4].join("%20"), fields[n - 3], fields[n - 2])
        };
        let fields = ArcHead {
            url,
            date: date.to_owned(),
            content_type: content_type.to_owned(),
        };
        Ok((fields, length))
    }
}

impl ArchiveKind for Arc {
    const NAME: &'static str = "ARC";
    const EXTENSION: &'static str = ".arc";

    /// Every record but the `filedesc` and `dns` ones is a page.
    fn read_record(
        records: &mut ArcRecords,
        head: RecordHead<ArcHead>,
        max: u64,
        html: &HtmlRules,
    ) -> Result<Payload, IoError> {
        let mut block = Vec::new();
        let url = &head.fields.url;
        if url.starts_with("filedesc:") || url.starts_with("dns:") {
            records.read_block(&head, 0, &mut block)?;
            return Ok(Payload::Skipped(SkipReason::OtherType));
        }
        let keep = usize::try_from(max)
            .unwrap_or(usize::MAX)
            .saturating_add(64 * 1024);
        let place = records.read_block(&head, keep, &mut block)?;
        let block_cut = (block.len() as u64) < head.length;
        let at = head.start.file_offset.unwrap_or(head.start.pos);
        let (content_type, body, cut) = if http::starts_like_http(&block) {
            match http_payload(block, max, at) {
                Ok(p) => p,
                Err(payload) => return Ok(payload),
            }
        } else {
            // Old crawls stored some payloads without their HTTP head.
            (Some(head.fields.content_type.clone()), block, false)
        };
        let ArcHead {
            url,
            date,
            content_type: arc_type,
        } = head.fields;
        let payload = WebPayload {
            url: Some(url),
            fetched_at: web::parse_arc_date(&date),
            offset: place.map(|p| p.0),
            length: place.map(|p| p.1),
            content_type: content_type.or(Some(arc_type)),
            body,
            cut: cut || block_cut,
            payload_digest: None,
        };
        Ok(page(payload, max, html))
    }
}
