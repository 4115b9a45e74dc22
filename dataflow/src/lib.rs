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
//! let summary = run_job(config, Arc::new(Progress::default())).unwrap();
//! println!("{} near-duplicate pairs", summary.counts.near_pairs);
//! ```
//!
//! The dataflow, as every worker builds it:
//!
//! ```text
//! read (own units) ──exchange to home──▶ fingerprint ──▶ fingerprints/part-W
//!        │                                   │
//!        │                  exchange by exact key ──▶ fold exact ──▶ exact edges ─┐
//!        │                                   │               │                    │
//!        │                                   │      representatives               │
//!        │                                   │               │                    │
//!        │                                   │   count ─▶ every worker: rounds (memory limit)
//!        │                                   │               │                    │
//!        │                                   │   exchange by (table, key) ──▶ bucket search ──▶ near edges
//!        │                                   │                                    │
//!        │                                   │                pairs/part-W ◀── edges ──▶ local union-find
//!        │                                   │                                    │ forests to worker 0
//!        │                                   │                               merge, label, keep
//!        │                                   │                                    │ exchange by doc
//!        │                                   └──────────────▶ clusters/part-W ◀───┘
//! ```
//!
//! Then a second small dataflow sends each worker's report to worker 0, which writes
//! `summary.json` and `_SUCCESS`. Module by module: [`plan`] (units), [`read`], [`home`]
//! (which worker fingerprints a document), [`fingerprint`], [`exact`], [`near`] (with
//! [`rounds`] and [`spill`]), [`clusters`], [`output`], [`job`].

pub mod config;
pub mod control;
pub mod error;
pub mod job;
pub mod live;
pub mod output;
pub mod plan;
pub mod progress;
pub mod records;
pub mod report;
pub mod stages;
pub mod worker;

pub use config::{JobConfig, JobInput, KeepPolicy, Parallelism};
pub use job::run_job;
pub use progress::{Progress, Stage};
pub use report::JobSummary;

pub use error::JobError;
