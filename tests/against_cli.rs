//! `neardup run --against` under stars (`--cluster verified`, the default, and `star`)
//! against a from-scratch oracle: a batch of chains of near-duplicates, half of each chain
//! indexed, is deduplicated against the index, and every removed new document is checked
//! with its kept one from the two texts alone (simhash: the Hamming distance within k;
//! MinHash: a band in common and the exact Jaccard similarity at or above the threshold),
//! that kept one must be kept (by its own run, or by the batch), and a new document with
//! such a pair with a kept indexed document must be removed for the best of them.
//! Connected components (`--cluster components`) of the same batch remove documents unlike
//! their kept one (the corpus chains), and `--update-index` records what was decided.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use neardup_core::minhash::Banding;
use neardup_core::similarity::jaccard;
use neardup_core::testing::SeededRng;
use neardup_core::{hamming, Fingerprinter, Scheme};
use neardup_io::index::{Index, Verify};

/// The batch's doc numbers in the index (one file indexed before it).
const SHIFT: u64 = 1 << 40;

/// The MinHash runs: 8 bands of 4 rows (a pair of Jaccard 0.67 shares a band with
/// probability 0.83: some pairs above the threshold are no pairs of the search, nor of the
/// oracle's probe of the index), verified at 0.6 by exact Jaccard (the index keeps the
/// shingle sets).
const MINHASH: [&str; 8] = [
    "--scheme",
    "minhash",
    "--threshold",
    "0.6",
    "--bands",
    "8",
    "--rows",
    "4",
];
const THRESHOLD: f64 = 0.6;
const BANDING: Banding = Banding { bands: 8, rows: 4 };
/// The simhash runs' k (the default).
const K: u32 = 3;

/// Two batches of chains: each chain 6 texts of 80 words, each the one before with 2 words
/// substituted, so that neighbours are pairs and texts further apart mostly not (components
/// chain them). Each text goes to one batch at random; the second batch also has exact
/// copies of some texts of the first, and each an empty document. The second batch has
/// chains of 10 of its own too, each text with 1 or 2 words substituted, whose texts two
/// apart are often near duplicates (the bands miss some of those).
fn chains(seed: u64) -> (Vec<Doc>, Vec<Doc>) {
    let mut rng = SeededRng::new(seed);
    let (mut first, mut second) = (Vec::new(), Vec::new());
    for family in 0..72 {
        let mut words = rng.words(80);
        let (length, own) = if family < 60 { (6, false) } else { (10, true) };
        for step in 0..length {
            let text = words.join(" ");
            let id = format!("c{family}-{step}");
            if own || rng.below(2) == 1 {
                second.push(doc(id, text));
            } else {
                if rng.below(5) == 0 {
                    second.push(doc(format!("copy-{id}"), text.clone()));
                }
                first.push(doc(id, text));
            }
            let substitutions = if own { 1 + rng.below(2) } else { 2 };
            for _ in 0..substitutions {
                let at = rng.below(80) as usize;
                words[at] = rng.word();
            }
        }
    }
    first.push(doc("a-empty", "123 456"));
    second.push(doc("b-empty", "789"));
    (first, second)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Simhash,
    MinHash,
}

/// What the oracle needs of a text, computed here from it alone.
struct Sketch {
    simhash: u64,
    bands: Vec<u64>,
    shingles: Vec<u64>,
    empty: bool,
}

fn sketch(mode: Mode, text: &str) -> Sketch {
    match mode {
        Mode::Simhash => {
            let fp = Fingerprinter::new(Scheme::simhash_doc()).fingerprint(text);
            Sketch {
                simhash: fp.simhash,
                bands: Vec::new(),
                shingles: Vec::new(),
                empty: fp.is_empty(),
            }
        }
        Mode::MinHash => {
            let mut fingerprinter = Fingerprinter::new(Scheme::minhash());
            let empty = fingerprinter.fingerprint(text).is_empty();
            let mut shingles = fingerprinter.feature_set().to_vec();
            shingles.sort_unstable();
            Sketch {
                simhash: 0,
                bands: BANDING.band_keys(fingerprinter.signature()).collect(),
                shingles,
                empty,
            }
        }
    }
}

/// The verified pair of two texts, if they are one: the Hamming distance within k, or the
/// Jaccard similarity at or above the threshold.
fn verified(mode: Mode, a: &Sketch, b: &Sketch) -> Option<(u32, f64)> {
    pair(mode, a, b).or_else(|| {
        let j = jaccard(&a.shingles, &b.shingles);
        (mode == Mode::MinHash && !a.empty && !b.empty && j >= THRESHOLD).then_some((0, j))
    })
}

