//! Self-describing tables (issue 23, item 2), end to end: every table neardup writes says in
//! its Parquet metadata which table it is, which scheme made it and with what parameters;
//! `search` and `eval` refuse tables of another scheme or of mixed origins, and `search`
//! refuses duplicate or negative document numbers, naming the file and row.
//!
//! The reproduction of the issue: `neardup search` over the `fingerprints/` of a
//! `--scheme minhash` run exited 0 and put every document into one cluster (MinHash
//! fingerprints have no simhash: the column is all 0).

mod common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, UInt64Array};
use common::*;
use parquet::file::reader::{FileReader, SerializedFileReader};
use serde_json::Value;

/// A corpus of 120 documents: 100 unrelated texts and 20 light edits of the first 20.
fn corpus(dir: &Path) -> PathBuf {
    let mut rng = SeededRng::new(0x7AB1E);
    let mut docs = Vec::new();
    let texts: Vec<Vec<String>> = (0..100).map(|_| rng.words(80)).collect();
    for (i, words) in texts.iter().enumerate() {
        docs.push(doc(i as u64, words.join(" ")));
    }
    for (i, words) in texts.iter().take(20).enumerate() {
        let mut edited = words.clone();
        edited[40] = rng.word();
        docs.push(doc(1000 + i as u64, edited.join(" ")));
    }
    write(&dir.join("corpus.jsonl"), &jsonl(&docs))
}

/// The `neardup.*` key-value metadata of a Parquet file.
fn neardup_keys(path: &Path) -> Vec<(String, String)> {
    let reader = SerializedFileReader::new(File::open(path).unwrap()).unwrap();
    let mut keys: Vec<(String, String)> = reader
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .into_iter()
        .flatten()
        .filter(|kv| kv.key.starts_with("neardup."))
        .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
        .collect();
    keys.sort();
    keys
}

fn key<'a>(keys: &'a [(String, String)], name: &str) -> &'a str {
    keys.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {name} in {keys:?}"))
}

fn search(out: &Path, inputs: &[&Path]) -> assert_cmd::Command {
    let mut cmd = neardup();
    cmd.args(["search", "-q", "--output", s(out)]);
    cmd.args(inputs.iter().map(|p| s(p)));
    cmd
}

#[test]
fn search_refuses_the_fingerprints_of_a_minhash_run() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let run = dir.path().join("minhash");
    run_ok(&run, &["-q", "--scheme", "minhash"], &[&input]);
    let out = dir.path().join("searched");
    let part = run.join("fingerprints/part-00000.parquet");
    assert_fails(
        &mut search(&out, &[&run.join("fingerprints")]),
        &out,
        &[&format!(
            "{}: scheme minhash, expected simhash-doc or simhash-shingles (the search compares \
             64-bit simhashes, and minhash fingerprints have none)",
            part.display()
        )],
    );
    // A pairs table given as fingerprints is refused as such.
    assert_fails(
        &mut search(&out, &[&run.join("pairs")]),
        &out,
        &[&format!(
            "{}: a neardup pairs table, expected a fingerprints table",
            run.join("pairs/part-00000.parquet").display()
        )],
    );
}

#[test]
fn search_refuses_fingerprints_of_different_schemes_together() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let (doc_run, shingle_run) = (dir.path().join("doc"), dir.path().join("shingles"));
    run_ok(&doc_run, &["-q"], &[&input]);
    run_ok(
        &shingle_run,
        &["-q", "--scheme", "simhash-shingles"],
        &[&input],
    );
    let out = dir.path().join("searched");
    let (a, b) = (
        doc_run.join("fingerprints/part-00000.parquet"),
        shingle_run.join("fingerprints/part-00000.parquet"),
    );
    assert_fails(
        &mut search(&out, &[&a, &b]),
        &out,
        &[&format!(
            "{}: scheme simhash-shingles, expected simhash-doc (as in {}: tables made by \
             different schemes cannot be used together)",
            b.display(),
            a.display()
        )],
    );
    // Same scheme, another shingle size: the parameter is named with both values.
    let five = dir.path().join("shingles5");
    run_ok(
        &five,
        &["-q", "--scheme", "simhash-shingles", "--shingle", "5"],
        &[&input],
    );
    let c = five.join("fingerprints/part-00000.parquet");
    assert_fails(
        &mut search(&out, &[&b, &c]),
        &out,
        &[&format!(
            "{}: made with other parameters than {}: shingle (5 vs 3); tables made \
             differently cannot be used together",
            c.display(),
            b.display()
        )],
    );
}

