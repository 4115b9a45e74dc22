//! Table keys: how a record's bucket in a lane (a permutation table, or an LSH band) is
//! found, packed for sorting, and routed to the worker that searches it.

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
    },
    Bands,
}

impl Keys {
    /// The keys of the job's design, or of its LSH bands in MinHash mode.
    pub fn of(config: &JobConfig) -> Keys {
        match config.lsh {
            Some(_) => Keys::Bands,
            None => Keys::Tables {
                masks: config.design.masks().to_vec(),
                packers: config.design.packers(),
            },
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

    /// The worker that searches the bucket of `value` in `lane`: a mix of the lane and the
    /// key, reduced to a worker index (timely sends a route below `peers` to that worker).
    #[inline]
    pub fn worker(&self, lane: u32, value: u64, peers: usize) -> u64 {
        mix2(lane as u64, self.key(lane, value)) % peers as u64
    }
}
