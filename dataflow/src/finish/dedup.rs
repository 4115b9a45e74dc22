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
use neardup_io::run_dir::{mark_complete, read_run, read_substrings, record_written};
use neardup_io::run_dir::{RunOutputs, REMOVED};
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
            let counts = write_dedup(&config.output, files, dir, strike, near)?;
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

/// The documents the run removes, by input file (record numbers), and a `removed.parquet`
/// row for each: the kept document it duplicates and how similar the two are.
fn removed(run: &RunOutputs) -> (HashMap<u32, HashSet<u64>>, Vec<RemovedRow>) {
    let mut removed_by_file: HashMap<u32, HashSet<u64>> = HashMap::new();
    let mut rows = Vec::new();
    for (&doc, &cluster) in &run.clusters {
        let kept = run.kept[&cluster];
        if kept == doc {
            continue;
        }
        removed_by_file
            .entry((doc >> RECORD_BITS) as u32)
            .or_default()
            .insert(doc & ((1 << RECORD_BITS) - 1));
        let hamming = (run.simhashes[&doc] ^ run.simhashes[&kept]).count_ones() as u8;
        rows.push(RemovedRow {
            doc_id: doc,
            id: run.ids.get(&doc).cloned().flatten(),
            kept_doc_id: kept,
            kept_id: run.ids.get(&kept).cloned().flatten(),
            hamming,
            jaccard: run
                .jaccard_to_kept
                .get(&doc)
                .copied()
                .or_else(|| run.jaccard.get(&(doc.min(kept), doc.max(kept))).copied()),
        });
    }
    (removed_by_file, rows)
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
) -> Result<DedupCounts, JobError> {
    let run = if near { Some(read_run(run_dir)?) } else { None };
    let (removed_by_file, mut rows) = run.as_ref().map(removed).unwrap_or_default();
    rows.sort_by_key(|r| r.doc_id);
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
    // Inputs with the same file name (from different folders) get their number in front.
    let names: Vec<_> = files.iter().map(|f| output_path(dir, f)).collect();
    let clash = names.iter().collect::<HashSet<_>>().len() < names.len();
    let outs: Vec<_> = names
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
        .collect();
    let written: Vec<String> = outs
        .iter()
        .filter_map(|o| o.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    record_written(dir, &written)?;
    let mut counts = DedupCounts::default();
    for (i, (file, out)) in files.iter().zip(&outs).enumerate() {
        let empty = HashSet::new();
        let removed = removed_by_file.get(&(i as u32)).unwrap_or(&empty);
        let kept = match strike {
            Some(fields) => {
                let none = Strikes::new();
                let strikes = strikes_by_file.get(&(i as u32)).unwrap_or(&none);
                write_struck(file, removed, strikes, fields, out)?
            }
            None => write_kept(file, removed, out)?,
        };
        counts.kept += kept.kept;
        counts.removed += kept.removed;
    }
    let Some(run) = run else {
        return commit(dir).map(|()| counts);
    };
    // removed.parquet says what made the run it comes from.
    let meta = run.meta.clone().unwrap_or_else(|| TableMeta {
        scheme: UNKNOWN_SCHEME.to_string(),
        params: serde_json::Value::Null,
    });
    let mut writer = PartWriter::<RemovedRow>::create_file(&dir.join(REMOVED), &meta)?;
    for row in rows {
        writer.push(row)?;
    }
    writer.commit()?;
    commit(dir)?;
    Ok(counts)
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
