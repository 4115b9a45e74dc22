//! A finished run's directory scored against a truth file: the file reading around
//! [`neardup_core::eval`], shared by `neardup eval` and `neardup eval --sweep`.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use neardup_core::eval::{parse_truth, score, RunResult, Scores, Similarity, TruthError};
use neardup_io::parquet_out::PARAM_SEARCH;
use neardup_io::run_dir::{read_run, RunOutputs};

/// Scores the run in `run_dir` against the truth file `truth_path`; truth pairs with Jaccard
/// at least `min_jaccard` are the positives. With `skip_unknown` (a sweep over a sample),
/// truth pairs with an id the run does not have are left out; otherwise they are an error.
pub fn score_run(
    run_dir: &Path,
    truth_path: &Path,
    min_jaccard: f64,
    skip_unknown: bool,
) -> Result<Scores> {
    let outputs = read_run(run_dir)?;
    let mut doc_of: HashMap<String, u64> = HashMap::new();
    for (&doc, id) in &outputs.ids {
        let id = id.clone().with_context(|| {
            format!(
                "{}: documents have no ids (run without --no-id to evaluate)",
                run_dir.display()
            )
        })?;
        doc_of.insert(id, doc);
    }
    let text = std::fs::read_to_string(truth_path)
        .with_context(|| format!("cannot read {}", truth_path.display()))?;
    let truth = parse_truth(&text, |id| doc_of.get(id).copied(), skip_unknown)
        .map_err(|e| truth_error(truth_path, run_dir, e))?;
    let (mut exact, mut near) = (Vec::new(), Vec::new());
    for (a, b, kind) in &outputs.pairs {
        if kind == "exact" {
            exact.push((*a, *b));
        } else {
            near.push((*a, *b));
        }
    }
    let run = RunResult {
        documents: outputs.ids.len() as u64,
        exact: &exact,
        near: &near,
        clusters: &outputs.clusters,
        similarity: similarity(&outputs),
    };
    Ok(score(&truth, min_jaccard, &run))
}

/// How the run measured its pairs, from the search parameters its tables record: simhash
/// runs by the Hamming distance at their `k`, MinHash runs by the verified Jaccard, or
/// nothing (MinHash without verification, or tables that do not say).
fn similarity(outputs: &RunOutputs) -> Similarity<'_> {
    let Some(meta) = &outputs.meta else {
        return Similarity::Unmeasured;
    };
    let search = &meta.params[PARAM_SEARCH];
    match (
        search["lsh"].is_null(),
        search["verify"].is_null(),
        search["k"].as_u64(),
    ) {
        (true, _, Some(k)) => Similarity::Hamming {
            simhashes: &outputs.simhashes,
            k: k as u32,
        },
        (false, false, _) => Similarity::Jaccard {
            measured: &outputs.jaccard,
        },
        _ => Similarity::Unmeasured,
    }
}

/// `PATH: message` or `PATH:LINE: message`; an unknown id also names the run.
fn truth_error(path: &Path, run_dir: &Path, err: TruthError) -> anyhow::Error {
    let at = match err.line() {
        Some(line) => format!("{}:{line}", path.display()),
        None => path.display().to_string(),
    };
    match err {
        TruthError::UnknownId { .. } => anyhow!("{at}: {err} {}", run_dir.display()),
        err => anyhow::Error::new(err).context(at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(err: &anyhow::Error) -> String {
        format!("{err:#}")
    }

    #[test]
    fn truth_errors_read_as_before_the_move() {
        let (path, run) = (Path::new("t.tsv"), Path::new("out"));
        let e = truth_error(path, run, TruthError::Empty);
        assert_eq!(message(&e), "t.tsv: empty file");
        let e = truth_error(
            path,
            run,
            TruthError::UnknownId {
                line: 2,
                id: "99".into(),
            },
        );
        assert_eq!(
            message(&e),
            "t.tsv:2: id \"99\" is not a document of the run out"
        );
        let source = "x".parse::<f64>().unwrap_err();
        let e = truth_error(
            path,
            run,
            TruthError::BadJaccard {
                line: 3,
                value: "x".into(),
                source: source.clone(),
            },
        );
        assert_eq!(
            message(&e),
            format!("t.tsv:3: jaccard \"x\" is not a number: {source}")
        );
        let e = truth_error(
            path,
            run,
            TruthError::FieldCount {
                line: 4,
                fields: 2,
                header: 3,
            },
        );
        assert_eq!(message(&e), "t.tsv:4: 2 fields, the header has 3");
    }
}
