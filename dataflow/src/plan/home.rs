//! Home workers: where each document is parsed, fingerprinted, and its results sent back to.
//!
//! The simple rule is a hash of the document's number, which spreads documents evenly. But
//! reading is not spread evenly when there are fewer input units than workers: one
//! compressed file is decompressed and split into lines by a single worker, which then has
//! less time for fingerprinting than the others. So the hash picks a slot of a fixed table,
//! and each worker holds a number of slots that gives it an equal *total* load: its reading
//! (from the plan, which every worker computes the same way) plus its share of the
//! fingerprinting. With balanced reading the table is even, and it is the simple rule.
//!
//! The table depends only on the plan, the scheme and the number of workers, so every
//! process builds the same one and results do not depend on timing. The cost model is a
//! rough one (each source kind's [`neardup_io::source::ReadCost`], measured on dev-medium
//! with one core); it moves load, never correctness.

use crate::config::JobConfig;
use crate::plan::Plan;
use neardup_core::mix::mix64;

/// Slots of the table: fine enough for 1% steps of load, small enough to stay in cache.
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

/// The home of every document, as a table of worker indices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HomeTable {
    slots: std::rc::Rc<[u16]>,
}

impl HomeTable {
    /// Even slots: the simple rule.
    pub fn even(peers: usize) -> Self {
        Self::from_shares(&vec![1.0; peers.max(1)])
    }

    /// The table for this plan: each worker's share of fingerprinting chosen so that its
    /// reading plus fingerprinting is the same for all (as far as shares can be >= 0).
    pub fn for_plan(plan: &Plan, config: &JobConfig, peers: usize) -> Self {
        let peers = peers.max(1);
        let mut reading = vec![0f64; peers];
        let mut hashing = 0f64;
        for (unit, worker) in plan.units.iter().zip(plan.owners(peers)) {
            let file = &plan.files[unit.file as usize];
            let weight = unit.spec.weight.max(1) as f64;
            // Fingerprint tables are read, not fingerprinted: nothing to balance.
            let Some(cost) = file.format.kind().read_cost(file) else {
                return Self::even(peers);
            };
            reading[worker] += weight * cost.read_per_weight;
            hashing += weight * hash_cost_per_unit_byte(config, cost.text_per_weight);
        }
        if hashing <= 0.0 {
            return Self::even(peers);
        }
        let level = (reading.iter().sum::<f64>() + hashing) / peers as f64;
        let shares: Vec<f64> = reading.iter().map(|r| (level - r).max(0.0)).collect();
        Self::from_shares(&shares)
    }

    /// Slots in proportion to `shares` (largest remainders; ties to the smaller worker).
    fn from_shares(shares: &[f64]) -> Self {
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
                    slots.push(w as u16);
                    given[w] += 1;
                }
            }
        }
        HomeTable {
            slots: slots.into(),
        }
    }

    /// The home worker of a document, as an exchange route (a worker index below `peers`,
    /// which timely sends to that worker).
    #[inline]
    pub fn route(&self, doc_id: u64) -> u64 {
        self.slots[(mix64(doc_id) % HOME_SLOTS as u64) as usize] as u64
    }

    /// Each worker's share of the slots.
    pub fn shares(&self, peers: usize) -> Vec<f64> {
        let mut counts = vec![0usize; peers];
        for &w in self.slots.iter() {
            counts[w as usize] += 1;
        }
        counts
            .iter()
            .map(|&c| c as f64 / HOME_SLOTS as f64)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let t = HomeTable::from_shares(&[0.1, 0.4]);
        let shares = t.shares(2);
        assert!((shares[0] - 0.2).abs() < 0.002, "{shares:?}");
        // The documents follow the table.
        let to_0 = (0..100_000u64).filter(|&d| t.route(d) == 0).count();
        assert!((18_000..22_000).contains(&to_0), "{to_0}");
    }

    #[test]
    fn no_share_at_all_falls_back_to_even() {
        assert_eq!(HomeTable::from_shares(&[0.0, 0.0]), HomeTable::even(2));
    }
}
