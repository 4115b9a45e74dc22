//! Multi-process jobs with REAL processes of the binary on this machine: several `neardup run`
//! processes with one hostfile, talking over loopback TCP (and, as root, across network
//! namespaces). What is pinned down (docs/deploy.md):
//!
//! * N processes find the same fingerprints, pairs and clusters as one process, and process 0
//!   writes `_SUCCESS` (each process writes its own parts into the shared directory);
//! * fail-stop: a process killed (`kill -9`) or frozen (`SIGSTOP`, `--peer-timeout`) mid-job
//!   ends every other process with a non-zero exit within a bound, and no `_SUCCESS` is left;
//! * start-up: a process that never arrives (`--connect-timeout`), mismatched parameters,
//!   another job's process (`--job-id`) and foreign connections (garbage, silence) on process
//!   0's port are refused or ignored with messages that name the process.
//!
//! Every wait is bounded (`Proc::wait`, `wait_all`), and every process is killed when its
//! `Proc` is dropped, so a hang fails the test instead of hanging CI. Ports come from binding
//! `127.0.0.1:0`.

mod common;
use common::{
    batches, column, free_ports, jsonl_line, large_corpus, logs, loopback, parts, s, summary,
    wait_all, wait_until_running, write_hostfile, Proc, SeededRng, BIN,
};
use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use arrow::array::AsArray;
use arrow::datatypes::{Int64Type, UInt32Type, UInt64Type, UInt8Type};
use serde_json::json;

/// How long a whole job of the small corpus may take (debug binary, 2 shared cores, other
/// tests running at the same time).
const JOB_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the survivors of a lost process may take to notice, beyond the flag's own bound.
const NOTICE: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------
// Processes (the harness is in tests/common/procs.rs)

/// `neardup run -n N -p I -h HOSTFILE -w 1 EXTRA... --output OUT INPUTS...` (no `-w 1` when
/// EXTRA has a `-w`), optionally
/// through a wrapper (`ip netns exec NS`).
struct JobSpec<'a> {
    hostfile: &'a Path,
    processes: usize,
    out: &'a Path,
    inputs: &'a [PathBuf],
    wrapper: &'a [String],
}

impl JobSpec<'_> {
    fn command(&self, process: usize, extra: &[&str]) -> Command {
        let mut cmd = match self.wrapper.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(BIN);
                c
            }
            None => Command::new(BIN),
        };
        cmd.arg("run")
            .args(["-n", &self.processes.to_string()])
            .args(["-p", &process.to_string()])
            .args(["-h", s(self.hostfile)]);
        if !extra.contains(&"-w") {
            cmd.args(["-w", "1"]);
        }
        cmd.args(extra)
            .args(["--output", s(self.out)])
            .args(self.inputs.iter().map(|p| s(p)));
        cmd
    }

    fn start(&self, process: usize, extra: &[&str]) -> Proc {
        Proc::spawn(format!("process {process}"), self.command(process, extra))
    }

    fn start_all(&self, extra: &[&str]) -> Vec<Proc> {
        (0..self.processes).map(|i| self.start(i, extra)).collect()
    }
}

/// A single-process run with one worker: the reference every multi-process run must match.
fn reference_run(out: &Path, inputs: &[PathBuf]) {
    let mut cmd = Command::new(BIN);
    cmd.args(["run", "-w", "1", "--output", s(out)])
        .args(inputs.iter().map(|p| s(p)));
    let mut p = Proc::spawn("reference run", cmd);
    let status = p.wait(JOB_TIMEOUT);
    assert!(
        status.is_some_and(|s| s.success()),
        "the single-process reference run failed\n{}",
        p.log()
    );
    assert!(out.join("_SUCCESS").is_file());
}

