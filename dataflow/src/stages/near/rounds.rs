//! How the table search fits `--memory-limit`: the fewest rounds whose memory fits, or,
//! when none does, spilling to disk ([`crate::stages::near::spill`]).
//!
//! The simple plan enters every fingerprint in every table at once. Each worker then holds
//! a record for every (fingerprint, worker its tables send it to) pair, so a process's
//! memory grows with `fingerprints x min(workers, tables)`. Searching the tables in rounds
//! (a group of tables at a time, one after the other) divides the `min(workers, tables)`
//! part; with one worker there is one record per fingerprint however many rounds there are,
//! and rounds cannot help. Past that the search spills: its entries go to partition files
//! sized so that the largest one read back fits the worker's share of the limit.
//!
//! The search plans within [`SEARCH_SHARE`] of the process's limit, not all of it: the
//! job's external sorts (exact folding, pairs, the clusters table, the duplicate ids) and
//! the fingerprints held for later rounds have their own shares of the same limit and may
//! be full while the search runs, so the shares add up to at most the limit. A search
//! that fits its share runs in memory; one that does not spills, and its partitions fill
//! the same share however large the corpus. So the search's memory grows with the corpus
//! only until it reaches its share, and stays there.
//!
//! The estimate is deliberately simple and on the high side: it counts the bytes each
//! structure of the search holds per record and per fingerprint (constants below, measured
//! on 10M fingerprints with one worker: 1.06 GB peak for the whole process, where the
//! estimate says 1.3 GB).

use crate::stages::near::spill::{
    SpillShape, MAX_BUFFER_BYTES, MAX_PARTITION_BITS, MIN_BUFFER_BYTES,
};

/// Bytes per table record in the search: the record (40), room for the stash to grow (40),
/// and the compact copy of its value and lanes (16).
pub const RECORD_BYTES: u64 = 96;
/// Bytes per entry of the lane being grouped: the packed key and its sort buffer (16),
/// and, where records hold some of the lanes only (several workers), the list of the
/// lane's records (8; `buckets::LaneMembers`).
pub const ENTRY_BYTES: u64 = 24;
/// Bytes per fingerprint waiting to be entered in a later round (its id, fingerprint, rank).
pub const WAITING_BYTES: u64 = 24;
/// The share of a process's `--memory-limit` the table search plans within. The other
/// shares of the limit, any of which may be full while the search runs: the exact
/// stage's sort ([`EXACT_SORT_SHARE`](crate::config::EXACT_SORT_SHARE), 0.25), the
/// pairs' (0.01), the clusters' edges (0.01), the clusters table's (0.03), the duplicate
/// ids' (0.01), the fingerprints held for later rounds ([`HELD_SHARE`], 0.03): 0.34 in
/// all; the rest is left for timely's queues, the batches being read, and the stars'
/// union-find. (Until 2026-11-27 the search took the whole limit when it fitted in
/// memory and what the documents' ids left when it spilled, so its memory kept growing
/// with the corpus.)
pub const SEARCH_SHARE: f64 = 0.3;

/// Bytes per entry of a spilled partition while it is searched: the record read back (40),
/// its value and lanes (16), and the grouping keys with their sort buffer (16), rounded up.
pub const PARTITION_ENTRY_BYTES: u64 = 80;
/// Shares of a worker's part of the search's share ([`SEARCH_SHARE`]) when spilling: the
/// average partition being searched (a partition may reach twice the average before it is
/// split again: 0.8) and the partition files' write buffers (0.05, split among the files:
/// 1 MB each at 10 GB of text under `--memory-limit 4G`, a quarter of that at 50 GB, where
/// four times the files made 0.2 of the share, as before 2026-11-27, use 0.19 GB more
/// than at 10 GB; writes of a quarter of a megabyte cost nothing measurable).
pub const PARTITION_SHARE: f64 = 0.4;
pub const BUFFER_SHARE: f64 = 0.05;
/// The share of a worker's part of the whole limit for the fingerprints held for the
/// rounds to come, while the corpus is read (beyond it they spill, and are read back
/// once per round; small for the reason given at
/// [`PAIRS_SORT_SHARE`](crate::config::PAIRS_SORT_SHARE)).
pub const HELD_SHARE: f64 = 0.03;

/// The plan: rounds, and how to spill if memory does not fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    pub rounds: usize,
    pub spill: Option<SpillShape>,
    pub warning: Option<String>,
}

/// Fingerprints a worker keeps in memory while they wait for their rounds (with `bands`
/// band keys each), before it spills them: its share of the limit (`None`: no limit).
pub fn held_in_memory(limit: Option<u64>, workers_here: usize, bands: usize) -> usize {
    match limit {
        None => usize::MAX,
        Some(limit) => {
            let budget = limit as f64 / workers_here.max(1) as f64 * HELD_SHARE;
            (budget / (WAITING_BYTES + 8 * bands as u64) as f64).max(1.0) as usize
        }
    }
}

