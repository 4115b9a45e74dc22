//! The record model shared by every input format: which fields a run wants
//! ([`FieldSpec`]), what it gets out of one record ([`Record`]), and why a
//! record could not be used ([`RecordError`]).
//!
//! A record is one JSONL line, one Parquet row or one plain file; the source
//! kinds in [`crate::source`] turn each of them into the same [`Record`], so
//! everything after reading is the same whatever the format.

/// The field (JSON key, Parquet column) that holds the text by default
/// (`--text-field`): what Hugging Face datasets, Dolma and RedPajama use.
pub const DEFAULT_TEXT_FIELD: &str = "text";
/// The field that holds a document's own id by default (`--id-field`).
pub const DEFAULT_ID_FIELD: &str = "id";

/// Which fields (JSON keys, Parquet columns) hold the text, the id, the extra (ranking)
/// value, the URL and the capture time, and how records become text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldSpec {
    /// The document text; must be a string.
    pub text_field: String,
    /// The document's own id, if the caller wants it. Required when set.
    pub id_field: Option<String>,
    /// A number used to choose which duplicate to keep (timestamp, score).
    pub extra_field: Option<String>,
    /// The document's URL (`--url-field`); absent or null values are allowed.
    pub url_field: Option<String>,
    /// When the document was fetched (`--time-field`): seconds since the epoch or a date
    /// ([`crate::web::parse_time_text`]); absent or null values are allowed.
    pub time_field: Option<String>,
    /// How HTML becomes text (`--html`): `None` leaves each format's default (archives
    /// extract with [`crate::html::DEFAULT_HTML_MODE`]; JSONL, Parquet and plain text are
    /// taken as they are).
    pub html: Option<crate::html::HtmlMode>,
    /// The site templates a run learned ([`crate::html::template`]): in `main` mode, a
    /// page's lines that are part of its host's template are dropped. `None`: none learned.
    pub templates: Option<crate::html::template::SharedTemplates>,
    /// The longest document kept (`--max-doc-bytes`), in bytes of payload or text; longer
    /// ones are cut there and counted as truncated ([`DEFAULT_MAX_DOC_BYTES`]).
    pub max_doc_bytes: u64,
}

impl FieldSpec {
    /// The HTML rules of these fields: their `--html` mode (`default` when absent:
    /// archives use [`crate::html::DEFAULT_HTML_MODE`]) and their site templates.
    pub fn html_rules(&self, default: crate::html::HtmlMode) -> crate::html::HtmlRules {
        crate::html::HtmlRules {
            mode: self.html.unwrap_or(default),
            templates: self.templates.clone(),
        }
    }
}

/// The longest document kept by default (`--max-doc-bytes`): 4 MiB of text (of payload, for
/// archives). Fingerprinting holds about 70 bytes per token of the document being hashed,
/// so this bounds it near 50 MB whatever one record holds. Common Crawl truncates payloads
/// at 1 MiB, the largest page of the web-archive samples is under 1 MiB, and a whole novel
/// (War and Peace, 3.2 MB) fits; a longer document is cut to its first 4 MiB, which still
/// tells its duplicates apart, and counted as truncated.
pub const DEFAULT_MAX_DOC_BYTES: u64 = 4 * 1024 * 1024;

impl Default for FieldSpec {
    fn default() -> Self {
        FieldSpec {
            text_field: DEFAULT_TEXT_FIELD.to_owned(),
            id_field: None,
            extra_field: None,
            url_field: None,
            time_field: None,
            html: None,
            templates: None,
            max_doc_bytes: DEFAULT_MAX_DOC_BYTES,
        }
    }
}

/// The fields of one input record that a run uses.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    /// The id field as text: JSON strings as is, numbers in decimal.
    pub id: Option<String>,
    /// The document text, unescaped.
    pub text: String,
    /// The extra field as a number, if present and not null.
    pub extra: Option<f64>,
    /// Where the document came from, when the input says (web archives, `--url-field`,
    /// `--time-field`); boxed, since most corpora have none.
    pub origin: Option<Box<Origin>>,
    /// The reader cut the document at `--max-doc-bytes`.
    pub truncated: bool,
}

