//! Why a job did not complete: typed, with the underlying error kept as its source.
//!
//! Each message is complete on its own; where an error wraps another as its `source()`, the
//! wrapped one's message is not repeated, so a chain printed as `outer: inner` (anyhow's
//! `{:#}`) reads once.

use crate::config::ConfigError;
use crate::report::JobSummary;

/// Why a job did not complete.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The configuration cannot run (refused before anything is written).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An input could not be planned (a Parquet footer, a file list), or the output could
    /// not be prepared or committed. The message names the file and says what was wrong.
    #[error(transparent)]
    Io(#[from] neardup_io::IoError),
    #[error("cannot encode summary")]
    Summary(#[source] serde_json::Error),
    #[error("cluster: {0}")]
    Cluster(String),
    /// The run ran and failed: the summary lists every worker's errors.
    #[error("the run failed: {}", .0.errors.join("; "))]
    Failed(Box<JobSummary>),
}
