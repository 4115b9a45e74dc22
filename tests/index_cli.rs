//! `neardup run --index`, `neardup query` and `neardup index`, end to end: a query of every
//! document of a corpus answers exactly the brute-force neighbours (within k of a simhash
//! index; sharing a band and verified at the threshold in a MinHash index), batches added
//! one by one give the pairs and clusters of one run over their union, the index does not
//! depend on the number of workers, and what does not fit an index is refused.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::*;
use neardup_core::minhash::{jaccard_estimate, Banding};
use neardup_core::similarity::jaccard;
use neardup_core::{hamming, Fingerprinter, Scheme};
use serde_json::Value;

/// The MinHash runs of these tests: a banding of 16 bands of 4 rows (a pair of Jaccard 0.6
/// shares a band with probability 0.89, so some pairs above the threshold are no
/// candidates: the index must not find them either) and pairs verified at 0.6.
const MINHASH: [&str; 8] = [
    "--scheme",
    "minhash",
    "--threshold",
    "0.6",
    "--bands",
    "16",
    "--rows",
    "4",
];
const MINHASH_THRESHOLD: f64 = 0.6;
const MINHASH_BANDING: Banding = Banding { bands: 16, rows: 4 };

/// A corpus with near-duplicate families: a base text of random words and copies with a
/// word or two changed, some exact copies, an empty document.
fn corpus(seed: u64, families: usize, prefix: &str) -> Vec<Doc> {
    let mut rng = SeededRng::new(seed);
    let mut docs = Vec::new();
    for f in 0..families {
        let len = 40 + rng.below(30) as usize;
        let base: Vec<String> = rng.words(len);
        for copy in 0..1 + rng.below(4) {
            let mut words = base.clone();
            for _ in 0..copy {
                let at = rng.below(words.len() as u64) as usize;
                words[at] = rng.word();
            }
            docs.push(doc(format!("{prefix}{f}-{copy}"), words.join(" ")));
        }
    }
    docs.push(doc(format!("{prefix}empty"), "123 456"));
    docs
}

/// The answer of `neardup query ARGS`: (query, doc_id) -> (measure, cluster_id), the
/// measure being the match's `hamming` (a simhash index) or its `jaccard` and
/// `jaccard_exact` (a MinHash index).
fn query(args: &[&str]) -> BTreeMap<(String, u64), (Value, Value)> {
    let output = neardup().arg("query").args(args).output().unwrap();
    assert!(
        output.status.success(),
        "neardup query {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut out = BTreeMap::new();
    for line in String::from_utf8(output.stdout).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let key = (
            v["query"].as_str().unwrap().to_string(),
            v["doc_id"].as_u64().unwrap(),
        );
        let measure = match v.get("hamming") {
            Some(h) => h.clone(),
            None => jaccard_measure(
                v["jaccard"].as_f64().unwrap(),
                v["jaccard_exact"].as_bool().unwrap(),
            ),
        };
        let value = (measure, v["cluster_id"].clone());
        assert!(out.insert(key, value).is_none(), "a match twice: {line}");
    }
    out
}

/// A MinHash match's measure as the tests compare it: its Jaccard to 9 decimals (serde_json
/// parses a float to within one unit in the last place, not always exactly) and whether it
/// is exact.
fn jaccard_measure(jaccard: f64, exact: bool) -> Value {
    serde_json::json!([format!("{jaccard:.9}"), exact])
}

fn index_files(index: &Path) -> Value {
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(index.join("manifest.json")).unwrap()).unwrap();
    manifest["generations"].clone()
}

/// Runs `args` with `--index` over `docs` at 1 and 2 workers and hands each run and its
/// index to `check` (with the worker count); then checks that the index's files and its
/// saved state for `neardup serve` do not depend on the number of workers.
fn at_one_and_two_workers(
    docs: &[Doc],
    args: &[&str],
    mut check: impl FnMut(&Path, &Path, &Path, &str),
) {
    let dir = tempfile::tempdir().unwrap();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(docs));
    let mut generations = Vec::new();
    for workers in ["1", "2"] {
        let out = dir.path().join(format!("out-{workers}"));
        let index = dir.path().join(format!("index-{workers}"));
        let mut run = vec!["-w", workers, "--index", s(&index)];
        run.extend_from_slice(args);
        run_ok(&out, &run, &[&input]);
        // The saved state of `neardup serve` too (a simhash index's).
        let state = std::fs::read(index.join("serve-state.bin")).ok();
        generations.push((index_files(&index), state));
        check(&input, &out, &index, workers);
    }
    assert_eq!(generations[0], generations[1]);
}

/// doc_id -> cluster_id of the run's clustered documents.
fn run_clusters(out: &Path) -> BTreeMap<u64, i64> {
    clusters(out)
        .iter()
        .filter(|c| c.cluster_id >= 0)
        .map(|c| (c.doc_id, c.cluster_id))
        .collect()
}

/// `(doc_a, doc_b)` of every near pair of the run at `out`, whatever its verification.
fn near_pairs(out: &Path) -> BTreeSet<(u64, u64)> {
    use arrow::array::AsArray;
    let mut found = BTreeSet::new();
    for b in batches(&out.join("pairs")) {
        let kinds = column(&b, "kind").as_string::<i32>();
        let a = column(&b, "doc_a").as_primitive::<arrow::datatypes::UInt64Type>();
        let c = column(&b, "doc_b").as_primitive::<arrow::datatypes::UInt64Type>();
        for i in 0..b.num_rows() {
            if kinds.value(i) == "near" {
                found.insert((a.value(i).min(c.value(i)), a.value(i).max(c.value(i))));
            }
        }
    }
    found
}

#[test]
fn a_query_of_every_document_answers_its_brute_force_neighbours() {
    let docs = corpus(11, 120, "d");
    at_one_and_two_workers(&docs, &[], |input, out, index, workers| {
        let fps = fingerprints(out);
        let clusters = run_clusters(out);
        for k in [3u32, 1] {
            let k_text = k.to_string();
            let answer = query(&["--index", s(index), "-k", &k_text, "-w", workers, s(input)]);
            let mut expected = BTreeMap::new();
            for q in fps.iter().filter(|q| !q.empty) {
                for d in fps.iter().filter(|d| !d.empty) {
                    let h = hamming(q.simhash, d.simhash);
                    if h <= k {
                        let cluster = clusters.get(&d.doc_id).map_or(Value::Null, |&c| c.into());
                        expected.insert((q.id.clone().unwrap(), d.doc_id), (h.into(), cluster));
                    }
                }
            }
            assert!(expected.len() > fps.len(), "the corpus has near duplicates");
            assert_eq!(answer, expected, "k = {k}, {workers} workers");
        }
        // A fingerprint query answers as the text it came from.
        let first = &fps[0];
        let hex = format!("{:016x}", first.simhash);
        let by_fp = query(&["--index", s(index), "--fingerprint", &hex]);
        let by_text = query(&["--index", s(index), "--text", &docs[0].text]);
        let strip = |m: &BTreeMap<(String, u64), (Value, Value)>| -> BTreeSet<u64> {
            m.keys().map(|k| k.1).collect()
        };
        assert_eq!(strip(&by_fp), strip(&by_text));
        assert!(strip(&by_fp).contains(&first.doc_id));
    });
}

