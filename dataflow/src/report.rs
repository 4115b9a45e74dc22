//! What each worker saw, and the job summary merged from all of them.
//!
//! Every worker fills a [`WorkerReport`] while the main dataflow runs. When it is done, a
//! second, tiny dataflow sends every report to worker 0, which merges them into the
//! [`JobSummary`] written as `summary.json`, and decides whether the run succeeded.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::SUMMARY_TOP;

/// A hot bucket: many fingerprints sharing one table key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketInfo {
    pub table: u32,
    /// The key bits (the fingerprint masked by the table's key mask), in hex.
    pub key: String,
    pub size: u64,
}

/// A large cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterInfo {
    pub cluster_id: u64,
    pub size: u64,
}

/// The evidence that each removed document duplicates the one kept in its place
/// (summary.json's `removal`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Removal {
    /// The clustering rule, `--cluster`: `verified`, `star` or `components`.
    pub rule: String,
    /// What connected components of the same pairs would remove (under `components`, the
    /// documents it removes).
    pub components_would_remove: u64,
    /// The lowest verified Jaccard similarity between a removed document and its kept one
    /// (null where none was measured: simhash mode without verification, components).
    pub lowest_jaccard: Option<f32>,
    /// The largest Hamming distance between a removed document and its kept one (simhash
    /// mode; null under components, which does not compare them).
    pub highest_hamming: Option<u8>,
    /// Removed documents whose similarity to their kept one the run did not measure: 0 for
    /// stars, every removed document under components.
    pub removed_unmeasured: u64,
    /// Under `--cluster verified` with a search by bands and verification: pairs of
    /// documents the search did not pair, in components where one could let fewer documents
    /// be kept, sent to be verified; and those that reached the threshold (they are not in
    /// `pairs/`, which holds what the search found; a removed document may name such a pair
    /// with its kept one in `clusters/`).
    pub unlinked_pairs_checked: u64,
    pub unlinked_pairs_verified: u64,
}

impl Removal {
    /// Adds another worker's: each worker makes the clusters of its own components.
    fn merge(&mut self, other: Removal) {
        self.components_would_remove += other.components_would_remove;
        self.removed_unmeasured += other.removed_unmeasured;
        self.unlinked_pairs_checked += other.unlinked_pairs_checked;
        self.unlinked_pairs_verified += other.unlinked_pairs_verified;
        self.lowest_jaccard = match (self.lowest_jaccard, other.lowest_jaccard) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.highest_hamming = self.highest_hamming.max(other.highest_hamming);
    }
}

/// What a search for repeated passages found (summary.json's `substrings`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SubstringCounts {
    /// N, the shortest repeat in bytes.
    pub min_bytes: u64,
    /// `all` or `later`.
    pub occurrences: String,
    /// `chars` or `words`.
    pub snap: String,
    /// Documents searched and their bytes of text.
    pub documents: u64,
    pub bytes: u64,
    /// Rows of `substrings/`.
    pub ranges: u64,
    /// Bytes inside the reported ranges.
    pub repeated_bytes: u64,
    /// `repeated_bytes / bytes` (0 for an empty corpus).
    pub repeated_share: f64,
    /// Documents with at least one reported range.
    pub documents_touched: u64,
    /// Suffix arrays built (blocks); anchors sent to be counted; window records exchanged,
    /// one per distinct window of a block that repeats there or has a hot anchor.
    pub blocks: u64,
    #[serde(default)]
    pub anchor_records: u64,
    pub window_records: u64,
    /// Sorted runs of window records written to disk past the memory limit (merge passes
    /// included), and their bytes.
    pub spill_runs: u64,
    pub spilled_bytes: u64,
}

