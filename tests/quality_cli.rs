//! MinHash threshold mode, verification and `neardup eval`, end to end, against oracles
//! computed here: exact Jaccard of word 3-gram sets built from strings (not hashes), and
//! hand-counted precision and recall.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use arrow::array::AsArray;
use arrow::datatypes::{Float32Type, UInt64Type};
use neardup_core::tokenize::Tokenizer;
mod common;
use common::{batches, column, neardup, shared_corpus};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// Word n-gram sets as strings: every token of the tokenizer (numbers too), joined by spaces.
fn shingles(text: &str, n: usize) -> HashSet<String> {
    let mut words = Vec::new();
    Tokenizer::new().for_each_token(text, |t| words.push(t.text.to_string()));
    if words.is_empty() {
        return HashSet::new();
    }
    if words.len() <= n {
        return [words.join(" ")].into();
    }
    words.windows(n).map(|w| w.join(" ")).collect()
}

fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
    let inter = a.intersection(b).count();
    inter as f64 / (a.len() + b.len() - inter) as f64
}

/// (doc_a, doc_b, kind, jaccard) of every pair.
fn pairs(out: &Path) -> Vec<(u64, u64, String, Option<f32>)> {
    let mut rows = Vec::new();
    for b in batches(&out.join("pairs")) {
        let a = column(&b, "doc_a").as_primitive::<UInt64Type>();
        let c = column(&b, "doc_b").as_primitive::<UInt64Type>();
        let k = column(&b, "kind").as_string::<i32>();
        let j = column(&b, "jaccard").as_primitive::<Float32Type>();
        for i in 0..b.num_rows() {
            rows.push((
                a.value(i),
                c.value(i),
                k.value(i).to_string(),
                (!arrow::array::Array::is_null(j, i)).then(|| j.value(i)),
            ));
        }
    }
    rows
}

