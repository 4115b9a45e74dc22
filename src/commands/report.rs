//! `neardup report RUN_DIR` (and `neardup run --report`): one self-contained HTML page,
//! `RUN_DIR/report.html`, to judge a run at a glance.
//!
//! The page works offline and alone: the CSS is inline, the plots are inline SVG drawn by
//! plotters ([`plots`]), and there is no script at all. It shows the summary (counts and
//! parameters), the distribution of pair similarity, cluster sizes (log-log) with the
//! largest buckets and clusters, the largest clusters and a sample of borderline pairs
//! side by side with the differing words highlighted ([`diff`]; the texts are read back
//! from the inputs, [`texts`]), the stage timings, the hosts with most duplicates and the
//! mirror groups when the run has them, and, with `--truth`, the scores `neardup eval`
//! gives (precision, recall and F1, and recall by similarity band).
//!
//! Everything is gathered in one streaming pass per table ([`data`]) and every section
//! is bounded (see the constants of [`data`], [`plots`], [`diff`] and
//! [`MAX_TEXT_BYTES`]), so the page has the same size, about 100-300 KB, for a run of a
//! thousand documents or of a hundred million.
//!
//! The page is written atomically under the run's lock (so it is never half-written and a
//! run cannot start into the directory meanwhile), and listed in the run's `.neardup`
//! marker, so that `neardup run --overwrite` replaces it with the rest of the run.

#[path = "report/data.rs"]
pub mod data;
#[path = "report/diff.rs"]
pub mod diff;
#[path = "report/plots.rs"]
pub mod plots;
#[path = "report/texts.rs"]
pub mod texts;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use neardup_core::eval::Scores;
use neardup_core::DEFAULT_JACCARD;
use neardup_io::lock::DirLock;
use neardup_io::run_dir::{self, RunDir, LOCK, MARKER, MARKER_TEXT};
use serde_json::Value;

use data::{PairSample, RunData};

/// The page's name inside the run directory.
pub const REPORT: &str = "report.html";

/// Bytes of each text shown: the first screenful or two, enough to judge a pair (the
/// page holds at most 2 × (BORDERLINE_PAIRS + CLUSTERS_SHOWN × MEMBERS_SHOWN) = 24 texts,
/// so at most about 100 KB of text).
pub const MAX_TEXT_BYTES: usize = 4000;

pub const REPORT_EXAMPLES: &str = "\
Examples:
  The report of a finished run, written to out/report.html:
    neardup report out

  With the scores against ground truth (as neardup eval gives them):
    neardup report out --truth ../shared/corpora/dev-small/truth.tsv

  A run that writes its report when it ends:
    neardup run --report --output out corpus/

The page is self-contained (inline SVG and CSS, no script, no network); the texts of the
sampled documents are read back from the inputs by the paths the run used.";

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// The output directory of a finished run (with _SUCCESS)
    #[arg(value_name = "RUN_DIR")]
    pub run: PathBuf,
    /// Ground truth (TSV with id1, id2, jaccard, as for neardup eval): adds precision,
    /// recall and recall by similarity band
    #[arg(long, value_name = "TSV")]
    pub truth: Option<PathBuf>,
    /// With --truth: truth pairs at or above this Jaccard similarity are the positives
    #[arg(long, default_value_t = DEFAULT_JACCARD, value_name = "T")]
    pub min_jaccard: f64,
    /// No message on stderr
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

pub fn run(args: &ReportArgs) -> Result<()> {
    let path = write_report(&args.run, args.truth.as_deref(), args.min_jaccard)?;
    if !args.quiet {
        eprintln!("neardup: wrote {}", path.display());
    }
    Ok(())
}

/// `run --report`: once the run has succeeded, process 0 writes its report.
pub fn after_run(args: &crate::commands::run::RunArgs) -> Result<()> {
    if args.report && args.job.cluster.process == 0 {
        let path = write_report(&args.job.output, None, neardup_core::DEFAULT_JACCARD)?;
        if !args.job.quiet {
            eprintln!("neardup: wrote {}", path.display());
        }
    }
    Ok(())
}

