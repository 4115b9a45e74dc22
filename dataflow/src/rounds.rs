//! How many rounds the table search takes: the fewest whose memory fits `--memory-limit`.
//!
//! The simple plan enters every fingerprint in every table at once. Each worker then holds
//! a record for every (fingerprint, worker its tables send it to) pair, so a process's
//! memory grows with `fingerprints x min(workers, tables)`. Searching the tables in rounds
//! (a group of tables at a time, one after the other) divides the `min(workers, tables)`
//! part; with one worker there is one record per fingerprint however many rounds there are,
//! and rounds cannot help (only spilling to disk could, which is not built yet).
//!
//! The estimate is deliberately simple and on the high side: it counts the bytes each
//! structure of the search holds per record and per fingerprint (constants below, measured
//! on 10M fingerprints with one worker: 1.06 GB peak for the whole process, where the
//! estimate says 1.5 GB).

/// Bytes per table record in the search: the record (40), room for the stash to grow (40),
/// and the compact copy of its value and lanes (16).
pub const RECORD_BYTES: u64 = 96;
/// Bytes per entry of the lane being grouped: the packed key and its sort buffer.
pub const ENTRY_BYTES: u64 = 16;
/// Bytes per fingerprint waiting to be entered in a later round (its id, fingerprint, rank).
pub const WAITING_BYTES: u64 = 24;

/// What the estimate needs to know about the job.
#[derive(Clone, Copy, Debug)]
pub struct SearchShape {
    /// Fingerprints entered in the tables, over all workers.
    pub fingerprints: u64,
    /// Tables (or LSH bands).
    pub lanes: usize,
    /// LSH bands: every band is its own record (its key differs).
    pub bands: bool,
    pub workers: usize,
    pub workers_here: usize,
}

impl SearchShape {
    /// Estimated peak bytes of the search in this process with `rounds` rounds.
    pub fn estimate(&self, rounds: usize) -> u64 {
        let per_round = self.lanes.div_ceil(rounds.max(1)) as u64;
        let records_per_fp = if self.bands {
            per_round
        } else {
            per_round.min(self.workers as u64)
        };
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

    /// The rounds to use: `fixed` if given; else the fewest whose estimate fits `limit`; if
    /// none fits, the one with the smallest estimate (the fewest among equals), with a
    /// warning for the summary.
    pub fn choose(&self, fixed: Option<usize>, limit: Option<u64>) -> (usize, Option<String>) {
        let lanes = self.lanes.max(1);
        if let Some(rounds) = fixed {
            return (rounds.clamp(1, lanes), None);
        }
        let Some(limit) = limit else {
            return (1, None);
        };
        if let Some(rounds) = (1..=lanes).find(|&r| self.estimate(r) <= limit) {
            return (rounds, None);
        }
        let best = (1..=lanes)
            .min_by_key(|&r| (self.estimate(r), r))
            .unwrap_or(1);
        let warning = format!(
            "the table search needs about {} per process for {} fingerprints, more than --memory-limit {} even in {best} round(s); it goes ahead (spilling to disk is not built yet): use more workers or processes, or raise the limit",
            human_bytes(self.estimate(best)),
            self.fingerprints,
            human_bytes(limit)
        );
        (best, Some(warning))
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

    fn shape(fingerprints: u64, workers: usize) -> SearchShape {
        SearchShape {
            fingerprints,
            lanes: 16,
            bands: false,
            workers,
            workers_here: workers,
        }
    }

    #[test]
    fn one_worker_needs_one_record_per_fingerprint_in_any_round() {
        let s = shape(1_000_000, 1);
        assert_eq!(s.estimate(1), 1_000_000 * (RECORD_BYTES + ENTRY_BYTES));
        // Later rounds also hold the waiting fingerprints: one round is best.
        assert!(s.estimate(4) > s.estimate(1));
        assert_eq!(s.choose(None, Some(s.estimate(1))), (1, None));
    }

    #[test]
    fn more_workers_make_more_records_and_rounds_cut_them() {
        let s = shape(10_000_000, 16);
        // 16 workers: each fingerprint goes to up to 16 of them in one round, 4 in 4 rounds.
        assert_eq!(
            s.estimate(1),
            10_000_000 * 16 * RECORD_BYTES + 10_000_000 * ENTRY_BYTES
        );
        let limit = s.estimate(4);
        assert_eq!(s.choose(None, Some(limit)), (4, None));
        assert_eq!(s.choose(None, Some(limit - 1)).0, 6); // 16 lanes: 6 rounds hold 3 each
        assert_eq!(s.choose(Some(2), Some(1)), (2, None));
        assert_eq!(s.choose(None, None), (1, None));
    }

    #[test]
    fn an_impossible_limit_is_a_warning_not_a_failure() {
        let s = shape(1_000_000, 1);
        let (rounds, warning) = s.choose(None, Some(1000));
        assert_eq!(rounds, 1);
        let warning = warning.expect("a warning");
        assert!(
            warning.contains("1000 fingerprints") || warning.contains("1000000 fingerprints"),
            "{warning}"
        );
        assert!(warning.contains("--memory-limit 1000 B"), "{warning}");
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
