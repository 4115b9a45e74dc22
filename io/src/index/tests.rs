//! The index against brute force, and its refusals.

use std::collections::BTreeSet;

use neardup_core::minhash::{jaccard_estimate, Banding, MinHasher, DEFAULT_SEED};
use neardup_core::similarity::jaccard;
use neardup_core::testing::SeededRng;
use neardup_core::{hamming, TableDesign};
use serde_json::json;

use super::write::IndexSpec;
use super::*;

fn spec() -> IndexSpec {
    IndexSpec {
        scheme: "simhash-doc".into(),
        fingerprint: json!({"method": "simhash", "features": "words"}),
        design: TableDesign::manku16(),
        minhash: None,
    }
}

/// A MinHash index's parameters: 32-value signatures in 8 bands of 4 rows, verified at
/// 0.5, by exact Jaccard when `shingles`.
fn minhash_params(shingles: bool) -> MinHashParams {
    MinHashParams {
        permutations: 32,
        bands: 8,
        rows: 4,
        threshold: 0.5,
        verify: VERIFY_JACCARD.into(),
        shingle: 5,
        shingles,
    }
}

fn minhash_spec(shingles: bool) -> IndexSpec {
    IndexSpec {
        scheme: "minhash".into(),
        fingerprint: json!({"method": "minhash", "permutations": 32}),
        minhash: Some(minhash_params(shingles)),
        ..spec()
    }
}

/// Gives the documents of `batch` shingle sets clumped as their simhashes are (a set drawn
/// afresh with every fourth document, the others sharing most of it) and their signatures.
fn with_sketches(rng: &mut SeededRng, batch: &mut NewGeneration, m: &MinHashParams) {
    let hasher = MinHasher::new(m.permutations, DEFAULT_SEED);
    let mut centre: Vec<u64> = Vec::new();
    for (i, d) in batch.docs.iter_mut().enumerate() {
        if i % 4 == 0 {
            centre = (0..20 + rng.below(20)).map(|_| rng.next_u64()).collect();
        }
        if d.empty {
            continue;
        }
        let mut set = centre.clone();
        for _ in 0..rng.below(12) {
            let at = rng.below(set.len() as u64) as usize;
            set[at] = rng.next_u64();
        }
        d.signature = hasher.signature(&set);
        d.shingles = m.shingles.then_some(set);
    }
}

/// (doc_id, jaccard, exact) of every match of a MinHash query.
fn minhash_answers(index: &Index, doc: &DocEntry) -> BTreeSet<(u64, u64, bool)> {
    let mut set = doc.shingles.clone();
    if let Some(set) = set.as_mut() {
        set.sort_unstable();
        set.dedup();
    }
    let mut out = BTreeSet::new();
    let threshold = index.minhash().unwrap().threshold;
    index.query_minhash(&doc.signature, set.as_deref(), threshold, |m| {
        let d = index.doc(m.generation, m.row).doc_id;
        assert!(
            out.insert((d, m.jaccard.to_bits(), m.exact)),
            "a match twice"
        );
    });
    out
}

/// The brute force of a MinHash index: every non-empty document whose band keys collide
/// with the query's in some band and whose similarity reaches the threshold.
fn minhash_brute(all: &[DocEntry], q: &DocEntry, m: &MinHashParams) -> BTreeSet<(u64, u64, bool)> {
    let banding = Banding {
        bands: m.bands,
        rows: m.rows,
    };
    let keys: Vec<u64> = banding.band_keys(&q.signature).collect();
    let sorted = |set: &Option<Vec<u64>>| {
        let mut set = set.clone().unwrap_or_default();
        set.sort_unstable();
        set.dedup();
        set
    };
    all.iter()
        .filter(|d| !d.empty)
        .filter(|d| {
            banding
                .band_keys(&d.signature)
                .zip(&keys)
                .any(|(a, &b)| a == b)
        })
        .map(|d| {
            let j = if m.exact() {
                jaccard(&sorted(&q.shingles), &sorted(&d.shingles))
            } else {
                jaccard_estimate(&q.signature, &d.signature)
            };
            (d.doc_id, j, m.exact())
        })
        .filter(|&(_, j, _)| j >= m.threshold)
        .map(|(d, j, e)| (d, j.to_bits(), e))
        .collect()
}

/// `n` documents of file `file`, clumped so that many are within 3 bits of another; every
/// tenth is empty.
fn batch(rng: &mut SeededRng, file: u64, n: u64) -> NewGeneration {
    let mut docs = Vec::new();
    let mut centre = rng.next_u64();
    for record in 0..n {
        if record % 4 == 0 {
            centre = rng.next_u64();
        }
        let mut fp = centre;
        for _ in 0..rng.below(4) {
            fp ^= 1 << rng.below(64);
        }
        let doc_id = (file << FILE_SHIFT) | record;
        docs.push(DocEntry {
            doc_id,
            id: (record % 7 != 3).then(|| format!("doc-{file}-{record}")),
            source: format!("f{file}.jsonl"),
            url: None,
            simhash: fp,
            empty: record % 10 == 9,
            cluster_id: (record % 5 == 0).then_some(doc_id as i64),
            digest: (record % 3 != 0).then(|| u128::from(fp) << 40 | u128::from(record)),
            rank: (record % 4 != 1).then_some(record * 7 % 13),
            bytes: (record % 6 != 2).then_some(100 + record),
            fetched_at: (record % 5 != 4).then_some(-(record as i64) * 1000),
            removed: record % 5 == 1,
            ..Default::default()
        });
    }
    NewGeneration {
        files: 1,
        docs,
        cluster_changes: Vec::new(),
        keep: Some("longest".into()),
        decisions: Some(Vec::new()),
    }
}

fn answers(index: &Index, fp: u64, k: u32) -> BTreeSet<(u64, u32)> {
    let mut out = BTreeSet::new();
    index.query(fp, k, |m| {
        assert!(
            out.insert((index.doc(m.generation, m.row).doc_id, m.hamming)),
            "a match twice"
        );
    });
    out
}

fn brute(all: &[DocEntry], fp: u64, k: u32) -> BTreeSet<(u64, u32)> {
    all.iter()
        .filter(|d| !d.empty && hamming(d.simhash, fp) <= k)
        .map(|d| (d.doc_id, hamming(d.simhash, fp)))
        .collect()
}

#[test]
fn generations_answer_as_brute_force_before_and_after_compaction() {
    generations_answer_as_brute_force(spec());
}

#[test]
fn minhash_generations_answer_as_brute_force_before_and_after_compaction() {
    generations_answer_as_brute_force(minhash_spec(true));
    generations_answer_as_brute_force(minhash_spec(false));
}

/// Generations of an index of `spec` (and their compaction) answer every query as the
/// brute force does, and give back every document as written.
fn generations_answer_as_brute_force(spec: IndexSpec) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    let mut rng = SeededRng::new(5);
    let mut all = Vec::new();
    let minhash = spec.minhash.clone();
    let batch = |rng: &mut SeededRng, file, n| {
        let mut b = batch(rng, file, n);
        if let Some(m) = &minhash {
            with_sketches(rng, &mut b, m);
        }
        b
    };
    {
        let mut writer = IndexWriter::create(&path, &spec).unwrap();
        for file in 0..3 {
            assert_eq!(writer.file_offset(), file);
            let b = batch(&mut rng, file, 800);
            all.extend(b.docs.clone());
            writer.add(b).unwrap();
        }
    }
    let mut writer = IndexWriter::open(&path).unwrap();
    // Generation 3 moves a document of generation 0 into another cluster, and changes the
    // keep decisions of two others (one removed, one kept).
    let moved = all[1].doc_id;
    let mut b = batch(&mut rng, 3, 10);
    b.cluster_changes = vec![(moved, 42)];
    assert!(all[6].removed && !all[7].removed);
    let flipped = [all[6].doc_id, all[7].doc_id];
    b.decisions = Some(vec![(flipped[1], false), (flipped[0], true)]);
    all.extend(b.docs.clone());
    writer.add(b).unwrap();
    drop(writer);
    let check = |index: &Index| {
        assert_eq!(index.manifest().documents, all.len() as u64);
        let mut matched = 0;
        for (i, doc) in all.iter().enumerate().step_by(3) {
            if let Some(m) = &minhash {
                let expected = minhash_brute(&all, doc, m);
                matched += expected.len();
                assert_eq!(minhash_answers(index, doc), expected, "{}", doc.doc_id);
                continue;
            }
            let fp = if i % 2 == 0 {
                doc.simhash
            } else {
                doc.simhash ^ 0b101
            };
            for k in [0, 2, 3] {
                assert_eq!(answers(index, fp, k), brute(&all, fp, k));
            }
        }
        if minhash.is_some() {
            // Queries find other documents than themselves.
            assert!(matched > all.len() / 2, "{matched}");
        }
        let docs: Vec<DocView> = index.docs().collect();
        assert_eq!(docs.len(), all.len());
        for (view, doc) in docs.iter().zip(&all) {
            assert_eq!(view.doc_id, doc.doc_id);
            assert_eq!(view.id, doc.id.as_deref());
            assert_eq!(view.empty, doc.empty);
            let cluster = if doc.doc_id == moved {
                Some(42)
            } else {
                doc.cluster_id
            };
            assert_eq!(view.cluster_id, cluster, "{}", doc.doc_id);
            let kept = !doc.removed ^ flipped.contains(&doc.doc_id);
            assert_eq!(view.kept, Some(kept), "{}", doc.doc_id);
            assert_eq!(
                (view.digest, view.rank, view.bytes, view.fetched_at),
                (doc.digest, doc.rank, doc.bytes, doc.fetched_at),
                "{}",
                doc.doc_id
            );
            if minhash.is_some() && !doc.empty {
                assert_eq!(view.signature, &doc.signature[..]);
                let mut set = doc.shingles.clone();
                if let Some(set) = set.as_mut() {
                    set.sort_unstable();
                    set.dedup();
                }
                assert_eq!(view.shingles, set.as_deref());
            }
        }
    };
    let index = Index::open(&path, Verify::Checksums).unwrap();
    assert_eq!(index.generations(), 4);
    check(&index);
    drop(index);
    IndexWriter::open(&path).unwrap().compact().unwrap();
    let index = Index::open(&path, Verify::Checksums).unwrap();
    assert_eq!(index.generations(), 1);
    assert_eq!(index.manifest().generations[0].dir, "gen-00004");
    assert!(index.manifest().generations[0].keep_decisions);
    check(&index);
    let names: Vec<String> = std::fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "old generations removed: {names:?}");
}

