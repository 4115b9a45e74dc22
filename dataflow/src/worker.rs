//! What every worker shares: the job (per process, behind an `Arc`) and its own context
//! (per worker thread, behind an `Rc`).

use std::cell::RefCell;
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

    /// The part number of this worker's output files.
    pub fn part(&self) -> usize {
        self.index
    }
}
