//! `--resume`: a rerun into the output directory of a failed run reuses its fingerprints.
//!
//! Fingerprinting is where a run spends most of its time on reading, decompressing, parsing
//! and hashing the corpus; everything after it works on a few dozen bytes per document. So a
//! run leaves, in `_resume/` of its output directory (see [`neardup_io::run_dir`]):
//!
//! - the **job record** (`job.json`), written atomically when the output is prepared: what
//!   the result depends on ([`job_record`]: the parameters the processes of a job compare at
//!   start-up, every document field setting, and each input's absolute path, size and
//!   modification time to the nanosecond), and how many resume parts a complete
//!   fingerprint stage commits (one per worker of the job);
//! - one **resume part** per worker, committed (renamed from a temporary name) right after
//!   that worker's part of `fingerprints/`: every fingerprinted document as the later
//!   stages take it (simhash, exact key, keep rank, id hash, LSH band keys, archive digest)
//!   and the worker's read and fingerprint counts, so that `summary.json` is the same too.
//!
//! A run that succeeds removes `_resume/`. `--resume` ([`examine`]) then finds one of:
//!
//! - nothing (no directory, an empty one, or one holding only the cut marker of a run killed
//!   while writing it): the run starts from the beginning;
//! - a complete run (`_SUCCESS`): refused, there is nothing to resume;
//! - a failed run without a job record (another version, or something else): refused;
//! - a failed run of another job: refused, naming each difference as `k (4 vs 3)` (this
//!   run's value first);
//! - a failed run of this job whose fingerprint stage did not complete on every worker:
//!   the run starts from the beginning and replaces it (a missing part's documents came
//!   from every reader, so correctness needs all of them read again);
//! - a failed run of this job with every resume part: the dataflow reads the resume parts
//!   (each verified, see [`crate::stages::fingerprint::resume`]: a damaged part, one copied
//!   over another or from a run of another job is refused, naming it) instead of the inputs, `fingerprints/` is kept as it is, the other tables are written
//!   again. The result is the one a clean run gives: the later stages see the same
//!   documents, and results never depend on the number of workers (a resumed run may use
//!   another `-w`).
//!
//! What is not resumed ([`supported`], refused before anything starts): verification
//! (`--verify jaccard|minhash` compares shingle sets or signatures, kept in memory only),
//! jobs of several processes, standard input (it cannot be compared), and `neardup search`
//! (its input is fingerprints already). `--write-dedup` reads the inputs after the search
//! as always, which the job record has shown to be unchanged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{absolute, ConfigError, JobConfig, JobInput};
use neardup_io::run_dir::{resume_part_name, RunDir, JOB_RECORD, LOCK, MARKER, SUCCESS};

/// Whether a job resumes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Resume {
    /// A run from the start (no `--resume`).
    #[default]
    Off,
    /// `--resume` was asked for; [`crate::run_job`] decides with [`examine`].
    Asked,
    /// Resuming: these resume parts stand for the inputs.
    From(Vec<PathBuf>),
}

/// What `--resume` found in the output directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Examined {
    /// No earlier run: start from the beginning.
    Nothing,
    /// A failed run of this job with every resume part.
    Fingerprints { parts: Vec<PathBuf> },
    /// A failed run of this job whose fingerprint stage had not committed every part:
    /// start from the beginning, replacing it.
    Incomplete { committed: usize, expected: usize },
}

/// The job record's key for the number of resume parts a complete fingerprint stage leaves.
const RESUME_PARTS: &str = "resume_parts";

/// Settings that the results do not depend on: left out of the job record, so that a
/// resumed run may change them (another number of workers, another memory plan).
const NOT_RECORDED: [&str; 6] = [
    "workers",
    "hostfile",
    "peer_timeout",
    "batch",
    "table_rounds",
    "output",
];

