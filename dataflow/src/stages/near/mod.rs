//! Near duplicates: every representative fingerprint is entered in every table of the
//! design, exchanged by a well-mixed hash of (table, key) so that fingerprints sharing a key
//! meet on one worker, and each bucket is searched there.
//!
//! The simple version is one big sort of all (table, key) records and a comparison of every
//! pair inside each equal-key run. The worker does that for its share of the keys, with
//! refinements: the tables that send a fingerprint to the same worker share one record (a
//! bitmask of tables), each table is grouped by a radix sort of compact packed keys rather
//! than a sort of records, a pair is reported only from the first table in which the two
//! fingerprints share a key (so once, although it may meet in several), and a hot bucket is
//! split further on its free bits instead of being compared pair by pair (so it stays exact
//! and does not stall). The tables may be entered in rounds to bound memory
//! ([`crate::stages::near::rounds`]), and the search spills to disk when even that does not fit
//! ([`crate::stages::near::spill`]).

pub mod rounds;
pub mod spill;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use neardup_core::mix::mix2;
use neardup_core::search::{BucketSearch, Item, KeyGrouper};
use neardup_core::tables::KeyPacker;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Capability, Probe};
use timely::dataflow::{ProbeHandle, StreamVec};

use crate::config::DEFAULT_HOT_BUCKET;
use crate::progress::Progress;
use crate::records::{DocFp, Edge, EdgeKind, TableRecord};
use crate::report::{BucketInfo, SearchPlan};
use crate::stages::near::rounds::{held_in_memory, SearchShape};
use crate::stages::near::spill::{
    HeldFingerprints, Partitions, Replay, SpillDir, SpillShape, Waiting,
};
use crate::worker::WorkerCtx;

/// Fingerprints entered in the tables per activation: a round goes out in chunks, so the
/// search can take (or spill) them as they come instead of timely queueing all of them.
const ENTER_CHUNK: usize = 1 << 16;

/// What the search of this worker knows of the plan: nothing yet, in memory, or spilling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Planned {
    Unknown,
    InMemory,
    Spill(SpillShape),
}

/// How a record's bucket is found: a simhash table keys on the masked fingerprint, an LSH
/// band record carries its key already.
#[derive(Clone)]
pub(crate) enum Keys {
    Tables {
        masks: Vec<u64>,
        packers: Vec<KeyPacker>,
    },
    Bands,
}

impl Keys {
    fn of(ctx: &WorkerCtx) -> Keys {
        match ctx.shared.config.lsh {
            Some(_) => Keys::Bands,
            None => Keys::Tables {
                masks: ctx.shared.config.design.masks().to_vec(),
                packers: ctx.shared.config.design.packers(),
            },
        }
    }

    /// The key of `value` in `lane`.
    #[inline]
    pub(crate) fn key(&self, lane: u32, value: u64) -> u64 {
        match self {
            Keys::Tables { masks, .. } => value & masks[lane as usize],
            Keys::Bands => value,
        }
    }

    /// The key of `value` in `lane` as a `key_bits(lane)`-bit integer (for sorting).
    #[inline]
    pub(crate) fn packed(&self, lane: u32, value: u64) -> u64 {
        match self {
            Keys::Tables { packers, .. } => packers[lane as usize].pack(value),
            Keys::Bands => value,
        }
    }

    pub(crate) fn key_bits(&self, lane: u32) -> u32 {
        match self {
            Keys::Tables { packers, .. } => packers[lane as usize].bits(),
            Keys::Bands => 64,
        }
    }

