//! Inputs in an object store (issue 33): `neardup run s3://bucket/prefix/` against a real
//! S3-compatible server on loopback (s3s-fs, a Rust S3 server over a directory, installed by
//! scripts/test.sh from crates.io), compared with the same run over the same files on disk.
//!
//! The oracle is the local run: the fingerprints (but for their `source`, the URL in place
//! of the path), pairs and clusters of a run from the store must equal it, at 1 and 2
//! workers and 2 processes, for JSONL (whole, compressed, and one file above the size from
//! which it is read in byte ranges) and Parquet (by row groups). Faults come from a proxy in
//! front of the server that refuses and cuts requests: transient ones are retried and
//! counted, a lasting one is an error naming the object and the byte, with no `_SUCCESS`.
//!
//! Skipped with a notice when the server is absent (`NEARDUP_S3_SERVER` names it; the
//! suite installs it), unless `NEARDUP_REQUIRE_SHARED=1` (CI).

mod common;
use common::*;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};

use assert_cmd::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, StringArray};

const ACCESS_KEY: &str = "neardup-test";
const SECRET_KEY: &str = "neardup-test-secret";

/// The S3 server's binary, or `None` (with a notice; a panic under CI).
fn server_binary() -> Option<PathBuf> {
    let named = std::env::var_os("NEARDUP_S3_SERVER").map(PathBuf::from);
    if let Some(bin) = named.filter(|b| b.is_file()) {
        return Some(bin);
    }
    let message =
        "s3s-fs not found (scripts/test.sh installs it and names it in NEARDUP_S3_SERVER)";
    if std::env::var(REQUIRE_SHARED).as_deref() == Ok("1") {
        panic!("{message}, and {REQUIRE_SHARED}=1 requires the object store tests");
    }
    eprintln!("skipped: {message}");
    None
}

