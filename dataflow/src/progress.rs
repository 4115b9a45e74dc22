//! Live counters that workers update and the binary draws as progress bars.
//!
//! Shared by the workers of one process (atomics, relaxed: they are for display only; the
//! summary's figures come from the workers' reports).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// The stage the job is in, as far as this process can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Reading = 0,
    Exact = 1,
    Searching = 2,
    Clustering = 3,
    Committing = 4,
    Done = 5,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Reading => "reading and fingerprinting",
            Stage::Exact => "folding exact duplicates",
            Stage::Searching => "searching tables",
            Stage::Clustering => "clustering",
            Stage::Committing => "committing outputs",
            Stage::Done => "done",
        }
    }

    fn from_u8(v: u8) -> Stage {
        match v {
            0 => Stage::Reading,
            1 => Stage::Exact,
            2 => Stage::Searching,
            3 => Stage::Clustering,
            4 => Stage::Committing,
            _ => Stage::Done,
        }
    }
}

#[derive(Debug, Default)]
pub struct Progress {
    /// Input bytes consumed by this process's readers (compressed size where compressed is
    /// unknown; text bytes otherwise).
    pub bytes_read: AtomicU64,
    pub docs_read: AtomicU64,
    pub docs_fingerprinted: AtomicU64,
    pub table_records: AtomicU64,
    pub pairs: AtomicU64,
    stage: AtomicU8,
}

impl Progress {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// Moves the displayed stage forward (never back: workers reach stages at different times).
    pub fn reach(&self, stage: Stage) {
        self.stage.fetch_max(stage as u8, Ordering::Relaxed);
    }

    pub fn stage(&self) -> Stage {
        Stage::from_u8(self.stage.load(Ordering::Relaxed))
    }
}
