//! A table that stores 6 bytes an entry instead of 12: its entries' rows, and of each
//! entry's permuted fingerprint only the 16 bits below what a directory fixes.
//!
//! The simple table ([`super`]'s `&[u64]`) stores every entry's whole permuted fingerprint
//! (8 bytes) beside its row (4): 192 bytes a document for manku16's 16 tables, 19 GB for
//! 100M documents, more than fits a small machine's page cache beside everything else. But
//! a query needs far less of it. Its candidates are the entries sharing its table key (the
//! top `m` bits, 28 for manku16), and its answer needs each candidate's whole fingerprint
//! only to measure a distance, which the index's document file has anyway (one `u64` a
//! document, in row order).
//!
//! So, as Manku, Jain and Das Sarma suggest (WWW 2007, section 3.1.1: the bits a sorted
//! table's position already fixes need not be stored again), a compact table keeps:
//! - a **directory** of `2^d + 1` starts: the entries whose permuted fingerprint's top `d`
//!   bits are `b` are positions `directory[b] .. directory[b + 1]`;
//! - a **tag** per entry (`u16`): the 16 bits below those `d`;
//! - a **row** per entry (`u32`), as the simple table.
//!
//! `d` is [`directory_bits`]: `m - 16` where the table is large enough (so that directory
//! and tag together fix exactly the key, and a run is one bucket's equal tags), fewer for a
//! small table (so that the directory stays below a quarter of its entries) and at most
//! [`MAX_DIRECTORY_BITS`]. With fewer than `m` bits known, a run found by them holds
//! entries of other keys as well: the caller's check that the two share the table's key
//! ([`TableDesign::first_shared_table`](crate::tables::TableDesign::first_shared_table),
//! which every match passes anyway) drops them. A candidate's fingerprint is read from the
//! documents' fingerprints by its row ([`Stored::Plain`]).

use std::ops::Range;

use super::{KeyTable, Permutation, Stored};

/// The most bits a directory fixes: `2^20 + 1` starts, 8 MiB a table. A table key longer
/// than 36 bits (a design for `k` of 0 or 1) leaves the bits past 36 to the candidates'
/// check; at 36 known bits a run holds `n / 2^36` entries on average.
pub const MAX_DIRECTORY_BITS: u32 = 20;

/// The bits of a table of `n` entries whose key is `key_bits` long that its directory
/// fixes: `key_bits - 16` (the tag holds the rest of the key), at most
/// [`MAX_DIRECTORY_BITS`], and at most `log2(n) - 2` (a directory of at most `n / 4 + 1`
/// starts, 2 bytes an entry).
pub fn directory_bits(key_bits: u32, n: usize) -> u32 {
    let size = if n == 0 { 0 } else { n.ilog2() };
    key_bits
        .saturating_sub(16)
        .min(MAX_DIRECTORY_BITS)
        .min(size.saturating_sub(2))
}

/// The directory bucket and the tag of a permuted fingerprint in a table whose directory
/// fixes `d` bits: its top `d` bits, and the 16 below them.
#[inline]
pub fn bucket_and_tag(permuted: u64, d: u32) -> (u64, u16) {
    let bucket = if d == 0 { 0 } else { permuted >> (64 - d) };
    ((bucket), ((permuted << d) >> 48) as u16)
}

/// A compact table over borrowed arrays (a mapped file's, or a test's): see the module
/// docs.
#[derive(Clone, Copy, Debug)]
pub struct CompactTable<'a> {
    bits: u32,
    directory: &'a [u64],
    tags: &'a [u16],
    rows: &'a [u32],
    fingerprints: &'a [u64],
}