/// A generation that does not record its keep decisions (a `neardup serve` checkpoint, an
/// older neardup's) leaves its documents' `kept` unknown, and so does a compaction of it;
/// a manifest whose entries lost `keep_decisions` (rewritten by an older neardup) leaves
/// every document's unknown, whatever its files hold.
#[test]
fn keep_decisions_are_known_only_where_generations_record_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    let mut rng = SeededRng::new(8);
    let mut writer = IndexWriter::create(&path, &spec()).unwrap();
    writer.add(batch(&mut rng, 0, 50)).unwrap();
    let mut b = batch(&mut rng, 1, 50);
    b.decisions = None;
    writer.add(b).unwrap();
    drop(writer);
    let index = Index::open(&path, Verify::Checksums).unwrap();
    let unrecorded = index.manifest().without_keep_decisions();
    assert_eq!(unrecorded.map(|g| g.number), Some(1));
    for view in index.docs() {
        let record = view.doc_id & ((1 << FILE_SHIFT) - 1);
        let expected = (view.doc_id >> FILE_SHIFT == 0).then_some(record % 5 != 1);
        assert_eq!(view.kept, expected, "{}", view.doc_id);
    }
    assert!(path.join("gen-00000").join(KEEP_FILE).exists());
    assert!(!path.join("gen-00001").join(KEEP_FILE).exists());
    drop(index);
    IndexWriter::open(&path).unwrap().compact().unwrap();
    let index = Index::open(&path, Verify::Checksums).unwrap();
    assert!(!index.manifest().generations[0].keep_decisions);
    assert!(index.docs().all(|v| v.kept.is_none()));
    drop(index);

    let other = dir.path().join("other");
    let mut writer = IndexWriter::create(&other, &spec()).unwrap();
    writer.add(batch(&mut rng, 0, 50)).unwrap();
    drop(writer);
    assert!(Index::open(&other, Verify::Checksums)
        .unwrap()
        .docs()
        .any(|v| v.kept == Some(false)));
    edit_manifest(&other, |m| {
        let g = m["generations"][0].as_object_mut().unwrap();
        assert_eq!(g.remove("keep_decisions"), Some(json!(true)));
    });
    let index = Index::open(&other, Verify::Checksums).unwrap();
    assert!(index.manifest().without_keep_decisions().is_some());
    assert!(index.docs().all(|v| v.kept.is_none()));
}

/// A generation's changes of earlier documents, streamed to its writer by doc number: read
/// back as given (the first of a document counting, as `sorted_changes` makes of a `Vec`
/// given in any order), and refused out of order, naming the file, with nothing committed.
#[test]
fn changes_are_written_from_a_stream_by_doc_number() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    let mut rng = SeededRng::new(9);
    let mut writer = IndexWriter::create(&path, &spec()).unwrap();
    writer.add(batch(&mut rng, 0, 60)).unwrap();
    let changes: Vec<(u64, i64)> = (0..60u64).step_by(3).map(|r| (r, 7 + r as i64)).collect();
    let decisions: Vec<(u64, bool)> = (0..60u64).step_by(4).map(|r| (r, r % 8 == 0)).collect();
    let b = batch(&mut rng, 1, 20);
    let mut generation = writer.begin(b.files, b.keep, true).unwrap();
    for d in b.docs {
        generation.push(d).unwrap();
    }
    // Each change given twice in a row: the first counts.
    let twice = |c: &(u64, i64)| [Ok(*c), Ok((c.0, -5))];
    let stream = changes.iter().flat_map(twice);
    let (documents, _) = generation
        .commit(stream, decisions.iter().map(|d| Ok(*d)), None)
        .unwrap();
    assert_eq!(documents, 20);
    // A third generation changes some of the same documents again (given as a `Vec` in
    // reverse): the latest change counts.
    let mut b = batch(&mut rng, 2, 10);
    b.cluster_changes = (0..60u64)
        .rev()
        .step_by(6)
        .map(|r| (r - 5, 1000 + r as i64))
        .collect();
    writer.add(b).unwrap();
    let index = Index::open(&path, Verify::Checksums).unwrap();
    assert_eq!(index.manifest().generations[1].cluster_changes, 20);
    assert_eq!(index.manifest().generations[2].cluster_changes, 10);
    for row in 0..60u32 {
        let view = index.doc(0, row);
        let r = u64::from(row);
        let cluster = match r % 6 {
            0 => Some(1005 + r as i64),
            _ => (r % 3 == 0).then_some(7 + r as i64),
        };
        assert_eq!(
            view.cluster_id,
            cluster.or((r % 5 == 0).then_some(r as i64))
        );
        let kept = if r % 4 == 0 { r % 8 == 0 } else { r % 5 != 1 };
        assert_eq!(view.kept, Some(kept), "{r}");
    }
    drop(index);
    // Out of order: refused, and the index keeps its two generations.
    let b = batch(&mut rng, 3, 5);
    let mut generation = writer.begin(b.files, b.keep, true).unwrap();
    for d in b.docs {
        generation.push(d).unwrap();
    }
    let stream = [Ok((9, 1)), Ok((4, 1))].into_iter();
    let err = generation
        .commit(stream, std::iter::empty(), None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(CLUSTERS_FILE) && err.contains("doc number 4 after"),
        "{err}"
    );
    drop(writer);
    assert_eq!(
        Index::open(&path, Verify::Checksums).unwrap().generations(),
        3
    );
}

fn small_index(path: &std::path::Path) {
    let mut writer = IndexWriter::create(path, &spec()).unwrap();
    writer.add(batch(&mut SeededRng::new(1), 0, 100)).unwrap();
}

fn error(result: Result<Index, crate::IoError>) -> String {
    match result {
        Ok(_) => panic!("opened"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn damaged_files_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    small_index(&path);
    let table = path.join("gen-00000").join("table-003.bin");
    let bytes = std::fs::read(&table).unwrap();

    // One flipped bit: the sizes still agree, the checksum does not.
    let mut flipped = bytes.clone();
    flipped[100] ^= 1;
    std::fs::write(&table, &flipped).unwrap();
    assert!(Index::open(&path, Verify::Sizes).is_ok());
    let e = error(Index::open(&path, Verify::Checksums));
    assert!(e.contains("table-003.bin: damaged index: checksum"), "{e}");

    std::fs::write(&table, &bytes[..bytes.len() - 8]).unwrap();
    let e = error(Index::open(&path, Verify::Sizes));
    assert!(e.contains("table-003.bin: damaged index: truncated"), "{e}");
    std::fs::write(&table, &bytes).unwrap();
    assert!(Index::open(&path, Verify::Checksums).is_ok());

    std::fs::remove_file(path.join("gen-00000").join("docs.bin")).unwrap();
    let e = error(Index::open(&path, Verify::Sizes));
    assert!(e.contains("docs.bin: cannot open"), "{e}");

    let e = error(Index::open(dir.path(), Verify::Sizes));
    assert!(e.contains("not a neardup index"), "{e}");
}

#[test]
fn newer_formats_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    small_index(&path);
    let manifest = path.join(MANIFEST);
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("\"format\": 4", "\"format\": 6")).unwrap();
    let e = error(Index::open(&path, Verify::Sizes));
    assert!(e.contains("index format 6, but this neardup"), "{e}");
    assert!(e.contains("reads formats 1 to 5"), "{e}");
    // A generation of a newer format in a manifest this neardup reads.
    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let refusal = |value: &serde_json::Value| {
        std::fs::write(&manifest, value.to_string()).unwrap();
        error(Index::open(&path, Verify::Sizes))
    };
    value["generations"][0]["format"] = json!(6);
    let e = refusal(&value);
    assert!(
        e.contains("gen-00000: index format 6, but this neardup"),
        "{e}"
    );
    // A generation newer than its manifest, and deletions outside format 5, are damage.
    value["generations"][0]["format"] = json!(5);
    let e = refusal(&value);
    assert!(e.contains("format 5, newer than the manifest's 4"), "{e}");
    value["generations"][0]["format"] = json!(4);
    value["generations"][0]["deleted"] = json!(2);
    let e = refusal(&value);
    assert!(
        e.contains("deletes 2 documents (0 indexed) in format 4"),
        "{e}"
    );
    std::fs::write(&manifest, "{\"format\": 1").unwrap();
    let e = error(Index::open(&path, Verify::Sizes));
    assert!(e.contains("manifest.json: damaged index: not JSON"), "{e}");
}

#[test]
fn one_writer_at_a_time_and_no_index_over_another() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    small_index(&path);
    let writer = IndexWriter::open(&path).unwrap();
    let e = IndexWriter::open(&path).err().unwrap().to_string();
    assert!(e.contains("is in use by another neardup run"), "{e}");
    // Readers are not writers: they open while the lock is held.
    assert!(Index::open(&path, Verify::Checksums).is_ok());
    drop(writer);
    assert!(IndexWriter::open(&path).is_ok());
    let e = IndexWriter::create(&path, &spec())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("an index exists there already"), "{e}");
    std::fs::write(dir.path().join("mine.txt"), "x").unwrap();
    let e = IndexWriter::create(dir.path(), &spec())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("holds index, mine.txt"), "{e}");
}

