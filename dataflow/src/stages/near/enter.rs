//! Entering the tables: every representative goes into every table (or LSH band), a round
//! of tables at a time.
//!
//! The simple version emits all tables at once, so the search holds `tables` copies of
//! every fingerprint. With `--table-rounds N`, round `r` (timestamp `r + 1`) holds about
//! `tables / N` of them, and is emitted only once the search has finished the round before
//! (the `searched` probe): memory is bounded by one round. Each round goes out in chunks of
//! [`ENTER_CHUNK`] fingerprints, one per activation, and the fingerprints wait for their
//! rounds in a [`HeldFingerprints`], which spills past its share of the memory limit.
//!
//! The operator ([`table_records`]) only moves data and capabilities; what it does with them
//! is the state machine [`TableEntry`], tested on its own below.

use std::cell::{Cell, RefCell};
use std::io;
use std::ops::Range;
use std::rc::Rc;

use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::{ProbeHandle, StreamVec};
use timely::progress::operate::FrontierInterest;

use super::keys::Keys;
use super::rounds::{held_in_memory, SearchShape};
use super::spill::{HeldFingerprints, Replay, SpillDir, Waiting};
use super::{spill_error, Planned};
use crate::operators::CollectComplete;
use crate::progress::Progress;
use crate::records::{DocFp, TableRecord};
use crate::report::SearchPlan;
use crate::stages::read::PACING_RETRY;
use crate::worker::WorkerCtx;

/// Fingerprints entered in the tables per activation: a round goes out in chunks, so the
/// search can take (or spill) them as they come instead of timely queueing all of them.
pub const ENTER_CHUNK: usize = 1 << 16;

/// What the entering operator should do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// The previous round is still being searched: come back later.
    Wait,
    /// Every round is entered.
    Finished,
    /// Enter (more of) the round at this timestamp.
    Enter(u64),
}

/// One worker's fingerprints on their way into the tables, round by round.
pub struct TableEntry {
    keys: Keys,
    lanes: usize,
    peers: usize,
    held: HeldFingerprints,
    /// Fingerprints of every worker, and the smallest memory limit among their processes.
    total: u64,
    limit: u64,
    /// (rounds, lanes per round), once planned.
    plan: Option<(usize, usize)>,
    round: usize,
    replay: Option<Replay>,
    /// Per-worker routing groups, reused.
    groups: Vec<(u64, u64)>,
}

impl TableEntry {
    /// `lanes` tables or bands, routed over `peers` workers; at most `held_limit`
    /// fingerprints wait in memory (the rest spill).
    pub fn new(keys: Keys, lanes: usize, peers: usize, held_limit: usize) -> Self {
        let band_keys = if let Keys::Bands = keys { lanes } else { 0 };
        TableEntry {
            keys,
            lanes,
            peers,
            held: HeldFingerprints::new(band_keys, held_limit),
            total: 0,
            limit: u64::MAX,
            plan: None,
            round: 0,
            replay: None,
            groups: Vec::new(),
        }
    }

    /// Keeps a representative until its rounds come (only what the tables need: 24 bytes,
    /// and the band keys in MinHash mode).
    pub fn hold(&mut self, doc: &DocFp, dir: &mut SpillDir) -> io::Result<()> {
        let waiting = Waiting {
            doc_id: doc.doc_id,
            simhash: doc.simhash,
            rank: doc.rank,
        };
        self.held.push(waiting, &doc.bands, dir)
    }

    /// Takes one worker's count of fingerprints and its process's memory limit.
    pub fn count(&mut self, fingerprints: u64, limit: u64) {
        self.total += fingerprints;
        self.limit = self.limit.min(limit);
    }

    /// The rounds, chosen once from every worker's counts by `choose(total, limit)`, which
    /// returns (rounds, lanes per round).
    pub fn plan(&mut self, choose: impl FnOnce(u64, u64) -> (usize, usize)) -> (usize, usize) {
        let (total, limit) = (self.total, self.limit);
        *self.plan.get_or_insert_with(|| choose(total, limit))
    }

    /// What to do next, given whether the round at a timestamp has been searched yet
    /// (`pending(t)`: the search may still hold records at time `t`). Starts a round's replay
    /// when one begins. Call after [`plan`](Self::plan).
    pub fn next(&mut self, pending: impl Fn(u64) -> bool) -> io::Result<Next> {
        let (rounds, _) = self.plan.expect("planned before entering");
        if self.replay.is_none() {
            // Once the last round is entered there is nothing to wait for: its search goes
            // on without this operator (which used to re-activate itself until the search
            // was over: at 16 workers, 26,000 times a worker in a run of 100,000 documents).
            if self.round == rounds {
                return Ok(Next::Finished);
            }
            // Round r goes out at time r + 1, once round r - 1 (time r) has been searched.
            if self.round > 0 && pending(self.round as u64) {
                return Ok(Next::Wait);
            }
            self.replay = Some(self.held.replay()?);
        }
        Ok(Next::Enter(self.time()))
    }

