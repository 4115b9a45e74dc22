//! The state of `neardup serve`: the documents present (a saved index plus what was written
//! since), their near-duplicate clusters kept up to date, and the durability of every write.
//!
//! The idea: reads and writes take different paths.
//!
//! * **Reads** (queries, a document's cluster and neighbours, statistics) look at the
//!   [`Store`] under a shared lock, from any number of threads at once.
//! * **Writes** (put, delete) go to one *writer thread* in the order they arrive. It takes
//!   every write waiting at that moment as one batch, appends them to the write-ahead log,
//!   syncs the log once (`fdatasync`: group commit), and only then applies them to the store
//!   and to the clusters ([`LiveClusters`], which it owns: differential dataflow runs on
//!   that thread) and answers them. An answered write is on disk; a write not yet on disk
//!   is seen by no reader.
//!
//! A put's answer is computed against the documents present just before it (the earlier
//! writes of its batch included, the document it replaces excluded), so replaying the log
//! gives the same answers in the same order. Its neighbours among the index's documents
//! are asked before it reaches the writer, on the caller's thread ([`Service::submit`]):
//! the index does not change between checkpoints, and the writer filters out what was
//! removed since and adds what was written, so of a put's work in the 16 tables of each
//! generation only that of the documents written since the last checkpoint is left to the
//! one thread that applies writes (two thirds of its time at 100M documents before,
//! docs/performance.md). A checkpoint replaces the index; a put asked of the one before it
//! is asked again by the writer.
//!
//! **Checkpoints** ([`Service::checkpoint`], and every `checkpoint_interval`) write what
//! changed since the last (the documents written, the index's documents deleted and
//! re-clustered) as one new index generation ([`IndexWriter::checkpoint`], atomic, merging
//! the newest generations while they are small, and committing a merge of larger ones
//! written in the background since: `merging.rs`), then start a new, empty log. The log's
//! header records the generation it follows (its stamp,
//! the manifest's `next_generation` when it was started), so a restart knows whether the
//! log's records are still to be replayed, or were made over an index that someone else has
//! changed since (refused); a crash in the middle of a checkpoint is resolved the same way
//! (see `Writer::checkpoint`).
//!
//! Document numbers: the written documents of one log take the file number the index
//! would give its next batch, `files << 40 | n`, numbered in write order; a checkpoint
//! counts that file, so the next log's numbers never meet them.

mod log;
mod merging;
mod saved;
mod state;
mod store;
#[cfg(test)]
mod tests;
mod written;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fxhash::FxHashSet;
use neardup_io::index::answer::across;
use neardup_io::index::{Index, IndexWriter, Verify, FILE_SHIFT};
use neardup_io::wal::{Wal, WalError};
use serde::Serialize;
use thiserror::Error;

use crate::live::clusters::LiveClusters;
pub use log::{Record, DIGESTS_FILE, LOG_FILE, NEXT_LOG_FILE};
use merging::Merger;
pub use merging::BACKGROUND_MERGE_LIMIT;
pub use saved::STATE_FILE;
use saved::{Saved, Unused};
use state::State;
pub use store::{Neighbour, Store};
use written::Written;

/// The most writes the writer takes as one batch (one log sync, one clusters commit).
pub const MAX_BATCH: usize = 4096;

/// Records replayed between two clusters commits on start-up.
const REPLAY_BATCH: usize = 8192;

/// The fewest queries a thread of a replay's batch asks (fewer: one thread); two in tests,
/// so that their small logs are asked on several threads too.
const REPLAY_SHARE: usize = if cfg!(test) { 2 } else { 1024 };

/// The most documents of a saved cluster that a write brings into the live clusters one
/// query at a time (a binary search in each table, about 12 µs a document at 1M); a larger
/// cluster's are asked as one batch ([`Index::query_batch`]: each table walked once).
const TOUCH_ONE_BY_ONE: usize = 4096;

/// The most documents of earlier generations a checkpoint's merge carries into the one it
/// writes ([`neardup_io::index::merge_count`]): 1M. A generation costs about 5 s a million
/// documents to write on a 2-core machine (a checkpoint of 665,847 writes that carried
/// 458,334 took 5.4 s, one of 458,334 alone 2.9 s: docs/performance.md), and writes wait
/// for it, so a merge at the limit adds about 5 s. Larger generations are never merged by
/// the service: `neardup index compact` merges them offline.
pub const MERGE_LIMIT: u64 = 1 << 20;

/// The `source` a checkpoint records for the documents the service wrote.
pub const SERVE_SOURCE: &str = "neardup serve";

/// What can go wrong in the service.
#[derive(Debug, Error)]
pub enum ServiceError {
    #[error(transparent)]
    Io(#[from] neardup_io::IoError),
    #[error(transparent)]
    Wal(#[from] WalError),
    #[error(
        "{}: record {record} (at byte {offset}) cannot be replayed: {reason}; restore the file, or move it away to start from the last checkpoint without the writes from there on",
        path.display()
    )]
    BadRecord {
        path: PathBuf,
        record: usize,
        offset: u64,
        reason: String,
    },
    #[error("{}: {reason}", path.display())]
    BadDigests { path: PathBuf, reason: String },
    #[error("{}: the state just written cannot be read back: {reason}", path.display())]
    BadState { path: PathBuf, reason: String },
    #[error(
        "{}: the log holds {records} writes made over generation {stamp} of the index, but the index has changed since (its next generation is {next}); restore the index as it was, or move the log away to start without those writes",
        path.display()
    )]
    StaleLog {
        path: PathBuf,
        records: usize,
        stamp: u64,
        next: u64,
    },
    #[error("{}: a MinHash index: neardup serve answers simhash indexes only (query a MinHash index with neardup query)", path.display())]
    MinHashIndex { path: PathBuf },
    #[error("the service is stopping")]
    Stopped,
    #[error("the service refuses writes after a failed log write: {0}")]
    Failed(String),
}