impl<'a> CompactTable<'a> {
    /// A table whose directory fixes `bits` bits (`directory` has `2^bits + 1` starts),
    /// with `tags` and `rows` of its entries in order, over `fingerprints` (the documents'
    /// plain fingerprints, by row). Damaged arrays (starts that fall or pass the entries,
    /// rows past the fingerprints) make wrong answers, never a panic: a reader that must
    /// trust them checks them first.
    pub fn new(
        bits: u32,
        directory: &'a [u64],
        tags: &'a [u16],
        rows: &'a [u32],
        fingerprints: &'a [u64],
    ) -> Self {
        assert!(bits <= MAX_DIRECTORY_BITS, "a directory of {bits} bits");
        assert_eq!(directory.len(), (1usize << bits) + 1, "directory size");
        assert_eq!(tags.len(), rows.len(), "tags and rows");
        CompactTable {
            bits,
            directory,
            tags,
            rows,
            fingerprints,
        }
    }

    /// The entries' rows, in the table's order.
    pub fn rows(&self) -> &'a [u32] {
        self.rows
    }

    /// Bucket `b`'s positions, clamped to the entries.
    #[inline]
    fn bucket(&self, b: usize) -> Range<usize> {
        let n = self.tags.len();
        let start = (self.directory[b] as usize).min(n);
        let end = (self.directory[b + 1] as usize).clamp(start, n);
        start..end
    }
}

impl KeyTable for CompactTable<'_> {
    fn len(&self) -> usize {
        self.tags.len()
    }

    fn known_bits(&self) -> u32 {
        self.bits + 16
    }

    #[inline]
    fn candidates(&self, permutation: &Permutation, permuted: u64, _from: usize) -> Range<usize> {
        let (b, tag) = bucket_and_tag(permuted, self.bits);
        let bucket = self.bucket(b as usize);
        // The tag's bits that are key bits (all 16 once the table is large).
        let key_bits = 64 - permutation.free_bits();
        let e = key_bits.saturating_sub(self.bits).min(16);
        if e == 0 {
            return bucket;
        }
        let shift = 16 - e;
        let want = tag >> shift;
        let tags = &self.tags[bucket.clone()];
        let start = tags.partition_point(|&t| (t >> shift) < want);
        let end = start + tags[start..].partition_point(|&t| (t >> shift) == want);
        bucket.start + start..bucket.start + end
    }

    #[inline]
    fn stored(&self, position: usize) -> Stored {
        match self.fingerprints.get(self.rows[position] as usize) {
            Some(&fp) => Stored::Plain(fp),
            None => Stored::Missing,
        }
    }

    fn prefixes(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        let d = self.bits;
        (0..1usize << d).flat_map(move |b| {
            let high = if d == 0 { 0 } else { (b as u64) << (64 - d) };
            self.bucket(b)
                .map(move |i| (i, high | (u64::from(self.tags[i]) << (48 - d))))
        })
    }
}

/// A compact table's arrays, owned: built in memory from `(permuted, row)` entries sorted
/// ascending ([`CompactArrays::of`]), the simple version of what an index writer streams to
/// its file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactArrays {
    pub bits: u32,
    pub directory: Vec<u64>,
    pub tags: Vec<u16>,
    pub rows: Vec<u32>,
}

impl CompactArrays {
    /// The arrays of a table whose key is `key_bits` long over `entries`, sorted.
    pub fn of(entries: &[(u64, u32)], key_bits: u32) -> Self {
        let d = directory_bits(key_bits, entries.len());
        let mut directory = vec![0u64; (1usize << d) + 1];
        let mut tags = Vec::with_capacity(entries.len());
        let mut rows = Vec::with_capacity(entries.len());
        for &(permuted, row) in entries {
            let (b, tag) = bucket_and_tag(permuted, d);
            directory[b as usize + 1] += 1;
            tags.push(tag);
            rows.push(row);
        }
        for b in 1..directory.len() {
            directory[b] += directory[b - 1];
        }
        CompactArrays {
            bits: d,
            directory,
            tags,
            rows,
        }
    }

    /// The table over `fingerprints` (the documents' plain fingerprints, by row).
    pub fn table<'a>(&'a self, fingerprints: &'a [u64]) -> CompactTable<'a> {
        CompactTable::new(
            self.bits,
            &self.directory,
            &self.tags,
            &self.rows,
            fingerprints,
        )
    }
}
