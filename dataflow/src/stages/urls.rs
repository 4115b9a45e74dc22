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
//!
//! Memory: each grouping is an external sort ([`SortComplete`]) within
//! [`WEB_SORT_SHARE`] of the worker's part of `--memory-limit`, with sorted runs on disk
//! beyond it (about 40 bytes a document with a URL, 30 a document with a host and a pair),
//! so the stage holds no state that grows with the corpus.

use std::rc::Rc;

use neardup_io::spill::SpillRecord;
use serde::{Deserialize, Serialize};
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::vec::Map;
use timely::dataflow::operators::Concat;
use timely::dataflow::StreamVec;

use crate::config::WEB_SORT_SHARE;
use crate::operators::collect::Give;
use crate::operators::sort::ordered_by;
use crate::operators::SortComplete;
use crate::records::{DocFp, Edge, EdgeKind};
use crate::worker::WorkerCtx;

/// `url` edges from every capture of a normalized URL to the first capture (smallest
/// `doc_id`) of that URL.
///
/// The simple version collects each worker's `(URL key, doc_id, rank)` in a `Vec`, sorts
/// it and links each group to its first (`link` in the tests). Here the same records go
/// into an external sort within [`WEB_SORT_SHARE`] of the worker's part of
/// `--memory-limit`, and `FirstCapture` links them as the merge walks the groups.
pub fn link_urls<'s>(
    docs: StreamVec<'s, u64, DocFp>,
    ctx: Rc<WorkerCtx>,
) -> StreamVec<'s, u64, Edge> {
    let (end_ctx, fail_ctx) = (ctx.clone(), ctx.clone());
    // Only what the grouping needs travels, and only for documents with a URL:
    // `(normalized URL key, doc_id, rank)`, 32 bytes.
    docs.flat_map(|d| {
        d.url_key
            .filter(|_| !d.empty)
            .map(|k| (k, d.doc_id, d.rank))
    })
    .sort_complete_split::<(u128, u64, u64), Edge, (), _, _>(
        Exchange::new(ctx.meter("urls", |&(k, _, _): &(u128, u64, u64)| k as u64)),
        "LinkUrls",
        ctx.sort("urls", WEB_SORT_SHARE),
        FirstCapture::default(),
        |_, _| {},
        |first, capture, out, _| {
            if let Some(edge) = first.next(capture) {
                out.give(edge);
            }
        },
        move |_, stats, _, _| {
            end_ctx.sorted("urls", stats);
            end_ctx.stage_done("urls");
        },
        move |e| fail_ctx.sort_failed("urls", e),
    )
    .0
}

/// The walk of [`link_urls`]: fed `(URL key, doc_id, rank)` in sorted order, it links each
/// capture to the first of its URL.
#[derive(Default)]
struct FirstCapture {
    first: Option<(u128, u64, u64)>,
}

impl FirstCapture {
    fn next(&mut self, (key, doc, rank): (u128, u64, u64)) -> Option<Edge> {
        match self.first {
            Some((k, first, first_rank)) if k == key => Some(Edge::new(
                (first, first_rank),
                (doc, rank),
                0,
                EdgeKind::Url,
            )),
            _ => {
                self.first = Some((key, doc, rank));
                None
            }
        }
    }
}

/// A document's host at its home, or a pair waiting there for it: sorted by document, the
/// host first. At the home of a pair's `a`, `Waiting { doc: a, other: b }`; at the home of
/// its `b`, `Waiting { doc: b, other: host of a }`.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum HostOf {
    Doc { doc: u64, host: u64 },
    Waiting { doc: u64, other: u64 },
}

impl HostOf {
    fn key(&self) -> (u64, u8, u64) {
        match *self {
            HostOf::Doc { doc, host } => (doc, 0, host),
            HostOf::Waiting { doc, other } => (doc, 1, other),
        }
    }
}

ordered_by!(HostOf, |r| r.key());
impl SpillRecord for HostOf {}

