//! Table keys: how a record's bucket in a lane (a permutation table, or an LSH band) is
//! found, packed for sorting, and routed to the worker that searches it.
//!
//! **Routing.** The simple version sends each (table, key) to a worker by a hash of both:
//! fingerprints with equal keys in a table meet. But then a fingerprint's 16 tables go to
//! about 10 of 16 workers, one record each, and entering and exchanging those records cost
//! more the more workers there are (measured on a 16-core machine: the records and their
//! search took 5.6 times the CPU at 16 workers that they took at one). Tables whose keys
//! share bits can be routed together by those bits alone: two fingerprints with equal keys
//! in any table of the group agree on the bits the group's keys all contain, so they still
//! meet. [`route_groups`] groups the lanes of a design where the shared bits number at least
//! [`ROUTE_MIN_BITS`]: manku16's 16 tables are 4 groups of 4 (each group's keys share one
//! 16-bit block), and a fingerprint goes to about 3.6 of 16 workers. Which worker searches a
//! bucket never changes what is found, only where.

use neardup_core::mix::mix2;
use neardup_core::tables::KeyPacker;

use crate::config::JobConfig;

/// How a record's bucket is found: a simhash table keys on the masked fingerprint, an LSH
/// band record carries its key already.
#[derive(Clone)]
pub enum Keys {
    Tables {
        masks: Vec<u64>,
        packers: Vec<KeyPacker>,
        /// Each lane's route: (its group's first lane, the bits the group's keys share).
        routes: Vec<(u64, u64)>,
    },
    Bands,
}

/// The fewest shared key bits for which tables are routed together: 2^16 routes per group
/// keep the workers' shares even (a group with fewer shared bits would send every
/// fingerprint with those few bits to one worker).
pub const ROUTE_MIN_BITS: u32 = 16;

/// Groups lanes whose keys share at least [`ROUTE_MIN_BITS`] bits, taking them in order: a
/// lane joins the current group if the bits the group shares with it are still enough, and
/// starts the next group otherwise. Returns each lane's (group's first lane, shared mask); a
/// lane alone keeps its whole key, so it routes as the simple version does.
pub fn route_groups(masks: &[u64]) -> Vec<(u64, u64)> {
    let mut routes: Vec<(u64, u64)> = Vec::with_capacity(masks.len());
    let mut group = (0usize, 0u64);
    for (lane, &mask) in masks.iter().enumerate() {
        let shared = group.1 & mask;
        if lane > 0 && shared.count_ones() >= ROUTE_MIN_BITS {
            group.1 = shared;
        } else {
            group = (lane, mask);
        }
        routes.push((group.0 as u64, 0));
        // Every lane of the group so far routes by what they all share.
        for r in &mut routes[group.0..] {
            r.1 = group.1;
        }
    }
    routes
}

impl Keys {
    /// The keys of the job's design, or of its LSH bands in MinHash mode.
    pub fn of(config: &JobConfig) -> Keys {
        match config.lsh {
            Some(_) => Keys::Bands,
            None => Keys::tables(config.design.masks()),
        }
    }

    /// The keys of permutation tables with these masks.
    pub fn tables(masks: &[u64]) -> Keys {
        Keys::Tables {
            masks: masks.to_vec(),
            packers: masks.iter().map(|&m| KeyPacker::new(m)).collect(),
            routes: route_groups(masks),
        }
    }

    /// Each lane's route group (its group's first lane): the lanes of a group send a
    /// fingerprint to one worker. Empty for LSH bands, each its own record.
    pub fn route_group_ids(&self) -> Vec<u64> {
        match self {
            Keys::Tables { routes, .. } => routes.iter().map(|&(group, _)| group).collect(),
            Keys::Bands => Vec::new(),
        }
    }

    /// `lane`'s route group (its group's first lane): lanes of one group route every
    /// value to the same worker ([`Keys::worker`]). A band is its own group.
    #[inline]
    pub fn route_group(&self, lane: u32) -> u64 {
        match self {
            Keys::Tables { routes, .. } => routes[lane as usize].0,
            Keys::Bands => lane as u64,
        }
    }

