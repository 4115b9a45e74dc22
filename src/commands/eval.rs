//! `neardup eval`: a run against ground-truth pairs: precision, recall and F1 at pair level,
//! the adjusted Rand index at cluster level, recall by similarity band and by label.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use neardup_core::quality::{
    adjusted_rand_index, pair, pair_scores, pairs_within_groups, PairScores,
};
use neardup_io::run_dir::read_run;

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
is a label to break recall down by (a value like `sub:0.05` counts under `sub`).";

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
    #[arg(long, default_value_t = 0.8, value_name = "T")]
    pub min_jaccard: f64,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
}

struct TruthPair {
    pair: (u64, u64),
    jaccard: f64,
    family: Option<String>,
    labels: Vec<String>,
}

struct Truth {
    pairs: Vec<TruthPair>,
    label_names: Vec<String>,
}

/// A label value without its rates: `sub:0.05` -> `sub`, `del:0.01+noise` -> `del+noise`.
fn label_kind(value: &str) -> String {
    value
        .split('+')
        .map(|part| match part.split_once(':') {
            Some((kind, rate)) if rate.parse::<f64>().is_ok() => kind,
            _ => part,
        })
        .collect::<Vec<_>>()
        .join("+")
}

/// Reads the truth file. With `skip_unknown` (a sweep over a sample), pairs with an id the
/// run does not have are left out; otherwise they are an error.
fn read_truth(
    args: &EvalArgs,
    run_dir: &std::path::Path,
    doc_of: &HashMap<String, u64>,
    skip_unknown: bool,
) -> Result<Truth> {
    let path = &args.truth;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .with_context(|| format!("{}: empty file", path.display()))?
        .split('\t')
        .collect();
    let column = |name: &str| header.iter().position(|h| *h == name);
    let (Some(c1), Some(c2), Some(cj)) = (column("id1"), column("id2"), column("jaccard")) else {
        bail!(
            "{}: the header must name id1, id2 and jaccard (it has: {})",
            path.display(),
            header.join(", ")
        );
    };
    let cf = column("family");
    let label_columns: Vec<usize> = (0..header.len())
        .filter(|&i| ![Some(c1), Some(c2), Some(cj), cf].contains(&Some(i)))
        .collect();
    let mut pairs = Vec::new();
    for (n, line) in lines.enumerate() {
        let line_no = n + 2;
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() != header.len() {
            bail!(
                "{}:{line_no}: {} fields, the header has {}",
                path.display(),
                fields.len(),
                header.len()
            );
        }
        if skip_unknown && !(doc_of.contains_key(fields[c1]) && doc_of.contains_key(fields[c2])) {
            continue;
        }
        let doc = |i: usize| {
            doc_of.get(fields[i]).copied().with_context(|| {
                format!(
                    "{}:{line_no}: id {:?} is not a document of the run {}",
                    path.display(),
                    fields[i],
                    run_dir.display()
                )
            })
        };
        let jaccard: f64 = fields[cj].parse().with_context(|| {
            format!(
                "{}:{line_no}: jaccard {:?} is not a number",
                path.display(),
                fields[cj]
            )
        })?;
        pairs.push(TruthPair {
            pair: pair(doc(c1)?, doc(c2)?),
            jaccard,
            family: cf.map(|i| fields[i].to_string()),
            labels: label_columns
                .iter()
                .map(|&i| fields[i].to_string())
                .collect(),
        });
    }
    Ok(Truth {
        pairs,
        label_names: label_columns
            .iter()
            .map(|&i| header[i].to_string())
            .collect(),
    })
}

/// The pairs a run reports, with exact groups expanded: members of a group are all pairs,
/// and a near pair between two representatives stands for every member of both groups.
fn reported_pairs(pairs: &[(u64, u64, String)]) -> HashSet<(u64, u64)> {
    let mut group: HashMap<u64, Vec<u64>> = HashMap::new();
    for (a, b, kind) in pairs {
        if kind == "exact" {
            group.entry(*a).or_insert_with(|| vec![*a]).push(*b);
        }
    }
    let members = |d: u64| group.get(&d).cloned().unwrap_or_else(|| vec![d]);
    let mut out = HashSet::new();
    for g in group.values() {
        for (i, &a) in g.iter().enumerate() {
            for &b in &g[i + 1..] {
                out.insert(pair(a, b));
            }
        }
    }
    for (a, b, kind) in pairs {
        if kind != "exact" {
            for x in members(*a) {
                for y in members(*b) {
                    out.insert(pair(x, y));
                }
            }
        }
    }
    out
}

const BANDS: [(f64, f64); 6] = [
    (0.0, 0.5),
    (0.5, 0.6),
    (0.6, 0.7),
    (0.7, 0.8),
    (0.8, 0.9),
    (0.9, 1.01),
];

pub fn run(args: &EvalArgs) -> Result<()> {
    if !(0.0..=1.0).contains(&args.min_jaccard) {
        bail!(
            "--min-jaccard {} is out of range: it must be between 0 and 1",
            args.min_jaccard
        );
    }
    if let Some(corpus) = &args.sweep {
        return crate::commands::sweep::sweep(args, corpus);
    }
    let run_dir = args
        .run
        .as_deref()
        .expect("clap requires --run without --sweep");
    let scored = score(args, run_dir, false)?;
    print_scores(args, &scored)
}

/// Everything `neardup eval` reports about one run.
pub struct Scored {
    positives: usize,
    pub pairs: PairScores,
    pairs_lenient: f64,
    pub clusters: PairScores,
    clusters_lenient: f64,
    ari: Option<f64>,
    by_band: Vec<(String, (u64, f64, f64))>,
    by_label: BTreeMap<String, (u64, f64, f64)>,
}

