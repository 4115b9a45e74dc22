//! Measurements on the sample pages, run by hand (they print; their asserts only guard
//! that there was something to measure):
//!
//! ```text
//! cargo test --release -p neardup-io --lib html::tests::measure -- --ignored --nocapture
//! ```
//!
//! * `html_speed`: MB/s of HTML per core for decoding, `text`, `main` and the whole
//!   `html_document`, median of [`RUNS`] passes over every HTML payload, buffers reused.
//!   Timed in the thread's CPU time (the machine is shared: wall time would measure the
//!   neighbours), as `scripts/bench/web_peers.py` times the peers.
//! * `html_mode_choice`: how alike captures of one page become, and how distinct pages of
//!   one site stay, with `text` and with `main` (the measurement behind
//!   [`DEFAULT_HTML_MODE`](super::super::DEFAULT_HTML_MODE)). Jaccard of 5-word shingle
//!   sets, and Hamming distance of neardup's `simhash-doc` fingerprints. `SHOW_PAIRS=1`
//!   prints every pair of captures, `SHOW_EMPTY=1` every page left without text.

use std::collections::{BTreeMap, HashSet};

/// The calling thread's CPU time, in seconds.
fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec it is given, nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

use neardup_core::{hamming, Fingerprinter, Scheme};

use super::super::*;
use super::samples::{html_pages, samples_dir, Page};

/// Passes over the pages per figure; the median is printed.
const RUNS: usize = 5;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[test]
#[ignore = "a measurement: run by hand with --release --ignored --nocapture"]
fn html_speed() {
    let Some(dir) = samples_dir() else { return };
    let pages = html_pages(&dir);
    let decoded: Vec<String> = pages
        .iter()
        .map(|p| {
            let ct = p.content_type.as_deref().unwrap_or_default();
            decode(&p.bytes, charset_param(ct), true).text
        })
        .collect();
    let html_bytes: usize = decoded.iter().map(String::len).sum();
    let raw_bytes: usize = pages.iter().map(|p| p.bytes.len()).sum();
    println!(
        "{} HTML pages, {:.2} MB as UTF-8 ({:.2} MB as received), median of {RUNS} passes",
        pages.len(),
        html_bytes as f64 / 1e6,
        raw_bytes as f64 / 1e6
    );
    let mut buffer = String::new();
    let mut out = Extracted::default();
    let report = |name: &str, bytes: usize, mut pass: Box<dyn FnMut() -> usize + '_>| {
        let mut seconds = Vec::new();
        let mut produced = 0;
        for _ in 0..RUNS {
            let started = cpu_seconds();
            produced = pass();
            seconds.push(cpu_seconds() - started);
        }
        let s = median(seconds);
        println!(
            "{name:<28} {:>8.1} MB/s {:>8.0} pages/s  ({produced} bytes out)",
            bytes as f64 / s / 1e6,
            pages.len() as f64 / s
        );
    };
    report(
        "decode (charset)",
        raw_bytes,
        Box::new(|| {
            let mut n = 0;
            for p in &pages {
                let ct = p.content_type.as_deref().unwrap_or_default();
                charset::decode_into(&p.bytes, charset_param(ct), true, &mut buffer);
                n += buffer.len();
            }
            n
        }),
    );
    for mode in [HtmlMode::Text, HtmlMode::Main] {
        let mut out = Extracted::default();
        let decoded = &decoded;
        report(
            &format!("extract {}", mode.name()),
            html_bytes,
            Box::new(move || {
                let mut n = 0;
                for html in decoded {
                    extract(html, mode, &mut out);
                    n += out.text.len();
                }
                n
            }),
        );
    }
    for mode in [HtmlMode::Text, HtmlMode::Main] {
        let mut decoded = String::new();
        report(
            &format!("html_document {}", mode.name()),
            raw_bytes,
            Box::new(|| {
                let mut n = 0;
                for p in &pages {
                    html_document_into(
                        &p.bytes,
                        p.content_type.as_deref(),
                        mode,
                        HostTemplate::NONE,
                        &mut decoded,
                        &mut out,
                    );
                    n += out.text.len();
                }
                n
            }),
        );
    }
}

/// The page a capture is of: the archived URL without the Wayback prefix, scheme, `:80`
/// and trailing slash, lower-cased.
fn page_key(url: &str) -> String {
    let mut url = url.to_ascii_lowercase();
    if let Some(rest) = url.strip_prefix("http://web.archive.org/web/") {
        if let Some(at) = rest.find('/') {
            url = rest[at + 1..].to_string();
        }
    }
    for scheme in ["http://", "https://"] {
        if let Some(rest) = url.strip_prefix(scheme) {
            url = rest.to_string();
        }
    }
    url = url.replacen(":80/", "/", 1);
    url.trim_end_matches('/').to_string()
}

fn host(key: &str) -> &str {
    key.split('/').next().unwrap_or_default()
}

/// 5-word shingles of the lower-cased alphanumeric words, hashed.
fn shingles(text: &str) -> HashSet<u64> {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let hasher = BuildHasherDefault::<DefaultHasher>::default();
    if words.len() < 5 {
        return [hasher.hash_one(&words)].into_iter().collect();
    }
    words.windows(5).map(|w| hasher.hash_one(w)).collect()
}

