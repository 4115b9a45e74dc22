//! Run directories in an object store: `--output s3://bucket/run/` (and `gs://`, `az://`).
//!
//! A store has no rename and no directories, so a run writes a local **staging directory**
//! ([`staging_dir`]) exactly as it writes any run directory, and every file it commits there
//! is uploaded at that moment, whole, to the same name under the URL
//! ([`crate::store::publish::published`], called by the writers once a file is renamed into
//! place). Uploads happen in the order of the
//! commits, so the protocol of a local run directory carries over unchanged:
//! - each part appears only complete (one PUT, or a multipart upload the store shows only
//!   once completed: [`crate::store::Object::put_file`]);
//! - `summary.json` is written after every part, then `_SUCCESS` last, by process 0 after
//!   every process has reported its parts committed (uploaded);
//! - a failed run leaves a `summary.json` with its errors and no `_SUCCESS`.
//!
//! The simple version would upload the staging directory once the run is over; uploading at
//! each commit overlaps the uploads with the work and keeps the order in which files appear.
//! `_resume/` and `_spill/` stay local (a store output cannot be resumed), and the staging
//! directory is removed when the run ends.
//!
//! **One run at a time**: the lock is the object `.neardup.lock`, created only if absent
//! (a conditional write), holding the holder's pid, host and start time. Its holder writes it
//! again every [`LOCK_RENEW`]; a lock not written for [`LOCK_LEASE`] (by the store's clock
//! against this machine's), or whose holder is a dead process of this machine, is stale and
//! taken over by a write conditional on its version, so two runs never both hold it.
//!
//! **`--overwrite`** deletes only neardup's own objects, by the rules of a local directory
//! ([`super::own_entries`]): a prefix with neither `.neardup` nor `summary.json` is refused, and
//! so is one holding any other object, naming them; nothing is deleted then. `_SUCCESS` goes
//! first, so an interrupted clean-up never looks complete.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use bytes::Bytes;

use super::layout::{Table, MARKER, MARKER_TEXT, REMOVED, RESUME, SPILL, SUCCESS, SUMMARY};
use super::prepare::Protected;
use crate::error::IoError;
use crate::lock::{Holder, LOCK};
use crate::store::publish::Published;
use crate::store::{self, Object};

/// How often the holder of a store lock writes it again. 30 s: a small fraction of
/// [`LOCK_LEASE`], one small PUT each time.
pub const LOCK_RENEW: Duration = Duration::from_secs(30);

/// How long a store lock lasts without being written again: then it is stale, and another
/// run takes it over. Ten renewals, so that a slow store or a paused process does not lose
/// it; clocks of the store and the machines must agree to within a minute or so.
pub const LOCK_LEASE: Duration = Duration::from_secs(300);

/// One output directory in a store, for [`prepare_in_store`]: its URL, what `--overwrite` of it
/// must never delete, and its name in messages.
#[derive(Clone, Copy, Debug)]
pub struct StoreTarget<'a> {
    pub url: &'a str,
    pub protect: &'a [Protected],
    /// "output directory", "--write-dedup directory".
    pub what: &'static str,
}

/// The URL of a store directory with one trailing `/`.
pub fn dir_url(url: &str) -> String {
    format!("{}/", url.trim_end_matches('/'))
}

/// Checks, locks and clears the store directories a run writes (the steps of
/// [`super::prepare_all`]: every one checked before any is changed, checked again under its
/// lock), then writes each one's marker. The locks are held (and renewed) until the
/// returned [`StoreLock`]s are dropped.
pub fn prepare_in_store(
    targets: &[StoreTarget],
    overwrite: bool,
) -> Result<Vec<StoreLock>, IoError> {
    for target in targets {
        writable(target.url)?;
        check(target, overwrite, true)?;
    }
    let mut locks = Vec::new();
    for target in targets {
        locks.push(StoreLock::acquire(target)?);
    }
    for target in targets {
        let doomed = check(target, overwrite, false)?;
        clear(target.url, &doomed)?;
    }
    Ok(locks)
}

/// Refuses a URL that cannot be written (a web server's).
fn writable(url: &str) -> Result<(), IoError> {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Err(IoError::Remote {
            url: url.to_string(),
            offset: None,
            cause: "a web server's URL cannot be written; name an s3://, gs:// or az:// URL, or a local directory".into(),
        });
    }
    Ok(())
}

fn object(dir: &str, name: &str) -> Result<Object, IoError> {
    Object::at(&format!("{}{name}", dir_url(dir)))
}

