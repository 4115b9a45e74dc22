//! The batch's documents probing the index as `--against` reads them back, in doc-number
//! order: the simple version probes with every document at once and holds them all; here a
//! simhash index is probed a chunk at a time and MinHash one document at a time, and only
//! the documents in a pair are kept, as the clusters need them ([`Held`]: 32 bytes, where a
//! [`DocEntry`] takes about 240 and its sketch kilobytes), in a sort on disk by doc number;
//! so are the sketches the stars may verify pairs with ([`Probe::finish`]). Which documents
//! are in a pair of the batch is read beside them, from the pairs' documents sorted on disk.

use std::io;
use std::iter::Peekable;

use neardup_io::index::{DocEntry, Index};
use neardup_io::spill::{ExternalSort, Merged, SortedFile};

use super::links::Held;
use super::{Comparison, IndexedMatch};
use crate::stages::fingerprint::resume::{Sketch, SketchByDoc};

/// MinHash documents probed between two releases of the index's pages
/// ([`Index::release_pages`]): each probe reads the band tables and its candidates'
/// signatures and shingle sets (kilobytes each), which would otherwise all stay resident.
const MINHASH_RELEASE_EVERY: u64 = 1 << 14;

/// The new documents probing the index as they are read ([`super::against`]): a simhash index
/// with a chunk of them at a time ([`Index::query_batch`] walks each table once a chunk), a
/// MinHash index one by one. It keeps, without their names, the documents in a pair: with
/// an indexed one, or with another new one (`paired`).
pub(super) struct Probe<'a> {
    index: &'a Index,
    k: u32,
    threshold: f64,
    /// The documents of the batch's pairs (in the index's numbering), sorted (repeated),
    /// read as far as the documents probed.
    paired: Peekable<Merged<u64>>,
    /// Where the sketches of the documents in a pair of the batch go, when the batch's
    /// unlinked pairs are verified from them ([`super::unlinked`]); `exact`: by their shingle
    /// sets (sorted, without repeats), not their signatures.
    sketches: Option<(ExternalSort<SketchByDoc>, bool)>,
    /// Simhash: the documents read since the last chunk was probed, and a chunk's size.
    waiting: Vec<DocEntry>,
    chunk: usize,
    /// The documents in a pair so far, by doc number.
    held: ExternalSort<Held>,
    found: Comparison,
}

