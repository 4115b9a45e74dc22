//! What a job is asked to do: inputs, scheme, table design, keep policy, output, parallelism.
//!
//! A [`JobConfig`] is made by a [`JobConfigBuilder`] (`JobConfig::builder(input, output)`),
//! which starts from the defaults below, takes what the user asked for, derives what follows
//! from it (the LSH banding from a MinHash threshold, the verification from the method, the
//! column a keep policy reads) and validates the whole once, in [`JobConfigBuilder::build`].
//! Every default is a named constant next to the setter it serves.
//!
//! ```
//! use neardup_dataflow::config::{JobConfig, JobInput, VerifyMode};
//! use neardup_io::input::InputFile;
//! use neardup_io::record::FieldSpec;
//!
//! let input = JobInput::Documents {
//!     files: vec![InputFile::stdin(false)],
//!     fields: FieldSpec { text_field: "text".into(), id_field: None, extra_field: None, ..Default::default() },
//! };
//! let config = JobConfig::builder(input, "out".into())
//!     .scheme(neardup_core::Scheme::minhash())
//!     .threshold(Some(0.8))
//!     .keep("longest")
//!     .build()
//!     .unwrap();
//! assert_eq!(config.verify.unwrap().min_jaccard, 0.8);
//! assert!(config.lsh.is_some());
//! # let _ = VerifyMode::Jaccard;
//! ```

use std::path::PathBuf;

use neardup_core::{Scheme, TableDesign};
use neardup_io::input::InputFile;
use neardup_io::record::FieldSpec;

mod builder;
mod keep;
pub mod options;
mod parallelism;
pub mod resume;
mod substrings;

pub use builder::{
    validate, ConfigError, JobConfigBuilder, VerifyMode, DEFAULT_K, DEFAULT_KEEP,
    DEFAULT_KEEP_WITH_TIMES, DEFAULT_PAGE_MIN_JACCARD, DEFAULT_PAGE_VERIFY_SHINGLE, DEFAULT_TABLES,
    DEFAULT_THRESHOLD, DEFAULT_VERIFY_SHINGLE, LSH_MARGIN, MIN_LSH_THRESHOLD,
};
pub use keep::KeepPolicy;
pub use parallelism::Parallelism;
pub use resume::Resume;
pub use substrings::{SubstringJob, DEFAULT_BLOCK_BYTES};

/// Records a reader hands on per batch (one batch is one timestamp of the dataflow).
pub const DEFAULT_BATCH_RECORDS: usize = 4096;