/// Writes `dir/report.html` for the complete run in `dir`; returns its path.
pub fn write_report(dir: &Path, truth: Option<&Path>, min_jaccard: f64) -> Result<PathBuf> {
    if !(0.0..=1.0).contains(&min_jaccard) {
        bail!("--min-jaccard {min_jaccard} is out of range: it must be between 0 and 1");
    }
    let run = RunDir::new(dir);
    if !run.success().exists() {
        bail!(
            "{}: no _SUCCESS: the run is incomplete or failed (a report needs a complete run)",
            dir.display()
        );
    }
    // Held while reading and writing: no run starts into the directory meanwhile.
    let _lock = DirLock::acquire(dir, LOCK, "run directory")?;
    let data = data::gather(dir)?;
    let scores = match truth {
        Some(truth) => Some(crate::run_scores::score_run(
            dir,
            truth,
            min_jaccard,
            false,
        )?),
        None => None,
    };
    let argv: Vec<String> = data.summary["parameters"]["command_line"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let fields = texts::run_fields(&argv);
    let texts = texts::read_texts(&fields, &data::wanted_places(&data));
    let html = render(
        dir,
        &data,
        &texts,
        scores.as_ref().map(|s| (s, min_jaccard)),
    );
    list_in_marker(dir)?;
    let path = dir.join(REPORT);
    neardup_io::atomic::write_atomically(&path, html.as_bytes())?;
    Ok(path)
}

/// Adds [`REPORT`] to the files the run directory's marker lists, so that `--overwrite`
/// removes it with the rest of the run (and does not refuse the directory for it).
fn list_in_marker(dir: &Path) -> Result<()> {
    let text = std::fs::read_to_string(dir.join(MARKER)).unwrap_or_else(|_| MARKER_TEXT.into());
    let mut names: Vec<String> = text.lines().skip(1).map(String::from).collect();
    if !names.iter().any(|n| n == REPORT) {
        names.push(REPORT.to_string());
    }
    run_dir::record_written(dir, &names)?;
    Ok(())
}

/// `text` with `&`, `<`, `>`, `"` and `'` escaped, for HTML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The first [`MAX_TEXT_BYTES`] of `text` (at a character boundary), and whether it was cut.
fn shown_text(text: &str) -> (&str, bool) {
    if text.len() <= MAX_TEXT_BYTES {
        return (text, false);
    }
    let mut end = MAX_TEXT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1200px;padding:1em 2em;color:#222;background:#fff}
h1{font-size:1.6em;margin-bottom:0.2em}h2{border-bottom:2px solid #2b6cb0;padding-bottom:0.2em;margin-top:2em}
table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #ccc;padding:0.25em 0.6em;text-align:left;vertical-align:top}
th{background:#eef3f9}td.n{text-align:right;font-variant-numeric:tabular-nums}
.grid{display:flex;flex-wrap:wrap;gap:1em}.note{color:#555;font-size:0.9em}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:0.8em;margin:0.8em 0 1.6em 0}
.doc{border:1px solid #ccc;border-radius:4px;padding:0.5em;background:#fafafa;overflow-wrap:anywhere}
.doc h4{margin:0 0 0.4em 0;font-size:0.9em;color:#333}.doc pre{white-space:pre-wrap;margin:0;font-size:0.85em;max-height:24em;overflow:auto}
mark{background:#fdd835;color:#000}.missing{color:#a33;font-style:italic}
.bar{background:#2b6cb0;height:0.9em;display:inline-block}
code{background:#f2f2f2;padding:0 0.2em}";

fn render(
    dir: &Path,
    data: &RunData,
    texts: &HashMap<texts::Place, Result<String, String>>,
    scores: Option<(&Scores, f64)>,
) -> String {
    let s = &data.summary;
    let mut h = String::new();
    let title = format!("neardup report: {}", dir.display());
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n\
         <p class=\"note\">neardup {} · written by <code>neardup report</code> {} · \
         every section is a bounded sample or an aggregate (see the end of the page)</p>\n",
        escape(&title),
        escape(&title),
        escape(s["version"].as_str().unwrap_or("?")),
        escape(env!("CARGO_PKG_VERSION")),
    );
    summary_section(&mut h, s);
    similarity_section(&mut h, data, s);
    clusters_section(&mut h, data, s);
    samples_section(&mut h, data, texts);
    timings_section(&mut h, s);
    hosts_section(&mut h, data);
    if let Some((scores, min_jaccard)) = scores {
        scores_section(&mut h, scores, min_jaccard);
    }
    notes_section(&mut h, s);
    h.push_str("</body></html>\n");
    h
}

fn count(s: &Value, name: &str) -> u64 {
    s["counts"][name].as_u64().unwrap_or(0)
}

fn summary_section(h: &mut String, s: &Value) {
    h.push_str("<h2 id=\"summary\">Summary</h2>\n<div class=\"grid\"><table id=\"counts\"><tr><th>count</th><th>value</th></tr>\n");
    for (name, label) in [
        ("documents", "documents"),
        ("bytes", "bytes of text"),
        ("empty", "empty documents"),
        ("skipped", "skipped records"),
        ("exact_pairs", "exact pairs"),
        ("near_pairs", "near pairs"),
        ("pairs", "pairs"),
        ("clusters", "clusters"),
        ("clustered_documents", "documents in clusters"),
        ("documents_to_remove", "documents to remove"),
    ] {
        let _ = writeln!(
            h,
            "<tr><td>{label}</td><td class=\"n\" data-count=\"{name}\">{}</td></tr>",
            count(s, name)
        );
    }
    h.push_str("</table>\n<table id=\"parameters\"><tr><th>parameter</th><th>value</th></tr>\n");
    let p = &s["parameters"];
    for name in [
        "scheme",
        "k",
        "tables",
        "keep",
        "exact",
        "skip_invalid",
        "workers_per_process",
        "processes",
    ] {
        let v = match &p[name] {
            Value::String(t) => t.clone(),
            Value::Null => continue,
            v => v.to_string(),
        };
        let _ = writeln!(
            h,
            "<tr><td>{name}</td><td data-param=\"{name}\">{}</td></tr>",
            escape(&v)
        );
    }
    let inputs: Vec<&str> = p["inputs"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let shown: Vec<String> = inputs.iter().take(5).map(|i| escape(i)).collect();
    let more = if inputs.len() > 5 {
        format!(" and {} more", inputs.len() - 5)
    } else {
        String::new()
    };
    let _ = writeln!(
        h,
        "<tr><td>inputs</td><td>{}{more}</td></tr>",
        shown.join("<br>")
    );
    let argv: Vec<&str> = p["command_line"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let _ = writeln!(
        h,
        "<tr><td>command line</td><td><code>{}</code></td></tr>",
        escape(&argv.join(" "))
    );
    h.push_str("</table></div>\n");
}

fn similarity_section(h: &mut String, data: &RunData, s: &Value) {
    h.push_str("<h2 id=\"similarity\">Pair similarity</h2>\n");
    let k = s["parameters"]["k"].as_u64().unwrap_or(3) as usize;
    let top = (0..65)
        .rev()
        .find(|&d| data.near_by_hamming[d] + data.exact_by_hamming[d] > 0)
        .unwrap_or(0)
        .max(k.min(64));
    let bars: Vec<(String, u64, u64)> = (0..=top)
        .map(|d| {
            (
                d.to_string(),
                data.near_by_hamming[d],
                data.exact_by_hamming[d],
            )
        })
        .collect();
    let (exact, near): (u64, u64) = (
        data.exact_by_hamming.iter().sum(),
        data.near_by_hamming.iter().sum(),
    );
    let _ = writeln!(
        h,
        "<p>{near} near pairs (blue) and {exact} exact pairs (orange) by the Hamming distance \
         between their simhashes (MinHash runs have no simhash: every pair is at 0).</p>"
    );
    push_plot(
        h,
        "hamming",
        plots::bars(
            "Pairs by Hamming distance",
            "Hamming distance",
            "pairs",
            &bars,
        ),
    );
    if let Some(bins) = &data.jaccard_bins {
        let width = 1.0 / bins.len() as f64;
        let bars: Vec<(String, u64, u64)> = bins
            .iter()
            .enumerate()
            .map(|(i, &n)| (format!("{:.2}", i as f64 * width), n, 0))
            .collect();
        h.push_str("<p>Near pairs by their verified Jaccard similarity (bins of 0.05, labelled by their lower end).</p>\n");
        push_plot(
            h,
            "jaccard",
            plots::bars(
                "Near pairs by Jaccard similarity",
                "Jaccard",
                "pairs",
                &bars,
            ),
        );
    }
}

fn push_plot(h: &mut String, id: &str, svg: Result<String, String>) {
    match svg {
        Ok(svg) => {
            let _ = writeln!(h, "<figure id=\"plot-{id}\">{}</figure>", svg.trim());
        }
        Err(e) => {
            let _ = writeln!(
                h,
                "<p class=\"missing\">The plot could not be drawn: {}</p>",
                escape(&e)
            );
        }
    }
}

fn clusters_section(h: &mut String, data: &RunData, s: &Value) {
    h.push_str("<h2 id=\"clusters\">Clusters</h2>\n");
    if data.cluster_sizes.is_empty() {
        h.push_str("<p>No clusters.</p>\n");
    } else {
        push_plot(
            h,
            "cluster-sizes",
            plots::cluster_sizes(&data.cluster_sizes),
        );
    }
    h.push_str("<div class=\"grid\">");
    if let Some(clusters) = s["largest_clusters"].as_array().filter(|a| !a.is_empty()) {
        h.push_str("<table id=\"largest-clusters\"><tr><th>largest clusters: cluster_id</th><th>documents</th></tr>\n");
        for c in clusters {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"n\">{}</td></tr>",
                c["cluster_id"], c["size"]
            );
        }
        h.push_str("</table>");
    }
    match s["largest_buckets"].as_array().filter(|a| !a.is_empty()) {
        Some(buckets) => {
            h.push_str("<table id=\"largest-buckets\"><tr><th>largest buckets: table</th><th>key</th><th>fingerprints</th></tr>\n");
            for b in buckets {
                let _ = writeln!(
                    h,
                    "<tr><td>{}</td><td><code>{}</code></td><td class=\"n\">{}</td></tr>",
                    b["table"],
                    escape(b["key"].as_str().unwrap_or("")),
                    b["size"]
                );
            }
            h.push_str("</table>");
        }
        None => h.push_str("<p class=\"note\">No table bucket reached 1000 fingerprints (summary.json records only those).</p>"),
    }
    h.push_str("</div>\n");
}

fn doc_header(data: &RunData, doc: u64) -> String {
    match data.docs.get(&doc) {
        Some(d) => format!(
            "doc_id {doc} · id {} · {}:{} · {} bytes{}",
            escape(d.id.as_deref().unwrap_or("(none)")),
            escape(&d.source),
            d.record,
            d.bytes,
            d.url
                .as_deref()
                .map(|u| format!(" · {}", escape(u)))
                .unwrap_or_default()
        ),
        None => format!("doc_id {doc}"),
    }
}

fn text_of<'a>(
    data: &RunData,
    texts: &'a HashMap<texts::Place, Result<String, String>>,
    doc: u64,
) -> Result<&'a str, String> {
    let d = data
        .docs
        .get(&doc)
        .ok_or_else(|| format!("doc_id {doc} is not in fingerprints/"))?;
    match texts.get(&(d.source.clone(), d.record)) {
        Some(Ok(t)) => Ok(t),
        Some(Err(e)) => Err(e.clone()),
        None => Err("not read".into()),
    }
}

/// Two documents side by side, the differing words marked.
fn side_by_side(
    h: &mut String,
    data: &RunData,
    texts: &HashMap<texts::Place, Result<String, String>>,
    a: u64,
    b: u64,
    caption: &str,
) {
    let _ = writeln!(
        h,
        "<p class=\"caption\">{}</p><div class=\"pair\">",
        escape(caption)
    );
    let (ta, tb) = (text_of(data, texts, a), text_of(data, texts, b));
    let (wa, wb) = match (&ta, &tb) {
        (Ok(x), Ok(y)) => {
            let (x, _) = shown_text(x);
            let (y, _) = shown_text(y);
            let (wa, wb) = diff::diff_words(x, y);
            (Some(wa), Some(wb))
        }
        _ => (None, None),
    };
    for (doc, text, words) in [(a, &ta, wa), (b, &tb, wb)] {
        let _ = write!(h, "<div class=\"doc\"><h4>{}</h4>", doc_header(data, doc));
        match (text, words) {
            (Ok(full), Some(words)) => {
                h.push_str("<pre>");
                for w in words {
                    if w.differs {
                        let core = w.text.trim_end();
                        let _ = write!(
                            h,
                            "<mark>{}</mark>{}",
                            escape(core),
                            escape(&w.text[core.len()..])
                        );
                    } else {
                        h.push_str(&escape(w.text));
                    }
                }
                h.push_str("</pre>");
                if shown_text(full).1 {
                    let _ = write!(
                        h,
                        "<p class=\"note\">… {} more bytes not shown</p>",
                        full.len() - shown_text(full).0.len()
                    );
                }
            }
            (Err(e), _) => {
                let _ = write!(
                    h,
                    "<p class=\"missing\">The text cannot be shown: {}</p>",
                    escape(e)
                );
            }
            (Ok(_), None) => {
                h.push_str("<p class=\"missing\">The other text cannot be shown, so no differences are marked.</p>");
                if let Ok(t) = text {
                    let _ = write!(h, "<pre>{}</pre>", escape(shown_text(t).0));
                }
            }
        }
        h.push_str("</div>");
    }
    h.push_str("</div>\n");
}

fn samples_section(
    h: &mut String,
    data: &RunData,
    texts: &HashMap<texts::Place, Result<String, String>>,
) {
    h.push_str("<h2 id=\"largest\">The largest clusters</h2>\n");
    if data.largest.is_empty() {
        h.push_str("<p>No clusters.</p>\n");
    }
    for c in &data.largest {
        let _ = writeln!(
            h,
            "<h3>Cluster {} · {} documents</h3>",
            c.cluster_id, c.size
        );
        match c.kept {
            Some(kept) => {
                for &other in &c.others {
                    side_by_side(
                        h,
                        data,
                        texts,
                        kept,
                        other,
                        &format!("kept doc_id {kept} (left) and removed doc_id {other} (right)"),
                    );
                }
            }
            None => h.push_str(
                "<p class=\"missing\">The cluster has no kept document in clusters/.</p>",
            ),
        }
    }
    h.push_str("<h2 id=\"borderline\">Borderline pairs</h2>\n<p>The near pairs farthest apart (largest Hamming distance, or lowest Jaccard when verified): if these are true duplicates, the threshold is not too loose.</p>\n");
    if data.borderline.is_empty() {
        h.push_str("<p>No near pairs.</p>\n");
    }
    for PairSample {
        doc_a,
        doc_b,
        hamming,
        kind,
        jaccard,
    } in &data.borderline
    {
        let j = jaccard
            .map(|j| format!(", Jaccard {j:.3}"))
            .unwrap_or_default();
        side_by_side(
            h,
            data,
            texts,
            *doc_a,
            *doc_b,
            &format!("{kind} pair: Hamming distance {hamming}{j}"),
        );
    }
}

fn timings_section(h: &mut String, s: &Value) {
    h.push_str("<h2 id=\"timings\">Stage timings</h2>\n");
    let Some(stages) = s["stage_seconds"].as_object().filter(|m| !m.is_empty()) else {
        h.push_str("<p>summary.json has no stage timings.</p>\n");
        return;
    };
    let order = [
        "read",
        "fingerprint",
        "exact",
        "search",
        "cluster",
        "write",
        "total",
    ];
    let mut rows: Vec<(&str, f64)> = stages
        .iter()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_f64()?)))
        .collect();
    rows.sort_by_key(|(k, _)| order.iter().position(|o| o == k).unwrap_or(order.len()));
    let max = rows.iter().map(|r| r.1).fold(1e-9, f64::max);
    h.push_str("<p class=\"note\">Seconds from the start of the run to the end of each stage (the slowest worker's).</p><table id=\"stage-seconds\"><tr><th>stage</th><th>seconds</th><th></th></tr>\n");
    for (stage, secs) in rows {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"n\">{secs:.3}</td><td><span class=\"bar\" style=\"width:{:.0}px\"></span></td></tr>",
            escape(stage),
            (secs / max * 400.0).max(1.0)
        );
    }
    h.push_str("</table>\n");
}

fn shown_table(h: &mut String, id: &str, table: &data::ShownTable) {
    let _ = write!(h, "<table id=\"{id}\"><tr>");
    for c in &table.columns {
        let _ = write!(h, "<th>{}</th>", escape(c));
    }
    h.push_str("</tr>\n");
    for row in &table.rows {
        h.push_str("<tr>");
        for v in row {
            let _ = write!(h, "<td>{}</td>", escape(v));
        }
        h.push_str("</tr>\n");
    }
    let _ = writeln!(
        h,
        "</table><p class=\"note\">{} of {} rows.</p>",
        table.rows.len(),
        table.total
    );
}

fn hosts_section(h: &mut String, data: &RunData) {
    if data.hosts.is_empty() && data.hosts_table.is_none() && data.mirrors_table.is_none() {
        return;
    }
    h.push_str("<h2 id=\"hosts\">Hosts</h2>\n");
    if !data.hosts.is_empty() {
        let _ = writeln!(
            h,
            "<p>The hosts with most documents to remove ({} of {} hosts):</p>",
            data.hosts.len(),
            data.hosts_total
        );
        h.push_str(
            "<table id=\"top-hosts\"><tr><th>host</th><th>documents</th><th>to remove</th></tr>\n",
        );
        for (host, docs, removed) in &data.hosts {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"n\">{docs}</td><td class=\"n\">{removed}</td></tr>",
                escape(host)
            );
        }
        h.push_str("</table>\n");
    }
    if let Some(t) = &data.hosts_table {
        h.push_str("<h3>hosts/</h3>\n");
        shown_table(h, "hosts-table", t);
    }
    if let Some(t) = &data.mirrors_table {
        h.push_str("<h3>Mirror groups (mirrors/)</h3>\n");
        shown_table(h, "mirrors-table", t);
    }
}

fn scores_section(h: &mut String, scores: &Scores, min_jaccard: f64) {
    let _ = writeln!(
        h,
        "<h2 id=\"scores\">Against ground truth</h2>\n<p>As <code>neardup eval</code> scores it: {} truth pairs with Jaccard ≥ {min_jaccard} are the positives.</p>",
        scores.positives
    );
    h.push_str("<table id=\"scores-table\"><tr><th>level</th><th>predicted</th><th>true positives</th><th>precision</th><th>recall</th><th>F1</th></tr>\n");
    for (name, p) in [
        ("reported pairs", &scores.pairs),
        ("pairs within clusters", &scores.clusters),
    ] {
        let _ = writeln!(
            h,
            "<tr><td>{name}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.4}</td><td class=\"n\">{:.4}</td><td class=\"n\">{:.4}</td></tr>",
            p.predicted, p.true_positives, p.precision, p.recall, p.f1
        );
    }
    h.push_str("</table>\n<table id=\"recall-by-band\"><tr><th>truth Jaccard</th><th>truth pairs</th><th>recall (pairs)</th><th>recall (clusters)</th></tr>\n");
    for (band, r) in &scores.by_band {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.4}</td><td class=\"n\">{:.4}</td></tr>",
            escape(band), r.truth_pairs, r.recall_pairs, r.recall_clusters
        );
    }
    h.push_str("</table>\n");
    let _ = writeln!(
        h,
        "<h3>Precision and recall by similarity</h3>\n<p>Reported pairs and positives by the {} the run measured for them (a positive the run did not report is placed by its distance, or by the truth's Jaccard; <code>-</code>: nothing to divide by).</p>\n<table id=\"by-similarity\"><tr><th>{}</th><th>reported pairs</th><th>positives</th><th>true positives</th><th>precision</th><th>recall</th></tr>",
        match scores.similarity_measure {
            "hamming" => "Hamming distance",
            "jaccard" => "Jaccard",
            _ => "similarity",
        },
        super::eval::similarity_heading(scores.similarity_measure)
    );
    for b in &scores.by_similarity {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            escape(&b.band),
            b.predicted,
            b.positives,
            b.true_positives,
            super::eval::ratio(b.precision),
            super::eval::ratio(b.recall)
        );
    }
    h.push_str("</table>\n");
}

fn notes_section(h: &mut String, s: &Value) {
    let list = |name: &str| -> Vec<String> {
        s[name]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str().map(escape)).collect())
            .unwrap_or_default()
    };
    let warnings = list("warnings");
    if !warnings.is_empty() {
        let _ = writeln!(
            h,
            "<h2 id=\"warnings\">Warnings</h2><ul><li>{}</li></ul>",
            warnings.join("</li><li>")
        );
    }
    let _ = writeln!(
        h,
        "<h2 id=\"about\">About this page</h2><p class=\"note\">Plots are drawn from histograms \
         of the whole run. Samples are bounded: {} borderline pairs, the {} largest clusters with \
         {} members each, {} host rows, the first {} bytes of each text (and differences marked \
         within its first {} words). Texts are read back from the inputs by the paths in \
         fingerprints/.</p>",
        data::BORDERLINE_PAIRS,
        data::CLUSTERS_SHOWN,
        data::MEMBERS_SHOWN,
        data::HOST_ROWS,
        MAX_TEXT_BYTES,
        diff::MAX_DIFF_WORDS,
    );
}
