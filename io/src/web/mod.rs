//! What the web-archive formats share: a stream that knows where records lie in the file
//! ([`stream`]), the records of an archive head by head ([`records`]), the HTTP response inside a record ([`http`]), capture dates, and the reasons
//! a record is not a document.
//!
//! A crawl archive holds much besides pages: request records, metadata, robots.txt, images,
//! redirects and errors. A record becomes a document only if it is a capture of a page with
//! text: a WARC `response` (or `resource`/`conversion`, so that WET files work) or an ARC
//! record, with a 2xx status when it has one, whose payload is HTML, XHTML or plain text.
//! Every other record is skipped and counted by its [`SkipReason`] in `summary.json`.
//! The WARC and ARC source kinds ([`crate::source::warc`], [`crate::source::arc`]) read the
//! records; [`document`] turns a kept payload into a [`Record`].

pub mod http;
pub mod records;
pub mod stream;
pub mod testing;

use serde::{Deserialize, Serialize};

use crate::html::{self, HtmlRules};
pub use crate::record::DEFAULT_MAX_DOC_BYTES;
use crate::record::{Origin, Record};

/// Why an archive record is not a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SkipReason {
    /// A record type that holds no page (`request`, `metadata`, `warcinfo`, the ARC
    /// `filedesc` header, ...), or a crawler's own file (a `resource` under a
    /// `metadata://` URI: GNU Wget's log and arguments).
    OtherType,
    /// An HTTP status outside 2xx (redirects, errors).
    Status,
    /// A WARC `revisit` record: the payload is elsewhere.
    Revisit,
    /// The crawler cut the record (`WARC-Truncated`) or the archive ends inside it.
    Truncated,
    /// A payload that is not HTML, XHTML or plain text, or looks binary despite its label.
    NotText,
    /// A JSONL line too long to parse within the memory bound (more than
    /// [`JSONL_LINE_FACTOR`] times `--max-doc-bytes`).
    TooLong,
}

/// How much longer than `--max-doc-bytes` a JSONL line may be: a line must be held whole to
/// be parsed, and JSON escapes make a line longer than its text. Longer lines are skipped
/// and counted ([`SkipReason::TooLong`]); shorter ones are parsed and their text cut.
pub const JSONL_LINE_FACTOR: u64 = 4;

impl SkipReason {
    /// Every reason, in the order summaries list them.
    pub const ALL: [SkipReason; 6] = [
        SkipReason::OtherType,
        SkipReason::Status,
        SkipReason::Revisit,
        SkipReason::Truncated,
        SkipReason::NotText,
        SkipReason::TooLong,
    ];

    /// The name used in `summary.json` and messages.
    pub fn name(self) -> &'static str {
        match self {
            SkipReason::OtherType => "other type",
            SkipReason::Status => "status",
            SkipReason::Revisit => "revisit",
            SkipReason::Truncated => "truncated",
            SkipReason::NotText => "not text",
            SkipReason::TooLong => "too long",
        }
    }
}

/// A kept payload and what the archive said about it.
#[derive(Debug, Default)]
pub struct WebPayload {
    pub url: Option<String>,
    pub fetched_at: Option<i64>,
    pub offset: Option<u64>,
    pub length: Option<u64>,
    /// The payload's `Content-Type` header value (HTTP, or the WARC record's own).
    pub content_type: Option<String>,
    /// The payload, transfer and content encodings undone, at most `--max-doc-bytes`.
    pub body: Vec<u8>,
    /// The payload was longer than `--max-doc-bytes` and was cut.
    pub cut: bool,
    /// `WARC-Payload-Digest`, for revisits to name.
    pub payload_digest: Option<String>,
}

/// What a kept payload's media type makes of it: HTML to extract, text to decode, or
/// neither (a skip).
pub fn classify(content_type: Option<&str>) -> Option<bool> {
    let media = content_type.map_or("", html::media_type);
    if html::is_html_type(media) {
        Some(true)
    } else if html::is_text_type(media) {
        Some(false)
    } else {
        None
    }
}

/// Turns a kept payload into a document: decoded to UTF-8, and extracted from HTML (when
/// [`classify`] said `is_html`) as `rules` say: the mode, less the site template of the
/// page's host. The record's id is its URL.
pub fn document(payload: WebPayload, is_html: bool, rules: &HtmlRules) -> Record {
    let (text, title, charset) = if is_html {
        let mut decoded = String::new();
        let mut out = html::Extracted::default();
        let (charset, _) = html::html_document_into(
            &payload.body,
            payload.content_type.as_deref(),
            rules.mode,
            rules.template(payload.url.as_deref()),
            &mut decoded,
            &mut out,
        );
        (out.text, out.title, charset)
    } else {
        let declared = payload
            .content_type
            .as_deref()
            .and_then(html::charset_param);
        let decoded = html::decode(&payload.body, declared, false);
        (decoded.text, None, decoded.charset)
    };
    Record {
        id: payload.url.clone(),
        text,
        extra: None,
        truncated: payload.cut,
        origin: Some(Box::new(Origin {
            url: payload.url,
            fetched_at: payload.fetched_at,
            offset: payload.offset,
            length: payload.length,
            content_type: payload
                .content_type
                .as_deref()
                .map(|c| html::media_type(c).to_owned()),
            charset: Some(charset.to_owned()),
            title,
            payload_digest: payload.payload_digest,
            revisit: false,
        })),
    }
}