/// Bytes of text a reader hands on per batch, at most (roughly). Small batches let a worker
/// that reads a lone file interleave reading with fingerprinting and shorten the tail where
/// the others wait for the last batch (1 MB against 4 MB: `-w 2` on dev-medium 4% faster;
/// 256 KB gained nothing more).
pub const DEFAULT_BATCH_BYTES: usize = 1 << 20;
/// Batches a reader may run ahead of the slowest fingerprinting worker. Bounds the text in
/// flight to about `workers * DEFAULT_BATCHES_IN_FLIGHT * DEFAULT_BATCH_BYTES`.
pub const DEFAULT_BATCHES_IN_FLIGHT: u64 = 16;
/// The share of physical memory that `neardup run` and `search` let the table search plan
/// for by default (`--memory-limit`): the rest is for the other stages, the page cache and
/// other programs.
pub const DEFAULT_MEMORY_SHARE: f64 = 0.7;
/// A spilled partition of the table search is never planned smaller than this many entries:
/// below it the files are too many and too small to be worth their cost.
pub const MIN_PARTITION_ENTRIES: u64 = 1 << 14;
/// The share of a worker's part of `--memory-limit` that the exact stage's sort keeps in
/// memory while the corpus is read (its documents beyond it go to sorted runs on disk,
/// [`neardup_io::spill`]). The read itself, the other sorts of the read and the search's
/// held fingerprints take the rest.
pub const EXACT_SORT_SHARE: f64 = 0.25;
/// The share for the pairs table's sort (its rows, by pair, while the pairs are found).
///
/// This sort, the stars', the clusters table's and the duplicate ids' hold records of a
/// few fixed-size numbers that grow with the documents or pairs; a run of them is written
/// and merged sequentially, so a small budget costs little, and it is full by a few
/// million documents: past that the process's memory stays where it is as the corpus
/// grows (`scripts/bench/size.py`, docs/performance.md). Until 2026-11-27 they had 0.1,
/// 0.1 and 0.05, and the peak grew by 0.6 GB from 10 to 50 GB of text under
/// `--memory-limit 4G`. This one and the clusters' then had 0.03: their sorts fill with
/// the exact stage's edges from the start, and at 10 GB of text (0.8M pairs) they were
/// not full where at 50 GB they were, three of them at once (about 0.1 GB of the 0.26 GB
/// between the two peaks, measured 2026-11-27). At 0.01 they are full at both.
pub const PAIRS_SORT_SHARE: f64 = 0.01;
/// The share of worker 0's part of the limit each sort of the clusters keeps
/// ([`crate::stages::stars`]): the edges while they are found, then, one after another,
/// the edges by component (twice where unlinked pairs are verified). 0.01, as
/// [`PAIRS_SORT_SHARE`], for the reason given there.
pub const STARS_SORT_SHARE: f64 = 0.01;
/// The share of worker 0's part of the limit that the clusters' union-find may take (13
/// bytes a document with a duplicate, [`neardup_core::unionfind::SortedUnionFind`]); past
/// it the components are found by sorting instead ([`crate::stages::components`], two
/// sorts of [`STARS_SORT_SHARE`] at a time). The union-find is made once every edge is in,
/// after the search and verification, whose sorts of a quarter each have given their
/// memory back: it takes a quarter too. Under `--memory-limit 4G` and two workers, 41M
/// such documents are joined in memory (7.6M in 50 GB of text, 345 copies of dev-medium);
/// past that, sorting costs rounds of two sorts of the edges each (6 for clusters of up
/// to 64 documents, 10 for a path of 2,000; `dataflow/examples/components.rs`).
pub const UNION_FIND_SHARE: f64 = 0.25;
/// The share for each sort of the web stages: the captures by normalized URL
/// ([`crate::stages::urls`]), the archive records by payload digest
/// ([`crate::stages::revisits`]), and the two hops of the cross-host count. Their records
/// are a few numbers per document with a URL, digest or host, like the pairs'.
pub const WEB_SORT_SHARE: f64 = 0.03;
/// The share for MinHash mode's fold of identical signatures (the representatives, sorted
/// by signature after the exact stage's walk).
pub const SIGNATURES_SORT_SHARE: f64 = 0.25;
/// The share of a worker's part of the limit that the clusters table's sort keeps (the
/// home's document numbers, sorted while the corpus is read, and the assignments).
pub const CLUSTER_ROWS_SORT_SHARE: f64 = 0.03;
/// The share for the duplicate-id count's sort (a hash per document with an id).
pub const IDS_SORT_SHARE: f64 = 0.01;
/// The share of process 0's limit each sort of `--write-dedup` keeps in memory
/// ([`neardup_io::run_dir::RemovedRows`]): it runs after the job, alone, one sort filling
/// at a time.
pub const DEDUP_SORT_SHARE: f64 = 0.25;
/// The share of process 0's limit that `--index` and `--against` each give, after the job
/// and alone, to the sorts that read the run's documents back in doc-number order, and
/// again to those of the index's tables (`neardup_io::index::run::SortMemory`,
/// [`neardup_io::index::IndexWriter::set_memory`]): the two are alive together while a
/// generation is written, 0.8 of the limit in all.
pub const INDEX_SORT_SHARE: f64 = 0.4;
/// The share of a worker's part of the limit each of verification's sorts of sets keeps
/// when the shingle sets are made again from the inputs ([`crate::stages::verify_inputs`]):
/// the sets, and the candidates at their second document's home, each with its first
/// document's set. They fill one after another, after the search.
pub const VERIFY_SORT_SHARE: f64 = 0.25;
/// The share for verification's sort of the bare candidates at their first document's
/// home ([`crate::stages::verify_inputs`]). It fills during the search and is held while
/// the sets are made, so it sits beside the other sorts; its records are a few numbers,
/// like the pairs'. At 0.25 it held the candidates of 50 GB of text in memory (14.8M, about
/// 0.7 GB under `--memory-limit 4G`, against 0.14 GB at 10 GB: most of threshold mode's
/// growth from 10 to 50 GB, 2026-11-27).
pub const CANDIDATES_SORT_SHARE: f64 = 0.03;
/// Bytes of shingle sets kept per byte of text when verification keeps them in memory
/// (measured on dev-medium copies: 1.9), for choosing where sets are kept ([`VerifyFrom`]).
pub const SET_BYTES_PER_TEXT_BYTE: f64 = 2.0;
/// The share of a process's limit the shingle sets may take in memory before verification
/// makes them again from the inputs instead ([`VerifyFrom::Auto`]).
pub const SETS_MEMORY_SHARE: f64 = 0.3;
/// Bytes of text per byte of a compressed input file, assumed when estimating the sets.
pub const COMPRESSED_TEXT_RATIO: f64 = 4.0;

