//! `--against DIR`: a run's batch deduplicated against a saved index (docs/index.md).
//!
//! Before the job, every process refuses a run the index cannot be compared with
//! ([`check`]). Process 0 then compares the committed batch with the index once every part
//! is committed and before `_SUCCESS` (`AgainstStep::compare`, step 4 of
//! [`crate::finish`]): the pairs between new and indexed documents, and the clusters they
//! form with the batch's own pairs, go to `against-*.parquet` in the run directory; with
//! `--update-index` the batch is added to the index as a new generation. A run with
//! `_SUCCESS` always has its `against-*` files, and with `--update-index` its generation.
//!
//! Clusters follow the run's `--cluster` rule, and the smallest doc number is a cluster's
//! id: the batch's numbers come after every indexed one, so a cluster that only grows keeps
//! its id.
//!
//! - Under stars (`--cluster verified`, the default, and `star`) every removed new document
//!   is a verified pair of the document kept for it, and that one is kept (`against/stars.rs`):
//!   the indexed documents' decisions are final (the index records them), a new document
//!   with a pair with a kept indexed one is removed for the most similar, and the other new
//!   documents form stars among themselves from the batch's own pairs.
//! - Under connected components (`--cluster components`) the batch's pairs and its pairs
//!   with indexed documents join the indexed clusters: a merge takes the smaller id, and the
//!   kept document of a component (the smallest keep key) is an indexed one wherever there
//!   is one, unless `--keep` ranks a new one first (`against/components.rs`).
//!
//! Either way, with `--update-index` the new generation records the new documents'
//! clusters and decisions, and the indexed documents whose cluster or decision changed.

mod components;
mod indexed;
mod links;
mod output;
mod probe;
mod stars;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use neardup_core::Scheme;
use neardup_io::index::run::SortMemory;
use neardup_io::index::{ByDocNumber, DocEntry, DocView, Index, IndexWriter, Manifest};
use neardup_io::index::{MinHashParams, Verify, FILE_SHIFT};
use neardup_io::parquet_out::{PairKind, PairRow};
use neardup_io::spill::{ExternalSort, Merged, SortStats, SortedFile};

use super::index::{batch_documents, batch_name, check_indexable, remove_step_dirs, step_memory};
use super::{chain, AgainstDone, FinishError};
use crate::config::{ClusterMode, JobConfig, KeepPolicy};
use crate::stages::fingerprint::resume::{kill_at, SketchByDoc};
use links::{BatchPair, Decision, Held, StarLinks};
use output::{AgainstPair, Rows};
use probe::Probe;

/// The files an incremental run adds to its output directory (listed in its marker, so
/// that `--overwrite` removes them with the rest).
pub const AGAINST_PAIRS: &str = "against-pairs.parquet";
pub const AGAINST_CLUSTERS: &str = "against-clusters.parquet";
pub const AGAINST_MERGES: &str = "against-merges.parquet";

/// `--against DIR`, before the job (every process): refuses a run the index cannot be
/// compared with (see [`check_against`]; `update`: `--update-index`). Returns the index's
/// manifest as this run's batch is compared with it, and the generation that holds the
/// batch already, if any (added by an earlier run of the same job that did not finish: the
/// batch is compared with the index as it was before it, and not added again; see
/// [`Manifest::before_batch`]).
pub fn check(
    dir: &Path,
    config: &JobConfig,
    update: bool,
) -> Result<(Manifest, Option<u32>), FinishError> {
    if config.keep.prefers_canonical_hosts() {
        return Err(FinishError::Refused(format!(
            "--keep {} cannot be used with --against: mirror groups are found within one \
             run, not across the index (use the inner policy, e.g. --keep {})",
            config.keep.describe(),
            config.keep.inner().describe()
        )));
    }
    let (manifest, held) = Manifest::load(dir)?.before_batch(&batch_name(config));
    check_against(&manifest, dir, config, update)?;
    check_keep_decisions(&manifest, dir, config.cluster)?;
    Ok((manifest, held))
}