/// Asserts that every process succeeded, `_SUCCESS` exists, and the job matches `reference`.
fn assert_succeeded_like(procs: &mut [Proc], out: &Path, reference: &Path) {
    let statuses = wait_all(procs, JOB_TIMEOUT);
    for (p, status) in procs.iter().zip(&statuses) {
        assert!(
            status.success(),
            "{} failed with {status}\n{}",
            p.name,
            logs(procs)
        );
    }
    assert!(
        out.join("_SUCCESS").is_file(),
        "no _SUCCESS in {}\n{}",
        out.display(),
        logs(procs)
    );
    let summary = summary(out);
    assert_eq!(
        summary["parameters"]["processes"],
        json!(procs.len()),
        "summary.json records the processes"
    );
    assert_eq!(summary["errors"], json!([]));
    assert_same_results(out, reference);
    assert_only_fingerprints_crossed(&summary, procs.len());
    // Each process wrote its own parts: one per worker (1 per process here).
    for table in ["fingerprints", "pairs", "clusters"] {
        let names: Vec<String> = parts(&out.join(table))
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        let want: Vec<String> = (0..procs.len())
            .map(|i| format!("part-{i:05}.parquet"))
            .collect();
        assert_eq!(names, want, "{table}/ parts");
    }
}

/// Documents stay in the process that read them (issue 22): no bytes under `read`, and what
/// did cross is a few records per document (an exact-stage record of about 60 bytes and at
/// most one 40-byte table record per other process), nowhere near the text.
fn assert_only_fingerprints_crossed(summary: &serde_json::Value, processes: usize) {
    let network = &summary["network"];
    let by_stage = network["by_stage"].as_object().expect("network.by_stage");
    assert!(
        !by_stage.contains_key("read"),
        "documents crossed processes: {network}"
    );
    let bytes = network["bytes"].as_u64().unwrap();
    assert_eq!(
        bytes,
        by_stage.values().map(|v| v.as_u64().unwrap()).sum::<u64>()
    );
    assert!(bytes > 0, "fingerprints must cross to meet: {network}");
    let per_doc = network["bytes_per_document"].as_f64().unwrap();
    let bound = 100.0 + 40.0 * (processes - 1) as f64;
    assert!(
        per_doc <= bound,
        "{per_doc} bytes per document > {bound}: {network}"
    );
    let text_bytes = summary["counts"]["bytes"].as_u64().unwrap();
    assert!(
        bytes * 5 < text_bytes,
        "{bytes} bytes sent for {text_bytes} of text"
    );
}

// ---------------------------------------------------------------------------------------
// Corpora

/// Three JSONL files (so several workers read) of unrelated documents with planted exact
/// duplicates (case, punctuation, whitespace) and near duplicates (one word replaced in a
/// long text), spread over the files.
fn small_corpus(dir: &Path) -> Vec<PathBuf> {
    let mut rng = SeededRng::new(0x005E_EDC1);
    let mut texts: Vec<String> = (0..150)
        .map(|_| {
            let n = 30 + rng.below(120) as usize;
            rng.words(n).join(" ")
        })
        .collect();
    for _ in 0..12 {
        let len = 250 + rng.below(150) as usize;
        let base = rng.words(len);
        let mut near = base.clone();
        let at = rng.below(near.len() as u64) as usize;
        near[at] = rng.word();
        texts.push(base.join(" "));
        texts.push(near.join(" "));
        texts.push(format!("{}!", base.join(", ").to_uppercase()));
        if rng.below(2) == 0 {
            texts.push(format!("  {}  ", near.join("\n")));
        }
    }
    // A fixed shuffle, so duplicates land in different files and on different workers.
    for i in (1..texts.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        texts.swap(i, j);
    }
    let files: Vec<PathBuf> = (0..3)
        .map(|f| dir.join(format!("corpus-{f}.jsonl")))
        .collect();
    let mut writers: Vec<BufWriter<File>> = files
        .iter()
        .map(|p| BufWriter::new(File::create(p).unwrap()))
        .collect();
    for (i, text) in texts.iter().enumerate() {
        jsonl_line(&mut writers[i % 3], i as u64, text);
    }
    for mut w in writers {
        w.flush().unwrap();
    }
    files
}

// ---------------------------------------------------------------------------------------
// Outputs

/// (doc_id, simhash)
fn fingerprint_set(out: &Path) -> BTreeSet<(u64, u64)> {
    let mut rows = BTreeSet::new();
    for b in batches(&out.join("fingerprints")) {
        let ids = column(&b, "doc_id").as_primitive::<UInt64Type>();
        let simhashes = column(&b, "simhash").as_primitive::<UInt64Type>();
        for i in 0..b.num_rows() {
            assert!(
                rows.insert((ids.value(i), simhashes.value(i))),
                "a duplicate row"
            );
        }
    }
    rows
}

