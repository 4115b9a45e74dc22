//! Helpers the end-to-end tests share: running the binary ([`cli`]), generating corpora and
//! the seeded random generator ([`corpus`]), reading a run's output tables ([`outputs`]),
//! and finding the shared corpora ([`shared`]).
// Each test binary uses some of these, never all.
#![allow(dead_code, unused_imports)]

pub mod cli;
pub mod corpus;
pub mod http;
pub mod outputs;
pub mod procs;
pub mod serve;
pub mod shared;

use std::path::Path;

pub use cli::*;
pub use corpus::*;
pub use outputs::*;
pub use procs::*;
pub use shared::*;

/// A temporary path as the `&str` a command line takes.
pub fn s(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}