/// Refuses stars (`--cluster verified` or `star`) against an index that does not record
/// which of its documents are kept: a new document is removed only for a kept one.
pub fn check_keep_decisions(
    manifest: &Manifest,
    dir: &Path,
    cluster: ClusterMode,
) -> Result<(), FinishError> {
    match manifest.without_keep_decisions() {
        Some(g) if cluster.stars() => Err(FinishError::Refused(format!(
            "{}: its generation {} does not record which of its documents were kept (written by an older neardup, by neardup serve, or compacted from such a generation): --cluster {} removes a new document only for an indexed one that is kept; run with --cluster components (connected components), or make the index again with this neardup",
            dir.display(),
            g.dir,
            cluster.name()
        ))),
        _ => Ok(()),
    }
}

/// Refuses, before the job, a run whose fingerprints or tables differ from the index's; for
/// a MinHash index also another banding or verification, or a looser threshold (a
/// stricter one only without `update`: a generation holds the pairs of the index's).
pub fn check_against(
    manifest: &Manifest,
    dir: &Path,
    config: &JobConfig,
    update: bool,
) -> Result<(), FinishError> {
    let (scheme, design) = (&config.scheme, &config.design);
    check_scheme(manifest, dir, scheme)?;
    let run = check_indexable(config, false)?;
    match (&manifest.minhash, run) {
        (None, None) => {}
        (Some(index), Some(run)) => return check_minhash_against(index, &run, dir, update),
        // The same scheme, yet one side is MinHash: a manifest edited by hand.
        (Some(_), None) | (None, Some(_)) => {
            return Err(FinishError::Refused(format!(
                "{}: the manifest's scheme {} does not agree with its minhash member",
                dir.join(neardup_io::index::MANIFEST).display(),
                manifest.scheme
            )))
        }
    }
    if design.k() != manifest.k || design.name() != manifest.tables {
        return Err(FinishError::Refused(format!(
            "{}: the index was made with k = {} ({}); this run asks for k = {} ({}): run with the index's -k and --tables",
            dir.display(),
            manifest.k,
            manifest.tables,
            design.k(),
            design.name()
        )));
    }
    Ok(())
}

/// Refuses a run (or query) whose fingerprints would be of another kind than the index's.
fn check_scheme(manifest: &Manifest, dir: &Path, scheme: &Scheme) -> Result<(), FinishError> {
    let params = scheme.params();
    if scheme.name.as_str() != manifest.scheme || params != manifest.fingerprint {
        return Err(FinishError::Refused(format!(
            "{}: the index holds {} fingerprints made with {}; this run would make {} fingerprints with {}: run with the index's scheme flags",
            dir.display(),
            manifest.scheme,
            manifest.fingerprint,
            scheme.name.as_str(),
            params
        )));
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
) -> Result<(), FinishError> {
    if (run.bands, run.rows) != (index.bands, index.rows) {
        return Err(FinishError::Refused(format!(
            "{}: the index's LSH banding is {} bands of {} rows; this run's is {} of {}: run with --bands {} --rows {}",
            dir.display(),
            index.bands,
            index.rows,
            run.bands,
            run.rows,
            index.bands,
            index.rows
        )));
    }
    if run.verify != index.verify || run.shingle != index.shingle {
        return Err(FinishError::Refused(format!(
            "{}: the index verifies candidates by {} (word {}-shingles); this run by {} (word {}-shingles): run with the index's --verify and --verify-shingle",
            dir.display(),
            index.verify,
            index.shingle,
            run.verify,
            run.shingle
        )));
    }
    // The query path's check, and its message: the run's threshold is already in 0..=1.
    neardup_io::index::answer::check_threshold(index, Some(run.threshold), dir)
        .map_err(|e| FinishError::Refused(e.to_string()))?;
    if update && run.threshold != index.threshold {
        return Err(FinishError::Refused(format!(
            "{}: --update-index needs the index's threshold {} (this run's is {}): a generation holds the pairs of the index's threshold",
            dir.display(),
            index.threshold,
            run.threshold
        )));
    }
    Ok(())
}

/// What an incremental run found.
#[derive(Clone, Debug, Default)]
pub struct AgainstSummary {
    pub new_documents: u64,
    pub batch_pairs: u64,
    pub indexed_pairs: u64,
    /// Indexed clusters (or documents) the batch's documents joined.
    pub joined: u64,
    pub merges: u64,
    /// New documents marked `keep = false` in `against-clusters.parquet`.
    pub removed: u64,
    /// Indexed documents of the batch's clusters without a rank under the keep policy
    /// (ranked last): a policy by a column their generation was not ranked by.
    pub unranked: u64,
}

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
        // Refused with --against before the job starts ([`check`]).
        KeepPolicy::CanonicalHost(_) => None,
    }
}