#[test]
fn an_interrupted_write_leaves_the_index_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    small_index(&path);
    let before = std::fs::read(path.join(MANIFEST)).unwrap();
    // What a writer killed before its manifest leaves: a temporary and a renamed generation.
    std::fs::create_dir(path.join(".gen-00001.tmp")).unwrap();
    std::fs::create_dir(path.join("gen-00002")).unwrap();
    let index = Index::open(&path, Verify::Checksums).unwrap();
    assert_eq!(index.generations(), 1);
    drop(index);
    let mut writer = IndexWriter::open(&path).unwrap();
    assert!(!path.join(".gen-00001.tmp").exists() && !path.join("gen-00002").exists());
    assert_eq!(std::fs::read(path.join(MANIFEST)).unwrap(), before);
    // A batch that cannot be written changes nothing either.
    let mut bad = batch(&mut SeededRng::new(2), 5, 3);
    bad.files = 1;
    let e = writer.add(bad).err().unwrap().to_string();
    assert!(e.contains("outside the generation's files 1..2"), "{e}");
    assert_eq!(std::fs::read(path.join(MANIFEST)).unwrap(), before);
}

/// Rewrites every generation of the index at `path` as format 1 wrote it: `docs.bin`
/// without digests, ranks, bytes, capture times and keep decisions (no `keep.bin`), every
/// header saying format 1, and a manifest of format 1 without the generations' `format`,
/// `keep` and `keep_decisions`.
/// Rewrites every compact table of the simhash index at `path` (format 4) in the layout of
/// formats 1 to 3 (the permuted fingerprints, then the rows), keeping the header's format;
/// the manifest's checksums are left for the caller to make.
fn widen_tables(path: &std::path::Path) {
    let index = Index::open(path, Verify::Checksums).unwrap();
    let perms = neardup_core::query::permutations(index.design().unwrap());
    let dirs: Vec<String> = index
        .manifest()
        .generations
        .iter()
        .map(|g| g.dir.clone())
        .collect();
    drop(index);
    for dir in dirs {
        let dir = path.join(dir);
        let docs = std::fs::read(dir.join(DOCS_FILE)).unwrap();
        let count = u64::from_le_bytes(docs[16..24].try_into().unwrap()) as usize;
        let word =
            |bytes: &[u8], at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        let fps: Vec<u64> = (0..count)
            .map(|r| word(&docs, HEADER_BYTES + 8 * count + 8 * r))
            .collect();
        for (t, p) in perms.iter().enumerate() {
            let file = dir.join(table_file(t));
            let bytes = std::fs::read(&file).unwrap();
            let n = u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize;
            let rows_at = HEADER_BYTES + (2 * n).div_ceil(8) * 8;
            let rows: Vec<u32> = (0..n)
                .map(|i| {
                    u32::from_le_bytes(
                        bytes[rows_at + 4 * i..rows_at + 4 * i + 4]
                            .try_into()
                            .unwrap(),
                    )
                })
                .collect();
            let mut wide = bytes[..HEADER_BYTES].to_vec();
            for &row in &rows {
                wide.extend(p.permute(fps[row as usize]).to_le_bytes());
            }
            for &row in &rows {
                wide.extend(row.to_le_bytes());
            }
            wide.resize(HEADER_BYTES + 8 * n + (4 * n).div_ceil(8) * 8, 0);
            std::fs::write(&file, wide).unwrap();
        }
    }
}

/// Makes the simhash index at `path` (written in format 4) one of `format`: its tables
/// widened, the manifest's format and each generation's entry edited by `entry` (given the
/// generation's directory), each binary file's bytes by `bytes` and its header's format
/// made `format`, the checksums made again.
fn downgrade(
    path: &std::path::Path,
    format: u32,
    mut entry: impl FnMut(&std::path::Path, &mut serde_json::Value),
    bytes: impl Fn(&std::path::Path, Vec<u8>) -> Vec<u8>,
) {
    widen_tables(path);
    let manifest_path = path.join(MANIFEST);
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    manifest["format"] = json!(format);
    for g in manifest["generations"].as_array_mut().unwrap() {
        let dir = path.join(g["dir"].as_str().unwrap());
        entry(&dir, g);
        for sum in g["checksums"].as_array_mut().unwrap() {
            let file = dir.join(sum["name"].as_str().unwrap());
            let mut content = std::fs::read(&file).unwrap();
            if file.extension().is_some_and(|e| e == "bin") {
                content = bytes(&file, content);
                content[8..12].copy_from_slice(&format.to_le_bytes());
                std::fs::write(&file, &content).unwrap();
            }
            set_sum(sum, &content);
        }
    }
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
}

/// Makes the simhash index at `path` (written in format 4) what a neardup of format 2 wrote.
fn downgrade_to_format_2(path: &std::path::Path) {
    downgrade(path, 2, |_, g| g["format"] = json!(2), |_, bytes| bytes);
}

/// Makes the simhash index at `path` (written in format 4) what a neardup of format 1 wrote:
/// no keep decisions, `docs.bin` of 4 words and 2 flags a document.
fn downgrade_to_format_1(path: &std::path::Path) {
    let entry = |dir: &std::path::Path, g: &mut serde_json::Value| {
        for member in ["format", "keep", "keep_decisions"] {
            g.as_object_mut().unwrap().remove(member);
        }
        g["checksums"]
            .as_array_mut()
            .unwrap()
            .retain(|sum| sum["name"] != KEEP_FILE);
        std::fs::remove_file(dir.join(KEEP_FILE)).unwrap();
    };
    let docs_v1 = |file: &std::path::Path, bytes: Vec<u8>| {
        if !file.ends_with(DOCS_FILE) {
            return bytes;
        }
        let n = u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize;
        let h = HEADER_BYTES;
        let flags_at = h + 72 * n;
        let ids = bytes[flags_at + n.div_ceil(8) * 8..].to_vec();
        let mut v1 = bytes[..h + 32 * n].to_vec();
        v1.extend(bytes[flags_at..flags_at + n].iter().map(|f| f & 3));
        v1.resize(h + 32 * n + n.div_ceil(8) * 8, 0);
        v1.extend(ids);
        v1
    };
    downgrade(path, 1, entry, docs_v1);
}

/// A manifest's checksum entry made that of `bytes`.
fn set_sum(sum: &mut serde_json::Value, bytes: &[u8]) {
    sum["bytes"] = json!(bytes.len());
    sum["xxh3"] = json!(format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes)));
}

#[test]
fn format_1_indexes_are_read_added_to_and_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    let mut rng = SeededRng::new(12);
    let mut all = Vec::new();
    {
        let mut writer = IndexWriter::create(&path, &spec()).unwrap();
        for file in 0..2 {
            let b = batch(&mut rng, file, 300);
            all.extend(b.docs.clone());
            writer.add(b).unwrap();
        }
    }
    downgrade_to_format_1(&path);
    // What format 1 knew of a document: no digest, rank, bytes or capture time.
    for doc in &mut all {
        (doc.digest, doc.rank, doc.bytes, doc.fetched_at) = (None, None, None, None);
    }
    let check = |index: &Index, all: &[DocEntry]| {
        for doc in all.iter().step_by(5) {
            for k in [1, 3] {
                assert_eq!(
                    answers(index, doc.simhash ^ 2, k),
                    brute(all, doc.simhash ^ 2, k)
                );
            }
        }
        let views: Vec<DocView> = index.docs().collect();
        assert_eq!(views.len(), all.len());
        for (view, doc) in views.iter().zip(all) {
            assert_eq!(
                (
                    view.doc_id,
                    view.id,
                    view.simhash,
                    view.empty,
                    view.cluster_id
                ),
                (
                    doc.doc_id,
                    doc.id.as_deref(),
                    doc.simhash,
                    doc.empty,
                    doc.cluster_id
                )
            );
            assert_eq!(
                (view.digest, view.rank, view.bytes, view.fetched_at),
                (doc.digest, doc.rank, doc.bytes, doc.fetched_at),
            );
        }
    };
    let index = Index::open(&path, Verify::Checksums).unwrap();
    assert_eq!(index.manifest().format, 1);
    assert_eq!(index.manifest().generations[0].format, 1);
    check(&index, &all);
    drop(index);
    // A new generation is written in format 4 beside the format 1 ones.
    let mut writer = IndexWriter::open(&path).unwrap();
    let b = batch(&mut rng, 2, 300);
    all.extend(b.docs.clone());
    writer.add(b).unwrap();
    drop(writer);
    let index = Index::open(&path, Verify::Checksums).unwrap();
    assert_eq!(index.manifest().format, SIMHASH_INDEX_FORMAT);
    let formats: Vec<u32> = index
        .manifest()
        .generations
        .iter()
        .map(|g| g.format)
        .collect();
    assert_eq!(formats, [1, 1, SIMHASH_INDEX_FORMAT]);
    assert_eq!(index.generation_keep(2), Some("longest"));
    check(&index, &all);
    drop(index);
    // Compacted: one format 4 generation; the ranks of two policies (none, longest) go.
    IndexWriter::open(&path).unwrap().compact().unwrap();
    for doc in &mut all {
        doc.rank = None;
    }
    let index = Index::open(&path, Verify::Checksums).unwrap();
    assert_eq!(index.manifest().generations[0].format, SIMHASH_INDEX_FORMAT);
    assert_eq!(index.generation_keep(0), None);
    check(&index, &all);
}