/// What a store directory holds: the keys below it, relative to it, sorted.
fn listing(url: &str) -> Result<Vec<String>, IoError> {
    let dir = dir_url(url);
    Ok(store::list(&dir)?
        .into_iter()
        .filter_map(|(key, _)| key.strip_prefix(&dir).map(str::to_string))
        .collect())
}

/// Step 1 (and 3): the refusals; returns the keys `--overwrite` deletes. `probe_lock`: refuse
/// a directory whose lock is held by another run (not when this run holds it).
fn check(target: &StoreTarget, overwrite: bool, probe_lock: bool) -> Result<Vec<String>, IoError> {
    let path = PathBuf::from(target.url);
    let keys: Vec<String> = listing(target.url)?
        .into_iter()
        .filter(|k| k != LOCK)
        .collect();
    if probe_lock {
        if let Some(holder) = live_holder(target.url)? {
            return Err(IoError::Locked {
                path,
                what: target.what,
                holder: holder.to_string(),
            });
        }
    }
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    if !overwrite {
        return Err(IoError::NotEmpty { path });
    }
    check_protected(target)?;
    own_keys(target.url, &keys)
}

/// Refuses `--overwrite` of a store directory that is or holds an input.
fn check_protected(target: &StoreTarget) -> Result<(), IoError> {
    let dir = dir_url(target.url);
    for Protected { path, what } in target.protect {
        let Some(p) = path.to_str().filter(|p| store::is_url(p)) else {
            continue;
        };
        if dir_url(p) == dir || p.starts_with(&dir) {
            return Err(IoError::Protected {
                path: PathBuf::from(target.url),
                reason: format!("it holds {what} {p}"),
            });
        }
    }
    Ok(())
}

/// The keys of a store directory that neardup wrote (the rules of [`super::own_entries`]),
/// or an error naming the others.
fn own_keys(url: &str, keys: &[String]) -> Result<Vec<String>, IoError> {
    let has = |name: &str| keys.iter().any(|k| k == name);
    let path = PathBuf::from(url);
    if !has(MARKER) && !has(SUMMARY) {
        return Err(IoError::NotNeardupOutput {
            path,
            more: keys.len().saturating_sub(SHOWN),
            entries: keys.iter().take(SHOWN).cloned().collect(),
        });
    }
    let listed: Vec<String> = match object(url, MARKER)?.read_all()? {
        Some((text, _)) => String::from_utf8_lossy(&text)
            .lines()
            .skip(1)
            .filter(|n| !n.is_empty() && !n.contains('/'))
            .map(str::to_string)
            .collect(),
        None => Vec::new(),
    };
    let tables = [
        Table::Fingerprints,
        Table::Pairs,
        Table::Clusters,
        Table::Documents,
        Table::Mirrors,
        Table::Hosts,
        Table::Substrings,
    ];
    let own = |key: &str| match key.split_once('/') {
        None => {
            [SUMMARY, SUCCESS, REMOVED, MARKER].contains(&key) || listed.iter().any(|l| l == key)
        }
        Some((dir, rest)) if dir == SPILL || dir == RESUME => !rest.is_empty(),
        Some((dir, name)) => {
            tables.iter().any(|t| t.dir_name() == dir)
                && name.starts_with("part-")
                && name.ends_with(".parquet")
                && !name.contains('/')
        }
    };
    let foreign: Vec<&String> = keys.iter().filter(|k| !own(k)).collect();
    if !foreign.is_empty() {
        return Err(IoError::ForeignEntries {
            path,
            more: foreign.len().saturating_sub(SHOWN),
            entries: foreign.into_iter().take(SHOWN).cloned().collect(),
        });
    }
    Ok(keys.iter().filter(|k| *k != MARKER).cloned().collect())
}

/// How many keys a refusal names.
const SHOWN: usize = 5;

/// Step 3: marks the directory (a run of an older version may have left none), removes
/// `_SUCCESS` first, then `doomed`, and writes a fresh marker.
fn clear(url: &str, doomed: &[String]) -> Result<(), IoError> {
    let marker = object(url, MARKER)?;
    if !doomed.is_empty() {
        if marker.read_all()?.is_none() {
            marker.put_bytes(Bytes::from_static(MARKER_TEXT.as_bytes()))?;
        }
        object(url, SUCCESS)?.delete()?;
        for key in doomed.iter().filter(|k| *k != SUCCESS) {
            object(url, key)?.delete()?;
        }
    }
    marker.put_bytes(Bytes::from_static(MARKER_TEXT.as_bytes()))
}

