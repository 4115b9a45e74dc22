//! The document-frequency pass for TF-IDF weights (`--weights tfidf`).
//!
//! Before the main dataflow, the corpus is read once more: every document's home worker
//! computes its distinct features, the features are exchanged by hash so that each one is
//! counted on one worker, and every worker then receives every count (and the number of
//! documents) to build the same [`IdfTable`]. The main pass folds each feature with weight
//! `tf * round(1000 * ln(N / df))`.
//!
//! The simple version would count everything on one worker. Counting is spread; the table
//! itself is copied to every worker (16 bytes per distinct feature), which bounds this mode
//! to vocabularies that fit in a worker's memory.

use std::collections::HashMap;
use std::rc::Rc;

use neardup_core::mix::mix64;
use neardup_core::simhash::{IdfTable, Weighting};
use neardup_core::{Fingerprinter, Method, Scheme};
use neardup_io::record::Record;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::Probe;
use timely::dataflow::ProbeHandle;
use timely::worker::Worker;

use crate::config::JobInput;
use crate::operators::collect::Give;
use crate::operators::CollectComplete;
use crate::records::{RawBody, RawDoc};
use crate::stages::read::read_units;
use crate::worker::WorkerCtx;

/// What each worker learns: a feature's document frequency, or the count of documents one
/// home worker saw (`feature = None`).
type Count = (usize, Option<u64>, u64);

/// Runs the pass on this worker and returns the table every worker builds alike.
pub fn document_frequencies(worker: &mut Worker, ctx: Rc<WorkerCtx>) -> IdfTable {
    let peers = worker.peers();
    let table: Rc<std::cell::RefCell<FeatureCounts>> = Rc::default();
    let sink = table.clone();
    let probe = ProbeHandle::new();
    worker.dataflow::<u64, _, _>(|scope| {
        let raw = read_units(scope, ctx.clone(), probe.clone());
        let counting = ctx.clone();
        let home = ctx.home.clone();
        raw.unary::<timely::container::CapacityContainerBuilder<Vec<(Option<u64>, u64)>>, _, _, _>(
            Exchange::new(ctx.meter("document frequencies", move |d: &RawDoc| {
                home.route(d.doc_id)
            })),
            "DistinctFeatures",
            move |_, _| {
                let mut distinct = DistinctFeatures::new(&counting.shared.config.scheme);
                move |input, output| {
                    input.for_each(|cap, data| {
                        let mut session = output.session(&cap);
                        let mut documents = 0u64;
                        for doc in data.drain(..) {
                            let text = match doc.body {
                                RawBody::Fields(record) => record.text,
                                RawBody::Raw(line) => match &counting.shared.config.input {
                                    // Invalid records are reported by the main pass.
                                    JobInput::Documents { fields, .. } => {
                                        let kind = counting.shared.plan.files[doc.file as usize]
                                            .format
                                            .kind();
                                        let mut r = Record::default();
                                        match kind.parse_into(&line, fields, &mut r) {
                                            Ok(()) => r.text,
                                            Err(_) => continue,
                                        }
                                    }
                                    JobInput::Fingerprints { .. } => continue,
                                },
                                RawBody::Fingerprint { .. } | RawBody::Invalid(_) => continue,
                            };
                            let Some(features) = distinct.of(&text) else {
                                continue;
                            };
                            documents += 1;
                            session.give_iterator(features.iter().map(|&h| (Some(h), 1)));
                        }
                        session.give((None, documents));
                    });
                }
            },
        )
        .probe_with(&probe)
        .collect_complete(
            Exchange::new(ctx.meter(
                "document frequencies",
                |(feature, _): &(Option<u64>, u64)| feature.map_or(0, mix64),
            )),
            "CountFeatures",
            FeatureCounts::default(),
            |share, data| {
                for (feature, n) in data.drain(..) {
                    share.add(feature, n);
                }
            },
            move |share, session: &mut Give<'_, '_, u64, Count>| {
                // Every worker gets every count.
                for to in 0..peers {
                    session.give_iterator(share.counts().map(|(h, n)| (to, h, n)));
                }
            },
        )
        .sink(
            Exchange::new(ctx.meter("document frequencies", |(to, _, _): &Count| *to as u64)),
            "CollectCounts",
            move |(input, _)| {
                input.for_each(|_, data| {
                    let mut table = sink.borrow_mut();
                    for (_, feature, n) in data.drain(..) {
                        table.add(feature, n);
                    }
                });
            },
        );
    });
    while worker.step_or_park(None) {}
    table.take().into_table()
}