    /// The timestamp of the round being entered (or next to be).
    pub fn time(&self) -> u64 {
        self.round as u64 + 1
    }

    /// Enters the next chunk of the current round through `give`. After the last round the
    /// held fingerprints are freed before its search, which is where memory peaks.
    pub fn enter_chunk(&mut self, mut give: impl FnMut(TableRecord)) -> io::Result<Entered> {
        let (rounds, per_round) = self.plan.expect("planned before entering");
        let lanes_now = self.round * per_round..((self.round + 1) * per_round).min(self.lanes);
        let (keys, peers, groups) = (&self.keys, self.peers, &mut self.groups);
        let mut entries = 0u64;
        let replay = self.replay.as_mut().expect("a round under way");
        let entered = self.held.next_chunk(replay, ENTER_CHUNK, |doc, bands| {
            if let Keys::Tables { .. } = keys {
                for chunk in lanes_now.clone().step_by(64) {
                    let lanes = chunk..(chunk + 64).min(lanes_now.end);
                    group_by_worker(keys, lanes, doc.simhash, peers, groups);
                    for &(_, mask) in groups.iter() {
                        give(TableRecord {
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
                    give(TableRecord {
                        base: band as u32,
                        lanes: 1,
                        value: bands[band],
                        doc_id: doc.doc_id,
                        rank: doc.rank,
                    });
                }
            }
            entries += lanes_now.len() as u64;
        })?;
        let mut done = Entered {
            entries,
            round_over: entered < ENTER_CHUNK,
            freed: None,
        };
        if done.round_over {
            self.replay = None;
            self.round += 1;
            if self.round == rounds {
                // Nothing is entered after the last round: free the fingerprints (and
                // their file).
                done.freed = Some(self.held.spilled_bytes());
                self.held = HeldFingerprints::new(0, 1);
            }
        }
        Ok(done)
    }
}

/// What one call of [`TableEntry::enter_chunk`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entered {
    /// (fingerprint, lane) entries made.
    pub entries: u64,
    /// The round is complete; the next one is at [`TableEntry::time`].
    pub round_over: bool,
    /// After the last round: the held fingerprints were freed, having spilled this many
    /// bytes.
    pub freed: Option<u64>,
}

/// Builds the entering operator: holds the representatives, learns every worker's count,
/// plans the rounds, and enters them one after the other.
pub fn table_records<'s>(
    reps: StreamVec<'s, u64, DocFp>,
    ctx: Rc<WorkerCtx>,
    keys: Keys,
    lanes: usize,
    searched: ProbeHandle<u64>,
    planned: Rc<Cell<Planned>>,
    spill_dir: Rc<RefCell<SpillDir>>,
) -> StreamVec<'s, u64, TableRecord> {
    let scope = reps.scope();
    let peers = ctx.peers;
    // Every worker tells every worker how many fingerprints it holds and its process's
    // memory limit, so that all of them choose the same rounds from the same total and the
    // smallest limit (machines of a cluster may differ).
    let config = &ctx.shared.config;
    let limit = config.memory_limit.unwrap_or(u64::MAX);
    let band_keys = if let Keys::Bands = keys { lanes } else { 0 };
    let held_limit = held_in_memory(config.memory_limit, config.parallelism.workers, band_keys);
    let (reps, sizes) = with_batch_sizes(reps);
    let counts = count_to_every_worker(sizes, peers, limit);
    let routes = keys.route_group_ids();
    reps.binary_frontier(
        counts,
        Pipeline,
        Exchange::new(ctx.meter("near search", |&(to, _, _): &(u64, u64, u64)| to)),
        "TableRecords",
        move |cap, info| {
            let activator = scope.activator_for(info.address);
            let mut cap = Some(cap);
            let mut entry = TableEntry::new(keys, lanes, peers, held_limit);
            let mut failed = false;
            move |(input, frontier), (counts, counts_frontier), output| {
                input.for_each(|_, data| {
                    let mut dir = spill_dir.borrow_mut();
                    for doc in data.drain(..) {
                        if failed {
                            continue;
                        }
                        if let Err(e) = entry.hold(&doc, &mut dir) {
                            ctx.fail(spill_error(&dir, e));
                            failed = true;
                        }
                    }
                });
                counts.for_each(|_, data| {
                    for &(_, n, l) in data.iter() {
                        entry.count(n, l);
                    }
                });
                if !frontier.is_empty() || !counts_frontier.is_empty() {
                    return;
                }
                let Some(c) = cap.as_mut() else { return };
                entry.plan(|total, limit| {
                    plan_rounds(&ctx, total, lanes, limit, &planned, routes.clone())
                });
                match entry.next(|time| searched.less_equal(&time)) {
                    Ok(Next::Wait) => {
                        // The probe wakes no one: look again shortly, parked meanwhile.
                        activator.activate_after(PACING_RETRY);
                        return;
                    }
                    Ok(Next::Finished) => {
                        cap = None;
                        return;
                    }
                    Ok(Next::Enter(time)) => c.downgrade(&time),
                    Err(e) => {
                        ctx.fail(spill_error(&spill_dir.borrow(), e));
                        cap = None;
                        return;
                    }
                }
                let entered = {
                    let mut session = output.session(&*c);
                    entry.enter_chunk(|record| session.give(record))
                };
                match entered {
                    Ok(done) => {
                        let mut report = ctx.report.borrow_mut();
                        report.table_records += done.entries;
                        report.spilled_bytes += done.freed.unwrap_or(0);
                        Progress::add(&ctx.shared.progress.table_records, done.entries);
                        if done.round_over {
                            // Hold the next round's time only, so the probe can see this
                            // round finish.
                            c.downgrade(&entry.time());
                        }
                    }
                    Err(e) => {
                        ctx.fail(spill_error(&spill_dir.borrow(), e));
                        cap = None;
                        return;
                    }
                }
                activator.activate();
            }
        },
    )
}

