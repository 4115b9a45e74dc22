//! Scoring a run against ground truth, as `neardup eval` reports it: the truth file's
//! format, the pairs a run reports (exact groups expanded), precision, recall and F1 of
//! reported pairs and of pairs within clusters, the adjusted Rand index against true
//! families, recall by truth-similarity band and by label, and precision and recall by the
//! similarity the run measures ([`score_by_similarity`]): how both fall off as pairs get
//! less alike, which says whether a threshold is too tight or too loose.
//!
//! No I/O: the truth file is given as text, the run as its pairs and clusters.
//!
//! ```
//! use std::collections::HashMap;
//! use neardup_core::eval::{parse_truth, score, RunResult, Similarity};
//!
//! let text = "id1\tid2\tjaccard\na\tb\t0.9\nb\tc\t0.5\n";
//! let doc = |id: &str| match id { "a" => Some(0), "b" => Some(1), "c" => Some(2), _ => None };
//! let truth = parse_truth(text, doc, false).unwrap();
//! let clusters: HashMap<u64, u64> = [(0, 0), (1, 0)].into();
//! let run = RunResult {
//!     documents: 3,
//!     exact: &[],
//!     near: &[(0, 1)],
//!     clusters: &clusters,
//!     similarity: Similarity::Unmeasured,
//! };
//! let scores = score(&truth, 0.8, &run);
//! assert_eq!(scores.positives, 1);
//! assert_eq!(scores.pairs.recall, 1.0);
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::num::ParseFloatError;

use crate::quality::{adjusted_rand_index, pair, pair_scores, pairs_within_groups, PairScores};

/// One row of the truth file.
#[derive(Clone, Debug, PartialEq)]
pub struct TruthPair {
    /// The two documents (as doc numbers of the run), smaller first.
    pub pair: (u64, u64),
    /// Their true Jaccard similarity.
    pub jaccard: f64,
    /// The `family` column, when the file has one.
    pub family: Option<String>,
    /// The values of the label columns, in the order of [`Truth::label_names`].
    pub labels: Vec<String>,
}

/// A parsed truth file.
#[derive(Clone, Debug, PartialEq)]
pub struct Truth {
    pub pairs: Vec<TruthPair>,
    /// Every column but id1, id2, jaccard and family: labels to break recall down by.
    pub label_names: Vec<String>,
}

/// What is wrong with a truth file. The message names no file: the caller puts the file
/// name (and, when [`TruthError::line`] is `Some`, the line number) in front.
#[derive(Debug, thiserror::Error)]
pub enum TruthError {
    #[error("empty file")]
    Empty,
    #[error("the header must name id1, id2 and jaccard (it has: {})", .header.join(", "))]
    MissingColumns { header: Vec<String> },
    #[error("{fields} fields, the header has {header}")]
    FieldCount {
        line: usize,
        fields: usize,
        header: usize,
    },
    /// An id that is not a document of the run.
    #[error("id {id:?} is not a document of the run")]
    UnknownId { line: usize, id: String },
    #[error("jaccard {value:?} is not a number")]
    BadJaccard {
        line: usize,
        value: String,
        #[source]
        source: ParseFloatError,
    },
    /// A Jaccard similarity that parses but is not in [0, 1] (NaN, infinities, 7.5, -1).
    #[error("jaccard {value:?} is not a number in [0, 1]")]
    JaccardOutOfRange { line: usize, value: String },
    /// Both ids of a pair are the same document.
    #[error("id {id:?} is paired with itself")]
    SelfPair { line: usize, id: String },
    /// A header and no pairs: every score would be vacuous (recall 1.0 of nothing).
    #[error("no pairs after the header")]
    NoPairs,
}

impl TruthError {
    /// The 1-based line of the file the error is on (the header is line 1), if it is about
    /// one line.
    pub fn line(&self) -> Option<usize> {
        match self {
            TruthError::Empty | TruthError::MissingColumns { .. } | TruthError::NoPairs => None,
            TruthError::FieldCount { line, .. }
            | TruthError::UnknownId { line, .. }
            | TruthError::BadJaccard { line, .. }
            | TruthError::JaccardOutOfRange { line, .. }
            | TruthError::SelfPair { line, .. } => Some(*line),
        }
    }
}

