//! The service against brute force: random puts, replacements, deletes, queries,
//! checkpoints and restarts over a small index; after every step the answers, clusters,
//! neighbours and queries equal a from-scratch computation over the documents then present,
//! and a checkpoint's index holds exactly those documents with those clusters.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use neardup_core::unionfind::UnionFind;
use neardup_core::{hamming, TableDesign};
use neardup_io::index::{DocEntry, Index, IndexSpec, IndexWriter, NewGeneration, Verify};
use proptest::prelude::*;
use serde_json::json;

use super::*;

const K: u32 = 3;

/// A content: its fingerprint, digest, and whether it is empty.
#[derive(Clone, Copy, Debug)]
struct Content {
    simhash: u64,
    digest: u128,
    empty: bool,
}

/// Contents with many near neighbours: a few centres and copies a few bits away (some
/// within k of each other, some not), and one empty text.
fn pool() -> Vec<Content> {
    let mut rng = neardup_core::testing::SeededRng::new(7);
    let mut out = Vec::new();
    for _ in 0..3 {
        let centre = rng.next_u64();
        for flips in [0u32, 1, 2, 3, 4, 6] {
            let mut fp = centre;
            for b in 0..flips {
                fp ^= 1 << ((b * 11 + out.len() as u32 * 5) % 64);
            }
            out.push(Content {
                simhash: fp,
                digest: 1000 + out.len() as u128,
                empty: false,
            });
        }
    }
    out.push(Content {
        simhash: 0,
        digest: 1,
        empty: true,
    });
    out
}

/// A document of the model.
#[derive(Clone, Copy, Debug)]
struct Doc {
    doc: u64,
    content: usize,
    /// Whether the service knows its digest (the index's own documents: no).
    digest_known: bool,
}

#[derive(Clone, Debug)]
enum Op {
    Put(usize, usize),
    Delete(usize),
    Query(usize),
    Checkpoint,
    /// A restart; `true`: with the saved state removed first (computed again on start).
    Restart(bool),
    /// Waits for the background merge, if one runs, to be written: the next checkpoint
    /// commits it.
    AwaitMerge,
}

/// Ids 0..6 are written by the test, ids 6..9 are the index's.
fn id_name(i: usize) -> String {
    if i < 6 {
        format!("w{i}")
    } else {
        format!("b{}", i - 6)
    }
}

fn op(contents: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..6, 0..contents).prop_map(|(i, c)| Op::Put(i, c)),
        2 => (0usize..9).prop_map(Op::Delete),
        2 => (0..contents).prop_map(Op::Query),
        1 => Just(Op::Checkpoint),
        1 => any::<bool>().prop_map(Op::Restart),
        1 => Just(Op::AwaitMerge),
    ]
}

/// The model: every present document by id, and the index's one document without an id.
struct Model {
    pool: Vec<Content>,
    docs: BTreeMap<String, Doc>,
    anonymous: Vec<Doc>,
    used: BTreeSet<u64>,
}

impl Model {
    fn all(&self) -> Vec<(Option<&str>, Doc)> {
        let mut out: Vec<(Option<&str>, Doc)> = self
            .docs
            .iter()
            .map(|(id, d)| (Some(id.as_str()), *d))
            .chain(self.anonymous.iter().map(|d| (None, *d)))
            .collect();
        out.sort_by_key(|(_, d)| d.doc);
        out
    }

    /// Brute force: the non-empty present documents within k of `fp`, by doc number.
    fn within(&self, fp: u64, digest: u128, skip: Option<u64>) -> Vec<(u64, u32, bool)> {
        self.all()
            .into_iter()
            .filter(|(_, d)| !self.pool[d.content].empty && Some(d.doc) != skip)
            .map(|(_, d)| {
                let c = self.pool[d.content];
                (
                    d.doc,
                    hamming(c.simhash, fp),
                    d.digest_known && c.digest == digest,
                )
            })
            .filter(|&(_, h, _)| h <= K)
            .collect()
    }

