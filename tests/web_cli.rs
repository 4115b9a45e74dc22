//! Web archives end to end: the real samples against independent readers (warcio for WARC,
//! a from-scratch ARC parser here), the record's place in its file, and every kind of bad
//! archive input the issue lists.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{TimestampMicrosecondType, UInt64Type};
use common::cli::{assert_refused, count, neardup, run_ok};
use common::corpus::write;
use common::outputs::{batches, column, summary};
use common::s;
use common::shared::shared_corpus;
use neardup_io::web::testing::{gzip_members, http, warc};

/// One document row of `fingerprints/`: (source, record) -> (url, fetched_at, offset, length).
type Docs = BTreeMap<(String, u64), (Option<String>, Option<i64>, Option<u64>, Option<u64>)>;

fn documents(out: &Path) -> Docs {
    let mut docs = Docs::new();
    for batch in batches(&out.join("fingerprints")) {
        let source = column(&batch, "source").as_string::<i32>();
        let record = column(&batch, "record").as_primitive::<UInt64Type>();
        let url = column(&batch, "url").as_string::<i32>();
        let at = column(&batch, "fetched_at").as_primitive::<TimestampMicrosecondType>();
        let offset = column(&batch, "offset").as_primitive::<UInt64Type>();
        let length = column(&batch, "length").as_primitive::<UInt64Type>();
        for i in 0..batch.num_rows() {
            let file = Path::new(source.value(i)).file_name().unwrap();
            docs.insert(
                (file.to_string_lossy().into_owned(), record.value(i)),
                (
                    url.is_valid(i).then(|| url.value(i).to_owned()),
                    at.is_valid(i).then(|| at.value(i)),
                    offset.is_valid(i).then(|| offset.value(i)),
                    length.is_valid(i).then(|| length.value(i)),
                ),
            );
        }
    }
    docs
}

fn skipped_total(summary: &serde_json::Value) -> u64 {
    summary["counts"]["skipped_records"]
        .as_object()
        .map_or(0, |m| m.values().map(|v| v.as_u64().unwrap()).sum())
}

