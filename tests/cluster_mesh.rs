//! The mesh of heartbeats between the processes other than process 0 (issue 19, item 4),
//! with real processes of the binary over loopback:
//!
//! * three processes whose job cannot end (each reads its standard input, held open by the
//!   test), with the link between processes 1 and 2 cut (the test hook
//!   `NEARDUP_TEST_DROP_LINK=1-2` silences their heartbeat link in both directions; their
//!   timely connection stays up, which a real partition would block): every process exits 1
//!   within a bound of `--peer-timeout`, processes 1 and 2 each naming the other as lost,
//!   process 0 naming the failed link, and there is no `_SUCCESS`. The same with
//!   `--secret-file` (the mesh links are authenticated like the star). Before the mesh such
//!   a job waited forever: the test would time out.
//! * without the hook, a three-process job completes, every mesh link made (no warning).
//!
//! Every wait is bounded and every process is killed when its `Proc` is dropped.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{free_ports, jsonl_line, logs, loopback, s, write_hostfile, Proc, BIN};

/// The peer timeout of these jobs, in seconds.
const PEER_TIMEOUT: u64 = 3;
/// How long every process may take to exit once the job is running: the timeout, the
/// relay, and a loaded machine (debug binary, two shared cores, other tests at once).
const DETECTION_BOUND: Duration = Duration::from_secs(PEER_TIMEOUT + 20);
/// How long a small job may take from start to end.
const JOB_TIMEOUT: Duration = Duration::from_secs(120);

fn command(i: usize, n: usize, hosts: &Path, out: &Path, secret: Option<&Path>) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args([
        "run",
        "-n",
        &n.to_string(),
        "-p",
        &i.to_string(),
        "-h",
        s(hosts),
    ])
    .args(["-w", "1", "--connect-timeout", "60"])
    .args(["--peer-timeout", &PEER_TIMEOUT.to_string()])
    .args(["--output", s(out)]);
    if let Some(secret) = secret {
        cmd.args(["--secret-file", s(secret)]);
    }
    cmd
}

fn secret(dir: &Path) -> PathBuf {
    let path = dir.join("secret");
    std::fs::write(&path, "the mesh's secret\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

fn partition_is_detected(with_secret: bool) {
    let dir = tempfile::tempdir().unwrap();
    let hosts = write_hostfile(&dir.path().join("hosts"), &loopback(&free_ports(3)));
    let out = dir.path().join("out");
    let secret = with_secret.then(|| secret(dir.path()));
    let mut procs = Vec::new();
    let mut stdins = Vec::new();
    for i in 0..3 {
        let mut cmd = command(i, 3, &hosts, &out, secret.as_deref());
        cmd.arg("-").env("NEARDUP_TEST_DROP_LINK", "1-2");
        let (proc, stdin) = Proc::spawn_with_stdin(format!("process {i}"), cmd);
        procs.push(proc);
        stdins.push(stdin);
    }
    // Some documents, and the pipes stay open: the job cannot end by itself.
    for stdin in &mut stdins {
        use std::io::Write;
        let mut docs = Vec::new();
        for id in 0..100 {
            jsonl_line(&mut docs, id, &format!("document {id} of the mesh test"));
        }
        stdin.write_all(&docs).unwrap();
    }
    // Running: every process got past the handshake (its fingerprints part is open).
    common::wait_until_running(&mut procs, &out);
    let running = Instant::now();
    let statuses: Vec<_> = procs.iter_mut().map(|p| p.wait(DETECTION_BOUND)).collect();
    for (proc, status) in procs.iter().zip(&statuses) {
        assert!(
            status.is_some_and(|s| s.code() == Some(1)),
            "{} did not exit 1 within {DETECTION_BOUND:?} of the job running ({status:?})\n{}",
            proc.name,
            logs(&procs)
        );
    }
    let took = running.elapsed();
    let log = |i: usize| procs[i].stderr();
    // Whichever end of the cut link notices first, every process names the link: the lost
    // process (1 or 2) and the silence.
    for i in 0..3 {
        let named = log(i).contains("lost process 2 (") || log(i).contains("lost process 1 (");
        assert!(
            named && log(i).contains("no heartbeat for 3 s"),
            "{}",
            log(i)
        );
    }
    for i in 0..3 {
        assert!(!log(i).contains("no heartbeat link"), "{}", log(i));
        assert!(!log(i).contains("ignored a mesh connection"), "{}", log(i));
    }
    assert!(!out.join("_SUCCESS").exists());
    eprintln!("partition detected and every process ended {took:?} after the job ran");
    drop(stdins);
}

#[test]
fn a_partition_between_processes_1_and_2_stops_every_process() {
    partition_is_detected(false);
}

#[test]
fn a_partition_between_processes_1_and_2_is_detected_with_a_secret() {
    partition_is_detected(true);
}

#[test]
fn three_processes_form_the_mesh_and_complete() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus.jsonl");
    let mut docs = Vec::new();
    for id in 0..3000 {
        jsonl_line(
            &mut docs,
            id,
            &format!("document {} of the mesh test {}", id % 1500, id % 7),
        );
    }
    std::fs::write(&corpus, docs).unwrap();
    for secret in [None, Some(secret(dir.path()))] {
        let hosts = write_hostfile(&dir.path().join("hosts"), &loopback(&free_ports(3)));
        let out = dir.path().join("out");
        let _ = std::fs::remove_dir_all(&out);
        let mut procs: Vec<Proc> = (0..3)
            .map(|i| {
                let mut cmd = command(i, 3, &hosts, &out, secret.as_deref());
                cmd.arg(s(&corpus));
                Proc::spawn(format!("process {i}"), cmd)
            })
            .collect();
        let statuses: Vec<_> = procs.iter_mut().map(|p| p.wait(JOB_TIMEOUT)).collect();
        for (proc, status) in procs.iter().zip(&statuses) {
            assert!(
                status.is_some_and(|s| s.success()),
                "{} failed\n{}",
                proc.name,
                logs(&procs)
            );
        }
        for proc in &procs {
            assert!(
                !proc.stderr().contains("no heartbeat link"),
                "{}",
                proc.stderr()
            );
        }
        assert!(out.join("_SUCCESS").is_file());
    }
}
