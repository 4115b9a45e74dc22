//! `neardup substrings`: repeated passages (every byte range of at least N bytes that occurs
//! more than once in the corpus), as `substrings/` rows per document. The same job as `run`
//! (plan, readers, document numbering, several workers and processes, `_SUCCESS`), with the
//! substring stages in place of the near-duplicate search; see docs/substrings.md.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Result};
use neardup_core::substrings::{Occurrences, Settings, Snap, DEFAULT_MIN_BYTES};
use neardup_dataflow::config::SubstringJob;
use neardup_dataflow::{run_job, JobConfig, JobError, JobInput, JobSummary, Progress};

use crate::cluster_args::ClusterArgs;
use crate::progress_view::{LogFormat, ProgressView};

pub const SUBSTRINGS_EXAMPLES: &str = "\
Examples:
  Passages of 50 bytes or more seen twice, every copy but the first:
    neardup substrings --output reps examples/corpus.jsonl

  Every copy (as the reference tool's collect), ranges on word boundaries, 2 workers:
    neardup substrings -w 2 --occurrences all --snap words --min-bytes 100 --output reps corpus.jsonl.zst

  The corpus with every later copy struck (JSONL stays JSONL, Parquet stays Parquet):
    neardup substrings --min-bytes 100 --write-dedup clean --output reps corpus.jsonl.zst

  Within 2 GiB, spilling past it to a scratch disk:
    neardup substrings --memory-limit 2G --spill-dir /scratch --output reps corpus.jsonl.zst

  Query the ranges with DuckDB:
    duckdb -c \"select doc_id, start, \\\"end\\\" from 'reps/substrings/*.parquet' limit 10\"

Outputs: substrings/ (doc_id, id, start, end; byte offsets into the UTF-8 text, half-open),
summary.json (counts.substrings: repeated bytes, their share, documents touched), _SUCCESS.";

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OccurrencesChoice {
    All,
    Later,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapChoice {
    Chars,
    Words,
}

#[derive(clap::Args, Debug)]
pub struct SubstringsArgs {
    /// The shortest repeat reported, in bytes
    #[arg(long, default_value_t = DEFAULT_MIN_BYTES, value_name = "N")]
    pub min_bytes: usize,
    /// Which copies are reported: later (all but the first in corpus order, so that striking
    /// them keeps one copy) or all
    #[arg(long, value_enum, default_value = "later")]
    pub occurrences: OccurrencesChoice,
    /// Where range ends may fall (they move inward): chars (UTF-8 character boundaries) or
    /// words (never inside a word)
    #[arg(long, value_enum, default_value = "chars")]
    pub snap: SnapChoice,
    /// The most text one worker puts under one suffix array (a size: 32M, 1G; default 32M,
    /// made smaller when a worker's share of --memory-limit holds less than 64 bytes per byte)
    #[arg(long, value_name = "SIZE")]
    pub block_bytes: Option<String>,
    #[command(flatten)]
    pub fields: crate::input_args::FieldArgs,
    /// Every input file is one document (its text the whole file; its id the path), whatever
    /// its name
    #[arg(long, conflicts_with_all = ["text_field", "id_field", "no_id"])]
    pub plain: bool,
    /// Skip invalid records (counted and reported) instead of failing
    #[arg(long)]
    pub skip_invalid: bool,
    /// Memory for each process: a size (4G, 512M), auto (70% of physical memory) or none.
    /// Each worker keeps its window records within a quarter of its share and spills sorted
    /// runs to disk beyond it (see --spill-dir; spill_runs in summary.json)
    #[arg(long, default_value = "auto", value_name = "SIZE|auto|none")]
    pub memory_limit: String,
    /// Where window records spill past --memory-limit (default: _spill/ inside the output
    /// directory; removed when the job ends)
    #[arg(long, value_name = "DIR")]
    pub spill_dir: Option<PathBuf>,
    /// Also write the corpus with the ranges struck from every document's text to DIR, in
    /// each input's own format (JSONL, Parquet and plain text; not archives or --html)
    #[arg(long, value_name = "DIR")]
    pub write_dedup: Option<PathBuf>,
    /// Output directory (refused if it exists and is not empty, unless --overwrite)
    #[arg(short = 'o', long, value_name = "DIR")]
    pub output: PathBuf,
    /// Replace a previous neardup output (only what neardup wrote)
    #[arg(long)]
    pub overwrite: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub documents: crate::input_args::DocumentArgs,
    /// No progress and no summary (errors are still printed)
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// How progress and the summary are written to stderr
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Print help
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
    /// Input files, directories, globs or URLs: JSONL (.gz, .zst), Parquet, plain text, WARC or ARC
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<String>,
}

impl SubstringsArgs {
    /// The search the flags ask for.
    pub fn settings(&self) -> Settings {
        settings(self.min_bytes, self.occurrences, self.snap)
    }
}

/// The search asked by `--min-bytes` (or `run --substrings`), `--occurrences` and `--snap`.
pub fn settings(min_bytes: usize, occurrences: OccurrencesChoice, snap: SnapChoice) -> Settings {
    Settings {
        min_bytes,
        occurrences: match occurrences {
            OccurrencesChoice::All => Occurrences::All,
            OccurrencesChoice::Later => Occurrences::Later,
        },
        snap: match snap {
            SnapChoice::Chars => Snap::Chars,
            SnapChoice::Words => Snap::Words,
        },
    }
}

pub fn run(args: &SubstringsArgs) -> Result<()> {
    if args.min_bytes == 0 {
        bail!("--min-bytes 0: a repeat is at least 1 byte long");
    }
    let files = super::scan_quietly(&args.inputs, args.plain, args.quiet)?;
    let cluster = &args.cluster;
    let process = (cluster.processes > 1).then(|| {
        let address = cluster
            .parallelism()
            .ok()
            .and_then(|p| p.addresses.get(cluster.process).cloned())
            .unwrap_or_default();
        (cluster.process, address)
    });
    crate::interrupt::install(args.output.clone(), process)?;
    let mut fields = args.fields.spec();
    args.documents.apply(&mut fields)?;
    let mut job = SubstringJob::only(args.settings());
    job.strike = args.write_dedup.is_some();
    if let Some(size) = &args.block_bytes {
        let bytes = crate::memory_args::parse_size(size)?;
        if bytes == 0 || bytes > neardup_core::substrings::MAX_BLOCK_BYTES as u64 {
            bail!(
                "--block-bytes {size}: expected 1 to {} bytes",
                neardup_core::substrings::MAX_BLOCK_BYTES
            );
        }
        job.block_bytes = bytes as usize;
    }
    let config = JobConfig::builder(JobInput::Documents { files, fields }, args.output.clone())
        .skip_invalid(args.skip_invalid)
        .overwrite(args.overwrite)
        .write_dedup(args.write_dedup.clone())
        .memory_limit(crate::memory_args::memory_limit(&args.memory_limit)?)
        .spill_dir(args.spill_dir.clone())
        .parallelism(cluster.parallelism()?)
        .control(cluster.control()?)
        .substrings(Some(job))
        .command_line(std::env::args().collect())
        .build()?;
    let output = config.output.clone();
    let progress = Arc::new(Progress::default());
    let view = ProgressView::start(progress.clone(), args.log_format, args.quiet);
    let result = run_job(config, progress);
    drop(view);
    crate::interrupt::finish(&output);
    match result {
        Ok(outcome) => {
            if !args.quiet {
                report(&outcome.summary, &output, args.log_format);
            }
            Ok(())
        }
        Err(JobError::Failed(summary)) => Err(super::failed(&summary, &output)),
        Err(e) => Err(e.into()),
    }
}

fn report(summary: &JobSummary, output: &std::path::Path, format: LogFormat) {
    if format == LogFormat::Json {
        eprintln!(
            "{}",
            serde_json::json!({"event": "summary", "summary": summary})
        );
        return;
    }
    let secs = summary.stage_seconds.get("total").copied().unwrap_or(0.0);
    if let Some(s) = &summary.substrings {
        let mb = s.bytes as f64 / 1e6;
        eprintln!(
            "neardup: {} documents ({mb:.1} MB of text) in {secs:.2} s, {:.1} MB/s",
            s.documents,
            mb / secs.max(1e-9)
        );
        eprintln!(
            "  repeated passages of {}+ bytes ({} copies): {} ranges, {} bytes ({:.2}% of the text) in {} documents",
            s.min_bytes,
            s.occurrences,
            s.ranges,
            s.repeated_bytes,
            100.0 * s.repeated_share,
            s.documents_touched
        );
    }
    for warning in &summary.warnings {
        eprintln!("  warning: {warning}");
    }
    if let Some(example) = summary.skip_examples.first() {
        eprintln!("  first skipped record: {example}");
    }
    if let Some((kept, _)) = summary.dedup {
        eprintln!("  corpus with the ranges struck: {kept} documents");
    }
    eprintln!("  output: {} (summary.json, _SUCCESS)", output.display());
}