#[test]
fn a_batch_query_answers_as_its_queries_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    let mut rng = SeededRng::new(77);
    let mut all = Vec::new();
    {
        let mut writer = IndexWriter::create(&path, &spec()).unwrap();
        for file in 0..2 {
            let b = batch(&mut rng, file, 1500);
            all.extend(b.docs.clone());
            writer.add(b).unwrap();
        }
    }
    let index = Index::open(&path, Verify::Checksums).unwrap();
    let fps: Vec<u64> = (0..2000)
        .map(|i| match i % 3 {
            0 => all[rng.below(all.len() as u64) as usize].simhash,
            1 => all[rng.below(all.len() as u64) as usize].simhash ^ (1 << rng.below(64)),
            _ => rng.next_u64(),
        })
        .collect();
    for k in [0, 3] {
        let mut batch = BTreeSet::new();
        index.query_batch(&fps, k, |i, m| {
            let doc = index.doc(m.generation, m.row).doc_id;
            assert!(batch.insert((i, doc, m.hamming)), "a match twice");
        });
        let mut one = BTreeSet::new();
        for (i, &fp) in fps.iter().enumerate() {
            one.extend(answers(&index, fp, k).into_iter().map(|(d, h)| (i, d, h)));
        }
        assert!(one.len() > 500, "{}", one.len());
        assert_eq!(batch, one, "k {k}");
        // Pages handed back are read again from the files, the same: the documents and
        // the answers do not change.
        let docs = |index: &Index| {
            (0..index.generations())
                .flat_map(|g| (0..index.generation_documents(g)).map(move |r| (g, r)))
                .map(|(g, r)| format!("{:?}", index.doc(g, r as u32)))
                .collect::<Vec<_>>()
        };
        let before = docs(&index);
        index.release_pages();
        assert_eq!(docs(&index), before);
        index.release_pages();
        let mut again = BTreeSet::new();
        index.query_batch(&fps, k, |i, m| {
            again.insert((i, index.doc(m.generation, m.row).doc_id, m.hamming));
        });
        assert_eq!(again, one, "k {k}, after the pages were released");
        // Each table's pages handed back once walked: the same answers, twice.
        for round in 0..2 {
            let mut releasing = BTreeSet::new();
            index.query_batch_releasing(&fps, k, |i, m| {
                let doc = index.doc(m.generation, m.row).doc_id;
                assert!(releasing.insert((i, doc, m.hamming)), "a match twice");
            });
            assert_eq!(releasing, one, "k {k}, releasing each table, round {round}");
        }
    }
}

#[test]
fn minhash_manifests_that_disagree_with_themselves_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    let mut writer = IndexWriter::create(&path, &minhash_spec(true)).unwrap();
    let mut b = batch(&mut SeededRng::new(2), 0, 50);
    with_sketches(&mut SeededRng::new(3), &mut b, &minhash_params(true));
    writer.add(b).unwrap();
    drop(writer);
    let manifest = path.join(MANIFEST);
    let text = std::fs::read_to_string(&manifest).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["format"], json!(MINHASH_INDEX_FORMAT));
    let refused = |edit: &dyn Fn(&mut serde_json::Value), needle: &str| {
        let mut edited = value.clone();
        edit(&mut edited);
        std::fs::write(&manifest, edited.to_string()).unwrap();
        let e = error(Index::open(&path, Verify::Checksums));
        assert!(e.contains("manifest.json: damaged index"), "{e}");
        assert!(e.contains(needle), "{e}");
    };
    refused(
        &|v| {
            v.as_object_mut().unwrap().remove("minhash");
        },
        "fingerprints of method Some(\"minhash\") without a minhash member",
    );
    refused(
        &|v| v["generations"][0]["format"] = json!(2),
        "MinHash generations are format 3",
    );
    refused(
        &|v| v["minhash"]["bands"] = json!(9),
        "9 bands of 4 rows do not fit signatures of 32 values",
    );
    // A band count the files do not have: the missing band file is named.
    std::fs::write(&manifest, &text).unwrap();
    let mut fewer = value.clone();
    fewer["minhash"]["rows"] = json!(3);
    fewer["minhash"]["bands"] = json!(10);
    std::fs::write(&manifest, fewer.to_string()).unwrap();
    let e = error(Index::open(&path, Verify::Sizes));
    assert!(e.contains("no checksum of gen-00000/band-008.bin"), "{e}");
    std::fs::write(&manifest, &text).unwrap();
    Index::open(&path, Verify::Checksums).unwrap();
}

/// An index of three generations (files 0, 1, 2) at `path`.
fn three_generations(path: &std::path::Path) {
    let mut writer = IndexWriter::create(path, &spec()).unwrap();
    let mut rng = SeededRng::new(3);
    for file in 0..3 {
        writer.add(batch(&mut rng, file, 60)).unwrap();
    }
}

fn edit_manifest(path: &std::path::Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let file = path.join(MANIFEST);
    let mut value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    edit(&mut value);
    std::fs::write(&file, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
}

fn writer_error(path: &std::path::Path) -> String {
    match IndexWriter::open(path) {
        Ok(mut writer) => match writer.compact() {
            Ok(()) => panic!("compacted"),
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    }
}

/// Issue 39, case 5: a manifest whose generation `dir` leads out of the index (`..`, an
/// absolute path, a symbolic link) is refused by readers and writers, and what the user
/// keeps there is never removed.
#[test]
fn generation_dirs_leading_out_of_the_index_are_refused_and_never_removed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    three_generations(&path);
    let decoy = dir.path().join("decoy").join("gen-00001");
    std::fs::create_dir_all(decoy.parent().unwrap()).unwrap();
    // The decoy holds a true copy of the generation (so that a reader could answer from
    // it) and a file of the user's.
    std::fs::rename(path.join("gen-00001"), &decoy).unwrap();
    std::fs::write(decoy.join("mine.txt"), "keep me").unwrap();
    let original = std::fs::read(path.join(MANIFEST)).unwrap();
    for outside in [
        "../decoy/gen-00001".to_string(),
        decoy.display().to_string(),
    ] {
        edit_manifest(&path, |m| m["generations"][1]["dir"] = json!(outside));
        let e = error(Index::open(&path, Verify::Checksums));
        let entry = format!("generation entry 1 (number 1, dir {outside:?})");
        assert!(e.contains("manifest.json: damaged index"), "{e}");
        assert!(e.contains(&entry), "{e}");
        assert!(e.contains("must be \"gen-00001\", a plain name"), "{e}");
        let e = writer_error(&path);
        assert!(e.contains(&entry), "{e}");
        assert!(decoy.join("mine.txt").exists() && decoy.join(DOCS_FILE).exists());
    }
    // The right name, but a symbolic link out of the index.
    std::fs::write(path.join(MANIFEST), &original).unwrap();
    std::os::unix::fs::symlink(&decoy, path.join("gen-00001")).unwrap();
    let e = error(Index::open(&path, Verify::Checksums));
    assert!(
        e.contains("gen-00001: damaged index: not a directory inside the index"),
        "{e}"
    );
    let e = writer_error(&path);
    assert!(e.contains("not a directory inside the index"), "{e}");
    assert!(decoy.join("mine.txt").exists() && decoy.join(DOCS_FILE).exists());
    // A file of a generation that is a link out of the index is refused too.
    std::fs::remove_file(path.join("gen-00001")).unwrap();
    std::fs::create_dir(path.join("gen-00001")).unwrap();
    for entry in std::fs::read_dir(&decoy).unwrap() {
        let from = entry.unwrap().path();
        std::os::unix::fs::symlink(
            &from,
            path.join("gen-00001").join(from.file_name().unwrap()),
        )
        .unwrap();
    }
    let e = error(Index::open(&path, Verify::Checksums));
    assert!(
        e.contains("gen-00001/docs.bin: damaged index: not a file inside the index"),
        "{e}"
    );
    assert!(decoy.join("mine.txt").exists());
}

/// Issue 39, case 7: a generation's entry taken out of the manifest makes readers and
/// writers refuse the index (the totals, the file numbers, or the unnamed directory give
/// it away), and its directory is never removed.
#[test]
fn a_generation_taken_out_of_the_manifest_is_refused_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    three_generations(&path);
    let original = std::fs::read(path.join(MANIFEST)).unwrap();
    let manifest = Manifest::load(&path).unwrap();
    let removed = |m: &mut serde_json::Value, g: usize| {
        m["generations"].as_array_mut().unwrap().remove(g);
    };
    // The middle one: the file numbers no longer follow on.
    edit_manifest(&path, |m| removed(m, 1));
    let e = error(Index::open(&path, Verify::Sizes));
    assert!(e.contains("manifest.json: damaged index: generation entry 1 (number 2, dir \"gen-00002\"): its files start at 2, but the generations before it end at 1 (an entry is missing)"), "{e}");
    assert!(writer_error(&path).contains("an entry is missing"));
    assert!(path.join("gen-00001").join(DOCS_FILE).exists());
    // The last one: the totals no longer add up.
    std::fs::write(path.join(MANIFEST), &original).unwrap();
    edit_manifest(&path, |m| removed(m, 2));
    let e = error(Index::open(&path, Verify::Sizes));
    assert!(
        e.contains("the generations hold 2 files, the manifest's total is 3 (an entry is missing or damaged)"),
        "{e}"
    );
    assert!(writer_error(&path).contains("an entry is missing"));
    // The last one with the totals made to agree: its directory gives it away.
    let g = &manifest.generations[2];
    edit_manifest(&path, |m| {
        m["files"] = json!(manifest.files - g.files);
        m["documents"] = json!(manifest.documents - g.documents);
        m["indexed"] = json!(manifest.indexed - g.indexed);
    });
    let e = error(Index::open(&path, Verify::Sizes));
    assert!(e.contains("manifest.json: damaged index: gen-00002 is a generation the manifest does not name (below its next_generation 3)"), "{e}");
    assert!(writer_error(&path).contains("gen-00002 is a generation the manifest does not name"));
    assert!(path.join("gen-00002").join(DOCS_FILE).exists());
    // Totals that disagree with every entry in place.
    std::fs::write(path.join(MANIFEST), &original).unwrap();
    edit_manifest(&path, |m| m["documents"] = json!(manifest.documents + 1));
    let e = error(Index::open(&path, Verify::Sizes));
    assert!(
        e.contains("the generations hold 180 documents, the manifest's total is 181"),
        "{e}"
    );
    std::fs::write(path.join(MANIFEST), &original).unwrap();
    assert_eq!(
        Index::open(&path, Verify::Checksums).unwrap().generations(),
        3
    );
}

