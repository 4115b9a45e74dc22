//! The run directory: its one owner.
//!
//! ```text
//! OUT/
//!   fingerprints/part-00000.parquet ...   one part per worker
//!   pairs/part-00000.parquet ...
//!   clusters/part-00000.parquet ...
//!   summary.json
//!   .neardup                              marker: neardup wrote this directory
//!   .neardup.lock                         while a run writes it: the lock (crate::lock)
//!   _SUCCESS                              written last, only when everything is complete
//!   _resume/job.json                      what the job was (inputs, parameters), for --resume
//!   _resume/part-00000.bin ...            per worker, once its fingerprints are committed
//! ```
//!
//! `_resume/` is what a failed run leaves for `neardup run --resume` (see
//! [`prepare_resume`]): the job record, written when the run starts, and each worker's
//! fingerprinted documents as the later stages need them, committed right after its part
//! of `fingerprints/`. A run that succeeds removes it ([`remove_resume`]).
//!
//! A deduplicated corpus (`--write-dedup DIR`) is a directory of the same
//! kind: the kept files, [`REMOVED`], [`MARKER`] (which lists the kept files) and [`SUCCESS`].
//!
//! `--overwrite` replaces only what neardup wrote: [`prepare`] refuses a directory that is
//! not a neardup output or that holds anything else, and never touches `/`, the home or
//! current directory, or the paths a run reads or writes (see [`Protected`]).
//!
//! One run at a time: [`prepare_all`] takes an exclusive lock on every directory a run
//! writes before it changes any of them, and checks them all first, so a refusal of one
//! leaves the others untouched.
//!
//! Parts are written under hidden temporary names and renamed when complete
//! (see [`crate::parquet_out`]). A directory without `_SUCCESS` is an
//! incomplete or failed run, whatever else it holds, and [`read_run`] refuses
//! it. Everything that writes a run ([`prepare`], the part writers through
//! [`RunDir::table`] and [`part_file_name`], [`commit`]) and everything that
//! reads one back ([`read_run`], [`committed_parts`]) takes the names from
//! here.

//!
//! The code, a file per concept: `layout` (the names, [`RunDir`], [`commit`],
//! [`committed_parts`]), `prepare` (preparing and overwrite safety, temporaries, resuming)
//! and `read` (reading a run back).

pub mod in_store;
mod layout;
mod prepare;
mod read;
mod removed;

pub use crate::lock::LOCK;
pub use crate::parquet_out::part_file_name;
pub use layout::{
    commit, committed_parts, mark_complete, resume_part_name, RunDir, Table, JOB_RECORD, MARKER,
    MARKER_TEXT, REMOVED, RESUME, SPILL, SUCCESS, SUMMARY, TABLES, WEB_TABLES,
};
pub use prepare::{
    only_cut_markers, own_entries, prepare, prepare_all, prepare_resume, record_written,
    remove_resume, remove_temporaries, Prepared, Protected, Target,
};
pub use read::{
    each_part_batch, each_run_pair, read_run, read_run_parts, read_substrings, search_meta,
    RunOutputs, RunPair,
};
pub use removed::RemovedRows;

#[cfg(test)]
mod tests;
