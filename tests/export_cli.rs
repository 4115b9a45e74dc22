//! `neardup export`: the TSV files against a recomputation from the run's Parquet tables
//! (read here with arrow, not through neardup's reader), and the refusals of the output
//! directory.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, StringArray, UInt64Array};
use arrow::datatypes::{Float32Type, UInt64Type};
mod common;
use common::*;

/// A corpus with exact duplicates, near duplicates (one word changed) and singletons, and
/// ids that need escaping.
fn corpus(dir: &Path) -> std::path::PathBuf {
    let base = "the committee met on tuesday to discuss the new budget for the regional \
                library system and agreed to extend opening hours across every branch in the \
                county starting next spring with additional staff hired from local schools";
    let mut docs = vec![
        doc("a\tone", base),
        doc("b", base.to_uppercase()),
        doc("c", base.replace("tuesday", "wednesday")),
        doc("d", base.replace("spring", "autumn")),
        doc("e", "a completely different text about mountain goats grazing on steep alpine meadows in summer"),
        doc("f", ""),
    ];
    let mut rng = SeededRng::new(7);
    for i in 0..30 {
        let words: Vec<String> = (0..40).map(|_| format!("w{}", rng.below(5000))).collect();
        docs.push(doc(format!("r{i}"), words.join(" ")));
    }
    write(&dir.join("corpus.jsonl"), &jsonl(&docs))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `neardup hash`'s escaping of an id in TSV, restated.
fn escaped(id: &str) -> String {
    id.replace('\\', "\\\\")
        .replace('\t', "\\t")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

/// matches.tsv and clusters.tsv as they must be, from the Parquet tables.
fn expected(out: &Path, by_doc_id: bool) -> (String, String) {
    let fps = fingerprints(out);
    let name: HashMap<u64, String> = fps
        .iter()
        .map(|f| {
            let n = match (&f.id, by_doc_id) {
                (Some(id), false) => escaped(id),
                _ => f.doc_id.to_string(),
            };
            (f.doc_id, n)
        })
        .collect();
    let mut matches = String::from("id1\tid2\tdiff\n");
    for p in pairs(out) {
        matches += &format!("{}\t{}\t{}\n", name[&p.doc_a], name[&p.doc_b], p.hamming);
    }
    let cluster: HashMap<u64, i64> = clusters(out)
        .iter()
        .map(|c| (c.doc_id, c.cluster_id))
        .collect();
    // The kept document of each cluster, and each document's simhash.
    let kept: HashMap<i64, u64> = clusters(out)
        .iter()
        .filter(|c| c.keep && c.cluster_id >= 0)
        .map(|c| (c.cluster_id, c.doc_id))
        .collect();
    let simhash: HashMap<u64, u64> = fps.iter().map(|f| (f.doc_id, f.simhash)).collect();
    let mut clusters_tsv = String::from("id\thash\tcluster\tkept\tdiff\n");
    for f in &fps {
        let c = cluster[&f.doc_id];
        let k = kept.get(&c).copied().unwrap_or(f.doc_id);
        let diff = match k == f.doc_id {
            true => "-".to_string(),
            false => (simhash[&k] ^ f.simhash).count_ones().to_string(),
        };
        clusters_tsv += &format!(
            "{}\t{:016x}\t{c}\t{}\t{diff}\n",
            name[&f.doc_id], f.simhash, name[&k]
        );
    }
    (matches, clusters_tsv)
}

fn export(run: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    neardup()
        .args(["export", s(run), "--format", "tsv", "--output", s(out)])
        .args(extra)
        .output()
        .unwrap()
}

fn export_ok(run: &Path, out: &Path, extra: &[&str]) -> String {
    let o = export(run, out, extra);
    assert!(
        o.status.success(),
        "export failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.join("_SUCCESS").is_file());
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn simhash_run_exports_matches_and_clusters() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let run = dir.path().join("run");
    run_ok(&run, &["-w", "2", "-q"], &[&input]);
    let tsv = dir.path().join("tsv");
    export_ok(&run, &tsv, &[]);
    let (matches, clusters_tsv) = expected(&run, false);
    assert_eq!(read(&tsv.join("matches.tsv")), matches);
    assert_eq!(read(&tsv.join("clusters.tsv")), clusters_tsv);
    // The corpus has both kinds of pairs, and a singleton (-1): the test covers them.
    assert!(
        matches.lines().any(|l| l.ends_with("\t0")),
        "an exact pair: {matches}"
    );
    assert!(
        matches.lines().skip(1).any(|l| !l.ends_with("\t0")),
        "a near pair: {matches}"
    );
    assert!(matches.contains("a\\tone\tb\t0\n"), "{matches}");
    assert!(clusters_tsv.contains("\t-1\t"));
    // A removed document names its kept one, and how far it is.
    assert!(
        clusters_tsv.lines().skip(1).any(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            f[0] != f[3] && f[4] != "-"
        }),
        "{clusters_tsv}"
    );
    assert!(!tsv.join("substring_bytes.tsv").exists());
    // Counts tie to summary.json.
    let summary = summary(&run);
    assert_eq!(
        matches.lines().count() as u64 - 1,
        summary["counts"]["pairs"].as_u64().unwrap()
    );
    assert_eq!(
        clusters_tsv.lines().count() as u64 - 1,
        summary["counts"]["documents"].as_u64().unwrap()
    );
}

#[test]
fn doc_ids_name_documents_without_ids() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let run = dir.path().join("run");
    run_ok(&run, &["--no-id", "-q"], &[&input]);
    let tsv = dir.path().join("tsv");
    let stderr = export_ok(&run, &tsv, &[]);
    assert!(
        stderr.contains("named by doc_id: 36 documents have no id"),
        "{stderr}"
    );
    let (matches, clusters_tsv) = expected(&run, true);
    assert_eq!(read(&tsv.join("matches.tsv")), matches);
    assert_eq!(read(&tsv.join("clusters.tsv")), clusters_tsv);
    let refused = export(&run, &dir.path().join("tsv2"), &["--ids", "id"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--ids id: 36 documents have no id"));
}

#[test]
fn minhash_diff_is_the_jaccard_distance() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let run = dir.path().join("run");
    run_ok(
        &run,
        &["--scheme", "minhash", "--threshold", "0.5", "-q"],
        &[&input],
    );
    let tsv = dir.path().join("tsv");
    export_ok(&run, &tsv, &[]);
    let ids: HashMap<u64, String> = fingerprints(&run)
        .into_iter()
        .map(|f| (f.doc_id, escaped(&f.id.unwrap())))
        .collect();
    let mut rows = Vec::new();
    for b in batches(&run.join("pairs")) {
        let a = column(&b, "doc_a").as_primitive::<UInt64Type>();
        let c = column(&b, "doc_b").as_primitive::<UInt64Type>();
        let kind = column(&b, "kind").as_string::<i32>();
        let j = column(&b, "jaccard").as_primitive::<Float32Type>();
        for i in 0..b.num_rows() {
            let diff = if kind.value(i) == "exact" {
                "0.0000".to_string()
            } else {
                format!("{:.4}", 1.0 - f64::from(j.value(i)))
            };
            rows.push((a.value(i), c.value(i), diff));
        }
    }
    rows.sort();
    assert!(
        rows.iter().any(|r| r.2 != "0.0000"),
        "a near pair with a distance: {rows:?}"
    );
    let mut want = String::from("id1\tid2\tdiff\n");
    for (a, b, d) in rows {
        want += &format!("{}\t{}\t{d}\n", ids[&a], ids[&b]);
    }
    assert_eq!(read(&tsv.join("matches.tsv")), want);
    let clusters_tsv = read(&tsv.join("clusters.tsv"));
    assert!(
        clusters_tsv
            .lines()
            .skip(1)
            .all(|l| l.split('\t').nth(1) == Some("-")),
        "{clusters_tsv}"
    );
}

#[test]
fn substrings_table_becomes_substring_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let run = dir.path().join("run");
    run_ok(&run, &["-q"], &[&input]);
    // The table `neardup substrings` adds (doc_id, id, start, end), two parts, unsorted.
    std::fs::create_dir(run.join("substrings")).unwrap();
    let part = |rows: &[(u64, &str, u64, u64)]| -> Vec<(&'static str, ArrayRef)> {
        vec![
            (
                "doc_id",
                Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.0))) as ArrayRef,
            ),
            (
                "id",
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
            ),
            (
                "start",
                Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.2))),
            ),
            (
                "end",
                Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.3))),
            ),
        ]
    };
    write_parquet(
        &run.join("substrings/part-00001.parquet"),
        part(&[(2, "c", 40, 90), (0, "a\tone", 5, 60)]),
        10,
    );
    write_parquet(
        &run.join("substrings/part-00000.parquet"),
        part(&[(2, "c", 0, 30)]),
        10,
    );
    let tsv = dir.path().join("tsv");
    export_ok(&run, &tsv, &[]);
    assert_eq!(
        read(&tsv.join("substring_bytes.tsv")),
        "id\tx\ty\na\\tone\t5\t60\nc\t0\t30\nc\t40\t90\n"
    );
    let marker = read(&tsv.join(".neardup"));
    assert!(marker.contains("substring_bytes.tsv"), "{marker}");
}