/// (doc_a, doc_b, hamming, kind)
fn pair_set(out: &Path) -> BTreeSet<(u64, u64, u8, String)> {
    let mut rows = BTreeSet::new();
    for b in batches(&out.join("pairs")) {
        let a = column(&b, "doc_a").as_primitive::<UInt64Type>();
        let bb = column(&b, "doc_b").as_primitive::<UInt64Type>();
        let hamming = column(&b, "hamming").as_primitive::<UInt8Type>();
        let kind = column(&b, "kind").as_string::<i32>();
        for i in 0..b.num_rows() {
            let row = (
                a.value(i),
                bb.value(i),
                hamming.value(i),
                kind.value(i).to_owned(),
            );
            assert!(rows.insert(row.clone()), "pair {row:?} is listed twice");
        }
    }
    rows
}

/// (doc_id, cluster_id, cluster_size, keep)
fn cluster_set(out: &Path) -> BTreeSet<(u64, i64, u32, bool)> {
    let mut rows = BTreeSet::new();
    for b in batches(&out.join("clusters")) {
        let ids = column(&b, "doc_id").as_primitive::<UInt64Type>();
        let cluster = column(&b, "cluster_id").as_primitive::<Int64Type>();
        let size = column(&b, "cluster_size").as_primitive::<UInt32Type>();
        let keep = column(&b, "keep").as_boolean();
        for i in 0..b.num_rows() {
            let row = (ids.value(i), cluster.value(i), size.value(i), keep.value(i));
            assert!(rows.insert(row), "document {} is listed twice", row.0);
        }
    }
    rows
}

fn assert_same_results(out: &Path, reference: &Path) {
    assert_eq!(
        fingerprint_set(out),
        fingerprint_set(reference),
        "fingerprints differ from the single-process run"
    );
    let (got, want) = (pair_set(out), pair_set(reference));
    assert!(
        want.iter().any(|p| p.3 == "exact") && want.iter().any(|p| p.3 == "near"),
        "the corpus has planted exact and near duplicates: {want:?}"
    );
    assert_eq!(got, want, "pairs differ from the single-process run");
    assert_eq!(
        cluster_set(out),
        cluster_set(reference),
        "clusters differ from the single-process run"
    );
}

/// Whether `text` has `word` as a whole word (split at anything but letters, digits, `_`).
fn has_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == word)
}

/// After `lost` was killed or stopped: every other process must end with a non-zero status
/// within `bound`, process 0 with exit code 1 and a message naming the lost process, and
/// there must be no `_SUCCESS`.
fn assert_survivors_fail(procs: &mut [Proc], lost: usize, bound: Duration, out: &Path) {
    let start = Instant::now();
    let deadline = start + bound;
    for i in (0..procs.len()).filter(|&i| i != lost) {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(status) = procs[i].wait(left) else {
            panic!(
                "process {i} still runs {bound:?} after process {lost} was lost\n{}",
                logs(procs)
            );
        };
        assert!(
            !status.success(),
            "process {i} succeeded although process {lost} was lost\n{}",
            logs(procs)
        );
    }
    eprintln!(
        "survivors ended {:.1} s after process {lost} was lost",
        start.elapsed().as_secs_f64()
    );
    if lost != 0 {
        let p0 = &procs[0];
        assert_eq!(
            p0.status.and_then(|s| s.code()),
            Some(1),
            "process 0 exits 1 (not a panic or a signal)\n{}",
            logs(procs)
        );
        assert!(
            p0.stderr().contains(&format!("process {lost}")),
            "process 0 names the lost process {lost}\n{}",
            logs(procs)
        );
    }
    assert!(
        !out.join("_SUCCESS").exists(),
        "a failed job left _SUCCESS\n{}",
        logs(procs)
    );
}

// ---------------------------------------------------------------------------------------
// (a) the same results with 1, 2 and 3 processes