/// What the brute force of a MinHash index needs of a document, computed from its text
/// here: its signature, band keys and shingle set (sorted).
struct Sketch {
    signature: Vec<u64>,
    bands: Vec<u64>,
    shingles: Vec<u64>,
}

fn sketch(text: &str) -> Option<Sketch> {
    let mut fingerprinter = Fingerprinter::new(Scheme::minhash());
    if fingerprinter.fingerprint(text).is_empty() {
        return None;
    }
    let signature = fingerprinter.signature().to_vec();
    let mut shingles = fingerprinter.feature_set().to_vec();
    shingles.sort_unstable();
    Some(Sketch {
        bands: MINHASH_BANDING.band_keys(&signature).collect(),
        signature,
        shingles,
    })
}

/// The brute force of a MinHash index: for every pair of documents (a query and an indexed
/// one) whose band keys collide in at least one band and whose similarity reaches
/// `threshold` (the exact Jaccard of the shingle sets, or with `exact` false the
/// signatures' estimate), (query id, doc_id) -> ([jaccard, exact], cluster).
fn minhash_brute_force(
    docs: &[Doc],
    out: &Path,
    threshold: f64,
    exact: bool,
) -> BTreeMap<(String, u64), (Value, Value)> {
    let fps = fingerprints(out);
    let clusters = run_clusters(out);
    let doc_of: BTreeMap<&str, u64> = fps
        .iter()
        .map(|f| (f.id.as_deref().unwrap(), f.doc_id))
        .collect();
    let sketches: Vec<(String, u64, Sketch)> = docs
        .iter()
        .filter_map(|d| {
            let id = d.id.as_str().unwrap().to_string();
            let doc_id = doc_of[id.as_str()];
            sketch(&d.text).map(|k| (id, doc_id, k))
        })
        .collect();
    let mut expected = BTreeMap::new();
    for (qid, _, q) in &sketches {
        for (_, doc_id, d) in &sketches {
            if !q.bands.iter().zip(&d.bands).any(|(a, b)| a == b) {
                continue;
            }
            let j = if exact {
                jaccard(&q.shingles, &d.shingles)
            } else {
                jaccard_estimate(&q.signature, &d.signature)
            };
            if j >= threshold {
                let cluster = clusters.get(doc_id).map_or(Value::Null, |&c| c.into());
                let measure = jaccard_measure(j, exact);
                expected.insert((qid.clone(), *doc_id), (measure, cluster));
            }
        }
    }
    expected
}

#[test]
fn a_query_of_every_document_of_a_minhash_index_answers_its_brute_force_neighbours() {
    let docs = corpus(11, 120, "d");
    for (shingles, exact) in [(&["--index-shingles"][..], true), (&[][..], false)] {
        let mut args = MINHASH.to_vec();
        args.push("--no-exact");
        args.extend_from_slice(shingles);
        // Without shingle sets the run verifies by the estimate, as the index does.
        if !exact {
            args.extend(["--verify", "minhash"]);
        }
        at_one_and_two_workers(&docs, &args, |input, out, index, workers| {
            let expected = minhash_brute_force(&docs, out, MINHASH_THRESHOLD, exact);
            let answer = query(&["--index", s(index), "-w", workers, s(input)]);
            let doc_of: BTreeMap<String, u64> = fingerprints(out)
                .into_iter()
                .map(|f| (f.id.unwrap(), f.doc_id))
                .collect();
            let pairs: BTreeSet<(u64, u64)> = expected
                .keys()
                .map(|(q, d)| (doc_of[q], *d))
                .filter(|(q, d)| q != d)
                .map(|(q, d)| (q.min(d), q.max(d)))
                .collect();
            assert!(pairs.len() > 50, "the corpus has near duplicates");
            assert_eq!(answer, expected, "exact {exact}, {workers} workers");
            // The run found the same pairs: those of the brute force.
            assert_eq!(near_pairs(out), pairs, "exact {exact}, {workers} workers");
            // A stricter threshold answers the subset at or above it.
            let strict = query(&["--index", s(index), "--threshold", "0.8", s(input)]);
            let subset: BTreeMap<_, _> = expected
                .into_iter()
                .filter(|(_, (m, _))| m[0].as_str().unwrap().parse::<f64>().unwrap() >= 0.8)
                .collect();
            assert!(subset.len() < answer.len());
            assert_eq!(strict, subset);
        });
    }
}

#[test]
fn queries_are_written_as_parquet_with_output() {
    // The same answers as the JSON lines, column by column, of a simhash and a MinHash index.
    let mut minhash = MINHASH.to_vec();
    minhash.push("--index-shingles");
    for args in [&[][..], &minhash[..]] {
        let dir = tempfile::tempdir().unwrap();
        let docs = corpus(3, 20, "d");
        let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&docs));
        let index = dir.path().join("index");
        let mut run = args.to_vec();
        run.extend(["--index", s(&index)]);
        run_ok(&dir.path().join("out"), &run, &[&input]);
        let json = query(&["--index", s(&index), s(&input)]);
        let file = dir.path().join("matches.parquet");
        let output = neardup()
            .args(["query", "--index", s(&index)])
            .args(["--output", s(&file), s(&input)])
            .output()
            .unwrap();
        assert!(output.status.success());
        assert_eq!(parquet_matches(&file), json, "{args:?}");
    }
}

/// A Parquet file of matches as [`query`] reads JSON lines.
fn parquet_matches(file: &Path) -> BTreeMap<(String, u64), (Value, Value)> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Float64Type, Int64Type, UInt64Type, UInt8Type};
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(file).unwrap(),
    )
    .unwrap()
    .build()
    .unwrap();
    let mut out = BTreeMap::new();
    for batch in reader {
        let b = batch.unwrap();
        let queries = column(&b, "query").as_string::<i32>();
        let docs = column(&b, "doc_id").as_primitive::<UInt64Type>();
        let hamming = column(&b, "hamming").as_primitive::<UInt8Type>();
        let jaccard = column(&b, "jaccard").as_primitive::<Float64Type>();
        let exact = column(&b, "jaccard_exact").as_boolean();
        let clusters = column(&b, "cluster_id").as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            let measure = if hamming.is_valid(i) {
                assert!(jaccard.is_null(i) && exact.is_null(i));
                Value::from(hamming.value(i))
            } else {
                jaccard_measure(jaccard.value(i), exact.value(i))
            };
            let cluster = if clusters.is_valid(i) {
                Value::from(clusters.value(i))
            } else {
                Value::Null
            };
            let key = (queries.value(i).to_string(), docs.value(i));
            assert!(out.insert(key, (measure, cluster)).is_none());
        }
    }
    out
}

