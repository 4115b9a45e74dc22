//! Helpers the end-to-end tests share: running the binary ([`cli`]), generating corpora and
//! the seeded random generator ([`corpus`]), and reading a run's output tables
//! ([`outputs`]).
// Each test binary uses some of these, never all.
#![allow(dead_code, unused_imports)]

pub mod cli;
pub mod corpus;
pub mod outputs;

use std::path::Path;

pub use cli::*;
pub use corpus::*;
pub use outputs::*;

/// A temporary path as the `&str` a command line takes.
pub fn s(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}
