//! The deduplicated corpus (`--write-dedup DIR`, step 7 of [`crate::finish`]): after a
//! successful run, the kept documents in each input file's own format, and `removed.parquet`
//! saying which document each removed one was a duplicate of.
//!
//! This pass runs on process 0 after the job has committed, reading the run's own outputs
//! back (the decisions are there: every worker of every process wrote its share of the
//! clusters, and they lie together only in the committed parts) and every input file once
//! more. It is serial: a corpus spread over many processes would rather have each process
//! copy its own units; the outputs would be the same.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use neardup_io::dedup_out::{output_path, write_kept, write_struck};
use neardup_io::input::InputFile;
use neardup_io::parquet_out::{PartWriter, RemovedRow, TableMeta, UNKNOWN_SCHEME};
use neardup_io::record::FieldSpec;
use neardup_io::run_dir::RemovedRows;
use neardup_io::run_dir::{mark_complete, read_substrings, record_written, search_meta, REMOVED};
use neardup_io::source::Strikes;

use super::RunOutcome;
use crate::config::{JobConfig, JobInput};
use crate::records::RECORD_BITS;
use crate::JobError;

/// Step 7 of the end of a run: on process 0 (`lead`), a run that succeeded with
/// `--write-dedup` writes its deduplicated corpus; its counts go to the summary and the
/// outcome. Any other result is returned as it is.
pub(crate) fn after_success(
    config: &JobConfig,
    result: Result<RunOutcome, JobError>,
    lead: bool,
) -> Result<RunOutcome, JobError> {
    match (result, &config.write_dedup, &config.input) {
        (Ok(mut outcome), Some(dir), JobInput::Documents { files, fields }) if lead => {
            let strike = config.substrings.filter(|job| job.strike).map(|_| fields);
            let near = !config.substrings.is_some_and(|job| job.only);
            let sorts = DedupSorts {
                dir: crate::stages::near::spill::sort_dir(&config.spill_root(), 0, "write-dedup"),
                budget: config.sort_memory.unwrap_or_else(|| {
                    crate::config::sort_budget(
                        config.memory_limit,
                        1,
                        crate::config::DEDUP_SORT_SHARE,
                    )
                }),
            };
            let counts = write_dedup(&config.output, files, dir, strike, near, &sorts);
            // The sorts removed their own directories; those above them go too once empty
            // (only empty ones: nothing else is ever removed).
            for dir in sorts.dir.ancestors().take(3) {
                let _ = std::fs::remove_dir(dir);
            }
            let counts = counts?;
            outcome.summary.dedup = Some((counts.kept, counts.removed));
            outcome.dedup = Some(counts);
            Ok(outcome)
        }
        (result, _, _) => result,
    }
}

/// What the pass wrote.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct DedupCounts {
    pub kept: u64,
    pub removed: u64,
}

/// Where `--write-dedup`'s sorts of the removed documents write their runs, and the memory
/// each keeps ([`RemovedRows`]).
pub struct DedupSorts {
    pub dir: std::path::PathBuf,
    pub budget: usize,
}