#[test]
fn two_and_three_processes_find_what_one_process_finds() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = small_corpus(dir.path());
    let reference = dir.path().join("reference");
    reference_run(&reference, &inputs);
    for n in [2, 3] {
        let hostfile = write_hostfile(
            &dir.path().join(format!("hosts-{n}.txt")),
            &loopback(&free_ports(n)),
        );
        let out = dir.path().join(format!("out-{n}"));
        let job = JobSpec {
            hostfile: &hostfile,
            processes: n,
            out: &out,
            inputs: &inputs,
            wrapper: &[],
        };
        let mut procs = job.start_all(&[]);
        assert_succeeded_like(&mut procs, &out, &reference);
    }
}

/// Issue 38: the site templates are learned across processes (each host's blocks counted at
/// one worker, every template block sent to every worker): 2 processes of 2 workers learn
/// the templates one worker learns, and find its fingerprints, pairs and clusters.
#[test]
fn site_templates_are_learned_alike_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = small_corpus(dir.path());
    inputs.push(common::corpus::template_site(dir.path()));
    let reference = dir.path().join("reference");
    reference_run(&reference, &inputs);
    let hostfile = write_hostfile(&dir.path().join("hosts.txt"), &loopback(&free_ports(2)));
    let out = dir.path().join("out");
    let job = JobSpec {
        hostfile: &hostfile,
        processes: 2,
        out: &out,
        inputs: &inputs,
        wrapper: &[],
    };
    let mut procs = job.start_all(&["-w", "2"]);
    let statuses = wait_all(&mut procs, JOB_TIMEOUT);
    assert!(statuses.iter().all(|s| s.success()), "{}", logs(&procs));
    assert!(out.join("_SUCCESS").is_file());
    assert_same_results(&out, &reference);
    let learned = |out: &Path| {
        let counts = &summary(out)["counts"];
        (
            counts["template_hosts"].clone(),
            counts["template_blocks"].clone(),
        )
    };
    assert_eq!(learned(&reference), (json!(1), json!(10)));
    assert_eq!(learned(&out), learned(&reference));
}

// ---------------------------------------------------------------------------------------
// (b), (c) fail-stop: a process lost mid-job ends the job

/// A 3-process job over a larger corpus; `kill -9` of process 1 once every worker runs.
///
/// "Mid-job" is made reliable by waiting for every worker's hidden fingerprints part (opened
/// when the dataflow is built, after start-up) and killing at once: the corpus (12 MB) keeps
/// the job busy for seconds after that, and process 0 is checked to be still running.
#[test]
fn a_killed_process_ends_the_job_without_success() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = large_corpus(dir.path(), 12);
    let hostfile = write_hostfile(&dir.path().join("hosts.txt"), &loopback(&free_ports(3)));
    let out = dir.path().join("out");
    let job = JobSpec {
        hostfile: &hostfile,
        processes: 3,
        out: &out,
        inputs: &inputs,
        wrapper: &[],
    };
    let mut procs = job.start_all(&["--peer-timeout", "60"]);
    wait_until_running(&mut procs, &out);
    procs[1].child.kill().unwrap();
    assert!(
        procs[0].poll().is_none() && procs[2].poll().is_none(),
        "the job ended before process 1 was killed: make the corpus larger\n{}",
        logs(&procs)
    );
    assert_survivors_fail(&mut procs, 1, NOTICE, &out);
}

/// `SIGSTOP` of process 1 (a frozen host: its sockets stay open) with `--peer-timeout 3`:
/// the others end within 3 + 30 s. Then `SIGCONT`: process 1 must end non-zero by itself.
#[test]
fn a_frozen_process_ends_the_job_after_the_peer_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = large_corpus(dir.path(), 12);
    let hostfile = write_hostfile(&dir.path().join("hosts.txt"), &loopback(&free_ports(3)));
    let out = dir.path().join("out");
    let job = JobSpec {
        hostfile: &hostfile,
        processes: 3,
        out: &out,
        inputs: &inputs,
        wrapper: &[],
    };
    let mut procs = job.start_all(&["--peer-timeout", "3"]);
    wait_until_running(&mut procs, &out);
    procs[1].signal("STOP");
    assert!(
        procs[0].poll().is_none() && procs[2].poll().is_none(),
        "the job ended before process 1 was stopped: make the corpus larger\n{}",
        logs(&procs)
    );
    assert_survivors_fail(&mut procs, 1, Duration::from_secs(3) + NOTICE, &out);
    procs[1].signal("CONT");
    let status = procs[1].wait(NOTICE);
    assert!(
        status.is_some_and(|s| !s.success()),
        "process 1, resumed after its job ended, exits non-zero by itself within {NOTICE:?}\n{}",
        logs(&procs)
    );
}

