//! Permutation-table designs (Manku, Jain and Das Sarma, WWW 2007).
//!
//! To find every pair of 64-bit fingerprints within Hamming distance `k` without comparing
//! all pairs: cut the 64 bits into `B > k` blocks. Two fingerprints that differ in at most
//! `k` bits differ in at most `k` blocks, so they agree on at least `B - k` blocks. Build one
//! *table* per choice of `B - k` blocks; its key is the fingerprint's bits in those blocks
//! (the paper permutes the fingerprint so those blocks lead, and sorts: the "rotated prefix").
//! Every pair within `k` shares its key in at least one table, so it suffices to compare
//! fingerprints with equal keys.
//!
//! Here a table is a 64-bit *mask* of its key bits: `fp & mask` is the key (the same bits the
//! rotated prefix holds, in place), and "`a` and `b` share the key of table `t`" is
//! `(a ^ b) & mask[t] == 0`. A pair may share keys in several tables; it is reported only from
//! the first one ([`TableDesign::first_shared_table`]), so it is reported exactly once.
//!
//! Designs:
//! - [`TableDesign::manku16`] (the default for k = 3): 4 blocks of 16 bits, choose 1; the other
//!   48 bits as 4 blocks of 12, choose 1: 16 tables with 28-bit keys (section 3.1.1).
//! - [`TableDesign::blocks`]`(B, k)`: B near-equal blocks, every choice of `B - k`: C(B, k)
//!   tables with about `64 (B - k) / B` key bits. Works for any k < 64.
//!
//! Fewer tables mean less memory and traffic but larger buckets: a table with `b` key bits
//! puts about `N / 2^b` fingerprints in each probe's bucket. [`TableDesign::expected_bucket`]
//! gives that figure so a run can warn before it starts.

use std::fmt;

/// The default `k`: fingerprints within 3 bits of each other are near-duplicates.
///
/// Manku, Jain and Das Sarma ("Detecting Near-Duplicates for Web Crawling", WWW 2007) chose
/// k = 3 for 64-bit simhash fingerprints of web pages: on their crawl of 8 billion pages,
/// k = 3 balanced precision and recall (both about 0.75), where a larger k reports many
/// pairs that are not near-duplicates and a smaller k misses many that are.
/// [`TableDesign::manku16`] is the design for this k ([`TableDesign::for_k`]`(DEFAULT_K)`).
pub const DEFAULT_K: u32 = 3;

/// The largest `k` a design supports.
pub const MAX_K: u32 = 32;

/// Gathers the bits under a table's mask into the low bits of a word: the key as a
/// `popcount(mask)`-bit integer, which is what the paper's rotated prefix holds.
///
/// The simple equivalent is `fp & mask` as a 64-bit key. Equal packed keys mean equal masked
/// keys (packing is a bijection on the masked bits), and a radix sort of packed keys only
/// passes over the bits that can differ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPacker {
    /// Contiguous runs of mask bits: (shift in the fingerprint, run mask, shift in the key).
    runs: Vec<(u32, u64, u32)>,
    bits: u32,
}

impl KeyPacker {
    pub fn new(mask: u64) -> Self {
        let mut runs = Vec::new();
        let mut rest = mask;
        let mut out = 0;
        while rest != 0 {
            let start = rest.trailing_zeros();
            let len = (rest >> start).trailing_ones();
            let run = if len == 64 {
                u64::MAX
            } else {
                (1u64 << len) - 1
            };
            runs.push((start, run, out));
            out += len;
            rest &= !(run << start);
        }
        KeyPacker { runs, bits: out }
    }

    /// The packed key of `fp`.
    #[inline]
    pub fn pack(&self, fp: u64) -> u64 {
        self.runs.iter().fold(0, |key, &(shift, run, at)| {
            key | (((fp >> shift) & run) << at)
        })
    }

    /// Bits in a packed key.
    pub fn bits(&self) -> u32 {
        self.bits
    }
}

/// A set of tables for finding all pairs within `k` bits.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TableDesign {
    k: u32,
    name: String,
    masks: Vec<u64>,
}

/// A design that cannot be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DesignError {
    #[error("k = {0} is out of range: it must be between 0 and {MAX_K}")]
    KOutOfRange(u32),
    #[error("{blocks} blocks cannot find pairs within k = {k}: blocks must be more than k (and at most 64)")]
    TooFewBlocks { blocks: u32, k: u32 },
    #[error("the manku16 design finds pairs within k = 3 only (asked for k = {0}); use blocks:B")]
    Manku16NeedsK3(u32),
    #[error("unknown table design {0:?}: expected auto, manku16 or blocks:B")]
    Unknown(String),
    #[error("blocks:{blocks} with k = {k} makes {tables} tables, more than the limit of {limit}")]
    TooManyTables {
        blocks: u32,
        k: u32,
        tables: u64,
        limit: u64,
    },
}

/// The most tables a design may have (each table costs one copy of every fingerprint).
pub const MAX_TABLES: u64 = 4096;

