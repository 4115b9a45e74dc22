//! `neardup query`: the indexed documents within `k` bits of each query document, text or
//! fingerprint, from a saved index (`neardup run --index`); of a MinHash index, those that
//! share an LSH band with the query and reach the threshold, verified as the run verified
//! its pairs (exact Jaccard where the index holds shingle sets, else the estimate).
//!
//! Every query is fingerprinted with the index's own scheme, rebuilt from its manifest (the
//! same recipe `neardup hash` applies, checked against the recorded parameters), so a query
//! can never be compared with fingerprints of another kind. Queries are answered in batches
//! across `-w` threads; the answers come out in query order whatever the thread count.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use neardup_core::{encoding, Fingerprinter, Scheme};
use neardup_io::index::{Index, Manifest, MatchRow, Verify};
use neardup_io::parquet_out::{PartWriter, TableMeta, PARAM_FINGERPRINT};
use neardup_io::record::{FieldSpec, Record, RecordError, DEFAULT_ID_FIELD, DEFAULT_TEXT_FIELD};
use neardup_io::source::{Payload, SourceRecord};
use serde_json::json;

use crate::commands::stdout_error;

const EXAMPLES: &str = "\
Examples:
  Make an index while deduplicating a corpus, then ask it about new documents:
    neardup run --index idx --output out corpus.jsonl
    neardup query --index idx new.jsonl
  One text, or one fingerprint (16 hex digits), with a smaller k than the index's:
    neardup query --index idx --text 'the quick brown fox'
    neardup query --index idx -k 1 --fingerprint 83052266e2554591
  Many queries across 2 threads, the answers as Parquet:
    neardup query --index idx -w 2 --output matches.parquet 'batch/*.jsonl'
  A MinHash index (neardup run --scheme minhash --index mh --index-shingles), with a
  stricter threshold than its own:
    neardup query --index mh --threshold 0.9 new.jsonl

Output: one JSON line per match: {\"query\": ..., \"id\": ..., \"doc_id\": ..., \"hamming\": ...,
\"cluster_id\": ...} (query: the query document's id, FILE:LINE without one, text:N for the
N-th --text, the hex of a --fingerprint; cluster_id: null for a document in no cluster).
A MinHash index answers \"jaccard\" and \"jaccard_exact\" instead of \"hamming\": the exact
Jaccard of the shingle sets (true: the index holds them, --index-shingles) or the
signatures' estimate (false).";

/// Texts read per batch (the unit of fingerprinting spread over the threads).
const QUERY_BATCH: usize = 4096;

/// Fingerprints of a simhash index asked together, per thread. A batch walks each table once
/// ([`Index::query_batch`]), so the larger it is, the closer its probes lie in each table:
/// on 10M fingerprints one thread answers about 50,000 queries/s in batches of 4,096 (as
/// many as single queries), 143,000/s in batches of 65,536 and 457,000/s in one batch of
/// 200,000 (docs/performance.md, "10 million fingerprints"). Texts are fingerprinted in
/// batches of [`QUERY_BATCH`] and only their fingerprints and names wait for this many.
const FINGERPRINT_BATCH_PER_THREAD: usize = 131_072;

