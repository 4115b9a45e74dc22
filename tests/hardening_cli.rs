//! End-to-end tests of inputs and outputs that must not be misread: every Parquet codec,
//! page checksums, exact ids, closed and full standard output, truth-file validation.
//!
//! Some Parquet files are written by pyarrow (another implementation than the one neardup
//! reads with): the Python comes from `NEARDUP_PYTHON`, or else `python3` if it can import
//! pyarrow. Otherwise those tests FAIL: a check that did not run must not look like a pass.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arrow::array::{ArrayRef, StringArray};
use parquet::basic::{BrotliLevel, Compression, GzipLevel, ZstdLevel};
use serde_json::json;

mod common;
use common::{fingerprints, jsonl_values, neardup, s, stdout_of, write_parquet_with};

/// The Python with pyarrow to write test files with; panics with instructions if none.
fn python() -> String {
    if let Ok(python) = std::env::var("NEARDUP_PYTHON") {
        if !python.is_empty() {
            return python;
        }
    }
    let usable = Command::new("python3")
        .args(["-c", "import pyarrow"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        usable,
        "this test needs a Python with pyarrow: run `bash scripts/test.sh` (it installs it \
         into .venv-test and sets NEARDUP_PYTHON), or set NEARDUP_PYTHON to such a Python."
    );
    "python3".into()
}

/// Runs `python -c script args...`, which must succeed.
fn run_python(script: &str, args: &[&str]) {
    let output = Command::new(python())
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "python failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

// ---------------------------------------------------------------------------------------
// Parquet codecs and page checksums

const TEXTS: [&str; 5] = [
    "The quick brown fox jumps over the lazy dog.",
    "Four score and seven years ago our fathers brought forth on this continent",
    "the the the cat",
    "Ünïcödé façade — naïve café 123 4u2 x_y",
    "",
];

fn doc_ids() -> Vec<String> {
    (0..TEXTS.len()).map(|i| format!("d{i}")).collect()
}

/// Writes the documents with pyarrow, one file per codec pyarrow writes, under `dir`.
const PYARROW_CODECS: &str = r#"
import sys, json, pyarrow as pa, pyarrow.parquet as pq
out, ids, texts = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
table = pa.table({"id": pa.array(ids, pa.string()), "text": pa.array(texts, pa.string())})
for codec in ["none", "snappy", "gzip", "lz4", "zstd", "brotli"]:
    pq.write_table(table, f"{out}/py-{codec}.parquet", compression=codec)
"#;

/// The fingerprint columns of a run's fingerprints table that do not depend on the file's
/// name: id, simhash, n_tokens, empty.
fn run_fingerprints(dir: &Path, input: &Path) -> Vec<(Option<String>, u64, u32, bool)> {
    let out = dir.join(format!(
        "out-{}",
        input.file_stem().unwrap().to_str().unwrap()
    ));
    common::run_ok(&out, &["--quiet"], &[input]);
    let mut rows: Vec<_> = fingerprints(&out)
        .into_iter()
        .map(|r| (r.id, r.simhash, r.n_tokens, r.empty))
        .collect();
    rows.sort();
    rows
}

#[test]
fn every_parquet_codec_reads_to_the_same_fingerprints() {
    let dir = tempfile::tempdir().unwrap();
    let ids = doc_ids();
    let jsonl = dir.path().join("docs.jsonl");
    let records: Vec<_> = ids
        .iter()
        .zip(TEXTS)
        .map(|(id, text)| json!({"id": id, "text": text}))
        .collect();
    std::fs::write(&jsonl, jsonl_values(&records)).unwrap();

    let mut files: Vec<PathBuf> = Vec::new();
    // The Rust writer: every codec of the format, LZ4 (the deprecated Hadoop framing) too.
    let codecs = [
        ("uncompressed", Compression::UNCOMPRESSED),
        ("snappy", Compression::SNAPPY),
        ("gzip", Compression::GZIP(GzipLevel::default())),
        ("lz4-hadoop", Compression::LZ4),
        ("lz4-raw", Compression::LZ4_RAW),
        ("zstd", Compression::ZSTD(ZstdLevel::default())),
        ("brotli", Compression::BROTLI(BrotliLevel::default())),
    ];
    for (name, codec) in codecs {
        let path = dir.path().join(format!("rs-{name}.parquet"));
        let columns = vec![
            ("id", Arc::new(StringArray::from(ids.clone())) as ArrayRef),
            (
                "text",
                Arc::new(StringArray::from(TEXTS.to_vec())) as ArrayRef,
            ),
        ];
        write_parquet_with(&path, columns, codec);
        // The file really holds that codec.
        let reader = parquet::file::serialized_reader::SerializedFileReader::new(
            std::fs::File::open(&path).unwrap(),
        )
        .unwrap();
        use parquet::file::reader::FileReader;
        assert_eq!(
            reader.metadata().row_group(0).column(1).compression(),
            codec,
            "{name}"
        );
        files.push(path);
    }
    // pyarrow's writer.
    run_python(
        PYARROW_CODECS,
        &[
            s(dir.path()),
            &serde_json::to_string(&ids).unwrap(),
            &serde_json::to_string(&TEXTS).unwrap(),
        ],
    );
    for codec in ["none", "snappy", "gzip", "lz4", "zstd", "brotli"] {
        files.push(dir.path().join(format!("py-{codec}.parquet")));
    }

    let expected_hash = stdout_of(neardup().args(["hash", s(&jsonl)]));
    let expected_run = run_fingerprints(dir.path(), &jsonl);
    assert_eq!(expected_run.len(), TEXTS.len());
    for file in &files {
        let hashed = neardup().args(["hash", s(file)]).output().unwrap();
        assert!(
            hashed.status.success(),
            "neardup hash {} failed:\n{}",
            file.display(),
            String::from_utf8_lossy(&hashed.stderr)
        );
        assert_eq!(
            String::from_utf8(hashed.stdout).unwrap(),
            expected_hash,
            "{}",
            file.display()
        );
        assert_eq!(
            run_fingerprints(dir.path(), file),
            expected_run,
            "{}",
            file.display()
        );
    }
}

/// Writes one uncompressed, dictionary-free Parquet file with pyarrow, page checksums on or
/// off (argv: path, checksums "1"/"0", text). Without statistics the text is written once,
/// in the data page.
const PYARROW_CHECKSUMMED: &str = r#"
import sys, pyarrow as pa, pyarrow.parquet as pq
path, checksums, text = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
table = pa.table({"id": ["c0", "c1"], "text": [text, "another document entirely"]})
pq.write_table(table, path, compression="none", use_dictionary=False,
               write_statistics=False, write_page_checksum=checksums)
"#;

const CANARY: &str = "checksum canary text that is easy to find in the file bytes";

/// Writes the file and flips one bit inside the canary text's page data; returns the path.
fn flipped_parquet(dir: &Path, name: &str, checksums: bool) -> (PathBuf, PathBuf) {
    let good = dir.join(format!("{name}-good.parquet"));
    run_python(
        PYARROW_CHECKSUMMED,
        &[s(&good), if checksums { "1" } else { "0" }, CANARY],
    );
    let mut bytes = std::fs::read(&good).unwrap();
    let found = bytes
        .windows(CANARY.len())
        .filter(|w| *w == CANARY.as_bytes())
        .count();
    assert_eq!(found, 1, "the text is in the file once, in its page");
    let at = bytes
        .windows(CANARY.len())
        .position(|w| w == CANARY.as_bytes())
        .expect("the uncompressed text is in the file");
    // 'c' of "canary" becomes 'b': still valid UTF-8, a different document.
    bytes[at + "checksum ".len()] ^= 0x01;
    let bad = dir.join(format!("{name}-flipped.parquet"));
    std::fs::write(&bad, bytes).unwrap();
    (good, bad)
}

#[test]
fn a_damaged_checksummed_parquet_page_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (good, bad) = flipped_parquet(dir.path(), "crc", true);

    // The intact checksummed file reads.
    let out = stdout_of(neardup().args(["hash", s(&good)]));
    assert_eq!(out.lines().count(), 2, "{out}");

    // The damaged one is refused by hash and by run, naming the file.
    let stderr = common::assert_fails(
        neardup().args(["hash", s(&bad)]),
        &dir.path().join("none"),
        &[s(&bad), "CRC checksum mismatch"],
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    let out = dir.path().join("out");
    common::assert_fails(
        neardup().args(["run", "--quiet", "--output", s(&out), s(&bad)]),
        &out,
        &[s(&bad), "CRC checksum mismatch"],
    );

    // Without checksums the same flip is read silently as a different text: the checksum is
    // what catches it (and this test's flip really lands in the page data).
    let (plain_good, plain_bad) = flipped_parquet(dir.path(), "plain", false);
    let before = stdout_of(neardup().args(["hash", s(&plain_good)]));
    let after = stdout_of(neardup().args(["hash", s(&plain_bad)]));
    assert_ne!(before, after);
}

// ---------------------------------------------------------------------------------------
// Ids as written

#[test]
fn integer_ids_beyond_64_bits_stay_distinct() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.jsonl");
    // Two ids that differ only in the last digit, far beyond 2^64 (and f64's precision),
    // one beyond -2^63, and ordinary ones that keep today's form.
    std::fs::write(
        &path,
        concat!(
            "{\"id\": 123456789012345678901234567890, \"text\": \"alpha beta gamma\"}\n",
            "{\"id\": 123456789012345678901234567891, \"text\": \"delta epsilon zeta\"}\n",
            "{\"id\": -98765432109876543210, \"text\": \"eta theta iota\"}\n",
            "{\"id\": 1e3, \"text\": \"kappa lambda mu\"}\n",
            "{\"id\": 2.50, \"text\": \"nu xi omicron\"}\n",
            "{\"id\": 42, \"text\": \"pi rho sigma\"}\n",
        ),
    )
    .unwrap();
    let expected = [
        "123456789012345678901234567890",
        "123456789012345678901234567891",
        "-98765432109876543210",
        "1000",
        "2.5",
        "42",
    ];

    let out = stdout_of(neardup().args(["hash", "--quiet", s(&path)]));
    let hashed: Vec<&str> = out.lines().map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(hashed, expected);

    let run = dir.path().join("out");
    common::run_ok(&run, &["--quiet"], &[&path]);
    let mut rows = fingerprints(&run);
    rows.sort_by_key(|r| r.record);
    let ids: Vec<String> = rows.into_iter().map(|r| r.id.unwrap()).collect();
    assert_eq!(ids, expected);
}

// ---------------------------------------------------------------------------------------
// Closed and full standard output

/// A corpus with near duplicates, its run, and a truth file: what `eval` needs.
fn eval_fixture(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let base = "the committee agreed to repair the old stone bridge before winter and to plant \
                a row of trees along the new road near the school";
    let corpus = dir.join("c.jsonl");
    std::fs::write(
        &corpus,
        jsonl_values(&[
            json!({"id": "a", "text": base}),
            json!({"id": "b", "text": base.to_uppercase()}),
            json!({"id": "c", "text": format!("{base} indeed")}),
            json!({"id": "d", "text": "bees visit thousands of flowers every day"}),
        ]),
    )
    .unwrap();
    let out = dir.join("run");
    common::run_ok(&out, &["--quiet"], &[&corpus]);
    let truth = dir.join("truth.tsv");
    std::fs::write(&truth, "id1\tid2\tjaccard\na\tb\t1.0\na\tc\t0.9\n").unwrap();
    (corpus, out, truth)
}

/// The commands under test, each writing to stdout: eval (text and JSON), compare (text and
/// JSON), hash (more than a pipe's buffer, so that it writes after the reader is gone).
fn stdout_commands(dir: &Path) -> Vec<Vec<String>> {
    let (_, run, truth) = eval_fixture(dir);
    let big = dir.join("big.jsonl");
    let mut lines = Vec::new();
    for i in 0..20_000 {
        common::jsonl_line(&mut lines, i, &format!("document number {i} of many"));
    }
    std::fs::write(&big, lines).unwrap();
    let owned = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    vec![
        owned(&["eval", "--run", s(&run), "--truth", s(&truth)]),
        owned(&["eval", "--json", "--run", s(&run), "--truth", s(&truth)]),
        owned(&["compare", "--text", "a b c d e f", "--text", "a b c d e g"]),
        owned(&[
            "compare",
            "--json",
            "--text",
            "a b c d e f",
            "--text",
            "a b c d e g",
        ]),
        owned(&["hash", "--quiet", s(&big)]),
    ]
}

#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    for args in stdout_commands(dir.path()) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before the command writes anything.
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{args:?}:\n{stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}:\n{stderr}");
        assert!(!stderr.contains("error"), "{args:?}:\n{stderr}");
    }
}

