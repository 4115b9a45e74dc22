//! End-to-end tests of `neardup substrings`: the binary runs on small random corpora with
//! planted repeats (at document starts and ends, periodic runs, copies inside one document,
//! multi-byte characters), and its `substrings/` rows are compared with the definition
//! executed literally (`neardup_core::substrings::oracle`: every substring of every document
//! against every position of the corpus), at 1, 2 and 4 workers, with blocks small enough
//! that one worker holds many suffix arrays, and across two processes.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::datatypes::UInt64Type;
use neardup_core::substrings::{oracle, Occurrences, Range, Settings, Snap};
use serde_json::json;

/// The rows of `substrings/`: `(doc_id, id, start, end)`, sorted.
fn rows(out: &Path) -> Vec<(u64, Option<String>, u64, u64)> {
    let mut rows = Vec::new();
    for b in batches(&out.join("substrings")) {
        let doc = column(&b, "doc_id").as_primitive::<UInt64Type>();
        let id = column(&b, "id").as_string::<i32>();
        let start = column(&b, "start").as_primitive::<UInt64Type>();
        let end = column(&b, "end").as_primitive::<UInt64Type>();
        for i in 0..b.num_rows() {
            let id = (!id.is_null(i)).then(|| id.value(i).to_string());
            rows.push((doc.value(i), id, start.value(i), end.value(i)));
        }
    }
    rows.sort();
    rows
}

fn ranges(out: &Path) -> Vec<Range> {
    rows(out)
        .into_iter()
        .map(|(doc_id, _, start, end)| Range { doc_id, start, end })
        .collect()
}

/// A corpus of two JSONL files with planted repeats; returns the files and every document
/// as `(doc_id, text)`, sorted.
fn corpus(dir: &Path, seed: u64) -> (Vec<PathBuf>, Vec<(u64, String)>) {
    let mut rng = SeededRng::new(seed);
    let alphabet = ["a", "b", "c", " ", "é", "€", "x", "y", "z"];
    let passage: String = (0..6 + rng.below(10))
        .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
        .collect();
    let mut files = Vec::new();
    let mut docs = Vec::new();
    for file in 0..2u64 {
        let mut lines = Vec::new();
        for line in 0..2 + rng.below(4) {
            let mut s = String::new();
            match rng.below(5) {
                0 => s.push_str(&passage),
                1 => s.push_str(&"abc".repeat(1 + rng.below(5) as usize)),
                _ => {}
            }
            for _ in 0..rng.below(16) {
                s.push_str(alphabet[rng.below(alphabet.len() as u64) as usize]);
            }
            if rng.below(3) == 0 {
                s.push_str(&passage);
            }
            if rng.below(4) == 0 {
                let copy = s.clone();
                s.push_str(&copy);
            }
            lines.push(json!({"id": format!("f{file}l{line}"), "text": s}));
            docs.push(((file << 40) | line, s));
        }
        files.push(write(
            &dir.join(format!("part{file}.jsonl")),
            &jsonl_values(&lines),
        ));
    }
    docs.sort();
    (files, docs)
}

fn substrings(out: &Path, args: &[&str], inputs: &[PathBuf]) {
    let mut cmd = neardup();
    cmd.arg("substrings")
        .args(args)
        .args(["--output", s(out)])
        .args(inputs.iter().map(|p| s(p)));
    let output = cmd.output().unwrap();
    assert!(
        output.status.success(),
        "neardup substrings {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(out.join("_SUCCESS").is_file());
}

fn expected(docs: &[(u64, String)], settings: &Settings) -> Vec<Range> {
    let refs: Vec<(u64, &[u8])> = docs.iter().map(|(i, t)| (*i, t.as_bytes())).collect();
    oracle(&refs, settings)
}

#[test]
fn random_corpora_match_the_definition_at_1_2_and_4_workers() {
    let tmp = tempfile::tempdir().unwrap();
    let mut found = 0;
    for seed in 0..6u64 {
        let dir = tmp.path().join(format!("c{seed}"));
        std::fs::create_dir_all(&dir).unwrap();
        let (files, docs) = corpus(&dir, seed);
        let longest = docs.iter().map(|d| d.1.len()).max().unwrap();
        // N = 1, N longer than every document, and lengths in between.
        let n = match seed {
            0 => 1,
            1 => longest + 1,
            _ => 3 + seed as usize,
        };
        for (occurrences, snap) in [
            (Occurrences::Later, Snap::Chars),
            (Occurrences::All, Snap::Words),
        ] {
            let settings = Settings {
                min_bytes: n,
                occurrences,
                snap,
            };
            let want = expected(&docs, &settings);
            found += usize::from(!want.is_empty());
            for workers in ["1", "2", "4"] {
                let out = dir.join(format!("out-{}-{workers}", occurrences.name()));
                substrings(
                    &out,
                    &[
                        "-w",
                        workers,
                        "--min-bytes",
                        &n.to_string(),
                        "--occurrences",
                        occurrences.name(),
                        "--snap",
                        snap.name(),
                    ],
                    &files,
                );
                assert_eq!(
                    ranges(&out),
                    want,
                    "seed {seed}, {settings:?}, {workers} workers; documents {docs:?}"
                );
            }
        }
    }
    assert!(
        found >= 6,
        "the planted repeats were found in {found} runs only"
    );
}

#[test]
fn many_small_blocks_give_the_same_ranges() {
    let tmp = tempfile::tempdir().unwrap();
    let (files, docs) = corpus(tmp.path(), 42);
    let settings = Settings {
        min_bytes: 4,
        occurrences: Occurrences::Later,
        snap: Snap::Chars,
    };
    let out = tmp.path().join("out");
    // Every document gets its own suffix array: all repeats go through the exchange.
    substrings(
        &out,
        &["-w", "2", "--min-bytes", "4", "--block-bytes", "1"],
        &files,
    );
    assert_eq!(ranges(&out), expected(&docs, &settings));
    let summary = summary(&out);
    let s = &summary["substrings"];
    assert_eq!(s["documents"], json!(docs.len()));
    assert!(s["blocks"].as_u64().unwrap() >= docs.len() as u64 - 1);
}

#[test]
fn rows_carry_the_id_and_the_summary_counts_add_up() {
    let tmp = tempfile::tempdir().unwrap();
    let licence = "Permission is hereby granted, free of charge, to any person";
    let texts = [
        format!("Intro one. {licence} and more."),
        "Nothing repeated here at all.".to_string(),
        format!("{licence}. Outro"),
    ];
    let lines: Vec<_> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"id": format!("doc-{i}"), "text": t}))
        .collect();
    let input = write(&tmp.path().join("c.jsonl"), &jsonl_values(&lines));
    let out = tmp.path().join("out");
    substrings(&out, &["--min-bytes", "20"], &[input]);
    let got = rows(&out);
    // Later copies only: the licence in document 2, from its start; the first copy stays.
    assert_eq!(
        got,
        vec![(2, Some("doc-2".to_string()), 0, licence.len() as u64)]
    );
    let summary = summary(&out);
    let s = &summary["substrings"];
    let total: usize = texts.iter().map(|t| t.len()).sum();
    assert_eq!(s["repeated_bytes"], json!(licence.len()));
    assert_eq!(s["bytes"], json!(total));
    assert_eq!(s["documents_touched"], json!(1));
    assert_eq!(s["ranges"], json!(1));
    let share = s["repeated_share"].as_f64().unwrap();
    assert!((share - licence.len() as f64 / total as f64).abs() < 1e-12);
}

