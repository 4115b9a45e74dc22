//! Home workers: where each document is parsed, fingerprinted, and its results sent back to.
//!
//! The simple rule is a hash of the document's number over all workers, which spreads
//! documents evenly. Two things make the real rule differ:
//!
//! - **Documents stay in the process that read them.** With several processes, a hash over
//!   all workers would send about half of all raw text over the network before it is
//!   fingerprinted. So a document's home is always a worker of the process whose worker read
//!   it (every process knows which one: the plan is the same everywhere, and a document's
//!   number names its file and record). Only what is derived from the text (fingerprints,
//!   candidate pairs, cluster links) crosses processes. Balancing between processes is the
//!   plan's job (it spreads units by size).
//! - **Reading is not spread evenly** when there are fewer input units than workers: one
//!   compressed file is decompressed and split into lines by a single worker, which then has
//!   less time for fingerprinting than the others. So within a process the hash picks a slot
//!   of a fixed table, and each worker holds a number of slots that gives it an equal *total*
//!   load: its reading (from the plan) plus its share of its process's fingerprinting. With
//!   balanced reading the table is even, and it is the simple rule.
//! - **Balanced reading keeps documents where they are read.** When every worker of a
//!   process would carry about the same load (within [`LOCAL_SLACK`]) by fingerprinting the
//!   documents it reads itself, as with many files of like sizes, a document's home is the
//!   worker that reads it: its text never moves between threads. At 2 workers on dev-medium
//!   in 16 files, half of the documents were copied to the other worker and allocated there
//!   again, for nothing.
//!
//! The tables depend only on the plan, the scheme and the numbers of workers and processes,
//! so every process builds the same ones and results do not depend on timing. The cost model
//! is a rough one (each source kind's [`neardup_io::source::ReadCost`], measured on
//! dev-medium with one core); it moves load, never correctness.
//!
//! Fingerprint tables (`neardup search`) are not read by document number (their rows carry
//! the numbers of the run that wrote them), and their records are fingerprints already:
//! their homes are spread over all workers by the simple rule.

use std::rc::Rc;

use crate::config::JobConfig;
use crate::plan::Plan;
use crate::records::RECORD_BITS;
use neardup_core::mix::mix64;
use neardup_io::source::Locator;

/// Slots of a table: fine enough for 1% steps of load, small enough to stay in cache.
pub const HOME_SLOTS: usize = 1024;

/// Fingerprinting cost per unit of weight, relative to simhash-doc, for a unit holding
/// `text_per_weight` bytes of text per unit of weight.
fn hash_cost_per_unit_byte(config: &JobConfig, text_per_weight: f64) -> f64 {
    let scheme = match config.scheme.method {
        neardup_core::Method::MinHash { .. } => 2.0,
        neardup_core::Method::Simhash(_) => 1.0,
    };
    scheme * text_per_weight
}

/// When every worker's load (its reading plus fingerprinting what it reads) is within this
/// share of its process's mean, documents stay with the worker that reads them.
pub const LOCAL_SLACK: f64 = 0.05;

/// Which worker reads the documents of one file (a global worker index).
#[derive(Clone, Debug, PartialEq, Eq)]
enum FileReader {
    /// All of the file's units are read by one worker (always so for whole files).
    One(u16),
    /// Pieces or row groups read by different workers: `(first record, worker)`, by first
    /// record.
    Ranges(Box<[(u64, u16)]>),
}

/// The home of every document: a table of worker indices per process, and for each input
/// file the process that reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HomeTable {
    /// `tables[p]` holds `HOME_SLOTS` global worker indices, all of process `p`.
    tables: Rc<[Box<[u16]>]>,
    /// Indexed by file number; empty when homes ignore where a document was read.
    files: Rc<[FileReader]>,
    /// Workers in each process.
    workers: usize,
    /// `local[p]`: process `p`'s documents stay with the worker that reads them.
    local: Rc<[bool]>,
}