/// Writes the deduplicated corpus of the run in `run_dir` (whose inputs are `files`) to `dir`,
/// which the job prepared and holds locked since its start (with the run directory, see
/// [`crate::output::prepare`]). The names of the kept files are recorded in the directory's
/// marker before they are written, so that a later `--overwrite` removes them and nothing
/// else. `_SUCCESS` is written last, unless the process was stopped meanwhile.
///
/// With `strike` (`--strike substrings`), the ranges of the run's `substrings/` are taken out
/// of the kept documents' text, read back with these fields. With `near` false (`neardup
/// substrings`), no document is removed and no `removed.parquet` is written.
pub fn write_dedup(
    run_dir: &Path,
    files: &[InputFile],
    dir: &Path,
    strike: Option<&FieldSpec>,
    near: bool,
    sorts: &DedupSorts,
) -> Result<DedupCounts, JobError> {
    let removed = if near {
        Some(RemovedRows::read(run_dir, &sorts.dir, sorts.budget)?)
    } else {
        None
    };
    // The removed rows in doc order, so file by file: each file takes its own.
    let mut rows = match &removed {
        Some(r) => Some(r.rows(&sorts.dir)?.peekable()),
        None => None,
    };
    let mut strikes_by_file: HashMap<u32, Strikes> = HashMap::new();
    if strike.is_some() {
        for (doc, start, end) in read_substrings(run_dir)? {
            strikes_by_file
                .entry((doc >> RECORD_BITS) as u32)
                .or_default()
                .entry(doc & ((1 << RECORD_BITS) - 1))
                .or_default()
                .push((start, end));
        }
    }
    let outs = output_names(dir, files);
    let written: Vec<String> = outs
        .iter()
        .filter_map(|o| o.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    record_written(dir, &written)?;
    // removed.parquet says what made the run it comes from.
    let mut writer = match &removed {
        Some(_) => {
            let meta = search_meta(run_dir)?.unwrap_or_else(|| TableMeta {
                scheme: UNKNOWN_SCHEME.to_string(),
                params: serde_json::Value::Null,
            });
            Some(PartWriter::<RemovedRow>::create_file(
                &dir.join(REMOVED),
                &meta,
            )?)
        }
        None => None,
    };
    let mut counts = DedupCounts::default();
    for (i, (file, out)) in files.iter().zip(&outs).enumerate() {
        let mut removed = HashSet::new();
        while let Some(row) = rows.as_mut().and_then(|rows| {
            rows.next_if(|r| {
                r.as_ref()
                    .map_or(true, |r| r.doc_id >> RECORD_BITS <= i as u64)
            })
        }) {
            let row = row?;
            removed.insert(row.doc_id & ((1 << RECORD_BITS) - 1));
            writer
                .as_mut()
                .expect("rows come with a writer")
                .push(row)?;
        }
        let kept = match strike {
            Some(fields) => {
                let none = Strikes::new();
                let strikes = strikes_by_file.get(&(i as u32)).unwrap_or(&none);
                write_struck(file, &removed, strikes, fields, out)?
            }
            None => write_kept(file, &removed, out)?,
        };
        counts.kept += kept.kept;
        counts.removed += kept.removed;
    }
    if let Some(row) = rows.as_mut().and_then(Iterator::next) {
        // A document of a file past the inputs: the run is not of these inputs.
        let doc = row?.doc_id;
        return Err(JobError::Cluster(format!(
            "--write-dedup: the run removes document {doc} of input file {}, but it has {} input files",
            doc >> RECORD_BITS,
            files.len()
        )));
    }
    if let Some(writer) = writer {
        writer.commit()?;
    }
    commit(dir)?;
    Ok(counts)
}

/// Where each input's kept records go in `dir`: its file name, and where two inputs have the
/// same name (from different folders), each with its number in front.
fn output_names(dir: &Path, files: &[InputFile]) -> Vec<std::path::PathBuf> {
    // Inputs with the same file name (from different folders) get their number in front.
    let names: Vec<_> = files.iter().map(|f| output_path(dir, f)).collect();
    let clash = names.iter().collect::<HashSet<_>>().len() < names.len();
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut out = name.clone();
            if clash {
                out.set_file_name(format!(
                    "{i:05}-{}",
                    out.file_name()
                        .map(|n| n.to_string_lossy())
                        .unwrap_or_default()
                ));
            }
            out
        })
        .collect()
}

/// `_SUCCESS` in the deduplicated corpus, unless the process was stopped meanwhile.
fn commit(dir: &Path) -> Result<(), JobError> {
    crate::output::stop::commit_unless_stopped(dir, |stopped| match stopped {
        Some(reason) => Err(JobError::Cluster(format!(
            "the deduplicated corpus in {} is incomplete: the run was {reason}",
            dir.display()
        ))),
        None => mark_complete(dir).map(|()| true).map_err(JobError::from),
    })?;
    Ok(())
}