// ---------------------------------------------------------------------------------------
// (d), (e), (f) start-up

/// Process 1 never starts: process 0 gives up after --connect-timeout and names it.
#[test]
fn a_process_that_never_connects_ends_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = small_corpus(dir.path());
    let ports = free_ports(2);
    let hostfile = write_hostfile(&dir.path().join("hosts.txt"), &loopback(&ports));
    let out = dir.path().join("out");
    let job = JobSpec {
        hostfile: &hostfile,
        processes: 2,
        out: &out,
        inputs: &inputs,
        wrapper: &[],
    };
    let start = Instant::now();
    let mut p0 = job.start(0, &["--connect-timeout", "3"]);
    let status = p0.wait(Duration::from_secs(3) + NOTICE);
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(1),
        "process 0 exits 1 after --connect-timeout 3\n{}",
        p0.log()
    );
    let stderr = p0.stderr();
    assert!(
        stderr.contains("process 1") && stderr.contains(&format!("127.0.0.1:{}", ports[1])),
        "the message names process 1 and its address\n{}",
        p0.log()
    );
    assert!(
        start.elapsed() >= Duration::from_secs(3),
        "process 0 gave up before --connect-timeout 3 ({:?})\n{}",
        start.elapsed(),
        p0.log()
    );
    assert!(!out.join("_SUCCESS").exists());
}

/// Process 0 never starts: process 1 gives up after --connect-timeout and names it.
#[test]
fn a_missing_process_0_ends_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = small_corpus(dir.path());
    let ports = free_ports(2);
    let hostfile = write_hostfile(&dir.path().join("hosts.txt"), &loopback(&ports));
    let out = dir.path().join("out");
    let job = JobSpec {
        hostfile: &hostfile,
        processes: 2,
        out: &out,
        inputs: &inputs,
        wrapper: &[],
    };
    let mut p1 = job.start(1, &["--connect-timeout", "3"]);
    let status = p1.wait(Duration::from_secs(3) + NOTICE);
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(1),
        "process 1 exits 1 after --connect-timeout 3\n{}",
        p1.log()
    );
    assert!(
        p1.stderr().contains("process 0"),
        "the message names process 0\n{}",
        p1.log()
    );
    assert!(!out.join("_SUCCESS").exists());
}

/// Two processes started with different flags: both exit 1, and process 0 names process 1
/// and the differing field.
fn assert_mismatch_refused(flags: [&[&str]; 2], field_words: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let inputs = small_corpus(dir.path());
    let hostfile = write_hostfile(&dir.path().join("hosts.txt"), &loopback(&free_ports(2)));
    let out = dir.path().join("out");
    let job = JobSpec {
        hostfile: &hostfile,
        processes: 2,
        out: &out,
        inputs: &inputs,
        wrapper: &[],
    };
    let mut procs: Vec<Proc> = (0..2)
        .map(|i| {
            let mut extra = vec!["--connect-timeout", "20"];
            extra.extend_from_slice(flags[i]);
            job.start(i, &extra)
        })
        .collect();
    let statuses = wait_all(&mut procs, Duration::from_secs(20) + NOTICE);
    for (i, status) in statuses.iter().enumerate() {
        assert_eq!(
            status.code(),
            Some(1),
            "process {i} exits 1 on mismatched parameters {flags:?}\n{}",
            logs(&procs)
        );
    }
    let stderr = procs[0].stderr();
    assert!(
        stderr.contains("process 1"),
        "process 0 names process 1\n{}",
        logs(&procs)
    );
    assert!(
        field_words.iter().any(|w| has_word(&stderr, w)),
        "process 0 names the differing field (one of {field_words:?})\n{}",
        logs(&procs)
    );
    assert!(!out.join("_SUCCESS").exists());
}

