//! `neardup extract`: the documents of a crawl as one Parquet table, the step people run
//! today with warcio and trafilatura before any deduplication.
//!
//! Each input is read through its source kind, exactly as `neardup run` reads it (the same
//! records kept and skipped, the same text), and every document becomes a row of
//! `OUT/documents/` with where it came from. Files are shared among `-w` threads; input
//! file `i` is written to part `i`, in record order, so the table does not depend on the
//! number of threads, and memory holds one batch of rows per thread, not the corpus.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use neardup_io::file::InputFile;
use neardup_io::parquet_out::{DocumentRow, PartWriter, TableMeta, NO_SCHEME, PARAM_EXTRACT};
use neardup_io::record::{FieldSpec, Record};
use neardup_io::run_dir::{self, Protected, RunDir, Table};
use neardup_io::source::{Payload, SourceRecord};
use neardup_io::IoError;
use serde::Serialize;

pub const EXAMPLES: &str = "\
Examples:
  The pages of a crawl as text, one row per page:
    neardup extract --output pages crawl/*.warc.gz
    duckdb -c \"select url, title, length(text) from 'pages/documents/*.parquet' limit 5\"

  Main content only (no menus, headers, footers), four threads:
    neardup extract -w 4 --html main --output pages crawl/

  HTML stored in a JSONL field:
    neardup extract --html text --text-field html --url-field url --output pages dump.jsonl.zst";

#[derive(Args, Debug)]
#[command(
    after_help = EXAMPLES,
    mut_arg("text_field", |a| a.help("JSON field (or Parquet column) holding the text (JSONL and Parquet inputs)")),
)]
pub struct ExtractArgs {
    /// Output directory: documents/ (Parquet, one part per input file), summary.json, _SUCCESS
    #[arg(short = 'o', long, value_name = "DIR")]
    pub output: PathBuf,
    /// Replace a previous neardup output (only what neardup wrote)
    #[arg(long)]
    pub overwrite: bool,
    /// Threads reading files in parallel
    #[arg(short = 'w', long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub workers: u32,
    #[command(flatten)]
    pub text: crate::input_args::TextFieldArg,
    /// Read each input file whole as one document (HTML pages saved as files)
    #[arg(long)]
    pub plain: bool,
    /// Skip records that cannot be read (counted and reported) instead of failing
    #[arg(long)]
    pub skip_invalid: bool,
    #[command(flatten)]
    pub documents: crate::input_args::DocumentArgs,
    /// No progress and no summary line
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Input files, directories, globs or URLs: WARC, ARC, JSONL, Parquet (or any file with --plain)
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<String>,
}

/// `summary.json` of an extraction.
#[derive(Debug, Default, Serialize)]
struct Summary {
    version: &'static str,
    command: Vec<String>,
    inputs: usize,
    documents: u64,
    bytes: u64,
    truncated: u64,
    blank_lines: u64,
    skipped_records: std::collections::BTreeMap<String, u64>,
    invalid: u64,
    invalid_examples: Vec<String>,
    seconds: f64,
}

/// What one thread saw.
#[derive(Default)]
struct Part {
    summary: Summary,
}

pub fn run(args: &ExtractArgs) -> Result<()> {
    let started = Instant::now();
    let files = super::scan_quietly(&args.inputs, args.plain, args.quiet)?;
    let mut spec = FieldSpec {
        text_field: args.text.text_field.clone(),
        ..FieldSpec::default()
    };
    args.documents.apply(&mut spec)?;
    let protect: Vec<Protected> = files
        .iter()
        .filter(|f| !f.is_stdin())
        .map(|f| Protected::new(f.path.clone(), "an input"))
        .collect();
    // Held to the end: a second run into the same directory is refused meanwhile.
    let _locked = run_dir::prepare(&args.output, args.overwrite, &[Table::Documents], &protect)?;
    let table = RunDir::new(&args.output).table(Table::Documents);

    let bar = progress_bar(&files, args.quiet);
    let parts = read_files(&files, &spec, args, &table, &bar);
    bar.finish_and_clear();

    let mut summary = Summary {
        version: env!("CARGO_PKG_VERSION"),
        command: std::env::args().collect(),
        inputs: files.len(),
        ..Summary::default()
    };
    for part in parts {
        summary.add(part?.summary);
    }
    summary.invalid_examples.sort();
    summary.invalid_examples.truncate(5);
    summary.seconds = started.elapsed().as_secs_f64();
    let json = serde_json::to_vec_pretty(&summary).context("serializing summary.json")?;
    run_dir::commit(&args.output, &json, true)?;
    if !args.quiet {
        print_summary(&summary, &table);
    }
    Ok(())
}

/// The progress bar, over the bytes of all input files (hidden with `--quiet`).
fn progress_bar(files: &[InputFile], quiet: bool) -> ProgressBar {
    let total: u64 = files
        .iter()
        .map(|f| std::fs::metadata(&f.path).map(|m| m.len()).unwrap_or(0))
        .sum();
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "extract {bar:30} {bytes}/{total_bytes} {bytes_per_sec} {msg}",
        )
        .expect("a valid template"),
    );
    bar
}

/// Reads the files on `--workers` threads, each taking the next file not yet taken; one
/// part per thread.
fn read_files(
    files: &[InputFile],
    spec: &FieldSpec,
    args: &ExtractArgs,
    table: &Path,
    bar: &ProgressBar,
) -> Vec<Result<Part>> {
    let next = AtomicU64::new(0);
    let workers = (args.workers as usize).min(files.len()).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut part = Part::default();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                        let Some(file) = files.get(i) else {
                            return Ok(part);
                        };
                        read_file(i, file, spec, args.skip_invalid, table, &mut part)?;
                        bar.inc(std::fs::metadata(&file.path).map(|m| m.len()).unwrap_or(0));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| bail!("an extract thread panicked"))
            })
            .collect()
    })
}

impl Summary {
    /// Adds a thread's counts.
    fn add(&mut self, s: Summary) {
        self.documents += s.documents;
        self.bytes += s.bytes;
        self.truncated += s.truncated;
        self.blank_lines += s.blank_lines;
        self.invalid += s.invalid;
        self.invalid_examples.extend(s.invalid_examples);
        for (reason, n) in s.skipped_records {
            *self.skipped_records.entry(reason).or_default() += n;
        }
    }
}

/// The summary line on stderr.
fn print_summary(summary: &Summary, table: &Path) {
    let skipped: u64 = summary.skipped_records.values().sum();
    eprintln!(
        "neardup extract: {} documents ({:.1} MB of text) from {} files in {:.2} s; {} records skipped ({}), {} truncated, {} invalid\n  output: {}",
        summary.documents,
        summary.bytes as f64 / 1e6,
        summary.inputs,
        summary.seconds,
        skipped,
        summary
            .skipped_records
            .iter()
            .map(|(r, n)| format!("{r} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        summary.truncated,
        summary.invalid,
        table.display()
    );
}

/// Reads every record of `file` into part `index` of `table`, counting in `part`.
fn read_file(
    index: usize,
    file: &InputFile,
    spec: &FieldSpec,
    skip_invalid: bool,
    table: &Path,
    part: &mut Part,
) -> Result<(), IoError> {
    let meta = TableMeta {
        scheme: NO_SCHEME.into(),
        params: serde_json::json!({
            PARAM_EXTRACT: {
                "html": spec.html.map(|m| m.name()),
                "max_doc_bytes": spec.max_doc_bytes,
                "text_field": spec.text_field,
                "url_field": spec.url_field,
                "time_field": spec.time_field,
            }
        }),
    };
    let mut writer = PartWriter::<DocumentRow>::create(table, index, &meta)?;
    let kind = file.format.kind();
    let source = file.path.display().to_string();
    let mut next = SourceRecord::default();
    for unit in kind.units(file)? {
        let mut reader = kind.open(file, &unit, spec)?;
        while reader.next_into(&mut next)? {
            // Blank lines and records skipped by reason are counted, not read.
            match &next.payload {
                Payload::Blank(_) => {
                    part.summary.blank_lines += 1;
                    continue;
                }
                Payload::Skipped(reason) => {
                    *part
                        .summary
                        .skipped_records
                        .entry(reason.name().to_owned())
                        .or_default() += 1;
                    continue;
                }
                _ => {}
            }
            let mut record = Record::default();
            let Some(parsed) = next.payload.document_into(kind, spec, &mut record) else {
                continue;
            };
            let record = match parsed {
                Ok(()) => record,
                Err(e) => {
                    let err = kind.record_error(&file.path, next.record, e);
                    if !skip_invalid {
                        return Err(err);
                    }
                    part.summary.invalid += 1;
                    part.summary.invalid_examples.push(err.to_string());
                    continue;
                }
            };
            part.summary.documents += 1;
            part.summary.bytes += record.text.len() as u64;
            part.summary.truncated += u64::from(record.truncated);
            writer.push(row(&source, next.record, record))?;
        }
    }
    writer.commit()?;
    Ok(())
}

fn row(source: &str, number: u64, record: Record) -> DocumentRow {
    let origin = record.origin.map(|o| *o).unwrap_or_default();
    DocumentRow {
        source: source.to_owned(),
        record: number,
        host: origin.host(),
        url: origin.url,
        fetched_at: origin.fetched_at,
        offset: origin.offset,
        length: origin.length,
        content_type: origin.content_type,
        charset: origin.charset,
        title: origin.title,
        text: record.text,
    }
}
