//! `neardup eval`: a run against ground-truth pairs: precision, recall and F1 at pair level,
//! the adjusted Rand index at cluster level, recall by similarity band and by label, and
//! precision and recall by the similarity the run measured (Hamming distance or Jaccard).

use std::path::PathBuf;

use anyhow::{bail, Result};
use neardup_core::eval::{Recall, Scores};
use neardup_core::DEFAULT_JACCARD;

use std::fmt::Write as _;

use crate::commands::{sweep, write_stdout};
use crate::run_scores::score_run;

pub const EVAL_EXAMPLES: &str = "\
Examples:
  Score a run against the planted truth (pairs with Jaccard >= 0.8 are the positives):
    neardup eval --run out --truth ../shared/corpora/dev-small/truth.tsv

  Against every truth pair, as JSON:
    neardup eval --run out --truth truth.tsv --min-jaccard 0 --json

  Compare a grid of methods on the first 10,000 records of a corpus:
    neardup eval --sweep corpus.jsonl --truth truth.tsv

The truth file is tab-separated with a header naming at least id1, id2 and jaccard; a
`family` column gives the true clusters (for the adjusted Rand index); every other column
is a label to break recall down by (a value like `sub:0.05` counts under `sub`).

Precision and recall by similarity (`by_similarity` in --json): every reported pair and
every positive in one band of the similarity the run measured: for simhash one band per
Hamming distance 0 to k, then k+1 to 2k, then beyond (positives the run missed); for a
verified MinHash run Jaccard tenths (a missed positive by its truth Jaccard); an unverified
MinHash run has one band, `unmeasured`.";

#[derive(clap::Args, Debug)]
pub struct EvalArgs {
    /// The output directory of a finished run
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present = "sweep",
        conflicts_with = "sweep"
    )]
    pub run: Option<PathBuf>,
    /// Instead of scoring one run: run a small grid of methods (simhash k, MinHash
    /// threshold and shingle size) on a sample of this JSONL corpus and print the trade-off
    #[arg(long, value_name = "CORPUS")]
    pub sweep: Option<PathBuf>,
    /// With --sweep: the first N records of the corpus (0 = all of it)
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub sample: usize,
    /// Ground truth: TSV with id1, id2, jaccard (and optionally family and label columns)
    #[arg(long, value_name = "TSV")]
    pub truth: PathBuf,
    /// Truth pairs at or above this Jaccard similarity are the positives
    #[arg(long, default_value_t = DEFAULT_JACCARD, value_name = "T")]
    pub min_jaccard: f64,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &EvalArgs) -> Result<()> {
    if !(0.0..=1.0).contains(&args.min_jaccard) {
        bail!(
            "--min-jaccard {} is out of range: it must be between 0 and 1",
            args.min_jaccard
        );
    }
    if let Some(corpus) = &args.sweep {
        return sweep::sweep(&sweep::SweepOptions {
            corpus,
            sample: args.sample,
            truth: &args.truth,
            min_jaccard: args.min_jaccard,
        });
    }
    let run_dir = args
        .run
        .as_deref()
        .expect("clap requires --run without --sweep");
    let scores = score_run(run_dir, &args.truth, args.min_jaccard, false)?;
    print_scores(args, &scores)
}

/// `{label: {truth_pairs, recall_pairs, recall_clusters}}`.
fn recall_json<'a>(
    rows: impl Iterator<Item = (&'a String, &'a Recall)>,
) -> serde_json::Map<String, serde_json::Value> {
    rows.map(|(label, r)| {
        (
            label.clone(),
            serde_json::json!({
                "truth_pairs": r.truth_pairs,
                "recall_pairs": r.recall_pairs,
                "recall_clusters": r.recall_clusters,
            }),
        )
    })
    .collect()
}

/// Prints the scores: the whole text first, then one write to stdout (a closed pipe ends
/// quietly, a full disk is an error; see [`write_stdout`]).
fn print_scores(args: &EvalArgs, scores: &Scores) -> Result<()> {
    write_stdout(&format_scores(args, scores)?)?;
    Ok(())
}

