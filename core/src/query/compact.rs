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
//! `d` is [`directory_bits`]: `log2(n) - 4`, so that a bucket holds about 16 entries (a
//! query's run is then found in a cache line or two of tags, where a binary search over
//! the whole table lands on `log2(n)` of them), at most `m` and [`MAX_DIRECTORY_BITS`].
//! Directory and tag together fix `d + 16` bits, the whole key once `n` reaches `2^(m -
//! 12)` (65,536 entries for manku16). With fewer than `m` bits known (a small table, or a
//! key longer than 40 bits), a run found by them holds entries of other keys as well:
//! the caller's check that the two share the table's key
//! ([`TableDesign::first_shared_table`](crate::tables::TableDesign::first_shared_table),
//! which every match passes anyway) drops them. A candidate's fingerprint is read from the
//! documents' fingerprints by its row ([`Stored::Plain`]).

use std::ops::Range;

use super::{prefetch_line, KeyTable, Permutation, Prefetch, Stored};

/// The most bits a directory fixes: `2^24 + 1` starts, 128 MiB a table (from 256M entries
/// on, half a byte an entry).
pub const MAX_DIRECTORY_BITS: u32 = 24;

/// The bits of a table of `n` entries whose key is `key_bits` long that its directory
/// fixes: `log2(n) - 4` (buckets of 16 to 32 entries, a directory of at most `n / 16 + 1`
/// starts, half a byte an entry), at most `key_bits` (a bucket never spans keys) and
/// [`MAX_DIRECTORY_BITS`].
///
/// Measured at 100M documents in 4 generations (this 2-core machine, 16 clients; docs/
/// performance.md): `key_bits - 16` bits (buckets of 6,000 entries, a binary search of 13
/// steps among their tags) answered 5,274 to 5,970 queries a second.
pub fn directory_bits(key_bits: u32, n: usize) -> u32 {
    let size = if n == 0 { 0 } else { n.ilog2() };
    key_bits.min(MAX_DIRECTORY_BITS).min(size.saturating_sub(4))
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

    #[inline]
    fn prefetch(&self, permuted: u64, stage: Prefetch) {
        let (b, _) = bucket_and_tag(permuted, self.bits);
        match stage {
            Prefetch::Directory => prefetch_line(self.directory.as_ptr().wrapping_add(b as usize)),
            Prefetch::Run => {
                if let Some(&start) = self.directory.get(b as usize) {
                    prefetch_line(self.tags.as_ptr().wrapping_add(start as usize));
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::SeededRng;

    /// For keys of 4 to 44 bits and tables of 0 to 5,000 entries (directories of 0 bits, of
    /// every key bit, and of fewer), a run holds every entry sharing the query's key, and
    /// holds only those once directory and tag fix the whole key.
    #[test]
    fn runs_hold_every_entry_of_the_key() {
        let mut rng = SeededRng::new(8);
        for key_bits in [4u32, 8, 12, 20, 28, 44] {
            let mask = if key_bits == 0 {
                0
            } else {
                !0u64 << (64 - key_bits)
            };
            let p = Permutation::new(mask.rotate_left(7));
            for n in [0usize, 1, 17, 300, 5000] {
                let fps: Vec<u64> = (0..n)
                    .map(|i| match i % 3 {
                        0 => rng.next_u64(),
                        _ => rng.next_u64() & !(mask.rotate_left(7) >> 2),
                    })
                    .collect();
                let mut entries: Vec<(u64, u32)> = fps
                    .iter()
                    .enumerate()
                    .map(|(r, &f)| (p.permute(f), r as u32))
                    .collect();
                entries.sort_unstable();
                let arrays = CompactArrays::of(&entries, key_bits);
                let table = arrays.table(&fps);
                assert_eq!(table.prefixes().count(), n);
                let exact = arrays.bits + 16 >= key_bits;
                for q in fps.iter().copied().chain((0..50).map(|_| rng.next_u64())) {
                    let permuted = p.permute(q);
                    let (lo, hi) = p.key_range_of_permuted(permuted);
                    let run = table.candidates(&p, permuted, 0);
                    let want: Vec<usize> = (0..n)
                        .filter(|&i| (lo..=hi).contains(&entries[i].0))
                        .collect();
                    for &i in &want {
                        assert!(
                            run.contains(&i),
                            "key {key_bits} n {n}: entry {i} not in {run:?}"
                        );
                    }
                    if exact {
                        assert_eq!(run.len(), want.len(), "key {key_bits} n {n}");
                    }
                }
            }
        }
    }
}
