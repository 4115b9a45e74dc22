//! `neardup hash`: fingerprint every document of the inputs, one output line per document.
//!
//! Output goes through a `BufWriter` on locked stdout; a bad record stops the run with an
//! error naming file and line (the lines written before it stay complete), or, with
//! `--skip-invalid`, is counted and reported in the summary on stderr.

use std::io::{self, BufWriter, Write};

use anyhow::Result;
use clap::{Args, ValueEnum};
use neardup_core::{encoding, DocFingerprint, Fingerprinter, Method};
use neardup_io::input::InputFile;
use neardup_io::record::{FieldSpec, Record, RecordError};
use neardup_io::source::SourceRecord;
use neardup_io::IoError;
use serde::ser::{Serialize, Serializer};

use crate::commands::stdout_error;
use crate::input_args::{input_field, input_flag, FieldArgs};
use crate::scheme_args::SchemeArgs;

const EXAMPLES: &str = "\
Examples:
  Fingerprint a JSONL file (TSV: id, hex, base32):
    neardup hash docs.jsonl
  Every input file under a directory (.jsonl/.json/.ndjson, optionally .gz/.zst, .parquet):
    neardup hash corpus/ > fingerprints.tsv
  From stdin, with the text in field \"body\" and no id field (ids become FILE:LINE):
    zcat dump.jsonl.gz | neardup hash --text-field body --no-id -
  Each file is one document (the id is its path), JSON lines out:
    neardup hash --plain --format jsonl 'pages/*.html'

  The text of saved web pages (any character set), without menus and footers:
    neardup hash --plain --html main 'pages/*.html'

  Every page of a web archive (WARC or ARC), by URL:
    neardup hash crawl.warc.gz
  MinHash signatures over word 5-shingles, skipping records that cannot be read:
    neardup hash --scheme minhash --skip-invalid data.jsonl.zst

Output (tsv): `id<TAB>hex<TAB>base32` per document; for --scheme minhash `id<TAB>v1,v2,...`
(the signature as 16-digit hex values). Tabs, newlines and backslashes in ids are written
as \\t, \\n, \\r and \\\\. An empty document (no word with a letter) prints fingerprint 0 and
is flagged \"empty\": true in jsonl. A one-line summary goes to stderr unless --quiet.";

/// Flags of `neardup hash`.
#[derive(Args, Debug)]
#[command(
    after_help = EXAMPLES,
    mut_arg("text_field", |a| input_field(a, "The JSON field (or Parquet column) holding the document text")),
    mut_arg("id_field", |a| input_field(a, "The JSON field (or Parquet column) holding the document id (a string or a number)")),
    mut_arg("no_id", |a| input_flag(a, "The records have no id: use FILE:LINE (JSONL, lines from 1) or FILE:ROW (Parquet, rows from 0) instead")),
)]
pub struct HashArgs {
    #[command(flatten)]
    pub scheme: SchemeArgs,

    #[command(flatten)]
    pub fields: FieldArgs,

    /// Read each input file whole as one document whose id is its path
    #[arg(
        long,
        conflicts_with_all = ["text_field", "id_field", "no_id"],
        help_heading = "Input"
    )]
    pub plain: bool,

    #[command(flatten)]
    pub documents: crate::input_args::DocumentArgs,

    /// Output format
    #[arg(long, value_enum, default_value_t = OutputFormat::Tsv, help_heading = "Output")]
    pub format: OutputFormat,

    /// Skip records that cannot be read (bad UTF-8 or JSON, missing or non-string text,
    /// missing id, blank lines) and count them instead of stopping
    #[arg(long, help_heading = "Input")]
    pub skip_invalid: bool,

    /// Do not print the summary line on stderr
    #[arg(short, long, help_heading = "Output")]
    pub quiet: bool,

    /// Input files, directories or glob patterns; `-` reads stdin
    #[arg(value_name = "INPUT", required = true, help_heading = None)]
    pub inputs: Vec<String>,
}

/// `--format`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    /// id<TAB>hex<TAB>base32 (minhash: id<TAB>comma-separated hex values)
    Tsv,
    /// One JSON object per document
    Jsonl,
}

pub fn run(args: &HashArgs) -> Result<()> {
    if args.scheme.wants_tfidf() {
        anyhow::bail!("--weights tfidf needs document frequencies from a pass over the whole corpus: use it with neardup run");
    }
    let scheme = args.scheme.to_scheme()?;
    let files = super::scan_quietly(&args.inputs, args.plain, args.quiet)?;
    let mut spec = args.fields.spec();
    args.documents.apply(&mut spec)?;
    let minhash = matches!(scheme.method, Method::MinHash { .. });
    let stdout = io::stdout();
    let mut fingerprinter = Fingerprinter::new(scheme);
    // Only the fingerprint is printed: the feature set may stay unsorted.
    fingerprinter.set_sort_feature_set(false);
    let mut hasher = Hasher {
        fingerprinter,
        out: BufWriter::with_capacity(256 * 1024, stdout.lock()),
        format: args.format,
        minhash,
        skip_invalid: args.skip_invalid,
        json: Vec::new(),
        documents: 0,
        empty: 0,
        skipped: 0,
        first_skipped: None,
    };
    let result = files
        .iter()
        .try_for_each(|file| hasher.file(file, &spec))
        .map_err(|e| with_hint(e, args));
    // Whatever happened, the lines already produced go out whole before the error does.
    let flushed = hasher.out.flush().map_err(stdout_error);
    result?;
    flushed?;
    if !args.quiet {
        eprintln!("{}", hasher.summary());
    }
    Ok(())
}

