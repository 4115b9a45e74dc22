//! Step 2 of the end of a run (see [`crate::finish`]): the reports exchanged. Every worker
//! sends its report to worker 0, which merges them and finishes the run
//! (`finalize`), then sends the summary back to every worker: a small dataflow of
//! its own, run once the main one is complete.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::ToStream;
use timely::worker::Worker;

use super::{Finish, Finished};
use crate::operators::CollectComplete;
use crate::progress::Stage;
use crate::report::{JobSummary, WorkerReport};
use crate::worker::{Shared, WorkerCtx};

/// One worker, its dataflows complete: its report to worker 0, the summary back. Returns
/// the summary, and on worker 0 what the step before `_SUCCESS` did.
pub(crate) fn finish_worker(
    worker: &mut Worker,
    ctx: &Rc<WorkerCtx>,
    shared: &Arc<Shared>,
    finish: &Arc<Finish>,
) -> Option<(JobSummary, Option<Finished>)> {
    shared.progress.reach(Stage::Committing);
    let mut report = ctx.report.replace(WorkerReport::default());
    report.add_network(ctx.network.bytes());
    let process = ctx.index / shared.config.parallelism.workers.max(1);
    report
        .peak_rss
        .insert(process, crate::report::peak_rss().unwrap_or(0));
    report
        .store_retries
        .insert(process, neardup_io::store::retries());
    let verdict = exchange_reports(worker, report, shared, finish);
    shared.progress.reach(Stage::Done);
    verdict
}

/// Sends every worker's report to worker 0, which merges them, commits the output, and
/// sends the summary back to every worker.
fn exchange_reports(
    worker: &mut Worker,
    report: WorkerReport,
    shared: &Arc<Shared>,
    finish: &Arc<Finish>,
) -> Option<(JobSummary, Option<Finished>)> {
    let peers = worker.peers();
    let verdict: Rc<RefCell<Option<JobSummary>>> = Rc::new(RefCell::new(None));
    // What worker 0's step before `_SUCCESS` did: it stays on worker 0's thread.
    let finished: Rc<RefCell<Option<Finished>>> = Rc::new(RefCell::new(None));
    let sink = verdict.clone();
    let done = finished.clone();
    let shared = shared.clone();
    let finish = finish.clone();
    worker.dataflow::<u64, _, _>(|scope| {
        vec![report]
            .to_stream(scope)
            .container::<Vec<_>>()
            .collect_complete(
                Exchange::new(|_: &WorkerReport| 0),
                "MergeReports",
                None,
                |merged: &mut Option<WorkerReport>, data| {
                    for r in data.drain(..) {
                        match merged.as_mut() {
                            Some(m) => m.merge(r),
                            None => *merged = Some(r),
                        }
                    }
                },
                move |merged, give| {
                    // Only worker 0 has reports to merge; the others give nothing.
                    if let Some(report) = merged {
                        let (summary, steps) = super::finalize(report, &shared, &finish);
                        *done.borrow_mut() = Some(steps);
                        give.give_iterator((0..peers).map(|i| (i, summary.clone())));
                    }
                },
            )
            .sink(
                Exchange::new(|(i, _): &(usize, JobSummary)| *i as u64),
                "Verdict",
                move |(input, _)| {
                    input.for_each(|_, data| {
                        for (_, summary) in data.drain(..) {
                            *sink.borrow_mut() = Some(summary);
                        }
                    });
                },
            );
    });
    while worker.step_or_park(None) {}
    let summary = verdict.take()?;
    Some((summary, finished.take()))
}