/// A WARC date (W3C ISO 8601, as RFC 3339: `2020-10-10T07:57:31Z`, fractions allowed) as
/// microseconds since the Unix epoch; `None` if it does not parse (some archives write
/// `null`).
pub fn parse_warc_date(text: &str) -> Option<i64> {
    let t = chrono::DateTime::parse_from_rfc3339(text.trim()).ok()?;
    Some(t.timestamp_micros())
}

/// An ARC date (`YYYYMMDDhhmmss`, UTC; longer forms add digits, which are ignored) as
/// microseconds since the Unix epoch.
pub fn parse_arc_date(text: &str) -> Option<i64> {
    let digits = text.get(..14)?;
    let t = chrono::NaiveDateTime::parse_from_str(digits, "%Y%m%d%H%M%S").ok()?;
    Some(t.and_utc().timestamp_micros())
}

/// A time value of a JSONL or Parquet field (`--time-field`): a number is seconds since
/// the Unix epoch; a string is RFC 3339 (`2024-05-01T12:00:00Z`), a date and time
/// `2024-05-01 12:00:00` (UTC), a date `2024-05-01`, or 14 digits as in ARC files.
pub fn parse_time_text(text: &str) -> Option<i64> {
    let text = text.trim();
    if let Some(t) = parse_warc_date(text) {
        return Some(t);
    }
    if let Ok(t) = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f") {
        return Some(t.and_utc().timestamp_micros());
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Some(d.and_hms_opt(0, 0, 0)?.and_utc().timestamp_micros());
    }
    if text.len() == 14 && text.bytes().all(|b| b.is_ascii_digit()) {
        return parse_arc_date(text);
    }
    None
}

/// Seconds since the Unix epoch as microseconds, if finite and within the range of
/// timestamps (years 1677 to 2262 fit).
pub fn seconds_to_micros(seconds: f64) -> Option<i64> {
    let micros = (seconds * 1e6).round();
    (micros.is_finite() && micros.abs() < 9.2e18).then_some(micros as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_parse_to_utc_microseconds() {
        // 2020-10-10T07:57:31Z is 1602316651 s after the epoch (`date -d ... +%s`).
        assert_eq!(
            parse_warc_date("2020-10-10T07:57:31Z"),
            Some(1_602_316_651_000_000)
        );
        assert_eq!(
            parse_warc_date("2020-10-10T07:57:31.25Z"),
            Some(1_602_316_651_250_000)
        );
        assert_eq!(parse_warc_date("null"), None);
        assert_eq!(
            parse_arc_date("20080509190241"),
            Some(1_210_359_761_000_000)
        );
        assert_eq!(parse_arc_date("2008050919"), None);
        assert_eq!(
            parse_time_text("2008-05-09 19:02:41"),
            Some(1_210_359_761_000_000)
        );
        assert_eq!(parse_time_text("1970-01-02"), Some(86_400_000_000));
        assert_eq!(
            parse_time_text("20080509190241"),
            Some(1_210_359_761_000_000)
        );
        assert_eq!(parse_time_text("yesterday"), None);
        assert_eq!(seconds_to_micros(1.5), Some(1_500_000));
        assert_eq!(seconds_to_micros(f64::NAN), None);
    }

    #[test]
    fn charset_parameters_and_hosts() {
        assert_eq!(
            html::charset_param("text/html; charset=\"ISO-8859-1\""),
            Some("ISO-8859-1")
        );
        assert_eq!(
            html::charset_param("text/html;Charset=utf-8;q=1"),
            Some("utf-8")
        );
        assert_eq!(html::charset_param("text/html"), None);
        assert_eq!(
            crate::record::host_of("http://WWW.Example.COM:8080/a?b"),
            Some("www.example.com".into())
        );
        assert_eq!(crate::record::host_of("not a url"), None);
        assert_eq!(classify(Some("text/html; charset=utf-8")), Some(true));
        assert_eq!(classify(Some("application/xhtml+xml")), Some(true));
        assert_eq!(classify(Some("text/plain")), Some(false));
        assert_eq!(classify(Some("image/png")), None);
        assert_eq!(classify(None), None);
    }
}
