//! Pairs: every edge found (exact, near, verified) is written to this worker's part of
//! `pairs/`, sorted by `(doc_a, doc_b)`, and passed on unchanged to the cluster stage.

use std::rc::Rc;

use neardup_io::parquet_out::{PairKind, PairRow, PartWriter};
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::StreamVec;

use crate::output::{OutputDirs, Table};
use crate::records::{Edge, EdgeKind};
use crate::worker::WorkerCtx;

/// Writes this worker's pairs part and passes the edges on.
pub fn write_pairs<'s>(
    edges: StreamVec<'s, u64, Edge>,
    ctx: Rc<WorkerCtx>,
) -> StreamVec<'s, u64, Edge> {
    edges.unary_frontier(Pipeline, "WritePairs", move |_, _| {
        let dir = OutputDirs::new(&ctx.shared.config.output).table(Table::Pairs);
        let meta = crate::output::search_meta(&ctx.shared.config);
        let mut writer = match PartWriter::<PairRow>::create(&dir, ctx.part(), &meta) {
            Ok(w) => Some(w),
            Err(e) => {
                ctx.fail(e.to_string());
                None
            }
        };
        let mut buffered: Vec<PairRow> = Vec::new();
        move |(input, frontier), output| {
            input.for_each(|cap, data| {
                for edge in data.iter() {
                    let kind = match edge.kind {
                        EdgeKind::Exact => PairKind::Exact,
                        EdgeKind::Near | EdgeKind::SameFingerprint => PairKind::Near,
                        EdgeKind::Url => PairKind::Url,
                    };
                    buffered.push(PairRow {
                        doc_a: edge.a,
                        doc_b: edge.b,
                        hamming: edge.hamming,
                        kind,
                        jaccard: edge.jaccard,
                    });
                }
                {
                    let mut report = ctx.report.borrow_mut();
                    report.exact_pairs +=
                        data.iter().filter(|e| e.kind == EdgeKind::Exact).count() as u64;
                    report.url_pairs +=
                        data.iter().filter(|e| e.kind == EdgeKind::Url).count() as u64;
                }
                output.session(&cap).give_container(data);
            });
            if frontier.is_empty() {
                if let Some(mut w) = writer.take() {
                    // Sorted parts read nicely and compress better.
                    buffered.sort_unstable_by_key(|p| (p.doc_a, p.doc_b));
                    // Taken, so the rows are freed before the clustering that follows.
                    let written = std::mem::take(&mut buffered)
                        .into_iter()
                        .try_for_each(|row| w.push(row))
                        .and_then(|_| w.commit());
                    match written {
                        Ok(path) => ctx
                            .report
                            .borrow_mut()
                            .parts
                            .push(path.display().to_string()),
                        Err(e) => ctx.fail(e.to_string()),
                    }
                }
            }
        }
    })
}
