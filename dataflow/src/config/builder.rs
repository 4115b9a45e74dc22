//! [`JobConfigBuilder`]: the job configuration, resolved and validated once.
//!
//! The simple version is a struct literal of [`JobConfig`] with every field spelled out. The
//! builder exists because several fields follow from others (a MinHash threshold sets the
//! LSH banding and the minimum verified Jaccard; a `max:COLUMN` keep policy sets the column
//! the readers extract) and because some combinations are mistakes that must be refused
//! before anything is written, with the same message whichever program builds the job.

use std::path::PathBuf;

use neardup_core::features::FeatureKind;
use neardup_core::minhash::Banding;
use neardup_core::tables::DesignError;
use neardup_core::{Method, Scheme, TableDesign, Weighting};

use super::{ClusterMode, JobConfig, JobInput, KeepPolicy, Parallelism, Verify};
use crate::control::ControlConfig;

/// Fingerprints within this many bits are near-duplicates (`-k`): the distance Manku, Jain
/// and Das Sarma found right for 64-bit simhashes of web pages.
pub const DEFAULT_K: u32 = neardup_core::DEFAULT_K;
/// The permutation-table design (`--tables`): `auto` is manku16 for k = 3, else
/// `blocks:k+2`.
pub const DEFAULT_TABLES: &str = "auto";
/// The keep policy (`--keep`): the first document in input order (smallest `doc_id`).
pub const DEFAULT_KEEP: &str = "first";
/// The keep policy when no `--keep` is given and capture times are known (web archives,
/// `--time-field`): the newest capture of a page stays, as a recrawl replaces what it saw.
pub const DEFAULT_KEEP_WITH_TIMES: &str = "newest";
/// The similarity threshold of MinHash mode (`--threshold`): "80% the same shingles", the
/// usual bar for training-data deduplication.
pub const DEFAULT_THRESHOLD: f64 = neardup_core::DEFAULT_JACCARD;
/// How far below the threshold the LSH banding is tuned by default (`--lsh-threshold`):
/// MinHash estimates of pairs just above the threshold often fall below it, and
/// verification removes the extra candidates.
pub const LSH_MARGIN: f64 = 0.1;
/// The lowest similarity a banding is tuned for, however low the threshold.
pub const MIN_LSH_THRESHOLD: f64 = 0.05;
/// The default n of the word shingles that verification compares (`--verify-shingle`): the
/// unit in which "Jaccard >= 0.8" is usually meant.
pub const DEFAULT_VERIFY_SHINGLE: usize = neardup_core::similarity::DEFAULT_JACCARD_SHINGLE;
/// Simhash runs over web pages read as their main text
/// ([`JobConfig::reads_main_text_pages`]) verify their pairs by default: word 5-grams, the
/// unit of the site benchmark (docs/inputs.md, "Pages, not templates")...
pub const DEFAULT_PAGE_VERIFY_SHINGLE: usize = 5;
/// ... and a pair whose main texts share less than half of their 5-grams is dropped. On the
/// site benchmark's 15 sites, simhash at k = 3 alone paired pages generated from one table
/// or one text with a few words changed (26% of the reported pairs of different pages on
/// the Linux kernel's documentation, 9% on a javadoc site, by the independent extractors);
/// verified at 0.5, no site has such a pair, every capture of the shared samples is still
/// found (their main texts share at least 0.83 of their 5-grams), and the run took no
/// measurable extra time there.
pub const DEFAULT_PAGE_MIN_JACCARD: f64 = 0.5;

/// How candidate pairs are verified (`--verify`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyMode {
    /// Not verified (the default with simhash).
    None,
    /// Exact Jaccard similarity of word-shingle sets (the default in MinHash mode).
    Jaccard,
    /// The MinHash signatures' Jaccard estimate: cheaper, approximate; MinHash mode only.
    MinHash,
}

