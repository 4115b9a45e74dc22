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
use timely::dataflow::operators::generic::operator::source;
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
    source(scope, "Read", move |capability, info| {
        let activator = scope.activator_for(info.address);
        let mut capability = Some(capability);
        let mut epoch = 0u64;
        let mut reader = UnitReader::new(ctx.clone());
        move |output| {
            let Some(cap) = capability.as_mut() else {
                return;
            };
            let lag = ctx.shared.config.batches_in_flight;
            if epoch >= lag && fingerprinted.less_than(&(epoch - lag)) {
                // Wait for the fingerprinting stage to catch up.
                activator.activate();
                return;
            }
            if ctx.shared.aborted() {
                capability = None;
                return;
            }
            let mut batch = Vec::new();
            let more = reader.next_batch(&mut batch);
            output.session(cap).give_iterator(batch.into_iter());
            match more {
                Ok(true) => {
                    epoch += 1;
                    cap.downgrade(&epoch);
                    activator.activate();
                }
                Ok(false) => {
                    ctx.stage_done("read");
                    capability = None;
                }
                Err(e) => {
                    ctx.fail(e.to_string());
                    capability = None;
                }
            }
        }
    })
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
}

impl UnitReader {
    fn new(ctx: Rc<WorkerCtx>) -> Self {
        let units = ctx.shared.plan.units_for(ctx.index, ctx.peers).into();
        let fields = match &ctx.shared.config.input {
            JobInput::Documents { fields, .. } => fields.clone(),
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
                        self.ctx.report.borrow_mut().blank_lines += 1;
                        continue;
                    }
                    Payload::Raw(line) => RawBody::Raw(line.clone()),
                    Payload::Fields(r) => RawBody::Fields(std::mem::take(r)),
                    Payload::Skipped(reason) => {
                        self.ctx.report.borrow_mut().skip_record(*reason);
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
