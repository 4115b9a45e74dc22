//! The analytics-client test: `neardup run` writes its tables, then real clients read them.
//!
//! `tests/analytics_check.py` opens every output table with DuckDB and with pyarrow.dataset
//! (and Polars when installed), checks column names and types, row counts against
//! summary.json and the relations between the tables, and runs every example query of
//! docs/outputs.md against the output (see the script's docstring).
//!
//! The Python comes from `NEARDUP_PYTHON` (scripts/test.sh installs duckdb and pyarrow into
//! .venv-test and sets it), or else `python3` if it can import both. Otherwise the tests
//! FAIL: a check that did not run must not look like a pass.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arrow::array::{ArrayRef, StringArray};
use serde_json::{json, Value};

mod common;
use common::{gzip, jsonl_values, neardup, shared_corpus, write_parquet, SeededRng};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The Python to run the check with; panics with instructions if there is none.
fn python() -> String {
    if let Ok(python) = std::env::var("NEARDUP_PYTHON") {
        if !python.is_empty() {
            return python;
        }
    }
    let usable = Command::new("python3")
        .args(["-c", "import duckdb, pyarrow"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        usable,
        "the analytics test needs a Python with duckdb and pyarrow: run `bash scripts/test.sh` \
         (it installs them into .venv-test and sets NEARDUP_PYTHON), or set NEARDUP_PYTHON \
         to such a Python. NEARDUP_PYTHON is unset and python3 cannot import duckdb and pyarrow."
    );
    "python3".into()
}

/// Runs `neardup run ARGS --output out corpus/` in `workdir`, which must succeed: the
/// sources are then `corpus/...`, as docs/outputs.md assumes.
fn run_neardup(workdir: &Path, args: &[&str]) {
    let output = neardup()
        .current_dir(workdir)
        .arg("run")
        .args(args)
        .args(["--quiet", "--output", "out", "corpus/"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "neardup run {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs the check script on `workdir/out`; returns (exit code, stdout, stderr).
fn analytics_check(out: &Path) -> (Option<i32>, String, String) {
    let script = repo().join("tests/analytics_check.py");
    let output = Command::new(python())
        .arg(&script)
        .arg(out)
        .arg("--doc")
        .arg(repo().join("docs/outputs.md"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python()));
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn assert_check_passes(workdir: &Path) {
    let (code, stdout, stderr) = analytics_check(&workdir.join("out"));
    // Shown with --nocapture, and on failure.
    println!("{stdout}{stderr}");
    assert_eq!(
        code,
        Some(0),
        "analytics_check.py failed (exit 2 means duckdb or pyarrow is missing: run \
         scripts/test.sh):\n{stdout}{stderr}"
    );
    assert!(stdout.contains("checks passed"), "{stdout}");
}

// ---------------------------------------------------------------------------------------
// Corpora

/// JSON lines with ids as strings and a nested field.
fn jsonl(records: &[(String, String)]) -> Vec<u8> {
    let values: Vec<Value> = records
        .iter()
        .map(|(id, text)| json!({"id": id, "text": text, "meta": {"n": 1}}))
        .collect();
    jsonl_values(&values)
}

/// Replaces one word in the middle: a near duplicate of a long text.
fn edit(text: &str, replacement: &str) -> String {
    let mut words: Vec<&str> = text.split(' ').collect();
    let middle = words.len() / 2;
    words[middle] = replacement;
    words.join(" ")
}

/// Three input files of three kinds with duplicates within and across them, empty texts,
/// a blank line, ids as strings: `corpus/a.jsonl`, `corpus/b.jsonl.gz`, `corpus/c.parquet`.
fn generated_corpus(workdir: &Path) {
    let corpus = workdir.join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    let mut rng = SeededRng::new(42);
    let long: Vec<String> = (0..6).map(|_| rng.words(300).join(" ")).collect();

    let mut a: Vec<(String, String)> = Vec::new();
    for i in 0..40 {
        let text = match i {
            0..=5 => long[i].clone(),
            6 => format!("{}!!", long[0].to_uppercase()),
            7 => String::new(),
            8 => "2024 42".into(),
            9 => edit(&long[1], "quixotic"),
            _ => rng.words(20 + (i % 7) * 10).join(" "),
        };
        a.push((format!("a-{i}"), text));
    }
    let mut a_bytes = jsonl(&a[..20]);
    a_bytes.extend_from_slice(b"\n");
    a_bytes.extend(jsonl(&a[20..]));
    std::fs::write(corpus.join("a.jsonl"), a_bytes).unwrap();

    let mut b: Vec<(String, String)> = Vec::new();
    for i in 0..30 {
        let text = match i {
            0 => long[2].replace(' ', "  "),
            1 => edit(&long[2], "zephyr"),
            2 => edit(&long[3], "bramble"),
            3 => " ... ".into(),
            _ => rng.words(25).join(" "),
        };
        b.push((format!("b-{i}"), text));
    }
    std::fs::write(corpus.join("b.jsonl.gz"), gzip(&jsonl(&b))).unwrap();

    let mut texts: Vec<String> = (0..23).map(|_| rng.words(30).join(" ")).collect();
    texts[0] = long[4].to_lowercase();
    texts[3] = format!("{}.", long[4]);
    texts[7] = edit(&long[5], "ozone");
    texts[8] = long[5].clone();
    texts[11] = String::new();
    texts[12] = long[0].clone();
    let ids: Vec<String> = (0..texts.len()).map(|i| format!("c-{i}")).collect();
    write_parquet(
        &corpus.join("c.parquet"),
        vec![
            ("id", Arc::new(StringArray::from(ids)) as ArrayRef),
            ("text", Arc::new(StringArray::from(texts)) as ArrayRef),
        ],
        5,
    );
}

fn summary(workdir: &Path) -> Value {
    common::summary(&workdir.join("out"))
}

// ---------------------------------------------------------------------------------------

#[test]
fn analytics_clients_read_every_table_of_a_generated_corpus() {
    let dir = tempfile::tempdir().unwrap();
    generated_corpus(dir.path());
    run_neardup(dir.path(), &["-w", "2"]);
    // The corpus has what the checks are about: all kinds of pairs, empties, three files.
    let s = summary(dir.path());
    let counts = &s["counts"];
    assert_eq!(counts["documents"], 93);
    assert_eq!(counts["blank_lines"], 1);
    assert_eq!(counts["empty"], 4);
    assert!(counts["exact_pairs"].as_u64().unwrap() >= 4, "{counts}");
    assert!(counts["near_pairs"].as_u64().unwrap() >= 4, "{counts}");
    assert_eq!(s["parameters"]["inputs"].as_array().unwrap().len(), 3);
    assert_check_passes(dir.path());
}

#[test]
fn analytics_clients_read_every_table_with_other_options() {
    let dir = tempfile::tempdir().unwrap();
    generated_corpus(dir.path());
    run_neardup(
        dir.path(),
        &["-w", "3", "-k", "5", "--no-exact", "--keep", "longest"],
    );
    assert_eq!(summary(dir.path())["counts"]["exact_pairs"], 0);
    assert_check_passes(dir.path());
}

#[test]
fn analytics_clients_read_every_table_of_the_bundled_example() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    std::fs::create_dir(&corpus).unwrap();
    std::fs::copy(
        repo().join("examples/corpus.jsonl"),
        corpus.join("corpus.jsonl"),
    )
    .unwrap();
    run_neardup(dir.path(), &[]);
    assert_check_passes(dir.path());
}

#[test]
fn analytics_clients_read_every_table_of_dev_small() {
    let Some(dev_small) = shared_corpus("dev-small") else {
        return;
    };
    let shared = dev_small.join("corpus.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    std::fs::create_dir(&corpus).unwrap();
    let target: PathBuf = shared.canonicalize().unwrap();
    std::os::unix::fs::symlink(target, corpus.join("corpus.jsonl")).unwrap();
    run_neardup(dir.path(), &["-w", "2"]);
    assert_eq!(summary(dir.path())["counts"]["documents"], 10_000);
    assert_check_passes(dir.path());
}

#[test]
fn analytics_check_refuses_an_output_without_success() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    std::fs::create_dir(&corpus).unwrap();
    std::fs::write(
        corpus.join("bad.jsonl"),
        b"{\"id\": 1, \"text\": \"fine\"}\n{\"id\": 2, \"text\": \n",
    )
    .unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .current_dir(dir.path())
        .args(["run", "-q", "--output", "out", "corpus/"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&run.stderr).contains("corpus/bad.jsonl:2: "));
    assert!(dir.path().join("out/summary.json").is_file());
    let (code, _, stderr) = analytics_check(&dir.path().join("out"));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("no _SUCCESS"), "{stderr}");
}
