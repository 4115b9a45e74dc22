//! Exact duplicates: documents with the same normalized token stream meet on one worker
//! (exchanged by their 128-bit key), and each group is folded to its smallest `doc_id`.
//!
//! The simple version would send every copy into the near-duplicate search, where N copies
//! make N(N-1)/2 pairs and one giant bucket. Instead the group's other members are linked
//! to the representative by `exact` edges (N - 1 of them), and only the representative goes
//! on to the tables. Empty documents are neither: they are counted and never matched.

use std::rc::Rc;

use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::vec::{Map, Partition};
use timely::dataflow::StreamVec;

use crate::records::{DocFp, Edge, EdgeKind};
use crate::worker::WorkerCtx;

#[derive(Clone, Debug)]
enum Folded {
    Representative(DocFp),
    Duplicate(Edge),
}

/// Splits documents into group representatives (and documents without duplicates), and
/// exact edges from every other member to its representative.
pub fn fold_exact<'s>(
    docs: StreamVec<'s, u64, DocFp>,
    ctx: Rc<WorkerCtx>,
) -> (StreamVec<'s, u64, DocFp>, StreamVec<'s, u64, Edge>) {
    let folded = docs.unary_frontier(
        Exchange::new(ctx.meter("exact", |d: &DocFp| exact_route(d))),
        "FoldExact",
        move |cap, _| {
            let mut cap = Some(cap);
            let mut docs: Vec<DocFp> = Vec::new();
            move |(input, frontier), output| {
                input.for_each(|time, data| {
                    // A document without a key (exact folding off, or fingerprint input) has
                    // no group to wait for: it goes on at once instead of being held.
                    let mut session = output.session(&time);
                    for doc in data.drain(..).filter(|d| !d.empty) {
                        if doc.exact_key == 0 {
                            session.give(Folded::Representative(doc));
                        } else {
                            docs.push(doc);
                        }
                    }
                });
                if frontier.is_empty() {
                    if let Some(cap) = cap.take() {
                        let mut session = output.session(&cap);
                        let folded = fold(std::mem::take(&mut docs), &ctx);
                        session.give_iterator(folded.into_iter());
                        ctx.stage_done("exact");
                        ctx.shared.progress.reach(crate::progress::Stage::Searching);
                    }
                }
            }
        },
    );
    let mut parts = folded.partition(2, |f| match f {
        Folded::Representative(_) => (0, f),
        Folded::Duplicate(_) => (1, f),
    });
    let edges = parts.pop().expect("two parts").flat_map(|f| match f {
        Folded::Duplicate(e) => Some(e),
        Folded::Representative(_) => None,
    });
    let reps = parts.pop().expect("two parts").flat_map(|f| match f {
        Folded::Representative(d) => Some(d),
        Folded::Duplicate(_) => None,
    });
    (reps, edges)
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
fn fold(mut docs: Vec<DocFp>, ctx: &WorkerCtx) -> Vec<Folded> {
    docs.sort_unstable_by_key(|d| (d.exact_key, d.doc_id));
    let mut out = Vec::with_capacity(docs.len());
    let verified = ctx.shared.config.verify.is_some();
    let mut report = ctx.report.borrow_mut();
    for group in docs.chunk_by(|a, b| a.exact_key == b.exact_key && a.exact_key != 0) {
        let rep = &group[0];
        out.push(Folded::Representative(rep.clone()));
        if group.len() > 1 {
            report.exact_groups += 1;
            report.exact_duplicates += group.len() as u64 - 1;
            for member in &group[1..] {
                let hamming = neardup_core::hamming(rep.simhash, member.simhash);
                let mut edge = Edge::new(
                    (rep.doc_id, rep.rank),
                    (member.doc_id, member.rank),
                    hamming,
                    EdgeKind::Exact,
                );
                // Identical token streams have identical shingle sets.
                edge.jaccard = verified.then_some(1.0);
                out.push(Folded::Duplicate(edge));
            }
        }
    }
    out
}
