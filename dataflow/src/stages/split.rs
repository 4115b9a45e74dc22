//! The documents' stream, read once and handed on in the pieces its readers use.
//!
//! The simple way is to give every stage that wants the documents the stream itself:
//! `docs.clone()` once per reader. Timely then clones each batch for every reader but the
//! last, so a batch of [`DocFp`] (about 170 bytes each, and a vector of band keys in
//! MinHash mode, one allocation more per copy) was copied once for the duplicate-id count
//! and once for the clusters, though the first reads only the hash of the user's id and the
//! second only the document number.
//!
//! [`split_docs`] is one operator that takes each batch by value and gives three outputs:
//! the batch itself (moved, not copied), the document numbers, and the id hashes. The
//! stages after it read what they need, and the full records are not copied at all when no
//! URL stage reads them too.

use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::StreamVec;
use timely::progress::operate::FrontierInterest;

use crate::records::DocFp;

/// What [`split_docs`] hands on, each at the worker it was read on.
pub struct DocStreams<'s> {
    /// The documents, as they came.
    pub docs: StreamVec<'s, u64, DocFp>,
    /// `doc_id` of every document, in the same order.
    pub doc_ids: StreamVec<'s, u64, u64>,
    /// `id_hash` of the documents that have an id.
    pub id_hashes: StreamVec<'s, u64, u64>,
}

/// Splits the documents' stream: `docs.map(|d| d.doc_id)` and `docs.flat_map(|d| d.id_hash)`
/// beside `docs`, with no copy of the records.
pub fn split_docs<'s>(docs: StreamVec<'s, u64, DocFp>) -> DocStreams<'s> {
    let mut builder = OperatorBuilder::new("SplitDocs".to_owned(), docs.scope());
    let mut input = builder.new_input(docs, Pipeline);
    builder.set_notify_for(0, FrontierInterest::Never);
    let (mut docs_out, docs) = builder.new_output::<Vec<DocFp>>();
    let (mut ids_out, doc_ids) = builder.new_output::<Vec<u64>>();
    let (mut hashes_out, id_hashes) = builder.new_output::<Vec<u64>>();
    builder.build(move |_| {
        move |_frontiers| {
            let mut docs_out = docs_out.activate();
            let mut ids_out = ids_out.activate();
            let mut hashes_out = hashes_out.activate();
            input.for_each_stamp(|cap, batches| {
                for batch in batches {
                    let mut ids: Vec<u64> = batch.iter().map(|d| d.doc_id).collect();
                    let mut hashes: Vec<u64> = batch.iter().filter_map(|d| d.id_hash).collect();
                    ids_out.give(&cap, &mut ids);
                    hashes_out.give(&cap, &mut hashes);
                    docs_out.give(&cap, batch);
                }
            });
        }
    });
    DocStreams {
        docs,
        doc_ids,
        id_hashes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use timely::dataflow::operators::{Input, Inspect, Probe};
    use timely::dataflow::ProbeHandle;

    fn doc(doc_id: u64, id_hash: Option<u64>) -> DocFp {
        DocFp {
            doc_id,
            simhash: doc_id * 7,
            exact_key: 0,
            rank: doc_id,
            empty: false,
            id_hash,
            bands: vec![doc_id; 3],
            digest: None,
            url_key: None,
            host_hash: None,
            page: None,
        }
    }

    /// What each output carried, with the time it carried it at.
    type Seen = (Vec<(u64, DocFp)>, Vec<(u64, u64)>, Vec<(u64, u64)>);

    /// Against the simple version: the three outputs equal the stream, its `doc_id`s and its
    /// `id_hash`es, batch for batch and at the same times.
    #[test]
    fn outputs_equal_the_projections_of_the_input() {
        let seen: Arc<Mutex<Seen>> = Arc::default();
        let out = seen.clone();
        let batches: Vec<Vec<DocFp>> = (0..5u64)
            .map(|t| {
                (0..t * 3)
                    .map(|i| doc(t * 100 + i, (i % 2 == 0).then_some(i * 31 + t)))
                    .collect()
            })
            .collect();
        let sent = batches.clone();
        timely::execute_directly(move |worker| {
            let out = out.clone();
            let probe = ProbeHandle::new();
            let mut input = worker.dataflow::<u64, _, _>(|scope| {
                let (input, stream) = scope.new_input::<Vec<DocFp>>();
                let split = split_docs(stream);
                let (a, b, c) = (out.clone(), out.clone(), out.clone());
                split
                    .docs
                    .inspect_core(move |event| {
                        if let Ok((stamp, data)) = event {
                            let t = *stamp.expect_singleton();
                            a.lock()
                                .unwrap()
                                .0
                                .extend(data.iter().map(|d| (t, d.clone())));
                        }
                    })
                    .probe_with(&probe);
                split.doc_ids.inspect_core(move |event| {
                    if let Ok((stamp, data)) = event {
                        let t = *stamp.expect_singleton();
                        b.lock().unwrap().1.extend(data.iter().map(|d| (t, *d)));
                    }
                });
                split.id_hashes.inspect_core(move |event| {
                    if let Ok((stamp, data)) = event {
                        let t = *stamp.expect_singleton();
                        c.lock().unwrap().2.extend(data.iter().map(|d| (t, *d)));
                    }
                });
                input
            });
            for (t, batch) in sent.iter().enumerate() {
                input.advance_to(t as u64);
                for d in batch {
                    input.send(d.clone());
                }
            }
            input.close();
            worker.step_while(|| !probe.done());
        });
        let (docs, ids, hashes) = std::mem::take(&mut *seen.lock().unwrap());
        let expected_docs: Vec<(u64, DocFp)> = batches
            .iter()
            .enumerate()
            .flat_map(|(t, b)| b.iter().map(move |d| (t as u64, d.clone())))
            .collect();
        let expected_ids: Vec<(u64, u64)> =
            expected_docs.iter().map(|(t, d)| (*t, d.doc_id)).collect();
        let expected_hashes: Vec<(u64, u64)> = expected_docs
            .iter()
            .filter_map(|(t, d)| d.id_hash.map(|h| (*t, h)))
            .collect();
        assert_eq!(docs, expected_docs);
        assert_eq!(ids, expected_ids);
        assert_eq!(hashes, expected_hashes);
    }
}
