//! The run directory's tests: preparing, overwriting, committing and reading back.

use std::path::{Path, PathBuf};

use super::prepare::temporary_of;
use super::*;
use crate::error::IoError;
use crate::lock::DirLock;
use crate::parquet_out::{ClusterRow, FingerprintRow, PairKind, PairRow, PartWriter};

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Every file under `dir` with its contents, to show that a refusal touched nothing.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.push((path.clone(), Vec::new()));
            files.extend(snapshot(&path));
        } else {
            files.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    files.sort();
    files
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn prepare_refuses_or_clears_and_creates_the_tables() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    prepare(&out, false, &[Table::Pairs], &[]).unwrap();
    assert!(out.join("pairs").is_dir());
    assert_eq!(
        std::fs::read_to_string(out.join(MARKER)).unwrap(),
        MARKER_TEXT
    );
    std::fs::write(out.join(SUCCESS), b"").unwrap();
    assert_eq!(
        prepare(&out, false, &[], &[]).unwrap_err().to_string(),
        format!(
            "output directory {} exists and is not empty (pass --overwrite to replace it)",
            out.display()
        )
    );
    write(&out.join("pairs/part-00003.parquet"), b"old");
    write(&out.join("pairs/.part-00004.parquet.tmp"), b"half");
    write(&out.join(".summary.json.123.tmp"), b"half");
    write(&out.join("_spill/w0/p1"), b"spilled");
    prepare(&out, true, &[Table::Fingerprints], &[]).unwrap();
    assert_eq!(names(&out), [MARKER, "fingerprints"]);
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    assert_eq!(
        prepare(&file, true, &[], &[]).unwrap_err().to_string(),
        format!("{} exists and is not a directory", file.display())
    );
}

#[test]
fn overwrite_refuses_a_directory_neardup_did_not_write_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mine");
    for name in ["a.txt", "b.txt", "c.txt", "d.txt", "e.txt", "f.txt"] {
        write(&out.join(name), name.as_bytes());
    }
    write(&out.join("notes/x"), b"x");
    let before = snapshot(&out);
    let err = prepare(&out, true, &TABLES, &[]).unwrap_err();
    assert!(
        matches!(err, IoError::NotNeardupOutput { more: 2, .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "refusing to replace {}: it is not a neardup output (no .neardup or summary.json); \
             it holds a.txt, b.txt, c.txt, d.txt, e.txt and 2 more; nothing was deleted \
             (remove them yourself, or choose another output directory)",
            out.display()
        )
    );
    assert_eq!(snapshot(&out), before);
}

#[test]
fn overwrite_refuses_a_neardup_output_holding_foreign_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    prepare(&out, false, &TABLES, &[]).unwrap();
    commit(&out, b"{}", true).unwrap();
    write(&out.join("my-notes.txt"), b"precious");
    write(&out.join("pairs/extra.csv"), b"mine too");
    write(&out.join(".hidden.tmp"), b"not neardup's");
    let before = snapshot(&out);
    let err = prepare(&out, true, &TABLES, &[]).unwrap_err();
    assert!(matches!(err, IoError::ForeignEntries { .. }), "{err:?}");
    let message = err.to_string();
    for name in [".hidden.tmp", "my-notes.txt", "pairs/extra.csv"] {
        assert!(message.contains(name), "{message}");
    }
    assert!(message.contains("nothing was deleted"), "{message}");
    assert_eq!(snapshot(&out), before, "not even _SUCCESS was removed");
}

#[test]
fn overwrite_replaces_a_run_without_a_marker_by_its_summary() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    write(&out.join("fingerprints/part-00000.parquet"), b"old");
    write(&out.join(SUMMARY), b"{}");
    write(&out.join(SUCCESS), b"");
    prepare(&out, true, &TABLES, &[]).unwrap();
    assert_eq!(names(&out), [MARKER, "clusters", "fingerprints", "pairs"]);
    assert!(names(&out.join("fingerprints")).is_empty());
}

