//! `neardup index`: maintenance of a saved index (`compact`, `info`), and the step `neardup
//! run --index` takes after its job: the committed run read back and written as a
//! generation (docs/index.md).

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use neardup_core::{Method, Scheme, TableDesign, Weighting};
use neardup_dataflow::config::{JobConfig, KeepPolicy};
use neardup_io::index::run::RunDocuments;
use neardup_io::index::{DocView, MinHashParams, VERIFY_ESTIMATE, VERIFY_JACCARD};
use neardup_io::index::{IndexSpec, IndexWriter, Manifest, NewGeneration, FILE_SHIFT};

/// Flags of `neardup index`.
#[derive(Args, Debug)]
pub struct IndexArgs {
    #[command(subcommand)]
    pub command: IndexCommand,
}

#[derive(Subcommand, Debug)]
pub enum IndexCommand {
    /// Merge every generation into one, so that a query probes each table once (doc numbers
    /// and clusters stay as they are)
    Compact {
        /// The index directory
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Print the manifest: scheme, k, tables, generations, document counts
    Info {
        /// The index directory
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Measure the index (a benchmark, not a check): open time, single-query latency
    /// percentiles, a text query's latency, one-thread batch throughput; JSON on stdout
    Bench {
        /// The index directory
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Queries per measurement
        #[arg(long, default_value_t = 100_000)]
        queries: usize,
    },
}

pub fn run(args: &IndexArgs) -> Result<()> {
    match &args.command {
        IndexCommand::Compact { dir } => {
            let mut writer = IndexWriter::open(dir)?;
            let before = writer.manifest().generations.len();
            writer.compact()?;
            eprintln!(
                "neardup: {} generations compacted into one ({} documents)",
                before,
                writer.manifest().documents
            );
            Ok(())
        }
        IndexCommand::Bench { dir, queries } => bench(dir, *queries),
        IndexCommand::Info { dir } => {
            let manifest = Manifest::load(dir)?;
            super::write_stdout(&(serde_json::to_string_pretty(&manifest)? + "\n"))?;
            Ok(())
        }
    }
}

/// Refuses, before any work, a run an index cannot hold (queries must be able to
/// fingerprint text exactly as the run did, and verify candidates as it verified its
/// pairs); returns a MinHash run's index parameters (`None`: a simhash run). `shingles`:
/// `--index-shingles`, the shingle sets kept for exact-Jaccard verification.
pub fn check_indexable(config: &JobConfig, shingles: bool) -> Result<Option<MinHashParams>> {
    match &config.scheme.method {
        Method::MinHash { permutations, .. } => {
            let (Some(banding), Some(verify)) = (config.lsh, config.verify) else {
                bail!(
                    "--index of a MinHash run needs its candidates verified (--verify jaccard or minhash): an index verifies a query's candidates as the run verified its pairs"
                )
            };
            if shingles && verify.estimate {
                bail!(
                    "--index-shingles keeps the shingle sets exact-Jaccard verification compares, but this run verifies by the signatures' estimate (--verify minhash): use --verify jaccard, or leave --index-shingles out"
                );
            }
            Ok(Some(MinHashParams {
                permutations: *permutations,
                bands: banding.bands,
                rows: banding.rows,
                threshold: verify.min_jaccard,
                verify: if verify.estimate {
                    VERIFY_ESTIMATE
                } else {
                    VERIFY_JACCARD
                }
                .to_string(),
                shingle: verify.shingle,
                shingles,
            }))
        }
        Method::Simhash(Weighting::TfIdf(_)) => bail!(
            "--index cannot hold tf-idf fingerprints: their weights come from the corpus, so a query could not be fingerprinted alike; use --weights set or tf"
        ),
        Method::Simhash(_) if shingles => bail!(
            "--index-shingles is for MinHash indexes (--scheme minhash or minhash-oph): a simhash index compares fingerprints"
        ),
        Method::Simhash(_) => Ok(None),
    }
}

/// Creates the index at `dir` for the run `config` (locked from now on).
pub fn create(dir: &Path, config: &JobConfig, shingles: bool) -> Result<IndexWriter> {
    let minhash = check_indexable(config, shingles)?;
    Ok(IndexWriter::create(
        dir,
        &IndexSpec {
            scheme: config.scheme.name.as_str().to_string(),
            fingerprint: neardup_dataflow::output::fingerprint_params(&config.scheme),
            design: config.design.clone(),
            minhash,
        },
    )?)
}

/// [`create`], unless `dir` is an index holding just `batch` and the output directory is an
/// unfinished run of this job with every fingerprint committed: its run was stopped after
/// writing the index and before its `_SUCCESS`, and the index is left as it is (`None`), so
/// that the run, resumed or run again there, does not write it twice. An index anywhere else
/// is refused as [`create`] refuses it.
pub fn create_unless_holding(
    dir: &Path,
    config: &JobConfig,
    shingles: bool,
    batch: &str,
) -> Result<Option<IndexWriter>> {
    use neardup_dataflow::config::resume::{examine, Examined};
    if let Ok(manifest) = Manifest::load(dir) {
        let holding =
            matches!(&manifest.generations[..], [only] if only.batch.as_deref() == Some(batch));
        if holding && matches!(examine(config), Ok(Examined::Fingerprints { .. })) {
            check_indexable(config, shingles)?;
            return Ok(None);
        }
    }
    create(dir, config, shingles).map(Some)
}

/// Creates the index at `dir` for `neardup search` over fingerprint tables: the scheme
/// their metadata names (`unknown` for tables without it: such an index answers
/// fingerprint queries only).
pub fn create_for_tables(
    dir: &Path,
    tables: &[PathBuf],
    design: &TableDesign,
) -> Result<IndexWriter> {
    use neardup_io::parquet_out::{TableTag, PARAM_FINGERPRINT, UNKNOWN_SCHEME};
    let tag = tables
        .iter()
        .find_map(|path| TableTag::of_file(path).ok().flatten());
    let (scheme, fingerprint) = match tag {
        Some(tag) => (tag.meta.scheme, tag.meta.params[PARAM_FINGERPRINT].clone()),
        None => (UNKNOWN_SCHEME.to_string(), serde_json::Value::Null),
    };
    Ok(IndexWriter::create(
        dir,
        &IndexSpec {
            scheme,
            fingerprint,
            design: design.clone(),
            minhash: None,
        },
    )?)
}

/// Adds the run at `run` (a search over the fingerprint tables `tables`, its parts committed
/// and its `_SUCCESS` not written yet) to the index as a new generation; returns its document
/// count. Such a generation has no keep ranks (see [`batch_documents`] for a run's).
pub fn add_run(writer: &mut IndexWriter, run: &Path, tables: &[PathBuf]) -> Result<u64> {
    let read = neardup_io::index::run::read_search_documents(run, tables)?;
    add_documents(writer, run, read, None, None)
}

/// The documents of the run at `run`, whose parts are committed and whose `_SUCCESS` is not
/// written yet (a [`neardup_dataflow::config::BeforeCommit`] step), with what only its
/// resume parts hold: each document's content digest and keep rank, and for a MinHash
/// index (`minhash`) its signature and, where the index keeps them, its shingle set. The
/// resume parts must be those of the job `job`
/// ([`neardup_dataflow::config::resume::record_id`]).
pub fn batch_documents(
    run: &Path,
    minhash: Option<&MinHashParams>,
    job: u128,
) -> Result<RunDocuments> {
    use neardup_dataflow::stages::fingerprint::resume;
    let mut read = neardup_io::index::run::read_committed_parts(run)?;
    let mut extras =
        resume::document_extras(run, minhash.is_some(), job).map_err(anyhow::Error::msg)?;
    for doc in &mut read.docs {
        if let Some(&(digest, rank)) = extras.keys.get(&doc.doc_id) {
            doc.digest = (digest != 0).then_some(digest);
            doc.rank = Some(rank);
        }
    }
    if let Some(m) = minhash {
        for doc in &mut read.docs {
            let sketch = extras.sketches.remove(&doc.doc_id).unwrap_or_default();
            if !doc.empty
                && (sketch.signature.len() != m.permutations
                    || (m.shingles && sketch.shingles.is_none()))
            {
                bail!(
                    "{}: the resume parts hold no signature{} of document {} (a run resumed from one made without --index or --against?)",
                    run.display(),
                    if m.shingles { " and shingle set" } else { "" },
                    doc.doc_id
                );
            }
            doc.signature = sketch.signature;
            doc.shingles = sketch.shingles.filter(|_| m.shingles);
        }
    }
    Ok(read)
}

/// Adds a run's documents (`read`, in the run's numbering) to the index as a new
/// generation whose ranks follow `keep`, named `batch` in the manifest; returns its
/// document count.
pub fn add_documents(
    writer: &mut IndexWriter,
    run: &Path,
    read: RunDocuments,
    keep: Option<String>,
    batch: Option<&str>,
) -> Result<u64> {
    if !read.fingerprint.is_null() && read.fingerprint != writer.manifest().fingerprint {
        bail!(
            "{}: the run's fingerprints were made with other parameters than the index's",
            run.display()
        );
    }
    let shift = writer.file_offset() << FILE_SHIFT;
    let mut docs = read.docs;
    for doc in &mut docs {
        doc.doc_id += shift;
        doc.cluster_id = doc.cluster_id.map(|c| c + shift as i64);
    }
    let n = docs.len() as u64;
    let generation = NewGeneration {
        files: read.files,
        docs,
        cluster_changes: Vec::new(),
        keep,
    };
    writer.add_named(generation, batch)?;
    Ok(n)
}

/// The files an incremental run adds to its output directory (listed in its marker, so
/// that `--overwrite` removes them with the rest).
pub const AGAINST_PAIRS: &str = "against-pairs.parquet";
pub const AGAINST_CLUSTERS: &str = "against-clusters.parquet";
pub const AGAINST_MERGES: &str = "against-merges.parquet";

/// Refuses, before the job, a run whose fingerprints or tables differ from the index's; for
/// a MinHash index also another banding or verification, or a looser threshold (a
/// stricter one only without `update`: a generation holds the pairs of the index's).
pub fn check_against(
    manifest: &Manifest,
    dir: &Path,
    config: &JobConfig,
    update: bool,
) -> Result<()> {
    let (scheme, design) = (&config.scheme, &config.design);
    check_scheme(manifest, dir, scheme)?;
    let run = check_indexable(config, false)?;
    match (&manifest.minhash, run) {
        (None, None) => {}
        (Some(index), Some(run)) => return check_minhash_against(index, &run, dir, update),
        // The same scheme, yet one side is MinHash: a manifest edited by hand.
        (Some(_), None) | (None, Some(_)) => bail!(
            "{}: the manifest's scheme {} does not agree with its minhash member",
            dir.join(neardup_io::index::MANIFEST).display(),
            manifest.scheme
        ),
    }
    if design.k() != manifest.k || design.name() != manifest.tables {
        bail!(
            "{}: the index was made with k = {} ({}); this run asks for k = {} ({}): run with the index's -k and --tables",
            dir.display(),
            manifest.k,
            manifest.tables,
            design.k(),
            design.name()
        );
    }
    Ok(())
}

/// Refuses a run (or query) whose fingerprints would be of another kind than the index's.
fn check_scheme(manifest: &Manifest, dir: &Path, scheme: &Scheme) -> Result<()> {
    let params = neardup_dataflow::output::fingerprint_params(scheme);
    if scheme.name.as_str() != manifest.scheme || params != manifest.fingerprint {
        bail!(
            "{}: the index holds {} fingerprints made with {}; this run would make {} fingerprints with {}: run with the index's scheme flags",
            dir.display(),
            manifest.scheme,
            manifest.fingerprint,
            scheme.name.as_str(),
            params
        );
    }
    Ok(())
}

/// Refuses a MinHash run against a MinHash index that would find other candidates or verify
/// them otherwise: another banding, verification or shingle size, a looser threshold (or,
/// with `update`, another one).
fn check_minhash_against(
    index: &MinHashParams,
    run: &MinHashParams,
    dir: &Path,
    update: bool,
) -> Result<()> {
    if (run.bands, run.rows) != (index.bands, index.rows) {
        bail!(
            "{}: the index's LSH banding is {} bands of {} rows; this run's is {} of {}: run with --bands {} --rows {}",
            dir.display(),
            index.bands,
            index.rows,
            run.bands,
            run.rows,
            index.bands,
            index.rows
        );
    }
    if run.verify != index.verify || run.shingle != index.shingle {
        bail!(
            "{}: the index verifies candidates by {} (word {}-shingles); this run by {} (word {}-shingles): run with the index's --verify and --verify-shingle",
            dir.display(),
            index.verify,
            index.shingle,
            run.verify,
            run.shingle
        );
    }
    check_threshold(index.threshold, run.threshold, dir, "--threshold")?;
    if update && run.threshold != index.threshold {
        bail!(
            "{}: --update-index needs the index's threshold {} (this run's is {}): a generation holds the pairs of the index's threshold",
            dir.display(),
            index.threshold,
            run.threshold
        );
    }
    Ok(())
}

/// Refuses a threshold looser than a MinHash index's: its matches were verified at its
/// own.
pub fn check_threshold(index: f64, asked: f64, dir: &Path, flag: &str) -> Result<()> {
    if asked < index {
        bail!(
            "{}: {flag} {asked} is looser than the index's threshold {index}: its documents were verified at {index} (rebuild the index with --threshold {asked})",
            dir.display()
        );
    }
    Ok(())
}

/// What an incremental run found.
#[derive(Debug, Default)]
pub struct AgainstSummary {
    pub new_documents: u64,
    pub batch_pairs: u64,
    pub indexed_pairs: u64,
    /// Indexed clusters (or documents) the batch's documents joined.
    pub joined: u64,
    pub merges: u64,
    /// Indexed documents of the batch's clusters without a rank under the keep policy
    /// (ranked last): a policy by a column their generation was not ranked by.
    pub unranked: u64,
}

/// The order in which `neardup run --against` keeps the documents of a cluster (smallest
/// first): new after indexed (without `--keep`), the rank, the doc number.
type KeepKey = (bool, u64, u64);

/// How `neardup run --against` picks the document to keep of a cluster.
#[derive(Clone, Debug)]
pub struct AgainstKeep {
    /// The run's policy (given, or its default).
    pub policy: KeepPolicy,
    /// Whether `--keep` was given: then indexed and new documents are ranked together (ties
    /// to the indexed one); without it an indexed document is kept wherever the cluster has
    /// one, and the policy decides among indexed, or among new, documents.
    pub given: bool,
}

/// An indexed document's rank under `policy`: the stored one if its generation ranked by
/// the same policy, else made from its bytes or capture time where the policy ranks by
/// those; `None` for a column the index does not hold (or a format 1 generation).
pub fn indexed_rank(
    policy: &KeepPolicy,
    generation_keep: Option<&str>,
    doc: &DocView,
) -> Option<u64> {
    if generation_keep == Some(policy.describe().as_str()) && doc.rank.is_some() {
        return doc.rank;
    }
    match policy {
        KeepPolicy::First => Some(0),
        KeepPolicy::Longest | KeepPolicy::Shortest => doc.bytes.map(|b| policy.rank(b, None, None)),
        KeepPolicy::Newest | KeepPolicy::Oldest => {
            doc.bytes.map(|_| policy.rank(0, None, doc.fetched_at))
        }
        KeepPolicy::Max(_) | KeepPolicy::Min(_) => None,
        // Refused with --against before the job starts (src/commands/run.rs).
        KeepPolicy::CanonicalHost(_) => None,
    }
}

/// What the incremental step found, and the generation it would add to the index.
#[derive(Debug, Default)]
pub struct AgainstOutcome {
    pub summary: AgainstSummary,
    /// The batch in the index's numbering, with its clusters and the indexed documents whose
    /// cluster it changed: what `--update-index` adds before the run's `_SUCCESS`.
    pub generation: NewGeneration,
    /// The generation of the index that holds the batch already (added by an earlier run of
    /// the same job that did not finish): the batch was compared with the index before it,
    /// and is not added again.
    pub held: Option<u32>,
}

/// The incremental step of `neardup run --against DIR`: the batch run at `run` (numbered as
/// the index's next generation) against the index at `dir`, which must still be `expected`:
/// pairs between new and indexed documents, the clusters they form with the batch's own
/// pairs, written to the run directory. It runs before the run's `_SUCCESS` (see
/// [`neardup_dataflow::config::BeforeCommit`]): a run with `_SUCCESS` always has its
/// `against-*` files, and with `--update-index` its generation (the returned one, added
/// before `_SUCCESS`). An index that holds `batch` already (see
/// [`neardup_io::index::Manifest::before_batch`]) is compared as it was before it.
///
/// Clusters follow the run's rule, the smallest doc number is the id: the batch's numbers
/// come after every indexed one, so a cluster that only grows keeps its id, a merge takes the
/// smaller, and the kept document (the smallest) is an indexed one wherever there is one.
///
/// A simhash index is probed within `k` bits; a MinHash index band by band, its candidates
/// verified at `threshold` as the index verifies ([`neardup_io::index::Index::query_minhash`]).
pub fn against(
    dir: &Path,
    run: &Path,
    k: u32,
    threshold: f64,
    expected: &Manifest,
    keep: &AgainstKeep,
    (batch, job): (&str, u128),
) -> Result<AgainstOutcome> {
    use std::collections::{BTreeMap, HashMap, HashSet};

    use neardup_core::unionfind::UnionFind;
    use neardup_io::index::{Index, MergeRow, Verify};
    use neardup_io::parquet_out::{ClusterRow, PairKind, PairRow, PartWriter};

    let (manifest, held) = Manifest::load(dir)?.before_batch(batch);
    if &manifest != expected {
        bail!("{}: the index changed while the batch ran", dir.display());
    }
    let index = Index::open_as(dir, manifest.clone(), Verify::Checksums)?;
    let shift = manifest.files << FILE_SHIFT;
    let read = batch_documents(run, manifest.minhash.as_ref(), job)?;
    let outputs = neardup_io::run_dir::read_run_parts(run)?;
    let mut docs = read.docs;
    let simhash: HashMap<u64, u64> = docs.iter().map(|d| (d.doc_id, d.simhash)).collect();
    let mut pairs: Vec<PairRow> = Vec::new();
    let mut uf = UnionFind::new();
    for (a, b, kind) in &outputs.pairs {
        let h = neardup_core::hamming(simhash[a], simhash[b]);
        pairs.push(PairRow {
            doc_a: a + shift,
            doc_b: b + shift,
            hamming: h as u8,
            kind: if kind == "exact" {
                PairKind::Exact
            } else {
                PairKind::Near
            },
            jaccard: outputs.jaccard.get(&(*a, *b)).copied(),
        });
        uf.union(a + shift, b + shift);
    }
    let mut summary = AgainstSummary {
        new_documents: docs.len() as u64,
        batch_pairs: pairs.len() as u64,
        ..Default::default()
    };
    // Each indexed document stands in the union-find by its cluster (itself when alone).
    let node = |cluster: Option<i64>, doc: u64| cluster.map_or(doc, |c| c as u64);
    let mut joined: HashSet<u64> = HashSet::new();
    for doc in &mut docs {
        doc.doc_id += shift;
    }
    // Every non-empty new document probes the index: a simhash index with all of them as
    // one batch, a MinHash index one by one.
    let probes: Vec<usize> = (0..docs.len()).filter(|&i| !docs[i].empty).collect();
    let mut found =
        |doc: &neardup_io::index::DocEntry, old: DocView, hamming: u32, jaccard: Option<f32>| {
            // The same content digest (the exact-duplicate key of both runs) is an exact pair.
            let exact = doc.digest.is_some() && old.digest == doc.digest;
            pairs.push(PairRow {
                doc_a: old.doc_id,
                doc_b: doc.doc_id,
                hamming: hamming as u8,
                kind: if exact {
                    PairKind::Exact
                } else {
                    PairKind::Near
                },
                jaccard,
            });
            summary.indexed_pairs += 1;
            let n = node(old.cluster_id, old.doc_id);
            joined.insert(n);
            uf.union(n, doc.doc_id);
        };
    if manifest.minhash.is_some() {
        for &i in &probes {
            let doc = &docs[i];
            let set = doc.shingles.as_ref().map(|set| {
                let mut set = set.clone();
                set.sort_unstable();
                set.dedup();
                set
            });
            index.query_minhash(&doc.signature, set.as_deref(), threshold, |m| {
                found(
                    doc,
                    index.doc(m.generation, m.row),
                    0,
                    Some(m.jaccard as f32),
                )
            });
        }
    } else {
        let fps: Vec<u64> = probes.iter().map(|&i| docs[i].simhash).collect();
        index.query_batch(&fps, k, |q, m| {
            found(
                &docs[probes[q]],
                index.doc(m.generation, m.row),
                m.hamming,
                None,
            )
        });
    }
    summary.joined = joined.len() as u64;
    let label: HashMap<u64, u64> = uf.components_by_min().into_iter().collect();
    // The indexed members of every component the batch touched, and the clusters that merged.
    // Each member with its keep key: the smallest is kept.
    let key = |new: bool, rank: Option<u64>, doc: u64| {
        let rank = rank.unwrap_or(u64::MAX);
        if keep.given {
            (false, rank, doc)
        } else {
            (new, rank, doc)
        }
    };
    let mut members: BTreeMap<u64, Vec<(u64, KeepKey)>> = BTreeMap::new();
    let mut changes = Vec::new();
    let mut merges = BTreeMap::new();
    for g in 0..index.generations() {
        let policy = index.generation_keep(g);
        for row in 0..index.generation_documents(g) {
            let old = index.doc(g, row as u32);
            let n = node(old.cluster_id, old.doc_id);
            let Some(&l) = label.get(&n) else { continue };
            let rank = indexed_rank(&keep.policy, policy, &old);
            summary.unranked += u64::from(rank.is_none());
            members
                .entry(l)
                .or_default()
                .push((old.doc_id, key(false, rank, old.doc_id)));
            if old.cluster_id != Some(l as i64) {
                changes.push((old.doc_id, l as i64));
            }
            if let Some(c) = old.cluster_id {
                if c as u64 != l {
                    merges.insert(c, l as i64);
                }
            }
        }
    }
    for doc in &mut docs {
        if let Some(&l) = label.get(&doc.doc_id) {
            doc.cluster_id = Some(l as i64);
            members
                .entry(l)
                .or_default()
                .push((doc.doc_id, key(true, doc.rank, doc.doc_id)));
        } else {
            doc.cluster_id = None;
        }
    }
    summary.merges = merges.len() as u64;

    let meta = neardup_io::parquet_out::TableMeta {
        scheme: manifest.scheme.clone(),
        params: serde_json::json!({
            neardup_io::parquet_out::PARAM_FINGERPRINT: manifest.fingerprint,
            "index": {"k": manifest.k, "tables": manifest.tables, "minhash": manifest.minhash, "against": dir},
        }),
    };
    let names = [AGAINST_PAIRS, AGAINST_CLUSTERS, AGAINST_MERGES].map(String::from);
    neardup_io::run_dir::record_written(run, &names)?;
    pairs.sort_unstable_by_key(|p| (p.doc_a, p.doc_b));
    let mut w = PartWriter::<PairRow>::create_file(&run.join(AGAINST_PAIRS), &meta)?;
    for p in pairs {
        w.push(p)?;
    }
    w.commit()?;
    let mut w = PartWriter::<ClusterRow>::create_file(&run.join(AGAINST_CLUSTERS), &meta)?;
    for (l, mut docs) in members {
        docs.sort_unstable();
        let kept = docs
            .iter()
            .min_by_key(|d| d.1)
            .expect("a cluster has members")
            .0;
        for &(d, _) in &docs {
            w.push(ClusterRow {
                doc_id: d,
                cluster_id: l as i64,
                cluster_size: docs.len() as u32,
                keep: d == kept,
            })?;
        }
    }
    w.commit()?;
    let mut w = PartWriter::<MergeRow>::create_file(&run.join(AGAINST_MERGES), &meta)?;
    for (c, into) in merges {
        w.push(MergeRow {
            cluster_id: c,
            into_cluster_id: into,
        })?;
    }
    w.commit()?;
    Ok(AgainstOutcome {
        summary,
        generation: NewGeneration {
            files: read.files,
            docs,
            cluster_changes: changes,
            keep: Some(keep.policy.describe()),
        },
        held,
    })
}

/// Queries per `Index::query_batch` call in `index bench`: the batch `neardup query` makes
/// of a large input (per thread), a larger one, and all the queries at once (as `run
/// --against` does with its batch). A batch walks each table once, so the larger it is, the
/// closer its probes lie in the table and the fewer cache misses each costs.
const BENCH_BATCHES: [usize; 3] = [4_096, 65_536, usize::MAX];

/// Words of a synthetic 5 KB query text (`index bench`).
const BENCH_TEXT_BYTES: usize = 5_000;

/// `neardup index bench`: the figures of docs/performance.md ("The saved index").
fn bench(dir: &Path, queries: usize) -> Result<()> {
    use std::time::Instant;

    use neardup_core::testing::SeededRng;
    use neardup_io::index::{Index, Verify};

    let start = Instant::now();
    let index = Index::open(dir, Verify::Sizes)?;
    let open_sizes = start.elapsed().as_secs_f64();
    let start = Instant::now();
    drop(Index::open(dir, Verify::Checksums)?);
    let open_checksums = start.elapsed().as_secs_f64();
    if index.minhash().is_some() {
        bail!(
            "{}: a MinHash index: neardup index bench measures simhash indexes",
            dir.display()
        );
    }
    if index.generations() == 0 || index.generation_documents(0) == 0 {
        bail!("{}: the index holds no documents to measure", dir.display());
    }
    let k = index.k();
    let mut rng = SeededRng::new(7);
    let documents = index.generation_documents(0).max(1);
    // Half the queries are indexed fingerprints with a bit or two flipped (they have
    // matches), half random ones (they mostly have none).
    let fps: Vec<u64> = (0..queries)
        .map(|i| {
            if i % 2 == 0 {
                let doc = index.doc(0, rng.below(documents as u64) as u32);
                doc.simhash ^ (1 << rng.below(64)) ^ (1 << rng.below(64))
            } else {
                rng.next_u64()
            }
        })
        .collect();
    let mut latencies = Vec::with_capacity(queries);
    let mut matches = 0u64;
    for &fp in &fps {
        let t = Instant::now();
        index.query(fp, k, |_| matches += 1);
        latencies.push(t.elapsed().as_nanos() as u64);
    }
    latencies.sort_unstable();
    let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize] as f64 / 1e3;
    let start = Instant::now();
    let mut batch_matches = 0u64;
    for &fp in &fps {
        index.query(fp, k, |_| batch_matches += 1);
    }
    let batch = start.elapsed().as_secs_f64();
    // The same queries as batches (Index::query_batch: each table walked once per batch).
    let mut batched = serde_json::Map::new();
    for size in BENCH_BATCHES {
        let size = size.min(queries);
        let start = Instant::now();
        let mut batched_matches = 0u64;
        for chunk in fps.chunks(size) {
            index.query_batch(chunk, k, |_, _| batched_matches += 1);
        }
        let seconds = start.elapsed().as_secs_f64();
        if batched_matches != batch_matches {
            bail!("query_batch of {size} found {batched_matches} matches, single queries {batch_matches}");
        }
        batched.insert(size.to_string(), (queries as f64 / seconds).into());
    }
    // An index of fingerprints without a scheme (a search over bare tables) is timed with
    // the default scheme: the figure is the cost of fingerprinting plus the query.
    let scheme = neardup_dataflow::config::options::index_scheme(index.manifest())
        .unwrap_or_else(|_| Scheme::simhash_doc());
    let text_p50 = Some(scheme).map(|scheme| {
        let mut fingerprinter = neardup_core::Fingerprinter::new(scheme);
        fingerprinter.set_sort_feature_set(false);
        let mut times: Vec<u64> = (0..1000.min(queries))
            .map(|_| {
                let mut text = String::with_capacity(BENCH_TEXT_BYTES + 16);
                while text.len() < BENCH_TEXT_BYTES {
                    text.push_str(&rng.word());
                    text.push(' ');
                }
                let t = Instant::now();
                let fp = fingerprinter.fingerprint(&text);
                index.query(fp.simhash, k, |_| {});
                t.elapsed().as_nanos() as u64
            })
            .collect();
        times.sort_unstable();
        times[times.len() / 2] as f64 / 1e3
    });
    let report = serde_json::json!({
        "documents": index.manifest().documents,
        "tables": index.manifest().tables,
        "k": k,
        "generations": index.generations(),
        "open_seconds": open_sizes,
        "open_with_checksums_seconds": open_checksums,
        "queries": queries,
        "matches": matches,
        "query_p50_us": pct(0.5),
        "query_p99_us": pct(0.99),
        "text_5kb_query_p50_us": text_p50,
        "batch_queries_per_second_one_thread": queries as f64 / batch,
        "query_batch_queries_per_second_one_thread_by_batch_size": batched,
    });
    super::write_stdout(&(serde_json::to_string_pretty(&report)? + "\n"))?;
    Ok(())
}
