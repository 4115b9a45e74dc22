//! `neardup run`: the whole job over a corpus, and `neardup search`: the search alone over
//! an existing fingerprint table. Both hand a `JobConfig` to `neardup_dataflow::run_job`.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Result};
use neardup_dataflow::config::{
    ClusterMode, JobConfigBuilder, SubstringJob, VerifyMode, DEFAULT_K, DEFAULT_TABLES,
};
use neardup_dataflow::finish::{self, AgainstStep, Finish, IndexStep, RunOutcome};
use neardup_dataflow::{run_job_with, JobConfig, JobError, JobInput, JobSummary, Progress};
use neardup_io::input::scan_inputs;
use neardup_io::source::Format;

use super::substrings::{OccurrencesChoice, SnapChoice};
use crate::cluster_args::ClusterArgs;
use crate::progress_view::{LogFormat, ProgressView};
use crate::scheme_args::SchemeArgs;

pub const RUN_EXAMPLES: &str = "\
Examples:
  The bundled example corpus, one worker:
    neardup run --output out examples/corpus.jsonl

  A compressed corpus with 2 worker threads, keeping the longest of each cluster:
    neardup run -w 2 --keep longest --output out corpus.jsonl.zst

  Looser matching (k = 6) over Parquet files, reading the `content` column:
    neardup run -k 6 --text-field content --output out 'data/*.parquet'

  Two processes on one machine (see docs/deploy.md for clusters):
    neardup run -n 2 -p 0 -h hosts.txt --output out corpus/ &
    neardup run -n 2 -p 1 -h hosts.txt --output out corpus/

  A crawl in an S3 bucket, read where it lies (credentials and endpoint from the AWS_*
  environment variables; gs://, az:// and https:// too; docs/inputs.md):
    neardup run -w 8 --html main --output out 's3://crawl/segments/*/warc/*.warc.gz'

  The output in a bucket too (each object whole, _SUCCESS last; docs/outputs.md):
    neardup run -w 8 --output s3://bucket/runs/2026-11/ 's3://crawl/segments/*/*.jsonl.zst'

  A web crawl (WARC or ARC, gzip or not), pages reduced to their main content, keeping
  the newest capture of each cluster:
    neardup run --html main --keep newest --output out crawl/*.warc.gz

  The same crawl, keeping each page's copy on the canonical host of its mirror group
  (hosts/), the newest capture among those:
    neardup run --html main --keep canonical-host --output out crawl/*.warc.gz

  Keep an index of week 1, then deduplicate week 2 against it and add it, keeping the
  longest of old and new copies (docs/index.md):
    neardup run --index idx --output week1 week1/
    neardup run --against idx --update-index --keep longest --output week2 week2/

  The same with MinHash (the index keeps band tables, signatures and shingle sets, so that
  queries and later batches are verified by exact Jaccard as the run was):
    neardup run --scheme minhash --threshold 0.8 --index mh --index-shingles --output week1 week1/
    neardup run --scheme minhash --threshold 0.8 --against mh --update-index --output week2 week2/

  Near-duplicates removed, then repeated passages of 100 bytes or more in the kept
  documents (substrings/, see docs/substrings.md):
    neardup run --substrings 100 --output out corpus.jsonl.zst

  The same, and the deduplicated corpus with those passages struck from the kept documents:
    neardup run --substrings 100 --write-dedup clean --strike substrings --output out corpus.jsonl.zst

  Query the results with DuckDB:
    duckdb -c \"select * from 'out/pairs/*.parquet' limit 10\"

Outputs (docs/outputs.md): fingerprints/, pairs/, clusters/ (Parquet parts), summary.json,
and _SUCCESS once everything is complete.";

pub const SEARCH_EXAMPLES: &str = "\
Examples:
  Search a previous run's fingerprints again with a larger k:
    neardup search -k 6 --output out-k6 out/fingerprints/

  Fingerprints computed elsewhere (columns doc_id and simhash, UInt64 or Int64):
    neardup search --output out 'fps/*.parquet'

  A billion fingerprints over 16 workers, the search planned within 40 GiB per process
  (the rounds chosen are in summary.json, search_plan):
    neardup search -w 16 --memory-limit 40G --output out 'fps/*.parquet'

  A billion fingerprints on one laptop: what does not fit 8 GiB spills to a scratch disk
  (about 400 bytes per fingerprint there at k = 3; --table-rounds 16 cuts it to about 50):
    neardup search --memory-limit 8G --spill-dir /scratch --output out 'fps/*.parquet'";

/// Flags shared by `run` and `search`: the search, the clustering, the output, parallelism.
#[derive(clap::Args, Debug)]
pub struct JobArgs {
    /// Report pairs whose fingerprints differ in at most K bits
    #[arg(short = 'k', long, default_value_t = DEFAULT_K, value_name = "K")]
    pub k: u32,
    /// Permutation-table design: auto (manku16 for k = 3, else blocks:k+2), manku16, blocks:B
    #[arg(long, default_value = DEFAULT_TABLES, value_name = "DESIGN")]
    pub tables: String,
    /// Search the tables (or LSH bands) in N rounds, one after the other, to bound memory;
    /// auto: the fewest rounds whose estimated memory fits --memory-limit
    #[arg(long, default_value = "auto", value_name = "N|auto")]
    pub table_rounds: String,
    /// Memory the table search may plan for in each process: a size (16G, 512M), auto (70%
    /// of physical memory) or none. Its estimate and the rounds chosen are in summary.json.
    /// A search that does not fit spills to disk (see --spill-dir)
    #[arg(long, default_value = "auto", value_name = "SIZE|auto|none")]
    pub memory_limit: String,
    /// Where the search spills when it does not fit --memory-limit (default: _spill/ inside
    /// the output directory; removed when the job ends)
    #[arg(long, value_name = "DIR")]
    pub spill_dir: Option<PathBuf>,
    /// Which document of a cluster to keep: first, longest, shortest, newest, oldest (by
    /// fetch time: archives, --time-field), max:COLUMN, min:COLUMN, or
    /// canonical-host[:POLICY] (inputs with URLs: a copy off mirroring hosts, then POLICY,
    /// by default the default below) [default: newest when capture times are known
    /// (archive inputs, --time-field), else first]
    #[arg(long, value_name = "POLICY")]
    pub keep: Option<String>,
    /// Output directory, or a prefix of an object store (s3://, gs://, az://; staged under
    /// TMPDIR, each object uploaded whole, _SUCCESS last); refused if it exists and is not
    /// empty, unless --overwrite
    #[arg(short = 'o', long, value_name = "DIR")]
    pub output: PathBuf,
    /// Replace a previous neardup output (only what neardup wrote; a directory holding
    /// anything else, an input or the spill directory is refused)
    #[arg(long)]
    pub overwrite: bool,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// No progress and no summary (errors are still printed)
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// How progress and the summary are written to stderr
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Print help
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub scheme: SchemeArgs,
    #[command(flatten)]
    pub job: JobArgs,
    #[command(flatten)]
    pub fields: crate::input_args::FieldArgs,
    /// Do not fold exact duplicates before the near search
    #[arg(long)]
    pub no_exact: bool,
    /// How pairs become clusters: verified (the default: stars around the kept documents,
    /// chosen to remove as many documents as possible; every removed document is a verified
    /// duplicate of the one kept), star (stars whose kept documents are the --keep policy's
    /// first choices), components (connected components: A~B~C joins A and C although they
    /// may not be alike; the default under --keep canonical-host)
    #[arg(long, value_enum)]
    pub cluster: Option<ClusterChoice>,
    /// Warn in the summary when a cluster holds more than N documents
    #[arg(long, default_value_t = neardup_dataflow::config::DEFAULT_CLUSTER_WARNING, value_name = "N")]
    pub cluster_warning: u64,
    /// Skip invalid records (counted and reported) instead of failing
    #[arg(long)]
    pub skip_invalid: bool,
    /// Also write the deduplicated corpus to DIR: the kept documents in each input's own
    /// format, and removed.parquet (which document each removed one duplicates)
    #[arg(long, value_name = "DIR")]
    pub write_dedup: Option<PathBuf>,
    /// Also save an index of the corpus in DIR (new or empty; written by process 0 from the
    /// finished run): query it with `neardup query`, see docs/index.md
    #[arg(long, value_name = "DIR", help_heading = "Index")]
    pub index: Option<PathBuf>,
    /// With --index of a MinHash run: also keep each document's shingle set, so that
    /// queries and --against runs verify candidates by exact Jaccard as the run did (else
    /// by the signatures' estimate); about 8 bytes per distinct shingle
    #[arg(long, requires = "index", help_heading = "Index")]
    pub index_shingles: bool,
    /// Deduplicate this batch against the index in DIR: the pairs between new and indexed
    /// documents and the clusters they form go to against-*.parquet in the output (the
    /// indexed documents' decisions stand, and a new document is removed only for a kept
    /// one it duplicates; with --cluster components, clusters join and merge, indexed
    /// documents are kept before new copies, and with --keep old and new are ranked
    /// together, ties to the indexed one)
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with = "index",
        help_heading = "Index"
    )]
    pub against: Option<PathBuf>,
    /// With --against: add the batch to the index as a new generation (atomically: a
    /// failed or interrupted run leaves the index as it was)
    #[arg(long, requires = "against", help_heading = "Index")]
    pub update_index: bool,
    /// With --index or --update-index of a simhash run: do not make the index ready for
    /// `neardup serve` (by default every file is checked once and the service's saved state
    /// computed now, 154 s at 100M documents on 2 cores, so that the service starts in
    /// seconds; without it, its first start does this)
    #[arg(long, help_heading = "Index")]
    pub no_serve_state: bool,
    /// When the run succeeds, also write OUTPUT/report.html (see `neardup report`)
    #[arg(long)]
    pub report: bool,
    /// Take up a failed run of the same command in --output: its fingerprints are reused,
    /// so the corpus is not read again. Refused, naming the difference, when an input or a
    /// parameter changed; a missing or empty --output starts from the beginning (see
    /// docs/outputs.md)
    #[arg(long, conflicts_with = "overwrite")]
    pub resume: bool,
    #[command(flatten)]
    pub quality: QualityArgs,
    #[command(flatten)]
    pub documents: crate::input_args::DocumentArgs,
    /// How URLs are normalized before documents with the same URL are paired (kind `url`):
    /// none, standard (case, IDNA, ports, dot segments, escapes, fragment, sorted query
    /// without tracking and session parameters) or aggressive (also http = https, no
    /// www./m., no index.html); rules in docs/inputs.md
    #[arg(
        long,
        value_enum,
        default_value = "standard",
        value_name = "MODE",
        help_heading = "Documents"
    )]
    pub url_normalize: UrlNormalizeChoice,
    /// Site templates: before fingerprinting, learn the blocks of text that repeat on many
    /// pages of each host (menus, sidebars, footers) and drop them from pages extracted in
    /// main mode (web archives, or --url-field with --html main); off keeps the per-page
    /// rules only; rules in docs/inputs.md
    #[arg(
        long,
        value_enum,
        default_value = "on",
        value_name = "ON|OFF",
        help_heading = "Documents"
    )]
    pub site_templates: OnOff,
    /// Mirror hosts: the fewest shared paths a host pair (with its prefixes) needs to be
    /// reported in mirrors/
    #[arg(long, default_value_t = neardup_core::mirrors::DEFAULT_MIN_PATHS, value_name = "N", help_heading = "Documents")]
    pub mirror_min_paths: u64,
    /// Mirror hosts: the share of a prefix's paths that must be shared (both sides: mirror;
    /// one side: partial)
    #[arg(long, default_value_t = neardup_core::mirrors::DEFAULT_MIN_SHARE, value_name = "S", help_heading = "Documents")]
    pub mirror_min_share: f64,
    #[command(flatten)]
    pub passages: PassageArgs,
    /// Input files, directories, globs or URLs (s3://, gs://, az://, https://): JSONL (.gz,
    /// .zst), Parquet, WARC (.warc, .warc.gz, .warc.zst) or ARC (.arc, .arc.gz)
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<String>,
}

/// Repeated passages in the documents the clusters keep (docs/substrings.md).
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Repeated passages")]
pub struct PassageArgs {
    /// Also search repeated passages of N bytes or more in the documents the clusters keep
    /// (as `neardup substrings` over them): substrings/ and counts in summary.json
    #[arg(long, value_name = "N")]
    pub substrings: Option<usize>,
    /// With --substrings: which copies are reported, later (all but the first in corpus
    /// order) or all [default: later]
    #[arg(long, value_enum, requires = "substrings")]
    pub occurrences: Option<OccurrencesChoice>,
    /// With --substrings: where range ends may fall, chars or words [default: chars]
    #[arg(long, value_enum, requires = "substrings")]
    pub snap: Option<SnapChoice>,
    /// With --substrings and --write-dedup: take the ranges out of the kept documents'
    /// text in the deduplicated corpus (JSONL, Parquet and plain text; not archives or
    /// --html)
    #[arg(long, value_enum, value_name = "WHAT", requires_all = ["substrings", "write_dedup"])]
    pub strike: Option<StrikeChoice>,
}

/// What `--strike` takes out of the deduplicated corpus.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrikeChoice {
    /// The ranges of substrings/
    Substrings,
}

impl PassageArgs {
    /// The search asked for, if any.
    fn job(&self) -> Result<Option<SubstringJob>> {
        let Some(min_bytes) = self.substrings else {
            return Ok(None);
        };
        if min_bytes == 0 {
            bail!("--substrings 0: a repeat is at least 1 byte long");
        }
        let settings = super::substrings::settings(
            min_bytes,
            self.occurrences.unwrap_or(OccurrencesChoice::Later),
            self.snap.unwrap_or(SnapChoice::Chars),
        );
        let mut job = SubstringJob::after_clusters(settings);
        job.strike = self.strike == Some(StrikeChoice::Substrings);
        Ok(Some(job))
    }
}

/// Candidate generation in MinHash mode and verification of candidate pairs.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Quality")]
pub struct QualityArgs {
    /// MinHash mode (--method minhash): the Jaccard similarity to find; sets the LSH banding
    /// and, with verification, the minimum exact Jaccard of a reported pair
    #[arg(long, value_name = "T")]
    pub threshold: Option<f64>,
    /// MinHash mode: the similarity the LSH banding is tuned for (default: --threshold minus
    /// 0.1, so that pairs near the threshold become candidates; verification then drops the
    /// extra ones)
    #[arg(long, value_name = "T")]
    pub lsh_threshold: Option<f64>,
    /// MinHash mode: LSH bands (with --rows; default: chosen from --lsh-threshold)
    #[arg(long, value_name = "B", requires = "rows")]
    pub bands: Option<usize>,
    /// MinHash mode: rows per band
    #[arg(long, value_name = "R", requires = "bands")]
    pub rows: Option<usize>,
    /// Verify candidate pairs: jaccard (exact Jaccard of word shingle sets; the default in
    /// MinHash mode, and for simhash over web pages read as their main text: web archives,
    /// or --url-field with --html main), minhash (the signatures' Jaccard estimate:
    /// cheaper, approximate; MinHash mode only) or none (the default for other simhash
    /// runs)
    #[arg(long, value_enum)]
    pub verify: Option<VerifyChoice>,
    /// Drop verified pairs below this exact Jaccard (default: --threshold in MinHash mode,
    /// 0.5 for simhash over web pages, else 0 for simhash, which then only annotates pairs)
    #[arg(long, value_name = "T")]
    pub min_jaccard: Option<f64>,
    /// Verification compares sets of word N-grams (default: the MinHash shingle size, 5 for
    /// simhash over web pages, else 3)
    #[arg(long, value_name = "N")]
    pub verify_shingle: Option<usize>,
    /// Where verification finds the shingle sets it compares: memory (kept as the corpus is
    /// read, about 2 bytes per byte of text), inputs (made again from the inputs, read a
    /// second time, for the documents in candidate pairs only, and kept in sorted files in
    /// the spill directory), or auto: inputs when the sets would take more than 30% of
    /// --memory-limit
    #[arg(long, value_enum, default_value = "auto", value_name = "WHERE")]
    pub verify_from: VerifyFromChoice,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyFromChoice {
    Memory,
    Inputs,
    Auto,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyChoice {
    None,
    Jaccard,
    Minhash,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnOff {
    On,
    Off,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrlNormalizeChoice {
    None,
    Standard,
    Aggressive,
}

impl UrlNormalizeChoice {
    fn mode(self) -> neardup_core::urlnorm::UrlNormalize {
        use neardup_core::urlnorm::UrlNormalize;
        match self {
            UrlNormalizeChoice::None => UrlNormalize::None,
            UrlNormalizeChoice::Standard => UrlNormalize::Standard,
            UrlNormalizeChoice::Aggressive => UrlNormalize::Aggressive,
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterChoice {
    Verified,
    Star,
    Components,
}

impl QualityArgs {
    /// Hands the quality flags to the builder, which derives the banding and verification.
    fn configure(&self, builder: JobConfigBuilder) -> JobConfigBuilder {
        builder
            .threshold(self.threshold)
            .lsh_threshold(self.lsh_threshold)
            .banding(self.bands.zip(self.rows))
            .verify(self.verify.map(|v| match v {
                VerifyChoice::None => VerifyMode::None,
                VerifyChoice::Jaccard => VerifyMode::Jaccard,
                VerifyChoice::Minhash => VerifyMode::MinHash,
            }))
            .min_jaccard(self.min_jaccard)
            .verify_shingle(self.verify_shingle)
            .verify_from(match self.verify_from {
                VerifyFromChoice::Memory => neardup_dataflow::config::VerifyFrom::Memory,
                VerifyFromChoice::Inputs => neardup_dataflow::config::VerifyFrom::Inputs,
                VerifyFromChoice::Auto => neardup_dataflow::config::VerifyFrom::Auto,
            })
    }
}

#[derive(clap::Args, Debug)]
pub struct SearchArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// Also save an index of the fingerprints in DIR (new or empty): query it with `neardup
    /// query`, see docs/index.md
    #[arg(long, value_name = "DIR", help_heading = "Index")]
    pub index: Option<PathBuf>,
    /// Fingerprint tables (Parquet with doc_id and simhash columns): files, directories, globs
    #[arg(required = true, value_name = "FINGERPRINTS")]
    pub inputs: Vec<String>,
}

impl JobArgs {
    /// The parts of the configuration common to both commands.
    fn configure(&self, builder: JobConfigBuilder) -> Result<JobConfigBuilder> {
        Ok(builder
            .k(self.k)
            .tables(&self.tables)
            .keep_or_default(self.keep.as_deref())
            .overwrite(self.overwrite)
            .parallelism(self.cluster.parallelism()?)
            .control(self.cluster.control()?)
            .table_rounds(crate::memory_args::table_rounds(&self.table_rounds)?)
            .memory_limit(crate::memory_args::memory_limit(&self.memory_limit)?)
            .spill_dir(self.spill_dir.clone())
            .command_line(std::env::args().collect()))
    }
}

pub fn run(args: &RunArgs) -> Result<()> {
    for (dir, what) in [(&args.index, "index"), (&args.against, "--against index")] {
        if let Some(dir) = dir {
            neardup_io::store::local_only(dir, what)?;
        }
    }
    let files = inputs(&args.inputs, &args.job)?;
    let mut fields = args.fields.spec();
    args.documents.apply(&mut fields)?;
    let builder = JobConfig::builder(
        JobInput::Documents { files, fields },
        args.job.output.clone(),
    )
    .scheme(args.scheme.to_scheme()?)
    .exact(!args.no_exact)
    .skip_invalid(args.skip_invalid)
    .write_dedup(args.write_dedup.clone())
    .cluster_choice(args.cluster.map(|choice| match choice {
        ClusterChoice::Verified => ClusterMode::Verified,
        ClusterChoice::Star => ClusterMode::Star,
        ClusterChoice::Components => ClusterMode::Components,
    }))
    .cluster_warning(args.cluster_warning)
    .url_normalize(args.url_normalize.mode())
    .site_templates(args.site_templates == OnOff::On)
    .mirrors(neardup_core::mirrors::MirrorParams {
        min_paths: args.mirror_min_paths,
        min_share: args.mirror_min_share,
        ..Default::default()
    })
    .resume(args.resume)
    .substrings(args.passages.job()?);
    let mut config = args
        .job
        .configure(args.quality.configure(builder))?
        .build()?;
    let finish = index_steps(args, &mut config)?;
    let keep = config.keep.describe();
    if args.resume && !args.job.quiet {
        resume_notice(&config, args.job.log_format);
    }
    let outcome = execute(config, finish, &args.job)?;
    report_index_steps(args, &outcome, &keep);
    if !args.no_serve_state {
        prepare_serving(args, &outcome);
    }
    Ok(())
}

/// The index the run wrote or added to, made ready for `neardup serve`
/// ([`neardup_dataflow::live::service::prepare`]). The run is committed: where this fails,
/// a warning says so, and the service's first start does it instead.
fn prepare_serving(args: &RunArgs, outcome: &RunOutcome) {
    let dir = match (&outcome.index, &args.against, &outcome.against) {
        (Some(written), _, _) => &written.dir,
        (None, Some(dir), Some(done)) if done.added => dir,
        _ => return,
    };
    let state = dir.join(neardup_dataflow::live::service::STATE_FILE);
    match neardup_dataflow::live::service::prepare(dir) {
        Ok(Some(_)) if args.job.quiet => {}
        Ok(Some(done)) if args.job.log_format == LogFormat::Json => eprintln!(
            "{}",
            serde_json::json!({"event": "serve_state", "path": state, "computed": done.computed,
                "clusters": done.clusters, "clustered": done.clustered, "millis": done.millis})
        ),
        Ok(Some(done)) => eprintln!(
            "  serve state: {} ({} clusters of {} documents){}, {:.1} s",
            state.display(),
            done.clusters,
            done.clustered,
            if done.computed { "" } else { " already current" },
            done.millis as f64 / 1e3
        ),
        Ok(None) => {}
        Err(e) => eprintln!(
            "neardup: warning: {}: the saved state of `neardup serve` was not written ({e}); the service's first start will compute it",
            dir.display()
        ),
    }
}

/// `--index` and `--against`, set up before the job (see `neardup_dataflow::finish`): the
/// index created (and locked), so that a directory it cannot go into is refused before the
/// work, or the run checked against the index; process 0 takes the step before the run's
/// `_SUCCESS`.
fn index_steps(args: &RunArgs, config: &mut JobConfig) -> Result<Finish> {
    let lead = args.job.cluster.process == 0;
    let mut finish = Finish::default();
    if let (Some(dir), true) = (&args.index, lead) {
        match IndexStep::create(dir, config, args.index_shingles)? {
            Some(step) => finish = Finish::index(step),
            None => notice(&args.job, &format!(
                "--index {}: the index already holds this batch (written by an earlier run of the same job that did not finish): it is not written again",
                dir.display()
            )),
        }
    }
    // A MinHash index keeps each document's signature (and shingle set), written beside
    // the resume parts by every worker.
    let index = args.index.as_ref().map(|_| args.index_shingles);
    config.index_sketches =
        finish::index::sketches_to_keep(config, index, args.against.as_deref())?;
    if let Some(dir) = &args.against {
        let (manifest, held) = finish::against::check(dir, config, args.update_index)?;
        if lead {
            if let Some(generation) = held {
                notice(&args.job, &format!(
                    "--against {}: the index already holds this batch (generation {generation}, added by an earlier run of the same job that did not finish): it is compared with the index as it was before it, and not added again",
                    dir.display()
                ));
            }
            let keep_given = args.job.keep.is_some();
            let step = AgainstStep::new(dir, manifest, config, args.update_index, keep_given)?;
            finish = Finish::against(step);
        }
    }
    Ok(finish)
}

/// Prints what `--against` and `--index` did (the run is committed).
fn report_index_steps(args: &RunArgs, outcome: &RunOutcome, keep: &str) {
    if args.job.quiet {
        return;
    }
    if let (Some(dir), Some(done)) = (&args.against, &outcome.against) {
        let found = &done.found;
        if found.unranked > 0 {
            eprintln!(
                "neardup: warning: --keep {}: {} indexed documents of the batch's clusters have no rank under it (their generation was ranked by another policy) and rank last",
                keep, found.unranked
            );
        }
        eprintln!(
            "  against {}: {} new documents, {} pairs among them, {} with indexed documents, {} indexed clusters joined, {} merged, {} new documents removed{}",
            dir.display(),
            found.new_documents,
            found.batch_pairs,
            found.indexed_pairs,
            found.joined,
            found.merges,
            found.removed,
            if done.added { "; added to the index" } else { "" }
        );
    }
    if let Some(written) = &outcome.index {
        eprintln!(
            "  index: {} ({} documents)",
            written.dir.display(),
            written.documents
        );
    }
}

/// A notice on stderr (unless `--quiet`), as text or a JSON event.
fn notice(args: &JobArgs, notice: &str) {
    if args.quiet {
        return;
    }
    if args.log_format == LogFormat::Json {
        eprintln!(
            "{}",
            serde_json::json!({"event": "notice", "notice": notice})
        );
    } else {
        eprintln!("neardup: notice: {notice}");
    }
}

/// Says how `--resume` will start (refusals are the job's errors, reported by it).
fn resume_notice(config: &JobConfig, format: LogFormat) {
    use neardup_dataflow::config::resume::{examine, Examined};
    let dir = config.output.display();
    let notice = match examine(config) {
        Ok(Examined::Nothing) => format!("--resume: nothing to resume in {dir}: starting from the beginning"),
        Ok(Examined::Incomplete { committed, expected }) => format!(
            "--resume: the failed run in {dir} committed the fingerprints of {committed} of {expected} workers: reading the corpus again"
        ),
        Ok(Examined::Fingerprints { parts }) => format!(
            "--resume: reusing the fingerprints of the failed run in {dir} ({} parts): the corpus is not read",
            parts.len()
        ),
        Err(_) => return,
    };
    if format == LogFormat::Json {
        eprintln!(
            "{}",
            serde_json::json!({"event": "notice", "notice": notice})
        );
    } else {
        eprintln!("neardup: notice: {notice}");
    }
}

pub fn search(args: &SearchArgs) -> Result<()> {
    if let Some(dir) = &args.index {
        neardup_io::store::local_only(dir, "index")?;
    }
    let files = inputs(&args.inputs, &args.job)?;
    if let Some(other) = files.iter().find(|f| f.format != Format::Parquet) {
        bail!("{} is not a Parquet fingerprint table (neardup search reads doc_id and simhash columns)", other.path.display());
    }
    let files: Vec<PathBuf> = files.into_iter().map(|f| f.path).collect();
    // Tables neardup wrote say which scheme made them: only simhash fingerprints, all made
    // alike, can be searched (tables of other tools have no such metadata and are taken).
    neardup_io::source::fingerprints::check_tables(&files)?;
    let tables = files.clone();
    let builder =
        JobConfig::builder(JobInput::Fingerprints { files }, args.job.output.clone()).exact(false);
    let config = args.job.configure(builder)?.build()?;
    // --index: the generation is written before `_SUCCESS` (process 0, see
    // `neardup_dataflow::finish`), so a complete run always has its index.
    let finish = match (&args.index, args.job.cluster.process) {
        (Some(dir), 0) => Finish::index(IndexStep::for_tables(dir, &tables, &config)?),
        _ => Finish::default(),
    };
    let outcome = execute(config, finish, &args.job)?;
    if let Some(written) = &outcome.index {
        if !args.job.quiet {
            eprintln!(
                "  index: {} ({} documents)",
                written.dir.display(),
                written.documents
            );
        }
    }
    Ok(())
}

/// The input files, with a notice for each kind of thing left out (see
/// `neardup_io::input`), and SIGINT/SIGTERM handled from here on.
fn inputs(patterns: &[String], args: &JobArgs) -> Result<Vec<neardup_io::input::InputFile>> {
    let scan = scan_inputs(patterns, false)?;
    for text in scan.notices() {
        notice(args, &text);
    }
    let cluster = &args.cluster;
    let process = (cluster.processes > 1).then(|| {
        let address = cluster
            .parallelism()
            .ok()
            .and_then(|p| p.addresses.get(cluster.process).cloned())
            .unwrap_or_default();
        (cluster.process, address)
    });
    crate::interrupt::install(args.output.clone(), process)?;
    Ok(scan.files)
}

fn execute(config: JobConfig, finish: Finish, args: &JobArgs) -> Result<RunOutcome> {
    let near_rule = match (&config.lsh, config.verify) {
        (Some(_), Some(v)) => format!("near with Jaccard >= {}", v.min_jaccard),
        (Some(_), None) => "near LSH candidates, unverified".to_string(),
        (None, Some(v)) if v.min_jaccard > 0.0 => format!(
            "near within k = {} and Jaccard >= {}",
            config.design.k(),
            v.min_jaccard
        ),
        (None, _) => format!("near within k = {}", config.design.k()),
    };
    let output = config.output.clone();
    let progress = Arc::new(Progress::default());
    let view = ProgressView::start(progress.clone(), args.log_format, args.quiet);
    let result = run_job_with(config, finish, progress);
    drop(view);
    // An interrupted run ends here, whatever its result.
    crate::interrupt::finish(&output);
    match result {
        Ok(outcome) => {
            if !args.quiet {
                report(&outcome.summary, &near_rule, &output, args.log_format);
            }
            Ok(outcome)
        }
        Err(JobError::Failed(summary)) => {
            if !args.quiet && args.log_format == LogFormat::Json {
                eprintln!(
                    "{}",
                    serde_json::json!({"event": "failed", "errors": summary.errors})
                );
            }
            Err(super::failed(&summary, &output))
        }
        Err(e) => Err(e.into()),
    }
}

fn report(summary: &JobSummary, near_rule: &str, output: &std::path::Path, format: LogFormat) {
    if format == LogFormat::Json {
        eprintln!(
            "{}",
            serde_json::json!({"event": "summary", "summary": summary})
        );
        return;
    }
    let c = &summary.counts;
    let secs = summary.stage_seconds.get("total").copied().unwrap_or(0.0);
    let mb = c.bytes as f64 / 1e6;
    eprintln!(
        "neardup: {} documents ({mb:.1} MB of text) in {secs:.2} s, {:.1} MB/s",
        c.documents,
        mb / secs.max(1e-9)
    );
    eprintln!(
        "  empty {} · skipped {} · duplicate ids {} · exact groups {} ({} duplicates)",
        c.empty, c.skipped, c.duplicate_ids, c.exact_groups, c.exact_duplicates
    );
    eprintln!(
        "  pairs {} ({} exact, {} {near_rule}) · clusters {} holding {} documents · to remove {}",
        c.pairs,
        c.exact_pairs,
        c.near_pairs,
        c.clusters,
        c.clustered_documents,
        c.documents_to_remove
    );
    if let Some(b) = summary.largest_buckets.first() {
        eprintln!(
            "  largest bucket: {} fingerprints (table {}, key {}); searched exactly",
            b.size, b.table, b.key
        );
    }
    if let Some(s) = &summary.substrings {
        eprintln!(
            "  repeated passages of {}+ bytes ({} copies) in the {} kept documents: {} ranges, {} bytes ({:.2}% of their text) in {} documents",
            s.min_bytes,
            s.occurrences,
            s.documents,
            s.ranges,
            s.repeated_bytes,
            100.0 * s.repeated_share,
            s.documents_touched
        );
    }
    if let Some((kept, removed)) = summary.dedup {
        eprintln!(
            "  deduplicated corpus: {kept} documents kept, {removed} removed (see removed.parquet)"
        );
    }
    for warning in &summary.warnings {
        eprintln!("  warning: {warning}");
    }
    if let Some(example) = summary.skip_examples.first() {
        eprintln!("  first skipped record: {example}");
    }
    eprintln!("  output: {} (summary.json, _SUCCESS)", output.display());
}