/// Flags of `neardup query`.
#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct QueryArgs {
    /// The index (made by neardup run --index)
    #[arg(long, value_name = "DIR")]
    pub index: PathBuf,
    /// Report matches within K bits (at most the index's k; default: the index's k).
    /// Simhash indexes only
    #[arg(short = 'k', long, value_name = "K")]
    pub k: Option<u32>,
    /// Report matches of at least this Jaccard similarity (at least the index's threshold;
    /// default: the index's). MinHash indexes only
    #[arg(long, value_name = "T")]
    pub threshold: Option<f64>,
    /// A query text (repeatable)
    #[arg(long = "text", value_name = "TEXT")]
    pub texts: Vec<String>,
    /// A query fingerprint, 16 hex digits (repeatable)
    #[arg(long = "fingerprint", value_name = "HEX")]
    pub fingerprints: Vec<String>,
    /// Write the matches as Parquet to FILE instead of JSON lines to stdout
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Worker threads answering queries
    #[arg(short = 'w', long, default_value_t = 1, value_name = "N")]
    pub workers: usize,
    /// Check only the index files' sizes and headers, not their checksums (faster to open
    /// a large index; a damaged byte then goes unnoticed)
    #[arg(long)]
    pub no_verify: bool,
    /// The JSON field (or Parquet column) holding the text
    #[arg(long, default_value = DEFAULT_TEXT_FIELD, value_name = "FIELD", help_heading = "Input")]
    pub text_field: String,
    /// The JSON field (or Parquet column) holding the query's id
    #[arg(long, default_value = DEFAULT_ID_FIELD, value_name = "FIELD", help_heading = "Input")]
    pub id_field: String,
    /// The records have no id: use FILE:LINE instead
    #[arg(long, conflicts_with = "id_field", help_heading = "Input")]
    pub no_id: bool,
    /// Read each input file whole as one document whose id is its path
    #[arg(long, help_heading = "Input")]
    pub plain: bool,
    /// Skip records that cannot be read instead of stopping
    #[arg(long, help_heading = "Input")]
    pub skip_invalid: bool,
    /// No summary line on stderr
    #[arg(short, long)]
    pub quiet: bool,
    /// Query documents: files, directories or globs; `-` reads stdin
    #[arg(value_name = "INPUT")]
    pub inputs: Vec<String>,
}

/// One query: its name and what to fingerprint.
enum Query {
    Text { name: String, text: String },
    Fingerprint { name: String, fp: u64 },
}

pub fn run(args: &QueryArgs) -> Result<()> {
    if args.inputs.is_empty() && args.texts.is_empty() && args.fingerprints.is_empty() {
        bail!("nothing to query: give INPUT files, --text or --fingerprint");
    }
    if args.workers == 0 {
        bail!("-w must be at least 1");
    }
    let verify = if args.no_verify {
        Verify::Sizes
    } else {
        Verify::Checksums
    };
    let index = Index::open(&args.index, verify)?;
    let dir = args.index.display();
    let threshold = match (index.minhash(), args.threshold) {
        (Some(m), _) if args.k.is_some() => bail!(
            "{dir}: -k applies to simhash indexes; this is a MinHash index (threshold {}): ask with --threshold",
            m.threshold
        ),
        (Some(_), _) if !args.fingerprints.is_empty() => bail!(
            "{dir}: --fingerprint asks a simhash index; this MinHash index is asked with texts (--text, INPUT)"
        ),
        (Some(m), None) => m.threshold,
        (Some(m), Some(t)) => {
            if !(0.0..=1.0).contains(&t) {
                bail!("--threshold {t} is out of range: it must be between 0 and 1");
            }
            super::index::check_threshold(m.threshold, t, &args.index, "--threshold")?;
            t
        }
        (None, Some(_)) => bail!(
            "{dir}: --threshold applies to MinHash indexes; this simhash index (k = {}) is asked with -k",
            index.k()
        ),
        (None, None) => 0.0,
    };
    let k = match args.k {
        None => index.k(),
        Some(k) if k > index.k() => bail!(
            "-k {k} is larger than the index's k = {}: its tables find only matches within {} bits (rebuild the index with -k {k})",
            index.k(),
            index.k()
        ),
        Some(k) => k,
    };
    // Texts need the index's scheme; fingerprints are looked up as they are.
    let scheme = if args.texts.is_empty() && args.inputs.is_empty() {
        Scheme::simhash_doc()
    } else {
        neardup_dataflow::config::options::query_scheme(index.manifest())
            .with_context(|| format!("{}: cannot fingerprint text queries", args.index.display()))?
    };
    let mut queries: Vec<Query> = Vec::new();
    for (i, text) in args.texts.iter().enumerate() {
        queries.push(Query::Text {
            name: format!("text:{}", i + 1),
            text: text.clone(),
        });
    }
    for hex in &args.fingerprints {
        let fp = encoding::from_hex(hex)
            .with_context(|| format!("--fingerprint {hex:?}: expected 16 hex digits"))?;
        queries.push(Query::Fingerprint {
            name: hex.clone(),
            fp,
        });
    }
    let mut sink = Sink::new(args, &index)?;
    let mut answerer = Answerer {
        index: &index,
        scheme,
        k,
        threshold,
        workers: args.workers,
        queries: 0,
        matches: 0,
        skipped: 0,
    };
    answerer.answer(&mut queries, &mut sink)?;
    if !args.inputs.is_empty() {
        let files = super::scan_quietly(&args.inputs, args.plain, args.quiet)?;
        let spec = FieldSpec {
            text_field: args.text_field.clone(),
            id_field: (!args.no_id).then(|| args.id_field.clone()),
            extra_field: None,
            ..Default::default()
        };
        let mut batch = Vec::with_capacity(QUERY_BATCH);
        // A simhash index: the texts' fingerprints, waiting for a large batch.
        let mut ready: Vec<Query> = Vec::new();
        let ready_limit = FINGERPRINT_BATCH_PER_THREAD * args.workers;
        let simhash = index.minhash().is_none();
        let mut skipped = 0;
        for file in &files {
            read_queries(file, &spec, args.skip_invalid, &mut skipped, |q| {
                batch.push(q);
                if batch.len() == QUERY_BATCH {
                    if simhash {
                        ready.extend(answerer.fingerprint(&mut batch));
                        if ready.len() >= ready_limit {
                            answerer.answer(&mut ready, &mut sink)?;
                            ready.clear();
                        }
                    } else {
                        answerer.answer(&mut batch, &mut sink)?;
                    }
                    batch.clear();
                }
                Ok(())
            })?;
        }
        if simhash {
            ready.extend(answerer.fingerprint(&mut batch));
            answerer.answer(&mut ready, &mut sink)?;
        } else {
            answerer.answer(&mut batch, &mut sink)?;
        }
        answerer.skipped = skipped;
    }
    sink.finish()?;
    if !args.quiet {
        let within = match index.minhash() {
            Some(m) => format!(
                "of Jaccard {threshold} or more ({})",
                if m.exact() { "exact" } else { "estimated" }
            ),
            None => format!("within k = {k}"),
        };
        eprintln!(
            "neardup: {} queries, {} matches {within}{}",
            answerer.queries,
            answerer.matches,
            if answerer.skipped > 0 {
                format!(", {} invalid records skipped", answerer.skipped)
            } else {
                String::new()
            }
        );
    }
    Ok(())
}

