//! SIGINT and SIGTERM: the run stops cleanly and says so.
//!
//! A thread waits for the signals (signal-hook runs nothing in the handler itself but a
//! wake-up). What it does depends on the job:
//!
//! * **One process**: the clean stop, [`neardup_dataflow::output::stop::interrupt`]: no
//!   `_SUCCESS` after the signal, the readers stop, and the job drains what it has read and
//!   ends as a failed run (its part writers commit or remove their temporary files,
//!   `summary.json` says it was interrupted). The main thread then reports and exits
//!   ([`finish`]). If the job has not ended within [`GRACE`], or a second signal comes, the
//!   immediate stop below is used instead.
//! * **Several processes** (or after the grace): the immediate stop: the others are told who
//!   was interrupted (they stop at once, naming this process), the temporary parts and spill
//!   files of this process are removed ([`neardup_dataflow::output::stop::stop`]), and the
//!   process exits. A job of several processes cannot drain once one of them stops.
//!
//! Either way the exit code is 128 + the signal number, the shell's convention: 130 for
//! SIGINT, 143 for SIGTERM, and the message names what was removed. Committed runs and the
//! user's files are never touched; the kernel releases the directory locks as the process
//! ends.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use neardup_dataflow::output::stop::{interrupt, stop, Stopped};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// How many removed paths the message names.
const SHOWN: usize = 3;

/// How long a job of one process may take to drain after a signal before it is stopped at
/// once. Draining is the search over what was read: well under a second for the test
/// corpora, seconds for millions of documents; 10 s stays well inside the grace schedulers
/// give before SIGKILL (30 s for Kubernetes' `terminationGracePeriodSeconds` and Slurm's
/// `KillWait`).
pub const GRACE: Duration = Duration::from_secs(10);

/// The signal received, 0 before any.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

fn name(signal: i32) -> &'static str {
    if signal == SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    }
}

/// Starts the thread that handles SIGINT and SIGTERM for a run into `output`. `process`
/// names this process to the others of a multi-process job (`None` for a single process).
pub fn install(output: PathBuf, process: Option<(usize, String)>) -> Result<()> {
    let mut signals =
        Signals::new([SIGINT, SIGTERM]).context("cannot install the SIGINT/SIGTERM handler")?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut signals = signals.forever();
            let Some(signal) = signals.next() else {
                return;
            };
            SIGNAL.store(signal, Ordering::SeqCst);
            let reason = format!("interrupted by {}", name(signal));
            if let Some((i, address)) = &process {
                // Its own files first, then the others are told (and sweep theirs).
                let stopped = stop(&reason);
                neardup_dataflow::control::interrupt(&format!(
                    "process {i} ({address}) was {reason}"
                ));
                eprintln!("error: {}", message(&reason, &stopped, &output));
                std::process::exit(128 + signal);
            }
            interrupt(&reason);
            // The main thread reports once the job has drained ([`finish`]); a second
            // signal, or the grace running out, stops it at once.
            let (late_output, late_reason) = (output.clone(), reason.clone());
            std::thread::spawn(move || {
                std::thread::sleep(GRACE);
                immediately(
                    signal,
                    &format!(
                        "{late_reason} (it did not stop within {} s)",
                        GRACE.as_secs()
                    ),
                    &late_output,
                );
            });
            if signals.next().is_some() {
                immediately(signal, &format!("{reason} (twice)"), &output);
            }
        })
        .context("cannot start the signal thread")?;
    Ok(())
}

/// The immediate stop: removes the temporary files, says so, exits.
fn immediately(signal: i32, reason: &str, output: &Path) -> ! {
    let stopped = stop(reason);
    eprintln!("error: {}", message(reason, &stopped, output));
    std::process::exit(128 + signal);
}

/// Called by the main thread when the job has returned: if a signal came, reports the
/// interrupted run and exits 130 or 143 (whatever the job's own result).
pub fn finish(output: &Path) {
    let signal = SIGNAL.load(Ordering::SeqCst);
    if signal != 0 {
        let reason = format!("interrupted by {}", name(signal));
        immediately(signal, &reason, output);
    }
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
    // A run whose `_SUCCESS` is there committed before the signal: nothing commits after it.
    if stopped.committed.is_empty() && !output.join(neardup_io::run_dir::SUCCESS).exists() {
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
