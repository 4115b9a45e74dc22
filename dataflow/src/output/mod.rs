//! The output directory, from the dataflow's side: the layout and its rules belong to
//! [`neardup_io::run_dir`] (table names, part names, `summary.json`, `_SUCCESS`); this module
//! prepares it for a job and commits the job's [`JobSummary`] into it.
//!
//! `_SUCCESS` is written by worker 0 after every worker has reported its parts committed and
//! no worker reported an error. A directory without `_SUCCESS` is an incomplete or failed
//! run, whatever else it holds.

pub mod dedup;
pub mod stop;

use std::path::Path;

pub use neardup_io::run_dir::{
    Prepared, Protected, RunDir as OutputDirs, Table, Target, SUCCESS, SUMMARY,
};

use crate::report::JobSummary;
use crate::JobError;

/// Checks, locks and prepares every directory a job writes, all checked before any is
/// cleared (see [`neardup_io::run_dir::prepare_all`]); the locks are held until the result
/// is dropped.
pub fn prepare(targets: &[Target], overwrite: bool) -> Result<Prepared, JobError> {
    Ok(neardup_io::run_dir::prepare_all(targets, overwrite)?)
}

/// Writes summary.json, then `_SUCCESS` if the run succeeded and this process was not
/// stopped (an interrupted run records why in `errors` instead; see [`stop`]).
pub fn commit(dir: &Path, summary: &mut JobSummary) -> Result<(), JobError> {
    stop::commit_unless_stopped(dir, |stopped| {
        if let Some(reason) = stopped {
            summary.errors.push(format!("the run was {reason}"));
        }
        let json = serde_json::to_vec_pretty(&*summary).map_err(JobError::Summary)?;
        let succeeded = summary.succeeded();
        neardup_io::run_dir::commit(dir, &json, succeeded)?;
        Ok(succeeded)
    })
    .map(|_| ())
}