/// `reps` itself and the size of each of its batches, with no copy of the records.
///
/// The simple version counts `reps.clone()`: but timely clones every batch for each reader
/// of a stream but the last, so every representative, with its vector of band keys in
/// MinHash mode, was copied (an allocation each) only to be counted.
fn with_batch_sizes<'s>(
    reps: StreamVec<'s, u64, DocFp>,
) -> (StreamVec<'s, u64, DocFp>, StreamVec<'s, u64, u64>) {
    let mut builder = OperatorBuilder::new("BatchSizes".to_owned(), reps.scope());
    let mut input = builder.new_input(reps, Pipeline);
    builder.set_notify_for(0, FrontierInterest::Never);
    let (mut docs_out, docs) = builder.new_output::<Vec<DocFp>>();
    let (mut sizes_out, sizes) = builder.new_output::<Vec<u64>>();
    builder.build(move |_| {
        move |_frontiers| {
            let mut docs_out = docs_out.activate();
            let mut sizes_out = sizes_out.activate();
            input.for_each_stamp(|cap, batches| {
                for batch in batches {
                    sizes_out.give(&cap, &mut vec![batch.len() as u64]);
                    docs_out.give(&cap, batch);
                }
            });
        }
    });
    (docs, sizes)
}

/// Sends `(worker, n, limit)` to every worker once the stream is complete, `n` being the
/// sum of `sizes`: the number of records this worker saw.
fn count_to_every_worker<'s>(
    sizes: StreamVec<'s, u64, u64>,
    peers: usize,
    limit: u64,
) -> StreamVec<'s, u64, (u64, u64, u64)> {
    sizes.collect_complete(
        Pipeline,
        "CountFingerprints",
        0u64,
        |n, data| *n += data.iter().sum::<u64>(),
        move |n, session| {
            for to in 0..peers as u64 {
                session.give((to, n, limit));
            }
        },
    )
}

