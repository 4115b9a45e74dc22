//! The output directory, from the dataflow's side: the layout and its rules belong to
//! [`neardup_io::run_dir`] (table names, part names, `summary.json`, `_SUCCESS`); this module
//! prepares it for a job and commits the job's [`JobSummary`] into it.
//!
//! `_SUCCESS` is written by worker 0 after every worker has reported its parts committed and
//! no worker reported an error. A directory without `_SUCCESS` is an incomplete or failed
//! run, whatever else it holds.

pub mod dedup;

use std::path::Path;

pub use neardup_io::run_dir::{Protected, RunDir as OutputDirs, Table, SUCCESS, SUMMARY};

use crate::report::JobSummary;
use crate::JobError;

/// Makes `dir` ready for a run (see [`neardup_io::run_dir::prepare`]).
pub fn prepare(
    dir: &Path,
    overwrite: bool,
    tables: &[Table],
    protect: &[Protected],
) -> Result<(), JobError> {
    Ok(neardup_io::run_dir::prepare(
        dir, overwrite, tables, protect,
    )?)
}

/// Writes summary.json, then `_SUCCESS` if the run succeeded.
pub fn commit(dir: &Path, summary: &JobSummary) -> Result<(), JobError> {
    let json = serde_json::to_vec_pretty(summary).map_err(JobError::Summary)?;
    Ok(neardup_io::run_dir::commit(
        dir,
        &json,
        summary.succeeded(),
    )?)
}
