//! Work units and their deterministic assignment to workers.
//!
//! The unit of reading is what the file's source kind cuts it into
//! ([`neardup_io::source::SourceKind::units`]): a whole JSONL or plain file (compressed
//! streams cannot be split), or one Parquet row group. Every process computes the same plan from the file list and
//! the Parquet footers, and gives each worker the same units, so no coordination is needed
//! and the result never depends on which worker read what: document numbers come from
//! (file, record) alone.
//!
//! Assignment is greedy by size (largest unit first, to the least-loaded worker, ties to the
//! smaller index), which balances reading. Fingerprinting is balanced separately: every
//! document is sent to a worker chosen by a hash of its number.

pub mod home;

use std::path::PathBuf;

use neardup_io::compress::Compression;
use neardup_io::input::InputFile;
use neardup_io::source::{Format, UnitSpec};

use crate::config::{ConfigError, JobInput};
use crate::records::RECORD_BITS;
use crate::JobError;

/// The most input files a run can number (`doc_id` keeps 24 bits for the file).
pub const MAX_FILES: usize = 1 << (64 - RECORD_BITS);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    pub file: u32,
    /// Where the unit is in its file, and its weight (relative cost, for balancing: bytes
    /// for whole files, rows for row groups).
    pub spec: UnitSpec,
}

/// The inputs of a run, numbered, and cut into units.
#[derive(Clone, Debug)]
pub struct Plan {
    pub files: Vec<InputFile>,
    /// Display names of the files (the `source` column), computed once.
    pub names: Vec<String>,
    pub units: Vec<Unit>,
}

impl Plan {
    /// Numbers the files in the given order (callers sort them by path) and reads the
    /// Parquet footers.
    pub fn build(input: &JobInput) -> Result<Plan, JobError> {
        let files: Vec<InputFile> = match input {
            JobInput::Documents { files, .. } => files.clone(),
            JobInput::Fingerprints { files } => files
                .iter()
                .map(|p| InputFile {
                    path: p.clone(),
                    format: Format::Fingerprints,
                    compression: Compression::None,
                })
                .collect(),
        };
        if files.is_empty() {
            return Err(ConfigError::NoInputs.into());
        }
        if files.len() > MAX_FILES {
            return Err(ConfigError::TooManyFiles {
                files: files.len(),
                max: MAX_FILES,
            }
            .into());
        }
        let mut units = Vec::new();
        for (i, file) in files.iter().enumerate() {
            let specs = file.format.kind().units(file)?;
            units.extend(specs.into_iter().map(|spec| Unit {
                file: i as u32,
                spec,
            }));
        }
        let names = files.iter().map(|f| f.path.display().to_string()).collect();
        Ok(Plan {
            files,
            names,
            units,
        })
    }

    /// The display name of file `i`.
    pub fn file_name(&self, i: u32) -> &str {
        &self.names[i as usize]
    }

    pub fn path(&self, i: u32) -> &PathBuf {
        &self.files[i as usize].path
    }

    /// The units worker `index` of `peers` reads, in plan order.
    pub fn units_for(&self, index: usize, peers: usize) -> Vec<usize> {
        let owners = self.owners(peers);
        (0..self.units.len())
            .filter(|&u| owners[u] == index)
            .collect()
    }

    /// The worker that reads each unit: largest first to the least-loaded worker.
    pub fn owners(&self, peers: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.units.len()).collect();
        order.sort_by_key(|&u| (std::cmp::Reverse(self.units[u].spec.weight), u));
        let mut load = vec![0u64; peers.max(1)];
        let mut owner = vec![0; self.units.len()];
        for u in order {
            let (worker, _) = load
                .iter()
                .enumerate()
                .min_by_key(|&(w, &l)| (l, w))
                .expect("at least one worker");
            owner[u] = worker;
            load[worker] += self.units[u].spec.weight.max(1);
        }
        owner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_with_weights(weights: &[u64]) -> Plan {
        let units = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| Unit {
                file: i as u32,
                spec: UnitSpec {
                    index: 0,
                    weight: w,
                    locator: neardup_io::source::Locator::Whole,
                },
            })
            .collect();
        Plan {
            files: Vec::new(),
            names: Vec::new(),
            units,
        }
    }

    #[test]
    fn every_unit_has_exactly_one_worker_and_load_is_balanced() {
        let plan = plan_with_weights(&[100, 1, 50, 50, 3, 7, 99]);
        for peers in 1..6 {
            let mut all: Vec<usize> = (0..peers).flat_map(|w| plan.units_for(w, peers)).collect();
            all.sort();
            assert_eq!(all, (0..7).collect::<Vec<_>>());
        }
        let loads: Vec<u64> = (0..2)
            .map(|w| {
                plan.units_for(w, 2)
                    .iter()
                    .map(|&u| plan.units[u].spec.weight)
                    .sum()
            })
            .collect();
        assert!(loads[0].abs_diff(loads[1]) <= 100, "{loads:?}");
    }
}
