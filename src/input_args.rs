//! Flags that say how records become documents, shared by `run`, `hash` and `extract`:
//! HTML extraction, the URL and time fields, and the document size limit.

use anyhow::{bail, Result};
use neardup_io::html::HtmlMode;
use neardup_io::record::FieldSpec;
use neardup_io::web::DEFAULT_MAX_DOC_BYTES;

use crate::memory_args::parse_size;

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
