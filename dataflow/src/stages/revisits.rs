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
use timely::dataflow::operators::vec::Map;
use timely::dataflow::StreamVec;

use crate::config::WEB_SORT_SHARE;
use crate::operators::SortComplete;
use crate::records::{DocFp, Edge, EdgeKind};
use crate::worker::WorkerCtx;

/// Exact edges from every revisit to the capture whose payload it repeats.
///
/// The simple version collects each worker's `(digest, is_revisit, doc_id, rank)` in a
/// `Vec`, sorts it and links each group's revisits to its first capture (`link` in the
/// tests). Here the records go into an external sort within [`WEB_SORT_SHARE`] of the
/// worker's part of `--memory-limit`, and `FirstOfDigest` links them as the merge walks.
pub fn link_revisits<'s>(
    docs: StreamVec<'s, u64, DocFp>,
    ctx: Rc<WorkerCtx>,
) -> StreamVec<'s, u64, Edge> {
    let (end_ctx, fail_ctx) = (ctx.clone(), ctx.clone());
    // Only documents with a payload digest take part (archive records): the others would
    // all travel to one worker for nothing.
    docs.flat_map(|d| d.digest.map(|(k, r)| (k, r, d.doc_id, d.rank)))
        .sort_complete_split::<(u128, bool, u64, u64), Edge, (), _, _>(
            // xxh3-128 of the digest text: its low word is a fine route.
            Exchange::new(ctx.meter("revisits", |r: &(u128, bool, u64, u64)| r.0 as u64)),
            "LinkRevisits",
            ctx.sort("revisits", WEB_SORT_SHARE),
            (FirstOfDigest::default(), 0u64),
            |_, _| {},
            |(first, linked), record, out, _| {
                if let Some(edge) = first.next(record) {
                    *linked += 1;
                    out.give(edge);
                }
            },
            move |(_, linked), stats, _, _| {
                end_ctx.sorted("revisits", stats);
                end_ctx.report.borrow_mut().revisits_linked += linked;
            },
            move |e| fail_ctx.sort_failed("revisits", e),
        )
        .0
}

/// The walk of [`link_revisits`]: fed `(digest, is_revisit, doc_id, rank)` in sorted order
/// (within a digest, its captures before its revisits, each by `doc_id`), it links each
/// revisit to the digest's first capture, if the digest has one.
#[derive(Default)]
struct FirstOfDigest {
    group: Option<(u128, Option<(u64, u64)>)>,
}

impl FirstOfDigest {
    fn next(&mut self, (digest, revisit, doc, rank): (u128, bool, u64, u64)) -> Option<Edge> {
        if self.group.is_none_or(|(d, _)| d != digest) {
            self.group = Some((digest, (!revisit).then_some((doc, rank))));
        }
        let (_, capture) = self.group?;
        capture
            .filter(|_| revisit)
            .map(|capture| Edge::new(capture, (doc, rank), 0, EdgeKind::Exact))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The simple version: `(digest, is_revisit, doc_id, rank)` -> edges from each revisit
    /// to the first capture.
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

    fn walk(mut seen: Vec<(u128, bool, u64, u64)>) -> Vec<Edge> {
        seen.sort_unstable();
        let mut first = FirstOfDigest::default();
        seen.into_iter().filter_map(|r| first.next(r)).collect()
    }

    fn ends(edges: &[Edge]) -> Vec<(u64, u64, u64, u64)> {
        edges
            .iter()
            .map(|e| (e.a, e.b, e.rank_a, e.rank_b))
            .collect()
    }

    #[test]
    fn each_revisit_links_to_the_first_capture_of_its_digest() {
        let seen = vec![
            (7, true, 30, 0),
            (7, false, 12, 0),
            (7, false, 5, 0),
            (7, true, 2, 0),
            (9, true, 40, 0), // its capture is not in the input
            (11, false, 50, 0),
        ];
        let edges = walk(seen.clone());
        let got: Vec<(u64, u64)> = edges.iter().map(|e| (e.a, e.b)).collect();
        assert_eq!(got, [(2, 5), (5, 30)]);
        assert!(edges
            .iter()
            .all(|e| e.kind == EdgeKind::Exact && e.hamming == 0));
        assert_eq!(ends(&edges), ends(&link(seen)));
    }

    #[test]
    fn the_walk_links_as_the_simple_version_does() {
        let mut state = 3u64;
        for round in 0..40 {
            let seen: Vec<(u128, bool, u64, u64)> = (0..round * 5)
                .map(|_| {
                    let mut next = || neardup_core::mix::splitmix64(&mut state);
                    let (digest, revisit, doc) = (next() % 7, next() % 3 == 0, next() % 500);
                    (digest as u128, revisit, doc, doc % 11)
                })
                .collect();
            assert_eq!(
                ends(&walk(seen.clone())),
                ends(&link(seen)),
                "round {round}"
            );
        }
    }
}