    /// From scratch: union-find over the pairs within k; cluster = the smallest member,
    /// `(label, size)` of each document in a cluster of two or more.
    fn clusters(&self) -> HashMap<u64, (u64, u64)> {
        let docs: Vec<Doc> = self
            .all()
            .into_iter()
            .map(|(_, d)| d)
            .filter(|d| !self.pool[d.content].empty)
            .collect();
        let mut uf = UnionFind::new();
        for a in &docs {
            uf.find(a.doc);
            for b in &docs {
                if hamming(self.pool[a.content].simhash, self.pool[b.content].simhash) <= K {
                    uf.union(a.doc, b.doc);
                }
            }
        }
        let mut members: HashMap<u64, Vec<u64>> = HashMap::new();
        for d in &docs {
            members.entry(uf.find(d.doc)).or_default().push(d.doc);
        }
        let mut out = HashMap::new();
        for m in members.values().filter(|m| m.len() >= 2) {
            let label = *m.iter().min().unwrap();
            for &d in m {
                out.insert(d, (label, m.len() as u64));
            }
        }
        out
    }
}

fn make_base(dir: &Path, pool: &[Content]) -> Model {
    let spec = IndexSpec {
        scheme: "simhash-doc".into(),
        fingerprint: json!({"test": true}),
        design: TableDesign::for_k(K).unwrap(),
        minhash: None,
    };
    let mut writer = IndexWriter::create(dir, &spec).unwrap();
    // b0 and b1 are near copies, b2 is far, the fourth has no id, the fifth is empty.
    let contents = [0usize, 1, 12, 7, pool.len() - 1];
    let mut model = Model {
        pool: pool.to_vec(),
        docs: BTreeMap::new(),
        anonymous: Vec::new(),
        used: BTreeSet::new(),
    };
    let mut docs = Vec::new();
    for (i, &c) in contents.iter().enumerate() {
        let doc = Doc {
            doc: i as u64 * 3,
            content: c,
            digest_known: false,
        };
        let id = match i {
            3 => None,
            4 => Some("b-empty".to_string()),
            _ => Some(format!("b{i}")),
        };
        docs.push(DocEntry {
            doc_id: doc.doc,
            id: id.clone(),
            source: "base.jsonl".into(),
            url: None,
            simhash: pool[c].simhash,
            empty: pool[c].empty,
            cluster_id: None,
            ..Default::default()
        });
        model.used.insert(doc.doc);
        match id {
            Some(id) => {
                model.docs.insert(id, doc);
            }
            None => model.anonymous.push(doc),
        }
    }
    writer
        .add(NewGeneration {
            files: 1,
            docs,
            cluster_changes: Vec::new(),
            keep: None,
            decisions: None,
        })
        .unwrap();
    model
}

fn open(dir: &Path) -> Service {
    open_merging(dir, MERGE_LIMIT)
}

/// The service, its checkpoints merging at most `merge_limit` documents themselves (0: every
/// merge in the background).
fn open_merging(dir: &Path, merge_limit: u64) -> Service {
    Service::open(Config {
        index: dir.to_path_buf(),
        checkpoint_interval: None,
        merge_limit,
    })
    .unwrap()
}