/// An S3 server on loopback serving the directory `root` (a bucket is a directory of it).
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(bin: &Path, root: &Path) -> Server {
        let port = free_ports(1)[0];
        let child = Process::new(bin)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the S3 server starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the S3 server never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
        Server { child, port }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `neardup` with the store's endpoint and credentials in the environment, as a user sets
/// them for an S3-compatible store.
fn neardup_at(port: u16) -> Command {
    let mut cmd = neardup();
    with_store(&mut cmd, port);
    cmd
}

fn with_store(cmd: &mut Command, port: u16) {
    for (name, value) in store_env(port) {
        cmd.env(name, value);
    }
}

fn store_env(port: u16) -> [(&'static str, String); 5] {
    [
        ("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}")),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
        ("AWS_REGION", "us-east-1".into()),
    ]
}

fn succeed(cmd: &mut Command, out: &Path) -> std::process::Output {
    let output = cmd.output().unwrap();
    assert!(
        output.status.success() && out.join("_SUCCESS").is_file(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Random documents, every 7th a copy of an earlier one with one word changed.
fn docs(rng: &mut SeededRng, first_id: u64, n: usize) -> Vec<(u64, String)> {
    let mut docs: Vec<(u64, String)> = Vec::new();
    for i in 0..n {
        let text = if i % 7 == 6 {
            let mut words: Vec<String> = docs[rng.below(i as u64) as usize]
                .1
                .split(' ')
                .map(str::to_owned)
                .collect();
            let at = rng.below(words.len() as u64) as usize;
            words[at] = "changed".into();
            words.join(" ")
        } else {
            (0..40 + rng.below(40))
                .map(|_| format!("w{}", rng.below(3000)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        docs.push((first_id + i as u64, text));
    }
    docs
}

fn jsonl_of(docs: &[(u64, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (id, text) in docs {
        jsonl_line(&mut out, *id, text);
    }
    out
}

/// The bucket `corpus` under `root`: inputs of every kind under `data/`, beside names a scan
/// must skip (scratch, hidden, a neardup output, a file no source kind claims).
fn corpus(root: &Path) -> PathBuf {
    let data = root.join("corpus/data");
    let mut rng = SeededRng::new(0x53_0B1E);
    let a = docs(&mut rng, 0, 300);
    write(&data.join("a.jsonl"), &jsonl_of(&a));
    let mut b = docs(&mut rng, 1000, 200);
    b.extend(a[..20].iter().map(|(id, t)| (id + 5000, t.clone())));
    write(&data.join("sub/b.jsonl.zst"), &zstd(&jsonl_of(&b)));
    let c = docs(&mut rng, 2000, 400);
    let ids: ArrayRef = Arc::new(StringArray::from_iter_values(
        c.iter().map(|(id, _)| id.to_string()),
    ));
    let texts: ArrayRef = Arc::new(StringArray::from_iter_values(
        c.iter().map(|(_, t)| t.clone()),
    ));
    std::fs::create_dir_all(data.join("tables")).unwrap();
    write_parquet(
        &data.join("tables/c.parquet"),
        vec![("id", ids), ("text", texts)],
        64,
    );
    for skipped in ["_scratch/x.jsonl", ".hidden.jsonl", "old-run/y.jsonl"] {
        write(&data.join(skipped), &jsonl_of(&a[..5]));
    }
    write(&data.join("old-run/_SUCCESS"), b"");
    write(&data.join("old-run/summary.json"), b"{}");
    write(&data.join("notes.txt"), b"not an input");
    data
}

/// [`corpus`] under `dir/root`, served by the S3 server: (the root, the corpus's `data/`
/// directory, the server).
fn served_corpus(bin: &Path, dir: &Path) -> (PathBuf, PathBuf, Server) {
    let root = dir.join("root");
    let data = corpus(&root);
    let server = Server::start(bin, &root);
    (root, data, server)
}

/// A run's tables, with each fingerprint's source as `source` maps it.
type Tables = (Vec<FpRow>, BTreeSet<(u64, u64)>, Vec<ClusterRow>);

fn tables(out: &Path, source: impl Fn(&str) -> String) -> Tables {
    let mut fps = fingerprints(out);
    for fp in &mut fps {
        fp.source = source(&fp.source);
    }
    fps.sort_by_key(|f| f.doc_id);
    let mut clusters = clusters(out);
    clusters.sort();
    (fps, pair_set(&pairs(out)), clusters)
}

/// The local run's tables with its paths under `local` shown as URLs under `url`.
fn as_urls(out: &Path, local: &Path, url: &str) -> Tables {
    let local = format!("{}/", local.display());
    tables(out, |s| s.replacen(&local, url, 1))
}

#[test]
fn a_run_from_a_store_equals_the_run_from_its_files() {
    let Some(bin) = server_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (_, data, server) = served_corpus(&bin, dir.path());

    let local = dir.path().join("local");
    succeed(
        neardup().args(["run", "-w", "1", "-o", s(&local), s(&data)]),
        &local,
    );
    let expected = as_urls(&local, &data, "s3://corpus/data/");
    assert_eq!(expected.0.len(), 300 + 220 + 400, "the scan's inputs");
    assert!(expected.1.len() >= 60, "pairs: {}", expected.1.len());

    for workers in ["1", "2"] {
        let out = dir.path().join(format!("store-{workers}"));
        let run = succeed(
            neardup_at(server.port).args([
                "run",
                "-w",
                workers,
                "-o",
                s(&out),
                "s3://corpus/data/",
            ]),
            &out,
        );
        assert_eq!(tables(&out, str::to_owned), expected, "{workers} workers");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(
            stderr.contains("s3://corpus/data/old-run"),
            "the output is skipped with a notice: {stderr}"
        );
    }

    // Two processes, each reading its share from the store.
    let out = dir.path().join("store-2p");
    let hostfile = write_hostfile(&dir.path().join("hosts.txt"), &loopback(&free_ports(2)));
    let children: Vec<Child> = (0..2)
        .map(|p| {
            Process::new(BIN)
                .envs(store_env(server.port))
                .args(["run", "-n", "2", "-p", &p.to_string(), "-h", s(&hostfile)])
                .args(["-w", "1", "-o", s(&out), "s3://corpus/data/"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert_eq!(tables(&out, str::to_owned), expected, "2 processes");
}

#[test]
fn globs_name_objects_and_a_missing_object_is_named() {
    let Some(bin) = server_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (root, data, server) = served_corpus(&bin, dir.path());

    // `*` does not cross a `/`, and takes no hidden name: a.jsonl alone.
    let (local, out) = (dir.path().join("local"), dir.path().join("glob"));
    succeed(
        neardup().args(["run", "-o", s(&local), s(&data.join("a.jsonl"))]),
        &local,
    );
    succeed(
        neardup_at(server.port).args(["run", "-o", s(&out), "s3://corpus/data/*.jsonl"]),
        &out,
    );
    assert_eq!(
        tables(&out, str::to_owned),
        as_urls(&local, &data, "s3://corpus/data/")
    );
    // `neardup search` reads fingerprint tables from the store.
    for part in parts(&local.join("fingerprints")) {
        std::fs::create_dir_all(root.join("corpus/fps")).unwrap();
        std::fs::copy(
            &part,
            root.join("corpus/fps").join(part.file_name().unwrap()),
        )
        .unwrap();
    }
    let (searched, searched_local) = (dir.path().join("search"), dir.path().join("search-local"));
    succeed(
        neardup_at(server.port).args(["search", "-o", s(&searched), "s3://corpus/fps/"]),
        &searched,
    );
    succeed(
        neardup().args([
            "search",
            "-o",
            s(&searched_local),
            s(&root.join("corpus/fps")),
        ]),
        &searched_local,
    );
    assert_eq!(pairs(&searched), pairs(&searched_local));
    assert!(!pairs(&searched).is_empty());

    // A glob matching a prefix scans it: the Parquet table under tables/.
    let out = dir.path().join("glob-dir");
    succeed(
        neardup_at(server.port).args(["run", "-o", s(&out), "s3://corpus/data/tab*"]),
        &out,
    );
    assert_eq!(tables(&out, str::to_owned).0.len(), 400);

    // Outputs are not written to a store: refused, and no local directory named `s3:`.
    let mut cmd = neardup_at(server.port);
    cmd.current_dir(dir.path())
        .args(["run", "-o", "s3://corpus/out", s(&data.join("a.jsonl"))]);
    assert_refused(
        &mut cmd,
        &["s3://corpus/out", "cannot be in an object store"],
    );
    assert!(!dir.path().join("s3:").exists());

    let missing = dir.path().join("missing");
    let mut cmd = neardup_at(server.port);
    cmd.args(["run", "-o", s(&missing), "s3://corpus/data/nope/"]);
    assert_fails(&mut cmd, &missing, &["s3://corpus/data/nope/"]);
}

/// Above io's `jsonl::SPLIT_BYTES` (32 MiB): read by workers in byte ranges.
const BIG_BYTES: usize = (32 << 20) + (2 << 20);

#[test]
fn a_large_object_is_read_in_byte_ranges_alike() {
    let Some(bin) = server_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let mut rng = SeededRng::new(0xB16);
    let mut bytes = Vec::with_capacity(BIG_BYTES + (1 << 20));
    let mut id = 0;
    while bytes.len() < BIG_BYTES {
        bytes.extend(jsonl_of(&docs(&mut rng, id, 700)));
        id += 700;
    }
    let big = write(&root.join("corpus/big/big.jsonl"), &bytes);
    let server = Server::start(&bin, &root);
    let local = dir.path().join("local");
    succeed(
        neardup().args(["run", "-w", "2", "-o", s(&local), s(&big)]),
        &local,
    );
    let out = dir.path().join("store");
    succeed(
        neardup_at(server.port).args(["run", "-w", "2", "-o", s(&out), "s3://corpus/big/"]),
        &out,
    );
    let expected = as_urls(&local, big.parent().unwrap(), "s3://corpus/big/");
    assert_eq!(tables(&out, str::to_owned), expected);
    // Numbered by byte offset: the second worker's pieces start mid-object.
    assert!(expected.0.iter().any(|f| f.record > (32 << 20)));
}

// ---------------------------------------------------------------------------------------
// Faults: a proxy in front of the server

/// What the proxy does to each request.
#[derive(Clone, Copy)]
enum Faults {
    /// Every request is first refused (503); every ranged read is then cut half-way once;
    /// then answered.
    Transient,
    /// Every ranged read is cut half-way, every time.
    Lasting,
    /// Every request is first left without an answer (the connection held open); then
    /// answered.
    Stall,
}

/// An HTTP proxy on loopback in front of `upstream`, one request per connection.
fn proxy(upstream: u16, faults: Faults) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Arc<Mutex<HashSet<String>>> = Arc::default();
    let resumed: Arc<Mutex<HashSet<u64>>> = Arc::default();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let (seen, resumed) = (seen.clone(), resumed.clone());
            std::thread::spawn(move || {
                let _ = serve_one(client, upstream, faults, &seen, &resumed);
            });
        }
    });
    port
}

fn serve_one(
    client: TcpStream,
    upstream: u16,
    faults: Faults,
    seen: &Mutex<HashSet<String>>,
    resumed: &Mutex<HashSet<u64>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut head = Vec::new();
    let mut headers: HashMap<String, String> = HashMap::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let name = name.trim().to_ascii_lowercase();
            if name == "connection" {
                continue;
            }
            headers.insert(name, value.trim().to_owned());
        }
        head.extend_from_slice(line.as_bytes());
    }
    let length: usize = headers
        .get("content-length")
        .map_or(0, |l| l.parse().unwrap());
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let first_line = String::from_utf8_lossy(&head)
        .lines()
        .next()
        .unwrap_or("")
        .to_owned();
    let range_start: Option<u64> = headers
        .get("range")
        .and_then(|r| r.strip_prefix("bytes=")?.split('-').next()?.parse().ok());
    let mut client = client;
    let first_time = seen
        .lock()
        .unwrap()
        .insert(format!("{first_line} {range_start:?}"));
    if matches!(faults, Faults::Stall) && first_time {
        std::thread::sleep(Duration::from_secs(20));
        return Ok(());
    }
    if matches!(faults, Faults::Transient) && first_time {
        client.write_all(
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        )?;
        return Ok(());
    }
    let mut up = TcpStream::connect(("127.0.0.1", upstream))?;
    up.write_all(&head)?;
    up.write_all(b"connection: close\r\n\r\n")?;
    up.write_all(&body)?;
    let mut response = Vec::new();
    up.read_to_end(&mut response)?;
    let cut = match (faults, range_start) {
        (_, None) | (Faults::Stall, _) => false,
        (Faults::Lasting, Some(_)) => true,
        (Faults::Transient, Some(start)) => !resumed.lock().unwrap().contains(&start),
    };
    let body_at = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(response.len(), |p| p + 4);
    if cut && response.len() - body_at > 1 {
        let half = (response.len() - body_at) / 2;
        resumed
            .lock()
            .unwrap()
            .insert(range_start.unwrap() + half as u64);
        client.write_all(&response[..body_at + half])?;
        return Ok(()); // dropped: the connection closes mid-body
    }
    client.write_all(&response)
}

#[test]
fn transient_faults_are_retried_and_counted() {
    let Some(bin) = server_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (_, data, server) = served_corpus(&bin, dir.path());
    let port = proxy(server.port, Faults::Transient);

    let local = dir.path().join("local");
    succeed(neardup().args(["run", "-o", s(&local), s(&data)]), &local);
    let out = dir.path().join("store");
    succeed(
        neardup_at(port).args(["run", "-w", "2", "-o", s(&out), "s3://corpus/data/"]),
        &out,
    );
    assert_eq!(
        tables(&out, str::to_owned),
        as_urls(&local, &data, "s3://corpus/data/")
    );
    let retries = summary(&out)["store_retries"].as_u64().unwrap();
    // At least the listing, and a refusal and a cut for each of the three objects' reads.
    assert!(retries >= 9, "store_retries {retries}");
}

#[test]
fn stalled_requests_are_left_after_the_timeout_and_asked_again() {
    let Some(bin) = server_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (_, data, server) = served_corpus(&bin, dir.path());
    let port = proxy(server.port, Faults::Stall);

    let local = dir.path().join("local");
    succeed(neardup().args(["run", "-o", s(&local), s(&data)]), &local);
    let out = dir.path().join("store");
    let started = Instant::now();
    succeed(
        neardup_at(port).env("NEARDUP_STORE_TIMEOUT", "0.5").args([
            "run",
            "-w",
            "2",
            "-o",
            s(&out),
            "s3://corpus/data/",
        ]),
        &out,
    );
    assert!(
        started.elapsed() < Duration::from_secs(19),
        "a stall was waited out"
    );
    assert_eq!(
        tables(&out, str::to_owned),
        as_urls(&local, &data, "s3://corpus/data/")
    );
    // The listing and the first read of each of the three objects stalled at least.
    let retries = summary(&out)["store_retries"].as_u64().unwrap();
    assert!(retries >= 4, "store_retries {retries}");

    let mut cmd = neardup_at(port);
    cmd.env("NEARDUP_STORE_TIMEOUT", "soon").args([
        "run",
        "-o",
        s(&dir.path().join("bad")),
        "s3://corpus/data/",
    ]);
    assert_refused(&mut cmd, &["NEARDUP_STORE_TIMEOUT=\"soon\"", "seconds"]);
}

#[test]
fn a_lasting_fault_names_the_object_and_byte_and_leaves_no_success() {
    let Some(bin) = server_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (_, _, server) = served_corpus(&bin, dir.path());
    let port = proxy(server.port, Faults::Lasting);
    let out = dir.path().join("store");
    let mut cmd = neardup_at(port);
    cmd.env("NEARDUP_STORE_ATTEMPTS", "3")
        .args(["run", "-o", s(&out), "s3://corpus/data/a.jsonl"]);
    let stderr = assert_fails(&mut cmd, &out, &["s3://corpus/data/a.jsonl", "at byte "]);
    assert!(!out.join("_SUCCESS").exists(), "{stderr}");
}

// ---------------------------------------------------------------------------------------
// Plain web servers: `http(s)://` names one object

/// A web server on loopback serving the files under `root`: HEAD, and GET whole or with a
/// `Range: bytes=a-b` (or `a-`), one request per connection.
fn web_server(root: PathBuf) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let _ = serve_file(client, &root);
        }
    });
    port
}

fn serve_file(client: TcpStream, root: &Path) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut first = String::new();
    reader.read_line(&mut first)?;
    let mut range: Option<(u64, Option<u64>)> = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("range") {
                let (a, b) = value
                    .trim()
                    .trim_start_matches("bytes=")
                    .split_once('-')
                    .unwrap();
                range = Some((a.parse().unwrap(), b.parse().ok()));
            }
        }
    }
    let mut words = first.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or("/"));
    let mut client = client;
    let Ok(bytes) = std::fs::read(root.join(path.trim_start_matches('/'))) else {
        return client.write_all(
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        );
    };
    let size = bytes.len() as u64;
    let (status, body, extra) = match range {
        Some((a, b)) => {
            let end = b.map_or(size, |b| (b + 1).min(size));
            let range = format!("content-range: bytes {a}-{}/{size}\r\n", end - 1);
            (
                "206 Partial Content",
                &bytes[a as usize..end as usize],
                range,
            )
        }
        None => ("200 OK", &bytes[..], String::new()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-length: {}\r\n{extra}last-modified: Fri, 27 Nov 2026 12:00:00 GMT\r\nconnection: close\r\n\r\n",
        body.len()
    );
    client.write_all(head.as_bytes())?;
    if method != "HEAD" {
        client.write_all(body)?;
    }
    Ok(())
}