/// Fingerprints documents and writes their lines.
struct Hasher<W: Write> {
    fingerprinter: Fingerprinter,
    out: W,
    format: OutputFormat,
    minhash: bool,
    skip_invalid: bool,
    /// Reused buffer for one JSON line.
    json: Vec<u8>,
    documents: u64,
    empty: u64,
    skipped: u64,
    first_skipped: Option<String>,
}

impl<W: Write> Hasher<W> {
    /// Fingerprints every record of `file`, unit by unit, through its source kind.
    fn file(&mut self, file: &InputFile, spec: &FieldSpec) -> Result<(), IoError> {
        let kind = file.format.kind();
        let mut next = SourceRecord::default();
        let mut record = Record::default();
        let mut no_id = String::new();
        for unit in kind.units(file)? {
            let mut reader = match kind.open(file, &unit, spec) {
                Ok(reader) => reader,
                // A plain file that is not UTF-8 is one invalid document.
                Err(e @ IoError::InvalidUtf8 { .. }) => {
                    self.invalid(e)?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            while reader.next_into(&mut next)? {
                let Some(parsed) = next.payload.document_into(kind, spec, &mut record) else {
                    continue;
                };
                if let Err(e) = parsed {
                    self.invalid(kind.record_error(&file.path, next.record, e))?;
                    continue;
                }
                let id = match &record.id {
                    Some(id) => id,
                    None => {
                        no_id.clear();
                        kind.record_name(file, next.record, &mut no_id);
                        &no_id
                    }
                };
                self.document(id, &record.text)?;
            }
        }
        Ok(())
    }

    /// A record that cannot be used: counted with `--skip-invalid`, else the error.
    fn invalid(&mut self, err: IoError) -> Result<(), IoError> {
        if !self.skip_invalid {
            return Err(err);
        }
        self.skipped += 1;
        if self.first_skipped.is_none() {
            self.first_skipped = Some(err.to_string());
        }
        Ok(())
    }

    fn document(&mut self, id: &str, text: &str) -> Result<(), IoError> {
        let fp = self.fingerprinter.fingerprint(text);
        self.documents += 1;
        self.empty += u64::from(fp.is_empty());
        self.write_line(id, &fp).map_err(stdout_error)
    }

    fn write_line(&mut self, id: &str, fp: &DocFingerprint) -> io::Result<()> {
        match self.format {
            OutputFormat::Tsv => {
                write_tsv_field(&mut self.out, id)?;
                if self.minhash {
                    let signature = self.fingerprinter.signature();
                    self.json.clear();
                    self.json.reserve(17 * signature.len() + 2);
                    self.json.push(b'\t');
                    for (i, &v) in signature.iter().enumerate() {
                        if i > 0 {
                            self.json.push(b',');
                        }
                        self.json.extend_from_slice(&hex16(v));
                    }
                    self.json.push(b'\n');
                    self.out.write_all(&self.json)
                } else {
                    let mut line = [0u8; 32];
                    line[0] = b'\t';
                    line[1..17].copy_from_slice(&hex16(fp.simhash));
                    line[17] = b'\t';
                    line[18..31].copy_from_slice(&base32_13(fp.simhash));
                    line[31] = b'\n';
                    self.out.write_all(&line)
                }
            }
            OutputFormat::Jsonl => {
                self.json.clear();
                let written = if self.minhash {
                    serde_json::to_writer(
                        &mut self.json,
                        &MinhashLine {
                            id,
                            minhash: HexValues(self.fingerprinter.signature()),
                            n_tokens: fp.n_tokens,
                            empty: fp.is_empty(),
                        },
                    )
                } else {
                    serde_json::to_writer(
                        &mut self.json,
                        &SimhashLine {
                            id,
                            simhash: &encoding::to_hex(fp.simhash),
                            base32: &encoding::to_base32(fp.simhash),
                            n_tokens: fp.n_tokens,
                            empty: fp.is_empty(),
                        },
                    )
                };
                written.map_err(io::Error::other)?;
                self.json.push(b'\n');
                self.out.write_all(&self.json)
            }
        }
    }

    fn summary(&self) -> String {
        let mut line = format!(
            "hashed {} ({} empty)",
            plural(self.documents, "document"),
            self.empty
        );
        if self.skipped > 0 {
            line += &format!(", skipped {}", plural(self.skipped, "invalid record"));
            if let Some(first) = &self.first_skipped {
                line += &format!(" (first: {first})");
            }
        }
        line
    }
}

#[derive(serde::Serialize)]
struct SimhashLine<'a> {
    id: &'a str,
    simhash: &'a str,
    base32: &'a str,
    n_tokens: u32,
    empty: bool,
}

#[derive(serde::Serialize)]
struct MinhashLine<'a> {
    id: &'a str,
    minhash: HexValues<'a>,
    n_tokens: u32,
    empty: bool,
}

