//! Exact duplicates: documents with the same normalized token stream meet on one worker
//! (exchanged by their 128-bit key), and each group is folded to its smallest `doc_id`.
//!
//! The simple version would send every copy into the near-duplicate search, where N copies
//! make N(N-1)/2 pairs and one giant bucket. Instead the group's other members are linked
//! to the representative by `exact` edges (N - 1 of them), and only the representative goes
//! on to the tables. Empty documents are neither: they are counted and never matched.

use std::rc::Rc;

use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::StreamVec;

use crate::operators::CollectComplete;
use crate::records::{DocFp, Edge, EdgeKind};
use crate::worker::WorkerCtx;

/// Splits documents into group representatives (and documents without duplicates), and
/// exact edges from every other member to its representative.
///
/// One operator with two outputs. The simple way, one output of "representative or edge"
/// split by timely's `partition` and two `flat_map`s, copied each record four more times
/// on its way to the tables (with `split_docs`, a 2M-fingerprint search took 0.90x the time
/// without them).
pub fn fold_exact<'s>(
    docs: StreamVec<'s, u64, DocFp>,
    ctx: Rc<WorkerCtx>,
) -> (StreamVec<'s, u64, DocFp>, StreamVec<'s, u64, Edge>) {
    docs.collect_complete_split(
        Exchange::new(ctx.meter("exact", |d: &DocFp| exact_route(d))),
        "FoldExact",
        Vec::new(),
        |docs, data, reps| {
            // A document without a key (exact folding off, or fingerprint input) has no
            // group to wait for: it goes on at once instead of being held.
            for doc in data.drain(..).filter(|d| !d.empty) {
                if doc.exact_key == 0 {
                    reps.give(doc);
                } else {
                    docs.push(doc);
                }
            }
        },
        move |docs, reps, edges| {
            fold(docs, &ctx, |rep| reps.give(rep), |edge| edges.give(edge));
            ctx.stage_done("exact");
            ctx.shared.progress.reach(crate::progress::Stage::Searching);
        },
    )
}

/// Documents with the same key meet; documents without a key (0) are spread by number.
fn exact_route(doc: &DocFp) -> u64 {
    match doc.exact_key {
        0 => neardup_core::mix::mix64(doc.doc_id),
        // xxh3-128 output is well mixed already: its low word is a fine route.
        key => key as u64,
    }
}

/// Groups by exact key; a key of 0 means "no key" (exact folding off, or fingerprint input).
/// Each group's representative (its smallest `doc_id`) goes to `rep`, an edge from it to
/// every other member to `edge`.
fn fold(
    mut docs: Vec<DocFp>,
    ctx: &WorkerCtx,
    mut rep: impl FnMut(DocFp),
    mut edge: impl FnMut(Edge),
) {
    docs.sort_unstable_by_key(|d| (d.exact_key, d.doc_id));
    let verified = ctx.shared.config.verify.is_some();
    let mut report = ctx.report.borrow_mut();
    let mut docs = docs.into_iter().peekable();
    while let Some(first) = docs.next() {
        let key = first.exact_key;
        let mut members = 0u64;
        while let Some(member) = docs.next_if(|d| key != 0 && d.exact_key == key) {
            members += 1;
            let hamming = neardup_core::hamming(first.simhash, member.simhash);
            let mut e = Edge::new(
                (first.doc_id, first.rank),
                (member.doc_id, member.rank),
                hamming,
                EdgeKind::Exact,
            );
            // Identical token streams have identical shingle sets.
            e.jaccard = verified.then_some(1.0);
            edge(e);
        }
        if members > 0 {
            report.exact_groups += 1;
            report.exact_duplicates += members;
        }
        rep(first);
    }
}