/// Counts the content pairs (exact, near) whose documents have known, different hosts,
/// into the report's `cross_host_pairs` (see the module docs).
///
/// The simple version keeps a hash map of every home document's host and looks each pair
/// up in it. Here the hosts and the pairs meet in an external sort by document at each
/// hop (`HostOf`, [`WEB_SORT_SHARE`] of the worker's part of the limit each), and the
/// walk remembers only the host of the document it is at.
pub fn count_cross_host<'s>(
    docs: StreamVec<'s, u64, DocFp>,
    edges: StreamVec<'s, u64, Edge>,
    ctx: Rc<WorkerCtx>,
) {
    let hosts = docs.flat_map(|d| {
        d.host_hash.map(|host| HostOf::Doc {
            doc: d.doc_id,
            host,
        })
    });
    let at_a = edges.flat_map(|e| {
        (e.kind != EdgeKind::Url).then_some(HostOf::Waiting {
            doc: e.a,
            other: e.b,
        })
    });
    // At the home of `a`: (b, host of a), on to the home of `b`.
    let halfway = hop(
        hosts.clone().concat(at_a),
        "hosts at a",
        &ctx,
        |_, b, host_a, out| {
            out.give(HostOf::Waiting {
                doc: b,
                other: host_a,
            })
        },
        |_| {},
    );
    // At the home of `b`: counted where its host differs.
    let report = ctx.clone();
    hop(
        hosts.concat(halfway),
        "hosts at b",
        &ctx,
        |crossing, host_a, host_b, _| *crossing += u64::from(host_a != host_b),
        move |crossing| report.report.borrow_mut().cross_host_pairs += crossing,
    );
}

/// One hop of [`count_cross_host`]: `records` sorted at their document's home, and
/// `each(count, other, host)` called for each pair waiting at a document whose host is
/// known; `end` gets the count.
fn hop<'s>(
    records: StreamVec<'s, u64, HostOf>,
    name: &'static str,
    ctx: &Rc<WorkerCtx>,
    mut each: impl FnMut(&mut u64, u64, u64, &mut Give<'_, '_, u64, HostOf>) + 'static,
    end: impl FnOnce(u64) + 'static,
) -> StreamVec<'s, u64, HostOf> {
    let home = ctx.home.clone();
    let (end_ctx, fail_ctx) = (ctx.clone(), ctx.clone());
    records
        .sort_complete_split::<HostOf, HostOf, (), _, _>(
            Exchange::new(ctx.meter("urls", move |r: &HostOf| home.route(r.key().0))),
            name,
            ctx.sort(name, WEB_SORT_SHARE),
            (None::<(u64, u64)>, 0u64),
            |_, _| {},
            move |(at, count), record, out, _| match record {
                HostOf::Doc { doc, host } => *at = Some((doc, host)),
                HostOf::Waiting { doc, other } => {
                    if let Some((_, host)) = at.filter(|&(d, _)| d == doc) {
                        each(count, other, host, out);
                    }
                }
            },
            move |(_, count), stats, _, _| {
                end_ctx.sorted(name, stats);
                end(count);
            },
            move |e| fail_ctx.sort_failed(name, e),
        )
        .0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The simple version: `(url key, doc_id, rank)` -> an edge from each capture to the
    /// first of its URL.
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

    fn walk(mut seen: Vec<(u128, u64, u64)>) -> Vec<Edge> {
        seen.sort_unstable();
        let mut first = FirstCapture::default();
        seen.into_iter().filter_map(|c| first.next(c)).collect()
    }

    fn ends(edges: &[Edge]) -> Vec<(u64, u64, u64, u64)> {
        edges
            .iter()
            .map(|e| (e.a, e.b, e.rank_a, e.rank_b))
            .collect()
    }

    #[test]
    fn each_capture_links_to_the_first_of_its_url() {
        let seen = vec![
            (7, 30, 1),
            (7, 12, 2),
            (7, 5, 3),
            (9, 40, 4), // seen once: no edge
            (11, 50, 5),
            (11, 8, 6),
        ];
        let edges = walk(seen.clone());
        assert_eq!(ends(&edges), [(5, 12, 3, 2), (5, 30, 3, 1), (8, 50, 6, 5)]);
        assert!(edges
            .iter()
            .all(|e| e.kind == EdgeKind::Url && e.hamming == 0));
        assert_eq!(ends(&link(seen)), ends(&edges));
    }

    #[test]
    fn the_walk_links_as_the_simple_version_does() {
        let mut state = 11u64;
        for round in 0..40 {
            let seen: Vec<(u128, u64, u64)> = (0..round * 5)
                .map(|_| {
                    let key = neardup_core::mix::splitmix64(&mut state) % 9;
                    let doc = neardup_core::mix::splitmix64(&mut state) % 1000;
                    (key as u128, doc, doc * 7 % 13)
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