/// Waits until no background merge is being written.
fn await_merge(service: &Service) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while service.stats().merge_running {
        assert!(std::time::Instant::now() < deadline, "a merge ran for 30 s");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Everything the service answers about the documents present equals the model.
fn check_state(service: &Service, model: &Model) -> Result<(), TestCaseError> {
    let clusters = model.clusters();
    for (id, d) in &model.docs {
        let info = service.get(id).expect("a present document");
        prop_assert_eq!(info.doc_id, d.doc, "{}", id);
        let c = model.pool[d.content];
        prop_assert_eq!(info.empty, c.empty);
        let (label, size) = match clusters.get(&d.doc) {
            Some(&(l, s)) => (Some(l), s),
            None => (None, 1),
        };
        prop_assert_eq!(
            (info.cluster_id, info.cluster_size),
            (label, size),
            "{}",
            id
        );
        let expected: Vec<(u64, u32, bool)> = if c.empty {
            Vec::new()
        } else {
            model
                .within(c.simhash, c.digest, Some(d.doc))
                .into_iter()
                .map(|(doc, h, exact)| (doc, h, exact && d.digest_known))
                .collect()
        };
        let got: Vec<(u64, u32, bool)> = info
            .neighbours
            .iter()
            .map(|n| (n.doc_id, n.hamming, n.exact == Some(true)))
            .collect();
        prop_assert_eq!(got, expected, "neighbours of {}", id);
        for n in &info.neighbours {
            prop_assert_eq!(n.cluster_id, clusters.get(&n.doc_id).map(|c| c.0));
        }
    }
    for i in 0..9 {
        let id = id_name(i);
        if !model.docs.contains_key(&id) {
            prop_assert!(service.get(&id).is_none(), "{} is gone", id);
        }
    }
    let stats = service.stats();
    prop_assert_eq!(stats.documents, model.all().len() as u64);
    let mut labels: BTreeSet<u64> = BTreeSet::new();
    labels.extend(clusters.values().map(|c| c.0));
    prop_assert_eq!(stats.clusters, labels.len() as u64);
    prop_assert_eq!(stats.clustered_documents, clusters.len() as u64);
    Ok(())
}

/// A document as an index holds it: number, id, fingerprint, empty, cluster.
type IndexedDoc = (u64, Option<String>, u64, bool, Option<i64>);

/// The index a checkpoint wrote holds exactly the documents present, with their clusters.
fn check_index(dir: &Path, model: &Model) -> Result<(), TestCaseError> {
    // Its generations (the base, those of earlier checkpoints, merged or not) list the
    // documents present and no other (deleted ones keep their rows, unlisted).
    let index = Index::open(dir, Verify::Checksums).unwrap();
    let clusters = model.clusters();
    let got: Vec<IndexedDoc> = index
        .docs()
        .map(|v| {
            (
                v.doc_id,
                v.id.map(str::to_string),
                v.simhash,
                v.empty,
                v.cluster_id,
            )
        })
        .collect();
    let expected: Vec<IndexedDoc> = model
        .all()
        .into_iter()
        .map(|(id, d)| {
            let c = model.pool[d.content];
            (
                d.doc,
                id.map(str::to_string),
                c.simhash,
                c.empty,
                clusters.get(&d.doc).map(|c| c.0 as i64),
            )
        })
        .collect();
    prop_assert_eq!(got, expected);
    Ok(())
}

/// Runs `ops` against the model, the service's checkpoints merging at most `merge_limit`
/// documents themselves; returns the background merges committed, and the generations
/// the index has at the end.
fn run_ops(ops: Vec<Op>, merge_limit: u64) -> Result<(u64, usize), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let pool = pool();
    let mut model = make_base(&dir, &pool);
    let mut service = open_merging(&dir, merge_limit);
    let mut merges = 0;
    check_state(&service, &model)?;
    for op in ops {
        match op {
            Op::Put(i, c) => {
                let id = id_name(i);
                let content = pool[c];
                let replaced = model.docs.get(&id).map(|d| d.doc);
                let expected = if content.empty {
                    Vec::new()
                } else {
                    model.within(content.simhash, content.digest, replaced)
                };
                let answer = service
                    .write(Write::Put(NewDoc {
                        id: id.clone(),
                        simhash: content.simhash,
                        digest: content.digest,
                        empty: content.empty,
                        url: Some(format!("http://example.com/{i}")),
                        time: Some("2026-11-25T16:00:00Z".into()),
                    }))
                    .unwrap();
                let Answer::Put(answer) = answer else {
                    panic!("a put answered {answer:?}")
                };
                prop_assert!(model.used.insert(answer.doc_id), "doc number reused");
                prop_assert_eq!(answer.replaced, replaced);
                let got: Vec<(u64, u32, bool)> = answer
                    .matches
                    .iter()
                    .map(|m| (m.doc_id, m.hamming, m.exact == Some(true)))
                    .collect();
                prop_assert_eq!(&got, &expected);
                let status = if content.empty {
                    Status::Empty
                } else if expected.iter().any(|m| m.2) {
                    Status::Exact
                } else if expected.is_empty() {
                    Status::New
                } else {
                    Status::Near
                };
                prop_assert_eq!(answer.status, status);
                model.docs.insert(
                    id.clone(),
                    Doc {
                        doc: answer.doc_id,
                        content: c,
                        digest_known: true,
                    },
                );
                let clusters = model.clusters();
                let want = clusters
                    .get(&answer.doc_id)
                    .map_or((None, 1), |c| (Some(c.0), c.1));
                prop_assert_eq!((answer.cluster_id, answer.cluster_size), want);
            }
            Op::Delete(i) => {
                let id = id_name(i);
                let answer = service.write(Write::Delete(id.clone())).unwrap();
                let expected = model.docs.remove(&id).map(|d| DeleteAnswer {
                    id: id.clone(),
                    doc_id: d.doc,
                });
                prop_assert_eq!(answer, Answer::Delete(expected));
            }
            Op::Query(c) => {
                let content = pool[c];
                let got: Vec<(u64, u32, bool)> = service
                    .query(content.simhash, K, Some(content.digest))
                    .iter()
                    .map(|m| (m.doc_id, m.hamming, m.exact == Some(true)))
                    .collect();
                prop_assert_eq!(got, model.within(content.simhash, content.digest, None));
                // A smaller k gives the subset within it.
                let got: Vec<u64> = service
                    .query(content.simhash, 1, None)
                    .iter()
                    .map(|m| m.doc_id)
                    .collect();
                let want: Vec<u64> = model
                    .within(content.simhash, content.digest, None)
                    .iter()
                    .filter(|m| m.1 <= 1)
                    .map(|m| m.0)
                    .collect();
                prop_assert_eq!(got, want);
            }
            Op::Checkpoint => {
                service.checkpoint().unwrap();
                check_index(&dir, &model)?;
            }
            Op::AwaitMerge => await_merge(&service),
            Op::Restart(fresh) => {
                merges += service.stats().merges;
                service.shutdown().unwrap();
                drop(service);
                // A stop waits for the last checkpoint's state file (written in the
                // background): the next start maps it.
                let index = Index::open(&dir, Verify::Sizes).unwrap();
                let stamp = saved::stamp(index.manifest());
                prop_assert!(Saved::open(&dir, stamp, index.manifest().k).is_ok());
                if fresh {
                    std::fs::remove_file(dir.join(STATE_FILE)).unwrap();
                }
                service = open_merging(&dir, merge_limit);
            }
        }
        check_state(&service, &model)?;
    }
    // Whatever happened, a final checkpoint holds the documents present.
    service.checkpoint().unwrap();
    check_index(&dir, &model)?;
    merges += service.stats().merges;
    drop(service);
    let service = open(&dir);
    check_state(&service, &model)?;
    let generations = Index::open(&dir, Verify::Sizes).unwrap().generations();
    Ok((merges, generations))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn the_service_equals_brute_force_over_the_documents_present(
        ops in prop::collection::vec(op(19), 1..40),
        background in any::<bool>(),
    ) {
        // Half the cases merge only in the background.
        run_ops(ops, if background { 0 } else { MERGE_LIMIT })?;
    }
}

