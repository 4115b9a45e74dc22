//! Preparing a run directory, and overwrite safety: every directory a run writes is
//! locked and checked before any is cleared; `--overwrite` removes only what neardup wrote
//! and never a path the run reads or writes ([`Protected`]); temporary files of an
//! interrupted run are swept; a failed run's directory is made ready to be resumed.

use std::path::{Path, PathBuf};

use super::layout::{
    RunDir, Table, JOB_RECORD, MARKER, MARKER_TEXT, REMOVED, RESUME, SPILL, SUCCESS, SUMMARY,
    TABLES, WEB_TABLES,
};
use crate::atomic::write_atomically;
use crate::error::IoError;
use crate::lock::{DirLock, LOCK};

/// A path that `--overwrite` must never delete: something the run reads or writes besides
/// the directory being prepared (an input, the spill directory, the other output directory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protected {
    pub path: PathBuf,
    /// What it is, for messages: "the input", "the spill directory", ...
    pub what: &'static str,
}

impl Protected {
    pub fn new(path: impl Into<PathBuf>, what: &'static str) -> Self {
        Protected {
            path: path.into(),
            what,
        }
    }
}

/// One directory a run writes, for [`prepare_all`]: its path, the tables to create in it,
/// what `--overwrite` of it must never delete, and its name in messages.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    pub dir: &'a Path,
    pub tables: &'a [Table],
    pub protect: &'a [Protected],
    /// "output directory", "--write-dedup directory".
    pub what: &'static str,
}

/// The directories a run has prepared, locked until this is dropped (or the process ends).
#[derive(Debug, Default)]
pub struct Prepared {
    locks: Vec<DirLock>,
}

impl Prepared {
    /// The lock files held.
    pub fn lock_files(&self) -> Vec<&Path> {
        self.locks.iter().map(DirLock::path).collect()
    }

    /// Adds the locks of another preparation (held as long as these).
    pub fn absorb(&mut self, other: Prepared) {
        self.locks.extend(other.locks);
    }
}

/// Makes `dir` ready for a run: [`prepare_all`] with one directory, whose lock is released
/// when the result is dropped.
pub fn prepare(
    dir: &Path,
    overwrite: bool,
    tables: &[Table],
    protect: &[Protected],
) -> Result<Prepared, IoError> {
    prepare_all(
        &[Target {
            dir,
            tables,
            protect,
            what: "output directory",
        }],
        overwrite,
    )
}

/// Makes every directory of `targets` ready for a run, in three steps, so that nothing is
/// cleared unless every directory can be had:
///
/// 1. **Check** each, changing nothing: a directory another run holds is refused, naming
///    the holder ([`IoError::Locked`]); an existing non-empty directory is refused unless
///    `overwrite`; with `overwrite`, only neardup's own entries may go, and only from a
///    neardup output:
///    - refused if `dir` is `/`, the home or the current directory, or is or holds one of
///      `protect` (compared as canonical paths; `-`, stdin, is not a path);
///    - refused if it has neither [`MARKER`] nor [`SUMMARY`] (not a neardup output), naming
///      some of its entries;
///    - refused, deleting nothing, if it holds anything neardup did not write (see
///      [`own_entries`]), naming those entries.
/// 2. **Lock** each (creating it if need be): the lock ([`crate::lock`], file [`LOCK`]) is
///    held until the returned [`Prepared`] is dropped. Then check each again, under the lock
///    (another run may have changed it between the first check and the lock).
/// 3. **Clear** each: `_SUCCESS` is removed first (an interrupted clean-up never looks
///    complete), then neardup's other entries, the marker last (an interrupted clean-up is
///    still a neardup output); then create the tables and write the [`MARKER`].
pub fn prepare_all(targets: &[Target], overwrite: bool) -> Result<Prepared, IoError> {
    if let Some(target) = targets.iter().find(|t| crate::store::is_remote(t.dir)) {
        return Err(IoError::OutputInStore {
            url: target.dir.to_string_lossy().into_owned(),
            what: target.what,
        });
    }
    for target in targets {
        check(target, overwrite, true)?;
    }
    let mut prepared = Prepared::default();
    for target in targets {
        std::fs::create_dir_all(target.dir).map_err(prepare_err("cannot create", target.dir))?;
        prepared
            .locks
            .push(DirLock::acquire(target.dir, LOCK, target.what)?);
    }
    let doomed = targets
        .iter()
        .map(|target| check(target, overwrite, false))
        .collect::<Result<Vec<_>, _>>()?;
    for (target, doomed) in targets.iter().zip(doomed) {
        clear(target.dir, &doomed)?;
        // The marker before anything else: a run killed before it is written leaves nothing
        // but the lock and the marker's temporary file (see `only_cut_markers`).
        write_atomically(&target.dir.join(MARKER), MARKER_TEXT.as_bytes())?;
        for &table in target.tables {
            let sub = target.dir.join(table.dir_name());
            std::fs::create_dir_all(&sub).map_err(prepare_err("cannot create", &sub))?;
        }
    }
    Ok(prepared)
}

