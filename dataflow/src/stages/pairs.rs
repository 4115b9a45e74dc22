//! Pairs: every edge found (exact, near, verified) is written to this worker's part of
//! `pairs/`, sorted by `(doc_a, doc_b)`, and passed on unchanged to the cluster stage.

use std::rc::Rc;

use neardup_io::parquet_out::{PairKind, PairRow};
use neardup_io::spill::SpillRecord;
use serde::{Deserialize, Serialize};
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::StreamVec;

use crate::config::PAIRS_SORT_SHARE;
use crate::operators::sort::ordered_by;
use crate::operators::SortComplete;
use crate::output::{Part, Table};
use crate::records::{Edge, EdgeKind};
use crate::worker::WorkerCtx;

/// Writes this worker's pairs part and passes the edges on at once.
///
/// The simple version buffers the part's rows in a `Vec` and sorts it once the edges are
/// complete; here they go through an external sort ([`SortComplete`], within
/// [`PAIRS_SORT_SHARE`] of the worker's part of `--memory-limit`) and are written as its
/// merge walks them.
pub fn write_pairs<'s>(
    edges: StreamVec<'s, u64, Edge>,
    ctx: Rc<WorkerCtx>,
) -> StreamVec<'s, u64, Edge> {
    let part = Part::<PairRow>::create(&ctx, Table::Pairs);
    let (count_ctx, each_ctx, end_ctx, fail_ctx) =
        (ctx.clone(), ctx.clone(), ctx.clone(), ctx.clone());
    let (edges, _) = edges.sort_complete_split::<ByPair, Edge, (), _, _>(
        Pipeline,
        "WritePairs",
        ctx.sort::<ByPair>("pairs", PAIRS_SORT_SHARE),
        part,
        move |data, out| {
            let mut report = count_ctx.report.borrow_mut();
            report.exact_pairs += data.iter().filter(|e| e.kind == EdgeKind::Exact).count() as u64;
            report.url_pairs += data.iter().filter(|e| e.kind == EdgeKind::Url).count() as u64;
            out.give_iterator(data.iter().copied());
        },
        move |part, ByPair(row), _, _| part.push(&each_ctx, row),
        move |part, stats, _, _| {
            end_ctx.sorted("pairs", stats);
            part.commit(&end_ctx);
        },
        move |e| fail_ctx.sort_failed("pairs", e),
    );
    edges
}

/// A row of the pairs table in the part's order: by `(doc_a, doc_b)` (then kind, so that
/// the order never depends on arrival).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ByPair(pub PairRow);

impl ByPair {
    fn key(&self) -> (u64, u64, u8) {
        let kind = match self.0.kind {
            PairKind::Exact => 0,
            PairKind::Near => 1,
            PairKind::Url => 2,
        };
        (self.0.doc_a, self.0.doc_b, kind)
    }
}

ordered_by!(ByPair, |p| p.key());
impl SpillRecord for ByPair {}

impl From<Edge> for ByPair {
    fn from(edge: Edge) -> Self {
        let kind = match edge.kind {
            EdgeKind::Exact => PairKind::Exact,
            EdgeKind::Near | EdgeKind::SameFingerprint => PairKind::Near,
            EdgeKind::Url => PairKind::Url,
        };
        ByPair(PairRow {
            doc_a: edge.a,
            doc_b: edge.b,
            hamming: edge.hamming,
            kind,
            jaccard: edge.jaccard,
        })
    }
}