/// Answers batches of queries across threads.
struct Answerer<'a> {
    index: &'a Index,
    scheme: Scheme,
    k: u32,
    /// A MinHash index's threshold.
    threshold: f64,
    workers: usize,
    queries: u64,
    matches: u64,
    skipped: u64,
}

impl Answerer<'_> {
    /// The fingerprints of `queries` (texts, across the threads) as fingerprint queries of
    /// the same names (moved out of `queries`), in order; empty documents are counted as
    /// asked and dropped (an empty document is never matched, as in a run).
    fn fingerprint(&mut self, queries: &mut [Query]) -> Vec<Query> {
        let asked = queries.len();
        let scheme = &self.scheme;
        let ready: Vec<Query> = across(self.workers, queries, |part| {
            let mut fingerprinter = query_fingerprinter(scheme);
            part.iter_mut()
                .filter_map(|query| {
                    let fp = fingerprint_of(&mut fingerprinter, query)?;
                    Some(Query::Fingerprint {
                        name: std::mem::take(query.name_mut()),
                        fp,
                    })
                })
                .collect::<Vec<_>>()
        })
        .into_iter()
        .flatten()
        .collect();
        self.queries += (asked - ready.len()) as u64;
        ready
    }

    fn answer(&mut self, queries: &mut [Query], sink: &mut Sink) -> Result<()> {
        let (index, scheme, k, threshold) = (self.index, &self.scheme, self.k, self.threshold);
        let answers = across(self.workers, queries, |part| match index.minhash() {
            Some(_) => answer_minhash(index, scheme, threshold, part),
            None => answer_part(index, scheme, k, part),
        });
        self.queries += queries.len() as u64;
        for rows in answers {
            self.matches += rows.len() as u64;
            for row in rows {
                sink.push(row)?;
            }
        }
        Ok(())
    }
}

/// `work` over `items` cut into `workers` consecutive parts, one thread each; the results
/// in the parts' order (nothing for no items).
fn across<T: Send, R: Send>(
    workers: usize,
    items: &mut [T],
    work: impl Fn(&mut [T]) -> R + Sync,
) -> Vec<R> {
    if items.is_empty() {
        return Vec::new();
    }
    let chunk = items.len().div_ceil(workers);
    let work = &work;
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks_mut(chunk)
            .map(|part| s.spawn(move || work(part)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a query thread panicked"))
            .collect()
    })
}

