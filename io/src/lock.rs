//! Exclusive locks on the directories a run writes: one run at a time per directory.
//!
//! Two runs started into one output directory would otherwise both clear it, both write
//! parts of the same names and both write `_SUCCESS`, leaving a directory that looks
//! complete over tables of two runs. So a run takes a lock on every directory it writes
//! (the output, `--write-dedup`, its spill directory) before it changes anything there, and
//! holds it until it ends; a second run is refused at once, naming the holder.
//!
//! The lock is an advisory `flock` (std's [`File::try_lock`]) on a hidden file inside the
//! directory, [`LOCK`] by default. The kernel releases it when the holding process ends,
//! however it ends (a crash, `kill -9`), so a lock is never stale: a lock file left behind
//! by a killed run is simply taken by the next one. The file holds who took it (process id,
//! host, start time) for the refusal message; it is removed when the lock is released
//! normally. Because a released lock file may be removed while another run has it open,
//! [`DirLock::acquire`] checks, once it holds the lock, that the file it locked is still
//! the one at the path (else it starts again), so two runs never both hold one directory.
//!
//! Network file systems: Linux implements `flock` on NFS with byte-range locks on the
//! server, so the lock holds across machines there; other shared file systems may not
//! support it, in which case taking the lock fails with the system's error.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::IoError;

/// The lock file of a run directory (hidden, so readers of the directory skip it).
pub const LOCK: &str = ".neardup.lock";

/// How long a refused run waits for the holder's details to appear in a lock file that was
/// just created (the holder writes them right after taking the lock, within microseconds;
/// 200 ms covers a loaded machine).
const HOLDER_WAIT: Duration = Duration::from_millis(200);

/// An exclusive lock on a directory, held until dropped (or until the process ends).
#[derive(Debug)]
pub struct DirLock {
    file: File,
    path: PathBuf,
}

/// Who holds a lock, as its lock file says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holder {
    pub pid: Option<u32>,
    pub host: Option<String>,
    /// UTC, `YYYY-MM-DD HH:MM:SS UTC`.
    pub started: Option<String>,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.pid, &self.host, &self.started) {
            (None, None, None) => f.write_str("holder unknown"),
            (pid, host, started) => {
                let pid = pid.map_or("?".to_string(), |p| p.to_string());
                write!(f, "pid {pid}")?;
                if let Some(host) = host {
                    write!(f, " on {host}")?;
                }
                if let Some(started) = started {
                    write!(f, ", started {started}")?;
                }
                Ok(())
            }
        }
    }
}

impl Holder {
    /// This process, now.
    pub(crate) fn this_process() -> Self {
        Holder {
            pid: Some(std::process::id()),
            host: Some(host_name()),
            started: Some(utc_now()),
        }
    }

    pub(crate) fn to_text(&self) -> String {
        let mut text = String::new();
        if let Some(pid) = self.pid {
            text.push_str(&format!("pid {pid}\n"));
        }
        if let Some(host) = &self.host {
            text.push_str(&format!("host {host}\n"));
        }
        if let Some(started) = &self.started {
            text.push_str(&format!("started {started}\n"));
        }
        text
    }

    pub(crate) fn parse(text: &str) -> Self {
        let mut holder = Holder::default();
        for line in text.lines() {
            match line.split_once(' ') {
                Some(("pid", v)) => holder.pid = v.trim().parse().ok(),
                Some(("host", v)) => holder.host = Some(v.trim().to_string()),
                Some(("started", v)) => holder.started = Some(v.trim().to_string()),
                _ => {}
            }
        }
        holder
    }
}

impl DirLock {
    /// Takes the lock `name` ([`LOCK`] for a run directory) in `dir`, which must exist, or
    /// fails at once with [`IoError::Locked`] naming the holder. `what` names the directory
    /// in messages ("output directory", "--write-dedup directory").
    pub fn acquire(dir: &Path, name: &str, what: &'static str) -> Result<DirLock, IoError> {
        let path = dir.join(name);
        let err = |action: &'static str| {
            let path = path.clone();
            move |cause| IoError::Prepare {
                action,
                path,
                cause,
            }
        };
        loop {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(err("cannot create the lock file"))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    return Err(IoError::Locked {
                        path: dir.to_path_buf(),
                        what,
                        holder: read_holder(&mut file).to_string(),
                    })
                }
                Err(TryLockError::Error(cause)) => return Err(err("cannot lock")(cause)),
            }
            if !same_file(&file, &path) {
                // Its holder removed it on release after we opened it: take the new one.
                continue;
            }
            let text = Holder::this_process().to_text();
            file.set_len(0)
                .and_then(|()| file.write_all(text.as_bytes()))
                .and_then(|()| file.flush())
                .map_err(err("cannot write the lock file"))?;
            return Ok(DirLock { file, path });
        }
    }

    /// Whether `dir`'s lock `name` is held now (by any process, this one included), and by
    /// whom. Takes nothing and creates nothing.
    pub fn holder(dir: &Path, name: &str) -> Option<Holder> {
        let mut file = File::open(dir.join(name)).ok()?;
        match file.try_lock() {
            Ok(()) => None,
            Err(TryLockError::WouldBlock) => Some(read_holder(&mut file)),
            Err(TryLockError::Error(_)) => None,
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // Removed while still held, so nobody takes the old file after us (see the module
        // docs); the lock goes with the handle.
        if same_file(&self.file, &self.path) {
            let _ = std::fs::remove_file(&self.path);
        }
        let _ = self.file.unlock();
    }
}

