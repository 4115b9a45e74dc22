//! End-to-end tests of `neardup hash` and `neardup compare`: the binary is run on inputs
//! generated here, and its stdout, stderr and exit code are checked.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Stdio};
use std::sync::Arc;

use predicates::prelude::*;
use serde_json::{json, Value};

mod common;
use common::{gzip, jsonl_values, neardup, s, stdout_of};

/// The simhash-doc golden vectors (../shared/notes/simhash-doc.md): text, hex, base32, and
/// the hex under `tf` weighting.
const GOLDEN: &[(&str, &str, &str, &str)] = &[
    ("", "0000000000000000", "aaaaaaaaaaaaa", "0000000000000000"),
    (
        "Four score and seven years ago",
        "30e7840624325000",
        "gdtyibregjiaa",
        "30e7840624325000",
    ),
    (
        "The quick brown fox jumps over the lazy dog.",
        "83052266e2554591",
        "qmcsezxckvczc",
        "83172276e2f5c591",
    ),
    (
        "the the the cat",
        "0506620030f44080",
        "audgeabq6raia",
        "0717627632fcc083",
    ),
    (
        "Ünïcödé façade — naïve café 123 4u2 x_y",
        "850322a04a503246",
        "qubsfickkazem",
        "850322a04a503246",
    ),
    (
        "co\u{00AD}operate co\u{200B}operate",
        "009409fb4f405d21",
        "ackat62pibosc",
        "009409fb4f405d21",
    ),
    (
        "2024 12345 42",
        "0000000000000000",
        "aaaaaaaaaaaaa",
        "0000000000000000",
    ),
];

/// Indices of the golden texts that have no tokens.
const GOLDEN_EMPTY: [usize; 2] = [0, 6];

fn golden_records() -> Vec<Value> {
    GOLDEN
        .iter()
        .enumerate()
        .map(|(i, g)| json!({"id": format!("g{i}"), "text": g.0, "meta": {"text": 1}}))
        .collect()
}

fn golden_jsonl(dir: &Path) -> PathBuf {
    let path = dir.join("golden.jsonl");
    std::fs::write(&path, jsonl_values(&golden_records())).unwrap();
    path
}

fn tsv_rows(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

fn json_lines(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

// ---------------------------------------------------------------------------------------
// hash: golden vectors

#[test]
fn hash_reproduces_every_golden_fingerprint() {
    let dir = tempfile::tempdir().unwrap();
    let input = golden_jsonl(dir.path());
    let assert = neardup()
        .args(["hash", "--scheme", "simhash-doc", s(&input)])
        .assert()
        .success()
        .stderr(predicate::eq("hashed 7 documents (2 empty)\n"));
    let out = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    let expected: Vec<Vec<String>> = GOLDEN
        .iter()
        .enumerate()
        .map(|(i, g)| vec![format!("g{i}"), g.1.to_string(), g.2.to_string()])
        .collect();
    assert_eq!(tsv_rows(&out), expected);
}

#[test]
fn hash_tf_weights_reproduce_the_tf_column() {
    let dir = tempfile::tempdir().unwrap();
    let input = golden_jsonl(dir.path());
    let out = stdout_of(neardup().args(["hash", "--weights", "tf", "-q", s(&input)]));
    let rows = tsv_rows(&out);
    assert_eq!(rows.len(), GOLDEN.len());
    for (row, g) in rows.iter().zip(GOLDEN) {
        assert_eq!(row[1], g.3, "tf fingerprint of {:?}", g.0);
    }
    // The tf column differs from the set column exactly where a token repeats.
    assert_ne!(rows[2][1], GOLDEN[2].1);
    assert_ne!(rows[3][1], GOLDEN[3].1);
}

#[test]
fn hash_jsonl_output_has_the_documented_keys() {
    let dir = tempfile::tempdir().unwrap();
    let input = golden_jsonl(dir.path());
    let out = stdout_of(neardup().args(["hash", "--format", "jsonl", s(&input)]));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), GOLDEN.len());
    for (i, (line, g)) in lines.iter().zip(GOLDEN).enumerate() {
        let obj = line.as_object().unwrap();
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["base32", "empty", "id", "n_tokens", "simhash"]);
        assert_eq!(line["id"], format!("g{i}"));
        assert_eq!(line["simhash"], g.1);
        assert_eq!(line["base32"], g.2);
        assert_eq!(line["empty"], GOLDEN_EMPTY.contains(&i), "{:?}", g.0);
    }
    // "the the the cat": four tokens (repeats count), one of them twice over.
    assert_eq!(lines[3]["n_tokens"], 4);
    assert_eq!(lines[4]["n_tokens"], 6);
    assert_eq!(lines[6]["n_tokens"], 0);
}

// ---------------------------------------------------------------------------------------
// hash: input kinds