/// Step 1 of [`prepare_all`] for one directory: the refusals, nothing changed. Returns the
/// entries `--overwrite` removes. `probe_lock`: refuse a directory whose lock is held (not
/// when this run holds it).
fn check(target: &Target, overwrite: bool, probe_lock: bool) -> Result<Vec<PathBuf>, IoError> {
    let dir = target.dir;
    if !dir.exists() {
        return Ok(Vec::new());
    }
    if !dir.is_dir() {
        return Err(IoError::NotADirectory {
            path: dir.to_path_buf(),
        });
    }
    let locked = || {
        if !probe_lock {
            return None;
        }
        DirLock::holder(dir, LOCK).map(|holder| IoError::Locked {
            path: dir.to_path_buf(),
            what: target.what,
            holder: holder.to_string(),
        })
    };
    if let Some(err) = locked() {
        return Err(err);
    }
    if let Some(cut) = only_cut_markers(dir)? {
        // Empty, but for what a run killed while writing its marker left: those go.
        return Ok(cut);
    }
    let refusal = if !overwrite {
        Err(IoError::NotEmpty {
            path: dir.to_path_buf(),
        })
    } else {
        check_protected(dir, target.protect).and_then(|()| own_entries(dir))
    };
    // Another run may have taken the directory since the lock was looked at: say so rather
    // than describe what it is writing.
    refusal.map_err(|err| locked().unwrap_or(err))
}

/// Whether `dir` holds nothing but the lock and hidden temporary files of the marker (what a
/// run killed while it wrote its marker leaves): then it is taken as empty, and the
/// temporary files are returned (for `clear` to remove); `None` when it holds anything
/// else.
pub fn only_cut_markers(dir: &Path) -> Result<Option<Vec<PathBuf>>, IoError> {
    let mut cut = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(prepare_err("cannot read", dir))? {
        let entry = entry.map_err(prepare_err("cannot read", dir))?;
        let name = entry.file_name();
        if name == LOCK {
            continue;
        }
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if !(is_file && temporary_of(&name.to_string_lossy()) == Some(MARKER)) {
            return Ok(None);
        }
        cut.push(entry.path());
    }
    Ok(Some(cut))
}

/// Step 3 of [`prepare_all`]: removes `doomed` (neardup's own entries of `dir`), `_SUCCESS`
/// first, after marking a directory of a version that wrote no marker.
fn clear(dir: &Path, doomed: &[PathBuf]) -> Result<(), IoError> {
    if doomed.is_empty() {
        return Ok(());
    }
    let marker = dir.join(MARKER);
    if !marker.exists() {
        // A run of a version that wrote no marker: mark it before clearing it.
        write_atomically(&marker, MARKER_TEXT.as_bytes())?;
    }
    let success = dir.join(SUCCESS);
    if success.exists() {
        std::fs::remove_file(&success).map_err(prepare_err("cannot remove _SUCCESS in", dir))?;
    }
    for path in doomed.iter().filter(|p| **p != success) {
        let is_dir = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
        let removed = if is_dir {
            std::fs::remove_dir_all(path)
        } else {
            std::fs::remove_file(path)
        };
        removed.map_err(prepare_err("cannot remove", path))?;
    }
    Ok(())
}