/// A configuration that cannot run, with the message a user of the command line sees.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--resume cannot continue a run whose output is in an object store ({url}): the parts it would resume from stayed on the local disk of the failed run; run it again with --overwrite")]
    ResumeInStore { url: String },
    #[error("--min-bytes must be at least 1")]
    SubstringsMinBytes,
    #[error("repeated passages are searched in documents, not in fingerprint tables")]
    SubstringsNeedDocuments,
    #[error("--strike substrings needs --write-dedup DIR (the corpus it writes)")]
    StrikeNeedsDedup,
    #[error("--strike substrings cannot strike the passages of {}: {reason}; the ranges are positions in the extracted text, not in the record (strike from JSONL, Parquet or plain text)", file.display())]
    CannotStrike {
        file: std::path::PathBuf,
        reason: String,
    },
    #[error("{name} {value} is out of range: it must be between 0 and 1")]
    OutOfRange { name: &'static str, value: f64 },
    #[error("--bands, --rows and --lsh-threshold apply to --method minhash only")]
    LshOptionsNeedMinHash,
    #[error("--threshold applies to --method minhash (for simhash use -k, and --min-jaccard with --verify jaccard)")]
    ThresholdNeedsMinHash,
    #[error("--min-jaccard and --verify-shingle need --verify jaccard")]
    VerifyOptionsNeedVerify,
    #[error(
        "--verify-shingle applies to --verify jaccard (--verify minhash compares the signatures)"
    )]
    VerifyShingleWithSignatures,
    #[error("--tables {spec} -k {k}")]
    Tables {
        spec: String,
        k: u32,
        #[source]
        source: DesignError,
    },
    #[error("--keep {0:?}: expected first, longest, shortest, newest, oldest, max:COLUMN, min:COLUMN or canonical-host[:POLICY]")]
    Keep(String),
    #[error(
        "--keep {0} needs the documents' URLs: web archives, or --url-field for JSONL and Parquet"
    )]
    KeepCanonicalHostNeedsUrls(String),
    #[error("--keep {0} chooses among a cluster's copies after clustering, while --cluster {1} builds each cluster around its kept document: use --cluster components")]
    KeepCanonicalHostWithStar(String, &'static str),
    #[error("a MinHash scheme needs an LSH banding (--threshold, or --bands and --rows)")]
    MinHashNeedsBanding,
    #[error("--bands, --rows and --threshold apply to --method minhash only")]
    BandingNeedsMinHash,
    #[error("--bands {bands} --rows {rows} needs {} permutations, the signature has {permutations}", bands * rows)]
    BandingTooWide {
        bands: usize,
        rows: usize,
        permutations: usize,
    },
    #[error("TF-IDF weights need the documents: neardup search cannot use them")]
    TfIdfNeedsDocuments,
    #[error("--verify minhash compares MinHash signatures: it needs --method minhash (use --verify jaccard with simhash)")]
    SignaturesNeedMinHash,
    #[error("--min-jaccard must be in [0, 1] and --verify-shingle at least 1 (got {min_jaccard} and {shingle})")]
    VerifyRange { min_jaccard: f64, shingle: usize },
    #[error("--mirror-min-share {min_share} must be within 0..=1 and --mirror-min-paths {min_paths} at least 1")]
    MirrorRange { min_share: f64, min_paths: u64 },
    #[error("verification needs the documents' texts: neardup search cannot verify")]
    VerifyNeedsDocuments,
    #[error("--write-dedup needs the input documents: neardup search cannot write them")]
    DedupNeedsDocuments,
    #[error("--keep {policy} needs the column {column:?} to be read")]
    KeepColumnNotRead { policy: String, column: String },
    #[error(
        "a fingerprint table has no input columns to keep by: use --keep first|longest|shortest"
    )]
    KeepColumnOnFingerprints,
    #[error("no input files")]
    NoInputs,
    #[error("--resume: {} is a complete run (it has _SUCCESS): nothing to resume; use --overwrite to run it again", dir.display())]
    ResumeComplete { dir: PathBuf },
    #[error("--resume: {} has no job record ({}): it cannot be told to be the same job; use --overwrite to replace it", dir.display(), record.display())]
    ResumeNoRecord { dir: PathBuf, record: PathBuf },
    #[error("--resume: cannot read the job record {}: {cause}", path.display())]
    ResumeRecord { path: PathBuf, cause: String },
    #[error("--resume: {} was written by another job (this run vs that one): {}; run the same command again, or use --overwrite to replace it", dir.display(), differences.join(", "))]
    ResumeMismatch {
        dir: PathBuf,
        differences: Vec<String>,
    },
    #[error("--resume: {0}")]
    ResumeUnsupported(&'static str),
    #[error("{files} input files: at most {max} are supported")]
    TooManyFiles { files: usize, max: usize },
}

