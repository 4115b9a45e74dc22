//! The run directory's lifecycle through the real binary (issues 23 and 19):
//!
//! * **one run at a time**: two runs started into one output directory at the same moment,
//!   many times over: exactly one succeeds, the other is refused naming the holder, and the
//!   tables of the one that succeeded agree with its `summary.json`;
//! * **every output checked before any is cleared**: a refused `--write-dedup` directory
//!   leaves the `--output` run whole;
//! * **interrupts**: SIGINT and SIGTERM mid-run end with 130 and 143, a message, no
//!   temporary files, no `_SUCCESS`, the lock released; in a two-process job, process 0
//!   ends naming the interrupted process 1;
//! * **what is read**: a FIFO named on the command line is an error, one met in a directory
//!   is skipped with a notice; a file named twice (`./a.jsonl a.jsonl`, a symbolic link, a
//!   hard link) is read once; an earlier output inside the corpus directory is skipped.
//!
//! Mid-run is found by a marker, not a sleep: the workers' hidden fingerprints part appears
//! when the dataflow is built (`wait_until_running`), and the corpus (40 MB) keeps the run
//! going for about a second after that (a 52 MB corpus took 1.2 s with `-w 2`, debug build,
//! on the 2-core test machine), far longer than the milliseconds from the marker to the
//! signal. Every wait is bounded.

mod common;
use common::{
    assert_refused, clusters, count, fingerprints, free_ports, jsonl_line, large_corpus, logs,
    loopback, neardup, pairs, s, snapshot, summary, wait_until_running, write, write_hostfile,
    Proc, SeededRng, BIN,
};

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long one run of the test corpora may take (debug binary, 2 shared cores, other tests
/// at the same time).
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

/// `n` documents of 40 to 140 random words with some planted copies, in one JSONL file.
fn corpus(path: &Path, n: u64, seed: u64) -> PathBuf {
    let mut rng = SeededRng::new(seed);
    let mut out = BufWriter::new(File::create(path).unwrap());
    let mut previous = String::new();
    for id in 0..n {
        let text = if id % 10 == 9 {
            previous.to_uppercase()
        } else {
            let len = 40 + rng.below(100) as usize;
            rng.words(len).join(" ")
        };
        jsonl_line(&mut out, id, &text);
        previous = text;
    }
    out.flush().unwrap();
    path.to_path_buf()
}

fn run_command(out: &Path, extra: &[&str], inputs: &[&Path]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "-w", "2"])
        .args(extra)
        .args(["--output", s(out)])
        .args(inputs.iter().map(|p| s(p)));
    cmd
}

/// Every file under `dir` whose name ends in `.tmp`.
fn temporary_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(temporary_files(&path));
        } else if path.to_string_lossy().ends_with(".tmp") {
            found.push(path);
        }
    }
    found
}

/// The tables of a committed run agree with its summary: one fingerprints and one clusters
/// row per document, one pairs row per pair, and every part readable.
fn assert_consistent(out: &Path) {
    let summary = summary(out);
    let documents = count(&summary, "documents") as usize;
    assert_eq!(fingerprints(out).len(), documents, "fingerprints rows");
    assert_eq!(clusters(out).len(), documents, "clusters rows");
    assert_eq!(
        pairs(out).len(),
        count(&summary, "pairs") as usize,
        "pairs rows"
    );
    assert_eq!(summary["errors"], serde_json::json!([]));
}

