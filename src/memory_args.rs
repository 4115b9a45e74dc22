//! `--memory-limit SIZE` and `--table-rounds N|auto`: sizes as people write them, and the
//! default limit, a share of this machine's physical memory. The parsing lives in
//! [`neardup_dataflow::config::options`], shared with the Python package; these add the
//! flag's name to an error.

use anyhow::{Context, Result};
use neardup_dataflow::config::options;

/// Parses `16G`, `512MiB`, `1.5 GB`, `2000000` (bytes). Units are powers of 1024.
pub fn parse_size(text: &str) -> Result<u64> {
    Ok(options::parse_size(text)?)
}

/// `--memory-limit`: `auto` (the default share of physical memory), `none`, or a size.
pub fn memory_limit(text: &str) -> Result<Option<u64>> {
    options::memory_limit(text).context("--memory-limit")
}

/// `--table-rounds`: `auto` (chosen from the memory limit) or a number of rounds.
pub fn table_rounds(text: &str) -> Result<Option<usize>> {
    Ok(options::table_rounds(text)?)
}
