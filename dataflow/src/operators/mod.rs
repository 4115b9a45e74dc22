//! Operators of our own, in timely's style: one per file, each an extension trait on
//! timely's streams with an example that runs. The stages use them where they would
//! otherwise write the same operator out again.
//!
//! | operator | what it does |
//! |---|---|
//! | [`collect`] | fold a stream into a state, and use the state once the stream is complete |
//! | [`sort`] | sort a stream within a memory budget (runs on disk beyond it), and walk it in order once it is complete, a chunk per activation |

pub mod collect;
pub mod sort;

pub use collect::CollectComplete;
pub use sort::SortComplete;
