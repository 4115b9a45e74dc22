//! Real processes of the binary for the tests that start, signal and watch them: a
//! [`Proc`] collects a child's output and is killed when dropped, every wait is bounded;
//! loopback hostfiles for multi-process jobs; a corpus large enough to be caught mid-run.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::{jsonl_line, SeededRng, ENV_VARS};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_neardup");

/// A child process whose stdout and stderr are collected by threads, killed when dropped.
pub struct Proc {
    pub name: String,
    pub child: Child,
    stderr: Arc<Mutex<Vec<u8>>>,
    stdout: Arc<Mutex<Vec<u8>>>,
    pub status: Option<ExitStatus>,
}

pub fn collect(mut from: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let sink = buffer.clone();
    thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(n) = from.read(&mut chunk) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    buffer
}

impl Proc {
    pub fn spawn(name: impl Into<String>, mut cmd: Command) -> Proc {
        for var in ENV_VARS {
            cmd.env_remove(var);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let name = name.into();
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({cmd:?}): {e}"));
        let stdout = collect(child.stdout.take().unwrap());
        let stderr = collect(child.stderr.take().unwrap());
        Proc {
            name,
            child,
            stderr,
            stdout,
            status: None,
        }
    }

    /// [`Proc::spawn`] with a pipe to the child's stdin, handed back: a child reading `-`
    /// waits for more input until the pipe is dropped.
    pub fn spawn_with_stdin(
        name: impl Into<String>,
        mut cmd: Command,
    ) -> (Proc, std::process::ChildStdin) {
        for var in ENV_VARS {
            cmd.env_remove(var);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let name = name.into();
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({cmd:?}): {e}"));
        let stdin = child.stdin.take().unwrap();
        let stdout = collect(child.stdout.take().unwrap());
        let stderr = collect(child.stderr.take().unwrap());
        let proc = Proc {
            name,
            child,
            stderr,
            stdout,
            status: None,
        };
        (proc, stdin)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if the process has ended.
    pub fn poll(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().expect("try_wait");
        }
        self.status
    }

    /// Waits at most `timeout` for the process to end.
    pub fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.poll() {
                // Let the collector threads read the last words.
                thread::sleep(Duration::from_millis(50));
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned()
    }

    /// Everything the process wrote, for assertion messages.
    pub fn log(&self) -> String {
        format!(
            "---- {} (pid {}, status {:?}) stderr:\n{}\n---- {} stdout:\n{}",
            self.name,
            self.pid(),
            self.status,
            self.stderr(),
            self.name,
            self.stdout()
        )
    }

    /// `kill -SIGNAL pid`.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{signal} {} failed", self.pid());
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.poll().is_none() {
            // SIGKILL also ends a stopped process.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn logs(procs: &[Proc]) -> String {
    procs.iter().map(Proc::log).collect::<Vec<_>>().join("\n")
}

/// Waits until every process has ended, at most `timeout` in all; panics (killing them all
/// when the `Proc`s drop) with every process's output otherwise.
pub fn wait_all(procs: &mut [Proc], timeout: Duration) -> Vec<ExitStatus> {
    let deadline = Instant::now() + timeout;
    let mut statuses = Vec::new();
    for i in 0..procs.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match procs[i].wait(left) {
            Some(status) => statuses.push(status),
            None => panic!(
                "{} did not end within {timeout:?}\n{}",
                procs[i].name,
                logs(procs)
            ),
        }
    }
    statuses
}

/// `n` distinct free loopback ports: all bound at once, then released.
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// Writes a hostfile (with a comment and a blank line, which neardup ignores).
pub fn write_hostfile(path: &Path, addresses: &[String]) -> PathBuf {
    let mut text = String::from("# written by tests/cluster_processes.rs\n\n");
    for a in addresses {
        text.push_str(a);
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

pub fn loopback(ports: &[u16]) -> Vec<String> {
    ports.iter().map(|p| format!("127.0.0.1:{p}")).collect()
}

/// About `megabytes` MB of ~1.5 KB documents in four files: long enough that a process can
/// be killed or stopped while the job runs.
pub fn large_corpus(dir: &Path, megabytes: usize) -> Vec<PathBuf> {
    let mut rng = SeededRng::new(0x1A46E);
    let files: Vec<PathBuf> = (0..4)
        .map(|f| dir.join(format!("large-{f}.jsonl")))
        .collect();
    let mut writers: Vec<BufWriter<File>> = files
        .iter()
        .map(|p| BufWriter::new(File::create(p).unwrap()))
        .collect();
    let mut written = 0;
    let mut id = 0u64;
    while written < megabytes << 20 {
        let len = 150 + rng.below(100) as usize;
        let text = rng.words(len).join(" ");
        written += text.len() + 20;
        jsonl_line(&mut writers[id as usize % 4], id, &text);
        id += 1;
    }
    for mut w in writers {
        w.flush().unwrap();
    }
    files
}

/// Waits until every one of the processes' workers has opened its fingerprints part
/// (`fingerprints/.part-0000I.parquet.tmp`, created when the worker builds the dataflow, so
/// after start-up and timely's connections), i.e. the job is running. Panics after 60 s or if
/// a process ended first.
pub fn wait_until_running(procs: &mut [Proc], out: &Path) {
    let dir = out.join("fingerprints");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let opened = (0..procs.len()).all(|i| {
            temporary_part(&dir, i).is_some() || dir.join(format!("part-{i:05}.parquet")).exists()
        });
        if opened {
            return;
        }
        if procs.iter_mut().any(|p| p.poll().is_some()) || Instant::now() >= deadline {
            panic!(
                "the job did not get running (every worker's fingerprints part open)\n{}",
                logs(procs)
            );
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// The temporary file of part `i` in a table directory (`.part-0000I.parquet.PID.tmp`), if
/// there is one.
pub fn temporary_part(dir: &Path, i: usize) -> Option<std::path::PathBuf> {
    let prefix = format!(".part-{i:05}.parquet.");
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".tmp"))
        })
}