/// Splits 64 bits into `blocks` contiguous blocks, the first `64 % blocks` one bit wider.
fn block_masks(positions: &[u32], blocks: u32) -> Vec<u64> {
    let n = positions.len() as u32;
    let (base, extra) = (n / blocks, n % blocks);
    let mut masks = Vec::with_capacity(blocks as usize);
    let mut at = 0usize;
    for i in 0..blocks {
        let width = (base + u32::from(i < extra)) as usize;
        masks.push(
            positions[at..at + width]
                .iter()
                .fold(0u64, |m, &p| m | (1u64 << p)),
        );
        at += width;
    }
    masks
}

/// All `choose`-subsets of `0..n` in lexicographic order.
fn subsets(n: usize, choose: usize) -> Vec<Vec<usize>> {
    fn rec(
        start: usize,
        n: usize,
        left: usize,
        current: &mut Vec<usize>,
        out: &mut Vec<Vec<usize>>,
    ) {
        if left == 0 {
            out.push(current.clone());
            return;
        }
        for i in start..=n - left {
            current.push(i);
            rec(i + 1, n, left - 1, current, out);
            current.pop();
        }
    }
    let mut out = Vec::new();
    rec(0, n, choose, &mut Vec::new(), &mut out);
    out
}

fn binomial(n: u64, k: u64) -> u64 {
    (0..k.min(n - k)).fold(1u64, |acc, i| acc.saturating_mul(n - i) / (i + 1))
}

/// Bit positions `0..64` (most significant block first, as the paper draws them).
fn all_bits() -> Vec<u32> {
    (0..64).rev().collect()
}

impl TableDesign {
    /// The 16-table, 28-bit design for k = 3 ([`DEFAULT_K`]).
    pub fn manku16() -> Self {
        let outer = block_masks(&all_bits(), 4);
        let mut masks = Vec::with_capacity(16);
        for &first in &outer {
            let rest: Vec<u32> = (0..64)
                .rev()
                .filter(|&p| first & (1u64 << p) == 0)
                .collect();
            for second in block_masks(&rest, 4) {
                masks.push(first | second);
            }
        }
        TableDesign {
            k: 3,
            name: "manku16".into(),
            masks,
        }
    }

    /// `blocks` near-equal blocks, every choice of `blocks - k` of them.
    pub fn blocks(blocks: u32, k: u32) -> Result<Self, DesignError> {
        if k > MAX_K {
            return Err(DesignError::KOutOfRange(k));
        }
        if blocks <= k || blocks > 64 {
            return Err(DesignError::TooFewBlocks { blocks, k });
        }
        let tables = binomial(blocks as u64, k as u64);
        if tables > MAX_TABLES {
            return Err(DesignError::TooManyTables {
                blocks,
                k,
                tables,
                limit: MAX_TABLES,
            });
        }
        let block = block_masks(&all_bits(), blocks);
        let masks = subsets(blocks as usize, (blocks - k) as usize)
            .into_iter()
            .map(|chosen| chosen.iter().fold(0u64, |m, &i| m | block[i]))
            .collect();
        Ok(TableDesign {
            k,
            name: format!("blocks:{blocks}"),
            masks,
        })
    }

    /// The default design for `k`: manku16 for k = 3, otherwise `k + 2` blocks (C(k+2, 2)
    /// tables of about `128 / (k + 2)` key bits; a single 64-bit table for k = 0).
    pub fn for_k(k: u32) -> Result<Self, DesignError> {
        match k {
            3 => Ok(Self::manku16()),
            0 => Self::blocks(1, 0),
            k => Self::blocks(k + 2, k),
        }
    }

    /// Parses `auto`, `manku16` or `blocks:B` for a given `k`.
    pub fn parse(spec: &str, k: u32) -> Result<Self, DesignError> {
        if k > MAX_K {
            return Err(DesignError::KOutOfRange(k));
        }
        match spec {
            "auto" => Self::for_k(k),
            "manku16" if k == 3 => Ok(Self::manku16()),
            "manku16" => Err(DesignError::Manku16NeedsK3(k)),
            other => match other.strip_prefix("blocks:").map(str::parse::<u32>) {
                Some(Ok(b)) => Self::blocks(b, k),
                _ => Err(DesignError::Unknown(other.into())),
            },
        }
    }

    pub fn k(&self) -> u32 {
        self.k
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn tables(&self) -> usize {
        self.masks.len()
    }

    /// The key mask of each table.
    pub fn masks(&self) -> &[u64] {
        &self.masks
    }

    /// A packer for each table's key.
    pub fn packers(&self) -> Vec<KeyPacker> {
        self.masks.iter().map(|&m| KeyPacker::new(m)).collect()
    }

    /// The key of `fp` in table `t`: its bits under the table's mask.
    #[inline]
    pub fn key(&self, t: usize, fp: u64) -> u64 {
        fp & self.masks[t]
    }

    /// Every `(table, key)` of a fingerprint.
    pub fn keys(&self, fp: u64) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.masks
            .iter()
            .enumerate()
            .map(move |(t, &m)| (t, fp & m))
    }

