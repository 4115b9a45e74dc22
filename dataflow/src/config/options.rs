//! Option values as people write them, shared by the `neardup` binary and the Python
//! package so that both accept the same spellings and refuse the same mistakes with the
//! same words: sizes (`16G`, `512MiB`), the memory limit (`auto`: a share of this machine's
//! physical memory) and the number of table rounds. (The fingerprint scheme a saved index
//! was made with is rebuilt where index queries are answered: [`neardup_io::index::answer`].)

use super::DEFAULT_MEMORY_SHARE;

/// An option value that cannot be used; the message names the value.
#[derive(Debug, thiserror::Error)]
pub enum OptionError {
    #[error("{text:?} is not a size: expected a number like 16G or 512M")]
    NotASize {
        text: String,
        #[source]
        source: std::num::ParseFloatError,
    },
    #[error("{text:?}: unknown unit {unit:?} (expected K, M, G or T)")]
    UnknownUnit { text: String, unit: String },
    #[error("{text:?} is not a usable size")]
    UnusableSize { text: String },
    #[error("--table-rounds {text:?}: expected auto or a number of rounds, at least 1")]
    TableRounds { text: String },
}

/// Parses `16G`, `512MiB`, `1.5 GB`, `2000000` (bytes). Units are powers of 1024.
pub fn parse_size(text: &str) -> Result<u64, OptionError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number.parse().map_err(|source| OptionError::NotASize {
        text: text.to_string(),
        source,
    })?;
    let unit = unit.trim().to_ascii_lowercase();
    let power = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" => 0,
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        _ => {
            return Err(OptionError::UnknownUnit {
                text: text.to_string(),
                unit,
            })
        }
    };
    let bytes = value * 1024f64.powi(power);
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
        return Err(OptionError::UnusableSize {
            text: text.to_string(),
        });
    }
    Ok(bytes as u64)
}

/// The memory limit: `auto` ([`default_memory_limit`]), `none`, or a size.
pub fn memory_limit(text: &str) -> Result<Option<u64>, OptionError> {
    match text.trim() {
        "none" => Ok(None),
        "auto" => Ok(default_memory_limit()),
        size => parse_size(size).map(Some),
    }
}

/// The default memory limit: [`DEFAULT_MEMORY_SHARE`] of physical memory (`None` where it
/// cannot be read).
pub fn default_memory_limit() -> Option<u64> {
    physical_memory().map(|m| (m as f64 * DEFAULT_MEMORY_SHARE) as u64)
}

/// The table rounds: `auto` (chosen from the memory limit) or a number of rounds.
pub fn table_rounds(text: &str) -> Result<Option<usize>, OptionError> {
    match text.trim() {
        "auto" => Ok(None),
        n => match n.parse::<usize>() {
            Ok(0) | Err(_) => Err(OptionError::TableRounds {
                text: text.to_string(),
            }),
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
        assert_eq!(
            parse_size("12Q").unwrap_err().to_string(),
            "\"12Q\": unknown unit \"q\" (expected K, M, G or T)"
        );
    }

    #[test]
    fn limits_and_rounds() {
        assert_eq!(memory_limit("none").unwrap(), None);
        assert_eq!(memory_limit("1G").unwrap(), Some(1 << 30));
        let auto = memory_limit("auto")
            .unwrap()
            .expect("Linux has /proc/meminfo");
        assert!(auto > 1 << 20);
        assert_eq!(Some(auto), default_memory_limit());
        assert_eq!(table_rounds("auto").unwrap(), None);
        assert_eq!(table_rounds("4").unwrap(), Some(4));
        assert!(table_rounds("0").is_err());
        assert!(table_rounds("x").is_err());
    }
}