/// Builds a [`JobConfig`]: every setting starts at its default (the constants of this
/// module and of [`crate::config`]), and [`build`](Self::build) derives and validates.
#[derive(Clone, Debug)]
pub struct JobConfigBuilder {
    config: JobConfig,
    k: u32,
    tables: String,
    /// `None`: [`DEFAULT_KEEP`], or [`DEFAULT_KEEP_WITH_TIMES`] when capture times are known.
    keep: Option<String>,
    threshold: Option<f64>,
    lsh_threshold: Option<f64>,
    banding: Option<(usize, usize)>,
    verify: Option<VerifyMode>,
    min_jaccard: Option<f64>,
    verify_shingle: Option<usize>,
    /// `None`: [`ClusterMode::Verified`], or [`ClusterMode::Components`] under `--keep
    /// canonical-host` (whose mirror groups need whole components).
    cluster: Option<ClusterMode>,
}

impl JobConfigBuilder {
    pub fn new(input: JobInput, output: PathBuf) -> Self {
        JobConfigBuilder {
            config: JobConfig::new(input, output),
            k: DEFAULT_K,
            tables: DEFAULT_TABLES.into(),
            keep: None,
            threshold: None,
            lsh_threshold: None,
            banding: None,
            verify: None,
            min_jaccard: None,
            verify_shingle: None,
            cluster: None,
        }
    }

    /// `--resume`: reuse what a failed run of the same job left in the output directory
    /// (see [`crate::config::resume`]).
    pub fn resume(mut self, on: bool) -> Self {
        self.config.resume = if on {
            crate::config::Resume::Asked
        } else {
            crate::config::Resume::Off
        };
        self
    }

    /// The fingerprint scheme (default: simhash-doc).
    pub fn scheme(mut self, scheme: Scheme) -> Self {
        self.config.scheme = scheme;
        self
    }

    /// Hamming distance of near-duplicates (default [`DEFAULT_K`]).
    pub fn k(mut self, k: u32) -> Self {
        self.k = k;
        self
    }

    /// The table design: `auto`, `manku16` or `blocks:B` (default [`DEFAULT_TABLES`]).
    pub fn tables(mut self, spec: &str) -> Self {
        self.tables = spec.into();
        self
    }

    /// The keep policy: `first`, `longest`, `shortest`, `newest`, `oldest`, `max:COLUMN`,
    /// `min:COLUMN`, `canonical-host[:POLICY]` (default [`DEFAULT_KEEP`]). A column policy
    /// also makes the readers extract that column. A bare `canonical-host` ranks the copies
    /// off mirroring hosts by the default policy.
    pub fn keep(mut self, spec: &str) -> Self {
        self.keep = Some(spec.into());
        self
    }

    /// The keep policy, or `None` for the default: [`DEFAULT_KEEP_WITH_TIMES`] when capture
    /// times are known ([`JobConfig::capture_times_known`]), [`DEFAULT_KEEP`] otherwise.
    pub fn keep_or_default(mut self, spec: Option<&str>) -> Self {
        self.keep = spec.map(String::from);
        self
    }

    /// Mirror detection thresholds (default [`neardup_core::mirrors::MirrorParams::default`]).
    pub fn mirrors(mut self, params: neardup_core::mirrors::MirrorParams) -> Self {
        self.config.mirrors = params;
        self
    }

    /// How URLs are normalized (default standard).
    pub fn url_normalize(mut self, mode: neardup_core::urlnorm::UrlNormalize) -> Self {
        self.config.url_normalize = mode;
        self
    }

    /// Learn each host's site template from the crawl and drop it from pages in `main`
    /// mode (default on; [`crate::stages::templates`]).
    pub fn site_templates(mut self, on: bool) -> Self {
        self.config.site_templates = on;
        self
    }

    /// Fold exact duplicates before the near search (default on).
    pub fn exact(mut self, on: bool) -> Self {
        self.config.exact = on;
        self
    }

    /// How pairs become clusters (default: [`ClusterMode::Verified`], or
    /// [`ClusterMode::Components`] under `--keep canonical-host`).
    pub fn cluster(mut self, mode: ClusterMode) -> Self {
        self.cluster = Some(mode);
        self
    }

    /// [`Self::cluster`], or the default when `None` (`--cluster` not given).
    pub fn cluster_choice(mut self, mode: Option<ClusterMode>) -> Self {
        self.cluster = mode;
        self
    }