#[test]
fn hash_gzip_zstd_and_stdin_match_plain_input() {
    let dir = tempfile::tempdir().unwrap();
    let data = jsonl_values(&golden_records());
    let plain = dir.path().join("docs.jsonl");
    let gz = dir.path().join("docs.jsonl.gz");
    let zst = dir.path().join("docs.jsonl.zst");
    std::fs::write(&plain, &data).unwrap();
    std::fs::write(&gz, gzip(&data)).unwrap();
    std::fs::write(&zst, zstd::encode_all(&data[..], 3).unwrap()).unwrap();

    let expected = stdout_of(neardup().args(["hash", s(&plain)]));
    assert_eq!(expected.lines().count(), GOLDEN.len());
    assert_eq!(stdout_of(neardup().args(["hash", s(&gz)])), expected);
    assert_eq!(stdout_of(neardup().args(["hash", s(&zst)])), expected);
    assert_eq!(
        stdout_of(neardup().args(["hash", "-"]).write_stdin(data.clone())),
        expected
    );
}

#[test]
fn hash_plain_files_are_one_document_each() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.txt");
    let b = dir.path().join("b.md");
    std::fs::write(&a, GOLDEN[2].0).unwrap();
    std::fs::write(&b, format!("{}\n\n", GOLDEN[1].0)).unwrap();
    let out = stdout_of(neardup().args(["hash", "--plain", s(&b), s(&a)]));
    // Inputs are sorted by path; the id is the path.
    assert_eq!(
        tsv_rows(&out),
        [
            [s(&a).to_string(), GOLDEN[2].1.into(), GOLDEN[2].2.into()],
            [s(&b).to_string(), GOLDEN[1].1.into(), GOLDEN[1].2.into()],
        ]
    );
    // A directory in plain mode: every file is a document.
    let out = stdout_of(neardup().args(["hash", "--plain", s(dir.path())]));
    assert_eq!(out.lines().count(), 2);
    // Plain stdin.
    let out = stdout_of(
        neardup()
            .args(["hash", "--plain", "-"])
            .write_stdin(GOLDEN[3].0),
    );
    assert_eq!(tsv_rows(&out), [["<stdin>", GOLDEN[3].1, GOLDEN[3].2]]);
}

#[test]
fn hash_reads_directories_and_skips_hidden_and_marker_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(
        root.join("a.jsonl"),
        jsonl_values(&[json!({"id": "a1", "text": GOLDEN[1].0})]),
    )
    .unwrap();
    std::fs::write(
        root.join("sub/b.jsonl.gz"),
        gzip(&jsonl_values(&[
            json!({"id": "b1", "text": GOLDEN[2].0}),
            json!({"id": "b2", "text": GOLDEN[3].0}),
        ])),
    )
    .unwrap();
    // Not input: a job marker, a hidden file, a file type that is not input.
    std::fs::write(root.join("_SUCCESS"), "").unwrap();
    std::fs::write(root.join(".hidden.jsonl"), "not json\n").unwrap();
    std::fs::write(root.join("notes.txt"), "not json\n").unwrap();
    let out = stdout_of(neardup().args(["hash", s(root)]));
    assert_eq!(
        tsv_rows(&out),
        [
            ["a1", GOLDEN[1].1, GOLDEN[1].2],
            ["b1", GOLDEN[2].1, GOLDEN[2].2],
            ["b2", GOLDEN[3].1, GOLDEN[3].2],
        ]
    );
    // A glob.
    let pattern = format!("{}/*.jsonl", s(root));
    let out = stdout_of(neardup().args(["hash", &pattern]));
    assert_eq!(tsv_rows(&out), [["a1", GOLDEN[1].1, GOLDEN[1].2]]);
}

#[test]
fn hash_ids_may_be_numbers_or_positions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("n.jsonl");
    std::fs::write(
        &path,
        jsonl_values(&[
            json!({"id": 42, "text": "hello world"}),
            json!({"id": "x\ty", "text": "hello world"}),
        ]),
    )
    .unwrap();
    let out = stdout_of(neardup().args(["hash", s(&path)]));
    let rows = tsv_rows(&out);
    assert_eq!(rows[0][0], "42");
    assert_eq!(rows[1][0], "x\\ty", "a tab in an id is escaped");
    assert_eq!(rows[0][1], rows[1][1]);

    let out = stdout_of(neardup().args(["hash", "--no-id", s(&path)]));
    let ids: Vec<String> = tsv_rows(&out).into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(ids, [format!("{}:1", s(&path)), format!("{}:2", s(&path))]);

    // Another field names the id and the text.
    let other = dir.path().join("o.jsonl");
    std::fs::write(
        &other,
        jsonl_values(&[json!({"url": "u1", "body": GOLDEN[2].0})]),
    )
    .unwrap();
    let out = stdout_of(neardup().args([
        "hash",
        "--id-field",
        "url",
        "--text-field",
        "body",
        s(&other),
    ]));
    assert_eq!(tsv_rows(&out), [["u1", GOLDEN[2].1, GOLDEN[2].2]]);
}