impl Query {
    fn name(&self) -> &String {
        match self {
            Query::Text { name, .. } | Query::Fingerprint { name, .. } => name,
        }
    }

    fn name_mut(&mut self) -> &mut String {
        match self {
            Query::Text { name, .. } | Query::Fingerprint { name, .. } => name,
        }
    }
}

/// The fingerprinter of text queries of a simhash index (their feature sets are not kept).
fn query_fingerprinter(scheme: &Scheme) -> Fingerprinter {
    let mut fingerprinter = Fingerprinter::new(scheme.clone());
    fingerprinter.set_sort_feature_set(false);
    fingerprinter
}

/// A query's simhash: its text's under the index's scheme, or the one given; `None` for an
/// empty document, which is never matched (as in a run).
fn fingerprint_of(fingerprinter: &mut Fingerprinter, query: &Query) -> Option<u64> {
    match query {
        Query::Text { text, .. } => {
            let fp = fingerprinter.fingerprint(text);
            (!fp.is_empty()).then_some(fp.simhash)
        }
        Query::Fingerprint { fp, .. } => Some(*fp),
    }
}

/// From this many queries on, a thread answers its share as one batch
/// ([`Index::query_batch`]: each table walked once) instead of one query at a time.
const BATCH_QUERY_MIN: usize = 64;

/// The matches of `queries`, in order (each query's sorted by doc number).
fn answer_part(index: &Index, scheme: &Scheme, k: u32, queries: &[Query]) -> Vec<MatchRow> {
    let mut fingerprinter = query_fingerprinter(scheme);
    // (name, fingerprint) of every query with one.
    let asked: Vec<(&String, u64)> = queries
        .iter()
        .filter_map(|query| Some((query.name(), fingerprint_of(&mut fingerprinter, query)?)))
        .collect();
    let row = |name: &String, m: neardup_io::index::Match| {
        let doc = index.doc(m.generation, m.row);
        MatchRow {
            query: name.clone(),
            doc_id: doc.doc_id,
            id: doc.id.map(str::to_string),
            hamming: Some(m.hamming as u8),
            jaccard: None,
            jaccard_exact: None,
            cluster_id: doc.cluster_id,
        }
    };
    let mut out = Vec::new();
    if asked.len() >= BATCH_QUERY_MIN {
        let fps: Vec<u64> = asked.iter().map(|a| a.1).collect();
        let mut found: Vec<(usize, MatchRow)> = Vec::new();
        index.query_batch(&fps, k, |i, m| found.push((i, row(asked[i].0, m))));
        found.sort_unstable_by_key(|(i, r)| (*i, r.doc_id));
        out.extend(found.into_iter().map(|(_, r)| r));
        return out;
    }
    for (name, fp) in asked {
        let start = out.len();
        index.query(fp, k, |m| out.push(row(name, m)));
        out[start..].sort_unstable_by_key(|r| r.doc_id);
    }
    out
}

/// The matches of `queries` in a MinHash index, in order (each query's sorted by doc
/// number): each text's signature probes the bands, and its shingle set (where the index
/// verifies by exact Jaccard) verifies the candidates. `--fingerprint` queries are refused
/// before (a signature is no 16 hex digits).
fn answer_minhash(
    index: &Index,
    scheme: &Scheme,
    threshold: f64,
    queries: &[Query],
) -> Vec<MatchRow> {
    let minhash = index.minhash().expect("a MinHash index");
    let mut fingerprinter = Fingerprinter::new(scheme.clone());
    // The verification set: the scheme's own features, or word shingles of another n.
    let mut shingler = minhash
        .exact()
        .then(|| {
            neardup_dataflow::stages::fingerprint::verification_shingler(scheme, minhash.shingle)
        })
        .flatten();
    let mut out = Vec::new();
    for query in queries {
        let Query::Text { name, text } = query else {
            continue;
        };
        let fp = fingerprinter.fingerprint(text);
        if fp.is_empty() {
            continue;
        }
        let set: Option<Vec<u64>> = minhash.exact().then(|| {
            let mut set = match shingler.as_mut() {
                Some(shingler) => {
                    shingler.fingerprint(text);
                    shingler.feature_set().to_vec()
                }
                None => fingerprinter.feature_set().to_vec(),
            };
            set.sort_unstable();
            set.dedup();
            set
        });
        let start = out.len();
        index.query_minhash(fingerprinter.signature(), set.as_deref(), threshold, |m| {
            let doc = index.doc(m.generation, m.row);
            out.push(MatchRow {
                query: name.clone(),
                id: doc.id.map(str::to_string),
                doc_id: doc.doc_id,
                hamming: None,
                jaccard: Some(m.jaccard),
                jaccard_exact: Some(m.exact),
                cluster_id: doc.cluster_id,
            })
        });
        out[start..].sort_unstable_by_key(|r| r.doc_id);
    }
    out
}

