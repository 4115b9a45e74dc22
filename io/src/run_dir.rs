//! The run directory: its one owner.
//!
//! ```text
//! OUT/
//!   fingerprints/part-00000.parquet ...   one part per worker
//!   pairs/part-00000.parquet ...
//!   clusters/part-00000.parquet ...
//!   summary.json
//!   .neardup                              marker: neardup wrote this directory
//!   .neardup.lock                         while a run writes it: the lock (crate::lock)
//!   _SUCCESS                              written last, only when everything is complete
//!   _resume/job.json                      what the job was (inputs, parameters), for --resume
//!   _resume/part-00000.bin ...            per worker, once its fingerprints are committed
//! ```
//!
//! `_resume/` is what a failed run leaves for `neardup run --resume` (see
//! [`prepare_resume`]): the job record, written when the run starts, and each worker's
//! fingerprinted documents as the later stages need them, committed right after its part
//! of `fingerprints/`. A run that succeeds removes it ([`remove_resume`]).
//!
//! A deduplicated corpus (`--write-dedup DIR`) is a directory of the same
//! kind: the kept files, [`REMOVED`], [`MARKER`] (which lists the kept files) and [`SUCCESS`].
//!
//! `--overwrite` replaces only what neardup wrote: [`prepare`] refuses a directory that is
//! not a neardup output or that holds anything else, and never touches `/`, the home or
//! current directory, or the paths a run reads or writes (see [`Protected`]).
//!
//! One run at a time: [`prepare_all`] takes an exclusive lock on every directory a run
//! writes before it changes any of them, and checks them all first, so a refusal of one
//! leaves the others untouched.
//!
//! Parts are written under hidden temporary names and renamed when complete
//! (see [`crate::parquet_out`]). A directory without `_SUCCESS` is an
//! incomplete or failed run, whatever else it holds, and [`read_run`] refuses
//! it. Everything that writes a run ([`prepare`], the part writers through
//! [`RunDir::table`] and [`part_file_name`], [`commit`]) and everything that
//! reads one back ([`read_run`], [`committed_parts`]) takes the names from
//! here.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float32Type, Int64Type, UInt64Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::atomic::write_atomically;
use crate::error::IoError;
use crate::lock::DirLock;
pub use crate::lock::LOCK;
pub use crate::parquet_out::part_file_name;
use crate::parquet_out::{TableTag, PARAM_FINGERPRINT, PARAM_SEARCH};

/// The commit marker's name.
pub const SUCCESS: &str = "_SUCCESS";
/// The summary's name.
pub const SUMMARY: &str = "summary.json";
/// The table of removed documents beside a deduplicated corpus.
pub const REMOVED: &str = "removed.parquet";
/// The marker of a directory neardup wrote: hidden, so readers of the directory skip it.
/// Its first line is [`MARKER_TEXT`]; a deduplicated corpus lists the files it wrote on the
/// lines after it.
pub const MARKER: &str = ".neardup";
/// The first line of the marker.
pub const MARKER_TEXT: &str = "neardup output\n";
/// The default spill directory inside the output directory.
pub const SPILL: &str = "_spill";
/// What a failed run leaves for `--resume`: the job record and the resume parts.
pub const RESUME: &str = "_resume";
/// The job record's name inside [`RESUME`].
pub const JOB_RECORD: &str = "job.json";

/// A table of a run: a directory of part files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    Fingerprints,
    Pairs,
    Clusters,
    /// `neardup extract`'s documents, one part per input file.
    Documents,
    /// Mirror relations between hosts (documents with URLs).
    Mirrors,
    /// One row per host, with its mirror group.
    Hosts,
    /// Repeated passages (`neardup substrings`, `run --substrings`): one row per range.
    Substrings,
}

/// Every table.
pub const TABLES: [Table; 3] = [Table::Fingerprints, Table::Pairs, Table::Clusters];
/// The tables a run over documents writes besides [`TABLES`]: mirror hosts (empty when the
/// documents have no URLs).
pub const WEB_TABLES: [Table; 2] = [Table::Mirrors, Table::Hosts];

