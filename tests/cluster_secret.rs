//! Authenticated clusters (issue 19, item 4), with real processes of the binary over
//! loopback: with `--secret-file`, a process without the job's secret (a wrong one, or none)
//! is refused by process 0, which logs it and goes on waiting, and the job then completes
//! with the real processes; a secret file others can read, or an empty one, is refused before
//! anything starts; `scripts/local-cluster.sh` makes a private random secret and hands the
//! same one to every process.
//!
//! Every wait is bounded and every process is killed when its `Proc` is dropped.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{jsonl_line, s, SeededRng, ENV_VARS};

const BIN: &str = env!("CARGO_BIN_EXE_neardup");
/// How long a job of the small corpus, or a refused process, may take (debug binary, two
/// shared cores, other tests at the same time).
const TIMEOUT: Duration = Duration::from_secs(120);

/// A child whose stderr is collected, killed when dropped.
struct Proc {
    child: Child,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Proc {
    fn spawn(mut cmd: Command) -> Proc {
        for var in ENV_VARS {
            cmd.env_remove(var);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut from = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = from.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        Proc { child, stderr }
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the reader thread take the last words.
                thread::sleep(Duration::from_millis(100));
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running after {timeout:?}:\n{}",
                self.stderr()
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// 200 documents, a few of them near duplicates.
fn corpus(dir: &Path) -> PathBuf {
    let path = dir.join("corpus.jsonl");
    let mut out = Vec::new();
    let mut rng = SeededRng::new(0x5EC7E7);
    let texts: Vec<Vec<String>> = (0..180).map(|_| rng.words(60)).collect();
    for (i, words) in texts.iter().enumerate() {
        jsonl_line(&mut out, i as u64, &words.join(" "));
    }
    for (i, words) in texts.iter().take(20).enumerate() {
        let mut edited = words.clone();
        edited[30] = rng.word();
        jsonl_line(&mut out, 1000 + i as u64, &edited.join(" "));
    }
    std::fs::write(&path, out).unwrap();
    path
}

fn secret_file(path: &Path, text: &str, mode: u32) -> PathBuf {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    path.to_path_buf()
}

fn hostfile(dir: &Path, processes: usize) -> PathBuf {
    let listeners: Vec<TcpListener> = (0..processes)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let text: String = listeners
        .iter()
        .map(|l| format!("127.0.0.1:{}\n", l.local_addr().unwrap().port()))
        .collect();
    let path = dir.join("hosts.txt");
    std::fs::write(&path, text).unwrap();
    path
}

/// `neardup run -n 2 -p I -h HOSTS -w 1 [--secret-file SECRET] --output OUT CORPUS`.
fn process(i: usize, hosts: &Path, secret: Option<&Path>, out: &Path, corpus: &Path) -> Proc {
    process_of(2, i, hosts, secret, out, corpus)
}

/// Process `i` of `n`, as [`process`].
fn process_of(
    n: usize,
    i: usize,
    hosts: &Path,
    secret: Option<&Path>,
    out: &Path,
    corpus: &Path,
) -> Proc {
    let mut cmd = Command::new(BIN);
    cmd.args([
        "run",
        "-n",
        &n.to_string(),
        "-p",
        &i.to_string(),
        "-h",
        s(hosts),
        "-w",
        "1",
    ])
    .args(["--connect-timeout", "90", "--job-id", "secret-test"]);
    if let Some(secret) = secret {
        cmd.args(["--secret-file", s(secret)]);
    }
    cmd.args(["--output", s(out), s(corpus)]);
    Proc::spawn(cmd)
}

#[test]
fn processes_without_the_secret_are_refused_and_the_job_completes() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus(dir.path());
    let hosts = hostfile(dir.path(), 2);
    let out = dir.path().join("out");
    let secret = secret_file(&dir.path().join("secret"), "the job's secret\n", 0o600);
    let wrong = secret_file(&dir.path().join("wrong"), "another secret\n", 0o600);

    let mut p0 = process(0, &hosts, Some(&secret), &out, &corpus);
    // An intruder with a wrong secret, then one with none, each claiming to be process 1.
    for (intruder_secret, logged) in [
        (
            Some(wrong.as_path()),
            "failed authentication (its secret is not this job's)",
        ),
        (
            None,
            "it has no secret, and this job requires one (--secret-file)",
        ),
    ] {
        let mut intruder = process(1, &hosts, intruder_secret, &out, &corpus);
        let status = intruder.wait(TIMEOUT);
        assert_eq!(status.code(), Some(1), "{}", intruder.stderr());
        assert!(
            intruder
                .stderr()
                .contains("closed the connection at start-up"),
            "{}",
            intruder.stderr()
        );
        assert!(
            p0.running(),
            "process 0 ended on an intruder:\n{}",
            p0.stderr()
        );
        // Process 0 said why it dropped the connection (its log may lag a moment).
        let deadline = Instant::now() + Duration::from_secs(10);
        while !p0.stderr().contains(logged) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(50));
        }
        assert!(p0.stderr().contains(logged), "{}", p0.stderr());
    }
    assert!(!out.join("_SUCCESS").exists());

    let mut p1 = process(1, &hosts, Some(&secret), &out, &corpus);
    for p in [&mut p0, &mut p1] {
        let status = p.wait(TIMEOUT);
        assert!(status.success(), "{}", p.stderr());
        // Every heartbeat line of the real processes verified (none was lost or out of
        // sequence, which would end a job as a lost process).
        assert!(
            !p.stderr().contains("dropped a control line"),
            "{}",
            p.stderr()
        );
    }
    assert!(out.join("_SUCCESS").exists());

    // The same job without any secret still runs (the flag is optional).
    let plain = dir.path().join("plain");
    let hosts = hostfile(dir.path(), 2);
    let mut procs = [
        process(0, &hosts, None, &plain, &corpus),
        process(1, &hosts, None, &plain, &corpus),
    ];
    for p in &mut procs {
        let status = p.wait(TIMEOUT);
        assert!(status.success(), "{}", p.stderr());
    }
    assert_eq!(
        common::pairs(&plain),
        common::pairs(&out),
        "authentication changes nothing in the result"
    );
}

#[test]
fn secret_files_others_can_read_and_empty_ones_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus(dir.path());
    let out = dir.path().join("out");
    let open = secret_file(&dir.path().join("open"), "s3cret\n", 0o644);
    let empty = secret_file(&dir.path().join("empty"), "\n", 0o600);
    let run = |secret: &Path, by_env: bool| {
        let mut cmd = common::neardup();
        cmd.args(["run", "-q", "--output", s(&out), s(&corpus)]);
        if by_env {
            cmd.env("NEARDUP_SECRET_FILE", secret);
        } else {
            cmd.args(["--secret-file", s(secret)]);
        }
        cmd
    };
    for by_env in [false, true] {
        common::assert_refused(
            &mut run(&open, by_env),
            &[&format!(
                "error: cluster: {0}: the secret file may be read or written by others (mode \
                 644); make it private with `chmod 600 {0}`",
                open.display()
            )],
        );
        common::assert_refused(
            &mut run(&empty, by_env),
            &[&format!(
                "error: cluster: {}: the secret file is empty",
                empty.display()
            )],
        );
    }
    assert!(!out.exists(), "nothing was started");
}