/// How to run the service.
#[derive(Clone, Debug)]
pub struct Config {
    /// The index directory (its log and digests live there too).
    pub index: PathBuf,
    /// Write a checkpoint this often while writes arrive (`None`: only when asked).
    pub checkpoint_interval: Option<Duration>,
    /// The most documents of earlier generations a checkpoint merges into its own while
    /// writes wait ([`MERGE_LIMIT`]); larger merges are made in the background
    /// ([`BACKGROUND_MERGE_LIMIT`], docs/serve.md "Checkpoints").
    pub merge_limit: u64,
}

/// A document to put: its fingerprint and digest are computed by the caller (with the
/// index's scheme; the service never sees the text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewDoc {
    pub id: String,
    pub simhash: u64,
    /// The content digest (exact-duplicate key) of the text.
    pub digest: u128,
    /// No features: stored, never matched.
    pub empty: bool,
    pub url: Option<String>,
    /// When the page was fetched, as the client gave it.
    pub time: Option<String>,
}

/// A write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    Put(NewDoc),
    Delete(String),
}

/// What a put found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing within k.
    New,
    /// A document with the same content digest is present.
    Exact,
    /// Documents within k, none with the same content.
    Near,
    /// The text has no features: stored, never matched.
    Empty,
}

/// The answer to a put.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PutAnswer {
    pub id: String,
    pub doc_id: u64,
    pub status: Status,
    /// The document number this one replaced (the id's earlier document).
    pub replaced: Option<u64>,
    /// The documents within k (before this one was added), by doc number.
    pub matches: Vec<Neighbour>,
    /// Its cluster after the write (`None`: alone), and the cluster's size.
    pub cluster_id: Option<u64>,
    pub cluster_size: u64,
}

/// The answer to a delete: the document removed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeleteAnswer {
    pub id: String,
    pub doc_id: u64,
}

/// The answer to a write (`Delete(None)`: there was no such document).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Put(PutAnswer),
    Delete(Option<DeleteAnswer>),
}

/// A document, its cluster and neighbours.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DocInfo {
    pub id: String,
    pub doc_id: u64,
    pub fingerprint: String,
    pub empty: bool,
    /// The url and fetch time given to its put, while the service holds them: for the
    /// documents written since the last checkpoint (index format 1 keeps neither in a place
    /// the service reads).
    pub url: Option<String>,
    pub time: Option<String>,
    pub cluster_id: Option<u64>,
    pub cluster_size: u64,
    pub neighbours: Vec<Neighbour>,
}

/// What a checkpoint wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckpointInfo {
    /// The index generation written (`None`: a timed checkpoint skipped, nothing having
    /// changed since the last one).
    pub generation: Option<u32>,
    pub documents: u64,
    pub millis: u64,
}

/// Counters for `/v1/stats` and `/metrics`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub documents: u64,
    pub indexed: u64,
    pub clusters: u64,
    pub clustered_documents: u64,
    pub written_since_checkpoint: u64,
    pub k: u32,
    pub scheme: String,
    pub tables: String,
    pub generation: u32,
    pub log_bytes: u64,
    pub log_records: u64,
    /// Writes that changed something (a delete of an absent id is none).
    pub writes: u64,
    pub batches: u64,
    pub checkpoints: u64,
    pub replayed_records: u64,
    pub torn_bytes_dropped: u64,
    pub startup_millis: u64,
    /// Whether the last checkpoint's state file is being written (in the background, while
    /// writes and queries go on: docs/serve.md, "The saved state"), and what the last one
    /// written took.
    pub state_pending: bool,
    pub state_millis: u64,
    /// Background merges of generations committed, whether one is being written, and
    /// what writing the last one took (docs/serve.md, "Checkpoints").
    pub merges: u64,
    pub merge_running: bool,
    pub merge_millis: u64,
    /// Why writes are refused (a failed log write), if they are.
    pub write_failure: Option<String>,
}

type Reply<T> = Box<dyn FnOnce(T) + Send>;

/// A put's neighbours among the index's documents (removed ones included:
/// [`store::base_within`]), asked on the caller's thread, and the index they were asked of.
/// The writer uses them while that index is still the store's; after a checkpoint it asks
/// again.
struct Asked {
    base: Arc<Index>,
    found: Vec<(u64, u32)>,
}

/// A write as the writer takes it.
type Queued = (Write, Option<Asked>, Reply<Result<Answer, ServiceError>>);

enum Job {
    Write(Queued),
    Checkpoint(Reply<Result<CheckpointInfo, ServiceError>>),
    Stop(Sender<Result<(), ServiceError>>),
}