/// Chooses the rounds (and whether to spill) for `total` fingerprints and the smallest
/// memory limit of the cluster (`u64::MAX`: none), the same on every worker, tells this
/// worker's search, and records the plan in the report. `routes` are the lanes' route groups
/// ([`Keys::route_group_ids`]). Returns (rounds, lanes per round).
fn plan_rounds(
    ctx: &WorkerCtx,
    total: u64,
    lanes: usize,
    limit: u64,
    planned: &Cell<Planned>,
    routes: Vec<u64>,
) -> (usize, usize) {
    let limit = (limit != u64::MAX).then_some(limit);
    let config = &ctx.shared.config;
    let shape = SearchShape {
        fingerprints: total,
        lanes,
        bands: config.lsh.is_some(),
        workers: ctx.peers,
        workers_here: config.parallelism.workers,
        routes,
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
pub(super) fn group_by_worker(
    keys: &Keys,
    lanes: Range<usize>,
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
    // The lanes of a route group go to one worker: its route is computed once.
    let mut last: Option<(u64, u64)> = None;
    for lane in lanes.clone() {
        let group = keys.route_group(lane as u32);
        let worker = match last {
            Some((g, worker)) if g == group => worker,
            _ => keys.worker(lane as u32, fp, peers),
        };
        last = Some((group, worker));
        let bit = 1u64 << (lane - lanes.start);
        match groups.iter_mut().find(|(w, _)| *w == worker) {
            Some((_, mask)) => *mask |= bit,
            None => groups.push((worker, bit)),
        }
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
        let keys = Keys::tables(design.masks());
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

    fn keys_of(design: &TableDesign) -> Keys {
        Keys::tables(design.masks())
    }

    fn doc(doc_id: u64, simhash: u64) -> DocFp {
        DocFp {
            doc_id,
            simhash,
            exact_key: 0,
            rank: doc_id * 10,
            empty: false,
            id_hash: None,
            bands: Vec::new(),
            digest: None,
            url_key: None,
            host_hash: None,
            page: None,
        }
    }

    /// Drives a `TableEntry` as its operator does, with `pending` standing for the search
    /// probe, and returns the records of each round.
    fn enter_all(entry: &mut TableEntry, rounds: usize) -> Vec<Vec<TableRecord>> {
        let (planned, per_round) = entry.plan(|_, _| (rounds, 16usize.div_ceil(rounds)));
        assert_eq!((planned, per_round), (rounds, 16usize.div_ceil(rounds)));
        let mut by_round: Vec<Vec<TableRecord>> = Vec::new();
        loop {
            // The search is still busy with the round just entered: wait, unless it was
            // the last.
            if !by_round.is_empty() {
                let waits = if by_round.len() < rounds {
                    Next::Wait
                } else {
                    Next::Finished
                };
                assert_eq!(entry.next(|_| true).unwrap(), waits);
            }
            match entry.next(|_| false).unwrap() {
                Next::Finished => break,
                Next::Wait => unreachable!("nothing pending"),
                Next::Enter(time) => {
                    assert_eq!(time, by_round.len() as u64 + 1, "round r at time r + 1");
                    let mut records = Vec::new();
                    loop {
                        let done = entry.enter_chunk(|r| records.push(r)).unwrap();
                        if done.round_over {
                            assert_eq!(done.freed.is_some(), by_round.len() + 1 == rounds);
                            break;
                        }
                    }
                    by_round.push(records);
                }
            }
        }
        by_round
    }

    #[test]
    fn table_entry_enters_every_lane_of_every_fingerprint_once_round_by_round() {
        let design = TableDesign::manku16();
        let dir = tempfile::tempdir().unwrap();
        for (peers, rounds, held_limit) in [(1, 1, 1000), (3, 4, 1000), (2, 3, 5)] {
            let mut spill = SpillDir::new(dir.path(), peers);
            let mut entry = TableEntry::new(keys_of(&design), 16, peers, held_limit);
            let mut state = 11u64;
            let docs: Vec<DocFp> = (0..50)
                .map(|i| doc(i, neardup_core::mix::splitmix64(&mut state)))
                .collect();
            for d in &docs {
                entry.hold(d, &mut spill).unwrap();
            }
            entry.count(50, u64::MAX);
            let by_round = enter_all(&mut entry, rounds);
            assert_eq!(by_round.len(), rounds);
            // The simple version: one (fingerprint, table) entry per table, each routed to
            // the worker of its own key.
            let per_round = 16usize.div_ceil(rounds);
            let keys = keys_of(&design);
            for d in &docs {
                let mut seen = 0u64;
                for (r, records) in by_round.iter().enumerate() {
                    for rec in records.iter().filter(|rec| rec.doc_id == d.doc_id) {
                        assert_eq!((rec.value, rec.rank), (d.simhash, d.rank));
                        for bit in (0..64).filter(|b| rec.lanes & (1u64 << b) != 0) {
                            let lane = rec.base as usize + bit;
                            assert!((r * per_round..(r + 1) * per_round).contains(&lane));
                            assert_eq!(seen & (1 << lane), 0, "lane {lane} entered twice");
                            seen |= 1 << lane;
                            let worker = keys.worker(lane as u32, d.simhash, peers);
                            assert_eq!(worker, keys.worker(rec.first_lane(), d.simhash, peers));
                        }
                    }
                }
                assert_eq!(seen, 0xffff, "every table of doc {}", d.doc_id);
            }
        }
    }

    #[test]
    fn table_entry_plans_once_from_every_count_and_the_smallest_limit() {
        let mut entry = TableEntry::new(Keys::Bands, 4, 2, 10);
        entry.count(5, 1000);
        entry.count(7, 300);
        let mut asked = None;
        entry.plan(|total, limit| {
            asked = Some((total, limit));
            (2, 2)
        });
        assert_eq!(asked, Some((12, 300)));
        assert_eq!(entry.plan(|_, _| unreachable!("planned once")), (2, 2));
    }
}