fn jaccard(a: &HashSet<u64>, b: &HashSet<u64>) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        return 1.0;
    }
    a.intersection(b).count() as f64 / union as f64
}

struct Stats {
    pairs: usize,
    jaccard: Vec<f64>,
    hamming: Vec<u32>,
}

impl Stats {
    fn new() -> Stats {
        Stats {
            pairs: 0,
            jaccard: Vec::new(),
            hamming: Vec::new(),
        }
    }

    fn line(&self, name: &str) -> String {
        let n = self.pairs.max(1) as f64;
        let mean_j = self.jaccard.iter().sum::<f64>() / n;
        let min_j = self.jaccard.iter().copied().fold(1.0, f64::min);
        let mean_h = self.hamming.iter().map(|&h| h as f64).sum::<f64>() / n;
        let within3 = self.hamming.iter().filter(|&&h| h <= 3).count();
        let j05 = self.jaccard.iter().filter(|&&j| j >= 0.5).count();
        let equal = self.jaccard.iter().filter(|&&j| j == 1.0).count();
        format!(
            "| {name} | {} | {mean_j:.3} | {min_j:.3} | {j05} | {equal} | {mean_h:.1} | {within3} |",
            self.pairs
        )
    }
}

#[test]
#[ignore = "a measurement: run by hand with --release --ignored --nocapture"]
fn html_mode_choice() {
    let Some(dir) = samples_dir() else { return };
    let pages: Vec<Page> = html_pages(&dir);
    // A page's identity: its URL, or for Wikipedia (whose redirects capture one article
    // under several URLs) the article's title.
    let mut fingerprinter = Fingerprinter::new(Scheme::simhash_doc());
    let mut docs = Vec::new();
    for mode in [HtmlMode::Text, HtmlMode::Main] {
        let mut per_mode = Vec::new();
        for page in &pages {
            let doc = html_document(&page.bytes, page.content_type.as_deref(), mode);
            let key = page_key(&page.url);
            let identity = match (&doc.title, host(&key)) {
                (Some(title), "en.wikipedia.org") => format!("wikipedia:{title}"),
                _ => key.clone(),
            };
            if doc.text.is_empty() && std::env::var_os("SHOW_EMPTY").is_some() {
                eprintln!("{}: no text: {}", mode.name(), page.url);
            }
            let simhash = fingerprinter.fingerprint(&doc.text).simhash;
            per_mode.push((identity, key, shingles(&doc.text), simhash, doc.text.len()));
        }
        docs.push((mode, per_mode));
    }
    println!("| mode, pairs | pairs | mean Jaccard | min Jaccard | J >= 0.5 | J = 1 | mean Hamming | within 3 bits |");
    println!("|---|---|---|---|---|---|---|---|");
    for (mode, per_mode) in &docs {
        let (mut same, mut site, mut other) = (Stats::new(), Stats::new(), Stats::new());
        let mut identical = 0;
        for i in 0..per_mode.len() {
            for j in i + 1..per_mode.len() {
                let (a, b) = (&per_mode[i], &per_mode[j]);
                let stats = if a.0 == b.0 {
                    if pages[i].bytes == pages[j].bytes {
                        identical += 1;
                        continue;
                    }
                    &mut same
                } else if host(&a.1) == host(&b.1) {
                    &mut site
                } else {
                    &mut other
                };
                if a.0 == b.0 && std::env::var_os("SHOW_PAIRS").is_some() {
                    eprintln!(
                        "{} same page {i} {j}: J {:.3} H {} ({} / {} bytes)",
                        mode.name(),
                        jaccard(&a.2, &b.2),
                        hamming(a.3, b.3),
                        a.4,
                        b.4
                    );
                }
                stats.pairs += 1;
                stats.jaccard.push(jaccard(&a.2, &b.2));
                stats.hamming.push(hamming(a.3, b.3));
            }
        }
        let chars: usize = per_mode.iter().map(|d| d.4).sum();
        let empty = per_mode.iter().filter(|d| d.4 == 0).count();
        let short = per_mode.iter().filter(|d| d.4 < 200).count();
        eprintln!(
            "{}: {empty} pages without text, {short} under 200 bytes",
            mode.name()
        );
        println!("{}", same.line(&format!("{} same page", mode.name())));
        println!(
            "{}",
            site.line(&format!("{} same site, other page", mode.name()))
        );
        println!("{}", other.line(&format!("{} other sites", mode.name())));
        eprintln!(
            "{}: {identical} byte-identical pairs left out, {:.2} MB of text",
            mode.name(),
            chars as f64 / 1e6
        );
    }
    // Which pages are captures of one page.
    let mut groups: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (n, d) in docs[0].1.iter().enumerate() {
        groups.entry(&d.0).or_default().push(n);
    }
    for (identity, members) in groups.iter().filter(|(_, m)| m.len() > 1) {
        eprintln!("same page: {identity}: {members:?}");
    }
    assert!(pages.len() > 250);
}
