//! SIGINT and SIGTERM: the run stops cleanly and says so.
//!
//! A thread waits for the signals (signal-hook runs nothing in the handler itself but a
//! wake-up). On the first one it tells the other processes of a multi-process job who was
//! interrupted (they stop at once, naming this process), stops the job through
//! [`neardup_dataflow::output::stop::stop`] (no `_SUCCESS` after that, readers stop,
//! temporary parts and spill files removed; committed runs and the user's files are never
//! touched), prints what it did, and exits with 128 + the signal number, the shell's
//! convention: 130 for SIGINT, 143 for SIGTERM. The kernel releases the directory locks
//! as the process ends.

use std::path::PathBuf;

use anyhow::{Context, Result};
use neardup_dataflow::output::stop::{stop, Stopped};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// How many removed paths the message names.
const SHOWN: usize = 3;

/// Starts the thread that handles SIGINT and SIGTERM for a run into `output`. `process`
/// names this process to the others of a multi-process job (`None` for a single process).
pub fn install(output: PathBuf, process: Option<(usize, String)>) -> Result<()> {
    let mut signals =
        Signals::new([SIGINT, SIGTERM]).context("cannot install the SIGINT/SIGTERM handler")?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let name = if signal == SIGINT {
                    "SIGINT"
                } else {
                    "SIGTERM"
                };
                let reason = format!("interrupted by {name}");
                if let Some((i, address)) = &process {
                    neardup_dataflow::control::interrupt(&format!(
                        "process {i} ({address}) was {reason}"
                    ));
                }
                let stopped = stop(&reason);
                eprintln!("error: {}", message(&reason, &stopped, &output));
                std::process::exit(128 + signal);
            }
        })
        .context("cannot start the signal thread")?;
    Ok(())
}

/// What the user is told after a stop, e.g. `interrupted by SIGINT; removed temporary
/// files: out/pairs/.part-00000.parquet.tmp, ...; no _SUCCESS was written in out`.
pub fn message(reason: &str, stopped: &Stopped, output: &std::path::Path) -> String {
    let mut text = reason.to_string();
    if !stopped.removed.is_empty() {
        let n = stopped.removed.len();
        let shown: Vec<String> = stopped
            .removed
            .iter()
            .take(SHOWN)
            .map(|p| p.display().to_string())
            .collect();
        let more = if n > SHOWN {
            format!(" and {} more", n - SHOWN)
        } else {
            String::new()
        };
        text.push_str(&format!(
            "; removed temporary files: {}{more}",
            shown.join(", ")
        ));
    }
    if stopped.committed.is_empty() {
        text.push_str(&format!(
            "; no _SUCCESS was written in {}",
            output.display()
        ));
    } else {
        text.push_str(&format!(
            "; the run in {} had already completed (_SUCCESS)",
            output.display()
        ));
    }
    text
}
