//! One large uncompressed JSONL file is read by several workers at once (issue 22): it is cut
//! into pieces at line starts, and its documents are numbered by the byte offset of their
//! line, whatever the number of workers.
//!
//! The oracle is the file itself: the offsets of its lines are computed here by splitting on
//! `\n`, the planted duplicates are known, and the run with one worker (one reader for the
//! whole file) must give the same tables as runs with two and three.

mod common;
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

/// Just above the size from which a file is split (io's `jsonl::SPLIT_BYTES`, 32 MiB).
const FILE_BYTES: usize = (32 << 20) + (3 << 20);

/// Unrelated documents of random words, with every 97th document an exact copy (other case)
/// of an earlier one: `(bytes, the offsets of all lines, (copy offset, original offset))`.
fn big_corpus() -> (Vec<u8>, Vec<u64>, Vec<(u64, u64)>) {
    let mut rng = SeededRng::new(0xB16_F11E);
    let words: Vec<String> = (0..5000)
        .map(|_| {
            let n = 3 + rng.below(8) as usize;
            (0..n)
                .map(|_| (b'a' + rng.below(26) as u8) as char)
                .collect()
        })
        .collect();
    let (mut bytes, mut offsets, mut copies) = (Vec::new(), Vec::new(), Vec::new());
    let mut texts: Vec<String> = Vec::new();
    while bytes.len() < FILE_BYTES {
        let i = offsets.len();
        let text = if i % 97 == 96 {
            let j = rng.below(i as u64 - 1) as usize;
            copies.push((bytes.len() as u64, offsets[j]));
            texts[j].to_uppercase()
        } else {
            let n = 60 + rng.below(60) as usize;
            let t: Vec<&str> = (0..n)
                .map(|_| words[rng.below(words.len() as u64) as usize].as_str())
                .collect();
            t.join(" ")
        };
        offsets.push(bytes.len() as u64);
        writeln!(bytes, "{{\"id\":\"d{i}\",\"text\":\"{text}\"}}").unwrap();
        texts.push(text);
    }
    (bytes, offsets, copies)
}

fn record_of(doc_id: u64) -> u64 {
    doc_id & ((1 << 40) - 1)
}

#[test]
fn a_big_jsonl_file_is_read_in_pieces_numbered_by_byte_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, offsets, copies) = big_corpus();
    let input = write(&dir.path().join("big.jsonl"), &bytes);
    let mut tables = Vec::new();
    for workers in ["1", "2", "3"] {
        let out = dir.path().join(format!("out-{workers}"));
        run_ok(&out, &["-w", workers], &[input.as_path()]);
        let fps = fingerprints(&out);
        // Every line is a document, numbered by the offset of its start.
        let records: Vec<u64> = fps.iter().map(|r| record_of(r.doc_id)).collect();
        assert_eq!(records, offsets, "{workers} workers");
        assert!(fps.iter().all(|r| r.record == record_of(r.doc_id)));
        // The planted copies, and nothing else, are exact pairs.
        let exact: BTreeSet<(u64, u64)> = pairs(&out)
            .iter()
            .filter(|p| p.kind == "exact")
            .map(|p| (record_of(p.doc_a), record_of(p.doc_b)))
            .collect();
        let mut groups: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for &(copy, original) in &copies {
            // A copy of a copy belongs to its original's group.
            let mut root = original;
            while let Some(&(_, o)) = copies.iter().find(|&&(c, _)| c == root) {
                root = o;
            }
            groups.entry(root).or_default().push(copy);
        }
        let want: BTreeSet<(u64, u64)> = groups
            .iter()
            .flat_map(|(&root, members)| members.iter().map(move |&m| (root.min(m), root.max(m))))
            .collect();
        assert_eq!(exact, want, "{workers} workers");
        tables.push((fps, pairs(&out), clusters(&out)));
    }
    assert!(
        tables.windows(2).all(|w| w[0] == w[1]),
        "results depend on the workers"
    );
}

#[test]
fn the_deduplicated_big_file_keeps_the_lines_not_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, offsets, copies) = big_corpus();
    let input = write(&dir.path().join("big.jsonl"), &bytes);
    let out = dir.path().join("out");
    let dedup = dir.path().join("dedup");
    run_ok(
        &out,
        &["-w", "2", "--write-dedup", s(&dedup)],
        &[input.as_path()],
    );
    let removed: BTreeSet<u64> = copies.iter().map(|&(c, _)| c).collect();
    let want: Vec<&[u8]> = offsets
        .iter()
        .zip(offsets.iter().skip(1).chain([&(bytes.len() as u64)]))
        .filter(|(start, _)| !removed.contains(start))
        .map(|(&start, &end)| &bytes[start as usize..end as usize])
        .collect();
    let kept = std::fs::read(dedup.join("big.jsonl")).unwrap();
    assert_eq!(kept, want.concat());
}