impl SubstringCounts {
    fn merge(&mut self, other: SubstringCounts) {
        self.documents += other.documents;
        self.bytes += other.bytes;
        self.ranges += other.ranges;
        self.repeated_bytes += other.repeated_bytes;
        self.documents_touched += other.documents_touched;
        self.blocks += other.blocks;
        self.anchor_records += other.anchor_records;
        self.window_records += other.window_records;
        self.spill_runs += other.spill_runs;
        self.spilled_bytes += other.spilled_bytes;
        self.repeated_share = if self.bytes == 0 {
            0.0
        } else {
            self.repeated_bytes as f64 / self.bytes as f64
        };
    }
}

/// The rounds the search chose and the memory it expected to need.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchPlan {
    /// Fingerprints entered in the tables, over all workers.
    pub fingerprints: u64,
    pub rounds: usize,
    /// Estimated peak bytes of the search in each process.
    pub estimated_bytes: u64,
    /// The --memory-limit the rounds were chosen for (bytes per process), if any.
    pub memory_limit: Option<u64>,
    /// When the search spilled to disk: the leading key bits each table was partitioned
    /// on (`2^bits` files per table and worker). `None`: in memory.
    #[serde(default)]
    pub spill_partition_bits: Option<u32>,
}

/// One stage's external sort ([`neardup_io::spill::ExternalSort`]): its memory and what it
/// wrote to disk, summed over workers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SortPlan {
    /// Bytes of records each worker keeps in memory before it writes a run (the largest;
    /// `None`: no limit, nothing spills).
    pub budget_bytes: Option<u64>,
    /// Records sorted.
    pub records: u64,
    /// Sorted runs written to disk, and their bytes (0: it fit in memory).
    pub runs: u64,
    pub spilled_bytes: u64,
}

impl SortPlan {
    pub fn add(&mut self, other: &SortPlan) {
        self.budget_bytes = self.budget_bytes.max(other.budget_bytes);
        self.records += other.records;
        self.runs += other.runs;
        self.spilled_bytes += other.spilled_bytes;
    }
}

/// summary.json's `memory`: the limit, each process's peak resident memory, and each
/// stage's plan (in memory, or how much it spilled).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryReport {
    /// `--memory-limit` per process (`None`: no limit).
    pub limit_bytes: Option<u64>,
    /// The peak resident memory of each process, in process order (0 where unknown: not
    /// Linux).
    pub peak_rss_bytes: Vec<u64>,
    /// External sorts by stage; the table search's plan is `search_plan`.
    pub sorts: BTreeMap<String, SortPlan>,
}

/// This process's peak resident memory so far (`VmHWM` of /proc/self/status), if known.
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// How many skip examples a report keeps.
pub const SKIP_EXAMPLES: usize = 5;

impl WorkerReport {
    pub fn skip(&mut self, file: u32, record: u64, message: String) {
        self.skipped += 1;
        self.skip_examples.push((file, record, message));
        // The earliest in input order, whichever worker saw them.
        self.skip_examples.sort();
        self.skip_examples.truncate(SKIP_EXAMPLES);
    }

    /// Counts a record that is not a document.
    pub fn skip_record(&mut self, reason: neardup_io::web::SkipReason) {
        *self
            .skipped_records
            .entry(reason.name().to_owned())
            .or_default() += 1;
    }

    /// Adds bytes sent to other processes, by stage.
    pub fn add_network(&mut self, bytes: BTreeMap<String, u64>) {
        for (stage, n) in bytes {
            *self.network_bytes.entry(stage).or_default() += n;
        }
    }

    pub fn stage_done(&mut self, stage: &str, seconds: f64) {
        self.stage_seconds.insert(stage.to_string(), seconds);
    }

    pub fn note_bucket(&mut self, bucket: BucketInfo) {
        self.largest_buckets.push(bucket);
        keep_largest(&mut self.largest_buckets, |b| b.size);
    }

