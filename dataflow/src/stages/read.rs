//! Reading: each worker reads its own units and hands documents on in batches.
//!
//! Each batch gets its own timestamp. A reader does not start batch `e` until the
//! fingerprinting stage (on every worker) has finished batch `e - batches_in_flight`, which
//! it learns from a probe: timely has no backpressure of its own, and without this a fast
//! reader would pile the whole corpus up in channels ahead of the slower hashing.

use std::collections::VecDeque;
use std::rc::Rc;

use neardup_io::record::FieldSpec;
use neardup_io::source::{Payload, RecordReader, SourceRecord};
use neardup_io::IoError;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::operator::source;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::Capability;
use timely::dataflow::{ProbeHandle, Scope, StreamVec};

use crate::config::JobInput;
use crate::progress::Progress;
use crate::records::{doc_id, RawBody, RawDoc};
use crate::worker::WorkerCtx;

/// The documents this worker reads, batch by batch.
pub fn read_units<'s>(
    scope: Scope<'s, u64>,
    ctx: Rc<WorkerCtx>,
    fingerprinted: ProbeHandle<u64>,
) -> StreamVec<'s, u64, RawDoc> {
    read_units_as(scope, ctx, fingerprinted, None)
}

/// [`read_units`] with other fields than the job's (`None`: the job's): a pass that reads
/// the corpus its own way, as the templates stage reads pages in `text` mode.
pub fn read_units_as<'s>(
    scope: Scope<'s, u64>,
    ctx: Rc<WorkerCtx>,
    fingerprinted: ProbeHandle<u64>,
    fields: Option<FieldSpec>,
) -> StreamVec<'s, u64, RawDoc> {
    source(scope, "Read", move |capability, info| {
        let activator = scope.activator_for(info.address);
        let mut read = ReadLoop::new(capability, ctx, fingerprinted, true);
        if let Some(fields) = fields {
            // A pass of its own: the main read counts the corpus and shows progress.
            read.reader.fields = fields;
            read.reader.counts = false;
        }
        move |output| match read
            .step(|cap, batch| output.session(cap).give_iterator(batch.into_iter()))
        {
            Next::Now => activator.activate(),
            Next::Later => activator.activate_after(PACING_RETRY),
            Next::Done => {}
        }
    })
}

/// The documents this worker reads, read again once `gate` is complete (nothing is read
/// before): a later pass over the corpus. Its readers count nothing and show no progress
/// (the first pass did); `parsed` paces them as `fingerprinted` paces the first.
pub fn read_units_after<'s>(
    gate: StreamVec<'s, u64, ()>,
    ctx: Rc<WorkerCtx>,
    parsed: ProbeHandle<u64>,
) -> StreamVec<'s, u64, RawDoc> {
    let scope = gate.scope();
    gate.unary_frontier(Pipeline, "ReadAgain", move |capability, info| {
        let activator = scope.activator_for(info.address);
        let mut read = ReadLoop::new(capability, ctx, parsed, false);
        move |(input, frontier), output| {
            input.for_each(|_, _| {});
            if !frontier.is_empty() {
                return;
            }
            match read.step(|cap, batch| output.session(cap).give_iterator(batch.into_iter())) {
                Next::Now => activator.activate(),
                Next::Later => activator.activate_after(PACING_RETRY),
                Next::Done => {}
            }
        }
    })
}

/// How long a reader that waits for the stage it feeds waits before it looks again. Long
/// enough that the worker parks instead of spinning on its activations (at 2 workers,
/// spinning took 4% of the CPU in timely's activation bookkeeping alone), short against a
/// batch's fingerprinting (a batch of 1 MiB takes milliseconds).
pub const PACING_RETRY: std::time::Duration = std::time::Duration::from_micros(200);

/// When a reader wants to run again.
enum Next {
    /// At once: it gave a batch.
    Now,
    /// After [`PACING_RETRY`]: it waits for the stage it feeds.
    Later,
    /// Never: every unit is read (or the job failed).
    Done,
}

/// A reader's loop: a batch per step, each at its own time, paced by a probe.
struct ReadLoop {
    capability: Option<Capability<u64>>,
    epoch: u64,
    reader: UnitReader,
    ctx: Rc<WorkerCtx>,
    paced_by: ProbeHandle<u64>,
}

impl ReadLoop {
    fn new(
        capability: Capability<u64>,
        ctx: Rc<WorkerCtx>,
        paced_by: ProbeHandle<u64>,
        counts: bool,
    ) -> Self {
        let mut reader = UnitReader::new(ctx.clone());
        reader.counts = counts;
        ReadLoop {
            capability: Some(capability),
            epoch: 0,
            reader,
            ctx,
            paced_by,
        }
    }

    /// Gives the next batch (if the stage it feeds has caught up); when to come back.
    fn step(&mut self, give: impl FnOnce(&Capability<u64>, Vec<RawDoc>)) -> Next {
        let Some(cap) = self.capability.as_mut() else {
            return Next::Done;
        };
        let lag = self.ctx.shared.config.batches_in_flight;
        if self.epoch >= lag && self.paced_by.less_than(&(self.epoch - lag)) {
            // Wait for the next stage to catch up: a probe wakes nobody, so look again a
            // little later, leaving the worker to the stages that have work (or to park).
            return Next::Later;
        }
        if self.ctx.shared.aborted() {
            self.capability = None;
            return Next::Done;
        }
        let mut batch = Vec::new();
        let more = self.reader.next_batch(&mut batch);
        give(cap, batch);
        match more {
            Ok(true) => {
                self.epoch += 1;
                cap.downgrade(&self.epoch);
                Next::Now
            }
            Ok(false) => {
                if self.reader.counts {
                    self.ctx.stage_done("read");
                }
                self.capability = None;
                Next::Done
            }
            Err(e) => {
                self.ctx.fail(e.to_string());
                self.capability = None;
                Next::Done
            }
        }
    }
}

