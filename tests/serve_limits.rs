//! `neardup serve` against hostile or careless clients and settings: connections that send
//! nothing or half a request head, more connections than descriptors, SIGTERM while they
//! are held, a token file others may read or no header can carry, absurd flags, a log that
//! cannot grow (a full disk), and what `writes_total` counts.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use common::serve::*;
use common::{neardup, s, BIN};

/// Reads `stream` (and drops any answer) until the server closes it; how long that took,
/// or `None` if it was still open after `within`.
fn closed_within(stream: &mut TcpStream, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        let left = within.checked_sub(started.elapsed())?;
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match stream.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return Some(started.elapsed()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return None
            }
            Err(e) => panic!("reading a stalled connection: {e}"),
        }
    }
}

/// `n` connections that send nothing, and `n` that send half a request head.
fn stall(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut streams = Vec::new();
    for _ in 0..n {
        streams.push(TcpStream::connect(addr).unwrap());
        let mut half = TcpStream::connect(addr).unwrap();
        half.write_all(b"PUT /v1/documents/x HTTP/1.1\r\nHost: x\r\nContent-Ty")
            .unwrap();
        streams.push(half);
    }
    streams
}

/// A connection that was answered once and is kept open, idle.
fn idle(addr: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = stream.read(&mut buf).unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &buf[..n]);
    stream
}

fn put(addr: SocketAddr, id: &str, body: &str) -> Response {
    request(addr, "PUT", &format!("/v1/documents/{id}"), Some(body))
}

#[test]
fn stalled_and_idle_connections_are_closed_after_the_header_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("idx"),
        &["--create", "--header-timeout", "1"],
    );
    let mut stalled = stall(server.addr, 20);
    stalled.push(idle(server.addr));
    // The others are answered meanwhile.
    for n in 0..5 {
        let r = put(server.addr, &format!("d{n}"), "{\"text\": \"a page\"}");
        assert_eq!(r.status, 200, "{}", r.text());
    }
    for (i, stream) in stalled.iter_mut().enumerate() {
        // 1 s after it last spoke (it is read from now on), with room for a loaded machine.
        let took = closed_within(stream, Duration::from_secs(10));
        assert!(took.is_some(), "connection {i} is still open after 10 s");
    }
    assert_eq!(
        server.request("GET", "/v1/stats", None).json()["documents"],
        5
    );
}

#[test]
fn connections_beyond_the_limit_are_refused_with_503_until_one_closes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("idx"),
        &[
            "--create",
            "--max-connections",
            "4",
            "--header-timeout",
            "60",
        ],
    );
    let mut held: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(server.addr).unwrap())
        .collect();
    thread::sleep(Duration::from_millis(300));
    let r = server.request("GET", "/v1/stats", None);
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(
        r.json()["error"],
        "too many connections: the service serves 4 at once (--max-connections); try again"
    );
    assert_eq!(r.header("retry-after"), Some("1"));
    held.pop();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = server.request("GET", "/v1/stats", None);
        if r.status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "no slot freed: {}", r.text());
        thread::sleep(Duration::from_millis(50));
    }
}

/// `neardup serve` with at most `fds` open files.
fn start_with_fd_limit(index: &std::path::Path, fds: u64, args: &[&str]) -> Server {
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--index", s(index), "--listen", "127.0.0.1:0"])
        .args(args);
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: fds,
                rlim_max: fds,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Server::spawn(cmd)
}

#[test]
fn more_stalled_connections_than_descriptors_do_not_stop_the_service() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start_with_fd_limit(
        &dir.path().join("idx"),
        128,
        &["--create", "--header-timeout", "1"],
    );
    assert!(
        server
            .proc
            .stderr()
            .contains("--max-connections 1024 lowered to"),
        "{}",
        server.proc.log()
    );
    let _stalled = stall(server.addr, 100);
    // Refused (503) or closed while they hold every slot; answered once they time out.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut answers = Vec::new();
    loop {
        let got = Conn::connect(server.addr).and_then(|mut c| c.request("GET", "/v1/stats", None));
        match got {
            Ok(r) if r.status == 200 => break,
            Ok(r) => {
                assert_eq!(r.status, 503, "{}", r.text());
                answers.push(r.status);
            }
            Err(e) => answers.push(e.raw_os_error().unwrap_or(0) as u16),
        }
        assert!(
            Instant::now() < deadline,
            "not answered in 15 s ({answers:?})\n{}",
            server.proc.log()
        );
        thread::sleep(Duration::from_millis(100));
    }
    assert!(server.proc.poll().is_none(), "{}", server.proc.log());
    assert!(
        !server.proc.stderr().contains("cannot accept"),
        "{}",
        server.proc.log()
    );
}

#[test]
fn sigterm_ends_the_service_while_clients_hold_silent_half_sent_and_idle_connections() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("idx");
    // The default header timeout (30 s) is longer than the bound below: SIGTERM does not
    // wait for it.
    let mut server = Server::start(&index, &["--create"]);
    assert_eq!(
        put(server.addr, "kept", "{\"text\": \"a page\"}").status,
        200
    );
    let mut stalled = stall(server.addr, 3);
    stalled.push(idle(server.addr));
    thread::sleep(Duration::from_millis(200));
    server.proc.signal("TERM");
    let status = server
        .proc
        .wait(Duration::from_secs(10))
        .unwrap_or_else(|| panic!("SIGTERM did not end it in 10 s\n{}", server.proc.log()));
    assert!(status.success(), "{}", server.proc.log());
    for stream in &mut stalled {
        assert!(closed_within(stream, Duration::from_secs(1)).is_some());
    }
    let again = Server::start(&index, &[]);
    assert_eq!(again.request("GET", "/v1/documents/kept", None).status, 200);
}

