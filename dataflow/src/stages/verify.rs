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
//!
//! Shingle sets are stored unsorted, as the fingerprinting left them; the exact Jaccard
//! similarity is a merge of sorted sets, so a set is sorted in place the first time a
//! candidate needs it. Most documents are in no candidate pair and are never sorted.

use std::collections::HashSet;
use std::rc::Rc;

use neardup_core::minhash::jaccard_estimate;
use neardup_core::similarity::jaccard;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::StreamVec;

use std::cell::RefCell;

use fxhash::FxHashMap;

use crate::progress::Progress;
use crate::records::{Candidate, Edge};
use crate::worker::WorkerCtx;

/// Removes repeated candidates and, when verification is on, keeps only pairs whose exact
/// Jaccard similarity reaches `--min-jaccard` (annotating each with it). `search`: the
/// candidates are the search's, counted as pairs and rejections; otherwise they are the
/// pairs the clustering asks about ([`crate::stages::stars::probe_components`]), which it
/// counts itself.
pub fn verify<'s>(
    candidates: StreamVec<'s, u64, Edge>,
    ctx: Rc<WorkerCtx>,
    sets: ShingleSets,
    search: bool,
) -> StreamVec<'s, u64, Edge> {
    let first = ctx.clone();
    let sets_b = sets.clone();
    let (home_a, home_b) = (ctx.home.clone(), ctx.home.clone());
    let with_a = candidates.unary(
        Exchange::new(ctx.meter("verify", move |e: &Edge| home_a.route(e.a))),
        "CandidatesAtA",
        move |_, _| {
            let mut seen: HashSet<(u64, u64)> = HashSet::new();
            move |input, output| {
                input.for_each(|cap, data| {
                    let mut session = output.session(&cap);
                    let mut shingles = sets.0.borrow_mut();
                    for edge in data.drain(..) {
                        if !seen.insert((edge.a, edge.b)) {
                            continue;
                        }
                        let shingles_a = match first.shared.config.verify {
                            Some(v) => stored_set(&mut shingles, edge.a, v).to_vec(),
                            None => Vec::new(),
                        };
                        session.give(Candidate { edge, shingles_a });
                    }
                });
            }
        },
    );
    with_a.unary(
        Exchange::new(ctx.meter("verify", move |c: &Candidate| home_b.route(c.edge.b))),
        "VerifyAtB",
        move |_, _| {
            move |input, output| {
                input.for_each(|cap, data| {
                    let mut session = output.session(&cap);
                    let mut shingles = sets_b.0.borrow_mut();
                    let mut report = ctx.report.borrow_mut();
                    for Candidate {
                        mut edge,
                        shingles_a,
                    } in data.drain(..)
                    {
                        if let Some(v) = ctx.shared.config.verify {
                            let shingles_b = stored_set(&mut shingles, edge.b, v);
                            // With --verify minhash the stored sets are the signatures.
                            let similarity = if v.estimate {
                                jaccard_estimate(&shingles_a, shingles_b)
                            } else {
                                jaccard(&shingles_a, shingles_b)
                            };
                            if similarity < v.min_jaccard {
                                report.rejected += u64::from(search);
                                continue;
                            }
                            edge.jaccard = Some(similarity as f32);
                        }
                        if search {
                            report.near_pairs += 1;
                            Progress::add(&ctx.shared.progress.pairs, 1);
                        }
                        session.give(edge);
                    }
                });
            }
        },
    )
}

/// The shingle sets (or, with `--verify minhash`, the signatures) of the documents this
/// worker is home to, by `doc_id`: filled by the fingerprint stage, read by verification.
/// Kept only when candidate pairs are verified.
#[derive(Clone)]
pub struct ShingleSets(Rc<RefCell<FxHashMap<u64, Box<[u64]>>>>, bool);

impl Default for ShingleSets {
    fn default() -> Self {
        ShingleSets(Rc::default(), true)
    }
}

impl ShingleSets {
    /// Sets that keep nothing: verification makes them again from the inputs
    /// ([`crate::stages::verify_inputs`]).
    pub fn none() -> Self {
        ShingleSets(Rc::default(), false)
    }

    /// Keeps `doc`'s set (unsorted: verification sorts a set the first time it is needed).
    pub fn insert(&self, doc: u64, set: Box<[u64]>) {
        if self.1 {
            self.0.borrow_mut().insert(doc, set);
        }
    }
}

/// The stored set of `doc` (empty if it has none) in the form verification compares: a
/// shingle set sorted (in place, once), a MinHash signature (`--verify minhash`) as it is,
/// since its positions are what is compared.
fn stored_set(
    sets: &mut FxHashMap<u64, Box<[u64]>>,
    doc: u64,
    verify: crate::config::Verify,
) -> &[u64] {
    let Some(set) = sets.get_mut(&doc) else {
        return &[];
    };
    if !verify.estimate && !set.is_sorted() {
        set.sort_unstable();
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Verify;

    fn verify(estimate: bool) -> Verify {
        Verify {
            shingle: 3,
            min_jaccard: 0.8,
            estimate,
        }
    }

    #[test]
    fn shingle_sets_are_sorted_once_and_signatures_keep_their_order() {
        let mut sets = fxhash::FxHashMap::default();
        sets.insert(1u64, vec![9u64, 3, 7, 1].into_boxed_slice());
        assert_eq!(stored_set(&mut sets, 1, verify(false)), &[1, 3, 7, 9]);
        assert_eq!(
            &*sets[&1],
            &[1, 3, 7, 9],
            "sorted in place, for the next candidate"
        );
        assert_eq!(stored_set(&mut sets, 2, verify(false)), &[] as &[u64]);

        // A signature's positions are what --verify minhash compares: never reordered.
        sets.insert(3u64, vec![5u64, 2, 8].into_boxed_slice());
        assert_eq!(stored_set(&mut sets, 3, verify(true)), &[5, 2, 8]);
    }
}