/// A compaction names the generations it replaced as retired: a writer that dies before
/// removing them leaves an index that readers open and the next writer cleans up.
#[test]
fn generations_a_compaction_replaced_are_removed_by_the_next_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    three_generations(&path);
    let kept = tempfile::tempdir().unwrap();
    for g in ["gen-00000", "gen-00001"] {
        copy_dir(&path.join(g), &kept.path().join(g));
    }
    IndexWriter::open(&path).unwrap().compact().unwrap();
    let manifest = Manifest::load(&path).unwrap();
    assert_eq!(manifest.retired, ["gen-00000", "gen-00001", "gen-00002"]);
    // As if the compaction had died before removing two of them.
    for g in ["gen-00000", "gen-00001"] {
        copy_dir(&kept.path().join(g), &path.join(g));
    }
    assert_eq!(
        Index::open(&path, Verify::Checksums).unwrap().generations(),
        1
    );
    let mut writer = IndexWriter::open(&path).unwrap();
    assert!(!path.join("gen-00000").exists() && !path.join("gen-00001").exists());
    writer.add(batch(&mut SeededRng::new(9), 3, 5)).unwrap();
    // Once gone, they are no longer named.
    assert!(writer.manifest().retired.is_empty());
    drop(writer);
    assert_eq!(
        Index::open(&path, Verify::Checksums).unwrap().generations(),
        2
    );
    // A retired name that is no generation of the index is refused.
    edit_manifest(&path, |m| m["retired"] = json!(["../decoy"]));
    let e = error(Index::open(&path, Verify::Sizes));
    assert!(
        e.contains("retired \"../decoy\" is not a replaced generation"),
        "{e}"
    );
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// Writes `bytes` at `offset` of the file at `path` in place (same inode, as a map of it
/// sees), keeping its size.
fn overwrite(path: &std::path::Path, offset: u64, bytes: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.write_all(bytes).unwrap();
}

/// Issue 39, case 3: a table whose rows name documents past the generation's end is
/// refused on open with checksums, even when its checksum was made to agree; without
/// checksums a query skips such a row instead of panicking; and a file changed under an
/// open index is found by `Index::verify`.
#[test]
fn damaged_rows_are_refused_or_skipped_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    small_index(&path);
    let table = path.join("gen-00000").join("table-000.bin");
    let original = std::fs::read(&table).unwrap();
    let n = u64::from_le_bytes(original[16..24].try_into().unwrap()) as usize;
    // The last row's top byte (after the tags): a row far past the 100 documents.
    let last = HEADER_BYTES + (2 * n).div_ceil(8) * 8 + 4 * n - 1;
    let mut damaged = original.clone();
    damaged[last] ^= 0x80;
    std::fs::write(&table, &damaged).unwrap();
    let e = error(Index::open(&path, Verify::Checksums));
    assert!(e.contains("table-000.bin: damaged index: checksum"), "{e}");
    // A forged checksum does not make the rows right.
    let sum = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&damaged));
    edit_manifest(&path, |m| {
        for s in m["generations"][0]["checksums"].as_array_mut().unwrap() {
            if s["name"] == "table-000.bin" {
                s["xxh3"] = json!(sum);
            }
        }
    });
    let e = error(Index::open(&path, Verify::Checksums));
    assert!(
        e.contains(&format!(
            "table-000.bin: damaged index: entry {} names row",
            n - 1
        )),
        "{e}"
    );
    assert!(e.contains("but the generation has 100 documents"), "{e}");
    // Without checksums the damaged row is never followed: only the document whose entry
    // it was goes unfound (a document meets itself first in table 0).
    let index = Index::open(&path, Verify::Sizes).unwrap();
    let unfound = (0..100)
        .map(|row| index.doc(0, row))
        .filter(|doc| !doc.empty && !answers(&index, doc.simhash, 3).contains(&(doc.doc_id, 0)))
        .count();
    assert_eq!(unfound, 1);
    drop(index);
    std::fs::write(&table, &original).unwrap();
    let index = Index::open(&path, Verify::Sizes).unwrap();
    assert!(
        index.verify().is_err(),
        "the forged checksum is not the file's"
    );
    drop(index);
    edit_manifest(&path, |m| {
        for s in m["generations"][0]["checksums"].as_array_mut().unwrap() {
            if s["name"] == "table-000.bin" {
                s["xxh3"] = json!(format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&original)));
            }
        }
    });
    // A byte of docs.bin changed in place while the index is open.
    let index = Index::open(&path, Verify::Checksums).unwrap();
    index.verify().unwrap();
    let docs = path.join("gen-00000").join(DOCS_FILE);
    let simhash_at = (HEADER_BYTES + 8 * 100 + 5 * 8) as u64;
    let before = index.doc(0, 5).simhash;
    overwrite(&docs, simhash_at, &(before ^ 1).to_le_bytes());
    assert_eq!(
        index.doc(0, 5).simhash,
        before ^ 1,
        "the map sees the change"
    );
    let e = index.verify().err().unwrap().to_string();
    assert!(e.contains("docs.bin: damaged index: checksum"), "{e}");
    // Id ends that pass the id bytes are refused on open (a forged checksum again).
    drop(index);
    let mut bytes = std::fs::read(&docs).unwrap();
    bytes[simhash_at as usize..simhash_at as usize + 8].copy_from_slice(&before.to_le_bytes());
    let ends_at = HEADER_BYTES + 24 * 100;
    bytes[ends_at..ends_at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(&docs, &bytes).unwrap();
    edit_manifest(&path, |m| {
        for s in m["generations"][0]["checksums"].as_array_mut().unwrap() {
            if s["name"] == DOCS_FILE {
                s["xxh3"] = json!(format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes)));
            }
        }
    });
    let e = error(Index::open(&path, Verify::Checksums));
    assert!(
        e.contains("docs.bin: damaged index: document 0's id ends at byte 18446744073709551615"),
        "{e}"
    );
    // Without checksums, its id is a placeholder, never a read outside the file.
    let index = Index::open(&path, Verify::Sizes).unwrap();
    let id = index.doc(0, 0).id;
    assert!(id.is_none() || id == Some("<id damaged>"), "{id:?}");
}

/// A measurement, run by hand (it prints; its asserts only guard that the lookups found
/// the changes):
///
/// ```text
/// cargo test --release -p neardup-io --lib index::tests::lookups_with_changes -- --ignored --nocapture
/// ```
///
/// The time of a scan of every document of a generation of 2M (`Index::doc`, its cluster
/// read), beside a later generation that changed none of them, a quarter of them (500,000
/// changes in a mapped `clusters.bin`, each lookup a binary search there), and the same
/// changes looked up in a hash map as well (what a reader that filled one on opening paid
/// a lookup). Median of five scans each.
#[test]
#[ignore = "a measurement: run by hand with --release --ignored --nocapture"]
fn lookups_with_changes() {
    const N: u64 = 2_000_000;
    let dir = tempfile::tempdir().unwrap();
    let index_with = |name: &str, changes: Vec<(u64, i64)>| {
        let path = dir.path().join(name);
        let mut writer = IndexWriter::create(&path, &spec()).unwrap();
        let mut b = batch(&mut SeededRng::new(3), 0, N);
        b.decisions = None;
        writer.add(b).unwrap();
        let mut b = batch(&mut SeededRng::new(4), 1, 10);
        b.decisions = None;
        b.cluster_changes = changes;
        writer.add(b).unwrap();
        drop(writer);
        Index::open(&path, Verify::Checksums).unwrap()
    };
    let changes: Vec<(u64, i64)> = (0..N).step_by(4).map(|r| (r, 1 + r as i64)).collect();
    let map: std::collections::HashMap<u64, i64> = changes.iter().copied().collect();
    let (none, some) = (index_with("none", Vec::new()), index_with("some", changes));
    let scan = |index: &Index, map: Option<&std::collections::HashMap<u64, i64>>| {
        let mut times = Vec::new();
        let mut found = 0u64;
        for _ in 0..5 {
            let start = std::time::Instant::now();
            found = 0;
            for row in 0..N as u32 {
                let view = index.doc(0, row);
                let changed = map.and_then(|m| m.get(&view.doc_id).copied());
                found += u64::from(view.cluster_id == Some(1 + view.doc_id as i64));
                found += u64::from(changed.is_some());
            }
            times.push(start.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        (times[2] / N as f64 * 1e9, found)
    };
    let (base, _) = scan(&none, None);
    let (mapped, found) = scan(&some, None);
    assert_eq!(found, N / 4);
    let (with_map, found) = scan(&none, Some(&map));
    assert_eq!(found, N / 4);
    println!("ns a document: no changes {base:.1}; 500,000 changes mapped {mapped:.1}; no changes plus a hash map lookup {with_map:.1}");
}

/// Sets `name`'s checksum in generation 0 of the index at `path` to that of `bytes`.
fn forge_checksum(path: &std::path::Path, name: &str, bytes: &[u8]) {
    let sum = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes));
    edit_manifest(path, |m| {
        for s in m["generations"][0]["checksums"].as_array_mut().unwrap() {
            if s["name"] == name {
                s["xxh3"] = json!(sum);
            }
        }
    });
}

