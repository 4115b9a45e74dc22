//! End-to-end tests of `neardup run` and `neardup search`: the binary runs on corpora
//! generated here, and its Parquet outputs, summary.json, stderr and exit code are checked
//! against expectations computed independently in this file:
//!
//! * exact duplicates from our own (ASCII) normalization: tokens are runs of `[A-Za-z0-9_]`,
//!   lower-cased, joined by one space; a document is empty when no token has a letter;
//! * near pairs by brute force over every pair of fingerprints (popcount of the XOR), so the
//!   permutation tables, the bucket search and the exchange between workers are all checked
//!   against the definition; documents with one simhash listed as pairs/ lists them (each
//!   paired with the smallest of them only);
//! * clusters with our own union-find over the whole graph (every pair within k, not only
//!   the pairs listed), labelled with their smallest doc_id, and the kept document from the
//!   keep policy.
//!
//! Test names say what behaviour they pin down.

mod common;
use common::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
use assert_cmd::Command;
use neardup_core::{Fingerprinter, Scheme};
use predicates::prelude::*;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------
// The main corpus (the harness: running the binary, writing corpora, reading the outputs,
// is in tests/common)

/// Records of the main corpus (single file: doc_id = record = position).
mod main_corpus {
    /// A long text and the same text with one word replaced.
    pub const LONG: u64 = 0;
    pub const LONG_EDITED: u64 = 3;
    /// The same text modulo case, punctuation and whitespace; 2 is the smallest doc_id.
    pub const EXACT: [u64; 3] = [2, 6, 9];
    /// No token with a letter.
    pub const EMPTY: [u64; 3] = [4, 5, 7];
    /// A second long text, an edit of it, and the edit again in capitals with punctuation:
    /// one cluster of an exact pair (12, 13) and a near pair (10, 12).
    pub const SECOND: u64 = 10;
    pub const SECOND_EDITED: u64 = 12;
    pub const SECOND_EDITED_LOUD: u64 = 13;
    /// Two texts differing in a number only: not exact duplicates (numbers count for the
    /// exact key) but the same simhash (numbers are not features).
    pub const YEARS: [u64; 2] = [14, 15];
    pub const LEN: usize = 40;
}

/// The main corpus: planted duplicates (see [`main_corpus`]) among unrelated documents.
fn main_docs() -> Vec<Doc> {
    use main_corpus::*;
    let mut rng = SeededRng::new(0x5EED_0001);
    let mut texts: Vec<String> = (0..LEN)
        .map(|_| {
            let n = 30 + rng.below(120) as usize;
            rng.words(n).join(" ")
        })
        .collect();

    let long = rng.words(400);
    let mut edited = long.clone();
    edited[200] = rng.word();
    texts[LONG as usize] = long.join(" ");
    texts[LONG_EDITED as usize] = edited.join(" ");

    let base = rng.words(60);
    texts[EXACT[0] as usize] = format!("{}.", base.join(", "));
    texts[EXACT[1] as usize] = format!("  {}!!!  ", base.join("   ").to_uppercase());
    texts[EXACT[2] as usize] = base
        .iter()
        .enumerate()
        .map(|(i, w)| {
            if i % 2 == 0 {
                w.to_uppercase()
            } else {
                w.clone()
            }
        })
        .collect::<Vec<_>>()
        .join("\n\t");

    texts[EMPTY[0] as usize] = String::new();
    texts[EMPTY[1] as usize] = "2024 42".into();
    texts[EMPTY[2] as usize] = " ... !!! -- ".into();

    let second = rng.words(300);
    let mut second_edited = second.clone();
    second_edited[10] = rng.word();
    texts[SECOND as usize] = second.join(" ");
    texts[SECOND_EDITED as usize] = second_edited.join(" ");
    texts[SECOND_EDITED_LOUD as usize] = format!("{}!", second_edited.join(", ").to_uppercase());

    let years = rng.words(150).join(" ");
    texts[YEARS[0] as usize] = format!("in 2024 {years}");
    texts[YEARS[1] as usize] = format!("in 2025 {years}");

    texts
        .into_iter()
        .enumerate()
        .map(|(i, t)| doc(1000 + i as u64, t))
        .collect()
}

// ---------------------------------------------------------------------------------------
// The independent expectation

