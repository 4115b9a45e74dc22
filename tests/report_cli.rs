//! `neardup report` and `neardup run --report`: the structure and content of the page, from
//! a run over a small corpus, checked against summary.json, the Parquet tables and the
//! corpus itself; the page stays self-contained and the run directory stays a neardup
//! output.

use std::path::{Path, PathBuf};

mod common;
use common::*;

/// With "spring" changed to "autumn", 2 bits apart (a near pair at k = 3).
const BASE: &str = "the committee met on tuesday to discuss the new budget for the regional \
                    library system and agreed to extend opening hours across every branch in \
                    the county starting next spring with additional staff hired from local \
                    schools";

fn corpus(dir: &Path) -> PathBuf {
    let mut docs = vec![
        doc("a", BASE),
        doc("b", BASE.to_uppercase()),
        doc("c", BASE.replace("spring", "autumn")),
        doc(
            "d",
            "goats <b>graze</b> & climb on steep alpine meadows in summer, far above",
        ),
        doc(
            "e",
            "goats <b>graze</b> & climb on steep alpine meadows in summer, far above!",
        ),
    ];
    let mut rng = SeededRng::new(11);
    for i in 0..20 {
        let words: Vec<String> = (0..40).map(|_| format!("w{}", rng.below(5000))).collect();
        docs.push(doc(format!("r{i}"), words.join(" ")));
    }
    write(&dir.join("corpus.jsonl"), &jsonl(&docs))
}

fn report(run: &Path, extra: &[&str]) -> std::process::Output {
    neardup()
        .arg("report")
        .arg(s(run))
        .args(extra)
        .output()
        .unwrap()
}

fn report_ok(run: &Path, extra: &[&str]) -> String {
    let o = report(run, extra);
    assert!(
        o.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read_to_string(run.join("report.html")).unwrap()
}

/// The text of the element carrying `attr="value"`: `<td ... attr="value">TEXT</td>`.
fn cell<'a>(html: &'a str, attr: &str, value: &str) -> &'a str {
    let key = format!("{attr}=\"{value}\">");
    let start = html
        .find(&key)
        .unwrap_or_else(|| panic!("no {key} in the page"))
        + key.len();
    let end = start + html[start..].find('<').unwrap();
    &html[start..end]
}

/// No resource from elsewhere: no script, no stylesheet link, no image or frame source, no
/// CSS import or url(); the only URLs are XML namespaces of the inline SVG.
fn assert_self_contained(html: &str) {
    for banned in [
        "<script", "<link", "src=", "@import", "url(", "<iframe", "<img",
    ] {
        assert!(!html.contains(banned), "the page has {banned}");
    }
    let urls = html.matches("http").count();
    let namespaces = html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count();
    assert_eq!(urls, namespaces, "only SVG namespaces may name a URL");
}

#[test]
fn run_report_shows_the_summary_plots_and_side_by_side_texts() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let run = dir.path().join("run");
    let o = run_ok(&run, &["--report", "-w", "2"], &[&input]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("report.html"));
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
    assert_self_contained(&html);

    // The counts are summary.json's.
    let summary = summary(&run);
    for name in [
        "documents",
        "bytes",
        "pairs",
        "exact_pairs",
        "near_pairs",
        "clusters",
        "documents_to_remove",
    ] {
        assert_eq!(
            cell(&html, "data-count", name),
            summary["counts"][name].to_string(),
            "{name}"
        );
    }
    assert!(summary["counts"]["near_pairs"].as_u64().unwrap() >= 1);
    assert_eq!(cell(&html, "data-param", "k"), "3");
    // Every stage timing is shown with its value.
    for (stage, secs) in summary["stage_seconds"].as_object().unwrap() {
        let row = format!(
            "<tr><td>{stage}</td><td class=\"n\">{:.3}</td>",
            secs.as_f64().unwrap()
        );
        assert!(html.contains(&row), "{row}");
    }
    // The plots are inline SVG: the Hamming histogram and the cluster sizes.
    for plot in ["plot-hamming", "plot-cluster-sizes"] {
        let at = html
            .find(&format!("id=\"{plot}\"><svg"))
            .unwrap_or_else(|| panic!("{plot}"));
        assert!(html[at..].contains("</svg></figure>"));
    }
    // The near pair (spring/autumn) side by side, read back from the corpus, with the
    // changed word marked on both sides and nothing else; HTML in texts is escaped.
    assert!(
        html.contains("<mark>spring</mark>"),
        "the changed word is marked"
    );
    assert!(html.contains("<mark>autumn</mark>"));
    assert_eq!(html.matches("<mark>").count() % 2, 0);
    assert!(html.contains("goats &lt;b&gt;graze&lt;/b&gt; &amp; climb"));
    assert!(!html.contains("<b>graze"));
    // The largest cluster is named with its size.
    let largest = &summary["largest_clusters"][0];
    assert!(html.contains(&format!(
        "<h3>Cluster {} · {} documents</h3>",
        largest["cluster_id"], largest["size"]
    )));

    // The run directory is still a neardup output: the marker lists the page, and a new
    // run with --overwrite replaces it (page included).
    assert!(std::fs::read_to_string(run.join(".neardup"))
        .unwrap()
        .contains("report.html"));
    run_ok(&run, &["--overwrite", "-q"], &[&input]);
    assert!(!run.join("report.html").exists());
}

