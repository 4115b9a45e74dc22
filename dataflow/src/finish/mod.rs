//! The end of a run: everything between the last record through the dataflow and the
//! [`RunOutcome`] that [`crate::run_job`] returns, in one place and one order.
//!
//! A run's output is complete when `_SUCCESS` is in its directory, and everything a run
//! promises with `_SUCCESS` must be written before it: a run stopped at any moment either
//! has `_SUCCESS` and all of it, or no `_SUCCESS` and is taken up by `--resume` or run
//! again. So the end of a run is these steps, in this order:
//!
//! 1. Every worker runs its dataflows to completion; each stage has committed its own parts
//!    (`fingerprints/`, `pairs/`, `clusters/`, ... and the resume parts).
//! 2. The reports are exchanged ([`exchange`]): every worker sends its report to worker 0
//!    (of process 0), which merges them.
//! 3. Worker 0 makes the summary (`summary.rs`): the run's parameters and total time, the
//!    keep column checked (a `--keep` column no document has fails the run), the largest
//!    cluster warned about; the job's spill directory goes.
//! 4. If no worker failed, the one step a run may take before `_SUCCESS` ([`Finish`]):
//!    `--against` ([`against`]: the batch compared with the index, `against-*.parquet`
//!    written, and with `--update-index` the batch added as a generation), or `--index`
//!    ([`index`]: the run's documents, or a search's, written as the index's generation).
//!    An error here fails the run: it is listed in the summary, and there is no `_SUCCESS`.
//! 5. `summary.json`, then `_SUCCESS` if the run succeeded and was not stopped (`commit.rs`,
//!    with [`crate::output::commit`]); once `_SUCCESS` is there, the resume parts go.
//! 6. Worker 0 sends the summary back to every worker, so that every process learns how the
//!    run ended; with several processes, they say goodbye on the control plane.
//! 7. Process 0, if the run succeeded: `--write-dedup` ([`dedup`]), the kept documents copied
//!    from the inputs, with the deduplicated corpus's own `_SUCCESS`.
//!
//! The test hook `NEARDUP_TEST_KILL_AT` (see [`crate::stages::fingerprint::resume::KILL_AT`])
//! stops a run at `index` (after step 4 wrote a generation) and at `success` (after step 5):
//! tests/index_cli.rs pins this order with it.
//!
//! Steps 4 and 7 read the committed run back from its directory: what they need (every
//! document, pair and cluster) was made by every worker of every process, and lies together
//! only in the committed parts; each says so where it reads.

pub mod against;
mod commit;
pub mod dedup;
pub mod exchange;
pub mod index;
mod summary;

use std::path::{Path, PathBuf};

pub use against::{AgainstStep, AgainstSummary};
pub use dedup::DedupCounts;
pub use index::IndexStep;

pub(crate) use commit::finalize;

use crate::report::JobSummary;

/// Why a step of the end of a run, or its preparation before the job, refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum FinishError {
    /// Reading the run or the index, or writing them.
    #[error(transparent)]
    Io(#[from] neardup_io::IoError),
    /// A run the step cannot take (another scheme than the index's, a changed index...),
    /// said in full.
    #[error("{0}")]
    Refused(String),
}

fn refused(message: &str) -> FinishError {
    FinishError::Refused(message.to_string())
}

/// An error with its causes, `outer: inner: ...`, as the binary prints errors (anyhow's
/// `{:#}`): a failed step's error goes into the summary's `errors` so.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

/// What a run did, as [`crate::run_job`] returns it when it succeeded.
#[derive(Debug)]
pub struct RunOutcome {
    /// The merged summary, as `summary.json` holds it (and `dedup`, written after it).
    pub summary: JobSummary,
    /// `--against`: what the comparison with the index found.
    pub against: Option<AgainstDone>,
    /// `--index`: the generation written.
    pub index: Option<IndexWritten>,
    /// `--write-dedup`: what the deduplicated corpus holds.
    pub dedup: Option<DedupCounts>,
}

/// What `--against` found, and whether the batch was added to the index
/// (`--update-index`, unless the index held it already).
#[derive(Clone, Debug)]
pub struct AgainstDone {
    pub found: AgainstSummary,
    pub added: bool,
    /// What its sorts did, by name (for summary.json's `memory.sorts`).
    pub sorts: Vec<(String, neardup_io::spill::SortStats)>,
}

/// The index generation a run wrote: the index's directory and the documents added.
#[derive(Clone, Debug)]
pub struct IndexWritten {
    pub dir: PathBuf,
    pub documents: u64,
    /// What its sorts did, by name (for summary.json's `memory.sorts`).
    pub sorts: Vec<(String, neardup_io::spill::SortStats)>,
}

/// The step a run takes before its `_SUCCESS` (step 4 above), set up before the job so
/// that what it cannot do is refused before the work; process 0 runs it. `Finish::default()`:
/// none.
#[derive(Default)]
pub struct Finish {
    step: Option<Step>,
}

enum Step {
    Index(Box<IndexStep>),
    Against(Box<AgainstStep>),
}

impl Finish {
    /// `--index`: the run's documents written as the index's generation.
    pub fn index(step: IndexStep) -> Finish {
        Finish {
            step: Some(Step::Index(Box::new(step))),
        }
    }

    /// `--against`: the batch compared with the index (and added to it).
    pub fn against(step: AgainstStep) -> Finish {
        Finish {
            step: Some(Step::Against(Box::new(step))),
        }
    }

    /// Runs the step over the committed run at `run`; an error message fails the run.
    fn before_success(&self, run: &Path) -> Result<Finished, String> {
        Ok(match &self.step {
            None => Finished::default(),
            Some(Step::Index(step)) => Finished {
                index: Some(step.write(run)?),
                against: None,
            },
            Some(Step::Against(step)) => Finished {
                against: Some(step.compare(run)?),
                index: None,
            },
        })
    }
}

/// What the step before `_SUCCESS` did, on worker 0.
#[derive(Debug, Default)]
pub(crate) struct Finished {
    pub against: Option<AgainstDone>,
    pub index: Option<IndexWritten>,
}
