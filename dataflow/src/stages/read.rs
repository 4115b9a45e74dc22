//! Reading: each worker reads its own units and hands documents on in batches.
//!
//! Each batch gets its own timestamp. A reader does not start batch `e` until the
//! fingerprinting stage (on every worker) has finished batch `e - batches_in_flight`, which
//! it learns from a probe: timely has no backpressure of its own, and without this a fast
//! reader would pile the whole corpus up in channels ahead of the slower hashing.

use std::collections::VecDeque;
use std::rc::Rc;

use neardup_io::jsonl::{FieldSpec, LineReader};
use neardup_io::parquet_in::{read_row_group, DEFAULT_READ_BATCH_ROWS};
use neardup_io::{fingerprints_in::read_fingerprint_row_group, plain::read_plain, IoError};
use timely::dataflow::operators::generic::operator::source;
use timely::dataflow::{ProbeHandle, Scope, StreamVec};

use crate::config::JobInput;
use crate::plan::UnitKind;
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
    lines: Option<(u32, LineReader)>,
    /// Documents decoded ahead (a Parquet row group is decoded whole).
    pending: VecDeque<RawDoc>,
    line: Vec<u8>,
}

impl UnitReader {
    fn new(ctx: Rc<WorkerCtx>) -> Self {
        let units = ctx.shared.plan.units_for(ctx.index, ctx.peers).into();
        UnitReader {
            ctx,
            units,
            lines: None,
            pending: VecDeque::new(),
            line: Vec::new(),
        }
    }

    fn fields(&self) -> Option<&FieldSpec> {
        match &self.ctx.shared.config.input {
            JobInput::Documents { fields, .. } => Some(fields),
            JobInput::Fingerprints { .. } => None,
        }
    }

    /// Appends up to a batch of documents; `Ok(false)` once every unit is read.
    fn next_batch(&mut self, batch: &mut Vec<RawDoc>) -> Result<bool, IoError> {
        let config = &self.ctx.shared.config;
        let (max_records, max_bytes) = (config.batch_records, config.batch_bytes);
        let mut bytes = 0usize;
        while batch.len() < max_records && bytes < max_bytes {
            if let Some(doc) = self.pending.pop_front() {
                bytes += approximate_size(&doc);
                batch.push(doc);
                continue;
            }
            if let Some((file, reader)) = self.lines.as_mut() {
                match reader.next_line(&mut self.line)? {
                    Some(line_number) => {
                        bytes += self.line.len();
                        if self.line.iter().all(u8::is_ascii_whitespace) {
                            self.ctx.report.borrow_mut().blank_lines += 1;
                            continue;
                        }
                        let record = line_number - 1;
                        batch.push(RawDoc {
                            doc_id: doc_id(*file, record),
                            file: *file,
                            record,
                            body: RawBody::JsonLine(self.line.clone()),
                        });
                    }
                    None => self.lines = None,
                }
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

    /// Starts reading a unit: opens a line reader, or decodes the unit into `pending`.
    fn open(&mut self, unit: usize) -> Result<(), IoError> {
        let plan = &self.ctx.shared.plan;
        let unit = &plan.units[unit];
        let file = unit.file;
        let input = &plan.files[file as usize];
        match &unit.kind {
            UnitKind::Jsonl => self.lines = Some((file, LineReader::open(input)?)),
            UnitKind::Plain => {
                let text = read_plain(input)?;
                let id = Some(plan.file_name(file).to_owned());
                self.pending.push_back(RawDoc {
                    doc_id: doc_id(file, 0),
                    file,
                    record: 0,
                    body: RawBody::Fields {
                        id,
                        text,
                        extra: None,
                    },
                });
            }
            UnitKind::Parquet(rg) => {
                let fields = self.fields().expect("document input").clone();
                let pending = &mut self.pending;
                read_row_group(
                    &input.path,
                    rg,
                    &fields,
                    DEFAULT_READ_BATCH_ROWS,
                    |row, record| {
                        let body = match record {
                            Ok(r) => RawBody::Fields {
                                id: r.id,
                                text: r.text,
                                extra: r.extra,
                            },
                            Err(e) => {
                                RawBody::Invalid(IoError::row(&input.path, row, e).to_string())
                            }
                        };
                        pending.push_back(RawDoc {
                            doc_id: doc_id(file, row),
                            file,
                            record: row,
                            body,
                        });
                        Ok(())
                    },
                )?;
            }
            UnitKind::Fingerprints(rg) => {
                let pending = &mut self.pending;
                read_fingerprint_row_group(&input.path, rg, |fp| {
                    pending.push_back(RawDoc {
                        doc_id: fp.doc_id,
                        file,
                        record: 0,
                        body: RawBody::Fingerprint {
                            simhash: fp.simhash,
                            bytes: fp.bytes,
                            empty: fp.empty,
                        },
                    });
                })?;
            }
        }
        Ok(())
    }
}

fn approximate_size(doc: &RawDoc) -> usize {
    match &doc.body {
        RawBody::JsonLine(line) => line.len(),
        RawBody::Fields { text, .. } => text.len(),
        RawBody::Fingerprint { .. } => 24,
        RawBody::Invalid(m) => m.len(),
    }
}