    /// Warn when a cluster is larger (default [`super::DEFAULT_CLUSTER_WARNING`]).
    pub fn cluster_warning(mut self, documents: u64) -> Self {
        self.config.cluster_warning = documents;
        self
    }

    /// Count invalid records as skips instead of failing (default off).
    pub fn skip_invalid(mut self, on: bool) -> Self {
        self.config.skip_invalid = on;
        self
    }

    /// Replace an existing output directory (default off).
    pub fn overwrite(mut self, on: bool) -> Self {
        self.config.overwrite = on;
        self
    }

    /// Also write the deduplicated corpus here (default: not written).
    pub fn write_dedup(mut self, dir: Option<PathBuf>) -> Self {
        self.config.write_dedup = dir;
        self
    }

    /// Threads and processes (default: one worker).
    pub fn parallelism(mut self, parallelism: Parallelism) -> Self {
        self.config.parallelism = parallelism;
        self
    }

    /// Start-up and heartbeat of a multi-process job (defaults in [`crate::control`]).
    pub fn control(mut self, control: ControlConfig) -> Self {
        self.config.control = control;
        self
    }

    /// Search rounds (`None`, the default: the fewest that fit the memory limit).
    pub fn table_rounds(mut self, rounds: Option<usize>) -> Self {
        self.config.table_rounds = rounds;
        self
    }

    /// Bytes the search may plan for per process (default: no limit here; the binary's
    /// default is [`super::DEFAULT_MEMORY_SHARE`] of physical memory).
    pub fn memory_limit(mut self, bytes: Option<u64>) -> Self {
        self.config.memory_limit = bytes;
        self
    }

    /// Where verification finds the shingle sets (default [`super::VerifyFrom::Auto`]: in
    /// memory unless they would take more than [`super::SETS_MEMORY_SHARE`] of the limit).
    pub fn verify_from(mut self, from: super::VerifyFrom) -> Self {
        self.config.verify_from = from;
        self
    }