/// A small corpus run with `args` and `--index`: (the temporary directory, the input, the
/// index).
fn small_index(args: &[&str]) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let (dir, input, index, _) = small_index_run(args);
    (dir, input, index)
}

/// [`small_index`], with the run's output.
fn small_index_run(
    args: &[&str],
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    std::path::PathBuf,
    std::process::Output,
) {
    let dir = tempfile::tempdir().unwrap();
    let input = write(
        &dir.path().join("corpus.jsonl"),
        &jsonl(&corpus(5, 10, "d")),
    );
    let index = dir.path().join("index");
    let mut run = args.to_vec();
    run.extend(["--index", s(&index)]);
    let output = run_ok(&dir.path().join("out"), &run, &[&input]);
    (dir, input, index, output)
}

/// `run --index` leaves a simhash index ready for `neardup serve`: its saved state written,
/// the very bytes the service's first start computes without it, and read, not computed,
/// by a start; `--no-serve-state` leaves it to that start; a MinHash index has none.
#[test]
fn a_run_leaves_its_index_ready_to_serve() {
    let (_dir, _, index, output) = small_index_run(&[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("serve state: "), "{stderr}");
    let state = index.join("serve-state.bin");
    let written = std::fs::read(&state).expect("run --index writes the saved state");
    let modified = std::fs::metadata(&state).unwrap().modified().unwrap();
    drop(common::serve::Server::start(&index, &[]));
    assert_eq!(
        std::fs::metadata(&state).unwrap().modified().unwrap(),
        modified
    );
    std::fs::remove_file(&state).unwrap();
    drop(common::serve::Server::start(&index, &[]));
    assert_eq!(std::fs::read(&state).unwrap(), written);

    let (_dir, _, bare, output) = small_index_run(&["--no-serve-state"]);
    assert!(!String::from_utf8_lossy(&output.stderr).contains("serve state"));
    assert!(!bare.join("serve-state.bin").exists());
    let (_dir, _, minhash) = small_index(&MINHASH);
    assert!(!minhash.join("serve-state.bin").exists());
}

#[test]
fn what_does_not_fit_the_index_is_refused() {
    let (dir, input, index) = small_index(&[]);

    // A larger k than the index's.
    assert_refused(
        neardup().args(["query", "--index", s(&index), "-k", "4", "--text", "a b c"]),
        &["-k 4 is larger than the index's k = 3"],
    );
    // A MinHash index of unverified pairs cannot be made (a query verifies as the run
    // did), nor shingle sets of a simhash index, nor an index over an existing one.
    assert_refused(
        neardup()
            .args(["run", "--scheme", "minhash", "--verify", "none"])
            .args(["--index", s(&dir.path().join("mh"))])
            .args(["--output", s(&dir.path().join("out-mh")), s(&input)]),
        &["--index of a MinHash run needs its candidates verified"],
    );
    assert_refused(
        neardup()
            .args([
                "run",
                "--index-shingles",
                "--index",
                s(&dir.path().join("mh")),
            ])
            .args(["--output", s(&dir.path().join("out-mh")), s(&input)]),
        &["--index-shingles is for MinHash indexes"],
    );
    assert!(
        !dir.path().join("out-mh").exists(),
        "refused before the run"
    );
    assert_refused(
        neardup().args(["run", "--index", s(&index)]).args([
            "--output",
            s(&dir.path().join("out-2")),
            s(&input),
        ]),
        &["an index exists there already"],
    );
    assert!(!dir.path().join("out-2").exists(), "refused before the run");
    // Mirror groups are found within one run: --keep canonical-host does not apply across
    // an index.
    assert_refused(
        neardup()
            .args([
                "run",
                "--against",
                s(&index),
                "--keep",
                "canonical-host:longest",
            ])
            .args([
                "--url-field",
                "id",
                "--output",
                s(&dir.path().join("out-3")),
                s(&input),
            ]),
        &[
            "--keep canonical-host:longest cannot be used with --against",
            "--keep longest",
        ],
    );
    assert!(!dir.path().join("out-3").exists(), "refused before the run");
    // A corrupt table: refused naming the file (and accepted without checksums, whose
    // sizes still agree).
    let table = index.join("gen-00000").join("table-007.bin");
    let bytes = std::fs::read(&table).unwrap();
    let mut damaged = bytes.clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 0x40;
    // The run checked and recorded every file (for `neardup serve`'s first start).
    let record = std::fs::read(index.join("verified.json")).expect("the run's record");
    let sound = neardup()
        .args(["index", "verify", s(&index)])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&sound.stderr);
    assert!(
        sound.status.success() && said.contains("sound: 1 generations"),
        "{said}"
    );
    std::fs::write(&table, &damaged).unwrap();
    assert_refused(
        neardup().args(["query", "--index", s(&index), "--text", "a b c"]),
        &["table-007.bin: damaged index: checksum"],
    );
    assert_refused(
        neardup().args(["index", "verify", s(&index)]),
        &["table-007.bin: damaged index: checksum"],
    );
    assert_eq!(
        std::fs::read(index.join("verified.json")).unwrap(),
        record,
        "index verify writes nothing"
    );
    // A truncated one.
    std::fs::write(&table, &bytes[..bytes.len() / 2]).unwrap();
    assert_refused(
        neardup().args([
            "query",
            "--index",
            s(&index),
            "--no-verify",
            "--text",
            "a b c",
        ]),
        &["table-007.bin: damaged index: truncated"],
    );
    std::fs::write(&table, &bytes).unwrap();
    // A newer format.
    let manifest = index.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("\"format\": 4", "\"format\": 9")).unwrap();
    assert_refused(
        neardup().args(["query", "--index", s(&index), "--text", "a b c"]),
        &["index format 9, but this neardup"],
    );
    std::fs::write(&manifest, &text).unwrap();
    assert!(neardup()
        .args(["query", "--index", s(&index), "--text", "a b c"])
        .output()
        .unwrap()
        .status
        .success());
}