    /// Adds another worker's report to this one.
    pub fn merge(&mut self, mut other: WorkerReport) {
        self.add_counts(&mut other);
        self.skip_examples.extend(other.skip_examples);
        self.skip_examples.sort();
        self.skip_examples.truncate(SKIP_EXAMPLES);
        self.errors.extend(other.errors);
        self.largest_buckets.extend(other.largest_buckets);
        keep_largest(&mut self.largest_buckets, |b| b.size);
        self.largest_clusters.extend(other.largest_clusters);
        keep_largest(&mut self.largest_clusters, |c| c.size);
        for (stage, secs) in other.stage_seconds {
            let slot = self.stage_seconds.entry(stage).or_insert(0.0);
            *slot = slot.max(secs);
        }
        self.parts.extend(other.parts);
        self.parts.sort();
        self.add_network(other.network_bytes);
        self.search_plan = self.search_plan.take().or(other.search_plan);
        match (&mut self.substrings, other.substrings) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
        self.removal = match (self.removal.take(), other.removal) {
            (Some(mut mine), Some(theirs)) => {
                mine.merge(theirs);
                Some(mine)
            }
            (mine, theirs) => mine.or(theirs),
        };
        for (stage, plan) in other.sorts {
            self.sorts.entry(stage).or_default().add(&plan);
        }
        for (process, bytes) in other.peak_rss {
            let peak = self.peak_rss.entry(process).or_default();
            *peak = (*peak).max(bytes);
        }
        for (process, retries) in other.store_retries {
            let most = self.store_retries.entry(process).or_default();
            *most = (*most).max(retries);
        }
        for warning in other.warnings {
            if !self.warnings.contains(&warning) {
                self.warnings.push(warning);
            }
        }
    }
}

/// Sorts by size, largest first (ties in a fixed order), and keeps the top few.
fn keep_largest<T: Ord>(items: &mut Vec<T>, size: impl Fn(&T) -> u64) {
    items.sort_by(|a, b| size(b).cmp(&size(a)).then_with(|| a.cmp(b)));
    items.truncate(SUMMARY_TOP);
}

impl Ord for BucketInfo {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.table, &self.key, self.size).cmp(&(other.table, &other.key, other.size))
    }
}
impl PartialOrd for BucketInfo {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ClusterInfo {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.cluster_id, self.size).cmp(&(other.cluster_id, other.size))
    }
}
impl PartialOrd for ClusterInfo {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// The parameters of a run, as recorded in summary.json.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Parameters {
    pub scheme: String,
    pub k: u32,
    pub tables: String,
    pub keep: String,
    pub exact: bool,
    pub skip_invalid: bool,
    pub inputs: Vec<String>,
    pub workers_per_process: usize,
    pub processes: usize,
    pub command_line: Vec<String>,
}

/// summary.json: the run's parameters, counts, timings and notable buckets and clusters.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobSummary {
    pub version: String,
    pub parameters: Parameters,
    pub counts: Counts,
    /// Seconds from the start to the end of each stage (the slowest worker's).
    pub stage_seconds: BTreeMap<String, f64>,
    pub largest_buckets: Vec<BucketInfo>,
    pub largest_clusters: Vec<ClusterInfo>,
    /// Rounds and estimated memory of the table search.
    pub search_plan: Option<SearchPlan>,
    pub skip_examples: Vec<String>,
    /// Documents written to and left out of the deduplicated corpus (--write-dedup).
    pub dedup: Option<(u64, u64)>,
    /// What crossed between processes (all zero with one process).
    #[serde(default)]
    pub network: Network,
    /// Repeated passages (`neardup substrings`, `run --substrings`).
    // Never `skip_serializing_if`: the summary also travels between processes as bincode,
    // which is not self-describing (a skipped field breaks its reading).
    #[serde(default)]
    pub substrings: Option<SubstringCounts>,
    /// How the documents to remove were chosen, and the evidence that each duplicates its
    /// kept one (absent from summaries of older versions).
    #[serde(default)]
    pub removal: Option<Removal>,
    /// Memory: the limit, each process's peak, each stage's plan (absent from summaries of
    /// older versions).
    #[serde(default)]
    pub memory: Option<MemoryReport>,
    /// Reads of inputs in object stores asked again after a failure (a request refused or
    /// cut), over every process (`neardup_io::store`).
    #[serde(default)]
    pub store_retries: u64,
    pub warnings: Vec<String>,
    pub errors: Vec<String>,
    pub parts: Vec<String>,
}

