//! Step 3 of the end of a run (see [`crate::finish`]): worker 0 turns the merged report into
//! the run's [`JobSummary`], with its parameters, and checks what only the whole run can
//! show: a keep column no document has, a cluster too large to be plausible.

use crate::config::JobConfig;
use crate::report::{JobSummary, Parameters, WorkerReport};
use crate::worker::Shared;

/// The summary of the merged `report`: the total time, the parameters, the checks.
pub(super) fn summarize(mut report: WorkerReport, shared: &Shared) -> JobSummary {
    let config = &shared.config;
    report.stage_done("total", shared.start.elapsed().as_secs_f64());
    let parameters = Parameters {
        scheme: config.scheme.describe(),
        k: config.design.k(),
        tables: config.design.to_string(),
        keep: config.keep.describe(),
        exact: config.exact,
        skip_invalid: config.skip_invalid,
        inputs: shared
            .plan
            .files
            .iter()
            .map(|f| f.path.display().to_string())
            .collect(),
        workers_per_process: config.parallelism.workers,
        processes: config.parallelism.processes(),
        command_line: config.command_line.clone(),
    };
    let mut summary = JobSummary::from_report(report, parameters);
    if let Some(memory) = summary.memory.as_mut() {
        memory.limit_bytes = config.memory_limit;
    }
    check_keep_column(&mut summary, config);
    if let Some(largest) = summary
        .largest_clusters
        .first()
        .filter(|c| c.size > config.cluster_warning)
    {
        summary.warnings.push(format!(
            "cluster {} holds {} documents (more than {}): chained near-duplicates or shared boilerplate? Try --cluster star, or verification",
            largest.cluster_id, largest.size, config.cluster_warning
        ));
    }
    summary
}

/// A keep column that no document has is a mistake (a typo, a column of another corpus):
/// fail rather than silently keep by input order. Some documents without it is a warning.
fn check_keep_column(summary: &mut JobSummary, config: &JobConfig) {
    let Some(column) = config.keep.column() else {
        return;
    };
    let (missing, documents) = (summary.counts.keep_value_missing, summary.counts.documents);
    if documents > 0 && missing == documents {
        summary.errors.push(format!(
            "--keep {}: no document has a numeric field {column:?}",
            config.keep.describe()
        ));
    } else if missing > 0 {
        summary.warnings.push(format!(
            "--keep {}: {missing} of {documents} documents have no field {column:?} and rank last",
            config.keep.describe()
        ));
    }
}