#[test]
fn minhash_mode_reports_verified_pairs_with_their_exact_jaccard() {
    let Some(dir) = shared_corpus("dev-small") else {
        return;
    };
    let texts: Vec<String> = std::fs::read_to_string(dir.join("corpus.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    neardup()
        .args([
            "run",
            "-q",
            "-w",
            "2",
            "--method",
            "minhash",
            "--shingle",
            "3",
            "--threshold",
            "0.8",
            "--output",
        ])
        .arg(&out)
        .arg(dir.join("corpus.jsonl"))
        .assert()
        .success();
    let found = pairs(&out);
    let mut sets: HashMap<u64, HashSet<String>> = HashMap::new();
    let mut set = |d: u64| {
        sets.entry(d)
            .or_insert_with(|| shingles(&texts[d as usize], 3))
            .clone()
    };
    let mut near = 0;
    for (a, b, kind, j) in &found {
        let j = j.expect("verified pairs carry their Jaccard");
        let oracle = jaccard(&set(*a), &set(*b));
        assert!(
            (oracle - j as f64).abs() < 1e-5,
            "pair ({a}, {b}): reported {j}, oracle {oracle}"
        );
        if kind == "near" {
            near += 1;
            assert!(
                oracle >= 0.8,
                "pair ({a}, {b}) below the threshold: {oracle}"
            );
        } else {
            assert_eq!(j, 1.0);
        }
    }
    assert!(near > 500, "only {near} near pairs");
    // Recall of clear cases: every truth pair with oracle Jaccard >= 0.9 is in a cluster.
    let reported: HashSet<(u64, u64)> = found.iter().map(|p| (p.0, p.1)).collect();
    let clusters = cluster_labels(&out);
    let truth = std::fs::read_to_string(dir.join("truth.tsv")).unwrap();
    let mut checked = 0;
    for line in truth.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        let (x, y): (u64, u64) = (f[0].parse().unwrap(), f[1].parse().unwrap());
        if jaccard(&set(x), &set(y)) >= 0.9 {
            checked += 1;
            let together = clusters.contains_key(&x) && clusters.get(&x) == clusters.get(&y);
            assert!(
                together || reported.contains(&(x.min(y), x.max(y))),
                "missed ({x}, {y})"
            );
        }
    }
    assert!(checked > 800, "{checked}");
}

/// (doc_id, cluster_id, keep) of every clusters row.
fn cluster_rows(out: &Path) -> Vec<(u64, i64, bool)> {
    let mut rows = Vec::new();
    for b in batches(&out.join("clusters")) {
        let d = column(&b, "doc_id").as_primitive::<UInt64Type>();
        let c = column(&b, "cluster_id").as_primitive::<arrow::datatypes::Int64Type>();
        let k = column(&b, "keep").as_boolean();
        rows.extend((0..b.num_rows()).map(|i| (d.value(i), c.value(i), k.value(i))));
    }
    rows
}

/// doc_id -> cluster_id, for documents in a cluster.
fn cluster_labels(out: &Path) -> BTreeMap<u64, i64> {
    cluster_rows(out)
        .into_iter()
        .filter(|r| r.1 >= 0)
        .map(|(d, c, _)| (d, c))
        .collect()
}

#[test]
fn simhash_verification_annotates_and_filters() {
    let Some(dir) = shared_corpus("dev-small") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (plain, verified) = (tmp.path().join("plain"), tmp.path().join("verified"));
    for (out, extra) in [
        (&plain, vec![]),
        (
            &verified,
            vec!["--verify", "jaccard", "--min-jaccard", "0.9"],
        ),
    ] {
        neardup()
            .args(["run", "-q", "--output"])
            .arg(out)
            .arg(dir.join("corpus.jsonl"))
            .args(extra)
            .assert()
            .success();
    }
    let plain_pairs = pairs(&plain);
    let verified_pairs = pairs(&verified);
    assert!(
        plain_pairs.iter().all(|p| p.3.is_none()),
        "no Jaccard without verification"
    );
    assert!(verified_pairs.iter().all(|p| p.3.is_some_and(|j| j >= 0.9)));
    let plain_set: HashSet<(u64, u64)> = plain_pairs.iter().map(|p| (p.0, p.1)).collect();
    assert!(
        verified_pairs
            .iter()
            .all(|p| plain_set.contains(&(p.0, p.1))),
        "verification only removes pairs"
    );
    assert!(verified_pairs.len() < plain_pairs.len());
}

/// A tiny corpus whose run result is known, and a truth file to score it.
#[test]
fn eval_counts_precision_and_recall_by_hand() {
    let tmp = tempfile::tempdir().unwrap();
    let base = "the committee agreed to repair the old stone bridge before winter and to plant a row of trees along the new road near the school";
    let other = "bees visit thousands of flowers every day gathering nectar and pollen for the hive and carrying pollen from plant to plant";
    let third = "a good map shows what the traveller needs and leaves out the rest with roads rivers and towns drawn to scale";
    let docs = [
        ("a", base.to_string()),
        ("b", base.to_uppercase()),      // exact duplicate of a
        ("c", format!("{base} indeed")), // near duplicate of a
        ("d", other.to_string()),
        ("e", third.to_string()),
    ];
    let corpus = tmp.path().join("c.jsonl");
    std::fs::write(
        &corpus,
        docs.iter()
            .map(|(id, t)| serde_json::json!({"id": id, "text": t}).to_string() + "\n")
            .collect::<String>(),
    )
    .unwrap();
    let out = tmp.path().join("out");
    neardup()
        .args([
            "run",
            "-q",
            "--method",
            "minhash",
            "--shingle",
            "3",
            "--threshold",
            "0.8",
            "--output",
        ])
        .arg(&out)
        .arg(&corpus)
        .assert()
        .success();
    // Truth: a~b (1.0), a~c (0.9), d~e (0.85, not found), b~c (0.5, below the positives' bar).
    let truth = tmp.path().join("truth.tsv");
    std::fs::write(&truth, "id1\tid2\tfamily\tjaccard\top\na\tb\t1\t1.0\tcase\na\tc\t1\t0.9\tappend:0.01\nd\te\t2\t0.85\tother\nb\tc\t1\t0.5\tappend:0.02\n").unwrap();
    let output = neardup()
        .args(["eval", "--json", "--run"])
        .arg(&out)
        .arg("--truth")
        .arg(&truth)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    // Reported pairs: a-b (exact), and a-c (near) expands to b-c as well: 3 predicted.
    let p = &r["pairs"];
    assert_eq!(p["predicted"], 3);
    assert_eq!(p["truth"], 3);
    assert_eq!(p["true_positives"], 2);
    assert!((p["precision"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9);
    assert!((p["recall"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9);
    assert_eq!(r["pairs_precision_any_truth"], 1.0);
    assert_eq!(r["recall_by_label"]["op=append"]["truth_pairs"], 1);
    assert_eq!(r["recall_by_jaccard"]["[0.8, 0.9)"]["recall_pairs"], 0.0);
}

#[test]
fn bad_quality_flags_and_truth_files_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("c.jsonl");
    std::fs::write(&corpus, "{\"id\": 1, \"text\": \"hello world\"}\n").unwrap();
    let out = tmp.path().join("out");
    let run = |args: &[&str]| {
        neardup()
            .arg("run")
            .args(args)
            .arg("--output")
            .arg(&out)
            .arg(&corpus)
            .output()
            .unwrap()
    };
    for (args, message) in [
        (
            vec!["--method", "minhash", "--threshold", "1.5"],
            "--threshold 1.5 is out of range",
        ),
        (
            vec!["--bands", "4", "--rows", "8"],
            "apply to --method minhash only",
        ),
        (
            vec!["--threshold", "0.8"],
            "--threshold applies to --method minhash",
        ),
        (
            vec!["--method", "minhash", "--bands", "20", "--rows", "10"],
            "needs 200 permutations",
        ),
        (vec!["--min-jaccard", "0.8"], "need --verify jaccard"),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(!out.join("_SUCCESS").exists());
    }
    neardup()
        .args(["run", "-q", "--output"])
        .arg(&out)
        .arg(&corpus)
        .assert()
        .success();
    let truth = tmp.path().join("t.tsv");
    std::fs::write(&truth, "id1\tid2\tjaccard\n1\t99\t0.9\n").unwrap();
    let o = neardup()
        .args(["eval", "--run"])
        .arg(&out)
        .arg("--truth")
        .arg(&truth)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("t.tsv:2") && stderr.contains("\"99\""),
        "{stderr}"
    );
    std::fs::remove_file(out.join("_SUCCESS")).unwrap();
    let o = neardup()
        .args(["eval", "--run"])
        .arg(&out)
        .arg("--truth")
        .arg(&truth)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("no _SUCCESS"));
}

#[test]
fn write_dedup_keeps_the_kept_records_unchanged_and_lists_the_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let base = "the committee agreed to repair the old stone bridge before winter and to plant a row of trees along the new road";
    let lines: Vec<String> = [
        serde_json::json!({"id": "a", "text": base, "extra": [1, 2]}),
        serde_json::json!({"id": "b", "text": base.to_uppercase()}),
        serde_json::json!({"id": "c", "text": "bees visit thousands of flowers every day gathering nectar and pollen for the hive"}),
        serde_json::json!({"id": "d", "text": format!("{base}!!")}),
    ]
    .iter()
    .map(|v| v.to_string())
    .collect();
    let corpus = tmp.path().join("corpus.jsonl.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, (lines.join("\n") + "\n").as_bytes()).unwrap();
    std::fs::write(&corpus, gz.finish().unwrap()).unwrap();
    let (out, dedup) = (tmp.path().join("out"), tmp.path().join("dedup"));
    neardup()
        .args(["run", "-q", "--keep", "first", "--output"])
        .arg(&out)
        .arg("--write-dedup")
        .arg(&dedup)
        .arg(&corpus)
        .assert()
        .success();
    assert!(dedup.join("_SUCCESS").exists());
    // a, b and d are exact duplicates (case, punctuation): a (first) is kept.
    let bytes = std::fs::read(dedup.join("corpus.jsonl.gz")).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut text)
        .unwrap();
    assert_eq!(
        text,
        format!("{}\n{}\n", lines[0], lines[2]),
        "kept records, byte for byte, same compression"
    );
    let reader = ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(dedup.join("removed.parquet")).unwrap(),
    )
    .unwrap()
    .build()
    .unwrap();
    let mut removed = Vec::new();
    for b in reader {
        let b = b.unwrap();
        let id = b.column_by_name("id").unwrap().as_string::<i32>();
        let kept = b.column_by_name("kept_id").unwrap().as_string::<i32>();
        for i in 0..b.num_rows() {
            removed.push((id.value(i).to_string(), kept.value(i).to_string()));
        }
    }
    assert_eq!(
        removed,
        vec![
            ("b".to_string(), "a".to_string()),
            ("d".to_string(), "a".to_string())
        ]
    );
    // A non-empty dedup directory is refused before any work, like the output directory.
    let again = tmp.path().join("out2");
    let o = neardup()
        .args(["run", "-q", "--output"])
        .arg(&again)
        .arg("--write-dedup")
        .arg(&dedup)
        .arg(&corpus)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--overwrite"));
    assert!(!again.join("_SUCCESS").exists());
}

