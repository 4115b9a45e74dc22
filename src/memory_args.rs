//! `--memory-limit SIZE` and `--table-rounds N|auto`: sizes as people write them, and the
//! default limit, a share of this machine's physical memory.

use anyhow::{bail, Context, Result};
use neardup_dataflow::config::DEFAULT_MEMORY_SHARE;

/// Parses `16G`, `512MiB`, `1.5 GB`, `2000000` (bytes). Units are powers of 1024.
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .with_context(|| format!("{text:?} is not a size: expected a number like 16G or 512M"))?;
    let unit = unit.trim().to_ascii_lowercase();
    let power = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" => 0,
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        _ => bail!("{text:?}: unknown unit {unit:?} (expected K, M, G or T)"),
    };
    let bytes = value * 1024f64.powi(power);
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
        bail!("{text:?} is not a usable size");
    }
    Ok(bytes as u64)
}

/// `--memory-limit`: `auto` (the default share of physical memory), `none`, or a size.
pub fn memory_limit(text: &str) -> Result<Option<u64>> {
    match text.trim() {
        "none" => Ok(None),
        "auto" => Ok(physical_memory().map(|m| (m as f64 * DEFAULT_MEMORY_SHARE) as u64)),
        size => parse_size(size).map(Some).context("--memory-limit"),
    }
}

/// `--table-rounds`: `auto` (chosen from the memory limit) or a number of rounds.
pub fn table_rounds(text: &str) -> Result<Option<usize>> {
    match text.trim() {
        "auto" => Ok(None),
        n => match n.parse::<usize>() {
            Ok(0) | Err(_) => {
                bail!("--table-rounds {text:?}: expected auto or a number of rounds, at least 1")
            }
            Ok(n) => Ok(Some(n)),
        },
    }
}

/// Physical memory in bytes, from /proc/meminfo (None where it cannot be read).
fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2000000").unwrap(), 2_000_000);
        assert_eq!(parse_size("16G").unwrap(), 16 << 30);
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("1.5 GB").unwrap(), 3 << 29);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        for bad in ["", "G", "12Q", "-1G", "0", "1.2.3G"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn limits_and_rounds() {
        assert_eq!(memory_limit("none").unwrap(), None);
        assert_eq!(memory_limit("1G").unwrap(), Some(1 << 30));
        let auto = memory_limit("auto")
            .unwrap()
            .expect("Linux has /proc/meminfo");
        assert!(auto > 1 << 20);
        assert_eq!(table_rounds("auto").unwrap(), None);
        assert_eq!(table_rounds("4").unwrap(), Some(4));
        assert!(table_rounds("0").is_err());
        assert!(table_rounds("x").is_err());
    }
}
