//! The report in a real browser: Debian's headless Chromium renders the report of a run
//! over the shared corpus dev-small; the page must load without any console message
//! (Chromium logs them to stderr with `--enable-logging=stderr --v=0`), and its
//! screenshot must not be blank. The screenshot is kept with the test output,
//! `target/tmp/report-browser/report.png`.
//!
//! Two control pages show that both checks can fail: one that logs a console error (it
//! must be caught), and an empty page (its screenshot must count as blank).
//!
//! Skipped with a notice when Chromium (`/usr/bin/chromium`, or `NEARDUP_CHROMIUM`) or
//! the shared corpora are absent, unless `NEARDUP_REQUIRE_SHARED=1` (CI), where
//! scripts/test.sh has installed Chromium.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::*;

fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("NEARDUP_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Renders `page` headless into `png`; returns Chromium's log (stderr), which holds the
/// page's console messages (`--enable-logging=stderr --v=0`).
fn render(chrome: &Path, page: &Path, png: &Path, height: u32) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size=1280,{height}"))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium starts");
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "chromium failed: {log}");
    assert!(png.is_file(), "no screenshot: {log}");
    log
}

/// The page's console messages in Chromium's log, lines such as
/// `[...:INFO:CONSOLE:1] "Uncaught ...", source: file:///... (1)`. Chromium logs them
/// without their level, so every console message counts: the report has no script, so a
/// message can only come from the browser rejecting something (a script error, a blocked
/// resource, a CSS or SVG parse error reported to the console).
fn console_messages(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

/// The variance of the screenshot's grey levels: 0 for a blank page.
fn grey_variance(png: &Path) -> f64 {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let channels = info.color_type.samples();
    let greys: Vec<f64> = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| {
            if channels >= 3 {
                0.299 * f64::from(p[0]) + 0.587 * f64::from(p[1]) + 0.114 * f64::from(p[2])
            } else {
                f64::from(p[0])
            }
        })
        .collect();
    let mean = greys.iter().sum::<f64>() / greys.len() as f64;
    greys.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / greys.len() as f64
}

/// A page is not blank when its grey levels vary at least this much (a white page with a
/// few lines of black text has a variance in the hundreds; a blank one has 0).
const MIN_VARIANCE: f64 = 50.0;

#[test]
fn report_renders_in_chromium_without_console_messages() {
    let Some(corpus) = shared_corpus("dev-small") else {
        return;
    };
    let Some(chrome) = chromium() else {
        let message = "chromium not found (scripts/test.sh installs Debian's chromium)";
        if std::env::var(REQUIRE_SHARED).as_deref() == Ok("1") {
            panic!("{message}, and {REQUIRE_SHARED}=1 requires the browser test");
        }
        let _ = writeln!(
            std::io::stderr(),
            "notice: skipping the browser test: {message}"
        );
        return;
    };
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-browser");
    std::fs::create_dir_all(&keep).unwrap();
    let dir = tempfile::tempdir().unwrap();

    // Controls: the checks can fail.
    let bad = write(
        &dir.path().join("bad.html"),
        b"<!DOCTYPE html><html><body><p>control</p>\
          <script>console.error('neardup control error');</script></body></html>",
    );
    let log = render(&chrome, &bad, &dir.path().join("bad.png"), 600);
    assert!(
        console_messages(&log)
            .iter()
            .any(|l| l.contains("neardup control error")),
        "the console check does not see a console.error: {log}"
    );
    let blank = write(
        &dir.path().join("blank.html"),
        b"<!DOCTYPE html><html><body></body></html>",
    );
    render(&chrome, &blank, &dir.path().join("blank.png"), 600);
    assert!(grey_variance(&dir.path().join("blank.png")) < MIN_VARIANCE);

    // The report of a run over dev-small.
    let run = dir.path().join("run");
    run_ok(&run, &["--report", "-q"], &[&corpus.join("corpus.jsonl")]);
    let page = run.join("report.html");
    let size = std::fs::metadata(&page).unwrap().len();
    assert!(size < 1_000_000, "the page is {size} bytes");
    let png = keep.join("report.png");
    let log = render(&chrome, &page, &png, 2400);
    let messages = console_messages(&log);
    assert!(messages.is_empty(), "console messages: {messages:?}\n{log}");
    let variance = grey_variance(&png);
    assert!(
        variance > MIN_VARIANCE,
        "the screenshot looks blank (variance {variance})"
    );
    std::fs::copy(&page, keep.join("report.html")).unwrap();
}
