//! Output directories in an object store, from the job's side: `--output s3://bucket/run/`
//! and `--write-dedup az://container/corpus/`.
//!
//! The protocol belongs to [`neardup_io::run_dir::in_store`]: the job writes a local staging
//! directory as it writes any output directory, and each file committed there is uploaded
//! at once, whole, to the same name under the URL. Here the job:
//! 1. [`stage`]s: each output URL of the configuration is replaced by a fresh staging
//!    directory of this process (every process has its own: no shared file system), the
//!    URL kept in [`JobConfig::staged`];
//! 2. on process 0, checks, locks and clears the store directories with the local ones
//!    ([`prepare`]); on every other process, prepares its own staging directories;
//! 3. publishes each staging directory while the job runs ([`Publishing`]): parts as each
//!    worker commits them, `summary.json` and `_SUCCESS` as process 0 commits them, after
//!    every process reported its parts committed;
//! 4. at the end, releases the store locks; the staging directories go when the
//!    [`Staging`] that [`stage`] returned is dropped, however the job ended (a refusal
//!    before the work included).

use std::path::{Path, PathBuf};

use neardup_io::run_dir::in_store::{
    prepare_in_store, publish, staging_dir, StoreLock, StoreTarget,
};
use neardup_io::store::publish::Published;

use crate::config::{ConfigError, JobConfig, Resume, Staged};
use crate::output::Protected;
use crate::JobError;

/// The staging directories of a job, removed when this is dropped.
#[derive(Debug, Default)]
pub struct Staging(Vec<PathBuf>);

impl Drop for Staging {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Replaces each output URL of `config` by a fresh staging directory (step 1), removed when
/// the returned [`Staging`] is dropped. A store output cannot be resumed (its resume parts
/// would be on the failed run's local disk).
pub fn stage(config: &mut JobConfig) -> Result<Staging, JobError> {
    let remote = neardup_io::store::is_remote;
    let mut staging = Staging::default();
    if remote(&config.output) {
        if config.resume != Resume::Off {
            return Err(ConfigError::ResumeInStore {
                url: config.output.display().to_string(),
            }
            .into());
        }
        let staged = staged(&config.output, "output directory")?;
        staging.0.push(staged.staging.clone());
        config.output = staged.staging.clone();
        config.staged.push(staged);
    }
    if let Some(dir) = config.write_dedup.clone().filter(|d| remote(d)) {
        let staged = staged(&dir, "--write-dedup directory")?;
        staging.0.push(staged.staging.clone());
        config.write_dedup = Some(staged.staging.clone());
        config.staged.push(staged);
    }
    Ok(staging)
}

fn staged(url: &Path, what: &'static str) -> Result<Staged, JobError> {
    Ok(Staged {
        url: url.display().to_string(),
        staging: staging_dir()?,
        what,
    })
}

/// Step 2 on process 0: checks, locks and clears the store directories (before the local
/// staging directories are prepared). `protect` gives what `--overwrite` of a directory must
/// never delete.
pub fn prepare(
    config: &JobConfig,
    protect: impl Fn(&Staged) -> Vec<Protected>,
) -> Result<Vec<StoreLock>, JobError> {
    let protected: Vec<Vec<Protected>> = config.staged.iter().map(&protect).collect();
    let targets: Vec<StoreTarget> = config
        .staged
        .iter()
        .zip(&protected)
        .map(|(staged, protect)| StoreTarget {
            url: &staged.url,
            protect,
            what: staged.what,
        })
        .collect();
    Ok(prepare_in_store(&targets, config.overwrite)?)
}

/// Steps 3 and 4: while held, what is committed in the staging directories goes to the
/// store; dropped, it stops that and releases the store locks (process 0's).
#[derive(Debug, Default)]
pub struct Publishing {
    published: Vec<Published>,
    locks: Vec<StoreLock>,
}

impl Publishing {
    /// Publishes `config`'s staging directories; `locks` are process 0's store locks, in the
    /// order of [`JobConfig::staged`] (none on the other processes).
    pub fn start(config: &JobConfig, locks: Vec<StoreLock>) -> Publishing {
        let published = config
            .staged
            .iter()
            .enumerate()
            .map(|(i, s)| publish(&s.staging, &s.url, locks.get(i)))
            .collect();
        Publishing { published, locks }
    }
}

impl Drop for Publishing {
    fn drop(&mut self) {
        // Uploads stop before the locks go.
        self.published.clear();
        self.locks.clear();
    }
}
