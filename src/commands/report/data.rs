//! What the report shows, gathered from a run's tables in one streaming pass over each,
//! so that memory and the size of the page stay bounded whatever the size of the run
//! (the bounds are the constants below; the aggregates are histograms).
//!
//! Memory: the histograms and samples are fixed-size; the cluster-size histogram has one
//! entry per distinct size (at most about √(2·documents)); the host counts have one entry
//! per host, and with hosts the set of removed `doc_id`s is held (8 bytes each, with hash
//! overhead ~16) to count removals per host.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float32Type, Int64Type, UInt32Type, UInt64Type, UInt8Type};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use neardup_io::parquet_in::{u64_column, TableFile};
use neardup_io::run_dir::{committed_parts, each_part_batch, RunDir, Table};
use neardup_io::IoError;
use serde_json::Value;

/// Borderline pairs shown side by side: the near pairs farthest apart (largest Hamming
/// distance, or lowest Jaccard when verified), ties broken by a hash of the pair so that
/// the sample is spread over the corpus.
pub const BORDERLINE_PAIRS: usize = 6;
/// Largest clusters shown (of the up to 10 in summary.json's `largest_clusters`).
pub const CLUSTERS_SHOWN: usize = 3;
/// Members of each shown cluster compared with its kept document.
pub const MEMBERS_SHOWN: usize = 2;
/// Rows of the host and mirror tables shown.
pub const HOST_ROWS: usize = 15;
/// Bins of the Jaccard histogram (width 0.05).
pub const JACCARD_BINS: usize = 20;

/// A pair of the sample.
#[derive(Clone, Debug)]
pub struct PairSample {
    pub doc_a: u64,
    pub doc_b: u64,
    pub hamming: u8,
    pub kind: String,
    pub jaccard: Option<f32>,
}

/// One of the largest clusters: its kept document and a few others.
#[derive(Clone, Debug)]
pub struct ClusterSample {
    pub cluster_id: u64,
    pub size: u64,
    pub kept: Option<u64>,
    pub others: Vec<u64>,
}

/// Where a sampled document is, from `fingerprints/`.
#[derive(Clone, Debug, Default)]
pub struct DocInfo {
    pub id: Option<String>,
    pub source: String,
    pub record: u64,
    pub bytes: u64,
    pub url: Option<String>,
}

/// A small table for display: column names and rows of text.
#[derive(Clone, Debug, Default)]
pub struct ShownTable {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Rows in the whole table.
    pub total: u64,
}

#[derive(Debug, Default)]
pub struct RunData {
    pub summary: Value,
    /// Pairs by Hamming distance (0..=64), exact and near apart.
    pub exact_by_hamming: Vec<u64>,
    pub near_by_hamming: Vec<u64>,
    /// Near pairs by verified Jaccard (bins of 1/JACCARD_BINS), when pairs carry one.
    pub jaccard_bins: Option<Vec<u64>>,
    pub borderline: Vec<PairSample>,
    /// Clusters by size.
    pub cluster_sizes: BTreeMap<u64, u64>,
    pub largest: Vec<ClusterSample>,
    pub docs: HashMap<u64, DocInfo>,
    /// (host, documents, documents to remove), most removals first, when documents have
    /// hosts.
    pub hosts: Vec<(String, u64, u64)>,
    pub hosts_total: usize,
    /// The run's `hosts/` and `mirrors/` tables, when it has them.
    pub hosts_table: Option<ShownTable>,
    pub mirrors_table: Option<ShownTable>,
}