#[test]
fn what_does_not_fit_a_minhash_index_is_refused() {
    let mut args = MINHASH.to_vec();
    args.push("--index-shingles");
    let (dir, input, index) = small_index(&args);
    let against = |extra: &[&str], name: &str| {
        let mut cmd = neardup();
        cmd.args(["run", "--against", s(&index)]).args(extra).args([
            "--output",
            s(&dir.path().join(name)),
            s(&input),
        ]);
        cmd
    };
    // Another scheme, signature length, banding, or a looser threshold.
    let with = |flags: &[&'static str]| -> Vec<&'static str> {
        let mut v = MINHASH.to_vec();
        v.extend_from_slice(flags);
        v
    };
    let mut oph = with(&[]);
    oph[1] = "minhash-oph";
    assert_refused(
        &mut against(&oph, "o1"),
        &["the index holds minhash fingerprints", "minhash-oph"],
    );
    assert_refused(
        &mut against(&with(&["--permutations", "64"]), "o2"),
        &[
            "the index holds minhash fingerprints",
            "\"permutations\":64",
        ],
    );
    let mut banding = with(&[]);
    banding[5] = "8";
    assert_refused(
        &mut against(&banding, "o3"),
        &["the index's LSH banding is 16 bands of 4 rows; this run's is 8 of 4"],
    );
    let mut looser = with(&[]);
    looser[3] = "0.5";
    assert_refused(
        &mut against(&looser, "o4"),
        &["--threshold 0.5 is looser than the index's threshold 0.6"],
    );
    // A stricter one compares, but cannot become a generation of the index.
    let mut stricter = with(&["--update-index"]);
    stricter[3] = "0.7";
    assert_refused(
        &mut against(&stricter, "o5"),
        &["--update-index needs the index's threshold 0.6"],
    );
    assert_refused(
        &mut against(&with(&["--verify", "minhash"]), "o6"),
        &["the index verifies candidates by jaccard"],
    );
    for name in ["o1", "o2", "o3", "o4", "o5", "o6"] {
        assert!(
            !dir.path().join(name).exists(),
            "{name}: refused before the run"
        );
    }
    // A stricter threshold compares the batch at it: the pairs of the index's threshold
    // that reach it.
    let pairs_at = |threshold: &'static str, name: &str| {
        let mut args = with(&["--no-exact"]);
        args[3] = threshold;
        let output = against(&args, name).output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        against_jaccards(&dir.path().join(name))
    };
    let (at_index, at_stricter) = (pairs_at("0.6", "s1"), pairs_at("0.7", "s2"));
    let reaching: BTreeMap<(u64, u64), f32> = at_index
        .iter()
        .filter(|(_, &j)| f64::from(j) >= 0.7)
        .map(|(&p, &j)| (p, j))
        .collect();
    assert!(reaching.len() < at_index.len() && !reaching.is_empty());
    assert_eq!(at_stricter, reaching);
    // Queries: -k, a looser threshold, a fingerprint.
    let ask = |extra: &[&str]| {
        let mut cmd = neardup();
        cmd.args(["query", "--index", s(&index)]).args(extra);
        cmd
    };
    assert_refused(
        &mut ask(&["-k", "2", "--text", "a b c d e f"]),
        &["-k applies to simhash indexes; this is a MinHash index (threshold 0.6)"],
    );
    assert_refused(
        &mut ask(&["--threshold", "0.4", "--text", "a b c d e f"]),
        &["--threshold 0.4 is looser than the index's threshold 0.6"],
    );
    assert_refused(
        &mut ask(&["--fingerprint", "83052266e2554591"]),
        &["--fingerprint asks a simhash index"],
    );
    // Damaged files: each named, with what is wrong.
    for (name, what) in [
        ("signatures.bin", "damaged index: checksum"),
        ("shingles.bin", "damaged index: checksum"),
        ("band-003.bin", "damaged index: checksum"),
    ] {
        let path = index.join("gen-00000").join(name);
        let bytes = std::fs::read(&path).unwrap();
        let mut damaged = bytes.clone();
        damaged[70] ^= 0x10;
        std::fs::write(&path, &damaged).unwrap();
        assert_refused(
            &mut ask(&["--text", "a b c d e f"]),
            &[&format!("{name}: {what}")],
        );
        // Truncated: refused without checksums too.
        std::fs::write(&path, &bytes[..bytes.len() - 8]).unwrap();
        assert_refused(
            &mut ask(&["--no-verify", "--text", "a b c d e f"]),
            &[&format!("{name}: damaged index: truncated")],
        );
        std::fs::write(&path, &bytes).unwrap();
    }
    // Shingle sets whose ends do not rise (sizes and checksum made to agree): refused
    // naming the file and the set.
    let path = index.join("gen-00000").join("shingles.bin");
    let bytes = std::fs::read(&path).unwrap();
    let mut damaged = bytes.clone();
    damaged[64..72].copy_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(&path, &damaged).unwrap();
    assert_refused(
        &mut ask(&["--no-verify", "--text", "a b c d e f"]),
        &["shingles.bin: damaged index: shingle set 0 ends at"],
    );
    std::fs::write(&path, &bytes).unwrap();
    // neardup serve and index bench answer simhash indexes only.
    assert_refused(
        neardup().args(["serve", "--index", s(&index), "--listen", "127.0.0.1:0"]),
        &[
            "cannot serve this index",
            "neardup serve answers simhash indexes",
        ],
    );
    assert_refused(
        neardup().args(["index", "bench", s(&index), "--queries", "10"]),
        &["a MinHash index: neardup index bench measures simhash indexes"],
    );
    assert!(ask(&["--text", "a b c d e f"])
        .output()
        .unwrap()
        .status
        .success());
}

/// `(doc_a, doc_b)` of a Parquet pairs file or table directory.
fn pair_file(path: &Path) -> BTreeSet<(u64, u64)> {
    use arrow::array::AsArray;
    use arrow::datatypes::UInt64Type;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(path).unwrap(),
    )
    .unwrap()
    .build()
    .unwrap();
    let mut out = BTreeSet::new();
    for b in reader {
        let b = b.unwrap();
        let a = column(&b, "doc_a").as_primitive::<UInt64Type>();
        let c = column(&b, "doc_b").as_primitive::<UInt64Type>();
        for i in 0..b.num_rows() {
            out.insert((a.value(i).min(c.value(i)), a.value(i).max(c.value(i))));
        }
    }
    out
}

/// doc_id -> cluster_id of every clustered document the index holds, from a query of
/// every document (each non-empty document matches itself).
fn index_clusters(index: &Path, inputs: &[&Path]) -> BTreeMap<u64, i64> {
    let mut args = vec!["--index", s(index)];
    args.extend(inputs.iter().map(|p| s(p)));
    query(&args)
        .into_iter()
        .filter_map(|((_, doc), (_, cluster))| cluster.as_i64().map(|c| (doc, c)))
        .collect()
}