/// With every merge in the background, checkpoints that each add a generation: the merges
/// are written while writes go on and committed with the next checkpoint, the generations
/// stay few, and the index and the service hold exactly the documents present throughout.
#[test]
fn background_merges_keep_the_generations_few() {
    let mut ops = Vec::new();
    for round in 0..12 {
        ops.push(Op::Put(round % 6, round * 5 % 19));
        ops.push(Op::Put((round + 3) % 6, round * 7 % 19));
        ops.push(Op::Delete((round * 4) % 9));
        ops.push(Op::Checkpoint);
        ops.push(Op::AwaitMerge);
        if round == 6 {
            ops.push(Op::Restart(false));
        }
    }
    let (merges, generations) = run_ops(ops, 0).unwrap();
    assert!(merges >= 3, "{merges} background merges");
    // 13 generations without the merges (the base's and one a checkpoint).
    assert!(generations <= 4, "{generations} generations");
}

#[test]
fn a_replaced_bridge_splits_its_cluster_and_survives_a_restart() {
    let pool = pool();
    // Three contents a - b - c: a and c within k of b, not of each other.
    let near = |x: usize, y: usize| hamming(pool[x].simhash, pool[y].simhash) <= K;
    let n = pool.len() - 1;
    let (a, b, c) = (0..n)
        .flat_map(|a| (0..n).flat_map(move |b| (0..n).map(move |c| (a, b, c))))
        .find(|&(a, b, c)| a != c && near(a, b) && near(b, c) && !near(a, c))
        .expect("the pool has a bridge");
    let far = (0..n).find(|&f| !near(f, a) && !near(f, c)).unwrap();
    let ops = vec![
        Op::Put(0, a),
        Op::Put(1, b),
        Op::Put(2, c),
        Op::Restart(false),
        Op::Put(1, far),
        Op::Checkpoint,
        Op::Put(1, b),
        Op::Restart(true),
        Op::Delete(1),
        Op::Checkpoint,
        Op::Restart(false),
        // The bridge a document of the index: its saved cluster is split by a write.
        Op::Put(1, b),
        Op::Checkpoint,
        Op::Restart(false),
        Op::Put(1, far),
        Op::Restart(false),
        Op::Put(3, b),
        Op::Delete(0),
        Op::Checkpoint,
        Op::Delete(3),
        Op::Restart(true),
    ];
    run_ops(ops, MERGE_LIMIT).unwrap();
}