#[test]
fn hash_reads_parquet_like_jsonl() {
    use arrow::array::{ArrayRef, StringArray};
    use arrow::record_batch::RecordBatch;
    use parquet::arrow::ArrowWriter;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("docs.parquet");
    let ids: Vec<String> = (0..GOLDEN.len()).map(|i| format!("g{i}")).collect();
    let texts: Vec<&str> = GOLDEN.iter().map(|g| g.0).collect();
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(StringArray::from(ids)) as ArrayRef),
        ("text", Arc::new(StringArray::from(texts)) as ArrayRef),
    ])
    .unwrap();
    let mut writer =
        ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();

    let from_jsonl = stdout_of(neardup().args(["hash", s(&golden_jsonl(dir.path()))]));
    assert_eq!(stdout_of(neardup().args(["hash", s(&path)])), from_jsonl);

    let out = stdout_of(neardup().args(["hash", "--no-id", s(&path)]));
    assert_eq!(tsv_rows(&out)[0][0], format!("{}:0", s(&path)));

    neardup()
        .args(["hash", "--text-field", "body", s(&path)])
        .assert()
        .code(1)
        .stderr(
            predicate::str::contains("no column \"body\"")
                .and(predicate::str::contains("--text-field")),
        );
}

// ---------------------------------------------------------------------------------------
// hash: MinHash