/// `neardup serve --token-file FILE` that must not start: its stderr.
fn refused_token(dir: &std::path::Path, bytes: &[u8], mode: u32) -> String {
    let path = dir.join("token");
    std::fs::write(&path, bytes).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    let out = neardup()
        .args(["serve", "--index", s(&dir.join("idx")), "--create"])
        .args(["--listen", "127.0.0.1:0", "--token-file", s(&path)])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(!out.status.success(), "it started with {bytes:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_token_file_others_may_read_or_that_no_header_can_carry_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    let shown = path.display();
    let good = b"correct-horse-battery-staple\n";
    assert!(refused_token(dir.path(), good, 0o644).contains(&format!(
        "{shown}: the token file may be read or written by others (mode 644); make it private with `chmod 600 {shown}`"
    )));
    for (bytes, what, at) in [
        (&b"correct-horse\nbattery-staple\n"[..], "a line break", 13),
        (b"  correct-horse\rbattery-staple", "a carriage return", 15),
        (b"correct-horse\0battery-staple", "a NUL byte", 13),
        (b"correct-horse\tbattery-staple", "a tab", 13),
    ] {
        let stderr = refused_token(dir.path(), bytes, 0o600);
        assert!(
            stderr.contains(&format!(
                "{shown}: the token has {what} at byte {at}: no request header can carry it"
            )),
            "{stderr}"
        );
    }
    assert!(refused_token(dir.path(), b"short\n", 0o600)
        .contains("the token must have at least 16 characters (it has 5)"));
}

#[test]
fn out_of_range_flags_are_refused_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    for (flag, value, message) in [
        (
            "--threads",
            "100000",
            "--threads 100000: from 1 to 256 threads answer requests",
        ),
        (
            "--threads",
            "0",
            "--threads 0: from 1 to 256 threads answer requests",
        ),
        (
            "--max-connections",
            "0",
            "--max-connections must be at least 1",
        ),
        (
            "--header-timeout",
            "0",
            "--header-timeout must be at least 1 second",
        ),
    ] {
        let out = neardup()
            .args(["serve", "--index", s(&dir.path().join("idx")), "--create"])
            .args(["--listen", "127.0.0.1:0", flag, value])
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag} {value}: {stderr}");
        assert!(stderr.contains(message), "{flag} {value}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn writes_total_counts_the_writes_that_changed_something() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("idx"), &["--create"]);
    assert_eq!(
        put(server.addr, "a", "{\"text\": \"one page\"}").status,
        200
    );
    // A recrawl replaces: one write.
    assert_eq!(
        put(server.addr, "a", "{\"text\": \"one page, again\"}").status,
        200
    );
    assert_eq!(
        server.request("DELETE", "/v1/documents/a", None).status,
        200
    );
    // Deletes of what is not there change nothing.
    assert_eq!(
        server.request("DELETE", "/v1/documents/a", None).status,
        404
    );
    assert_eq!(
        server.request("DELETE", "/v1/documents/never", None).status,
        404
    );
    let stats = server.request("GET", "/v1/stats", None).json();
    assert_eq!(stats["writes"], 3, "{stats}");
    assert_eq!(stats["log_records"], 3, "{stats}");
    let metrics = server.request("GET", "/metrics", None).text();
    assert!(metrics.contains("\nneardup_writes_total 3\n"), "{metrics}");
}

#[test]
fn healthz_says_writes_are_refused_after_a_failed_log_write() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("idx");
    // Make the index first, with no limit.
    drop(Server::start(&index, &["--create"]));
    // A log that cannot grow past 16 KiB stands for a full disk: writes beyond it fail
    // (EFBIG; SIGXFSZ ignored, as a shell's `trap '' XFSZ` would).
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--index", s(&index), "--listen", "127.0.0.1:0"]);
    // SAFETY: signal and setrlimit are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: 16 << 10,
                rlim_max: 16 << 10,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let server = Server::spawn(cmd);
    assert_eq!(
        server.request("GET", "/healthz", None).json()["status"],
        "ok"
    );
    let url = "u".repeat(4000);
    let mut acknowledged = Vec::new();
    let failed = loop {
        let id = format!("page-{}", acknowledged.len());
        let r = put(
            server.addr,
            &id,
            &format!("{{\"text\": \"a page {id}\", \"url\": \"{url}\"}}"),
        );
        if r.status != 200 {
            break r;
        }
        acknowledged.push(id);
        assert!(
            acknowledged.len() < 10,
            "16 KiB of log took 10 puts of 4 KB"
        );
    };
    assert_eq!(failed.status, 503, "{}", failed.text());
    let health = server.request("GET", "/healthz", None);
    assert_eq!(health.status, 503, "{}", health.text());
    let health = health.json();
    assert_eq!(health["status"], "refusing writes", "{health}");
    let reason = health["reason"].as_str().unwrap();
    assert!(reason.starts_with("a log write failed ("), "{reason}");
    assert!(reason.contains("serve.wal"), "{reason}");
    // Reads go on; writes stay refused.
    for id in &acknowledged {
        let path = format!("/v1/documents/{id}");
        assert_eq!(server.request("GET", &path, None).status, 200);
    }
    assert_eq!(put(server.addr, "small", "{\"text\": \"t\"}").status, 503);
    let stats = server.request("GET", "/v1/stats", None).json();
    let failure = stats["write_failure"]
        .as_str()
        .expect("the failure in /v1/stats");
    assert!(reason.contains(failure), "{reason} / {failure}");
}
