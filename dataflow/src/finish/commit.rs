//! Steps 3 to 5 of the end of a run (see [`crate::finish`]), on worker 0 once the reports
//! are merged: the summary, the step before `_SUCCESS`, and the commit.

use super::{summary::summarize, Finish, Finished};
use crate::output;
use crate::report::{peak_rss, JobSummary, SortPlan, WorkerReport};
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
        record_step_memory(&mut summary, &finished);
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

/// Adds what the step before `_SUCCESS` sorted to the summary's `memory.sorts`, and this
/// process's peak resident memory since (it runs after the workers reported theirs).
fn record_step_memory(summary: &mut JobSummary, finished: &Finished) {
    let Some(memory) = summary.memory.as_mut() else {
        return;
    };
    let sorts = finished.index.iter().flat_map(|i| &i.sorts);
    let sorts = sorts.chain(finished.against.iter().flat_map(|a| &a.sorts));
    for (stage, stats) in sorts {
        let plan = SortPlan {
            budget_bytes: (stats.budget_bytes < usize::MAX as u64).then_some(stats.budget_bytes),
            records: stats.records,
            runs: stats.runs,
            spilled_bytes: stats.spilled_bytes,
        };
        memory.sorts.entry(stage.clone()).or_default().add(&plan);
    }
    if let (Some(first), Some(now)) = (memory.peak_rss_bytes.first_mut(), peak_rss()) {
        *first = (*first).max(now);
    }
}
