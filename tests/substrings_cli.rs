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
    let mut texts: Vec<Vec<String>> = Vec::new();
    for _ in 0..2 {
        let mut lines = Vec::new();
        for _ in 0..2 + rng.below(4) {
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
            lines.push(s);
        }
        texts.push(lines);
    }
    write_corpus(dir, texts)
}

/// Writes `texts[file][line]` as the JSONL files `part{file}.jsonl` (ids `f{file}l{line}`);
/// returns the files and every document as `(doc_id, text)`, sorted.
fn write_corpus(dir: &Path, texts: Vec<Vec<String>>) -> (Vec<PathBuf>, Vec<(u64, String)>) {
    let mut files = Vec::new();
    let mut docs = Vec::new();
    for (file, lines) in texts.into_iter().enumerate() {
        let file = file as u64;
        let mut values = Vec::new();
        for (line, s) in lines.into_iter().enumerate() {
            values.push(json!({"id": format!("f{file}l{line}"), "text": s}));
            docs.push(((file << 40) | line as u64, s));
        }
        files.push(write(
            &dir.join(format!("part{file}.jsonl")),
            &jsonl_values(&values),
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

/// A corpus for windows of 16 bytes and more (where anchors decide which windows are
/// sent): two files of documents built from a few 6-byte pieces, so that long passages
/// repeat across documents and files and inside one document.
fn piece_corpus(dir: &Path, seed: u64) -> (Vec<PathBuf>, Vec<(u64, String)>) {
    let mut rng = SeededRng::new(seed);
    let pieces = ["abcdef", "the ca", "t sat ", "é€ab", "xxxxxx", "on mat"];
    let texts = (0..2)
        .map(|_| {
            (0..3 + rng.below(4))
                .map(|_| {
                    let mut s = String::new();
                    for _ in 0..3 + rng.below(20) {
                        let kinds = 2 + rng.below(4);
                        s.push_str(pieces[rng.below(kinds) as usize]);
                    }
                    s
                })
                .collect()
        })
        .collect();
    write_corpus(dir, texts)
}

#[test]
fn anchored_windows_match_the_definition_at_1_2_and_4_workers_and_spilled() {
    let tmp = tempfile::tempdir().unwrap();
    let mut found = 0;
    for seed in 0..4u64 {
        let dir = tmp.path().join(format!("c{seed}"));
        std::fs::create_dir_all(&dir).unwrap();
        let (files, docs) = piece_corpus(&dir, 100 + seed);
        let n = [16, 19, 24, 50][seed as usize];
        for occurrences in [Occurrences::Later, Occurrences::All] {
            let settings = Settings {
                min_bytes: n,
                occurrences,
                snap: Snap::Chars,
            };
            let want = expected(&docs, &settings);
            found += usize::from(!want.is_empty());
            for (workers, limit) in [("1", None), ("2", None), ("4", None), ("2", Some("1K"))] {
                let out = dir.join(format!("out-{}-{workers}-{limit:?}", occurrences.name()));
                let n = n.to_string();
                let mut args = vec!["-w", workers, "--min-bytes", &n];
                args.extend(["--occurrences", occurrences.name(), "--block-bytes", "200"]);
                if let Some(limit) = limit {
                    args.extend(["--memory-limit", limit]);
                }
                substrings(&out, &args, &files);
                assert_eq!(
                    ranges(&out),
                    want,
                    "seed {seed}, {settings:?}, {workers} workers, limit {limit:?}; documents {docs:?}"
                );
                let summary = summary(&out);
                let counts = &summary["substrings"];
                // Anchors were counted, and fewer windows were sent than a byte each.
                assert!(counts["anchor_records"].as_u64().unwrap() > 0);
                assert!(
                    counts["window_records"].as_u64().unwrap() < counts["bytes"].as_u64().unwrap()
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
fn a_document_over_max_doc_bytes_is_cut_and_counted() {
    let tmp = tempfile::tempdir().unwrap();
    // 100 bytes whose halves repeat; cut at 64 bytes, only the first 14 bytes of the
    // second half remain, too few for a repeat of 20.
    let half = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN";
    let input = write(
        &tmp.path().join("c.jsonl"),
        &jsonl_values(&[json!({"id": "a", "text": format!("{half}{half}")})]),
    );
    let out = tmp.path().join("out");
    substrings(
        &out,
        &["--min-bytes", "20", "--max-doc-bytes", "64"],
        &[input],
    );
    let summary = summary(&out);
    assert_eq!(summary["counts"]["truncated"], 1);
    assert_eq!(summary["substrings"]["bytes"], 64);
    assert_eq!(ranges(&out), Vec::<Range>::new());
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
    // N = 3 sends every window; N = 20 sends only those of hot anchors.
    for (name, n) in [("plain", 3usize), ("anchored", 20)] {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let (files, docs) = if n == 3 {
            corpus(&dir, 9)
        } else {
            piece_corpus(&dir, 9)
        };
        let settings = Settings {
            min_bytes: n,
            occurrences: Occurrences::Later,
            snap: Snap::Chars,
        };
        let hostfile = write_hostfile(&dir.join("hosts"), &loopback(&free_ports(2)));
        let out = dir.join("out");
        let n = n.to_string();
        let mut procs: Vec<Proc> = (0..2)
            .map(|p| {
                let mut cmd = std::process::Command::new(BIN);
                for var in ENV_VARS {
                    cmd.env_remove(var);
                }
                cmd.args(["substrings", "-n", "2", "-p", &p.to_string()])
                    .args(["-h", s(&hostfile), "-w", "2", "--min-bytes", &n])
                    .args(["--output", s(&out)])
                    .args(files.iter().map(|f| s(f)));
                Proc::spawn(format!("process {p}"), cmd)
            })
            .collect();
        let statuses = wait_all(&mut procs, Duration::from_secs(120));
        assert!(statuses.iter().all(|s| s.success()), "{}", logs(&procs));
        let want = expected(&docs, &settings);
        assert!(!want.is_empty(), "{name}: nothing planted was found");
        assert_eq!(ranges(&out), want, "{name}");
        assert_eq!(parts(&out.join("substrings")).len(), 4);
    }
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

/// Writes `docs` (sorted, numbered `file << 40 | line` without gaps) as JSONL files.
fn write_files(dir: &Path, docs: &[(u64, String)]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let last = docs.last().map_or(0, |d| d.0 >> 40);
    for file in 0..=last {
        let lines: Vec<_> = docs
            .iter()
            .filter(|d| d.0 >> 40 == file)
            .map(|(doc, text)| json!({"id": format!("f{file}l{}", doc & 0xff_ffff), "text": text}))
            .collect();
        files.push(write(
            &dir.join(format!("part{file}.jsonl")),
            &jsonl_values(&lines),
        ));
    }
    files
}

/// A corpus whose documents are often exact copies of earlier ones (clusters remove them),
/// with the planted repeats of [`corpus`].
fn corpus_with_copies(dir: &Path, seed: u64) -> (Vec<PathBuf>, Vec<(u64, String)>) {
    let scratch = dir.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let (_, mut docs) = corpus(&scratch, seed);
    let mut rng = SeededRng::new(seed ^ 0x5eed);
    for i in 1..docs.len() {
        if rng.below(3) == 0 {
            docs[i].1 = docs[rng.below(i as u64) as usize].1.clone();
        }
        if docs[i].1.is_empty() {
            docs[i].1 = "z".into();
        }
    }
    (write_files(dir, &docs), docs)
}

#[test]
fn run_substrings_equals_substrings_over_the_runs_own_dedup_output() {
    let tmp = tempfile::tempdir().unwrap();
    let mut removed_somewhere = false;
    for seed in [3u64, 11, 17] {
        let dir = tmp.path().join(format!("c{seed}"));
        std::fs::create_dir_all(&dir).unwrap();
        let (files, docs) = corpus_with_copies(&dir, seed);
        let n = 3 + (seed % 3) as usize;
        for workers in ["1", "2"] {
            for occurrences in ["later", "all"] {
                let out = dir.join(format!("run-{workers}-{occurrences}"));
                let dedup = dir.join(format!("dedup-{workers}-{occurrences}"));
                let inputs: Vec<&Path> = files.iter().map(|f| f.as_path()).collect();
                run_ok(
                    &out,
                    &[
                        "-w",
                        workers,
                        "--substrings",
                        &n.to_string(),
                        "--occurrences",
                        occurrences,
                        "--write-dedup",
                        s(&dedup),
                    ],
                    &inputs,
                );
                // The kept documents, in order: line i of a kept file is its i-th kept one.
                let kept: Vec<u64> = clusters(&out)
                    .into_iter()
                    .filter(|c| c.keep)
                    .map(|c| c.doc_id)
                    .collect();
                removed_somewhere |= kept.len() < docs.len();
                let dedup_files: Vec<PathBuf> = files
                    .iter()
                    .map(|f| dedup.join(f.file_name().unwrap()))
                    .filter(|f| f.is_file())
                    .collect();
                let again = dir.join(format!("again-{workers}-{occurrences}"));
                substrings(
                    &again,
                    &["--min-bytes", &n.to_string(), "--occurrences", occurrences],
                    &dedup_files,
                );
                // Numbers of the dedup output mapped back to the run's through clusters/.
                let mut back = std::collections::HashMap::new();
                for (f, path) in dedup_files.iter().enumerate() {
                    let file = files.iter().position(|p| p.file_name() == path.file_name());
                    let file = file.unwrap() as u64;
                    let of_file: Vec<u64> =
                        kept.iter().copied().filter(|d| d >> 40 == file).collect();
                    for (line, doc) in of_file.into_iter().enumerate() {
                        back.insert((f as u64) << 40 | line as u64, doc);
                    }
                }
                let mut mapped: Vec<(u64, Option<String>, u64, u64)> = rows(&again)
                    .into_iter()
                    .map(|(d, id, a, b)| (back[&d], id, a, b))
                    .collect();
                mapped.sort();
                let got = rows(&out);
                assert_eq!(
                    got, mapped,
                    "seed {seed}, {workers} workers, {occurrences}; documents {docs:?}"
                );
                // And the definition over the kept documents.
                let settings = Settings {
                    min_bytes: n,
                    occurrences: if occurrences == "all" {
                        Occurrences::All
                    } else {
                        Occurrences::Later
                    },
                    snap: Snap::Chars,
                };
                let kept_docs: Vec<(u64, String)> = docs
                    .iter()
                    .filter(|d| kept.binary_search(&d.0).is_ok())
                    .cloned()
                    .collect();
                assert_eq!(ranges(&out), expected(&kept_docs, &settings));
                let summary = summary(&out);
                assert_eq!(summary["substrings"]["documents"], json!(kept.len()));
                assert_eq!(summary["substrings"]["ranges"], json!(got.len()));
                assert_eq!(summary["counts"]["documents"], json!(docs.len()));
            }
        }
    }
    assert!(removed_somewhere, "no run removed a document");
}

/// `text` without the byte ranges of `doc` among `rows` (recomputed from the rows).
fn struck(text: &str, doc: u64, rows: &[(u64, Option<String>, u64, u64)]) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut at = 0usize;
    for (_, _, start, end) in rows.iter().filter(|r| r.0 == doc) {
        out.extend_from_slice(&bytes[at..*start as usize]);
        at = *end as usize;
    }
    out.extend_from_slice(&bytes[at..]);
    String::from_utf8(out).expect("ranges fall on character boundaries")
}

#[test]
fn run_strikes_the_ranges_from_the_kept_jsonl_documents() {
    let tmp = tempfile::tempdir().unwrap();
    for seed in [5u64, 23] {
        let dir = tmp.path().join(format!("c{seed}"));
        std::fs::create_dir_all(&dir).unwrap();
        let (_, docs) = corpus_with_copies(&dir, seed);
        // Extra fields before and after the text, written with their own spacing.
        let mut files = Vec::new();
        let mut lines_of: Vec<Vec<String>> = Vec::new();
        for file in 0..=docs.last().unwrap().0 >> 40 {
            let lines: Vec<String> = docs
                .iter()
                .filter(|d| d.0 >> 40 == file)
                .map(|(doc, text)| {
                    format!(
                        "{{\"id\": \"d{doc}\",  \"meta\": {{\"n\": [1, 2.50]}}, \"text\": {}, \"z\": null}}",
                        serde_json::to_string(text).unwrap()
                    )
                })
                .collect();
            let path = dir.join(format!("in{file}.jsonl"));
            std::fs::write(&path, lines.join("\n") + "\n").unwrap();
            files.push(path);
            lines_of.push(lines);
        }
        for workers in ["1", "2"] {
            let out = dir.join(format!("out-{workers}"));
            let dedup = dir.join(format!("dedup-{workers}"));
            let inputs: Vec<&Path> = files.iter().map(|f| f.as_path()).collect();
            run_ok(
                &out,
                &[
                    "-w",
                    workers,
                    "--substrings",
                    "4",
                    "--write-dedup",
                    s(&dedup),
                    "--strike",
                    "substrings",
                ],
                &inputs,
            );
            let rows = rows(&out);
            assert!(!rows.is_empty(), "seed {seed}: nothing to strike");
            let kept: Vec<u64> = clusters(&out)
                .into_iter()
                .filter(|c| c.keep)
                .map(|c| c.doc_id)
                .collect();
            for (file, lines) in lines_of.iter().enumerate() {
                let written = std::fs::read_to_string(dedup.join(format!("in{file}.jsonl")))
                    .unwrap_or_default();
                let written: Vec<&str> = written.lines().collect();
                let want: Vec<(u64, &String)> = lines
                    .iter()
                    .enumerate()
                    .map(|(line, l)| ((file as u64) << 40 | line as u64, l))
                    .filter(|(doc, _)| kept.contains(doc))
                    .collect();
                assert_eq!(written.len(), want.len());
                for (got, (doc, line)) in written.iter().zip(want) {
                    if !rows.iter().any(|r| r.0 == doc) {
                        assert_eq!(got, line, "an untouched line is copied byte for byte");
                        continue;
                    }
                    let original: serde_json::Value = serde_json::from_str(line).unwrap();
                    let mut expected = original.clone();
                    let text = original["text"].as_str().unwrap();
                    expected["text"] = json!(struck(text, doc, &rows));
                    let got_value: serde_json::Value = serde_json::from_str(got).unwrap();
                    assert_eq!(got_value, expected, "document {doc}");
                    // The other members keep their raw values and their order.
                    assert!(got.contains("\"meta\":{\"n\": [1, 2.50]}"), "{got}");
                    let keys = |l: &str| -> Vec<usize> {
                        ["\"id\"", "\"meta\"", "\"text\"", "\"z\""]
                            .iter()
                            .map(|k| l.find(k).unwrap())
                            .collect()
                    };
                    let order = keys(got);
                    assert!(order.windows(2).all(|w| w[0] < w[1]), "{got}");
                }
            }
        }
    }
}

#[test]
fn substrings_strikes_parquet_and_plain_inputs() {
    use arrow::array::LargeStringArray;
    let tmp = tempfile::tempdir().unwrap();
    let passage = "a licence passage, repeated verbatim: é€";
    let texts = [
        format!("first {passage} end"),
        "nothing here".to_string(),
        format!("{passage} and {passage}"),
        format!("x{passage}"),
    ];
    // Parquet with a LargeUtf8 text column and another column that must stay.
    let pq = tmp.path().join("docs.parquet");
    let text_column: ArrayRef = std::sync::Arc::new(LargeStringArray::from(
        texts.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
    ));
    let ids: ArrayRef = std::sync::Arc::new(StringArray::from(vec!["a", "b", "c", "d"]));
    write_parquet(&pq, vec![("id", ids), ("text", text_column)], 2);
    // Plain files: one document each.
    let plain_dir = tmp.path().join("plain");
    std::fs::create_dir_all(&plain_dir).unwrap();
    let plain: Vec<PathBuf> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| write(&plain_dir.join(format!("p{i}.txt")), t.as_bytes()))
        .collect();
    for occurrences in ["later", "all"] {
        let out = tmp.path().join(format!("pq-{occurrences}"));
        let dedup = tmp.path().join(format!("pq-dedup-{occurrences}"));
        substrings(
            &out,
            &[
                "-w",
                "2",
                "--min-bytes",
                "12",
                "--occurrences",
                occurrences,
                "--write-dedup",
                s(&dedup),
            ],
            std::slice::from_ref(&pq),
        );
        let pq_rows = rows(&out);
        assert!(pq_rows.len() >= 3, "{pq_rows:?}");
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(dedup.join("docs.parquet")).unwrap(),
        )
        .unwrap();
        let schema = reader.schema().clone();
        assert_eq!(
            schema.field_with_name("text").unwrap().data_type(),
            &arrow::datatypes::DataType::LargeUtf8
        );
        let mut got = Vec::new();
        for b in reader.build().unwrap() {
            let b = b.unwrap();
            let t = column(&b, "text").as_string::<i64>();
            let i = column(&b, "id").as_string::<i32>();
            got.extend((0..b.num_rows()).map(|r| (i.value(r).to_string(), t.value(r).to_string())));
        }
        let want: Vec<(String, String)> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                (
                    ["a", "b", "c", "d"][i].to_string(),
                    struck(t, i as u64, &pq_rows),
                )
            })
            .collect();
        assert_eq!(got, want);
        // Plain files, the same documents one per file.
        let out = tmp.path().join(format!("plain-{occurrences}"));
        let dedup = tmp.path().join(format!("plain-dedup-{occurrences}"));
        substrings(
            &out,
            &[
                "--plain",
                "--min-bytes",
                "12",
                "--occurrences",
                occurrences,
                "--write-dedup",
                s(&dedup),
            ],
            &plain,
        );
        let plain_rows = rows(&out);
        assert!(plain_rows.len() >= 3, "{plain_rows:?}");
        for (i, t) in texts.iter().enumerate() {
            let doc = (i as u64) << 40;
            let written = std::fs::read_to_string(dedup.join(format!("p{i}.txt"))).unwrap();
            assert_eq!(written, struck(t, doc, &plain_rows), "p{i}.txt");
        }
    }
}

#[test]
fn strike_refuses_archives_and_html_before_the_job() {
    let tmp = tempfile::tempdir().unwrap();
    let warc = write(&tmp.path().join("crawl.warc"), b"WARC/1.0\r\n\r\n");
    let jsonl = write(&tmp.path().join("c.jsonl"), b"{\"text\": \"hello\"}\n");
    let out = tmp.path().join("out");
    let dedup = tmp.path().join("dedup");
    let mut cmd = neardup();
    cmd.args([
        "substrings",
        "--write-dedup",
        s(&dedup),
        "--output",
        s(&out),
    ])
    .args([s(&jsonl), s(&warc)]);
    assert_refused(&mut cmd, &["crawl.warc", "--strike substrings"]);
    assert!(!out.exists() && !dedup.exists(), "nothing is written");
    let mut cmd = neardup();
    cmd.args(["run", "--substrings", "10", "--write-dedup", s(&dedup)])
        .args([
            "--strike",
            "substrings",
            "--html",
            "main",
            "--output",
            s(&out),
        ])
        .arg(s(&jsonl));
    assert_refused(&mut cmd, &["c.jsonl", "--html"]);
    let mut cmd = neardup();
    cmd.args(["run", "--substrings", "10", "--strike", "substrings"])
        .args(["--output", s(&out), s(&jsonl)]);
    let output = cmd.output().unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--write-dedup"));
    assert!(!out.exists());
}

#[test]
fn a_tiny_memory_limit_spills_many_runs_and_gives_the_same_ranges() {
    let tmp = tempfile::tempdir().unwrap();
    for seed in [2u64, 8] {
        let dir = tmp.path().join(format!("c{seed}"));
        std::fs::create_dir_all(&dir).unwrap();
        // Four corpora as eight files: a few hundred window records, dozens of runs.
        let mut docs = Vec::new();
        for k in 0..4u64 {
            let sub = dir.join(format!("sub{k}"));
            std::fs::create_dir_all(&sub).unwrap();
            let (_, part) = corpus(&sub, seed * 10 + k);
            docs.extend(
                part.into_iter()
                    .map(|(d, t)| (((d >> 40) + 2 * k) << 40 | (d & 0xff_ffff), t)),
            );
        }
        docs.sort();
        let files = write_files(&dir, &docs);
        for (occurrences, snap) in [("later", Snap::Chars), ("all", Snap::Words)] {
            let settings = Settings {
                min_bytes: 3,
                occurrences: if occurrences == "all" {
                    Occurrences::All
                } else {
                    Occurrences::Later
                },
                snap,
            };
            for workers in ["1", "2"] {
                let out = dir.join(format!("out-{occurrences}-{workers}"));
                let scratch = dir.join(format!("scratch-{occurrences}-{workers}"));
                std::fs::create_dir_all(&scratch).unwrap();
                let mut args = vec![
                    "-w",
                    workers,
                    "--min-bytes",
                    "3",
                    "--occurrences",
                    occurrences,
                    "--snap",
                    snap.name(),
                    // 1 KiB: 256 bytes of records per worker, 8 records a run.
                    "--memory-limit",
                    "1K",
                    "--block-bytes",
                    "40",
                ];
                if workers == "2" {
                    args.extend(["--spill-dir", s(&scratch)]);
                }
                substrings(&out, &args, &files);
                assert_eq!(
                    ranges(&out),
                    expected(&docs, &settings),
                    "seed {seed}, {occurrences}, {workers} workers"
                );
                let summary = summary(&out);
                let counts = &summary["substrings"];
                let runs = counts["spill_runs"].as_u64().unwrap();
                let records = counts["window_records"].as_u64().unwrap();
                // Each worker keeps fewer than 8 records in memory: the rest went to runs.
                let w: u64 = workers.parse().unwrap();
                let spilled = counts["spilled_bytes"].as_u64().unwrap();
                assert!(
                    runs + w >= records / 8 && runs >= 24,
                    "{runs} runs for {records} records"
                );
                assert!(
                    spilled >= records.saturating_sub(8 * w) * 32,
                    "{spilled} bytes"
                );
                // Every spill file is gone, and the user's scratch directory stays.
                assert!(!out.join("_spill").exists());
                assert!(scratch.is_dir());
                assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
            }
        }
    }
}
