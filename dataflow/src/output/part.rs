//! A worker's part of an output table written row by row, as a sorted walk gives the rows
//! (the pairs, mirrors and hosts tables): created when the stage is built, so that a worker
//! with no rows still writes its (empty) part, and committed once at the walk's end.

use neardup_io::parquet_out::{OutputRow, PartWriter};

use super::{OutputDirs, Table};
use crate::worker::WorkerCtx;

/// This worker's part of a table, written row by row as a walk gives them (possibly
/// empty, like every table's parts); `None` once a write failed (the run fails).
pub struct Part<R: OutputRow>(Option<PartWriter<R>>);

impl<R: OutputRow> Part<R> {
    /// Opens this worker's part of `table` (a failure fails the run).
    pub fn create(ctx: &WorkerCtx, table: Table) -> Self {
        let config = &ctx.shared.config;
        let dir = OutputDirs::new(&config.output).table(table);
        let meta = crate::output::search_meta(config);
        match PartWriter::<R>::create(&dir, ctx.part(), &meta) {
            Ok(w) => Part(Some(w)),
            Err(e) => {
                ctx.fail(e.to_string());
                Part(None)
            }
        }
    }

    /// Writes one row (after a failed write, nothing).
    pub fn push(&mut self, ctx: &WorkerCtx, row: R) {
        if let Some(w) = self.0.as_mut() {
            if let Err(e) = w.push(row) {
                ctx.fail(e.to_string());
                self.0 = None;
            }
        }
    }

    /// Commits the part and lists it in the worker's report.
    pub fn commit(self, ctx: &WorkerCtx) {
        if let Some(w) = self.0 {
            match w.commit() {
                Ok(path) => ctx
                    .report
                    .borrow_mut()
                    .parts
                    .push(path.display().to_string()),
                Err(e) => ctx.fail(e.to_string()),
            }
        }
    }
}
