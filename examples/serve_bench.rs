//! The load generator of `scripts/bench/serve.sh` (docs/performance.md, "Serving").
//!
//! ```text
//! serve_bench make-index DIR N [G]       an index of N documents with random fingerprints
//!                                        (a tenth of them with a near copy), ids doc-0..,
//!                                        in generations of at most G documents (default
//!                                        N: one; each one's table sorts spill 256 bytes a
//!                                        document, so a 100M index is made in several)
//! serve_bench query ADDR CLIENTS SECS N  single-fingerprint queries from CLIENTS keep-alive
//!                                        connections (fingerprints of the N indexed docs,
//!                                        flipped a little)
//! serve_bench put ADDR CLIENTS SECS [P] 5 KB pages put under the ids P-CLIENT-N (P
//!                                        default `bench`: a second load of the same P
//!                                        replaces the first's pages with the same texts)
//! ```
//!
//! A put's text is drawn from its id's prefix, client and number (made-up words), so the
//! pages of another prefix are new pages, like nothing indexed, as a crawl's mostly are.
//! `BENCH_TEXTS=T` draws them from T instead of the prefix: two loads of one T and two
//! prefixes put the same pages under new ids (a crawl's revisits), each an exact duplicate
//! of the other load's.
//!
//! Each load prints one JSON line: requests, seconds, requests per second, and the p50, p99
//! and max latency in milliseconds. Every client is closed-loop (its next request after the
//! last answer), so the latencies are those under the measured throughput. With
//! `BENCH_WINDOW=SECS` a load also prints one such line a window of SECS seconds (by when
//! each request was sent) to standard error, to show what a checkpoint does to the load.

#[path = "../tests/common/http.rs"]
mod http;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use neardup_core::testing::SeededRng;
use neardup_core::{Scheme, TableDesign};
use neardup_io::index::{DocEntry, IndexSpec, IndexWriter, FILE_SHIFT};

/// The seed of the fingerprints of `make-index` (`query` draws from the same ones).
const SEED: u64 = 0x5E12E;

/// Words per 5 KB page (made-up words of 4 to 10 letters: about 8 bytes with the space).
const PAGE_WORDS: usize = 640;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| -> &str {
        args.get(i).map(String::as_str).unwrap_or_else(|| {
            eprintln!("usage: see the module docs of examples/serve_bench.rs");
            std::process::exit(2)
        })
    };
    match arg(0) {
        "make-index" => {
            let n: u64 = arg(2).parse().expect("N");
            let per = args.get(3).map_or(n, |g| g.parse().expect("G"));
            make_index(Path::new(arg(1)), n, per.max(1))
        }
        "query" => load(
            arg(1).parse().expect("ADDR"),
            arg(2).parse().expect("CLIENTS"),
            arg(3).parse().expect("SECS"),
            Kind::Query(arg(4).parse().expect("N")),
        ),
        "put" => load(
            arg(1).parse().expect("ADDR"),
            arg(2).parse().expect("CLIENTS"),
            arg(3).parse().expect("SECS"),
            // Leaked once: the load's threads share it.
            Kind::Put(Box::leak(
                args.get(4)
                    .map_or("bench", String::as_str)
                    .to_string()
                    .into_boxed_str(),
            )),
        ),
        other => {
            eprintln!("unknown mode {other:?}");
            std::process::exit(2)
        }
    }
}

/// The fingerprint of indexed document `i`: random, or (every tenth) a near copy of the one
/// before it.
fn fingerprint(i: u64) -> u64 {
    let mut rng = SeededRng::new(SEED ^ (i / 10 * 10));
    let base = rng.next_u64();
    if i % 10 == 1 {
        base ^ (1 << (i % 64)) ^ (1 << ((i + 17) % 64))
    } else if i.is_multiple_of(10) {
        base
    } else {
        SeededRng::new(SEED.rotate_left(7) ^ i).next_u64()
    }
}