/// A compact table's directory and tags are checked on open with checksums: a directory
/// that does not end at the entries, or falls, and tags that fall within a bucket are
/// refused naming the table, even with the checksum forged; without checksums a query over
/// them answers (wrongly, perhaps) and never panics.
#[test]
fn damaged_compact_tables_are_refused_or_answered_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    {
        let mut writer = IndexWriter::create(&path, &spec()).unwrap();
        writer.add(batch(&mut SeededRng::new(5), 0, 3000)).unwrap();
    }
    let table = path.join("gen-00000").join("table-002.bin");
    let original = std::fs::read(&table).unwrap();
    let n = u64::from_le_bytes(original[16..24].try_into().unwrap()) as usize;
    let d = neardup_core::query::directory_bits(28, n);
    assert!(d > 0, "a directory of {d} bits");
    let dir_at = HEADER_BYTES + (2 * n).div_ceil(8) * 8 + (4 * n).div_ceil(8) * 8;
    assert_eq!(original.len(), dir_at + 8 * ((1 << d) + 1));
    let word = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    // A bucket of two or more entries after the first entry, to make its tags fall.
    let b = (0..1usize << d)
        .find(|&b| {
            let start = word(&original, dir_at + 8 * b);
            start > 0 && word(&original, dir_at + 8 * (b + 1)) >= start + 2
        })
        .unwrap();
    let first = word(&original, dir_at + 8 * b) as usize;
    let cases: Vec<(Vec<u8>, String)> = vec![
        {
            let mut bytes = original.clone();
            let last = dir_at + 8 * (1 << d);
            bytes[last..last + 8].copy_from_slice(&(n as u64 + 9).to_le_bytes());
            (
                bytes,
                format!("its directory spans entries 0 to {}, not 0 to {n}", n + 9),
            )
        },
        {
            let mut bytes = original.clone();
            let at = dir_at + 8 * (b + 1);
            bytes[at..at + 8].copy_from_slice(&(n as u64 * 2).to_le_bytes());
            (
                bytes,
                format!("its directory's bucket {b} ends at entry {}, past", 2 * n),
            )
        },
        {
            let mut bytes = original.clone();
            let at = dir_at + 8 * (b + 1);
            bytes[at..at + 8].copy_from_slice(&0u64.to_le_bytes());
            (
                bytes,
                format!("its directory's bucket {b} ends at entry 0 before its start {first}"),
            )
        },
        {
            let mut bytes = original.clone();
            let at = HEADER_BYTES + 2 * first;
            bytes[at..at + 2].copy_from_slice(&u16::MAX.to_le_bytes());
            (
                bytes,
                format!("entry {}'s tag falls within its bucket", first + 1),
            )
        },
    ];
    let mut rng = SeededRng::new(6);
    for (damaged, needle) in cases {
        std::fs::write(&table, &damaged).unwrap();
        forge_checksum(&path, "table-002.bin", &damaged);
        let e = error(Index::open(&path, Verify::Checksums));
        assert!(e.contains("table-002.bin: damaged index: "), "{e}");
        assert!(e.contains(&needle), "{e} lacks {needle}");
        let index = Index::open(&path, Verify::Sizes).unwrap();
        let fps: Vec<u64> = (0..200).map(|_| rng.next_u64()).collect();
        for &fp in &fps {
            index.query(fp, 3, |_| {});
        }
        index.query_batch(&fps, 3, |_, _| {});
        index.self_pairs(3, |_, _, _| {});
    }
}

/// An index of format 2 (tables of permuted fingerprints) is read as it was, takes a
/// generation of format 4 (compact tables) beside its own, answers queries, batches and
/// pairs over both as brute force does, and compacts into format 4.
#[test]
fn format_2_indexes_are_read_added_to_and_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    let mut rng = SeededRng::new(21);
    let mut all = Vec::new();
    {
        let mut writer = IndexWriter::create(&path, &spec()).unwrap();
        let b = batch(&mut rng, 0, 2000);
        all.extend(b.docs.clone());
        writer.add(b).unwrap();
    }
    downgrade_to_format_2(&path);
    let check = |index: &Index, all: &[DocEntry], rng: &mut SeededRng| {
        let fps: Vec<u64> = (0..300)
            .map(|i| all[rng.below(all.len() as u64) as usize].simhash ^ (i % 3))
            .collect();
        for &fp in &fps {
            assert_eq!(answers(index, fp, 3), brute(all, fp, 3));
        }
        let mut batch = BTreeSet::new();
        index.query_batch(&fps, 3, |i, m| {
            batch.insert((i, index.doc(m.generation, m.row).doc_id, m.hamming));
        });
        let one: BTreeSet<(usize, u64, u32)> = fps
            .iter()
            .enumerate()
            .flat_map(|(i, &fp)| {
                answers(index, fp, 3)
                    .into_iter()
                    .map(move |(d, h)| (i, d, h))
            })
            .collect();
        assert_eq!(batch, one);
        let mut pairs = BTreeSet::new();
        index.self_pairs(3, |a, b, h| {
            let (a, b) = (
                index.doc(a.generation, a.row),
                index.doc(b.generation, b.row),
            );
            if !a.empty && !b.empty {
                assert!(pairs.insert((a.doc_id.min(b.doc_id), a.doc_id.max(b.doc_id), h)));
            }
        });
        let live: Vec<&DocEntry> = all.iter().filter(|d| !d.empty).collect();
        let mut want = BTreeSet::new();
        for (i, a) in live.iter().enumerate() {
            for b in &live[i + 1..] {
                let h = hamming(a.simhash, b.simhash);
                if h <= 3 {
                    want.insert((a.doc_id.min(b.doc_id), a.doc_id.max(b.doc_id), h));
                }
            }
        }
        assert!(want.len() > 50, "{}", want.len());
        assert_eq!(pairs, want);
    };
    let index = Index::open(&path, Verify::Checksums).unwrap();
    assert_eq!(index.manifest().format, 2);
    check(&index, &all, &mut rng);
    drop(index);
    let mut writer = IndexWriter::open(&path).unwrap();
    let b = batch(&mut rng, 1, 2000);
    all.extend(b.docs.clone());
    writer.add(b).unwrap();
    drop(writer);
    let index = Index::open(&path, Verify::Checksums).unwrap();
    let formats: Vec<u32> = index
        .manifest()
        .generations
        .iter()
        .map(|g| g.format)
        .collect();
    assert_eq!(formats, [2, SIMHASH_INDEX_FORMAT]);
    check(&index, &all, &mut rng);
    drop(index);
    IndexWriter::open(&path).unwrap().compact().unwrap();
    let index = Index::open(&path, Verify::Checksums).unwrap();
    assert_eq!(index.manifest().generations[0].format, SIMHASH_INDEX_FORMAT);
    check(&index, &all, &mut rng);
}

