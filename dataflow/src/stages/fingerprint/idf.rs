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
use neardup_core::{Fingerprinter, Method};
use neardup_io::record::Record;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::Probe;
use timely::dataflow::ProbeHandle;
use timely::worker::Worker;

use crate::config::JobInput;
use crate::records::{RawBody, RawDoc};
use crate::stages::read::read_units;
use crate::worker::WorkerCtx;

/// What each worker learns: a feature's document frequency, or the count of documents one
/// home worker saw (`feature = None`).
type Count = (usize, Option<u64>, u64);

/// Runs the pass on this worker and returns the table every worker builds alike.
pub fn document_frequencies(worker: &mut Worker, ctx: Rc<WorkerCtx>) -> IdfTable {
    let peers = worker.peers();
    let table: Rc<std::cell::RefCell<(u64, HashMap<u64, u64>)>> = Rc::default();
    let sink = table.clone();
    let probe = ProbeHandle::new();
    worker.dataflow::<u64, _, _>(|scope| {
        let raw = read_units(scope, ctx.clone(), probe.clone());
        let counting = ctx.clone();
        let home = ctx.home.clone();
        raw.unary::<timely::container::CapacityContainerBuilder<Vec<(Option<u64>, u64)>>, _, _, _>(
            Exchange::new(move |d: &RawDoc| home.route(d.doc_id)),
            "DistinctFeatures",
            move |_, _| {
                let mut scheme = counting.shared.config.scheme.clone();
                scheme.method = Method::Simhash(Weighting::Set);
                let mut fingerprinter = Fingerprinter::new(scheme);
                // Document frequencies count each distinct feature: any order will do.
                fingerprinter.set_sort_feature_set(false);
                move |input, output| {
                    input.for_each(|cap, data| {
                        let mut session = output.session(&cap);
                        let mut documents = 0u64;
                        for doc in data.drain(..) {
                            let text = match doc.body {
                                RawBody::Fields { text, .. } => text,
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
                            if fingerprinter.fingerprint(&text).is_empty() {
                                continue;
                            }
                            documents += 1;
                            session.give_iterator(
                                fingerprinter.feature_set().iter().map(|&h| (Some(h), 1)),
                            );
                        }
                        session.give((None, documents));
                    });
                }
            },
        )
        .probe_with(&probe)
        .unary_frontier::<timely::container::CapacityContainerBuilder<Vec<Count>>, _, _, _>(
            Exchange::new(|(feature, _): &(Option<u64>, u64)| feature.map_or(0, mix64)),
            "CountFeatures",
            move |cap, _| {
                let mut cap = Some(cap);
                let mut df: HashMap<u64, u64> = HashMap::new();
                let mut documents = 0u64;
                move |(input, frontier), output| {
                    input.for_each(|_, data| {
                        for (feature, n) in data.drain(..) {
                            match feature {
                                Some(h) => *df.entry(h).or_default() += n,
                                None => documents += n,
                            }
                        }
                    });
                    if frontier.is_empty() {
                        if let Some(cap) = cap.take() {
                            // Every worker gets every count.
                            let mut session = output.session(&cap);
                            for to in 0..peers {
                                session.give((to, None, documents));
                                session.give_iterator(df.iter().map(|(&h, &n)| (to, Some(h), n)));
                            }
                        }
                    }
                }
            },
        )
        .sink(
            Exchange::new(|(to, _, _): &Count| *to as u64),
            "CollectCounts",
            move |(input, _)| {
                input.for_each(|_, data| {
                    let mut table = sink.borrow_mut();
                    for (_, feature, n) in data.drain(..) {
                        match feature {
                            Some(h) => *table.1.entry(h).or_default() += n,
                            None => table.0 += n,
                        }
                    }
                });
            },
        );
    });
    while worker.step_or_park(None) {}
    let (documents, df) = table.take();
    IdfTable::from_document_frequencies(documents, df)
}