#[test]
fn star_clusters_hold_only_duplicates_of_their_kept_document() {
    let Some(dir) = shared_corpus("dev-small") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (star, components) = (tmp.path().join("star"), tmp.path().join("components"));
    for (out, mode) in [(&star, "star"), (&components, "components")] {
        neardup()
            .args([
                "run",
                "-q",
                "--method",
                "minhash",
                "--shingle",
                "3",
                "--cluster",
                mode,
                "--output",
            ])
            .arg(out)
            .arg(dir.join("corpus.jsonl"))
            .assert()
            .success();
    }
    let found = pairs(&star);
    assert_eq!(
        found,
        pairs(&components),
        "the cluster mode does not change the pairs"
    );
    // Exact groups: representative -> members.
    let mut group_of: HashMap<u64, u64> = HashMap::new();
    for (a, b, kind, _) in &found {
        if kind == "exact" {
            group_of.insert(*b, *a);
            group_of.insert(*a, *a);
        }
    }
    let group = |d: u64| group_of.get(&d).copied().unwrap_or(d);
    let near: HashSet<(u64, u64)> = found
        .iter()
        .filter(|p| p.2 == "near")
        .map(|p| (group(p.0).min(group(p.1)), group(p.0).max(group(p.1))))
        .collect();
    let labels = cluster_labels(&star);
    let kept = kept_documents(&star);
    let mut members: HashMap<i64, Vec<u64>> = HashMap::new();
    for (d, l) in &labels {
        members.entry(*l).or_default().push(*d);
    }
    let mut checked = 0;
    for (label, docs) in &members {
        let center = kept[label];
        for &d in docs {
            let (g, c) = (group(d), group(center));
            assert!(
                g == c || near.contains(&(g.min(c), g.max(c))),
                "doc {d} in the star of {center} is no duplicate of it"
            );
            checked += 1;
        }
    }
    assert!(checked > 1000, "{checked}");
    let components_labels = cluster_labels(&components);
    assert!(
        members.len() >= components_labels.values().collect::<HashSet<_>>().len(),
        "stars split chains, never merge components"
    );
}

