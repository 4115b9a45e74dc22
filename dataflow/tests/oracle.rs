//! The job against from-scratch oracles: brute-force pairs and components, on planted
//! random fingerprints and on the dev-small corpus, at 1, 2 and 4 workers.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use common::{read_clusters, read_pairs, PairSet};
use std::sync::Arc;

use neardup_core::mix::splitmix64;
use neardup_core::search::{brute_force_pairs, Item};
use neardup_core::unionfind::UnionFind;
use neardup_core::{Fingerprinter, Scheme, TableDesign};
use neardup_dataflow::{run_job, JobConfig, JobInput, KeepPolicy, Parallelism, Progress};
use neardup_io::input::expand_inputs;
use neardup_io::parquet_out::{FingerprintRow, PartWriter};
use neardup_io::record::FieldSpec;

/// Components of the brute-force graph, labelled by their smallest member.
fn oracle_components(docs: &[u64], pairs: &[(u64, u64)]) -> BTreeMap<u64, (i64, u32)> {
    let mut uf = UnionFind::new();
    for &(a, b) in pairs {
        uf.union(a, b);
    }
    let labels: HashMap<u64, u64> = uf.components_by_min().into_iter().collect();
    let mut sizes: HashMap<u64, u32> = HashMap::new();
    for l in labels.values() {
        *sizes.entry(*l).or_default() += 1;
    }
    docs.iter()
        .map(|d| match labels.get(d) {
            Some(l) => (*d, (*l as i64, sizes[l])),
            None => (*d, (-1, 1)),
        })
        .collect()
}

/// What `pairs/` lists (docs/outputs.md): one representative per distinct fingerprint (its
/// smallest doc), every pair within `k` among the representatives, and every other document
/// with a fingerprint paired with its representative at distance 0.
fn listed_pairs(items: &[Item], k: u32) -> PairSet {
    let mut groups: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for it in items {
        groups.entry(it.fp).or_default().push(it.doc);
    }
    let mut reps = Vec::new();
    let mut listed = PairSet::new();
    for (&fp, docs) in groups.iter_mut() {
        docs.sort_unstable();
        reps.push(Item { fp, doc: docs[0] });
        for &m in &docs[1..] {
            listed.insert((docs[0], m, 0, "near".to_string()));
        }
    }
    listed.extend(
        brute_force_pairs(&reps, k)
            .into_iter()
            .map(|p| (p.doc_a, p.doc_b, p.hamming as u8, "near".to_string())),
    );
    listed
}

fn run(config: JobConfig) -> neardup_dataflow::JobSummary {
    run_job(config, Arc::new(Progress::default()))
        .expect("job succeeds")
        .summary
}

fn planted_fingerprints(dir: &Path, n: usize, k: u32) -> Vec<Item> {
    let mut state = 42u64;
    let mut items = Vec::new();
    while items.len() < n {
        let base = splitmix64(&mut state);
        let family = 1 + splitmix64(&mut state) % 4;
        for _ in 0..family {
            let mut fp = base;
            for _ in 0..splitmix64(&mut state) % (k as u64 + 2) {
                fp ^= 1 << (splitmix64(&mut state) % 64);
            }
            // Sparse, unordered doc ids, as a previous run's table would have.
            let doc = (splitmix64(&mut state) % 1000) << 40 | items.len() as u64;
            items.push(Item { fp, doc });
        }
    }
    // A hot clump: 1500 fingerprints sharing their top 40 bits.
    for i in 0..1500u64 {
        items.push(Item {
            fp: (0x0012_3456_789a_u64 << 24) | (splitmix64(&mut state) & 0xff_ffff),
            doc: (7 << 40) | (1_000_000 + i),
        });
    }
    // A dense group (templated pages): 1000 equal fingerprints, 300 equal to another one 2
    // bits away, and 20 one or two bits from the first.
    let dense = splitmix64(&mut state);
    for i in 0..1320u64 {
        let fp = match i {
            0..1000 => dense,
            1000..1300 => dense ^ 0b101,
            _ => dense ^ (1 << (i % 64)) ^ ((i % (k as u64 + 2) > 1) as u64) << 40,
        };
        let doc = (splitmix64(&mut state) % 1000) << 40 | (2_000_000 + i);
        items.push(Item { fp, doc });
    }
    std::fs::create_dir_all(dir).unwrap();
    // Tagged as neardup tags simhash-doc fingerprints.
    let meta = neardup_io::parquet_out::TableMeta {
        scheme: "simhash-doc".into(),
        params: serde_json::json!({"fingerprint": {"method": "simhash"}}),
    };
    let mut writer = PartWriter::<FingerprintRow>::create(dir, 0, &meta).unwrap();
    for it in &items {
        writer
            .push(FingerprintRow {
                doc_id: it.doc,
                id: None,
                source: "x".into(),
                record: 0,
                simhash: it.fp,
                n_tokens: 1,
                bytes: it.doc % 977,
                empty: false,
                ..Default::default()
            })
            .unwrap();
    }
    writer.commit().unwrap();
    items
}

