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

pub mod buckets;
pub mod enter;
pub mod keys;
pub mod rounds;
pub mod signatures;
pub mod spill;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Capability, Concat, Probe};
use timely::dataflow::{ProbeHandle, StreamVec};

use self::buckets::{search, Searched};
use self::enter::table_records;
use self::keys::Keys;
use self::spill::{PartitionWalk, Partitions, SpillDir, SpillShape};
use crate::progress::Progress;
use crate::records::{DocFp, Edge, TableRecord};
use crate::worker::WorkerCtx;

/// What the search of this worker knows of the plan: nothing yet, in memory, or spilling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Planned {
    Unknown,
    InMemory,
    Spill(SpillShape),
}

/// The near pairs (candidates, in MinHash mode) among the representatives.
pub fn search_tables<'s>(
    reps: StreamVec<'s, u64, DocFp>,
    ctx: Rc<WorkerCtx>,
) -> StreamVec<'s, u64, Edge> {
    match ctx.shared.config.lsh {
        // Identical signatures are folded before the bands (the simhash search folds equal
        // fingerprints inside its buckets, where they all meet).
        Some(_) => {
            let (reps, folded) = signatures::fold_signatures(reps, ctx.clone());
            search_buckets(reps, ctx).concat(folded)
        }
        None => search_buckets(reps, ctx),
    }
}

fn search_buckets<'s>(
    reps: StreamVec<'s, u64, DocFp>,
    ctx: Rc<WorkerCtx>,
) -> StreamVec<'s, u64, Edge> {
    let config = &ctx.shared.config;
    let lanes = match config.lsh {
        Some(banding) => banding.bands,
        None => config.design.tables(),
    };
    let keys = Keys::of(config);
    let peers = ctx.peers;
    let searched = ProbeHandle::new();
    let planned = Rc::new(Cell::new(Planned::Unknown));
    let spill_dir = Rc::new(RefCell::new(SpillDir::new(&config.spill_root(), ctx.index)));
    let records = table_records(
        reps,
        ctx.clone(),
        keys.clone(),
        lanes,
        searched.clone(),
        planned.clone(),
        spill_dir.clone(),
    );
    let search_ctx = ctx.clone();
    let search_keys = keys.clone();
    let scope = records.scope();
    records
        .unary_frontier(
            // Every lane of a record routes to the same worker, so the first one stands for all.
            Exchange::new(ctx.meter("near search", move |r: &TableRecord| {
                keys.worker(r.first_lane(), r.value, peers)
            })),
            "SearchBuckets",
            move |_, info| {
                let activator = scope.activator_for(info.address);
                let mut rounds = Rounds::default();
                let mut done = false;
                move |(input, frontier), output| {
                    input.for_each(|cap, data| {
                        let time = *cap.least().expect("a time");
                        let entry = rounds.stash.entry(time).or_insert_with(|| {
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
                    while let Some((cap, edges, more)) = rounds.next(
                        |t| !frontier.less_equal(t),
                        &search_ctx,
                        &search_keys,
                        &spill_dir,
                    ) {
                        output.session(&cap).give_iterator(edges.into_iter());
                        if more {
                            // The operators after this one take the pairs first.
                            activator.activate();
                            break;
                        }
                    }
                    if frontier.is_empty() && rounds.is_empty() && !done {
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

/// Records by round (timestamp), each searched once its round is complete, and the spilled
/// round being searched, a partition per activation.
#[derive(Default)]
struct Rounds {
    stash: BTreeMap<u64, (Capability<u64>, Store)>,
    walking: Option<(Capability<u64>, PartitionWalk)>,
}

impl Rounds {
    fn is_empty(&self) -> bool {
        self.stash.is_empty() && self.walking.is_none()
    }

    /// The pairs of the next piece of the search: a round in memory whole, or the next
    /// partition of a spilled round, with the capability to give them at and whether the
    /// round has more partitions. `None` once no round that `complete` allows is left.
    fn next(
        &mut self,
        complete: impl Fn(&u64) -> bool,
        ctx: &WorkerCtx,
        keys: &Keys,
        spill_dir: &RefCell<SpillDir>,
    ) -> Option<(Capability<u64>, Vec<Edge>, bool)> {
        loop {
            let Some((cap, walk)) = self.walking.as_mut() else {
                let time = self.stash.keys().copied().find(|t| complete(t))?;
                let (cap, store) = self.stash.remove(&time).expect("listed");
                match store {
                    Store::Memory(records) => {
                        return Some((cap, search_round(ctx, records, keys), false));
                    }
                    Store::Spilled(partitions) => match partitions.walk() {
                        Ok(walk) => self.walking = Some((cap, walk)),
                        Err(e) => ctx.fail(spill_error(&spill_dir.borrow(), e)),
                    },
                }
                continue;
            };
            match walk.next(keys) {
                Ok(Some(records)) => {
                    return Some((cap.clone(), search_round(ctx, records, keys), true));
                }
                Ok(None) => ctx.report.borrow_mut().spilled_bytes += walk.spilled_bytes(),
                Err(e) => ctx.fail(spill_error(&spill_dir.borrow(), e)),
            }
            self.walking = None;
        }
    }
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

/// Searches one round's records and counts what the search did in the worker's report.
fn search_round(ctx: &WorkerCtx, records: Vec<TableRecord>, keys: &Keys) -> Vec<Edge> {
    let config = &ctx.shared.config;
    let Searched {
        edges,
        comparisons,
        splits,
        hot,
    } = search(records, keys, &config.design, config.leaf_size);
    let mut report = ctx.report.borrow_mut();
    for info in hot {
        report.note_bucket(info);
    }
    report.comparisons += comparisons;
    report.bucket_splits += splits;
    // Pairs that go on to verification (or deduplication) are counted there.
    if matches!(keys, Keys::Tables { .. }) && config.verify.is_none() {
        report.near_pairs += edges.len() as u64;
        Progress::add(&ctx.shared.progress.pairs, edges.len() as u64);
    }
    report.candidates += edges.len() as u64;
    edges
}

fn spill_error(dir: &SpillDir, e: std::io::Error) -> String {
    format!(
        "spilling the table search to {}: {e} (free disk space, or choose another place with --spill-dir)",
        dir.path().display()
    )
}