/// The Python that has warcio (scripts/test.sh installs it into .venv-test).
fn python_with_warcio() -> String {
    let python = std::env::var("NEARDUP_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = StdCommand::new(&python)
        .args(["-c", "import warcio"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "this test compares with warcio: run `bash scripts/test.sh` (it installs warcio into \
         .venv-test and sets NEARDUP_PYTHON), or set NEARDUP_PYTHON to a Python with warcio"
    );
    python
}

/// A record of an ARC file as a from-scratch reading gives it: (url, date, block).
fn arc_oracle(bytes: &[u8]) -> Vec<(String, String, Vec<u8>, u64)> {
    let mut records = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        while pos < bytes.len() && (bytes[pos] == b'\n' || bytes[pos] == b'\r') {
            pos += 1;
        }
        if pos >= bytes.len() {
            break;
        }
        let start = pos as u64;
        let eol = pos + bytes[pos..].iter().position(|&b| b == b'\n').unwrap();
        let line = String::from_utf8_lossy(&bytes[pos..eol]).into_owned();
        let fields: Vec<&str> = line.split_whitespace().collect();
        let n: usize = fields.last().unwrap().parse().unwrap();
        records.push((
            fields[0].to_owned(),
            fields[2].to_owned(),
            bytes[eol + 1..eol + 1 + n].to_vec(),
            start,
        ));
        pos = eol + 1 + n;
    }
    records
}

/// The HTTP status of a block that begins with an HTTP head.
fn status_of(block: &[u8]) -> Option<u16> {
    if !block[..5.min(block.len())].eq_ignore_ascii_case(b"HTTP/") {
        return None;
    }
    let line =
        String::from_utf8_lossy(&block[..block.iter().position(|&b| b == b'\n')?]).into_owned();
    line.split_whitespace().nth(1)?.parse().ok()
}

fn text_type(content_type: &str) -> bool {
    let media = content_type
        .split(';')
        .next()
        .unwrap()
        .trim()
        .to_ascii_lowercase();
    ["text/html", "application/xhtml+xml", "text/plain"].contains(&media.as_str())
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

#[test]
fn the_archive_samples_match_warcio_and_a_from_scratch_arc_reading() {
    let Some(samples) = shared_corpus("web-archive-samples") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    run_ok(&out, &[], &[&samples]);
    let docs = documents(&out);
    let summary = summary(&out);

    let mut files: Vec<PathBuf> = std::fs::read_dir(&samples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "gz" || e == "arc"))
        .collect();
    files.sort();
    let (warcs, arcs): (Vec<_>, Vec<_>) = files.iter().partition(|p| s(p).ends_with(".warc.gz"));
    assert_eq!((warcs.len(), arcs.len()), (2, 2));

    // WARC: the documents are exactly warcio's page captures, with warcio's URLs.
    let python = python_with_warcio();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/warcio_records.py");
    let listed = StdCommand::new(&python)
        .arg(&script)
        .args(warcs.iter().map(|p| s(p)))
        .output()
        .unwrap();
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let records: Vec<serde_json::Value> = serde_json::from_slice(&listed.stdout).unwrap();
    let mut want = BTreeSet::new();
    let mut all_records = records.len() as u64;
    for r in &records {
        let kind = r["type"].as_str().unwrap();
        let ctype = r["content_type"].as_str().unwrap_or("");
        // warcio reads a first line as a status line even where the archive left the HTTP
        // head out; only a three-digit status is one.
        let status = r["status"]
            .as_str()
            .filter(|s| s.len() == 3)
            .and_then(|s| s.parse::<u16>().ok());
        let page = ["response", "resource", "conversion"].contains(&kind)
            && text_type(ctype)
            && status.is_none_or(|s| (200..300).contains(&s));
        if page {
            let file = Path::new(r["file"].as_str().unwrap()).file_name().unwrap();
            want.insert((
                (
                    file.to_string_lossy().into_owned(),
                    r["n"].as_u64().unwrap(),
                ),
                r["url"].as_str().map(str::to_owned),
            ));
        }
    }
    let got: BTreeSet<_> = docs
        .iter()
        .filter(|((f, _), _)| f.ends_with(".warc.gz"))
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    assert_eq!(got.len(), 360, "documents of the two WARC files");
    assert_eq!(got, want, "WARC documents and URLs against warcio");

    // ARC: against a from-scratch reading of the format.
    for path in &arcs {
        let bytes = std::fs::read(path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let records = arc_oracle(&bytes);
        all_records += records.len() as u64;
        let mut pages = 0;
        for (n, (url, date, block, start)) in records.iter().enumerate() {
            let head_end = block.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0);
            let head = String::from_utf8_lossy(&block[..head_end]).to_ascii_lowercase();
            let ctype = head
                .lines()
                .find_map(|l| l.strip_prefix("content-type:"))
                .unwrap_or("");
            let page = !url.starts_with("filedesc:")
                && status_of(block).is_some_and(|s| (200..300).contains(&s))
                && text_type(ctype);
            let got = docs.get(&(name.clone(), n as u64));
            if !page {
                assert!(got.is_none(), "{name} record {n} ({url}) is not a page");
                continue;
            }
            pages += 1;
            let (got_url, at, offset, length) =
                got.unwrap_or_else(|| panic!("{name} record {n} ({url})"));
            assert_eq!(got_url.as_deref(), Some(url.as_str()));
            assert_eq!(*offset, Some(*start), "{name} record {n}: offset");
            // The record cut out of the file begins with its own header line.
            let cut = &bytes[offset.unwrap() as usize..][..length.unwrap() as usize];
            assert!(cut.starts_with(format!("{url} ").as_bytes()));
            // 14 digits of UTC time; 2008-05-09 19:02:41 is 1210359761 s (Python's
            // calendar.timegm), the first page of the first file.
            if date == "20080509190241" {
                assert_eq!(*at, Some(1_210_359_761_000_000));
            }
            assert!(at.is_some());
        }
        assert!(pages > 0);
    }
    assert_eq!(
        all_records,
        count(&summary, "documents") + skipped_total(&summary),
        "every record is a document or a counted skip: {}",
        summary["counts"]["skipped_records"]
    );

    // A WARC record's offset and length cut its gzip member out of the file.
    for ((file, n), (url, _, offset, length)) in
        docs.iter().filter(|((f, _), _)| f.ends_with(".warc.gz"))
    {
        let bytes = std::fs::read(samples.join(file)).unwrap();
        let member = &bytes[offset.unwrap() as usize..][..length.unwrap() as usize];
        let record = gunzip(member);
        assert!(record.starts_with(b"WARC/1.0\r\n"), "{file} record {n}");
        let uri = format!("WARC-Target-URI: {}\r\n", url.as_ref().unwrap());
        assert!(
            record.windows(uri.len()).any(|w| w == uri.as_bytes()),
            "{file} record {n}"
        );
    }
}

/// Three responses, one gzip member each, after a warcinfo record.
fn three_pages() -> Vec<Vec<u8>> {
    vec![
        warc(
            "warcinfo",
            None,
            "application/warc-fields",
            b"software: test\r\n",
        ),
        warc(
            "response",
            Some("http://a.example/"),
            "application/http; msgtype=response",
            &http(
                200,
                "text/plain",
                b"the first page, about apples and pears and plums",
            ),
        ),
        warc(
            "response",
            Some("http://b.example/"),
            "application/http; msgtype=response",
            &http(
                200,
                "text/plain",
                b"the second page, about boats and rivers and seas",
            ),
        ),
        warc(
            "response",
            Some("http://c.example/"),
            "application/http; msgtype=response",
            &http(
                200,
                "text/plain",
                b"the third page, about clocks and towers and bells",
            ),
        ),
    ]
}

#[test]
fn a_damaged_gzip_member_is_an_error_at_its_offset_or_a_counted_skip() {
    let dir = tempfile::tempdir().unwrap();
    let records = three_pages();
    let members: Vec<Vec<u8>> = records
        .iter()
        .map(|r| gzip_members(std::slice::from_ref(r)))
        .collect();
    let damaged_at: usize = members[..2].iter().map(Vec::len).sum();
    let mut bytes = members.concat();
    // Flip bytes inside the deflate data of the third member (record 2).
    for b in &mut bytes[damaged_at + 12..damaged_at + 20] {
        *b ^= 0x5a;
    }
    let path = write(&dir.path().join("crawl.warc.gz"), &bytes);
    let out = dir.path().join("out");
    let mut cmd = neardup();
    cmd.args(["run", "--output", s(&out), s(&path)]);
    assert_refused(
        &mut cmd,
        &[&format!(
            "{}: record 2: byte {damaged_at}: gzip data is truncated or corrupt",
            path.display()
        )],
    );
    assert!(!out.join("_SUCCESS").exists());

    let out = dir.path().join("lenient");
    run_ok(&out, &["--skip-invalid"], &[&path]);
    let summary = summary(&out);
    assert_eq!(count(&summary, "skipped"), 1, "{summary}");
    let urls: BTreeSet<_> = documents(&out).into_values().filter_map(|d| d.0).collect();
    assert_eq!(
        urls,
        ["http://a.example/", "http://c.example/"]
            .map(String::from)
            .into(),
        "reading resumes at the next member"
    );
}

#[test]
fn an_archive_cut_short_names_the_file_and_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let records = three_pages();
    // Uncompressed: the last record's Content-Length runs past the end of the file.
    let mut bytes = records.concat();
    let last_start = bytes.len() - records[3].len();
    bytes.truncate(bytes.len() - 30);
    let path = write(&dir.path().join("cut.warc"), &bytes);
    let mut cmd = neardup();
    cmd.args(["run", "--output", s(&dir.path().join("o1")), s(&path)]);
    assert_refused(
        &mut cmd,
        &[
            &format!(
                "{}: record 3: byte {last_start}: Content-Length",
                path.display()
            ),
            "runs past the end of the file",
        ],
    );
    // Gzip: the last member is cut.
    let mut bytes = gzip_members(&records);
    let last = gzip_members(&records[3..]).len();
    let last_start = bytes.len() - last;
    bytes.truncate(bytes.len() - 10);
    let path = write(&dir.path().join("cut.warc.gz"), &bytes);
    let mut cmd = neardup();
    cmd.args(["run", "--output", s(&dir.path().join("o2")), s(&path)]);
    assert_refused(
        &mut cmd,
        &[&format!(
            "{}: record 3: byte {last_start}: gzip data is truncated or corrupt",
            path.display()
        )],
    );
}