impl Table {
    /// The table's directory name.
    pub fn dir_name(self) -> &'static str {
        match self {
            Table::Fingerprints => "fingerprints",
            Table::Pairs => "pairs",
            Table::Clusters => "clusters",
            Table::Documents => "documents",
            Table::Mirrors => "mirrors",
            Table::Hosts => "hosts",
            Table::Substrings => "substrings",
        }
    }
}

/// The committed name of worker `part`'s resume part inside [`RESUME`].
pub fn resume_part_name(part: usize) -> String {
    format!("part-{part:05}.bin")
}

/// The paths of one run directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunDir {
    root: PathBuf,
}

impl RunDir {
    pub fn new(root: &Path) -> Self {
        RunDir {
            root: root.to_path_buf(),
        }
    }

    /// The directory of a table.
    pub fn table(&self, table: Table) -> PathBuf {
        self.root.join(table.dir_name())
    }

    /// The commit marker.
    pub fn success(&self) -> PathBuf {
        self.root.join(SUCCESS)
    }

    /// The summary.
    pub fn summary(&self) -> PathBuf {
        self.root.join(SUMMARY)
    }

    /// What a failed run leaves for `--resume`.
    pub fn resume(&self) -> PathBuf {
        self.root.join(RESUME)
    }
}

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
fn temporary_of(name: &str) -> Option<&str> {
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

/// Writes `summary.json` (the bytes given), then `_SUCCESS` if the run succeeded; each
/// appears whole or not at all.
pub fn commit(dir: &Path, summary_json: &[u8], succeeded: bool) -> Result<(), IoError> {
    let run = RunDir::new(dir);
    write_atomically(&run.summary(), summary_json)?;
    if succeeded {
        write_atomically(&run.success(), b"")?;
    }
    Ok(())
}

/// Marks a directory complete: writes `_SUCCESS`.
pub fn mark_complete(dir: &Path) -> Result<(), IoError> {
    write_atomically(&RunDir::new(dir).success(), b"")
}

/// What `neardup eval` needs of a run.
#[derive(Debug, Default)]
pub struct RunOutputs {
    /// doc_id -> the user's id (if the input had one).
    pub ids: HashMap<u64, Option<String>>,
    /// doc_id -> simhash.
    pub simhashes: HashMap<u64, u64>,
    /// (doc_a, doc_b, kind) for every pair.
    pub pairs: Vec<(u64, u64, String)>,
    /// (doc_a, doc_b) -> verified Jaccard, for pairs that have one.
    pub jaccard: HashMap<(u64, u64), f32>,
    /// doc_id -> cluster_id, for documents in a cluster.
    pub clusters: HashMap<u64, u64>,
    /// The kept document of each cluster.
    pub kept: HashMap<u64, u64>,
    /// What made the run's `pairs/` and `clusters/` (their metadata), if they say.
    pub meta: Option<crate::parquet_out::TableMeta>,
}

/// The committed parts of one table of a run (`part-*.parquet`, sorted; temporary files of
/// parts being written are hidden and not listed).
pub fn committed_parts(dir: &Path) -> Result<Vec<PathBuf>, IoError> {
    let entries = std::fs::read_dir(dir).map_err(|source| IoError::Open {
        path: dir.to_path_buf(),
        cause: source,
    })?;
    let mut parts: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("part-") && n.ends_with(".parquet"))
        })
        .collect();
    parts.sort();
    Ok(parts)
}

/// The parts of one run read so far: every part with neardup's metadata must be of the table
/// its directory names and come from the same job as the others (same scheme and
/// fingerprint parameters; `pairs/` and `clusters/` also the same search parameters), so
/// that parts of two runs, or a table moved into another's place, are never read as one
/// result. Parts without metadata (older neardup versions) are read as before.
#[derive(Default)]
struct Origin {
    fingerprint: Option<(PathBuf, TableTag)>,
    search: Option<(PathBuf, TableTag)>,
}