#[test]
fn incomplete_runs_and_foreign_outputs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let run = dir.path().join("run");
    run_ok(&run, &["-q"], &[&input]);
    let tsv = dir.path().join("tsv");

    // An output directory holding a file of the user's: refused, the file untouched, even
    // with --overwrite.
    std::fs::create_dir(&tsv).unwrap();
    std::fs::write(tsv.join("notes.txt"), "mine").unwrap();
    let before = snapshot(&tsv);
    for extra in [&[][..], &["--overwrite"][..]] {
        let o = export(&run, &tsv, extra);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("tsv"), "{err}");
        assert_eq!(snapshot(&tsv), before);
    }
    std::fs::remove_file(tsv.join("notes.txt")).unwrap();

    // A previous export is replaced with --overwrite only.
    export_ok(&run, &tsv, &[]);
    let again = export(&run, &tsv, &[]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("not empty"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    export_ok(&run, &tsv, &["--overwrite"]);

    // Writing over the run itself is refused, the run untouched.
    let run_before = snapshot(&run);
    let o = export(&run, &run, &["--overwrite"]);
    assert!(!o.status.success());
    assert_eq!(snapshot(&run), run_before);

    // A run without _SUCCESS.
    std::fs::remove_file(run.join("_SUCCESS")).unwrap();
    let o = export(&run, &dir.path().join("tsv3"), &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no _SUCCESS: the run is incomplete or failed"),
        "{err}"
    );
    assert!(!dir.path().join("tsv3").exists());
}