fn prepare_err(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> IoError {
    let path = path.to_path_buf();
    move |source| IoError::Prepare {
        action,
        path,
        cause: source,
    }
}

/// Records in `dir`'s marker the names of the files neardup is about to write there besides
/// its fixed ones (the kept files of a deduplicated corpus), so that `--overwrite` removes
/// them later and nothing else. Call it before writing them.
pub fn record_written(dir: &Path, names: &[String]) -> Result<(), IoError> {
    let mut text = MARKER_TEXT.to_string();
    for name in names {
        text.push_str(name);
        text.push('\n');
    }
    write_atomically(&dir.join(MARKER), text.as_bytes())
}

/// A path made canonical as far as it exists (the rest appended), so that a path not created
/// yet still compares with the directories it will be in.
fn resolve(path: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(path).ok()?;
    if let Ok(canonical) = absolute.canonicalize() {
        return Some(canonical);
    }
    let parent = resolve(absolute.parent()?)?;
    Some(parent.join(absolute.file_name()?))
}

/// Refuses `--overwrite` of `/`, the home or current directory, or a directory that is or
/// holds one of `protect`.
fn check_protected(dir: &Path, protect: &[Protected]) -> Result<(), IoError> {
    let refuse = |reason: String| IoError::Protected {
        path: dir.to_path_buf(),
        reason,
    };
    let canonical = dir
        .canonicalize()
        .map_err(prepare_err("cannot resolve", dir))?;
    if canonical.parent().is_none() {
        return Err(refuse("it is the root directory".into()));
    }
    let mut special = Vec::new();
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        special.push((PathBuf::from(home), "the home directory"));
    }
    if let Ok(cwd) = std::env::current_dir() {
        special.push((cwd, "the current directory"));
    }
    for (path, what) in &special {
        match resolve(path) {
            Some(p) if p == canonical => return Err(refuse(format!("it is {what}"))),
            Some(p) if p.starts_with(&canonical) => return Err(refuse(format!("it holds {what}"))),
            _ => {}
        }
    }
    for Protected { path, what } in protect {
        if path.as_os_str() == "-" {
            continue;
        }
        match resolve(path) {
            Some(p) if p == canonical => {
                return Err(refuse(format!("it is {what} {}", path.display())))
            }
            Some(p) if p.starts_with(&canonical) => {
                return Err(refuse(format!("it holds {what} {}", path.display())))
            }
            _ => {}
        }
    }
    Ok(())
}

/// How many entries a refusal names.
const SHOWN_ENTRIES: usize = 5;