#[test]
fn web_urls_name_single_objects() {
    let dir = tempfile::tempdir().unwrap();
    let data = corpus(&dir.path().join("root"));
    let port = web_server(data.clone());
    let names = ["a.jsonl", "sub/b.jsonl.zst", "tables/c.parquet"];
    let local = dir.path().join("local");
    let mut cmd = neardup();
    cmd.args(["run", "-w", "2", "-o", s(&local)])
        .args(names.map(|n| data.join(n)));
    succeed(&mut cmd, &local);
    let out = dir.path().join("web");
    let mut cmd = neardup();
    cmd.args(["run", "-w", "2", "-o", s(&out)])
        .args(names.map(|n| format!("http://127.0.0.1:{port}/{n}")));
    succeed(&mut cmd, &out);
    let url = format!("http://127.0.0.1:{port}/");
    assert_eq!(tables(&out, str::to_owned), as_urls(&local, &data, &url));

    // A web server cannot be listed: a name of no object is an error naming it.
    let missing = dir.path().join("missing");
    let mut cmd = neardup();
    let name = format!("http://127.0.0.1:{port}/sub/");
    cmd.args(["run", "-o", s(&missing), &name]);
    assert_fails(&mut cmd, &missing, &[&name]);
}

// ---------------------------------------------------------------------------------------
// Azure Blob Storage: Microsoft's emulator, Azurite