#[test]
fn a_log_left_by_a_crash_during_a_checkpoint_is_not_replayed_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let pool = pool();
    make_base(&dir, &pool);
    let service = open(&dir);
    let put = |id: &str, c: usize| {
        service
            .write(Write::Put(NewDoc {
                id: id.into(),
                simhash: pool[c].simhash,
                digest: pool[c].digest,
                empty: false,
                url: None,
                time: None,
            }))
            .unwrap()
    };
    put("x", 3);
    put("y", 8);
    let old_log = std::fs::read(dir.join(LOG_FILE)).unwrap();
    service.checkpoint().unwrap();
    let stats = service.stats();
    service.shutdown().unwrap();
    drop(service);
    let new_log = std::fs::read(dir.join(LOG_FILE)).unwrap();
    // As if the process had died after the checkpoint's manifest, before its new log was
    // renamed into place: the old log is not replayed over the generation holding it.
    std::fs::write(dir.join(LOG_FILE), &old_log).unwrap();
    std::fs::write(dir.join(NEXT_LOG_FILE), &new_log).unwrap();
    let service = open(&dir);
    let again = service.stats();
    assert_eq!(again.documents, stats.documents);
    assert_eq!(again.replayed_records, 0);
    assert_eq!(service.get("x").unwrap().doc_id, 1 << 40);
    assert!(!dir.join(NEXT_LOG_FILE).exists());
    // A put, then as if a checkpoint had died before its manifest: the log is replayed.
    service
        .write(Write::Put(NewDoc {
            id: "z".into(),
            simhash: pool[5].simhash,
            digest: pool[5].digest,
            empty: false,
            url: None,
            time: None,
        }))
        .unwrap();
    drop(service);
    let mut stray = new_log.clone();
    stray[16..24].copy_from_slice(&99u64.to_le_bytes());
    std::fs::write(dir.join(NEXT_LOG_FILE), &stray).unwrap();
    let service = open(&dir);
    assert_eq!(service.stats().replayed_records, 1);
    assert!(service.get("z").is_some());
    assert!(!dir.join(NEXT_LOG_FILE).exists());
    drop(service);
    // A log made over another state of the index is refused, naming the log.
    let mut writer = IndexWriter::open(&dir).unwrap();
    writer
        .add(NewGeneration {
            files: 1,
            docs: Vec::new(),
            cluster_changes: Vec::new(),
            keep: None,
            decisions: None,
        })
        .unwrap();
    drop(writer);
    let err = Service::open(Config {
        index: dir.clone(),
        checkpoint_interval: None,
        merge_limit: MERGE_LIMIT,
    })
    .err()
    .expect("a stale log is refused");
    assert!(
        matches!(err, ServiceError::StaleLog { records: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("serve.wal"), "{err}");
}

/// A put asked of the index before a checkpoint replaced it is asked again by the writer:
/// its answer has the document the checkpoint moved into the index (written before it, so
/// in neither the index it was asked of nor the documents written after the checkpoint).
#[test]
fn a_put_asked_before_a_checkpoint_is_asked_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let pool = pool();
    make_base(&dir, &pool);
    let service = open(&dir);
    let n = pool.len() - 1;
    let (a, b) = (0..n)
        .flat_map(|a| (0..n).map(move |b| (a, b)))
        .find(|&(a, b)| a != b && hamming(pool[a].simhash, pool[b].simhash) <= K)
        .expect("the pool has near copies");
    put_doc(&service, "w1", pool[a]);
    let asked = service.ask(pool[b].simhash);
    assert!(
        !asked.found.iter().any(|&(doc, _)| doc >> FILE_SHIFT != 0),
        "the index asked holds no written document"
    );
    service.checkpoint().unwrap();
    let fresh = service.ask(pool[b].simhash);
    assert!(!Arc::ptr_eq(&fresh.base, &asked.base));
    let expected: Vec<(u64, u32)> = service
        .query(pool[b].simhash, K, None)
        .iter()
        .map(|n| (n.doc_id, n.hamming))
        .collect();
    let w1 = service.get("w1").unwrap().doc_id;
    assert!(expected.iter().any(|&(doc, _)| doc == w1), "{expected:?}");
    let (tx, rx) = mpsc::channel();
    let write = Write::Put(NewDoc {
        id: "w2".into(),
        simhash: pool[b].simhash,
        digest: pool[b].digest,
        empty: false,
        url: None,
        time: None,
    });
    let reply = Box::new(move |answer| {
        let _ = tx.send(answer);
    });
    assert!(service
        .send(Job::Write((write, Some(asked), reply)))
        .is_none());
    let Answer::Put(put) = rx.recv().unwrap().unwrap() else {
        panic!("a put answered as a delete")
    };
    let found: Vec<(u64, u32)> = put.matches.iter().map(|n| (n.doc_id, n.hamming)).collect();
    assert_eq!(found, expected);
}

