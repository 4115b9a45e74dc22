//! Precision and recall by similarity band (`neardup eval`'s `by_similarity`, and the
//! report's table), recomputed by brute force over every document pair of the shared
//! corpus dev-small: for each pair of documents, whether the run reports it (both in one
//! exact group, or their representatives a pair of `pairs/`), whether the truth makes it a
//! positive, and its band (the Hamming distance of the fingerprints in `fingerprints/`; or
//! the Jaccard the run verified, the truth's for a missed positive).

mod common;

use std::collections::HashMap;
use std::path::Path;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{Float32Type, UInt64Type};
use common::*;
use serde_json::Value;

/// The bands the oracle counts: (label, predicted, positives, true positives).
type Bands = Vec<(String, [u64; 3])>;

struct Truth {
    /// Positive pairs (smaller doc first) and their truth Jaccard.
    positives: HashMap<(u64, u64), f64>,
}

/// The truth file, ids mapped to the run's doc numbers; positives at Jaccard >= 0.8.
fn truth(path: &Path, doc_of: &HashMap<String, u64>) -> Truth {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (c1, c2, cj) = (col("id1"), col("id2"), col("jaccard"));
    let mut positives = HashMap::new();
    for line in lines {
        let f: Vec<&str> = line.split('\t').collect();
        let j: f64 = f[cj].parse().unwrap();
        if j >= 0.8 {
            let (a, b) = (doc_of[f[c1]], doc_of[f[c2]]);
            positives.insert((a.min(b), a.max(b)), j);
        }
    }
    Truth { positives }
}

/// What the run wrote: every document's id and simhash, its exact rows (representative,
/// member) and its other pairs with their verified Jaccard.
struct Run {
    docs: Vec<u64>,
    ids: HashMap<String, u64>,
    simhash: HashMap<u64, u64>,
    exact: Vec<(u64, u64)>,
    near: HashMap<(u64, u64), Option<f32>>,
}

fn read_run(out: &Path) -> Run {
    let mut run = Run {
        docs: Vec::new(),
        ids: HashMap::new(),
        simhash: HashMap::new(),
        exact: Vec::new(),
        near: HashMap::new(),
    };
    for b in batches(&out.join("fingerprints")) {
        let docs = column(&b, "doc_id").as_primitive::<UInt64Type>();
        let hashes = column(&b, "simhash").as_primitive::<UInt64Type>();
        let ids = column(&b, "id").as_string::<i32>();
        for i in 0..b.num_rows() {
            run.docs.push(docs.value(i));
            run.ids.insert(ids.value(i).to_string(), docs.value(i));
            run.simhash.insert(docs.value(i), hashes.value(i));
        }
    }
    for b in batches(&out.join("pairs")) {
        let a = column(&b, "doc_a").as_primitive::<UInt64Type>();
        let c = column(&b, "doc_b").as_primitive::<UInt64Type>();
        let kind = column(&b, "kind").as_string::<i32>();
        let jaccard = column(&b, "jaccard").as_primitive::<Float32Type>();
        for i in 0..b.num_rows() {
            if kind.value(i) == "exact" {
                run.exact.push((a.value(i), c.value(i)));
            } else {
                let j = jaccard.is_valid(i).then(|| jaccard.value(i));
                run.near.insert((a.value(i), c.value(i)), j);
            }
        }
    }
    run.docs.sort_unstable();
    run
}

/// How a pair's band is found.
enum Measure {
    Hamming(u32),
    Jaccard,
    Unmeasured,
}

fn labels(measure: &Measure) -> Vec<String> {
    match measure {
        Measure::Hamming(k) => {
            let mut l: Vec<String> = (0..=*k).map(|d| d.to_string()).collect();
            l.push(format!("{}..{}", k + 1, 2 * k));
            l.push(format!("{}+", 2 * k + 1));
            l
        }
        Measure::Jaccard => (0..10)
            .map(|i| {
                if i == 9 {
                    "[0.9, 1.0]".to_string()
                } else {
                    format!("[{:.1}, {:.1})", i as f64 / 10.0, (i + 1) as f64 / 10.0)
                }
            })
            .collect(),
        Measure::Unmeasured => vec!["unmeasured".to_string()],
    }
}