fn format_scores(args: &EvalArgs, scores: &Scores) -> Result<String> {
    let mut text = String::new();
    let Scores {
        positives,
        pairs: pairs_score,
        pairs_precision_any_truth: pairs_lenient,
        clusters: cluster_score,
        clusters_precision_any_truth: cluster_lenient,
        adjusted_rand_index: ari,
        by_band,
        by_label,
        by_similarity,
        similarity_measure,
    } = scores;
    let (pairs_score, pairs_lenient, cluster_score, cluster_lenient, ari) = (
        *pairs_score,
        *pairs_lenient,
        *cluster_score,
        *cluster_lenient,
        *ari,
    );
    if args.json {
        let band_json = recall_json(by_band.iter().map(|(k, v)| (k, v)));
        let label_json = recall_json(by_label.iter());
        let out = serde_json::json!({
            "min_jaccard": args.min_jaccard,
            "pairs": pairs_score, "pairs_precision_any_truth": pairs_lenient,
            "cluster_pairs": cluster_score, "cluster_pairs_precision_any_truth": cluster_lenient,
            "adjusted_rand_index": ari,
            "recall_by_jaccard": band_json, "recall_by_label": label_json,
            "similarity_measure": similarity_measure,
            "by_similarity": by_similarity,
        });
        writeln!(text, "{}", serde_json::to_string_pretty(&out)?)?;
        return Ok(text);
    }
    writeln!(
        text,
        "positives: {} truth pairs with Jaccard >= {}",
        positives, args.min_jaccard
    )?;
    writeln!(
            text,"| level | predicted | true positives | precision | recall | F1 | precision vs any truth pair |")?;
    writeln!(text, "|---|---|---|---|---|---|---|")?;
    for (name, s, lenient) in [
        ("reported pairs", pairs_score, pairs_lenient),
        ("pairs within clusters", cluster_score, cluster_lenient),
    ] {
        writeln!(
            text,
            "| {name} | {} | {} | {:.4} | {:.4} | {:.4} | {:.4} |",
            s.predicted, s.true_positives, s.precision, s.recall, s.f1, lenient
        )?;
    }
    if let Some(ari) = ari {
        writeln!(
            text,
            "adjusted Rand index (clusters vs true families): {ari:.4}"
        )?;
    }
    writeln!(
        text,
        "\n| truth Jaccard | truth pairs | recall (pairs) | recall (clusters) |\n|---|---|---|---|"
    )?;
    for (band, r) in by_band.iter() {
        let (n, p, c) = (r.truth_pairs, r.recall_pairs, r.recall_clusters);
        writeln!(text, "| {band} | {n} | {p:.4} | {c:.4} |")?;
    }
    writeln!(
        text,
        "\n| {} | reported pairs | positives | true positives | precision | recall |\n|---|---|---|---|---|---|",
        similarity_heading(similarity_measure)
    )?;
    for b in by_similarity {
        writeln!(
            text,
            "| {} | {} | {} | {} | {} | {} |",
            b.band,
            b.predicted,
            b.positives,
            b.true_positives,
            ratio(b.precision),
            ratio(b.recall)
        )?;
    }
    if !by_label.is_empty() {
        writeln!(
            text,"\n| label (positives only) | truth pairs | recall (pairs) | recall (clusters) |\n|---|---|---|---|")?;
        for (label, r) in by_label.iter() {
            let (n, p, c) = (r.truth_pairs, r.recall_pairs, r.recall_clusters);
            writeln!(text, "| {label} | {n} | {p:.4} | {c:.4} |")?;
        }
    }
    Ok(text)
}

/// The heading of the by-similarity table: what its bands are of.
pub fn similarity_heading(measure: &str) -> &'static str {
    match measure {
        "hamming" => "Hamming distance",
        "jaccard" => "Jaccard (as verified)",
        _ => "similarity (not measured)",
    }
}

/// A precision or recall to 4 places, `-` where there was nothing to divide by.
pub fn ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.4}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_state_the_default_positives() {
        assert!(EVAL_EXAMPLES.contains(&format!("(pairs with Jaccard >= {DEFAULT_JACCARD} are")));
    }
}
