//! MinHash mode: documents with identical signatures are folded before the bands, as the
//! simhash search folds equal fingerprints inside its buckets
//! ([`neardup_core::search::fold_identical`]).
//!
//! The simple version enters every signature in the bands, where `n` documents sharing one
//! signature (equal shingle sets under different exact keys) share every band and make
//! `n(n-1)/2` candidates per band. Instead they meet on one worker (exchanged by a hash of
//! their band keys), the smallest `doc_id` goes on to the bands, and every other member
//! becomes one candidate pair with it, verified like any other: an identical signature is
//! an estimate, not proof that the Jaccard similarity reaches `--min-jaccard`. The
//! representative's candidates stand for the group.

use std::rc::Rc;

use neardup_core::mix::mix2;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::StreamVec;

use crate::operators::CollectComplete;
use crate::records::{DocFp, Edge, EdgeKind};
use crate::worker::WorkerCtx;

/// Splits representatives into one per distinct signature (band keys), which go on to the
/// bands, and candidate pairs linking every other document of a signature to it.
pub fn fold_signatures<'s>(
    docs: StreamVec<'s, u64, DocFp>,
    ctx: Rc<WorkerCtx>,
) -> (StreamVec<'s, u64, DocFp>, StreamVec<'s, u64, Edge>) {
    docs.collect_complete_split(
        Exchange::new(ctx.meter("signatures", |d: &DocFp| signature_route(&d.bands))),
        "FoldSignatures",
        Vec::new(),
        |docs, data, _| docs.append(data),
        move |docs, reps, edges| {
            let members = fold(docs, |rep| reps.give(rep), |edge| edges.give(edge));
            ctx.report.borrow_mut().candidates += members;
        },
    )
}

/// Equal signatures meet on one worker.
fn signature_route(bands: &[u64]) -> u64 {
    bands.iter().fold(0, |h, &b| mix2(h, b))
}

/// Groups by signature: each group's smallest `doc_id` goes to `rep`, an edge from it to
/// every other member to `edge`. Returns the number of edges.
fn fold(mut docs: Vec<DocFp>, mut rep: impl FnMut(DocFp), mut edge: impl FnMut(Edge)) -> u64 {
    docs.sort_unstable_by(|a, b| a.bands.cmp(&b.bands).then(a.doc_id.cmp(&b.doc_id)));
    let mut members = 0;
    let mut docs = docs.into_iter().peekable();
    while let Some(first) = docs.next() {
        while let Some(member) = docs.next_if(|d| d.bands == first.bands) {
            members += 1;
            // A plain near pair, not a unit for --cluster star (as equal simhashes are): an
            // equal signature does not prove the members equally similar to everything, so
            // a star holds only documents with a verified pair to its kept document.
            edge(Edge::new(
                (first.doc_id, first.rank),
                (member.doc_id, member.rank),
                0,
                EdgeKind::Near,
            ));
        }
        rep(first);
    }
    members
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
}