#[test]
fn search_equals_brute_force_on_planted_fingerprints_at_any_parallelism() {
    let tmp = tempfile::tempdir().unwrap();
    // k = 0 keys on all 64 bits and k = 1 on 32 (the two sort paths); blocks:9 at k = 5 has
    // 126 tables, more than one record's 64 lanes.
    for (k, design) in [
        (0u32, None),
        (1, None),
        (3, None),
        (6, None),
        (5, Some("blocks:9")),
    ] {
        let fps_dir = tmp.path().join(format!("fps-{k}"));
        let items = planted_fingerprints(&fps_dir, 4000, k);
        let expected = listed_pairs(&items, k);
        let docs: Vec<u64> = items.iter().map(|i| i.doc).collect();
        // The components of every pair within k, not only of the pairs listed.
        let all: Vec<(u64, u64)> = brute_force_pairs(&items, k)
            .iter()
            .map(|p| (p.doc_a, p.doc_b))
            .collect();
        let expected_clusters = oracle_components(&docs, &all);
        assert!(
            expected.len() * 10 < all.len(),
            "k={k}: the dense group makes most pairs within k, and few are listed"
        );
        let mut first_keep = None;
        for workers in [1, 2, 4] {
            let out = tmp.path().join(format!("out-{k}-{workers}"));
            let files = vec![fps_dir.join("part-00000.parquet")];
            let mut config = JobConfig::new(JobInput::Fingerprints { files }, out.clone());
            config.cluster = neardup_dataflow::config::ClusterMode::Components;
            config.design = match design {
                Some(spec) => TableDesign::parse(spec, k).unwrap(),
                None => TableDesign::for_k(k).unwrap(),
            };
            config.keep = KeepPolicy::Longest;
            config.parallelism = Parallelism::local(workers);
            let summary = run(config);
            assert!(out.join("_SUCCESS").exists());
            let pairs = read_pairs(&out);
            let set: PairSet = pairs.iter().cloned().collect();
            assert_eq!(
                pairs.len(),
                set.len(),
                "k={k} w={workers}: a pair was reported twice"
            );
            assert_eq!(set, expected, "k={k} w={workers}");
            assert_eq!(summary.counts.near_pairs as usize, expected.len());
            let clusters = read_clusters(&out);
            let got: BTreeMap<u64, (i64, u32)> = clusters
                .iter()
                .map(|(d, (c, s, _))| (*d, (*c, *s)))
                .collect();
            assert_eq!(got, expected_clusters, "k={k} w={workers}");
            // Keep: exactly one per cluster, the longest (bytes = doc % 977), ties to smaller id.
            let keep: BTreeMap<u64, bool> =
                clusters.iter().map(|(d, (_, _, k))| (*d, *k)).collect();
            let mut best: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
            for (d, (c, _, _)) in &clusters {
                if *c >= 0 {
                    let cand = (u64::MAX - d % 977, *d);
                    best.entry(*c)
                        .and_modify(|b| *b = (*b).min(cand))
                        .or_insert(cand);
                }
            }
            for (d, (c, _, k)) in &clusters {
                assert_eq!(*k, *c < 0 || best[c].1 == *d, "doc {d}");
            }
            match &first_keep {
                None => first_keep = Some(keep),
                Some(f) => assert_eq!(f, &keep, "keep differs at {workers} workers"),
            }
            assert!(
                summary.counts.bucket_splits > 0 || k != 3,
                "the hot clump must be split"
            );
        }
    }
}