/// The record's entries (`verified.json`), by path inside the index; empty where there is
/// none.
fn recorded(path: &std::path::Path) -> BTreeSet<String> {
    match std::fs::read(path.join(super::verified::VERIFIED_FILE)) {
        Ok(bytes) => {
            let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            value["files"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect()
        }
        Err(_) => BTreeSet::new(),
    }
}

/// Every file the manifest names, as the record names them.
fn manifest_files(path: &std::path::Path) -> BTreeSet<String> {
    let manifest = Manifest::load(path).unwrap();
    let mut files = BTreeSet::new();
    for g in &manifest.generations {
        files.extend(g.checksums.iter().map(|s| format!("{}/{}", g.dir, s.name)));
    }
    files
}

/// Makes the record's entry for `key` say what the file system says of it now, as if it
/// had been checked as it is (the case of bytes changed beneath the file system, which no
/// metadata shows).
fn vouch_as_it_is(path: &std::path::Path, key: &str) {
    use std::os::unix::fs::MetadataExt;
    let file = path.join(super::verified::VERIFIED_FILE);
    let mut value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let meta = std::fs::metadata(path.join(key)).unwrap();
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    let entry = &mut value["files"][key];
    entry["modified_ns"] = json!(ns(meta.mtime(), meta.mtime_nsec()));
    entry["changed_ns"] = json!(ns(meta.ctime(), meta.ctime_nsec()));
    entry["inode"] = json!(meta.ino());
    std::fs::write(&file, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
}

/// Issue 36: `Verify::ChecksumsOnce` checks each file whole once and records it; a later
/// open does not read a file the record vouches for (shown by a damaged byte the record was
/// made to vouch for: found by `Verify::Checksums` only), and checks again any file whose
/// metadata moved (a damaged byte written in place is found), any file of a new generation,
/// and everything where the record is damaged. `Verify::Sizes` and `Verify::Checksums`
/// write no record; the record holds only the manifest's generations.
#[test]
fn checksums_are_read_once_per_file_unless_the_file_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    three_generations(&path);
    drop(Index::open(&path, Verify::Checksums).unwrap());
    drop(Index::open(&path, Verify::Sizes).unwrap());
    assert!(recorded(&path).is_empty(), "only ChecksumsOnce records");
    drop(Index::open(&path, Verify::ChecksumsOnce).unwrap());
    assert_eq!(recorded(&path), manifest_files(&path));
    assert!(manifest_files(&path).contains("gen-00002/docs.bin"));

    // A byte changed in place: its times move, so it is read again and refused.
    let key = "gen-00001/table-005.bin";
    let table = path.join(key);
    let original = std::fs::read(&table).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    overwrite(&table, 200, &[original[200] ^ 0x40]);
    let e = error(Index::open(&path, Verify::ChecksumsOnce));
    assert!(e.contains("table-005.bin: damaged index: checksum"), "{e}");
    assert_eq!(
        recorded(&path),
        manifest_files(&path),
        "a failed open writes nothing"
    );

    // The same damage, with the record made to vouch for the file as it is: not read
    // (what a restart saves), found by a full check.
    vouch_as_it_is(&path, key);
    drop(Index::open(&path, Verify::ChecksumsOnce).unwrap());
    let e = error(Index::open(&path, Verify::Checksums));
    assert!(e.contains("table-005.bin: damaged index: checksum"), "{e}");

    // A damaged record counts as none: everything is read (a damaged byte the old record
    // vouched for is found), and the record is written anew.
    std::fs::write(&table, &original).unwrap();
    drop(Index::open(&path, Verify::ChecksumsOnce).unwrap());
    overwrite(&table, 200, &[original[200] ^ 0x40]);
    vouch_as_it_is(&path, key);
    std::fs::write(path.join(super::verified::VERIFIED_FILE), b"{\"files\": [").unwrap();
    let e = error(Index::open(&path, Verify::ChecksumsOnce));
    assert!(e.contains("table-005.bin: damaged index: checksum"), "{e}");
    std::fs::write(&table, &original).unwrap();
    drop(Index::open(&path, Verify::ChecksumsOnce).unwrap());
    assert_eq!(recorded(&path), manifest_files(&path));

    // A new generation is read whole and added; a compaction's generation replaces the
    // others in the record.
    let before = manifest_files(&path);
    {
        let mut writer = IndexWriter::open(&path).unwrap();
        writer.add(batch(&mut SeededRng::new(11), 3, 40)).unwrap();
    }
    let grown = manifest_files(&path);
    assert!(grown.is_superset(&before) && grown.len() > before.len());
    drop(Index::open(&path, Verify::ChecksumsOnce).unwrap());
    assert_eq!(recorded(&path), grown);
    IndexWriter::open(&path).unwrap().compact().unwrap();
    drop(Index::open(&path, Verify::ChecksumsOnce).unwrap());
    let compacted = manifest_files(&path);
    assert!(compacted.is_disjoint(&grown));
    assert_eq!(recorded(&path), compacted);

    // An index copied elsewhere (other inodes) is read whole there.
    let copy = dir.path().join("copy");
    let generation = Manifest::load(&path).unwrap().generations[0].dir.clone();
    copy_dir(&path.join(&generation), &copy.join(&generation));
    for name in [MANIFEST, super::verified::VERIFIED_FILE] {
        std::fs::copy(path.join(name), copy.join(name)).unwrap();
    }
    let key = format!("{generation}/table-000.bin");
    let moved = copy.join(&key);
    let mut bytes = std::fs::read(&moved).unwrap();
    bytes[300] ^= 2;
    std::fs::write(&moved, &bytes).unwrap();
    let e = error(Index::open(&copy, Verify::ChecksumsOnce));
    assert!(e.contains("table-000.bin: damaged index: checksum"), "{e}");
}

/// `Index::doc_id` and `Index::simhash` read one column each: they give what `Index::doc`
/// gives, for every row of every generation, in every format the reader reads.
#[test]
fn one_column_reads_are_those_of_the_whole_document() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    three_generations(&path);
    let check = |path: &std::path::Path| {
        let index = Index::open(path, Verify::Checksums).unwrap();
        let mut rows = 0;
        for g in 0..index.generations() {
            for row in 0..index.generation_documents(g) as u32 {
                let doc = index.doc(g, row);
                assert_eq!(index.doc_id(g, row), doc.doc_id);
                assert_eq!(index.simhash(g, row), doc.simhash);
                rows += 1;
            }
        }
        assert_eq!(rows, 180);
    };
    check(&path);
    downgrade_to_format_1(&path);
    check(&path);
}

/// A document as the checkpoint oracle compares it: number, id, fingerprint, empty,
/// cluster, digest.
type Seen = (u64, Option<String>, u64, bool, Option<i64>, Option<u128>);

fn seen(d: &DocEntry) -> Seen {
    (
        d.doc_id,
        d.id.clone(),
        d.simhash,
        d.empty,
        d.cluster_id,
        d.digest,
    )
}

/// The index at `path` holds exactly the documents of `model` (the documents present): it
/// lists them with their latest clusters, counts them, answers queries, batches and pairs
/// as brute force over them, and reports none of the `deleted`; returns how many of those
/// keep their rows (deleted by a later generation, not merged away).
fn holds_exactly(
    path: &std::path::Path,
    model: &std::collections::BTreeMap<u64, DocEntry>,
    deleted: &[u64],
) -> usize {
    let index = Index::open(path, Verify::Checksums).unwrap();
    let listed: Vec<Seen> = index
        .docs()
        .map(|v| {
            let id = v.id.map(str::to_string);
            (v.doc_id, id, v.simhash, v.empty, v.cluster_id, v.digest)
        })
        .collect();
    let mut listed_sorted = listed.clone();
    listed_sorted.sort();
    let expected: Vec<Seen> = model.values().map(seen).collect();
    assert_eq!(listed_sorted, expected);
    let indexed = model.values().filter(|d| !d.empty).count() as u64;
    assert_eq!(index.manifest().present(), (model.len() as u64, indexed));
    let all: Vec<DocEntry> = model.values().cloned().collect();
    let mut rng = SeededRng::new(model.len() as u64);
    let mut fps: Vec<u64> = Vec::new();
    for _ in 0..40 {
        let d = &all[rng.below(all.len() as u64) as usize];
        fps.push(d.simhash ^ (1 << rng.below(64)));
    }
    // A deleted document keeps its row (and is reported by nothing), unless a merge of its
    // generation left it out: its fingerprint is asked too.
    let row_of = |d: u64| {
        (0..index.generations()).find_map(|g| {
            (0..index.generation_documents(g) as u32)
                .find(|&r| index.doc_id(g, r) == d)
                .map(|r| (g, r))
        })
    };
    let mut kept_rows = 0;
    for &d in deleted {
        if let Some((g, row)) = row_of(d) {
            assert!(index.is_deleted(d), "doc {d} is not deleted");
            fps.push(index.simhash(g, row));
            kept_rows += 1;
        }
    }
    let mut batched: Vec<BTreeSet<(u64, u32)>> = vec![BTreeSet::new(); fps.len()];
    index.query_batch(&fps, 3, |q, m| {
        batched[q].insert((index.doc_id(m.generation, m.row), m.hamming));
    });
    for (q, &fp) in fps.iter().enumerate() {
        assert_eq!(
            answers(&index, fp, 3),
            brute(&all, fp, 3),
            "query {fp:016x}"
        );
        assert_eq!(batched[q], brute(&all, fp, 3), "batch query {fp:016x}");
    }
    let mut pairs = BTreeSet::new();
    index.self_pairs(3, |a, b, h| {
        let (a, b) = (
            index.doc_id(a.generation, a.row),
            index.doc_id(b.generation, b.row),
        );
        pairs.insert((a.min(b), a.max(b), h));
    });
    let mut expected_pairs = BTreeSet::new();
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            let h = hamming(a.simhash, b.simhash);
            if !a.empty && !b.empty && h <= 3 {
                expected_pairs.insert((a.doc_id, b.doc_id, h));
            }
        }
    }
    assert_eq!(pairs, expected_pairs);
    kept_rows
}

/// Checkpoints ([`IndexWriter::checkpoint`]: documents added, earlier ones deleted and
/// re-clustered, the newest generations merged while small) leave an index that holds
/// exactly the documents present, as a model of them says, and a compaction of it too.
#[test]
fn checkpoints_hold_exactly_the_documents_present() {
    checkpoint_rounds(41, false);
}

/// The same with background merges ([`super::merge`]): after each checkpoint a merge of a
/// random run of generations (the newest or not) is planned and written, and the next
/// checkpoint, whose deletions and cluster changes reach the run's documents, commits it.
#[test]
fn background_merges_hold_exactly_the_documents_present() {
    checkpoint_rounds(43, true);
    checkpoint_rounds(47, true);
}