impl HomeTable {
    /// One process, even slots: the simple rule.
    pub fn even(peers: usize) -> Self {
        let peers = peers.max(1);
        HomeTable {
            tables: vec![slots_for(&vec![1.0; peers], 0)].into(),
            files: Vec::new().into(),
            workers: peers,
            local: vec![false].into(),
        }
    }

    /// The tables for this plan, with `peers` workers in all, `workers` in each process:
    /// each document's home is in the process that reads it, and within a process each
    /// worker's share of fingerprinting is chosen so that its reading plus fingerprinting is
    /// the same for all (as far as shares can be >= 0).
    pub fn for_plan(plan: &Plan, config: &JobConfig, peers: usize, workers: usize) -> Self {
        let peers = peers.max(1);
        let workers = workers.clamp(1, peers);
        let processes = peers.div_ceil(workers);
        let owners = plan.owners(peers);
        let mut reading = vec![0f64; peers];
        let mut hashing = vec![0f64; processes];
        let mut own_hashing = vec![0f64; peers];
        for (unit, &worker) in plan.units.iter().zip(&owners) {
            let file = &plan.files[unit.file as usize];
            let weight = unit.spec.weight.max(1) as f64;
            // Fingerprint tables are read, not fingerprinted: nothing to balance, and their
            // document numbers do not say where they were read.
            let Some(cost) = file.format.kind().read_cost(file) else {
                return Self::even(peers);
            };
            reading[worker] += weight * cost.read_per_weight;
            let hash = weight * hash_cost_per_unit_byte(config, cost.text_per_weight);
            hashing[worker / workers] += hash;
            own_hashing[worker] += hash;
        }
        let local: Vec<bool> = (0..processes)
            .map(|p| {
                let mine = p * workers..((p + 1) * workers).min(peers);
                let loads: Vec<f64> = mine.map(|w| reading[w] + own_hashing[w]).collect();
                let mean = loads.iter().sum::<f64>() / loads.len() as f64;
                mean > 0.0 && loads.iter().all(|&l| l <= mean * (1.0 + LOCAL_SLACK))
            })
            .collect();
        let tables: Vec<Box<[u16]>> = (0..processes)
            .map(|p| {
                let mine = p * workers..((p + 1) * workers).min(peers);
                let level =
                    (reading[mine.clone()].iter().sum::<f64>() + hashing[p]) / mine.len() as f64;
                let shares: Vec<f64> = if hashing[p] > 0.0 {
                    reading[mine.clone()]
                        .iter()
                        .map(|r| (level - r).max(0.0))
                        .collect()
                } else {
                    vec![1.0; mine.len()]
                };
                slots_for(&shares, mine.start)
            })
            .collect();
        let mut by_file: Vec<Vec<(u64, u16)>> = vec![Vec::new(); plan.files.len()];
        for (unit, &worker) in plan.units.iter().zip(&owners) {
            let first = match unit.spec.locator {
                Locator::Whole => 0,
                Locator::RowGroup(rg) => rg.first_row,
                // Pieces of a large file are numbered by byte offset.
                Locator::Bytes { start, .. } => start,
            };
            by_file[unit.file as usize].push((first, worker as u16));
        }
        let files: Vec<FileReader> = by_file
            .into_iter()
            .map(|mut ranges| {
                ranges.sort_unstable();
                match ranges.first() {
                    None => FileReader::One(0),
                    Some(&(_, w)) if ranges.iter().all(|&(_, v)| v == w) => FileReader::One(w),
                    Some(_) => FileReader::Ranges(ranges.into()),
                }
            })
            .collect();
        HomeTable {
            tables: tables.into(),
            files: files.into(),
            workers,
            local: local.into(),
        }
    }

    /// The worker that reads document `doc_id` (0 when homes ignore it).
    #[inline]
    fn reader_of(&self, doc_id: u64) -> usize {
        match self.files.get((doc_id >> RECORD_BITS) as usize) {
            None => 0,
            Some(FileReader::One(w)) => *w as usize,
            Some(FileReader::Ranges(ranges)) => {
                let record = doc_id & ((1u64 << RECORD_BITS) - 1);
                let i = ranges.partition_point(|&(first, _)| first <= record);
                ranges[i.saturating_sub(1)].1 as usize
            }
        }
    }