/// Parses a truth file: tab-separated, a header naming at least `id1`, `id2` and
/// `jaccard`; an optional `family` column; every other column a label.
///
/// `doc_of` maps an id to the run's doc number. With `skip_unknown` (a sweep over a sample),
/// pairs with an id `doc_of` does not know are left out; otherwise they are an error.
/// Jaccard values must be numbers in [0, 1], a pair's two ids must differ, and the file must
/// have at least one pair (a file that is only a header is refused, even if `skip_unknown`
/// would then leave no pair anyway). Errors are reported for the first bad line.
pub fn parse_truth(
    text: &str,
    doc_of: impl Fn(&str) -> Option<u64>,
    skip_unknown: bool,
) -> Result<Truth, TruthError> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or(TruthError::Empty)?.split('\t').collect();
    let column = |name: &str| header.iter().position(|h| *h == name);
    let (Some(c1), Some(c2), Some(cj)) = (column("id1"), column("id2"), column("jaccard")) else {
        return Err(TruthError::MissingColumns {
            header: header.iter().map(|h| h.to_string()).collect(),
        });
    };
    let cf = column("family");
    let label_columns: Vec<usize> = (0..header.len())
        .filter(|&i| ![Some(c1), Some(c2), Some(cj), cf].contains(&Some(i)))
        .collect();
    let mut pairs = Vec::new();
    let mut lines = lines.peekable();
    if lines.peek().is_none() {
        return Err(TruthError::NoPairs);
    }
    for (n, line_text) in lines.enumerate() {
        let line = n + 2;
        let fields: Vec<&str> = line_text.split('\t').collect();
        if fields.len() != header.len() {
            return Err(TruthError::FieldCount {
                line,
                fields: fields.len(),
                header: header.len(),
            });
        }
        if fields[c1] == fields[c2] {
            return Err(TruthError::SelfPair {
                line,
                id: fields[c1].to_string(),
            });
        }
        let (d1, d2) = (doc_of(fields[c1]), doc_of(fields[c2]));
        if skip_unknown && (d1.is_none() || d2.is_none()) {
            continue;
        }
        let jaccard: f64 = fields[cj]
            .parse()
            .map_err(|source| TruthError::BadJaccard {
                line,
                value: fields[cj].to_string(),
                source,
            })?;
        if !(0.0..=1.0).contains(&jaccard) {
            return Err(TruthError::JaccardOutOfRange {
                line,
                value: fields[cj].to_string(),
            });
        }
        let known = |d: Option<u64>, i: usize| {
            d.ok_or_else(|| TruthError::UnknownId {
                line,
                id: fields[i].to_string(),
            })
        };
        pairs.push(TruthPair {
            pair: pair(known(d1, c1)?, known(d2, c2)?),
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

/// A label value without its rates: `sub:0.05` -> `sub`, `del:0.01+noise` -> `del+noise`.
pub fn label_kind(value: &str) -> String {
    value
        .split('+')
        .map(|part| match part.split_once(':') {
            Some((kind, rate)) if rate.parse::<f64>().is_ok() => kind,
            _ => part,
        })
        .collect::<Vec<_>>()
        .join("+")
}

/// The pairs a run reports, with exact groups expanded: members of a group are all pairs,
/// and a near pair between two representatives stands for every member of both groups.
///
/// `exact` are the run's exact pairs (representative, member); `near` every other pair.
pub fn reported_pairs(exact: &[(u64, u64)], near: &[(u64, u64)]) -> HashSet<(u64, u64)> {
    reported_pairs_measured(exact, near, Similarity::Unmeasured)
        .into_keys()
        .collect()
}

/// The bands of truth Jaccard similarity recall is broken down by, `[lo, hi)`.
pub const BANDS: [(f64, f64); 6] = [
    (0.0, 0.5),
    (0.5, 0.6),
    (0.6, 0.7),
    (0.7, 0.8),
    (0.8, 0.9),
    (0.9, 1.01),
];

/// How a band is shown: `[0.8, 0.9)`, and the last one `[0.9, 1.0]`.
pub fn band_label((lo, hi): (f64, f64)) -> String {
    format!("[{lo:.1}, {:.1})", hi.min(1.0)).replace("1.0)", "1.0]")
}

/// What a run found, as [`score`] needs it.
#[derive(Clone, Copy, Debug)]
pub struct RunResult<'a> {
    /// How many documents the run has (the adjusted Rand index is over all of them).
    pub documents: u64,
    /// Exact pairs (representative, member).
    pub exact: &'a [(u64, u64)],
    /// Every other reported pair.
    pub near: &'a [(u64, u64)],
    /// Cluster label of every document in a cluster.
    pub clusters: &'a HashMap<u64, u64>,
    /// How the run measures a pair's similarity (for [`Scores::by_similarity`]).
    pub similarity: Similarity<'a>,
}

/// Recall of one slice of the truth pairs.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Recall {
    /// How many truth pairs are in the slice.
    pub truth_pairs: u64,
    /// The fraction of them the run reports (exact groups expanded).
    pub recall_pairs: f64,
    /// The fraction of them that end up in the same cluster.
    pub recall_clusters: f64,
}

/// Everything `neardup eval` reports about one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Scores {
    /// Truth pairs at or above the minimum Jaccard similarity.
    pub positives: usize,
    /// Reported pairs against the positives.
    pub pairs: PairScores,
    /// The fraction of reported pairs that are a truth pair at any similarity.
    pub pairs_precision_any_truth: f64,
    /// Pairs within clusters against the positives.
    pub clusters: PairScores,
    /// The fraction of pairs within clusters that are a truth pair at any similarity.
    pub clusters_precision_any_truth: f64,
    /// Clusters against the true families (`None` without a family column).
    pub adjusted_rand_index: Option<f64>,
    /// Recall of all truth pairs in each of [`BANDS`], labelled by [`band_label`].
    pub by_band: Vec<(String, Recall)>,
    /// Recall of the positives by `column=kind` of each label column (see [`label_kind`]);
    /// only labels some positive has.
    pub by_label: BTreeMap<String, Recall>,
    /// Precision and recall of reported pairs by the similarity the run measures (see
    /// [`score_by_similarity`]).
    pub by_similarity: Vec<BandScores>,
    /// What [`Scores::by_similarity`] is by: `hamming`, `jaccard` or [`UNMEASURED`].
    pub similarity_measure: &'static str,
}