    /// Where the search spills (default: `_spill/` in the output directory).
    pub fn spill_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.config.spill_dir = dir;
        self
    }

    /// Search repeated passages (`neardup substrings`, `run --substrings`).
    pub fn substrings(mut self, job: Option<super::SubstringJob>) -> Self {
        self.config.substrings = job;
        self
    }

    /// The command line, recorded in summary.json.
    pub fn command_line(mut self, args: Vec<String>) -> Self {
        self.config.command_line = args;
        self
    }

    /// MinHash mode: the Jaccard similarity to find (default [`DEFAULT_THRESHOLD`]); sets
    /// the banding and, with verification, the minimum exact Jaccard of a pair.
    pub fn threshold(mut self, threshold: Option<f64>) -> Self {
        self.threshold = threshold;
        self
    }

    /// MinHash mode: the similarity the banding is tuned for (default: the threshold minus
    /// [`LSH_MARGIN`]).
    pub fn lsh_threshold(mut self, threshold: Option<f64>) -> Self {
        self.lsh_threshold = threshold;
        self
    }

    /// MinHash mode: explicit bands and rows instead of a tuned banding.
    pub fn banding(mut self, bands_rows: Option<(usize, usize)>) -> Self {
        self.banding = bands_rows;
        self
    }

    /// Verification (default: [`VerifyMode::Jaccard`] in MinHash mode, else none).
    pub fn verify(mut self, mode: Option<VerifyMode>) -> Self {
        self.verify = mode;
        self
    }

    /// Drop verified pairs below this Jaccard (default: the threshold in MinHash mode, else
    /// 0, which only annotates pairs).
    pub fn min_jaccard(mut self, min: Option<f64>) -> Self {
        self.min_jaccard = min;
        self
    }

    /// The n of verification's word shingles (default: the MinHash shingle size, or
    /// [`DEFAULT_VERIFY_SHINGLE`]).
    pub fn verify_shingle(mut self, n: Option<usize>) -> Self {
        self.verify_shingle = n;
        self
    }

    /// Derives what follows from the settings and validates the whole.
    pub fn build(self) -> Result<JobConfig, ConfigError> {
        let mut config = self.config;
        for (name, value) in [
            ("--threshold", self.threshold),
            ("--min-jaccard", self.min_jaccard),
            ("--lsh-threshold", self.lsh_threshold),
        ] {
            if let Some(t) = value {
                if !(0.0..=1.0).contains(&t) || t.is_nan() {
                    return Err(ConfigError::OutOfRange { name, value: t });
                }
            }
        }
        let minhash = match config.scheme.method {
            Method::MinHash { permutations, .. } => Some(permutations),
            Method::Simhash(_) => None,
        };
        let threshold = match (minhash, self.threshold) {
            (None, _) if self.banding.is_some() || self.lsh_threshold.is_some() => {
                return Err(ConfigError::LshOptionsNeedMinHash)
            }
            (None, Some(_)) => return Err(ConfigError::ThresholdNeedsMinHash),
            (None, None) => None,
            (Some(_), t) => Some(t.unwrap_or(DEFAULT_THRESHOLD)),
        };
        if let (Some(permutations), Some(t)) = (minhash, threshold) {
            config.lsh = Some(match self.banding {
                Some((bands, rows)) => Banding { bands, rows },
                None => Banding::optimal(
                    self.lsh_threshold
                        .unwrap_or((t - LSH_MARGIN).max(MIN_LSH_THRESHOLD)),
                    permutations,
                ),
            });
        }
        // Simhash pairs of web pages are verified unless told otherwise.
        let pages = minhash.is_none() && config.reads_main_text_pages();
        let verify = self.verify.unwrap_or(if minhash.is_some() || pages {
            VerifyMode::Jaccard
        } else {
            VerifyMode::None
        });
        if verify == VerifyMode::None
            && (self.min_jaccard.is_some() || self.verify_shingle.is_some())
        {
            return Err(ConfigError::VerifyOptionsNeedVerify);
        }
        if verify == VerifyMode::MinHash && self.verify_shingle.is_some() {
            return Err(ConfigError::VerifyShingleWithSignatures);
        }
        if verify != VerifyMode::None {
            let scheme_shingle = match config.scheme.features.kind {
                FeatureKind::WordShingles(n) if minhash.is_some() => Some(n),
                _ => None,
            };
            config.verify = Some(Verify {
                shingle: self
                    .verify_shingle
                    .or(scheme_shingle)
                    .unwrap_or(match pages {
                        true => DEFAULT_PAGE_VERIFY_SHINGLE,
                        false => DEFAULT_VERIFY_SHINGLE,
                    }),
                min_jaccard: self.min_jaccard.or(threshold).unwrap_or(match pages {
                    true => DEFAULT_PAGE_MIN_JACCARD,
                    false => 0.0,
                }),
                estimate: verify == VerifyMode::MinHash,
            });
        }
        config.design =
            TableDesign::parse(&self.tables, self.k).map_err(|source| ConfigError::Tables {
                spec: self.tables.clone(),
                k: self.k,
                source,
            })?;
        let default = if config.capture_times_known() {
            DEFAULT_KEEP_WITH_TIMES
        } else {
            DEFAULT_KEEP
        };
        let keep = self.keep.unwrap_or_else(|| default.into());
        // A bare canonical-host ranks the other copies by the default policy.
        config.keep =
            KeepPolicy::parse_with_default(&keep, default).ok_or(ConfigError::Keep(keep))?;
        if let JobInput::Documents { fields, .. } = &mut config.input {
            fields.extra_field = config.keep.column().map(String::from);
        }
        config.cluster = self
            .cluster
            .unwrap_or(if config.keep.prefers_canonical_hosts() {
                ClusterMode::Components
            } else {
                ClusterMode::Verified
            });
        validate(&config)?;
        Ok(config)
    }
}

