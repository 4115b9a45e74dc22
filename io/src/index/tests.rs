//! The index against brute force, and its refusals.

use std::collections::BTreeSet;

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
    }
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
        });
    }
    NewGeneration {
        files: 1,
        docs,
        cluster_changes: Vec::new(),
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
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index");
    let mut rng = SeededRng::new(5);
    let mut all = Vec::new();
    {
        let mut writer = IndexWriter::create(&path, &spec()).unwrap();
        for file in 0..3 {
            assert_eq!(writer.file_offset(), file);
            let b = batch(&mut rng, file, 800);
            all.extend(b.docs.clone());
            writer.add(b).unwrap();
        }
    }
    let mut writer = IndexWriter::open(&path).unwrap();
    // Generation 3 moves a document of generation 0 into another cluster.
    let moved = all[1].doc_id;
    let mut b = batch(&mut rng, 3, 10);
    b.cluster_changes = vec![(moved, 42)];
    all.extend(b.docs.clone());
    writer.add(b).unwrap();
    drop(writer);
    let check = |index: &Index| {
        assert_eq!(index.manifest().documents, all.len() as u64);
        for (i, doc) in all.iter().enumerate().step_by(3) {
            let fp = if i % 2 == 0 {
                doc.simhash
            } else {
                doc.simhash ^ 0b101
            };
            for k in [0, 2, 3] {
                assert_eq!(answers(index, fp, k), brute(&all, fp, k));
            }
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
    check(&index);
    let names: Vec<String> = std::fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "old generations removed: {names:?}");
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
    std::fs::write(&manifest, text.replace("\"format\": 1", "\"format\": 2")).unwrap();
    let e = error(Index::open(&path, Verify::Sizes));
    assert!(e.contains("index format 2, but this neardup"), "{e}");
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