/// Our own normalization for ASCII text: runs of `[A-Za-z0-9_]`, lower-cased.
fn tokens(text: &str) -> Vec<String> {
    assert!(text.is_ascii(), "the oracle handles ASCII corpora only");
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|t| !t.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

fn is_empty_text(text: &str) -> bool {
    !tokens(text)
        .iter()
        .any(|t| t.chars().any(|c| c.is_ascii_alphabetic()))
}

#[derive(Clone, Copy)]
enum Keep {
    First,
    Longest,
}

struct Expected {
    pairs: BTreeSet<PairRow>,
    clusters: Vec<ClusterRow>,
}

/// What a run over `docs` (doc_id, text) must produce, given the simhashes it computed.
/// `exact` says whether exact duplicates are folded first (`--no-exact` turns it off).
fn expected(
    docs: &[(u64, String)],
    simhash: &BTreeMap<u64, u64>,
    k: u32,
    exact: bool,
    keep: Keep,
) -> Expected {
    let live: Vec<&(u64, String)> = docs.iter().filter(|(_, t)| !is_empty_text(t)).collect();
    let mut pairs = BTreeSet::new();
    let mut reps = Vec::new();
    if exact {
        let mut groups: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for (id, text) in &live {
            groups.entry(tokens(text).join(" ")).or_default().push(*id);
        }
        for members in groups.values_mut() {
            members.sort_unstable();
            let rep = members[0];
            reps.push(rep);
            for &m in &members[1..] {
                pairs.insert(PairRow {
                    doc_a: rep,
                    doc_b: m,
                    hamming: (simhash[&rep] ^ simhash[&m]).count_ones() as u8,
                    kind: "exact".into(),
                });
            }
        }
    } else {
        reps.extend(live.iter().map(|(id, _)| *id));
    }
    reps.sort_unstable();
    // The graph whose components are the clusters: the exact pairs and every pair of
    // representatives within k.
    let mut graph: Vec<(u64, u64)> = pairs.iter().map(|p| (p.doc_a, p.doc_b)).collect();
    for (i, &a) in reps.iter().enumerate() {
        for &b in &reps[i + 1..] {
            if (simhash[&a] ^ simhash[&b]).count_ones() <= k {
                graph.push((a, b));
            }
        }
    }
    // What pairs/ lists of it (docs/outputs.md): representatives with one simhash are
    // paired with the smallest of them at distance 0, and only that one with the others.
    let mut by_simhash: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for &r in &reps {
        by_simhash.entry(simhash[&r]).or_default().push(r);
    }
    let firsts: Vec<u64> = by_simhash.values().map(|members| members[0]).collect();
    for members in by_simhash.values() {
        for &m in &members[1..] {
            pairs.insert(PairRow {
                doc_a: members[0],
                doc_b: m,
                hamming: 0,
                kind: "near".into(),
            });
        }
    }
    for (i, &a) in firsts.iter().enumerate() {
        for &b in &firsts[i + 1..] {
            let d = (simhash[&a] ^ simhash[&b]).count_ones();
            if d <= k {
                pairs.insert(PairRow {
                    doc_a: a.min(b),
                    doc_b: a.max(b),
                    hamming: d as u8,
                    kind: "near".into(),
                });
            }
        }
    }

    // Connected components by union-find, each labelled with its smallest doc_id.
    let mut parent: HashMap<u64, u64> = HashMap::new();
    fn find(parent: &mut HashMap<u64, u64>, x: u64) -> u64 {
        let p = *parent.entry(x).or_insert(x);
        if p == x {
            return x;
        }
        let root = find(parent, p);
        parent.insert(x, root);
        root
    }
    for &(a, b) in &graph {
        let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
        if ra != rb {
            parent.insert(ra.max(rb), ra.min(rb));
        }
    }
    let bytes: HashMap<u64, u64> = docs.iter().map(|(id, t)| (*id, t.len() as u64)).collect();
    let mut members: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    let in_pairs: BTreeSet<u64> = graph.iter().flat_map(|&(a, b)| [a, b]).collect();
    for &d in &in_pairs {
        let root = find(&mut parent, d);
        members.entry(root).or_default().push(d);
    }
    let mut clusters = Vec::new();
    for (_, group) in members {
        let cluster_id = *group.iter().min().unwrap();
        let kept = *group
            .iter()
            .min_by_key(|&&d| match keep {
                Keep::First => (0, d),
                Keep::Longest => (u64::MAX - bytes[&d], d),
            })
            .unwrap();
        for &d in &group {
            clusters.push(ClusterRow {
                doc_id: d,
                cluster_id: cluster_id as i64,
                cluster_size: group.len() as u32,
                keep: d == kept,
            });
        }
    }
    for (id, _) in docs {
        if !in_pairs.contains(id) {
            clusters.push(ClusterRow {
                doc_id: *id,
                cluster_id: -1,
                cluster_size: 1,
                keep: true,
            });
        }
    }
    clusters.sort();
    Expected { pairs, clusters }
}

fn simhashes(rows: &[FpRow]) -> BTreeMap<u64, u64> {
    rows.iter().map(|r| (r.doc_id, r.simhash)).collect()
}

/// Checks a run's pairs and clusters against the oracle, and summary.json's counts against
/// both. Returns the pairs.
fn check_against_oracle(
    out: &Path,
    docs: &[(u64, String)],
    k: u32,
    exact: bool,
    keep: Keep,
) -> Vec<PairRow> {
    check_search_against_oracle(out, out, docs, k, exact, keep)
}

/// The same for an output whose simhashes are in another output's fingerprints/ (search
/// writes no fingerprints/ of its own).
fn check_search_against_oracle(
    out: &Path,
    fingerprints_of: &Path,
    docs: &[(u64, String)],
    k: u32,
    exact: bool,
    keep: Keep,
) -> Vec<PairRow> {
    let fps = fingerprints(fingerprints_of);
    let want = expected(docs, &simhashes(&fps), k, exact, keep);
    let got_pairs = pairs(out);
    let got: BTreeSet<PairRow> = got_pairs.iter().cloned().collect();
    let missing: Vec<_> = want.pairs.difference(&got).collect();
    let extra: Vec<_> = got.difference(&want.pairs).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "pairs differ from the oracle: missing {missing:?}, unexpected {extra:?}"
    );
    assert_eq!(
        clusters(out),
        want.clusters,
        "clusters differ from the oracle"
    );

    let summary = summary(out);
    let exact_pairs = got_pairs.iter().filter(|p| p.kind == "exact").count() as u64;
    let clustered = want.clusters.iter().filter(|c| c.cluster_id >= 0).count() as u64;
    let cluster_ids: BTreeSet<i64> = want
        .clusters
        .iter()
        .map(|c| c.cluster_id)
        .filter(|&c| c >= 0)
        .collect();
    let to_remove = want
        .clusters
        .iter()
        .filter(|c| c.cluster_id >= 0 && !c.keep)
        .count() as u64;
    let empty = docs.iter().filter(|(_, t)| is_empty_text(t)).count() as u64;
    assert_eq!(count(&summary, "documents"), docs.len() as u64);
    assert_eq!(count(&summary, "empty"), empty);
    assert_eq!(count(&summary, "pairs"), got_pairs.len() as u64);
    assert_eq!(count(&summary, "exact_pairs"), exact_pairs);
    assert_eq!(
        count(&summary, "near_pairs"),
        got_pairs.len() as u64 - exact_pairs
    );
    assert_eq!(count(&summary, "exact_duplicates"), exact_pairs);
    assert_eq!(count(&summary, "clusters"), cluster_ids.len() as u64);
    assert_eq!(count(&summary, "clustered_documents"), clustered);
    assert_eq!(count(&summary, "documents_to_remove"), to_remove);
    assert_eq!(
        count(&summary, "bytes"),
        docs.iter().map(|(_, t)| t.len() as u64).sum::<u64>()
    );
    assert_eq!(summary["errors"], json!([]));
    got_pairs
}

fn numbered(docs: &[Doc]) -> Vec<(u64, String)> {
    docs.iter()
        .enumerate()
        .map(|(i, d)| (i as u64, d.text.clone()))
        .collect()
}

fn fingerprint_of(text: &str) -> u64 {
    Fingerprinter::new(Scheme::simhash_doc())
        .fingerprint(text)
        .simhash
}

// ---------------------------------------------------------------------------------------
// Success

#[test]
fn run_finds_exact_and_near_duplicates_and_clusters_them() {
    use main_corpus::*;
    let dir = tempfile::tempdir().unwrap();
    let docs = main_docs();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&docs));
    let out = dir.path().join("out");
    let output = run_ok(&out, &["-w", "2"], &[&input]);
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("documents"),
        "a summary is printed by default"
    );

    // One part per worker and table, committed (no temporary files left).
    for table in ["fingerprints", "pairs", "clusters"] {
        let names: Vec<String> = parts(&out.join(table))
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["part-00000.parquet", "part-00001.parquet"],
            "{table}"
        );
    }

    // Every document exactly once in fingerprints/, with the right record and text.
    let fps = fingerprints(&out);
    assert_eq!(
        doc_ids_of_fingerprints(&fps),
        (0..LEN as u64).collect::<Vec<_>>()
    );
    for (fp, d) in fps.iter().zip(&docs) {
        assert_eq!(fp.id.as_deref(), Some(d.id.to_string().as_str()));
        assert_eq!(fp.source, s(&input));
        assert_eq!(fp.record, fp.doc_id, "record is the 0-based line number");
        assert_eq!(fp.bytes, d.text.len() as u64);
        assert_eq!(fp.simhash, fingerprint_of(&d.text), "doc {}", fp.doc_id);
        assert_eq!(fp.empty, EMPTY.contains(&fp.doc_id), "doc {}", fp.doc_id);
        if fp.empty {
            assert_eq!((fp.simhash, fp.n_tokens), (0, 0));
        } else {
            assert!(fp.n_tokens > 0);
        }
    }

    // The whole result, against the oracle.
    let got = check_against_oracle(&out, &numbered(&docs), 3, true, Keep::First);

    // And the planted duplicates, one by one.
    let find = |a: u64, b: u64| got.iter().find(|p| (p.doc_a, p.doc_b) == (a, b));
    for &m in &EXACT[1..] {
        let p = find(EXACT[0], m).unwrap_or_else(|| panic!("exact pair (2, {m}) missing"));
        assert_eq!((p.kind.as_str(), p.hamming), ("exact", 0));
    }
    assert!(
        find(EXACT[1], EXACT[2]).is_none(),
        "members link to the smallest doc_id only"
    );
    let near = find(LONG, LONG_EDITED).expect("a one-word edit of a long text is a near pair");
    assert_eq!(near.kind, "near");
    assert!(near.hamming <= 3);
    let p = find(SECOND_EDITED, SECOND_EDITED_LOUD).expect("exact pair (12, 13)");
    assert_eq!(p.kind, "exact");
    assert_eq!(
        find(SECOND, SECOND_EDITED)
            .expect("near pair (10, 12)")
            .kind,
        "near"
    );
    assert!(
        find(SECOND, SECOND_EDITED_LOUD).is_none(),
        "near pairs are between representatives only"
    );
    let years = find(YEARS[0], YEARS[1]).expect("texts differing in a number are paired");
    assert_eq!((years.kind.as_str(), years.hamming), ("near", 0));
    for p in &got {
        assert!(p.doc_a < p.doc_b);
        assert!(
            !EMPTY.contains(&p.doc_a) && !EMPTY.contains(&p.doc_b),
            "{p:?}"
        );
    }

    // Clusters: every document once; empty ones unclustered; one keep per cluster.
    let cl = clusters(&out);
    assert_eq!(
        cl.iter().map(|c| c.doc_id).collect::<Vec<_>>(),
        (0..LEN as u64).collect::<Vec<_>>()
    );
    let by_doc: HashMap<u64, ClusterRow> = cl.iter().map(|c| (c.doc_id, *c)).collect();
    for e in EMPTY {
        assert_eq!((by_doc[&e].cluster_id, by_doc[&e].cluster_size), (-1, 1));
        assert!(by_doc[&e].keep);
    }
    assert_eq!(by_doc[&EXACT[2]].cluster_id, EXACT[0] as i64);
    assert_eq!(by_doc[&SECOND_EDITED_LOUD].cluster_id, SECOND as i64);
    assert_eq!(by_doc[&SECOND_EDITED_LOUD].cluster_size, 3);
    let mut keeps: BTreeMap<i64, usize> = BTreeMap::new();
    for c in cl.iter().filter(|c| c.cluster_id >= 0) {
        *keeps.entry(c.cluster_id).or_default() += usize::from(c.keep);
    }
    assert!(keeps.values().all(|&n| n == 1), "{keeps:?}");
    assert_eq!(keeps.len(), 4, "clusters: exact group, long, second, years");
    assert!(by_doc[&EXACT[0]].keep && by_doc[&SECOND].keep && by_doc[&LONG].keep);

    let summary = summary(&out);
    assert_eq!(count(&summary, "exact_groups"), 2);
    assert_eq!(count(&summary, "exact_duplicates"), 3);
    assert_eq!(count(&summary, "skipped"), 0);
    assert_eq!(count(&summary, "duplicate_ids"), 0);
    assert_eq!(summary["parameters"]["workers_per_process"], 2);
    assert_eq!(summary["parameters"]["k"], 3);
    assert_eq!(summary["parameters"]["keep"], "first");
    assert_eq!(summary["parameters"]["inputs"], json!([s(&input)]));
}

