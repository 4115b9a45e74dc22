//! One module per subcommand: its flags (a `clap::Args` struct) and its `run` function.

pub mod compare;
pub mod eval;
pub mod export;
pub mod extract;
pub mod hash;
pub mod index;
pub mod query;
pub mod report;
pub mod run;
pub mod serve;
pub mod substrings;
pub mod sweep;

use std::io::{self, Write};
use std::path::PathBuf;

use neardup_io::IoError;

/// A failed write to standard output, as `<stdout>: cannot write: ...`. A closed pipe keeps
/// its kind, so that `main` ends quietly with code 0 (`neardup eval ... | head -1`); any
/// other failure (a full disk, `/dev/full`) is an error.
pub(crate) fn stdout_error(cause: io::Error) -> IoError {
    IoError::Write {
        path: PathBuf::from("<stdout>"),
        cause,
    }
}

/// The input files `patterns` name (`neardup_io::input::scan_inputs`), with a notice on
/// stderr for each kind of thing left out unless `quiet`: the rule of `hash` and `extract`
/// (`run` also speaks JSON).
pub(crate) fn scan_quietly(
    patterns: &[String],
    plain: bool,
    quiet: bool,
) -> Result<Vec<neardup_io::input::InputFile>, IoError> {
    let scan = neardup_io::input::scan_inputs(patterns, plain)?;
    if !quiet {
        for notice in scan.notices() {
            eprintln!("neardup: notice: {notice}");
        }
    }
    Ok(scan.files)
}

/// Writes `text` to standard output and flushes it; errors as [`stdout_error`].
pub(crate) fn write_stdout(text: &str) -> Result<(), IoError> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(stdout_error)
}

/// The error of a job that ran and failed: its first error, how many more, and that no
/// `_SUCCESS` was written.
pub(crate) fn failed(
    summary: &neardup_dataflow::JobSummary,
    output: &std::path::Path,
) -> anyhow::Error {
    let first = summary.errors.first().cloned().unwrap_or_default();
    let more = match summary.errors.len().saturating_sub(1) {
        0 => String::new(),
        more => format!(" (and {more} more errors)"),
    };
    anyhow::anyhow!(
        "{first}{more}; no _SUCCESS was written in {}",
        output.display()
    )
}