/// The holder of `url`'s lock if it is held and not stale.
fn live_holder(url: &str) -> Result<Option<Holder>, IoError> {
    Ok(object(url, LOCK)?
        .read_all()?
        .map(|(text, stamp)| (Holder::parse(&String::from_utf8_lossy(&text)), stamp))
        .filter(|(holder, stamp)| !stale(holder, stamp.modified_unix))
        .map(|(holder, _)| holder))
}

/// Whether a lock written at `modified_unix` by `holder` is stale: not written again for
/// [`LOCK_LEASE`], or held by a process of this machine that is gone.
fn stale(holder: &Holder, modified_unix: i64) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    if now - modified_unix > LOCK_LEASE.as_secs() as i64 {
        return true;
    }
    let here = holder.host.as_deref() == Some(crate::lock::host_name().as_str());
    match holder.pid {
        Some(pid) if here => !Path::new("/proc").join(pid.to_string()).exists(),
        _ => false,
    }
}

/// A store directory's lock, held and renewed every [`LOCK_RENEW`] by a thread until
/// dropped; deleted then.
pub struct StoreLock {
    object: Object,
    stop: Arc<(Mutex<bool>, Condvar)>,
    lost: Arc<AtomicBool>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for StoreLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoreLock({})", self.object.url())
    }
}

impl StoreLock {
    fn acquire(target: &StoreTarget) -> Result<StoreLock, IoError> {
        let object = object(target.url, LOCK)?;
        let mine = Holder::this_process();
        let text = Bytes::from(mine.to_text());
        let locked = |holder: &Holder| IoError::Locked {
            path: PathBuf::from(target.url),
            what: target.what,
            holder: holder.to_string(),
        };
        let mut e_tag = object.create(text.clone())?;
        if e_tag.is_none() {
            // Held, or stale: a stale lock is taken over only if nobody changed it since.
            let Some((found, stamp)) = object.read_all()? else {
                return Err(locked(&Holder::default()));
            };
            let holder = Holder::parse(&String::from_utf8_lossy(&found));
            if holder == mine {
                // Our own create, answered late and asked again.
                e_tag = stamp.e_tag.clone().or(Some(String::new()));
            } else if stale(&holder, stamp.modified_unix) {
                e_tag = object.replace(text.clone(), stamp.e_tag)?;
            }
            if e_tag.is_none() {
                return Err(locked(&holder));
            }
        }
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let lost = Arc::new(AtomicBool::new(false));
        let renewer = {
            let (object, stop, lost) = (object.clone(), stop.clone(), lost.clone());
            std::thread::Builder::new()
                .name("store-lock".into())
                .spawn(move || renew(&object, text, e_tag.filter(|t| !t.is_empty()), &stop, &lost))
                .map_err(|cause| IoError::Prepare {
                    action: "cannot start the renewal of the lock",
                    path: PathBuf::from(target.url),
                    cause,
                })?
        };
        Ok(StoreLock {
            object,
            stop,
            lost,
            renewer: Some(renewer),
        })
    }

    /// Whether another run took the lock over (this one was not renewed within the lease).
    pub fn lost(&self) -> Arc<AtomicBool> {
        self.lost.clone()
    }

    /// The lock object's URL.
    pub fn url(&self) -> &str {
        self.object.url()
    }
}

/// Writes the lock again every [`LOCK_RENEW`] until told to stop, each time only if it is
/// still the version this run wrote; marks it `lost` otherwise.
fn renew(
    object: &Object,
    text: Bytes,
    mut e_tag: Option<String>,
    stop: &(Mutex<bool>, Condvar),
    lost: &AtomicBool,
) {
    let (stopped, wake) = stop;
    let mut stopped = stopped.lock().expect("lock renewal");
    loop {
        let (guard, _) = wake
            .wait_timeout_while(stopped, LOCK_RENEW, |s| !*s)
            .expect("lock renewal");
        stopped = guard;
        if *stopped {
            return;
        }
        let renewed = match &e_tag {
            Some(tag) => object.replace(text.clone(), Some(tag.clone())),
            // A store that gives no version tags: written again unconditionally.
            None => object.put_bytes(text.clone()).map(|()| None),
        };
        match renewed {
            Ok(Some(tag)) => e_tag = Some(tag),
            Ok(None) if e_tag.is_some() => {
                lost.store(true, Ordering::SeqCst);
                return;
            }
            // A failed renewal is tried again at the next turn; the lease is ten turns.
            _ => {}
        }
    }
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        *self.stop.0.lock().expect("lock renewal") = true;
        self.stop.1.notify_all();
        if let Some(renewer) = self.renewer.take() {
            let _ = renewer.join();
        }
        if !self.lost.load(Ordering::SeqCst) {
            let _ = self.object.delete();
        }
    }
}