impl Origin {
    fn check(&mut self, path: &Path, table: Table, tag: Option<TableTag>) -> Result<(), IoError> {
        let Some(tag) = tag else {
            return Ok(());
        };
        tag.expect_table(path, table.dir_name())?;
        let agree = |first: &mut Option<(PathBuf, TableTag)>, part| match first {
            Some((first_path, first_tag)) => {
                tag.expect_same_origin(path, first_tag, first_path, Some(part))
            }
            None => {
                *first = Some((path.to_path_buf(), tag.clone()));
                Ok(())
            }
        };
        agree(&mut self.fingerprint, PARAM_FINGERPRINT)?;
        if table != Table::Fingerprints {
            agree(&mut self.search, PARAM_SEARCH)?;
        }
        Ok(())
    }
}

fn batches(
    path: &Path,
    table: Table,
    origin: &mut Origin,
    columns: &[&str],
    mut f: impl FnMut(&RecordBatch) -> Result<(), IoError>,
) -> Result<(), IoError> {
    let file = File::open(path).map_err(|source| IoError::Open {
        path: path.to_path_buf(),
        cause: source,
    })?;
    let parquet = |source| IoError::Parquet {
        path: path.to_path_buf(),
        cause: source,
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet)?;
    let key_values = builder.metadata().file_metadata().key_value_metadata();
    origin.check(path, table, TableTag::from_key_values(path, key_values)?)?;
    let mask =
        parquet::arrow::ProjectionMask::columns(builder.parquet_schema(), columns.iter().copied());
    for batch in builder.with_projection(mask).build().map_err(parquet)? {
        let batch = batch.map_err(|e| IoError::BadTable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        for c in columns {
            if batch.column_by_name(c).is_none() {
                return Err(IoError::BadTable {
                    path: path.to_path_buf(),
                    reason: format!("no column {c:?}"),
                });
            }
        }
        f(&batch)?;
    }
    Ok(())
}

fn u64s<'a>(
    batch: &'a RecordBatch,
    name: &str,
    path: &Path,
) -> Result<&'a arrow::array::UInt64Array, IoError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_primitive_opt::<UInt64Type>())
        .ok_or_else(|| IoError::BadTable {
            path: path.to_path_buf(),
            reason: format!("column {name:?} is not UInt64"),
        })
}

/// Reads a run directory; refuses one without `_SUCCESS` (incomplete or failed), and parts
/// whose metadata says they belong elsewhere (see `Origin`).
pub fn read_run(dir: &Path) -> Result<RunOutputs, IoError> {
    let run = RunDir::new(dir);
    if !run.success().exists() {
        return Err(IoError::BadTable {
            path: dir.to_path_buf(),
            reason: "no _SUCCESS: the run is incomplete or failed".into(),
        });
    }
    read_run_parts(dir)
}