/// Where verification finds the shingle sets it compares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VerifyFrom {
    /// Kept in memory at each home as the corpus is read ([`crate::stages::verify`]).
    Memory,
    /// Made again from the inputs, for the documents in candidate pairs, and kept in sorted
    /// files on disk ([`crate::stages::verify_inputs`]).
    Inputs,
    /// `Inputs` when the sets would take more than [`SETS_MEMORY_SHARE`] of
    /// `--memory-limit`, by the inputs' sizes, otherwise `Memory`.
    #[default]
    Auto,
}

/// The least memory an external sort keeps before it writes a run, whatever the limit:
/// below it the runs are too many and too small to be worth their cost.
pub const MIN_SORT_BUDGET: usize = 4 << 20;

/// Bytes of records a worker's external sort keeps in memory: `share` of its part of the
/// process's `limit` (`None`: no limit, nothing spills), at least [`MIN_SORT_BUDGET`].
pub fn sort_budget(limit: Option<u64>, workers_here: usize, share: f64) -> usize {
    match limit {
        None => usize::MAX,
        Some(limit) => {
            let budget = limit as f64 / workers_here.max(1) as f64 * share;
            (budget as usize).max(MIN_SORT_BUDGET)
        }
    }
}

/// Buckets larger than this many fingerprints are listed in the summary.
pub const DEFAULT_HOT_BUCKET: usize = 1000;
/// How many of the largest buckets and clusters the summary lists.
pub const SUMMARY_TOP: usize = 10;

/// Where documents come from.
#[derive(Clone, Debug)]
pub enum JobInput {
    /// Documents to fingerprint: JSONL, Parquet or plain files.
    Documents {
        files: Vec<InputFile>,
        fields: FieldSpec,
    },
    /// An existing fingerprint table (`doc_id`, `simhash`, optional `bytes`): search only.
    Fingerprints { files: Vec<PathBuf> },
}

/// A path made absolute (without touching the file system), so that processes started in
/// different working directories compare equal only when they mean the same file.
/// An output directory in a store and the local directory that stands for it.
/// (See [`crate::output::in_store`].)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Staged {
    /// As the user named it.
    pub url: String,
    pub staging: std::path::PathBuf,
    /// "output directory", "--write-dedup directory".
    pub what: &'static str,
}

fn absolute(path: &std::path::Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

/// An input as processes compare it: absolute path and size, so a host that sees other
/// data on the shared storage is caught at start-up.
fn describe_file(path: &std::path::Path) -> String {
    let size = std::fs::metadata(path).map_or("missing".to_string(), |m| m.len().to_string());
    format!("{} ({size} bytes)", absolute(path))
}

/// How clusters are formed from pairs (see [`neardup_core::star`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ClusterMode {
    /// Connected components: A~B and B~C put A, B, C together, although A and C may not be
    /// alike (for analysis; the default under `--keep canonical-host`).
    Components,
    /// Stars around the kept document, the centers taken in the keep order: a document
    /// joins only as a duplicate of the center.
    Star,
    /// Stars whose centers are chosen greedily by the number of unassigned duplicates they
    /// take (the default): every removed document is a verified duplicate of the one kept,
    /// and nearly as many are removed as components remove.
    Verified,
}

impl ClusterMode {
    /// Whether clusters are built around their kept documents (every removal verified
    /// against it), which needs every edge at worker 0.
    pub fn stars(self) -> bool {
        self != ClusterMode::Components
    }

    /// The name `--cluster` and summary.json use.
    pub fn name(self) -> &'static str {
        match self {
            ClusterMode::Components => "components",
            ClusterMode::Star => "star",
            ClusterMode::Verified => "verified",
        }
    }
}

/// Clusters larger than this are reported with a warning (chaining, boilerplate).
pub const DEFAULT_CLUSTER_WARNING: u64 = 1000;

/// Exact verification of candidate pairs.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Verify {
    /// Pairs are compared on their sets of word `shingle`-grams.
    pub shingle: usize,
    /// Pairs below this exact Jaccard similarity are dropped.
    pub min_jaccard: f64,
    /// Compare MinHash signatures (the Jaccard estimate) instead of shingle sets: cheaper,
    /// approximate. MinHash mode only.
    pub estimate: bool,
}