#[test]
fn search_in_rounds_equals_brute_force() {
    let tmp = tempfile::tempdir().unwrap();
    let fps_dir = tmp.path().join("fps");
    let items = planted_fingerprints(&fps_dir, 3000, 3);
    let expected = listed_pairs(&items, 3);
    // The last case leaves the rounds to a memory limit that 4 workers can meet only in
    // several rounds (each fingerprint goes to up to 4 workers at once: manku16's 4 route
    // groups; to 2 in rounds of 8 tables, to 1 in rounds of 4).
    let design = neardup_core::tables::TableDesign::manku16();
    let shape = neardup_dataflow::stages::near::rounds::SearchShape {
        fingerprints: items.len() as u64,
        lanes: 16,
        bands: false,
        workers: 4,
        workers_here: 4,
        routes: neardup_dataflow::stages::near::keys::route_groups(design.masks())
            .into_iter()
            .map(|(group, _)| group)
            .collect(),
        min_partition_entries: neardup_dataflow::config::MIN_PARTITION_ENTRIES,
    };
    // The search plans within its share of the limit.
    let search = shape.estimate(4);
    let share = neardup_dataflow::stages::near::rounds::SEARCH_SHARE;
    let limit = (search as f64 / share).ceil() as u64 + 1;
    for (workers, rounds, memory_limit) in [
        (1, Some(4), None),
        (2, Some(5), None),
        (3, Some(16), None),
        (4, None, Some(limit)),
    ] {
        let out = tmp.path().join(format!("w{workers}r{rounds:?}"));
        let files = vec![fps_dir.join("part-00000.parquet")];
        let mut config = JobConfig::new(JobInput::Fingerprints { files }, out.clone());
        config.parallelism = Parallelism::local(workers);
        config.table_rounds = rounds;
        config.memory_limit = memory_limit;
        let summary = run(config);
        let plan = summary.search_plan.clone().expect("a search plan");
        assert_eq!(plan.fingerprints, items.len() as u64);
        let rounds = rounds.unwrap_or(plan.rounds);
        assert_eq!(plan.rounds, rounds);
        if memory_limit.is_some() {
            // 4 rounds of 4 tables: the fewest that send a fingerprint to one worker at a
            // time, and fit.
            assert_eq!(rounds, 4, "{plan:?}");
            assert!(plan.estimated_bytes <= search, "{plan:?}");
        }
        let pairs = read_pairs(&out);
        let set: PairSet = pairs.iter().cloned().collect();
        assert_eq!(pairs.len(), set.len(), "a pair reported twice");
        assert_eq!(set, expected, "{workers} workers, {rounds} rounds");
        assert_eq!(summary.counts.table_records, 16 * items.len() as u64);
    }
}

