//! Candidate pairs, checked: every candidate travels to the home of its first document,
//! picks up that document's shingle set, travels to the home of its second document, and
//! is kept if the exact Jaccard similarity of the two sets reaches the threshold.
//!
//! The simple version would gather all shingle sets in one place. Instead each set stays
//! where its document was fingerprinted, and only candidates move, carrying one set: the
//! traffic is proportional to the candidates, not to the corpus.
//!
//! The first hop also removes repeated candidates: in MinHash mode a pair that shares
//! several bands is found once per band, and all copies meet at the same home.

use std::collections::HashSet;
use std::rc::Rc;

use neardup_core::minhash::jaccard_estimate;
use neardup_core::similarity::jaccard;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::StreamVec;

use crate::progress::Progress;
use crate::records::{Candidate, Edge};
use crate::worker::WorkerCtx;

/// Removes repeated candidates and, when verification is on, keeps only pairs whose exact
/// Jaccard similarity reaches `--min-jaccard` (annotating each with it).
pub fn verify<'s>(
    candidates: StreamVec<'s, u64, Edge>,
    ctx: Rc<WorkerCtx>,
) -> StreamVec<'s, u64, Edge> {
    let first = ctx.clone();
    let (home_a, home_b) = (ctx.home.clone(), ctx.home.clone());
    let with_a = candidates.unary(
        Exchange::new(move |e: &Edge| home_a.route(e.a)),
        "CandidatesAtA",
        move |_, _| {
            let mut seen: HashSet<(u64, u64)> = HashSet::new();
            move |input, output| {
                input.for_each(|cap, data| {
                    let mut session = output.session(&cap);
                    let shingles = first.shingles.borrow();
                    for edge in data.drain(..) {
                        if !seen.insert((edge.a, edge.b)) {
                            continue;
                        }
                        let shingles_a = match first.shared.config.verify {
                            Some(_) => shingles
                                .get(&edge.a)
                                .map(|s| s.to_vec())
                                .unwrap_or_default(),
                            None => Vec::new(),
                        };
                        session.give(Candidate { edge, shingles_a });
                    }
                });
            }
        },
    );
    with_a.unary(
        Exchange::new(move |c: &Candidate| home_b.route(c.edge.b)),
        "VerifyAtB",
        move |_, _| {
            move |input, output| {
                input.for_each(|cap, data| {
                    let mut session = output.session(&cap);
                    let shingles = ctx.shingles.borrow();
                    let mut report = ctx.report.borrow_mut();
                    for Candidate {
                        mut edge,
                        shingles_a,
                    } in data.drain(..)
                    {
                        if let Some(v) = ctx.shared.config.verify {
                            let shingles_b = shingles.get(&edge.b).map_or(&[][..], |s| &s[..]);
                            // With --verify minhash the stored sets are the signatures.
                            let similarity = if v.estimate {
                                jaccard_estimate(&shingles_a, shingles_b)
                            } else {
                                jaccard(&shingles_a, shingles_b)
                            };
                            if similarity < v.min_jaccard {
                                report.rejected += 1;
                                continue;
                            }
                            edge.jaccard = Some(similarity as f32);
                        }
                        report.near_pairs += 1;
                        Progress::add(&ctx.shared.progress.pairs, 1);
                        session.give(edge);
                    }
                });
            }
        },
    )
}
