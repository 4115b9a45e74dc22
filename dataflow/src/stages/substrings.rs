//! Repeated passages across workers: every window of `N` bytes that occurs at least twice in
//! the corpus, found exactly whatever the number of workers and processes (the semantics are
//! in `neardup_core::substrings` and docs/substrings.md).
//!
//! The idea: each worker holds a share of the documents and finds the distinct windows of its
//! share with suffix arrays; the windows of all workers then meet by a 128-bit key, and each
//! meeting decides which copies are reported. Only windows that can repeat travel: an anchor
//! round first says which (`neardup_core::substrings::anchors`). Six operators:
//!
//! 1. **Parse** (at each document's home, as the fingerprint stage does): a document's text,
//!    and the reader's backpressure probe.
//! 2. **Pack** (same worker): documents are packed into blocks of at most `block_bytes`
//!    ([`block_bytes`]); every anchor of every document (16 bytes: its k-gram's hash and where
//!    it lies) goes to the owner of the hash. For `N` below 16 there are no anchors.
//! 3. **Anchors** (at the hash's owner): once all have arrived, the anchors whose hash occurs
//!    twice or more (hot) go back to where they lie.
//! 4. **Scan** (back at the blocks' worker, once every hot anchor is known; one block per
//!    activation): the block gets a suffix array and LCP array, one scan of which yields
//!    every distinct window of the block with all its positions. One [`WindowRecord`] (key,
//!    first position, count up to 2: 32 bytes) goes to the key's owner per distinct window
//!    with a hot anchor (every window that occurs twice has one); the copies of a window
//!    after the block's first are marked here at once, since they cannot be the corpus's
//!    first. The suffix array is freed; the text stays, for snapping.
//! 5. **Resolve** (at the key's owner): once every record has arrived, the records of each
//!    key are folded, [`RESOLVE_BATCH`] per activation; a key seen twice or more in all
//!    answers each record with a [`Verdict`]: is this record's first position the first in
//!    the corpus?
//! 6. **Report** (back at the record's origin): verdicts become window starts, window starts
//!    become merged, snapped ranges per document, written to this worker's part of
//!    `substrings/`, sorted by `(doc_id, start)`.
//!
//! Records travel once and verdicts only for repeated windows. A key's records all reach
//! one worker, which sees every occurrence count and every first position, and an anchor's
//! records all reach one worker, which sees every occurrence of its hash: the result cannot
//! depend on how documents were spread over workers or blocks (the core tests check splits
//! into 1, 2 and 4 blocks against the definition; tests/substrings_cli.rs checks 1, 2 and 4
//! workers, spilling and two processes end to end).

use std::cell::RefCell;
use std::rc::Rc;

use neardup_core::substrings::{
    hot_anchors, AnchorRecord, Bits, Block, Collector, Verdict, WindowRecord, Winnow, MAX_BLOCKS,
    MAX_ORIGINS,
};
use neardup_io::parquet_out::{PartWriter, SubstringRow, TableMeta, NO_SCHEME};
use neardup_io::record::Record;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::{ProbeHandle, StreamVec};

use crate::config::{JobInput, SubstringJob};
use crate::operators::collect::Give;
use crate::operators::CollectComplete;
use crate::output::{OutputDirs, Table};
use crate::progress::Progress;
use crate::records::{RawBody, RawDoc};
use crate::report::SubstringCounts;
use crate::stages::clusters::RemovedAtHome;
use crate::stages::near::spill::SpillDir;
use crate::stages::substring_spill::OwnedRecords;
use crate::worker::WorkerCtx;

/// A document's text at its home, with its id as written.
#[derive(Clone, Debug)]
pub struct DocText {
    pub doc_id: u64,
    pub id: Option<String>,
    pub text: String,
}

/// The metadata of `substrings/`: no fingerprint scheme; the search's parameters.
pub fn substrings_meta(job: &SubstringJob) -> TableMeta {
    TableMeta {
        scheme: NO_SCHEME.to_string(),
        params: serde_json::json!({
            "substrings": {
                "min_bytes": job.settings.min_bytes,
                "occurrences": job.settings.occurrences.name(),
                "snap": job.settings.snap.name(),
            }
        }),
    }
}