#[test]
fn mismatched_k_is_refused_at_start_up() {
    assert_mismatch_refused([&["-k", "3"], &["-k", "4"]], &["k"]);
}

/// timely itself would panic with an index out of bounds on different worker counts.
#[test]
fn mismatched_worker_counts_are_refused_at_start_up() {
    assert_mismatch_refused([&["-w", "1"], &["-w", "2"]], &["workers", "w"]);
}

/// A process of another job (other --job-id) never joins: process 0 waits for its own
/// process 1 until --connect-timeout, and both end with exit 1.
#[test]
fn processes_of_different_jobs_do_not_join() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = small_corpus(dir.path());
    let hostfile = write_hostfile(&dir.path().join("hosts.txt"), &loopback(&free_ports(2)));
    let out = dir.path().join("out");
    let job = JobSpec {
        hostfile: &hostfile,
        processes: 2,
        out: &out,
        inputs: &inputs,
        wrapper: &[],
    };
    let mut procs = vec![
        job.start(0, &["--connect-timeout", "3", "--job-id", "alpha"]),
        job.start(1, &["--connect-timeout", "3", "--job-id", "beta"]),
    ];
    let statuses = wait_all(&mut procs, Duration::from_secs(3) + NOTICE);
    for (i, status) in statuses.iter().enumerate() {
        assert_eq!(
            status.code(),
            Some(1),
            "process {i} exits 1 when its peers belong to another job\n{}",
            logs(&procs)
        );
    }
    assert!(
        procs[0].stderr().contains("process 1"),
        "process 0 names the process that did not join\n{}",
        logs(&procs)
    );
    assert!(!out.join("_SUCCESS").exists());
}

/// Connects to `address`, retrying for up to 20 s while nothing listens yet.
fn connect_when_listening(address: &str, p0: &mut Proc) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(stream) = TcpStream::connect(address) {
            return stream;
        }
        assert!(
            p0.poll().is_none() && Instant::now() < deadline,
            "process 0 never listened on {address}\n{}",
            p0.log()
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// While process 0 waits for process 1 (started 3 s later), one connection writes garbage to
/// process 0's port and another sends nothing and stays open for the whole job. The job
/// still completes with the right result.
#[test]
fn foreign_connections_do_not_disturb_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = small_corpus(dir.path());
    let reference = dir.path().join("reference");
    reference_run(&reference, &inputs);
    let addresses = loopback(&free_ports(2));
    let hostfile = write_hostfile(&dir.path().join("hosts.txt"), &addresses);
    let out = dir.path().join("out");
    let job = JobSpec {
        hostfile: &hostfile,
        processes: 2,
        out: &out,
        inputs: &inputs,
        wrapper: &[],
    };
    let extra = ["--connect-timeout", "60"];
    let mut p0 = job.start(0, &extra);

    let silent = connect_when_listening(&addresses[0], &mut p0);
    let mut garbage = connect_when_listening(&addresses[0], &mut p0);
    garbage
        .set_write_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut rng = SeededRng::new(0xBAD);
    let bytes: Vec<u8> = (0..65536).map(|_| rng.next_u64() as u8).collect();
    // process 0 may close the connection as soon as it sees the garbage: errors are fine.
    let _ = garbage.write_all(b"GET / HTTP/1.1\r\nHost: neardup\r\n\r\n");
    let _ = garbage.write_all(&bytes);
    thread::sleep(Duration::from_secs(3));
    drop(garbage);
    assert!(
        p0.poll().is_none(),
        "process 0 ended on a foreign connection\n{}",
        p0.log()
    );

    let p1 = job.start(1, &extra);
    let mut procs = vec![p0, p1];
    assert_succeeded_like(&mut procs, &out, &reference);
    drop(silent);
}

// ---------------------------------------------------------------------------------------
// (g) three hosts: network namespaces

/// Three network namespaces joined by a bridge in a fourth ("hub") namespace, so nothing
/// changes in the machine's own network. Deleted when dropped (deleting a namespace deletes
/// its end of each veth pair, and the hub holds the bridge).
struct Namespaces {
    names: Vec<String>,
}