#[test]
fn malformed_headers_are_errors_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let good = warc("warcinfo", None, "application/warc-fields", b"x: y\r\n");
    let cases: [(&str, Vec<u8>, &str); 4] = [
        (
            "no-colon.warc",
            b"WARC/1.0\r\nWARC-Type response\r\nContent-Length: 0\r\n\r\n\r\n\r\n".to_vec(),
            "a WARC header line without a colon",
        ),
        (
            "not-warc.warc",
            b"<html>hello</html>\r\n".to_vec(),
            "expected a WARC record",
        ),
        (
            "bad-length.warc",
            b"WARC/1.0\r\nWARC-Type: response\r\nContent-Length: lots\r\n\r\n".to_vec(),
            "Content-Length \"lots\" is not a number",
        ),
        (
            "bad-http.warc",
            warc(
                "response",
                Some("http://x.example/"),
                "application/http; msgtype=response",
                b"HTTP/1.1 2x0 OK\r\nContent-Type: text/html\r\n\r\n<p>x",
            ),
            "malformed HTTP head",
        ),
    ];
    for (name, body, needle) in cases {
        let mut bytes = good.clone();
        bytes.extend_from_slice(&body);
        let path = write(&dir.path().join(name), &bytes);
        let mut cmd = neardup();
        cmd.args([
            "run",
            "--output",
            s(&dir.path().join(format!("out-{name}"))),
            s(&path),
        ]);
        let at = good.len();
        assert_refused(
            &mut cmd,
            &[
                &format!("{}: record 1: byte {at}: ", path.display()),
                needle,
            ],
        );
    }
}

