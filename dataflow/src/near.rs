//! Near duplicates: every representative fingerprint is entered in every table of the
//! design, exchanged by a well-mixed hash of (table, key) so that fingerprints sharing a key
//! meet on one worker, and each bucket is searched there.
//!
//! The simple version is one big sort of all (table, key) records and a comparison of every
//! pair inside each equal-key run. The worker does exactly that for its share of the keys,
//! with two refinements from `neardup_core::search`: a pair is reported only from the first
//! table in which the two fingerprints share a key (so once, although it may meet in
//! several), and a hot bucket is split further on its free bits instead of being compared
//! pair by pair (so it stays exact and does not stall).

use std::collections::BTreeMap;
use std::rc::Rc;

use neardup_core::mix::mix2;
use neardup_core::search::{BucketSearch, Item};
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Capability, Probe};
use timely::dataflow::{ProbeHandle, StreamVec};

use crate::config::DEFAULT_HOT_BUCKET;
use crate::progress::Progress;
use crate::records::{DocFp, Edge, EdgeKind, TableRecord};
use crate::report::BucketInfo;
use crate::worker::WorkerCtx;

/// How a record's bucket is found: a simhash table keys on the masked fingerprint, an LSH
/// band record carries its key already.
#[derive(Clone)]
enum Keys {
    Tables(Vec<u64>),
    Bands,
}

impl Keys {
    fn of(ctx: &WorkerCtx) -> Keys {
        match ctx.shared.config.lsh {
            Some(_) => Keys::Bands,
            None => Keys::Tables(ctx.shared.config.design.masks().to_vec()),
        }
    }

    /// `(table or band, key)` of a record.
    #[inline]
    fn bucket(&self, record: &TableRecord) -> (u32, u64) {
        match self {
            Keys::Tables(masks) => (record.0, record.1 & masks[record.0 as usize]),
            Keys::Bands => (record.0, record.1),
        }
    }

    /// The route of a record: a mix of the table index and the key.
    #[inline]
    fn route(&self, record: &TableRecord) -> u64 {
        let (table, key) = self.bucket(record);
        mix2(table as u64, key)
    }
}

pub fn search_tables<'s>(
    reps: StreamVec<'s, u64, DocFp>,
    ctx: Rc<WorkerCtx>,
) -> StreamVec<'s, u64, Edge> {
    let config = &ctx.shared.config;
    let lanes = match config.lsh {
        Some(banding) => banding.bands,
        None => config.design.tables(),
    };
    let rounds = config.table_rounds.clamp(1, lanes);
    let keys = Keys::of(&ctx);
    let searched = ProbeHandle::new();
    let records = table_records(reps, ctx.clone(), lanes, rounds, searched.clone());
    let search_ctx = ctx.clone();
    records
        .unary_frontier(
            Exchange::new(move |r: &TableRecord| keys.route(r)),
            "SearchBuckets",
            move |_, _| {
                // Records by round (timestamp), each searched once its round is complete.
                let mut stash: BTreeMap<u64, (Capability<u64>, Vec<TableRecord>)> = BTreeMap::new();
                let mut done = false;
                move |(input, frontier), output| {
                    input.for_each(|cap, data| {
                        let time = *cap.least().expect("a time");
                        let entry = stash.entry(time).or_insert_with(|| {
                            (
                                cap.retain_least(output.output_index()).expect("a time"),
                                Vec::new(),
                            )
                        });
                        entry.1.append(data);
                    });
                    let complete: Vec<u64> = stash
                        .keys()
                        .copied()
                        .filter(|t| !frontier.less_equal(t))
                        .collect();
                    for time in complete {
                        let (cap, records) = stash.remove(&time).expect("listed");
                        let edges = search(records, &search_ctx);
                        output.session(&cap).give_iterator(edges.into_iter());
                    }
                    if frontier.is_empty() && stash.is_empty() && !done {
                        done = true;
                        search_ctx.stage_done("search");
                        search_ctx
                            .shared
                            .progress
                            .reach(crate::progress::Stage::Clustering);
                    }
                }
            },
        )
        .probe_with(&searched)
}

