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

/// Which fields (JSON keys, Parquet columns) hold the text, the id and the
/// extra (ranking) value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldSpec {
    /// The document text; must be a string.
    pub text_field: String,
    /// The document's own id, if the caller wants it. Required when set.
    pub id_field: Option<String>,
    /// A number used to choose which duplicate to keep (timestamp, score).
    pub extra_field: Option<String>,
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
}

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
    /// Parsing was asked of a record its kind never leaves unparsed.
    #[error("a {kind} record has no raw form to parse")]
    NotRaw { kind: &'static str },
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