/// Pages that differ only in numbers (a template: product pages, listings) have one simhash
/// (numbers are not features) but not one exact key. pairs/ links each to the smallest of
/// them, `n - 1` pairs instead of `n(n-1)/2` (issue 39: 6,000 such pages were 17,997,000
/// pairs and 1.7 GB, whatever `--memory-limit` said), and the clusters stay the components
/// of every pair within k, whatever the number of workers.
#[test]
fn pages_that_differ_only_in_numbers_are_linked_by_linear_pairs() {
    const N: u64 = 1500;
    let dir = tempfile::tempdir().unwrap();
    let mut docs: Vec<Doc> = (0..N)
        .map(|i| {
            doc(
                i,
                format!("product page {i} price {} stock {}", i * 7, i * 13),
            )
        })
        .collect();
    // An exact copy of page 3 (folded by the exact stage first), and unrelated texts.
    docs.push(doc(N, "PRODUCT page 3, price 21; stock 39!"));
    let mut rng = SeededRng::new(39);
    docs.extend((0..20).map(|i| doc(N + 1 + i, rng.words(40).join(" "))));
    let input = write(&dir.path().join("pages.jsonl"), &jsonl(&docs));
    for workers in ["1", "2"] {
        let out = dir.path().join(format!("out-{workers}"));
        run_ok(&out, &["-q", "-w", workers, "--keep", "longest"], &[&input]);
        let got = pairs(&out);
        assert_eq!(
            got.len() as u64,
            N,
            "{workers} workers: N - 1 near pairs and one exact"
        );
        check_against_oracle(&out, &numbered(&docs), 3, true, Keep::Longest);
        for p in got.iter().filter(|p| p.kind == "near") {
            assert_eq!((p.doc_a, p.hamming), (0, 0), "{p:?}");
        }
        let cl = clusters(&out);
        assert!(cl[..=N as usize]
            .iter()
            .all(|c| (c.cluster_id, c.cluster_size) == (0, N as u32 + 1)));
    }
}

#[test]
fn keep_longest_keeps_the_longest_document_of_each_cluster() {
    use main_corpus::*;
    let dir = tempfile::tempdir().unwrap();
    let docs = main_docs();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&docs));
    let out = dir.path().join("out");
    run_ok(&out, &["--keep", "longest", "-w", "2"], &[&input]);
    check_against_oracle(&out, &numbered(&docs), 3, true, Keep::Longest);

    // The capitals-and-spaces variant of the exact group is its longest member.
    let lens: Vec<usize> = EXACT.iter().map(|&d| docs[d as usize].text.len()).collect();
    assert!(lens[1] > lens[0] && lens[1] > lens[2], "{lens:?}");
    let cl = clusters(&out);
    let kept: Vec<u64> = cl
        .iter()
        .filter(|c| c.cluster_id == EXACT[0] as i64 && c.keep)
        .map(|c| c.doc_id)
        .collect();
    assert_eq!(kept, [EXACT[1]]);
    assert_eq!(summary(&out)["parameters"]["keep"], "longest");
}

#[test]
fn results_do_not_depend_on_the_number_of_workers() {
    let dir = tempfile::tempdir().unwrap();
    let docs = main_docs();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&docs));
    let mut results = Vec::new();
    for w in ["1", "2", "4"] {
        let out = dir.path().join(format!("out-w{w}"));
        run_ok(&out, &["-w", w], &[&input]);
        assert_eq!(parts(&out.join("pairs")).len(), w.parse::<usize>().unwrap());
        results.push((w, fingerprints(&out), pairs(&out), clusters(&out)));
    }
    let (_, fps1, pairs1, clusters1) = &results[0];
    assert!(!pairs1.is_empty());
    for (w, fps, pairs, clusters) in &results[1..] {
        assert_eq!(fps, fps1, "fingerprints with -w {w}");
        assert_eq!(pairs, pairs1, "pairs with -w {w}");
        assert_eq!(clusters, clusters1, "clusters with -w {w}");
    }
}

#[test]
fn doc_ids_number_files_in_path_order_and_records_from_zero() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SeededRng::new(7);
    let shared = rng.words(80).join(" ");
    // c.jsonl's second line is blank: it keeps its number, so the record after it is 2.
    let a = write(
        &dir.path().join("a.jsonl"),
        &jsonl(&[
            doc("a0", rng.words(50).join(" ")),
            doc("a1", shared.clone()),
        ]),
    );
    let b = write(
        &dir.path().join("b.jsonl"),
        &jsonl(&[doc("b0", shared.to_uppercase())]),
    );
    let mut c_bytes = jsonl(&[doc("c0", rng.words(50).join(" "))]);
    c_bytes.extend_from_slice(b"   \n");
    c_bytes.extend(jsonl(&[doc("c2", format!("{shared}!"))]));
    let c = write(&dir.path().join("c.jsonl"), &c_bytes);

    let out = dir.path().join("out");
    // Named out of order on purpose: numbering follows the sorted paths.
    run_ok(&out, &["-w", "2"], &[&c, &a, &b]);
    let fps = fingerprints(&out);
    let got: Vec<(u64, &str, &str, u64)> = fps
        .iter()
        .map(|f| {
            (
                f.doc_id,
                f.id.as_deref().unwrap(),
                f.source.as_str(),
                f.record,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (0, "a0", s(&a), 0),
            (1, "a1", s(&a), 1),
            (1 << 40, "b0", s(&b), 0),
            (2 << 40, "c0", s(&c), 0),
            ((2 << 40) | 2, "c2", s(&c), 2),
        ]
    );
    // An exact group across files links to the smallest doc_id, the one in a.jsonl.
    let exact: Vec<(u64, u64, String)> = pairs(&out)
        .into_iter()
        .map(|p| (p.doc_a, p.doc_b, p.kind))
        .collect();
    assert_eq!(
        exact,
        [
            (1, 1 << 40, "exact".into()),
            (1, (2 << 40) | 2, "exact".into())
        ]
    );
    let summary = summary(&out);
    assert_eq!(
        summary["parameters"]["inputs"],
        json!([s(&a), s(&b), s(&c)])
    );
    assert_eq!(count(&summary, "blank_lines"), 1);
    assert_eq!(count(&summary, "documents"), 5);
}