#[test]
fn missing_texts_are_said_and_runs_must_be_complete() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let run = dir.path().join("run");
    run_ok(&run, &["-q"], &[&input]);
    let moved = dir.path().join("elsewhere.jsonl");
    std::fs::rename(&input, &moved).unwrap();
    let html = report_ok(&run, &["-q"]);
    assert!(
        html.contains("The text cannot be shown"),
        "a missing input is said"
    );
    assert!(html.contains("is not there"));
    assert!(!html.contains("<mark>"));
    std::fs::rename(&moved, &input).unwrap();
    // Written again over the previous page.
    let html = report_ok(&run, &["-q"]);
    assert!(html.contains("<mark>spring</mark>"));

    std::fs::remove_file(run.join("_SUCCESS")).unwrap();
    let o = report(&run, &[]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no _SUCCESS: the run is incomplete or failed")
    );
}

#[test]
fn truth_adds_the_scores_eval_gives() {
    let dir = tempfile::tempdir().unwrap();
    let input = corpus(dir.path());
    let run = dir.path().join("run");
    run_ok(&run, &["-q"], &[&input]);
    let truth = write(
        &dir.path().join("truth.tsv"),
        b"id1\tid2\tjaccard\na\tb\t1.0\na\tc\t0.9\nd\te\t0.95\nr1\tr2\t0.3\n",
    );
    let html = report_ok(&run, &["--truth", s(&truth), "-q"]);
    let eval = neardup()
        .args(["eval", "--run", s(&run), "--truth", s(&truth), "--json"])
        .output()
        .unwrap();
    assert!(eval.status.success());
    let eval: serde_json::Value = serde_json::from_slice(&eval.stdout).unwrap();
    let p = &eval["pairs"];
    let row = format!(
        "<tr><td>reported pairs</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.4}</td><td class=\"n\">{:.4}</td>",
        p["predicted"], p["true_positives"], p["precision"].as_f64().unwrap(), p["recall"].as_f64().unwrap()
    );
    assert!(html.contains(&row), "{row}");
    for (band, r) in eval["recall_by_jaccard"].as_object().unwrap() {
        let row = format!(
            "<tr><td>{band}</td><td class=\"n\">{}</td><td class=\"n\">{:.4}</td>",
            r["truth_pairs"],
            r["recall_pairs"].as_f64().unwrap()
        );
        assert!(html.contains(&row), "{row}");
    }
}

#[test]
fn hosts_with_most_duplicates_and_the_hosts_and_mirrors_tables() {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, StringArray, UInt64Array};
    use serde_json::json;

    let dir = tempfile::tempdir().unwrap();
    // Three hosts: b.example copies two of a.example's pages, c.example has its own.
    let pages = [
        ("http://a.example/1", BASE),
        (
            "http://a.example/2",
            "goats graze and climb on steep alpine meadows in summer far above",
        ),
        ("http://b.example/1", BASE),
        (
            "http://b.example/2",
            "goats graze and climb on steep alpine meadows in summer far above",
        ),
        (
            "http://c.example/1",
            "an unrelated page about tides and the moon and the sea",
        ),
    ];
    let records: Vec<serde_json::Value> = pages
        .iter()
        .enumerate()
        .map(|(i, (url, text))| json!({"id": format!("p{i}"), "url": url, "text": text}))
        .collect();
    let input = write(&dir.path().join("pages.jsonl"), &jsonl_values(&records));
    let run = dir.path().join("run");
    run_ok(&run, &["--url-field", "url", "-q"], &[&input]);
    // hosts/ and mirrors/ replaced by tables of our own (a part each, in the layout the
    // mirror detection writes), so that the page shows a mirror group these few pages are too
    // few to make.
    for table in ["hosts", "mirrors"] {
        let _ = std::fs::remove_dir_all(run.join(table));
        std::fs::create_dir(run.join(table)).unwrap();
    }
    let strings =
        |v: &[&str]| Arc::new(StringArray::from_iter_values(v.iter().copied())) as ArrayRef;
    let numbers =
        |v: &[u64]| Arc::new(UInt64Array::from_iter_values(v.iter().copied())) as ArrayRef;
    write_parquet(
        &run.join("hosts/part-00000.parquet"),
        vec![
            ("host", strings(&["c.example", "a.example", "b.example"])),
            ("documents", numbers(&[1, 2, 2])),
            (
                "mirror_group",
                strings(&["c.example", "a.example", "a.example"]),
            ),
        ],
        10,
    );
    write_parquet(
        &run.join("mirrors/part-00000.parquet"),
        vec![
            ("host_a", strings(&["a.example"])),
            ("host_b", strings(&["b.example"])),
            ("shared_paths", numbers(&[2])),
        ],
        10,
    );
    let html = report_ok(&run, &["-q"]);
    // Computed from fingerprints/ and clusters/: b.example's two copies are removed
    // (--keep first keeps a.example's), a.example and c.example lose none.
    assert!(
        html.contains("<tr><td>b.example</td><td class=\"n\">2</td><td class=\"n\">2</td></tr>"),
        "{html}"
    );
    assert!(
        !html.contains("<tr><td>c.example</td><td class=\"n\">1</td><td class=\"n\">0</td></tr>")
    );
    // The tables, largest first by documents / shared_paths.
    let hosts = &html[html.find("id=\"hosts-table\"").unwrap()..];
    let (a, c) = (
        hosts.find("a.example").unwrap(),
        hosts.find("c.example").unwrap(),
    );
    assert!(a < c, "sorted by documents");
    assert!(html.contains("<td>a.example</td><td>b.example</td><td>2</td>"));
    assert!(html.contains("1 of 1 rows."));
}