#[test]
fn hash_minhash_prints_the_signature() {
    let dir = tempfile::tempdir().unwrap();
    let input = golden_jsonl(dir.path());
    let out = stdout_of(neardup().args(["hash", "--scheme", "minhash", s(&input)]));
    let rows = tsv_rows(&out);
    assert_eq!(rows.len(), GOLDEN.len());
    for row in &rows {
        assert_eq!(row.len(), 2, "{row:?}");
        let values: Vec<&str> = row[1].split(',').collect();
        assert_eq!(values.len(), 128);
        assert!(values
            .iter()
            .all(|v| v.len() == 16 && u64::from_str_radix(v, 16).is_ok()));
    }
    // An empty document's signature is all u64::MAX; a real one is not.
    assert!(rows[0][1].split(',').all(|v| v == "ffffffffffffffff"));
    assert!(rows[1][1].split(',').any(|v| v != "ffffffffffffffff"));

    let out = stdout_of(neardup().args([
        "hash",
        "--scheme",
        "minhash",
        "--format",
        "jsonl",
        s(&input),
    ]));
    let lines = json_lines(&out);
    for (line, row) in lines.iter().zip(&rows) {
        let values: Vec<&str> = line["minhash"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(values.join(","), row[1]);
    }
    assert_eq!(lines[0]["empty"], true);
    assert_eq!(lines[1]["empty"], false);

    let out = stdout_of(neardup().args([
        "hash",
        "--scheme",
        "minhash",
        "--permutations",
        "16",
        s(&input),
    ]));
    assert_eq!(tsv_rows(&out)[1][1].split(',').count(), 16);
}

/// Full `minhash-oph` signatures computed by an independent implementation of
/// docs/fingerprints.md section 9b (Python, with the `xxhash` package for XXH3-64), not by
/// neardup: (text, the 128 values in order).
const OPH_VECTORS: &[(&str, &str)] = &[
    (
        "hello",
        concat!(
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,db7e024327f4b740,",
            "db7e024327f4b740,db7e024327f4b740",
        ),
    ),
    (
        "The quick brown fox jumps over the lazy dog.",
        concat!(
            "c4116b81f5bfe70f,30f7672210d6cde0,f5f38cf5f44c108a,fdd032e8c9c52ac8,b947b1e0ccdb3c3d,b947b1e0ccdb3c3d,",
            "c4116b81f5bfe70f,30f7672210d6cde0,30f7672210d6cde0,fdd032e8c9c52ac8,c4116b81f5bfe70f,c4116b81f5bfe70f,",
            "c4116b81f5bfe70f,f5f38cf5f44c108a,c4116b81f5bfe70f,30f7672210d6cde0,b947b1e0ccdb3c3d,c4116b81f5bfe70f,",
            "f5f38cf5f44c108a,c4116b81f5bfe70f,c4116b81f5bfe70f,30f7672210d6cde0,f5f38cf5f44c108a,b947b1e0ccdb3c3d,",
            "30f7672210d6cde0,c4116b81f5bfe70f,fdd032e8c9c52ac8,b947b1e0ccdb3c3d,30f7672210d6cde0,fdd032e8c9c52ac8,",
            "b947b1e0ccdb3c3d,f5f38cf5f44c108a,c4116b81f5bfe70f,30f7672210d6cde0,f5f38cf5f44c108a,c4116b81f5bfe70f,",
            "fdd032e8c9c52ac8,30f7672210d6cde0,c4116b81f5bfe70f,30f7672210d6cde0,c4116b81f5bfe70f,b947b1e0ccdb3c3d,",
            "fdd032e8c9c52ac8,b947b1e0ccdb3c3d,c4116b81f5bfe70f,30f7672210d6cde0,30f7672210d6cde0,f5f38cf5f44c108a,",
            "f5f38cf5f44c108a,b947b1e0ccdb3c3d,f5f38cf5f44c108a,f5f38cf5f44c108a,30f7672210d6cde0,f5f38cf5f44c108a,",
            "30f7672210d6cde0,30f7672210d6cde0,f5f38cf5f44c108a,b947b1e0ccdb3c3d,f5f38cf5f44c108a,b947b1e0ccdb3c3d,",
            "fdd032e8c9c52ac8,30f7672210d6cde0,30f7672210d6cde0,c4116b81f5bfe70f,b947b1e0ccdb3c3d,b947b1e0ccdb3c3d,",
            "f5f38cf5f44c108a,c4116b81f5bfe70f,30f7672210d6cde0,30f7672210d6cde0,c4116b81f5bfe70f,c4116b81f5bfe70f,",
            "30f7672210d6cde0,f5f38cf5f44c108a,f5f38cf5f44c108a,b947b1e0ccdb3c3d,f5f38cf5f44c108a,fdd032e8c9c52ac8,",
            "b947b1e0ccdb3c3d,b947b1e0ccdb3c3d,fdd032e8c9c52ac8,30f7672210d6cde0,c4116b81f5bfe70f,b947b1e0ccdb3c3d,",
            "c4116b81f5bfe70f,fdd032e8c9c52ac8,c4116b81f5bfe70f,f5f38cf5f44c108a,fdd032e8c9c52ac8,c4116b81f5bfe70f,",
            "fdd032e8c9c52ac8,b947b1e0ccdb3c3d,b947b1e0ccdb3c3d,b947b1e0ccdb3c3d,c4116b81f5bfe70f,30f7672210d6cde0,",
            "30f7672210d6cde0,b947b1e0ccdb3c3d,c4116b81f5bfe70f,c4116b81f5bfe70f,fdd032e8c9c52ac8,c4116b81f5bfe70f,",
            "fdd032e8c9c52ac8,c4116b81f5bfe70f,c4116b81f5bfe70f,b947b1e0ccdb3c3d,30f7672210d6cde0,c4116b81f5bfe70f,",
            "f5f38cf5f44c108a,fdd032e8c9c52ac8,30f7672210d6cde0,fdd032e8c9c52ac8,c4116b81f5bfe70f,f5f38cf5f44c108a,",
            "fdd032e8c9c52ac8,30f7672210d6cde0,c4116b81f5bfe70f,b947b1e0ccdb3c3d,b947b1e0ccdb3c3d,b947b1e0ccdb3c3d,",
            "f5f38cf5f44c108a,f5f38cf5f44c108a,f5f38cf5f44c108a,30f7672210d6cde0,fdd032e8c9c52ac8,30f7672210d6cde0,",
            "fdd032e8c9c52ac8,c4116b81f5bfe70f",
        ),
    ),
    (
        "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife. However little known the feelings or views of such a man may be on his first entering a neighbourhood, this truth is so well fixed in the minds of the surrounding families, that he is considered the rightful property of some one or other of their daughters.",
        concat!(
            "f66ef9cf0639a053,0274206d76dfa744,2f1340a23722f698,067c7aab0ab074dd,8a397c7936cdfd09,47e87615235f2461,",
            "27cdde4f1e5af7fb,8a397c7936cdfd09,6e926fc85418a0bb,124c09e13d5d3f0b,de2ea2c3e461efb9,161f036a47e397b6,",
            "3da7838cd4b7643e,1b2be7228cc68823,bc75ce5f412846a7,1f28448d82cf686d,71cb5859a5ec1e55,6317b433e9b647fa,",
            "a14d0dd30294b84c,27cdde4f1e5af7fb,3da7838cd4b7643e,2b22414f75e688c8,8a397c7936cdfd09,2f1340a23722f698,",
            "3052c624001eae7b,335ebf1632c7d7f2,354c1dd731e8836c,354c1dd731e8836c,335ebf1632c7d7f2,dc3e61c523657aec,",
            "3da7838cd4b7643e,b7e8529ac566e97d,97a7233ba212045a,5daedfb0b3eaa456,446e7cd4079d35e0,47e87615235f2461,",
            "48f6663dae03db8c,4b8305d69f21fb24,94bf4e721a65c6f0,a33294d4d89013e3,dc3e61c523657aec,0274206d76dfa744,",
            "fc64590de6ac5a1f,8867111c9b98975d,2b22414f75e688c8,de2ea2c3e461efb9,5daedfb0b3eaa456,f47621cac2158fa2,",
            "e3e950867b78d21c,6317b433e9b647fa,3da7838cd4b7643e,66737a929a55f47b,927ced5d34fa59d0,bc75ce5f412846a7,",
            "8a397c7936cdfd09,6e926fc85418a0bb,71cb5859a5ec1e55,1b2be7228cc68823,8a397c7936cdfd09,7667c75b04c7513a,",
            "446e7cd4079d35e0,5daedfb0b3eaa456,7d2d0296f1de7534,4b8305d69f21fb24,80e01fd1f5d92e1c,a14d0dd30294b84c,",
            "71cb5859a5ec1e55,9fc6865f24c79f2a,8867111c9b98975d,8a397c7936cdfd09,8c23af15ec0bdced,6e926fc85418a0bb,",
            "90b71e5258b9d312,927ced5d34fa59d0,94bf4e721a65c6f0,97a7233ba212045a,a14d0dd30294b84c,9ba77a05b8752e37,",
            "9c40113c1cbe2d92,9fc6865f24c79f2a,a14d0dd30294b84c,a33294d4d89013e3,f8243f11e1e55c36,7667c75b04c7513a,",
            "80e01fd1f5d92e1c,27cdde4f1e5af7fb,161f036a47e397b6,47e87615235f2461,161f036a47e397b6,6e926fc85418a0bb,",
            "71cb5859a5ec1e55,b7e8529ac566e97d,b81c0a9ee755ecb0,cbf18feb6a8fe872,bc75ce5f412846a7,bea7408ddb9212b6,",
            "c0f2e54d3c26ed3e,f8243f11e1e55c36,4b8305d69f21fb24,7667c75b04c7513a,1f28448d82cf686d,cbf18feb6a8fe872,",
            "cdacb6341279bde2,dc3e61c523657aec,de2ea2c3e461efb9,b7e8529ac566e97d,1f28448d82cf686d,d7761f4d9e627d90,",
            "067c7aab0ab074dd,446e7cd4079d35e0,dc3e61c523657aec,de2ea2c3e461efb9,80e01fd1f5d92e1c,e3e950867b78d21c,",
            "4b8305d69f21fb24,e7cca85104e62751,bc75ce5f412846a7,6e926fc85418a0bb,0274206d76dfa744,067c7aab0ab074dd,",
            "b7e8529ac566e97d,71cb5859a5ec1e55,f47621cac2158fa2,f66ef9cf0639a053,f8243f11e1e55c36,9fc6865f24c79f2a,",
            "fc64590de6ac5a1f,71cb5859a5ec1e55",
        ),
    ),
];

#[test]
fn hash_minhash_oph_reproduces_the_independent_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("oph.jsonl");
    let lines: Vec<String> = OPH_VECTORS
        .iter()
        .enumerate()
        .map(|(i, (text, _))| json!({"id": i, "text": text}).to_string())
        .collect();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let out = stdout_of(neardup().args(["hash", "--scheme", "minhash-oph", s(&input)]));
    let rows = tsv_rows(&out);
    assert_eq!(rows.len(), OPH_VECTORS.len());
    for (row, (text, expected)) in rows.iter().zip(OPH_VECTORS) {
        assert_eq!(row[1], *expected, "{text}");
    }
    // Not the `minhash` scheme's values: the two must never be mixed up.
    let classic = tsv_rows(&stdout_of(neardup().args([
        "hash",
        "--scheme",
        "minhash",
        s(&input),
    ])));
    assert_ne!(classic[2][1], rows[2][1]);
}