/// Parses every document at its home; the probe goes on the result (the readers wait on it).
/// With `removed` (`run --substrings`), the documents it holds are dropped before parsing:
/// they are not searched and cannot hold a first copy.
pub fn parse_documents<'s>(
    raw: StreamVec<'s, u64, RawDoc>,
    ctx: Rc<WorkerCtx>,
    parsed: &ProbeHandle<u64>,
    removed: Option<RemovedAtHome>,
) -> StreamVec<'s, u64, DocText> {
    let home = ctx.home.clone();
    use timely::dataflow::operators::Probe;
    raw.unary(
        Exchange::new(ctx.meter("substrings", move |d: &RawDoc| home.route(d.doc_id))),
        "SubstringParse",
        move |_, _| {
            let mut record = Record::default();
            move |input, output| {
                input.for_each(|cap, data| {
                    let mut session = output.session(&cap);
                    let removed = removed.as_ref().map(|r| r.borrow());
                    for doc in data.drain(..) {
                        if removed.as_ref().is_some_and(|r| r.contains(doc.doc_id)) {
                            continue;
                        }
                        if let Some(text) = parse(&ctx, doc, &mut record) {
                            session.give(text);
                        }
                    }
                });
            }
        },
    )
    .probe_with(parsed)
}

fn parse(ctx: &WorkerCtx, doc: RawDoc, record: &mut Record) -> Option<DocText> {
    let shared = &ctx.shared;
    if shared.config.substrings.is_some_and(|job| job.only) {
        // `run --substrings` counted its documents in the first pass.
        Progress::add(&shared.progress.docs_fingerprinted, 1);
    }
    let parsed = match doc.body {
        RawBody::Raw(line) => {
            let JobInput::Documents { fields, .. } = &shared.config.input else {
                // Refused by validation: a search for repeats reads documents.
                ctx.fail("repeated passages need documents, not fingerprints".into());
                return None;
            };
            let kind = shared.plan.files[doc.file as usize].format.kind();
            kind.parse_into(&line, fields, record)
                .map(|()| std::mem::take(record))
                .map_err(|e| {
                    kind.record_error(shared.plan.path(doc.file), doc.record, e)
                        .to_string()
                })
        }
        RawBody::Fields(fields) => Ok(fields),
        RawBody::Invalid(message) => Err(message),
        RawBody::Fingerprint { .. } => {
            Err("repeated passages need documents, not fingerprints".into())
        }
    };
    match parsed {
        Ok(r) => {
            if shared.config.substrings.is_some_and(|job| job.only) {
                // `run --substrings` counted truncation in its first pass.
                ctx.report.borrow_mut().truncated += u64::from(r.truncated);
            }
            Some(DocText {
                doc_id: doc.doc_id,
                id: r.id,
                text: r.text,
            })
        }
        Err(message) => {
            if shared.config.skip_invalid {
                ctx.report.borrow_mut().skip(doc.file, doc.record, message);
            } else {
                ctx.fail(message);
            }
            None
        }
    }
}

/// What a worker holds between the operators: its blocks (their texts stay, for snapping),
/// the hot anchors of each, the collector and the counts.
#[derive(Default)]
struct Held {
    blocks: Vec<Block>,
    /// Hot anchors by block (offsets in the block), when anchors filter.
    hot: Vec<Bits>,
    /// `(doc_id, id)` of every document held, for the rows.
    ids: Vec<(u64, Option<String>)>,
    collector: Collector,
    counts: SubstringCounts,
}

/// Finds the repeated passages of `docs` and writes this worker's part of `substrings/`:
/// operators 2 to 6 of the module docs, one function each, sharing what the worker holds.
pub fn find_substrings<'s>(
    docs: StreamVec<'s, u64, DocText>,
    ctx: Rc<WorkerCtx>,
    job: SubstringJob,
) {
    let held = Rc::new(RefCell::new(Held::default()));
    if ctx.peers > MAX_ORIGINS {
        ctx.fail(format!(
            "repeated passages: at most {MAX_ORIGINS} workers in all, not {}",
            ctx.peers
        ));
    }
    let anchors = pack(docs, &ctx, &job, held.clone());
    let hot = count_anchors(anchors, &ctx);
    let records = scan(hot, &ctx, &job, held.clone());
    let verdicts = resolve(records, &ctx, held.clone());
    report_verdicts(verdicts, ctx, job, held);
}

