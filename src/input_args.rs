//! Flags that say how records become documents: which fields hold the text and the id
//! ([`FieldArgs`]: `run`, `substrings`, `hash`, `query`; `extract`, whose documents have no
//! id of their own, takes only its [`TextFieldArg`]), and HTML extraction, the URL and
//! time fields and the document size limit ([`DocumentArgs`]: `run`, `hash`, `extract`,
//! `compare`, `substrings`).
//!
//! Each group is declared once and flattened into the commands (`#[command(flatten)]`). A
//! command whose help words a flag its own way (`hash` and `query` speak of "the document
//! id" and "the query's id", under an "Input" heading) rewords it with clap's `mut_arg`
//! ([`input_field`], [`input_flag`]; `extract` adds which inputs the text field is for):
//! the names, defaults and conflicts stay the group's.

use anyhow::{bail, Result};
use clap::Arg;
use neardup_io::html::HtmlMode;
use neardup_io::record::{FieldSpec, DEFAULT_ID_FIELD, DEFAULT_TEXT_FIELD};
use neardup_io::web::DEFAULT_MAX_DOC_BYTES;

use crate::memory_args::parse_size;

/// `--text-field`.
#[derive(clap::Args, Debug, Clone)]
pub struct TextFieldArg {
    /// JSON field (or Parquet column) holding the text
    #[arg(long, default_value = DEFAULT_TEXT_FIELD)]
    pub text_field: String,
}

/// `--text-field`, `--id-field` and `--no-id`.
#[derive(clap::Args, Debug, Clone)]
pub struct FieldArgs {
    #[command(flatten)]
    pub text: TextFieldArg,
    /// JSON field (or Parquet column) holding the document's own id
    #[arg(long, default_value = DEFAULT_ID_FIELD, conflicts_with = "no_id")]
    pub id_field: String,
    /// Records have no id field
    #[arg(long)]
    pub no_id: bool,
}

impl FieldArgs {
    /// The record fields these flags name (no extra field, the document fields' defaults).
    pub fn spec(&self) -> FieldSpec {
        FieldSpec {
            text_field: self.text.text_field.clone(),
            id_field: (!self.no_id).then(|| self.id_field.clone()),
            extra_field: None,
            ..Default::default()
        }
    }
}

/// A [`FieldArgs`] field flag (`text_field`, `id_field`) as `hash` and `query` show it: under
/// the "Input" heading, its value named FIELD, with `help`.
pub fn input_field(arg: Arg, help: &'static str) -> Arg {
    arg.help(help).value_name("FIELD").help_heading("Input")
}

/// The `no_id` flag as `hash` and `query` show it: under the "Input" heading, with `help`.
pub fn input_flag(arg: Arg, help: &'static str) -> Arg {
    arg.help(help).help_heading("Input")
}

/// `--html`, `--url-field`, `--time-field` and `--max-doc-bytes`.
#[derive(clap::Args, Debug, Clone)]
pub struct DocumentArgs {
    /// How HTML becomes text: text (all visible text), main (without navigation, headers,
    /// footers and link lists), none (the markup as is). Archives (WARC, ARC) default to the
    /// mode docs/inputs.md gives; for JSONL, Parquet and plain files it applies only when
    /// given (e.g. `--html text --text-field html`)
    #[arg(long, value_name = "MODE", help_heading = "Documents")]
    pub html: Option<String>,
    /// JSON field (or Parquet column) holding the document's URL: its `url` and `host` in
    /// fingerprints/
    #[arg(long, value_name = "FIELD", help_heading = "Documents")]
    pub url_field: Option<String>,
    /// JSON field holding when the document was fetched (seconds since 1970 or a date such
    /// as 2024-05-01T12:00:00Z): `fetched_at` in fingerprints/, and --keep newest|oldest
    #[arg(long, value_name = "FIELD", help_heading = "Documents")]
    pub time_field: Option<String>,
    /// Longest document kept, in bytes (4M, 512K, ...): longer ones are cut there and
    /// counted as truncated; JSONL lines over 4 times this are skipped and counted
    #[arg(long, value_name = "SIZE", help_heading = "Documents")]
    pub max_doc_bytes: Option<String>,
}

impl DocumentArgs {
    /// Fills the document fields of `spec`.
    pub fn apply(&self, spec: &mut FieldSpec) -> Result<()> {
        if let Some(mode) = &self.html {
            let Some(mode) = HtmlMode::parse(mode) else {
                bail!("--html {mode:?}: expected text, main or none");
            };
            spec.html = Some(mode);
        }
        spec.url_field = self.url_field.clone();
        spec.time_field = self.time_field.clone();
        spec.max_doc_bytes = match &self.max_doc_bytes {
            None => DEFAULT_MAX_DOC_BYTES,
            Some(text) => match parse_size(text)? {
                0 => bail!("--max-doc-bytes must be at least 1 byte"),
                n => n,
            },
        };
        Ok(())
    }
}