/// Scores `run` against `truth`; truth pairs with Jaccard at least `min_jaccard` are the
/// positives.
pub fn score(truth: &Truth, min_jaccard: f64, run: &RunResult) -> Scores {
    let positives: HashSet<(u64, u64)> = truth
        .pairs
        .iter()
        .filter(|t| t.jaccard >= min_jaccard)
        .map(|t| t.pair)
        .collect();
    let any_truth: HashSet<(u64, u64)> = truth.pairs.iter().map(|t| t.pair).collect();
    let reported = reported_pairs(run.exact, run.near);
    let clustered = pairs_within_groups(run.clusters);
    let scores = |predicted: &HashSet<(u64, u64)>| -> (PairScores, f64) {
        let lenient = predicted.iter().filter(|p| any_truth.contains(p)).count() as f64
            / predicted.len().max(1) as f64;
        (pair_scores(predicted, &positives), lenient)
    };
    let (pairs_score, pairs_lenient) = scores(&reported);
    let (cluster_score, cluster_lenient) = scores(&clustered);

    let recall_where = |keep: &dyn Fn(&TruthPair) -> bool| -> Recall {
        let chosen: Vec<&TruthPair> = truth.pairs.iter().filter(|t| keep(t)).collect();
        let n = chosen.len().max(1) as f64;
        let hit = |set: &HashSet<(u64, u64)>| {
            chosen.iter().filter(|t| set.contains(&t.pair)).count() as f64 / n
        };
        Recall {
            truth_pairs: chosen.len() as u64,
            recall_pairs: hit(&reported),
            recall_clusters: hit(&clustered),
        }
    };
    let by_band: Vec<(String, Recall)> = BANDS
        .iter()
        .map(|&(lo, hi)| {
            (
                band_label((lo, hi)),
                recall_where(&|t| t.jaccard >= lo && t.jaccard < hi),
            )
        })
        .collect();
    let mut by_label: BTreeMap<String, Recall> = BTreeMap::new();
    for (i, name) in truth.label_names.iter().enumerate() {
        let kinds: BTreeSet<String> = truth
            .pairs
            .iter()
            .map(|t| label_kind(&t.labels[i]))
            .collect();
        for kind in kinds {
            let r =
                recall_where(&|t| t.jaccard >= min_jaccard && label_kind(&t.labels[i]) == *kind);
            if r.truth_pairs > 0 {
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
        .then(|| adjusted_rand_index(run.documents, run.clusters, &truth_labels));
    Scores {
        positives: positives.len(),
        pairs: pairs_score,
        pairs_precision_any_truth: pairs_lenient,
        clusters: cluster_score,
        clusters_precision_any_truth: cluster_lenient,
        adjusted_rand_index: ari,
        by_band,
        by_label,
        by_similarity: score_by_similarity(truth, min_jaccard, run),
        similarity_measure: run.similarity.measure(),
    }
}

/// How a run measures the similarity of a pair, for [`score_by_similarity`].
#[derive(Clone, Copy, Debug)]
pub enum Similarity<'a> {
    /// Simhash: the Hamming distance of the two documents' simhashes (every document's,
    /// from the run's fingerprints), in the bands of [`hamming_bands`] for the run's `k`.
    Hamming {
        simhashes: &'a HashMap<u64, u64>,
        k: u32,
    },
    /// MinHash with verification: the exact Jaccard the run measured, keyed by the pair as
    /// the run wrote it (`(doc_a, doc_b)`), in tenths. Pairs within an exact group measure
    /// 1.0; a near pair between representatives stands for their members' pairs.
    Jaccard {
        measured: &'a HashMap<(u64, u64), f32>,
    },
    /// Nothing measured (MinHash without verification): one band, [`UNMEASURED`].
    Unmeasured,
}

impl Similarity<'_> {
    /// `hamming`, `jaccard` or [`UNMEASURED`].
    pub fn measure(&self) -> &'static str {
        match self {
            Similarity::Hamming { .. } => "hamming",
            Similarity::Jaccard { .. } => "jaccard",
            Similarity::Unmeasured => UNMEASURED,
        }
    }
}

/// The band of pairs whose similarity nobody measured.
pub const UNMEASURED: &str = "unmeasured";

/// Precision and recall of the reported pairs within one similarity band.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct BandScores {
    /// `0`, `1`, ..., `4..6`, `7+` (Hamming distances), `[0.8, 0.9)` (Jaccard) or
    /// [`UNMEASURED`].
    pub band: String,
    /// Reported pairs (exact groups expanded) in the band.
    pub predicted: u64,
    /// Positives (truth pairs at or above the minimum Jaccard) in the band.
    pub positives: u64,
    /// Reported pairs that are positives.
    pub true_positives: u64,
    /// `true_positives / predicted`; `None` when nothing was reported in the band.
    pub precision: Option<f64>,
    /// `true_positives / positives`; `None` when the band holds no positive.
    pub recall: Option<f64>,
}