    /// The home worker of a document, as an exchange route (a global worker index below
    /// `peers`, which timely sends to that worker).
    #[inline]
    pub fn route(&self, doc_id: u64) -> u64 {
        let reader = self.reader_of(doc_id);
        let process = reader / self.workers;
        if self.local[process] {
            return reader as u64;
        }
        let table = &self.tables[process];
        table[(mix64(doc_id) % HOME_SLOTS as u64) as usize] as u64
    }

    /// Each worker's share of the slots of its process's table (all workers' shares of one
    /// process add up to 1).
    pub fn shares(&self, peers: usize) -> Vec<f64> {
        let mut counts = vec![0usize; peers];
        for table in self.tables.iter() {
            for &w in table.iter() {
                counts[w as usize] += 1;
            }
        }
        counts
            .iter()
            .map(|&c| c as f64 / HOME_SLOTS as f64)
            .collect()
    }
}

/// A table of `HOME_SLOTS` worker indices `first + i`, worker `i` holding slots in proportion
/// to `shares[i]` (largest remainders; ties to the smaller worker; even if all are 0).
fn slots_for(shares: &[f64], first: usize) -> Box<[u16]> {
    let total: f64 = shares.iter().sum();
    let shares: Vec<f64> = if total > 0.0 {
        shares.to_vec()
    } else {
        vec![1.0; shares.len()]
    };
    let total: f64 = shares.iter().sum();
    let exact: Vec<f64> = shares
        .iter()
        .map(|s| s / total * HOME_SLOTS as f64)
        .collect();
    let mut counts: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
    let mut order: Vec<usize> = (0..shares.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    let missing = HOME_SLOTS - counts.iter().sum::<usize>();
    for &w in order.iter().cycle().take(missing) {
        counts[w] += 1;
    }
    // Interleave the workers' slots so that neighbouring slots differ (not needed for
    // correctness; keeps the table readable in tests).
    let mut slots = Vec::with_capacity(HOME_SLOTS);
    let mut given = vec![0usize; counts.len()];
    while slots.len() < HOME_SLOTS {
        for (w, &c) in counts.iter().enumerate() {
            if given[w] < c {
                slots.push((first + w) as u16);
                given[w] += 1;
            }
        }
    }
    slots.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Unit;
    use neardup_io::compress::Compression;
    use neardup_io::input::InputFile;
    use neardup_io::source::{Format, UnitSpec};

    fn test_config() -> JobConfig {
        JobConfig::new(
            crate::config::JobInput::Fingerprints { files: Vec::new() },
            "out".into(),
        )
    }

    /// A plan of uncompressed JSONL files of the given sizes (never opened).
    fn plan_of(sizes: &[u64]) -> Plan {
        let files: Vec<InputFile> = (0..sizes.len())
            .map(|i| InputFile {
                path: format!("f{i}.jsonl").into(),
                format: Format::Jsonl,
                compression: Compression::None,
            })
            .collect();
        let units = sizes
            .iter()
            .enumerate()
            .map(|(i, &w)| Unit {
                file: i as u32,
                spec: UnitSpec {
                    index: 0,
                    weight: w,
                    locator: Locator::Whole,
                },
            })
            .collect();
        Plan {
            names: files.iter().map(|f| f.path.display().to_string()).collect(),
            files,
            units,
        }
    }

    #[test]
    fn even_tables_split_evenly_and_routes_stay_below_peers() {
        for peers in [1, 2, 3, 7] {
            let t = HomeTable::even(peers);
            let shares = t.shares(peers);
            assert!(
                shares
                    .iter()
                    .all(|&s| (s - 1.0 / peers as f64).abs() < 0.002),
                "{shares:?}"
            );
            assert!((0..10_000).all(|d| t.route(d) < peers as u64));
        }
    }

    #[test]
    fn a_worker_that_reads_gets_less_fingerprinting() {
        // Reading 0.3, fingerprinting 0.5 in all: level 0.4, shares 0.1 and 0.4.
        let slots = slots_for(&[0.1, 0.4], 0);
        let to_0 = slots.iter().filter(|&&w| w == 0).count();
        assert!(
            (to_0 as f64 / HOME_SLOTS as f64 - 0.2).abs() < 0.002,
            "{to_0}"
        );
        // Slots of a later process hold that process's workers.
        assert!(slots_for(&[1.0, 1.0], 4).iter().all(|&w| w == 4 || w == 5));
    }

    #[test]
    fn no_share_at_all_falls_back_to_even() {
        assert_eq!(slots_for(&[0.0, 0.0], 0), slots_for(&[1.0, 1.0], 0));
    }

    /// The simple version of the rule: a document's home is a worker of the process whose
    /// worker reads its file, checked against the plan's own assignment.
    #[test]
    fn documents_stay_in_the_process_that_reads_them() {
        let plan = plan_of(&[900, 800, 700, 600, 500, 400, 300, 200]);
        let config = test_config();
        for (peers, workers) in [(2, 1), (4, 2), (6, 2), (6, 3), (4, 1)] {
            let table = HomeTable::for_plan(&plan, &config, peers, workers);
            let owners = plan.owners(peers);
            let mut homes = vec![0usize; peers];
            for file in 0..plan.files.len() as u64 {
                let reader_process = owners[file as usize] / workers;
                for record in 0..2_000u64 {
                    let home = table.route((file << RECORD_BITS) | record) as usize;
                    assert_eq!(
                        home / workers,
                        reader_process,
                        "peers {peers} workers {workers}"
                    );
                    homes[home] += 1;
                }
            }
            // Every worker of a process that reads anything gets documents to fingerprint.
            for (w, &n) in homes.iter().enumerate() {
                let reads = owners.iter().any(|&o| o / workers == w / workers);
                assert!(!reads || n > 0, "worker {w} of {peers}: {homes:?}");
            }
        }
    }

    /// Files of like sizes: every document's home is the worker that reads it, in every
    /// process; unlike sizes: the tables spread them.
    #[test]
    fn balanced_reading_keeps_documents_where_they_are_read() {
        let plan = plan_of(&[500; 16]);
        let config = test_config();
        for (peers, workers) in [(2, 2), (4, 2), (4, 1)] {
            let table = HomeTable::for_plan(&plan, &config, peers, workers);
            let owners = plan.owners(peers);
            for file in 0..16u64 {
                for record in 0..100u64 {
                    let home = table.route((file << RECORD_BITS) | record) as usize;
                    assert_eq!(
                        home, owners[file as usize],
                        "peers {peers} workers {workers}"
                    );
                }
            }
        }
        let plan = plan_of(&[1000, 10, 10, 10]);
        let table = HomeTable::for_plan(&plan, &config, 2, 2);
        let moved = (0..1000u64).filter(|&r| table.route(r) != 0).count();
        assert!(
            moved > 0,
            "worker 0 reads most: some of its documents go to worker 1"
        );
    }

    #[test]
    fn one_process_keeps_the_old_balance() {
        // One big file read by worker 0, small ones by worker 1: worker 0 fingerprints less.
        let plan = plan_of(&[1000, 10, 10, 10]);
        let table = HomeTable::for_plan(&plan, &test_config(), 2, 2);
        let shares = table.shares(2);
        assert!(shares[0] < shares[1], "{shares:?}");
        assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn row_groups_in_several_processes_are_found_by_record() {
        let table = HomeTable {
            tables: vec![slots_for(&[1.0], 0), slots_for(&[1.0], 1)].into(),
            files: vec![FileReader::Ranges(vec![(0, 1), (100, 0), (250, 1)].into())].into(),
            workers: 1,
            local: vec![false, false].into(),
        };
        for (record, process) in [(0, 1), (99, 1), (100, 0), (249, 0), (250, 1), (10_000, 1)] {
            assert_eq!(table.route(record), process, "record {record}");
        }
    }
}