// ---------------------------------------------------------------------------------------
// Input kinds

/// Pairs and clusters of a run, comparable across inputs (doc_ids only, no file names).
fn result_of(out: &Path) -> (Vec<PairRow>, Vec<ClusterRow>) {
    (pairs(out), clusters(out))
}

#[test]
fn gzip_and_zstd_inputs_give_the_same_results_as_plain() {
    let dir = tempfile::tempdir().unwrap();
    let data = jsonl(&main_docs());
    let plain = write(&dir.path().join("corpus.jsonl"), &data);
    let gz = write(&dir.path().join("corpus.jsonl.gz"), &gzip(&data));
    let zst = write(&dir.path().join("corpus.jsonl.zst"), &zstd(&data));
    let expected = {
        let out = dir.path().join("out-plain");
        run_ok(&out, &[], &[&plain]);
        result_of(&out)
    };
    assert!(expected.0.len() >= 6);
    for input in [&gz, &zst] {
        let out = dir.path().join(format!(
            "out-{}",
            input.extension().unwrap().to_string_lossy()
        ));
        run_ok(&out, &["-w", "2"], &[input]);
        assert_eq!(result_of(&out), expected, "{}", input.display());
        let fps = fingerprints(&out);
        assert_eq!(fps.len(), main_corpus::LEN);
        assert!(fps.iter().all(|f| f.source == s(input)));
    }
}

#[test]
fn a_directory_is_read_like_the_input_files_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let docs = main_docs();
    let (first, second) = docs.split_at(25);
    let root = dir.path().join("corpus");
    let a = write(&root.join("a.jsonl"), &jsonl(first));
    let b = write(&root.join("sub/b.jsonl.zst"), &zstd(&jsonl(second)));
    // Not input: markers, hidden files, other extensions.
    write(&root.join("_SUCCESS"), b"");
    write(&root.join(".c.jsonl"), &jsonl(&docs));
    write(&root.join("_temporary/d.jsonl"), &jsonl(&docs));
    write(&root.join("notes.txt"), b"not json\n");

    let from_dir = dir.path().join("out-dir");
    run_ok(&from_dir, &["-w", "2"], &[&root]);
    let from_files = dir.path().join("out-files");
    run_ok(&from_files, &[], &[&b, &a]);
    assert_eq!(result_of(&from_dir), result_of(&from_files));
    assert_eq!(fingerprints(&from_dir), fingerprints(&from_files));
    assert_eq!(
        summary(&from_dir)["parameters"]["inputs"],
        json!([s(&a), s(&b)])
    );

    // The exact group spans both files; records of b.jsonl.zst are numbered from 0.
    let fps = fingerprints(&from_dir);
    assert_eq!(fps.len(), docs.len());
    assert!(fps[25..]
        .iter()
        .all(|f| f.doc_id >> 40 == 1 && f.source == s(&b)));
    let ids: Vec<u64> = fps[25..]
        .iter()
        .map(|f| f.doc_id & ((1 << 40) - 1))
        .collect();
    assert_eq!(ids, (0..15).collect::<Vec<_>>());
}

#[test]
fn parquet_input_with_a_content_column_matches_jsonl() {
    let dir = tempfile::tempdir().unwrap();
    let docs = main_docs();
    let jsonl_path = write(&dir.path().join("corpus.jsonl"), &jsonl(&docs));
    let parquet_path = dir.path().join("corpus.parquet");
    let ids: Vec<i64> = docs.iter().map(|d| d.id.as_i64().unwrap()).collect();
    let texts: Vec<&str> = docs.iter().map(|d| d.text.as_str()).collect();
    // Row groups of 7 rows: several reading units spread over the workers.
    write_parquet(
        &parquet_path,
        vec![
            ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
            (
                "url",
                Arc::new(StringArray::from(vec!["u"; docs.len()])) as ArrayRef,
            ),
            ("content", Arc::new(StringArray::from(texts)) as ArrayRef),
        ],
        7,
    );

    let expected = dir.path().join("out-jsonl");
    run_ok(&expected, &[], &[&jsonl_path]);
    let out = dir.path().join("out-parquet");
    run_ok(
        &out,
        &["-w", "3", "--text-field", "content"],
        &[&parquet_path],
    );
    assert_eq!(result_of(&out), result_of(&expected));
    check_against_oracle(&out, &numbered(&docs), 3, true, Keep::First);

    // Same documents, ids (integers as decimal text), rows as records.
    let strip = |rows: Vec<FpRow>| -> Vec<FpRow> {
        rows.into_iter()
            .map(|r| FpRow {
                source: String::new(),
                ..r
            })
            .collect()
    };
    assert_eq!(strip(fingerprints(&out)), strip(fingerprints(&expected)));
    let fps = fingerprints(&out);
    assert_eq!(fps[12].id.as_deref(), Some("1012"));
    assert_eq!((fps[12].doc_id, fps[12].record), (12, 12));
    assert!(fps.iter().all(|f| f.source == s(&parquet_path)));
}

// ---------------------------------------------------------------------------------------
// search over a run's fingerprints

/// The main corpus without its empty documents.
fn non_empty_docs() -> Vec<Doc> {
    main_docs()
        .into_iter()
        .filter(|d| !is_empty_text(&d.text))
        .collect()
}

#[test]
fn search_over_fingerprints_finds_the_near_pairs_of_a_run_without_exact_folding() {
    let dir = tempfile::tempdir().unwrap();
    let docs = non_empty_docs();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&docs));
    let run_out = dir.path().join("run");
    // search never folds exact duplicates: every pair within k is a near pair. A run with
    // --no-exact does the same, so the two must agree on pairs and on clusters.
    run_ok(&run_out, &["--no-exact", "-w", "2"], &[&input]);
    let run_pairs = check_against_oracle(&run_out, &numbered(&docs), 3, false, Keep::First);
    assert!(run_pairs.iter().all(|p| p.kind == "near"));
    assert!(
        run_pairs.iter().any(|p| p.hamming == 0),
        "exact copies are near pairs at 0"
    );

    let search_out = dir.path().join("search");
    search_ok(&search_out, &["-w", "2"], &run_out.join("fingerprints"));
    assert_eq!(pairs(&search_out), run_pairs);
    assert_eq!(clusters(&search_out), clusters(&run_out));

    // With exact folding, the run's near pairs are a subset of search's (those between
    // representatives), and every exact pair's documents are clustered together by search.
    let folded_out = dir.path().join("run-folded");
    run_ok(&folded_out, &[], &[&input]);
    let folded = pairs(&folded_out);
    assert!(near_set(&folded).is_subset(&near_set(&run_pairs)));
    let search_clusters: HashMap<u64, i64> = clusters(&search_out)
        .into_iter()
        .map(|c| (c.doc_id, c.cluster_id))
        .collect();
    assert_eq!(
        clusters(&folded_out)
            .iter()
            .map(|c| (c.doc_id, c.cluster_id))
            .collect::<HashMap<_, _>>(),
        search_clusters,
        "the same components whether exact duplicates are folded or not"
    );
    let summary = summary(&search_out);
    assert_eq!(count(&summary, "documents"), docs.len() as u64);
    assert_eq!(count(&summary, "exact_pairs"), 0);
    assert_eq!(summary["parameters"]["exact"], false);
}

