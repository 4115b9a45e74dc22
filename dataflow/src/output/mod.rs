//! The output directory, from the dataflow's side: the layout and its rules belong to
//! [`neardup_io::run_dir`] (table names, part names, `summary.json`, `_SUCCESS`); this module
//! prepares it for a job and commits the job's [`JobSummary`] into it.
//!
//! `_SUCCESS` is written by worker 0 after every worker has reported its parts committed and
//! no worker reported an error. A directory without `_SUCCESS` is an incomplete or failed
//! run, whatever else it holds.
//!
//! Every table carries its scheme and parameters in its Parquet metadata
//! ([`neardup_io::parquet_out`], "Table metadata"); [`fingerprints_meta`] and [`search_meta`]
//! say what they are for a job.

pub mod in_store;
mod part;
pub mod stop;

pub use part::Part;

use std::path::Path;

use neardup_io::parquet_out::{
    TableMeta, TableTag, PARAM_FINGERPRINT, PARAM_SEARCH, UNKNOWN_SCHEME,
};
use serde_json::{json, Value};

pub use neardup_io::run_dir::{
    Prepared, Protected, RunDir as OutputDirs, Table, Target, SUCCESS, SUMMARY,
};

use crate::config::{JobConfig, JobInput};
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

/// The metadata of the `fingerprints/` table a job writes: its scheme and
/// [`neardup_core::Scheme::params`].
pub fn fingerprints_meta(config: &JobConfig) -> TableMeta {
    TableMeta {
        scheme: config.scheme.name.as_str().to_string(),
        params: json!({ PARAM_FINGERPRINT: config.scheme.params() }),
    }
}

/// The metadata of the tables a job derives from fingerprints (`pairs/`, `clusters/`,
/// `removed.parquet`): the fingerprints' scheme and parameters, and how they were searched.
///
/// A search over existing fingerprint tables (`neardup search`) records the scheme and
/// parameters of its first input with neardup's metadata (the search command has checked
/// that they all agree), or [`UNKNOWN_SCHEME`] and `null` when none has any. Finding it reads
/// the footers up to that input, as the plan did.
pub fn search_meta(config: &JobConfig) -> TableMeta {
    let (scheme, fingerprint) = match &config.input {
        JobInput::Documents { .. } => (
            config.scheme.name.as_str().to_string(),
            config.scheme.params(),
        ),
        JobInput::Fingerprints { files } => files
            .iter()
            .find_map(|path| TableTag::of_file(path).ok().flatten())
            .map(|tag| {
                let params = tag.meta.params[PARAM_FINGERPRINT].clone();
                (tag.meta.scheme, params)
            })
            .unwrap_or((UNKNOWN_SCHEME.to_string(), Value::Null)),
    };
    let search = json!({
        "k": config.design.k(),
        "tables": config.design.name(),
        "exact": config.exact,
        "lsh": config.lsh,
        "verify": config.verify,
        "cluster": config.cluster,
        "keep": config.keep.describe(),
    });
    TableMeta {
        scheme,
        params: json!({ PARAM_FINGERPRINT: fingerprint, PARAM_SEARCH: search }),
    }
}