/// The holder's details from a lock file another process holds, waiting briefly for a
/// holder that has just taken it to write them.
fn read_holder(file: &mut File) -> Holder {
    let deadline = std::time::Instant::now() + HOLDER_WAIT;
    loop {
        let mut text = String::new();
        let read = std::io::Seek::rewind(file).and_then(|()| file.read_to_string(&mut text));
        let holder = Holder::parse(&text);
        if read.is_err() || holder.pid.is_some() || std::time::Instant::now() >= deadline {
            return holder;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether the open `file` is the file now at `path`.
#[cfg(unix)]
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(_file: &File, path: &Path) -> bool {
    path.exists()
}

/// The machine's name, for messages (Linux's, else `$HOSTNAME`, else "unknown host").
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown host".to_string())
}

/// The time now in UTC as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc(secs)
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS UTC` (the proleptic Gregorian calendar,
/// by Howard Hinnant's days-to-civil algorithm).
fn utc(secs: u64) -> String {
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates_match_known_instants() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        // `date -u -d @951782400`: the leap day of a year divisible by 400.
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
        // `date -u -d @1795463999`
        assert_eq!(utc(1_795_463_999), "2026-11-23 19:59:59 UTC");
        assert_eq!(utc(4_107_542_400), "2100-03-01 00:00:00 UTC");
    }

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let lock = DirLock::acquire(dir.path(), LOCK, "output directory").unwrap();
        let text = std::fs::read_to_string(lock.path()).unwrap();
        assert!(
            text.starts_with(&format!("pid {}\nhost ", std::process::id())),
            "{text}"
        );
        // flock conflicts between two open files even in one process, as between two runs.
        let err = DirLock::acquire(dir.path(), LOCK, "output directory").unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, IoError::Locked { .. }), "{err:?}");
        assert!(
            message.starts_with(&format!(
                "output directory {} is in use by another neardup run (pid {} on ",
                dir.path().display(),
                std::process::id()
            )),
            "{message}"
        );
        assert!(message.contains(", started 20"), "{message}");
        let holder = DirLock::holder(dir.path(), LOCK).unwrap();
        assert_eq!(holder.pid, Some(std::process::id()));
        drop(lock);
        assert!(!dir.path().join(LOCK).exists(), "removed on release");
        assert_eq!(DirLock::holder(dir.path(), LOCK), None);
        let again = DirLock::acquire(dir.path(), LOCK, "output directory").unwrap();
        drop(again);
    }

    #[test]
    fn a_lock_file_left_by_a_dead_run_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LOCK), "pid 99999999\nhost gone\n").unwrap();
        assert_eq!(DirLock::holder(dir.path(), LOCK), None);
        let lock = DirLock::acquire(dir.path(), LOCK, "output directory").unwrap();
        let text = std::fs::read_to_string(lock.path()).unwrap();
        assert!(text.starts_with(&format!("pid {}\n", std::process::id())));
    }

    #[test]
    fn many_threads_racing_for_one_lock_never_hold_it_together() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (path, inside, most) = (dir.path().to_path_buf(), inside.clone(), most.clone());
                std::thread::spawn(move || {
                    let mut held = 0;
                    for _ in 0..200 {
                        if let Ok(lock) = DirLock::acquire(&path, LOCK, "output directory") {
                            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            std::thread::yield_now();
                            inside.fetch_sub(1, Ordering::SeqCst);
                            drop(lock);
                            held += 1;
                        }
                    }
                    held
                })
            })
            .collect();
        let held: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert!(held > 0);
        assert_eq!(most.load(Ordering::SeqCst), 1, "two holders at once");
    }
}
