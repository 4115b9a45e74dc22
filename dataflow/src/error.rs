//! Why a job did not complete: typed, with the underlying error kept as its source.

use crate::config::ConfigError;
use crate::report::JobSummary;

/// Why a job did not complete.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The configuration cannot run (refused before anything is written).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An input could not be planned (a Parquet footer, a file list).
    #[error(transparent)]
    Input(#[from] neardup_io::IoError),
    #[error("{0}")]
    Output(String),
    #[error("cluster: {0}")]
    Cluster(String),
    /// The run ran and failed: the summary lists every worker's errors.
    #[error("the run failed: {}", .0.errors.join("; "))]
    Failed(Box<JobSummary>),
}
