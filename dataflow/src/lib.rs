//! neardup's distributed job on timely dataflow: read, fingerprint, fold exact duplicates,
//! search the permutation tables, cluster, and commit Parquet outputs.
//!
//! ```no_run
//! use std::sync::Arc;
//! use neardup_dataflow::{run_job, JobConfig, JobInput, Parallelism, Progress};
//! use neardup_io::{input::expand_inputs, record::FieldSpec};
//!
//! let files = expand_inputs(&["corpus.jsonl.zst".to_string()], false).unwrap();
//! let fields = FieldSpec { text_field: "text".into(), id_field: Some("id".into()), extra_field: None, ..Default::default() };
//! let mut config = JobConfig::new(JobInput::Documents { files, fields }, "out".into());
//! config.parallelism = Parallelism::local(2);
//! let outcome = run_job(config, Arc::new(Progress::default())).unwrap();
//! println!("{} near-duplicate pairs", outcome.summary.counts.near_pairs);
//! ```
//!
//! The dataflow, as every worker builds it ([`pipeline`] wires it; one module per stage under
//! [`stages`], in the order documents pass through them):
//!
//! ```text
//! read (own units) ──to home──▶ fingerprint ──▶ fingerprints/part-W
//!                                   │
//!                               split_docs ──▶ document numbers ─────────────────────┐
//!                                   │     └──▶ id hashes ──▶ duplicate-id count      │
//!        ┌──────────────────────────┼──────────────────────────────┐               │
//!        │ (inputs with URLs)       │                               │               │
//!   revisits ─▶ exact edges    exchange by exact key ──▶ fold exact ──▶ exact edges  │
//!   urls ─────▶ url edges                               │                            │
//!                                              representatives                       │
//!                                                       │                            │
//!                    rounds (memory limit) ──▶ exchange by (table, key) or band      │
//!                                                       │                            │
//!                           bucket search (spilled past the limit) ──▶ near edges    │
//!                                                       │                            │
//!                            verify (--verify, MinHash --threshold) ──▶ near edges   │
//!                                                       │                            │
//!                        all edges ──▶ pairs/part-W                                  │
//!                                                       │ to worker 0                │
//!                  label components, then stars (or whole components) one at a time  │
//!                                                       │ back to each home          │
//!                         (URLs) mirrors/, hosts/ ◀──── ┤                            │
//!                                                       └──▶ clusters/part-W ◀───────┘
//! ```
//!
//! Then the end of the run ([`finish`], in one documented order): a second small dataflow
//! sends each worker's report to worker 0, which checks the keep column, writes `--against`'s
//! files or `--index`'s generation, then `summary.json` and `_SUCCESS` ([`output`]);
//! `--write-dedup` follows. [`job`] holds the run's lifecycle around it all. `neardup substrings` (and `run --substrings`, over the documents the
//! clusters keep) runs its own dataflow: read, parse at home, suffix arrays per worker,
//! windows meeting by key ([`stages::substrings`], [`stages::substring_spill`]).
//!
//! Module by module: [`plan`] (units, and [`plan::home`]: which worker fingerprints a
//! document), [`stages::read`], [`stages::fingerprint`], [`stages::split`],
//! [`stages::exact`], [`stages::revisits`], [`stages::urls`], [`stages::near`] (with
//! [`stages::near::rounds`] and [`stages::near::spill`]), [`stages::verify`],
//! [`stages::pairs`], [`stages::clusters`], [`stages::mirrors`], [`output`], [`finish`],
//! [`pipeline`], [`job`]; [`records`] and [`wire`] (what crosses processes, compact);
//! [`control`] (the processes' handshake and mesh) and [`live`] (the live service).

pub mod config;
pub mod control;
pub mod error;
pub mod finish;
pub mod job;
pub mod live;
pub mod operators;
pub mod output;
pub mod pipeline;
pub mod plan;
pub mod profile;
pub mod progress;
pub mod records;
pub mod report;
pub mod stages;
pub mod wire;
pub mod worker;

pub use config::{JobConfig, JobInput, KeepPolicy, Parallelism};
pub use finish::{Finish, RunOutcome};
pub use job::{run_job, run_job_with};
pub use progress::{Progress, Stage};
pub use report::JobSummary;

pub use error::JobError;