/// The Hamming-distance bands for a run at `k`: one per distance 0 to k, then k + 1 to 2k
/// (the pairs a slightly looser k would add), then everything beyond. Each is
/// `(label, lowest, highest)`, inclusive.
pub fn hamming_bands(k: u32) -> Vec<(String, u32, u32)> {
    let mut bands: Vec<(String, u32, u32)> = (0..=k).map(|d| (d.to_string(), d, d)).collect();
    if k >= 1 {
        let (lo, hi) = (k + 1, 2 * k);
        let label = if lo == hi {
            lo.to_string()
        } else {
            format!("{lo}..{hi}")
        };
        bands.push((label, lo, hi));
    }
    let beyond = 2 * k + 1;
    bands.push((format!("{beyond}+"), beyond, u32::MAX));
    bands
}

/// The Jaccard bands: tenths, `[0.0, 0.1)` to `[0.9, 1.0]`.
fn jaccard_bands() -> Vec<(f64, f64)> {
    (0..10)
        .map(|i| {
            (
                i as f64 / 10.0,
                if i == 9 { 1.01 } else { (i + 1) as f64 / 10.0 },
            )
        })
        .collect()
}

/// The band index of a pair, given the Jaccard measured for it; `None`: unmeasured.
type BandOf<'a> = dyn Fn((u64, u64), Option<f64>) -> Option<usize> + 'a;

/// Precision and recall by the similarity the run measures: every reported pair (exact
/// groups expanded, as [`reported_pairs`] does) and every positive is put in one band by its
/// similarity under `run.similarity`, and each band counts its reported pairs, its
/// positives and the reported pairs that are positives.
///
/// With [`Similarity::Hamming`] every pair has a distance, so recall falls in the bands
/// beyond `k` (positives the run could not report) and precision in the bands near `k`.
/// With [`Similarity::Jaccard`] a positive the run did not report has no measured Jaccard:
/// it is placed by the truth file's Jaccard; a reported pair without a measurement (a `url`
/// pair) goes to [`UNMEASURED`]. Bands are listed in their order (Hamming distance 0 first,
/// Jaccard [0.0, 0.1) first), [`UNMEASURED`] last and only when it holds a pair.
pub fn score_by_similarity(truth: &Truth, min_jaccard: f64, run: &RunResult) -> Vec<BandScores> {
    let positives: HashMap<(u64, u64), f64> = truth
        .pairs
        .iter()
        .filter(|t| t.jaccard >= min_jaccard)
        .map(|t| (t.pair, t.jaccard))
        .collect();
    let reported = reported_pairs_measured(run.exact, run.near, run.similarity);
    let labels: Vec<String>;
    let band_of: Box<BandOf<'_>>;
    match run.similarity {
        Similarity::Hamming { simhashes, k } => {
            let bands = hamming_bands(k);
            labels = bands.iter().map(|b| b.0.clone()).collect();
            band_of = Box::new(move |(a, b), _| {
                let d = crate::hamming(*simhashes.get(&a)?, *simhashes.get(&b)?);
                bands.iter().position(|&(_, lo, hi)| lo <= d && d <= hi)
            });
        }
        Similarity::Jaccard { .. } => {
            let bands = jaccard_bands();
            labels = bands.iter().map(|&b| band_label(b)).collect();
            band_of = Box::new(move |_, j| {
                let j = j?;
                bands.iter().position(|&(lo, hi)| lo <= j && j < hi)
            });
        }
        Similarity::Unmeasured => {
            labels = Vec::new();
            band_of = Box::new(|_, _| None);
        }
    }
    let n = labels.len();
    // predicted, positives, true positives per band; index n is unmeasured.
    let mut counts = vec![[0u64; 3]; n + 1];
    for (&p, &measured) in &reported {
        let band = band_of(p, measured).unwrap_or(n);
        counts[band][0] += 1;
        if positives.contains_key(&p) {
            counts[band][2] += 1;
        }
    }
    for (&p, &truth_jaccard) in &positives {
        // A reported positive is placed as it was reported; a missed one by the truth's
        // Jaccard (only the Jaccard bands use it: Hamming distances are always known).
        let measured = match reported.get(&p) {
            Some(&m) => m,
            None => Some(truth_jaccard),
        };
        counts[band_of(p, measured).unwrap_or(n)][1] += 1;
    }
    let ratio = |a: u64, b: u64| (b > 0).then(|| a as f64 / b as f64);
    labels
        .into_iter()
        .chain(std::iter::once(UNMEASURED.to_string()))
        .zip(counts)
        .enumerate()
        .filter(|&(i, (_, [predicted, positives, _]))| i < n || predicted + positives > 0)
        .map(
            |(_, (band, [predicted, positives, true_positives]))| BandScores {
                band,
                predicted,
                positives,
                true_positives,
                precision: ratio(true_positives, predicted),
                recall: ratio(true_positives, positives),
            },
        )
        .collect()
}