/// Refuses `--resume` for what it cannot resume (see the module documentation).
pub fn supported(config: &JobConfig) -> Result<(), ConfigError> {
    let files = match &config.input {
        JobInput::Documents { files, .. } => files,
        JobInput::Fingerprints { .. } => {
            return Err(ConfigError::ResumeUnsupported(
                "neardup search reads fingerprints already: run it again",
            ))
        }
    };
    if config.verify.is_some() {
        return Err(ConfigError::ResumeUnsupported(
            "verification (--verify jaccard|minhash) needs the documents' shingle sets or signatures, which a failed run does not keep: run again without --resume, or with --verify none",
        ));
    }
    if config.parallelism.processes() > 1 {
        return Err(ConfigError::ResumeUnsupported(
            "a job of several processes cannot be resumed yet: run again without --resume",
        ));
    }
    if files.iter().any(|f| f.is_stdin()) {
        return Err(ConfigError::ResumeUnsupported(
            "standard input cannot be compared with what the failed run read",
        ));
    }
    Ok(())
}

/// What the job's result depends on, as recorded in `_resume/job.json` and compared by
/// `--resume`: [`JobConfig::fingerprint`] without the settings of `NOT_RECORDED`, with
/// each input's path, size and modification time (nanoseconds: a file rewritten in place
/// to the same size is caught by its time), every document field setting, the
/// `--write-dedup` directory and the cluster warning.
pub fn job_record(config: &JobConfig) -> BTreeMap<String, Value> {
    let mut record = config.fingerprint();
    for key in NOT_RECORDED {
        record.remove(key);
    }
    if let JobInput::Documents { files, fields } = &config.input {
        let inputs: Vec<Value> = files.iter().map(|f| describe_input(&f.path)).collect();
        record.insert("inputs".into(), json!(inputs));
        record.insert("fields".into(), json!(format!("{fields:?}")));
    }
    record.insert(
        "write_dedup".into(),
        json!(config.write_dedup.as_deref().map(absolute)),
    );
    record.insert("cluster_warning".into(), json!(config.cluster_warning));
    record
}

/// The job's identity: xxh3-128 of its [`job_record`], so the same for a resumed run and for
/// a run of the same job again, and another for other inputs or parameters. Every resume
/// part carries it (a part of another job is refused), and a saved index names the batch
/// of a generation by it in hex ([`neardup_io::index::GenerationEntry::batch`]).
pub fn record_id(config: &JobConfig) -> u128 {
    let record = serde_json::to_vec(&job_record(config)).expect("a map of JSON values encodes");
    xxhash_rust::xxh3::xxh3_128(&record)
}

/// An input as the job record has it: absolute path, size and modification time.
fn describe_input(path: &Path) -> Value {
    match std::fs::metadata(path) {
        Ok(meta) => {
            let modified = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| format!("{}.{:09}", d.as_secs(), d.subsec_nanos()));
            json!({"path": absolute(path), "bytes": meta.len(), "modified": modified})
        }
        Err(_) => json!({"path": absolute(path), "bytes": null, "modified": null}),
    }
}

/// Writes the job record (atomically) into the prepared output directory, with the number
/// of resume parts a complete fingerprint stage of this job leaves.
pub fn write_record(config: &JobConfig) -> Result<(), neardup_io::IoError> {
    let mut record = job_record(config);
    record.insert(
        RESUME_PARTS.into(),
        json!(config.parallelism.processes() * config.parallelism.workers),
    );
    let path = RunDir::new(&config.output).resume().join(JOB_RECORD);
    let bytes = serde_json::to_vec_pretty(&record).expect("a map of JSON values encodes");
    neardup_io::atomic::write_atomically(&path, &bytes)
}

