//! Revisits: a WARC `revisit` record says "this capture's payload is identical to an earlier
//! one", naming the payload's digest (`WARC-Payload-Digest`, profile
//! `identical-payload-digest`) instead of repeating it. It is an exact duplicate of that
//! capture, and is reported as one when the capture is in the input.
//!
//! The simple version would look each revisit's digest up in a table of every response's
//! digest. Here, as for exact duplicates, documents carrying a digest are exchanged by it, so
//! that a revisit meets the captures with its digest on one worker; each revisit is linked
//! by an `exact` edge to the capture with the smallest `doc_id`. A revisit whose capture is
//! not in the input stays a document of its own (with no text).

use std::rc::Rc;

use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::vec::Filter;
use timely::dataflow::StreamVec;

use crate::operators::CollectComplete;
use crate::records::{DocFp, Edge, EdgeKind};
use crate::worker::WorkerCtx;

/// Exact edges from every revisit to the capture whose payload it repeats.
pub fn link_revisits<'s>(
    docs: StreamVec<'s, u64, DocFp>,
    ctx: Rc<WorkerCtx>,
) -> StreamVec<'s, u64, Edge> {
    // Only documents with a payload digest take part (archive records): the others would
    // all travel to one worker for nothing.
    docs.filter(|d| d.digest.is_some()).collect_complete(
        // xxh3-128 of the digest text: its low word is a fine route.
        Exchange::new(ctx.meter("revisits", |d: &DocFp| {
            d.digest.map_or(0, |(key, _)| key as u64)
        })),
        "LinkRevisits",
        Vec::new(),
        |seen, data| {
            seen.extend(
                data.drain(..)
                    .filter_map(|d| d.digest.map(|(k, r)| (k, r, d.doc_id, d.rank))),
            );
        },
        move |seen, session| {
            let edges = link(seen);
            ctx.report.borrow_mut().revisits_linked += edges.len() as u64;
            session.give_iterator(edges.into_iter());
        },
    )
}

/// `(digest, is_revisit, doc_id, rank)` -> edges from each revisit to the first capture.
fn link(mut seen: Vec<(u128, bool, u64, u64)>) -> Vec<Edge> {
    // Captures (false) before revisits (true) within a digest, each by doc_id.
    seen.sort_unstable();
    let mut edges = Vec::new();
    for group in seen.chunk_by(|a, b| a.0 == b.0) {
        let Some(&(_, false, capture, rank)) = group.first() else {
            continue;
        };
        for &(_, revisit, doc, doc_rank) in group {
            if revisit {
                edges.push(Edge::new(
                    (capture, rank),
                    (doc, doc_rank),
                    0,
                    EdgeKind::Exact,
                ));
            }
        }
    }
    edges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_revisit_links_to_the_first_capture_of_its_digest() {
        let edges = link(vec![
            (7, true, 30, 0),
            (7, false, 12, 0),
            (7, false, 5, 0),
            (7, true, 2, 0),
            (9, true, 40, 0), // its capture is not in the input
            (11, false, 50, 0),
        ]);
        let got: Vec<(u64, u64)> = edges.iter().map(|e| (e.a, e.b)).collect();
        assert_eq!(got, [(2, 5), (5, 30)]);
        assert!(edges
            .iter()
            .all(|e| e.kind == EdgeKind::Exact && e.hamming == 0));
    }
}