#[test]
fn spilled_search_equals_brute_force() {
    let tmp = tempfile::tempdir().unwrap();
    let fps_dir = tmp.path().join("fps");
    let items = planted_fingerprints(&fps_dir, 3000, 3);
    let expected = listed_pairs(&items, 3);
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    // A limit of a few KiB spills everything: the waiting fingerprints, and every table's
    // entries into partitions of at most 32 on average (so 7 or 8 key bits each; twice that
    // before one is split again), and the hot clump
    // (1500 fingerprints sharing 40 bits) is split again and again.
    for (workers, rounds, spill_dir) in [
        (1, None, None),
        (2, Some(3), Some(&scratch)),
        (4, None, Some(&scratch)),
    ] {
        let out = tmp.path().join(format!("w{workers}r{rounds:?}"));
        let files = vec![fps_dir.join("part-00000.parquet")];
        let mut config = JobConfig::new(JobInput::Fingerprints { files }, out.clone());
        config.parallelism = Parallelism::local(workers);
        config.table_rounds = rounds;
        config.memory_limit = Some(4096);
        config.spill_min_partition = 32;
        config.spill_dir = spill_dir.cloned();
        let summary = run(config);
        let plan = summary.search_plan.clone().expect("a search plan");
        assert_eq!(plan.rounds, rounds.unwrap_or(1), "{plan:?}");
        let bits = plan.spill_partition_bits.expect("spilled");
        let per_table = items.len().div_ceil(workers) as u64;
        assert!(
            per_table >> bits <= 32 && per_table >> (bits - 1) > 32,
            "{plan:?}"
        );
        // Every (fingerprint, table) entry went to disk, and the fingerprints too.
        let entries = 16 * items.len() as u64;
        assert!(
            summary.counts.spilled_bytes > entries * 24,
            "{}",
            summary.counts.spilled_bytes
        );
        assert!(summary.counts.bucket_splits > 0, "the hot clump is split");
        let pairs = read_pairs(&out);
        let set: PairSet = pairs.iter().cloned().collect();
        assert_eq!(pairs.len(), set.len(), "a pair reported twice");
        assert_eq!(set, expected, "{workers} workers, {rounds:?} rounds");
        // Nothing of the spill is left behind.
        assert!(!out.join("_spill").exists());
        assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
        assert!(out.join("_SUCCESS").exists());
    }
}

/// Stars with equal fingerprints folded: every document of one fingerprint has its
/// representative's neighbours, so the group founds or joins a star as one; the stars are
/// those of every pair within k (the pairs at distance 0 linking one fingerprint's
/// documents into one unit), under both rules for the centers, and a keep policy that
/// prefers other members than the representatives (the longest, `bytes` = doc % 977).
#[test]
fn stars_of_folded_fingerprints_equal_those_of_all_pairs() {
    use neardup_core::star::{stars, Centers, Link, LinkKind};
    use neardup_dataflow::config::ClusterMode;
    let tmp = tempfile::tempdir().unwrap();
    let fps_dir = tmp.path().join("fps");
    let items = planted_fingerprints(&fps_dir, 2000, 3);
    let all: Vec<Link> = brute_force_pairs(&items, 3)
        .iter()
        .map(|p| Link {
            a: p.doc_a,
            b: p.doc_b,
            kind: match p.hamming {
                0 => LinkKind::SameFingerprint,
                _ => LinkKind::Near,
            },
            hamming: p.hamming as u8,
            jaccard: None,
        })
        .collect();
    let ranks: fxhash::FxHashMap<u64, u64> = all
        .iter()
        .flat_map(|l| [l.a, l.b])
        .map(|d| (d, u64::MAX - d % 977))
        .collect();
    for (mode, centers) in [
        (ClusterMode::Star, Centers::Rank),
        (ClusterMode::Verified, Centers::Coverage),
    ] {
        let expected: BTreeMap<u64, (i64, bool)> = stars(&ranks, &all, centers)
            .into_iter()
            .map(|m| (m.doc, (m.cluster as i64, m.kept == m.doc)))
            .collect();
        assert!(expected.values().any(|&(_, keep)| !keep));
        for workers in [1, 2] {
            let out = tmp.path().join(format!("{mode:?}-w{workers}"));
            let files = vec![fps_dir.join("part-00000.parquet")];
            let mut config = JobConfig::new(JobInput::Fingerprints { files }, out.clone());
            config.keep = KeepPolicy::Longest;
            config.cluster = mode;
            config.parallelism = Parallelism::local(workers);
            run(config);
            let got: BTreeMap<u64, (i64, bool)> = read_clusters(&out)
                .into_iter()
                .filter(|(_, (c, _, _))| *c >= 0)
                .map(|(d, (c, _, keep))| (d, (c, keep)))
                .collect();
            assert_eq!(got, expected, "{mode:?}, {workers} workers");
        }
    }
}

fn dev_small() -> Option<PathBuf> {
    common::shared_corpus("dev-small").map(|dir| dir.join("corpus.jsonl"))
}