#[test]
fn parquet_input_is_numbered_like_run() {
    let tmp = tempfile::tempdir().unwrap();
    let text = "a shared passage of text, long enough";
    let texts = vec![
        format!("{text} one"),
        "filler".to_string(),
        format!("two {text}"),
    ];
    let path = tmp.path().join("c.parquet");
    let ids: ArrayRef = std::sync::Arc::new(StringArray::from(vec!["x", "y", "z"]));
    let column: ArrayRef = std::sync::Arc::new(StringArray::from(texts.clone()));
    // Row groups of 2 rows: documents reach the search from two read units.
    write_parquet(&path, vec![("id", ids), ("text", column)], 2);
    let out = tmp.path().join("out");
    substrings(
        &out,
        &["-w", "2", "--min-bytes", "10", "--occurrences", "all"],
        std::slice::from_ref(&path),
    );
    assert_eq!(
        rows(&out),
        vec![
            (0, Some("x".into()), 0, text.len() as u64),
            (2, Some("z".into()), 4, 4 + text.len() as u64)
        ]
    );
}

#[test]
fn two_processes_agree_with_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (files, docs) = corpus(tmp.path(), 9);
    let settings = Settings {
        min_bytes: 3,
        occurrences: Occurrences::Later,
        snap: Snap::Chars,
    };
    let hostfile = write_hostfile(&tmp.path().join("hosts"), &loopback(&free_ports(2)));
    let out = tmp.path().join("out");
    let mut procs: Vec<Proc> = (0..2)
        .map(|p| {
            let mut cmd = std::process::Command::new(BIN);
            for var in ENV_VARS {
                cmd.env_remove(var);
            }
            cmd.args(["substrings", "-n", "2", "-p", &p.to_string()])
                .args(["-h", s(&hostfile), "-w", "2", "--min-bytes", "3"])
                .args(["--output", s(&out)])
                .args(files.iter().map(|f| s(f)));
            Proc::spawn(format!("process {p}"), cmd)
        })
        .collect();
    let statuses = wait_all(&mut procs, Duration::from_secs(120));
    assert!(statuses.iter().all(|s| s.success()), "{}", logs(&procs));
    assert_eq!(ranges(&out), expected(&docs, &settings));
    assert_eq!(parts(&out.join("substrings")).len(), 4);
}

#[test]
fn bad_arguments_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let input = write(&tmp.path().join("c.jsonl"), b"{\"text\": \"x\"}\n");
    let out = tmp.path().join("out");
    let mut cmd = neardup();
    cmd.args([
        "substrings",
        "--min-bytes",
        "0",
        "--output",
        s(&out),
        s(&input),
    ]);
    assert_refused(&mut cmd, &["--min-bytes 0"]);
    let bad = write(
        &tmp.path().join("bad.jsonl"),
        b"{\"id\": 1, \"text\": \"x\"}\nnot json\n",
    );
    let mut cmd = neardup();
    cmd.args(["substrings", "--output", s(&out), s(&bad)]);
    assert_fails(&mut cmd, &out, &["bad.jsonl:2:", "malformed JSON"]);
}
