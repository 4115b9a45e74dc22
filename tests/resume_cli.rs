//! `neardup run --resume` through the real binary (issue 19, item 3):
//!
//! * a run killed (SIGKILL) once its fingerprints are committed, then resumed, gives the
//!   tables of a clean run, row by row, and the same counts, with `--write-dedup` the same
//!   deduplicated corpus, without reading the corpus (no read stage in its timings); it may
//!   use another number of workers;
//! * a changed parameter or a changed input (size, or only its modification time) is
//!   refused, naming the difference, and the failed run is left as it was;
//! * nothing to resume (no directory) starts from the beginning; a complete run, or a
//!   directory without a job record, is refused; a failed run whose fingerprints were not all
//!   committed is run again from the beginning;
//! * verification cannot be resumed and is refused before anything starts.
//!
//! The failed run is made by a test hook, not a sleep: with
//! `NEARDUP_TEST_KILL_AFTER_FINGERPRINTS` set, the process kills itself with SIGKILL as soon
//! as every worker's resume part is committed (while the later stages run), so it leaves what
//! a run killed during the search leaves: committed fingerprints, no `_SUCCESS`, no summary.

mod common;
use common::{
    assert_refused, clusters, fingerprints, jsonl_line, neardup, pairs, run_ok, s, snapshot,
    summary, SeededRng,
};

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

/// The hook's variable (`neardup_dataflow::stages::fingerprint::resume::KILL_AFTER_FINGERPRINTS`).
const KILL_HOOK: &str = "NEARDUP_TEST_KILL_AFTER_FINGERPRINTS";

/// `n` documents of 30 to 90 random words; every 7th repeats the one before in capitals
/// (an exact duplicate after normalization), every 11th repeats it with one word changed
/// (a near duplicate).
fn corpus(path: &Path, n: u64, seed: u64) -> PathBuf {
    let mut rng = SeededRng::new(seed);
    let mut out = BufWriter::new(File::create(path).unwrap());
    let mut previous = String::new();
    for id in 0..n {
        let text = if id % 7 == 6 {
            previous.to_uppercase()
        } else if id % 11 == 10 {
            let mut words: Vec<&str> = previous.split(' ').collect();
            words[0] = "changed";
            words.join(" ")
        } else {
            let len = 30 + rng.below(60) as usize;
            rng.words(len).join(" ")
        };
        jsonl_line(&mut out, id, &text);
        previous = text;
    }
    out.flush().unwrap();
    path.to_path_buf()
}

fn inputs(dir: &Path) -> Vec<PathBuf> {
    vec![
        corpus(&dir.join("a.jsonl"), 3000, 1),
        corpus(&dir.join("b.jsonl"), 2000, 2),
    ]
}

fn run_cmd(out: &Path, args: &[&str], inputs: &[PathBuf]) -> assert_cmd::Command {
    let mut cmd = neardup();
    cmd.arg("run").args(args).args(["--output", s(out)]);
    cmd.args(inputs.iter().map(|p| s(p)));
    cmd
}