/// Refuses combinations that cannot run. [`JobConfigBuilder::build`] calls it, and so does
/// [`crate::run_job`], for configurations made by hand.
pub fn validate(config: &JobConfig) -> Result<(), ConfigError> {
    let minhash = matches!(config.scheme.method, Method::MinHash { .. });
    let fingerprints = matches!(config.input, JobInput::Fingerprints { .. });
    if minhash && config.lsh.is_none() {
        return Err(ConfigError::MinHashNeedsBanding);
    }
    if !minhash && config.lsh.is_some() {
        return Err(ConfigError::BandingNeedsMinHash);
    }
    if let (Some(banding), Method::MinHash { permutations, .. }) =
        (&config.lsh, &config.scheme.method)
    {
        if banding.bands * banding.rows > *permutations || banding.bands == 0 || banding.rows == 0 {
            return Err(ConfigError::BandingTooWide {
                bands: banding.bands,
                rows: banding.rows,
                permutations: *permutations,
            });
        }
    }
    if let Some(job) = &config.substrings {
        if job.settings.min_bytes == 0 {
            return Err(ConfigError::SubstringsMinBytes);
        }
        if fingerprints {
            return Err(ConfigError::SubstringsNeedDocuments);
        }
        if job.strike {
            check_strike(config)?;
        }
    }
    if fingerprints && matches!(config.scheme.method, Method::Simhash(Weighting::TfIdf(_))) {
        return Err(ConfigError::TfIdfNeedsDocuments);
    }
    if let Some(v) = config.verify {
        if v.estimate && !minhash {
            return Err(ConfigError::SignaturesNeedMinHash);
        }
        if !(0.0..=1.0).contains(&v.min_jaccard) || v.shingle == 0 {
            return Err(ConfigError::VerifyRange {
                min_jaccard: v.min_jaccard,
                shingle: v.shingle,
            });
        }
        if fingerprints {
            return Err(ConfigError::VerifyNeedsDocuments);
        }
    }
    let mirrors = config.mirrors;
    if !(0.0..=1.0).contains(&mirrors.min_share) || mirrors.min_paths == 0 {
        return Err(ConfigError::MirrorRange {
            min_share: mirrors.min_share,
            min_paths: mirrors.min_paths,
        });
    }
    if config.keep.prefers_canonical_hosts() && !config.urls_known() {
        return Err(ConfigError::KeepCanonicalHostNeedsUrls(
            config.keep.describe(),
        ));
    }
    if config.keep.prefers_canonical_hosts() && config.cluster.stars() {
        return Err(ConfigError::KeepCanonicalHostWithStar(
            config.keep.describe(),
            config.cluster.name(),
        ));
    }
    if fingerprints && config.write_dedup.is_some() {
        return Err(ConfigError::DedupNeedsDocuments);
    }
    if config.resume != super::Resume::Off {
        super::resume::supported(config)?;
    }
    match (config.keep.column(), &config.input) {
        (Some(column), JobInput::Documents { fields, .. })
            if fields.extra_field.as_deref() != Some(column) =>
        {
            return Err(ConfigError::KeepColumnNotRead {
                policy: config.keep.describe(),
                column: column.into(),
            })
        }
        (Some(_), JobInput::Fingerprints { .. }) => {
            return Err(ConfigError::KeepColumnOnFingerprints)
        }
        _ => {}
    }
    Ok(())
}