// ---------------------------------------------------------------------------------------
// hash: bad input

/// A bad second line and the complete message it must produce (after `FILE:2: `).
fn bad_lines() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    vec![
        (
            "invalid UTF-8",
            b"{\"id\": \"bad\", \"text\": \"caf\xff\"}".to_vec(),
            "invalid UTF-8 at byte 26 of the line",
        ),
        (
            "malformed JSON",
            br#"{"id": "bad", "text": "unterminated}"#.to_vec(),
            "malformed JSON: EOF while parsing a string at line 1 column 36",
        ),
        (
            "missing text",
            br#"{"id": "bad", "body": "x"}"#.to_vec(),
            r#"record has no field "text""#,
        ),
        (
            "non-string text",
            br#"{"id": "bad", "text": 17}"#.to_vec(),
            r#"field "text" is a number, expected a string"#,
        ),
        (
            "missing id",
            br#"{"text": "no id here"}"#.to_vec(),
            r#"record has no field "id" (or it is null)"#,
        ),
        ("blank line", b"   ".to_vec(), "empty line"),
    ]
}

fn file_with_bad_line(dir: &Path, bad: &[u8]) -> PathBuf {
    let path = dir.join("data.jsonl");
    let mut data = jsonl_values(&[json!({"id": "first", "text": GOLDEN[1].0})]);
    data.extend_from_slice(bad);
    data.push(b'\n');
    data.extend(jsonl_values(&[json!({"id": "third", "text": GOLDEN[2].0})]));
    std::fs::write(&path, data).unwrap();
    path
}

#[test]
fn hash_bad_input_names_file_and_line_and_exits_1() {
    for (what, bad, message) in bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = file_with_bad_line(dir.path(), &bad);
        let assert = neardup().args(["hash", s(&path)]).assert().code(1);
        let stderr = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
        let expected = format!("error: {}:2: {message}", s(&path));
        // The whole message, once: a hint may follow in parentheses, nothing else.
        assert!(
            stderr == format!("{expected}\n") || stderr.starts_with(&format!("{expected} (")),
            "{what}: {stderr:?}"
        );
        assert_eq!(stderr.lines().count(), 1, "{what}: {stderr:?}");
        let out = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
        assert_eq!(
            tsv_rows(&out),
            [["first", GOLDEN[1].1, GOLDEN[1].2]],
            "{what}: stdout holds only the lines before the error"
        );
    }
}