/// A run killed by the hook: no `_SUCCESS`, every resume part and fingerprints part
/// committed. `workers` resume parts are expected.
fn killed_run(out: &Path, args: &[&str], inputs: &[PathBuf], workers: usize) {
    let output = run_cmd(out, args, inputs)
        .env(KILL_HOOK, "1")
        .output()
        .unwrap();
    assert_eq!(
        output.status.signal(),
        Some(9),
        "the hook kills the run ({:?}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!out.join("_SUCCESS").exists());
    assert!(out.join("_resume/job.json").is_file());
    for part in 0..workers {
        let name = format!("part-{part:05}");
        assert!(out.join(format!("_resume/{name}.bin")).is_file(), "{name}");
        assert!(out.join(format!("fingerprints/{name}.parquet")).is_file());
    }
}

/// The tables, row by row, and the counts of two committed runs are equal.
fn assert_same_result(clean: &Path, resumed: &Path) {
    assert_eq!(fingerprints(clean), fingerprints(resumed), "fingerprints/");
    assert_eq!(pairs(clean), pairs(resumed), "pairs/");
    assert_eq!(clusters(clean), clusters(resumed), "clusters/");
    assert_eq!(summary(clean)["counts"], summary(resumed)["counts"]);
    assert!(!pairs(clean).is_empty() && summary(clean)["counts"]["exact_pairs"] != 0);
}

#[test]
fn a_killed_run_resumed_gives_the_clean_result_without_reading_the_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = inputs(dir.path());
    let (clean, failed) = (dir.path().join("clean"), dir.path().join("failed"));
    let (clean_dedup, failed_dedup) = (dir.path().join("clean-dd"), dir.path().join("failed-dd"));
    let args = ["--keep", "longest", "-k", "4"];
    let with = |workers: &'static str, dedup: &Path| {
        let mut a: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        a.extend(["-w".into(), workers.into(), "--write-dedup".into()]);
        a.push(s(dedup).into());
        a
    };
    let clean_args = with("2", &clean_dedup);
    let clean_args: Vec<&str> = clean_args.iter().map(String::as_str).collect();
    let input_refs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    run_ok(&clean, &clean_args, &input_refs);
    assert!(
        !clean.join("_resume").exists(),
        "a complete run keeps no resume parts"
    );

    let failed_args = with("2", &failed_dedup);
    let failed_args: Vec<&str> = failed_args.iter().map(String::as_str).collect();
    killed_run(&failed, &failed_args, &inputs, 2);
    // Resumed with three workers: results never depend on their number.
    let resume_args = with("3", &failed_dedup);
    let mut resume_args: Vec<&str> = resume_args.iter().map(String::as_str).collect();
    resume_args.push("--resume");
    let output = run_ok(&failed, &resume_args, &input_refs);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("reusing the fingerprints of the failed run")
            && stderr.contains("(2 parts)"),
        "{stderr}"
    );
    assert_same_result(&clean, &failed);
    let stages = &summary(&failed)["stage_seconds"];
    assert!(stages.get("resume").is_some(), "{stages}");
    assert!(
        stages.get("read").is_none() && stages.get("fingerprint").is_none(),
        "{stages}"
    );
    assert!(summary(&clean)["stage_seconds"].get("read").is_some());
    assert!(!failed.join("_resume").exists());
    // The deduplicated corpora are the same, file by file.
    let files = |dir: &Path| -> Vec<(String, Vec<u8>)> {
        snapshot(dir)
            .into_iter()
            .map(|(p, b)| (p.strip_prefix(dir).unwrap().display().to_string(), b))
            .filter(|(name, _)| name.ends_with(".jsonl"))
            .collect()
    };
    let kept = files(&clean_dedup);
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert_eq!(kept, files(&failed_dedup));
}

#[test]
fn changed_parameters_or_inputs_are_refused_naming_the_difference() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = inputs(dir.path());
    let out = dir.path().join("out");
    killed_run(&out, &["-w", "2"], &inputs, 2);
    let before = snapshot(&out);

    assert_refused(
        run_cmd(&out, &["-w", "2", "-k", "4", "--resume"], &inputs).env_remove(KILL_HOOK),
        &["was written by another job", "k (4 vs 3)", "--overwrite"],
    );
    assert_refused(
        &mut run_cmd(&out, &["--keep", "longest", "--resume"], &inputs),
        &[r#"keep ("longest" vs "first")"#],
    );
    assert_refused(
        &mut run_cmd(&out, &["--resume"], &inputs[..1]),
        &["inputs (1 files vs 2)"],
    );
    // Appended to: its size changed.
    let a = std::path::absolute(&inputs[0]).unwrap();
    let original = std::fs::read(&a).unwrap();
    let mut grown = original.clone();
    grown.extend_from_slice(b"{\"id\": 99999, \"text\": \"one more\"}\n");
    std::fs::write(&a, &grown).unwrap();
    assert_refused(
        &mut run_cmd(&out, &["--resume"], &inputs),
        &[&format!(
            "input {}: bytes ({} vs {})",
            a.display(),
            grown.len(),
            original.len()
        )],
    );
    // The same bytes written again: only the modification time tells.
    std::fs::write(&a, &original).unwrap();
    let when = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    File::options()
        .write(true)
        .open(&a)
        .unwrap()
        .set_modified(when)
        .unwrap();
    let stderr = assert_refused(
        &mut run_cmd(&out, &["--resume"], &inputs),
        &[&format!("input {}: modified (", a.display())],
    );
    assert!(!stderr.contains("bytes ("), "{stderr}");
    assert_eq!(snapshot(&out), before, "a refused --resume changes nothing");
}