/// A deterministic scramble of a pair, to break ties without favouring small `doc_id`s
/// (splitmix64's finaliser).
fn mix(a: u64, b: u64) -> u64 {
    let mut z = a.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ b;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn bad(path: &Path, reason: impl Into<String>) -> IoError {
    IoError::BadTable {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Calls `f` on every batch of every committed part of `dir`, reading only `columns`
/// (those that exist: a missing column is left to `f`).
fn each_batch(
    dir: &Path,
    columns: &[&str],
    f: impl FnMut(&Path, &RecordBatch) -> Result<(), IoError>,
) -> Result<(), IoError> {
    each_part_batch(dir, Some(columns), f)
}

/// The UInt64 column `name` of a batch of the part at `path`.
fn u64s<'a>(
    b: &'a RecordBatch,
    name: &str,
    path: &Path,
) -> Result<&'a arrow::array::UInt64Array, IoError> {
    u64_column(b, name, path, |name| {
        format!("column {name:?} is missing or not UInt64")
    })
}

/// Reads what the report shows from the complete run in `dir` (the caller checked
/// `_SUCCESS`).
pub fn gather(dir: &Path) -> Result<RunData, IoError> {
    let run = RunDir::new(dir);
    let summary_path = run.summary();
    let text = std::fs::read_to_string(&summary_path).map_err(|cause| IoError::Open {
        path: summary_path.clone(),
        cause,
    })?;
    let summary: Value =
        serde_json::from_str(&text).map_err(|e| bad(&summary_path, format!("not JSON: {e}")))?;
    let mut data = RunData {
        summary,
        exact_by_hamming: vec![0; 65],
        near_by_hamming: vec![0; 65],
        ..Default::default()
    };
    read_pairs(&run.table(Table::Pairs), &mut data)?;
    let hosts_wanted = has_column(&run.table(Table::Fingerprints), "host")?;
    let removed = read_clusters(&run.table(Table::Clusters), &mut data, hosts_wanted)?;
    read_fingerprints(&run.table(Table::Fingerprints), &mut data, &removed)?;
    data.hosts_table = shown_table(&dir.join("hosts"), &["documents", "docs", "document_count"])?;
    data.mirrors_table = shown_table(&dir.join("mirrors"), &["shared_paths"])?;
    Ok(data)
}

fn read_pairs(dir: &Path, data: &mut RunData) -> Result<(), IoError> {
    // The borderline sample: the BORDERLINE_PAIRS smallest by (closeness, mix).
    let mut sample: BTreeMap<(u64, u64), PairSample> = BTreeMap::new();
    let mut jaccard_bins = vec![0u64; JACCARD_BINS];
    let mut any_jaccard = false;
    each_batch(
        dir,
        &["doc_a", "doc_b", "hamming", "kind", "jaccard"],
        |path, b| {
            let (a, c) = (u64s(b, "doc_a", path)?, u64s(b, "doc_b", path)?);
            let hamming = b
                .column_by_name("hamming")
                .and_then(|c| c.as_primitive_opt::<UInt8Type>())
                .ok_or_else(|| bad(path, "column \"hamming\" is missing or not UInt8"))?;
            let kind = b
                .column_by_name("kind")
                .and_then(|c| c.as_string_opt::<i32>())
                .ok_or_else(|| bad(path, "column \"kind\" is missing or not Utf8"))?;
            let jaccard = b
                .column_by_name("jaccard")
                .and_then(|c| c.as_primitive_opt::<Float32Type>());
            for i in 0..b.num_rows() {
                let h = hamming.value(i).min(64);
                let exact = kind.value(i) == "exact";
                let j = jaccard.filter(|j| j.is_valid(i)).map(|j| j.value(i));
                if exact {
                    data.exact_by_hamming[h as usize] += 1;
                    continue;
                }
                data.near_by_hamming[h as usize] += 1;
                if let Some(j) = j {
                    any_jaccard = true;
                    let bin =
                        ((j.clamp(0.0, 1.0) * JACCARD_BINS as f32) as usize).min(JACCARD_BINS - 1);
                    jaccard_bins[bin] += 1;
                }
                // Closeness: smaller is more borderline.
                let closeness = match j {
                    Some(j) => (j.clamp(0.0, 1.0) * 1e6) as u64,
                    None => 64 - u64::from(h),
                };
                let key = (closeness, mix(a.value(i), c.value(i)));
                if sample.len() < BORDERLINE_PAIRS
                    || key < *sample.keys().next_back().expect("full")
                {
                    sample.insert(
                        key,
                        PairSample {
                            doc_a: a.value(i),
                            doc_b: c.value(i),
                            hamming: h,
                            kind: kind.value(i).to_string(),
                            jaccard: j,
                        },
                    );
                    if sample.len() > BORDERLINE_PAIRS {
                        sample.pop_last();
                    }
                }
            }
            Ok(())
        },
    )?;
    data.borderline = sample.into_values().collect();
    data.jaccard_bins = any_jaccard.then_some(jaccard_bins);
    Ok(())
}

fn has_column(dir: &Path, name: &str) -> Result<bool, IoError> {
    let Some(path) = committed_parts(dir)?.into_iter().next() else {
        return Ok(false);
    };
    Ok(TableFile::open(&path)?.has_column(name))
}

/// Reads `clusters/`: the size histogram and the members of the largest clusters; returns
/// the documents to remove when `want_removed`.
fn read_clusters(
    dir: &Path,
    data: &mut RunData,
    want_removed: bool,
) -> Result<HashSet<u64>, IoError> {
    let largest: Vec<(u64, u64)> = data.summary["largest_clusters"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| Some((c["cluster_id"].as_u64()?, c["size"].as_u64()?)))
                .take(CLUSTERS_SHOWN)
                .collect()
        })
        .unwrap_or_default();
    let mut samples: BTreeMap<u64, ClusterSample> = largest
        .iter()
        .map(|&(cluster_id, size)| {
            (
                cluster_id,
                ClusterSample {
                    cluster_id,
                    size,
                    kept: None,
                    others: Vec::new(),
                },
            )
        })
        .collect();
    let mut removed = HashSet::new();
    each_batch(
        dir,
        &["doc_id", "cluster_id", "cluster_size", "keep"],
        |path, b| {
            let docs = u64s(b, "doc_id", path)?;
            let clusters = b
                .column_by_name("cluster_id")
                .and_then(|c| c.as_primitive_opt::<Int64Type>())
                .ok_or_else(|| bad(path, "column \"cluster_id\" is missing or not Int64"))?;
            let sizes = b
                .column_by_name("cluster_size")
                .and_then(|c| c.as_primitive_opt::<UInt32Type>())
                .ok_or_else(|| bad(path, "column \"cluster_size\" is missing or not UInt32"))?;
            let keep = b
                .column_by_name("keep")
                .and_then(|c| c.as_boolean_opt())
                .ok_or_else(|| bad(path, "column \"keep\" is missing or not Boolean"))?;
            for i in 0..b.num_rows() {
                let cluster = clusters.value(i);
                if cluster < 0 {
                    continue;
                }
                let doc = docs.value(i);
                if keep.value(i) {
                    *data
                        .cluster_sizes
                        .entry(u64::from(sizes.value(i)))
                        .or_default() += 1;
                } else if want_removed {
                    removed.insert(doc);
                }
                if let Some(s) = samples.get_mut(&(cluster as u64)) {
                    if keep.value(i) {
                        s.kept = Some(doc);
                    } else {
                        s.others.push(doc);
                        if s.others.len() > 4 * MEMBERS_SHOWN {
                            s.others.sort_unstable();
                            s.others.truncate(MEMBERS_SHOWN);
                        }
                    }
                }
            }
            Ok(())
        },
    )?;
    data.largest = largest
        .iter()
        .filter_map(|(id, _)| samples.remove(id))
        .map(|mut s| {
            s.others.sort_unstable();
            s.others.truncate(MEMBERS_SHOWN);
            s
        })
        .collect();
    Ok(removed)
}