/// Reads every record of `file` as a query.
fn read_queries(
    file: &neardup_io::input::InputFile,
    spec: &FieldSpec,
    skip_invalid: bool,
    skipped: &mut u64,
    mut each: impl FnMut(Query) -> Result<()>,
) -> Result<()> {
    let kind = file.format.kind();
    let mut next = SourceRecord::default();
    let mut record = Record::default();
    for unit in kind.units(file)? {
        let mut reader = kind.open(file, &unit, spec)?;
        while reader.next_into(&mut next)? {
            let parsed = match &mut next.payload {
                Payload::Raw(raw) => kind.parse_into(raw, spec, &mut record),
                Payload::Blank(_) => Err(RecordError::EmptyLine),
                Payload::Fields(fields) => {
                    std::mem::swap(&mut record, fields);
                    Ok(())
                }
                Payload::Invalid(e) => Err(e.clone()),
                Payload::Fingerprint(_) | Payload::Skipped(_) => continue,
            };
            if let Err(e) = parsed {
                let err = kind.record_error(&file.path, next.record, e);
                if skip_invalid {
                    *skipped += 1;
                    continue;
                }
                return Err(err.into());
            }
            let name = match &record.id {
                Some(id) => id.clone(),
                None => {
                    let mut name = String::new();
                    kind.record_name(file, next.record, &mut name);
                    name
                }
            };
            each(Query::Text {
                name,
                text: std::mem::take(&mut record.text),
            })?;
        }
    }
    Ok(())
}

/// Where matches go: JSON lines on stdout, or a Parquet file.
enum Sink {
    Json(BufWriter<io::Stdout>, Vec<u8>),
    Parquet(Box<PartWriter<MatchRow>>),
}

impl Sink {
    fn new(args: &QueryArgs, index: &Index) -> Result<Sink> {
        Ok(match &args.output {
            None => Sink::Json(BufWriter::with_capacity(1 << 16, io::stdout()), Vec::new()),
            Some(path) => {
                let m = index.manifest();
                let mut asked =
                    json!({"k": m.k, "tables": m.tables, "query_k": args.k.unwrap_or(m.k)});
                if let Some(minhash) = &m.minhash {
                    asked["minhash"] = json!(minhash);
                    asked["query_threshold"] = json!(args.threshold.unwrap_or(minhash.threshold));
                }
                let meta = TableMeta {
                    scheme: m.scheme.clone(),
                    params: json!({
                        PARAM_FINGERPRINT: m.fingerprint,
                        "index": asked,
                    }),
                };
                Sink::Parquet(Box::new(PartWriter::create_file(path, &meta)?))
            }
        })
    }

    fn push(&mut self, row: MatchRow) -> Result<()> {
        match self {
            Sink::Json(out, line) => {
                line.clear();
                serde_json::to_writer(&mut *line, &row)?;
                line.push(b'\n');
                out.write_all(line).map_err(stdout_error)?;
            }
            Sink::Parquet(writer) => writer.push(row)?,
        }
        Ok(())
    }

    fn finish(self) -> Result<()> {
        match self {
            Sink::Json(mut out, _) => out.flush().map_err(stdout_error)?,
            Sink::Parquet(writer) => {
                writer.commit()?;
            }
        }
        Ok(())
    }
}

/// The scheme an index was made with, rebuilt from its manifest and checked (see
/// [`neardup_dataflow::config::options::index_scheme`]).
pub fn index_scheme(manifest: &Manifest) -> Result<Scheme> {
    Ok(neardup_dataflow::config::options::index_scheme(manifest)?)
}