#[test]
fn local_cluster_makes_a_private_secret_for_every_process() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus(dir.path());
    let out = dir.path().join("out");
    // A wrapper in place of the binary notes the secret file each process was given.
    let log = dir.path().join("secrets.log");
    let wrapper = dir.path().join("neardup-wrapper");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nprintf '%s %s %s\\n' \"$NEARDUP_SECRET_FILE\" \"$(stat -c %a \"$NEARDUP_SECRET_FILE\")\" \"$(wc -c < \"$NEARDUP_SECRET_FILE\")\" >> {log}\nexec {BIN} \"$@\"\n",
            log = s(&log)
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/local-cluster.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(&script)
        .args(["2", "1", "--", "run", "-q", "--output", s(&out), s(&corpus)])
        .env("NEARDUP_BIN", &wrapper);
    let mut job = Proc::spawn(cmd);
    let status = job.wait(TIMEOUT);
    assert!(status.success(), "{}", job.stderr());
    assert!(out.join("_SUCCESS").exists());

    let lines: Vec<Vec<String>> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    for line in &lines {
        assert_eq!(line[0], lines[0][0], "one secret file for every process");
        assert_eq!(line[1], "600", "private: {line:?}");
        assert_eq!(line[2], "64", "32 random bytes in hex: {line:?}");
    }
    assert!(
        !Path::new(&lines[0][0]).exists(),
        "the secret is removed with the script's temporary directory"
    );
}

/// The connections timely runs over are made and proven by neardup itself, so no window
/// remains in which timely's own listener takes any connection for a process of the job: an
/// impostor that reaches process 1's port before the job starts and claims to be process 2
/// (with a MAC made without the secret) is dropped and logged, and the job of three
/// processes completes with the pairs one process finds.
#[test]
fn an_impostor_on_a_data_port_is_dropped_and_the_job_completes() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus(dir.path());
    let hosts = hostfile(dir.path(), 3);
    let out = dir.path().join("out");
    let secret = secret_file(&dir.path().join("secret"), "the job's secret\n", 0o600);
    let address = std::fs::read_to_string(&hosts)
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_owned();
    let mut p0 = process_of(3, 0, &hosts, Some(&secret), &out, &corpus);
    let mut p1 = process_of(3, 1, &hosts, Some(&secret), &out, &corpus);
    // Connected once process 1 listens; process 1 reads it only after go, which waits for
    // process 2, started below: the impostor is first in line.
    let deadline = Instant::now() + TIMEOUT;
    let stream = loop {
        match std::net::TcpStream::connect(&address) {
            Ok(stream) => break stream,
            Err(e) => {
                assert!(Instant::now() < deadline, "process 1 never listened: {e}");
                thread::sleep(Duration::from_millis(10));
            }
        }
    };
    let impostor = thread::spawn(move || {
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut challenge = String::new();
        reader.read_line(&mut challenge).unwrap();
        let mut stream = stream;
        let forged = format!("data secret-test 2 {}\n", "ab".repeat(32));
        stream.write_all(forged.as_bytes()).unwrap();
        // Process 1 closes the connection rather than taking it for process 2.
        let mut rest = Vec::new();
        let _ = reader.read_to_end(&mut rest);
        (challenge, rest)
    });
    thread::sleep(Duration::from_millis(300));
    let mut p2 = process_of(3, 2, &hosts, Some(&secret), &out, &corpus);
    for p in [&mut p0, &mut p1, &mut p2] {
        let status = p.wait(TIMEOUT);
        assert!(status.success(), "{}", p.stderr());
    }
    let (challenge, rest) = impostor.join().unwrap();
    assert!(challenge.starts_with("challenge "), "{challenge:?}");
    assert!(
        rest.is_empty(),
        "the impostor was sent {} bytes",
        rest.len()
    );
    assert!(
        p1.stderr()
            .contains("claims to be process 2 but failed authentication"),
        "{}",
        p1.stderr()
    );
    let single = dir.path().join("single");
    common::run_ok(&single, &["-w", "1"], &[corpus.as_path()]);
    assert_eq!(common::pairs(&single), common::pairs(&out));
}
