//! URL duplicates end to end: documents with the same normalized URL are paired with kind
//! `url` whatever their content, in each `--url-normalize` mode, from JSONL with a URL field
//! and from web archives; the kept capture follows `--keep newest`, the default when capture
//! times are known; cross-host content pairs are counted. The expected groups are written
//! out by hand per mode (the oracle), and every run is repeated at 1, 2 and 4 workers.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use arrow::array::{Array, AsArray};
use arrow::datatypes::UInt64Type;
use common::cli::{count, run_ok};
use common::corpus::write;
use common::outputs::{batches, clusters, column, pairs, summary};
use neardup_io::web::testing::{gzip_members, http, warc};
use serde_json::json;

/// Texts far apart from each other (no near pairs between them).
fn text(i: usize) -> String {
    let words = [
        "granite", "harbour", "lantern", "meadow", "orchid", "pepper", "quartz", "saddle",
        "thistle", "umbrella", "velvet", "walnut", "yonder", "zephyr", "anchor", "bramble",
    ];
    (0..60)
        .map(|j| {
            words[(i * 7 + j * (i + 3) + j * j) % words.len()].to_string()
                + &format!("{}", (i * 31 + j) % 97)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `(url, seconds since 1970, text)` of each document, in input order (doc_id = index).
fn corpus() -> Vec<(Option<&'static str>, i64, String)> {
    vec![
        (
            Some("http://www.example.com/page?utm_source=a"),
            1_600_000_000,
            text(0),
        ),
        (
            Some("HTTP://www.EXAMPLE.com:80/page#top"),
            1_700_000_000,
            text(1),
        ),
        (
            Some("http://www.example.com/./page?fbclid=x"),
            1_500_000_000,
            text(2),
        ),
        (Some("https://example.com/page"), 1_400_000_000, text(3)),
        // The same text as document 0 on another host: an exact pair that crosses hosts.
        (Some("http://other.org/copy"), 1_300_000_000, text(0)),
        (Some("not a url"), 1_300_000_000, text(5)),
        (Some("not a url"), 1_300_000_000, text(6)),
        // Empty captures of one URL are never paired by URL.
        (
            Some("http://example.com/empty"),
            1_300_000_000,
            String::new(),
        ),
        (
            Some("http://example.com/empty"),
            1_300_000_000,
            String::new(),
        ),
        (None, 1_300_000_000, text(9)),
        (
            Some("http://example.com/b?b=2&a=1"),
            1_300_000_000,
            text(10),
        ),
        (
            Some("http://example.com/b?a=1&b=2&sid=77"),
            1_300_000_000,
            text(11),
        ),
    ]
}

fn write_jsonl(dir: &Path) -> std::path::PathBuf {
    let mut lines = Vec::new();
    for (i, (url, time, text)) in corpus().into_iter().enumerate() {
        let mut record = json!({"id": format!("d{i}"), "text": text, "time": time});
        if let Some(url) = url {
            record["url"] = json!(url);
        }
        lines.push(record.to_string());
    }
    write(
        &dir.join("pages.jsonl"),
        (lines.join("\n") + "\n").as_bytes(),
    )
}

/// The `url` pairs the oracle expects per mode: each group's later members paired with its
/// first (smallest doc_id).
fn expected_url_pairs(mode: &str) -> BTreeSet<(u64, u64)> {
    let groups: &[&[u64]] = match mode {
        "none" => &[&[5, 6]],
        "standard" => &[&[0, 1, 2], &[10, 11]],
        "aggressive" => &[&[0, 1, 2, 3], &[10, 11]],
        _ => unreachable!(),
    };
    groups
        .iter()
        .flat_map(|g| g[1..].iter().map(move |&d| (g[0], d)))
        .collect()
}

fn url_normalized(out: &Path) -> Vec<(u64, Option<String>)> {
    let mut rows = Vec::new();
    for batch in batches(&out.join("fingerprints")) {
        let doc = column(&batch, "doc_id").as_primitive::<UInt64Type>();
        let url = column(&batch, "url_normalized").as_string::<i32>();
        for i in 0..batch.num_rows() {
            rows.push((
                doc.value(i),
                url.is_valid(i).then(|| url.value(i).to_owned()),
            ));
        }
    }
    rows.sort();
    rows
}

#[test]
fn documents_with_one_normalized_url_are_paired_in_every_mode_at_any_worker_count() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_jsonl(dir.path());
    for mode in ["none", "standard", "aggressive"] {
        let mut first = None;
        for workers in ["1", "2", "4"] {
            let out = dir.path().join(format!("out-{mode}-{workers}"));
            run_ok(
                &out,
                &[
                    "-w",
                    workers,
                    "--url-field",
                    "url",
                    "--time-field",
                    "time",
                    "--url-normalize",
                    mode,
                ],
                &[&input],
            );
            let rows = pairs(&out);
            let url: BTreeSet<(u64, u64)> = rows
                .iter()
                .filter(|p| p.kind == "url")
                .map(|p| (p.doc_a, p.doc_b))
                .collect();
            assert_eq!(url, expected_url_pairs(mode), "{mode} at -w {workers}");
            let content: BTreeSet<(u64, u64, String)> = rows
                .iter()
                .filter(|p| p.kind != "url")
                .map(|p| (p.doc_a, p.doc_b, p.kind.clone()))
                .collect();
            assert_eq!(
                content,
                BTreeSet::from([(0, 4, "exact".to_string())]),
                "{mode}"
            );
            let summary = summary(&out);
            assert_eq!(count(&summary, "url_pairs"), url.len() as u64);
            assert_eq!(
                count(&summary, "cross_host_pairs"),
                1,
                "{mode}: 0 and 4 cross hosts"
            );
            assert_eq!(count(&summary, "pairs"), rows.len() as u64);
            // Capture times are known (--time-field): newest is the default.
            assert_eq!(summary["parameters"]["keep"], "newest");
            let result = (rows, clusters(&out), url_normalized(&out));
            match &first {
                None => first = Some(result),
                Some(f) => assert_eq!(f, &result, "{mode}: -w {workers} differs from -w 1"),
            }
        }
    }
}

#[test]
fn normalized_urls_are_in_fingerprints_and_the_newest_capture_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_jsonl(dir.path());
    let out = dir.path().join("out");
    run_ok(
        &out,
        &["--url-field", "url", "--time-field", "time"],
        &[&input],
    );
    let urls = url_normalized(&out);
    let of = |doc: u64| urls[doc as usize].1.clone();
    assert_eq!(of(0).as_deref(), Some("http://www.example.com/page"));
    assert_eq!(of(1).as_deref(), Some("http://www.example.com/page"));
    assert_eq!(of(3).as_deref(), Some("https://example.com/page"));
    assert_eq!(of(5), None, "not a URL");
    assert_eq!(of(9), None, "no URL");
    assert_eq!(of(11).as_deref(), Some("http://example.com/b?a=1&b=2"));
    // Cluster {0, 1, 2, 4}: document 1 is the newest capture.
    let kept: Vec<u64> = clusters(&out)
        .iter()
        .filter(|c| c.cluster_id >= 0 && c.keep)
        .map(|c| c.doc_id)
        .collect();
    assert!(kept.contains(&1), "{kept:?}");
    assert!(!kept.contains(&0) && !kept.contains(&2) && !kept.contains(&4));
    // Without times, the default stays first.
    let out = dir.path().join("out-untimed");
    run_ok(&out, &["--url-field", "url"], &[&input]);
    assert_eq!(summary(&out)["parameters"]["keep"], "first");
    // An explicit policy wins over the default.
    let out = dir.path().join("out-longest");
    run_ok(
        &out,
        &[
            "--url-field",
            "url",
            "--time-field",
            "time",
            "--keep",
            "longest",
        ],
        &[&input],
    );
    assert_eq!(summary(&out)["parameters"]["keep"], "longest");
}

#[test]
fn archive_captures_of_one_page_are_url_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let page = |i: usize| http(200, "text/plain", text(i).as_bytes());
    let records = vec![
        warc(
            "response",
            Some("http://site.example/a?utm_medium=x"),
            "application/http; msgtype=response",
            &page(20),
        ),
        warc(
            "response",
            Some("http://site.example/b"),
            "application/http; msgtype=response",
            &page(21),
        ),
        warc(
            "response",
            Some("http://SITE.example/a#frag"),
            "application/http; msgtype=response",
            &page(22),
        ),
        // The page of /b again on a mirror host: an exact pair across hosts.
        warc(
            "response",
            Some("http://mirror.example/b"),
            "application/http; msgtype=response",
            &page(21),
        ),
    ];
    let input = write(&dir.path().join("crawl.warc.gz"), &gzip_members(&records));
    let out = dir.path().join("out");
    run_ok(&out, &["--html", "none"], &[&input]);
    let rows = pairs(&out);
    let url: Vec<(u64, u64)> = rows
        .iter()
        .filter(|p| p.kind == "url")
        .map(|p| (p.doc_a, p.doc_b))
        .collect();
    assert_eq!(url, [(0, 2)]);
    let summary = summary(&out);
    assert_eq!(count(&summary, "cross_host_pairs"), 1);
    assert_eq!(
        summary["parameters"]["keep"], "newest",
        "archives know their capture times"
    );
}