/// cluster label -> the kept document.
fn kept_documents(out: &Path) -> HashMap<i64, u64> {
    let mut kept = HashMap::new();
    for (doc, cluster, keep) in cluster_rows(out) {
        if cluster >= 0 && keep {
            assert!(
                kept.insert(cluster, doc).is_none(),
                "two kept documents in cluster {cluster}"
            );
        }
    }
    kept
}

#[test]
fn minhash_verification_uses_signature_estimates() {
    let Some(dir) = shared_corpus("dev-small") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    neardup()
        .args([
            "run",
            "-q",
            "--method",
            "minhash",
            "--shingle",
            "3",
            "--verify",
            "minhash",
            "--output",
        ])
        .arg(&out)
        .arg(dir.join("corpus.jsonl"))
        .assert()
        .success();
    let near: Vec<f32> = pairs(&out)
        .into_iter()
        .filter(|p| p.2 == "near")
        .map(|p| p.3.expect("estimated"))
        .collect();
    assert!(near.len() > 500);
    for j in near {
        assert!(j >= 0.8, "{j}");
        // An estimate from 128 permutations is a multiple of 1/128.
        assert!(
            (j * 128.0 - (j * 128.0).round()).abs() < 1e-3,
            "{j} is not an estimate"
        );
    }
    let corpus = dir.join("corpus.jsonl");
    let o = neardup()
        .args(["run", "--verify", "minhash", "--output"])
        .arg(tmp.path().join("x"))
        .arg(&corpus)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs --method minhash"));
}

#[test]
fn large_clusters_are_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("c.jsonl");
    let text = "the same paragraph of boilerplate text repeated on many pages of one web site";
    std::fs::write(
        &corpus,
        (0..5)
            .map(|i| serde_json::json!({"id": i, "text": text}).to_string() + "\n")
            .collect::<String>(),
    )
    .unwrap();
    let out = tmp.path().join("out");
    let o = neardup()
        .args(["run", "--cluster-warning", "3", "--output"])
        .arg(&out)
        .arg(&corpus)
        .output()
        .unwrap();
    assert!(o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("holds 5 documents (more than 3)"),
        "{stderr}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert!(summary["warnings"][0]
        .as_str()
        .unwrap()
        .contains("--cluster star"));
}

