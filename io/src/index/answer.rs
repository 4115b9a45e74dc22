//! Answering queries against an index: the one path by which `neardup query`, the Python
//! package's `Index.query` and (for its pieces) `neardup serve` turn texts and fingerprints
//! into matches.
//!
//! A text is fingerprinted with the index's own scheme, rebuilt from its manifest and
//! checked ([`query_scheme`], [`simhash_scheme`]; [`neardup_core::Scheme::from_params`]), so
//! a query can never be compared with fingerprints of another kind; an empty document (no
//! features) is asked and matches nothing, as in a run. A `k` may be smaller than the
//! index's, never larger ([`check_k`]): its tables find only matches within its own `k`.
//! A MinHash index's threshold may be stricter, never looser ([`check_threshold`]).
//!
//! An [`Answerer`] answers batches of queries across threads, in query order whatever the
//! thread count, each query's matches sorted by doc number. A simhash batch walks each
//! table once ([`Index::query_batch`]), so the larger it is, the closer its probes lie: texts
//! streamed in ([`Answerer::push`]) are fingerprinted [`TEXT_BATCH`] at a time and only their
//! fingerprints wait for a batch of [`FINGERPRINT_BATCH_PER_THREAD`] per thread.
//!
//! ```no_run
//! # use neardup_io::index::{Index, Verify};
//! # use neardup_io::index::answer::{query_scheme, Answerer, Query};
//! let index = Index::open("idx".as_ref(), Verify::Checksums)?;
//! let scheme = query_scheme(index.manifest())?;
//! let mut answerer = Answerer::new(&index, scheme);
//! let mut queries = vec![Query::text("text:1", "the quick brown fox")];
//! answerer.answer(&mut queries, |row| {
//!     println!("{} {} {:?}", row.query, row.doc_id, row.hamming);
//!     Ok::<_, std::io::Error>(())
//! })?;
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use neardup_core::scheme::ParamsError;
use neardup_core::{DocFingerprint, Fingerprinter, Method, Scheme};

use super::{Index, Manifest, MatchRow, MinHashParams};

/// Texts fingerprinted together (the unit of fingerprinting spread over the threads).
pub const TEXT_BATCH: usize = 4096;

/// Fingerprints of a simhash index asked together, per thread. A batch walks each table once
/// ([`Index::query_batch`]), so the larger it is, the closer its probes lie in each table:
/// on 10M fingerprints one thread answers about 50,000 queries/s in batches of 4,096 (as
/// many as single queries), 143,000/s in batches of 65,536 and 457,000/s in one batch of
/// 200,000 (docs/performance.md, "10 million fingerprints"). Texts are fingerprinted in
/// batches of [`TEXT_BATCH`] and only their fingerprints and names wait for this many.
pub const FINGERPRINT_BATCH_PER_THREAD: usize = 131_072;

/// From this many queries on, a thread answers its share as one batch
/// ([`Index::query_batch`]: each table walked once) instead of one query at a time.
const BATCH_QUERY_MIN: usize = 64;

/// A query that cannot be asked of an index.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The index's scheme cannot be rebuilt from its manifest.
    #[error(transparent)]
    Scheme(#[from] ParamsError),
    /// A simhash question of a MinHash index.
    #[error("a MinHash index is asked by neardup query and neardup run --against only")]
    MinHashIndex,
    #[error(transparent)]
    KTooLarge(#[from] KTooLarge),
    #[error("--threshold {0} is out of range: it must be between 0 and 1")]
    ThresholdRange(f64),
    #[error("{}: --threshold {asked} is looser than the index's threshold {index}: its documents were verified at {index} (rebuild the index with --threshold {asked})", dir.display())]
    ThresholdLooser {
        dir: PathBuf,
        asked: f64,
        index: f64,
    },
}

/// How the asker names `k`, as its refusal repeats it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KName {
    /// The command line's flag: `-k 4`.
    Flag,
    /// A keyword argument (Python): `k = 4`.
    Keyword,
    /// A JSON field (the HTTP API): `k 4`, and the refusal alone, without the remedy.
    Field,
}

/// A `k` larger than the index's: its tables find only matches within its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KTooLarge {
    pub asked: u32,
    pub index_k: u32,
    pub named: KName,
}