    /// The worker that searches the bucket of `value` in `lane`: a mix of the lane and the
    /// key, reduced to a worker index (timely sends a route below `peers` to that worker).
    #[inline]
    fn worker(&self, lane: u32, value: u64, peers: usize) -> u64 {
        mix2(lane as u64, self.key(lane, value)) % peers as u64
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
    let keys = Keys::of(&ctx);
    let peers = ctx.peers;
    let searched = ProbeHandle::new();
    let planned = Rc::new(Cell::new(Planned::Unknown));
    let spill_dir = Rc::new(RefCell::new(SpillDir::new(&config.spill_root(), ctx.index)));
    let records = table_records(
        reps,
        ctx.clone(),
        lanes,
        searched.clone(),
        planned.clone(),
        spill_dir.clone(),
    );
    let search_ctx = ctx.clone();
    let search_keys = keys.clone();
    records
        .unary_frontier(
            // Every lane of a record routes to the same worker, so the first one stands for all.
            Exchange::new(move |r: &TableRecord| keys.worker(r.first_lane(), r.value, peers)),
            "SearchBuckets",
            move |_, _| {
                // Records by round (timestamp), each searched once its round is complete.
                let mut stash: BTreeMap<u64, (Capability<u64>, Store)> = BTreeMap::new();
                let mut done = false;
                move |(input, frontier), output| {
                    input.for_each(|cap, data| {
                        let time = *cap.least().expect("a time");
                        let entry = stash.entry(time).or_insert_with(|| {
                            (
                                cap.retain_least(output.output_index()).expect("a time"),
                                Store::Memory(Vec::new()),
                            )
                        });
                        let mut dir = spill_dir.borrow_mut();
                        let stored =
                            entry
                                .1
                                .add(data, time, planned.get(), &search_keys, &mut dir, lanes);
                        if let Err(e) = stored {
                            search_ctx.fail(spill_error(&dir, e));
                            data.clear();
                        }
                    });
                    let complete: Vec<u64> = stash
                        .keys()
                        .copied()
                        .filter(|t| !frontier.less_equal(t))
                        .collect();
                    for time in complete {
                        let (cap, store) = stash.remove(&time).expect("listed");
                        match store {
                            Store::Memory(records) => {
                                let edges = search(records, &search_keys, &search_ctx);
                                output.session(&cap).give_iterator(edges.into_iter());
                            }
                            Store::Spilled(partitions) => {
                                let searched = partitions.finish(&search_keys, |records| {
                                    let edges = search(records, &search_keys, &search_ctx);
                                    output.session(&cap).give_iterator(edges.into_iter());
                                });
                                match searched {
                                    Ok(bytes) => {
                                        search_ctx.report.borrow_mut().spilled_bytes += bytes
                                    }
                                    Err(e) => search_ctx.fail(spill_error(&spill_dir.borrow(), e)),
                                }
                            }
                        }
                    }
                    if frontier.is_empty() && stash.is_empty() && !done {
                        done = true;
                        spill_dir.borrow_mut().remove();
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

/// One round's records on the searching worker: in memory, or in partition files.
enum Store {
    Memory(Vec<TableRecord>),
    Spilled(Partitions),
}

impl Store {
    /// Takes `data` for round `round`, moving to partition files once the plan says so
    /// (records that came before this worker knew the plan are moved too).
    fn add(
        &mut self,
        data: &mut Vec<TableRecord>,
        round: u64,
        planned: Planned,
        keys: &Keys,
        dir: &mut SpillDir,
        lanes: usize,
    ) -> std::io::Result<()> {
        if let (Planned::Spill(shape), Store::Memory(held)) = (planned, &mut *self) {
            let held = std::mem::take(held);
            let mut partitions =
                Partitions::new(dir.sub(&format!("round-{round}"), true)?, lanes, shape);
            for record in &held {
                partitions.add(keys, record)?;
            }
            *self = Store::Spilled(partitions);
        }
        match self {
            Store::Memory(records) => records.append(data),
            Store::Spilled(partitions) => {
                for record in data.drain(..) {
                    partitions.add(keys, &record)?;
                }
            }
        }
        Ok(())
    }
}

fn spill_error(dir: &SpillDir, e: std::io::Error) -> String {
    format!(
        "spilling the table search to {}: {e} (free disk space, or choose another place with --spill-dir)",
        dir.path().display()
    )
}

/// Enters every representative in every table (or LSH band), a round of tables at a time.
///
/// The simple version emits all tables at once, so the search holds `tables` copies of
/// every fingerprint. With `--table-rounds N`, round `r` (timestamp `r + 1`) holds about
/// `tables / N` of them, and is emitted only once the search has finished the round before
/// (the `searched` probe): memory is bounded by one round. Each round goes out in chunks of
/// [`ENTER_CHUNK`] fingerprints, one per activation, and the fingerprints wait for their
/// rounds in a [`HeldFingerprints`], which spills past its share of the memory limit.
fn table_records<'s>(
    reps: StreamVec<'s, u64, DocFp>,
    ctx: Rc<WorkerCtx>,
    lanes: usize,
    searched: ProbeHandle<u64>,
    planned: Rc<Cell<Planned>>,
    spill_dir: Rc<RefCell<SpillDir>>,
) -> StreamVec<'s, u64, TableRecord> {
    let scope = reps.scope();
    let keys = Keys::of(&ctx);
    let peers = ctx.peers;
    // Every worker tells every worker how many fingerprints it holds and its process's
    // memory limit, so that all of them choose the same rounds from the same total and the
    // smallest limit (machines of a cluster may differ).
    let config = &ctx.shared.config;
    let limit = config.memory_limit.unwrap_or(u64::MAX);
    let band_keys = if let Keys::Bands = keys { lanes } else { 0 };
    let held_limit = held_in_memory(config.memory_limit, config.parallelism.workers, band_keys);
    let counts = count_to_every_worker(reps.clone(), peers, limit);
    reps.binary_frontier(
        counts,
        Pipeline,
        Exchange::new(|&(to, _, _): &(u64, u64, u64)| to),
        "TableRecords",
        move |cap, info| {
            let activator = scope.activator_for(info.address);
            let mut cap = Some(cap);
            // Only what the tables need: 24 bytes per fingerprint, and the band keys in
            // MinHash mode.
            let mut held = HeldFingerprints::new(band_keys, held_limit);
            let mut failed = false;
            let mut total = 0u64;
            let mut limit = u64::MAX;
            let mut plan: Option<(usize, usize)> = None; // (rounds, lanes per round)
            let mut round = 0usize;
            let mut replay: Option<Replay> = None;
            move |(input, frontier), (counts, counts_frontier), output| {
                input.for_each(|_, data| {
                    let mut dir = spill_dir.borrow_mut();
                    for doc in data.drain(..) {
                        if failed {
                            continue;
                        }
                        let waiting = Waiting {
                            doc_id: doc.doc_id,
                            simhash: doc.simhash,
                            rank: doc.rank,
                        };
                        if let Err(e) = held.push(waiting, &doc.bands, &mut dir) {
                            ctx.fail(spill_error(&dir, e));
                            failed = true;
                        }
                    }
                });
                counts.for_each(|_, data| {
                    for &(_, n, l) in data.iter() {
                        total += n;
                        limit = limit.min(l);
                    }
                });
                if !frontier.is_empty() || !counts_frontier.is_empty() {
                    return;
                }
                let Some(c) = cap.as_mut() else { return };
                let (rounds, per_round) =
                    *plan.get_or_insert_with(|| plan_rounds(&ctx, total, lanes, limit, &planned));
                if replay.is_none() {
                    // Round r goes out at time r + 1, once round r - 1 (time r) has been
                    // searched.
                    if round > 0 && searched.less_equal(&(round as u64)) {
                        activator.activate();
                        return;
                    }
                    if round == rounds {
                        cap = None;
                        return;
                    }
                    c.downgrade(&(round as u64 + 1));
                    match held.replay() {
                        Ok(r) => replay = Some(r),
                        Err(e) => {
                            ctx.fail(spill_error(&spill_dir.borrow(), e));
                            cap = None;
                            return;
                        }
                    }
                }
                let lanes_now = round * per_round..((round + 1) * per_round).min(lanes);
                let mut records = 0u64;
                let entered = {
                    let mut session = output.session(&*c);
                    let mut groups = Vec::new();
                    let replay = replay.as_mut().expect("a round under way");
                    held.next_chunk(replay, ENTER_CHUNK, |doc, bands| {
                        if let Keys::Tables { .. } = keys {
                            for chunk in lanes_now.clone().step_by(64) {
                                let lanes = chunk..(chunk + 64).min(lanes_now.end);
                                group_by_worker(&keys, lanes, doc.simhash, peers, &mut groups);
                                for &(_, mask) in &groups {
                                    session.give(TableRecord {
                                        base: chunk as u32,
                                        lanes: mask,
                                        value: doc.simhash,
                                        doc_id: doc.doc_id,
                                        rank: doc.rank,
                                    });
                                }
                            }
                        } else {
                            for band in lanes_now.clone() {
                                session.give(TableRecord {
                                    base: band as u32,
                                    lanes: 1,
                                    value: bands[band],
                                    doc_id: doc.doc_id,
                                    rank: doc.rank,
                                });
                            }
                        }
                        records += lanes_now.len() as u64;
                    })
                };
                ctx.report.borrow_mut().table_records += records;
                Progress::add(&ctx.shared.progress.table_records, records);
                let round_over = match entered {
                    Ok(n) => n < ENTER_CHUNK,
                    Err(e) => {
                        ctx.fail(spill_error(&spill_dir.borrow(), e));
                        true
                    }
                };
                if round_over {
                    replay = None;
                    round += 1;
                    if round == rounds {
                        // Nothing is entered after the last round: free the fingerprints
                        // (and their file) before its search, which is where memory peaks.
                        let spilled = held.spilled_bytes();
                        ctx.report.borrow_mut().spilled_bytes += spilled;
                        held = HeldFingerprints::new(0, 1);
                    }
                    // Hold the next round's time only, so the probe can see this round
                    // finish.
                    c.downgrade(&(round as u64 + 1));
                }
                activator.activate();
            }
        },
    )
}

/// Sends `(worker, n, limit)` to every worker once the stream is complete, `n` being the
/// number of records this worker saw.
fn count_to_every_worker<'s>(
    reps: StreamVec<'s, u64, DocFp>,
    peers: usize,
    limit: u64,
) -> StreamVec<'s, u64, (u64, u64, u64)> {
    reps.unary_frontier(Pipeline, "CountFingerprints", move |cap, _| {
        let mut cap = Some(cap);
        let mut n = 0u64;
        move |(input, frontier), output| {
            input.for_each(|_, data| n += data.len() as u64);
            if frontier.is_empty() {
                if let Some(cap) = cap.take() {
                    let mut session = output.session(&cap);
                    for to in 0..peers as u64 {
                        session.give((to, n, limit));
                    }
                }
            }
        }
    })
}

/// Chooses the rounds (and whether to spill) for `total` fingerprints and the smallest
/// memory limit of the cluster (`u64::MAX`: none), the same on every worker, tells this
/// worker's search, and records the plan in the report. Returns (rounds, lanes per round).
fn plan_rounds(
    ctx: &WorkerCtx,
    total: u64,
    lanes: usize,
    limit: u64,
    planned: &Cell<Planned>,
) -> (usize, usize) {
    let limit = (limit != u64::MAX).then_some(limit);
    let config = &ctx.shared.config;
    let shape = SearchShape {
        fingerprints: total,
        lanes,
        bands: config.lsh.is_some(),
        workers: ctx.peers,
        workers_here: config.parallelism.workers,
        min_partition_entries: config.spill_min_partition,
    };
    let choice = shape.choose(config.table_rounds, limit);
    let rounds = choice.rounds;
    planned.set(match choice.spill {
        Some(spill) => Planned::Spill(spill),
        None => Planned::InMemory,
    });
    let estimated_bytes = match (&choice.spill, limit) {
        (Some(spill), Some(limit)) => shape.spill_estimate(spill, rounds, limit),
        _ => shape.estimate(rounds),
    };
    let mut report = ctx.report.borrow_mut();
    report.search_plan = Some(SearchPlan {
        fingerprints: total,
        rounds,
        estimated_bytes,
        memory_limit: limit,
        spill_partition_bits: choice.spill.map(|s| s.bits),
    });
    report.warnings.extend(choice.warning);
    (rounds, lanes.div_ceil(rounds))
}

/// The workers that `fp`'s tables in `lanes` (at most 64) send it to, each with the mask of
/// its lanes (bit `i` for lane `lanes.start + i`).
fn group_by_worker(
    keys: &Keys,
    lanes: std::ops::Range<usize>,
    fp: u64,
    peers: usize,
    groups: &mut Vec<(u64, u64)>,
) {
    groups.clear();
    if peers == 1 {
        // One worker takes every lane: no routing hash to compute per table.
        let all = match lanes.len() {
            0 => return,
            width => u64::MAX >> (64 - width),
        };
        groups.push((0, all));
        return;
    }
    for lane in lanes.clone() {
        let worker = keys.worker(lane as u32, fp, peers);
        let bit = 1u64 << (lane - lanes.start);
        match groups.iter_mut().find(|(w, _)| *w == worker) {
            Some((_, mask)) => *mask |= bit,
            None => groups.push((worker, bit)),
        }
    }
}

/// Searches every bucket of this worker's records for one round.
///
/// The simple version sorts all records by (table, key) and walks the runs. Here each
/// lane (table or band) is grouped on its own, over compact `(packed key, index)` entries
/// with a radix sort ([`KeyGrouper`]), so the 40-byte records are never moved.
fn search(mut records: Vec<TableRecord>, keys: &Keys, ctx: &WorkerCtx) -> Vec<Edge> {
    // Band records carry one lane each and arrive interleaved: bring each band together.
    // Table records of one round mostly share one base, and then this pass is skipped.
    if records.windows(2).any(|w| w[0].base != w[1].base) {
        radsort::sort_by_key(&mut records, |r| r.base);
    }
    let mut grouper = KeyGrouper::default();
    let mut state = BucketState::new(ctx);
    let (mut values, mut lanes) = (Vec::new(), Vec::new());
    for slice in records.chunk_by(|a, b| a.base == b.base) {
        let base = slice[0].base;
        // Each lane reads 16 bytes per record from these, not the whole 40-byte record.
        values.clear();
        values.extend(slice.iter().map(|r| r.value));
        lanes.clear();
        lanes.extend(slice.iter().map(|r| r.lanes));
        let present = lanes.iter().fold(0u64, |all, &l| all | l);
        for bit in (0..64).filter(|bit| present & (1u64 << bit) != 0) {
            let lane = base + bit;
            let entries = values
                .iter()
                .zip(&lanes)
                .enumerate()
                .filter(|(_, (_, &l))| l & (1u64 << bit) != 0)
                .map(|(i, (&v, _))| (keys.packed(lane, v), i as u64));
            grouper.group(keys.key_bits(lane), slice.len(), entries, |_, members| {
                state.bucket(keys, lane, slice, members)
            });
        }
    }
    state.finish(keys)
}

/// What the search of one round accumulates: its edges and its counters.
struct BucketState<'a> {
    ctx: &'a WorkerCtx,
    searcher: BucketSearch,
    items: Vec<Item>,
    edges: Vec<Edge>,
    comparisons: u64,
    splits: u64,
    hot: Vec<BucketInfo>,
}

impl<'a> BucketState<'a> {
    fn new(ctx: &'a WorkerCtx) -> Self {
        let config = &ctx.shared.config;
        BucketState {
            ctx,
            searcher: BucketSearch {
                k: config.design.k(),
                leaf_size: config.leaf_size,
            },
            items: Vec::new(),
            edges: Vec::new(),
            comparisons: 0,
            splits: 0,
            hot: Vec::new(),
        }
    }