#[test]
fn records_that_are_not_pages_are_counted_by_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut png = vec![0x89, b'P', b'N', b'G', 0, 0, 0, 13];
    png.extend(std::iter::repeat_n(0u8, 200));
    let records = vec![
        warc("warcinfo", None, "application/warc-fields", b"x: y\r\n"),
        warc(
            "request",
            Some("http://a.example/"),
            "application/http; msgtype=request",
            b"GET / HTTP/1.1\r\n\r\n",
        ),
        warc(
            "response",
            Some("http://a.example/"),
            "application/http; msgtype=response",
            &http(200, "text/html", b"<p>kept page</p>"),
        ),
        warc(
            "response",
            Some("http://a.example/old"),
            "application/http; msgtype=response",
            &http(301, "text/html", b"moved"),
        ),
        warc(
            "response",
            Some("http://a.example/x.png"),
            "application/http; msgtype=response",
            &http(200, "image/png", &png),
        ),
        warc(
            "response",
            Some("http://a.example/lie"),
            "application/http; msgtype=response",
            &http(200, "text/html", &png),
        ),
        warc(
            "revisit",
            Some("http://a.example/"),
            "application/http; msgtype=response",
            b"",
        ),
        warc(
            "resource",
            Some("http://a.example/notes.txt"),
            "text/plain",
            b"kept notes",
        ),
        // GNU Wget's own files: a crawler's metadata, not pages.
        warc(
            "resource",
            Some("metadata://gnu.org/software/wget/warc/wget_arguments.txt"),
            "text/plain",
            b"\"--warc-file=crawl\" \"--recursive\" ",
        ),
        warc(
            "resource",
            Some("<metadata://gnu.org/software/wget/warc/wget.log>"),
            "text/plain",
            b"--2026-11-27-- http://a.example/ Saving to: index.html",
        ),
        warc(
            "response",
            Some("http://a.example/unknown"),
            "application/http; msgtype=response",
            &http(
                200,
                "text/html; charset=x-no-such-charset",
                b"<p>caf\xe9 au lait</p>",
            ),
        ),
    ];
    let path = write(&dir.path().join("mixed.warc.gz"), &gzip_members(&records));
    let out = dir.path().join("out");
    run_ok(&out, &[], &[&path]);
    let summary = summary(&out);
    let skipped: BTreeMap<String, u64> =
        serde_json::from_value(summary["counts"]["skipped_records"].clone()).unwrap();
    let want: BTreeMap<String, u64> = [
        ("other type", 4),
        ("status", 1),
        ("not text", 2),
        ("revisit", 1),
    ]
    .map(|(k, v)| (k.to_string(), v))
    .into();
    assert_eq!(skipped, want);
    let urls: BTreeSet<_> = documents(&out).into_values().filter_map(|d| d.0).collect();
    assert_eq!(
        urls,
        [
            "http://a.example/",
            "http://a.example/notes.txt",
            "http://a.example/unknown"
        ]
        .map(String::from)
        .into()
    );
}

/// Issue 39: an HTTP head cut off by the record's end is the `truncated` skip that
/// docs/inputs.md lists, never an error, in a WARC (plain and gzip) and in an ARC file, with
/// or without `--skip-invalid`; the record after it is read.
#[test]
fn an_http_head_cut_by_the_records_end_is_a_truncated_skip() {
    use neardup_io::web::testing::arc;
    let dir = tempfile::tempdir().unwrap();
    let cut_heads: [&[u8]; 3] = [
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Ty",
        b"HTTP/1.0 200",
    ];
    let page = http(
        200,
        "text/plain",
        b"a whole page after the cut ones, about owls",
    );
    let urls: Vec<String> = (0..3).map(|i| format!("http://cut.example/{i}")).collect();
    let mut records: Vec<Vec<u8>> = cut_heads
        .iter()
        .zip(&urls)
        .map(|(head, url)| warc("response", Some(url), "application/http", head))
        .collect();
    records.push(warc(
        "response",
        Some("http://whole.example/"),
        "application/http",
        &page,
    ));
    let mut arc_records: Vec<(&str, &str, &[u8])> = urls
        .iter()
        .zip(cut_heads)
        .map(|(url, head)| (url.as_str(), "text/html", head))
        .collect();
    arc_records.push(("http://whole.example/", "text/plain", &page));
    let inputs = [
        ("cut.warc", records.concat()),
        ("cut.warc.gz", gzip_members(&records)),
        ("cut.arc", arc(&arc_records)),
    ];
    let truncated: BTreeMap<String, u64> = [("truncated".to_string(), 3)].into();
    let arc_truncated: BTreeMap<String, u64> =
        [("truncated".to_string(), 3), ("other type".to_string(), 1)].into();
    for (name, bytes) in inputs {
        let path = write(&dir.path().join(name), &bytes);
        for flags in [&[][..], &["--skip-invalid"][..]] {
            let out = dir.path().join(format!("out-{name}-{}", flags.len()));
            run_ok(&out, flags, &[&path]);
            let summary = summary(&out);
            let skipped: BTreeMap<String, u64> =
                serde_json::from_value(summary["counts"]["skipped_records"].clone()).unwrap();
            let want = if name.ends_with(".arc") {
                &arc_truncated
            } else {
                &truncated
            };
            assert_eq!(&skipped, want, "{name} {flags:?}");
            let urls: Vec<_> = documents(&out).into_values().filter_map(|d| d.0).collect();
            assert_eq!(urls, ["http://whole.example/"], "{name} {flags:?}");
        }
    }
}