/// What the estimate needs to know about the job.
#[derive(Clone, Debug)]
pub struct SearchShape {
    /// Fingerprints entered in the tables, over all workers.
    pub fingerprints: u64,
    /// Tables (or LSH bands).
    pub lanes: usize,
    /// LSH bands: every band is its own record (its key differs).
    pub bands: bool,
    pub workers: usize,
    pub workers_here: usize,
    /// Each table's route group ([`route_groups`](crate::stages::near::keys::route_groups)):
    /// the tables of a group send a fingerprint to one worker. Empty: each table alone.
    pub routes: Vec<u64>,
    /// The smallest spilled partition planned ([`MIN_PARTITION_ENTRIES`](crate::config::MIN_PARTITION_ENTRIES) unless a test
    /// wants many partitions of a small input).
    pub min_partition_entries: u64,
}

impl SearchShape {
    /// Estimated peak bytes of the search in this process with `rounds` rounds.
    pub fn estimate(&self, rounds: usize) -> u64 {
        let records_per_fp = self.records_per_fingerprint(self.lanes.div_ceil(rounds.max(1)));
        let share =
            |x: u64| x.saturating_mul(self.workers_here as u64) / self.workers.max(1) as u64;
        let records = share(self.fingerprints.saturating_mul(records_per_fp));
        let entries = share(self.fingerprints);
        let waiting = if rounds > 1 {
            let band_keys = if self.bands {
                16 + 8 * self.lanes as u64
            } else {
                0
            };
            entries.saturating_mul(WAITING_BYTES + band_keys)
        } else {
            0
        };
        records
            .saturating_mul(RECORD_BYTES)
            .saturating_add(entries.saturating_mul(ENTRY_BYTES))
            .saturating_add(waiting)
    }

    /// The most records a fingerprint makes in one round of `per_round` lanes: an LSH band
    /// is a record of its own; tables make a record per worker they go to, in each 64-lane
    /// chunk (a record's lane mask is 64 bits), and the tables of a route group go to one
    /// worker, so at most `min(groups, workers)` per chunk.
    ///
    /// The simple version counted `min(tables in the round, workers)`, which is this with
    /// every table alone (and one chunk): with manku16's four groups it said 16 records at
    /// 16 workers where at most 4 are made.
    pub fn records_per_fingerprint(&self, per_round: usize) -> u64 {
        if self.bands {
            return per_round as u64;
        }
        let group = |lane: usize| self.routes.get(lane).copied().unwrap_or(lane as u64);
        (0..self.lanes)
            .step_by(per_round.max(1))
            .map(|start| {
                let end = (start + per_round.max(1)).min(self.lanes);
                (start..end)
                    .step_by(64)
                    .map(|chunk| {
                        let mut groups: Vec<u64> =
                            (chunk..(chunk + 64).min(end)).map(group).collect();
                        groups.sort_unstable();
                        groups.dedup();
                        (groups.len() as u64).min(self.workers.max(1) as u64)
                    })
                    .sum::<u64>()
            })
            .max()
            .unwrap_or(0)
    }

    /// The bytes of this process the search plans within: [`SEARCH_SHARE`] of `limit`.
    pub fn search_bytes(limit: u64) -> u64 {
        (limit as f64 * SEARCH_SHARE) as u64
    }

    /// The plan: `fixed` rounds if given, else the fewest whose estimate fits the search's
    /// share of `limit` ([`Self::search_bytes`]); if the estimate of those rounds (or of
    /// one round, when none fits) is over it, the search spills.
    pub fn choose(&self, fixed: Option<usize>, limit: Option<u64>) -> Choice {
        let lanes = self.lanes.max(1);
        let in_memory = |rounds: usize| Choice {
            rounds,
            spill: None,
            warning: None,
        };
        let Some(limit) = limit else {
            return in_memory(fixed.unwrap_or(1).clamp(1, lanes));
        };
        let search = Self::search_bytes(limit);
        let rounds = match fixed {
            Some(rounds) => rounds.clamp(1, lanes),
            None => (1..=lanes)
                .find(|&r| self.estimate(r) <= search)
                .unwrap_or(1),
        };
        if self.estimate(rounds) <= search {
            return in_memory(rounds);
        }
        let (spill, warning) = self.spill_shape(rounds, limit);
        Choice {
            rounds,
            spill: Some(spill),
            warning,
        }
    }

