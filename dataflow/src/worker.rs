//! What every worker shares: the job (per process, behind an `Arc`) and its own context
//! (per worker thread, behind an `Rc`).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use crate::config::JobConfig;
use crate::plan::Plan;
use crate::progress::Progress;
use crate::report::WorkerReport;

/// The job, shared by the workers of one process.
pub struct Shared {
    pub config: JobConfig,
    pub plan: Plan,
    pub progress: Arc<Progress>,
    /// Set on the first fatal error in this process: readers stop early.
    pub abort: AtomicBool,
    pub start: Instant,
    /// The site templates the templates stage learned ([`crate::stages::templates`]),
    /// the same on every worker; set before the main dataflow reads, so that every reader
    /// after it extracts pages without them.
    pub templates: std::sync::OnceLock<neardup_io::html::template::SharedTemplates>,
}

impl Shared {
    pub fn aborted(&self) -> bool {
        self.abort.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// One worker's view: the shared job, its index, and its report.
pub struct WorkerCtx {
    pub shared: Arc<Shared>,
    pub index: usize,
    pub peers: usize,
    pub report: RefCell<WorkerReport>,
    /// Where each document is fingerprinted (see [`crate::plan::home`]).
    pub home: crate::plan::home::HomeTable,
    /// Bytes this worker sent to workers of other processes, by stage (see [`Self::meter`]).
    pub network: NetworkMeter,
}

/// What one worker sends to workers of other processes, by stage.
///
/// The simple measurement would be timely's own byte counts per channel; timely 0.32 does not
/// expose them by channel, so each exchange's route function is wrapped: a record whose
/// destination is in another process adds its bincode size (what timely's serialization
/// writes for it, without the per-batch framing) to its stage's counter. With one process
/// nothing crosses and nothing is counted, at no cost.
#[derive(Default)]
pub struct NetworkMeter {
    stages: RefCell<BTreeMap<&'static str, Rc<Cell<u64>>>>,
}

impl NetworkMeter {
    /// The bytes counted so far, by stage.
    pub fn bytes(&self) -> BTreeMap<String, u64> {
        self.stages
            .borrow()
            .iter()
            .map(|(stage, n)| (stage.to_string(), n.get()))
            .collect()
    }
}

impl WorkerCtx {
    /// Records a fatal error: the run will fail, and this process's readers stop.
    pub fn fail(&self, message: String) {
        self.shared
            .abort
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.report.borrow_mut().errors.push(message);
    }

    /// Records that a stage ended on this worker.
    pub fn stage_done(&self, stage: &str) {
        let secs = self.shared.start.elapsed().as_secs_f64();
        self.report.borrow_mut().stage_done(stage, secs);
    }

    /// Wraps an exchange's route function so that what it sends to workers of other
    /// processes is counted under `stage` in `summary.json` (`network`): use it for every
    /// exchange of the main job, as `Exchange::new(ctx.meter("exact", route))`.
    pub fn meter<D: serde::Serialize>(
        &self,
        stage: &'static str,
        mut route: impl FnMut(&D) -> u64 + 'static,
    ) -> impl FnMut(&D) -> u64 + 'static {
        let workers = self.shared.config.parallelism.workers.max(1);
        let (peers, process) = (self.peers as u64, self.index / workers);
        let counter = (peers as usize > workers).then(|| {
            self.network
                .stages
                .borrow_mut()
                .entry(stage)
                .or_default()
                .clone()
        });
        move |d: &D| {
            let to = route(d);
            if let Some(counter) = &counter {
                // timely sends a record to worker `route % peers` (a mask when peers is a
                // power of two: the same thing).
                if (to % peers) as usize / workers != process {
                    counter.set(counter.get() + bincode::serialized_size(d).unwrap_or(0));
                }
            }
            to
        }
    }

    /// An external sort for `stage` on this worker: `share` of the worker's part of
    /// `--memory-limit` in memory ([`crate::config::sort_budget`]), its runs in
    /// `sorts-NNNNN/<stage>` under the job's spill directory.
    pub fn sort<D: neardup_io::spill::SpillRecord>(
        &self,
        stage: &str,
        share: f64,
    ) -> neardup_io::spill::ExternalSort<D> {
        let config = &self.shared.config;
        let dir = crate::stages::near::spill::sort_dir(&config.spill_root(), self.index, stage);
        neardup_io::spill::ExternalSort::new(dir, self.budget(share))
    }

    /// The bytes `share` of this worker's part of the limit comes to (all of them without a
    /// limit; the sorts' budget where a test sets one for every sort).
    pub fn budget(&self, share: f64) -> usize {
        let config = &self.shared.config;
        config.sort_memory.unwrap_or_else(|| {
            crate::config::sort_budget(config.memory_limit, config.parallelism.workers, share)
        })
    }

    /// Records what `stage`'s external sort did, for summary.json's `memory`.
    pub fn sorted(&self, stage: &str, stats: neardup_io::spill::SortStats) {
        let plan = crate::report::SortPlan {
            budget_bytes: (stats.budget_bytes < usize::MAX as u64).then_some(stats.budget_bytes),
            records: stats.records,
            runs: stats.runs,
            spilled_bytes: stats.spilled_bytes,
        };
        let mut report = self.report.borrow_mut();
        report
            .sorts
            .entry(stage.to_string())
            .or_default()
            .add(&plan);
    }

    /// Records that a sort's run could not be written or read: the run fails.
    pub fn sort_failed(&self, stage: &str, e: std::io::Error) {
        self.fail(format!(
            "sorting {stage} on disk: {e} (free disk space, or choose another place with --spill-dir)"
        ));
    }

    /// A view of this worker for a pass of its own (the templates stage, the TF-IDF
    /// pass, `run --substrings`' second pass): the same job, index and homes, with a
    /// report and network counters of its own.
    pub fn pass(&self) -> WorkerCtx {
        WorkerCtx {
            shared: self.shared.clone(),
            index: self.index,
            peers: self.peers,
            report: RefCell::new(WorkerReport::default()),
            home: self.home.clone(),
            network: Default::default(),
        }
    }

    /// Takes what a pass of its own ([`Self::pass`]) reported and adds its errors, stage
    /// times and network bytes to this worker's report; returns the rest of the pass's
    /// report (its parts, sorts, counts), for the caller to take what it owns.
    pub fn absorb_pass(&self, pass: &WorkerCtx) -> WorkerReport {
        let mut done = pass.report.take();
        let mut report = self.report.borrow_mut();
        report.errors.append(&mut done.errors);
        for (stage, secs) in std::mem::take(&mut done.stage_seconds) {
            report.stage_done(&stage, secs);
        }
        report.add_network(pass.network.bytes());
        done
    }

    /// The part number of this worker's output files.
    pub fn part(&self) -> usize {
        self.index
    }
}