/// A fresh, empty local directory to stage a store output in, under the system's temporary
/// directory (`TMPDIR`): it needs room for the output (and the default spill directory).
/// Named `neardup-staging-HOST-PID-N`; the staging directories that processes of this
/// machine which no longer exist left there (a process killed outright) are removed first.
pub fn staging_dir() -> Result<PathBuf, IoError> {
    staging_dir_in(&std::env::temp_dir())
}

fn staging_dir_in(base: &Path) -> Result<PathBuf, IoError> {
    let prefix = format!(
        "neardup-staging-{}-",
        crate::lock::host_name().replace('/', "_")
    );
    sweep_staging(base, &prefix);
    for n in 0u32.. {
        let dir = base.join(format!("{prefix}{}-{n}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(cause) => {
                return Err(IoError::Prepare {
                    action: "cannot create the staging directory",
                    path: dir,
                    cause,
                })
            }
        }
    }
    unreachable!("u32 names run out")
}

/// Removes the staging directories in `base` named `{prefix}PID-N` (this machine's) whose
/// process is gone and whose lock nobody holds. Best effort: what cannot be removed stays.
fn sweep_staging(base: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        let Some((pid, n)) = rest.split_once('-') else {
            continue;
        };
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        let gone = digits(pid) && digits(n) && !Path::new("/proc").join(pid).exists();
        // A run holds its staging directory's lock while it runs: a process of another pid
        // namespace sharing this directory is not in /proc, but its lock still shows.
        if gone && crate::lock::DirLock::holder(&entry.path(), LOCK).is_none() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// While held, every file committed under `staging` is uploaded to the same name under
/// `url` (see [`crate::store::publish`]), but for `_resume/`, `_spill/` and the lock; `lock`
/// (process 0's) stops the uploads if another run took it over.
pub fn publish(staging: &Path, url: &str, lock: Option<&StoreLock>) -> Published {
    store::publish::register(
        staging,
        &dir_url(url),
        &[RESUME, SPILL, LOCK],
        lock.map(StoreLock::lost),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    }

    #[test]
    fn a_lock_is_stale_when_not_renewed_or_its_local_holder_is_gone() {
        let elsewhere = Holder {
            pid: Some(1),
            host: Some("elsewhere".into()),
            started: None,
        };
        assert!(!stale(&elsewhere, now()));
        assert!(!stale(&elsewhere, now() - LOCK_LEASE.as_secs() as i64 + 30));
        assert!(stale(&elsewhere, now() - LOCK_LEASE.as_secs() as i64 - 30));
        let mut here = Holder::this_process();
        assert!(!stale(&here, now()), "this process is alive");
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        gone.wait().unwrap();
        here.pid = Some(gone.id());
        assert!(stale(&here, now()));
        here.pid = None;
        assert!(!stale(&here, now()), "no pid: only the lease tells");
    }

    #[test]
    fn staging_left_by_a_dead_process_of_this_machine_is_swept() {
        let base = tempfile::tempdir().unwrap();
        let host = crate::lock::host_name().replace('/', "_");
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        gone.wait().unwrap();
        let mine = std::process::id();
        let names = [
            format!("neardup-staging-{host}-{}-0", gone.id()),
            format!("neardup-staging-{host}-{mine}-7"),
            format!("neardup-staging-elsewhere-{}-0", gone.id()),
            format!("neardup-staging-{host}-{}-x", gone.id()),
            "unrelated".to_string(),
            // Its process not in this /proc, but its lock held (another pid namespace).
            format!("neardup-staging-{host}-{}-1", gone.id()),
        ];
        for name in &names {
            std::fs::create_dir_all(base.path().join(name).join("pairs")).unwrap();
        }
        let _held =
            crate::lock::DirLock::acquire(&base.path().join(&names[5]), LOCK, "output directory")
                .unwrap();
        let fresh = staging_dir_in(base.path()).unwrap();
        assert_eq!(
            fresh.file_name().unwrap().to_string_lossy(),
            format!("neardup-staging-{host}-{mine}-0")
        );
        let mut left: Vec<String> = std::fs::read_dir(base.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut expected: Vec<String> = names[1..].to_vec();
        expected.push(format!("neardup-staging-{host}-{mine}-0"));
        expected.sort();
        assert_eq!(
            left, expected,
            "only the dead process's directory of this host goes"
        );
    }

    #[test]
    fn store_directories_are_named_with_one_slash() {
        assert_eq!(dir_url("s3://b/run"), "s3://b/run/");
        assert_eq!(dir_url("s3://b/run//"), "s3://b/run/");
    }
}