#[test]
fn a_full_stdout_is_an_error_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    for args in stdout_commands(dir.path()) {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let output = Command::new(env!("CARGO_BIN_EXE_neardup"))
            .args(&args)
            .stdout(full)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}:\n{stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}:\n{stderr}");
        assert!(
            stderr.contains("error: <stdout>: cannot write: No space left on device"),
            "{args:?}:\n{stderr}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// eval's truth file

#[test]
fn eval_refuses_bad_truth_files_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let (_, run, _) = eval_fixture(dir.path());
    let cases: [(&str, &str, &str); 6] = [
        (
            "id1\tid2\tjaccard\na\tb\t1.0\na\tc\tNaN\n",
            ":3",
            "jaccard \"NaN\" is not a number in [0, 1]",
        ),
        (
            "id1\tid2\tjaccard\na\tb\t7.5\n",
            ":2",
            "jaccard \"7.5\" is not a number in [0, 1]",
        ),
        (
            "id1\tid2\tjaccard\na\tb\t-1\n",
            ":2",
            "jaccard \"-1\" is not a number in [0, 1]",
        ),
        (
            "id1\tid2\tjaccard\na\tb\t1\nc\tc\t1\n",
            ":3",
            "id \"c\" is paired with itself",
        ),
        ("id1\tid2\tjaccard\n", "", "no pairs after the header"),
        ("", "", "empty file"),
    ];
    for (i, (text, at, message)) in cases.into_iter().enumerate() {
        let truth = dir.path().join(format!("truth-{i}.tsv"));
        std::fs::write(&truth, text).unwrap();
        let stderr = common::assert_fails(
            neardup().args(["eval", "--run", s(&run), "--truth", s(&truth)]),
            &dir.path().join("none"),
            &[&format!("error: {}{at}: {message}", s(&truth))],
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn a_failed_eval_sweep_leaves_no_temporary_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (corpus, _, _) = eval_fixture(dir.path());
    let truth = dir.path().join("bad.tsv");
    std::fs::write(&truth, "id1\tid2\tjaccard\na\tb\t7.5\n").unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    common::assert_fails(
        neardup()
            .env("TMPDIR", &tmp)
            .args(["eval", "--sweep", s(&corpus), "--truth", s(&truth)]),
        &dir.path().join("none"),
        &["jaccard \"7.5\" is not a number in [0, 1]"],
    );
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