/// Bytes sent between processes: each record sent by an exchange to a worker of another
/// process, at its serialized size (timely's framing of each batch not included).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Network {
    /// All stages together.
    pub bytes: u64,
    /// `bytes` per document read.
    pub bytes_per_document: f64,
    /// By stage: `read` (documents to their home worker), `exact`, `near search`, `verify`,
    /// `clusters`, ...; a stage that sent nothing to another process is absent.
    pub by_stage: BTreeMap<String, u64>,
}

/// Declares the counts once: [`WorkerReport`]'s count fields (in this order, the counts
/// first: it is the layout of the report a resume part ends with, bincode,
/// [`crate::stages::fingerprint::resume`]), [`Counts`] (summary.json's `counts`, in its
/// order), what the summary takes from the merged report ([`Counts::of`]), and how reports
/// add up (`WorkerReport::add_counts`). Each count is the [`WorkerReport`] field of the
/// same name, summed over workers, unless it is derived from the others (`= |r:
/// &WorkerReport| ...`): a derived count is in [`Counts`] only. The report's other fields
/// follow its counts, as written in `struct WorkerReport { ... }`.
///
/// Adding a count is one line in the list; a derived one needs no report field.
macro_rules! counts {
    (
        $(#[$report_attr:meta])*
        pub struct WorkerReport { $($other:tt)* }
        counts { $($list:tt)* }
    ) => {
        counts!(@split [$(#[$report_attr])*] [$($other)*] [] [] $($list)*);
    };
    // A derived count: in Counts only.
    (@split $ra:tt $other:tt [$($r:tt)*] [$($c:tt)*]
        $(#[$a:meta])* $name:ident: $ty:ty = $derived:expr, $($rest:tt)*) => {
        counts!(@split $ra $other [$($r)*] [$($c)* [$(#[$a])* $name: $ty = $derived]] $($rest)*);
    };
    // A summed count: a report field and a count.
    (@split $ra:tt $other:tt [$($r:tt)*] [$($c:tt)*]
        $(#[$a:meta])* $name:ident: $ty:ty, $($rest:tt)*) => {
        counts!(@split $ra $other [$($r)* [$(#[$a])* $name: $ty]] [$($c)* [$(#[$a])* $name: $ty]] $($rest)*);
    };
    (@split [$($ra:tt)*] [$($other:tt)*]
        [$([$(#[$rattr:meta])* $rname:ident: $rty:ty])*]
        [$([$(#[$attr:meta])* $name:ident: $ty:ty $(= $derived:expr)?])*]) => {
        $($ra)*
        pub struct WorkerReport {
            $($(#[$rattr])* pub $rname: $rty,)*
            $($other)*
        }

        /// summary.json's `counts`: every count of the merged report, in this order.
        #[derive(Clone, Debug, Default, Serialize, Deserialize)]
        pub struct Counts {
            $($(#[$attr])* pub $name: $ty,)*
        }

        impl Counts {
            /// The counts of a (merged) report.
            pub fn of(r: &WorkerReport) -> Counts {
                Counts {
                    $($name: counts!(@value r $name $($derived)?),)*
                }
            }
        }

        impl WorkerReport {
            /// Adds the counts of `other` to this report's (taking them from `other`).
            fn add_counts(&mut self, other: &mut WorkerReport) {
                $(counts!(@add self other $name $($derived)?);)*
            }
        }
    };
    (@value $r:ident $name:ident) => { $r.$name.clone() };
    (@value $r:ident $name:ident $derived:expr) => { ($derived)($r) };
    (@add $to:ident $from:ident $name:ident) => {
        Tally::add(&mut $to.$name, std::mem::take(&mut $from.$name))
    };
    (@add $to:ident $from:ident $name:ident $derived:expr) => {};
}

/// How a count of one report adds another's.
trait Tally {
    fn add(&mut self, other: Self);
}

impl Tally for u64 {
    fn add(&mut self, other: u64) {
        *self += other;
    }
}

impl Tally for BTreeMap<String, u64> {
    fn add(&mut self, other: Self) {
        for (key, n) in other {
            *self.entry(key).or_default() += n;
        }
    }
}

counts! {
    /// Counts and events of one worker: the counts (declared below, in the list), then
    /// these.
    #[derive(Clone, Debug, Default, Serialize, Deserialize)]
    pub struct WorkerReport {
        /// The first few skipped records: (file index, record, message naming file and
        /// line).
        pub skip_examples: Vec<(u32, u64, String)>,
        /// Fatal errors: any one fails the run.
        pub errors: Vec<String>,
        pub largest_buckets: Vec<BucketInfo>,
        pub largest_clusters: Vec<ClusterInfo>,
        /// Seconds from the job's start to the end of each stage on this worker.
        pub stage_seconds: BTreeMap<String, f64>,
        /// Part files this worker committed.
        pub parts: Vec<String>,
        /// Bytes sent to workers of other processes, by stage (see
        /// [`crate::worker::NetworkMeter`]).
        pub network_bytes: BTreeMap<String, u64>,
        /// How the search was planned (the same on every worker).
        pub search_plan: Option<SearchPlan>,
        pub warnings: Vec<String>,
        /// The search for repeated passages, when the job ran one.
        pub substrings: Option<SubstringCounts>,
        /// How the documents to remove were chosen (worker 0's, once the clusters are made).
        pub removal: Option<Removal>,
        /// Each external sort's plan and what it spilled, by stage (summed over workers).
        pub sorts: BTreeMap<String, SortPlan>,
        /// The peak resident memory of each process (by process index), as its workers last
        /// saw it.
        pub peak_rss: BTreeMap<usize, u64>,
        /// Each process's retries of object store reads (by process index).
        pub store_retries: BTreeMap<usize, u64>,
    }
    counts {
        documents: u64,
        bytes: u64,
        empty: u64,
        skipped: u64,
        blank_lines: u64,
        /// Records that are not documents, by reason ("other type", "status", "revisit",
        /// "truncated", "not text", "too long"); see docs/inputs.md.
        #[serde(default)]
        skipped_records: BTreeMap<String, u64>,
        /// Documents cut at --max-doc-bytes.
        #[serde(default)]
        truncated: u64,
        /// WARC revisit records reported as exact duplicates of the capture they name (their
        /// edges are among exact_pairs).
        #[serde(default)]
        revisits_linked: u64,
        duplicate_ids: u64,
        exact_groups: u64,
        exact_duplicates: u64,
        exact_pairs: u64,
        near_pairs: u64,
        /// Pairs of documents with the same normalized URL (`--url-normalize`), whatever their
        /// content: N - 1 per URL seen N times (their edges are in pairs/ with kind `url`).
        #[serde(default)]
        url_pairs: u64,
        /// Exact and near pairs whose two documents have known, different hosts (the host of
        /// the normalized URL): copies of a page on another site.
        #[serde(default)]
        cross_host_pairs: u64,
        /// Rows of mirrors/ with verdict `mirror`, and with verdict `partial`.
        #[serde(default)]
        mirrors: u64,
        #[serde(default)]
        partial_mirrors: u64,
        /// Hosts with a site template, and the template blocks over all of them (the
        /// templates stage, `--site-templates`; docs/inputs.md).
        #[serde(default)]
        template_hosts: u64,
        #[serde(default)]
        template_blocks: u64,
        /// Rows of hosts/: distinct hosts of the documents' URLs.
        #[serde(default)]
        hosts: u64,
        /// Content clusters spread over more than the mirror host limit, whose hosts were
        /// linked only to the cluster's anchor (the star rule: mirror networks, robots.txt, 404
        /// pages, parked templates).
        #[serde(default)]
        mirror_star_clusters: u64,
        /// Clusters whose kept document `--keep canonical-host` moved: the inner policy's
        /// choice was on a mirroring host (in a mirror group, not its canonical host) and
        /// another copy was not.
        #[serde(default)]
        keep_moved_to_canonical_host: u64,
        /// Candidate pairs found by the near search (before verification and, in MinHash
        /// mode, before removing pairs found in several bands).
        candidates: u64,
        /// Near pairs dropped by verification (below --min-jaccard).
        rejected: u64,
        /// Every pair written to pairs/.
        pairs: u64 = |r: &WorkerReport| r.exact_pairs + r.near_pairs + r.url_pairs,
        clusters: u64,
        clustered_documents: u64,
        documents_to_remove: u64,
        keep_value_missing: u64,
        table_records: u64,
        /// Bytes the table search wrote to disk when it spilled (0: it fit in memory).
        #[serde(default)]
        spilled_bytes: u64,
        comparisons: u64,
        /// Buckets split because they were too large.
        bucket_splits: u64,
    }
}

impl JobSummary {
    pub fn from_report(report: WorkerReport, parameters: Parameters) -> Self {
        let counts = Counts::of(&report);
        JobSummary {
            version: env!("CARGO_PKG_VERSION").to_string(),
            parameters,
            counts,
            stage_seconds: report.stage_seconds,
            largest_buckets: report.largest_buckets,
            largest_clusters: report.largest_clusters,
            search_plan: report.search_plan,
            skip_examples: report
                .skip_examples
                .into_iter()
                .map(|(_, _, m)| m)
                .collect(),
            dedup: None,
            network: {
                let by_stage: BTreeMap<String, u64> = report
                    .network_bytes
                    .into_iter()
                    .filter(|&(_, n)| n > 0)
                    .collect();
                let bytes = by_stage.values().sum::<u64>();
                Network {
                    bytes,
                    bytes_per_document: bytes as f64 / report.documents.max(1) as f64,
                    by_stage,
                }
            },
            substrings: report.substrings,
            removal: report.removal,
            memory: Some(MemoryReport {
                limit_bytes: None,
                peak_rss_bytes: report.peak_rss.values().copied().collect(),
                sorts: report.sorts,
            }),
            store_retries: report.store_retries.values().sum(),
            warnings: report.warnings,
            errors: report.errors,
            parts: report.parts,
        }
    }

    pub fn succeeded(&self) -> bool {
        self.errors.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reports and summaries travel between processes as bincode (timely's serialization):
    /// whatever serde attributes they carry must round-trip there, not only in JSON.
    #[test]
    fn reports_and_summaries_round_trip_through_bincode() {
        let mut report = WorkerReport {
            documents: 3,
            ..Default::default()
        };
        report.add_network([("exact".to_string(), 60)].into());
        let back: WorkerReport =
            bincode::deserialize(&bincode::serialize(&report).unwrap()).unwrap();
        assert_eq!(back.documents, 3);
        let parameters = Parameters {
            scheme: "simhash-doc".into(),
            k: 3,
            tables: "manku16".into(),
            keep: "first".into(),
            exact: true,
            skip_invalid: false,
            inputs: vec!["a.jsonl".into()],
            workers_per_process: 1,
            processes: 2,
            command_line: Vec::new(),
        };
        let summary = JobSummary::from_report(report, parameters);
        let bytes = bincode::serialize(&summary).unwrap();
        let back: JobSummary = bincode::deserialize(&bytes).unwrap();
        assert_eq!(back.network, summary.network);
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&summary).unwrap()
        );
    }
}