/// `--strike substrings` writes the deduplicated corpus with the ranges taken out of the
/// text as the records store it: JSONL, Parquet and plain text without `--html`. Archives
/// and extracted HTML are refused before the job starts, naming the first such file.
fn check_strike(config: &JobConfig) -> Result<(), ConfigError> {
    if config.write_dedup.is_none() {
        return Err(ConfigError::StrikeNeedsDedup);
    }
    let JobInput::Documents { files, fields } = &config.input else {
        return Err(ConfigError::SubstringsNeedDocuments);
    };
    let html = fields
        .html
        .is_some_and(|m| m != neardup_io::html::HtmlMode::None);
    let strikable = |f: &neardup_io::input::InputFile| {
        matches!(
            f.format,
            neardup_io::source::Format::Jsonl
                | neardup_io::source::Format::Parquet
                | neardup_io::source::Format::Plain
        )
    };
    match files.iter().find(|f| html || !strikable(f)) {
        Some(file) => Err(ConfigError::CannotStrike {
            file: file.path.clone(),
            reason: if html {
                "--html extracts the text from the page".into()
            } else {
                format!(
                    "it is a {} file, whose text is extracted from the record",
                    file.format.kind().name()
                )
            },
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_io::input::InputFile;
    use neardup_io::record::FieldSpec;

    fn documents() -> JobInput {
        JobInput::Documents {
            files: vec![InputFile::stdin(false)],
            fields: FieldSpec {
                text_field: "text".into(),
                id_field: None,
                extra_field: None,
                ..Default::default()
            },
        }
    }

    fn builder() -> JobConfigBuilder {
        JobConfig::builder(documents(), "out".into())
    }

    #[test]
    fn defaults_are_the_named_constants() {
        let config = builder().build().unwrap();
        assert_eq!(config.design.k(), DEFAULT_K);
        assert_eq!(config.design, TableDesign::manku16());
        assert_eq!(config.keep, KeepPolicy::First);
        assert!(config.exact && config.lsh.is_none() && config.verify.is_none());
    }

    #[test]
    fn a_minhash_threshold_sets_the_banding_and_the_verification() {
        let config = builder().scheme(Scheme::minhash()).build().unwrap();
        let banding = config.lsh.unwrap();
        assert_eq!(
            banding,
            Banding::optimal(DEFAULT_THRESHOLD - LSH_MARGIN, 128),
            "tuned below the default threshold"
        );
        let verify = config.verify.unwrap();
        assert_eq!(verify.min_jaccard, DEFAULT_THRESHOLD);
        assert!(!verify.estimate);
        let explicit = builder()
            .scheme(Scheme::minhash())
            .banding(Some((8, 4)))
            .verify(Some(VerifyMode::MinHash))
            .build()
            .unwrap();
        assert_eq!(explicit.lsh.unwrap(), Banding { bands: 8, rows: 4 });
        assert!(explicit.verify.unwrap().estimate);
    }

    #[test]
    fn a_column_keep_policy_reads_its_column() {
        let config = builder().keep("max:score").build().unwrap();
        let JobInput::Documents { fields, .. } = &config.input else {
            panic!("documents")
        };
        assert_eq!(fields.extra_field.as_deref(), Some("score"));
    }

    #[test]
    fn canonical_host_takes_the_default_inner_policy() {
        let with_urls = |times: bool| {
            let mut input = documents();
            if let JobInput::Documents { fields, .. } = &mut input {
                fields.url_field = Some("url".into());
                fields.time_field = times.then(|| "time".into());
            }
            JobConfig::builder(input, "out".into())
        };
        let keep = |b: JobConfigBuilder| b.build().unwrap().keep.describe();
        assert_eq!(
            keep(with_urls(true).keep("canonical-host")),
            "canonical-host:newest"
        );
        assert_eq!(
            keep(with_urls(false).keep("canonical-host")),
            "canonical-host:first"
        );
        assert_eq!(
            keep(with_urls(true).keep("canonical-host:longest")),
            "canonical-host:longest"
        );
        let column = with_urls(false)
            .keep("canonical-host:max:score")
            .build()
            .unwrap();
        let JobInput::Documents { fields, .. } = &column.input else {
            panic!("documents")
        };
        assert_eq!(fields.extra_field.as_deref(), Some("score"));
    }

    #[test]
    fn mistakes_are_refused_with_the_command_line_message() {
        let message = |b: JobConfigBuilder| b.build().unwrap_err().to_string();
        assert_eq!(
            message(builder().threshold(Some(1.5))),
            "--threshold 1.5 is out of range: it must be between 0 and 1"
        );
        assert_eq!(
            message(builder().threshold(Some(0.5))),
            "--threshold applies to --method minhash (for simhash use -k, and --min-jaccard with --verify jaccard)"
        );
        assert_eq!(
            message(builder().min_jaccard(Some(0.5))),
            "--min-jaccard and --verify-shingle need --verify jaccard"
        );
        assert_eq!(
            message(builder().keep("biggest")),
            "--keep \"biggest\": expected first, longest, shortest, newest, oldest, max:COLUMN, min:COLUMN or canonical-host[:POLICY]"
        );
        assert_eq!(
            message(builder().keep("canonical-host")),
            "--keep canonical-host:first needs the documents' URLs: web archives, or --url-field for JSONL and Parquet"
        );
        assert_eq!(
            message(builder().tables("manku16").k(4)),
            "--tables manku16 -k 4"
        );
        assert_eq!(
            message(builder().scheme(Scheme::minhash()).banding(Some((100, 2)))),
            "--bands 100 --rows 2 needs 200 permutations, the signature has 128"
        );
        let search = JobConfig::builder(JobInput::Fingerprints { files: vec![] }, "o".into());
        assert_eq!(
            message(search.clone().write_dedup(Some("d".into()))),
            "--write-dedup needs the input documents: neardup search cannot write them"
        );
        assert_eq!(
            message(search.keep("min:x")),
            "a fingerprint table has no input columns to keep by: use --keep first|longest|shortest"
        );
    }
}