/// A signature as a JSON array of 16-digit hex strings (JSON numbers lose 64-bit precision
/// in many readers).
struct HexValues<'a>(&'a [u64]);

impl Serialize for HexValues<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|&v| Hex(v)))
    }
}

struct Hex(u64);

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&format_args!("{:016x}", self.0))
    }
}

/// 16 lower-case hex digits, as `format!("{v:016x}")` writes them.
fn hex16(v: u64) -> [u8; 16] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 16];
    for (i, digit) in out.iter_mut().enumerate() {
        *digit = DIGITS[((v >> (60 - 4 * i)) & 0xf) as usize];
    }
    out
}

/// The 13 base32 characters of a fingerprint, as [`encoding::to_base32`] writes them: the
/// 8 big-endian octets in 5-bit groups, the last one 4 bits and a zero bit.
fn base32_13(v: u64) -> [u8; 13] {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = [0u8; 13];
    for (i, c) in out.iter_mut().enumerate().take(12) {
        *c = ALPHABET[((v >> (59 - 5 * i)) & 31) as usize];
    }
    out[12] = ALPHABET[((v & 0xf) << 1) as usize];
    out
}

/// Writes an id as one TSV field: tab, newline, carriage return and backslash are escaped
/// as `\t`, `\n`, `\r` and `\\`, so every document is exactly one line of three fields.
pub(crate) fn write_tsv_field(out: &mut impl Write, field: &str) -> io::Result<()> {
    let bytes = field.as_bytes();
    if !bytes
        .iter()
        .any(|b| matches!(b, b'\t' | b'\n' | b'\r' | b'\\'))
    {
        return out.write_all(bytes);
    }
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escaped: &[u8] = match b {
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\\' => b"\\\\",
            _ => continue,
        };
        out.write_all(&bytes[start..i])?;
        out.write_all(escaped)?;
        start = i + 1;
    }
    out.write_all(&bytes[start..])
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Adds the flag that fixes the most common mistakes: a corpus whose fields have other
/// names than `text` and `id`.
fn with_hint(err: IoError, args: &HashArgs) -> anyhow::Error {
    let record_error = match &err {
        IoError::Record { cause: source, .. } | IoError::Row { cause: source, .. } => Some(source),
        _ => None,
    };
    let hint = match (record_error, &err) {
        (Some(RecordError::MissingId(_)), _) => Some(
            "name the id field with --id-field FIELD, or use --no-id to identify documents by FILE:LINE",
        ),
        (Some(RecordError::MissingText(_)), _) => {
            Some("name the text field with --text-field FIELD")
        }
        (_, IoError::MissingColumn { column, .. }) if *column == args.fields.id_field && !args.fields.no_id => {
            Some("name the id column with --id-field COLUMN, or use --no-id to identify rows by FILE:ROW")
        }
        (_, IoError::MissingColumn { column, .. }) if *column == args.fields.text.text_field => {
            Some("name the text column with --text-field COLUMN")
        }
        _ => None,
    };
    match hint {
        Some(hint) => anyhow::anyhow!("{err} ({hint})"),
        None => err.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tsv(field: &str) -> String {
        let mut out = Vec::new();
        write_tsv_field(&mut out, field).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn tsv_fields_escape_separators() {
        assert_eq!(tsv("doc-1"), "doc-1");
        assert_eq!(tsv("a\tb\nc\\d\re"), "a\\tb\\nc\\\\d\\re");
        assert_eq!(tsv("\t"), "\\t");
        assert_eq!(tsv(""), "");
    }

    #[test]
    fn hex_values_serialize_as_strings() {
        let json = serde_json::to_string(&HexValues(&[1, u64::MAX])).unwrap();
        assert_eq!(json, r#"["0000000000000001","ffffffffffffffff"]"#);
    }

    #[test]
    fn fast_text_forms_equal_the_library_ones() {
        let mut state = 0x5eed_u64;
        let specials = [0, 1, u64::MAX, 1 << 63, 0x0123_4567_89ab_cdef];
        let randoms = (0..10_000).map(|_| neardup_core::mix::splitmix64(&mut state));
        for v in specials.into_iter().chain(randoms) {
            assert_eq!(hex16(v), format!("{v:016x}").as_bytes());
            assert_eq!(base32_13(v), encoding::to_base32(v).as_bytes());
        }
    }

    #[test]
    fn plurals() {
        assert_eq!(plural(1, "document"), "1 document");
        assert_eq!(plural(0, "document"), "0 documents");
        assert_eq!(plural(2, "invalid record"), "2 invalid records");
    }
}