#[test]
fn a_minhash_oph_index_with_other_verification_shingles_answers_the_pairs_of_its_run() {
    // minhash-oph signatures, verified on word 3-shingles (not the scheme's 5-shingles):
    // a query of every document finds itself and exactly the run's pairs, both ways, with
    // the exact Jaccard the run recorded.
    let docs = corpus(29, 120, "d");
    let mut args = MINHASH.to_vec();
    args[1] = "minhash-oph";
    args.extend(["--verify-shingle", "3", "--no-exact", "--index-shingles"]);
    at_one_and_two_workers(&docs, &args, |input, out, index, workers| {
        let fps = fingerprints(out);
        let non_empty = fps.iter().filter(|f| !f.empty).count();
        let doc_of: BTreeMap<String, u64> =
            fps.into_iter().map(|f| (f.id.unwrap(), f.doc_id)).collect();
        let answer = query(&["--index", s(index), "-w", workers, s(input)]);
        let mut found = BTreeSet::new();
        let mut themselves = 0;
        for ((q, d), (measure, _)) in &answer {
            assert_eq!(measure[1], Value::Bool(true), "exact: {measure}");
            let q = doc_of[q];
            if q == *d {
                themselves += 1;
                assert_eq!(measure[0], "1.000000000");
            } else {
                found.insert((q.min(*d), q.max(*d)));
            }
        }
        assert_eq!(themselves, non_empty, "every non-empty document");
        let expected = near_pairs(out);
        assert!(expected.len() > 50);
        // Each pair is answered from both sides.
        assert_eq!(answer.len(), themselves + 2 * expected.len());
        assert_eq!(found, expected, "{workers} workers");
    });
}

/// `args` as the `&str`s a command line takes.
fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// The incremental oracle: batches B1, B2, B3 added one after the other (`--against
/// --update-index`) give the pairs and clusters of one run over their union, at 1 and 2
/// workers, and compaction changes nothing a query sees. `scheme`: the runs' scheme
/// flags; `index`: flags of the first run's `--index` only. The clusters are connected
/// components (`--cluster components`), which a batch only joins and merges; under stars
/// an indexed document's decision is final (tests/against_cli.rs).
fn batches_give_the_union(scheme: &[&str], index_args: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let docs = corpus(23, 150, "d");
    // Families spread over three batches (file names sort in batch order, so a run over
    // their union numbers the documents as the index does).
    let mut batches = [Vec::new(), Vec::new(), Vec::new()];
    let mut rng = SeededRng::new(4);
    for d in docs {
        batches[rng.below(3) as usize].push(d);
    }
    let files: Vec<_> = batches
        .iter()
        .enumerate()
        .map(|(i, b)| write(&dir.path().join(format!("b{i}.jsonl")), &jsonl(b)))
        .collect();
    let all: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
    for workers in ["1", "2"] {
        let with = |args: &[&str]| -> Vec<String> {
            ["--no-exact", "--cluster", "components", "-w", workers]
                .iter()
                .chain(scheme)
                .chain(args)
                .map(|a| a.to_string())
                .collect()
        };
        let union = dir.path().join(format!("union-{workers}"));
        run_ok(&union, &strs(&with(&[])), &all);
        let expected_pairs = near_pairs(&union);
        let expected_clusters = run_clusters(&union);

        let index = dir.path().join(format!("index-{workers}"));
        let first = dir.path().join(format!("b0-{workers}"));
        let mut args = vec!["--index", s(&index)];
        args.extend_from_slice(index_args);
        run_ok(&first, &strs(&with(&args)), &[&files[0]]);
        let mut found = near_pairs(&first);
        for (i, file) in files.iter().enumerate().skip(1) {
            let out = dir.path().join(format!("b{i}-{workers}"));
            let against = with(&["--against", s(&index), "--update-index"]);
            run_ok(&out, &strs(&against), &[file]);
            found.extend(pair_file(&out.join("against-pairs.parquet")));
        }
        assert!(expected_pairs.len() > 50);
        assert_eq!(found, expected_pairs, "{scheme:?}, {workers} workers");
        assert_eq!(
            index_clusters(&index, &all),
            expected_clusters,
            "{scheme:?}, {workers} workers"
        );

        // Compaction changes nothing a query sees.
        let output = neardup()
            .args(["index", "compact", s(&index)])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(index_files(&index).as_array().unwrap().len(), 1);
        assert_eq!(index_clusters(&index, &all), expected_clusters);
    }
}

#[test]
fn batches_against_the_index_give_the_pairs_and_clusters_of_one_run_over_their_union() {
    batches_give_the_union(&[], &[]);
}

#[test]
fn batches_against_a_minhash_index_give_the_pairs_and_clusters_of_one_run_over_their_union() {
    // Verified by exact Jaccard (the index keeps the shingle sets), and by the estimate.
    batches_give_the_union(&MINHASH, &["--index-shingles"]);
    let mut estimate = MINHASH.to_vec();
    estimate.extend(["--verify", "minhash"]);
    batches_give_the_union(&estimate, &[]);
}

#[test]
fn a_failed_batch_leaves_the_index_as_it_was_and_other_schemes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(&dir.path().join("a.jsonl"), &jsonl(&corpus(8, 10, "a")));
    let index = dir.path().join("index");
    run_ok(&dir.path().join("out"), &["--index", s(&index)], &[&input]);
    let before = snapshot(&index);
    let bad = write(
        &dir.path().join("b.jsonl"),
        b"{\"id\": 1, \"text\": \"fine words\"}\nnot json\n",
    );
    assert_refused(
        neardup()
            .args(["run", "--against", s(&index), "--update-index"])
            .args(["--output", s(&dir.path().join("out-b")), s(&bad)]),
        &["b.jsonl:2"],
    );
    assert_eq!(snapshot(&index), before);
    assert_refused(
        neardup()
            .args(["run", "-k", "4", "--against", s(&index)])
            .args(["--output", s(&dir.path().join("out-c")), s(&input)]),
        &["the index was made with k = 3 (manku16); this run asks for k = 4"],
    );
    assert_refused(
        neardup()
            .args([
                "run",
                "--scheme",
                "simhash-shingles",
                "--against",
                s(&index),
            ])
            .args(["--output", s(&dir.path().join("out-d")), s(&input)]),
        &["the index holds simhash-doc fingerprints"],
    );
    assert_eq!(snapshot(&index), before);
}

#[test]
fn with_exact_folding_batches_still_give_the_clusters_of_one_run() {
    let dir = tempfile::tempdir().unwrap();
    // Exact copies across batches: every family's base text appears in two batches.
    let mut docs = corpus(31, 60, "d");
    let copies: Vec<Doc> = docs
        .iter()
        .step_by(3)
        .map(|d| doc(format!("copy-{}", d.id.as_str().unwrap()), d.text.clone()))
        .collect();
    docs.extend(copies);
    let mut batches = [Vec::new(), Vec::new()];
    let mut rng = SeededRng::new(9);
    for d in docs {
        batches[rng.below(2) as usize].push(d);
    }
    let files: Vec<_> = batches
        .iter()
        .enumerate()
        .map(|(i, b)| write(&dir.path().join(format!("b{i}.jsonl")), &jsonl(b)))
        .collect();
    let all: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
    // Connected components, which batches only join and merge (as above).
    let components = ["--cluster", "components"];
    let union = dir.path().join("union");
    run_ok(&union, &components, &all);
    let expected: BTreeMap<u64, i64> = clusters(&union)
        .iter()
        .filter(|c| c.cluster_id >= 0)
        .map(|c| (c.doc_id, c.cluster_id))
        .collect();
    let index = dir.path().join("index");
    run_ok(
        &dir.path().join("b0"),
        &["--cluster", "components", "--index", s(&index)],
        &[&files[0]],
    );
    run_ok(
        &dir.path().join("b1"),
        &[
            "--cluster",
            "components",
            "--against",
            s(&index),
            "--update-index",
        ],
        &[&files[1]],
    );
    assert!(expected.len() > 40);
    assert_eq!(index_clusters(&index, &all), expected);
}