/// Operator 2, pack: documents into blocks; each document's anchors to the owner of their hash.
fn pack<'s>(
    docs: StreamVec<'s, u64, DocText>,
    ctx: &Rc<WorkerCtx>,
    job: &SubstringJob,
    held: Rc<RefCell<Held>>,
) -> StreamVec<'s, u64, AnchorRecord> {
    let n = job.settings.min_bytes;
    let origin = ctx.index;
    let config = &ctx.shared.config;
    let block_bytes = block_bytes(job, config.memory_limit, config.parallelism.workers);
    let ctx = ctx.clone();
    docs.unary_frontier(Pipeline, "SubstringPack", move |cap, _| {
        let mut cap = Some(cap);
        let mut block = Block::new();
        let mut winnow = Winnow::new(n);
        move |(input, frontier), output| {
            let Some(c) = cap.as_ref() else {
                input.for_each(|_, _| {});
                return;
            };
            let mut out = Vec::new();
            input.for_each(|_, data| {
                let mut h = held.borrow_mut();
                for doc in data.drain(..) {
                    let bytes = doc.text.len();
                    if !block.is_empty() && block.len() + bytes > block_bytes {
                        h.blocks.push(std::mem::take(&mut block));
                    }
                    let index = h.blocks.len();
                    if index >= MAX_BLOCKS {
                        ctx.fail(format!(
                            "repeated passages: one worker holds more than {MAX_BLOCKS} blocks of \
                             {block_bytes} bytes; use more workers or a larger block"
                        ));
                        continue;
                    }
                    let start = block.len();
                    if let Err(e) = block.push(doc.doc_id, doc.text.as_bytes()) {
                        ctx.fail(e.to_string());
                        continue;
                    }
                    if let Some(w) = winnow.as_mut() {
                        let before = out.len();
                        w.anchors(doc.text.as_bytes(), |a, hash| {
                            out.push(AnchorRecord::new(hash, origin, index, start + a))
                        });
                        h.counts.anchor_records += (out.len() - before) as u64;
                    }
                    h.ids.push((doc.doc_id, doc.id));
                    h.counts.documents += 1;
                    h.counts.bytes += bytes as u64;
                }
            });
            if frontier.is_empty() {
                let last = std::mem::take(&mut block);
                if !last.is_empty() {
                    held.borrow_mut().blocks.push(last);
                }
            }
            if !out.is_empty() {
                output.session(c).give_iterator(out.into_iter());
            }
            if frontier.is_empty() {
                cap = None;
            }
        }
    })
}

/// Operator 3, count: the anchors of one hash meet at its owner; the hot ones go back.
fn count_anchors<'s>(
    anchors: StreamVec<'s, u64, AnchorRecord>,
    ctx: &WorkerCtx,
) -> StreamVec<'s, u64, AnchorRecord> {
    anchors.collect_complete(
        Exchange::new(ctx.meter("substrings", |r: &AnchorRecord| r.hash)),
        "SubstringAnchors",
        Vec::new(),
        |owned, data| owned.append(data),
        |mut owned, session| hot_anchors(&mut owned, |r| session.give(r)),
    )
}

