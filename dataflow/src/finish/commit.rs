//! Steps 3 to 5 of the end of a run (see [`crate::finish`]), on worker 0 once the reports
//! are merged: the summary, the step before `_SUCCESS`, and the commit.

use super::{summary::summarize, Finish, Finished};
use crate::output;
use crate::report::{JobSummary, WorkerReport};
use crate::stages::fingerprint::resume::kill_at;
use crate::worker::Shared;

/// Worker 0: the summary, the step before `_SUCCESS` (if every worker succeeded),
/// `summary.json`, and `_SUCCESS` if the run still succeeds.
pub(crate) fn finalize(
    report: WorkerReport,
    shared: &Shared,
    finish: &Finish,
) -> (JobSummary, Finished) {
    let config = &shared.config;
    let mut summary = summarize(report, shared);
    // Every worker has removed its own spill directory by now; the job's goes too.
    let _ = std::fs::remove_dir(config.spill_root());
    let mut finished = Finished::default();
    if summary.succeeded() {
        match finish.before_success(&config.output) {
            Ok(done) => finished = done,
            Err(e) => summary.errors.push(e),
        }
    }
    if let Err(e) = output::commit(&config.output, &mut summary) {
        summary.errors.push(e.to_string());
    }
    kill_at("success");
    if config.output.join(neardup_io::run_dir::SUCCESS).is_file() {
        // Complete: nothing left to resume.
        if let Err(e) = neardup_io::run_dir::remove_resume(&config.output) {
            summary.warnings.push(e.to_string());
        }
    }
    (summary, finished)
}