/// The distinct features of a document, as the pass counts them: the scheme's features with
/// set weights (each feature once per document).
pub struct DistinctFeatures {
    fingerprinter: Fingerprinter,
}

impl DistinctFeatures {
    pub fn new(scheme: &Scheme) -> Self {
        let mut scheme = scheme.clone();
        scheme.method = Method::Simhash(Weighting::Set);
        let mut fingerprinter = Fingerprinter::new(scheme);
        // Document frequencies count each distinct feature: any order will do.
        fingerprinter.set_sort_feature_set(false);
        DistinctFeatures { fingerprinter }
    }

    /// The document's distinct features, or `None` for a document without any (empty
    /// documents are not counted).
    pub fn of(&mut self, text: &str) -> Option<&[u64]> {
        if self.fingerprinter.fingerprint(text).is_empty() {
            return None;
        }
        Some(self.fingerprinter.feature_set())
    }
}

/// Document frequencies of a share of the features, and a count of documents; shares are
/// added up, and the whole becomes the [`IdfTable`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FeatureCounts {
    documents: u64,
    df: HashMap<u64, u64>,
}

impl FeatureCounts {
    /// Adds `n` documents holding `feature`, or (`None`) `n` documents counted.
    pub fn add(&mut self, feature: Option<u64>, n: u64) {
        match feature {
            Some(h) => *self.df.entry(h).or_default() += n,
            None => self.documents += n,
        }
    }

    /// Every count, the documents' (`None`) first, as [`add`](Self::add) takes them.
    pub fn counts(&self) -> impl Iterator<Item = (Option<u64>, u64)> + '_ {
        std::iter::once((None, self.documents)).chain(self.df.iter().map(|(&h, &n)| (Some(h), n)))
    }

    pub fn into_table(self) -> IdfTable {
        IdfTable::from_document_frequencies(self.documents, self.df)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counting split over features by hash and merged, as the pass does across workers,
    /// equals counting everything in one place (the simple version), which equals counting
    /// by hand.
    #[test]
    fn shares_of_counts_add_up_to_the_whole() {
        let texts = [
            "the cat sat",
            "the cat ran",
            "",
            "a dog ran far",
            "the the the",
        ];
        let scheme = Scheme::simhash_doc();
        let mut distinct = DistinctFeatures::new(&scheme);
        let mut whole = FeatureCounts::default();
        let mut shares = [FeatureCounts::default(), FeatureCounts::default()];
        let mut by_hand: std::collections::BTreeMap<u64, u64> = Default::default();
        let mut documents = 0;
        for text in texts {
            let Some(features) = distinct.of(text) else {
                assert!(text.is_empty());
                continue;
            };
            documents += 1;
            let set: std::collections::BTreeSet<u64> = features.iter().copied().collect();
            assert_eq!(set.len(), features.len(), "each feature once per document");
            whole.add(None, 1);
            shares[0].add(None, 1);
            for &h in &set {
                *by_hand.entry(h).or_default() += 1;
                whole.add(Some(h), 1);
                shares[(mix64(h) % 2) as usize].add(Some(h), 1);
            }
        }
        let mut merged = FeatureCounts::default();
        for share in &shares {
            for (feature, n) in share.counts() {
                merged.add(feature, n);
            }
        }
        assert_eq!(merged, whole);
        assert_eq!(whole.documents, documents);
        assert_eq!(
            whole
                .df
                .into_iter()
                .collect::<std::collections::BTreeMap<_, _>>(),
            by_hand
        );
        assert!(
            by_hand.values().any(|&n| n == 3),
            "\"the\" in three documents"
        );
    }
}