/// A pair the search finds: a verified pair, in MinHash mode with a band in common.
fn pair(mode: Mode, a: &Sketch, b: &Sketch) -> Option<(u32, f64)> {
    if a.empty || b.empty {
        return None;
    }
    match mode {
        Mode::Simhash => {
            let h = hamming(a.simhash, b.simhash);
            (h <= K).then_some((h, 0.0))
        }
        Mode::MinHash => {
            let collide = a.bands.iter().zip(&b.bands).any(|(x, y)| x == y);
            let j = jaccard(&a.shingles, &b.shingles);
            (collide && j >= THRESHOLD).then_some((0, j))
        }
    }
}

/// A row of `against-clusters.parquet`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Row {
    cluster: i64,
    size: u32,
    keep: bool,
    kept: u64,
    hamming: Option<u8>,
    jaccard: Option<f32>,
}

fn against_rows(out: &Path) -> BTreeMap<u64, Row> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Float32Type, Int64Type, UInt32Type, UInt64Type, UInt8Type};
    let file = std::fs::File::open(out.join("against-clusters.parquet")).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let mut rows = BTreeMap::new();
    for b in reader.map(|b| b.unwrap()) {
        let docs = column(&b, "doc_id").as_primitive::<UInt64Type>();
        let clusters = column(&b, "cluster_id").as_primitive::<Int64Type>();
        let sizes = column(&b, "cluster_size").as_primitive::<UInt32Type>();
        let keep = column(&b, "keep").as_boolean();
        let kept = column(&b, "kept_doc_id").as_primitive::<UInt64Type>();
        let h = column(&b, "hamming").as_primitive::<UInt8Type>();
        let j = column(&b, "jaccard").as_primitive::<Float32Type>();
        for i in 0..b.num_rows() {
            let row = Row {
                cluster: clusters.value(i),
                size: sizes.value(i),
                keep: keep.value(i),
                kept: kept.value(i),
                hamming: h.is_valid(i).then(|| h.value(i)),
                jaccard: j.is_valid(i).then(|| j.value(i)),
            };
            assert!(rows.insert(docs.value(i), row).is_none(), "a row twice");
        }
    }
    rows
}

/// doc number (the index's) -> the text's sketch, for a run over `docs` numbered from
/// `shift`.
fn sketches(mode: Mode, out: &Path, docs: &[Doc], shift: u64) -> BTreeMap<u64, Sketch> {
    let by_id: BTreeMap<&str, &str> = docs
        .iter()
        .map(|d| (d.id.as_str().unwrap(), d.text.as_str()))
        .collect();
    fingerprints(out)
        .iter()
        .map(|f| {
            let text = by_id[f.id.as_deref().unwrap()];
            (f.doc_id + shift, sketch(mode, text))
        })
        .collect()
}

/// The runs of one mode: the index of the first batch, and the second against it.
struct Setup {
    dir: tempfile::TempDir,
    index: std::path::PathBuf,
    second: std::path::PathBuf,
    args: Vec<&'static str>,
    /// doc number -> sketch, of both batches.
    sketches: BTreeMap<u64, Sketch>,
    /// The indexed documents' decisions (their run's `clusters/`), and their clusters.
    indexed: BTreeMap<u64, (bool, Option<i64>)>,
}

fn setup(mode: Mode) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = chains(17);
    let first = write(&dir.path().join("a.jsonl"), &jsonl(&a));
    let second = write(&dir.path().join("b.jsonl"), &jsonl(&b));
    let index = dir.path().join("index");
    let mut args: Vec<&'static str> = Vec::new();
    if mode == Mode::MinHash {
        args.extend(MINHASH);
    }
    let out_a = dir.path().join("out-a");
    let mut index_args = args.clone();
    index_args.extend(["--index", s(&index)]);
    if mode == Mode::MinHash {
        index_args.push("--index-shingles");
    }
    run_ok(&out_a, &index_args, &[&first]);
    let indexed = clusters(&out_a)
        .iter()
        .map(|c| {
            (
                c.doc_id,
                (c.keep, (c.cluster_id >= 0).then_some(c.cluster_id)),
            )
        })
        .collect();
    let mut all = sketches(mode, &out_a, &a, 0);
    // The second batch's numbers, as a run of it alone gives them: read from a run.
    let probe = dir.path().join("numbers-b");
    run_ok(&probe, &args, &[&second]);
    all.extend(sketches(mode, &probe, &b, SHIFT));
    Setup {
        dir,
        index,
        second,
        args,
        sketches: all,
        indexed,
    }
}