#[test]
fn an_empty_archive_is_a_run_with_no_documents() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["empty.warc", "empty.warc.gz", "empty.arc"] {
        let path = write(&dir.path().join(name), b"");
        let out = dir.path().join(format!("out-{name}"));
        run_ok(&out, &[], &[&path]);
        assert_eq!(count(&summary(&out), "documents"), 0);
    }
}

#[test]
fn a_huge_page_is_cut_at_max_doc_bytes_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let page: Vec<u8> = (0..600_000u32)
        .flat_map(|i| format!("w{} ", i % 5000).into_bytes())
        .collect();
    assert!(page.len() > 3_000_000);
    let records = vec![warc(
        "response",
        Some("http://big.example/"),
        "application/http; msgtype=response",
        &http(200, "text/plain", &page),
    )];
    let path = write(&dir.path().join("big.warc.gz"), &gzip_members(&records));
    let out = dir.path().join("out");
    run_ok(&out, &["--max-doc-bytes", "1M"], &[&path]);
    let got = summary(&out);
    assert_eq!(count(&got, "truncated"), 1);
    assert_eq!(count(&got, "documents"), 1);
    assert!(count(&got, "bytes") <= 1 << 20, "{got}");
    // The same page in JSONL: cut the same way; a line over 4x the limit is skipped.
    let text = String::from_utf8(page).unwrap();
    let line = format!("{{\"text\": \"{text}\"}}\n");
    let jsonl = write(&dir.path().join("big.jsonl"), line.as_bytes());
    let out = dir.path().join("jsonl");
    run_ok(&out, &["--max-doc-bytes", "1M", "--no-id"], &[&jsonl]);
    assert_eq!(count(&summary(&out), "truncated"), 1);
    let out = dir.path().join("too-long");
    run_ok(&out, &["--max-doc-bytes", "512K", "--no-id"], &[&jsonl]);
    let s = summary(&out);
    assert_eq!(
        (
            count(&s, "documents"),
            s["counts"]["skipped_records"]["too long"].as_u64()
        ),
        (0, Some(1))
    );
}

#[test]
fn html_nested_100000_levels_deep_is_read_without_overflowing_the_stack() {
    let dir = tempfile::tempdir().unwrap();
    let mut page = b"<html><body>".to_vec();
    page.extend(b"<div>".repeat(100_000));
    page.extend_from_slice(b"deep text");
    page.extend(b"</div>".repeat(100_000));
    let records = [warc(
        "response",
        Some("http://deep.example/"),
        "application/http; msgtype=response",
        &http(200, "text/html", &page),
    )];
    let path = write(&dir.path().join("deep.warc"), &records.concat());
    for mode in ["text", "main"] {
        let out = dir.path().join(format!("out-{mode}"));
        run_ok(&out, &["--html", mode], &[&path]);
        assert_eq!(count(&summary(&out), "documents"), 1);
    }
}

#[test]
fn write_dedup_keeps_archive_records_unchanged_one_member_each() {
    let dir = tempfile::tempdir().unwrap();
    let mut records = three_pages();
    // Record 4 repeats record 1's page under another URL: an exact duplicate.
    records.push(warc(
        "response",
        Some("http://mirror.example/"),
        "application/http; msgtype=response",
        &http(
            200,
            "text/plain",
            b"the first page, about apples and pears and plums",
        ),
    ));
    let path = write(&dir.path().join("crawl.warc.gz"), &gzip_members(&records));
    let out = dir.path().join("out");
    let dedup = dir.path().join("dedup");
    run_ok(&out, &["--write-dedup", s(&dedup)], &[&path]);
    let written = std::fs::read(dedup.join("crawl.warc.gz")).unwrap();
    let want: Vec<u8> = gzip_members(&[
        records[0].clone(),
        records[1].clone(),
        records[2].clone(),
        records[3].clone(),
    ]);
    // Same records, each still its own gzip member: the decompressed members match.
    let mut members = Vec::new();
    let mut decoder = flate2::bufread::GzDecoder::new(&written[..]);
    loop {
        let mut record = Vec::new();
        decoder.read_to_end(&mut record).unwrap();
        members.push(record);
        let rest = decoder.into_inner();
        if rest.is_empty() {
            break;
        }
        decoder = flate2::bufread::GzDecoder::new(rest);
    }
    assert_eq!(members, records[..4].to_vec());
    assert_eq!(gunzip(&written), gunzip(&want));
    assert!(dedup.join("removed.parquet").is_file());
}