#[test]
fn overwrite_removes_only_the_files_the_marker_lists() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dedup");
    prepare(&out, false, &[], &[]).unwrap();
    record_written(&out, &["a.jsonl".into(), "b.parquet".into()]).unwrap();
    write(&out.join("a.jsonl"), b"kept");
    write(&out.join(".b.parquet.tmp"), b"half");
    write(&out.join(REMOVED), b"rows");
    write(&out.join(SUCCESS), b"");
    prepare(&out, true, &[], &[]).unwrap();
    assert_eq!(names(&out), [MARKER]);
    assert_eq!(
        std::fs::read_to_string(out.join(MARKER)).unwrap(),
        MARKER_TEXT,
        "the list starts again"
    );
    write(&out.join("a.jsonl"), b"no longer listed");
    let err = prepare(&out, true, &[], &[]).unwrap_err();
    assert!(err.to_string().contains("a.jsonl"), "{err}");
    assert_eq!(
        std::fs::read(out.join("a.jsonl")).unwrap(),
        b"no longer listed"
    );
}

#[test]
fn overwrite_never_clears_a_directory_holding_what_the_run_reads_or_writes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    prepare(&out, false, &TABLES, &[]).unwrap();
    write(
        &out.join("fingerprints/part-00000.parquet"),
        b"fingerprints",
    );
    commit(&out, b"{}", true).unwrap();
    let before = snapshot(&out);
    let cases = [
        (
            Protected::new(out.join("fingerprints/part-00000.parquet"), "the input"),
            "it holds the input",
        ),
        (
            Protected::new(&out, "the --output directory"),
            "it is the --output directory",
        ),
        (
            // Not created yet: still compared with where it will be.
            Protected::new(out.join("tmp/spill"), "the spill directory"),
            "it holds the spill directory",
        ),
        (
            Protected::new(dir.path().join("run/../run/pairs"), "the input"),
            "it holds the input",
        ),
    ];
    for (protected, reason) in cases {
        let err = prepare(&out, true, &TABLES, std::slice::from_ref(&protected)).unwrap_err();
        assert!(matches!(err, IoError::Protected { .. }), "{err:?}");
        let message = err.to_string();
        assert!(message.contains(reason), "{message}");
        assert!(
            message.contains(&protected.path.display().to_string()),
            "{message}"
        );
        assert_eq!(snapshot(&out), before);
    }
    // A protected path outside, or containing the directory, or stdin, does not matter.
    let fine = [
        Protected::new(dir.path().join("corpus.jsonl"), "the input"),
        Protected::new(dir.path(), "the spill directory"),
        Protected::new("-", "the input"),
    ];
    prepare(&out, true, &TABLES, &fine).unwrap();
}

#[test]
fn overwrite_never_clears_the_root_the_home_or_the_current_directory() {
    let err = prepare(Path::new("/"), true, &[], &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "refusing to replace /: it is the root directory; nothing was deleted \
         (choose another output directory)"
    );
    let cwd = std::env::current_dir().unwrap();
    let err = prepare(&cwd, true, &[], &[]).unwrap_err();
    assert!(
        err.to_string().contains("it is the current directory"),
        "{err}"
    );
    let err = prepare(Path::new("."), true, &[], &[]).unwrap_err();
    assert!(
        err.to_string().contains("it is the current directory"),
        "{err}"
    );
    let parent = cwd.parent().unwrap();
    let err = prepare(parent, true, &[], &[]).unwrap_err();
    assert!(
        err.to_string().contains("it holds the current directory")
            || err.to_string().contains("home directory"),
        "{err}"
    );
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
        if home.is_dir() && std::fs::read_dir(&home).unwrap().next().is_some() {
            let err = prepare(&home, true, &[], &[]).unwrap_err();
            assert!(matches!(err, IoError::Protected { .. }), "{err:?}");
        }
    }
}

#[test]
fn temporary_names_stand_for_what_they_will_become() {
    assert_eq!(temporary_of(".summary.json.4242.tmp"), Some("summary.json"));
    assert_eq!(
        temporary_of(".part-00003.parquet.tmp"),
        Some("part-00003.parquet")
    );
    assert_eq!(temporary_of(".a.jsonl.tmp"), Some("a.jsonl"));
    assert_eq!(temporary_of("summary.json"), None);
    assert_eq!(temporary_of(".x"), None);
}

