//! Seeded mutations of small inputs in every format (JSONL plain, gzip and zstd, Parquet,
//! WARC gzip and plain, ARC): bit flips, truncations, splices, zeroed ranges, inserted
//! garbage. Every run must end in a result (`_SUCCESS`) or a clear error (exit 1, `error:`
//! on stderr, no `_SUCCESS`): never a panic, a crash, a hang, or a `_SUCCESS` over a failed
//! read. A failure names the seed, so it can be replayed alone (`NEARDUP_MUTATION_SEED`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, StringArray};
use common::corpus::{gzip, write, write_parquet, zstd};
use neardup_core::testing::SeededRng;
use neardup_io::web::testing::{arc, gzip_members, http, warc};

/// Mutations per base file (7 files: 350 runs, about 15 s in a debug build here).
const MUTATIONS: u64 = 50;
/// A run that takes longer than this on inputs of a few KB is a hang.
const TIMEOUT: Duration = Duration::from_secs(30);

fn texts() -> Vec<String> {
    let mut rng = SeededRng::new(7);
    let mut docs: Vec<String> = (0..10).map(|_| rng.words(40).join(" ")).collect();
    docs.push(docs[3].clone());
    let mut near = docs[5].clone();
    near.push_str(" one more");
    docs.push(near);
    docs
}

/// The base inputs: (file name, bytes).
fn bases(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let docs = texts();
    let jsonl: Vec<u8> = docs
        .iter()
        .enumerate()
        .flat_map(|(i, t)| format!("{{\"id\": {i}, \"text\": \"{t}\"}}\n").into_bytes())
        .collect();
    let parquet = dir.join("base.parquet");
    let ids: ArrayRef = Arc::new(StringArray::from(
        (0..docs.len()).map(|i| i.to_string()).collect::<Vec<_>>(),
    ));
    let text: ArrayRef = Arc::new(StringArray::from(docs.clone()));
    write_parquet(&parquet, vec![("id", ids), ("text", text)], 5);
    let records: Vec<Vec<u8>> = std::iter::once(warc(
        "warcinfo",
        None,
        "application/warc-fields",
        b"software: test\r\n",
    ))
    .chain(docs.iter().enumerate().map(|(i, t)| {
        let page = format!("<html><head><title>{i}</title></head><body><p>{t}</p></body></html>");
        warc(
            "response",
            Some(&format!("http://h{i}.example/")),
            "application/http; msgtype=response",
            &http(200, "text/html; charset=utf-8", page.as_bytes()),
        )
    }))
    .collect();
    let arc_pages: Vec<(String, Vec<u8>)> = docs
        .iter()
        .enumerate()
        .map(|(i, t)| {
            (
                format!("http://a{i}.example/"),
                http(200, "text/html", t.as_bytes()),
            )
        })
        .collect();
    let arc_records: Vec<(&str, &str, &[u8])> = arc_pages
        .iter()
        .map(|(u, b)| (u.as_str(), "text/html", b.as_slice()))
        .collect();
    vec![
        ("a.jsonl".into(), jsonl.clone()),
        ("a.jsonl.gz".into(), gzip(&jsonl)),
        ("a.jsonl.zst".into(), zstd(&jsonl)),
        ("b.parquet".into(), std::fs::read(&parquet).unwrap()),
        ("c.warc.gz".into(), gzip_members(&records)),
        ("d.warc".into(), records.concat()),
        ("e.arc".into(), arc(&arc_records)),
    ]
}

/// One seeded mutation of `bytes`, and what it was (for the failure message).
fn mutate(bytes: &[u8], rng: &mut SeededRng) -> (Vec<u8>, String) {
    let mut out = bytes.to_vec();
    let len = out.len() as u64;
    let at = |rng: &mut SeededRng| rng.below(len.max(1)) as usize;
    let what = match rng.below(5) {
        0 => {
            let flips = 1 + rng.below(8);
            for _ in 0..flips {
                let i = at(rng);
                out[i] ^= 1 << rng.below(8);
            }
            format!("{flips} bit flips")
        }
        1 => {
            let cut = at(rng);
            out.truncate(cut);
            format!("truncated at {cut}")
        }
        2 => {
            let (from, to) = (at(rng), at(rng));
            let n = (rng.below(64) as usize).min(out.len() - from);
            let chunk = out[from..from + n].to_vec();
            out.splice(to..to, chunk);
            format!("{n} bytes from {from} spliced in at {to}")
        }
        3 => {
            let from = at(rng);
            let n = (rng.below(256) as usize).min(out.len() - from);
            out[from..from + n].fill(0);
            format!("{n} bytes zeroed at {from}")
        }
        _ => {
            let to = at(rng);
            let n = 1 + rng.below(32) as usize;
            let garbage: Vec<u8> = (0..n).map(|_| rng.below(256) as u8).collect();
            out.splice(to..to, garbage);
            format!("{n} random bytes inserted at {to}")
        }
    };
    (out, what)
}

/// Runs `neardup run`, killing it after [`TIMEOUT`]: (exit code, stderr), or `None` on a hang.
fn run(args: &[&str]) -> Option<(Option<i32>, String)> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_neardup"));
    for var in common::cli::ENV_VARS {
        cmd.env_remove(var);
    }
    let mut child = cmd
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            return Some((status.code(), stderr));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn mutated_inputs_end_in_a_result_or_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let only: Option<u64> = std::env::var("NEARDUP_MUTATION_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let mut outcomes = [0u64; 2];
    for (b, (name, bytes)) in bases(dir.path()).into_iter().enumerate() {
        for m in 0..MUTATIONS {
            let seed = 1_000 * b as u64 + m;
            if only.is_some_and(|o| o != seed) {
                continue;
            }
            let mut rng = SeededRng::new(seed);
            let (mutated, what) = mutate(&bytes, &mut rng);
            let case = dir.path().join(format!("case-{seed}"));
            std::fs::create_dir_all(&case).unwrap();
            let input: PathBuf = write(&case.join(&name), &mutated);
            let out = case.join("out");
            let lenient = m % 2 == 1;
            let mut args = vec!["run", "-q", "--output", common::s(&out)];
            if name.ends_with(".parquet") {
                args.push("--id-field=id");
            }
            if lenient {
                args.push("--skip-invalid");
            }
            args.push(common::s(&input));
            let shown = format!("seed {seed} ({name}, {what}, lenient {lenient})");
            let Some((code, stderr)) = run(&args) else {
                panic!("{shown}: no exit within {TIMEOUT:?} (a hang)");
            };
            assert!(!stderr.contains("panicked"), "{shown}: a panic:\n{stderr}");
            let success = out.join("_SUCCESS").exists();
            match code {
                Some(0) => {
                    assert!(success, "{shown}: exit 0 without _SUCCESS:\n{stderr}");
                    outcomes[0] += 1;
                }
                Some(1) => {
                    assert!(!success, "{shown}: _SUCCESS over a failed run:\n{stderr}");
                    assert!(
                        stderr.contains("error: "),
                        "{shown}: no error message:\n{stderr}"
                    );
                    outcomes[1] += 1;
                }
                other => panic!("{shown}: exit {other:?} (a crash?):\n{stderr}"),
            }
            std::fs::remove_dir_all(&case).unwrap();
        }
    }
    // Both outcomes occur: the mutations reach the readers, and not every one is fatal.
    if only.is_none() {
        assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
        eprintln!(
            "mutations: {} results, {} clear errors",
            outcomes[0], outcomes[1]
        );
    }
}
