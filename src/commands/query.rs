//! `neardup query`: the indexed documents within `k` bits of each query document, text or
//! fingerprint, from a saved index (`neardup run --index`); of a MinHash index, those that
//! share an LSH band with the query and reach the threshold, verified as the run verified
//! its pairs (exact Jaccard where the index holds shingle sets, else the estimate).
//!
//! This module turns the flags into a query of [`neardup_io::index::answer`], which answers
//! it as it answers the Python package's: every text is fingerprinted with the index's own
//! scheme, rebuilt from its manifest (the same recipe `neardup hash` applies, checked
//! against the recorded parameters), so a query can never be compared with fingerprints of
//! another kind; queries are answered in batches across `-w` threads, and the answers come
//! out in query order whatever the thread count. Here: the flags' checks, the query
//! documents read from the inputs, and the matches written (JSON lines or Parquet).

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use neardup_core::{encoding, Scheme};
use neardup_io::index::answer::{self, Answerer, KName, Query};
use neardup_io::index::{Index, MatchRow, Verify};
use neardup_io::parquet_out::{PartWriter, TableMeta, PARAM_FINGERPRINT};
use neardup_io::record::{FieldSpec, Record};
use neardup_io::source::SourceRecord;
use serde_json::json;

use crate::commands::stdout_error;
use crate::input_args::{input_field, input_flag, FieldArgs};

const EXAMPLES: &str = "\
Examples:
  Make an index while deduplicating a corpus, then ask it about new documents:
    neardup run --index idx --output out corpus.jsonl
    neardup query --index idx new.jsonl
  One text, or one fingerprint (16 hex digits), with a smaller k than the index's:
    neardup query --index idx --text 'the quick brown fox'
    neardup query --index idx -k 1 --fingerprint 83052266e2554591
  Many queries across 2 threads, the answers as Parquet:
    neardup query --index idx -w 2 --output matches.parquet 'batch/*.jsonl'
  A MinHash index (neardup run --scheme minhash --index mh --index-shingles), with a
  stricter threshold than its own:
    neardup query --index mh --threshold 0.9 new.jsonl

Output: one JSON line per match: {\"query\": ..., \"id\": ..., \"doc_id\": ..., \"hamming\": ...,
\"cluster_id\": ...} (query: the query document's id, FILE:LINE without one, text:N for the
N-th --text, the hex of a --fingerprint; cluster_id: null for a document in no cluster).
A MinHash index answers \"jaccard\" and \"jaccard_exact\" instead of \"hamming\": the exact
Jaccard of the shingle sets (true: the index holds them, --index-shingles) or the
signatures' estimate (false).";

/// Flags of `neardup query`.
#[derive(Args, Debug)]
#[command(
    after_help = EXAMPLES,
    mut_arg("text_field", |a| input_field(a, "The JSON field (or Parquet column) holding the text")),
    mut_arg("id_field", |a| input_field(a, "The JSON field (or Parquet column) holding the query's id")),
    mut_arg("no_id", |a| input_flag(a, "The records have no id: use FILE:LINE instead")),
)]
pub struct QueryArgs {
    /// The index (made by neardup run --index)
    #[arg(long, value_name = "DIR")]
    pub index: PathBuf,
    /// Report matches within K bits (at most the index's k; default: the index's k).
    /// Simhash indexes only
    #[arg(short = 'k', long, value_name = "K")]
    pub k: Option<u32>,
    /// Report matches of at least this Jaccard similarity (at least the index's threshold;
    /// default: the index's). MinHash indexes only
    #[arg(long, value_name = "T")]
    pub threshold: Option<f64>,
    /// A query text (repeatable)
    #[arg(long = "text", value_name = "TEXT")]
    pub texts: Vec<String>,
    /// A query fingerprint, 16 hex digits (repeatable)
    #[arg(long = "fingerprint", value_name = "HEX")]
    pub fingerprints: Vec<String>,
    /// Write the matches as Parquet to FILE instead of JSON lines to stdout
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Worker threads answering queries
    #[arg(short = 'w', long, default_value_t = 1, value_name = "N")]
    pub workers: usize,
    /// Check only the index files' sizes and headers, not their checksums (faster to open
    /// a large index; a damaged byte then goes unnoticed)
    #[arg(long)]
    pub no_verify: bool,
    #[command(flatten)]
    pub fields: FieldArgs,
    /// Read each input file whole as one document whose id is its path
    #[arg(long, help_heading = "Input")]
    pub plain: bool,
    /// Skip records that cannot be read instead of stopping
    #[arg(long, help_heading = "Input")]
    pub skip_invalid: bool,
    /// No summary line on stderr
    #[arg(short, long)]
    pub quiet: bool,
    /// Query documents: files, directories, globs or URLs; `-` reads stdin
    #[arg(value_name = "INPUT")]
    pub inputs: Vec<String>,
}

