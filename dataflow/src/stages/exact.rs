//! Exact duplicates: documents with the same normalized token stream meet on one worker
//! (exchanged by their 128-bit key), and each group is folded to its smallest `doc_id`.
//!
//! The simple version would send every copy into the near-duplicate search, where N copies
//! make N(N-1)/2 pairs and one giant bucket. Instead the group's other members are linked
//! to the representative by `exact` edges (N - 1 of them), and only the representative goes
//! on to the tables. Empty documents are neither: they are counted and never matched.

use std::rc::Rc;

use neardup_io::spill::SpillRecord;
use serde::{Deserialize, Serialize};
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::StreamVec;

use crate::config::EXACT_SORT_SHARE;
use crate::operators::sort::ordered_by;
use crate::operators::SortComplete;
use crate::records::{DocFp, Edge, EdgeKind, HeldDoc};
use crate::stages::near::signatures::signature_route;
use crate::worker::WorkerCtx;

/// Splits documents into group representatives (and documents without duplicates), and
/// exact edges from every other member to its representative.
///
/// One operator with two outputs. The simple way, one output of "representative or edge"
/// split by timely's `partition` and two `flat_map`s, copied each record four more times
/// on its way to the tables (with `split_docs`, a 2M-fingerprint search took 0.90x the time
/// without them).
///
/// The simple version of the grouping sorts every document of the worker by key in a
/// `Vec`; here they go through an external sort ([`SortComplete`]) that keeps
/// [`EXACT_SORT_SHARE`] of the worker's part of `--memory-limit` and writes sorted runs
/// beyond it, and the groups are folded as the merge walks them.
pub fn fold_exact<'s>(
    docs: StreamVec<'s, u64, DocFp>,
    ctx: Rc<WorkerCtx>,
) -> (StreamVec<'s, u64, DocFp>, StreamVec<'s, u64, Edge>) {
    let (each_ctx, end_ctx, fail_ctx) = (ctx.clone(), ctx.clone(), ctx.clone());
    let verified = ctx.shared.config.verify.is_some();
    let by_signature = ctx.shared.config.lsh.is_some();
    docs.sort_complete_split(
        Exchange::new(ctx.meter("exact", move |d: &DocFp| exact_route(d, by_signature))),
        "FoldExact",
        ctx.sort::<ByKey>("exact", EXACT_SORT_SHARE),
        Group::default(),
        |data, reps| {
            // A document without a key (exact folding off, or fingerprint input) has no
            // group to wait for: it goes on at once instead of being held.
            data.retain(|d| !d.empty);
            reps.give_iterator(data.extract_if(.., |d| d.exact_key == 0));
        },
        move |group, ByKey(held), reps, edges| {
            let doc = held.into_doc();
            let same = group.first.as_ref().map(|f| f.exact_key) == Some(doc.exact_key);
            if same {
                let first = group.first.as_ref().expect("the group's first");
                edges.give(exact_edge(first, &doc, verified));
                group.members += 1;
            } else if let Some(first) = group.close(&each_ctx) {
                reps.give(first);
                group.first = Some(doc);
            } else {
                group.first = Some(doc);
            }
        },
        move |mut group, stats, reps, _| {
            if let Some(first) = group.close(&end_ctx) {
                reps.give(first);
            }
            end_ctx.sorted("exact", stats);
            end_ctx.stage_done("exact");
            end_ctx
                .shared
                .progress
                .reach(crate::progress::Stage::Searching);
        },
        move |e| fail_ctx.sort_failed("exact", e),
    )
}

/// A document in the order its worker folds them: by exact key, then by number (the first
/// of a group is its smallest `doc_id`). Held without an allocation of its own
/// ([`HeldDoc`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ByKey(pub HeldDoc);

impl ByKey {
    fn key(&self) -> (u128, u64) {
        (self.0.doc().exact_key, self.0.doc().doc_id)
    }
}

ordered_by!(ByKey, |d| d.key());

impl SpillRecord for ByKey {
    fn memory_bytes(&self) -> usize {
        self.0.memory_bytes()
    }
}

impl From<DocFp> for ByKey {
    fn from(doc: DocFp) -> Self {
        ByKey(HeldDoc::from(doc))
    }
}

/// The group being folded: its first (smallest) document and how many follow it.
#[derive(Default)]
struct Group {
    first: Option<DocFp>,
    members: u64,
}

impl Group {
    /// Ends the group: counts it, and returns its representative.
    fn close(&mut self, ctx: &WorkerCtx) -> Option<DocFp> {
        let first = self.first.take()?;
        if self.members > 0 {
            let mut report = ctx.report.borrow_mut();
            report.exact_groups += 1;
            report.exact_duplicates += self.members;
        }
        self.members = 0;
        Some(first)
    }
}

/// Documents with the same key meet; documents without a key (0) are spread by number.
///
/// In MinHash mode (`by_signature`) every document goes where its signature's fold will be
/// ([`signature_route`]): the same token stream makes the same shingles, so documents with
/// one exact key have one signature and still meet, and the representatives are already on
/// their signature's worker. The simple version routes by the exact key here and by the
/// signature again for the fold: each representative, band keys and all, crossed the
/// network twice (at 16 processes over dev-medium, 135 of the 683 bytes a document sent).
fn exact_route(doc: &DocFp, by_signature: bool) -> u64 {
    if by_signature {
        return signature_route(&doc.bands);
    }
    match doc.exact_key {
        0 => neardup_core::mix::mix64(doc.doc_id),
        // xxh3-128 output is well mixed already: its low word is a fine route.
        key => key as u64,
    }
}

/// The exact edge from a group's representative `first` to another member.
fn exact_edge(first: &DocFp, member: &DocFp, verified: bool) -> Edge {
    let hamming = neardup_core::hamming(first.simhash, member.simhash);
    let mut e = Edge::new(
        (first.doc_id, first.rank),
        (member.doc_id, member.rank),
        hamming,
        EdgeKind::Exact,
    );
    // Identical token streams have identical shingle sets.
    e.jaccard = verified.then_some(1.0);
    e
}