/// Rounds of checkpoints over a model of the documents present (see the two tests above).
fn checkpoint_rounds(seed: u64, background: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    let mut rng = SeededRng::new(seed);
    let mut writer = IndexWriter::create(&path, &spec()).unwrap();
    let mut base = batch(&mut rng, 0, 300);
    // As the service's: no keep ranks or decisions (so that its generation may be merged).
    (base.keep, base.decisions) = (None, None);
    for d in &mut base.docs {
        (d.rank, d.removed) = (None, false);
    }
    let mut model: std::collections::BTreeMap<u64, DocEntry> =
        base.docs.iter().map(|d| (d.doc_id, d.clone())).collect();
    writer.add(base).unwrap();
    let (mut deleted, mut formats, mut merges, mut kept_rows) = (Vec::new(), BTreeSet::new(), 0, 0);
    let (mut pending, mut background_merges): (Option<MergedGeneration>, usize) = (None, 0);
    let cancel = std::sync::atomic::AtomicBool::new(false);
    for round in 0..9u64 {
        let file = writer.manifest().files;
        let n = 20 + rng.below(80);
        let mut docs = batch(&mut rng, file, n).docs;
        for d in &mut docs {
            (d.rank, d.removed) = (None, false);
        }
        let present: Vec<u64> = model.keys().copied().collect();
        let mut gone = Vec::new();
        for _ in 0..rng.below(40) {
            let d = present[rng.below(present.len() as u64) as usize];
            if let Some(e) = model.remove(&d) {
                gone.push((d, !e.empty));
                deleted.push(d);
            }
        }
        let present: Vec<u64> = model.keys().copied().collect();
        let mut changes = Vec::new();
        for _ in 0..rng.below(40) {
            let d = present[rng.below(present.len() as u64) as usize];
            let cluster = match rng.below(3) {
                0 => -1,
                _ => present[rng.below(present.len() as u64) as usize] as i64,
            };
            changes.push((d, cluster));
            model.get_mut(&d).unwrap().cluster_id = (cluster >= 0).then_some(cluster);
        }
        model.extend(docs.iter().map(|d| (d.doc_id, d.clone())));
        // With background merges, fewer of the checkpoint's own, so that generations pile up
        // for the background merges to take runs of them.
        let limit = match background {
            false => [0, 150, 2_000][(round % 3) as usize],
            true => [0, 0, 150][(round % 3) as usize],
        };
        let index = Index::open(&path, Verify::Sizes).unwrap();
        let mut present = index.present_rows();
        for &(d, _) in &gone {
            let g = (0..index.generations())
                .find(|&g| {
                    (0..index.generation_documents(g) as u32).any(|r| index.doc_id(g, r) == d)
                })
                .unwrap();
            present[g] -= 1;
        }
        // The oracle of `present_rows`: the model's documents by generation.
        let generations = &writer.manifest().generations;
        let by_generation: Vec<u64> = generations
            .iter()
            .map(|e| {
                let files = e.file_offset..e.file_offset + e.files;
                model
                    .keys()
                    .filter(|&&d| files.contains(&(d >> FILE_SHIFT)))
                    .count() as u64
            })
            .collect();
        assert_eq!(present, by_generation);
        let merge = merge_count(generations, &present, docs.len() as u64, limit);
        merges += merge;
        let checkpoint = Checkpoint {
            docs,
            files: file + 1,
            cluster_changes: changes,
            deleted: gone,
            merge,
        };
        let before = writer.manifest().generations.len();
        let took = pending.as_ref().map(|m| m.range());
        let number = writer
            .checkpoint_merging(&index, checkpoint, pending.take())
            .unwrap();
        drop(index);
        if let Some(took) = took {
            background_merges += 1;
            // The merged generation is numbered after the checkpoint's and replaces its
            // run; the checkpoint's own merge stopped at the run.
            assert_eq!(writer.manifest().next_generation, number + 2);
            let own = merge.min(before - took.end);
            let after = before - own + 1 - (took.len() - 1);
            assert_eq!(writer.manifest().generations.len(), after);
            let merged = &writer.manifest().generations[took.start];
            assert_eq!(merged.number, number + 1);
        }
        formats.insert(writer.manifest().format);
        kept_rows += holds_exactly(&path, &model, &deleted);
        let n = writer.manifest().generations.len();
        if background && n >= 2 && round % 2 == 1 {
            // After the base generation where there is room (so that the run changes and
            // deletes earlier documents), else from it.
            let start = match n {
                2 => 0,
                _ => 1 + rng.below(n as u64 - 2) as usize,
            };
            let end = start + 2 + rng.below((n - start - 1) as u64) as usize;
            let plan = writer.plan_merge(start..end).unwrap();
            pending = Some(plan.write(&cancel).unwrap());
        }
    }
    if background {
        assert!(background_merges > 0, "no background merge");
        stale_merges_are_refused(&mut writer, &path, &mut model, &cancel);
    }
    assert!(merges > 0, "no checkpoint merged");
    assert!(kept_rows > 0, "no deleted document kept its row");
    assert!(formats.contains(&DELETIONS_FORMAT), "{formats:?}");
    writer.compact().unwrap();
    assert_eq!(writer.manifest().format, SIMHASH_INDEX_FORMAT);
    assert_eq!(writer.manifest().generations.len(), 1);
    assert_eq!(holds_exactly(&path, &model, &[]), 0);
}

/// A merge whose generations a checkpoint merged since no longer fits: a checkpoint given
/// it is refused and leaves the index as it was, and dropping it removes its files.
fn stale_merges_are_refused(
    writer: &mut IndexWriter,
    path: &std::path::Path,
    model: &mut std::collections::BTreeMap<u64, DocEntry>,
    cancel: &std::sync::atomic::AtomicBool,
) {
    // A generation of three more documents, so that there are two to merge.
    let file = writer.manifest().files;
    let mut docs = batch(&mut SeededRng::new(5), file, 3).docs;
    for d in &mut docs {
        (d.rank, d.removed) = (None, false);
    }
    model.extend(docs.iter().map(|d| (d.doc_id, d.clone())));
    let index = Index::open(path, Verify::Sizes).unwrap();
    let checkpoint = Checkpoint {
        docs,
        files: file + 1,
        ..Default::default()
    };
    writer.checkpoint(&index, checkpoint).unwrap();
    drop(index);
    let n = writer.manifest().generations.len();
    let merged = writer.plan_merge(n - 2..n).unwrap().write(cancel).unwrap();
    let hidden = |path: &std::path::Path| {
        std::fs::read_dir(path)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".tmp")
            })
            .count()
    };
    assert_eq!(hidden(path), 1, "the merge's hidden directory");
    let index = Index::open(path, Verify::Sizes).unwrap();
    let checkpoint = Checkpoint {
        files: writer.manifest().files,
        merge: 1,
        ..Default::default()
    };
    writer.checkpoint(&index, checkpoint).unwrap();
    drop(index);
    assert!(!merged.fits(writer.manifest()));
    let before = writer.manifest().clone();
    let index = Index::open(path, Verify::Sizes).unwrap();
    let checkpoint = Checkpoint {
        files: writer.manifest().files,
        ..Default::default()
    };
    let refused = writer.checkpoint_merging(&index, checkpoint, Some(merged));
    assert!(refused
        .unwrap_err()
        .to_string()
        .contains("changed since it was planned"));
    assert_eq!(writer.manifest(), &before);
    drop(index);
    assert_eq!(hidden(path), 0, "a refused merge's files are removed");
    // A cancelled merge stops with an error, and leaves nothing.
    let n = writer.manifest().generations.len();
    let stop = std::sync::atomic::AtomicBool::new(true);
    let plan = writer.plan_merge(n - 2..n).unwrap();
    assert!(plan
        .write(&stop)
        .unwrap_err()
        .to_string()
        .contains("cancelled"));
    assert_eq!(hidden(path), 0);
    assert_eq!(holds_exactly(path, model, &[]), 0);
}

/// A manifest entry of a generation of `documents` documents, for the merge rules' tests.
fn sized(documents: u64, keep_decisions: bool) -> GenerationEntry {
    GenerationEntry {
        number: 0,
        dir: String::new(),
        file_offset: 0,
        files: 1,
        documents,
        indexed: documents,
        cluster_changes: 0,
        checksums: Vec::new(),
        format: SIMHASH_INDEX_FORMAT,
        keep: None,
        batch: None,
        keep_decisions,
        deleted: 0,
        deleted_indexed: 0,
    }
}

/// A background merge takes the newest generations while each holds at most twice the
/// documents of the newer ones, within the limit, never one with keep decisions, and two at
/// least; against a simulation of checkpoints, the generations stay logarithmic.
#[test]
fn background_merges_take_the_newest_generations_while_small() {
    let generation = sized;
    let range = |s: &[u64], limit| {
        let generations: Vec<GenerationEntry> = s.iter().map(|&n| generation(n, false)).collect();
        background_merge(&generations, s, limit)
    };
    assert_eq!(range(&[1000, 40, 10], 1 << 20), 0..0);
    assert_eq!(range(&[1000, 21, 10], 1 << 20), 0..0);
    assert_eq!(range(&[1000, 20, 10], 1 << 20), 1..3);
    assert_eq!(range(&[1000, 60, 20, 10], 1 << 20), 1..4);
    assert_eq!(range(&[1000, 60, 20, 10], 40), 2..4);
    assert_eq!(range(&[1000, 10], 5), 0..0);
    assert_eq!(range(&[10], 1 << 20), 0..0);
    assert_eq!(range(&[], 1 << 20), 0..0);
    let decided = [
        generation(5, true),
        generation(5, false),
        generation(5, false),
    ];
    assert_eq!(background_merge(&decided, &[5, 5, 5], 1 << 20), 1..3);
    // Checkpoints of shrinking and of random sizes, each followed by the merge it calls
    // for: the generations stay within twice the logarithm of the documents.
    let mut rng = SeededRng::new(7);
    for shrinking in [true, false] {
        let mut sizes: Vec<u64> = Vec::new();
        for c in 0..2_000u64 {
            let n = if shrinking {
                5_000 - 2 * c
            } else {
                1 + rng.below(1_000)
            };
            sizes.push(n);
            let r = range(&sizes, u64::MAX);
            if !r.is_empty() {
                let merged = sizes.drain(r.clone()).sum();
                sizes.insert(r.start, merged);
            }
            let total: u64 = sizes.iter().sum();
            let bound = 2 * (64 - total.leading_zeros()) as usize;
            assert!(
                sizes.len() <= bound,
                "{} generations: {sizes:?}",
                sizes.len()
            );
        }
    }
}

/// A checkpoint merges the newest generations while each holds no more documents than
/// those taken already, within the limit, and never one with keep decisions.
#[test]
fn merges_take_the_newest_generations_while_small() {
    let generation = sized;
    let count = |s: &[u64], written, limit| {
        let generations: Vec<GenerationEntry> = s.iter().map(|&n| generation(n, false)).collect();
        merge_count(&generations, s, written, limit)
    };
    assert_eq!(count(&[1000, 40, 10], 30, 1 << 20), 2);
    assert_eq!(count(&[1000, 40, 10], 30, 49), 1);
    // The limit is on what is carried over, not on the checkpoint's own writes.
    assert_eq!(count(&[1000, 40, 10], 3000, 50), 2);
    assert_eq!(count(&[1000, 40, 10], 9, 1 << 20), 0);
    assert_eq!(count(&[30, 40, 10], 10, 1 << 20), 1);
    assert_eq!(count(&[30, 20, 10], 10, 1 << 20), 3);
    assert_eq!(count(&[], 10, 1 << 20), 0);
    // A generation of 1000 documents all deleted since holds none: merged.
    let generations = [generation(1000, false), generation(1000, false)];
    assert_eq!(merge_count(&generations, &[1000, 0], 10, 1 << 20), 1);
    let decided = [generation(5, true), generation(5, false)];
    assert_eq!(merge_count(&decided, &[5, 5], 10, 1 << 20), 1);
}