#[test]
fn a_committed_run_reads_back_and_an_uncommitted_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let tables = [Table::Fingerprints, Table::Pairs, Table::Clusters];
    prepare(&out, false, &tables, &[]).unwrap();
    let run = RunDir::new(&out);
    let mut fps = PartWriter::<FingerprintRow>::create(
        &run.table(Table::Fingerprints),
        1,
        &crate::parquet_out::test_meta(),
    )
    .unwrap();
    for doc in [3u64, 5] {
        fps.push(FingerprintRow {
            doc_id: doc,
            id: (doc == 3).then(|| "three".to_string()),
            source: "a.jsonl".into(),
            record: doc,
            simhash: doc * 10,
            n_tokens: 1,
            bytes: 1,
            empty: false,
            ..Default::default()
        })
        .unwrap();
    }
    assert!(fps
        .final_path()
        .ends_with("fingerprints/part-00001.parquet"));
    fps.commit().unwrap();
    let mut pairs = PartWriter::<PairRow>::create(
        &run.table(Table::Pairs),
        0,
        &crate::parquet_out::test_meta(),
    )
    .unwrap();
    pairs
        .push(PairRow {
            doc_a: 3,
            doc_b: 5,
            hamming: 2,
            kind: PairKind::Near,
            jaccard: Some(0.5),
        })
        .unwrap();
    pairs.commit().unwrap();
    let mut clusters = PartWriter::<ClusterRow>::create(
        &run.table(Table::Clusters),
        0,
        &crate::parquet_out::test_meta(),
    )
    .unwrap();
    for (doc, keep) in [(3, true), (5, false)] {
        clusters
            .push(ClusterRow {
                doc_id: doc,
                cluster_id: 3,
                cluster_size: 2,
                keep,
                kept_doc_id: 3,
                hamming: None,
                jaccard: None,
            })
            .unwrap();
    }
    clusters.commit().unwrap();

    let err = read_run(&out).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: no _SUCCESS: the run is incomplete or failed",
            out.display()
        )
    );
    commit(&out, b"{}", true).unwrap();
    assert_eq!(std::fs::read(run.summary()).unwrap(), b"{}");
    let got = read_run(&out).unwrap();
    assert_eq!(got.ids[&3].as_deref(), Some("three"));
    assert_eq!(got.ids[&5], None);
    assert_eq!(got.simhashes[&5], 50);
    assert_eq!(got.pairs, [(3, 5, "near".to_string())]);
    assert_eq!(got.jaccard[&(3, 5)], 0.5);
    assert_eq!(got.clusters[&5], 3);
    assert_eq!(got.kept[&3], 3);
}

#[test]
fn interrupted_runs_lose_their_temporary_files_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    prepare(&out, false, &TABLES, &[]).unwrap();
    record_written(&out, &["a.jsonl".into()]).unwrap();
    for name in [
        "fingerprints/part-00000.parquet",
        "fingerprints/.part-00001.parquet.tmp",
        "pairs/.part-00000.parquet.tmp",
        ".summary.json.77.tmp",
        ".a.jsonl.tmp",
        "a.jsonl",
        ".mine.tmp",
        "pairs/.notes.tmp",
    ] {
        write(&out.join(name), b"x");
    }
    write(&out.join("pairs/.part-00003.parquet.tmp"), b"x");
    let theirs: Vec<PathBuf> = remove_temporaries(&out, Some(3..4));
    assert_eq!(theirs, [out.join("pairs/.part-00003.parquet.tmp")]);
    let removed: Vec<String> = remove_temporaries(&out, None)
        .iter()
        .map(|p| p.strip_prefix(&out).unwrap().display().to_string())
        .collect();
    assert_eq!(
        removed,
        [
            ".a.jsonl.tmp",
            ".summary.json.77.tmp",
            "fingerprints/.part-00001.parquet.tmp",
            "pairs/.part-00000.parquet.tmp"
        ]
    );
    assert!(out.join("fingerprints/part-00000.parquet").exists());
    assert!(out.join("a.jsonl").exists());
    assert!(out.join(".mine.tmp").exists(), "not a name of neardup's");
    assert!(out.join("pairs/.notes.tmp").exists());
}