    /// How each worker spills `rounds` rounds within `limit`: partitions of each table
    /// small enough that the one being searched fits [`PARTITION_SHARE`] of the worker's
    /// part of the search's share of the limit, with write buffers sharing
    /// [`BUFFER_SHARE`] of it.
    pub fn spill_shape(&self, rounds: usize, limit: u64) -> (SpillShape, Option<String>) {
        let budget = Self::search_bytes(limit) as f64 / self.workers_here.max(1) as f64;
        // Every (fingerprint, table) entry goes to exactly one worker.
        let per_table = self.fingerprints.div_ceil(self.workers.max(1) as u64);
        let planned = (budget * PARTITION_SHARE / PARTITION_ENTRY_BYTES as f64) as u64;
        let max_entries = planned.max(self.min_partition_entries.max(1));
        let mut bits = 0;
        while bits < MAX_PARTITION_BITS && per_table >> bits > max_entries {
            bits += 1;
        }
        let files = (self.lanes.div_ceil(rounds.max(1)) as u64) << bits;
        let buffer_bytes = ((budget * BUFFER_SHARE) as u64 / files.max(1))
            .clamp(MIN_BUFFER_BYTES as u64, MAX_BUFFER_BYTES as u64)
            as usize;
        let shape = SpillShape {
            bits,
            buffer_bytes,
            // Keys are not uniform: allow twice the average before splitting again.
            max_entries: 2 * max_entries,
        };
        let warning = (planned < self.min_partition_entries).then(|| {
            format!(
                "--memory-limit {} is below what the spilled table search needs to work in (about {} per process): it goes ahead, using more",
                human_bytes(limit),
                human_bytes(self.spill_estimate(&shape, rounds, limit))
            )
        });
        (shape, warning)
    }

    /// Estimated peak bytes of the spilled search in this process: the largest partition
    /// searched, the write buffers, and the fingerprints held in memory for the rounds.
    pub fn spill_estimate(&self, shape: &SpillShape, rounds: usize, limit: u64) -> u64 {
        let files = (self.lanes.div_ceil(rounds.max(1)) as u64) << shape.bits;
        let band_keys = if self.bands { self.lanes } else { 0 };
        let held = (self.fingerprints / self.workers.max(1) as u64).min(held_in_memory(
            Some(limit),
            self.workers_here,
            band_keys,
        ) as u64);
        let per_worker = shape.max_entries * PARTITION_ENTRY_BYTES
            + files * shape.buffer_bytes as u64
            + held * (WAITING_BYTES + 8 * band_keys as u64);
        per_worker.saturating_mul(self.workers_here as u64)
    }
}