impl Setup {
    /// The second batch run `--against` the index with `extra`, at `workers`.
    fn against(&self, name: &str, extra: &[&str], workers: &str) -> BTreeMap<u64, Row> {
        let out = self.dir.path().join(name);
        let mut args = self.args.clone();
        args.extend(["-w", workers, "--against", s(&self.index)]);
        args.extend_from_slice(extra);
        run_ok(&out, &args, &[&self.second]);
        against_rows(&out)
    }

    fn kept_indexed(&self, doc: u64) -> bool {
        self.indexed[&doc].0
    }
}

/// Counts of what a rule removed, for the assertions that the corpus exercises it.
#[derive(Debug, Default)]
struct Removed {
    for_indexed: usize,
    for_new: usize,
    /// Of those, removed for a pair the bands missed, which the clustering verified.
    unlinked: usize,
    unlike_kept: usize,
    /// New documents with pairs with indexed documents, all of them removed ones.
    only_removed: usize,
}

/// Every removed new document is a verified pair of its kept document (in MinHash mode a
/// pair the bands found, or one they missed that the clustering verified), with the similarity
/// `against-clusters.parquet` gives; the kept one is kept; a new document with a pair with a
/// kept indexed document is removed for the best of them (the highest Jaccard, the smallest
/// Hamming distance, then the smaller doc number: the policy is `first`); the indexed
/// documents' rows say what their run decided.
fn check_stars(mode: Mode, setup: &Setup, rows: &BTreeMap<u64, Row>) -> Removed {
    let sk = &setup.sketches;
    let mut removed = Removed::default();
    for (&n, new) in sk.range(SHIFT..) {
        let best = sk
            .range(..SHIFT)
            .filter(|(&d, _)| setup.kept_indexed(d))
            .filter_map(|(&d, old)| pair(mode, new, old).map(|(h, j)| (d, h, j)))
            .min_by_key(|&(d, h, j)| (std::cmp::Reverse((j as f32).to_bits()), h, d));
        let row = rows.get(&n);
        let duplicates_indexed = sk
            .range(..SHIFT)
            .any(|(_, old)| pair(mode, new, old).is_some());
        if best.is_none() && duplicates_indexed {
            removed.only_removed += 1;
        }
        if let Some((d, h, j)) = best {
            let row = row.unwrap_or_else(|| panic!("{n} has a kept indexed duplicate {d}"));
            assert!(!row.keep && row.kept == d, "{n}: {row:?}, best {d}");
            match mode {
                Mode::Simhash => assert_eq!(row.hamming, Some(h as u8), "{n}"),
                Mode::MinHash => assert_eq!(row.jaccard, Some(j as f32), "{n}"),
            }
        } else if let Some(row) = row {
            assert!(
                row.keep || row.kept >= SHIFT,
                "{n} removed for {}",
                row.kept
            );
        }
        let Some(row) = row.filter(|r| !r.keep) else {
            continue;
        };
        let kept = row.kept;
        // Between new documents, under --cluster verified, also a pair the bands missed
        // that the clustering verified.
        let (h, j) = verified(mode, new, &sk[&kept])
            .unwrap_or_else(|| panic!("{n} removed for {kept}, which it does not duplicate"));
        match mode {
            Mode::Simhash => assert_eq!(row.hamming, Some(h as u8), "{n}"),
            Mode::MinHash => assert_eq!(row.jaccard, Some(j as f32), "{n}"),
        }
        if pair(mode, new, &sk[&kept]).is_none() {
            assert!(
                kept >= SHIFT,
                "{n}: the probe of the index finds no such pair"
            );
            removed.unlinked += 1;
        }
        if kept < SHIFT {
            assert!(
                setup.kept_indexed(kept),
                "{n} removed for {kept}, removed by its run"
            );
            removed.for_indexed += 1;
        } else {
            let k = rows[&kept];
            assert!(k.keep && k.kept == kept, "{n} removed for {kept}: {k:?}");
            removed.for_new += 1;
        }
        assert_eq!(rows[&kept].cluster, row.cluster, "{n} and {kept}");
    }
    for (&d, row) in rows.range(..SHIFT) {
        assert_eq!(row.keep, setup.kept_indexed(d), "indexed {d}");
    }
    let mut sizes: BTreeMap<i64, u32> = BTreeMap::new();
    for row in rows.values() {
        *sizes.entry(row.cluster).or_default() += 1;
    }
    for (d, row) in rows {
        assert_eq!(row.size, sizes[&row.cluster], "{d}");
    }
    removed
}