/// `prepare` writes the state a first start would compute, byte for byte, and records the
/// index's files as checked; over a current state it computes nothing.
#[test]
fn prepare_writes_the_state_a_first_start_computes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let pool = pool();
    let model = make_base(&dir, &pool);
    let done = prepare(&dir).unwrap().expect("a simhash index");
    assert!(done.computed);
    let clusters = model.clusters();
    let labels: BTreeSet<u64> = clusters.values().map(|&(label, _)| label).collect();
    assert!(!labels.is_empty(), "the base has near copies");
    let expected = (labels.len() as u64, clusters.len() as u64);
    assert_eq!((done.clusters, done.clustered), expected);
    assert!(dir
        .join(neardup_io::index::verified::VERIFIED_FILE)
        .is_file());
    let prepared = std::fs::read(dir.join(STATE_FILE)).unwrap();
    let again = prepare(&dir).unwrap().unwrap();
    assert!(!again.computed);
    assert_eq!(
        (again.clusters, again.clustered),
        (done.clusters, done.clustered)
    );
    std::fs::remove_file(dir.join(STATE_FILE)).unwrap();
    let service = open(&dir);
    service.shutdown().unwrap();
    assert_eq!(std::fs::read(dir.join(STATE_FILE)).unwrap(), prepared);
}

fn put_doc(service: &Service, id: &str, content: Content) -> PutAnswer {
    let answer = service
        .write(Write::Put(NewDoc {
            id: id.into(),
            simhash: content.simhash,
            digest: content.digest,
            empty: content.empty,
            url: None,
            time: None,
        }))
        .unwrap();
    match answer {
        Answer::Put(put) => put,
        other => panic!("a put answered {other:?}"),
    }
}