impl Namespaces {
    const PREFIX: &'static str = "neardup-t";

    fn ip(args: &[&str]) -> Result<(), String> {
        let output = Command::new("ip")
            .args(args)
            .output()
            .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "ip {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            ))
        }
    }

    /// Namespaces left behind by test processes that no longer exist (killed hard).
    fn remove_stale() {
        let Ok(output) = Command::new("ip").args(["netns", "list"]).output() else {
            return;
        };
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            let Some(rest) = name.strip_prefix(Self::PREFIX) else {
                continue;
            };
            let pid = rest.split('-').next().unwrap_or("");
            if !pid.is_empty() && !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = Self::ip(&["netns", "del", name]);
            }
        }
    }

    /// `hosts` namespaces with eth0 = 10.203.0.(i+1)/24 on one bridge.
    fn create(hosts: usize) -> Result<Namespaces, String> {
        Self::remove_stale();
        let tag = format!("{}{}", Self::PREFIX, std::process::id());
        let hub = format!("{tag}-hub");
        let mut ns = Namespaces {
            names: vec![hub.clone()],
        };
        Self::ip(&["netns", "add", &hub])?;
        Self::ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"])?;
        Self::ip(&["-n", &hub, "link", "set", "br0", "up"])?;
        for i in 1..=hosts {
            let name = format!("{tag}-{i}");
            Self::ip(&["netns", "add", &name])?;
            ns.names.push(name.clone());
            let veth = format!("v{i}");
            Self::ip(&[
                "-n", &hub, "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns",
                &name,
            ])?;
            Self::ip(&["-n", &hub, "link", "set", &veth, "master", "br0"])?;
            Self::ip(&["-n", &hub, "link", "set", &veth, "up"])?;
            Self::ip(&[
                "-n",
                &name,
                "addr",
                "add",
                &format!("10.203.0.{i}/24"),
                "dev",
                "eth0",
            ])?;
            Self::ip(&["-n", &name, "link", "set", "eth0", "up"])?;
            Self::ip(&["-n", &name, "link", "set", "lo", "up"])?;
        }
        Ok(ns)
    }

    fn host(&self, i: usize) -> &str {
        &self.names[i + 1]
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in self.names.iter().rev() {
            if let Err(e) = Self::ip(&["netns", "del", name]) {
                eprintln!("cleanup: {e}");
            }
        }
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Three processes on three "hosts" (network namespaces with their own addresses, talking
/// through a bridge): the same results as one process. Skipped (with a message) where
/// namespaces cannot be made: not root, no `ip`, or no permission (containers).
#[test]
fn three_hosts_in_network_namespaces_find_what_one_process_finds() {
    if !is_root() {
        eprintln!("SKIPPED three_hosts_in_network_namespaces: needs root for ip netns");
        return;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        eprintln!("SKIPPED three_hosts_in_network_namespaces: no `ip` command (iproute2)");
        return;
    }
    // Declared before the processes, so it is dropped (namespaces deleted) after them.
    let namespaces = match Namespaces::create(3) {
        Ok(ns) => ns,
        Err(e) => {
            eprintln!("SKIPPED three_hosts_in_network_namespaces: cannot create namespaces: {e}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let inputs = small_corpus(dir.path());
    let reference = dir.path().join("reference");
    reference_run(&reference, &inputs);
    let addresses: Vec<String> = (1..=3).map(|i| format!("10.203.0.{i}:7000")).collect();
    let hostfile = write_hostfile(&dir.path().join("hosts.txt"), &addresses);
    let out = dir.path().join("out");
    let mut procs: Vec<Proc> = (0..3)
        .map(|i| {
            let wrapper: Vec<String> = ["ip", "netns", "exec", namespaces.host(i)]
                .iter()
                .map(|w| w.to_string())
                .collect();
            let job = JobSpec {
                hostfile: &hostfile,
                processes: 3,
                out: &out,
                inputs: &inputs,
                wrapper: &wrapper,
            };
            job.start(i, &[])
        })
        .collect();
    assert_succeeded_like(&mut procs, &out, &reference);
}