pub fn run(args: &QueryArgs) -> Result<()> {
    neardup_io::store::local_only(&args.index, "index")?;
    if let Some(out) = &args.output {
        neardup_io::store::local_only(out, "--output file")?;
    }
    if args.inputs.is_empty() && args.texts.is_empty() && args.fingerprints.is_empty() {
        bail!("nothing to query: give INPUT files, --text or --fingerprint");
    }
    if args.workers == 0 {
        bail!("-w must be at least 1");
    }
    let verify = if args.no_verify {
        Verify::Sizes
    } else {
        Verify::Checksums
    };
    let index = Index::open(&args.index, verify)?;
    let (k, threshold) = limits(args, &index)?;
    // Texts need the index's scheme; fingerprints are looked up as they are.
    let scheme = if args.texts.is_empty() && args.inputs.is_empty() {
        Scheme::simhash_doc()
    } else {
        answer::query_scheme(index.manifest())
            .with_context(|| format!("{}: cannot fingerprint text queries", args.index.display()))?
    };
    let mut queries = given_queries(args)?;
    let mut sink = Sink::new(args, &index)?;
    let mut answerer = Answerer::new(&index, scheme)
        .k(k)
        .threshold(threshold)
        .threads(args.workers);
    answerer.answer(&mut queries, |row| sink.push(row))?;
    let mut skipped = 0;
    if !args.inputs.is_empty() {
        let files = super::scan_quietly(&args.inputs, args.plain, args.quiet)?;
        let spec = args.fields.spec();
        for file in &files {
            read_queries(file, &spec, args.skip_invalid, &mut skipped, |q| {
                answerer.push(q, |row| sink.push(row))
            })?;
        }
        answerer.flush(|row| sink.push(row))?;
    }
    sink.finish()?;
    if !args.quiet {
        let within = match index.minhash() {
            Some(m) => format!(
                "of Jaccard {threshold} or more ({})",
                if m.exact() { "exact" } else { "estimated" }
            ),
            None => format!("within k = {k}"),
        };
        eprintln!(
            "neardup: {} queries, {} matches {within}{}",
            answerer.queries(),
            answerer.matches(),
            if skipped > 0 {
                format!(", {skipped} invalid records skipped")
            } else {
                String::new()
            }
        );
    }
    Ok(())
}

/// The `k` and (of a MinHash index) the threshold asked with, checked against the index:
/// each kind of index is asked with its own flag.
fn limits(args: &QueryArgs, index: &Index) -> Result<(u32, f64)> {
    let dir = args.index.display();
    let threshold = match index.minhash() {
        Some(m) if args.k.is_some() => bail!(
            "{dir}: -k applies to simhash indexes; this is a MinHash index (threshold {}): ask with --threshold",
            m.threshold
        ),
        Some(_) if !args.fingerprints.is_empty() => bail!(
            "{dir}: --fingerprint asks a simhash index; this MinHash index is asked with texts (--text, INPUT)"
        ),
        Some(m) => answer::check_threshold(m, args.threshold, &args.index)?,
        None if args.threshold.is_some() => bail!(
            "{dir}: --threshold applies to MinHash indexes; this simhash index (k = {}) is asked with -k",
            index.k()
        ),
        None => 0.0,
    };
    let k = answer::check_k(index.k(), args.k, KName::Flag)?;
    Ok((k, threshold))
}