#[test]
fn search_never_pairs_empty_documents() {
    use main_corpus::EMPTY;
    let dir = tempfile::tempdir().unwrap();
    let docs = main_docs();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&docs));
    let run_out = dir.path().join("run");
    run_ok(&run_out, &["--no-exact"], &[&input]);
    let search_out = dir.path().join("search");
    search_ok(&search_out, &[], &run_out.join("fingerprints"));
    let paired: Vec<PairRow> = pairs(&search_out)
        .into_iter()
        .filter(|p| EMPTY.contains(&p.doc_a) || EMPTY.contains(&p.doc_b))
        .collect();
    // Empty documents all have simhash 0: search must read the `empty` column and never
    // pair them, as `run` never does.
    assert!(
        paired.is_empty(),
        "search paired empty documents: {paired:?}"
    );
    assert_eq!(pairs(&search_out), pairs(&run_out));
}

#[test]
fn search_with_a_larger_k_finds_a_superset() {
    let dir = tempfile::tempdir().unwrap();
    let docs = non_empty_docs();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&docs));
    let run_out = dir.path().join("run");
    run_ok(&run_out, &["--no-exact"], &[&input]);
    let fps = run_out.join("fingerprints");
    let k3 = dir.path().join("k3");
    search_ok(&k3, &["-w", "2"], &fps);
    let k6 = dir.path().join("k6");
    search_ok(&k6, &["-w", "2", "-k", "6"], &fps);
    let (small, large) = (pair_set(&pairs(&k3)), pair_set(&pairs(&k6)));
    assert!(
        small.is_subset(&large),
        "k=6 lost pairs: {:?}",
        small.difference(&large)
    );
    // And exactly the pairs within 6 bits.
    check_search_against_oracle(&k6, &run_out, &numbered(&docs), 6, false, Keep::First);
    check_search_against_oracle(&k3, &run_out, &numbered(&docs), 3, false, Keep::First);
    // search writes no fingerprint table of its own (not even an empty directory).
    assert!(!k6.join("fingerprints").exists());
    assert_eq!(summary(&k6)["parameters"]["k"], 6);
}

// ---------------------------------------------------------------------------------------
// Bad input: exit 1, a message naming the file and line (or row), no _SUCCESS

/// Nine good records with `bad` as line 5.
fn file_with_bad_line(dir: &Path, name: &str, bad: &[u8]) -> PathBuf {
    let mut rng = SeededRng::new(99);
    let good: Vec<Doc> = (0..9).map(|i| doc(i, rng.words(20).join(" "))).collect();
    let mut data = jsonl(&good[..4]);
    data.extend_from_slice(bad);
    data.push(b'\n');
    data.extend(jsonl(&good[4..]));
    write(&dir.join(name), &data)
}

fn run_cmd(out: &Path, args: &[&str], inputs: &[&Path]) -> Command {
    let mut cmd = neardup();
    cmd.arg("run").args(args).args(["--output", s(out)]);
    cmd.args(inputs.iter().map(|p| s(p)));
    cmd
}

#[test]
fn no_matching_input_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let pattern = format!("{}/*.jsonl", dir.path().display());
    let mut cmd = neardup();
    cmd.args(["run", "--output", s(&out), &pattern]);
    assert_fails(&mut cmd, &out, &["no input files matched", &pattern]);
    let missing = dir.path().join("missing.jsonl");
    assert_fails(
        &mut run_cmd(&out, &[], &[&missing]),
        &out,
        &[s(&missing), "no such file"],
    );
}

#[test]
fn bad_records_fail_the_run_naming_file_line_and_problem() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[u8], &str); 4] = [
        (
            "malformed.jsonl",
            br#"{"id": 4, "text": "abc"#,
            "malformed JSON",
        ),
        (
            "number.jsonl",
            br#"{"id": 4, "text": 12}"#,
            r#"field "text" is a number, expected a string"#,
        ),
        (
            "noid.jsonl",
            br#"{"text": "no id here"}"#,
            r#"record has no field "id""#,
        ),
        (
            "utf8.jsonl",
            b"{\"id\": 4, \"text\": \"caf\xe9\"}",
            "invalid UTF-8",
        ),
    ];
    for (name, bad, problem) in cases {
        let input = file_with_bad_line(dir.path(), name, bad);
        let out = dir.path().join(format!("out-{name}"));
        let located = format!("{}:5: ", input.display());
        assert_fails(
            &mut run_cmd(&out, &["-w", "2"], &[&input]),
            &out,
            &[&located, problem, "no _SUCCESS"],
        );
        assert!(
            out.join("summary.json").is_file(),
            "the summary lists the error"
        );
        let errors = summary(&out)["errors"].clone();
        let first = errors[0].as_str().unwrap_or_default();
        assert!(
            first.starts_with(&located) && first.contains(problem),
            "{errors}"
        );
    }
}

/// A compressed corpus long enough that truncation hits well after line 1.
fn big_jsonl() -> Vec<u8> {
    let mut rng = SeededRng::new(3);
    let docs: Vec<Doc> = (0..3000).map(|i| doc(i, rng.words(12).join(" "))).collect();
    jsonl(&docs)
}

#[test]
fn truncated_gzip_and_zstd_inputs_fail_even_with_skip_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let data = big_jsonl();
    for (name, compressed, what) in [
        (
            "cut.jsonl.gz",
            gzip(&data),
            "gzip data is truncated or corrupt",
        ),
        (
            "cut.jsonl.zst",
            zstd(&data),
            "zstd data is truncated or corrupt",
        ),
    ] {
        let input = write(&dir.path().join(name), &compressed[..compressed.len() / 2]);
        for args in [&["-w", "2"][..], &["--skip-invalid"][..]] {
            let out = dir.path().join(format!("out-{name}-{}", args.len()));
            let stderr = assert_fails(
                &mut run_cmd(&out, args, &[&input]),
                &out,
                &[&format!("{}:", input.display()), what],
            );
            // The message says how far reading got: FILE:LINE: ...
            let line: u64 = stderr
                .split(&format!("{}:", input.display()))
                .nth(1)
                .and_then(|rest| rest.split(':').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no line number in {stderr}"));
            assert!(line > 1 && line <= 3000, "{stderr}");
        }
    }
}

