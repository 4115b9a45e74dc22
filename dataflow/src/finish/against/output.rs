//! What `--against` writes to the run directory: its pairs (`against-pairs.parquet`), the
//! rows of the clusters it formed or touched (`against-clusters.parquet`) and the indexed
//! clusters merged into another (`against-merges.parquet`).
//!
//! The simple version collects the pairs and the rows in two `Vec`s, sorts them and writes
//! them. Here each goes to a sort as the step finds it ([`AgainstPair`], [`AgainstRow`]),
//! within the step's memory, and is written from the sort's merge: what the step holds
//! does not grow with its pairs or its clusters' members. One thing is known only at the
//! end: the size and the kept document of an indexed cluster new documents joined (under
//! stars), found by a scan of the index after its rows were sorted. Those clusters
//! ([`Joined`]) go to a sort by cluster, as the rows do, and the two are merged as the rows
//! are written, completing each joined cluster's rows.

use std::io;
use std::path::Path;

use neardup_io::index::{Manifest, MergeRow};
use neardup_io::parquet_out::{ClusterRow, PairRow, PartWriter};
use neardup_io::spill::{ExternalSort, SortStats, SpillRecord};
use serde::{Deserialize, Serialize};

use super::{spilled, AGAINST_CLUSTERS, AGAINST_MERGES, AGAINST_PAIRS};
use crate::finish::FinishError;
use crate::operators::sort::ordered_by;

/// A row of `against-pairs.parquet`, in its order: by documents, then by the rest of the
/// row (so that the order never depends on the order pairs were found in).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct AgainstPair(pub PairRow);

ordered_by!(AgainstPair, |p| (
    p.0.doc_a,
    p.0.doc_b,
    p.0.kind as u8,
    p.0.hamming,
    p.0.jaccard.map(f32::to_bits)
));
impl SpillRecord for AgainstPair {}

/// A row of `against-clusters.parquet`, in its order: by cluster, then document. `fill`: an
/// indexed member of a cluster new documents joined, not kept: its `kept_doc_id` is its
/// cluster's kept document, known once the index has been scanned ([`Joined`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct AgainstRow {
    pub row: ClusterRow,
    pub fill: bool,
}

ordered_by!(AgainstRow, |r| (r.row.cluster_id, r.row.doc_id));
impl SpillRecord for AgainstRow {}

/// An indexed cluster new documents joined: its id, its size with them, its kept document;
/// by id.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(super) struct Joined {
    pub label: i64,
    pub size: u32,
    pub kept: u64,
}

ordered_by!(Joined, |j| j.label);
impl SpillRecord for Joined {}

/// The rows of the clusters, sorted as they come, and the joined clusters whose rows are
/// completed as they are written.
pub(super) struct Rows {
    sort: ExternalSort<AgainstRow>,
    joined: Option<ExternalSort<Joined>>,
}

impl Rows {
    /// No rows yet; `sort`: where they go.
    pub fn new(sort: ExternalSort<AgainstRow>) -> Rows {
        Rows { sort, joined: None }
    }

    /// A row; in a joined cluster, its size to come from [`Rows::joined`].
    pub fn push(&mut self, row: ClusterRow) -> io::Result<()> {
        self.sort.push(AgainstRow { row, fill: false })
    }

    /// A row of a joined cluster whose kept document, as its size, comes from
    /// [`Rows::joined`].
    pub fn push_to_fill(&mut self, row: ClusterRow) -> io::Result<()> {
        self.sort.push(AgainstRow { row, fill: true })
    }

    /// The joined clusters (each once), once their rows are all pushed.
    pub fn joined(&mut self, joined: ExternalSort<Joined>) {
        self.joined = Some(joined);
    }
}

/// `row` as written: a joined cluster's size (from `joined`, the joined clusters by id,
/// those before the row's passed), and its kept document where `fill`. Simply: a lookup in
/// a map of the joined clusters.
fn complete(
    joined: &mut std::iter::Peekable<impl Iterator<Item = io::Result<Joined>>>,
    AgainstRow { mut row, fill }: AgainstRow,
) -> io::Result<ClusterRow> {
    while joined
        .next_if(|j| j.as_ref().is_ok_and(|j| j.label < row.cluster_id))
        .is_some()
    {}
    match joined.peek() {
        Some(Ok(j)) if j.label == row.cluster_id => {
            row.cluster_size = j.size;
            if fill {
                row.kept_doc_id = j.kept;
            }
        }
        Some(Err(_)) => return Err(joined.next().and_then(Result::err).expect("an error")),
        _ => {}
    }
    Ok(row)
}

/// The names of the pairs' sort, the rows' and the merges' in the run's summary.
pub(super) const PAIRS: &str = "against pairs";
pub(super) const CLUSTERS: &str = "against clusters";
pub(super) const MERGES: &str = "against merges";

/// Writes `against-pairs` (`pairs`), `against-clusters` (`rows`) and `against-merges` to the
/// run directory `run`, listed in its marker first; their metadata names the index at `dir`.
/// Returns what the pairs', the rows' and the merges' sorts did; `spill`: where they
/// spilled (named in an error).
pub(super) fn write_files(
    (run, dir, spill): (&Path, &Path, &Path),
    manifest: &Manifest,
    pairs: ExternalSort<AgainstPair>,
    rows: Rows,
    merges: ExternalSort<(i64, i64)>,
) -> Result<[(&'static str, SortStats); 3], FinishError> {
    let meta = neardup_io::parquet_out::TableMeta {
        scheme: manifest.scheme.clone(),
        params: serde_json::json!({
            neardup_io::parquet_out::PARAM_FINGERPRINT: manifest.fingerprint,
            "index": {"k": manifest.k, "tables": manifest.tables, "minhash": manifest.minhash, "against": dir},
        }),
    };
    let names = [AGAINST_PAIRS, AGAINST_CLUSTERS, AGAINST_MERGES].map(String::from);
    neardup_io::run_dir::record_written(run, &names)?;
    let failed = |cause| spilled(spill, cause);
    let mut w = PartWriter::<PairRow>::create_file(&run.join(AGAINST_PAIRS), &meta)?;
    let pairs = pairs.finish().map_err(failed)?;
    let pairs_sorted = pairs.stats();
    for p in pairs {
        w.push(p.map_err(failed)?.0)?;
    }
    w.commit()?;
    let mut w = PartWriter::<ClusterRow>::create_file(&run.join(AGAINST_CLUSTERS), &meta)?;
    let Rows { sort, joined } = rows;
    let sorted = sort.finish().map_err(failed)?;
    let rows_sorted = sorted.stats();
    let joined = joined
        .map(ExternalSort::finish)
        .transpose()
        .map_err(failed)?;
    let mut joined = joined.into_iter().flatten().peekable();
    for row in sorted {
        w.push(complete(&mut joined, row.map_err(failed)?).map_err(failed)?)?;
    }
    w.commit()?;
    let mut w = PartWriter::<MergeRow>::create_file(&run.join(AGAINST_MERGES), &meta)?;
    let merges = merges.finish().map_err(failed)?;
    let merges_sorted = merges.stats();
    for m in merges {
        let (c, into) = m.map_err(failed)?;
        w.push(MergeRow {
            cluster_id: c,
            into_cluster_id: into,
        })?;
    }
    w.commit()?;
    Ok([
        (PAIRS, pairs_sorted),
        (CLUSTERS, rows_sorted),
        (MERGES, merges_sorted),
    ])
}