/// Everything a run needs.
#[derive(Clone, Debug)]
pub struct JobConfig {
    pub input: JobInput,
    pub scheme: Scheme,
    pub design: TableDesign,
    pub keep: KeepPolicy,
    /// Fold exact duplicates (same normalized token stream) before the near search.
    pub exact: bool,
    /// MinHash mode: the LSH banding whose band keys find candidates (instead of `design`).
    pub lsh: Option<neardup_core::minhash::Banding>,
    /// Verify candidate pairs by exact Jaccard similarity.
    pub verify: Option<Verify>,
    pub cluster: ClusterMode,
    /// Warn in the summary when a cluster is larger than this.
    pub cluster_warning: u64,
    /// Count invalid records as skips instead of failing the run.
    pub skip_invalid: bool,
    pub output: PathBuf,
    /// Replace an existing non-empty output directory.
    pub overwrite: bool,
    /// Also write the deduplicated corpus here (kept documents in the input's own format,
    /// and removed.parquet).
    pub write_dedup: Option<PathBuf>,
    /// Output directories in an object store, written through local staging directories:
    /// `output` and `write_dedup` name the staging directories then (see
    /// [`crate::output::in_store`]). Empty for local outputs; filled by the job itself.
    pub staged: Vec<Staged>,
    pub parallelism: Parallelism,
    /// Start-up and heartbeat settings of a multi-process job (unused with one process).
    /// An empty job id is derived from the output directory.
    pub control: crate::control::ControlConfig,
    /// Search the tables in this many rounds, one after the other, to bound memory (1: all
    /// tables at once). `None`: the fewest rounds whose estimated memory fits
    /// `memory_limit`.
    pub table_rounds: Option<usize>,
    /// Bytes the search may plan for in each process (`None`: no limit, one round unless
    /// `table_rounds` says otherwise). The binary's default is
    /// [`DEFAULT_MEMORY_SHARE`] of physical memory.
    pub memory_limit: Option<u64>,
    /// Where the search spills when it does not fit `memory_limit` (`None`: `_spill/`
    /// inside the output directory). Each process spills to its own machine's path.
    pub spill_dir: Option<PathBuf>,
    /// The smallest spilled partition the plan makes, in entries (default
    /// [`MIN_PARTITION_ENTRIES`]; tests lower it to spill small inputs
    /// into many partitions).
    pub spill_min_partition: u64,
    /// Where verification finds the shingle sets (see [`VerifyFrom`]).
    pub verify_from: VerifyFrom,
    /// Fixes the memory of every external sort (bytes; `None`: a share of `memory_limit`,
    /// [`sort_budget`]): tests lower it to spill small inputs into many runs.
    pub sort_memory: Option<usize>,
    /// Bucket search leaf size (see `neardup_core::search`).
    pub leaf_size: usize,
    pub batch_records: usize,
    pub batch_bytes: usize,
    pub batches_in_flight: u64,
    /// The parameters as the user gave them, recorded in summary.json.
    pub command_line: Vec<String>,
    /// How URLs are normalized before documents with the same URL are paired
    /// (`--url-normalize`; see [`neardup_core::urlnorm`]).
    pub url_normalize: neardup_core::urlnorm::UrlNormalize,
    /// Learn each host's site template before fingerprinting (`--site-templates`; see
    /// [`crate::stages::templates`]): on by default, used where pages are extracted in
    /// `main` mode and have URLs.
    pub site_templates: bool,
    /// Mirror detection thresholds (`--mirror-min-paths`, `--mirror-min-share`).
    pub mirrors: neardup_core::mirrors::MirrorParams,
    /// Search repeated passages (`neardup substrings`, `run --substrings`).
    pub substrings: Option<SubstringJob>,
    /// `--resume`: reuse what a failed run of the same job left (see [`resume`]).
    pub resume: Resume,
    /// MinHash mode, for a saved index (`--index`, `--against`): also keep every document's
    /// signature (and with [`IndexSketches::shingles`] its verification set) in the resume
    /// parts, where [`crate::stages::fingerprint::resume::document_extras`] reads them.
    pub index_sketches: Option<IndexSketches>,
}

/// What a MinHash index needs of each document beyond the run's tables (see
/// [`JobConfig::index_sketches`]): its signature, and its shingle set when `shingles`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexSketches {
    pub shingles: bool,
}