/// The entries of `dir` that neardup wrote and `--overwrite` removes, or an error naming the
/// others. A directory is a neardup output if it holds [`MARKER`] or [`SUMMARY`]; its own
/// entries are then: the table directories holding only part files, [`SUMMARY`],
/// [`SUCCESS`], [`REMOVED`], the default spill directory [`SPILL`], the files the marker
/// lists ([`record_written`]), and the hidden temporary files of any of those
/// (`.NAME.tmp`, `.NAME.PID.tmp`). The marker and the lock file are not listed: the one is
/// rewritten, the other held.
pub fn own_entries(dir: &Path) -> Result<Vec<PathBuf>, IoError> {
    let marker = dir.join(MARKER);
    let listed: Vec<String> = match std::fs::read_to_string(&marker) {
        Ok(text) => text
            .lines()
            .skip(1)
            .filter(|n| !n.is_empty() && !n.contains('/') && *n != "." && *n != "..")
            .map(str::to_string)
            .collect(),
        Err(_) => Vec::new(),
    };
    let recognized = marker.is_file() || dir.join(SUMMARY).is_file();
    let mut entries: Vec<(String, PathBuf, bool)> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(prepare_err("cannot read", dir))? {
        let entry = entry.map_err(prepare_err("cannot read", dir))?;
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        entries.push((
            entry.file_name().to_string_lossy().into_owned(),
            entry.path(),
            is_dir,
        ));
    }
    entries.sort();
    let shown = |name: &str, is_dir: bool| {
        if is_dir {
            format!("{name}/")
        } else {
            name.to_string()
        }
    };
    if !recognized {
        let names: Vec<String> = entries.iter().map(|(n, _, d)| shown(n, *d)).collect();
        return Err(IoError::NotNeardupOutput {
            path: dir.to_path_buf(),
            more: names.len().saturating_sub(SHOWN_ENTRIES),
            entries: names.into_iter().take(SHOWN_ENTRIES).collect(),
        });
    }
    let own_file = |name: &str| {
        [SUMMARY, SUCCESS, REMOVED, MARKER].contains(&name) || listed.iter().any(|l| l == name)
    };
    let mut doomed = Vec::new();
    let mut foreign = Vec::new();
    for (name, path, is_dir) in entries {
        if (name == MARKER || name == LOCK) && !is_dir {
            // Rewritten and held, not removed.
            continue;
        }
        let own = if is_dir {
            if name == SPILL || name == RESUME {
                true
            } else if TABLES
                .iter()
                .chain(&WEB_TABLES)
                .any(|t| t.dir_name() == name)
                || name == Table::Documents.dir_name()
                || name == Table::Substrings.dir_name()
            {
                let strays = foreign_parts(&path)?;
                let own = strays.is_empty();
                foreign.extend(strays.into_iter().map(|s| format!("{name}/{s}")));
                if !own {
                    continue;
                }
                true
            } else {
                false
            }
        } else {
            own_file(&name) || temporary_of(&name).is_some_and(own_file)
        };
        if own {
            doomed.push(path);
        } else {
            foreign.push(shown(&name, is_dir));
        }
    }
    if foreign.is_empty() {
        Ok(doomed)
    } else {
        Err(IoError::ForeignEntries {
            path: dir.to_path_buf(),
            more: foreign.len().saturating_sub(SHOWN_ENTRIES),
            entries: foreign.into_iter().take(SHOWN_ENTRIES).collect(),
        })
    }
}

