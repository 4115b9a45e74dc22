//! MinHash mode: documents with identical signatures are folded before the bands, as the
//! simhash search folds equal fingerprints inside its buckets
//! ([`neardup_core::search::fold_identical`]).
//!
//! The simple version enters every signature in the bands, where `n` documents sharing one
//! signature (equal shingle sets under different exact keys) share every band and make
//! `n(n-1)/2` candidates per band. Instead they meet on one worker (by a hash of their band
//! keys, [`signature_route`]), the smallest `doc_id` goes on to the bands, and every other
//! member becomes one candidate pair with it, verified like any other: an identical
//! signature is an estimate, not proof that the Jaccard similarity reaches
//! `--min-jaccard`. The representative's candidates stand for the group.
//!
//! The documents cross to that worker before the exact stage, which routes MinHash
//! documents by the same hash ([`crate::stages::exact`]): the fold takes its worker's
//! representatives where they are, with no exchange of its own.

use std::rc::Rc;

use neardup_core::mix::mix2;
use neardup_io::spill::SpillRecord;
use serde::{Deserialize, Serialize};
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::StreamVec;

use crate::config::SIGNATURES_SORT_SHARE;
use crate::operators::sort::ordered_by;
use crate::operators::SortComplete;
use crate::records::{DocFp, Edge, EdgeKind, HeldDoc};
use crate::worker::WorkerCtx;

/// Splits representatives into one per distinct signature (band keys), which go on to the
/// bands, and candidate pairs linking every other document of a signature to it. `docs`
/// must be on their signature's worker ([`signature_route`], as the exact stage sends them).
///
/// The simple version collects the worker's documents in a `Vec`, sorts it by signature
/// and folds each run of equal ones; here the sort is external ([`SortComplete`], within
/// [`SIGNATURES_SORT_SHARE`] of the worker's part of `--memory-limit`), and the groups are
/// folded as its merge walks them.
pub fn fold_signatures<'s>(
    docs: StreamVec<'s, u64, DocFp>,
    ctx: Rc<WorkerCtx>,
) -> (StreamVec<'s, u64, DocFp>, StreamVec<'s, u64, Edge>) {
    let (end_ctx, fail_ctx) = (ctx.clone(), ctx.clone());
    docs.sort_complete_split(
        // Already on their signature's worker: the exact stage sent them there.
        Pipeline,
        "FoldSignatures",
        ctx.sort::<BySignature>("signatures", SIGNATURES_SORT_SHARE),
        Group::default(),
        |_, _| {},
        |group, record, reps, edges| {
            group.add(record, |rep| reps.give(rep), |edge| edges.give(edge))
        },
        move |group, stats, reps, edges| {
            let members = group.end(|rep| reps.give(rep), |edge| edges.give(edge));
            end_ctx.sorted("signatures", stats);
            end_ctx.report.borrow_mut().candidates += members;
        },
        move |e| fail_ctx.sort_failed("signatures", e),
    )
}

/// Equal signatures meet on one worker: the route of a MinHash document's exact stage and
/// so of its fold.
pub fn signature_route(bands: &[u64]) -> u64 {
    bands.iter().fold(0, |h, &b| mix2(h, b))
}

/// A document in the order the fold walks them: by a hash of its signature, then the
/// signature, then number.
///
/// The simple order is by signature, then number. But the band keys live on the heap, one
/// allocation per document, so each comparison of that sort reached two places in memory:
/// on a 16-core machine the fold took 3.8 s of a one-worker run over 1.6M documents, a
/// tenth of the search. The hash, kept in the record, decides almost every comparison; the
/// band keys only break its ties, so equal signatures are still next to each other,
/// smallest number first, and the fold is the same. The band keys are held inline
/// ([`HeldDoc`]): a record owns no allocation of its own.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BySignature {
    signature: u64,
    pub doc: HeldDoc,
}

ordered_by!(
    BySignature,
    cmp | a,
    b | (a.signature, a.doc.bands(), a.doc.doc().doc_id).cmp(&(
        b.signature,
        b.doc.bands(),
        b.doc.doc().doc_id
    ))
);

impl SpillRecord for BySignature {
    fn memory_bytes(&self) -> usize {
        self.doc.memory_bytes() + std::mem::size_of::<u64>()
    }
}

impl From<DocFp> for BySignature {
    fn from(doc: DocFp) -> Self {
        BySignature {
            signature: signature_route(&doc.bands),
            doc: HeldDoc::from(doc),
        }
    }
}

/// The signature being folded, documents in order: its first (smallest) document goes to
/// the bands, every other one becomes a pair with it.
#[derive(Default)]
struct Group {
    /// The group's first document, with its signature's hash.
    first: Option<BySignature>,
    members: u64,
}