impl<'a> Probe<'a> {
    /// Probes `index` within `k` bits (simhash) or at `threshold` (MinHash); `paired`: the
    /// documents of the batch's pairs, sorted; `held`: the sort the documents in a pair go
    /// to; `budget`: the memory of a chunk of simhash documents; `sketches`: the sort the
    /// sketches go to (see [`Probe::sketch`]), and whether verification is exact; `found`:
    /// where the pairs go.
    pub(super) fn new(
        index: &'a Index,
        (k, threshold): (u32, f64),
        (paired, held): (Merged<u64>, ExternalSort<Held>),
        (budget, sketches): (usize, Option<(ExternalSort<SketchByDoc>, bool)>),
        found: Comparison,
    ) -> Probe<'a> {
        let entry = std::mem::size_of::<DocEntry>();
        Probe {
            index,
            k,
            threshold,
            paired: paired.peekable(),
            sketches,
            waiting: Vec::new(),
            chunk: (budget / entry).clamp(1 << 6, 1 << 20),
            held,
            found,
        }
    }

    /// The next new document (in the index's numbering, ascending); an error is the sketch
    /// sort's or the pairs'.
    pub(super) fn push(&mut self, doc: &DocEntry) -> io::Result<()> {
        self.found.summary.new_documents += 1;
        if self.index.minhash().is_none() {
            self.waiting.push(slim(doc));
            if self.waiting.len() >= self.chunk {
                self.probe_waiting()?;
            }
            return Ok(());
        }
        let before = self.found.summary.indexed_pairs;
        if (self.found.summary.new_documents).is_multiple_of(MINHASH_RELEASE_EVERY) {
            self.index.release_pages();
        }
        // Sorted, without repeats: as the index verifies, and as the sketch keeps it.
        let set = doc.shingles.as_ref().map(|set| {
            let mut set = set.clone();
            set.sort_unstable();
            set.dedup();
            set
        });
        if !doc.empty {
            let (index, found) = (self.index, &mut self.found);
            index.query_minhash(&doc.signature, set.as_deref(), self.threshold, |m| {
                let matched = IndexedMatch {
                    doc: doc.doc_id,
                    generation: m.generation,
                    hamming: 0,
                    jaccard: Some(m.jaccard as f32),
                };
                found.found(index, doc, index.doc(m.generation, m.row), matched)
            });
        }
        let matched = self.found.summary.indexed_pairs > before;
        self.hold(doc, matched)?;
        self.found.flush()?;
        self.sketch(doc, set)
    }

    /// Probes the simhash documents waiting, as one batch; an error is the pairs' sort's.
    fn probe_waiting(&mut self) -> io::Result<()> {
        let waiting = std::mem::take(&mut self.waiting);
        let probes: Vec<usize> = (0..waiting.len()).filter(|&i| !waiting[i].empty).collect();
        let fps: Vec<u64> = probes.iter().map(|&i| waiting[i].simhash).collect();
        let mut matched = vec![false; waiting.len()];
        let (index, found) = (self.index, &mut self.found);
        index.query_batch_releasing(&fps, self.k, |q, m| {
            let doc = &waiting[probes[q]];
            matched[probes[q]] = true;
            let at = IndexedMatch {
                doc: doc.doc_id,
                generation: m.generation,
                hamming: m.hamming,
                jaccard: None,
            };
            found.found(index, doc, index.doc(m.generation, m.row), at)
        });
        // Each table's pages left as the chunk walked it (`query_batch_releasing`); the
        // pages of the documents it matched leave the resident memory with it.
        index.release_pages();
        for (doc, matched) in waiting.iter().zip(matched) {
            self.hold(doc, matched)?;
        }
        self.found.flush()
    }

    /// Whether the new document `doc` is in a pair of the batch (`doc` not smaller than the
    /// one asked before); an error is the pairs' documents' sort's.
    fn paired(&mut self, doc: u64) -> io::Result<bool> {
        loop {
            match self.paired.peek() {
                Some(Ok(d)) if *d < doc => {
                    self.paired.next();
                }
                Some(Ok(d)) => return Ok(*d == doc),
                None => return Ok(false),
                Some(Err(_)) => return Err(self.paired.next().and_then(Result::err).unwrap()),
            }
        }
    }

    /// Keeps `doc` as the clusters need it if it is in a pair (`matched`: with an indexed
    /// document), before the probe's pairs are flushed ([`Comparison::flush`]): whether it is
    /// removed for a kept indexed document is known then.
    fn hold(&mut self, doc: &DocEntry, matched: bool) -> io::Result<()> {
        if matched || self.paired(doc.doc_id)? {
            self.held.push(Held {
                doc_id: doc.doc_id,
                simhash: doc.simhash,
                rank: doc.rank,
                chosen: self.found.probed.contains_key(&doc.doc_id),
            })?;
        }
        Ok(())
    }

    /// Writes `doc`'s sketch to the sketch sort where the batch's unlinked pairs may be
    /// verified and it is in one of the batch's pairs, the only pairs those are made from:
    /// its shingle set `set` (sorted, without repeats) to verify by exact Jaccard
    /// similarity, its signature to verify by their estimate.
    fn sketch(&mut self, doc: &DocEntry, set: Option<Vec<u64>>) -> io::Result<()> {
        if self.sketches.is_none() || !self.paired(doc.doc_id)? {
            return Ok(());
        }
        let Some((sort, exact)) = &mut self.sketches else {
            return Ok(());
        };
        let sketch = if *exact {
            Sketch {
                doc_id: doc.doc_id,
                signature: Vec::new(),
                shingles: Some(set.unwrap_or_default()),
            }
        } else {
            Sketch {
                doc_id: doc.doc_id,
                signature: doc.signature.clone(),
                shingles: None,
            }
        };
        sort.push(SketchByDoc(sketch))
    }

    /// The documents in a pair, by doc number, in one file; the pairs found; the sketch
    /// sort, if any. An error is a sort's.
    pub(super) fn finish(mut self) -> io::Result<Finished> {
        self.probe_waiting()?;
        let held = self.held.seal()?;
        Ok((held, self.found, self.sketches.map(|(sort, _)| sort)))
    }
}

/// What [`Probe::finish`] returns.
type Finished = (
    SortedFile<Held>,
    Comparison,
    Option<ExternalSort<SketchByDoc>>,
);

/// `doc` as a simhash probe needs it: without its names and sketch.
fn slim(doc: &DocEntry) -> DocEntry {
    DocEntry {
        id: None,
        source: String::new(),
        url: None,
        signature: Vec::new(),
        shingles: None,
        ..*doc
    }
}