/// Where a document came from: the columns `url`, `host`, `fetched_at`, `offset` and
/// `length` of `fingerprints/`, and what `neardup extract` writes besides the text.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Origin {
    /// The URL the document was fetched from (the WARC target URI, the ARC URL).
    pub url: Option<String>,
    /// When it was fetched: microseconds since the Unix epoch, UTC.
    pub fetched_at: Option<i64>,
    /// The record's byte offset and length in its archive file as stored, when it can be
    /// cut out there (see `crate::web::stream`).
    pub offset: Option<u64>,
    pub length: Option<u64>,
    /// The payload's media type and the character set it was decoded from (archives).
    pub content_type: Option<String>,
    pub charset: Option<String>,
    /// The HTML `<title>`, when the text was extracted from HTML.
    pub title: Option<String>,
    /// The archive's `WARC-Payload-Digest` of the payload (responses) or of the payload a
    /// revisit repeats.
    pub payload_digest: Option<String>,
    /// A WARC revisit record: no text of its own, an exact duplicate of the capture with its
    /// `payload_digest` when that is in the input.
    pub revisit: bool,
}

impl Origin {
    /// The URL's host, lower-cased, without `www.`-stripping or any other normalisation.
    pub fn host(&self) -> Option<String> {
        host_of(self.url.as_deref()?)
    }
}

pub use crate::html::template::host_of;

/// Why one record (a JSONL line or a Parquet row) could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The line is not UTF-8; `offset` is the byte offset in the line.
    #[error("invalid UTF-8 at byte {offset} of the line")]
    InvalidUtf8 { offset: usize },
    /// serde_json's description of the syntax error.
    #[error("malformed JSON: {0}")]
    MalformedJson(String),
    /// Valid JSON, but not an object.
    #[error("not a JSON object")]
    NotAnObject,
    /// The text field is absent.
    #[error("record has no field {0:?}")]
    MissingText(String),
    /// The text field is present but not a string.
    #[error("field {field:?} is {}, expected a string", with_article(found))]
    TextNotString { field: String, found: &'static str },
    /// The id field is absent or null.
    #[error("record has no field {0:?} (or it is null)")]
    MissingId(String),
    /// The id field is neither a string nor a number.
    #[error(
        "field {field:?} is {}, expected a string or a number",
        with_article(found)
    )]
    BadId { field: String, found: &'static str },
    /// The extra field is neither a number nor a string holding one.
    #[error(
        "field {field:?} is {}, expected a number or a numeric string",
        with_article(found)
    )]
    ExtraNotNumeric { field: String, found: &'static str },
    /// The line holds only whitespace.
    #[error("empty line")]
    EmptyLine,
    /// A web archive record that breaks its format; `offset` is the byte offset in the file
    /// (of the gzip member, for compressed archives).
    #[error("byte {offset}: {what}")]
    Malformed { offset: u64, what: String },
    /// A field (`--url-field`) of the wrong type.
    #[error("field {field:?} is {}, expected {expected}", with_article(found))]
    FieldType {
        field: String,
        found: &'static str,
        expected: &'static str,
    },
    /// A time field (`--time-field`) that is not a time.
    #[error(
        "field {field:?} holds {value}, expected a time (seconds since 1970, or a date such as 2024-05-01T12:00:00Z)"
    )]
    BadTime { field: String, value: String },
    /// Parsing was asked of a record its kind never leaves unparsed.
    #[error("a {kind} record has no raw form to parse")]
    NotRaw { kind: &'static str },
}

/// The last step of reading a text record (JSONL, Parquet, plain text): HTML in the text
/// field is extracted when `--html` asks for it, then the text is cut at `--max-doc-bytes`.
pub fn finish_text(record: &mut Record, spec: &FieldSpec) {
    if let Some(mode) = spec.html.filter(|&m| m != crate::html::HtmlMode::None) {
        let mut extracted = crate::html::Extracted::default();
        let rules = spec.html_rules(mode);
        let url = record.origin.as_ref().and_then(|o| o.url.as_deref());
        crate::html::extract_with(&record.text, mode, rules.template(url), &mut extracted);
        record.text = extracted.text;
        if extracted.title.is_some() {
            record.origin.get_or_insert_with(Default::default).title = extracted.title;
        }
    }
    record.truncated |= cut_text(&mut record.text, spec.max_doc_bytes);
}

/// Cuts `text` to at most `max` bytes, at a character boundary; `true` if it was longer.
pub fn cut_text(text: &mut String, max: u64) -> bool {
    if text.len() as u64 <= max {
        return false;
    }
    let mut end = max as usize;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    true
}

/// "number" -> "a number", "array" -> "an array", "null" -> "null".
fn with_article(kind: &str) -> String {
    match kind {
        "null" => kind.to_owned(),
        k if k.starts_with(['a', 'e', 'i', 'o', 'u']) => format!("an {k}"),
        k => format!("a {k}"),
    }
}

/// What [`RecordError`] calls a string field that does not hold a number.
pub const NON_NUMERIC_STRING: &str = "non-numeric string";

/// Parses a number written as a string. NaN and infinities are refused:
/// they cannot rank duplicates.
pub(crate) fn parse_number(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|x| x.is_finite())
}