/// [`read_run`] without the check for `_SUCCESS`: for a step that runs between the last
/// committed part and `_SUCCESS` (every part is committed then, `_SUCCESS` not yet written).
pub fn read_run_parts(dir: &Path) -> Result<RunOutputs, IoError> {
    let run = RunDir::new(dir);
    let mut out = RunOutputs::default();
    let mut origin = Origin::default();
    for path in committed_parts(&run.table(Table::Fingerprints))? {
        batches(
            &path,
            Table::Fingerprints,
            &mut origin,
            &["doc_id", "id", "simhash"],
            |b| {
                let docs = u64s(b, "doc_id", &path)?;
                let simhashes = u64s(b, "simhash", &path)?;
                let ids = b.column_by_name("id").expect("checked").as_string::<i32>();
                for i in 0..b.num_rows() {
                    out.ids.insert(
                        docs.value(i),
                        ids.is_valid(i).then(|| ids.value(i).to_string()),
                    );
                    out.simhashes.insert(docs.value(i), simhashes.value(i));
                }
                Ok(())
            },
        )?;
    }
    for path in committed_parts(&run.table(Table::Pairs))? {
        let columns = ["doc_a", "doc_b", "kind", "jaccard"];
        batches(&path, Table::Pairs, &mut origin, &columns, |b| {
            let (a, c) = (u64s(b, "doc_a", &path)?, u64s(b, "doc_b", &path)?);
            let kind = b
                .column_by_name("kind")
                .expect("checked")
                .as_string::<i32>();
            let jaccard = b
                .column_by_name("jaccard")
                .expect("checked")
                .as_primitive_opt::<Float32Type>();
            out.pairs.extend(
                (0..b.num_rows()).map(|i| (a.value(i), c.value(i), kind.value(i).to_string())),
            );
            if let Some(j) = jaccard {
                for i in (0..b.num_rows()).filter(|&i| j.is_valid(i)) {
                    out.jaccard.insert((a.value(i), c.value(i)), j.value(i));
                }
            }
            Ok(())
        })?;
    }
    for path in committed_parts(&run.table(Table::Clusters))? {
        let columns = ["doc_id", "cluster_id", "keep"];
        batches(&path, Table::Clusters, &mut origin, &columns, |b| {
            let docs = u64s(b, "doc_id", &path)?;
            let clusters = b
                .column_by_name("cluster_id")
                .and_then(|c| c.as_primitive_opt::<Int64Type>())
                .ok_or_else(|| IoError::BadTable {
                    path: path.clone(),
                    reason: "column \"cluster_id\" is not Int64".into(),
                })?;
            let keep = b.column_by_name("keep").expect("checked").as_boolean();
            for i in 0..b.num_rows() {
                if clusters.value(i) >= 0 {
                    out.clusters.insert(docs.value(i), clusters.value(i) as u64);
                    if keep.value(i) {
                        out.kept.insert(clusters.value(i) as u64, docs.value(i));
                    }
                }
            }
            Ok(())
        })?;
    }
    out.meta = origin.search.map(|(_, tag)| tag.meta);
    Ok(out)
}

