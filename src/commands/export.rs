//! `neardup export`: a finished run as the plain tables that simhash dedup reports are
//! exchanged in, for tools that do not read Parquet.
//!
//! The idea: the run's Parquet tables already hold everything; export only renames and
//! reshapes it, one line per row, so that `cut`, `sort -k` and `join` work on it. Three
//! tab-separated files, each with a header line naming its columns (the convention of
//! tab-separated values, IANA `text/tab-separated-values`, and of the truth files
//! `neardup eval` reads):
//!
//! * `matches.tsv` — `id1 id2 diff`: one line per row of `pairs/`, ordered by
//!   (`doc_a`, `doc_b`). `diff` is how far apart the two documents are: the Hamming
//!   distance between their simhashes (0 to k; always 0 for `exact` pairs, whose simhashes
//!   are equal) in a simhash run; in a MinHash run (which has no simhash) the Jaccard
//!   distance `1 - jaccard` with four decimals (`0.0000` for exact pairs), or `-` when the
//!   pairs were not verified and carry no Jaccard.
//! * `clusters.tsv` — `id hash cluster kept diff`: one line per document (row of
//!   `clusters/`), ordered by `doc_id`. `hash` is the simhash as the 16 lower-case hex
//!   digits `neardup hash` prints (the fingerprint's 8 big-endian octets;
//!   docs/fingerprints.md), `-` in a MinHash run; `cluster` is the run's `cluster_id` (the
//!   smallest `doc_id` of the cluster), or -1 for a document in no cluster; `kept` names the
//!   document kept in this one's place (itself when it is kept), and `diff` is how far apart
//!   the two are, as in `matches.tsv` (`-` for a kept document, and in a MinHash run where
//!   the run did not measure it).
//! * `substring_bytes.tsv` — `id x y`, only when the run has a `substrings/` table: one
//!   line per duplicated byte range `[x, y)` of a document's text, ordered by
//!   (`doc_id`, `x`, `y`).
//!
//! `id` is the record's own id when every document has one and no two share it;
//! otherwise (or with `--ids doc-id`) the `doc_id`, so that a line always names one
//! document. Tabs, newlines and backslashes in ids are escaped as `neardup hash` does.
//!
//! The output directory is prepared like a run's ([`run_dir::prepare`]): refused when it
//! holds anything unless `--overwrite`, which replaces only a previous neardup output; it is
//! locked while export writes, each file appears whole (written under a hidden temporary
//! name, then renamed), the marker lists them, and `_SUCCESS` comes last.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use arrow::array::{Array, AsArray};
use arrow::datatypes::UInt64Type;
use neardup_core::{Method, Scheme, SchemeName};
use neardup_io::run_dir::{self, Protected, RunDir, RunOutputs};
use neardup_io::IoError;

pub const EXPORT_EXAMPLES: &str = "\
Examples:
  A run as matches.tsv, clusters.tsv (and substring_bytes.tsv when it has substrings/):
    neardup export out --format tsv --output out-tsv

  The pairs with their distance, closest first:
    tail -n +2 out-tsv/matches.tsv | sort -t$'\\t' -k3,3n | head

Every file has a header line; see docs/outputs.md (Export) for the columns.";

/// The directory of the substring table another command adds to a run (`doc_id`, `id`,
/// `start`, `end`).
pub const SUBSTRINGS_DIR: &str = "substrings";
/// The files export writes, in the order written.
pub const MATCHES: &str = "matches.tsv";
pub const CLUSTERS: &str = "clusters.tsv";
pub const SUBSTRING_BYTES: &str = "substring_bytes.tsv";

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// Tab-separated values with a header line
    Tsv,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdsChoice {
    /// The record ids when every document has a distinct one, else doc_id
    Auto,
    /// Always the record ids (refused when some document has none or two share one)
    Id,
    /// Always doc_id
    DocId,
}

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// The output directory of a finished run (with _SUCCESS)
    #[arg(value_name = "RUN_DIR")]
    pub run: PathBuf,
    /// The format of the files written
    #[arg(long, value_enum, default_value = "tsv")]
    pub format: ExportFormat,
    /// The directory to write into (refused if it exists and is not empty, unless
    /// --overwrite)
    #[arg(short = 'o', long, value_name = "DIR")]
    pub output: PathBuf,
    /// Replace a previous neardup output there (only what neardup wrote)
    #[arg(long)]
    pub overwrite: bool,
    /// What names a document in the files
    #[arg(long, value_enum, default_value = "auto")]
    pub ids: IdsChoice,
    /// No notices on stderr
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

