//! The batch's documents probing the index as `--against` reads them back, in doc-number
//! order: the simple version probes with every document at once and holds them all; here a
//! simhash index is probed a chunk at a time and MinHash one document at a time, and only
//! the documents in a pair are held, as the clusters need them ([`Held`]: 56 bytes, where a
//! [`DocEntry`] takes about 240 and its sketch kilobytes). The sketches the stars may verify
//! pairs with go to a sort on disk instead ([`Probe::finish`]).

use std::io;

use neardup_io::index::{DocEntry, Index};
use neardup_io::spill::ExternalSort;

use super::{Comparison, Held, IndexedMatch};
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
    /// The new documents in a pair of the batch (in the index's numbering), sorted.
    paired: Vec<u64>,
    /// Where the sketches of the documents in a pair of the batch go, when the batch's
    /// unlinked pairs are verified from them ([`super::unlinked`]); `exact`: by their shingle
    /// sets (sorted, without repeats), not their signatures.
    sketches: Option<(ExternalSort<SketchByDoc>, bool)>,
    /// Simhash: the documents read since the last chunk was probed, and a chunk's size.
    waiting: Vec<DocEntry>,
    chunk: usize,
    /// The documents in a pair so far, by doc number.
    held: Vec<Held>,
    found: Comparison,
}

impl<'a> Probe<'a> {
    /// Probes `index` within `k` bits (simhash) or at `threshold` (MinHash); `pairs`: the
    /// batch's pairs (in the run's numbering, `shift` from the index's); `budget`: the
    /// memory of a chunk of simhash documents; `sketches`: the sort the sketches go to (see
    /// [`Probe::sketch`]), and whether verification is exact; `found`: where the pairs go.
    pub(super) fn new(
        index: &'a Index,
        (k, threshold): (u32, f64),
        pairs: &[neardup_io::run_dir::RunPair],
        shift: u64,
        (budget, sketches): (usize, Option<(ExternalSort<SketchByDoc>, bool)>),
        found: Comparison,
    ) -> Probe<'a> {
        let mut paired: Vec<u64> = pairs
            .iter()
            .flat_map(|p| [p.doc_a + shift, p.doc_b + shift])
            .collect();
        paired.sort_unstable();
        paired.dedup();
        let entry = std::mem::size_of::<DocEntry>();
        Probe {
            index,
            k,
            threshold,
            paired,
            sketches,
            waiting: Vec::new(),
            chunk: (budget / entry).clamp(1 << 6, 1 << 20),
            held: Vec::new(),
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
        self.found.flush()?;
        let matched = self.found.summary.indexed_pairs > before;
        self.hold(doc, matched);
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
            self.hold(doc, matched);
        }
        self.found.flush()
    }

    /// Whether the new document `doc` is in a pair of the batch.
    fn paired(&self, doc: u64) -> bool {
        self.paired.binary_search(&doc).is_ok()
    }

    /// Keeps `doc` as the clusters need it if it is in a pair (`matched`: with an indexed
    /// document).
    fn hold(&mut self, doc: &DocEntry, matched: bool) {
        if matched || self.paired(doc.doc_id) {
            self.held.push(Held {
                doc_id: doc.doc_id,
                simhash: doc.simhash,
                rank: doc.rank,
                cluster_id: None,
                removed: false,
            });
        }
    }

    /// Writes `doc`'s sketch to the sketch sort where the batch's unlinked pairs may be
    /// verified and it is in one of the batch's pairs, the only pairs those are made from:
    /// its shingle set `set` (sorted, without repeats) to verify by exact Jaccard
    /// similarity, its signature to verify by their estimate.
    fn sketch(&mut self, doc: &DocEntry, set: Option<Vec<u64>>) -> io::Result<()> {
        if !self.paired(doc.doc_id) {
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

    /// The documents in a pair, by doc number; the pairs found; the sketch sort, if any. An
    /// error is the pairs' sort's.
    pub(super) fn finish(mut self) -> io::Result<Finished> {
        self.probe_waiting()?;
        Ok((self.held, self.found, self.sketches.map(|(sort, _)| sort)))
    }
}

/// What [`Probe::finish`] returns.
type Finished = (Vec<Held>, Comparison, Option<ExternalSort<SketchByDoc>>);

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