impl JobConfig {
    /// A builder starting from every default; see [`JobConfigBuilder`].
    pub fn builder(input: JobInput, output: PathBuf) -> JobConfigBuilder {
        JobConfigBuilder::new(input, output)
    }

    /// A job with every tunable at its default: simhash-doc, k = 3 with manku16, keep first.
    /// Not validated: [`run_job`](crate::run_job) validates it, or use [`JobConfig::builder`].
    pub fn new(input: JobInput, output: PathBuf) -> Self {
        JobConfig {
            input,
            scheme: Scheme::simhash_doc(),
            design: TableDesign::manku16(),
            keep: KeepPolicy::First,
            exact: true,
            lsh: None,
            verify: None,
            cluster: ClusterMode::Verified,
            cluster_warning: DEFAULT_CLUSTER_WARNING,
            skip_invalid: false,
            output,
            overwrite: false,
            write_dedup: None,
            staged: Vec::new(),
            parallelism: Parallelism::local(1),
            control: crate::control::ControlConfig::default(),
            table_rounds: None,
            memory_limit: None,
            spill_dir: None,
            spill_min_partition: MIN_PARTITION_ENTRIES,
            sort_memory: None,
            verify_from: VerifyFrom::Auto,
            leaf_size: neardup_core::search::DEFAULT_LEAF_SIZE,
            batch_records: DEFAULT_BATCH_RECORDS,
            batch_bytes: DEFAULT_BATCH_BYTES,
            batches_in_flight: DEFAULT_BATCHES_IN_FLIGHT,
            command_line: Vec::new(),
            resume: Resume::Off,
            index_sketches: None,
            substrings: None,
            url_normalize: neardup_core::urlnorm::UrlNormalize::Standard,
            site_templates: true,
            mirrors: neardup_core::mirrors::MirrorParams::default(),
        }
    }

    /// Whether the job reads web pages as their main text: pages extracted in `main` mode
    /// from inputs with URLs (web archives, or `--url-field` with `--html main`). Such a
    /// job learns site templates and, with simhash, verifies its pairs by default
    /// ([`DEFAULT_PAGE_VERIFY_SHINGLE`], [`DEFAULT_PAGE_MIN_JACCARD`]).
    pub fn reads_main_text_pages(&self) -> bool {
        use neardup_io::html::HtmlMode;
        let JobInput::Documents { fields, files } = &self.input else {
            return false;
        };
        let archives = files.iter().any(|f| {
            matches!(
                f.format,
                neardup_io::source::Format::Warc | neardup_io::source::Format::Arc
            )
        });
        let main = |default| fields.html.unwrap_or(default) == HtmlMode::Main;
        (archives && main(neardup_io::html::DEFAULT_HTML_MODE))
            || (fields.url_field.is_some() && main(HtmlMode::None))
    }

    /// Whether the job learns site templates (the templates stage): it reads pages as their
    /// main text ([`JobConfig::reads_main_text_pages`]), templates are not turned off, and
    /// it is not resumed.
    pub fn learns_site_templates(&self) -> bool {
        // A resumed run reads the corpus only to verify from the inputs or to search
        // passages.
        let resumed = matches!(self.resume, Resume::From(_));
        if !self.site_templates
            || (resumed && !self.verifies_from_inputs() && self.substrings.is_none())
        {
            return false;
        }
        self.reads_main_text_pages()
    }

    /// True when documents can carry URLs: some input is a web archive or `--url-field`
    /// names where JSONL and Parquet records keep them. Such a run writes `mirrors/` and
    /// `hosts/` (empty when no document had a URL after all); others do not.
    /// Whether verification makes the shingle sets again from the inputs
    /// ([`VerifyFrom`]): never without shingle sets to compare, nor for a resumed run (its
    /// fingerprints come from its parts); with `Auto`, when the sets estimated from the
    /// inputs' sizes would take more than [`SETS_MEMORY_SHARE`] of the limit.
    pub fn verifies_from_inputs(&self) -> bool {
        let (Some(_), JobInput::Documents { files, .. }) = (&self.verify, &self.input) else {
            return false;
        };
        if matches!(self.resume, Resume::From(_)) {
            return false;
        }
        match self.verify_from {
            VerifyFrom::Memory => false,
            VerifyFrom::Inputs => true,
            VerifyFrom::Auto => {
                let Some(limit) = self.memory_limit else {
                    return false;
                };
                let text: f64 = files
                    .iter()
                    .map(|f| {
                        let size = std::fs::metadata(&f.path).map_or(0, |m| m.len()) as f64;
                        match f.compression {
                            neardup_io::compress::Compression::None => size,
                            _ => size * COMPRESSED_TEXT_RATIO,
                        }
                    })
                    .sum();
                text * SET_BYTES_PER_TEXT_BYTE > limit as f64 * SETS_MEMORY_SHARE
            }
        }
    }