/// The ranges of a run's `substrings/` as `(doc_id, start, end)`, sorted; the run must be
/// complete (`_SUCCESS`).
pub fn read_substrings(dir: &Path) -> Result<Vec<(u64, u64, u64)>, IoError> {
    let run = RunDir::new(dir);
    if !run.success().exists() {
        return Err(IoError::BadTable {
            path: dir.to_path_buf(),
            reason: "no _SUCCESS: the run is incomplete or failed".into(),
        });
    }
    let mut out = Vec::new();
    let mut origin = Origin::default();
    for path in committed_parts(&run.table(Table::Substrings))? {
        let columns = ["doc_id", "start", "end"];
        batches(&path, Table::Substrings, &mut origin, &columns, |b| {
            let docs = u64s(b, "doc_id", &path)?;
            let starts = u64s(b, "start", &path)?;
            let ends = u64s(b, "end", &path)?;
            out.extend((0..b.num_rows()).map(|i| (docs.value(i), starts.value(i), ends.value(i))));
            Ok(())
        })?;
    }
    out.sort_unstable();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parquet_out::{ClusterRow, FingerprintRow, PairKind, PairRow, PartWriter};

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Every file under `dir` with its contents, to show that a refusal touched nothing.
    fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files.push((path.clone(), Vec::new()));
                files.extend(snapshot(&path));
            } else {
                files.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
        files.sort();
        files
    }

    fn write(path: &Path, bytes: &[u8]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn prepare_refuses_or_clears_and_creates_the_tables() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        prepare(&out, false, &[Table::Pairs], &[]).unwrap();
        assert!(out.join("pairs").is_dir());
        assert_eq!(
            std::fs::read_to_string(out.join(MARKER)).unwrap(),
            MARKER_TEXT
        );
        std::fs::write(out.join(SUCCESS), b"").unwrap();
        assert_eq!(
            prepare(&out, false, &[], &[]).unwrap_err().to_string(),
            format!(
                "output directory {} exists and is not empty (pass --overwrite to replace it)",
                out.display()
            )
        );
        write(&out.join("pairs/part-00003.parquet"), b"old");
        write(&out.join("pairs/.part-00004.parquet.tmp"), b"half");
        write(&out.join(".summary.json.123.tmp"), b"half");
        write(&out.join("_spill/w0/p1"), b"spilled");
        prepare(&out, true, &[Table::Fingerprints], &[]).unwrap();
        assert_eq!(names(&out), [MARKER, "fingerprints"]);
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(
            prepare(&file, true, &[], &[]).unwrap_err().to_string(),
            format!("{} exists and is not a directory", file.display())
        );
    }

    #[test]
    fn overwrite_refuses_a_directory_neardup_did_not_write_and_deletes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("mine");
        for name in ["a.txt", "b.txt", "c.txt", "d.txt", "e.txt", "f.txt"] {
            write(&out.join(name), name.as_bytes());
        }
        write(&out.join("notes/x"), b"x");
        let before = snapshot(&out);
        let err = prepare(&out, true, &TABLES, &[]).unwrap_err();
        assert!(
            matches!(err, IoError::NotNeardupOutput { more: 2, .. }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "refusing to replace {}: it is not a neardup output (no .neardup or summary.json); \
                 it holds a.txt, b.txt, c.txt, d.txt, e.txt and 2 more; nothing was deleted \
                 (remove them yourself, or choose another output directory)",
                out.display()
            )
        );
        assert_eq!(snapshot(&out), before);
    }

    #[test]
    fn overwrite_refuses_a_neardup_output_holding_foreign_files() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        prepare(&out, false, &TABLES, &[]).unwrap();
        commit(&out, b"{}", true).unwrap();
        write(&out.join("my-notes.txt"), b"precious");
        write(&out.join("pairs/extra.csv"), b"mine too");
        write(&out.join(".hidden.tmp"), b"not neardup's");
        let before = snapshot(&out);
        let err = prepare(&out, true, &TABLES, &[]).unwrap_err();
        assert!(matches!(err, IoError::ForeignEntries { .. }), "{err:?}");
        let message = err.to_string();
        for name in [".hidden.tmp", "my-notes.txt", "pairs/extra.csv"] {
            assert!(message.contains(name), "{message}");
        }
        assert!(message.contains("nothing was deleted"), "{message}");
        assert_eq!(snapshot(&out), before, "not even _SUCCESS was removed");
    }

    #[test]
    fn overwrite_replaces_a_run_without_a_marker_by_its_summary() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        write(&out.join("fingerprints/part-00000.parquet"), b"old");
        write(&out.join(SUMMARY), b"{}");
        write(&out.join(SUCCESS), b"");
        prepare(&out, true, &TABLES, &[]).unwrap();
        assert_eq!(names(&out), [MARKER, "clusters", "fingerprints", "pairs"]);
        assert!(names(&out.join("fingerprints")).is_empty());
    }

    #[test]
    fn overwrite_removes_only_the_files_the_marker_lists() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("dedup");
        prepare(&out, false, &[], &[]).unwrap();
        record_written(&out, &["a.jsonl".into(), "b.parquet".into()]).unwrap();
        write(&out.join("a.jsonl"), b"kept");
        write(&out.join(".b.parquet.tmp"), b"half");
        write(&out.join(REMOVED), b"rows");
        write(&out.join(SUCCESS), b"");
        prepare(&out, true, &[], &[]).unwrap();
        assert_eq!(names(&out), [MARKER]);
        assert_eq!(
            std::fs::read_to_string(out.join(MARKER)).unwrap(),
            MARKER_TEXT,
            "the list starts again"
        );
        write(&out.join("a.jsonl"), b"no longer listed");
        let err = prepare(&out, true, &[], &[]).unwrap_err();
        assert!(err.to_string().contains("a.jsonl"), "{err}");
        assert_eq!(
            std::fs::read(out.join("a.jsonl")).unwrap(),
            b"no longer listed"
        );
    }

    #[test]
    fn overwrite_never_clears_a_directory_holding_what_the_run_reads_or_writes() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        prepare(&out, false, &TABLES, &[]).unwrap();
        write(
            &out.join("fingerprints/part-00000.parquet"),
            b"fingerprints",
        );
        commit(&out, b"{}", true).unwrap();
        let before = snapshot(&out);
        let cases = [
            (
                Protected::new(out.join("fingerprints/part-00000.parquet"), "the input"),
                "it holds the input",
            ),
            (
                Protected::new(&out, "the --output directory"),
                "it is the --output directory",
            ),
            (
                // Not created yet: still compared with where it will be.
                Protected::new(out.join("tmp/spill"), "the spill directory"),
                "it holds the spill directory",
            ),
            (
                Protected::new(dir.path().join("run/../run/pairs"), "the input"),
                "it holds the input",
            ),
        ];
        for (protected, reason) in cases {
            let err = prepare(&out, true, &TABLES, std::slice::from_ref(&protected)).unwrap_err();
            assert!(matches!(err, IoError::Protected { .. }), "{err:?}");
            let message = err.to_string();
            assert!(message.contains(reason), "{message}");
            assert!(
                message.contains(&protected.path.display().to_string()),
                "{message}"
            );
            assert_eq!(snapshot(&out), before);
        }
        // A protected path outside, or containing the directory, or stdin, does not matter.
        let fine = [
            Protected::new(dir.path().join("corpus.jsonl"), "the input"),
            Protected::new(dir.path(), "the spill directory"),
            Protected::new("-", "the input"),
        ];
        prepare(&out, true, &TABLES, &fine).unwrap();
    }

    #[test]
    fn overwrite_never_clears_the_root_the_home_or_the_current_directory() {
        let err = prepare(Path::new("/"), true, &[], &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "refusing to replace /: it is the root directory; nothing was deleted \
             (choose another output directory)"
        );
        let cwd = std::env::current_dir().unwrap();
        let err = prepare(&cwd, true, &[], &[]).unwrap_err();
        assert!(
            err.to_string().contains("it is the current directory"),
            "{err}"
        );
        let err = prepare(Path::new("."), true, &[], &[]).unwrap_err();
        assert!(
            err.to_string().contains("it is the current directory"),
            "{err}"
        );
        let parent = cwd.parent().unwrap();
        let err = prepare(parent, true, &[], &[]).unwrap_err();
        assert!(
            err.to_string().contains("it holds the current directory")
                || err.to_string().contains("home directory"),
            "{err}"
        );
        if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
            if home.is_dir() && std::fs::read_dir(&home).unwrap().next().is_some() {
                let err = prepare(&home, true, &[], &[]).unwrap_err();
                assert!(matches!(err, IoError::Protected { .. }), "{err:?}");
            }
        }
    }

    #[test]
    fn temporary_names_stand_for_what_they_will_become() {
        assert_eq!(temporary_of(".summary.json.4242.tmp"), Some("summary.json"));
        assert_eq!(
            temporary_of(".part-00003.parquet.tmp"),
            Some("part-00003.parquet")
        );
        assert_eq!(temporary_of(".a.jsonl.tmp"), Some("a.jsonl"));
        assert_eq!(temporary_of("summary.json"), None);
        assert_eq!(temporary_of(".x"), None);
    }

    #[test]
    fn a_committed_run_reads_back_and_an_uncommitted_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        let tables = [Table::Fingerprints, Table::Pairs, Table::Clusters];
        prepare(&out, false, &tables, &[]).unwrap();
        let run = RunDir::new(&out);
        let mut fps = PartWriter::<FingerprintRow>::create(
            &run.table(Table::Fingerprints),
            1,
            &crate::parquet_out::test_meta(),
        )
        .unwrap();
        for doc in [3u64, 5] {
            fps.push(FingerprintRow {
                doc_id: doc,
                id: (doc == 3).then(|| "three".to_string()),
                source: "a.jsonl".into(),
                record: doc,
                simhash: doc * 10,
                n_tokens: 1,
                bytes: 1,
                empty: false,
                ..Default::default()
            })
            .unwrap();
        }
        assert!(fps
            .final_path()
            .ends_with("fingerprints/part-00001.parquet"));
        fps.commit().unwrap();
        let mut pairs = PartWriter::<PairRow>::create(
            &run.table(Table::Pairs),
            0,
            &crate::parquet_out::test_meta(),
        )
        .unwrap();
        pairs
            .push(PairRow {
                doc_a: 3,
                doc_b: 5,
                hamming: 2,
                kind: PairKind::Near,
                jaccard: Some(0.5),
            })
            .unwrap();
        pairs.commit().unwrap();
        let mut clusters = PartWriter::<ClusterRow>::create(
            &run.table(Table::Clusters),
            0,
            &crate::parquet_out::test_meta(),
        )
        .unwrap();
        for (doc, keep) in [(3, true), (5, false)] {
            clusters
                .push(ClusterRow {
                    doc_id: doc,
                    cluster_id: 3,
                    cluster_size: 2,
                    keep,
                })
                .unwrap();
        }
        clusters.commit().unwrap();

        let err = read_run(&out).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: no _SUCCESS: the run is incomplete or failed",
                out.display()
            )
        );
        commit(&out, b"{}", true).unwrap();
        assert_eq!(std::fs::read(run.summary()).unwrap(), b"{}");
        let got = read_run(&out).unwrap();
        assert_eq!(got.ids[&3].as_deref(), Some("three"));
        assert_eq!(got.ids[&5], None);
        assert_eq!(got.simhashes[&5], 50);
        assert_eq!(got.pairs, [(3, 5, "near".to_string())]);
        assert_eq!(got.jaccard[&(3, 5)], 0.5);
        assert_eq!(got.clusters[&5], 3);
        assert_eq!(got.kept[&3], 3);
    }

    #[test]
    fn interrupted_runs_lose_their_temporary_files_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        prepare(&out, false, &TABLES, &[]).unwrap();
        record_written(&out, &["a.jsonl".into()]).unwrap();
        for name in [
            "fingerprints/part-00000.parquet",
            "fingerprints/.part-00001.parquet.tmp",
            "pairs/.part-00000.parquet.tmp",
            ".summary.json.77.tmp",
            ".a.jsonl.tmp",
            "a.jsonl",
            ".mine.tmp",
            "pairs/.notes.tmp",
        ] {
            write(&out.join(name), b"x");
        }
        write(&out.join("pairs/.part-00003.parquet.tmp"), b"x");
        let theirs: Vec<PathBuf> = remove_temporaries(&out, Some(3..4));
        assert_eq!(theirs, [out.join("pairs/.part-00003.parquet.tmp")]);
        let removed: Vec<String> = remove_temporaries(&out, None)
            .iter()
            .map(|p| p.strip_prefix(&out).unwrap().display().to_string())
            .collect();
        assert_eq!(
            removed,
            [
                ".a.jsonl.tmp",
                ".summary.json.77.tmp",
                "fingerprints/.part-00001.parquet.tmp",
                "pairs/.part-00000.parquet.tmp"
            ]
        );
        assert!(out.join("fingerprints/part-00000.parquet").exists());
        assert!(out.join("a.jsonl").exists());
        assert!(out.join(".mine.tmp").exists(), "not a name of neardup's");
        assert!(out.join("pairs/.notes.tmp").exists());
    }

    #[test]
    fn prepare_locks_and_checks_every_directory_before_clearing_any() {
        let dir = tempfile::tempdir().unwrap();
        let (out, dedup) = (dir.path().join("run"), dir.path().join("dedup"));
        prepare(&out, false, &TABLES, &[]).unwrap();
        commit(&out, b"{}", true).unwrap();
        write(&dedup.join("precious.txt"), b"mine");
        let before = snapshot(&out);
        let targets = |what| {
            [
                Target {
                    dir: &out,
                    tables: &TABLES,
                    protect: &[],
                    what: "output directory",
                },
                Target {
                    dir: &dedup,
                    tables: &[],
                    protect: &[],
                    what,
                },
            ]
        };
        let err = prepare_all(&targets("--write-dedup directory"), true).unwrap_err();
        assert!(matches!(err, IoError::NotNeardupOutput { .. }), "{err:?}");
        assert_eq!(snapshot(&out), before, "the run was not cleared");
        std::fs::remove_file(dedup.join("precious.txt")).unwrap();

        // A directory another run holds is refused, naming it, before anything is cleared.
        let held = DirLock::acquire(&dedup, LOCK, "--write-dedup directory").unwrap();
        let err = prepare_all(&targets("--write-dedup directory"), true).unwrap_err();
        assert!(
            err.to_string().starts_with(&format!(
                "--write-dedup directory {} is in use by another neardup run (pid {}",
                dedup.display(),
                std::process::id()
            )),
            "{err}"
        );
        assert_eq!(snapshot(&out), before);
        drop(held);

        let prepared = prepare_all(&targets("--write-dedup directory"), true).unwrap();
        assert_eq!(prepared.lock_files().len(), 2);
        assert!(!out.join(SUCCESS).exists());
        assert_eq!(
            names(&out),
            [MARKER, LOCK, "clusters", "fingerprints", "pairs"]
        );
        let err = prepare(&out, true, &TABLES, &[]).unwrap_err();
        assert!(matches!(err, IoError::Locked { .. }), "{err:?}");
        drop(prepared);
        assert_eq!(names(&dedup), [MARKER], "the lock file goes with the lock");
    }

    #[test]
    fn a_failed_run_gets_a_summary_but_no_marker() {
        let dir = tempfile::tempdir().unwrap();
        commit(dir.path(), b"{\"errors\": 1}", false).unwrap();
        assert!(dir.path().join(SUMMARY).exists());
        assert!(!dir.path().join(SUCCESS).exists());
    }

    #[test]
    fn parts_of_other_runs_or_tables_are_refused() {
        use crate::parquet_out::{test_meta, TableMeta};
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        prepare(&out, false, &TABLES, &[]).unwrap();
        let run = RunDir::new(&out);
        let meta = test_meta();
        let fps = PartWriter::<FingerprintRow>::create(&run.table(Table::Fingerprints), 0, &meta);
        fps.unwrap().commit().unwrap();
        let clusters = PartWriter::<ClusterRow>::create(&run.table(Table::Clusters), 0, &meta);
        clusters.unwrap().commit().unwrap();
        // Two pairs parts: one of this run, one of a run searched with another k.
        let pairs = PartWriter::<PairRow>::create(&run.table(Table::Pairs), 0, &meta);
        pairs.unwrap().commit().unwrap();
        let mut other = meta.clone();
        other.params["search"]["k"] = 6.into();
        let pairs = PartWriter::<PairRow>::create(&run.table(Table::Pairs), 1, &other);
        let stray = pairs.unwrap().commit().unwrap();
        commit(&out, b"{}", true).unwrap();
        assert_eq!(
            read_run(&out).unwrap_err().to_string(),
            format!(
                "{}: made with other parameters than {}: k (6 vs 3); tables made differently \
                 cannot be used together",
                stray.display(),
                run.table(Table::Pairs).join("part-00000.parquet").display()
            )
        );
        // A part of a MinHash run.
        let minhash = TableMeta {
            scheme: "minhash".into(),
            ..meta.clone()
        };
        let pairs = PartWriter::<PairRow>::create(&run.table(Table::Pairs), 1, &minhash);
        pairs.unwrap().commit().unwrap();
        assert_eq!(
            read_run(&out).unwrap_err().to_string(),
            format!(
                "{}: scheme minhash, expected simhash-doc (as in {}: tables made by different \
                 schemes cannot be used together)",
                stray.display(),
                run.table(Table::Fingerprints)
                    .join("part-00000.parquet")
                    .display()
            )
        );
        // A clusters part moved into pairs/.
        std::fs::remove_file(&stray).unwrap();
        std::fs::copy(
            run.table(Table::Clusters).join("part-00000.parquet"),
            run.table(Table::Pairs).join("part-00002.parquet"),
        )
        .unwrap();
        assert_eq!(
            read_run(&out).unwrap_err().to_string(),
            format!(
                "{}: a neardup clusters table, expected a pairs table",
                run.table(Table::Pairs).join("part-00002.parquet").display()
            )
        );
        // Without the stray part the run reads back.
        std::fs::remove_file(run.table(Table::Pairs).join("part-00002.parquet")).unwrap();
        read_run(&out).unwrap();
    }
}
