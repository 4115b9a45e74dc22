//! The output directory: its layout, preparing it, and the commit marker.
//!
//! ```text
//! OUT/
//!   fingerprints/part-00000.parquet ...   one part per worker
//!   pairs/part-00000.parquet ...
//!   clusters/part-00000.parquet ...
//!   summary.json
//!   _SUCCESS                              written last, only when everything is complete
//! ```
//!
//! Parts are written under hidden temporary names and renamed when complete (see
//! `neardup_io::parquet_out`). `_SUCCESS` is written by worker 0 after every worker has
//! reported its parts committed and no worker reported an error. A directory without
//! `_SUCCESS` is an incomplete or failed run, whatever else it holds.

pub mod dedup;

use std::path::{Path, PathBuf};

use neardup_io::parquet_out::write_atomically;

use crate::report::JobSummary;
use crate::JobError;

/// The commit marker's name.
pub const SUCCESS: &str = "_SUCCESS";
/// The summary's name.
pub const SUMMARY: &str = "summary.json";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    Fingerprints,
    Pairs,
    Clusters,
}

impl Table {
    pub fn dir_name(self) -> &'static str {
        match self {
            Table::Fingerprints => "fingerprints",
            Table::Pairs => "pairs",
            Table::Clusters => "clusters",
        }
    }
}

pub struct OutputDirs {
    root: PathBuf,
}

impl OutputDirs {
    pub fn new(root: &Path) -> Self {
        OutputDirs {
            root: root.to_path_buf(),
        }
    }

    pub fn table(&self, table: Table) -> PathBuf {
        self.root.join(table.dir_name())
    }
}

/// Makes `dir` ready for a run: refuses an existing non-empty directory unless `overwrite`,
/// in which case its contents are removed first (the `_SUCCESS` marker before anything else,
/// so an interrupted clean-up never leaves a directory that looks complete).
pub fn prepare(dir: &Path, overwrite: bool, tables: &[Table]) -> Result<(), JobError> {
    let io_err =
        |what: &str, e: std::io::Error| JobError::Output(format!("{what} {}: {e}", dir.display()));
    if dir.exists() {
        if !dir.is_dir() {
            return Err(JobError::Output(format!(
                "{} exists and is not a directory",
                dir.display()
            )));
        }
        let non_empty = std::fs::read_dir(dir)
            .map_err(|e| io_err("cannot read", e))?
            .next()
            .is_some();
        if non_empty {
            if !overwrite {
                return Err(JobError::Output(format!(
                    "output directory {} exists and is not empty (pass --overwrite to replace it)",
                    dir.display()
                )));
            }
            let marker = dir.join(SUCCESS);
            if marker.exists() {
                std::fs::remove_file(&marker)
                    .map_err(|e| io_err("cannot remove _SUCCESS in", e))?;
            }
            for entry in std::fs::read_dir(dir).map_err(|e| io_err("cannot read", e))? {
                let path = entry.map_err(|e| io_err("cannot read", e))?.path();
                let removed = if path.is_dir() {
                    std::fs::remove_dir_all(&path)
                } else {
                    std::fs::remove_file(&path)
                };
                removed.map_err(|e| {
                    JobError::Output(format!("cannot remove {}: {e}", path.display()))
                })?;
            }
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| io_err("cannot create", e))?;
    for &table in tables {
        let sub = dir.join(table.dir_name());
        std::fs::create_dir_all(&sub)
            .map_err(|e| JobError::Output(format!("cannot create {}: {e}", sub.display())))?;
    }
    Ok(())
}

/// Writes summary.json, then `_SUCCESS` if the run succeeded.
pub fn commit(dir: &Path, summary: &JobSummary) -> Result<(), JobError> {
    let json = serde_json::to_vec_pretty(summary)
        .map_err(|e| JobError::Output(format!("cannot encode summary: {e}")))?;
    write_atomically(&dir.join(SUMMARY), &json).map_err(|e| JobError::Output(e.to_string()))?;
    if summary.succeeded() {
        write_atomically(&dir.join(SUCCESS), b"").map_err(|e| JobError::Output(e.to_string()))?;
    }
    Ok(())
}
