//! The control plane's settings: how long to wait for the others, how long a silent peer is
//! tolerated, the job id, the job's secret, and the program's hook for a lost job.

use std::time::Duration;

use super::auth::Secret;
use super::stop::FatalHook;

/// How long process 0 waits for everyone by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a silent peer is tolerated by default.
pub const DEFAULT_PEER_TIMEOUT: Duration = Duration::from_secs(60);

/// Control-plane settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlConfig {
    pub connect_timeout: Duration,
    pub peer_timeout: Duration,
    /// Processes with different job ids never join each other.
    pub job_id: String,
    /// What to do when the job must stop at once (a lost or failed peer).
    pub on_fatal: Option<FatalHook>,
    /// The job's shared secret: with one, only processes that have it can join or speak
    /// (see the module docs, "Authentication").
    pub secret: Option<Secret>,
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            peer_timeout: DEFAULT_PEER_TIMEOUT,
            job_id: String::new(),
            on_fatal: None,
            secret: None,
        }
    }
}
