//! URL duplicates end to end: documents with the same normalized URL are paired with kind
//! `url` whatever their content, in each `--url-normalize` mode, from JSONL with a URL field
//! and from web archives; the kept capture follows `--keep newest`, the default when capture
//! times are known; cross-host content pairs are counted. The expected groups are written
//! out by hand per mode (the oracle), and every run is repeated at 1, 2 and 4 workers.

mod common;

use std::collections::{BTreeMap, BTreeSet};
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
    // Components, so that the captures of one URL are one cluster whatever their content.
    run_ok(
        &out,
        &[
            "--url-field",
            "url",
            "--time-field",
            "time",
            "--cluster",
            "components",
        ],
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
    // The default (verified) removes only duplicates: 0 and 4 are one text, and of the
    // captures of 0's URL (1 and 2: other texts) none goes for having the same address.
    let out = dir.path().join("out-verified");
    run_ok(
        &out,
        &["--url-field", "url", "--time-field", "time"],
        &[&input],
    );
    let removed: Vec<u64> = clusters(&out)
        .iter()
        .filter(|c| !c.keep)
        .map(|c| c.doc_id)
        .collect();
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert!(removed[0] == 0 || removed[0] == 4, "{removed:?}");
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

/// A long text, so that an inserted advertisement line leaves it a near duplicate.
fn long_text(i: usize) -> String {
    (0..8)
        .map(|k| text(i * 8 + k + 100))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `(url, text)` of a synthetic crawl: a full mirror under another host and prefix, a near
/// mirror (an advertisement line inserted in every page), a partial mirror (one subtree),
/// URL variants of one page, and unrelated hosts sharing only boilerplate pages.
fn web() -> Vec<(String, String)> {
    let names = [
        "a.html", "b.html", "c/d.html", "c/e.html", "f", "g?x=1", "h/", "i.txt",
    ];
    let mut docs = Vec::new();
    for (i, n) in names.iter().enumerate() {
        docs.push((format!("http://origin.org/{n}"), long_text(i)));
        docs.push((format!("http://mirror.net/pub/origin/{n}"), long_text(i)));
        let ad = "Advertisement: buy widgets now.";
        docs.push((
            format!("http://ads.com/{n}"),
            format!("{ad}\n{}", long_text(i)),
        ));
    }
    for p in 1..=5 {
        docs.push((format!("http://origin.org/sub/p{p}"), long_text(20 + p)));
        docs.push((format!("http://part.io/sub/p{p}"), long_text(20 + p)));
    }
    docs.push(("http://part.io/own/1".into(), long_text(30)));
    docs.push(("http://part.io/own/2".into(), long_text(31)));
    // URL variants of one page (a recrawl).
    docs.push((
        "HTTP://Origin.ORG:80/a.html?utm_source=feed#top".into(),
        long_text(0),
    ));
    for h in 0..6 {
        let host = format!("http://unrelated{h}.com");
        docs.push((
            format!("{host}/robots.txt"),
            "User-agent: * Disallow: /private".into(),
        ));
        docs.push((format!("{host}/"), long_text(40)));
        docs.push((format!("{host}/missing-{h}"), long_text(41)));
        for k in 0..3 {
            docs.push((format!("{host}/own{k}"), long_text(50 + h * 3 + k)));
        }
    }
    docs
}

type MirrorRows = Vec<(
    String,
    String,
    String,
    String,
    u64,
    u64,
    u64,
    u64,
    u64,
    String,
)>;

fn mirror_rows(out: &Path) -> MirrorRows {
    let mut rows = Vec::new();
    for b in batches(&out.join("mirrors")) {
        let s = |name: &str, i: usize| column(&b, name).as_string::<i32>().value(i).to_owned();
        let u = |name: &str, i: usize| column(&b, name).as_primitive::<UInt64Type>().value(i);
        for i in 0..b.num_rows() {
            rows.push((
                s("host_a", i),
                s("prefix_a", i),
                s("host_b", i),
                s("prefix_b", i),
                u("shared_paths", i),
                u("paths_a", i),
                u("paths_b", i),
                u("identical_paths", i),
                u("near_paths", i),
                s("verdict", i),
            ));
        }
    }
    rows.sort();
    rows
}

/// The brute-force oracle over (host, path, content) sets: every two pages on different
/// hosts with the same content (the same cluster of the run, or the same document),
/// prefixes from their common path suffix, paths under a prefix counted by scanning.
fn oracle(pages: &[(String, String, i64, String)], min_paths: u64, min_share: f64) -> MirrorRows {
    let mut support: BTreeMap<(String, String, String, String), BTreeMap<String, bool>> =
        BTreeMap::new();
    for (ha, pa, ca, ta) in pages {
        for (hb, pb, cb, tb) in pages {
            if ha >= hb || ca != cb {
                continue;
            }
            let (mut sa, mut sb): (Vec<&str>, Vec<&str>) = (
                pa.split('/').skip(1).collect(),
                pb.split('/').skip(1).collect(),
            );
            let mut rel = Vec::new();
            while let (Some(x), Some(y)) = (sa.last(), sb.last()) {
                if x != y {
                    break;
                }
                rel.insert(0, *x);
                sa.pop();
                sb.pop();
            }
            if rel.is_empty() {
                continue;
            }
            let prefix =
                |s: &[&str]| format!("/{}", s.iter().map(|x| format!("{x}/")).collect::<String>());
            *support
                .entry((ha.clone(), prefix(&sa), hb.clone(), prefix(&sb)))
                .or_default()
                .entry(rel.join("/"))
                .or_default() |= ta == tb;
        }
    }
    let under = |host: &str, prefix: &str| {
        pages
            .iter()
            .filter(|(h, p, _, _)| h == host && p.starts_with(prefix))
            .map(|(_, p, _, _)| p)
            .collect::<BTreeSet<_>>()
            .len() as u64
    };
    let mut rows = Vec::new();
    for ((ha, pa, hb, pb), rels) in support {
        let shared = rels.len() as u64;
        let identical = rels.values().filter(|&&i| i).count() as u64;
        let (na, nb) = (under(&ha, &pa), under(&hb, &pb));
        let (a, b) = (
            shared as f64 / na as f64 >= min_share,
            shared as f64 / nb as f64 >= min_share,
        );
        if shared < min_paths || !(a || b) {
            continue;
        }
        let verdict = if a && b { "mirror" } else { "partial" };
        rows.push((
            ha,
            pa,
            hb,
            pb,
            shared,
            na,
            nb,
            identical,
            shared - identical,
            verdict.to_string(),
        ));
    }
    rows
}

#[test]
fn mirror_hosts_match_the_oracle_at_any_worker_count() {
    let dir = tempfile::tempdir().unwrap();
    let docs = web();
    let lines: Vec<String> = docs
        .iter()
        .enumerate()
        .map(|(i, (url, text))| {
            json!({"id": format!("p{i}"), "text": text, "url": url}).to_string()
        })
        .collect();
    let input = write(
        &dir.path().join("web.jsonl"),
        (lines.join("\n") + "\n").as_bytes(),
    );
    let mut first = None;
    for workers in ["1", "2", "4"] {
        let out = dir.path().join(format!("out-{workers}"));
        run_ok(&out, &["-w", workers, "--url-field", "url"], &[&input]);
        let got = mirror_rows(&out);
        // The oracle's content: the run's clusters (a document in none is its own).
        let cluster: BTreeMap<u64, i64> = clusters(&out)
            .iter()
            .map(|c| (c.doc_id, c.cluster_id))
            .collect();
        let urls = url_normalized(&out);
        let pages: Vec<(String, String, i64, String)> = urls
            .iter()
            .map(|(doc, url)| {
                // Every URL of this corpus normalizes to http://HOST/PATH.
                let rest = url.as_deref().unwrap().strip_prefix("http://").unwrap();
                let (host, path) = rest.split_at(rest.find('/').unwrap());
                let c = match cluster[doc] {
                    -1 => -1 - *doc as i64,
                    c => c,
                };
                (
                    host.to_owned(),
                    path.to_owned(),
                    c,
                    docs[*doc as usize].1.clone(),
                )
            })
            .collect();
        assert_eq!(got, oracle(&pages, 5, 0.5), "-w {workers}");
        // And what the oracle should find, by hand: no unrelated host is reported.
        let found: Vec<(&str, &str, &str, &str, u64, u64, &str)> = got
            .iter()
            .map(|r| {
                (
                    r.0.as_str(),
                    r.1.as_str(),
                    r.2.as_str(),
                    r.3.as_str(),
                    r.7,
                    r.8,
                    r.9.as_str(),
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                ("ads.com", "/", "mirror.net", "/pub/origin/", 0, 8, "mirror"),
                ("ads.com", "/", "origin.org", "/", 0, 8, "mirror"),
                (
                    "mirror.net",
                    "/pub/origin/",
                    "origin.org",
                    "/",
                    8,
                    0,
                    "mirror"
                ),
                ("origin.org", "/", "part.io", "/", 5, 0, "partial"),
            ],
            "-w {workers}"
        );
        let s = summary(&out);
        assert_eq!(count(&s, "mirrors"), 3);
        assert_eq!(count(&s, "partial_mirrors"), 1);
        assert_eq!(count(&s, "hosts"), 10);
        let hosts = host_rows(&out);
        let canonical: BTreeMap<&str, (&str, u64)> = hosts
            .iter()
            .map(|h| (h.0.as_str(), (h.3.as_str(), h.4)))
            .collect();
        assert_eq!(canonical["ads.com"], ("origin.org", 3));
        assert_eq!(canonical["mirror.net"], ("origin.org", 3));
        assert_eq!(canonical["origin.org"], ("origin.org", 3));
        assert_eq!(canonical["part.io"], ("part.io", 1));
        assert_eq!(canonical["unrelated0.com"], ("unrelated0.com", 1));
        // origin.org: 8 pages, 5 in /sub/, and the recrawl of a.html.
        assert_eq!(
            (
                hosts.iter().find(|h| h.0 == "origin.org").unwrap().1,
                hosts.iter().find(|h| h.0 == "origin.org").unwrap().2
            ),
            (14, 13)
        );
        let result = (got, hosts);
        match &first {
            None => first = Some(result),
            Some(f) => assert_eq!(f, &result, "-w {workers} differs from -w 1"),
        }
    }
}

fn host_rows(out: &Path) -> Vec<(String, u64, u64, String, u64)> {
    let mut rows = Vec::new();
    for b in batches(&out.join("hosts")) {
        let s = |name: &str, i: usize| column(&b, name).as_string::<i32>().value(i).to_owned();
        let u = |name: &str, i: usize| column(&b, name).as_primitive::<UInt64Type>().value(i);
        for i in 0..b.num_rows() {
            rows.push((
                s("host", i),
                u("documents", i),
                u("paths", i),
                s("canonical_host", i),
                u("group_size", i),
            ));
        }
    }
    rows.sort();
    rows
}

/// The same situations built from real pages: the texts of the archive samples'
/// documents (`neardup extract`), served again by made-up hosts in a WARC built here.
#[test]
fn mirrors_of_real_pages_in_an_archive() {
    let Some(samples) = common::shared::shared_corpus("web-archive-samples") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sample = samples.join("sample-input__topic-1__topic-1--20201003083220753-00000.warc.gz");
    let extracted = dir.path().join("extracted");
    let output = common::cli::neardup()
        .args([
            "extract",
            "--output",
            common::s(&extracted),
            common::s(&sample),
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Distinct real texts of some length, in file order.
    let mut texts: Vec<String> = Vec::new();
    for b in batches(&extracted.join("documents")) {
        let text = column(&b, "text").as_string::<i32>();
        for i in 0..b.num_rows() {
            let t = text.value(i);
            // Long enough that one inserted line keeps a page within k = 3 bits.
            if t.len() > 4000 && !texts.iter().any(|x| x == t) {
                texts.push(t.to_owned());
            }
        }
    }
    assert!(texts.len() >= 16, "only {} real pages", texts.len());
    let mut pages: Vec<(String, String)> = Vec::new();
    for (k, t) in texts[..12].iter().enumerate() {
        pages.push((format!("http://origin.example/p{k}.html"), t.clone()));
        pages.push((
            format!("http://copy.example/mirror/origin/p{k}.html"),
            t.clone(),
        ));
        let ad = "Advertisement: buy widgets now.";
        pages.push((
            format!("http://ads.example/p{k}.html"),
            format!("{ad}\n{t}"),
        ));
        if k < 5 {
            pages.push((format!("http://part.example/p{k}.html"), t.clone()));
        }
    }
    pages.push((
        "HTTP://ORIGIN.example:80/p0.html?utm_source=x".into(),
        texts[0].clone(),
    ));
    for h in 0..4 {
        let host = format!("http://parked{h}.example");
        pages.push((
            format!("{host}/robots.txt"),
            "User-agent: *\nDisallow: /".into(),
        ));
        pages.push((format!("{host}/"), texts[12].clone()));
        pages.push((
            format!("{host}/own.html"),
            texts[13 + h % 3].clone() + &format!(" {h}"),
        ));
    }
    let records: Vec<Vec<u8>> = pages
        .iter()
        .map(|(url, text)| {
            warc(
                "response",
                Some(url),
                "application/http; msgtype=response",
                &http(200, "text/plain; charset=utf-8", text.as_bytes()),
            )
        })
        .collect();
    let input = write(&dir.path().join("web.warc.gz"), &gzip_members(&records));
    let mut first = None;
    for workers in ["1", "2", "4"] {
        let out = dir.path().join(format!("out-{workers}"));
        // MinHash: one inserted line in a real page moves its simhash by about 4 of 64
        // bits (too many for k = 3 half the time), its shingle Jaccard by 1%.
        let args = [
            "-w",
            workers,
            "--html",
            "none",
            "--method",
            "minhash",
            "--threshold",
            "0.8",
        ];
        run_ok(&out, &args, &[&input]);
        let got = mirror_rows(&out);
        let cluster: BTreeMap<u64, i64> = clusters(&out)
            .iter()
            .map(|c| (c.doc_id, c.cluster_id))
            .collect();
        let oracle_pages: Vec<(String, String, i64, String)> = url_normalized(&out)
            .iter()
            .map(|(doc, url)| {
                let rest = url.as_deref().unwrap().strip_prefix("http://").unwrap();
                let (host, path) = rest.split_at(rest.find('/').unwrap());
                let c = match cluster[doc] {
                    -1 => -1 - *doc as i64,
                    c => c,
                };
                (
                    host.to_owned(),
                    path.to_owned(),
                    c,
                    pages[(*doc & ((1 << 40) - 1)) as usize].1.clone(),
                )
            })
            .collect();
        assert_eq!(got, oracle(&oracle_pages, 5, 0.5), "-w {workers}");
        let relations: Vec<(&str, &str, &str, &str, &str)> = got
            .iter()
            .map(|r| {
                (
                    r.0.as_str(),
                    r.1.as_str(),
                    r.2.as_str(),
                    r.3.as_str(),
                    r.9.as_str(),
                )
            })
            .collect();
        assert_eq!(
            relations,
            [
                (
                    "ads.example",
                    "/",
                    "copy.example",
                    "/mirror/origin/",
                    "mirror"
                ),
                ("ads.example", "/", "origin.example", "/", "mirror"),
                ("ads.example", "/", "part.example", "/", "partial"),
                (
                    "copy.example",
                    "/mirror/origin/",
                    "origin.example",
                    "/",
                    "mirror"
                ),
                // part.example copies pages that copy.example copies too.
                (
                    "copy.example",
                    "/mirror/origin/",
                    "part.example",
                    "/",
                    "partial"
                ),
                ("origin.example", "/", "part.example", "/", "partial"),
            ],
            "-w {workers}"
        );
        // The advertisement line makes the ads.example copies near, not identical.
        assert!(got
            .iter()
            .filter(|r| r.0 == "ads.example")
            .all(|r| r.7 == 0 && r.8 >= 5));
        match &first {
            None => first = Some(got),
            Some(f) => assert_eq!(f, &got, "-w {workers} differs from -w 1"),
        }
    }
}

/// The host of each document's normalized URL (every URL of `web()` has one).
fn hosts_of(out: &Path) -> BTreeMap<u64, String> {
    url_normalized(out)
        .into_iter()
        .map(|(doc, url)| {
            let rest = url.unwrap().strip_prefix("http://").unwrap().to_owned();
            (doc, rest[..rest.find('/').unwrap()].to_owned())
        })
        .collect()
}

/// The kept documents of a run's clusters/ (of clusters of two or more).
fn kept(out: &Path) -> BTreeSet<u64> {
    clusters(out)
        .iter()
        .filter(|c| c.cluster_id >= 0 && c.keep)
        .map(|c| c.doc_id)
        .collect()
}

/// The oracle of `--keep canonical-host`, recomputed from the run's clusters/, the
/// documents' hosts and hosts/: in each cluster, the smallest `(on a mirroring host, inner
/// rank, doc_id)`, a mirroring host being one whose canonical host is another. Returns the
/// kept documents and how many clusters' kept document differs from the inner policy's.
fn oracle_keep(out: &Path, inner: impl Fn(u64) -> i64) -> (BTreeSet<u64>, u64) {
    let hosts = hosts_of(out);
    let mirroring: BTreeSet<String> = host_rows(out)
        .into_iter()
        .filter(|h| h.0 != h.3)
        .map(|h| h.0)
        .collect();
    let mut members: BTreeMap<i64, Vec<u64>> = BTreeMap::new();
    for c in clusters(out).iter().filter(|c| c.cluster_id >= 0) {
        members.entry(c.cluster_id).or_default().push(c.doc_id);
    }
    let (mut keep, mut moved) = (BTreeSet::new(), 0);
    for docs in members.values() {
        let by_inner = *docs.iter().min_by_key(|&&d| (inner(d), d)).unwrap();
        let best = *docs
            .iter()
            .min_by_key(|&&d| (mirroring.contains(&hosts[&d]), inner(d), d))
            .unwrap();
        keep.insert(best);
        moved += u64::from(best != by_inner);
    }
    (keep, moved)
}

#[test]
fn keep_canonical_host_keeps_the_copy_on_the_mirror_groups_canonical_host() {
    let dir = tempfile::tempdir().unwrap();
    // In reverse order, the first copy of every mirrored page is on a mirroring host
    // (ads.com), except a.html's: its recrawl on origin.org comes first.
    let docs: Vec<(String, String)> = web().into_iter().rev().collect();
    let time = |i: u64| 1_600_000_000 + ((i * 7919) % 101) as i64 * 1000;
    let lines: Vec<String> = docs
        .iter()
        .enumerate()
        .map(|(i, (url, text))| {
            json!({"id": format!("p{i}"), "text": text, "url": url, "time": time(i as u64)})
                .to_string()
        })
        .collect();
    let input = write(
        &dir.path().join("web.jsonl"),
        (lines.join("\n") + "\n").as_bytes(),
    );
    let mut first = None;
    for workers in ["1", "2", "4"] {
        // Without capture times the inner policy is first.
        let out = dir.path().join(format!("out-{workers}"));
        let args = [
            "-w",
            workers,
            "--url-field",
            "url",
            "--keep",
            "canonical-host",
        ];
        run_ok(&out, &args, &[&input]);
        let s = summary(&out);
        assert_eq!(s["parameters"]["keep"], "canonical-host:first");
        let (expected, moved) = oracle_keep(&out, |_| 0);
        assert_eq!(kept(&out), expected, "-w {workers}");
        assert_eq!(count(&s, "keep_moved_to_canonical_host"), moved);
        // By hand: the 8 clusters within the mirror group keep their origin.org copy (7 of
        // them moved off ads.com); part.io is in no group, so /sub/ keeps its first copies,
        // there.
        let hosts = hosts_of(&out);
        let on = |host: &str| kept(&out).iter().filter(|d| hosts[d] == host).count();
        assert_eq!(
            (
                on("origin.org"),
                on("ads.com"),
                on("mirror.net"),
                on("part.io")
            ),
            (8, 0, 0, 5)
        );
        assert_eq!(moved, 7);
        // With capture times, the default inner policy is newest.
        let timed = dir.path().join(format!("timed-{workers}"));
        let args = [
            "-w",
            workers,
            "--url-field",
            "url",
            "--time-field",
            "time",
            "--keep",
            "canonical-host",
        ];
        run_ok(&timed, &args, &[&input]);
        let s = summary(&timed);
        assert_eq!(s["parameters"]["keep"], "canonical-host:newest");
        let (expected, moved) = oracle_keep(&timed, |d| -time(d));
        assert_eq!(kept(&timed), expected, "newest, -w {workers}");
        assert_eq!(count(&s, "keep_moved_to_canonical_host"), moved);
        assert!(moved > 0, "newest picks some mirroring copies");
        // The clusters themselves are those of any other policy.
        let ids = |out: &Path| -> Vec<(u64, i64)> {
            clusters(out)
                .iter()
                .map(|c| (c.doc_id, c.cluster_id))
                .collect()
        };
        assert_eq!(ids(&out), ids(&timed));
        let result = (clusters(&out), clusters(&timed), host_rows(&out));
        match &first {
            None => first = Some(result),
            Some(f) => assert_eq!(f, &result, "-w {workers} differs from -w 1"),
        }
    }
    // The control: under first, 7 clusters keep their ads.com copy.
    let control = dir.path().join("first");
    run_ok(
        &control,
        &["--url-field", "url", "--keep", "first"],
        &[&input],
    );
    let hosts = hosts_of(&control);
    let on_ads = kept(&control)
        .iter()
        .filter(|d| hosts[d] == "ads.com")
        .count();
    assert_eq!(on_ads, 7);
    assert_eq!(count(&summary(&control), "keep_moved_to_canonical_host"), 0);
    // Without URLs there are no mirror groups: refused before anything is read.
    let out = dir.path().join("no-urls");
    let mut cmd = common::cli::neardup();
    cmd.args(["run", "--keep", "canonical-host", "--output"])
        .args([common::s(&out), common::s(&input)]);
    common::cli::assert_fails(
        &mut cmd,
        &out,
        &["--keep canonical-host:first needs the documents' URLs: web archives, or --url-field for JSONL and Parquet"],
    );
}

/// `--against`: the batch's own pairs are in `against-pairs.parquet` as a run of the batch
/// alone lists them (numbered after the index's documents), a pair of one URL as `url`.
#[test]
fn against_an_index_the_batchs_url_pairs_stay_url_pairs() {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let dir = tempfile::tempdir().unwrap();
    let input = write_jsonl(dir.path());
    let args = [
        "--url-field",
        "url",
        "--time-field",
        "time",
        "--url-normalize",
        "standard",
    ];
    // The index holds the same pages from another file (an index that holds the batch's own
    // file holds the batch already, and compares it with the index before it).
    let copy = dir.path().join("copy.jsonl");
    std::fs::copy(&input, &copy).unwrap();
    let index = dir.path().join("index");
    let index_arg = index.to_str().unwrap();
    run_ok(
        &dir.path().join("indexed"),
        &[&args[..], &["--index", index_arg]].concat(),
        &[&copy],
    );
    let alone = dir.path().join("alone");
    run_ok(&alone, &args, &[&input]);
    let out = dir.path().join("against");
    run_ok(
        &out,
        &[&args[..], &["--against", index_arg]].concat(),
        &[&input],
    );
    // The batch's numbers come after those of the one indexed file.
    let shift = 1u64 << 40;
    let expected: BTreeSet<(u64, u64, String)> = pairs(&alone)
        .into_iter()
        .map(|p| (p.doc_a + shift, p.doc_b + shift, p.kind))
        .collect();
    let kinds: BTreeSet<&str> = expected.iter().map(|p| p.2.as_str()).collect();
    assert_eq!(kinds, BTreeSet::from(["exact", "url"]), "{expected:?}");
    let file = std::fs::File::open(out.join("against-pairs.parquet")).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let mut found = BTreeSet::new();
    for b in reader.build().unwrap() {
        let b = b.unwrap();
        let a = column(&b, "doc_a").as_primitive::<UInt64Type>();
        let c = column(&b, "doc_b").as_primitive::<UInt64Type>();
        let kind = column(&b, "kind").as_string::<i32>();
        for i in 0..b.num_rows() {
            if a.value(i) >= shift {
                found.insert((a.value(i), c.value(i), kind.value(i).to_string()));
            }
        }
    }
    assert_eq!(found, expected);
}