impl fmt::Display for KTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (asked, index_k) = (self.asked, self.index_k);
        match self.named {
            KName::Flag => write!(f, "-k {asked}")?,
            KName::Keyword => write!(f, "k = {asked}")?,
            KName::Field => write!(f, "k {asked}")?,
        }
        write!(f, " is larger than the index's k = {index_k}")?;
        if self.named != KName::Field {
            write!(
                f,
                ": its tables find only matches within {index_k} bits (rebuild the index with -k {asked})"
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for KTooLarge {}

/// The `k` to ask with: `asked`, at most the index's `index_k` (its default).
pub fn check_k(index_k: u32, asked: Option<u32>, named: KName) -> Result<u32, KTooLarge> {
    match asked {
        None => Ok(index_k),
        Some(k) if k > index_k => Err(KTooLarge {
            asked: k,
            index_k,
            named,
        }),
        Some(k) => Ok(k),
    }
}

/// The threshold to ask a MinHash index (in `dir`) with: `asked`, between 0 and 1 and at
/// least the index's (its default): its documents were verified at its own.
pub fn check_threshold(
    index: &MinHashParams,
    asked: Option<f64>,
    dir: &Path,
) -> Result<f64, QueryError> {
    let Some(t) = asked else {
        return Ok(index.threshold);
    };
    if !(0.0..=1.0).contains(&t) {
        return Err(QueryError::ThresholdRange(t));
    }
    if t < index.threshold {
        return Err(QueryError::ThresholdLooser {
            dir: dir.to_path_buf(),
            asked: t,
            index: index.threshold,
        });
    }
    Ok(t)
}

/// The scheme any index was made with, simhash or MinHash, rebuilt from its manifest and
/// checked ([`Scheme::from_params`]): what its text queries are fingerprinted with.
pub fn query_scheme(manifest: &Manifest) -> Result<Scheme, ParamsError> {
    Scheme::from_params(&manifest.scheme, &manifest.fingerprint)
}

/// The scheme a simhash index was made with ([`query_scheme`]); a MinHash index is refused
/// (its tables are LSH bands, not permutation tables).
pub fn simhash_scheme(manifest: &Manifest) -> Result<Scheme, QueryError> {
    let scheme = query_scheme(manifest)?;
    if matches!(scheme.method, Method::MinHash { .. }) {
        return Err(QueryError::MinHashIndex);
    }
    Ok(scheme)
}

/// Fingerprints text queries of a simhash index with its scheme (their feature sets are
/// not kept), reusing its buffers from text to text.
pub struct TextFingerprinter(Fingerprinter);

impl TextFingerprinter {
    pub fn new(scheme: &Scheme) -> TextFingerprinter {
        let mut fingerprinter = Fingerprinter::new(scheme.clone());
        fingerprinter.set_sort_feature_set(false);
        TextFingerprinter(fingerprinter)
    }

    /// The text's fingerprint (simhash and exact key); `None` for an empty document, which
    /// is never matched (as in a run).
    pub fn fingerprint(&mut self, text: &str) -> Option<DocFingerprint> {
        let fp = self.0.fingerprint(text);
        (!fp.is_empty()).then_some(fp)
    }
}

/// One query: its name (as its matches repeat it) and what to look up.
#[derive(Clone, Debug, PartialEq)]
pub enum Query {
    /// A text, fingerprinted with the index's scheme.
    Text { name: String, text: String },
    /// A simhash, looked up as it is (a simhash index only).
    Fingerprint { name: String, fp: u64 },
}

impl Query {
    pub fn text(name: impl Into<String>, text: impl Into<String>) -> Query {
        Query::Text {
            name: name.into(),
            text: text.into(),
        }
    }

    pub fn name(&self) -> &String {
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

/// Answers queries of one index across threads: what to ask with (the scheme, `k` or the
/// threshold), the texts streamed in and waiting, and the counts so far.
pub struct Answerer<'a> {
    index: &'a Index,
    scheme: Scheme,
    k: u32,
    /// A MinHash index's threshold.
    threshold: f64,
    threads: usize,
    /// Texts pushed and not fingerprinted yet.
    texts: Vec<Query>,
    /// A simhash index: fingerprints (of texts pushed) waiting for a large batch.
    ready: Vec<Query>,
    queries: u64,
    matches: u64,
}

impl<'a> Answerer<'a> {
    /// Answers with the index's `k` (or threshold), on one thread. `scheme` fingerprints the
    /// text queries ([`query_scheme`]); one asking fingerprints only may pass any.
    pub fn new(index: &'a Index, scheme: Scheme) -> Answerer<'a> {
        Answerer {
            index,
            scheme,
            k: index.k(),
            threshold: index.minhash().map_or(0.0, |m| m.threshold),
            threads: 1,
            texts: Vec::new(),
            ready: Vec::new(),
            queries: 0,
            matches: 0,
        }
    }

    /// Matches within `k` bits (checked by [`check_k`]).
    pub fn k(mut self, k: u32) -> Self {
        self.k = k;
        self
    }

    /// A MinHash index's matches of at least this similarity (checked by
    /// [`check_threshold`]).
    pub fn threshold(mut self, threshold: f64) -> Self {
        self.threshold = threshold;
        self
    }

    /// Threads answering (at least 1).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// Queries asked so far (empty documents included).
    pub fn queries(&self) -> u64 {
        self.queries
    }

    /// Matches found so far.
    pub fn matches(&self) -> u64 {
        self.matches
    }

    /// Answers `queries` now, as one batch: `found` gets every match, in query order.
    pub fn answer<E>(
        &mut self,
        queries: &mut [Query],
        mut found: impl FnMut(MatchRow) -> Result<(), E>,
    ) -> Result<(), E> {
        for rows in self.answer_parts(queries) {
            self.matches += rows.len() as u64;
            for (_, row) in rows {
                found(row)?;
            }
        }
        Ok(())
    }

    /// The matches of each of `queries`, one list per query in their order.
    pub fn answer_each(&mut self, queries: &mut [Query]) -> Vec<Vec<MatchRow>> {
        let mut each: Vec<Vec<MatchRow>> = vec![Vec::new(); queries.len()];
        let chunk = part_size(queries.len(), self.threads);
        for (p, rows) in self.answer_parts(queries).into_iter().enumerate() {
            self.matches += rows.len() as u64;
            for (i, row) in rows {
                each[p * chunk + i].push(row);
            }
        }
        each
    }

    /// Adds a query to those streamed in; answers (to `found`) what waits once a batch is
    /// full. [`Answerer::flush`] answers the rest.
    pub fn push<E>(
        &mut self,
        query: Query,
        found: impl FnMut(MatchRow) -> Result<(), E>,
    ) -> Result<(), E> {
        self.texts.push(query);
        if self.texts.len() < TEXT_BATCH {
            return Ok(());
        }
        let mut texts = std::mem::take(&mut self.texts);
        let result = if self.index.minhash().is_some() {
            self.answer(&mut texts, found)
        } else {
            let ready = self.fingerprint(&mut texts);
            self.ready.extend(ready);
            if self.ready.len() >= FINGERPRINT_BATCH_PER_THREAD * self.threads {
                let mut ready = std::mem::take(&mut self.ready);
                let result = self.answer(&mut ready, found);
                ready.clear();
                self.ready = ready;
                result
            } else {
                Ok(())
            }
        };
        texts.clear();
        self.texts = texts;
        result
    }

    /// Answers every query pushed and not answered yet.
    pub fn flush<E>(&mut self, found: impl FnMut(MatchRow) -> Result<(), E>) -> Result<(), E> {
        let mut texts = std::mem::take(&mut self.texts);
        if self.index.minhash().is_some() {
            return self.answer(&mut texts, found);
        }
        let ready = self.fingerprint(&mut texts);
        self.ready.extend(ready);
        let mut ready = std::mem::take(&mut self.ready);
        self.answer(&mut ready, found)
    }

    /// The fingerprints of `queries` (texts, across the threads) as fingerprint queries of
    /// the same names (moved out of `queries`), in order; empty documents are counted as
    /// asked and dropped (an empty document is never matched, as in a run).
    fn fingerprint(&mut self, queries: &mut [Query]) -> Vec<Query> {
        let asked = queries.len();
        let scheme = &self.scheme;
        let ready: Vec<Query> = across(self.threads, queries, |part| {
            let mut fingerprinter = TextFingerprinter::new(scheme);
            part.iter_mut()
                .filter_map(|query| {
                    let fp = simhash_of(&mut fingerprinter, query)?;
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

    /// The matches of `queries` cut into one part per thread: per part, each match with
    /// its query's place in the part, in query order.
    fn answer_parts(&mut self, queries: &mut [Query]) -> Vec<Vec<(usize, MatchRow)>> {
        let (index, scheme, k, threshold) = (self.index, &self.scheme, self.k, self.threshold);
        let answers = across(self.threads, queries, |part| match index.minhash() {
            Some(_) => answer_minhash(index, scheme, threshold, part),
            None => answer_simhash(index, scheme, k, part),
        });
        self.queries += queries.len() as u64;
        answers
    }
}

/// The length of the parts [`across`] cuts `items` into.
fn part_size(items: usize, threads: usize) -> usize {
    items.div_ceil(threads).max(1)
}

/// `work` over `items` cut into `threads` consecutive parts, one thread each; the results
/// in the parts' order (nothing for no items).
pub fn across<T: Send, R: Send>(
    threads: usize,
    items: &mut [T],
    work: impl Fn(&mut [T]) -> R + Sync,
) -> Vec<R> {
    if items.is_empty() {
        return Vec::new();
    }
    let chunk = part_size(items.len(), threads);
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

/// A query's simhash: its text's under the index's scheme, or the one given; `None` for an
/// empty document, which is never matched (as in a run).
fn simhash_of(fingerprinter: &mut TextFingerprinter, query: &Query) -> Option<u64> {
    match query {
        Query::Text { text, .. } => fingerprinter.fingerprint(text).map(|fp| fp.simhash),
        Query::Fingerprint { fp, .. } => Some(*fp),
    }
}

/// The matches of `queries` in a simhash index, each with its query's place, in order
/// (each query's sorted by doc number).
fn answer_simhash(
    index: &Index,
    scheme: &Scheme,
    k: u32,
    queries: &[Query],
) -> Vec<(usize, MatchRow)> {
    let mut fingerprinter = TextFingerprinter::new(scheme);
    // (place, name, fingerprint) of every query with one.
    let asked: Vec<(usize, &String, u64)> = queries
        .iter()
        .enumerate()
        .filter_map(|(i, query)| Some((i, query.name(), simhash_of(&mut fingerprinter, query)?)))
        .collect();
    let row = |name: &String, m: super::Match| {
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
        let fps: Vec<u64> = asked.iter().map(|a| a.2).collect();
        index.query_batch(&fps, k, |i, m| out.push((asked[i].0, row(asked[i].1, m))));
        out.sort_unstable_by_key(|(i, r)| (*i, r.doc_id));
        return out;
    }
    for (i, name, fp) in asked {
        let start = out.len();
        index.query(fp, k, |m| out.push((i, row(name, m))));
        out[start..].sort_unstable_by_key(|(_, r)| r.doc_id);
    }
    out
}

/// The matches of `queries` in a MinHash index, each with its query's place, in order
/// (each query's sorted by doc number): each text's signature probes the bands, and its
/// shingle set (where the index verifies by exact Jaccard) verifies the candidates.
/// Fingerprint queries are passed over (a signature is no 16 hex digits: `neardup query`
/// refuses them before).
fn answer_minhash(
    index: &Index,
    scheme: &Scheme,
    threshold: f64,
    queries: &[Query],
) -> Vec<(usize, MatchRow)> {
    let minhash = index.minhash().expect("a MinHash index");
    let mut fingerprinter = Fingerprinter::new(scheme.clone());
    // The verification set: the scheme's own features, or word shingles of another n.
    let mut shingler = minhash
        .exact()
        .then(|| scheme.verification_scheme(minhash.shingle))
        .flatten()
        .map(Fingerprinter::new);
    let mut out = Vec::new();
    for (i, query) in queries.iter().enumerate() {
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
            out.push((
                i,
                MatchRow {
                    query: name.clone(),
                    id: doc.id.map(str::to_string),
                    doc_id: doc.doc_id,
                    hamming: None,
                    jaccard: Some(m.jaccard),
                    jaccard_exact: Some(m.exact),
                    cluster_id: doc.cluster_id,
                },
            ))
        });
        out[start..].sort_unstable_by_key(|(_, r)| r.doc_id);
    }
    out
}