/// Two runs into one directory at the same moment, 6 times without and 6 times with
/// `--overwrite` (over the previous round's committed run): never both succeed, the loser
/// is refused at once naming the holder's pid, and the winner's tables are whole.
#[test]
fn two_runs_into_one_directory_at_once_one_is_refused_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(&dir.path().join("corpus.jsonl"), 20_000, 0x10C);
    let mut refusals = 0;
    for round in 0..12 {
        let overwrite = round >= 6;
        let out = if overwrite {
            dir.path().join("shared")
        } else {
            dir.path().join(format!("out-{round}"))
        };
        let extra: &[&str] = if overwrite { &["--overwrite"] } else { &[] };
        let mut a = Proc::spawn("run a", run_command(&out, extra, &[&input]));
        let mut b = Proc::spawn("run b", run_command(&out, extra, &[&input]));
        let (sa, sb) = (a.wait(RUN_TIMEOUT), b.wait(RUN_TIMEOUT));
        let log = logs(&[a, b]);
        let (sa, sb) = (
            sa.unwrap_or_else(|| panic!("a run did not end\n{log}")),
            sb.unwrap_or_else(|| panic!("a run did not end\n{log}")),
        );
        assert!(
            !(sa.success() && sb.success()),
            "round {round}: both runs succeeded into one directory\n{log}"
        );
        assert!(
            sa.success() || sb.success(),
            "round {round}: neither run succeeded\n{log}"
        );
        let loser = if sa.success() { sb } else { sa };
        assert_eq!(loser.code(), Some(1), "round {round}\n{log}");
        assert!(
            log.contains(&format!(
                "error: output directory {} is in use by another neardup run (pid ",
                out.display()
            )),
            "round {round}: the loser names the holder\n{log}"
        );
        refusals += 1;
        assert!(out.join("_SUCCESS").is_file(), "round {round}\n{log}");
        assert_consistent(&out);
        assert!(temporary_files(&out).is_empty(), "{log}");
        assert!(!out.join(".neardup.lock").exists(), "released and removed");
    }
    assert_eq!(refusals, 12);
}

/// A `--write-dedup` directory that is refused (it holds the user's files) is found before
/// the `--output` run is cleared: the earlier run stays whole, `_SUCCESS` included.
#[test]
fn a_refused_dedup_directory_leaves_the_output_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(&dir.path().join("corpus.jsonl"), 200, 7);
    let out = dir.path().join("out");
    let mut first = neardup();
    first.args(["run", "--output", s(&out), s(&input)]);
    first.assert().success();
    let dedup = dir.path().join("mine");
    write(&dedup.join("notes.txt"), b"precious");
    let before = (snapshot(&out), snapshot(&dedup));
    let mut second = neardup();
    second.args([
        "run",
        "--overwrite",
        "--write-dedup",
        s(&dedup),
        "--output",
        s(&out),
        s(&input),
    ]);
    assert_refused(
        &mut second,
        &["refusing to replace", "mine", "it is not a neardup output"],
    );
    assert_eq!((snapshot(&out), snapshot(&dedup)), before);
}

/// What a run killed while writing its `.neardup` marker leaves (issue 39): the lock file
/// of the dead run and the marker's hidden temporary file, cut short. It holds nothing of
/// anyone's, so a run into it, with `--overwrite` or `--resume`, takes it like an empty
/// directory (and removes the cut marker).
#[test]
fn a_directory_holding_only_a_cut_marker_is_taken_as_empty() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(&dir.path().join("corpus.jsonl"), 200, 9);
    for (i, flag) in [None, Some("--overwrite"), Some("--resume")]
        .iter()
        .enumerate()
    {
        let out = dir.path().join(format!("out-{i}"));
        write(&out.join(".neardup.lock"), b"");
        write(&out.join("..neardup.4242.tmp"), b"neard");
        let mut cmd = neardup();
        cmd.args(["run", "--output", s(&out), s(&input)]);
        cmd.args(flag.iter());
        let output = cmd.output().unwrap();
        assert!(
            output.status.success(),
            "{flag:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_consistent(&out);
        assert!(!out.join("..neardup.4242.tmp").exists());
        assert_eq!(
            std::fs::read_to_string(out.join(".neardup")).unwrap(),
            "neardup output\n"
        );
    }
    // Anything else beside it is still refused, and kept.
    let out = dir.path().join("mine");
    write(&out.join("..neardup.4242.tmp"), b"neard");
    write(&out.join("notes.txt"), b"precious");
    let mut cmd = neardup();
    cmd.args(["run", "--overwrite", "--output", s(&out), s(&input)]);
    assert_refused(&mut cmd, &["it is not a neardup output", "notes.txt"]);
    assert_eq!(std::fs::read(out.join("notes.txt")).unwrap(), b"precious");
}