/// Azurite's blob service (`NEARDUP_AZURITE`) and a Python with Microsoft's client
/// (`NEARDUP_PYTHON`, with azure-storage-blob), or `None` with a notice (a panic under CI).
fn azurite() -> Option<(PathBuf, PathBuf)> {
    let found = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_file())
    };
    let python = found("NEARDUP_PYTHON").filter(|python| {
        Process::new(python)
            .args(["-c", "import azure.storage.blob"])
            .status()
            .is_ok_and(|s| s.success())
    });
    if let (Some(azurite), Some(python)) = (found("NEARDUP_AZURITE"), python) {
        return Some((azurite, python));
    }
    let message = "Azurite or azure-storage-blob not found (scripts/test.sh installs both)";
    if std::env::var(REQUIRE_SHARED).as_deref() == Ok("1") {
        panic!("{message}, and {REQUIRE_SHARED}=1 requires the object store tests");
    }
    eprintln!("skipped: {message}");
    None
}

/// Azurite's well-known development account.
const AZURITE_CONNECTION: &str = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;\
AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;\
BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1;";

#[test]
fn a_run_from_azure_equals_the_run_from_its_files() {
    let Some((azurite, python)) = azurite() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data = corpus(&dir.path().join("root"));
    let port = free_ports(1)[0];
    let location = dir.path().join("azurite");
    std::fs::create_dir_all(&location).unwrap();
    let mut server = Process::new(&azurite)
        .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
        .args([
            "--location",
            s(&location),
            "--silent",
            "--skipApiVersionCheck",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("Azurite starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "Azurite never listened");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The corpus uploaded by Microsoft's own client, every file under its relative name.
    let upload = r#"
import os, sys
from azure.storage.blob import BlobServiceClient
service = BlobServiceClient.from_connection_string(sys.argv[1])
container = service.create_container("corpus")
root = sys.argv[2]
for folder, _, names in os.walk(root):
    for name in names:
        path = os.path.join(folder, name)
        with open(path, "rb") as f:
            container.upload_blob("data/" + os.path.relpath(path, root), f)
"#;
    let uploaded = Process::new(&python)
        .args(["-c", upload])
        .arg(AZURITE_CONNECTION.replace("{port}", &port.to_string()))
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        uploaded.status.success(),
        "upload: {}",
        String::from_utf8_lossy(&uploaded.stderr)
    );

    let local = dir.path().join("local");
    succeed(neardup().args(["run", "-o", s(&local), s(&data)]), &local);
    let out = dir.path().join("azure");
    let mut cmd = neardup();
    cmd.env("AZURE_STORAGE_USE_EMULATOR", "true")
        .env(
            "AZURITE_BLOB_STORAGE_URL",
            format!("http://127.0.0.1:{port}"),
        )
        .args(["run", "-w", "2", "-o", s(&out), "az://corpus/data/"]);
    let result = cmd.output().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        result.status.success() && out.join("_SUCCESS").is_file(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    assert_eq!(
        tables(&out, str::to_owned),
        as_urls(&local, &data, "az://corpus/data/")
    );
}

// ---------------------------------------------------------------------------------------
// AWS profile files

/// `neardup` with no AWS setting in its environment but `HOME`, `AWS_PROFILE` and
/// `AWS_ALLOW_HTTP`: keys, region and endpoint come from the profile files.
fn neardup_with_profile(home: &Path, profile: &str) -> Command {
    let mut cmd = neardup();
    for var in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_ENDPOINT_URL",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_CONFIG_FILE",
        "AWS_SKIP_SIGNATURE",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("HOME", home)
        .env("AWS_PROFILE", profile)
        .env("AWS_ALLOW_HTTP", "true");
    cmd
}

#[test]
fn profile_files_give_keys_region_and_endpoint() {
    let Some(bin) = server_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (_, data, server) = served_corpus(&bin, dir.path());
    let home = dir.path().join("home");
    write(
        &home.join(".aws/credentials"),
        format!(
            "[default]\naws_access_key_id = nobody\naws_secret_access_key = nothing\n\n\
             [neardup]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n\n\
             [wrong]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = not-the-secret\n"
        )
        .as_bytes(),
    );
    let endpoint = format!("http://127.0.0.1:{}", server.port);
    write(
        &home.join(".aws/config"),
        format!(
            "[profile neardup]\nregion = us-east-1\nendpoint_url = {endpoint}\n\n\
             [profile wrong]\nregion = us-east-1\nendpoint_url = {endpoint}\n"
        )
        .as_bytes(),
    );
    let local = dir.path().join("local");
    succeed(
        neardup().args(["run", "-o", s(&local), s(&data.join("a.jsonl"))]),
        &local,
    );
    let out = dir.path().join("profile");
    succeed(
        neardup_with_profile(&home, "neardup").args([
            "run",
            "-o",
            s(&out),
            "s3://corpus/data/a.jsonl",
        ]),
        &out,
    );
    assert_eq!(
        tables(&out, str::to_owned),
        as_urls(&local, &data, "s3://corpus/data/")
    );

    // A wrong key is refused (403) at once: asking again cannot help.
    let refused = dir.path().join("refused");
    let started = Instant::now();
    let mut cmd = neardup_with_profile(&home, "wrong");
    cmd.args(["run", "-o", s(&refused), "s3://corpus/data/"]);
    assert_fails(&mut cmd, &refused, &["s3://corpus/data/", "403"]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    let missing = dir.path().join("missing");
    let mut cmd = neardup_with_profile(&home, "nowhere");
    cmd.args(["run", "-o", s(&missing), "s3://corpus/data/"]);
    assert_fails(
        &mut cmd,
        &missing,
        &["AWS_PROFILE names the profile nowhere"],
    );
}
