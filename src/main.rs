//! The `neardup` command line: a thin layer over the library crates (`neardup-core` for the
//! algorithms, `neardup-io` for reading inputs, `neardup-dataflow` for the distributed job).
//! Argument parsing, error reporting and exit codes live here; anything reusable lives in
//! the libraries.
//!
//! Exit codes: 0 on success (also when the reader of stdout goes away, as with `| head`),
//! 1 on an error (printed to stderr as `error: ...` with its causes), 2 on a usage error,
//! 130 and 143 when `run` or `search` is interrupted by SIGINT or SIGTERM (see
//! `interrupt.rs`).

// The argument structs' doc comments are clap's `--help` text, written for a terminal
// (`[:POLICY]`, `id<TAB>hex`), not rustdoc markup.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

mod allocator;
mod cluster_args;
mod commands;
mod input_args;
mod interrupt;
mod memory_args;
mod progress_view;
mod run_scores;
mod scheme_args;

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand};

const EXAMPLES: &str = "\
Examples:
  Fingerprint a corpus (JSONL, plain or .gz/.zst, or Parquet), one line per document:
    neardup hash corpus/ > fingerprints.tsv

  The same as JSON lines, with word-shingle simhash:
    neardup hash --scheme simhash-shingles --format jsonl 'data/*.jsonl.zst'

  Compare two documents (fingerprints, Hamming distance, Jaccard, verdict):
    neardup compare a.txt b.txt
    neardup compare --text 'the quick brown fox' --text 'the quick brown foxes'

Run `neardup help <COMMAND>` for a command's flags and more examples.
Fingerprint definitions: docs/fingerprints.md";

/// Near-duplicate document detection with simhash and MinHash.
#[derive(Parser, Debug)]
#[command(
    name = "neardup",
    version,
    about,
    after_help = EXAMPLES,
    propagate_version = true,
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Fingerprint documents: one line per document with its id and fingerprint
    Hash(commands::hash::HashArgs),
    /// Compare two documents: fingerprints, Hamming distance, Jaccard, verdict
    Compare(commands::compare::CompareArgs),
    /// Find exact and near duplicates in a corpus: the distributed job, with Parquet outputs
    #[command(disable_help_flag = true, after_help = commands::run::RUN_EXAMPLES)]
    Run(Box<commands::run::RunArgs>),
    /// Search an existing fingerprint table for pairs within k bits, and cluster them
    #[command(disable_help_flag = true, after_help = commands::run::SEARCH_EXAMPLES)]
    Search(commands::run::SearchArgs),
    /// Extract the documents of web archives (or JSONL, Parquet, HTML files) to Parquet:
    /// url, host, fetch time, place in the archive, title, text
    Extract(commands::extract::ExtractArgs),
    /// Score a run against ground-truth pairs: precision, recall, F1, adjusted Rand index
    #[command(after_help = commands::eval::EVAL_EXAMPLES)]
    Eval(commands::eval::EvalArgs),
    /// Find repeated passages: every byte range of at least N bytes that occurs more than
    /// once in the corpus (exact substring deduplication), as Parquet ranges
    #[command(disable_help_flag = true, after_help = commands::substrings::SUBSTRINGS_EXAMPLES)]
    Substrings(Box<commands::substrings::SubstringsArgs>),
    /// Find the indexed documents near each query document (an index made by run --index)
    Query(commands::query::QueryArgs),
    /// Maintain a saved index: compact its generations, show its manifest
    Index(commands::index::IndexArgs),
    /// Serve an index over HTTP: queries, and documents put, replaced and deleted live,
    /// their clusters kept up to date, every write durable
    Serve(commands::serve::ServeArgs),
    /// Write a finished run as plain tables: matches.tsv, clusters.tsv, substring_bytes.tsv
    #[command(after_help = commands::export::EXPORT_EXAMPLES)]
    Export(commands::export::ExportArgs),
    /// Write RUN_DIR/report.html: one offline page with the run's summary, plots and samples
    #[command(after_help = commands::report::REPORT_EXAMPLES)]
    Report(commands::report::ReportArgs),
}

fn main() -> ExitCode {
    allocator::configure();
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Hash(args) => commands::hash::run(args),
        Command::Compare(args) => {
            if let Some(problem) = args.usage_problem() {
                usage_error("compare", problem);
            }
            commands::compare::run(args)
        }
        Command::Run(args) => {
            commands::run::run(args).and_then(|()| commands::report::after_run(args))
        }
        Command::Search(args) => commands::run::search(args),
        Command::Eval(args) => commands::eval::run(args),
        Command::Extract(args) => commands::extract::run(args),
        Command::Substrings(args) => commands::substrings::run(args),
        Command::Query(args) => commands::query::run(args),
        Command::Index(args) => commands::index::run(args),
        Command::Serve(args) => commands::serve::run(args),
        Command::Export(args) => commands::export::run(args),
        Command::Report(args) => commands::report::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of our output went away (`neardup hash ... | head`): not an error.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            // The error and its causes, `outer: inner: ...`: the libraries' errors never repeat
            // a cause in their own message.
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Reports a usage problem clap cannot check by itself the way clap reports its own
/// (message, usage line, exit code 2).
fn usage_error(subcommand: &str, message: String) -> ! {
    let mut cli = Cli::command();
    cli.build();
    let sub = cli
        .find_subcommand_mut(subcommand)
        .expect("usage_error names a real subcommand");
    sub.error(ErrorKind::WrongNumberOfValues, message).exit()
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        let kind = match cause.downcast_ref::<neardup_io::IoError>() {
            Some(e) => e.io_kind(),
            None => cause.downcast_ref::<std::io::Error>().map(|e| e.kind()),
        };
        kind == Some(std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_chains_do_not_repeat_causes() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let wrapped = anyhow::Error::new(io).context("reading a.txt");
        assert_eq!(format!("{wrapped:#}"), "reading a.txt: gone");
        let record = neardup_io::IoError::record("a.jsonl", 2, neardup_io::RecordError::EmptyLine);
        assert_eq!(
            format!("{:#}", anyhow::Error::from(record)),
            "a.jsonl:2: empty line"
        );
        let open = neardup_io::IoError::Open {
            path: "a.jsonl".into(),
            cause: std::io::Error::new(std::io::ErrorKind::NotFound, "gone"),
        };
        let job = neardup_dataflow::JobError::from(open);
        assert_eq!(
            format!("{:#}", anyhow::Error::from(job).context("reading inputs")),
            "reading inputs: a.jsonl: cannot open: gone"
        );
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