#[test]
fn parquet_without_the_named_column_is_an_error_naming_the_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("docs.parquet");
    write_parquet(
        &path,
        vec![
            ("id", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
            (
                "content",
                Arc::new(StringArray::from(vec!["one text", "another text"])) as ArrayRef,
            ),
        ],
        10,
    );
    let out = dir.path().join("out");
    assert_fails(
        &mut run_cmd(&out, &[], &[&path]),
        &out,
        &[s(&path), r#"no column "text""#, "content"],
    );
    let out = dir.path().join("out-keep");
    assert_fails(
        &mut run_cmd(
            &out,
            &["--text-field", "content", "--keep", "max:score"],
            &[&path],
        ),
        &out,
        &[s(&path), r#"no column "score""#],
    );
    // A null text is a row error, numbered from 0.
    let nulls = dir.path().join("nulls.parquet");
    write_parquet(
        &nulls,
        vec![
            ("id", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
            (
                "text",
                Arc::new(StringArray::from(vec![Some("a b"), Some("c d"), None])) as ArrayRef,
            ),
        ],
        10,
    );
    let out = dir.path().join("out-nulls");
    assert_fails(
        &mut run_cmd(&out, &[], &[&nulls]),
        &out,
        &[&format!("{}: row 2: ", nulls.display()), "null"],
    );
}

#[test]
fn a_non_empty_output_directory_needs_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&main_docs()));
    let out = dir.path().join("out");
    run_ok(&out, &[], &[&input]);
    write(&out.join("pairs/part-00007.parquet"), b"stale");
    let before = snapshot(&out);
    let stderr = assert_refused(&mut run_cmd(&out, &[], &[&input]), &["--overwrite"]);
    assert!(stderr.contains(s(&out)), "{stderr}");
    assert_eq!(snapshot(&out), before, "left alone");

    run_ok(&out, &["--overwrite"], &[&input]);
    assert_eq!(parts(&out.join("pairs")).len(), 1, "the stale part is gone");
    assert_eq!(fingerprints(&out).len(), main_corpus::LEN);

    // An empty directory is fine without --overwrite.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    run_ok(&empty, &[], &[&input]);
}

#[test]
fn overwrite_refuses_a_directory_of_the_users_own_files_and_deletes_none() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&main_docs()));
    let mine = dir.path().join("mydir");
    write(&mine.join("a.txt"), b"my letter");
    write(&mine.join("notes/todo.md"), b"- buy milk");
    write(&mine.join("photo.jpg"), &[0xff, 0xd8, 0xff, 0x00, 0x42]);
    let before = snapshot(&mine);
    assert_refused(
        &mut run_cmd(&mine, &["--overwrite"], &[&input]),
        &[
            &format!("refusing to replace {}", mine.display()),
            "it is not a neardup output (no .neardup or summary.json)",
            "a.txt, notes/, photo.jpg",
            "nothing was deleted",
        ],
    );
    assert_eq!(
        snapshot(&mine),
        before,
        "every file is still there, unchanged"
    );
}

#[test]
fn overwrite_refuses_the_directory_holding_the_input_and_the_corpus_survives() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let corpus = jsonl(&main_docs());
    let input = write(&data.join("corpus.jsonl"), &corpus);
    let refused = |data: &Path| {
        assert_refused(
            &mut run_cmd(data, &["--overwrite"], &[&input]),
            &[
                &format!("refusing to replace {}", data.display()),
                &format!("it holds the input {}", input.display()),
            ],
        );
        assert_eq!(
            std::fs::read(&input).unwrap(),
            corpus,
            "the corpus is intact"
        );
    };
    refused(&data);
    // Even where it looks like a neardup output, and named another way.
    write(&data.join("summary.json"), b"{}");
    let before = snapshot(&data);
    refused(&data);
    refused(&dir.path().join("data/../data/."));
    assert_eq!(snapshot(&data), before);
}

#[test]
fn overwrite_replaces_a_previous_run_with_or_without_its_marker() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&main_docs()));
    let out = dir.path().join("out");
    run_ok(&out, &[], &[&input]);
    assert_eq!(
        std::fs::read_to_string(out.join(".neardup")).unwrap(),
        "neardup output\n"
    );
    run_ok(&out, &["--overwrite"], &[&input]);
    // A run of the previous version: no marker, summary.json says it is a run; and the
    // hidden temporary files of an interrupted one.
    std::fs::remove_file(out.join(".neardup")).unwrap();
    write(&out.join(".summary.json.4242.tmp"), b"{");
    write(&out.join("clusters/.part-00009.parquet.tmp"), b"half");
    write(&out.join("_spill/w0/t0-p3"), b"spilled");
    run_ok(&out, &["--overwrite"], &[&input]);
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ".neardup",
            "_SUCCESS",
            "clusters",
            "fingerprints",
            "pairs",
            "summary.json"
        ]
    );
    assert_eq!(fingerprints(&out).len(), main_corpus::LEN);
}

#[test]
fn overwrite_refuses_a_run_into_which_the_user_put_a_file_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&main_docs()));
    let out = dir.path().join("out");
    run_ok(&out, &[], &[&input]);
    write(&out.join("analysis.ipynb"), b"{\"cells\": []}");
    write(&out.join("pairs/my-filter.csv"), b"doc_a,doc_b\n");
    let before = snapshot(&out);
    assert_refused(
        &mut run_cmd(&out, &["--overwrite"], &[&input]),
        &[
            "besides neardup's outputs it holds analysis.ipynb, pairs/my-filter.csv",
            "nothing was deleted",
        ],
    );
    assert_eq!(
        snapshot(&out),
        before,
        "the run and the user's files are untouched"
    );
}

#[test]
fn write_dedup_refuses_foreign_files_and_replaces_its_own_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&main_docs()));
    let (out, dedup) = (dir.path().join("out"), dir.path().join("dedup"));
    let dedup_args = ["--overwrite", "--write-dedup", s(&dedup)];
    write(&dedup.join("keep-me.jsonl"), b"{\"text\": \"mine\"}\n");
    let before = snapshot(&dedup);
    assert_refused(
        &mut run_cmd(&out, &dedup_args, &[&input]),
        &[
            &format!("refusing to replace {}", dedup.display()),
            "not a neardup output",
            "keep-me.jsonl",
        ],
    );
    assert_eq!(snapshot(&dedup), before);

    std::fs::remove_dir_all(&dedup).unwrap();
    run_ok(&out, &dedup_args, &[&input]);
    let kept = std::fs::read(dedup.join("corpus.jsonl")).unwrap();
    assert_eq!(
        std::fs::read_to_string(dedup.join(".neardup")).unwrap(),
        "neardup output\ncorpus.jsonl\n",
        "the marker lists the kept files"
    );
    run_ok(&out, &dedup_args, &[&input]);
    assert_eq!(std::fs::read(dedup.join("corpus.jsonl")).unwrap(), kept);
    assert!(dedup.join("_SUCCESS").is_file());

    // A file the user added beside the corpus is foreign, even with the corpus's extension.
    write(&dedup.join("extra.jsonl"), b"{\"text\": \"mine\"}\n");
    let before = snapshot(&dedup);
    assert_refused(
        &mut run_cmd(&out, &dedup_args, &[&input]),
        &["besides neardup's outputs it holds extra.jsonl"],
    );
    assert_eq!(snapshot(&dedup), before);

    // The two outputs are never each other.
    assert_refused(
        &mut run_cmd(&out, &["--overwrite", "--write-dedup", s(&out)], &[&input]),
        &[&format!(
            "it is the --write-dedup directory {}",
            out.display()
        )],
    );
    assert!(out.join("fingerprints").is_dir());
}

#[test]
fn overwrite_refuses_the_current_directory_even_when_it_holds_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&main_docs()));
    let here = dir.path().join("here");
    run_ok(&here, &[], &[&input]);
    write(&here.join("notes.txt"), b"mine");
    let before = snapshot(&here);
    assert_refused(
        neardup()
            .current_dir(&here)
            .args(["run", "--overwrite", "--output", ".", s(&input)]),
        &["refusing to replace .: it is the current directory"],
    );
    assert_eq!(snapshot(&here), before);
}

#[test]
fn search_refuses_to_overwrite_the_run_holding_its_own_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&main_docs()));
    let out = dir.path().join("out");
    run_ok(&out, &[], &[&input]);
    let before = snapshot(&out);
    let fingerprints_dir = out.join("fingerprints");
    assert_refused(
        neardup().args([
            "search",
            "--overwrite",
            "--output",
            s(&out),
            s(&fingerprints_dir),
        ]),
        &[
            &format!("refusing to replace {}", out.display()),
            "it holds the input",
            "fingerprints/part-00000.parquet",
        ],
    );
    assert_eq!(snapshot(&out), before, "the fingerprints are intact");
}