/// Starts a run over a corpus that keeps it busy for seconds, waits until its workers run,
/// sends `signal`, and checks the end: the exit code, the message, no temporary or spill
/// files, no `_SUCCESS`, `summary.json` saying why, and the lock released (a new run into
/// the directory succeeds).
fn interrupt_mid_run(signal: &str, code: i32, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let inputs = large_corpus(dir.path(), 40);
    let out = dir.path().join("out");
    let spill = dir.path().join("spill");
    let mut flags = vec!["--spill-dir", s(&spill)];
    flags.extend_from_slice(extra);
    let inputs_ref: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let mut run = Proc::spawn("run", run_command(&out, &flags, &inputs_ref));
    // Both workers' fingerprint parts open: the dataflow runs.
    wait_until_running(std::slice::from_mut(&mut run), &out);
    let fingerprints = out.join("fingerprints");
    for _ in 0..500 {
        if common::procs::temporary_part(&fingerprints, 1).is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        run.poll().is_none(),
        "the run ended before the signal\n{}",
        run.log()
    );
    run.signal(signal);
    let status = run
        .wait(Duration::from_secs(30))
        .unwrap_or_else(|| panic!("no exit within 30 s of SIG{signal}\n{}", run.log()));
    let log = run.log();
    assert_eq!(status.code(), Some(code), "{log}");
    let stderr = run.stderr();
    assert!(
        stderr.contains(&format!("error: interrupted by SIG{signal}")),
        "{log}"
    );
    assert!(
        stderr.contains(&format!("no _SUCCESS was written in {}", out.display())),
        "{log}"
    );
    assert!(!out.join("_SUCCESS").exists(), "{log}");
    // One process drains what it has read and ends as a failed run that says why.
    let errors = summary(&out)["errors"].to_string();
    assert!(
        errors.contains(&format!("the run was interrupted by SIG{signal}")),
        "{errors}\n{log}"
    );
    assert_eq!(temporary_files(&out), Vec::<PathBuf>::new(), "{log}");
    assert!(!out.join("_spill").exists(), "{log}");
    let spilled: Vec<_> = std::fs::read_dir(&spill)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert_eq!(
        spilled,
        Vec::<PathBuf>::new(),
        "the spill directory is left empty\n{log}"
    );
    // The inputs are untouched and the directory is free: a rerun replaces the failed run.
    let small = corpus(&dir.path().join("small.jsonl"), 100, 3);
    let mut again = neardup();
    again.args(["run", "--overwrite", "--output", s(&out), s(&small)]);
    again.assert().success();
    assert_consistent(&out);
    assert_eq!(count(&summary(&out), "documents"), 100);
    assert!(inputs.iter().all(|p| p.is_file()));
}

#[test]
fn sigint_mid_run_exits_130_and_leaves_no_temporary_files() {
    interrupt_mid_run("INT", 130, &[]);
}

#[test]
fn sigterm_mid_run_exits_143_and_leaves_no_temporary_files() {
    // A memory limit this small makes the search spill, so there are spill files to remove
    // if the signal comes late.
    interrupt_mid_run("TERM", 143, &["--memory-limit", "1M"]);
}

/// A two-process job; process 1 gets SIGTERM mid-run: it exits 143, and process 0 ends
/// with 1 within seconds, naming process 1 and the signal. No `_SUCCESS`, no temporary
/// files.
#[test]
fn sigterm_to_process_1_stops_process_0_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = large_corpus(dir.path(), 40);
    let hostfile = write_hostfile(&dir.path().join("hosts.txt"), &loopback(&free_ports(2)));
    let out = dir.path().join("out");
    let mut procs: Vec<Proc> = (0..2)
        .map(|i| {
            let mut cmd = Command::new(BIN);
            cmd.args(["run", "-n", "2", "-p", &i.to_string(), "-h", s(&hostfile)])
                .args(["-w", "1", "--output", s(&out)])
                .args(inputs.iter().map(|p| s(p)));
            Proc::spawn(format!("process {i}"), cmd)
        })
        .collect();
    wait_until_running(&mut procs, &out);
    procs[1].signal("TERM");
    let p1 = procs[1].wait(Duration::from_secs(30));
    let p0 = procs[0].wait(Duration::from_secs(30));
    let log = logs(&procs);
    assert_eq!(p1.and_then(|s| s.code()), Some(143), "{log}");
    assert!(
        procs[1].stderr().contains("error: interrupted by SIGTERM"),
        "{log}"
    );
    assert_eq!(p0.and_then(|s| s.code()), Some(1), "{log}");
    let stderr0 = procs[0].stderr();
    assert!(
        stderr0.contains("process 1 (127.0.0.1:") && stderr0.contains("was interrupted by SIGTERM"),
        "process 0 names the interrupted process\n{log}"
    );
    assert!(
        procs[1].stderr().contains("removed temporary files: "),
        "names what it removed\n{log}"
    );
    assert!(!out.join("_SUCCESS").exists(), "{log}");
    assert_eq!(temporary_files(&out), Vec::<PathBuf>::new(), "{log}");
}