/// Every pair of documents, counted into its band.
fn brute_force(run: &Run, truth: &Truth, measure: &Measure) -> Bands {
    // The representative of each document (itself when in no exact group).
    let mut rep: HashMap<u64, u64> = run.docs.iter().map(|&d| (d, d)).collect();
    for &(r, m) in &run.exact {
        rep.insert(m, r);
    }
    let labels = labels(measure);
    let mut counts = vec![[0u64; 3]; labels.len()];
    let mut pairs_seen = 0u64;
    for (i, &x) in run.docs.iter().enumerate() {
        for &y in &run.docs[i + 1..] {
            pairs_seen += 1;
            let (rx, ry) = (rep[&x], rep[&y]);
            let row = run.near.get(&(rx, ry)).or_else(|| run.near.get(&(ry, rx)));
            let same_group = rx == ry;
            let reported = same_group || row.is_some();
            let truth_j = truth.positives.get(&(x, y));
            if !reported && truth_j.is_none() {
                continue;
            }
            let band = match measure {
                Measure::Hamming(k) => {
                    let d = (run.simhash[&x] ^ run.simhash[&y]).count_ones();
                    if d <= *k {
                        d as usize
                    } else if d <= 2 * k {
                        *k as usize + 1
                    } else {
                        *k as usize + 2
                    }
                }
                Measure::Jaccard => {
                    let j = if same_group {
                        1.0
                    } else if let Some(row) = row {
                        row.expect("a verified run has the Jaccard of every pair") as f64
                    } else {
                        *truth_j.unwrap()
                    };
                    ((j * 10.0).floor() as usize).min(9)
                }
                Measure::Unmeasured => 0,
            };
            counts[band][0] += reported as u64;
            counts[band][1] += truth_j.is_some() as u64;
            counts[band][2] += (reported && truth_j.is_some()) as u64;
        }
    }
    let n = run.docs.len() as u64;
    assert_eq!(pairs_seen, n * (n - 1) / 2);
    labels.into_iter().zip(counts).collect()
}

/// `neardup eval --json`'s `by_similarity`, checked against the oracle, band by band; and
/// the same rows in the report's table.
fn check(out: &Path, truth_path: &Path, measure: Measure, name: &str) -> Bands {
    let run = read_run(out);
    let truth = truth(truth_path, &run.ids);
    let want = brute_force(&run, &truth, &measure);
    let json: Value = serde_json::from_str(&stdout_of(neardup().args([
        "eval",
        "--json",
        "--run",
        s(out),
        "--truth",
        s(truth_path),
    ])))
    .unwrap();
    assert_eq!(json["similarity_measure"], name);
    let got = json["by_similarity"].as_array().unwrap();
    assert_eq!(got.len(), want.len(), "{got:?}");
    let ratio = |a: u64, b: u64| {
        if b == 0 {
            Value::Null
        } else {
            serde_json::json!(a as f64 / b as f64)
        }
    };
    for (g, (label, [predicted, positives, tp])) in got.iter().zip(&want) {
        assert_eq!(g["band"], label.as_str());
        assert_eq!(
            [&g["predicted"], &g["positives"], &g["true_positives"]],
            [predicted, positives, tp]
                .map(|v| serde_json::json!(v))
                .each_ref(),
            "band {label}"
        );
        // serde_json reads floats to within one unit in the last place.
        let close = |got: &Value, want: Value| match (got.as_f64(), want.as_f64()) {
            (Some(g), Some(w)) => (g - w).abs() < 1e-12,
            _ => got.is_null() && want.is_null(),
        };
        assert!(
            close(&g["precision"], ratio(*tp, *predicted)),
            "band {label}: {g}"
        );
        assert!(
            close(&g["recall"], ratio(*tp, *positives)),
            "band {label}: {g}"
        );
    }
    // The totals are the run's whole precision and recall of reported pairs.
    let total: [u64; 3] = want.iter().fold([0; 3], |acc, (_, c)| {
        [acc[0] + c[0], acc[1] + c[1], acc[2] + c[2]]
    });
    assert_eq!(json["pairs"]["predicted"], total[0]);
    assert_eq!(json["pairs"]["true_positives"], total[2]);
    assert_eq!(total[1] as usize, truth.positives.len());

    // The report shows the same rows.
    neardup()
        .args(["report", s(out), "--truth", s(truth_path)])
        .assert()
        .success();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let table = html
        .split("<table id=\"by-similarity\">")
        .nth(1)
        .expect("the report has the by-similarity table")
        .split("</table>")
        .next()
        .unwrap();
    let rows: Vec<Vec<String>> = table
        .split("<tr>")
        .skip(2)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let cell = &cell[cell.find('>').unwrap() + 1..];
                    cell[..cell.find("</td>").unwrap()].to_string()
                })
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), want.len());
    let shown = |v: Value| v.as_f64().map_or("-".to_string(), |v| format!("{v:.4}"));
    for (row, (label, [predicted, positives, tp])) in rows.iter().zip(&want) {
        let label = label.replace('&', "&amp;").replace('<', "&lt;");
        assert_eq!(
            row,
            &[
                label,
                predicted.to_string(),
                positives.to_string(),
                tp.to_string(),
                shown(ratio(*tp, *predicted)),
                shown(ratio(*tp, *positives)),
            ]
        );
    }
    want
}