fn make_index(dir: &Path, n: u64, per_generation: u64) {
    let scheme = Scheme::simhash_doc();
    let spec = IndexSpec {
        scheme: scheme.name.as_str().to_string(),
        fingerprint: scheme.params(),
        design: TableDesign::manku16(),
        minhash: None,
    };
    let started = Instant::now();
    let mut writer = IndexWriter::create(dir, &spec).expect("create the index");
    // Document by document, the tables' sorts within 2 GiB (spilling past it), so that an
    // index of 100M documents is written on a small machine.
    writer.set_memory(2 << 30, None);
    // At least one generation: an empty index is one of no documents.
    let firsts: Vec<u64> = (0..n.max(1)).step_by(per_generation as usize).collect();
    for (g, first) in firsts.into_iter().enumerate() {
        add_generation(
            &mut writer,
            g as u64,
            first..(first + per_generation).min(n),
        );
    }
    eprintln!(
        "serve_bench: an index of {n} documents in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Documents `docs` as generation `g` of one input file (numbered `g`).
fn add_generation(writer: &mut IndexWriter, g: u64, docs: std::ops::Range<u64>) {
    let mut generation = writer.begin(1, None, false).expect("begin the index");
    for i in docs {
        let doc = DocEntry {
            doc_id: (g << FILE_SHIFT) | i,
            id: Some(format!("doc-{i}")),
            source: "serve_bench".into(),
            url: None,
            simhash: fingerprint(i),
            empty: false,
            cluster_id: None,
            ..Default::default()
        };
        generation.push(doc).expect("write a document");
    }
    generation
        .commit(std::iter::empty(), std::iter::empty(), None)
        .expect("write the index");
}

#[derive(Clone, Copy)]
enum Kind {
    Query(u64),
    Put(&'static str),
}

fn load(addr: SocketAddr, clients: u64, seconds: f64, kind: Kind) {
    let texts = match kind {
        Kind::Put(prefix) => texts_seed(&std::env::var("BENCH_TEXTS").unwrap_or(prefix.into())),
        Kind::Query(_) => 0,
    };
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let handles: Vec<_> = (0..clients)
        .map(|c| {
            std::thread::spawn(move || {
                let mut conn = http::Conn::connect(addr).expect("connect");
                let mut rng = SeededRng::new(texts ^ (c * 7919 + 1));
                let mut latencies = Vec::new();
                let mut sent_at = Vec::new();
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let (method, path, body) = match kind {
                        Kind::Query(docs) => {
                            let fp = fingerprint(rng.below(docs)) ^ (1 << rng.below(64));
                            (
                                "POST",
                                "/v1/query".to_string(),
                                format!("{{\"fingerprint\": \"{fp:016x}\"}}"),
                            )
                        }
                        Kind::Put(prefix) => {
                            let text = rng.words(PAGE_WORDS).join(" ");
                            (
                                "PUT",
                                format!("/v1/documents/{prefix}-{c}-{n}"),
                                format!("{{\"text\": {}}}", http::quoted(&text)),
                            )
                        }
                    };
                    let sent = Instant::now();
                    let r = conn.request(method, &path, Some(&body)).expect("request");
                    latencies.push(sent.elapsed());
                    sent_at.push(sent - started);
                    assert_eq!(r.status, 200, "{}", r.text());
                    n += 1;
                }
                sent_at.into_iter().zip(latencies).collect::<Vec<_>>()
            })
        })
        .collect();
    let requests: Vec<(Duration, Duration)> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("a client failed"))
        .collect();
    let elapsed = started.elapsed().as_secs_f64();
    let mode = match kind {
        Kind::Query(_) => "query",
        Kind::Put(_) => "put",
    };
    let window: f64 = std::env::var("BENCH_WINDOW")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(0.0);
    if window > 0.0 {
        let mut from = 0.0;
        while from < elapsed {
            let to = (from + window).min(elapsed);
            let latencies: Vec<Duration> = requests
                .iter()
                .filter(|(at, _)| (from..to).contains(&at.as_secs_f64()))
                .map(|&(_, latency)| latency)
                .collect();
            eprintln!(
                "{}",
                summary(mode, clients, Some(from), to - from, latencies)
            );
            from = to;
        }
    }
    let latencies = requests.into_iter().map(|(_, latency)| latency).collect();
    println!("{}", summary(mode, clients, None, elapsed, latencies));
}

/// The seed of a load's texts: FNV-1a of `name`, so that loads of different names put
/// different pages.
fn texts_seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// One JSON line of a load's figures, or of the window of it that starts `from` seconds in.
fn summary(
    mode: &str,
    clients: u64,
    from: Option<f64>,
    seconds: f64,
    mut latencies: Vec<Duration>,
) -> String {
    latencies.sort_unstable();
    let at = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    let window = from.map_or(String::new(), |from| format!("\"from\": {from:.1}, "));
    format!(
        "{{\"mode\": \"{mode}\", {window}\"clients\": {clients}, \"requests\": {}, \"seconds\": {seconds:.2}, \"per_second\": {:.0}, \"p50_ms\": {:.3}, \"p99_ms\": {:.3}, \"max_ms\": {:.3}}}",
        latencies.len(),
        latencies.len() as f64 / seconds,
        at(0.5),
        at(0.99),
        latencies.last().map_or(0.0, |d| d.as_secs_f64() * 1e3)
    )
}