pub fn run(args: &ExportArgs) -> Result<()> {
    let ExportFormat::Tsv = args.format;
    let outputs = run_dir::read_run(&args.run)?;
    let minhash = is_minhash(&args.run, &outputs)?;
    let names = Names::choose(&outputs, args.ids)?;
    if let (Some(reason), false) = (&names.why_doc_ids, args.quiet) {
        eprintln!("neardup: notice: documents are named by doc_id: {reason}");
    }
    let substrings_dir = args.run.join(SUBSTRINGS_DIR);
    let substrings = if substrings_dir.is_dir() {
        Some(read_substrings(&substrings_dir)?)
    } else {
        None
    };

    let protect = [Protected::new(args.run.clone(), "the run read")];
    let _locked = run_dir::prepare(&args.output, args.overwrite, &[], &protect)?;
    let mut files = vec![MATCHES.to_string(), CLUSTERS.to_string()];
    if substrings.is_some() {
        files.push(SUBSTRING_BYTES.to_string());
    }
    run_dir::record_written(&args.output, &files)?;

    write_file(&args.output, MATCHES, |out| {
        write_matches(out, &outputs, &names, minhash)
    })?;
    write_file(&args.output, CLUSTERS, |out| {
        write_clusters(out, &outputs, &names, minhash)
    })?;
    if let Some(rows) = &substrings {
        write_file(&args.output, SUBSTRING_BYTES, |out| {
            write_substrings(out, rows, &names)
        })?;
    }
    run_dir::mark_complete(&args.output)?;
    if !args.quiet {
        eprintln!(
            "neardup: wrote {} in {}",
            files.join(", "),
            args.output.display()
        );
    }
    Ok(())
}

/// Whether the run's fingerprints are MinHash signatures (no simhash): from the tables'
/// metadata, or for tables without it from `summary.json`'s scheme.
fn is_minhash(run: &Path, outputs: &RunOutputs) -> Result<bool> {
    if let Some(meta) = &outputs.meta {
        return Ok(SchemeName::parse(&meta.scheme)
            .is_some_and(|name| matches!(Scheme::named(name).method, Method::MinHash { .. })));
    }
    let path = RunDir::new(run).summary();
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    let summary: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    let scheme = summary["parameters"]["scheme"].as_str().unwrap_or_default();
    Ok(scheme.to_ascii_lowercase().starts_with("minhash"))
}

/// How documents are named in the files.
struct Names<'a> {
    /// doc_id -> record id, when documents are named by their ids.
    ids: Option<&'a HashMap<u64, Option<String>>>,
    /// Why `doc_id`s are used, when they are and the user did not ask for them.
    why_doc_ids: Option<String>,
}

impl<'a> Names<'a> {
    fn choose(outputs: &'a RunOutputs, choice: IdsChoice) -> Result<Self> {
        let doc_ids = |why_doc_ids| Names {
            ids: None,
            why_doc_ids,
        };
        if choice == IdsChoice::DocId {
            return Ok(doc_ids(None));
        }
        let missing = outputs.ids.values().filter(|id| id.is_none()).count();
        let problem = if missing > 0 {
            Some(format!("{missing} documents have no id"))
        } else {
            let mut seen = std::collections::HashSet::with_capacity(outputs.ids.len());
            let shared = outputs
                .ids
                .values()
                .flatten()
                .filter(|id| !seen.insert(id.as_str()))
                .count();
            (shared > 0).then(|| format!("{shared} documents share their id with another"))
        };
        match (problem, choice) {
            (None, _) => Ok(Names {
                ids: Some(&outputs.ids),
                why_doc_ids: None,
            }),
            (Some(p), IdsChoice::Id) => bail!("--ids id: {p} (use --ids doc-id)"),
            (Some(p), _) => Ok(doc_ids(Some(p))),
        }
    }

    fn write(&self, out: &mut impl Write, doc_id: u64) -> std::io::Result<()> {
        match self
            .ids
            .and_then(|ids| ids.get(&doc_id))
            .and_then(|i| i.as_deref())
        {
            Some(id) => crate::commands::hash::write_tsv_field(out, id),
            None => write!(out, "{doc_id}"),
        }
    }
}