/// [`reported_pairs`] with the Jaccard the run measured for each (with
/// [`Similarity::Jaccard`]; `None` otherwise and for pairs without a measurement).
fn reported_pairs_measured(
    exact: &[(u64, u64)],
    near: &[(u64, u64)],
    similarity: Similarity,
) -> HashMap<(u64, u64), Option<f64>> {
    let measured = |a: u64, b: u64| -> Option<f64> {
        match similarity {
            Similarity::Jaccard { measured } => measured
                .get(&(a, b))
                .or_else(|| measured.get(&(b, a)))
                .map(|&j| j as f64),
            _ => None,
        }
    };
    let exact_measure = match similarity {
        Similarity::Jaccard { .. } => Some(1.0),
        _ => None,
    };
    let mut group: HashMap<u64, Vec<u64>> = HashMap::new();
    for &(a, b) in exact {
        group.entry(a).or_insert_with(|| vec![a]).push(b);
    }
    let members = |d: u64| group.get(&d).cloned().unwrap_or_else(|| vec![d]);
    let mut out = HashMap::new();
    for g in group.values() {
        for (i, &a) in g.iter().enumerate() {
            for &b in &g[i + 1..] {
                out.insert(pair(a, b), exact_measure);
            }
        }
    }
    for &(a, b) in near {
        let m = measured(a, b);
        for x in members(a) {
            // A near pair between a representative and its own member is no new pair.
            for y in members(b).into_iter().filter(|&y| y != x) {
                out.entry(pair(x, y)).or_insert(m);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(id: &str) -> Option<u64> {
        match id {
            "a" => Some(0),
            "b" => Some(1),
            "c" => Some(2),
            "d" => Some(3),
            "e" => Some(4),
            _ => None,
        }
    }

    /// The truth of the end-to-end test `eval_counts_precision_and_recall_by_hand`.
    const TRUTH: &str = "id1\tid2\tfamily\tjaccard\top\n\
                         a\tb\t1\t1.0\tcase\n\
                         a\tc\t1\t0.9\tappend:0.01\n\
                         d\te\t2\t0.85\tother\n\
                         b\tc\t1\t0.5\tappend:0.02\n";

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn label_kinds_drop_rates_only() {
        assert_eq!(label_kind("sub:0.05"), "sub");
        assert_eq!(label_kind("del:0.01+noise"), "del+noise");
        assert_eq!(label_kind("case"), "case");
        assert_eq!(label_kind("kind:word"), "kind:word");
        assert_eq!(label_kind("a:1+b:2e-3"), "a+b");
    }

    #[test]
    fn truth_columns_in_any_order_with_family_and_labels() {
        let truth = parse_truth(TRUTH, ids, false).unwrap();
        assert_eq!(truth.label_names, ["op"]);
        assert_eq!(truth.pairs.len(), 4);
        assert_eq!(
            truth.pairs[3],
            TruthPair {
                pair: (1, 2),
                jaccard: 0.5,
                family: Some("1".into()),
                labels: vec!["append:0.02".into()],
            }
        );
        // Without a family column; pairs are stored smaller doc first.
        let t = parse_truth("jaccard\tid2\tid1\n0.3\ta\te\n", ids, false).unwrap();
        assert_eq!(t.label_names, Vec::<String>::new());
        assert_eq!(t.pairs[0].pair, (0, 4));
        assert_eq!(t.pairs[0].family, None);
    }

    #[test]
    fn truth_errors_name_the_line_and_the_problem() {
        let err = parse_truth("", ids, false).unwrap_err();
        assert_eq!((err.to_string(), err.line()), ("empty file".into(), None));
        let err = parse_truth("id1\tid2\tsim\n", ids, false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the header must name id1, id2 and jaccard (it has: id1, id2, sim)"
        );
        let err = parse_truth("id1\tid2\tjaccard\na\tb\t1\nc\td\n", ids, false).unwrap_err();
        assert_eq!(err.to_string(), "2 fields, the header has 3");
        assert_eq!(err.line(), Some(3));
        let err = parse_truth("id1\tid2\tjaccard\na\tzz\t0.9\n", ids, false).unwrap_err();
        assert_eq!(err.to_string(), "id \"zz\" is not a document of the run");
        assert_eq!(err.line(), Some(2));
        // A bad number is found before an unknown id on the same line.
        let err = parse_truth("id1\tid2\tjaccard\na\tzz\thigh\n", ids, false).unwrap_err();
        assert_eq!(err.to_string(), "jaccard \"high\" is not a number");
        assert!(std::error::Error::source(&err).is_some());
        assert_eq!(err.line(), Some(2));
    }

    #[test]
    fn truth_values_out_of_range_self_pairs_and_no_pairs_are_refused() {
        for value in ["NaN", "nan", "7.5", "-1", "inf", "-0.0001", "1.0000001"] {
            let text = format!("id1\tid2\tjaccard\na\tb\t0.9\na\tc\t{value}\n");
            let err = parse_truth(&text, ids, false).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("jaccard {value:?} is not a number in [0, 1]")
            );
            assert_eq!(err.line(), Some(3));
        }
        for value in ["0", "1", "0.0", "1.0", "1e-3"] {
            let text = format!("id1\tid2\tjaccard\na\tb\t{value}\n");
            assert!(parse_truth(&text, ids, false).is_ok(), "{value}");
        }
        let err = parse_truth("id1\tid2\tjaccard\na\tb\t1\nc\tc\t1\n", ids, false).unwrap_err();
        assert_eq!(err.to_string(), "id \"c\" is paired with itself");
        assert_eq!(err.line(), Some(3));
        // Also when the id is unknown and unknown ids are skipped.
        let err = parse_truth("id1\tid2\tjaccard\nzz\tzz\t1\n", ids, true).unwrap_err();
        assert!(matches!(err, TruthError::SelfPair { line: 2, .. }));
        for skip in [false, true] {
            let err = parse_truth("id1\tid2\tjaccard\n", ids, skip).unwrap_err();
            assert_eq!(
                (err.to_string(), err.line()),
                ("no pairs after the header".into(), None)
            );
        }
    }

    #[test]
    fn skip_unknown_leaves_out_pairs_with_unknown_ids_even_with_bad_numbers() {
        let text = "id1\tid2\tjaccard\na\tzz\thigh\nyy\tb\t0.9\na\tb\t0.9\n";
        let truth = parse_truth(text, ids, true).unwrap();
        assert_eq!(truth.pairs.len(), 1);
        assert_eq!(truth.pairs[0].pair, (0, 1));
        // Field counts are still checked.
        assert!(matches!(
            parse_truth("id1\tid2\tjaccard\nzz\n", ids, true),
            Err(TruthError::FieldCount { line: 2, .. })
        ));
    }

    #[test]
    fn exact_groups_expand_to_all_their_pairs() {
        // Group {1, 2, 3} (representative 1), group {7, 8}; near pairs 1~7 and 3~9.
        let exact = [(1, 2), (1, 3), (7, 8)];
        let near = [(1, 7), (9, 3)];
        let got = reported_pairs(&exact, &near);
        let mut want: HashSet<(u64, u64)> = [(1, 2), (1, 3), (2, 3), (7, 8)].into();
        // 1~7 stands for {1,2,3} x {7,8}; 9~3 for 9 x {3} (3 is a member, not a representative).
        for x in [1, 2, 3] {
            for y in [7, 8] {
                want.insert((x, y));
            }
        }
        want.insert((3, 9));
        assert_eq!(got, want);
        // A near pair between a representative and its own member adds no self pair.
        assert_eq!(reported_pairs(&exact, &[(1, 2)]).len(), 4);
        assert!(reported_pairs(&[], &[]).is_empty());
    }

    #[test]
    fn band_labels_close_the_last_band() {
        let labels: Vec<String> = BANDS.iter().map(|&b| band_label(b)).collect();
        assert_eq!(
            labels,
            [
                "[0.0, 0.5)",
                "[0.5, 0.6)",
                "[0.6, 0.7)",
                "[0.7, 0.8)",
                "[0.8, 0.9)",
                "[0.9, 1.0]"
            ]
        );
    }

    /// The case of the end-to-end test, counted by hand: a=0, b=1 (exact duplicate of a),
    /// c=2 (near a), d=3, e=4 unrelated; the run reports a-b exact and a-c near and
    /// clusters {a, b, c}.
    #[test]
    fn scores_counted_by_hand() {
        let truth = parse_truth(TRUTH, ids, false).unwrap();
        let clusters: HashMap<u64, u64> = [(0, 0), (1, 0), (2, 0)].into();
        let run = RunResult {
            documents: 5,
            exact: &[(0, 1)],
            near: &[(0, 2)],
            clusters: &clusters,
            similarity: Similarity::Unmeasured,
        };
        let s = score(&truth, 0.8, &run);
        // Positives: a-b, a-c, d-e. Reported: a-b, a-c and (expanded) b-c.
        assert_eq!(s.positives, 3);
        assert_eq!(
            (s.pairs.predicted, s.pairs.truth, s.pairs.true_positives),
            (3, 3, 2)
        );
        assert!(close(s.pairs.precision, 2.0 / 3.0));
        assert!(close(s.pairs.recall, 2.0 / 3.0));
        // b-c is a truth pair (at 0.5): every reported pair is some truth pair.
        assert!(close(s.pairs_precision_any_truth, 1.0));
        // The cluster {a, b, c} holds the same three pairs.
        assert_eq!(s.clusters, s.pairs);
        assert!(close(s.clusters_precision_any_truth, 1.0));
        // Families {a, b, c} and {d, e} against clusters {a, b, c}, d, e:
        // index 3, sums 3 and 4, expected 12/10, max 3.5: (3 - 1.2) / (3.5 - 1.2).
        let ari = s.adjusted_rand_index.unwrap();
        assert!(close(ari, 1.8 / 2.3), "{ari}");
        let band = |label: &str| s.by_band.iter().find(|(l, _)| l == label).unwrap().1;
        assert_eq!(band("[0.0, 0.5)").truth_pairs, 0);
        assert_eq!(band("[0.0, 0.5)").recall_pairs, 0.0);
        assert_eq!(band("[0.5, 0.6)").truth_pairs, 1); // b-c, found
        assert_eq!(band("[0.5, 0.6)").recall_pairs, 1.0);
        assert_eq!(band("[0.8, 0.9)").truth_pairs, 1); // d-e, missed
        assert_eq!(band("[0.8, 0.9)").recall_pairs, 0.0);
        assert_eq!(band("[0.9, 1.0]").truth_pairs, 2); // a-b (1.0 included), a-c
        assert_eq!(band("[0.9, 1.0]").recall_clusters, 1.0);
        // By label, positives only: b-c (append, 0.5) is not a positive.
        let labels: Vec<&str> = s.by_label.keys().map(String::as_str).collect();
        assert_eq!(labels, ["op=append", "op=case", "op=other"]);
        assert_eq!(
            s.by_label["op=append"],
            Recall {
                truth_pairs: 1,
                recall_pairs: 1.0,
                recall_clusters: 1.0
            }
        );
        assert_eq!(s.by_label["op=other"].recall_pairs, 0.0);
    }

    #[test]
    fn no_family_column_no_rand_index_and_no_reported_pairs_precision_one() {
        let truth = parse_truth("id1\tid2\tjaccard\na\tb\t0.9\n", ids, false).unwrap();
        let clusters = HashMap::new();
        let run = RunResult {
            documents: 5,
            exact: &[],
            near: &[],
            clusters: &clusters,
            similarity: Similarity::Unmeasured,
        };
        let s = score(&truth, 0.8, &run);
        assert_eq!(s.adjusted_rand_index, None);
        assert_eq!(s.pairs.predicted, 0);
        assert_eq!(
            (s.pairs.precision, s.pairs.recall, s.pairs.f1),
            (1.0, 0.0, 0.0)
        );
        // No predicted pairs: the lenient precision divides by 1, not 0.
        assert_eq!(s.pairs_precision_any_truth, 0.0);
        assert!(s.by_label.is_empty());
    }

    #[test]
    fn hamming_bands_one_per_distance_then_up_to_2k_then_beyond() {
        let labels = |k| -> Vec<String> { hamming_bands(k).into_iter().map(|b| b.0).collect() };
        assert_eq!(labels(3), ["0", "1", "2", "3", "4..6", "7+"]);
        assert_eq!(labels(1), ["0", "1", "2", "3+"]);
        assert_eq!(labels(0), ["0", "1+"]);
        // The bands cover every distance exactly once.
        for k in 0..8 {
            let bands = hamming_bands(k);
            for d in 0..=64 {
                let n = bands
                    .iter()
                    .filter(|&&(_, lo, hi)| lo <= d && d <= hi)
                    .count();
                assert_eq!(n, 1, "k {k} distance {d}");
            }
        }
    }

    /// The hand-counted case by Hamming distance: a-b exact (distance 0), a-c near at 2
    /// (reported, positive), b-c expanded (2, truth at 0.5: not a positive), d-e at 9
    /// (missed positive, beyond 2k = 6).
    #[test]
    fn bands_by_hamming_counted_by_hand() {
        let truth = parse_truth(TRUTH, ids, false).unwrap();
        let clusters: HashMap<u64, u64> = [(0, 0), (1, 0), (2, 0)].into();
        let simhashes: HashMap<u64, u64> = [(0, 0), (1, 0), (2, 0b11), (3, 0), (4, 0x1ff)].into();
        let run = RunResult {
            documents: 5,
            exact: &[(0, 1)],
            near: &[(0, 2)],
            clusters: &clusters,
            similarity: Similarity::Hamming {
                simhashes: &simhashes,
                k: 3,
            },
        };
        let bands = score(&truth, 0.8, &run).by_similarity;
        let row = |label: &str| bands.iter().find(|b| b.band == label).unwrap().clone();
        assert_eq!(bands.len(), 6);
        assert_eq!(
            (
                row("0").predicted,
                row("0").positives,
                row("0").true_positives
            ),
            (1, 1, 1)
        );
        assert_eq!(
            (
                row("2").predicted,
                row("2").positives,
                row("2").true_positives
            ),
            (2, 1, 1)
        );
        assert_eq!(row("2").precision, Some(0.5));
        assert_eq!(row("2").recall, Some(1.0));
        assert_eq!(
            (row("7+").predicted, row("7+").positives, row("7+").recall),
            (0, 1, Some(0.0))
        );
        assert_eq!(row("7+").precision, None);
        assert_eq!(row("1").recall, None);
    }

    /// Random runs against random truth, every band checked against a count over all
    /// document pairs: for each pair, whether it is reported (by the rule of
    /// [`reported_pairs`], written out again), whether it is a positive, and its band.
    #[test]
    fn bands_equal_a_count_over_all_document_pairs() {
        use crate::testing::SeededRng;
        for seed in 0..40u64 {
            let mut rng = SeededRng::new(seed);
            let docs = 6 + rng.below(20);
            let k = rng.below(5) as u32;
            let base = rng.next_u64();
            let simhashes: HashMap<u64, u64> = (0..docs)
                .map(|d| {
                    let mut h = base;
                    for _ in 0..rng.below(12) {
                        h ^= 1 << rng.below(64);
                    }
                    (d, h)
                })
                .collect();
            // Disjoint exact groups: a representative and its members.
            let mut group_of: HashMap<u64, u64> = HashMap::new();
            let mut exact = Vec::new();
            let mut d = 0;
            while d < docs {
                let size = 1 + rng.below(3);
                for m in d + 1..(d + size).min(docs) {
                    exact.push((d, m));
                    group_of.insert(m, d);
                }
                group_of.insert(d, d);
                d += size;
            }
            let reps: HashSet<u64> = exact.iter().map(|e| e.0).collect();
            let near: Vec<(u64, u64)> = (0..rng.below(3 * docs))
                .map(|_| (rng.below(docs), rng.below(docs)))
                .filter(|(a, b)| a != b)
                .collect();
            let measured: HashMap<(u64, u64), f32> = near
                .iter()
                .map(|&p| (p, rng.below(101) as f32 / 100.0))
                .collect();
            let mut text = String::from("id1\tid2\tjaccard\n");
            for a in 0..docs {
                for b in a + 1..docs {
                    if rng.below(3) == 0 {
                        text += &format!("{a}\t{b}\t{}\n", rng.below(101) as f64 / 100.0);
                    }
                }
            }
            text += &format!("0\t{}\t1\n", docs - 1);
            let truth = parse_truth(&text, |id| id.parse().ok(), false).unwrap();
            let truth_of: HashMap<(u64, u64), f64> =
                truth.pairs.iter().map(|t| (t.pair, t.jaccard)).collect();
            let min_jaccard = 0.6;
            let clusters = HashMap::new();
            // A near row (a, b) stands for x when x is a or a member of a's group with a as
            // its representative.
            let covers = |x: u64, a: u64| x == a || (reps.contains(&a) && group_of[&x] == a);
            for verified in [false, true] {
                let similarity = if verified {
                    Similarity::Jaccard {
                        measured: &measured,
                    }
                } else {
                    Similarity::Hamming {
                        simhashes: &simhashes,
                        k,
                    }
                };
                let run = RunResult {
                    documents: docs,
                    exact: &exact,
                    near: &near,
                    clusters: &clusters,
                    similarity,
                };
                let got = score_by_similarity(&truth, min_jaccard, &run);
                let labels: Vec<String> = if verified {
                    (0..10)
                        .map(|i| {
                            band_label((
                                i as f64 / 10.0,
                                (i + 1) as f64 / 10.0 + if i == 9 { 0.01 } else { 0.0 },
                            ))
                        })
                        .collect()
                } else {
                    hamming_bands(k).into_iter().map(|b| b.0).collect()
                };
                let mut want = vec![[0u64; 3]; labels.len()];
                for x in 0..docs {
                    for y in x + 1..docs {
                        let same_group = group_of[&x] == group_of[&y];
                        let row = near.iter().find(|&&(a, b)| {
                            (covers(x, a) && covers(y, b)) || (covers(x, b) && covers(y, a))
                        });
                        let reported = same_group || row.is_some();
                        let positive = truth_of.get(&(x, y)).is_some_and(|&j| j >= min_jaccard);
                        if !reported && !positive {
                            continue;
                        }
                        let band = if verified {
                            let j = if same_group {
                                1.0
                            } else if let Some(row) = row {
                                measured[row] as f64
                            } else {
                                truth_of[&(x, y)]
                            };
                            ((j * 10.0).floor() as usize).min(9)
                        } else {
                            let dist = (simhashes[&x] ^ simhashes[&y]).count_ones();
                            if dist <= k {
                                dist as usize
                            } else if k > 0 && dist <= 2 * k {
                                k as usize + 1
                            } else {
                                labels.len() - 1
                            }
                        };
                        want[band][0] += reported as u64;
                        want[band][1] += positive as u64;
                        want[band][2] += (reported && positive) as u64;
                    }
                }
                assert_eq!(got.len(), labels.len(), "seed {seed}: no unmeasured band");
                for ((b, label), w) in got.iter().zip(&labels).zip(&want) {
                    assert_eq!(&b.band, label);
                    assert_eq!(
                        [b.predicted, b.positives, b.true_positives],
                        *w,
                        "seed {seed} verified {verified} band {label}"
                    );
                    let ratio = |a: u64, n: u64| (n > 0).then(|| a as f64 / n as f64);
                    assert_eq!(b.precision, ratio(w[2], w[0]));
                    assert_eq!(b.recall, ratio(w[2], w[1]));
                }
            }
        }
    }

    #[test]
    fn unverified_minhash_has_one_unmeasured_band() {
        let truth = parse_truth(TRUTH, ids, false).unwrap();
        let clusters = HashMap::new();
        let run = RunResult {
            documents: 5,
            exact: &[(0, 1)],
            near: &[(0, 2), (3, 1)],
            clusters: &clusters,
            similarity: Similarity::Unmeasured,
        };
        let bands = score_by_similarity(&truth, 0.8, &run);
        // Reported a-b, a-c, b-c (a's group with c), b-d (b is a member: it stands for
        // itself alone); positives a-b, a-c, d-e.
        assert_eq!(
            bands,
            [BandScores {
                band: UNMEASURED.into(),
                predicted: 4,
                positives: 3,
                true_positives: 2,
                precision: Some(0.5),
                recall: Some(2.0 / 3.0),
            }]
        );
    }
}
