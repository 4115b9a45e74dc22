//! The clusters table: one row per document, written by the worker the document is home to,
//! in `doc_id` order: its assignment if it is in a cluster, otherwise `cluster_id = -1`.
//!
//! The simple version collects the home's document numbers in a `Vec` and the assignments
//! in a hash map, sorts the first and looks each up in the second. That holds 8 bytes per
//! document and the assignments at once. Here both go into one external sort
//! ([`SortComplete`]), keyed by document number with an assignment just before its
//! document, so the rows come out of the merge in order, each document meeting its
//! assignment, within [`CLUSTER_ROWS_SORT_SHARE`] of the worker's part of `--memory-limit`.
//!
//! The duplicate-id count ([`count_duplicate_ids`]) is the same idea on the users' ids.

use std::rc::Rc;

use neardup_io::parquet_out::{ClusterRow, PartWriter};
use neardup_io::spill::SpillRecord;
use serde::{Deserialize, Serialize};
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::vec::Map;
use timely::dataflow::operators::Concat;
use timely::dataflow::StreamVec;

use crate::config::{CLUSTER_ROWS_SORT_SHARE, IDS_SORT_SHARE};
use crate::operators::sort::ordered_by;
use crate::operators::SortComplete;
use crate::output::{OutputDirs, Table};
use crate::records::Assignment;
use crate::stages::clusters::RemovedAtHome;
use crate::worker::WorkerCtx;

/// A document read at its home, or the assignment of one: sorted by document number, an
/// assignment before its document.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum AtHome {
    Assigned(Assignment),
    Doc(u64),
}

impl AtHome {
    fn key(&self) -> (u64, u8) {
        match self {
            AtHome::Assigned(a) => (a.doc_id, 0),
            AtHome::Doc(d) => (*d, 1),
        }
    }
}

ordered_by!(AtHome, |r| r.key());
impl SpillRecord for AtHome {}

/// The clusters part being written, and the assignment waiting for its document.
struct Rows {
    writer: Option<PartWriter<ClusterRow>>,
    waiting: Option<Assignment>,
    removed: u64,
    failed: bool,
}

impl Rows {
    /// Writes `row`, opening the part first; a failed write fails the run, once.
    fn push(&mut self, row: Option<ClusterRow>, ctx: &WorkerCtx) {
        if self.failed {
            return;
        }
        let written = match self.writer.as_mut() {
            Some(w) => Ok(w),
            None => {
                let dir = OutputDirs::new(&ctx.shared.config.output).table(Table::Clusters);
                let meta = crate::output::search_meta(&ctx.shared.config);
                PartWriter::<ClusterRow>::create(&dir, ctx.part(), &meta)
                    .map(|w| self.writer.insert(w))
            }
        }
        .and_then(|w| row.map_or(Ok(()), |row| w.push(row)));
        if let Err(e) = written {
            ctx.fail(e.to_string());
            self.failed = true;
        }
    }
}

/// Each home worker writes one clusters row per document it fingerprinted (`doc_ids`, at
/// their home): the assignment if the document is in a cluster, otherwise
/// `cluster_id = -1`. With `removed_at_home`, the documents this worker's rows remove are
/// also kept there.
pub fn write_clusters<'s>(
    doc_ids: StreamVec<'s, u64, u64>,
    assignments: StreamVec<'s, u64, Assignment>,
    ctx: Rc<WorkerCtx>,
    removed_at_home: Option<RemovedAtHome>,
) -> StreamVec<'s, u64, ()> {
    let home = ctx.home.clone();
    let records = doc_ids
        .map(AtHome::Doc)
        .concat(assignments.map(AtHome::Assigned));
    let (each_ctx, end_ctx, fail_ctx) = (ctx.clone(), ctx.clone(), ctx.clone());
    let rows = Rows {
        writer: None,
        waiting: None,
        removed: 0,
        failed: false,
    };
    let (done, _) = records.sort_complete_split::<AtHome, (), (), _, _>(
        Exchange::new(ctx.meter("clusters", move |r: &AtHome| home.route(r.key().0))),
        "WriteClusters",
        ctx.sort::<AtHome>("clusters", CLUSTER_ROWS_SORT_SHARE),
        rows,
        |_, _| {},
        move |rows, record, _, _| match record {
            AtHome::Assigned(a) => {
                if !a.keep {
                    rows.removed += 1;
                    if let Some(set) = &removed_at_home {
                        set.borrow_mut().insert(a.doc_id);
                    }
                }
                rows.waiting = Some(a);
            }
            AtHome::Doc(doc) => {
                let row = match rows.waiting.take().filter(|a| a.doc_id == doc) {
                    Some(a) => ClusterRow {
                        doc_id: doc,
                        cluster_id: a.cluster_id as i64,
                        cluster_size: a.cluster_size,
                        keep: a.keep,
                        kept_doc_id: a.kept_doc_id,
                        hamming: a.hamming,
                        jaccard: a.jaccard,
                    },
                    None => ClusterRow::alone(doc),
                };
                rows.push(Some(row), &each_ctx);
            }
        },
        move |mut rows, stats, _, _| {
            end_ctx.sorted("clusters", stats);
            // A worker home to no document still writes its (empty) part.
            rows.push(None, &end_ctx);
            if let (Some(w), false) = (rows.writer, rows.failed) {
                match w.commit() {
                    Ok(path) => {
                        let mut report = end_ctx.report.borrow_mut();
                        report.parts.push(path.display().to_string());
                        report.documents_to_remove += rows.removed;
                    }
                    Err(e) => end_ctx.fail(e.to_string()),
                }
            }
            end_ctx.stage_done("write");
        },
        move |e| fail_ctx.sort_failed("clusters", e),
    );
    done
}

/// Counts documents whose user id another document already has (allowed, but reported):
/// the ids' hashes meet by value, sorted (within [`IDS_SORT_SHARE`] of the worker's part of
/// the limit), and each hash seen N times counts N - 1.
pub fn count_duplicate_ids<'s>(id_hashes: StreamVec<'s, u64, u64>, ctx: Rc<WorkerCtx>) {
    let (end_ctx, fail_ctx) = (ctx.clone(), ctx.clone());
    // Only the id's hash travels, and only for documents that have an id.
    let _ = id_hashes.sort_complete_split::<u64, (), (), _, _>(
        Exchange::new(ctx.meter("duplicate ids", |&h: &u64| h)),
        "DuplicateIds",
        ctx.sort::<u64>("ids", IDS_SORT_SHARE),
        (None::<u64>, 0u64),
        |_, _| {},
        |(last, repeats), h, _, _| {
            *repeats += u64::from(*last == Some(h));
            *last = Some(h);
        },
        move |(_, repeats), stats, _, _| {
            end_ctx.sorted("ids", stats);
            end_ctx.report.borrow_mut().duplicate_ids += repeats;
        },
        move |e| fail_ctx.sort_failed("ids", e),
    );
}