/// Writes `dir/name` under a hidden temporary name (`.name.tmp`, which `--overwrite` and
/// directory readers recognise), syncs it and renames it into place.
fn write_file(
    dir: &Path,
    name: &str,
    fill: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
) -> Result<(), IoError> {
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp"));
    let write_err = |cause| IoError::Write {
        path: path.clone(),
        cause,
    };
    let result = (|| {
        let mut out = BufWriter::new(File::create(&tmp)?);
        fill(&mut out)?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(write_err)
}

fn write_matches(
    out: &mut impl Write,
    outputs: &RunOutputs,
    names: &Names,
    minhash: bool,
) -> std::io::Result<()> {
    writeln!(out, "id1\tid2\tdiff")?;
    let mut pairs: Vec<(u64, u64, bool)> = outputs
        .pairs
        .iter()
        .map(|(a, b, kind)| (*a, *b, kind == "exact"))
        .collect();
    pairs.sort_unstable();
    for (a, b, exact) in pairs {
        names.write(out, a)?;
        out.write_all(b"\t")?;
        names.write(out, b)?;
        out.write_all(b"\t")?;
        if minhash {
            match (exact, outputs.jaccard.get(&(a, b))) {
                (true, _) => out.write_all(b"0.0000")?,
                (false, Some(j)) => write!(out, "{:.4}", 1.0 - f64::from(*j))?,
                (false, None) => out.write_all(b"-")?,
            }
        } else {
            let hash = |d| outputs.simhashes.get(&d).copied().unwrap_or_default();
            write!(out, "{}", (hash(a) ^ hash(b)).count_ones())?;
        }
        out.write_all(b"\n")?;
    }
    Ok(())
}

fn write_clusters(
    out: &mut impl Write,
    outputs: &RunOutputs,
    names: &Names,
    minhash: bool,
) -> std::io::Result<()> {
    writeln!(out, "id\thash\tcluster\tkept\tdiff")?;
    let mut docs: Vec<(u64, u64)> = outputs.simhashes.iter().map(|(d, h)| (*d, *h)).collect();
    docs.sort_unstable();
    for (doc, simhash) in docs {
        names.write(out, doc)?;
        if minhash {
            out.write_all(b"\t-\t")?;
        } else {
            write!(out, "\t{}\t", neardup_core::encoding::to_hex(simhash))?;
        }
        let cluster = outputs.clusters.get(&doc);
        let kept = cluster.and_then(|c| outputs.kept.get(c)).copied();
        match cluster {
            Some(cluster) => write!(out, "{cluster}\t")?,
            None => write!(out, "-1\t")?,
        }
        names.write(out, kept.unwrap_or(doc))?;
        match kept.filter(|&k| k != doc) {
            None => writeln!(out, "\t-")?,
            Some(_) if minhash => match outputs.jaccard_to_kept.get(&doc) {
                Some(j) => writeln!(out, "\t{:.4}", 1.0 - f64::from(*j))?,
                None => writeln!(out, "\t-")?,
            },
            Some(k) => writeln!(out, "\t{}", (simhash ^ outputs.simhashes[&k]).count_ones())?,
        }
    }
    Ok(())
}

/// One row of `substrings/`: a duplicated byte range `[start, end)` of a document's text.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SubstringRow {
    doc_id: u64,
    start: u64,
    end: u64,
}

/// Reads every committed part of `substrings/` (columns `doc_id`, `start`, `end`, UInt64).
fn read_substrings(dir: &Path) -> Result<Vec<SubstringRow>, IoError> {
    let mut rows = Vec::new();
    run_dir::each_part_batch(dir, None, |path, batch| {
        let bad = |reason: String| IoError::BadTable {
            path: path.to_path_buf(),
            reason,
        };
        let column = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| bad(format!("no column {name:?}")))?
                .as_primitive_opt::<UInt64Type>()
                .ok_or_else(|| bad(format!("column {name:?} is not UInt64")))
        };
        let (docs, starts, ends) = (column("doc_id")?, column("start")?, column("end")?);
        for i in 0..batch.num_rows() {
            if docs.is_null(i) || starts.is_null(i) || ends.is_null(i) {
                return Err(bad(format!("row {i} of a batch has a null")));
            }
            rows.push(SubstringRow {
                doc_id: docs.value(i),
                start: starts.value(i),
                end: ends.value(i),
            });
        }
        Ok(())
    })?;
    rows.sort_unstable();
    Ok(rows)
}

fn write_substrings(
    out: &mut impl Write,
    rows: &[SubstringRow],
    names: &Names,
) -> std::io::Result<()> {
    writeln!(out, "id\tx\ty")?;
    for row in rows {
        names.write(out, row.doc_id)?;
        writeln!(out, "\t{}\t{}", row.start, row.end)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::commands::hash::write_tsv_field;

    #[test]
    fn ids_are_escaped_like_hash_does() {
        let mut out = Vec::new();
        write_tsv_field(&mut out, "a\tb\nc\\d\re").unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "a\\tb\\nc\\\\d\\re");
    }
}