#[test]
fn hash_skip_invalid_counts_and_reports_the_first() {
    for (what, bad, message) in bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = file_with_bad_line(dir.path(), &bad);
        let assert = neardup()
            .args(["hash", "--skip-invalid", s(&path)])
            .assert()
            .success()
            .stderr(predicate::eq(format!(
                "hashed 2 documents (0 empty), skipped 1 invalid record (first: {}:2: {message})\n",
                s(&path)
            )));
        let out = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
        let ids: Vec<String> = tsv_rows(&out).into_iter().map(|r| r[0].clone()).collect();
        assert_eq!(ids, ["first", "third"], "{what}");
    }
}

#[test]
fn hash_skip_invalid_counts_several() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.jsonl");
    let mut data = jsonl_values(&[json!({"id": "a", "text": "one"})]);
    data.extend_from_slice(b"{\"id\": \"b\", \"text\": 5}\n\n");
    data.extend(jsonl_values(&[json!({"id": "c", "text": ""})]));
    std::fs::write(&path, data).unwrap();
    neardup()
        .args(["hash", "--skip-invalid", s(&path)])
        .assert()
        .success()
        .stdout(predicate::function(|out: &str| out.lines().count() == 2))
        .stderr(predicate::eq(format!(
            "hashed 2 documents (1 empty), skipped 2 invalid records (first: {}:2: field \"text\" is a number, expected a string)\n",
            s(&path)
        )));
    // --quiet drops the summary, not the output.
    neardup()
        .args(["hash", "--skip-invalid", "--quiet", s(&path)])
        .assert()
        .success()
        .stderr(predicate::str::is_empty())
        .stdout(predicate::function(|out: &str| out.lines().count() == 2));
}

#[test]
fn hash_missing_id_suggests_no_id() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("noid.jsonl");
    std::fs::write(&path, jsonl_values(&[json!({"text": "hello"})])).unwrap();
    neardup()
        .args(["hash", s(&path)])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--no-id"));
}

#[test]
fn hash_invalid_utf8_plain_file_is_an_error_or_a_skip() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.txt");
    let bad = dir.path().join("bad.txt");
    std::fs::write(&good, "hello world").unwrap();
    std::fs::write(&bad, b"caf\xc3(").unwrap();
    neardup()
        .args(["hash", "--plain", s(&bad)])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "{}: invalid UTF-8",
            s(&bad)
        )));
    neardup()
        .args(["hash", "--plain", "--skip-invalid", s(&good), s(&bad)])
        .assert()
        .success()
        .stdout(predicate::function(|out: &str| out.lines().count() == 1))
        .stderr(predicate::str::contains("skipped 1 invalid record"));
}

#[test]
fn hash_missing_input_and_bad_flags() {
    neardup()
        .args(["hash", "/no/such/dir/data.jsonl"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "/no/such/dir/data.jsonl: no such file",
        ));
    let dir = tempfile::tempdir().unwrap();
    let input = golden_jsonl(dir.path());
    for (flags, message) in [
        (
            &["--features", "shingles", "--shingle", "0"][..],
            "--shingle must be at least 1",
        ),
        (
            &["--scheme", "minhash", "--permutations", "0"][..],
            "--permutations must be",
        ),
        (
            &["--scheme", "minhash", "--weights", "tf"][..],
            "--weights applies only",
        ),
        (&["--shingle", "4"][..], "--features shingles"),
    ] {
        neardup()
            .arg("hash")
            .args(flags)
            .arg(s(&input))
            .assert()
            .code(1)
            .stdout(predicate::str::is_empty())
            .stderr(predicate::str::contains(message));
    }
    // Usage errors are clap's: exit code 2.
    neardup().arg("hash").assert().code(2);
    neardup()
        .args(["hash", "--scheme", "nope", s(&input)])
        .assert()
        .code(2);
    neardup()
        .args(["hash", "--no-id", "--id-field", "x", s(&input)])
        .assert()
        .code(2);
}

#[test]
fn hash_stops_quietly_when_the_reader_goes_away() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.jsonl");
    let records: Vec<Value> = (0..3000)
        .map(|i| json!({"id": i, "text": format!("document number {i} of many")}))
        .collect();
    std::fs::write(&path, jsonl_values(&records)).unwrap();
    // About 2 KB per line: far more than a pipe buffer, so the writer meets a closed pipe.
    let mut child = StdCommand::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["hash", "--scheme", "minhash", s(&path)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 100];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("hashed 3000"), "{stderr}");
}

// ---------------------------------------------------------------------------------------
// compare

fn compare_json(args: &[&str]) -> Value {
    let out = stdout_of(neardup().arg("compare").arg("--json").args(args));
    serde_json::from_str(&out).unwrap()
}

/// A 60-word text with mostly distinct words.
const SIXTY_WORDS: &str = "Early in the morning the harbour master walked along the \
    stone pier checking every mooring line while gulls circled above the fishing boats \
    that had returned overnight with heavy nets full of herring and mackerel destined \
    for the market square where traders already argued about prices weights and the \
    weather forecast for tomorrow since storms would keep the fleet ashore";

#[test]
fn sixty_words_are_sixty_words() {
    assert_eq!(SIXTY_WORDS.split_whitespace().count(), 60);
}