#[test]
fn overwrite_refuses_an_output_holding_the_spill_directory() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&main_docs()));
    let out = dir.path().join("out");
    run_ok(&out, &[], &[&input]);
    let before = snapshot(&out);
    let spill = out.join("scratch");
    assert_refused(
        &mut run_cmd(&out, &["--overwrite", "--spill-dir", s(&spill)], &[&input]),
        &[&format!("it holds the spill directory {}", spill.display())],
    );
    assert_eq!(snapshot(&out), before);
}

#[test]
fn bad_search_parameters_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&main_docs()));
    let out = dir.path().join("out");
    assert_fails(
        &mut run_cmd(&out, &["-k", "40"], &[&input]),
        &out,
        &["k = 40 is out of range", "32"],
    );
    assert_fails(
        &mut run_cmd(&out, &["--tables", "manku16", "-k", "4"], &[&input]),
        &out,
        &["manku16", "k = 3", "blocks:B"],
    );
    assert_fails(
        &mut run_cmd(&out, &["--keep", "biggest"], &[&input]),
        &out,
        &["--keep", "biggest", "max:COLUMN"],
    );
    assert_fails(
        &mut run_cmd(&out, &["--memory-limit", "12Q"], &[&input]),
        &out,
        &["--memory-limit", "12Q", "unknown unit"],
    );
    assert_fails(
        &mut run_cmd(&out, &["--table-rounds", "0"], &[&input]),
        &out,
        &["--table-rounds", "at least 1"],
    );
    assert!(!out.exists(), "nothing is created for a refused run");
}

#[test]
fn a_memory_limit_sets_the_rounds_or_spills_when_they_cannot_meet_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&main_docs()));
    let base = dir.path().join("base");
    run_ok(&base, &["--memory-limit", "none"], &[&input]);
    let plan = &summary(&base)["search_plan"];
    assert_eq!(plan["rounds"], 1, "{plan}");
    assert!(plan["memory_limit"].is_null());
    // 4 workers and a limit only rounds that send each fingerprint to one worker can meet:
    // rounds of one table each, or of one route group of manku16 (4 tables sharing a 16-bit
    // block, dataflow/src/stages/near/keys.rs), so 4 rounds.
    let (n, w) = (plan["fingerprints"].as_u64().unwrap(), 4u64);
    // See dataflow/src/stages/near/rounds.rs: the search plans within 0.3 of the limit.
    let one_table_rounds = n * 96 + n * 24 + n * 24;
    let out = dir.path().join("rounds");
    let limit = (one_table_rounds * 10 / 3 + 10).to_string();
    run_ok(&out, &["-w", "4", "--memory-limit", &limit], &[&input]);
    let plan = &summary(&out)["search_plan"];
    assert_eq!(plan["rounds"], 4, "{plan} (workers {w})");
    assert_eq!(pairs(&out), pairs(&base));
    // A limit no number of rounds can meet: the search spills, here to --spill-dir.
    let out = dir.path().join("tight");
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let limit = (n * 96).to_string();
    let spill_dir = scratch.to_str().unwrap();
    run_ok(
        &out,
        &["--memory-limit", &limit, "--spill-dir", spill_dir],
        &[&input],
    );
    let summary_json = summary(&out);
    let plan = &summary_json["search_plan"];
    assert_eq!(plan["rounds"], 1, "{plan}");
    assert_eq!(plan["spill_partition_bits"], 0, "{plan}");
    let spilled = summary_json["counts"]["spilled_bytes"].as_u64().unwrap();
    // Every (fingerprint, table) entry once, and some of the waiting fingerprints (24 bytes).
    assert!(
        (16 * n * 24..17 * n * 24).contains(&spilled),
        "{spilled} bytes for {n} fingerprints"
    );
    assert_eq!(pairs(&out), pairs(&base));
    assert_eq!(
        std::fs::read_dir(&scratch).unwrap().count(),
        0,
        "spill removed"
    );
    // A limit below what even the spilled search needs: it goes ahead and says so.
    let out = dir.path().join("tiny");
    let output = run_ok(&out, &["--memory-limit", "1K"], &[&input]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--memory-limit 1.0 KiB"), "{stderr}");
    let warnings = summary(&out)["warnings"].to_string();
    assert!(
        warnings.contains("spilled table search needs"),
        "{warnings}"
    );
    assert_eq!(pairs(&out), pairs(&base));
    assert!(!out.join("_spill").exists(), "spill removed");
}

#[test]
fn keep_max_column_keeps_the_largest_value_and_missing_values_rank_last() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SeededRng::new(11);
    let a = rng.words(40).join(" ");
    let b = rng.words(40).join(" ");
    let records = [
        json!({"id": 0, "text": a, "score": 1.5}),
        json!({"id": 1, "text": a.to_uppercase(), "score": 7}),
        json!({"id": 2, "text": format!("{a}."), "score": "3"}),
        json!({"id": 3, "text": format!("{a}!")}),
        json!({"id": 4, "text": b}),
        json!({"id": 5, "text": b.to_uppercase(), "score": null}),
        json!({"id": 6, "text": format!("{b}!"), "score": -1}),
    ];
    let data: Vec<u8> = records
        .iter()
        .flat_map(|r| format!("{r}\n").into_bytes())
        .collect();
    let input = write(&dir.path().join("scored.jsonl"), &data);
    let out = dir.path().join("out");
    run_ok(&out, &["--keep", "max:score"], &[&input]);
    let kept: Vec<u64> = clusters(&out)
        .iter()
        .filter(|c| c.keep)
        .map(|c| c.doc_id)
        .collect();
    assert_eq!(kept, [1, 6], "7 is the largest score; -1 beats no score");

    let out = dir.path().join("out-min");
    run_ok(&out, &["--keep", "min:score"], &[&input]);
    let kept: Vec<u64> = clusters(&out)
        .iter()
        .filter(|c| c.keep)
        .map(|c| c.doc_id)
        .collect();
    assert_eq!(kept, [0, 6]);

    // A score that is not a number is a record error.
    let bad = file_with_bad_line(
        dir.path(),
        "bad-score.jsonl",
        br#"{"id": 4, "text": "x y", "score": "high"}"#,
    );
    let out = dir.path().join("out-bad");
    assert_fails(
        &mut run_cmd(&out, &["--keep", "max:score"], &[&bad]),
        &out,
        &[&format!("{}:5: ", bad.display()), r#"field "score""#],
    );
}

#[test]
fn keep_by_a_column_that_no_record_has_is_not_silently_ignored() {
    // `--keep max:score` over JSONL records none of which has `score` (a typo, or the wrong
    // corpus): every document ranks "last", so the policy silently becomes `first`. For
    // Parquet the same mistake is an error naming the column (see
    // parquet_without_the_named_column_is_an_error_naming_the_column).
    let dir = tempfile::tempdir().unwrap();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&main_docs()));
    let out = dir.path().join("out");
    let output = run_cmd(&out, &["--keep", "max:score"], &[&input])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The keep field is optional per record, but a field no record has is a mistake: the
    // run fails naming it, and leaves no _SUCCESS.
    assert!(
        stderr.contains("score"),
        "--keep max:score over records without `score` ran silently (exit {:?}):\n{stderr}",
        output.status.code()
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(!out.join("_SUCCESS").exists());
}

// ---------------------------------------------------------------------------------------
// --skip-invalid, duplicate ids

