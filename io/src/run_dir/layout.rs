//! The names in a run directory: its tables, part files and small files, and the paths
//! of one run ([`RunDir`]); writing the summary and `_SUCCESS` ([`commit`]); listing a
//! table's committed parts ([`committed_parts`]).

use std::path::{Path, PathBuf};

use crate::atomic::write_atomically;
use crate::error::IoError;

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
