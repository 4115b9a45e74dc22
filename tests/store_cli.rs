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

/// `neardup run -w 1 ARGS` as two processes on loopback with the store's environment
/// (process `p` with `tmpdirs[p]` as its `TMPDIR`, when given); both must succeed.
fn two_processes(dir: &Path, port: u16, tmpdirs: &[PathBuf], args: &[&str]) {
    let hostfile = write_hostfile(&dir.join("hosts.txt"), &loopback(&free_ports(2)));
    let children: Vec<Child> = (0..2)
        .map(|p| {
            let mut cmd = Process::new(BIN);
            cmd.envs(store_env(port));
            if let Some(tmp) = tmpdirs.get(p) {
                cmd.env("TMPDIR", tmp);
            }
            cmd.args(["run", "-n", "2", "-p", &p.to_string(), "-h", s(&hostfile)])
                .args(["-w", "1"])
                .args(args)
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
    two_processes(
        dir.path(),
        server.port,
        &[],
        &["-o", s(&out), "s3://corpus/data/"],
    );
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

    // What must be local is refused (an index, extract's documents), and no local
    // directory named `s3:` appears.
    let mut cmd = neardup_at(server.port);
    cmd.current_dir(dir.path()).args([
        "run",
        "-o",
        "run",
        "--index",
        "s3://corpus/idx",
        s(&data.join("a.jsonl")),
    ]);
    assert_refused(
        &mut cmd,
        &["s3://corpus/idx", "the index cannot be in an object store"],
    );
    let mut cmd = neardup_at(server.port);
    cmd.current_dir(dir.path()).args([
        "extract",
        "-o",
        "s3://corpus/out",
        s(&data.join("a.jsonl")),
    ]);
    assert_refused(
        &mut cmd,
        &[
            "s3://corpus/out",
            "cannot be in an object store",
            "--write-dedup",
        ],
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
    let local_dedup = dir.path().join("local-dedup");
    succeed(
        neardup()
            .args(["run", "-w", "2", "-o", s(&local), s(&big)])
            .args(["--write-dedup", s(&local_dedup)]),
        &local,
    );
    let out = dir.path().join("store");
    succeed(
        neardup_at(server.port)
            .args(["run", "-w", "2", "-o", s(&out), "s3://corpus/big/"])
            .args(["--write-dedup", "s3://corpus/dedup/"]),
        &out,
    );
    let expected = as_urls(&local, big.parent().unwrap(), "s3://corpus/big/");
    assert_eq!(tables(&out, str::to_owned), expected);
    // Numbered by byte offset: the second worker's pieces start mid-object.
    assert!(expected.0.iter().any(|f| f.record > (32 << 20)));
    // The deduplicated corpus written to the store: the kept copy (above 16 MiB, so sent
    // as a multipart upload) byte for byte as on disk, and `_SUCCESS`.
    let kept = std::fs::read(root.join("corpus/dedup/big.jsonl")).unwrap();
    assert!(kept.len() > (16 << 20), "{} bytes", kept.len());
    assert!(kept == std::fs::read(local_dedup.join("big.jsonl")).unwrap());
    assert!(root.join("corpus/dedup/_SUCCESS").is_file());
    assert!(root.join("corpus/dedup/removed.parquet").is_file());
}

/// The web archive samples (ARC, WARC, WARC.gz) of the shared corpora, served from the
/// store: the same documents, pairs and clusters as from disk, and the deduplicated archives
/// written to the store byte for byte as on disk.
#[test]
fn archives_in_a_store_read_and_deduplicate_alike() {
    let Some(bin) = server_binary() else { return };
    let Some(samples) = shared_corpus("web-archive-samples") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let web = root.join("crawl/web");
    std::fs::create_dir_all(&web).unwrap();
    let archives: Vec<std::ffi::OsString> = std::fs::read_dir(&samples)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().contains(".arc") || n.to_string_lossy().contains(".warc"))
        .collect();
    assert!(archives.len() >= 4, "{archives:?}");
    for name in &archives {
        std::fs::copy(samples.join(name), web.join(name)).unwrap();
    }
    let server = Server::start(&bin, &root);
    let (local, local_dedup) = (dir.path().join("local"), dir.path().join("local-dedup"));
    succeed(
        neardup()
            .args(["run", "--html", "main", "-o", s(&local), "--write-dedup"])
            .args([s(&local_dedup), s(&web)]),
        &local,
    );
    let out = dir.path().join("store");
    succeed(
        neardup_at(server.port)
            .args(["run", "-w", "2", "--html", "main", "-o", s(&out)])
            .args(["--write-dedup", "s3://crawl/dedup/", "s3://crawl/web/"]),
        &out,
    );
    let expected = as_urls(&local, &web, "s3://crawl/web/");
    assert!(expected.0.len() > 400 && !expected.1.is_empty());
    assert_eq!(tables(&out, str::to_owned), expected);
    let dedup = root.join("crawl/dedup");
    assert!(dedup.join("_SUCCESS").is_file());
    for name in &archives {
        assert!(
            std::fs::read(dedup.join(name)).unwrap()
                == std::fs::read(local_dedup.join(name)).unwrap(),
            "{name:?} differs"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Outputs in the store: the server's directory is the oracle's view of what it holds

/// The objects below `dir` of the server's directory, as names relative to it.
fn objects(dir: &Path) -> BTreeSet<String> {
    fn walk(dir: &Path, base: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, base, out);
            } else {
                let name = path.strip_prefix(base).unwrap().to_string_lossy();
                out.insert(name.into_owned());
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

/// A fresh directory to be a process's `TMPDIR` (where it stages a store output).
fn tmpdir(dir: &Path, name: &str) -> PathBuf {
    let tmp = dir.join(name);
    std::fs::create_dir_all(&tmp).unwrap();
    tmp
}

/// What a complete run left in the store: `_SUCCESS` and the summary; no lock, nothing of
/// `_resume/` or `_spill/`; and nothing staged left behind in `tmp`.
fn assert_published(out: &Path, tmp: &Path) {
    let held = objects(out);
    assert!(
        held.contains("_SUCCESS") && held.contains("summary.json"),
        "{held:?}"
    );
    assert!(
        held.iter().all(|o| !o.starts_with("_resume/")
            && !o.starts_with("_spill/")
            && o != ".neardup.lock"),
        "{held:?}"
    );
    let staged: Vec<_> = std::fs::read_dir(tmp).unwrap().flatten().collect();
    assert!(staged.is_empty(), "staging left behind: {staged:?}");
}

#[test]
fn a_run_into_a_store_equals_the_run_on_disk() {
    let Some(bin) = server_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (root, data, server) = served_corpus(&bin, dir.path());
    let local = dir.path().join("local");
    succeed(
        neardup().args(["run", "-w", "1", "-o", s(&local), s(&data)]),
        &local,
    );
    let expected = tables(&local, str::to_owned);

    for workers in ["1", "2"] {
        let out = root.join(format!("corpus/runs/w{workers}"));
        let tmp = tmpdir(dir.path(), &format!("tmp-w{workers}"));
        let url = format!("s3://corpus/runs/w{workers}/");
        succeed(
            neardup_at(server.port).env("TMPDIR", &tmp).args([
                "run",
                "-w",
                workers,
                "-o",
                &url,
                s(&data),
            ]),
            &out,
        );
        assert_eq!(tables(&out, str::to_owned), expected, "{workers} workers");
        assert_published(&out, &tmp);
    }

    // Two processes with nothing shared but the store: each stages in its own TMPDIR and
    // writes its own parts; process 0 commits.
    let out = root.join("corpus/runs/p2");
    let tmps: Vec<PathBuf> = (0..2)
        .map(|p| tmpdir(dir.path(), &format!("tmp-p{p}")))
        .collect();
    two_processes(
        dir.path(),
        server.port,
        &tmps,
        &["-o", "s3://corpus/runs/p2/", s(&data)],
    );
    assert_eq!(tables(&out, str::to_owned), expected, "2 processes");
    for tmp in &tmps {
        assert_published(&out, tmp);
    }
    assert!(objects(&out).contains("fingerprints/part-00001.parquet"));

    // The store's run reads back from the store: `neardup search` over its fingerprints.
    let searched = dir.path().join("searched");
    succeed(
        neardup_at(server.port).args([
            "search",
            "-o",
            s(&searched),
            "s3://corpus/runs/p2/fingerprints/",
        ]),
        &searched,
    );
    assert_eq!(pair_set(&pairs(&searched)), expected.1);
}

#[test]
fn overwrite_in_a_store_deletes_only_neardups_objects() {
    let Some(bin) = server_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (root, data, server) = served_corpus(&bin, dir.path());
    let local = dir.path().join("local");
    succeed(neardup().args(["run", "-o", s(&local), s(&data)]), &local);
    let (url, out) = ("s3://corpus/runs/again/", root.join("corpus/runs/again"));
    let run = |args: &[&str]| {
        let mut cmd = neardup_at(server.port);
        cmd.arg("run").args(args).args(["-o", url, s(&data)]);
        cmd
    };
    succeed(&mut run(&["-w", "2"]), &out);
    assert!(objects(&out).contains("pairs/part-00001.parquet"));

    // Refused before the work: the staging directory it made goes too.
    let tmp = tmpdir(dir.path(), "tmp-refused");
    assert_refused(
        run(&[]).env("TMPDIR", &tmp),
        &[url, "is not empty", "--overwrite"],
    );
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
    // Replaced by a run of one worker: the second worker's parts go with the rest.
    succeed(&mut run(&["-w", "1", "--overwrite"]), &out);
    assert!(!objects(&out).iter().any(|o| o.contains("part-00001")));
    assert_eq!(tables(&out, str::to_owned), tables(&local, str::to_owned));

    // An object neardup did not write: refused, naming it, nothing deleted.
    write(&out.join("notes/mine.txt"), b"the user's");
    let before = objects(&out);
    assert_refused(
        &mut run(&["--overwrite"]),
        &["notes/mine.txt", "nothing was deleted"],
    );
    assert_eq!(objects(&out), before);

    // A prefix neardup did not write, one holding an input, a web server's URL.
    let mut cmd = neardup_at(server.port);
    cmd.args(["run", "--overwrite", "-o", "s3://corpus/data/"])
        .arg(s(&data.join("a.jsonl")));
    assert_refused(&mut cmd, &["s3://corpus/data/", "not a neardup output"]);
    let mut cmd = neardup_at(server.port);
    cmd.args(["run", "--overwrite", "-o", "s3://corpus/"])
        .arg("s3://corpus/data/a.jsonl");
    assert_refused(&mut cmd, &["it holds the input s3://corpus/data/a.jsonl"]);
    let mut cmd = neardup_at(server.port);
    cmd.args(["run", "-o", "http://127.0.0.1:9/run/", s(&data)]);
    assert_refused(&mut cmd, &["a web server's URL cannot be written"]);
    assert!(root.join("corpus/data/a.jsonl").is_file());
}

#[test]
fn one_run_at_a_time_holds_a_store_directory() {
    let Some(bin) = server_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (root, data, server) = served_corpus(&bin, dir.path());
    let (url, out) = ("s3://corpus/runs/locked/", root.join("corpus/runs/locked"));
    let lock = out.join(".neardup.lock");
    let run = || {
        let mut cmd = neardup_at(server.port);
        cmd.args(["run", "--overwrite", "-o", url, s(&data)]);
        cmd
    };
    // Held by a run elsewhere, written just now: refused, naming it.
    write(
        &lock,
        b"pid 4242\nhost elsewhere\nstarted 2026-11-27 10:00:00 UTC\n",
    );
    assert_refused(
        &mut run(),
        &[
            url,
            "in use by another neardup run",
            "pid 4242 on elsewhere",
        ],
    );
    assert_eq!(objects(&out), BTreeSet::from([".neardup.lock".to_string()]));

    // Not written again for longer than the lease: stale, taken over, released at the end.
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&lock)
        .unwrap()
        .set_modified(old)
        .unwrap();
    succeed(&mut run(), &out);
    assert!(!lock.exists());

    // Held by a process of this machine that is gone: stale at once.
    let mut gone = Process::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    write(
        &lock,
        format!("pid {}\nhost {}\n", gone.id(), host.trim()).as_bytes(),
    );
    succeed(&mut run(), &out);
    assert!(!lock.exists());
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
    /// Every upload of a part of `pairs/` fails (500), every time.
    FailPairs,
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
    let fails = first_line.starts_with("PUT ") && first_line.contains("/pairs/");
    if matches!(faults, Faults::FailPairs) && fails {
        client.write_all(
            b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        )?;
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
        (_, None) | (Faults::Stall | Faults::FailPairs, _) => false,
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
    let (root, data, server) = served_corpus(&bin, dir.path());
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

    // Written to the store through the same proxy: every upload refused once, then taken.
    let stored = root.join("corpus/runs/faults");
    succeed(
        neardup_at(port).args(["run", "-w", "2", "-o", "s3://corpus/runs/faults/", s(&data)]),
        &stored,
    );
    assert_eq!(
        tables(&stored, str::to_owned),
        tables(&local, str::to_owned)
    );
    let retries = summary(&stored)["store_retries"].as_u64().unwrap();
    // The lock, the marker, six parts, the summary and `_SUCCESS` at least.
    assert!(retries >= 10, "store_retries {retries}");
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
    let (root, data, server) = served_corpus(&bin, dir.path());
    let port = proxy(server.port, Faults::Lasting);
    let out = dir.path().join("store");
    let mut cmd = neardup_at(port);
    cmd.env("NEARDUP_STORE_ATTEMPTS", "3")
        .args(["run", "-o", s(&out), "s3://corpus/data/a.jsonl"]);
    let stderr = assert_fails(&mut cmd, &out, &["s3://corpus/data/a.jsonl", "at byte "]);
    assert!(!out.join("_SUCCESS").exists(), "{stderr}");

    // An upload that keeps failing: named, and the run is left without `_SUCCESS`; its
    // summary says why.
    let port = proxy(server.port, Faults::FailPairs);
    let stored = root.join("corpus/runs/failed");
    let mut cmd = neardup_at(port);
    cmd.env("NEARDUP_STORE_ATTEMPTS", "2").args([
        "run",
        "-o",
        "s3://corpus/runs/failed/",
        s(&data),
    ]);
    assert_fails(
        &mut cmd,
        &stored,
        &[
            "s3://corpus/runs/failed/pairs/part-00000.parquet",
            "cannot upload",
        ],
    );
    let errors = summary(&stored)["errors"].to_string();
    assert!(errors.contains("pairs/part-00000.parquet"), "{errors}");
    assert!(!objects(&stored).contains(".neardup.lock"));
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
    let at_azure = || {
        let mut cmd = neardup();
        cmd.env("AZURE_STORAGE_USE_EMULATOR", "true").env(
            "AZURITE_BLOB_STORAGE_URL",
            format!("http://127.0.0.1:{port}"),
        );
        cmd
    };
    let mut cmd = at_azure();
    cmd.args(["run", "-w", "2", "-o", s(&out), "az://corpus/data/"]);
    let result = cmd.output().unwrap();
    // Written to Azure: a run's output read back from there by `neardup search`, and the
    // blobs as Microsoft's client lists them.
    let searched = dir.path().join("searched");
    let mut written = at_azure();
    written.args(["run", "-w", "2", "-o", "az://corpus/runs/one/", s(&data)]);
    let wrote = written.output().unwrap();
    let mut search = at_azure();
    let search = search
        .args([
            "search",
            "-o",
            s(&searched),
            "az://corpus/runs/one/fingerprints/",
        ])
        .output()
        .unwrap();
    let list = r#"
import sys
from azure.storage.blob import BlobServiceClient
service = BlobServiceClient.from_connection_string(sys.argv[1])
for blob in service.get_container_client("corpus").list_blobs(name_starts_with="runs/one/"):
    print(blob.name)
"#;
    let listed = Process::new(&python)
        .args(["-c", list])
        .arg(AZURITE_CONNECTION.replace("{port}", &port.to_string()))
        .output()
        .unwrap();
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
    for done in [&wrote, &search] {
        assert!(
            done.status.success(),
            "{}",
            String::from_utf8_lossy(&done.stderr)
        );
    }
    assert_eq!(pair_set(&pairs(&searched)), pair_set(&pairs(&local)));
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    for blob in [
        "_SUCCESS",
        "summary.json",
        "fingerprints/part-00001.parquet",
    ] {
        assert!(listed.contains(&format!("runs/one/{blob}\n")), "{listed}");
    }
    assert!(!listed.contains(".neardup.lock"), "{listed}");
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
    // A credential process as the AWS documentation specifies it, counting its runs.
    let runs = home.join("process-runs");
    let script = write(
        &home.join("credentials.sh"),
        format!(
            "echo run >> {}\nprintf '{{\"Version\": 1, \"AccessKeyId\": \"{ACCESS_KEY}\", \
             \"SecretAccessKey\": \"{SECRET_KEY}\", \"Expiration\": \"2999-01-01T00:00:00Z\"}}'\n",
            runs.display()
        )
        .as_bytes(),
    );
    write(
        &home.join(".aws/config"),
        format!(
            "[profile neardup]\nregion = us-east-1\nendpoint_url = {endpoint}\n\n\
             [profile wrong]\nregion = us-east-1\nendpoint_url = {endpoint}\n\n\
             [profile process]\nregion = us-east-1\nendpoint_url = {endpoint}\n\
             credential_process = sh {}\n\n\
             [profile broken]\nregion = us-east-1\nendpoint_url = {endpoint}\n\
             credential_process = sh -c 'echo access denied >&2; exit 3'\n\n\
             [profile sso]\nregion = us-east-1\nsso_session = corp\nsso_account_id = 1\n",
            script.display()
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

    // Keys from the profile's credential process, run once for all the requests.
    let out = dir.path().join("process");
    succeed(
        neardup_with_profile(&home, "process").args([
            "run",
            "-w",
            "2",
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
    assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\n");
    // A process that fails is named with what it said, at once.
    let broken = dir.path().join("broken");
    let started = Instant::now();
    let mut cmd = neardup_with_profile(&home, "broken");
    cmd.args(["run", "-o", s(&broken), "s3://corpus/data/"]);
    assert_fails(
        &mut cmd,
        &broken,
        &[
            "credential_process `sh -c 'echo access denied",
            "access denied",
        ],
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    // SSO without a credential process: refused, saying how to give it one.
    let mut cmd = neardup_with_profile(&home, "sso");
    cmd.args(["run", "-o", s(&broken), "s3://corpus/data/"]);
    assert_refused(
        &mut cmd,
        &[
            "the AWS profile sso gets its keys through sso_session",
            "credential_process = aws configure export-credentials --profile sso --format process",
        ],
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