/// What the incremental step found, and the generation it would add to the index.
pub struct AgainstOutcome {
    pub summary: AgainstSummary,
    /// The batch in the index's numbering, with its clusters and the indexed documents whose
    /// cluster it changed: what `--update-index` adds before the run's `_SUCCESS` (`None`
    /// without it, or where the index holds the batch already).
    pub generation: Option<PendingGeneration>,
    /// The generation of the index that holds the batch already (added by an earlier run of
    /// the same job that did not finish): the batch was compared with the index before it,
    /// and is not added again.
    pub held: Option<u32>,
    /// What the sorts that read the batch back, and those of its sketches, did (by name).
    pub sorted: Vec<(&'static str, SortStats)>,
}

/// What a run with `--against` does before `_SUCCESS` (process 0).
pub struct AgainstStep {
    dir: PathBuf,
    /// The index as [`check`] saw it: it must not change while the batch runs.
    manifest: Manifest,
    /// `--update-index`: the index's writer, locked from the start of the job.
    update: Option<Mutex<IndexWriter>>,
    k: u32,
    threshold: f64,
    keep: AgainstKeep,
    cluster: ClusterMode,
    batch: String,
    job: u128,
    /// The memory of the sorts that read the batch back ([`super::index::step_memory`]).
    memory: SortMemory,
}

impl AgainstStep {
    /// The step of process 0 for the run `config` against the index at `dir`, whose
    /// `manifest` [`check`] returned; with `update` (`--update-index`) the index is opened
    /// for writing (locked from now on). `keep_given`: whether `--keep` was given (see
    /// [`AgainstKeep`]).
    pub fn new(
        dir: &Path,
        manifest: Manifest,
        config: &JobConfig,
        update: bool,
        keep_given: bool,
    ) -> Result<AgainstStep, FinishError> {
        let update = match update {
            true => Some(Mutex::new(IndexWriter::open(dir)?)),
            false => None,
        };
        Ok(AgainstStep {
            dir: dir.to_path_buf(),
            manifest,
            update,
            k: config.design.k(),
            threshold: config.verify.map_or(0.0, |v| v.min_jaccard),
            keep: AgainstKeep {
                policy: config.keep.clone(),
                given: keep_given,
            },
            cluster: config.cluster,
            batch: batch_name(config),
            job: crate::config::resume::record_id(config),
            memory: step_memory(config),
        })
    }

    /// Compares the committed run at `run` (its `_SUCCESS` not written yet) with the index,
    /// and with `--update-index` adds it, unless the index holds it already; an error is the
    /// run's (it fails, without `_SUCCESS`).
    pub(super) fn compare(&self, run: &Path) -> Result<AgainstDone, String> {
        let done = self.compare_and_add(run);
        remove_step_dirs(&self.memory);
        done
    }