#[test]
fn a_failed_against_step_leaves_no_success_and_the_index_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(&dir.path().join("a.jsonl"), &jsonl(&corpus(5, 20, "a")));
    let b = write(&dir.path().join("b.jsonl"), &jsonl(&corpus(6, 20, "b")));
    let index = dir.path().join("index");
    run_ok(&dir.path().join("out-a"), &["--index", s(&index)], &[&a]);
    // One damaged byte of a table (its size unchanged): only the against step, which
    // verifies every checksum, can notice; the job itself succeeds.
    let table = index.join("gen-00000").join("table-000.bin");
    let mut bytes = std::fs::read(&table).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x5a;
    std::fs::write(&table, &bytes).unwrap();
    let before = snapshot(&index);
    let out = dir.path().join("out-b");
    let output = neardup()
        .args(["run", "--against", s(&index), "--update-index"])
        .args(["--output", s(&out), s(&b)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("table-000.bin"), "{stderr}");
    assert!(
        !out.join("_SUCCESS").exists(),
        "a run whose against step failed has no _SUCCESS"
    );
    assert_eq!(snapshot(&index), before, "the index is as it was");
}

/// Every record batch of one Parquet file.
fn file_batches(path: &Path) -> Vec<arrow::array::RecordBatch> {
    parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(path).unwrap(),
    )
    .unwrap()
    .build()
    .unwrap()
    .map(|b| b.unwrap())
    .collect()
}

/// `against-clusters.parquet`: doc_id -> (cluster_id, keep).
fn against_clusters(out: &Path) -> BTreeMap<u64, (i64, bool)> {
    use arrow::array::AsArray;
    use arrow::datatypes::{Int64Type, UInt64Type};
    let mut rows = BTreeMap::new();
    for b in file_batches(&out.join("against-clusters.parquet")) {
        let docs = column(&b, "doc_id").as_primitive::<UInt64Type>();
        let ids = column(&b, "cluster_id").as_primitive::<Int64Type>();
        let keep = column(&b, "keep").as_boolean();
        for i in 0..b.num_rows() {
            rows.insert(docs.value(i), (ids.value(i), keep.value(i)));
        }
    }
    rows
}

/// `(doc_a, doc_b) -> jaccard` of an incremental run's `against-pairs.parquet`.
fn against_jaccards(out: &Path) -> BTreeMap<(u64, u64), f32> {
    use arrow::array::AsArray;
    use arrow::datatypes::{Float32Type, UInt64Type};
    let mut rows = BTreeMap::new();
    for b in file_batches(&out.join("against-pairs.parquet")) {
        let a = column(&b, "doc_a").as_primitive::<UInt64Type>();
        let c = column(&b, "doc_b").as_primitive::<UInt64Type>();
        let j = column(&b, "jaccard").as_primitive::<Float32Type>();
        for i in 0..b.num_rows() {
            rows.insert((a.value(i), c.value(i)), j.value(i));
        }
    }
    rows
}

/// `against-pairs.parquet`: (doc_a, doc_b) -> kind.
fn against_pairs(out: &Path) -> BTreeMap<(u64, u64), String> {
    use arrow::array::AsArray;
    use arrow::datatypes::UInt64Type;
    let mut rows = BTreeMap::new();
    for b in file_batches(&out.join("against-pairs.parquet")) {
        let a = column(&b, "doc_a").as_primitive::<UInt64Type>();
        let c = column(&b, "doc_b").as_primitive::<UInt64Type>();
        let kind = column(&b, "kind").as_string::<i32>();
        for i in 0..b.num_rows() {
            rows.insert((a.value(i), c.value(i)), kind.value(i).to_string());
        }
    }
    rows
}

#[test]
fn every_keep_policy_works_against_an_index_as_in_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let docs = corpus(41, 90, "d");
    let mut batches = [Vec::new(), Vec::new()];
    let mut rng = SeededRng::new(13);
    for d in docs {
        batches[rng.below(2) as usize].push(d);
    }
    let files: Vec<_> = batches
        .iter()
        .enumerate()
        .map(|(i, b)| write(&dir.path().join(format!("b{i}.jsonl")), &jsonl(b)))
        .collect();
    let all: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
    for policy in ["longest", "shortest"] {
        let keep = ["--no-exact", "--keep", policy];
        let union = dir.path().join(format!("union-{policy}"));
        // Connected components: a batch against the index gives those of one run
        // (docs/index.md).
        let mut one_run = keep.to_vec();
        one_run.extend(["--cluster", "components"]);
        run_ok(&union, &one_run, &all);
        let expected: BTreeMap<u64, (i64, bool)> = clusters(&union)
            .iter()
            .filter(|c| c.cluster_id >= 0)
            .map(|c| (c.doc_id, (c.cluster_id, c.keep)))
            .collect();
        // The index made with the same policy (ranks stored), and with none (ranks made
        // from the stored bytes): the batch's clusters are those of one run, kept
        // documents included.
        for (name, index_keep) in [("same", policy), ("first", "first")] {
            let index = dir.path().join(format!("index-{policy}-{name}"));
            run_ok(
                &dir.path().join(format!("b0-{policy}-{name}")),
                &["--no-exact", "--keep", index_keep, "--index", s(&index)],
                &[&files[0]],
            );
            let out = dir.path().join(format!("b1-{policy}-{name}"));
            let mut args = keep.to_vec();
            args.extend(["--cluster", "components", "--against", s(&index)]);
            run_ok(&out, &args, &[&files[1]]);
            let found = against_clusters(&out);
            assert!(found.len() > 30, "{}", found.len());
            let wanted: BTreeMap<u64, (i64, bool)> = expected
                .iter()
                .filter(|(_, (c, _))| found.values().any(|f| f.0 == *c))
                .map(|(&d, &v)| (d, v))
                .collect();
            assert_eq!(
                found, wanted,
                "--keep {policy}, index made with {index_keep}"
            );
            // Some kept document is a new one (the policy ranked it before indexed ones).
            let new = 1u64 << 40;
            assert!(
                found
                    .iter()
                    .any(|(&d, &(c, keep))| keep && d >= new && (c as u64) < new),
                "--keep {policy}: no cluster kept a new document over an indexed one"
            );
        }
    }
    // Without --keep an indexed document is kept wherever its cluster has one, under
    // components and under the default stars.
    let index = dir.path().join("index-default");
    run_ok(
        &dir.path().join("b0-default"),
        &["--no-exact", "--keep", "longest", "--index", s(&index)],
        &[&files[0]],
    );
    for cluster in ["components", "verified"] {
        let out = dir.path().join(format!("b1-default-{cluster}"));
        let args = ["--no-exact", "--cluster", cluster, "--against", s(&index)];
        run_ok(&out, &args, &[&files[1]]);
        let found = against_clusters(&out);
        assert!(found.len() > 30, "{cluster}: {}", found.len());
        let mut by_cluster: BTreeMap<i64, Vec<(u64, bool)>> = BTreeMap::new();
        for (&d, &(c, keep)) in &found {
            by_cluster.entry(c).or_default().push((d, keep));
        }
        for members in by_cluster.values() {
            let kept: Vec<u64> = members.iter().filter(|m| m.1).map(|m| m.0).collect();
            assert_eq!(kept.len(), 1, "{cluster}");
            if members.iter().any(|m| m.0 < 1 << 40) {
                assert!(kept[0] < 1 << 40, "a new document kept over an indexed one");
            }
        }
    }
}