#[test]
fn nothing_to_resume_a_complete_run_and_a_foreign_directory() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = inputs(dir.path());
    let input_refs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let clean = dir.path().join("clean");
    run_ok(&clean, &[], &input_refs);

    // No directory: a run from the beginning, with a notice.
    let fresh = dir.path().join("fresh");
    let output = run_ok(&fresh, &["--resume"], &input_refs);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("nothing to resume"), "{stderr}");
    assert_same_result(&clean, &fresh);

    // A complete run: nothing to resume, refused, untouched.
    let before = snapshot(&fresh);
    assert_refused(
        &mut run_cmd(&fresh, &["--resume"], &inputs),
        &["is a complete run", "nothing to resume"],
    );
    assert_eq!(snapshot(&fresh), before);

    // Something that is not a failed neardup run: refused, nothing deleted.
    let mine = dir.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), "keep me").unwrap();
    assert_refused(
        &mut run_cmd(&mine, &["--resume"], &inputs),
        &["has no job record"],
    );
    assert_eq!(std::fs::read(mine.join("notes.txt")).unwrap(), b"keep me");
}

#[test]
fn a_run_killed_before_every_worker_committed_runs_again_from_the_beginning() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = inputs(dir.path());
    let input_refs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let clean = dir.path().join("clean");
    run_ok(&clean, &["-w", "2"], &input_refs);
    let out = dir.path().join("out");
    killed_run(&out, &["-w", "2"], &inputs, 2);
    // As if worker 1 had not finished: its resume part is missing.
    std::fs::remove_file(out.join("_resume/part-00001.bin")).unwrap();
    let output = run_ok(&out, &["-w", "2", "--resume"], &input_refs);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("fingerprints of 1 of 2 workers: reading the corpus again"),
        "{stderr}"
    );
    assert!(summary(&out)["stage_seconds"].get("read").is_some());
    assert_same_result(&clean, &out);
}

#[test]
fn verification_is_not_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = inputs(dir.path());
    let out = dir.path().join("out");
    assert_refused(
        &mut run_cmd(
            &out,
            &["--scheme", "minhash", "--threshold", "0.8", "--resume"],
            &inputs,
        ),
        &["--resume: verification", "--verify none"],
    );
    assert!(!out.exists(), "refused before anything is written");
}

/// The resume parts verify themselves (issue 39, case 4): one flipped byte anywhere in a
/// part (its header, its first entries, its middle, its end), a part copied over another,
/// or a part of a run of another job is refused, naming the file, with no
/// `_SUCCESS` (never an abort, never a result with documents that exist nowhere); the
/// parts put back, the run resumes to the clean result.
#[test]
fn damaged_or_misplaced_resume_parts_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = inputs(dir.path());
    let input_refs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let clean = dir.path().join("clean");
    run_ok(&clean, &["-w", "2"], &input_refs);
    let (out, other) = (dir.path().join("out"), dir.path().join("other"));
    killed_run(&out, &["-w", "2"], &inputs, 2);
    // A run of another job (one input less).
    killed_run(&other, &["-w", "2"], &inputs[1..], 2);
    let part = |dir: &Path, n: usize| dir.join(format!("_resume/part-{n:05}.bin"));
    let originals = [
        std::fs::read(part(&out, 0)).unwrap(),
        std::fs::read(part(&out, 1)).unwrap(),
    ];
    let resume = || {
        let mut cmd = neardup();
        cmd.arg("run")
            .args(["-w", "2", "--resume", "--output", s(&out)]);
        cmd.args(inputs.iter().map(|p| s(p)));
        cmd
    };
    let len = originals[0].len();
    for at in [12, 60, len / 3, len / 2, len - 2] {
        let mut bytes = originals[0].clone();
        bytes[at] ^= 0x10;
        std::fs::write(part(&out, 0), &bytes).unwrap();
        let name = format!("{}", part(&out, 0).display());
        let stderr = common::assert_fails(&mut resume(), &out, &[&name, "damaged"]);
        assert!(stderr.contains("--overwrite"), "byte {at}: {stderr}");
        std::fs::write(part(&out, 0), &originals[0]).unwrap();
    }
    // Part 0 copied over part 1.
    std::fs::write(part(&out, 1), &originals[0]).unwrap();
    let name = format!("{}", part(&out, 1).display());
    common::assert_fails(
        &mut resume(),
        &out,
        &[&name, "holds part 0 of 2, not part 1 of 2"],
    );
    // Part 1 of a run of another job.
    std::fs::copy(part(&other, 1), part(&out, 1)).unwrap();
    common::assert_fails(
        &mut resume(),
        &out,
        &[&name, "belongs to a run of another job"],
    );
    // The parts put back: the run resumes to the clean result.
    std::fs::write(part(&out, 1), &originals[1]).unwrap();
    run_ok(&out, &["-w", "2", "--resume"], &input_refs);
    assert_same_result(&clean, &out);
}