    fn compare_and_add(&self, run: &Path) -> Result<AgainstDone, String> {
        let dir = &self.dir;
        let outcome = against(
            dir,
            run,
            (self.k, self.threshold),
            &self.manifest,
            (&self.keep, self.cluster),
            (&self.batch, self.job),
            (&self.memory, self.update.is_some()),
        )
        .map_err(|e| format!("--against {}: {}", dir.display(), chain(&e)))?;
        let mut sorts: Vec<_> = (outcome.sorted.into_iter())
            .map(|(name, stats)| (name.to_string(), stats))
            .collect();
        let add = outcome.generation.zip(self.update.as_ref());
        let added = add.is_some();
        if let Some((generation, writer)) = add {
            let mut writer = writer.lock().expect("the index writer");
            // The batch's sorts are done: the tables may have the rest of the step's memory.
            let tables = self.memory.budget - self.memory.budget / 2;
            writer.set_memory(tables, Some(self.memory.dir.clone()));
            let written = generation
                .write(&mut writer, &self.batch, &self.memory.dir)
                .map_err(|e| format!("--update-index {}: {}", dir.display(), chain(&e)))?;
            kill_at("index");
            sorts.push(("against batch".to_string(), written.0));
            sorts.push(("index tables".to_string(), written.1));
        }
        Ok(AgainstDone {
            found: outcome.summary,
            added,
            sorts,
        })
    }
}

/// The batch as `--update-index` adds it to the index: its documents as they were read,
/// sorted by doc number (spilled past the step's memory), and what the step decided of
/// those in clusters.
pub struct PendingGeneration {
    docs: Merged<ByDocNumber>,
    /// The new documents in a cluster, by doc number; every other new document is in none,
    /// and kept.
    decided: Merged<Decision>,
    files: u64,
    keep: String,
    /// The indexed documents whose cluster, or keep decision, changed, by doc number.
    changes: Merged<(u64, i64)>,
    decisions: Merged<(u64, bool)>,
}

/// The indexed documents' changed clusters and keep decisions ([`Decided`]).
type Changed = (Merged<(u64, i64)>, Merged<(u64, bool)>);

impl PendingGeneration {
    /// The batch `sort`ed as it was read (`files` input files, ranked by `keep`), what the
    /// rule `decided` of the new documents in a cluster (by doc number), and the indexed
    /// documents whose cluster or decision changed.
    fn new(
        sort: ExternalSort<ByDocNumber>,
        decided: Merged<Decision>,
        (files, keep): (u64, &AgainstKeep),
        (changes, decisions): Changed,
        memory: &SortMemory,
    ) -> Result<PendingGeneration, FinishError> {
        Ok(PendingGeneration {
            docs: sort.finish().map_err(|cause| spilled(&memory.dir, cause))?,
            decided,
            files,
            keep: keep.policy.describe(),
            changes,
            decisions,
        })
    }