#[test]
fn dev_small_equals_brute_force_at_any_parallelism() {
    let Some(corpus) = dev_small() else {
        return;
    };
    // The oracle: fingerprint every document sequentially, compare all pairs.
    let mut fingerprinter = Fingerprinter::new(Scheme::simhash_doc());
    let mut items = Vec::new();
    let mut exact: HashMap<u128, u64> = HashMap::new();
    let mut empty = 0;
    let text = std::fs::read_to_string(&corpus).unwrap();
    for (line, json) in text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        let fp = fingerprinter.fingerprint(v["text"].as_str().unwrap());
        let doc = line as u64; // file 0
        if fp.is_empty() {
            empty += 1;
            continue;
        }
        exact
            .entry(fp.exact_key)
            .and_modify(|m| *m = (*m).min(doc))
            .or_insert(doc);
        items.push(Item {
            fp: fp.simhash,
            doc,
        });
    }
    let all_pairs: Vec<(u64, u64)> = brute_force_pairs(&items, 3)
        .into_iter()
        .map(|p| (p.doc_a, p.doc_b))
        .collect();
    let n_docs = text.lines().count() as u64;
    let expected_clusters = oracle_components(&(0..n_docs).collect::<Vec<_>>(), &all_pairs);
    let fps: HashMap<u64, u64> = items.iter().map(|i| (i.doc, i.fp)).collect();

    let tmp = tempfile::tempdir().unwrap();
    let mut outputs = Vec::new();
    for workers in [1, 2, 4] {
        let out = tmp.path().join(format!("w{workers}"));
        let files = expand_inputs(&[corpus.display().to_string()], false).unwrap();
        let fields = FieldSpec {
            text_field: "text".into(),
            id_field: Some("id".into()),
            extra_field: None,
            ..Default::default()
        };
        let mut config = JobConfig::new(JobInput::Documents { files, fields }, out.clone());
        config.cluster = neardup_dataflow::config::ClusterMode::Components;
        config.parallelism = Parallelism::local(workers);
        let summary = run(config);
        assert_eq!(summary.counts.documents, n_docs);
        assert_eq!(summary.counts.empty, empty);
        let pairs = read_pairs(&out);
        let set: PairSet = pairs.iter().cloned().collect();
        assert_eq!(set.len(), pairs.len(), "w={workers}: duplicate pair rows");
        for (a, b, h, kind) in &pairs {
            assert!(a < b);
            assert_eq!(
                *h as u32,
                neardup_core::hamming(fps[a], fps[b]),
                "stored distance"
            );
            assert!(*h <= 3, "pair beyond k");
            if kind == "exact" {
                assert_eq!(
                    exact[&fingerprint_key(&text, *b)],
                    *a,
                    "exact pairs link to the group's smallest doc"
                );
            }
        }
        let clusters = read_clusters(&out);
        let got: BTreeMap<u64, (i64, u32)> = clusters
            .iter()
            .map(|(d, (c, s, _))| (*d, (*c, *s)))
            .collect();
        assert_eq!(
            got, expected_clusters,
            "w={workers}: clusters differ from brute-force components"
        );
        outputs.push(set);
    }
    assert_eq!(outputs[0], outputs[1]);
    assert_eq!(outputs[0], outputs[2]);

    // The default, verified stars: those of every pair within k, computed from scratch
    // (exact copies and documents of one simhash as one unit each), at any parallelism.
    use neardup_core::star::{stars, Centers, Link, LinkKind};
    let key = |doc: u64| exact[&fingerprint_key(&text, doc)];
    let links: Vec<Link> = brute_force_pairs(&items, 3)
        .into_iter()
        .map(|p| Link {
            a: p.doc_a,
            b: p.doc_b,
            kind: match p.hamming {
                _ if key(p.doc_a) == key(p.doc_b) => LinkKind::Exact,
                0 => LinkKind::SameFingerprint,
                _ => LinkKind::Near,
            },
            hamming: p.hamming as u8,
            jaccard: None,
        })
        .collect();
    let ranks: fxhash::FxHashMap<u64, u64> =
        links.iter().flat_map(|l| [(l.a, 0), (l.b, 0)]).collect();
    let expected: BTreeMap<u64, (i64, bool)> = stars(&ranks, &links, Centers::Coverage)
        .into_iter()
        .map(|m| (m.doc, (m.cluster as i64, m.kept == m.doc)))
        .collect();
    for workers in [1, 3] {
        let out = tmp.path().join(format!("verified-w{workers}"));
        let files = expand_inputs(&[corpus.display().to_string()], false).unwrap();
        let fields = FieldSpec {
            text_field: "text".into(),
            id_field: Some("id".into()),
            extra_field: None,
            ..Default::default()
        };
        let mut config = JobConfig::new(JobInput::Documents { files, fields }, out.clone());
        config.parallelism = Parallelism::local(workers);
        let summary = run(config);
        let got: BTreeMap<u64, (i64, bool)> = read_clusters(&out)
            .into_iter()
            .filter(|(_, (c, _, _))| *c >= 0)
            .map(|(d, (c, _, keep))| (d, (c, keep)))
            .collect();
        assert_eq!(got, expected, "verified stars, {workers} workers");
        let removal = summary.removal.expect("a run's summary has its removal");
        assert_eq!(removal.removed_unmeasured, 0);
        assert!(removal.highest_hamming.is_some_and(|h| h <= 3));
        let components = oracle_components(&(0..n_docs).collect::<Vec<_>>(), &all_pairs);
        let removed_by_components = components.values().filter(|(c, _)| *c >= 0).count()
            - components
                .values()
                .filter(|(c, _)| *c >= 0)
                .map(|(c, _)| c)
                .collect::<std::collections::BTreeSet<_>>()
                .len();
        assert_eq!(
            removal.components_would_remove,
            removed_by_components as u64
        );
    }
}