/// Scores the run in `run_dir` against the truth of `args`.
pub fn score(args: &EvalArgs, run_dir: &std::path::Path, skip_unknown: bool) -> Result<Scored> {
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
    let truth = read_truth(args, run_dir, &doc_of, skip_unknown)?;
    let positives: HashSet<(u64, u64)> = truth
        .pairs
        .iter()
        .filter(|t| t.jaccard >= args.min_jaccard)
        .map(|t| t.pair)
        .collect();
    let any_truth: HashSet<(u64, u64)> = truth.pairs.iter().map(|t| t.pair).collect();
    let reported = reported_pairs(&outputs.pairs);
    let clustered = pairs_within_groups(&outputs.clusters);
    let scores = |predicted: &HashSet<(u64, u64)>| -> (PairScores, f64) {
        let lenient = predicted.iter().filter(|p| any_truth.contains(p)).count() as f64
            / predicted.len().max(1) as f64;
        (pair_scores(predicted, &positives), lenient)
    };
    let (pairs_score, pairs_lenient) = scores(&reported);
    let (cluster_score, cluster_lenient) = scores(&clustered);

    let recall_where = |keep: &dyn Fn(&TruthPair) -> bool| -> (u64, f64, f64) {
        let chosen: Vec<&TruthPair> = truth.pairs.iter().filter(|t| keep(t)).collect();
        let n = chosen.len().max(1) as f64;
        let hit = |set: &HashSet<(u64, u64)>| {
            chosen.iter().filter(|t| set.contains(&t.pair)).count() as f64 / n
        };
        (chosen.len() as u64, hit(&reported), hit(&clustered))
    };
    let by_band: Vec<(String, (u64, f64, f64))> = BANDS
        .iter()
        .map(|&(lo, hi)| {
            (
                format!("[{lo:.1}, {:.1})", hi.min(1.0)).replace("1.0)", "1.0]"),
                recall_where(&|t| t.jaccard >= lo && t.jaccard < hi),
            )
        })
        .collect();
    let mut by_label: BTreeMap<String, (u64, f64, f64)> = BTreeMap::new();
    for (i, name) in truth.label_names.iter().enumerate() {
        let kinds: std::collections::BTreeSet<String> = truth
            .pairs
            .iter()
            .map(|t| label_kind(&t.labels[i]))
            .collect();
        for kind in kinds {
            let r = recall_where(&|t| {
                t.jaccard >= args.min_jaccard && label_kind(&t.labels[i]) == *kind
            });
            if r.0 > 0 {
                by_label.insert(format!("{name}={kind}"), r);
            }
        }
    }
    // Cluster level: true families against the run's clusters, over all documents.
    let mut families: HashMap<String, u64> = HashMap::new();
    let mut truth_labels: HashMap<u64, u64> = HashMap::new();
    for t in &truth.pairs {
        if let Some(f) = &t.family {
            let next = families.len() as u64;
            let label = *families.entry(f.clone()).or_insert(next);
            truth_labels.insert(t.pair.0, label);
            truth_labels.insert(t.pair.1, label);
        }
    }
    let ari = (!truth_labels.is_empty())
        .then(|| adjusted_rand_index(outputs.ids.len() as u64, &outputs.clusters, &truth_labels));
    Ok(Scored {
        positives: positives.len(),
        pairs: pairs_score,
        pairs_lenient,
        clusters: cluster_score,
        clusters_lenient: cluster_lenient,
        ari,
        by_band,
        by_label,
    })
}

/// `{label: {truth_pairs, recall_pairs, recall_clusters}}`.
fn recall_json<'a>(
    rows: impl Iterator<Item = (&'a String, &'a (u64, f64, f64))>,
) -> serde_json::Map<String, serde_json::Value> {
    rows.map(|(label, (n, r, c))| {
        (
            label.clone(),
            serde_json::json!({"truth_pairs": n, "recall_pairs": r, "recall_clusters": c}),
        )
    })
    .collect()
}

fn print_scores(args: &EvalArgs, scored: &Scored) -> Result<()> {
    let Scored {
        positives,
        pairs: pairs_score,
        pairs_lenient,
        clusters: cluster_score,
        clusters_lenient: cluster_lenient,
        ari,
        by_band,
        by_label,
    } = scored;
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
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "positives: {} truth pairs with Jaccard >= {}",
        positives, args.min_jaccard
    );
    println!("| level | predicted | true positives | precision | recall | F1 | precision vs any truth pair |");
    println!("|---|---|---|---|---|---|---|");
    for (name, s, lenient) in [
        ("reported pairs", pairs_score, pairs_lenient),
        ("pairs within clusters", cluster_score, cluster_lenient),
    ] {
        println!(
            "| {name} | {} | {} | {:.4} | {:.4} | {:.4} | {:.4} |",
            s.predicted, s.true_positives, s.precision, s.recall, s.f1, lenient
        );
    }
    if let Some(ari) = ari {
        println!("adjusted Rand index (clusters vs true families): {ari:.4}");
    }
    println!(
        "\n| truth Jaccard | truth pairs | recall (pairs) | recall (clusters) |\n|---|---|---|---|"
    );
    for (band, (n, r, c)) in by_band.iter() {
        println!("| {band} | {n} | {r:.4} | {c:.4} |");
    }
    if !by_label.is_empty() {
        println!("\n| label (positives only) | truth pairs | recall (pairs) | recall (clusters) |\n|---|---|---|---|");
        for (label, (n, r, c)) in by_label.iter() {
            println!("| {label} | {n} | {r:.4} | {c:.4} |");
        }
    }
    Ok(())
}