/// Looks at the output directory for `--resume` (see the module documentation).
pub fn examine(config: &JobConfig) -> Result<Examined, ConfigError> {
    let dir = &config.output;
    let entries: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != LOCK && n != MARKER)
            .collect(),
        Err(_) => return Ok(Examined::Nothing),
    };
    // Empty, or what a run killed while writing its marker left.
    if entries.is_empty() || neardup_io::run_dir::only_cut_markers(dir).is_ok_and(|c| c.is_some()) {
        return Ok(Examined::Nothing);
    }
    if entries.iter().any(|n| n == SUCCESS) {
        return Err(ConfigError::ResumeComplete { dir: dir.clone() });
    }
    let resume = RunDir::new(dir).resume();
    let path = resume.join(JOB_RECORD);
    let text = match std::fs::read(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ConfigError::ResumeNoRecord {
                dir: dir.clone(),
                record: path,
            })
        }
        Err(e) => {
            return Err(ConfigError::ResumeRecord {
                path,
                cause: e.to_string(),
            })
        }
    };
    let mut theirs: BTreeMap<String, Value> =
        serde_json::from_slice(&text).map_err(|e| ConfigError::ResumeRecord {
            path: path.clone(),
            cause: e.to_string(),
        })?;
    let expected = theirs
        .remove(RESUME_PARTS)
        .and_then(|v| v.as_u64())
        .ok_or_else(|| ConfigError::ResumeRecord {
            path: path.clone(),
            cause: format!("no number {RESUME_PARTS:?}"),
        })? as usize;
    let differences = differences(&job_record(config), &theirs);
    if !differences.is_empty() {
        return Err(ConfigError::ResumeMismatch {
            dir: dir.clone(),
            differences,
        });
    }
    let parts: Vec<PathBuf> = (0..expected)
        .map(|part| resume.join(resume_part_name(part)))
        .collect();
    let committed = parts.iter().filter(|p| p.is_file()).count();
    if committed < expected || expected == 0 {
        return Ok(Examined::Incomplete {
            committed,
            expected,
        });
    }
    Ok(Examined::Fingerprints { parts })
}

/// The fields in which this run's record (`ours`) differs from the failed run's, as
/// `field (ours vs theirs)`; a changed input is named with what changed of it.
fn differences(ours: &BTreeMap<String, Value>, theirs: &BTreeMap<String, Value>) -> Vec<String> {
    let mut found = crate::control::differences(ours, theirs);
    let (Some(Value::Array(a)), Some(Value::Array(b))) = (ours.get("inputs"), theirs.get("inputs"))
    else {
        return found;
    };
    if a.len() != b.len() {
        found.retain(|d| !d.starts_with("inputs ("));
        found.push(format!("inputs ({} files vs {})", a.len(), b.len()));
        return found;
    }
    found.retain(|d| !d.starts_with("inputs ("));
    for (x, y) in a.iter().zip(b) {
        if x == y {
            continue;
        }
        let path = x.get("path").and_then(Value::as_str).unwrap_or("?");
        if x.get("path") != y.get("path") {
            found.push(format!(
                "input ({path} vs {})",
                y.get("path").unwrap_or(&Value::Null)
            ));
            continue;
        }
        for field in ["bytes", "modified"] {
            let show = |v: &Value| v.get(field).map_or("missing".into(), |v| v.to_string());
            if x.get(field) != y.get(field) {
                found.push(format!(
                    "input {path}: {field} ({} vs {})",
                    show(x),
                    show(y)
                ));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn differences_name_the_parameter_and_what_changed_of_an_input() {
        let input = |bytes: u64, modified: &str| json!([{"path": "/data/a.jsonl", "bytes": bytes, "modified": modified}]);
        let ours = record(&[("k", json!(4)), ("inputs", input(120, "7.000000001"))]);
        let theirs = record(&[("k", json!(3)), ("inputs", input(100, "7.000000001"))]);
        assert_eq!(
            differences(&ours, &theirs),
            vec!["k (4 vs 3)", "input /data/a.jsonl: bytes (120 vs 100)"]
        );
        let later = record(&[("k", json!(3)), ("inputs", input(100, "9.000000000"))]);
        assert_eq!(
            differences(&later, &theirs),
            vec![r#"input /data/a.jsonl: modified ("9.000000000" vs "7.000000001")"#]
        );
        let more = record(&[("k", json!(3)), ("inputs", json!([1, 2]))]);
        assert_eq!(differences(&more, &theirs), vec!["inputs (2 files vs 1)"]);
        assert!(differences(&theirs, &theirs).is_empty());
    }
}