    /// Searches one bucket: the records at `members` of `slice`, which share their key in
    /// `lane`.
    fn bucket(&mut self, keys: &Keys, lane: u32, slice: &[TableRecord], members: &[u64]) {
        let record = |i: u64| &slice[i as usize];
        if members.len() >= DEFAULT_HOT_BUCKET {
            self.hot.push(BucketInfo {
                table: lane,
                key: format!("{:016x}", keys.key(lane, record(members[0]).value)),
                size: members.len() as u64,
            });
        }
        if let Keys::Bands = keys {
            // Every pair sharing a band is a candidate; the same pair from several bands is
            // removed, and candidates are verified, in the next stage.
            for (i, &x) in members.iter().enumerate() {
                for &y in &members[i + 1..] {
                    let (x, y) = (record(x), record(y));
                    self.edges.push(Edge::new(
                        (x.doc_id, x.rank),
                        (y.doc_id, y.rank),
                        0,
                        EdgeKind::Near,
                    ));
                }
            }
            self.comparisons += (members.len() * (members.len() - 1) / 2) as u64;
            return;
        }
        let design = &self.ctx.shared.config.design;
        let table = lane as usize;
        if let [x, y] = members {
            // Most buckets are a single pair: compare it directly.
            let (x, y) = (record(*x), record(*y));
            self.comparisons += 1;
            let d = neardup_core::hamming(x.value, y.value);
            if d <= self.searcher.k && design.first_shared_table(x.value, y.value) == Some(table) {
                self.edges.push(Edge::new(
                    (x.doc_id, x.rank),
                    (y.doc_id, y.rank),
                    d,
                    EdgeKind::Near,
                ));
            }
            return;
        }
        // Items carry their record's index, which leads back to doc_id and rank.
        self.items.clear();
        self.items.extend(members.iter().map(|&i| Item {
            fp: record(i).value,
            doc: i,
        }));
        let accept = |a: u64, b: u64| design.first_shared_table(a, b) == Some(table);
        let edges = &mut self.edges;
        let stats = self.searcher.search(
            &mut self.items,
            design.masks()[table],
            &accept,
            &mut |a, b, d| {
                let (x, y) = (record(a.doc), record(b.doc));
                edges.push(Edge::new(
                    (x.doc_id, x.rank),
                    (y.doc_id, y.rank),
                    d,
                    EdgeKind::Near,
                ));
            },
        );
        self.comparisons += stats.comparisons;
        self.splits += stats.splits;
    }