/// What components remove of the new documents, and how many of those are no pair of their
/// kept document.
fn components_removed(mode: Mode, setup: &Setup, rows: &BTreeMap<u64, Row>) -> Removed {
    let mut removed = Removed::default();
    for (&n, row) in rows.range(SHIFT..).filter(|(_, r)| !r.keep) {
        if row.kept < SHIFT {
            removed.for_indexed += 1;
        } else {
            removed.for_new += 1;
        }
        let sk = &setup.sketches;
        if verified(mode, &sk[&n], &sk[&row.kept]).is_none() {
            removed.unlike_kept += 1;
        }
    }
    removed
}

fn stars_against_the_oracle(mode: Mode) {
    let setup = setup(mode);
    for (cluster, extra) in [("verified", &[][..]), ("star", &["--cluster", "star"][..])] {
        let rows = setup.against(&format!("{cluster}-1"), extra, "1");
        // The same at any number of workers.
        assert_eq!(rows, setup.against(&format!("{cluster}-2"), extra, "2"));
        let removed = check_stars(mode, &setup, &rows);
        eprintln!("{mode:?} --cluster {cluster}: {removed:?}");
        // Under --cluster verified in MinHash mode, some new documents are removed for a
        // pair the bands missed (as in a run); never otherwise.
        let probes = mode == Mode::MinHash && cluster == "verified";
        assert_eq!(
            removed.unlinked > 0,
            probes,
            "{mode:?} {cluster}: {removed:?}"
        );
        assert!(
            removed.for_indexed >= 20 && removed.for_new >= 3 && removed.only_removed >= 1,
            "{mode:?} {cluster}: {removed:?}"
        );
    }
    // Components chain: some new documents they remove are unlike their kept one.
    let components = setup.against("components", &["--cluster", "components"], "1");
    let chained = components_removed(mode, &setup, &components);
    assert!(chained.unlike_kept > 0, "{mode:?}: {chained:?}");

    // --update-index records the clusters and decisions of against-clusters.parquet.
    let rows = setup.against("update", &["--update-index"], "1");
    assert_eq!(rows, setup.against("verified-again", &[], "1"));
    let index = Index::open(&setup.index, Verify::Checksums).unwrap();
    let mut new = 0;
    for view in index.docs() {
        let d = view.doc_id;
        let row = rows.get(&d);
        let cluster = row.map(|r| r.cluster);
        if d >= SHIFT {
            new += 1;
            assert_eq!(view.kept, Some(row.is_none_or(|r| r.keep)), "{d}");
            assert_eq!(view.cluster_id, cluster, "{d}");
        } else {
            let (kept, before) = setup.indexed[&d];
            assert_eq!(view.kept, Some(kept), "{d}");
            assert_eq!(view.cluster_id, cluster.or(before), "{d}");
        }
    }
    assert_eq!(new, setup.sketches.range(SHIFT..).count());
}

#[test]
fn against_a_simhash_index_removes_only_duplicates_of_kept_documents() {
    stars_against_the_oracle(Mode::Simhash);
}

#[test]
fn against_a_minhash_index_removes_only_duplicates_of_kept_documents() {
    stars_against_the_oracle(Mode::MinHash);
}

/// An index that does not record which of its documents are kept (here a manifest an older
/// neardup rewrote, which drops `keep_decisions`) is refused under stars, before the job,
/// naming the generation; `--cluster components` runs against it as before.
#[test]
fn stars_are_refused_against_an_index_without_keep_decisions() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = chains(5);
    let first = write(&dir.path().join("a.jsonl"), &jsonl(&a));
    let second = write(&dir.path().join("b.jsonl"), &jsonl(&b));
    let index = dir.path().join("index");
    run_ok(
        &dir.path().join("out-a"),
        &["--index", s(&index)],
        &[&first],
    );
    let manifest = index.join("manifest.json");
    let mut value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    let entry = value["generations"][0].as_object_mut().unwrap();
    assert_eq!(entry.remove("keep_decisions"), Some(true.into()));
    std::fs::write(&manifest, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    for extra in [&[][..], &["--cluster", "star"][..]] {
        let out = dir.path().join("refused");
        assert_refused(
            neardup()
                .args(["run", "--against", s(&index)])
                .args(extra)
                .args(["--output", s(&out), s(&second)]),
            &[
                "its generation gen-00000 does not record which of its documents were kept",
                "run with --cluster components",
            ],
        );
        assert!(!out.join("_SUCCESS").exists());
    }
    let out = dir.path().join("components");
    run_ok(
        &out,
        &["--against", s(&index), "--cluster", "components"],
        &[&second],
    );
    assert!(!against_rows(&out).is_empty());
}