/// The entries of a table directory that are not part files or their temporary files.
fn foreign_parts(dir: &Path) -> Result<Vec<String>, IoError> {
    let mut strays = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(prepare_err("cannot read", dir))? {
        let entry = entry.map_err(prepare_err("cannot read", dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        let part = |n: &str| n.starts_with("part-") && n.ends_with(".parquet");
        if !(is_file && (part(&name) || temporary_of(&name).is_some_and(part))) {
            strays.push(name);
        }
    }
    strays.sort();
    Ok(strays)
}

/// The name a hidden temporary file of neardup's stands for: `.NAME.tmp` (part and kept
/// files) or `.NAME.PID.tmp` ([`write_atomically`]).
pub(super) fn temporary_of(name: &str) -> Option<&str> {
    let core = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    if let Some((front, pid)) = core.rsplit_once('.') {
        if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) {
            return Some(front);
        }
    }
    Some(core)
}

/// Removes the hidden temporary files neardup writes in `dir` (a run or a deduplicated
/// corpus) and its tables: half-written parts, kept files and summaries (see
/// [`own_entries`] for the names), after an interrupted run. Committed files, `_SUCCESS`
/// and anything not named like neardup's temporary files stay. With `parts`, only the
/// temporary parts of those part numbers go (one process's of a job with several), and no
/// other file. Returns what was removed.
pub fn remove_temporaries(dir: &Path, parts: Option<std::ops::Range<usize>>) -> Vec<PathBuf> {
    let listed: Vec<String> = std::fs::read_to_string(dir.join(MARKER))
        .map(|text| text.lines().skip(1).map(str::to_string).collect())
        .unwrap_or_default();
    let own_top = |name: &str| {
        [SUMMARY, SUCCESS, REMOVED].contains(&name) || listed.iter().any(|l| l == name)
    };
    let part = |name: &str| {
        let Some(number) = name
            .strip_prefix("part-")
            .and_then(|n| n.strip_suffix(".parquet"))
        else {
            return false;
        };
        match (&parts, number.parse::<usize>()) {
            (None, _) => true,
            (Some(range), Ok(n)) => range.contains(&n),
            (Some(_), Err(_)) => false,
        }
    };
    let mut removed = Vec::new();
    let mut sweep = |dir: &Path, own: &dyn Fn(&str) -> bool| {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut doomed: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter(|e| temporary_of(&e.file_name().to_string_lossy()).is_some_and(own))
            .map(|e| e.path())
            .collect();
        doomed.sort();
        for path in doomed {
            if std::fs::remove_file(&path).is_ok() {
                removed.push(path);
            }
        }
    };
    if parts.is_none() {
        sweep(dir, &own_top);
    }
    for table in TABLES.iter().chain(&WEB_TABLES) {
        sweep(&dir.join(table.dir_name()), &part);
    }
    sweep(&dir.join(Table::Substrings.dir_name()), &part);
    let resume_part = |name: &str| {
        name.strip_suffix(".bin")
            .map(|n| format!("{n}.parquet"))
            .is_some_and(|n| part(&n))
            || (parts.is_none() && name == JOB_RECORD)
    };
    sweep(&dir.join(RESUME), &resume_part);
    removed
}

/// Makes a failed run's directory `target.dir` ready to be resumed: locks it, then removes
/// what `--overwrite` would (the directory must be a neardup output holding nothing else,
/// see [`own_entries`]) except the tables in `keep` and [`RESUME`], whose temporary files
/// alone go. `_SUCCESS` goes first, as in [`prepare_all`]; the tables are created if
/// missing and the marker rewritten. The caller has checked that the run is the same job.
pub fn prepare_resume(target: &Target, keep: &[Table]) -> Result<Prepared, IoError> {
    let dir = target.dir;
    if let Some(holder) = DirLock::holder(dir, LOCK) {
        return Err(IoError::Locked {
            path: dir.to_path_buf(),
            what: target.what,
            holder: holder.to_string(),
        });
    }
    let mut prepared = Prepared::default();
    prepared
        .locks
        .push(DirLock::acquire(dir, LOCK, target.what)?);
    check_protected(dir, target.protect)?;
    let kept: Vec<PathBuf> = keep
        .iter()
        .map(|t| dir.join(t.dir_name()))
        .chain([dir.join(RESUME)])
        .collect();
    let doomed: Vec<PathBuf> = own_entries(dir)?
        .into_iter()
        .filter(|p| !kept.contains(p))
        .collect();
    clear(dir, &doomed)?;
    let mut removed = Vec::new();
    for kept in &kept {
        let Ok(entries) = std::fs::read_dir(kept) else {
            continue;
        };
        for entry in entries.flatten() {
            if temporary_of(&entry.file_name().to_string_lossy()).is_some() {
                removed.push(entry.path());
            }
        }
    }
    for path in removed {
        std::fs::remove_file(&path).map_err(prepare_err("cannot remove", &path))?;
    }
    for &table in target.tables {
        let sub = dir.join(table.dir_name());
        std::fs::create_dir_all(&sub).map_err(prepare_err("cannot create", &sub))?;
    }
    write_atomically(&dir.join(MARKER), MARKER_TEXT.as_bytes())?;
    Ok(prepared)
}

/// Removes [`RESUME`] from a run directory (a complete run has nothing to resume).
pub fn remove_resume(dir: &Path) -> Result<(), IoError> {
    let resume = RunDir::new(dir).resume();
    match std::fs::remove_dir_all(&resume) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(prepare_err("cannot remove", &resume)(e)),
    }
}