/// Operator 4, scan: once every hot anchor is known, one block per activation: its suffix array,
/// one record per distinct window that can repeat.
///
/// Not [`CollectComplete`]: what it does once the anchors are complete takes many
/// activations (one block each, so the records of one block at a time wait in the channel).
fn scan<'s>(
    hot: StreamVec<'s, u64, AnchorRecord>,
    ctx: &Rc<WorkerCtx>,
    job: &SubstringJob,
    held: Rc<RefCell<Held>>,
) -> StreamVec<'s, u64, WindowRecord> {
    let n = job.settings.min_bytes;
    let origin = ctx.index;
    let scope = hot.scope();
    let route = ctx.meter("substrings", |r: &AnchorRecord| r.origin() as u64);
    let ctx = ctx.clone();
    hot.unary_frontier(Exchange::new(route), "SubstringScan", move |cap, info| {
        let activator = scope.activator_for(info.address);
        let mut cap = Some(cap);
        let mut next = 0usize;
        let mut winnow = Winnow::new(n);
        move |(input, frontier), output| {
            input.for_each(|_, data| {
                let mut h = held.borrow_mut();
                let Held { blocks, hot, .. } = &mut *h;
                for r in data.drain(..) {
                    while hot.len() <= r.block() {
                        hot.push(Bits::new(blocks[hot.len()].len()));
                    }
                    hot[r.block()].set(r.offset());
                }
            });
            if !frontier.is_empty() {
                return;
            }
            let Some(c) = cap.as_ref() else {
                return;
            };
            let mut h = held.borrow_mut();
            if next < h.blocks.len() {
                let mut session = output.session(c);
                let mut sent = 0u64;
                let Held {
                    blocks,
                    hot,
                    collector,
                    counts,
                    ..
                } = &mut *h;
                let block = &blocks[next];
                let keep = winnow.as_mut().map(|w| match hot.get(next) {
                    Some(hot) => block.hot_windows(w, hot),
                    // No anchor of this block is hot: none of its windows can repeat.
                    None => Bits::new(block.len()),
                });
                if let Some(hot) = hot.get_mut(next) {
                    *hot = Bits::default();
                }
                if let Err(e) = collector.scan(block, n, origin as u32, keep.as_ref(), |r| {
                    sent += 1;
                    session.give(r)
                }) {
                    ctx.fail(e.to_string());
                }
                counts.blocks += 1;
                counts.window_records += sent;
                drop(session);
                drop(h);
                next += 1;
                activator.activate();
            } else {
                ctx.stage_done("substrings scan");
                cap = None;
            }
        }
    })
}

/// Operator 5, resolve: every record of a key meets at its owner, in memory up to the worker's
/// share of --memory-limit and in sorted runs on disk beyond it.
///
/// Not [`CollectComplete`]: once the records are complete it folds them
/// [`RESOLVE_BATCH`] per activation, so that only one batch of verdicts waits in the channel.
fn resolve<'s>(
    records: StreamVec<'s, u64, WindowRecord>,
    ctx: &Rc<WorkerCtx>,
    held: Rc<RefCell<Held>>,
) -> StreamVec<'s, u64, Verdict> {
    let config = &ctx.shared.config;
    let budget = OwnedRecords::budget(config.memory_limit, config.parallelism.workers);
    let spill_dir = SpillDir::new(&config.spill_root(), ctx.index);
    let scope = records.scope();
    let route = ctx.meter("substrings", |r: &WindowRecord| {
        ((r.key >> 64) as u64) ^ (r.key as u64)
    });
    let ctx = ctx.clone();
    records.unary_frontier(
        Exchange::new(route),
        "SubstringResolve",
        move |cap, info| {
            let activator = scope.activator_for(info.address);
            let mut cap = Some(cap);
            let mut owned = Some(OwnedRecords::new(spill_dir, budget));
            move |(input, frontier), output| {
                input.for_each(|_, data| {
                    if let Some(o) = owned.as_mut() {
                        if let Err(e) = o.extend(data) {
                            ctx.fail(spill_error(o, e));
                            owned = None;
                        }
                    }
                });
                if !frontier.is_empty() {
                    return;
                }
                let Some(c) = cap.as_ref() else {
                    return;
                };
                let Some(o) = owned.as_mut() else {
                    cap = None;
                    return;
                };
                let mut session = output.session(c);
                let result = o.resolve_some(RESOLVE_BATCH, |v| session.give(v));
                drop(session);
                match result {
                    Ok(false) => activator.activate(),
                    Ok(true) | Err(_) => {
                        if let Err(e) = result {
                            ctx.fail(spill_error(o, e));
                        }
                        let mut h = held.borrow_mut();
                        h.counts.spill_runs += o.spill_runs;
                        h.counts.spilled_bytes += o.spilled_bytes;
                        o.remove();
                        owned = None;
                        cap = None;
                    }
                }
            }
        },
    )
}