#[test]
fn skip_invalid_counts_and_reports_bad_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SeededRng::new(5);
    let shared = rng.words(30).join(" ");
    let mut data = Vec::new();
    data.extend(jsonl(&[doc(0, shared.clone())])); // line 1
    data.extend_from_slice(b"{\"id\": 1, \"text\": \"x\"\n"); // 2: malformed
    data.extend_from_slice(b"{\"id\": 2, \"text\": 5}\n"); // 3: not a string
    data.extend(jsonl(&[doc(3, shared.to_uppercase())])); // 4
    data.extend_from_slice(b"{\"text\": \"no id\"}\n"); // 5: no id
    data.extend_from_slice(b"{\"id\": 5, \"text\": \"\xff\"}\n"); // 6: invalid UTF-8
    data.extend(jsonl(&[doc(6, rng.words(30).join(" "))])); // 7
    let input = write(&dir.path().join("mixed.jsonl"), &data);
    let out = dir.path().join("out");
    let output = run_ok(&out, &["--skip-invalid", "-w", "2"], &[&input]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("skipped 4"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "first skipped record: {}:2: malformed JSON",
            input.display()
        )),
        "{stderr}"
    );

    let summary = summary(&out);
    assert_eq!(count(&summary, "skipped"), 4);
    assert_eq!(count(&summary, "documents"), 3);
    assert_eq!(summary["parameters"]["skip_invalid"], true);
    let examples: Vec<String> = summary["skip_examples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(examples.len(), 4);
    for (line, problem) in [
        (2, "malformed JSON"),
        (3, "expected a string"),
        (5, "no field \"id\""),
        (6, "invalid UTF-8"),
    ] {
        let prefix = format!("{}:{line}: ", input.display());
        assert!(
            examples
                .iter()
                .any(|e| e.starts_with(&prefix) && e.contains(problem)),
            "no example for line {line}: {examples:?}"
        );
    }
    // Skipped records are in no table; the others keep their line numbers.
    assert_eq!(doc_ids_of_fingerprints(&fingerprints(&out)), [0, 3, 6]);
    assert_eq!(clusters(&out).len(), 3);
    assert_eq!(pair_set(&pairs(&out)), BTreeSet::from([(0, 3)]));
}

#[test]
fn skip_examples_are_the_first_skipped_records_whatever_the_number_of_workers() {
    // Twelve bad lines (2 to 13) after one good one.
    let dir = tempfile::tempdir().unwrap();
    let mut data = jsonl(&[doc(0, "hello world")]);
    for _ in 0..12 {
        data.extend_from_slice(b"{bad\n");
    }
    let input = write(&dir.path().join("many-bad.jsonl"), &data);
    let want: Vec<String> = (2..7)
        .map(|line| format!("{}:{line}: ", input.display()))
        .collect();
    for w in ["1", "2", "4"] {
        let out = dir.path().join(format!("out-{w}"));
        let output = run_ok(&out, &["--skip-invalid", "-w", w], &[&input]);
        let summary = summary(&out);
        assert_eq!(count(&summary, "skipped"), 12);
        let got: Vec<String> = summary["skip_examples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                e.as_str()
                    .unwrap()
                    .split("malformed")
                    .next()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        // The examples are the first skipped records in input order ("FILE:2" before
        // "FILE:10"), whichever worker skipped them.
        assert_eq!(got, want, "skip_examples with -w {w}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!("first skipped record: {}", want[0])),
            "-w {w}: {stderr}"
        );
    }
}

#[test]
fn duplicate_user_ids_are_allowed_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SeededRng::new(17);
    let docs: Vec<Doc> = ["x", "y", "x", "z", "x", "y"]
        .iter()
        .map(|id| doc(*id, rng.words(20).join(" ")))
        .collect();
    // Numbers and strings with the same text are the same id.
    let mut data = jsonl(&docs);
    data.extend(jsonl(&[
        doc(7, rng.words(20).join(" ")),
        doc("7", rng.words(20).join(" ")),
    ]));
    let input = write(&dir.path().join("ids.jsonl"), &data);
    for w in ["1", "3"] {
        let out = dir.path().join(format!("out-{w}"));
        run_ok(&out, &["-w", w], &[&input]);
        let summary = summary(&out);
        assert_eq!(count(&summary, "duplicate_ids"), 4, "-w {w}");
        assert_eq!(count(&summary, "documents"), 8);
        let ids: Vec<Option<String>> = fingerprints(&out).into_iter().map(|f| f.id).collect();
        assert_eq!(ids[4].as_deref(), Some("x"));
        assert_eq!(ids[6].as_deref(), Some("7"));
    }
    // Without ids, the id column is null.
    let out = dir.path().join("out-no-id");
    run_ok(&out, &["--no-id"], &[&input]);
    assert!(fingerprints(&out).iter().all(|f| f.id.is_none()));
    assert_eq!(count(&summary(&out), "duplicate_ids"), 0);
}

// ---------------------------------------------------------------------------------------
// Logging and help

#[test]
fn quiet_prints_nothing_on_success() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&main_docs()));
    let out = dir.path().join("out");
    run_cmd(&out, &["--quiet", "-w", "2"], &[&input])
        .assert()
        .success()
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::is_empty());
    assert!(out.join("_SUCCESS").is_file());
}

#[test]
fn json_log_format_writes_json_lines_ending_with_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(&dir.path().join("corpus.jsonl"), &jsonl(&main_docs()));
    let out = dir.path().join("out");
    let output = run_ok(&out, &["--log-format", "json", "-w", "2"], &[&input]);
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8(output.stderr).unwrap();
    let events: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect();
    let last = events.last().expect("at least the summary");
    assert_eq!(last["event"], "summary");
    assert_eq!(last["summary"]["counts"], summary(&out)["counts"]);
    assert_eq!(last["summary"]["counts"]["documents"], main_corpus::LEN);
    for e in &events[..events.len() - 1] {
        assert_eq!(e["event"], "progress", "{e}");
    }

    // A failed run ends with a `failed` event, then the error line.
    let bad = file_with_bad_line(dir.path(), "bad.jsonl", b"{");
    let out = dir.path().join("out-bad");
    let stderr = assert_fails(
        &mut run_cmd(&out, &["--log-format", "json"], &[&bad]),
        &out,
        &["malformed JSON"],
    );
    let failed: Vec<Value> = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1, "{stderr}");
}

#[test]
fn run_help_has_examples_and_the_hostfile_flag() {
    for args in [&["run", "--help"][..], &["help", "run"][..]] {
        neardup().args(args).assert().success().stdout(
            predicate::str::contains("Examples")
                .and(predicate::str::contains("-h, --hostfile"))
                .and(predicate::str::contains("docs/outputs.md")),
        );
    }
    neardup()
        .args(["search", "--help"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("Examples").and(predicate::str::contains("-h, --hostfile")),
        );
}

/// A keep column may be a float Parquet column; a null value ranks last.
#[test]
fn keep_max_reads_a_float_parquet_column() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SeededRng::new(23);
    let a = rng.words(40).join(" ");
    let path = dir.path().join("scored.parquet");
    write_parquet(
        &path,
        vec![
            ("id", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
            (
                "text",
                Arc::new(StringArray::from(vec![
                    a.clone(),
                    a.to_uppercase(),
                    format!("{a}!"),
                ])) as ArrayRef,
            ),
            (
                "score",
                Arc::new(Float64Array::from(vec![Some(0.5), None, Some(2.5)])) as ArrayRef,
            ),
        ],
        2,
    );
    let out = dir.path().join("out");
    run_ok(&out, &["--keep", "max:score", "-w", "2"], &[&path]);
    let kept: Vec<u64> = clusters(&out)
        .iter()
        .filter(|c| c.keep)
        .map(|c| c.doc_id)
        .collect();
    assert_eq!(kept, [2]);
    assert_eq!(count(&summary(&out), "documents_to_remove"), 2);
}