fn fingerprint_key(text: &str, doc: u64) -> u128 {
    let line = text.lines().nth(doc as usize).unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    Fingerprinter::new(Scheme::simhash_doc())
        .fingerprint(v["text"].as_str().unwrap())
        .exact_key
}

#[test]
fn tfidf_fingerprints_equal_a_from_scratch_computation() {
    use arrow::array::AsArray;
    use arrow::datatypes::UInt64Type;
    use neardup_core::simhash::IdfTable;
    use neardup_core::Weighting;
    let Some(corpus) = dev_small() else {
        return;
    };
    let text = std::fs::read_to_string(&corpus).unwrap();
    let texts: Vec<String> = text
        .lines()
        .take(3000)
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let sample = tmp.path().join("sample.jsonl");
    std::fs::write(
        &sample,
        text.lines()
            .take(3000)
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    )
    .unwrap();
    // The oracle: document frequencies counted here, then every fingerprint.
    let mut set_fp = Fingerprinter::new(Scheme::simhash_doc());
    let mut df: HashMap<u64, u64> = HashMap::new();
    let mut documents = 0;
    for t in &texts {
        if !set_fp.fingerprint(t).is_empty() {
            documents += 1;
            for &h in set_fp.feature_set() {
                *df.entry(h).or_default() += 1;
            }
        }
    }
    let mut scheme = Scheme::simhash_doc();
    scheme.method = neardup_core::Method::Simhash(Weighting::TfIdf(Arc::new(
        IdfTable::from_document_frequencies(documents, df),
    )));
    let mut tfidf = Fingerprinter::new(scheme.clone());
    let expected: Vec<u64> = texts.iter().map(|t| tfidf.fingerprint(t).simhash).collect();
    for workers in [1, 3] {
        let out = tmp.path().join(format!("w{workers}"));
        let files = expand_inputs(&[sample.display().to_string()], false).unwrap();
        let fields = FieldSpec {
            text_field: "text".into(),
            id_field: Some("id".into()),
            extra_field: None,
            ..Default::default()
        };
        let mut config = JobConfig::new(JobInput::Documents { files, fields }, out.clone());
        config.scheme = scheme.clone();
        config.parallelism = Parallelism::local(workers);
        run(config);
        let mut got = vec![0u64; texts.len()];
        for b in common::read_parts(&out.join("fingerprints")) {
            let d = b
                .column_by_name("doc_id")
                .unwrap()
                .as_primitive::<UInt64Type>();
            let s = b
                .column_by_name("simhash")
                .unwrap()
                .as_primitive::<UInt64Type>();
            for i in 0..b.num_rows() {
                got[d.value(i) as usize] = s.value(i);
            }
        }
        assert_eq!(got, expected, "{workers} workers");
    }
    // And the weighting changes fingerprints (the test would pass vacuously otherwise).
    let plain: Vec<u64> = texts
        .iter()
        .map(|t| set_fp.fingerprint(t).simhash)
        .collect();
    assert!(plain.iter().zip(&expected).filter(|(a, b)| a != b).count() > texts.len() / 2);
}

