//! The batch's documents probing the index as `--against` reads them back, in doc-number
//! order: the simple version probes with every document at once and holds them all; here a
//! simhash index is probed a chunk at a time and MinHash one document at a time, and only
//! the documents in a pair are held, as the clusters need them ([`slim`]).

use std::collections::HashSet;

use neardup_io::index::{DocEntry, Index};

use super::{Comparison, IndexedMatch};

/// The new documents probing the index as they are read ([`super::against`]): a simhash index
/// with a chunk of them at a time ([`Index::query_batch`] walks each table once a chunk), a
/// MinHash index one by one. It keeps, without their names, the documents in a pair: with
/// an indexed one, or with another new one (`paired`).
pub(super) struct Probe<'a> {
    index: &'a Index,
    k: u32,
    threshold: f64,
    /// The new documents in a pair of the batch (in the index's numbering).
    paired: HashSet<u64>,
    /// Whether the batch's unlinked pairs are verified from the sketches ([`super::unlinked`]).
    sketches: bool,
    /// Simhash: the documents read since the last chunk was probed, and a chunk's size.
    waiting: Vec<DocEntry>,
    chunk: usize,
    /// The documents in a pair so far, by doc number.
    held: Vec<DocEntry>,
    found: Comparison,
}

impl<'a> Probe<'a> {
    /// Probes `index` within `k` bits (simhash) or at `threshold` (MinHash); `outputs`: the
    /// batch's pairs (in the run's numbering, `shift` from the index's); `budget`: the
    /// memory of a chunk of simhash documents; `sketches`: see [`Probe::hold`].
    pub(super) fn new(
        index: &'a Index,
        (k, threshold, sketches): (u32, f64, bool),
        outputs: &neardup_io::run_dir::RunOutputs,
        shift: u64,
        budget: usize,
    ) -> Probe<'a> {
        let paired = outputs
            .pairs
            .iter()
            .flat_map(|(a, b, _)| [a + shift, b + shift])
            .collect();
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
            found: Comparison::new(),
        }
    }

    /// The next new document (in the index's numbering, ascending).
    pub(super) fn push(&mut self, doc: &DocEntry) {
        self.found.summary.new_documents += 1;
        if self.index.minhash().is_none() {
            self.waiting.push(slim(doc, false));
            if self.waiting.len() >= self.chunk {
                self.probe_waiting();
            }
            return;
        }
        let before = self.found.matches.len();
        if !doc.empty {
            let set = doc.shingles.as_ref().map(|set| {
                let mut set = set.clone();
                set.sort_unstable();
                set.dedup();
                set
            });
            let (index, found) = (self.index, &mut self.found);
            index.query_minhash(&doc.signature, set.as_deref(), self.threshold, |m| {
                let matched = IndexedMatch {
                    doc: doc.doc_id,
                    generation: m.generation,
                    row: m.row,
                    hamming: 0,
                    jaccard: Some(m.jaccard as f32),
                };
                found.found(doc, index.doc(m.generation, m.row), matched)
            });
        }
        self.hold(doc, self.found.matches.len() > before);
    }

    /// Probes the simhash documents waiting, as one batch.
    fn probe_waiting(&mut self) {
        let waiting = std::mem::take(&mut self.waiting);
        let probes: Vec<usize> = (0..waiting.len()).filter(|&i| !waiting[i].empty).collect();
        let fps: Vec<u64> = probes.iter().map(|&i| waiting[i].simhash).collect();
        let mut matched = vec![false; waiting.len()];
        let (index, found) = (self.index, &mut self.found);
        index.query_batch(&fps, self.k, |q, m| {
            let doc = &waiting[probes[q]];
            matched[probes[q]] = true;
            let at = IndexedMatch {
                doc: doc.doc_id,
                generation: m.generation,
                row: m.row,
                hamming: m.hamming,
                jaccard: None,
            };
            found.found(doc, index.doc(m.generation, m.row), at)
        });
        for (doc, matched) in waiting.iter().zip(matched) {
            self.hold(doc, matched);
        }
    }

    /// Keeps `doc` if it is in a pair (`matched`: with an indexed document), without its
    /// names; its sketch only where the batch's unlinked pairs may be verified
    /// (`sketches`) and it is in one of the batch's pairs, the only pairs those are made
    /// from.
    fn hold(&mut self, doc: &DocEntry, matched: bool) {
        let paired = self.paired.contains(&doc.doc_id);
        if matched || paired {
            self.held.push(slim(doc, self.sketches && paired));
        }
    }

    /// The documents in a pair, by doc number, and the pairs with the index, in the order of
    /// the new documents, then the indexed ones (a simhash batch query answers in no
    /// particular order).
    pub(super) fn finish(mut self) -> (Vec<DocEntry>, Comparison) {
        self.probe_waiting();
        self.found
            .matches
            .sort_unstable_by_key(|m| (m.doc, m.generation, m.row));
        (self.held, self.found)
    }
}

/// `doc` as the clusters need it: without its id, source and URL, and with its signature
/// and shingle set only with `sketch`.
fn slim(doc: &DocEntry, sketch: bool) -> DocEntry {
    DocEntry {
        id: None,
        source: String::new(),
        url: None,
        signature: if sketch {
            doc.signature.clone()
        } else {
            Vec::new()
        },
        shingles: if sketch { doc.shingles.clone() } else { None },
        ..*doc
    }
}