#[test]
fn compare_identical_texts() {
    let text = GOLDEN[2].0;
    let r = compare_json(&["--text", text, "--text", text]);
    assert_eq!(r["hamming"], 0);
    assert_eq!(r["jaccard"], 1.0);
    assert_eq!(r["cosine_estimate"], 1.0);
    assert_eq!(r["exact_duplicate"], true);
    assert_eq!(r["verdict"], "exact duplicate");
    assert_eq!(r["a"]["simhash"], GOLDEN[2].1);
    assert_eq!(r["b"]["base32"], GOLDEN[2].2);
    // Case and punctuation do not matter to the exact key; numbers do.
    let r = compare_json(&[
        "--text",
        "Hello,  World! 2024",
        "--text",
        "hello world 2024",
    ]);
    assert_eq!(r["verdict"], "exact duplicate");
    let r = compare_json(&["--text", "Hello world 2024", "--text", "hello world 2025"]);
    assert_eq!(r["exact_duplicate"], false);
    assert_eq!(r["verdict"], "near-duplicate");
    assert_eq!(r["hamming"], 0);
}

#[test]
fn compare_one_word_edit_is_a_near_duplicate() {
    let edited = SIXTY_WORDS.replace("herring", "sardines");
    assert_ne!(edited, SIXTY_WORDS);
    let r = compare_json(&["--text", SIXTY_WORDS, "--text", &edited]);
    let hamming = r["hamming"].as_u64().unwrap();
    assert!(hamming <= 8, "hamming {hamming}");
    // 58 shingles each, 3 of them changed: J = 55 / 61.
    let jaccard = r["jaccard"].as_f64().unwrap();
    assert!((jaccard - 55.0 / 61.0).abs() < 1e-9, "jaccard {jaccard}");
    assert!((r["containment_a_in_b"].as_f64().unwrap() - 55.0 / 58.0).abs() < 1e-9);
    assert!((r["containment_b_in_a"].as_f64().unwrap() - 55.0 / 58.0).abs() < 1e-9);
    assert_eq!(r["exact_duplicate"], false);
    assert_eq!(r["verdict"], "near-duplicate");
    assert!(r["reason"]
        .as_str()
        .unwrap()
        .contains("jaccard 0.9016 >= 0.8"));
    let cosine = r["cosine_estimate"].as_f64().unwrap();
    assert!((cosine - (std::f64::consts::PI * hamming as f64 / 64.0).cos()).abs() < 1e-12);

    // Jaccard over word 1-shingles: 2 words differ out of 48 distinct (+1 in the union).
    let r1 = compare_json(&[
        "--shingle-jaccard",
        "1",
        "--text",
        SIXTY_WORDS,
        "--text",
        &edited,
    ]);
    assert!(r1["jaccard"].as_f64().unwrap() > jaccard);
}

#[test]
fn compare_unrelated_texts_are_different() {
    let r = compare_json(&[
        "--text",
        SIXTY_WORDS,
        "--text",
        "Quantum error correction encodes logical qubits into entangled states of many \
         physical qubits so that local noise can be detected and undone without measuring \
         the encoded information directly",
    ]);
    assert_eq!(r["verdict"], "different");
    assert_eq!(r["jaccard"], 0.0);
    assert!(r["hamming"].as_u64().unwrap() > 3);
    assert_eq!(r["exact_duplicate"], false);
    let reason = r["reason"].as_str().unwrap();
    assert!(
        reason.contains("> 3") && reason.contains("< 0.8"),
        "{reason}"
    );
}

#[test]
fn compare_empty_documents_are_never_duplicates() {
    let r = compare_json(&["--text", "", "--text", "Hello world"]);
    assert_eq!(r["verdict"], "empty");
    assert_eq!(r["a"]["empty"], true);
    assert_eq!(r["a"]["simhash"], "0000000000000000");
    assert_eq!(r["b"]["empty"], false);
    // Two empty documents have equal fingerprints and keys, and still are not duplicates.
    let r = compare_json(&["--text", "2024 12345", "--text", "2024 12345"]);
    assert_eq!(r["verdict"], "empty");
    assert_eq!(r["exact_duplicate"], false);
    assert_eq!(r["jaccard"], 0.0);
}

#[test]
fn compare_json_has_the_documented_keys() {
    let r = compare_json(&["--text", "a b c", "--text", "a b d"]);
    let mut keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "a",
            "b",
            "containment_a_in_b",
            "containment_b_in_a",
            "cosine_estimate",
            "exact_duplicate",
            "hamming",
            "jaccard",
            "jaccard_shingle",
            "minhash_jaccard_estimate",
            "reason",
            "scheme",
            "verdict",
        ]
    );
    for side in ["a", "b"] {
        let mut keys: Vec<&str> = r[side]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "base32",
                "empty",
                "minhash",
                "n_features",
                "n_tokens",
                "simhash",
                "source"
            ]
        );
        assert_eq!(r[side]["n_tokens"], 3);
    }
    assert_eq!(r["jaccard_shingle"], 3);
    assert!(r["scheme"].as_str().unwrap().starts_with("simhash-doc"));
}