    /// The key of `value` in `lane`.
    #[inline]
    pub fn key(&self, lane: u32, value: u64) -> u64 {
        match self {
            Keys::Tables { masks, .. } => value & masks[lane as usize],
            Keys::Bands => value,
        }
    }

    /// The key of `value` in `lane` as a `key_bits(lane)`-bit integer (for sorting).
    #[inline]
    pub fn packed(&self, lane: u32, value: u64) -> u64 {
        match self {
            Keys::Tables { packers, .. } => packers[lane as usize].pack(value),
            Keys::Bands => value,
        }
    }

    pub fn key_bits(&self, lane: u32) -> u32 {
        match self {
            Keys::Tables { packers, .. } => packers[lane as usize].bits(),
            Keys::Bands => 64,
        }
    }

    /// The worker that searches the bucket of `value` in `lane`: a mix of the lane's group
    /// and the bits its group's keys share (of the band and its key, for LSH bands), reduced
    /// to a worker index (timely sends a route below `peers` to that worker).
    #[inline]
    pub fn worker(&self, lane: u32, value: u64, peers: usize) -> u64 {
        match self {
            Keys::Tables { routes, .. } => {
                let (group, shared) = routes[lane as usize];
                mix2(group, value & shared) % peers as u64
            }
            Keys::Bands => mix2(lane as u64, value) % peers as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_core::tables::TableDesign;

    #[test]
    fn manku16_routes_in_four_groups_of_four_by_their_16_bit_block() {
        let design = TableDesign::manku16();
        let routes = route_groups(design.masks());
        for (lane, &(group, shared)) in routes.iter().enumerate() {
            assert_eq!(group, (lane / 4 * 4) as u64);
            assert_eq!(shared.count_ones(), 16);
            // The shared bits are in every key of the group.
            for other in group as usize..group as usize + 4 {
                assert_eq!(design.masks()[other] & shared, shared);
            }
        }
    }

    #[test]
    fn tables_sharing_too_few_bits_route_alone_by_their_whole_key() {
        // blocks:5 for k = 3: 10 tables of 2 blocks of about 13 bits; two tables share at
        // most one block (fewer than 16 bits), so none is grouped.
        let design = TableDesign::blocks(5, 3).expect("10 tables");
        let routes = route_groups(design.masks());
        for (lane, &(group, shared)) in routes.iter().enumerate() {
            assert_eq!((group, shared), (lane as u64, design.masks()[lane]));
        }
    }

    /// Fingerprints with equal keys in a table are routed to one worker, whatever the other
    /// bits, for every design and worker count: the property the search relies on.
    #[test]
    fn equal_keys_meet_on_one_worker() {
        let designs = [
            TableDesign::manku16(),
            TableDesign::blocks(6, 3).expect("20 tables"),
            TableDesign::blocks(9, 5).expect("126 tables"),
            TableDesign::for_k(0).expect("one table"),
        ];
        let mut state = 11u64;
        for design in &designs {
            let keys = Keys::tables(design.masks());
            for peers in [2usize, 3, 16] {
                for lane in 0..design.tables() {
                    let mask = design.masks()[lane];
                    for _ in 0..50 {
                        let a = neardup_core::mix::splitmix64(&mut state);
                        let noise = neardup_core::mix::splitmix64(&mut state) & !mask;
                        let b = a ^ noise;
                        assert_eq!(keys.key(lane as u32, a), keys.key(lane as u32, b));
                        assert_eq!(
                            keys.worker(lane as u32, a, peers),
                            keys.worker(lane as u32, b, peers),
                            "{} lane {lane}",
                            design.name()
                        );
                    }
                }
            }
        }
    }

    /// The routes still spread the fingerprints: every worker gets a fair share of a
    /// table's records (within 10% of the mean over 160,000 random fingerprints).
    #[test]
    fn grouped_routes_spread_the_records_evenly() {
        let keys = Keys::tables(TableDesign::manku16().masks());
        let peers = 16;
        let mut state = 5u64;
        let mut counts = vec![0u64; peers];
        for _ in 0..160_000 {
            let fp = neardup_core::mix::splitmix64(&mut state);
            counts[keys.worker(0, fp, peers) as usize] += 1;
        }
        for &c in &counts {
            assert!((9_000..=11_000).contains(&c), "{counts:?}");
        }
    }
}