/// A corpus of families: each a chain of 8 texts of 300 words, each text the one before with
/// 3 words substituted, so that neighbours on the chain have a Jaccard similarity (of word
/// 5-shingles) near 0.9, texts two apart near 0.8 (on both sides of it: the bands miss some
/// of those above), and texts further apart well below.
fn families(dir: &Path) -> (PathBuf, Vec<String>) {
    let mut state = 41u64;
    let word = |state: &mut u64| format!("w{}", splitmix64(state) % 50_000);
    let mut texts = Vec::new();
    for _ in 0..40 {
        let mut words: Vec<String> = (0..300).map(|_| word(&mut state)).collect();
        for _ in 0..8 {
            texts.push(words.join(" "));
            for _ in 0..3 {
                let at = (splitmix64(&mut state) % 300) as usize;
                words[at] = word(&mut state);
            }
        }
    }
    let path = dir.join("families.jsonl");
    let lines: Vec<String> = texts
        .iter()
        .map(|t| serde_json::json!({ "text": t }).to_string())
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    (path, texts)
}

/// MinHash with verification, the default clusters: every removed document's Jaccard
/// similarity with its kept one, recomputed from the two texts alone (`compare_texts`, as
/// `neardup compare` does), is at or above the threshold and is the one `clusters/` gives;
/// the pairs the bands missed are verified within components (some pass), and never let
/// more documents be kept than the search's pairs alone would; the result is the same at 1
/// and 3 workers.
#[test]
fn minhash_stars_remove_only_documents_alike_their_kept_one() {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Float32Type, UInt64Type};
    use neardup_core::star::{stars, Centers, Link, LinkKind};
    let tmp = tempfile::tempdir().unwrap();
    let (corpus, texts) = families(tmp.path());
    let mut first = None;
    for workers in [1, 3] {
        let out = tmp.path().join(format!("w{workers}"));
        let files = expand_inputs(&[corpus.display().to_string()], false).unwrap();
        let config = JobConfig::builder(
            JobInput::Documents {
                files,
                fields: FieldSpec::default(),
            },
            out.clone(),
        )
        .scheme(Scheme::minhash())
        .threshold(Some(0.8))
        .parallelism(Parallelism::local(workers))
        .build()
        .unwrap();
        let shingle = config.verify.unwrap().shingle;
        let summary = run(config);
        let removal = summary.removal.clone().unwrap();
        assert!(removal.unlinked_pairs_verified > 0, "{removal:?}");
        // clusters/: (doc, kept, jaccard) of every removed document.
        let mut removed = Vec::new();
        for b in common::read_parts(&out.join("clusters")) {
            let doc = b
                .column_by_name("doc_id")
                .unwrap()
                .as_primitive::<UInt64Type>();
            let kept = b
                .column_by_name("kept_doc_id")
                .unwrap()
                .as_primitive::<UInt64Type>();
            let j = b
                .column_by_name("jaccard")
                .unwrap()
                .as_primitive::<Float32Type>();
            for i in 0..b.num_rows() {
                if doc.value(i) != kept.value(i) {
                    assert!(j.is_valid(i), "doc {} has no similarity", doc.value(i));
                    removed.push((doc.value(i), kept.value(i), j.value(i)));
                }
            }
        }
        removed.sort_by_key(|r| r.0);
        assert_eq!(removed.len() as u64, summary.counts.documents_to_remove);
        for &(doc, kept, j) in &removed {
            let c = neardup_core::verdict::compare_texts(
                &Scheme::minhash(),
                shingle,
                &texts[doc as usize],
                &texts[kept as usize],
            );
            assert!(
                c.jaccard >= 0.8,
                "{doc} removed for {kept} at {}",
                c.jaccard
            );
            assert!(
                (c.jaccard - f64::from(j)).abs() < 1e-6,
                "{doc}: {} vs {j}",
                c.jaccard
            );
        }
        // The search's pairs alone would not keep fewer.
        let links: Vec<Link> = read_pairs(&out)
            .iter()
            .map(|(a, b, _, kind)| Link {
                a: *a,
                b: *b,
                kind: if kind == "exact" {
                    LinkKind::Exact
                } else {
                    LinkKind::Near
                },
                hamming: 0,
                jaccard: Some(0.9),
            })
            .collect();
        let ranks: fxhash::FxHashMap<u64, u64> =
            links.iter().flat_map(|l| [(l.a, 0), (l.b, 0)]).collect();
        let without = stars(&ranks, &links, Centers::Coverage)
            .iter()
            .filter(|m| m.doc != m.kept)
            .count();
        assert!(removed.len() >= without, "{} < {without}", removed.len());
        assert!(removed.len() as u64 <= removal.components_would_remove);
        match &first {
            None => first = Some(removed),
            Some(f) => assert_eq!(f, &removed, "{workers} workers"),
        }
    }
}

