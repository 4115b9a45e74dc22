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

use std::rc::Rc;

use neardup_core::mix::mix2;
use neardup_core::search::{BucketSearch, Item};
use neardup_core::TableDesign;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::StreamVec;

use crate::config::DEFAULT_HOT_BUCKET;
use crate::progress::Progress;
use crate::records::{DocFp, Edge, EdgeKind, TableRecord};
use crate::report::BucketInfo;
use crate::worker::WorkerCtx;

/// The route of a table record: a mix of the table index and the key.
#[inline]
fn table_route(design: &TableDesign, record: &TableRecord) -> u64 {
    let (table, fp, _, _) = *record;
    mix2(table as u64, design.key(table as usize, fp))
}

pub fn search_tables<'s>(
    reps: StreamVec<'s, u64, DocFp>,
    ctx: Rc<WorkerCtx>,
) -> StreamVec<'s, u64, Edge> {
    let design = ctx.shared.config.design.clone();
    let route_design = design.clone();
    let emit_ctx = ctx.clone();
    let records = reps.unary(Pipeline, "TableRecords", move |_, _| {
        move |input, output| {
            input.for_each(|cap, data| {
                let mut session = output.session(&cap);
                let mut n = 0u64;
                for doc in data.drain(..) {
                    for t in 0..design.tables() {
                        session.give((t as u32, doc.simhash, doc.doc_id, doc.rank));
                        n += 1;
                    }
                }
                emit_ctx.report.borrow_mut().table_records += n;
                Progress::add(&emit_ctx.shared.progress.table_records, n);
            });
        }
    });
    records.unary_frontier(
        Exchange::new(move |r: &TableRecord| table_route(&route_design, r)),
        "SearchBuckets",
        move |cap, _| {
            let mut cap = Some(cap);
            let mut received: Vec<TableRecord> = Vec::new();
            move |(input, frontier), output| {
                input.for_each(|_, data| received.append(data));
                if frontier.is_empty() {
                    if let Some(cap) = cap.take() {
                        let edges = search(std::mem::take(&mut received), &ctx);
                        output.session(&cap).give_iterator(edges.into_iter());
                        ctx.stage_done("search");
                        ctx.shared
                            .progress
                            .reach(crate::progress::Stage::Clustering);
                    }
                }
            }
        },
    )
}

/// Sorts this worker's records by (table, key) and searches each bucket.
fn search(mut records: Vec<TableRecord>, ctx: &WorkerCtx) -> Vec<Edge> {
    let config = &ctx.shared.config;
    let design = &config.design;
    let searcher = BucketSearch {
        k: design.k(),
        leaf_size: config.leaf_size,
    };
    let masks = design.masks();
    let bucket_key = |r: &TableRecord| ((r.0 as u128) << 64) | (r.1 & masks[r.0 as usize]) as u128;
    records.sort_unstable_by_key(bucket_key);
    let mut edges = Vec::new();
    let mut items = Vec::new();
    let mut report = ctx.report.borrow_mut();
    for bucket in records.chunk_by(|x, y| bucket_key(x) == bucket_key(y)) {
        if bucket.len() < 2 {
            continue;
        }
        let table = bucket[0].0 as usize;
        if bucket.len() >= DEFAULT_HOT_BUCKET {
            report.note_bucket(BucketInfo {
                table: table as u32,
                key: format!("{:016x}", design.key(table, bucket[0].1)),
                size: bucket.len() as u64,
            });
        }
        // Items carry their position in the bucket, which leads back to doc_id and rank.
        items.clear();
        items.extend(
            bucket
                .iter()
                .enumerate()
                .map(|(i, &(_, fp, _, _))| Item { fp, doc: i as u64 }),
        );
        let accept = |a: u64, b: u64| design.first_shared_table(a, b) == Some(table);
        let stats = searcher.search(&mut items, masks[table], &accept, &mut |a, b, d| {
            let (x, y) = (&bucket[a.doc as usize], &bucket[b.doc as usize]);
            edges.push(Edge::new((x.2, x.3), (y.2, y.3), d, EdgeKind::Near));
        });
        report.comparisons += stats.comparisons;
        report.splits += stats.splits;
    }
    report.near_pairs += edges.len() as u64;
    Progress::add(&ctx.shared.progress.pairs, edges.len() as u64);
    edges
}
