//! What the live service (`neardup serve`) keeps running between requests, as opposed to
//! the batch job in the rest of this crate: [`clusters`], the near-duplicate clusters of the
//! documents present, maintained under inserts, replacements and deletes; [`service`], the
//! documents present, their durability (a write-ahead log and checkpoints) and the answers
//! to the service's requests.

pub mod clusters;
pub mod service;