/// MinHash mode sends each document to its signature's worker before the exact stage, so
/// that the fold of equal signatures needs no exchange of its own: exact copies must still
/// meet there, and so must equal signatures. Texts that differ only in stop words have one
/// signature under different exact keys; copies that differ only in case have one exact
/// key. The counts of both folds, known from how the corpus was made, hold at 1 to 4
/// workers (a fold that missed a member on another worker would find it in the bands
/// instead, once per band).
#[test]
fn minhash_exact_copies_and_equal_signatures_meet_at_any_parallelism() {
    use neardup_core::features::StopWords;
    let tmp = tempfile::tempdir().unwrap();
    let mut state = 29u64;
    let mut texts = Vec::new();
    let (mut copies, mut variants) = (0u64, 0u64);
    for i in 0..40 {
        let words: Vec<String> = (0..60)
            .map(|_| format!("w{}", splitmix64(&mut state) % 50_000))
            .collect();
        texts.push(words.join(" "));
        if i % 2 == 0 {
            texts.push(words.join(" ").to_uppercase());
            copies += 1;
        }
        if i % 3 == 0 {
            for stop in ["the", "and"] {
                let mut with = words.clone();
                with.insert(20, stop.to_string());
                with.insert(45, stop.to_string());
                texts.push(with.join(" "));
                variants += 1;
            }
        }
    }
    let corpus = tmp.path().join("signatures.jsonl");
    let lines: Vec<String> = texts
        .iter()
        .map(|t| serde_json::json!({ "text": t }).to_string())
        .collect();
    std::fs::write(&corpus, lines.join("\n") + "\n").unwrap();
    for workers in 1..=4 {
        let files = expand_inputs(&[corpus.display().to_string()], false).unwrap();
        let config = JobConfig::builder(
            JobInput::Documents {
                files,
                fields: FieldSpec::default(),
            },
            tmp.path().join(format!("w{workers}")),
        )
        .scheme(Scheme::minhash().with_stop_words(StopWords::english()))
        .threshold(Some(0.8))
        .parallelism(Parallelism::local(workers))
        .build()
        .unwrap();
        let counts = run(config).counts;
        assert_eq!(
            (counts.exact_groups, counts.exact_duplicates),
            (copies, copies),
            "{workers} workers"
        );
        // Each variant is one candidate, with its signature's representative, and a pair:
        // the same shingles, so a Jaccard similarity of 1.
        assert_eq!(
            (counts.candidates, counts.near_pairs),
            (variants, variants),
            "{workers} workers"
        );
    }
}