/// Operator 6, report: verdicts to window starts to ranges, at the origin.
fn report_verdicts<'s>(
    verdicts: StreamVec<'s, u64, Verdict>,
    ctx: Rc<WorkerCtx>,
    job: SubstringJob,
    held: Rc<RefCell<Held>>,
) {
    verdicts.collect_complete(
        Exchange::new(ctx.meter("substrings", |v: &Verdict| v.origin as u64)),
        "SubstringReport",
        held,
        move |held, data| {
            let mut h = held.borrow_mut();
            for v in data.drain(..) {
                h.collector.apply(v, job.settings.occurrences);
            }
        },
        move |held, _: &mut Give<'_, '_, u64, ()>| {
            let taken = std::mem::take(&mut *held.borrow_mut());
            report(&ctx, taken, &job);
        },
    );
}

/// A worker's share of `--memory-limit` per byte of block. While a block is scanned it costs
/// its suffix array (4 bytes per byte) and permuted LCP array (4), and the records it sends
/// wait in the channel (32 per distinct window sent: 30% of the positions of dev-medium, 9.6
/// bytes per byte); beside it the worker holds all its text, its window-start bits and up to
/// a quarter of its share in owned records. With 32 the block alone was planned to fill the
/// share, and dev-medium under `--memory-limit 600M` peaked at 661 MiB (18.75 MiB blocks);
/// with 64, at 498 MiB (one worker) and 527 MiB (two; medians of three), and 7% faster at
/// one worker (smaller suffix arrays stay closer to the cache; three interleaved runs each),
/// for 4% more records.
pub const BLOCK_COST: u64 = 64;

/// The block size: `--block-bytes` (or its default), made smaller when a worker's share of
/// `--memory-limit` would not hold [`BLOCK_COST`] bytes per byte of it (never below 1 MiB).
pub fn block_bytes(job: &SubstringJob, memory_limit: Option<u64>, workers: usize) -> usize {
    match memory_limit {
        None => job.block_bytes,
        Some(limit) => {
            let within = (limit / workers.max(1) as u64 / BLOCK_COST).max(1 << 20);
            job.block_bytes.min(within as usize)
        }
    }
}

/// The records the owner folds per activation before its verdicts go on (about 32 MiB of
/// records; the verdicts of one batch are what waits in the channel to their origins).
pub const RESOLVE_BATCH: usize = 1 << 20;

/// A failed spill, naming the directory.
fn spill_error(owned: &OwnedRecords, e: std::io::Error) -> String {
    format!(
        "repeated passages: cannot spill window records to {}: {e}",
        owned.dir().display()
    )
}

/// Turns this worker's window starts into ranges and writes its part.
fn report(ctx: &WorkerCtx, mut held: Held, job: &SubstringJob) {
    let ranges = held.collector.ranges(&held.blocks, &job.settings);
    held.ids.sort_unstable_by_key(|d| d.0);
    let mut counts = std::mem::take(&mut held.counts);
    counts.min_bytes = job.settings.min_bytes as u64;
    counts.occurrences = job.settings.occurrences.name().to_string();
    counts.snap = job.settings.snap.name().to_string();
    counts.ranges = ranges.len() as u64;
    counts.repeated_bytes = ranges.iter().map(|r| r.end - r.start).sum();
    counts.documents_touched = {
        let mut touched: Vec<u64> = ranges.iter().map(|r| r.doc_id).collect();
        touched.dedup();
        touched.len() as u64
    };
    counts.repeated_share = if counts.bytes == 0 {
        0.0
    } else {
        counts.repeated_bytes as f64 / counts.bytes as f64
    };
    let dir = OutputDirs::new(&ctx.shared.config.output).table(Table::Substrings);
    let written = PartWriter::<SubstringRow>::create(&dir, ctx.part(), &substrings_meta(job))
        .and_then(|mut w| {
            for r in &ranges {
                let at = held.ids.partition_point(|d| d.0 < r.doc_id);
                let id = held.ids.get(at).and_then(|d| d.1.clone());
                w.push(SubstringRow {
                    doc_id: r.doc_id,
                    id,
                    start: r.start,
                    end: r.end,
                })?;
            }
            w.commit()
        });
    let mut report = ctx.report.borrow_mut();
    match written {
        Ok(path) => report.parts.push(path.display().to_string()),
        Err(e) => report.errors.push(e.to_string()),
    }
    if job.only {
        // `run --substrings` counted the corpus in its first pass.
        report.documents += counts.documents;
        report.bytes += counts.bytes;
    }
    report.substrings = Some(counts);
    drop(report);
    ctx.stage_done("substrings");
}