#[test]
fn eval_sweep_prints_the_trade_off_of_every_method() {
    let Some(dir) = shared_corpus("dev-small") else {
        return;
    };
    let o = neardup()
        .args(["eval", "--sample", "3000", "--sweep"])
        .arg(dir.join("corpus.jsonl"))
        .arg("--truth")
        .arg(dir.join("truth.tsv"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8(o.stdout).unwrap();
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| `")).collect();
    assert_eq!(rows.len(), 8, "{table}");
    for row in &rows {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        for value in &cells[3..8] {
            let v: f64 = value.parse().unwrap();
            assert!((0.0..=1.0).contains(&v), "{row}");
        }
    }
    let minhash = rows
        .iter()
        .find(|r| r.contains("--shingle 3 --threshold 0.8"))
        .unwrap();
    let precision: f64 = minhash.split('|').nth(3).unwrap().trim().parse().unwrap();
    assert!(precision >= 0.99, "{minhash}");
}

#[test]
fn tfidf_weights_need_the_job() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("c.jsonl");
    std::fs::write(&corpus, "{\"id\": 1, \"text\": \"hello world\"}\n").unwrap();
    let o = neardup()
        .args(["hash", "--weights", "tfidf"])
        .arg(&corpus)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("use it with neardup run"));
    let out = tmp.path().join("out");
    neardup()
        .args(["run", "-q", "--weights", "tfidf", "--output"])
        .arg(&out)
        .arg(&corpus)
        .assert()
        .success();
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert!(
        summary["parameters"]["scheme"]
            .as_str()
            .unwrap()
            .contains("tf-idf"),
        "{summary}"
    );
    assert!(summary["stage_seconds"]["document frequencies"].is_number());
}

#[test]
fn lsh_bands_in_rounds_or_spilled_find_the_same_pairs() {
    let Some(dir) = shared_corpus("dev-small") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (one, three, spilled) = (
        tmp.path().join("one"),
        tmp.path().join("three"),
        tmp.path().join("spilled"),
    );
    // 1 MiB cannot hold the bands in memory: the waiting signatures and the band entries
    // go to disk.
    for (out, rounds, limit) in [
        (&one, "1", "none"),
        (&three, "3", "none"),
        (&spilled, "2", "1M"),
    ] {
        neardup()
            .args([
                "run",
                "-q",
                "-w",
                "2",
                "--method",
                "minhash",
                "--shingle",
                "3",
                "--table-rounds",
                rounds,
                "--memory-limit",
                limit,
                "--output",
            ])
            .arg(out)
            .arg(dir.join("corpus.jsonl"))
            .assert()
            .success();
    }
    let sorted = |mut v: Vec<(u64, u64, String, Option<f32>)>| {
        v.sort_by_key(|a| (a.0, a.1));
        v
    };
    let (a, b, c) = (
        sorted(pairs(&one)),
        sorted(pairs(&three)),
        sorted(pairs(&spilled)),
    );
    assert!(a.len() > 1000);
    assert_eq!(a, b);
    assert_eq!(a, c);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(spilled.join("summary.json")).unwrap()).unwrap();
    assert!(
        summary["search_plan"]["spill_partition_bits"].is_number(),
        "{summary}"
    );
    assert!(summary["counts"]["spilled_bytes"].as_u64().unwrap() > 0);
}

/// MinHash: documents with one shingle set but different exact keys (a cyclic text repeated
/// and rotated) have one signature, so they share every band. Each is one candidate with
/// the smallest of them, verified like any other, not one of `n(n-1)/2` per band (issue
/// 39); they are still one cluster.
#[test]
fn minhash_identical_signatures_are_linked_by_linear_pairs() {
    const N: usize = 400;
    let words = ["alpha", "bravo", "charlie", "delta"];
    let mut texts: Vec<String> = (0..N)
        .map(|i| {
            let (rotation, repeats) = (i % 4, 3 + i / 4);
            (0..4 * repeats)
                .map(|j| words[(rotation + j) % 4])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    // The same words in another cycle: another shingle set, in no pair with the others.
    texts.push("alpha charlie bravo delta ".repeat(5));
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("cycles.jsonl");
    let lines: Vec<String> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| serde_json::json!({"id": i, "text": t}).to_string())
        .collect();
    std::fs::write(&corpus, lines.join("\n") + "\n").unwrap();
    let first = shingles(&texts[0], 3);
    assert!(texts[1..N]
        .iter()
        .all(|t| jaccard(&first, &shingles(t, 3)) == 1.0));
    for workers in ["1", "2"] {
        let out = tmp.path().join(format!("out-{workers}"));
        neardup()
            .args(["run", "-q", "-w", workers, "--method", "minhash"])
            .args(["--shingle", "3", "--threshold", "0.8", "--output"])
            .arg(&out)
            .arg(&corpus)
            .assert()
            .success();
        let mut found = pairs(&out);
        found.sort_by_key(|p| (p.0, p.1));
        let expected: Vec<(u64, u64, String, Option<f32>)> = (1..N as u64)
            .map(|m| (0, m, "near".to_string(), Some(1.0)))
            .collect();
        assert_eq!(found.len(), expected.len(), "{workers} workers");
        assert_eq!(found, expected, "{workers} workers");
        let labels = cluster_labels(&out);
        assert_eq!(
            labels,
            (0..N as u64).map(|d| (d, 0)).collect(),
            "{workers} workers"
        );
    }
}