/// The running service (see the module docs). Shared by reference between threads.
pub struct Service {
    store: Arc<RwLock<Store>>,
    stats: Arc<Mutex<Stats>>,
    jobs: Mutex<Option<Sender<Job>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl Service {
    /// Opens the index at `config.index`, replays its log (creating one if there is none),
    /// rebuilds the clusters, and starts the writer thread.
    pub fn open(config: Config) -> Result<Service, ServiceError> {
        let started = Instant::now();
        let (ready_tx, ready_rx) = mpsc::channel();
        let (jobs_tx, jobs_rx) = mpsc::channel();
        let writer = std::thread::Builder::new()
            .name("serve-writer".into())
            .spawn(move || {
                let opened = Writer::open(&config, started);
                let mut writer = match opened {
                    Ok((writer, store, stats)) => {
                        let _ = ready_tx.send(Ok((store, stats)));
                        writer
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                writer.run(jobs_rx);
            })
            .map_err(|cause| {
                ServiceError::Io(neardup_io::IoError::Prepare {
                    action: "cannot start the writer thread",
                    path: PathBuf::from("."),
                    cause,
                })
            })?;
        let (store, stats) = match ready_rx.recv() {
            Ok(Ok(shared)) => shared,
            Ok(Err(e)) => {
                let _ = writer.join();
                return Err(e);
            }
            Err(_) => {
                let _ = writer.join();
                return Err(ServiceError::Stopped);
            }
        };
        Ok(Service {
            store,
            stats,
            jobs: Mutex::new(Some(jobs_tx)),
            writer: Mutex::new(Some(writer)),
        })
    }

    /// The documents present, for reading (hold it briefly: the writer waits for it).
    pub fn read(&self) -> RwLockReadGuard<'_, Store> {
        self.store.read().expect("the store lock is never poisoned")
    }

    /// The documents within `k` of a fingerprint (`digest`: the query text's, to mark exact
    /// duplicates).
    pub fn query(&self, fp: u64, k: u32, digest: Option<u128>) -> Vec<Neighbour> {
        self.read().neighbours(fp, k, digest)
    }

    /// A present document with its cluster and neighbours.
    pub fn get(&self, id: &str) -> Option<DocInfo> {
        let store = self.read();
        let doc = store.doc_of(id)?;
        let (_, simhash, empty) = store.doc(doc)?;
        let (cluster_id, cluster_size) = store.cluster(doc);
        let (url, time) = store.origin(doc);
        let neighbours = if empty {
            Vec::new()
        } else {
            let digest = store.digest(doc);
            store
                .within(simhash, store.k())
                .into_iter()
                .filter(|&(d, _)| d != doc)
                .map(|(d, h)| store.neighbour(d, h, digest))
                .collect()
        };
        Some(DocInfo {
            id: id.to_string(),
            doc_id: doc,
            fingerprint: neardup_core::encoding::to_hex(simhash),
            empty,
            url: url.map(str::to_string),
            time: time.map(str::to_string),
            cluster_id,
            cluster_size,
            neighbours,
        })
    }

    pub fn stats(&self) -> Stats {
        let mut stats = self.stats.lock().expect("stats lock").clone();
        let store = self.read();
        stats.documents = store.documents();
        stats.indexed = store.indexed();
        (stats.clusters, stats.clustered_documents) = store.clusters();
        stats.written_since_checkpoint = store.written() as u64;
        stats
    }

    /// Hands a job to the writer; gives it back if the writer has stopped.
    fn send(&self, job: Job) -> Option<Job> {
        let jobs = self.jobs.lock().expect("jobs lock");
        match jobs.as_ref() {
            Some(tx) => tx.send(job).err().map(|e| e.0),
            None => Some(job),
        }
    }

    /// Queues a write; `reply` is called with its answer once it is durable (from the
    /// writer thread), or with an error. A put's neighbours among the index's documents are
    /// asked first, here (see the module docs).
    pub fn submit(
        &self,
        write: Write,
        reply: impl FnOnce(Result<Answer, ServiceError>) + Send + 'static,
    ) {
        let asked = match &write {
            Write::Put(doc) if !doc.empty => Some(self.ask(doc.simhash)),
            _ => None,
        };
        if let Some(Job::Write((_, _, reply))) =
            self.send(Job::Write((write, asked, Box::new(reply))))
        {
            reply(Err(ServiceError::Stopped));
        }
    }

    /// The index's documents within k of `fp`, asked outside the store's lock.
    fn ask(&self, fp: u64) -> Asked {
        let (base, k) = {
            let store = self.read();
            (Arc::clone(store.shared_base()), store.k())
        };
        let found = store::base_within(&base, fp, k);
        Asked { base, found }
    }

    /// A write, waiting for its answer.
    pub fn write(&self, write: Write) -> Result<Answer, ServiceError> {
        let (tx, rx) = mpsc::channel();
        self.submit(write, move |a| {
            let _ = tx.send(a);
        });
        rx.recv().unwrap_or(Err(ServiceError::Stopped))
    }

    /// Queues a checkpoint; `reply` gets what it wrote.
    pub fn submit_checkpoint(
        &self,
        reply: impl FnOnce(Result<CheckpointInfo, ServiceError>) + Send + 'static,
    ) {
        if let Some(Job::Checkpoint(reply)) = self.send(Job::Checkpoint(Box::new(reply))) {
            reply(Err(ServiceError::Stopped));
        }
    }

    /// A checkpoint, waiting for it.
    pub fn checkpoint(&self) -> Result<CheckpointInfo, ServiceError> {
        let (tx, rx) = mpsc::channel();
        self.submit_checkpoint(move |a| {
            let _ = tx.send(a);
        });
        rx.recv().unwrap_or(Err(ServiceError::Stopped))
    }

    /// Stops the writer after the writes queued before this call: their answers are sent,
    /// the log is synced. Later writes are refused. Idempotent.
    pub fn shutdown(&self) -> Result<(), ServiceError> {
        let (tx, rx) = mpsc::channel();
        let sent = self.send(Job::Stop(tx)).is_none();
        self.jobs.lock().expect("jobs lock").take();
        let result = if sent {
            rx.recv().unwrap_or(Ok(()))
        } else {
            Ok(())
        };
        if let Some(handle) = self.writer.lock().expect("writer lock").take() {
            let _ = handle.join();
        }
        result
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// The writer, and what it shares with the readers.
type Opened = (Writer, Arc<RwLock<Store>>, Arc<Mutex<Stats>>);

/// The writer thread's state.
struct Writer {
    dir: PathBuf,
    index: IndexWriter,
    wal: Wal,
    live: LiveClusters,
    /// The saved clusters brought into `live` since its last commit ([`touch`]).
    touched: FxHashSet<u64>,
    store: Arc<RwLock<Store>>,
    stats: Arc<Mutex<Stats>>,
    /// The file number of this log's documents, and the next document number.
    file: u64,
    next_doc: u64,
    interval: Option<Duration>,
    last_checkpoint: Instant,
    /// Set after a failed log write: writes are refused from then on.
    failed: Option<String>,
    /// The thread writing the last checkpoint's state, if it may still run.
    state_writer: Option<JoinHandle<()>>,
    /// The background merge of generations, if one runs ([`merging`]).
    merger: Merger,
    merge_limit: u64,
    /// Whether the documents present differ from the index's (writes since the last
    /// checkpoint, or clusters the index does not hold): else a checkpoint writes nothing.
    unsaved: bool,
}

impl Writer {
    fn open(config: &Config, started: Instant) -> Result<Opened, ServiceError> {
        let dir = config.index.clone();
        let index = IndexWriter::open(&dir)?;
        if index.manifest().minhash.is_some() {
            return Err(ServiceError::MinHashIndex { path: dir });
        }
        // Every byte checked once: a damaged index would answer wrongly, and be carried
        // into the next checkpoint with valid checksums. Once: the files a start before
        // checked whole, unchanged since, are not read again (the index's record,
        // `verified.json`), so that a restart over 100 million documents does not read 21 GB.
        let base = Index::open(&dir, Verify::ChecksumsOnce)?;
        let saved = open_state(&dir, &base);
        let digests = log::read_digests(&dir)?;
        let mut store = Store::new(base, saved, &digests);
        drop(digests);
        let manifest = index.manifest().clone();
        let next = u64::from(manifest.next_generation);
        let log_path = dir.join(LOG_FILE);
        let next_path = dir.join(NEXT_LOG_FILE);
        if next_path.exists() {
            // A checkpoint was under way: if its generation was committed, the log it had
            // started is the one to use; if not, the old log still holds the writes.
            if Wal::read(&next_path)?.stamp == next {
                std::fs::rename(&next_path, &log_path).map_err(|cause| {
                    neardup_io::IoError::Write {
                        path: log_path.clone(),
                        cause,
                    }
                })?;
                neardup_io::atomic::sync_parent(&log_path);
            } else {
                let _ = std::fs::remove_file(&next_path);
            }
        }
        let (wal, records, torn) = if log_path.exists() {
            let (wal, replayed) = Wal::open(&log_path)?;
            if replayed.stamp != next {
                return Err(ServiceError::StaleLog {
                    path: log_path,
                    records: replayed.records.len(),
                    stamp: replayed.stamp,
                    next,
                });
            }
            let torn = replayed.torn.map_or(0, |t| t.bytes);
            (wal, replayed.records, torn)
        } else {
            (Wal::create(&log_path, next)?, Vec::new(), 0)
        };
        let file = manifest.files;
        let mut live = LiveClusters::new();
        let k = store.k();
        // Whether the index holds other clusters than those of its documents' edges (a run
        // and the service may link differently): then a checkpoint has something to write.
        let reclustered = store.reclustered();
        let next_doc = replay(&mut store, &mut live, &records, &log_path, file)?;
        let stats = Stats {
            k,
            scheme: manifest.scheme.clone(),
            tables: manifest.tables.clone(),
            generation: manifest.generations.last().map_or(0, |g| g.number),
            log_bytes: wal.bytes(),
            log_records: wal.records(),
            replayed_records: records.len() as u64,
            torn_bytes_dropped: torn,
            startup_millis: started.elapsed().as_millis() as u64,
            ..Stats::default()
        };
        let store = Arc::new(RwLock::new(store));
        let stats = Arc::new(Mutex::new(stats));
        let writer = Writer {
            dir,
            index,
            wal,
            live,
            touched: FxHashSet::default(),
            store: store.clone(),
            stats: stats.clone(),
            file,
            next_doc,
            interval: config.checkpoint_interval,
            last_checkpoint: Instant::now(),
            failed: None,
            state_writer: None,
            merger: Merger::default(),
            merge_limit: config.merge_limit,
            unsaved: reclustered || !records.is_empty(),
        };
        Ok((writer, store, stats))
    }

    fn run(&mut self, jobs: Receiver<Job>) {
        let mut pending: Option<Job> = None;
        loop {
            let job = match pending.take() {
                Some(job) => job,
                None => match self.next_job(&jobs) {
                    Some(job) => job,
                    None => {
                        let _ = self.wal.sync();
                        self.settle_state();
                        self.merger.stop(&self.stats);
                        return;
                    }
                },
            };
            match job {
                Job::Write(write) => {
                    let mut batch = vec![write];
                    while batch.len() < MAX_BATCH {
                        match jobs.try_recv() {
                            Ok(Job::Write(write)) => batch.push(write),
                            Ok(other) => {
                                pending = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    self.write_batch(batch);
                }
                Job::Checkpoint(reply) => reply(self.checkpoint()),
                Job::Stop(done) => {
                    // The state file is written before the service stops, so that the
                    // next start reads it rather than computing it again.
                    self.settle_state();
                    // A merge not yet committed is dropped (a checkpoint after the next
                    // start plans it again).
                    self.merger.stop(&self.stats);
                    let _ = done.send(self.wal.sync().map_err(ServiceError::from));
                    return;
                }
            }
        }
    }

    /// The next job, writing a checkpoint whenever the interval passes while waiting.
    fn next_job(&mut self, jobs: &Receiver<Job>) -> Option<Job> {
        loop {
            let Some(interval) = self.interval else {
                return jobs.recv().ok();
            };
            let due = self.last_checkpoint + interval;
            match jobs.recv_timeout(due.saturating_duration_since(Instant::now())) {
                Ok(job) => {
                    if Instant::now() >= due {
                        self.timed_checkpoint();
                    }
                    return Some(job);
                }
                Err(RecvTimeoutError::Timeout) => self.timed_checkpoint(),
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    fn timed_checkpoint(&mut self) {
        match self.checkpoint() {
            Ok(CheckpointInfo {
                generation: Some(generation),
                documents,
                millis,
            }) => eprintln!(
                "neardup serve: checkpoint: generation {generation}, {documents} documents; \
                 writes waited {millis} ms"
            ),
            Ok(_) => {}
            Err(e) => eprintln!("neardup serve: checkpoint failed: {e}"),
        }
        self.last_checkpoint = Instant::now();
    }

    /// The log records of a batch's writes (`None`: a delete of nothing, which changes
    /// nothing and is not logged), numbering its puts. Only the writer changes the store,
    /// so what is present now is what the batch applies to.
    fn records(&mut self, batch: &[Queued]) -> Vec<Option<Record>> {
        let mut records = Vec::with_capacity(batch.len());
        {
            let store = self.store.read().expect("store lock");
            let mut gone: Vec<&str> = Vec::new();
            for (write, _, _) in batch {
                records.push(match write {
                    Write::Put(doc) => {
                        let number = self.next_doc;
                        self.next_doc += 1;
                        gone.retain(|id| *id != doc.id);
                        Some(Record::Put {
                            doc: number,
                            id: doc.id.clone(),
                            simhash: doc.simhash,
                            digest: doc.digest,
                            empty: doc.empty,
                            url: doc.url.clone(),
                            time: doc.time.clone(),
                        })
                    }
                    Write::Delete(id) => {
                        // A delete of nothing changes nothing and is not logged.
                        let put_before = records
                            .iter()
                            .flatten()
                            .any(|r: &Record| matches!(r, Record::Put { id: p, .. } if p == id));
                        let present = (store.doc_of(id).is_some() || put_before)
                            && !gone.contains(&id.as_str());
                        if present {
                            gone.push(id);
                        }
                        present.then(|| Record::Delete { id: id.clone() })
                    }
                });
            }
        }
        records
    }

    /// Logs, syncs, applies and answers one batch of writes (see the module docs).
    fn write_batch(&mut self, mut batch: Vec<Queued>) {
        if let Some(reason) = &self.failed {
            for (_, _, reply) in batch {
                reply(Err(ServiceError::Failed(reason.clone())));
            }
            return;
        }
        let records = self.records(&batch);
        let encoded: Vec<Vec<u8>> = records.iter().flatten().map(Record::encode).collect();
        let logged = if encoded.is_empty() {
            Ok(())
        } else {
            self.unsaved = true;
            self.wal.append(&encoded).and_then(|()| self.wal.sync())
        };
        if let Err(e) = logged {
            let reason = e.to_string();
            eprintln!("neardup serve: {reason}; refusing writes from now on");
            self.failed = Some(reason.clone());
            self.stats.lock().expect("stats lock").write_failure = Some(reason.clone());
            for (_, _, reply) in batch {
                reply(Err(ServiceError::Failed(reason.clone())));
            }
            return;
        }
        let mut answers = Vec::with_capacity(batch.len());
        {
            let mut store = self.store.write().expect("store lock");
            for (record, (write, asked, _)) in records.into_iter().zip(&mut batch) {
                // Asked of the index the store still has (no checkpoint since), or again.
                let base = asked
                    .take()
                    .filter(|asked| Arc::ptr_eq(&asked.base, store.shared_base()))
                    .map(|asked| asked.found);
                answers.push(match record {
                    Some(record) => {
                        apply(&mut store, &mut self.live, &mut self.touched, record, base)
                    }
                    None => match write {
                        Write::Delete(_) => Answer::Delete(None),
                        Write::Put(_) => unreachable!("every put is logged"),
                    },
                });
            }
        }
        let changes = self.live.commit();
        let mut store = self.store.write().expect("store lock");
        store.relabel(&changes, self.touched.drain());
        for answer in &mut answers {
            if let Answer::Put(put) = answer {
                (put.cluster_id, put.cluster_size) = store.cluster(put.doc_id);
                for m in &mut put.matches {
                    m.cluster_id = store.cluster(m.doc_id).0;
                }
            }
        }
        drop(store);
        {
            let mut stats = self.stats.lock().expect("stats lock");
            stats.log_bytes = self.wal.bytes();
            stats.log_records = self.wal.records();
            stats.writes += encoded.len() as u64;
            stats.batches += 1;
        }
        for ((_, _, reply), answer) in batch.into_iter().zip(answers) {
            reply(Ok(answer));
        }
    }

    /// Writes what changed since the last checkpoint as a new index generation (the
    /// documents written, those of the index deleted or replaced, and the clusters of the
    /// index's documents that changed: [`IndexWriter::checkpoint`]), which also merges the
    /// newest generations while they are small ([`MERGE_LIMIT`]); then starts a new log.
    /// Nothing when nothing changed since the last checkpoint. The index's documents that
    /// did not change are not read or rewritten: a checkpoint costs what was written, not
    /// the size of the index.
    ///
    /// The new log is made first, beside the old one (`serve.wal.next`, stamped with the
    /// generation after the checkpoint's), then the generation is committed, then the new
    /// log is renamed over the old. A restart that finds `serve.wal.next` knows from its
    /// stamp whether the generation was committed (see [`Writer::open`]).
    ///
    /// The state of the new index is then the old state file with the checkpoint's changes
    /// pending ([`State`]), and another thread writes its file ([`Writer::write_state`]):
    /// writes wait for the generation, not for the state (2 to 4 s against 9 to 11 s for
    /// half a million writes at 100M documents, docs/performance.md).
    fn checkpoint(&mut self) -> Result<CheckpointInfo, ServiceError> {
        let started = Instant::now();
        // The last checkpoint's state first: a checkpoint's changes are made to a state
        // with nothing pending.
        self.settle_state();
        if !self.unsaved {
            return Ok(CheckpointInfo {
                generation: None,
                documents: self.store.read().expect("store lock").documents(),
                millis: 0,
            });
        }
        let log_path = self.dir.join(LOG_FILE);
        let next_path = self.dir.join(NEXT_LOG_FILE);
        // A background merge written since is committed with the generation, numbered
        // after it: the next log is stamped with the generation after both.
        let merged = (self.merger).take_finished(self.index.manifest(), &self.stats);
        let number = u64::from(self.index.manifest().next_generation);
        drop(Wal::create(
            &next_path,
            number + 1 + u64::from(merged.is_some()),
        )?);
        let merging = merged.is_some();
        // Readers go on under the shared lock while the generation is written.
        let (committed, documents, saving) = {
            let store = self.store.read().expect("store lock");
            let floor = self.merger.floor();
            let (file, limit) = (self.file + 1, self.merge_limit);
            let mut saving = store.checkpoint(SERVE_SOURCE, file, limit, floor);
            let checkpoint = std::mem::take(&mut saving.checkpoint);
            let committed = self
                .index
                .checkpoint_merging(store.base(), checkpoint, merged);
            (committed, store.documents(), saving)
        };
        let generation = match committed {
            Ok(g) => g,
            Err(e) => {
                let _ = std::fs::remove_file(&next_path);
                return Err(e.into());
            }
        };
        debug_assert_eq!(u64::from(generation), number);
        std::fs::rename(&next_path, &log_path).map_err(|cause| neardup_io::IoError::Write {
            path: log_path.clone(),
            cause,
        })?;
        neardup_io::atomic::sync_parent(&log_path);
        self.wal = Wal::open(&log_path)?.0;
        let base = Index::open(&self.dir, Verify::Sizes)?;
        // The state of the new index: the store's before it takes the new index, and the
        // changes, written into one file in the background (see `state`).
        let stamp = saved::stamp(base.manifest());
        let state = self.store.write().expect("store lock").rebase(base, saving);
        self.write_state(state, stamp);
        {
            let store = self.store.read().expect("store lock");
            self.merger.start(&self.index, store.base(), &self.stats);
        }
        // Every cluster is as saved again: the live clusters start empty.
        self.live = LiveClusters::new();
        self.file = self.index.manifest().files;
        self.next_doc = self.file << FILE_SHIFT;
        self.last_checkpoint = Instant::now();
        self.unsaved = false;
        let mut stats = self.stats.lock().expect("stats lock");
        stats.generation = generation;
        stats.checkpoints += 1;
        stats.merges += u64::from(merging);
        stats.log_bytes = self.wal.bytes();
        stats.log_records = 0;
        Ok(CheckpointInfo {
            generation: Some(generation),
            documents,
            millis: started.elapsed().as_millis() as u64,
        })
    }
}

impl Writer {
    /// Writes `state` (with a checkpoint's changes pending) as the state file of the index
    /// whose stamp is `stamp`, on another thread, and puts it in the store's place when
    /// written; writes and queries go on meanwhile ([`state`]'s module docs).
    fn write_state(&mut self, state: State, stamp: u64) {
        self.stats.lock().expect("stats lock").state_pending = true;
        let (dir, store, stats) = (self.dir.clone(), self.store.clone(), self.stats.clone());
        let spawned = std::thread::Builder::new()
            .name("serve-state".into())
            .spawn(move || {
                let started = Instant::now();
                let saved = write_state(&dir, stamp, &state);
                store.write().expect("store lock").settle(&state, saved);
                let mut stats = stats.lock().expect("stats lock");
                stats.state_pending = false;
                stats.state_millis = started.elapsed().as_millis() as u64;
            });
        match spawned {
            Ok(handle) => self.state_writer = Some(handle),
            // The state stays pending (it answers alike); the next checkpoint or the
            // stop writes it on this thread.
            Err(e) => eprintln!("neardup serve: cannot start the state's writer thread: {e}"),
        }
    }

    /// Waits for the last checkpoint's state to be written (writing it here if its thread
    /// could not start).
    fn settle_state(&mut self) {
        if let Some(handle) = self.state_writer.take() {
            let _ = handle.join();
        }
        let state = self.store.read().expect("store lock").state().clone();
        if state.is_pending() {
            let stamp = saved::stamp(self.index.manifest());
            let saved = write_state(&self.dir, stamp, &state);
            self.store
                .write()
                .expect("store lock")
                .settle(&state, saved);
            self.stats.lock().expect("stats lock").state_pending = false;
        }
    }
}

/// Writes `state` as the state file at `dir` of the index whose stamp is `stamp`, and maps
/// it; where it cannot be written or read back, says so and keeps it in memory (a later
/// start-up computes it again).
fn write_state(dir: &Path, stamp: u64, state: &State) -> Saved {
    let k = state.k();
    let written = Saved::write_lists(dir, stamp, k, state.lists(), false)
        .and_then(|()| read_back(dir, stamp, k));
    written.unwrap_or_else(|e| {
        eprintln!("neardup serve: {e}; keeping the index's state in memory (a start-up will compute it again)");
        let mut ids: Vec<(u64, u64)> = state.id_pairs().collect();
        let mut labels: Vec<(u64, u64)> = state.label_pairs().collect();
        Saved::in_memory(stamp, k, &mut ids, &mut labels, false)
    })
}

/// The saved state of the index `base` at `dir` ([`Saved`]): the one beside it, or, where
/// that is absent, stale or damaged, one computed from the index and written there.
fn open_state(dir: &Path, base: &Index) -> Saved {
    let stamp = saved::stamp(base.manifest());
    let k = base.manifest().k;
    match Saved::open(dir, stamp, k) {
        Ok(saved) => return saved,
        Err(Unused::Damaged(reason)) => eprintln!(
            "neardup serve: {}: {reason}; computing it again from the index",
            dir.join(STATE_FILE).display()
        ),
        Err(Unused::Absent | Unused::Stale) => {}
    }
    let computed = saved::compute(base, k);
    save_state(
        dir,
        base,
        computed.ids,
        computed.labels,
        computed.reclustered,
    )
}

/// The state just written at `dir`, mapped; one that does not read back is an error.
fn read_back(dir: &Path, stamp: u64, k: u32) -> Result<Saved, ServiceError> {
    Saved::open(dir, stamp, k).map_err(|why| ServiceError::BadState {
        path: dir.join(STATE_FILE),
        reason: format!("{why:?}"),
    })
}

/// What [`prepare`] did to an index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prepared {
    /// Whether the saved state was computed and written (`false`: the one beside the index
    /// was current).
    pub computed: bool,
    /// Clusters of two or more documents, and the documents in them.
    pub clusters: u64,
    pub clustered: u64,
    pub millis: u64,
}

/// Makes the simhash index at `dir` ready for `neardup serve` to start in seconds, doing
/// now what its first start would: every file of the index checked byte by byte and
/// recorded (`verified.json`, [`Verify::ChecksumsOnce`]), and the saved state computed and
/// written (`serve-state.bin`, docs/serve.md "The saved state"; 5.3 s at 11M documents,
/// 154 s at 100M, on a 2-core machine). `run --index` and `--update-index` call it once the
/// index is committed. A state beside the index that is current is kept; a MinHash index
/// is left as it is (`Ok(None)`: the service serves simhash indexes only).
pub fn prepare(dir: &Path) -> Result<Option<Prepared>, ServiceError> {
    let started = Instant::now();
    let base = Index::open(dir, Verify::ChecksumsOnce)?;
    if base.design().is_none() {
        return Ok(None);
    }
    let (stamp, k) = (saved::stamp(base.manifest()), base.manifest().k);
    let (saved, computed) = match Saved::open(dir, stamp, k) {
        Ok(saved) => (saved, false),
        Err(_) => {
            let mut state = saved::compute(&base, k);
            let (ids, labels) = (&mut state.ids, &mut state.labels);
            Saved::write(dir, stamp, k, ids, labels, state.reclustered)?;
            (read_back(dir, stamp, k)?, true)
        }
    };
    let (clusters, clustered) = saved.counts();
    Ok(Some(Prepared {
        computed,
        clusters,
        clustered,
        millis: started.elapsed().as_millis() as u64,
    }))
}

/// Writes the state of the index `base` at `dir` and maps it; where it cannot be written
/// or read back, says so and keeps it in memory (a later start-up computes it again).
fn save_state(
    dir: &Path,
    base: &Index,
    mut ids: Vec<(u64, u64)>,
    mut labels: Vec<(u64, u64)>,
    reclustered: bool,
) -> Saved {
    let (stamp, k) = (saved::stamp(base.manifest()), base.manifest().k);
    let written = Saved::write(dir, stamp, k, &mut ids, &mut labels, reclustered)
        .and_then(|()| read_back(dir, stamp, k));
    written.unwrap_or_else(|e| {
        eprintln!("neardup serve: {e}; keeping the index's state in memory (a start-up will compute it again)");
        Saved::in_memory(stamp, k, &mut ids, &mut labels, reclustered)
    })
}

/// Brings the saved cluster of `doc` (a document of the index) into `live` before a write
/// changes it: its documents and the edges between them, as the index holds them
/// (nothing when `doc` was alone, is not the index's, or its cluster is in `live`
/// already). `touched` collects the clusters brought in until the next commit
/// ([`Store::relabel`]).
///
/// The simple version puts every clustered document of the index into `live` at start-up
/// (a query for each: 2 s a million documents, and 136 bytes of heap each at 1M). A
/// cluster no write has touched is the same as when it was saved, so only the touched ones
/// need the dataflow: a saved cluster is whole (no written document links to it, none of
/// its documents was removed), and all the edges of its documents stay within it.
fn touch(store: &Store, live: &mut LiveClusters, touched: &mut FxHashSet<u64>, doc: u64) {
    let members = untouched_members(store, touched, std::iter::once(doc));
    let (base, k) = (store.base(), store.k());
    let mut link = |member: u64, generation: usize, row: u32| {
        link_saved(store, live, member, base.doc_id(generation, row));
    };
    if members.len() <= TOUCH_ONE_BY_ONE {
        for &(member, fp) in &members {
            base.query(fp, k, |m| link(member, m.generation, m.row));
        }
    } else {
        let fps: Vec<u64> = members.iter().map(|&(_, fp)| fp).collect();
        base.query_batch(&fps, k, |i, m| link(members[i].0, m.generation, m.row));
    }
}

/// Links `member` of a saved cluster to `other`, one of its neighbours in the index, once
/// (from the smaller number) and unless `other` was removed.
fn link_saved(store: &Store, live: &mut LiveClusters, member: u64, other: u64) {
    if other > member && !store.is_removed(other) {
        live.add_edge(member, other);
    }
}

/// `(doc, fingerprint)` of every document of the saved clusters of `docs` that no write
/// has touched yet (nor `touched`), which are then `touched`.
fn untouched_members(
    store: &Store,
    touched: &mut FxHashSet<u64>,
    docs: impl Iterator<Item = u64>,
) -> Vec<(u64, u64)> {
    let mut members = Vec::new();
    for doc in docs {
        let Some(label) = store.untouched_cluster(doc) else {
            continue;
        };
        if !touched.insert(label) {
            continue;
        }
        members.extend(store.saved_members(label).map(|m| {
            let fp = store
                .base_simhash(m)
                .expect("a saved cluster's documents are the index's");
            (m, fp)
        }));
    }
    members
}

/// The index's documents within k of each of `fps`, removed ones included, as `(doc,
/// hamming)`: one batch ([`Index::query_batch`]: each table walked once, in order) for each
/// of the machine's cores, on as many threads, over consecutive shares of `fps`. Each
/// query's answer is the same whatever the shares: a batch answers each query on its own.
fn batch_neighbours(store: &Store, fps: &mut [u64]) -> Vec<Vec<(u64, u32)>> {
    let base = store.base();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get().min(16));
    let threads = cores.min(fps.len() / REPLAY_SHARE).max(1);
    let parts = across(threads, fps, |part: &mut [u64]| {
        let mut out = vec![Vec::new(); part.len()];
        base.query_batch(part, store.k(), |q, m| {
            out[q].push((base.doc_id(m.generation, m.row), m.hamming));
        });
        out
    });
    parts.into_iter().flatten().collect()
}

/// Replays the log's `records` over the store and the clusters; returns the next document
/// number. Each record is checked as well as decoded: a put's number must be of this log's
/// file and above every earlier one (the writer numbers puts in write order), so that a
/// record that passes its CRC but was not written so (forged or damaged) is refused, naming
/// the log, the record and its byte offset, instead of giving two documents one number.
fn replay(
    store: &mut Store,
    live: &mut LiveClusters,
    records: &[Vec<u8>],
    log_path: &Path,
    file: u64,
) -> Result<u64, ServiceError> {
    let first = file << FILE_SHIFT;
    let mut next_doc = first;
    let mut touched = FxHashSet::default();
    let mut offset = neardup_io::wal::WAL_HEADER_BYTES;
    for (n, chunk) in records.chunks(REPLAY_BATCH).enumerate() {
        let mut decoded = Vec::with_capacity(chunk.len());
        for (i, bytes) in chunk.iter().enumerate() {
            let number = n * REPLAY_BATCH + i + 1;
            let bad = |reason: String| ServiceError::BadRecord {
                path: log_path.to_path_buf(),
                record: number,
                offset,
                reason,
            };
            let record = Record::decode(bytes).map_err(bad)?;
            if let Record::Put { doc, .. } = &record {
                if *doc >> FILE_SHIFT != file {
                    return Err(bad(format!(
                        "doc number {doc} is not of this log's file {file} (numbers from {first})"
                    )));
                }
                if *doc < next_doc {
                    return Err(bad(format!(
                        "doc number {doc} was given before (the log's next is {next_doc})"
                    )));
                }
                next_doc = doc + 1;
            }
            decoded.push(record);
            offset += neardup_io::wal::RECORD_HEADER_BYTES + bytes.len() as u64;
        }
        let bases = base_neighbours(store, &decoded);
        // The saved clusters the chunk touches, brought in before it is applied: those of
        // the pages it replaces or deletes and of the index's neighbours of its puts (some
        // more than the writes did, which changes no cluster: each comes in whole, as
        // saved), their documents asked on every core at once. One query a document, as a
        // write asks them, was half of a recovery's time at 100M documents
        // (docs/performance.md).
        let ids = decoded.iter().filter_map(|record| match record {
            Record::Put { id, .. } | Record::Delete { id } => store.doc_of(id),
        });
        let neighbours = bases.iter().flatten().map(|&(doc, _)| doc);
        let members = untouched_members(store, &mut touched, ids.chain(neighbours));
        let mut fps: Vec<u64> = members.iter().map(|&(_, fp)| fp).collect();
        for (&(member, _), found) in members.iter().zip(batch_neighbours(store, &mut fps)) {
            for (other, _) in found {
                link_saved(store, live, member, other);
            }
        }
        for (record, base) in decoded.into_iter().zip(bases) {
            apply(store, live, &mut touched, record, Some(base));
        }
        let changes = live.commit();
        store.relabel(&changes, touched.drain());
    }
    Ok(next_doc)
}

/// The index's documents within k of each put of `records`, removed ones included, as
/// `(doc, hamming)` (nothing for the other records): asked as one batch
/// ([`Index::query_batch`]: each table walked once, in order), where one query a record
/// lands at random places in every table (16 binary searches; with an index larger than
/// the page cache, 16 reads from disk a record).
fn base_neighbours(store: &Store, records: &[Record]) -> Vec<Vec<(u64, u32)>> {
    let mut out = vec![Vec::new(); records.len()];
    let (mut fps, mut whose) = (Vec::new(), Vec::new());
    for (i, record) in records.iter().enumerate() {
        if let Record::Put {
            simhash,
            empty: false,
            ..
        } = record
        {
            fps.push(*simhash);
            whose.push(i);
        }
    }
    for (i, found) in whose.into_iter().zip(batch_neighbours(store, &mut fps)) {
        out[i] = found;
    }
    out
}

/// Applies one logged write to the store and the clusters (not yet committed), returning
/// its answer (clusters filled in after the commit). `base`: a put's neighbours among the
/// index's documents where they were asked beforehand ([`base_neighbours`] in a replay,
/// [`Service::submit`] for a write), removed ones included.
fn apply(
    store: &mut Store,
    live: &mut LiveClusters,
    touched: &mut FxHashSet<u64>,
    record: Record,
    base: Option<Vec<(u64, u32)>>,
) -> Answer {
    match record {
        Record::Put {
            doc,
            id,
            simhash,
            digest,
            empty,
            url,
            time,
        } => {
            let replaced = store.doc_of(&id);
            if let Some(old) = replaced {
                touch(store, live, touched, old);
                store.remove(old);
                live.remove_document(old);
            }
            let matches = match (empty, base) {
                (true, _) => Vec::new(),
                (false, Some(base)) => store.neighbours_from(simhash, base, Some(digest)),
                (false, None) => store.neighbours(simhash, store.k(), Some(digest)),
            };
            let status = if empty {
                Status::Empty
            } else if matches.iter().any(|m| m.exact == Some(true)) {
                Status::Exact
            } else if matches.is_empty() {
                Status::New
            } else {
                Status::Near
            };
            if !empty {
                for m in &matches {
                    touch(store, live, touched, m.doc_id);
                    live.add_edge(doc, m.doc_id);
                }
            }
            store.insert(
                doc,
                Written {
                    id: id.as_str().into(),
                    simhash,
                    empty,
                    url: url.map(Into::into),
                    time: time.map(Into::into),
                },
                digest,
            );
            Answer::Put(PutAnswer {
                id,
                doc_id: doc,
                status,
                replaced,
                matches,
                cluster_id: None,
                cluster_size: 1,
            })
        }
        Record::Delete { id } => {
            let Some(doc) = store.doc_of(&id) else {
                return Answer::Delete(None);
            };
            touch(store, live, touched, doc);
            store.remove(doc);
            live.remove_document(doc);
            Answer::Delete(Some(DeleteAnswer { id, doc_id: doc }))
        }
    }
}

/// Whether `dir` holds a log of the service (for messages).
pub fn has_log(dir: &Path) -> bool {
    dir.join(LOG_FILE).exists()
}
