//! URL duplicates: documents fetched from the same normalized URL (`--url-normalize`, see
//! [`neardup_core::urlnorm`]) are captures of one page, whatever their content, and are
//! paired with kind `url`; and the count of content pairs that cross hosts.
//!
//! As for exact duplicates, documents are exchanged by a key, here xxh3-128 of the
//! normalized URL (its low word routes: xxh3 output is well mixed, and stable across
//! processes and runs, unlike FxHash of a string), so that all captures of one URL meet on
//! one worker. Each group is folded onto its smallest `doc_id`: N captures make N - 1 `url`
//! edges rather than N(N-1)/2. The edges join the exact and near ones, so captures of a page
//! end in one cluster, and the keep policy (`--keep newest` by default when capture times
//! are known) picks the capture that stays. Empty documents (no tokens: failed fetches,
//! revisit records) are never paired by URL, so that an empty recapture cannot replace a
//! page's text.
//!
//! Cross-host pairs: a pair only names its two documents, and a document's host is known
//! at its home worker. Each content pair (exact or near) therefore goes to the home of its
//! first document, picks up that document's host hash, goes on to the home of its second,
//! and is counted there if both hosts are known and differ. Two exchanges of 24 bytes per
//! pair; no host string travels.

use fxhash::FxHashMap as HashMap;
use std::rc::Rc;

use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::vec::Map;
use timely::dataflow::StreamVec;

use crate::operators::collect::Give;
use crate::operators::CollectComplete;
use crate::records::{DocFp, Edge, EdgeKind};
use crate::worker::WorkerCtx;

/// `url` edges from every capture of a normalized URL to the first capture (smallest
/// `doc_id`) of that URL.
pub fn link_urls<'s>(
    docs: StreamVec<'s, u64, DocFp>,
    ctx: Rc<WorkerCtx>,
) -> StreamVec<'s, u64, Edge> {
    // Only what the grouping needs travels, and only for documents with a URL:
    // `(normalized URL key, doc_id, rank)`, 32 bytes.
    docs.flat_map(|d| {
        d.url_key
            .filter(|_| !d.empty)
            .map(|k| (k, d.doc_id, d.rank))
    })
    .collect_complete(
        Exchange::new(ctx.meter("urls", |&(k, _, _): &(u128, u64, u64)| k as u64)),
        "LinkUrls",
        Vec::new(),
        |seen, data| seen.append(data),
        move |seen, session| {
            session.give_iterator(link(seen).into_iter());
            ctx.stage_done("urls");
        },
    )
}

/// `(url key, doc_id, rank)` -> an edge from each capture to the first of its URL.
fn link(mut seen: Vec<(u128, u64, u64)>) -> Vec<Edge> {
    seen.sort_unstable();
    let mut edges = Vec::new();
    for group in seen.chunk_by(|a, b| a.0 == b.0) {
        let (_, first, rank) = group[0];
        for &(_, doc, doc_rank) in &group[1..] {
            edges.push(Edge::new((first, rank), (doc, doc_rank), 0, EdgeKind::Url));
        }
    }
    edges
}

/// Counts the content pairs (exact, near) whose documents have known, different hosts,
/// into the report's `cross_host_pairs` (see the module docs).
pub fn count_cross_host<'s>(
    docs: StreamVec<'s, u64, DocFp>,
    edges: StreamVec<'s, u64, Edge>,
    ctx: Rc<WorkerCtx>,
) {
    let home = ctx.home.clone();
    // At the home of `a`: (b, host of a).
    let halfway = docs.clone().collect_complete_with(
        edges,
        Pipeline,
        Exchange::new(ctx.meter("urls", move |e: &Edge| home.route(e.a))),
        "CrossHostA",
        Hosts::default(),
        |hosts, data| hosts.add_docs(data),
        |hosts, data: &mut Vec<Edge>| {
            hosts.pending.extend(
                data.iter()
                    .filter(|e| e.kind != EdgeKind::Url)
                    .map(|e| (e.a, e.b)),
            )
        },
        |Hosts { hosts, pending }, session| {
            let out = pending
                .into_iter()
                .filter_map(|(a, b)| hosts.get(&a).map(|&h| (b, h)));
            session.give_iterator(out);
        },
    );
    let home = ctx.home.clone();
    docs.collect_complete_with(
        halfway,
        Pipeline,
        Exchange::new(ctx.meter("urls", move |(b, _): &(u64, u64)| home.route(*b))),
        "CrossHostB",
        Hosts::default(),
        |hosts, data| hosts.add_docs(data),
        |hosts, data| hosts.pending.append(data),
        move |Hosts { hosts, pending }, _: &mut Give<'_, '_, u64, ()>| {
            let crossing = pending
                .iter()
                .filter(|(b, host_a)| hosts.get(b).is_some_and(|h| h != host_a))
                .count();
            ctx.report.borrow_mut().cross_host_pairs += crossing as u64;
        },
    );
}

/// What each half of [`count_cross_host`] holds at a home worker: the host hash of each
/// document whose home it is, and the pairs waiting for a host there (`(a, b)` at the
/// home of `a`, then `(b, host of a)` at the home of `b`).
#[derive(Default)]
struct Hosts {
    hosts: HashMap<u64, u64>,
    pending: Vec<(u64, u64)>,
}

impl Hosts {
    fn add_docs(&mut self, docs: &[DocFp]) {
        self.hosts.extend(
            docs.iter()
                .filter_map(|d| d.host_hash.map(|h| (d.doc_id, h))),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_capture_links_to_the_first_of_its_url() {
        let edges = link(vec![
            (7, 30, 1),
            (7, 12, 2),
            (7, 5, 3),
            (9, 40, 4), // seen once: no edge
            (11, 50, 5),
            (11, 8, 6),
        ]);
        let got: Vec<(u64, u64, u64, u64)> = edges
            .iter()
            .map(|e| (e.a, e.b, e.rank_a, e.rank_b))
            .collect();
        assert_eq!(got, [(5, 12, 3, 2), (5, 30, 3, 1), (8, 50, 6, 5)]);
        assert!(edges
            .iter()
            .all(|e| e.kind == EdgeKind::Url && e.hamming == 0));
    }
}