/// Walks this worker's units, a batch at a time.
struct UnitReader {
    ctx: Rc<WorkerCtx>,
    units: VecDeque<usize>,
    /// The unit being read: its file and its reader.
    current: Option<(u32, Box<dyn RecordReader>)>,
    /// The fields to read (fingerprint tables have fixed columns and ignore them).
    fields: FieldSpec,
    /// The record being read, reused so that line buffers are allocated once.
    record: SourceRecord,
    /// Whether blank lines, skipped records and progress are counted (the first pass).
    counts: bool,
}

impl UnitReader {
    fn new(ctx: Rc<WorkerCtx>) -> Self {
        let units = ctx.shared.plan.units_for(ctx.index, ctx.peers).into();
        let fields = match &ctx.shared.config.input {
            JobInput::Documents { fields, .. } => {
                let mut fields = fields.clone();
                // Every pass after the templates stage extracts pages without them.
                fields.templates = ctx.shared.templates.get().cloned();
                fields
            }
            JobInput::Fingerprints { .. } => FieldSpec {
                text_field: String::new(),
                id_field: None,
                extra_field: None,
                ..Default::default()
            },
        };
        UnitReader {
            ctx,
            units,
            current: None,
            fields,
            record: SourceRecord::default(),
            counts: true,
        }
    }

    /// Appends up to a batch of documents; `Ok(false)` once every unit is read.
    fn next_batch(&mut self, batch: &mut Vec<RawDoc>) -> Result<bool, IoError> {
        let config = &self.ctx.shared.config;
        let (max_records, max_bytes) = (config.batch_records, config.batch_bytes);
        let mut bytes = 0usize;
        while batch.len() < max_records && bytes < max_bytes {
            if let Some((file, reader)) = self.current.as_mut() {
                let file = *file;
                if !reader.next_into(&mut self.record)? {
                    self.current = None;
                    continue;
                }
                let record = self.record.record;
                let body = match &mut self.record.payload {
                    Payload::Blank(line) => {
                        bytes += line.len();
                        self.ctx.report.borrow_mut().blank_lines += u64::from(self.counts);
                        continue;
                    }
                    Payload::Raw(line) => RawBody::Raw(line.clone()),
                    Payload::Fields(r) => RawBody::Fields(std::mem::take(r)),
                    Payload::Skipped(reason) => {
                        if self.counts {
                            self.ctx.report.borrow_mut().skip_record(*reason);
                        }
                        continue;
                    }
                    Payload::Fingerprint(fp) => RawBody::Fingerprint {
                        simhash: fp.simhash,
                        bytes: fp.bytes,
                        empty: fp.empty,
                    },
                    Payload::Invalid(e) => {
                        let path = self.ctx.shared.plan.path(file);
                        let kind = self.ctx.shared.plan.files[file as usize].format.kind();
                        RawBody::Invalid(kind.record_error(path, record, e.clone()).to_string())
                    }
                };
                // Fingerprints keep the numbers of the run that computed them.
                let doc_id = match &self.record.payload {
                    Payload::Fingerprint(fp) => fp.doc_id,
                    _ => doc_id(file, record),
                };
                let doc = RawDoc {
                    doc_id,
                    file,
                    record,
                    body,
                };
                bytes += approximate_size(&doc);
                batch.push(doc);
                continue;
            }
            match self.units.pop_front() {
                Some(unit) => self.open(unit)?,
                None => {
                    self.count(batch, bytes);
                    return Ok(false);
                }
            }
        }
        self.count(batch, bytes);
        Ok(true)
    }

    fn count(&self, batch: &[RawDoc], bytes: usize) {
        if !self.counts {
            return;
        }
        let progress = &self.ctx.shared.progress;
        Progress::add(&progress.docs_read, batch.len() as u64);
        Progress::add(&progress.bytes_read, bytes as u64);
    }

    /// Starts reading a unit through its file's source kind.
    fn open(&mut self, unit: usize) -> Result<(), IoError> {
        let plan = &self.ctx.shared.plan;
        let unit = &plan.units[unit];
        let input = &plan.files[unit.file as usize];
        let reader = input.format.kind().open(input, &unit.spec, &self.fields)?;
        self.current = Some((unit.file, reader));
        // The next unit's first blocks, asked for now when it lies in a store: they arrive
        // while this one is read.
        if let Some(&next) = self.units.front() {
            let next = &plan.units[next];
            let file = &plan.files[next.file as usize];
            if let Some((start, end)) = next.spec.streamed_bytes(file) {
                neardup_io::store::prefetch(&file.path, start, end);
            }
        }
        Ok(())
    }
}

fn approximate_size(doc: &RawDoc) -> usize {
    match &doc.body {
        RawBody::Raw(line) => line.len(),
        RawBody::Fields(record) => record.text.len(),
        RawBody::Fingerprint { .. } => 24,
        RawBody::Invalid(m) => m.len(),
    }
}