#[test]
fn pairs_with_indexed_documents_of_the_same_content_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let first = corpus(51, 40, "a");
    // The second batch: exact copies of some of the first's documents, near copies (a word
    // changed) of others, and new families.
    let mut rng = SeededRng::new(3);
    let mut second: Vec<Doc> = Vec::new();
    for (i, d) in first.iter().enumerate().filter(|(_, d)| d.text.len() > 20) {
        match i % 3 {
            0 => second.push(doc(format!("copy-{i}"), d.text.clone())),
            1 => {
                let mut words: Vec<&str> = d.text.split(' ').collect();
                let w = rng.word();
                words[3] = &w;
                second.push(doc(format!("near-{i}"), words.join(" ")));
            }
            _ => {}
        }
    }
    second.extend(corpus(52, 10, "b"));
    let a = write(&dir.path().join("a.jsonl"), &jsonl(&first));
    let b = write(&dir.path().join("b.jsonl"), &jsonl(&second));
    let index = dir.path().join("index");
    let out_a = dir.path().join("out-a");
    run_ok(&out_a, &["--index", s(&index)], &[&a]);
    let out_b = dir.path().join("out-b");
    run_ok(&out_b, &["--against", s(&index)], &[&b]);
    // doc number (the index's) -> text.
    let text_of = |out: &Path, docs: &[Doc], shift: u64| -> BTreeMap<u64, String> {
        let by_id: BTreeMap<String, String> = docs
            .iter()
            .map(|d| (d.id.as_str().unwrap().to_string(), d.text.clone()))
            .collect();
        fingerprints(out)
            .iter()
            .map(|f| (f.doc_id + shift, by_id[f.id.as_ref().unwrap()].clone()))
            .collect()
    };
    let mut texts = text_of(&out_a, &first, 0);
    texts.extend(text_of(&out_b, &second, 1 << 40));
    let (mut exact, mut near) = (0, 0);
    for ((a, b), kind) in against_pairs(&out_b) {
        if a >= 1 << 40 {
            continue; // a pair of the batch's own
        }
        let same = texts[&a] == texts[&b];
        assert_eq!(kind, if same { "exact" } else { "near" }, "{a} {b}");
        if same {
            exact += 1;
        } else {
            near += 1;
        }
    }
    assert!(exact >= 5 && near >= 5, "exact {exact}, near {near}");
}

/// The test hook that kills a run (SIGKILL) when it reaches a phase
/// (`neardup_dataflow::stages::fingerprint::resume::KILL_AT`): `index`, its index
/// generation committed; `success`, its `_SUCCESS` written.
const KILL_AT: &str = "NEARDUP_TEST_KILL_AT";

/// `neardup run ARGS --output OUT INPUTS` killed by the hook at `phase`.
fn killed_at(phase: &str, out: &Path, args: &[&str], inputs: &[&Path]) {
    use std::os::unix::process::ExitStatusExt;
    let output = neardup()
        .arg("run")
        .args(args)
        .args(["--output", s(out)])
        .args(inputs.iter().map(|p| s(p)))
        .env(KILL_AT, phase)
        .output()
        .unwrap();
    assert_eq!(
        output.status.signal(),
        Some(9),
        "the hook kills the run at {phase} ({:?}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Two batches, `a` then `b`, and a clean index of them (`--index`, then `--against
/// --update-index`) with the second run's output: the oracle of the tests below.
fn two_batches(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let a = write(&dir.join("a.jsonl"), &jsonl(&corpus(61, 60, "a")));
    let b = write(&dir.join("b.jsonl"), &jsonl(&corpus(62, 60, "b")));
    let clean = dir.join("clean-index");
    run_ok(&dir.join("clean-a"), &["--index", s(&clean)], &[&a]);
    let against = ["--against", s(&clean), "--update-index"];
    run_ok(&dir.join("clean-b"), &against, &[&b]);
    assert_eq!(index_files(&clean).as_array().unwrap().len(), 2);
    (a, b, clean)
}

#[test]
fn a_run_killed_once_its_success_is_written_has_its_index_generation() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, clean) = two_batches(dir.path());
    let index = dir.path().join("index");
    let (out_a, out_b) = (dir.path().join("out-a"), dir.path().join("out-b"));
    killed_at("success", &out_a, &["--index", s(&index)], &[&a]);
    assert!(out_a.join("_SUCCESS").is_file());
    let against = ["--against", s(&index), "--update-index"];
    killed_at("success", &out_b, &against, &[&b]);
    assert!(out_b.join("_SUCCESS").is_file());
    // A run with _SUCCESS has its generation: the index is the clean one.
    assert_eq!(index_files(&index), index_files(&clean));
    assert_eq!(
        against_pairs(&out_b),
        against_pairs(&dir.path().join("clean-b"))
    );
}

#[test]
fn a_run_killed_once_its_index_generation_is_committed_completes_without_adding_it_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, clean) = two_batches(dir.path());
    let clean_b = dir.path().join("clean-b");
    let index = dir.path().join("index");
    let (out_a, out_b) = (dir.path().join("out-a"), dir.path().join("out-b"));
    // --index: killed before _SUCCESS, the index written; resumed, it is not written again.
    killed_at("index", &out_a, &["--index", s(&index)], &[&a]);
    assert!(!out_a.join("_SUCCESS").exists());
    assert_eq!(index_files(&index).as_array().unwrap().len(), 1);
    let output = run_ok(&out_a, &["--index", s(&index), "--resume"], &[&a]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("already holds this batch"), "{stderr}");
    assert_eq!(index_files(&index).as_array().unwrap().len(), 1);
    // --against --update-index: the same; the batch is compared with the index as it was
    // before its generation, so the against-* files are those of the clean run.
    let against = ["--against", s(&index), "--update-index"];
    killed_at("index", &out_b, &against, &[&b]);
    assert!(!out_b.join("_SUCCESS").exists());
    assert_eq!(index_files(&index).as_array().unwrap().len(), 2);
    let resume = ["--against", s(&index), "--update-index", "--resume"];
    let output = run_ok(&out_b, &resume, &[&b]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("already holds this batch") && !stderr.contains("added to the index"),
        "{stderr}"
    );
    assert_eq!(index_files(&index), index_files(&clean));
    assert_eq!(against_pairs(&out_b), against_pairs(&clean_b));
    assert_eq!(against_clusters(&out_b), against_clusters(&clean_b));
    // Run again from the start, into another directory: still not added twice.
    let again = dir.path().join("again-b");
    run_ok(&again, &against, &[&b]);
    assert_eq!(index_files(&index), index_files(&clean));
    assert_eq!(against_pairs(&again), against_pairs(&clean_b));
}