#[test]
fn every_table_of_a_run_says_what_made_it_and_search_passes_it_on() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let run = dir.path().join("run");
    let dedup = dir.path().join("dedup");
    run_ok(
        &run,
        &["-q", "-w", "2", "-k", "4", "--write-dedup", s(&dedup)],
        &[&input],
    );
    let mut fingerprint_params = None;
    for (table, path) in [
        ("fingerprints", run.join("fingerprints/part-00001.parquet")),
        ("pairs", run.join("pairs/part-00000.parquet")),
        ("clusters", run.join("clusters/part-00001.parquet")),
        ("removed", dedup.join("removed.parquet")),
    ] {
        let keys = neardup_keys(&path);
        assert_eq!(key(&keys, "neardup.format"), "1");
        assert_eq!(key(&keys, "neardup.version"), env!("CARGO_PKG_VERSION"));
        assert_eq!(key(&keys, "neardup.table"), table);
        assert_eq!(key(&keys, "neardup.scheme"), "simhash-doc");
        let params: Value = serde_json::from_str(key(&keys, "neardup.params")).unwrap();
        let fingerprint = &params["fingerprint"];
        assert_eq!(fingerprint["method"], "simhash", "{table}: {params}");
        assert_eq!(fingerprint["features"], "words");
        assert_eq!(fingerprint["feature_hash"], "lookup3");
        assert_eq!(fingerprint["weights"], "set");
        assert_eq!(fingerprint["revision"], 1);
        // The fingerprint parameters are the same in every table of the run.
        match &fingerprint_params {
            None => fingerprint_params = Some(fingerprint.clone()),
            Some(first) => assert_eq!(first, fingerprint, "{table}"),
        }
        if table == "fingerprints" {
            assert!(params.get("search").is_none(), "{params}");
        } else {
            assert_eq!(params["search"]["k"], 4, "{table}: {params}");
            assert_eq!(params["search"]["exact"], true);
        }
    }

    // A search over these fingerprints labels its tables with their scheme and parameters.
    let out = dir.path().join("searched");
    search_ok(&out, &["-q", "-k", "5"], &run.join("fingerprints"));
    let keys = neardup_keys(&out.join("clusters/part-00000.parquet"));
    assert_eq!(key(&keys, "neardup.scheme"), "simhash-doc");
    let params: Value = serde_json::from_str(key(&keys, "neardup.params")).unwrap();
    assert_eq!(Some(&params["fingerprint"]), fingerprint_params.as_ref());
    assert_eq!(params["search"]["k"], 5);
    assert_eq!(params["search"]["exact"], false);

    // A search over a table without neardup's metadata (another tool's) is accepted and
    // says so.
    let foreign = dir.path().join("foreign.parquet");
    write_parquet(
        &foreign,
        vec![
            (
                "doc_id",
                Arc::new(UInt64Array::from(vec![1, 2, 3])) as ArrayRef,
            ),
            ("simhash", Arc::new(UInt64Array::from(vec![7, 7, 1 << 40]))),
        ],
        10,
    );
    let out = dir.path().join("foreign-searched");
    search_ok(&out, &["-q"], &foreign);
    let keys = neardup_keys(&out.join("pairs/part-00000.parquet"));
    assert_eq!(key(&keys, "neardup.scheme"), "unknown");
    let params: Value = serde_json::from_str(key(&keys, "neardup.params")).unwrap();
    assert_eq!(params["fingerprint"], Value::Null);
    assert_eq!(
        pair_set(&pairs(&out)),
        [(1, 2)].into_iter().collect(),
        "the foreign table is searched as before"
    );
}

#[test]
fn search_refuses_duplicate_and_negative_document_numbers() {
    let dir = tempfile::tempdir().unwrap();
    // The reproduction: a doc_id given twice (here in two files, read by
    // different workers: the copies meet at their home) gave a self-pair (2, 2).
    let a = dir.path().join("a.parquet");
    let b = dir.path().join("b.parquet");
    write_parquet(
        &a,
        vec![
            (
                "doc_id",
                Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef,
            ),
            ("simhash", Arc::new(Int64Array::from(vec![7, 7, 7]))),
        ],
        2,
    );
    write_parquet(
        &b,
        vec![
            (
                "doc_id",
                Arc::new(Int64Array::from(vec![4, 5, 2])) as ArrayRef,
            ),
            ("simhash", Arc::new(Int64Array::from(vec![7, 9, 7]))),
        ],
        2,
    );
    for workers in ["1", "3"] {
        let out = dir.path().join(format!("dup-{workers}"));
        let mut cmd = search(&out, &[&a, &b]);
        cmd.args(["-w", workers]);
        assert_fails(
            &mut cmd,
            &out,
            &[&format!(
                "{}: row 2: doc_id 2 is a duplicate (also at {} row 1); document numbers must \
                 be unique",
                b.display(),
                a.display()
            )],
        );
    }

    // A negative doc_id gave a negative cluster id.
    let negative = dir.path().join("negative.parquet");
    write_parquet(
        &negative,
        vec![
            (
                "doc_id",
                Arc::new(Int64Array::from(vec![1, -5])) as ArrayRef,
            ),
            ("simhash", Arc::new(Int64Array::from(vec![7, 7]))),
        ],
        10,
    );
    let out = dir.path().join("negative-out");
    assert_fails(
        &mut search(&out, &[&negative]),
        &out,
        &[&format!(
            "{}: row 1: column \"doc_id\" is negative (-5); document numbers are 0 or more",
            negative.display()
        )],
    );
}

#[test]
fn eval_refuses_a_run_with_a_part_of_another_run() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let (run, other) = (dir.path().join("run"), dir.path().join("other"));
    run_ok(&run, &["-q"], &[&input]);
    run_ok(&other, &["-q", "--keep", "longest"], &[&input]);
    let truth = write(
        &dir.path().join("truth.tsv"),
        b"id1\tid2\tjaccard\n0\t1000\t0.9\n",
    );
    let eval = |run: &Path| {
        let mut cmd = neardup();
        cmd.args(["eval", "--run", s(run), "--truth", s(&truth)]);
        cmd
    };
    stdout_of(&mut eval(&run));
    // A pairs part of a run that kept other documents slipped into this run.
    let stray = run.join("pairs/part-00007.parquet");
    std::fs::copy(other.join("pairs/part-00000.parquet"), &stray).unwrap();
    assert_refused(
        &mut eval(&run),
        &[&format!(
            "{}: made with other parameters than {}: keep (\"longest\" vs \"first\"); tables \
             made differently cannot be used together",
            stray.display(),
            run.join("pairs/part-00000.parquet").display()
        )],
    );
}
