//! Stopping a running job from outside: an interrupt (SIGINT, SIGTERM) or a lost peer.
//!
//! The program decides when to stop and how to exit (the library never ends the process).
//! Two ways, both from any thread:
//!
//! * [`interrupt`], the clean one, for a job of one process: no `_SUCCESS` after it, and
//!   the readers stop. The dataflow then drains what it has read and ends as a failed run:
//!   every part writer commits or removes its temporary file, and `summary.json` says
//!   `the run was interrupted by ...` in `errors`. [`run_job`](crate::run_job) returns
//!   [`JobError::Failed`](crate::JobError::Failed); [`stop`] then removes the spill files.
//! * [`stop`], at once, when the job cannot drain (its peers are gone, or draining takes too
//!   long): no `_SUCCESS` after it, and the hidden temporary files are removed now: the
//!   temporary parts of this process's workers in the output tables (with process 0's
//!   summary and the kept files of a deduplicated corpus) and this process's spill
//!   directories. The caller is expected to exit right after; a part a worker begins in
//!   that instant can remain, hidden, until the next `--overwrite` removes it.
//!
//! Either way committed parts stay (a directory without `_SUCCESS` is a failed run whatever
//! it holds), `_SUCCESS` is only ever written through `commit_unless_stopped` (so a run is
//! committed either before the stop, and then left whole, or never), and nothing not named
//! like neardup's temporary files, nor anything outside the directories this job holds the
//! lock of, is touched.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, Weak};

use crate::worker::Shared;

/// The files of a job running in this process that [`stop`] cleans.
#[derive(Debug)]
pub(crate) struct JobFiles {
    pub output: PathBuf,
    pub dedup: Option<PathBuf>,
    /// The job's spill root and the lock file this process holds in it, if any.
    pub spill_root: PathBuf,
    pub spill_lock: Option<PathBuf>,
    /// The global indices of this process's workers (their part numbers).
    pub parts: Range<usize>,
    /// Process 0 writes `summary.json`, `_SUCCESS` and the deduplicated corpus.
    pub lead: bool,
}

struct Entry {
    id: u64,
    files: JobFiles,
    shared: Vec<Weak<Shared>>,
    /// The run's `_SUCCESS` is written: its output is left whole.
    committed: bool,
}

struct State {
    next: u64,
    running: Vec<Entry>,
    /// Why this process was stopped; nothing commits after it.
    stopped: Option<String>,
}

static STATE: Mutex<State> = Mutex::new(State {
    next: 0,
    running: Vec::new(),
    stopped: None,
});

fn state() -> MutexGuard<'static, State> {
    STATE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How long [`stop`] waits for a commit in progress (writing `summary.json` and `_SUCCESS`
/// with their syncs takes milliseconds; a minute covers a stalled network file system).
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// A job's registration; dropping it unregisters the job.
pub(crate) struct Registration(u64);

impl Drop for Registration {
    fn drop(&mut self) {
        state().running.retain(|e| e.id != self.0);
    }
}

/// Registers a job whose directories this process now holds. `None` if the process was
/// stopped already: the job must not start.
pub(crate) fn register(files: JobFiles) -> Option<Registration> {
    let mut state = state();
    if state.stopped.is_some() {
        return None;
    }
    state.next += 1;
    let id = state.next;
    state.running.push(Entry {
        id,
        files,
        shared: Vec::new(),
        committed: false,
    });
    Some(Registration(id))
}

impl Registration {
    /// The running dataflow of the job, whose readers [`stop`] stops.
    pub(crate) fn running(&self, shared: Weak<Shared>) {
        if let Some(entry) = state().running.iter_mut().find(|e| e.id == self.0) {
            entry.shared.push(shared);
        }
    }
}

/// Why this process was stopped, if it was.
pub fn stopped() -> Option<String> {
    state().stopped.clone()
}

/// Runs `commit` (which writes `_SUCCESS` into `output` when it returns `Ok(true)`) unless
/// the process was stopped, in which case it is handed the reason to record instead.
pub(crate) fn commit_unless_stopped<E>(
    output: &std::path::Path,
    commit: impl FnOnce(Option<&str>) -> Result<bool, E>,
) -> Result<bool, E> {
    let mut state = state();
    let reason = state.stopped.clone();
    let committed = commit(reason.as_deref())?;
    if committed && reason.is_none() {
        for entry in state
            .running
            .iter_mut()
            .filter(|e| e.files.output == output)
        {
            entry.committed = true;
        }
    }
    Ok(committed)
}

/// What [`stop`] did.
#[derive(Debug, Default)]
pub struct Stopped {
    /// Temporary files and spill directories removed.
    pub removed: Vec<PathBuf>,
    /// Output directories left without `_SUCCESS` (failed runs).
    pub uncommitted: Vec<PathBuf>,
    /// Output directories whose run had committed before the stop (left whole).
    pub committed: Vec<PathBuf>,
}

/// The clean stop (see the module docs): nothing commits after it and the readers of every
/// job running in this process stop, so the jobs end soon as failed runs.
pub fn interrupt(reason: &str) {
    let mut state = state();
    if state.stopped.is_none() {
        state.stopped = Some(reason.to_string());
    }
    for entry in &state.running {
        for shared in entry.shared.iter().filter_map(Weak::upgrade) {
            shared
                .abort
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// Stops every job running in this process for `reason` at once (see the module docs): no
/// commit after this, temporary files and spill directories removed. The caller is expected
/// to exit next. The readers are not told: a dataflow told to stop would hurry to its last
/// stages and open their parts while they are being removed.
pub fn stop(reason: &str) -> Stopped {
    // A commit in progress finishes first (a few syncs); a thread that stops while it
    // commits itself (a panic inside the commit) must not wait for itself.
    let deadline = std::time::Instant::now() + STOP_WAIT;
    let mut state = loop {
        match STATE.try_lock() {
            Ok(state) => break state,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => break poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            Err(std::sync::TryLockError::WouldBlock) => return Stopped::default(),
        }
    };
    if state.stopped.is_none() {
        state.stopped = Some(reason.to_string());
    }
    let mut done = Stopped::default();
    for entry in &state.running {
        let files = &entry.files;
        let parts = (!files.lead).then(|| files.parts.clone());
        if entry.committed {
            done.committed.push(files.output.clone());
        } else {
            done.removed.extend(neardup_io::run_dir::remove_temporaries(
                &files.output,
                parts.clone(),
            ));
            done.uncommitted.push(files.output.clone());
        }
        if let (Some(dir), true) = (&files.dedup, files.lead) {
            done.removed
                .extend(neardup_io::run_dir::remove_temporaries(dir, None));
        }
        for worker in files.parts.clone() {
            let dir = crate::stages::near::spill::SpillDir::new(&files.spill_root, worker);
            if dir.path().exists() && std::fs::remove_dir_all(dir.path()).is_ok() {
                done.removed.push(dir.path().to_path_buf());
            }
            let sorts = crate::stages::near::spill::sort_dir(&files.spill_root, worker, "");
            if sorts.exists() && std::fs::remove_dir_all(&sorts).is_ok() {
                done.removed.push(sorts);
            }
        }
        if let Some(lock) = &files.spill_lock {
            let _ = std::fs::remove_file(lock);
        }
        if std::fs::remove_dir(&files.spill_root).is_ok() {
            done.removed.push(files.spill_root.clone());
        }
    }
    done
}