#[test]
fn a_search_killed_once_its_success_is_written_has_its_index_generation() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let docs = write(&dir.path().join("a.jsonl"), &jsonl(&corpus(63, 60, "a")));
    let run = dir.path().join("run");
    run_ok(&run, &[], &[&docs]);
    let tables: Vec<String> = std::fs::read_dir(run.join("fingerprints"))
        .unwrap()
        .map(|e| e.unwrap().path().to_string_lossy().into_owned())
        .filter(|p| p.ends_with(".parquet"))
        .collect();
    let search = |out: &Path, index: &Path, kill: Option<&str>| {
        let mut cmd = neardup();
        cmd.args(["search", "-q", "--index", s(index), "--output", s(out)])
            .args(&tables);
        if let Some(phase) = kill {
            cmd.env(KILL_AT, phase);
        }
        cmd.output().unwrap()
    };
    let clean = dir.path().join("clean-index");
    let output = search(&dir.path().join("clean"), &clean, None);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(index_files(&clean).as_array().unwrap().len(), 1);
    // Killed right after `_SUCCESS`: the generation was written before it.
    let (out, index) = (dir.path().join("out"), dir.path().join("index"));
    let output = search(&out, &index, Some("success"));
    assert_eq!(output.status.signal(), Some(9), "{output:?}");
    assert!(out.join("_SUCCESS").is_file());
    assert_eq!(index_files(&index), index_files(&clean));
}

/// A small tmpfs mounted at a directory for as long as it lives (root only).
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs", s(at)])
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        status.success().then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn an_index_that_cannot_be_written_fails_the_run_which_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(&dir.path().join("a.jsonl"), &jsonl(&corpus(63, 300, "a")));
    let index = dir.path().join("index");
    // The index on a full disk: room for its lock, not for a generation.
    let Some(full) = Tmpfs::mount(&index, "64k") else {
        eprintln!("skipped: cannot mount a tmpfs (needs root) to fill a disk");
        return;
    };
    let out = dir.path().join("out");
    let mut cmd = neardup();
    cmd.args(["run", "--index", s(&index), "--output", s(&out), s(&a)]);
    let stderr = assert_fails(&mut cmd, &out, &["--index", "No space left on device"]);
    assert!(stderr.contains(s(&index)), "{stderr}");
    let errors = summary(&out)["errors"].clone();
    assert!(
        errors.to_string().contains("No space left on device"),
        "{errors}"
    );
    assert!(!index.join("manifest.json").exists());
    // Room again: the failed run resumes, and the index gets its generation.
    drop(full);
    let output = run_ok(&out, &["--index", s(&index), "--resume"], &[&a]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("reusing the fingerprints"), "{stderr}");
    let generations = index_files(&index);
    assert_eq!(generations.as_array().unwrap().len(), 1);
    assert_eq!(
        generations[0]["documents"],
        summary(&out)["counts"]["documents"]
    );
}

/// Issue 39, cases 5 and 7: a manifest whose generation `dir` leads out of the index, or
/// from which a generation's entry was taken, is refused by `query`, `run --against` and
/// `index compact`, naming the manifest and the entry; nothing is removed, inside the
/// index or out of it.
#[test]
fn manifest_entries_leading_out_or_missing_are_refused_and_nothing_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(&dir.path().join("a.jsonl"), &jsonl(&corpus(8, 10, "a")));
    let b = write(&dir.path().join("b.jsonl"), &jsonl(&corpus(9, 10, "b")));
    let index = dir.path().join("index");
    run_ok(&dir.path().join("out-a"), &["--index", s(&index)], &[&a]);
    run_ok(
        &dir.path().join("out-b"),
        &["--against", s(&index), "--update-index"],
        &[&b],
    );
    let manifest = index.join("manifest.json");
    let original = std::fs::read_to_string(&manifest).unwrap();
    let edit = |edit: &dyn Fn(&mut Value)| {
        let mut value: Value = serde_json::from_str(&original).unwrap();
        edit(&mut value);
        std::fs::write(&manifest, value.to_string()).unwrap();
    };
    let refused_everywhere = |needles: &[&str]| {
        assert_refused(
            neardup().args(["query", "--index", s(&index), "--text", "a b c"]),
            needles,
        );
        assert_refused(
            neardup().args(["run", "--against", s(&index)]).args([
                "--output",
                s(&dir.path().join("out-c")),
                s(&a),
            ]),
            needles,
        );
        assert_refused(neardup().args(["index", "compact", s(&index)]), needles);
    };
    // Case 5: the second generation's dir moved out of the index, with a file of the
    // user's beside it.
    let decoy = dir.path().join("decoy");
    std::fs::create_dir(&decoy).unwrap();
    std::fs::rename(index.join("gen-00001"), decoy.join("gen-00001")).unwrap();
    std::fs::write(decoy.join("gen-00001").join("mine.txt"), "keep").unwrap();
    let absolute = decoy.join("gen-00001").display().to_string();
    for outside in ["../decoy/gen-00001", absolute.as_str()] {
        edit(&|m| m["generations"][1]["dir"] = Value::from(outside));
        let entry = format!("generation entry 1 (number 1, dir {outside:?})");
        refused_everywhere(&["manifest.json: damaged index", &entry, "a plain name"]);
        assert!(decoy.join("gen-00001").join("mine.txt").exists());
        assert!(decoy.join("gen-00001").join("docs.bin").exists());
    }
    std::fs::rename(decoy.join("gen-00001"), index.join("gen-00001")).unwrap();
    std::fs::remove_file(index.join("gen-00001").join("mine.txt")).unwrap();
    // Case 7: the second generation's entry taken out.
    edit(&|m| {
        m["generations"].as_array_mut().unwrap().remove(1);
    });
    refused_everywhere(&[
        "manifest.json: damaged index: the generations hold 1 files, the manifest's total is 2 (an entry is missing or damaged)",
    ]);
    assert!(index.join("gen-00001").join("docs.bin").exists());
    std::fs::write(&manifest, &original).unwrap();
    assert!(neardup()
        .args(["query", "--index", s(&index), "--text", "a b c"])
        .output()
        .unwrap()
        .status
        .success());
}