    fn finish(self, keys: &Keys) -> Vec<Edge> {
        let ctx = self.ctx;
        let mut report = ctx.report.borrow_mut();
        for info in self.hot {
            report.note_bucket(info);
        }
        report.comparisons += self.comparisons;
        report.splits += self.splits;
        // Pairs that go on to verification (or deduplication) are counted there.
        if matches!(keys, Keys::Tables { .. }) && ctx.shared.config.verify.is_none() {
            report.near_pairs += self.edges.len() as u64;
            Progress::add(&ctx.shared.progress.pairs, self.edges.len() as u64);
        }
        report.candidates += self.edges.len() as u64;
        self.edges
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_core::tables::TableDesign;

    /// The simple version: each lane goes to `keys.worker(lane)`, one bit per lane.
    fn lane_by_lane(keys: &Keys, lanes: std::ops::Range<usize>, fp: u64, peers: usize) -> u64 {
        let mut sent = 0u64;
        for lane in lanes.clone() {
            assert!((keys.worker(lane as u32, fp, peers) as usize) < peers);
            sent |= 1 << (lane - lanes.start);
        }
        sent
    }

    #[test]
    fn lanes_are_grouped_by_their_worker() {
        let design = TableDesign::blocks(9, 5).expect("126 tables");
        let keys = Keys::Tables {
            masks: design.masks().to_vec(),
            packers: design.packers(),
        };
        let mut groups = Vec::new();
        let mut state = 7u64;
        for peers in [1usize, 2, 3, 16] {
            for lanes in [0..1, 0..16, 0..64, 64..126] {
                let fp = neardup_core::mix::splitmix64(&mut state);
                group_by_worker(&keys, lanes.clone(), fp, peers, &mut groups);
                // Every lane exactly once, each with the worker its own key routes it to.
                let mut covered = 0u64;
                for &(worker, mask) in &groups {
                    assert_eq!(covered & mask, 0, "a lane in two groups");
                    covered |= mask;
                    for bit in (0..64).filter(|b| mask & (1u64 << b) != 0) {
                        let lane = (lanes.start + bit) as u32;
                        assert_eq!(keys.worker(lane, fp, peers), worker);
                    }
                }
                assert_eq!(covered, lane_by_lane(&keys, lanes.clone(), fp, peers));
                if peers == 1 {
                    assert_eq!(groups.len(), 1, "one worker takes every lane at once");
                }
            }
        }
        group_by_worker(&keys, 3..3, 1, 1, &mut groups);
        assert!(groups.is_empty(), "no lanes, no groups");
    }
}