    /// The first table in which `a` and `b` share their key, if any. A pair found in table
    /// `t` is reported only if this is `Some(t)`.
    #[inline]
    pub fn first_shared_table(&self, a: u64, b: u64) -> Option<usize> {
        let diff = a ^ b;
        self.masks.iter().position(|&m| diff & m == 0)
    }

    /// Key bits of the smallest-keyed table.
    pub fn min_key_bits(&self) -> u32 {
        self.masks
            .iter()
            .map(|m| m.count_ones())
            .min()
            .unwrap_or(64)
    }

    /// The expected number of other fingerprints sharing a fingerprint's key in one table,
    /// for `n` uniformly spread fingerprints, averaged over the tables.
    pub fn expected_bucket(&self, n: u64) -> f64 {
        let total: f64 = self
            .masks
            .iter()
            .map(|m| n as f64 / 2f64.powi(m.count_ones() as i32))
            .sum();
        total / self.masks.len().max(1) as f64
    }

    /// The expected number of fingerprint comparisons over all tables for `n` fingerprints.
    pub fn expected_comparisons(&self, n: u64) -> f64 {
        self.masks
            .iter()
            .map(|m| (n as f64).powi(2) / 2f64.powi(m.count_ones() as i32 + 1))
            .sum()
    }
}

impl fmt::Display for TableDesign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (k = {}, {} tables, {}-{} key bits)",
            self.name,
            self.k,
            self.masks.len(),
            self.min_key_bits(),
            self.masks.iter().map(|m| m.count_ones()).max().unwrap_or(0)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manku16_has_16_tables_of_28_bits() {
        let d = TableDesign::manku16();
        assert_eq!(d.tables(), 16);
        assert!(d.masks().iter().all(|m| m.count_ones() == 28));
        let distinct: std::collections::HashSet<_> = d.masks().iter().collect();
        assert_eq!(distinct.len(), 16);
    }

    #[test]
    fn block_designs_match_the_paper() {
        let d = TableDesign::blocks(6, 3).unwrap();
        assert_eq!(d.tables(), 20);
        let bits: Vec<u32> = d.masks().iter().map(|m| m.count_ones()).collect();
        assert!(bits.iter().all(|&b| (31..=33).contains(&b)), "{bits:?}");
        let d = TableDesign::blocks(5, 3).unwrap();
        assert_eq!(d.tables(), 10);
        assert_eq!(d.min_key_bits(), 25);
        assert_eq!(TableDesign::blocks(4, 3).unwrap().tables(), 4);
        assert_eq!(TableDesign::for_k(0).unwrap().masks(), &[u64::MAX]);
    }

    #[test]
    fn bad_designs_are_errors() {
        assert_eq!(
            TableDesign::blocks(3, 3),
            Err(DesignError::TooFewBlocks { blocks: 3, k: 3 })
        );
        assert_eq!(
            TableDesign::parse("manku16", 4),
            Err(DesignError::Manku16NeedsK3(4))
        );
        assert!(matches!(
            TableDesign::parse("nope", 3),
            Err(DesignError::Unknown(_))
        ));
        assert!(matches!(
            TableDesign::parse("blocks:x", 3),
            Err(DesignError::Unknown(_))
        ));
        assert_eq!(
            TableDesign::parse("auto", 40),
            Err(DesignError::KOutOfRange(40))
        );
        assert!(matches!(
            TableDesign::blocks(40, 20),
            Err(DesignError::TooManyTables { .. })
        ));
    }

    #[test]
    fn packed_keys_are_the_masked_bits_in_order() {
        let mut state = 7u64;
        for mask in [
            0u64,
            u64::MAX,
            0xffff_0000_0000_0fff,
            0x8000_0000_0000_0001,
            0x0f0f_f0f0_00ff_ff00,
        ] {
            let packer = KeyPacker::new(mask);
            assert_eq!(packer.bits(), mask.count_ones());
            let all = if mask == u64::MAX {
                u64::MAX
            } else {
                (1u64 << mask.count_ones()) - 1
            };
            assert_eq!(packer.pack(mask), all, "{mask:x}");
            for _ in 0..1000 {
                let (a, b) = (
                    crate::mix::splitmix64(&mut state),
                    crate::mix::splitmix64(&mut state),
                );
                // Equal packed keys exactly when equal masked bits; order is kept too.
                let b = if a % 3 == 0 {
                    (a & mask) | (b & !mask)
                } else {
                    b
                };
                assert_eq!(packer.pack(a) == packer.pack(b), a & mask == b & mask);
                assert_eq!(packer.pack(a) < packer.pack(b), (a & mask) < (b & mask));
            }
        }
    }

    #[test]
    fn expected_bucket_sizes() {
        let d = TableDesign::manku16();
        assert!((d.expected_bucket(1 << 34) - 64.0).abs() < 1e-9);
    }
}