    pub fn urls_known(&self) -> bool {
        match &self.input {
            JobInput::Documents { files, fields } => {
                fields.url_field.is_some()
                    || files.iter().any(|f| {
                        matches!(
                            f.format,
                            neardup_io::source::Format::Warc | neardup_io::source::Format::Arc
                        )
                    })
            }
            JobInput::Fingerprints { .. } => false,
        }
    }

    /// True when documents are known to carry capture times: some input is a web archive
    /// (WARC, ARC: every response record has a `WARC-Date`) or `--time-field` names where
    /// JSONL and Parquet records keep them. Decided from the configuration alone, before
    /// anything is read, so that every process agrees; a record without a time then ranks
    /// last under `--keep newest` (and is counted, see `keep_value_missing`).
    pub fn capture_times_known(&self) -> bool {
        match &self.input {
            JobInput::Documents { files, fields } => {
                fields.time_field.is_some()
                    || files.iter().any(|f| {
                        matches!(
                            f.format,
                            neardup_io::source::Format::Warc | neardup_io::source::Format::Arc
                        )
                    })
            }
            JobInput::Fingerprints { .. } => false,
        }
    }
}

impl JobConfig {
    /// What every process of a job must agree on: compared at start-up, field by field.
    pub fn fingerprint(&self) -> std::collections::BTreeMap<String, serde_json::Value> {
        use serde_json::json;
        let (kind, inputs, fields) = match &self.input {
            JobInput::Documents { files, fields } => (
                "documents",
                files
                    .iter()
                    .map(|f| describe_file(&f.path))
                    .collect::<Vec<_>>(),
                json!([fields.text_field, fields.id_field, fields.extra_field]),
            ),
            JobInput::Fingerprints { files } => (
                "fingerprints",
                files.iter().map(|f| describe_file(f)).collect(),
                json!(null),
            ),
        };
        [
            ("version", json!(env!("CARGO_PKG_VERSION"))),
            ("input", json!(kind)),
            ("inputs", json!(inputs)),
            ("fields", fields),
            ("scheme", json!(self.scheme.describe())),
            ("k", json!(self.design.k())),
            ("tables", json!(self.design.name())),
            ("keep", json!(self.keep.describe())),
            ("url_normalize", json!(self.url_normalize.name())),
            ("site_templates", json!(self.learns_site_templates())),
            ("mirrors", json!(self.mirrors)),
            ("exact", json!(self.exact)),
            ("lsh", json!(self.lsh)),
            ("verify", json!(self.verify)),
            ("cluster", json!(self.cluster)),
            ("table_rounds", json!(self.table_rounds)),
            ("substrings", json!(self.substrings)),
            ("skip_invalid", json!(self.skip_invalid)),
            ("output", json!(self.output_name())),
            ("workers", json!(self.parallelism.workers)),
            ("hostfile", json!(self.parallelism.addresses)),
            ("peer_timeout", json!(self.control.peer_timeout.as_secs())),
            (
                "batch",
                json!([
                    self.batch_records,
                    self.batch_bytes,
                    self.batches_in_flight,
                    self.leaf_size
                ]),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// The directory this job's workers spill into: `_spill/` in the output directory, or
    /// a directory named after the job inside `--spill-dir` (so jobs sharing it do not
    /// meet). Removed when the job is done.
    pub fn spill_root(&self) -> PathBuf {
        match &self.spill_dir {
            None => self.output.join(neardup_io::run_dir::SPILL),
            Some(dir) => {
                let id = self
                    .job_id()
                    .bytes()
                    .fold(0u64, |h, b| neardup_core::mix::mix2(h, b as u64));
                dir.join(format!("neardup-{id:016x}"))
            }
        }
    }

    /// The output directory as the user named it: its URL when it is in a store, else its
    /// absolute path.
    pub fn output_name(&self) -> String {
        match self.staged.iter().find(|s| s.staging == self.output) {
            Some(staged) => staged.url.clone(),
            None => absolute(&self.output),
        }
    }

    /// The job id: given, or derived from the output directory.
    pub fn job_id(&self) -> String {
        if self.control.job_id.is_empty() {
            format!("output:{}", self.output_name())
        } else {
            self.control.job_id.clone()
        }
    }
}