/// A FIFO named on the command line is an error at once (it used to hang the run); one in a
/// scanned directory is skipped with a notice and the rest is read.
#[test]
fn fifos_are_refused_when_named_and_skipped_when_met() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    corpus(
        &{
            std::fs::create_dir_all(&data).unwrap();
            data.join("a.jsonl")
        },
        50,
        1,
    );
    let fifo = data.join("b.jsonl");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let out = dir.path().join("out");
    let mut named = neardup();
    named
        .args(["run", "--output", s(&out), s(&fifo)])
        .timeout(Duration::from_secs(60));
    assert_refused(
        &mut named,
        &[&format!(
            "{}: is a named pipe (FIFO), not a regular file",
            fifo.display()
        )],
    );
    assert!(!out.exists(), "refused before the output was made");
    let mut scanned = neardup();
    scanned
        .args(["run", "--output", s(&out), s(&data)])
        .timeout(Duration::from_secs(120));
    let output = scanned.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "neardup: notice: skipped 1 entry that is not a regular file: {} (a named pipe (FIFO))",
            fifo.display()
        )),
        "{stderr}"
    );
    assert_eq!(count(&summary(&out), "documents"), 50);
}

/// One file under several names is read once: `./a.jsonl a.jsonl` (the case, which
/// read it twice and paired every document with itself), a symbolic link and a hard link in
/// a scanned directory.
#[test]
fn a_file_named_twice_is_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    corpus(&data.join("a.jsonl"), 80, 2);
    let out = dir.path().join("out");
    let output = neardup()
        .current_dir(&data)
        .args(["run", "--output", s(&out), "./a.jsonl", "a.jsonl"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "neardup: notice: read once a file named more than once: a.jsonl (as ./a.jsonl)"
        ),
        "{stderr}"
    );
    let alone = dir.path().join("alone");
    let mut reference = neardup();
    reference.args(["run", "--output", s(&alone), s(&data.join("a.jsonl"))]);
    reference.assert().success();
    let (got, want) = (summary(&out), summary(&alone));
    assert_eq!(count(&got, "documents"), 80);
    assert_eq!(count(&got, "pairs"), count(&want, "pairs"));
    assert_eq!(
        got["parameters"]["inputs"],
        serde_json::json!(["./a.jsonl"])
    );

    std::os::unix::fs::symlink(data.join("a.jsonl"), data.join("link.jsonl")).unwrap();
    std::fs::hard_link(data.join("a.jsonl"), data.join("hard.jsonl")).unwrap();
    let linked = dir.path().join("linked");
    let output = neardup()
        .args(["run", "--output", s(&linked), s(&data)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(count(&summary(&linked), "documents"), 80, "{stderr}");
    assert_eq!(count(&summary(&linked), "pairs"), count(&want, "pairs"));
    assert!(
        stderr.contains("read once files named more than once"),
        "{stderr}"
    );
}

/// An earlier run and a deduplicated corpus left inside the corpus directory are not read
/// as input the next time.
#[test]
fn outputs_inside_the_corpus_directory_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    corpus(&data.join("a.jsonl"), 60, 4);
    let mut first = neardup();
    first.args([
        "run",
        "--write-dedup",
        s(&data.join("dedup")),
        "--output",
        s(&data.join("run")),
        s(&data),
    ]);
    first.assert().success();
    let out = dir.path().join("out");
    let output = neardup()
        .args(["run", "--output", s(&out), s(&data)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "neardup: notice: skipped 2 neardup outputs found among the inputs: {}/, {}/",
            data.join("dedup").display(),
            data.join("run").display()
        )),
        "{stderr}"
    );
    assert_eq!(count(&summary(&out), "documents"), 60);
}