/// Bytes as a short figure: `1.5 GiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MIN_PARTITION_ENTRIES;

    fn shape(fingerprints: u64, workers: usize) -> SearchShape {
        SearchShape {
            fingerprints,
            lanes: 16,
            bands: false,
            workers,
            workers_here: workers,
            routes: Vec::new(),
            min_partition_entries: MIN_PARTITION_ENTRIES,
        }
    }

    #[test]
    fn tables_routed_together_make_one_record_per_group() {
        use crate::stages::near::keys::route_groups;
        use neardup_core::tables::TableDesign;
        let alone = shape(10_000_000, 16);
        let mut grouped = alone.clone();
        grouped.routes = route_groups(TableDesign::manku16().masks())
            .into_iter()
            .map(|(group, _)| group)
            .collect();
        // 16 workers: manku16's 4 groups make at most 4 records, 2 in rounds of 8 tables,
        // 1 in rounds of 4 or fewer; tables alone make up to 16, 8, 4.
        let records = |s: &SearchShape, rounds: usize| s.records_per_fingerprint(16 / rounds);
        assert_eq!([1, 2, 4, 8].map(|r| records(&grouped, r)), [4, 2, 1, 1]);
        assert_eq!([1, 2, 4, 8].map(|r| records(&alone, r)), [16, 8, 4, 2]);
        // At 2 workers a group still goes to one of 2.
        let mut two = grouped.clone();
        two.workers = 2;
        assert_eq!([1, 2, 4].map(|r| records(&two, r)), [2, 2, 1]);
        // So a limit that tables alone meet only in 4 rounds is met in one.
        let limit = limit_for(alone.estimate(4));
        assert_eq!(alone.choose(None, Some(limit)).rounds, 4);
        assert_eq!(
            grouped.estimate(1),
            alone.estimate(4) - 10_000_000 * WAITING_BYTES
        );
        assert_eq!(grouped.choose(None, Some(limit)).rounds, 1);
        // More than 64 tables make a record per 64-lane chunk.
        let mut wide = shape(1_000, 1);
        wide.lanes = 126;
        assert_eq!(wide.records_per_fingerprint(126), 2);
        assert_eq!(wide.records_per_fingerprint(63), 1);
    }

    /// The least limit whose search share holds `search` bytes.
    fn limit_for(search: u64) -> u64 {
        (search as f64 / SEARCH_SHARE).ceil() as u64 + 1
    }

    /// A limit whose search share is just under `search` bytes.
    fn limit_below(search: u64) -> u64 {
        (search as f64 / SEARCH_SHARE).floor() as u64 - 4
    }

    #[test]
    fn the_search_plans_within_its_share_of_the_limit() {
        let s = shape(1_000_000, 1);
        assert!(SearchShape::search_bytes(limit_for(s.estimate(1))) >= s.estimate(1));
        assert!(SearchShape::search_bytes(limit_below(s.estimate(1))) < s.estimate(1));
        // A limit that would hold the search alone, but not within its share, spills.
        assert!(s.choose(None, Some(s.estimate(1))).spill.is_some());
        assert_eq!(s.choose(None, Some(limit_for(s.estimate(1)))).spill, None);
    }

    #[test]
    fn one_worker_needs_one_record_per_fingerprint_in_any_round() {
        let s = shape(1_000_000, 1);
        assert_eq!(s.estimate(1), 1_000_000 * (RECORD_BYTES + ENTRY_BYTES));
        // Later rounds also hold the waiting fingerprints: one round is best.
        assert!(s.estimate(4) > s.estimate(1));
        let choice = s.choose(None, Some(limit_for(s.estimate(1))));
        assert_eq!((choice.rounds, choice.spill), (1, None));
    }

    #[test]
    fn more_workers_make_more_records_and_rounds_cut_them() {
        let s = shape(10_000_000, 16);
        // 16 workers: each fingerprint goes to up to 16 of them in one round, 4 in 4 rounds.
        assert_eq!(
            s.estimate(1),
            10_000_000 * 16 * RECORD_BYTES + 10_000_000 * ENTRY_BYTES
        );
        let choice = s.choose(None, Some(limit_for(s.estimate(4))));
        assert_eq!((choice.rounds, choice.spill), (4, None));
        // 16 lanes: 6 rounds hold 3 each.
        assert_eq!(s.choose(None, Some(limit_below(s.estimate(4)))).rounds, 6);
        assert_eq!(
            s.choose(Some(2), Some(limit_for(s.estimate(2)))).spill,
            None
        );
        assert_eq!(s.choose(None, None).rounds, 1);
        // Fixed rounds over the limit keep their number, and spill.
        let fixed = s.choose(Some(2), Some(limit_below(s.estimate(2))));
        assert_eq!(fixed.rounds, 2);
        assert!(fixed.spill.is_some());
    }

    #[test]
    fn a_limit_below_one_round_spills_and_a_tiny_one_warns() {
        let s = shape(1_000_000, 1);
        let choice = s.choose(None, Some(limit_below(s.estimate(1))));
        assert_eq!(choice.rounds, 1);
        assert!(choice.spill.is_some());
        assert_eq!(choice.warning, None);
        let tiny = s.choose(None, Some(1000));
        let spill = tiny.spill.expect("spills");
        assert_eq!(spill.max_entries, 2 * MIN_PARTITION_ENTRIES);
        let warning = tiny.warning.expect("a warning");
        assert!(warning.contains("--memory-limit 1000 B"), "{warning}");
    }

    #[test]
    fn a_billion_fingerprints_spill_within_the_limit() {
        let limit = 32u64 << 30;
        for workers in [1, 2, 16] {
            let s = shape(1_000_000_000, workers);
            let choice = s.choose(None, Some(limit));
            let spill = choice.spill.expect("a billion do not fit 32 GiB");
            assert_eq!(choice.warning, None);
            // The partitions and their buffers fill the search's share; the held
            // fingerprints have a share of their own.
            let shares = (limit as f64 * (SEARCH_SHARE + HELD_SHARE)) as u64;
            assert!(s.spill_estimate(&spill, choice.rounds, limit) <= shares);
            // The average partition fits the planned share (half the split threshold).
            let per_table = 1_000_000_000u64.div_ceil(workers as u64);
            assert!(
                per_table >> spill.bits <= spill.max_entries / 2,
                "{spill:?}"
            );
            assert!(spill.bits == 0 || per_table >> (spill.bits - 1) > spill.max_entries / 2);
        }
    }

    #[test]
    fn held_fingerprints_get_their_share() {
        assert_eq!(held_in_memory(None, 2, 0), usize::MAX);
        let n = held_in_memory(Some(1 << 30), 2, 0);
        assert_eq!(
            n,
            ((1u64 << 29) as f64 * HELD_SHARE / WAITING_BYTES as f64) as usize
        );
        assert!(held_in_memory(Some(1 << 30), 2, 9) < n);
    }

    #[test]
    fn processes_hold_their_share() {
        let mut s = shape(8_000_000, 4);
        s.workers_here = 1;
        assert_eq!(s.estimate(1) * 4, shape(8_000_000, 4).estimate(1));
    }

    #[test]
    fn human_bytes_reads_well() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 * 1024 * 1024 * 1024 / 2), "1.5 GiB");
    }
}