impl Group {
    /// `record` is in the group when its signature equals the first's: the hashes are
    /// compared first, the band keys (on the heap) only when they agree.
    fn add(&mut self, record: BySignature, rep: impl FnOnce(DocFp), mut edge: impl FnMut(Edge)) {
        match &self.first {
            Some(BySignature {
                signature,
                doc: first,
            }) if *signature == record.signature && first.bands() == record.doc.bands() => {
                let (first, doc) = (first.doc(), record.doc.doc());
                self.members += 1;
                // A plain near pair, not a unit for --cluster star (as equal simhashes
                // are): an equal signature does not prove the members equally similar to
                // everything, so a star holds only documents with a verified pair to its
                // kept document.
                edge(Edge::new(
                    (first.doc_id, first.rank),
                    (doc.doc_id, doc.rank),
                    0,
                    EdgeKind::Near,
                ));
            }
            _ => {
                if let Some(done) = self.first.replace(record) {
                    rep(done.doc.into_doc());
                }
            }
        }
    }

    /// The last group's representative; returns the number of pairs made.
    fn end(mut self, rep: impl FnOnce(DocFp), _edge: impl FnMut(Edge)) -> u64 {
        if let Some(done) = self.first.take() {
            rep(done.doc.into_doc());
        }
        self.members
    }
}

/// The fold of `docs` in memory: what the walk does, on a sorted `Vec` (for the tests).
#[cfg(test)]
fn fold(docs: Vec<DocFp>, mut rep: impl FnMut(DocFp), mut edge: impl FnMut(Edge)) -> u64 {
    let mut docs: Vec<BySignature> = docs.into_iter().map(BySignature::from).collect();
    docs.sort_unstable();
    let mut group = Group::default();
    for record in docs {
        group.add(record, &mut rep, &mut edge);
    }
    group.end(rep, edge)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(doc_id: u64, bands: Vec<u64>) -> DocFp {
        DocFp {
            doc_id,
            simhash: 0,
            exact_key: 0,
            rank: doc_id * 10,
            empty: false,
            id_hash: None,
            bands,
            digest: None,
            url_key: None,
            host_hash: None,
            page: None,
        }
    }

    #[test]
    fn one_representative_per_signature_the_others_linked_to_it() {
        let docs = vec![
            doc(7, vec![1, 2, 3]),
            doc(3, vec![1, 2, 3]),
            doc(5, vec![1, 2, 4]),
            doc(9, vec![1, 2, 3]),
            doc(1, vec![9, 9, 9]),
        ];
        let (mut reps, mut edges) = (Vec::new(), Vec::new());
        let members = fold(docs, |r| reps.push(r.doc_id), |e| edges.push(e));
        reps.sort_unstable();
        assert_eq!(reps, vec![1, 3, 5]);
        let linked: Vec<(u64, u64, u64, u64)> = edges
            .iter()
            .map(|e| (e.a, e.b, e.rank_a, e.rank_b))
            .collect();
        assert_eq!(linked, vec![(3, 7, 30, 70), (3, 9, 30, 90)]);
        assert!(edges
            .iter()
            .all(|e| e.kind == EdgeKind::Near && e.hamming == 0));
        assert_eq!(members, 2);
    }

    /// The fold against the simple version: documents grouped by signature in a map, the
    /// smallest number of each group its representative, every other member a pair with
    /// it. Signatures are drawn from a few, so groups are large, and of several lengths.
    #[test]
    fn the_fold_equals_grouping_by_signature() {
        use std::collections::BTreeMap;
        let mut state = 3u64;
        let mut next = || neardup_core::mix::splitmix64(&mut state);
        let signatures: Vec<Vec<u64>> = (0..20)
            .map(|i| (0..(3 + i % 3)).map(|_| next() % 4).collect())
            .collect();
        let docs: Vec<DocFp> = (0..500)
            .map(|_| {
                let id = next() % 100_000;
                (id, doc(id, signatures[(next() % 20) as usize].clone()))
            })
            .collect::<BTreeMap<u64, DocFp>>()
            .into_values()
            .collect();
        let mut groups: BTreeMap<Vec<u64>, Vec<u64>> = BTreeMap::new();
        for d in &docs {
            groups.entry(d.bands.clone()).or_default().push(d.doc_id);
        }
        let mut want_reps = Vec::new();
        let mut want_edges = Vec::new();
        for ids in groups.values_mut() {
            ids.sort_unstable();
            want_reps.push(ids[0]);
            want_edges.extend(ids[1..].iter().map(|&b| (ids[0], b)));
        }
        let (mut reps, mut edges) = (Vec::new(), Vec::new());
        let members = fold(docs, |r| reps.push(r.doc_id), |e| edges.push((e.a, e.b)));
        reps.sort_unstable();
        want_reps.sort_unstable();
        edges.sort_unstable();
        want_edges.sort_unstable();
        assert_eq!(reps, want_reps);
        assert_eq!(edges, want_edges);
        assert_eq!(members, want_edges.len() as u64);
    }
}