/// Reads `fingerprints/`: where the sampled documents are, and the counts per host.
fn read_fingerprints(
    dir: &Path,
    data: &mut RunData,
    removed: &HashSet<u64>,
) -> Result<(), IoError> {
    let mut wanted: HashSet<u64> = HashSet::new();
    for p in &data.borderline {
        wanted.extend([p.doc_a, p.doc_b]);
    }
    for c in &data.largest {
        wanted.extend(c.kept);
        wanted.extend(c.others.iter().copied());
    }
    let mut hosts: HashMap<String, (u64, u64)> = HashMap::new();
    each_batch(
        dir,
        &["doc_id", "id", "source", "record", "bytes", "url", "host"],
        |path, b| {
            let docs = u64s(b, "doc_id", path)?;
            let host = b
                .column_by_name("host")
                .and_then(|c| c.as_string_opt::<i32>());
            if let Some(host) = host {
                for i in (0..b.num_rows()).filter(|&i| host.is_valid(i)) {
                    let entry = hosts.entry(host.value(i).to_string()).or_default();
                    entry.0 += 1;
                    entry.1 += u64::from(removed.contains(&docs.value(i)));
                }
            }
            if !(0..b.num_rows()).any(|i| wanted.contains(&docs.value(i))) {
                return Ok(());
            }
            let strings = |name: &str| {
                b.column_by_name(name)
                    .and_then(|c| c.as_string_opt::<i32>())
            };
            let (ids, sources, urls) = (strings("id"), strings("source"), strings("url"));
            let sources =
                sources.ok_or_else(|| bad(path, "column \"source\" is missing or not Utf8"))?;
            let (records, bytes) = (u64s(b, "record", path)?, u64s(b, "bytes", path)?);
            let text = |col: Option<&arrow::array::StringArray>, i: usize| {
                col.filter(|c| c.is_valid(i))
                    .map(|c| c.value(i).to_string())
            };
            for i in (0..b.num_rows()).filter(|&i| wanted.contains(&docs.value(i))) {
                data.docs.insert(
                    docs.value(i),
                    DocInfo {
                        id: text(ids, i),
                        source: sources.value(i).to_string(),
                        record: records.value(i),
                        bytes: bytes.value(i),
                        url: text(urls, i),
                    },
                );
            }
            Ok(())
        },
    )?;
    data.hosts_total = hosts.len();
    let mut hosts: Vec<(String, u64, u64)> =
        hosts.into_iter().map(|(h, (d, r))| (h, d, r)).collect();
    hosts.sort_by(|a, b| b.2.cmp(&a.2).then(b.1.cmp(&a.1)).then(a.0.cmp(&b.0)));
    hosts.retain(|h| h.2 > 0);
    hosts.truncate(HOST_ROWS);
    data.hosts = hosts;
    Ok(())
}