fn open_error(dir: &Path) -> String {
    match Service::open(Config {
        index: dir.to_path_buf(),
        checkpoint_interval: None,
        merge_limit: MERGE_LIMIT,
    }) {
        Ok(_) => panic!("the service opened"),
        Err(e) => e.to_string(),
    }
}

/// Writes `bytes` at `offset` of the file at `path` in place (the same inode: a map of it
/// sees the change), keeping its size.
fn overwrite(path: &Path, offset: u64, bytes: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.write_all(bytes).unwrap();
}

/// Issue 39, case 3: the service verifies the index's checksums on start (a flipped byte
/// of `docs.bin` would answer a wrong fingerprint; a flipped last byte of a table would
/// send a row past the documents), and a checkpoint verifies what it carries over, so that
/// a file changed under the running service is refused, not rewritten with new checksums.
#[test]
fn a_damaged_index_is_refused_on_start_and_never_checkpointed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let pool = pool();
    make_base(&dir, &pool);
    let generation = dir.join("gen-00000");
    let docs = generation.join("docs.bin");
    // Row 2's simhash: after the 64-byte header and the 5 doc numbers.
    let simhash_at = 64 + 8 * 5 + 2 * 8;
    let original = std::fs::read(&docs).unwrap();
    overwrite(&docs, simhash_at, &[original[simhash_at as usize] ^ 1]);
    let e = open_error(&dir);
    assert!(
        e.contains("gen-00000/docs.bin: damaged index: checksum"),
        "{e}"
    );
    std::fs::write(&docs, &original).unwrap();
    let table = generation.join("table-000.bin");
    let table_bytes = std::fs::read(&table).unwrap();
    let last = table_bytes.len() as u64 - 1;
    overwrite(&table, last, &[table_bytes[last as usize] ^ 0x80]);
    let e = open_error(&dir);
    assert!(e.contains("gen-00000/table-000.bin: damaged index"), "{e}");
    std::fs::write(&table, &table_bytes).unwrap();

    // Changed while the service runs: a checkpoint does not read or rewrite the base (it
    // writes the changes only), so the damage is never given new checksums; the next start
    // re-reads the changed file and refuses it.
    let service = open(&dir);
    let put = put_doc(&service, "w", pool[4]);
    overwrite(&docs, simhash_at, &[original[simhash_at as usize] ^ 1]);
    service.checkpoint().unwrap();
    drop(service);
    let e = open_error(&dir);
    assert!(
        e.contains("gen-00000/docs.bin: damaged index: checksum"),
        "{e}"
    );
    std::fs::write(&docs, &original).unwrap();
    let service = open(&dir);
    assert_eq!(service.get("w").unwrap().doc_id, put.doc_id);
    assert_eq!(service.stats().replayed_records, 0);

    // A checkpoint that merges a generation checks it first: a change to it under the
    // service is refused, the index stays as it was, and the log keeps the write.
    let written = dir.join("gen-00001").join("docs.bin");
    let bytes = std::fs::read(&written).unwrap();
    put_doc(&service, "x", pool[9]);
    let manifest = std::fs::read(dir.join(neardup_io::index::MANIFEST)).unwrap();
    // Its one document's simhash: after the header and the one doc number.
    overwrite(&written, 72, &[bytes[72] ^ 1]);
    let e = service.checkpoint().expect_err("refused").to_string();
    assert!(
        e.contains("gen-00001/docs.bin: damaged index: checksum"),
        "{e}"
    );
    assert_eq!(
        std::fs::read(dir.join(neardup_io::index::MANIFEST)).unwrap(),
        manifest
    );
    drop(service);
    std::fs::write(&written, &bytes).unwrap();
    let service = open(&dir);
    assert!(service.get("x").is_some());
    assert_eq!(service.stats().replayed_records, 1);
    service.checkpoint().unwrap();
    drop(service);
    Index::open(&dir, Verify::Checksums).unwrap();
}