    /// Writes the batch to `writer` as a generation named `batch`, document by document;
    /// returns what its documents' and its tables' sorts did. `spill`: where the documents'
    /// sort spilled (named in an error).
    fn write(
        self,
        writer: &mut IndexWriter,
        batch: &str,
        spill: &Path,
    ) -> Result<(SortStats, SortStats), FinishError> {
        let mut generation = writer.begin(self.files, Some(self.keep), true)?;
        let mut decided = self.decided.peekable();
        let mut docs = self.docs;
        for doc in docs.by_ref() {
            let ByDocNumber(mut doc) = doc.map_err(|cause| spilled(spill, cause))?;
            let next = decided.next_if(|d| d.as_ref().map_or(true, |d| d.doc == doc.doc_id));
            (doc.cluster_id, doc.removed) = match next.transpose() {
                Ok(Some(d)) => (Some(d.cluster), d.removed),
                Ok(None) => (None, false),
                Err(cause) => return Err(spilled(spill, cause)),
            };
            generation.push(doc)?;
        }
        let read = docs.stats();
        let failed = |cause| neardup_io::IoError::Write {
            path: spill.to_path_buf(),
            cause,
        };
        let (changes, decisions) = (self.changes, self.decisions);
        let (changes, decisions) = (
            changes.map(|c| c.map_err(failed)),
            decisions.map(|d| d.map_err(failed)),
        );
        let (_, tables) = generation.commit(changes, decisions, Some(batch))?;
        Ok((read, tables))
    }
}

fn spilled(dir: &Path, cause: std::io::Error) -> FinishError {
    FinishError::Io(neardup_io::IoError::Write {
        path: dir.to_path_buf(),
        cause,
    })
}

/// The incremental step of `neardup run --against DIR`: the batch run at `run` (numbered as
/// the index's next generation) against the index at `dir`, which must still be `expected`:
/// pairs between new and indexed documents, the clusters they form with the batch's own
/// pairs under the run's `cluster` rule, written to the run directory. It runs before the
/// run's `_SUCCESS`; an index that holds `batch` already (see [`Manifest::before_batch`]) is
/// compared as it was before it. With `update` (`--update-index`) and a batch the index does
/// not hold, the outcome has the generation to add.
///
/// A simhash index is probed within `k` bits; a MinHash index band by band, its candidates
/// verified at `threshold` as the index verifies ([`Index::query_minhash`]).
///
/// Memory: the batch is read back once, in doc-number order, through sorts that keep
/// `memory` (simply: every document in a `Vec`). Each document probes the index as it
/// comes (simhash ones in chunks, `against/probe.rs`) and those in a pair, with the batch or
/// with the index, go to a sort on disk as 32 bytes each (`Held`), beside the sketches the
/// stars may verify the batch's unlinked pairs with. The batch's own pairs are joined with
/// their documents, and grouped by component, through sorts (`against/links.rs`); the pairs
/// and the clusters' rows go to sorts as they are found (`against/output.rs`). The indexed
/// clusters the batch joins stay on disk, their members found by one scan of the index
/// (`against/indexed.rs`), and the indexed documents' changes go to sorts the new generation
/// is written from. What the step holds does not grow with the documents, their pairs,
/// their sketches or the clusters they join: the largest component's links (or members),
/// and the union-find of the batch's links (or graph) up to its share. Under `--cluster
/// components` every pair is an edge of a graph on disk (`against/components.rs`).
///
/// The step's memory while the batch is read: 0.3 to read it back, 0.3 to keep it for
/// `--update-index`, 0.1 for a chunk of simhash probes, 0.1 for the sketches, 0.1 for the
/// pairs, and 0.1 for the batch's pairs, their documents, the documents in a pair and
/// those removed for an indexed one (under components, 0.15 for the graph instead); once
/// it is read (the reading's share free): 0.15 for the links, 0.15 for the clusters' rows,
/// 0.02 for the new documents' decisions, and 0.25 for the join of the unlinked pairs.
pub fn against(
    dir: &Path,
    run: &Path,
    (k, threshold): (u32, f64),
    expected: &Manifest,
    (keep, cluster): (&AgainstKeep, ClusterMode),
    (batch, job): (&str, u128),
    (memory, update): (&SortMemory, bool),
) -> Result<AgainstOutcome, FinishError> {
    let (manifest, held) = Manifest::load(dir)?.before_batch(batch);
    if &manifest != expected {
        return Err(FinishError::Refused(format!(
            "{}: the index changed while the batch ran",
            dir.display()
        )));
    }
    check_keep_decisions(&manifest, dir, cluster)?;
    let index = Index::open_as(dir, manifest.clone(), Verify::Checksums)?;
    index.release_pages(); // What the checks on opening read.
    let shift = manifest.files << FILE_SHIFT;
    let failed = |cause| spilled(&memory.dir, cause);
    // Read back from the committed run: the batch's documents and pairs are spread over
    // every worker's parts (of every process); process 0 sees them together only there.
    let (pairs, paired) = batch_pairs(run, shift, memory)?;
    let mut read = batch_documents(run, manifest.minhash.as_ref(), job, &memory.share(0.3))?;
    let files = read.files();
    let mut kept = (update && held.is_none()).then(|| memory.share(0.3).sort::<ByDocNumber>());
    let unlinked = unlinked(cluster, manifest.minhash.as_ref(), threshold);
    let chunk = memory.share(0.1);
    let sketches = unlinked
        .as_ref()
        .map(|u| (memory.part(0.1, "sketches").sort(), u.exact));
    let found = Comparison::new(
        (
            memory.part(0.1, "pairs").sort(),
            memory.part(0.02, "chosen"),
            memory.part(0.15, "graph"),
        ),
        (cluster, &keep.policy),
        manifest.minhash.is_none(),
    );
    let paired = (paired, memory.part(0.02, "held").sort());
    let mut probe = Probe::new(
        &index,
        (k, threshold),
        paired,
        (chunk.budget, sketches),
        found,
    );
    for doc in read.by_ref() {
        let mut doc = doc?;
        doc.doc_id += shift;
        probe.push(&doc).map_err(failed)?;
        if let Some(sort) = &mut kept {
            sort.push(ByDocNumber(doc)).map_err(failed)?;
        }
    }
    let mut sorted = vec![("against read", read.sorted())];
    drop(read);
    let (docs, mut found, sketches) = probe.finish().map_err(failed)?;
    sorted.push(("against held", docs.stats()));
    let simhash = manifest.minhash.is_none();
    let (decided, joins) = cluster_batch(
        &index,
        (&docs, &mut found),
        (pairs, sketches),
        (keep, cluster, unlinked),
        (memory, shift, simhash),
    )
    .map_err(failed)?;
    sorted.extend([
        ("against batch pairs", joins[0]),
        ("against batch pairs by second", joins[1]),
    ]);
    drop(docs);
    sorted.extend(decided.sorts.iter().copied());
    let mut summary = found.summary;
    summary.removed = decided.removed;
    let written = output::write_files(
        (run, dir, &memory.dir),
        &manifest,
        found.pairs,
        decided.rows,
        decided.merges,
    )?;
    sorted.extend(written);
    let new_docs = decided.new_docs.finish().map_err(failed)?;
    sorted.push(("against decisions", new_docs.stats()));
    let changed = changed((decided.changes, decided.decisions), &mut sorted).map_err(failed)?;
    let generation =
        kept.map(|sort| PendingGeneration::new(sort, new_docs, (files, keep), changed, memory));
    Ok(AgainstOutcome {
        summary,
        generation: generation.transpose()?,
        held,
        sorted,
    })
}

/// The indexed documents' changed clusters and keep decisions, by doc number, once all are
/// pushed; what their sorts did goes to `sorted`.
fn changed(
    (changes, decisions): (Changes, KeepChanges),
    sorted: &mut Vec<(&'static str, SortStats)>,
) -> std::io::Result<Changed> {
    let (changes, decisions) = (changes.finish()?, decisions.finish()?);
    sorted.push(("against changes", changes.stats()));
    sorted.push(("against keep changes", decisions.stats()));
    Ok((changes, decisions))
}

/// Once the batch is read: its own `pairs` (by first document) joined with their documents
/// (`docs`), and the clusters decided under the run's `cluster` rule (stars, with the
/// `sketches` their `unlinked` pairs are verified from: `against/stars.rs`; connected
/// components: `against/components.rs`). Returns what was decided, and what the pairs'
/// two sorts did.
fn cluster_batch(
    index: &Index,
    (docs, found): (&SortedFile<Held>, &mut Comparison),
    (pairs, sketches): (ExternalSort<BatchPair>, Option<ExternalSort<SketchByDoc>>),
    (keep, cluster, unlinked): (&AgainstKeep, ClusterMode, Option<stars::Unlinked>),
    (memory, shift, simhash): (&SortMemory, u64, bool),
) -> std::io::Result<(Decided, [SortStats; 2])> {
    let mut links =
        (cluster != ClusterMode::Components).then(|| StarLinks::new(memory.part(0.15, "links")));
    let by_second = memory.part(0.03, "batch pairs by second").sort();
    let joins = links::join_pairs(docs, pairs, by_second, simhash, |row, link| {
        found.summary.batch_pairs += 1;
        if let Some(graph) = &mut found.graph {
            graph.add(row.doc_a, row.doc_b)?;
        }
        found.pairs.push(AgainstPair(row))?;
        match (&mut links, link) {
            (Some(links), Some(link)) => links.push(link),
            _ => Ok(()),
        }
    })?;
    let new_docs = memory.part(0.02, "decisions").sort();
    let rows = Rows::new(memory.part(0.15, "rows").sort());
    let decided = Decided::new(rows, new_docs, memory);
    let decided = match links {
        Some(links) => {
            let rule = stars::Rule {
                centers: match cluster {
                    ClusterMode::Star => neardup_core::star::Centers::Rank,
                    _ => neardup_core::star::Centers::Coverage,
                },
                policy: &keep.policy,
                simhash,
                unlinked,
            };
            let with = (sketches, memory);
            stars::decide(index, (found, links), &rule, with, decided)
        }
        None => {
            let graph = found
                .graph
                .take()
                .expect("the graph of --cluster components");
            let summary = (&mut found.summary, shift);
            components::decide(index, (graph, docs), keep, summary, decided)
        }
    }?;
    Ok((decided, joins))
}

/// The batch's own pairs, from its committed `pairs/` (in the run's numbering, `shift` from
/// the index's): sorted by their first document, and their documents sorted (each once a
/// pair), for the probe to know which documents are in one. Simply: both in `Vec`s.
fn batch_pairs(
    run: &Path,
    shift: u64,
    memory: &SortMemory,
) -> Result<(ExternalSort<BatchPair>, Merged<u64>), FinishError> {
    let mut pairs = memory.part(0.03, "batch pairs").sort();
    let mut paired = memory.part(0.03, "paired").sort();
    let mut failed = None;
    neardup_io::run_dir::each_run_pair(run, |p| {
        let (a, b) = (p.doc_a + shift, p.doc_b + shift);
        let pair = BatchPair {
            a,
            b,
            kind: p.kind,
            jaccard: p.jaccard,
        };
        let pushed = (pairs.push(pair))
            .and_then(|()| paired.push(a))
            .and_then(|()| paired.push(b));
        if let Err(e) = pushed {
            failed.get_or_insert(e);
        }
    })?;
    if let Some(cause) = failed {
        return Err(spilled(&memory.dir, cause));
    }
    let paired = paired
        .finish()
        .map_err(|cause| spilled(&memory.dir, cause))?;
    Ok((pairs, paired))
}

/// How `--cluster verified` verifies the pairs the bands missed between new documents
/// ([`neardup_core::star::unlinked_pairs`]), as the run did: in MinHash mode, by the exact
/// Jaccard similarity where the index holds the shingle sets, by the signatures' estimate
/// where the run verified so; `None` otherwise (the index holds no shingle sets of a run
/// verified by exact Jaccard: the new documents' stars are made from the batch's pairs).
fn unlinked(
    cluster: ClusterMode,
    minhash: Option<&neardup_io::index::MinHashParams>,
    threshold: f64,
) -> Option<stars::Unlinked> {
    let m = minhash.filter(|_| cluster == ClusterMode::Verified)?;
    let estimate = m.verify == neardup_io::index::VERIFY_ESTIMATE;
    (m.exact() || estimate).then_some(stars::Unlinked {
        threshold,
        exact: m.exact(),
    })
}

/// What a rule decided of the clusters the batch formed or touched.
struct Decided {
    /// `against-clusters.parquet`.
    rows: Rows,
    /// The new documents in a cluster, and how many of them are removed.
    new_docs: ExternalSort<Decision>,
    removed: u64,
    /// Indexed clusters merged into another (`against-merges.parquet`), each once.
    merges: ExternalSort<(i64, i64)>,
    /// `(doc, cluster)` of the indexed documents whose cluster changed.
    changes: Changes,
    /// `(doc, kept)` of the indexed documents whose keep decision changed (or was not
    /// recorded).
    decisions: KeepChanges,
    /// What the sorts of the decision did (the sketches' join, under stars).
    sorts: Vec<(&'static str, SortStats)>,
}

impl Decided {
    /// Nothing decided yet; `rows`: where the clusters' rows go, `new_docs`: the new
    /// documents' decisions; the indexed ones' changes and merges take 0.01 of the step's
    /// `memory` each.
    fn new(rows: Rows, new_docs: ExternalSort<Decision>, memory: &SortMemory) -> Decided {
        Decided {
            rows,
            new_docs,
            removed: 0,
            merges: memory.part(0.01, "merges").sort(),
            changes: memory.part(0.01, "changes").sort(),
            decisions: memory.part(0.01, "keep changes").sort(),
            sorts: Vec::new(),
        }
    }
}

/// The indexed documents' changed clusters, and changed keep decisions, as [`Decided`]
/// gathers them.
type Changes = ExternalSort<(u64, i64)>;
type KeepChanges = ExternalSort<(u64, bool)>;

/// Documents a scan of every indexed document reads between two releases of the index's
/// pages ([`Index::release_pages`]): it keeps at most about 100 MB of `docs.bin` resident
/// (some 100 bytes a document), not the whole file.
const RELEASE_EVERY: usize = 1 << 20;

/// Releases the index's pages before the `n`th document read of a pass, every
/// [`RELEASE_EVERY`].
fn release_now(index: &Index, n: usize) {
    if n > 0 && n.is_multiple_of(RELEASE_EVERY) {
        index.release_pages();
    }
}

/// Each indexed document stands in the union-find by its cluster (itself when alone).
fn node(cluster: Option<i64>, doc: u64) -> u64 {
    cluster.map_or(doc, |c| c as u64)
}

/// A pair of a new document with an indexed one, as the probe found it.
#[derive(Clone, Copy, Debug)]
struct IndexedMatch {
    /// The new document (in the index's numbering).
    doc: u64,
    /// The generation of the indexed one.
    generation: usize,
    /// The Hamming distance (simhash), the verified Jaccard similarity (MinHash).
    hamming: u32,
    jaccard: Option<f32>,
}

/// The pairs found so far (in the index's numbering), and what the clusters need of them.
struct Comparison {
    /// Every pair, to `against-pairs.parquet`.
    pairs: ExternalSort<AgainstPair>,
    /// The first error of the pairs' sort while the probe pushed to it (see
    /// [`Comparison::flush`]).
    failed: Option<std::io::Error>,
    /// Under stars, how the best kept indexed document of a new one is chosen
    /// ([`stars::Best`]), the best of each new document probed since the last
    /// [`Comparison::flush`], and those before it, in a sort by new document.
    best: Option<stars::Best>,
    probed: fxhash::FxHashMap<u64, (stars::BestKey, stars::Chosen)>,
    chosen: Option<ExternalSort<stars::ChosenFor>>,
    /// Under `--cluster components`, the graph the pairs make (the stars make their own, of
    /// the batch's pairs alone).
    graph: Option<components::Graph>,
    summary: AgainstSummary,
}

impl Comparison {
    /// No pairs yet; they go to `pairs`, and (under stars) the new documents removed for an
    /// indexed one to a sort of `chosen`, or (under components) the graph to sorts of
    /// `graph`. The run's `cluster` rule and keep `policy` say what the clusters need of
    /// them; `simhash`: whether the index is a simhash one.
    fn new(
        (pairs, chosen, graph): (ExternalSort<AgainstPair>, SortMemory, SortMemory),
        (cluster, policy): (ClusterMode, &KeepPolicy),
        simhash: bool,
    ) -> Comparison {
        let components = cluster == ClusterMode::Components;
        Comparison {
            pairs,
            failed: None,
            best: (!components).then(|| stars::Best {
                policy: policy.clone(),
                simhash,
            }),
            probed: Default::default(),
            chosen: (!components).then(|| chosen.sort()),
            graph: components.then(|| components::Graph::new(graph)),
            summary: AgainstSummary::default(),
        }
    }

    /// A new document `doc` matched the indexed one `old` (of `index`).
    fn found(&mut self, index: &Index, doc: &DocEntry, old: DocView, found: IndexedMatch) {
        // The same content digest (the exact-duplicate key of both runs) is an exact pair.
        let exact = doc.digest.is_some() && old.digest == doc.digest;
        let pair = AgainstPair(PairRow {
            doc_a: old.doc_id,
            doc_b: doc.doc_id,
            hamming: found.hamming as u8,
            kind: if exact {
                PairKind::Exact
            } else {
                PairKind::Near
            },
            jaccard: found.jaccard,
        });
        if let Err(e) = self.pairs.push(pair) {
            self.failed.get_or_insert(e);
        }
        self.summary.indexed_pairs += 1;
        if let Some(best) = &self.best {
            if let Some((key, chosen)) = best.candidate(index, &found, &old) {
                match self.probed.get(&found.doc) {
                    Some((held, _)) if *held <= key => {}
                    _ => {
                        self.probed.insert(found.doc, (key, chosen));
                    }
                }
            }
        }
        let n = node(old.cluster_id, old.doc_id);
        if let Some(graph) = &mut self.graph {
            if let Err(e) = graph.add(n, doc.doc_id) {
                self.failed.get_or_insert(e);
            }
        }
    }

    /// After the new documents of a probe, each after those before it: their best kept
    /// indexed documents join the chosen ones; an error is the pairs' sort's.
    fn flush(&mut self) -> std::io::Result<()> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let probed = self.probed.drain().map(|(doc, (_, chosen))| (doc, chosen));
        let mut probed: Vec<_> = probed.collect();
        probed.sort_unstable_by_key(|c| c.0);
        let Some(sort) = &mut self.chosen else {
            return Ok(());
        };
        for (doc, chosen) in probed {
            sort.push(stars::ChosenFor { doc, chosen })?;
        }
        Ok(())
    }
}