#[test]
fn prepare_locks_and_checks_every_directory_before_clearing_any() {
    let dir = tempfile::tempdir().unwrap();
    let (out, dedup) = (dir.path().join("run"), dir.path().join("dedup"));
    prepare(&out, false, &TABLES, &[]).unwrap();
    commit(&out, b"{}", true).unwrap();
    write(&dedup.join("precious.txt"), b"mine");
    let before = snapshot(&out);
    let targets = |what| {
        [
            Target {
                dir: &out,
                tables: &TABLES,
                protect: &[],
                what: "output directory",
            },
            Target {
                dir: &dedup,
                tables: &[],
                protect: &[],
                what,
            },
        ]
    };
    let err = prepare_all(&targets("--write-dedup directory"), true).unwrap_err();
    assert!(matches!(err, IoError::NotNeardupOutput { .. }), "{err:?}");
    assert_eq!(snapshot(&out), before, "the run was not cleared");
    std::fs::remove_file(dedup.join("precious.txt")).unwrap();

    // A directory another run holds is refused, naming it, before anything is cleared.
    let held = DirLock::acquire(&dedup, LOCK, "--write-dedup directory").unwrap();
    let err = prepare_all(&targets("--write-dedup directory"), true).unwrap_err();
    assert!(
        err.to_string().starts_with(&format!(
            "--write-dedup directory {} is in use by another neardup run (pid {}",
            dedup.display(),
            std::process::id()
        )),
        "{err}"
    );
    assert_eq!(snapshot(&out), before);
    drop(held);

    let prepared = prepare_all(&targets("--write-dedup directory"), true).unwrap();
    assert_eq!(prepared.lock_files().len(), 2);
    assert!(!out.join(SUCCESS).exists());
    assert_eq!(
        names(&out),
        [MARKER, LOCK, "clusters", "fingerprints", "pairs"]
    );
    let err = prepare(&out, true, &TABLES, &[]).unwrap_err();
    assert!(matches!(err, IoError::Locked { .. }), "{err:?}");
    drop(prepared);
    assert_eq!(names(&dedup), [MARKER], "the lock file goes with the lock");
}

#[test]
fn a_failed_run_gets_a_summary_but_no_marker() {
    let dir = tempfile::tempdir().unwrap();
    commit(dir.path(), b"{\"errors\": 1}", false).unwrap();
    assert!(dir.path().join(SUMMARY).exists());
    assert!(!dir.path().join(SUCCESS).exists());
}

#[test]
fn parts_of_other_runs_or_tables_are_refused() {
    use crate::parquet_out::{test_meta, TableMeta};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    prepare(&out, false, &TABLES, &[]).unwrap();
    let run = RunDir::new(&out);
    let meta = test_meta();
    let fps = PartWriter::<FingerprintRow>::create(&run.table(Table::Fingerprints), 0, &meta);
    fps.unwrap().commit().unwrap();
    let clusters = PartWriter::<ClusterRow>::create(&run.table(Table::Clusters), 0, &meta);
    clusters.unwrap().commit().unwrap();
    // Two pairs parts: one of this run, one of a run searched with another k.
    let pairs = PartWriter::<PairRow>::create(&run.table(Table::Pairs), 0, &meta);
    pairs.unwrap().commit().unwrap();
    let mut other = meta.clone();
    other.params["search"]["k"] = 6.into();
    let pairs = PartWriter::<PairRow>::create(&run.table(Table::Pairs), 1, &other);
    let stray = pairs.unwrap().commit().unwrap();
    commit(&out, b"{}", true).unwrap();
    assert_eq!(
        read_run(&out).unwrap_err().to_string(),
        format!(
            "{}: made with other parameters than {}: k (6 vs 3); tables made differently \
             cannot be used together",
            stray.display(),
            run.table(Table::Pairs).join("part-00000.parquet").display()
        )
    );
    // A part of a MinHash run.
    let minhash = TableMeta {
        scheme: "minhash".into(),
        ..meta.clone()
    };
    let pairs = PartWriter::<PairRow>::create(&run.table(Table::Pairs), 1, &minhash);
    pairs.unwrap().commit().unwrap();
    assert_eq!(
        read_run(&out).unwrap_err().to_string(),
        format!(
            "{}: scheme minhash, expected simhash-doc (as in {}: tables made by different \
             schemes cannot be used together)",
            stray.display(),
            run.table(Table::Fingerprints)
                .join("part-00000.parquet")
                .display()
        )
    );
    // A clusters part moved into pairs/.
    std::fs::remove_file(&stray).unwrap();
    std::fs::copy(
        run.table(Table::Clusters).join("part-00000.parquet"),
        run.table(Table::Pairs).join("part-00002.parquet"),
    )
    .unwrap();
    assert_eq!(
        read_run(&out).unwrap_err().to_string(),
        format!(
            "{}: a neardup clusters table, expected a pairs table",
            run.table(Table::Pairs).join("part-00002.parquet").display()
        )
    );
    // Without the stray part the run reads back.
    std::fs::remove_file(run.table(Table::Pairs).join("part-00002.parquet")).unwrap();
    read_run(&out).unwrap();
}