#[test]
fn compare_two_files() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.txt");
    let b = dir.path().join("b.txt.gz");
    std::fs::write(&a, SIXTY_WORDS).unwrap();
    std::fs::write(&b, gzip(SIXTY_WORDS.replace("stone", "granite").as_bytes())).unwrap();
    let out = stdout_of(neardup().args(["compare", s(&a), s(&b)]));
    assert!(out.contains(&format!("a: {}: simhash ", s(&a))), "{out}");
    assert!(out.contains(&format!("b: {}: simhash ", s(&b))), "{out}");
    assert!(out.contains("hamming distance: "), "{out}");
    assert!(out.contains("jaccard (word 3-shingles): 0.9016"), "{out}");
    assert!(
        out.lines()
            .last()
            .unwrap()
            .starts_with("verdict: near-duplicate ("),
        "{out}"
    );

    // The golden fingerprint of a file's text, and the same document from stdin.
    std::fs::write(&a, GOLDEN[2].0).unwrap();
    let r: Value = serde_json::from_str(&stdout_of(
        neardup()
            .args(["compare", "--json", s(&a), "-"])
            .write_stdin(GOLDEN[2].0),
    ))
    .unwrap();
    assert_eq!(r["a"]["simhash"], GOLDEN[2].1);
    assert_eq!(r["b"]["source"], "<stdin>");
    assert_eq!(r["verdict"], "exact duplicate");
}

#[test]
fn compare_with_minhash_reports_the_estimate() {
    let edited = SIXTY_WORDS.replace("herring", "sardines");
    let r = compare_json(&[
        "--scheme",
        "minhash",
        "--text",
        SIXTY_WORDS,
        "--text",
        &edited,
    ]);
    assert_eq!(r["hamming"], Value::Null);
    assert_eq!(r["a"]["simhash"], Value::Null);
    assert_eq!(r["a"]["minhash"].as_array().unwrap().len(), 128);
    let estimate = r["minhash_jaccard_estimate"].as_f64().unwrap();
    // 5-shingles: 56 each, 5 changed, J = 51/61 = 0.836; 128 permutations estimate it
    // within a few standard errors (sd ~ 0.033).
    assert!((estimate - 51.0 / 61.0).abs() < 0.15, "{estimate}");
    assert_eq!(r["verdict"], "near-duplicate");
}

#[test]
fn compare_usage_errors() {
    neardup()
        .args(["compare", "--text", "only one"])
        .assert()
        .code(2);
    neardup()
        .args(["compare", "--text", "a", "--text", "b", "--text", "c"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("exactly twice"));
    neardup().args(["compare", "one-file.txt"]).assert().code(2);
    neardup().arg("compare").assert().code(2);
    neardup()
        .args([
            "compare",
            "--shingle-jaccard",
            "0",
            "--text",
            "a",
            "--text",
            "b",
        ])
        .assert()
        .code(2);
    neardup()
        .args(["compare", "/no/such/a.txt", "/no/such/b.txt"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("/no/such/a.txt"));
}

#[test]
fn scheme_flags_change_the_features() {
    // Full-width letters are the same words only after NFKC.
    let wide = "\u{ff46}\u{ff55}\u{ff4c}\u{ff4c} width text";
    let r = compare_json(&["--text", wide, "--text", "full width text"]);
    assert_eq!(r["verdict"], "different");
    let r = compare_json(&["--nfkc", "--text", wide, "--text", "full width text"]);
    assert_eq!(r["verdict"], "exact duplicate");

    // Stop words leave the features (n_tokens) but not the exact key.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    std::fs::write(
        &path,
        jsonl_values(&[json!({"id": "s", "text": GOLDEN[2].0})]),
    )
    .unwrap();
    let plain = json_lines(&stdout_of(neardup().args([
        "hash",
        "--format",
        "jsonl",
        s(&path),
    ])));
    let stopped = json_lines(&stdout_of(neardup().args([
        "hash",
        "--format",
        "jsonl",
        "--stop-words",
        "english",
        s(&path),
    ])));
    assert_eq!(plain[0]["n_tokens"], 9);
    assert_eq!(
        stopped[0]["n_tokens"], 6,
        "the, the and over are stop words"
    );
    assert_ne!(plain[0]["simhash"], stopped[0]["simhash"]);
    let list = dir.path().join("stop.txt");
    std::fs::write(&list, "# articles\nthe\nover\n").unwrap();
    let custom = json_lines(&stdout_of(neardup().args([
        "hash",
        "--format",
        "jsonl",
        "--stop-words",
        s(&list),
        s(&path),
    ])));
    assert_eq!(custom[0]["n_tokens"], 6);
    assert_eq!(custom[0]["simhash"], stopped[0]["simhash"]);
}

// ---------------------------------------------------------------------------------------
// help

#[test]
fn help_has_examples() {
    for args in [&["--help"][..], &["hash", "--help"], &["compare", "--help"]] {
        neardup()
            .args(args)
            .assert()
            .success()
            .stdout(predicate::str::contains("Examples:"));
    }
    neardup().args(["hash", "--help"]).assert().stdout(
        predicate::str::contains("--skip-invalid").and(predicate::str::contains("--scheme")),
    );
}