#[test]
fn url_and_time_fields_fill_the_columns_and_keep_newest_or_oldest_chooses_by_them() {
    let dir = tempfile::tempdir().unwrap();
    let text = "the same page about gardens and orchards and fields";
    let lines = [
        format!(
            r#"{{"id": "a", "text": "{text}", "u": "https://WWW.Example.com/a", "t": "2024-05-01T12:00:00Z"}}"#
        ),
        format!(
            r#"{{"id": "b", "text": "{text}", "u": "http://mirror.example.org/a", "t": 1714600000}}"#
        ),
        format!(r#"{{"id": "c", "text": "{text}", "u": null, "t": "2020-01-01"}}"#),
        format!(r#"{{"id": "d", "text": "{text}"}}"#),
    ];
    let path = write(
        &dir.path().join("pages.jsonl"),
        (lines.join("\n") + "\n").as_bytes(),
    );
    let kept = |policy: &str| {
        let out = dir.path().join(policy);
        run_ok(
            &out,
            &["--url-field", "u", "--time-field", "t", "--keep", policy],
            &[&path],
        );
        let clusters = common::outputs::clusters(&out);
        let kept: Vec<u64> = clusters
            .iter()
            .filter(|c| c.keep)
            .map(|c| c.doc_id)
            .collect();
        (out, kept)
    };
    // 2024-05-01T12:00:00Z = 1714564800 s; 1714600000 s is ten hours later; 2020-01-01 is
    // 1577836800 s (Python's calendar.timegm).
    let (out, newest) = kept("newest");
    assert_eq!(newest, [1], "b is the newest");
    let (_, oldest) = kept("oldest");
    assert_eq!(
        oldest,
        [2],
        "c is the oldest; d, without a time, ranks last"
    );
    let docs = documents(&out);
    let got: Vec<_> = docs.values().cloned().collect();
    assert_eq!(
        got,
        [
            (
                Some("https://WWW.Example.com/a".into()),
                Some(1_714_564_800_000_000),
                None,
                None
            ),
            (
                Some("http://mirror.example.org/a".into()),
                Some(1_714_600_000_000_000),
                None,
                None
            ),
            (None, Some(1_577_836_800_000_000), None, None),
            (None, None, None, None),
        ]
    );
    let hosts: Vec<Option<String>> = batches(&out.join("fingerprints"))
        .iter()
        .flat_map(|b| {
            let h = column(b, "host").as_string::<i32>();
            (0..b.num_rows())
                .map(|i| h.is_valid(i).then(|| h.value(i).to_owned()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        hosts,
        [
            Some("www.example.com".into()),
            Some("mirror.example.org".into()),
            None,
            None
        ]
    );

    // A time that is not one names the field, the line and the value.
    let bad = write(
        &dir.path().join("bad.jsonl"),
        br#"{"id": 1, "text": "x", "t": "soon"}"#,
    );
    let mut cmd = neardup();
    cmd.args([
        "run",
        "--time-field",
        "t",
        "--output",
        s(&dir.path().join("bad")),
        s(&bad),
    ]);
    assert_refused(
        &mut cmd,
        &[&format!(
            "{}:1: field \"t\" holds \"soon\", expected a time",
            bad.display()
        )],
    );
}

#[test]
fn a_revisit_is_an_exact_duplicate_of_the_capture_it_names() {
    use neardup_io::web::testing::warc_with;
    let dir = tempfile::tempdir().unwrap();
    let profile = "http://netpreserve.org/warc/1.0/revisit/identical-payload-digest";
    let page = http(
        200,
        "text/plain",
        b"a page about lighthouses and harbours and tides",
    );
    let records = [
        warc_with(
            "response",
            Some("http://a.example/"),
            "application/http; msgtype=response",
            &page,
            &[("WARC-Payload-Digest", "sha1:AAAA")],
        ),
        warc_with(
            "response",
            Some("http://b.example/"),
            "application/http; msgtype=response",
            &http(
                200,
                "text/plain",
                b"another page entirely, on mountains and valleys",
            ),
            &[("WARC-Payload-Digest", "sha1:BBBB")],
        ),
        // Revisits of the first capture, and of one that is not in the input.
        warc_with(
            "revisit",
            Some("http://a.example/"),
            "application/http; msgtype=response",
            b"",
            &[
                ("WARC-Payload-Digest", "sha1:AAAA"),
                ("WARC-Profile", profile),
            ],
        ),
        warc_with(
            "revisit",
            Some("http://z.example/"),
            "application/http; msgtype=response",
            b"",
            &[
                ("WARC-Payload-Digest", "sha1:ZZZZ"),
                ("WARC-Profile", profile),
            ],
        ),
        // Not modified: nothing to link it to.
        warc_with(
            "revisit",
            Some("http://a.example/"),
            "application/http; msgtype=response",
            b"",
            &[(
                "WARC-Profile",
                "http://netpreserve.org/warc/1.0/revisit/server-not-modified",
            )],
        ),
    ];
    let path = write(
        &dir.path().join("revisits.warc.gz"),
        &gzip_members(&records),
    );
    for workers in ["1", "3"] {
        let out = dir.path().join(format!("out-{workers}"));
        run_ok(&out, &["-w", workers], &[&path]);
        let summary = summary(&out);
        assert_eq!(count(&summary, "revisits_linked"), 1);
        assert_eq!(
            summary["counts"]["skipped_records"]["revisit"].as_u64(),
            Some(1)
        );
        assert_eq!(count(&summary, "documents"), 4);
        let pairs: Vec<(u64, u64, String)> = common::outputs::pairs(&out)
            .into_iter()
            .map(|p| (p.doc_a, p.doc_b, p.kind))
            .collect();
        assert_eq!(
            pairs,
            [(0, 2, "exact".to_string())],
            "record 2 repeats record 0"
        );
    }
}

#[test]
fn parquet_url_and_time_columns_fill_the_columns_too() {
    use arrow::array::{ArrayRef, StringArray, TimestampMillisecondArray};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pages.parquet");
    let texts: ArrayRef = Arc::new(StringArray::from(vec![
        "one page",
        "another page",
        "a third",
    ]));
    let urls: ArrayRef = Arc::new(StringArray::from(vec![
        Some("http://A.example/x"),
        None,
        Some("https://b.example/"),
    ]));
    // Milliseconds, with a zone: an instant, read as microseconds UTC.
    let times: ArrayRef = Arc::new(
        TimestampMillisecondArray::from(vec![Some(1_714_564_800_000), Some(5), None])
            .with_timezone("+02:00"),
    );
    common::corpus::write_parquet(&path, vec![("text", texts), ("u", urls), ("t", times)], 2);
    let out = dir.path().join("out");
    run_ok(
        &out,
        &["--no-id", "--url-field", "u", "--time-field", "t"],
        &[&path],
    );
    let got: Vec<_> = documents(&out).into_values().map(|d| (d.0, d.1)).collect();
    assert_eq!(
        got,
        [
            (
                Some("http://A.example/x".into()),
                Some(1_714_564_800_000_000)
            ),
            (None, Some(5_000)),
            (Some("https://b.example/".into()), None),
        ]
    );
    // A column of another type is refused, naming it.
    let mut cmd = neardup();
    cmd.args([
        "run",
        "--no-id",
        "--url-field",
        "t",
        "--output",
        s(&dir.path().join("bad")),
        s(&path),
    ]);
    assert_refused(&mut cmd, &["column \"t\" has type Timestamp"]);
}

#[test]
fn max_doc_bytes_cuts_plain_and_parquet_documents_too() {
    use arrow::array::{ArrayRef, StringArray};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    // About 25 KB of text, a two-byte character across the 8 KiB limit.
    let mut text = "é".repeat(4095) + "x";
    text.push_str(&"é word ".repeat(2000));
    // A plain file (gzip), through `extract --plain`: cut at a character boundary.
    let page = write(
        &dir.path().join("page.txt.gz"),
        &common::corpus::gzip(text.as_bytes()),
    );
    let out = dir.path().join("plain");
    let status = neardup()
        .args([
            "extract",
            "-q",
            "--plain",
            "--max-doc-bytes",
            "8K",
            "--output",
            s(&out),
            s(&page),
        ])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let got = summary(&out);
    assert_eq!(
        (got["documents"].as_u64(), got["truncated"].as_u64()),
        (Some(1), Some(1))
    );
    let cut = &batches(&out.join("documents"))[0];
    let kept = column(cut, "text").as_string::<i32>().value(0);
    assert!(
        kept.len() <= 8192 && text.starts_with(kept) && kept.len() >= 8190,
        "{}",
        kept.len()
    );
    // A Parquet row, through `run`.
    let parquet = dir.path().join("docs.parquet");
    let texts: ArrayRef = Arc::new(StringArray::from(vec![text.as_str(), "short"]));
    common::corpus::write_parquet(&parquet, vec![("text", texts)], 10);
    let out = dir.path().join("parquet");
    run_ok(&out, &["--no-id", "--max-doc-bytes", "8K"], &[&parquet]);
    let got = summary(&out);
    assert_eq!((count(&got, "documents"), count(&got, "truncated")), (2, 1));
    assert!(count(&got, "bytes") <= 8192 + 5, "{got}");
}

#[test]
fn write_dedup_keeps_arc_records_unchanged() {
    use neardup_io::web::testing::arc;
    let dir = tempfile::tempdir().unwrap();
    let page = http(
        200,
        "text/plain",
        b"the same page about kites and winds and beaches",
    );
    let other = http(
        200,
        "text/plain",
        b"a page of its own, about trains and stations",
    );
    let bytes = arc(&[
        ("http://a.example/", "text/plain", &page),
        ("http://b.example/", "text/plain", &other),
        ("http://mirror.example/", "text/plain", &page),
    ]);
    let path = write(&dir.path().join("crawl.arc"), &bytes);
    let out = dir.path().join("out");
    let dedup = dir.path().join("dedup");
    run_ok(&out, &["--write-dedup", s(&dedup)], &[&path]);
    let written = std::fs::read(dedup.join("crawl.arc")).unwrap();
    // The input without its last record (the mirror, record 3): the filedesc record and
    // the first two pages, byte for byte.
    let mirror = bytes
        .windows(b"http://mirror".len())
        .position(|w| w == b"http://mirror")
        .unwrap();
    assert_eq!(written, bytes[..mirror].to_vec());
}

/// Issue 38: a site's template is learned from its pages and dropped before fingerprinting.
/// Twenty pages of one host share ten long template lines (no markup names them
/// boilerplate) and each has a short text of its own: without templates the shared lines
/// make them near duplicates, with them no two are paired. One page of another host under
/// eight URLs (one content) is never a template: its copies stay linked. The templates
/// and the pairs are the same at 1 and 2 workers.
#[test]
fn site_templates_keep_pages_that_share_a_template_apart() {
    use common::outputs::{fingerprints, pairs};
    let dir = tempfile::tempdir().unwrap();
    let path = common::corpus::template_site(dir.path());
    let urls_of = |out: &Path| -> BTreeMap<u64, String> {
        fingerprints(out)
            .into_iter()
            .map(|r| (r.doc_id, r.id.unwrap()))
            .collect()
    };
    let host_pairs = |out: &Path, host: &str| -> BTreeSet<(String, String)> {
        let urls = urls_of(out);
        pairs(out)
            .into_iter()
            .map(|p| (urls[&p.doc_a].clone(), urls[&p.doc_b].clone()))
            .filter(|(a, _)| a.contains(host))
            .collect()
    };
    let off = dir.path().join("off");
    run_ok(&off, &["--site-templates", "off"], &[&path]);
    assert!(
        host_pairs(&off, "docs.example").len() >= 10,
        "the template makes the pages alike"
    );
    assert_eq!(summary(&off)["counts"]["template_blocks"], 0);
    let mut seen = None;
    for workers in ["1", "2"] {
        let out = dir.path().join(format!("on-{workers}"));
        run_ok(&out, &["-w", workers], &[&path]);
        let counts = &summary(&out)["counts"];
        assert_eq!(
            (
                counts["template_hosts"].as_u64(),
                counts["template_blocks"].as_u64()
            ),
            (Some(1), Some(10))
        );
        assert_eq!(host_pairs(&out, "docs.example"), BTreeSet::new());
        let news = host_pairs(&out, "news.example");
        // Exact copies are linked to one representative: 7 pairs joining all 8.
        let joined: BTreeSet<&String> = news.iter().flat_map(|(a, b)| [a, b]).collect();
        assert_eq!(
            (news.len(), joined.len()),
            (7, 8),
            "every copy of the story is found"
        );
        let found = (host_pairs(&out, "docs.example"), news);
        assert_eq!(seen.get_or_insert(found.clone()), &found);
    }
}

/// Issue 38: simhash pairs of web pages are verified by default (word 5-grams, Jaccard
/// 0.5). Two pages of one table with the status column flipped have the same words, so
/// the same simhash, but share few 5-grams: reported only with `--verify none`. A copy of
/// one of them under another URL with a sentence added is found either way, with its
/// Jaccard. The same at 1 and 2 workers.
#[test]
fn pairs_of_pages_are_verified_by_default() {
    use common::outputs::pairs;
    let dir = tempfile::tempdir().unwrap();
    let names = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "lima",
    ];
    let page = |flip: bool, extra: &str| {
        let rows: String = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let status = if (i % 2 == 0) != flip { "ok" } else { "todo" };
                format!(
                    "<tr><td><p>core</p></td><td><p>{name}</p></td><td><p>{status}</p></td>\
                     <td><p>arch supports the {name} feature</p></td></tr>"
                )
            })
            .collect();
        let body = format!("<html><body><p>{extra}</p><table>{rows}</table></body></html>");
        http(200, "text/html", body.as_bytes())
    };
    let records = [
        ("http://docs.example/arm.html", page(false, "")),
        ("http://docs.example/x86.html", page(true, "")),
        (
            "http://docs.example/arm-copy.html",
            page(false, "the core arch supports the alpha feature"),
        ),
    ];
    let bytes: Vec<u8> = records
        .iter()
        .flat_map(|(url, block)| warc("response", Some(url), "application/http", block))
        .collect();
    let path = write(&dir.path().join("crawl.warc"), &bytes);
    let found = |out: &Path| -> BTreeSet<(u64, u64)> {
        pairs(out).into_iter().map(|p| (p.doc_a, p.doc_b)).collect()
    };
    let jaccards = |out: &Path| -> Vec<Option<f32>> {
        batches(&out.join("pairs"))
            .iter()
            .flat_map(|b| {
                let j = column(b, "jaccard").as_primitive::<arrow::datatypes::Float32Type>();
                (0..b.num_rows())
                    .map(|i| j.is_valid(i).then(|| j.value(i)))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let none = dir.path().join("none");
    run_ok(&none, &["--verify", "none"], &[&path]);
    assert_eq!(found(&none), BTreeSet::from([(0, 1), (0, 2)]));
    assert!(jaccards(&none).iter().all(Option::is_none));
    for workers in ["1", "2"] {
        let out = dir.path().join(format!("default-{workers}"));
        run_ok(&out, &["-w", workers], &[&path]);
        assert_eq!(found(&out), BTreeSet::from([(0, 2)]), "{workers} workers");
        let j = jaccards(&out);
        assert!(
            matches!(j[..], [Some(j)] if (0.5..1.0).contains(&j)),
            "{j:?}"
        );
    }
}