/// The first [`HOST_ROWS`] rows of a table another command adds to the run (`hosts/`,
/// `mirrors/`), largest first by the first of `sort_by` it has (else in file order), every
/// column shown as text; `None` when the run has no such table.
fn shown_table(dir: &Path, sort_by: &[&str]) -> Result<Option<ShownTable>, IoError> {
    if !dir.is_dir() {
        return Ok(None);
    }
    let mut shown = ShownTable::default();
    let mut keyed: Vec<(std::cmp::Reverse<u64>, u64, Vec<String>)> = Vec::new();
    let mut seen = 0u64;
    each_part_batch(dir, None, |path, batch| {
        if shown.columns.is_empty() {
            shown.columns = batch
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
        }
        let key_col = sort_by
            .iter()
            .find_map(|name| batch.column_by_name(name))
            .and_then(|c| arrow::compute::cast(c, &arrow::datatypes::DataType::UInt64).ok());
        let options = FormatOptions::default().with_null("");
        let formatters = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(path, e.to_string()))?;
        for i in 0..batch.num_rows() {
            let key = key_col
                .as_ref()
                .map(|k| k.as_primitive::<UInt64Type>())
                .filter(|k| k.is_valid(i))
                .map_or(0, |k| k.value(i));
            let row = formatters.iter().map(|f| f.value(i).to_string()).collect();
            keyed.push((std::cmp::Reverse(key), seen, row));
            seen += 1;
            if keyed.len() > 4 * HOST_ROWS {
                keyed.sort();
                keyed.truncate(HOST_ROWS);
            }
        }
        Ok(())
    })?;
    keyed.sort();
    keyed.truncate(HOST_ROWS);
    shown.rows = keyed.into_iter().map(|(_, _, row)| row).collect();
    shown.total = seen;
    Ok(Some(shown))
}

/// Every document place the report wants texts of.
pub fn wanted_places(data: &RunData) -> BTreeSet<(String, u64)> {
    data.docs
        .values()
        .map(|d| (d.source.clone(), d.record))
        .collect()
}