/// The queries of `--text` (named `text:N`) and `--fingerprint` (named as given).
fn given_queries(args: &QueryArgs) -> Result<Vec<Query>> {
    let mut queries: Vec<Query> = Vec::new();
    for (i, text) in args.texts.iter().enumerate() {
        queries.push(Query::text(format!("text:{}", i + 1), text.clone()));
    }
    for hex in &args.fingerprints {
        let fp = encoding::from_hex(hex)
            .with_context(|| format!("--fingerprint {hex:?}: expected 16 hex digits"))?;
        queries.push(Query::Fingerprint {
            name: hex.clone(),
            fp,
        });
    }
    Ok(queries)
}

/// Reads every record of `file` as a query.
fn read_queries(
    file: &neardup_io::input::InputFile,
    spec: &FieldSpec,
    skip_invalid: bool,
    skipped: &mut u64,
    mut each: impl FnMut(Query) -> Result<()>,
) -> Result<()> {
    let kind = file.format.kind();
    let mut next = SourceRecord::default();
    let mut record = Record::default();
    for unit in kind.units(file)? {
        let mut reader = kind.open(file, &unit, spec)?;
        while reader.next_into(&mut next)? {
            let Some(parsed) = next.payload.document_into(kind, spec, &mut record) else {
                continue;
            };
            if let Err(e) = parsed {
                let err = kind.record_error(&file.path, next.record, e);
                if skip_invalid {
                    *skipped += 1;
                    continue;
                }
                return Err(err.into());
            }
            let name = match &record.id {
                Some(id) => id.clone(),
                None => {
                    let mut name = String::new();
                    kind.record_name(file, next.record, &mut name);
                    name
                }
            };
            each(Query::Text {
                name,
                text: std::mem::take(&mut record.text),
            })?;
        }
    }
    Ok(())
}

/// Where matches go: JSON lines on stdout, or a Parquet file.
enum Sink {
    Json(BufWriter<io::Stdout>, Vec<u8>),
    Parquet(Box<PartWriter<MatchRow>>),
}

impl Sink {
    fn new(args: &QueryArgs, index: &Index) -> Result<Sink> {
        Ok(match &args.output {
            None => Sink::Json(BufWriter::with_capacity(1 << 16, io::stdout()), Vec::new()),
            Some(path) => {
                let m = index.manifest();
                let mut asked =
                    json!({"k": m.k, "tables": m.tables, "query_k": args.k.unwrap_or(m.k)});
                if let Some(minhash) = &m.minhash {
                    asked["minhash"] = json!(minhash);
                    asked["query_threshold"] = json!(args.threshold.unwrap_or(minhash.threshold));
                }
                let meta = TableMeta {
                    scheme: m.scheme.clone(),
                    params: json!({
                        PARAM_FINGERPRINT: m.fingerprint,
                        "index": asked,
                    }),
                };
                Sink::Parquet(Box::new(PartWriter::create_file(path, &meta)?))
            }
        })
    }

    fn push(&mut self, row: MatchRow) -> Result<()> {
        match self {
            Sink::Json(out, line) => {
                line.clear();
                serde_json::to_writer(&mut *line, &row)?;
                line.push(b'\n');
                out.write_all(line).map_err(stdout_error)?;
            }
            Sink::Parquet(writer) => writer.push(row)?,
        }
        Ok(())
    }

    fn finish(self) -> Result<()> {
        match self {
            Sink::Json(mut out, _) => out.flush().map_err(stdout_error)?,
            Sink::Parquet(writer) => {
                writer.commit()?;
            }
        }
        Ok(())
    }
}