#[test]
fn simhash_bands_by_hamming_distance_equal_a_count_over_every_pair() {
    let Some(dir) = shared_corpus("dev-small") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    run_ok(&out, &["-q"], &[&dir.join("corpus.jsonl")]);
    let bands = check(&out, &dir.join("truth.tsv"), Measure::Hamming(3), "hamming");
    // The bands beyond k hold positives the run could not report, and nothing reported.
    for (label, [predicted, positives, _]) in &bands[4..] {
        assert_eq!(*predicted, 0, "{label}");
        assert!(*positives > 0, "{label}");
    }
    assert!(bands[0].1[0] > 0 && bands[3].1[0] > 0);
    // The text output has the table too.
    let text = stdout_of(neardup().args([
        "eval",
        "--run",
        s(&out),
        "--truth",
        s(&dir.join("truth.tsv")),
    ]));
    assert!(text.contains(
        "| Hamming distance | reported pairs | positives | true positives | precision | recall |"
    ));
    assert!(text.contains("\n| 4..6 | 0 | "), "{text}");
}

#[test]
fn minhash_bands_by_verified_jaccard_equal_a_count_over_every_pair() {
    let Some(dir) = shared_corpus("dev-small") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    run_ok(
        &out,
        &[
            "-q",
            "--method",
            "minhash",
            "--shingle",
            "3",
            "--threshold",
            "0.8",
        ],
        &[&dir.join("corpus.jsonl")],
    );
    let bands = check(&out, &dir.join("truth.tsv"), Measure::Jaccard, "jaccard");
    // Verified at 0.8: nothing reported below it.
    for (label, [predicted, _, _]) in &bands[..8] {
        assert_eq!(*predicted, 0, "{label}");
    }
    assert!(bands[9].1[0] > 0);

    // Unverified: one band, the whole run.
    let unverified = tmp.path().join("unverified");
    run_ok(
        &unverified,
        &[
            "-q",
            "--method",
            "minhash",
            "--shingle",
            "3",
            "--threshold",
            "0.8",
            "--verify",
            "none",
        ],
        &[&dir.join("corpus.jsonl")],
    );
    let bands = check(
        &unverified,
        &dir.join("truth.tsv"),
        Measure::Unmeasured,
        "unmeasured",
    );
    assert_eq!(bands.len(), 1);
    assert!(bands[0].1[0] > 0 && bands[0].1[2] > 0);
}