/// Issue 39: a checkpoint with nothing to write (no write since the last one) writes no
/// generation and answers `null`, as docs/serve.md says.
#[test]
fn a_checkpoint_with_nothing_to_write_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let pool = pool();
    make_base(&dir, &pool);
    let manifest = || std::fs::read(dir.join(neardup_io::index::MANIFEST)).unwrap();
    let service = open(&dir);
    // The base's near copies b0 and b1 are clustered by the service, not in the index:
    // the first checkpoint has their cluster to write.
    assert!(service.checkpoint().unwrap().generation.is_some());
    let after = manifest();
    let again = service.checkpoint().unwrap();
    assert_eq!(again.generation, None);
    assert_eq!(again.documents, 5);
    assert_eq!(manifest(), after);
    // A delete of nothing is no write either.
    service.write(Write::Delete("nobody".into())).unwrap();
    assert_eq!(service.checkpoint().unwrap().generation, None);
    put_doc(&service, "w", pool[9]);
    assert!(service.checkpoint().unwrap().generation.is_some());
    let after = manifest();
    drop(service);
    let service = open(&dir);
    assert_eq!(service.checkpoint().unwrap().generation, None);
    assert_eq!(manifest(), after);
}

/// The log of the service at `dir` with `record` appended as a record with a good CRC;
/// returns the byte offset it is at.
fn append_forged(dir: &Path, record: &[u8]) -> u64 {
    let (mut wal, _) = Wal::open(&dir.join(LOG_FILE)).unwrap();
    let offset = wal.bytes();
    wal.append(&[record]).unwrap();
    wal.sync().unwrap();
    offset
}

/// Issue 39: a log record that passes its CRC but was not written so (forged, or damaged
/// before its CRC was made) is refused on replay, naming the log, the record and its
/// byte offset: a put repeating a document number, a put of another log's file, an id
/// whose length runs past the record.
#[test]
fn forged_log_records_are_refused_naming_their_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("idx");
    let pool = pool();
    make_base(&dir, &pool);
    let service = open(&dir);
    let first = put_doc(&service, "x", pool[3]);
    put_doc(&service, "y", pool[8]);
    drop(service);
    let log = std::fs::read(dir.join(LOG_FILE)).unwrap();
    let forged = |doc: u64, id: &str| {
        Record::Put {
            doc,
            id: id.into(),
            simhash: pool[5].simhash,
            digest: pool[5].digest,
            empty: false,
            url: None,
            time: None,
        }
        .encode()
    };
    let refused = |record: Vec<u8>, reason: &str| {
        std::fs::write(dir.join(LOG_FILE), &log).unwrap();
        let offset = append_forged(&dir, &record);
        let e = open_error(&dir);
        let at = format!("serve.wal: record 3 (at byte {offset}) cannot be replayed: {reason}");
        assert!(e.contains(&at), "{e}\nexpected {at}");
        assert!(e.contains("restore the file, or move it away"), "{e}");
    };
    refused(
        forged(first.doc_id, "z"),
        &format!(
            "doc number {} was given before (the log's next is {})",
            first.doc_id,
            first.doc_id + 2
        ),
    );
    refused(
        forged(3, "z"),
        "doc number 3 is not of this log's file 1 (numbers from 1099511627776)",
    );
    // The id's length (after the kind, 4 bytes, and the doc number, 8) made too large.
    let mut long_id = forged(first.doc_id + 2, "z");
    long_id[12..20].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let n = long_id.len();
    refused(
        long_id,
        &format!("a length inside it (of an id, url or time) runs past its {n} bytes"),
    );
    let mut trailing = forged(first.doc_id + 2, "z");
    trailing.push(0);
    refused(trailing, "bytes after its end");
    // The same record written as the writer would have numbered it is replayed.
    std::fs::write(dir.join(LOG_FILE), &log).unwrap();
    append_forged(&dir, &forged(first.doc_id + 2, "z"));
    let service = open(&dir);
    assert_eq!(service.get("z").unwrap().doc_id, first.doc_id + 2);
}