/// Enters every representative in every table (or LSH band), a round of tables at a time.
///
/// The simple version emits all tables at once, so the search holds `tables` copies of
/// every fingerprint. With `--table-rounds N`, round `r` (timestamp `r + 1`) holds about
/// `tables / N` of them, and is emitted only once the search has finished the round before
/// (the `searched` probe): memory is bounded by one round.
fn table_records<'s>(
    reps: StreamVec<'s, u64, DocFp>,
    ctx: Rc<WorkerCtx>,
    lanes: usize,
    rounds: usize,
    searched: ProbeHandle<u64>,
) -> StreamVec<'s, u64, TableRecord> {
    let scope = reps.scope();
    let per_round = lanes.div_ceil(rounds);
    reps.unary_frontier(Pipeline, "TableRecords", move |cap, info| {
        let activator = scope.activator_for(info.address);
        let mut cap = Some(cap);
        let mut held: Vec<DocFp> = Vec::new();
        let mut round = 0usize;
        move |(input, frontier), output| {
            input.for_each(|_, data| held.append(data));
            if !frontier.is_empty() {
                return;
            }
            let Some(c) = cap.as_mut() else { return };
            // Round r goes out at time r + 1, once round r - 1 (time r) has been searched.
            if round > 0 && searched.less_equal(&(round as u64)) {
                activator.activate();
                return;
            }
            if round == rounds {
                cap = None;
                held = Vec::new();
                return;
            }
            c.downgrade(&(round as u64 + 1));
            let lanes_now = round * per_round..((round + 1) * per_round).min(lanes);
            let mut n = 0u64;
            {
                let mut session = output.session(&*c);
                for doc in &held {
                    if doc.bands.is_empty() {
                        for t in lanes_now.clone() {
                            session.give((t as u32, doc.simhash, doc.doc_id, doc.rank));
                        }
                    } else {
                        for band in lanes_now.clone() {
                            session.give((band as u32, doc.bands[band], doc.doc_id, doc.rank));
                        }
                    }
                    n += lanes_now.len() as u64;
                }
            }
            ctx.report.borrow_mut().table_records += n;
            Progress::add(&ctx.shared.progress.table_records, n);
            round += 1;
            // Hold the next round's time only, so the probe can see this round finish.
            c.downgrade(&(round as u64 + 1));
            activator.activate();
        }
    })
}

/// Sorts this worker's records by (table, key) and searches each bucket.
fn search(mut records: Vec<TableRecord>, ctx: &WorkerCtx) -> Vec<Edge> {
    let config = &ctx.shared.config;
    let design = &config.design;
    let keys = Keys::of(ctx);
    let searcher = BucketSearch {
        k: design.k(),
        leaf_size: config.leaf_size,
    };
    records.sort_unstable_by_key(|r| keys.bucket(r));
    let mut edges = Vec::new();
    let mut items = Vec::new();
    let mut report = ctx.report.borrow_mut();
    for bucket in records.chunk_by(|x, y| keys.bucket(x) == keys.bucket(y)) {
        if bucket.len() < 2 {
            continue;
        }
        let (table, key) = keys.bucket(&bucket[0]);
        if bucket.len() >= DEFAULT_HOT_BUCKET {
            report.note_bucket(BucketInfo {
                table,
                key: format!("{key:016x}"),
                size: bucket.len() as u64,
            });
        }
        if let Keys::Bands = keys {
            // Every pair sharing a band is a candidate; the same pair from several bands is
            // removed, and candidates are verified, in the next stage.
            for (i, x) in bucket.iter().enumerate() {
                for y in &bucket[i + 1..] {
                    edges.push(Edge::new((x.2, x.3), (y.2, y.3), 0, EdgeKind::Near));
                }
            }
            report.comparisons += (bucket.len() * (bucket.len() - 1) / 2) as u64;
            continue;
        }
        let table = table as usize;
        // Items carry their position in the bucket, which leads back to doc_id and rank.
        items.clear();
        items.extend(
            bucket
                .iter()
                .enumerate()
                .map(|(i, &(_, fp, _, _))| Item { fp, doc: i as u64 }),
        );
        let accept = |a: u64, b: u64| design.first_shared_table(a, b) == Some(table);
        let stats = searcher.search(
            &mut items,
            design.masks()[table],
            &accept,
            &mut |a, b, d| {
                let (x, y) = (&bucket[a.doc as usize], &bucket[b.doc as usize]);
                edges.push(Edge::new((x.2, x.3), (y.2, y.3), d, EdgeKind::Near));
            },
        );
        report.comparisons += stats.comparisons;
        report.splits += stats.splits;
    }
    // Pairs that go on to verification (or deduplication) are counted there.
    if matches!(keys, Keys::Tables(_)) && config.verify.is_none() {
        report.near_pairs += edges.len() as u64;
        Progress::add(&ctx.shared.progress.pairs, edges.len() as u64);
    }
    report.candidates += edges.len() as u64;
    edges
}
