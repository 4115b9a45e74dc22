//! Finding every pair within `k` bits among fingerprints that share a table key.
//!
//! The simple version: compare every pair in the bucket. That is quadratic, and real corpora
//! make hot buckets (templated pages, boilerplate) with tens of thousands of members, where
//! other implementations either truncate the bucket (and miss pairs) or stall.
//!
//! Here a bucket larger than [`DEFAULT_LEAF_SIZE`] is split again, exactly: its members
//! already agree on the key bits, so every pair within `k` differs in at most `k` of the
//! *free* bits. Cut the free bits into `k + 1` blocks; by the pigeonhole principle the pair
//! agrees on at least one whole block, so grouping by each block in turn and recursing
//! finds it. Only the bits that actually vary inside the bucket are cut: constant bits
//! would make blocks that group the whole bucket together again. A pair that agrees on several blocks is reported only from the first one at
//! every level, so nothing is reported twice. When a sub-bucket does not shrink (a clump of
//! nearly identical fingerprints, whose pairs are mostly real output anyway) it is compared
//! directly rather than split forever.

use crate::simhash::hamming;
use crate::tables::TableDesign;
use std::rc::Rc;

/// Finds the keys shared by two or more entries: the work of sorting a table.
///
/// The simple version sorts `(key, index)` pairs with a comparison sort and walks the runs of
/// equal keys. Here the sort is a radix sort (it only passes over the key bytes that vary),
/// and when keys fit in 32 bits and indices in 32 bits each entry is packed into one `u64`,
/// so every pass moves 8 bytes per entry instead of a whole record. The buffers are kept
/// between calls.
#[derive(Debug, Default)]
pub struct KeyGrouper {
    packed: Vec<u64>,
    scratch: Vec<u64>,
    wide: Vec<(u64, u64)>,
    members: Vec<u64>,
}

impl KeyGrouper {
    /// Calls `bucket(key, indices)` for every key that two or more `(key, index)` entries
    /// share, in increasing key order. `key_bits` bounds the keys (`key < 2^key_bits`), and
    /// `len` bounds the number of entries and their indices.
    pub fn group(
        &mut self,
        key_bits: u32,
        len: usize,
        entries: impl Iterator<Item = (u64, u64)>,
        mut bucket: impl FnMut(u64, &[u64]),
    ) {
        if key_bits <= 32 && len <= u32::MAX as usize {
            self.packed.clear();
            self.packed
                .extend(entries.map(|(key, index)| (key << 32) | index));
            sort_by_high_bits(&mut self.packed, &mut self.scratch, key_bits);
            for run in self.packed.chunk_by(|a, b| a >> 32 == b >> 32) {
                if run.len() >= 2 {
                    self.members.clear();
                    self.members.extend(run.iter().map(|&x| x & 0xffff_ffff));
                    bucket(run[0] >> 32, &self.members);
                }
            }
        } else {
            self.wide.clear();
            self.wide.extend(entries);
            radsort::sort_by_key(&mut self.wide, |&(key, _)| key);
            for run in self.wide.chunk_by(|a, b| a.0 == b.0) {
                if run.len() >= 2 {
                    self.members.clear();
                    self.members.extend(run.iter().map(|&(_, index)| index));
                    bucket(run[0].0, &self.members);
                }
            }
        }
    }
}

/// Digits of at most this many bits in the in-cache passes: 2^11 counters stay in L1.
const RADIX_DIGIT_BITS: u32 = 11;
/// Bits of the first, most-significant pass over a large array: 256 output streams keep the
/// scatter within what the TLB and write-combining buffers handle well.
const MSD_BITS: u32 = 8;
/// Arrays at least this long get the most-significant pass first.
const MSD_MIN_LEN: usize = 1 << 16;

/// Sorts `values` by their top 32 bits, of which only the low `key_bits` may be set. The
/// simple equivalent is `values.sort_by_key(|v| v >> 32)`.
///
/// A large array is first split on its top [`MSD_BITS`] key bits (one pass over memory),
/// and each part, now small enough for the cache, is finished with a least-significant-digit
/// radix sort. `scratch` is reused between calls so that large sorts do not fault in fresh
/// pages every time. Not stable across parts; equal keys stay together, which is all the
/// grouping needs.
fn sort_by_high_bits(values: &mut Vec<u64>, scratch: &mut Vec<u64>, key_bits: u32) {
    let n = values.len();
    if key_bits == 0 || n < 2 {
        return;
    }
    scratch.clear();
    scratch.resize(n, 0);
    if n < MSD_MIN_LEN || key_bits <= MSD_BITS {
        lsd_sort(values, scratch, 0, key_bits);
        return;
    }
    let low_bits = key_bits - MSD_BITS;
    let shift = 32 + low_bits;
    let mut counts = [0usize; 1 << MSD_BITS];
    for &v in values.iter() {
        counts[(v >> shift) as usize] += 1;
    }
    let mut starts = [0usize; 1 << MSD_BITS];
    let mut offset = 0;
    for (start, &count) in starts.iter_mut().zip(&counts) {
        *start = offset;
        offset += count;
    }
    let mut next = starts;
    for &v in values.iter() {
        let d = (v >> shift) as usize;
        scratch[next[d]] = v;
        next[d] += 1;
    }
    std::mem::swap(values, scratch);
    for (&start, &count) in starts.iter().zip(&counts) {
        if count > 1 {
            let range = start..start + count;
            lsd_sort(&mut values[range.clone()], &mut scratch[range], 0, low_bits);
        }
    }
}

/// Least-significant-digit radix sort of `values` by key bits `low..low + bits` of their
/// top 32 bits (stable; `scratch` is as long as `values`).
fn lsd_sort(values: &mut [u64], scratch: &mut [u64], low: u32, bits: u32) {
    let passes = bits.div_ceil(RADIX_DIGIT_BITS);
    if passes == 0 || values.len() < 2 {
        return;
    }
    let width = bits.div_ceil(passes);
    let digit_mask = (1u64 << width) - 1;
    let buckets = 1usize << width;
    // One read computes every pass's histogram.
    let mut counts = vec![0u32; buckets * passes as usize];
    for &v in values.iter() {
        let key = v >> (32 + low);
        for p in 0..passes as usize {
            counts[p * buckets + ((key >> (p as u32 * width)) & digit_mask) as usize] += 1;
        }
    }
    let n = values.len() as u32;
    let mut in_scratch = false;
    for p in 0..passes as usize {
        let histogram = &mut counts[p * buckets..(p + 1) * buckets];
        if histogram.contains(&n) {
            continue; // every value has the same digit here: the pass would change nothing
        }
        let mut offset = 0u32;
        for c in histogram.iter_mut() {
            let here = *c;
            *c = offset;
            offset += here;
        }
        let shift = 32 + low + p as u32 * width;
        let (from, to): (&[u64], &mut [u64]) = if in_scratch {
            (&*scratch, &mut *values)
        } else {
            (&*values, &mut *scratch)
        };
        for &v in from {
            let d = ((v >> shift) & digit_mask) as usize;
            to[histogram[d] as usize] = v;
            histogram[d] += 1;
        }
        in_scratch = !in_scratch;
    }
    if in_scratch {
        values.copy_from_slice(scratch);
    }
}

/// Buckets up to this size are compared pair by pair.
///
/// A split sorts the bucket once per block (`k + 1` sorts), while comparing a pair is an xor
/// and a popcount: below a few hundred members the comparisons are cheaper. Measured on
/// 2026-11-26 (AMD EPYC, one worker, one run each): 10M synthetic fingerprints at k = 6
/// (buckets of about 150) took 62.8 s at 64, 47.2 s at 256, 47.9 s at 512; 2M fingerprints
/// with a hot bucket of 200,000 at k = 3, 4.56 s at 64, 4.00 s at 256, 4.23 s at 1,024.
pub const DEFAULT_LEAF_SIZE: usize = 256;

/// A fingerprint and the document it belongs to.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Item {
    pub fp: u64,
    pub doc: u64,
}

/// A pair found: `doc_a < doc_b`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Pair {
    pub doc_a: u64,
    pub doc_b: u64,
    pub hamming: u32,
}

impl Pair {
    pub fn new(x: u64, y: u64, hamming: u32) -> Self {
        Pair {
            doc_a: x.min(y),
            doc_b: x.max(y),
            hamming,
        }
    }
}

/// Counters of the work a search did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SearchStats {
    /// Fingerprint pairs whose distance was computed.
    pub comparisons: u64,
    /// Buckets that were split because they were larger than the leaf size.
    pub splits: u64,
}

impl SearchStats {
    pub fn add(&mut self, other: &SearchStats) {
        self.comparisons += other.comparisons;
        self.splits += other.splits;
    }
}

/// One level of splitting: the block masks and the block this branch grouped by. The masks
/// are shared by every branch of a node (a reference count, not a copy per branch: at k = 6
/// on 10M fingerprints, allocating a copy per branch was a tenth of the search).
struct Level {
    masks: Rc<[u64]>,
    chosen: usize,
}

/// Searches buckets exactly, splitting hot ones.
#[derive(Clone, Copy, Debug)]
pub struct BucketSearch {
    pub k: u32,
    pub leaf_size: usize,
}

impl BucketSearch {
    pub fn new(k: u32) -> Self {
        BucketSearch {
            k,
            leaf_size: DEFAULT_LEAF_SIZE,
        }
    }

    /// Calls `emit` for every pair of `items` within `k` bits for which `accept(a, b)` holds.
    /// All items must agree on the bits of `shared` (the table key mask). Reorders `items`.
    pub fn search(
        &self,
        items: &mut [Item],
        shared: u64,
        accept: &impl Fn(u64, u64) -> bool,
        emit: &mut impl FnMut(Item, Item, u32),
    ) -> SearchStats {
        let mut stats = SearchStats::default();
        let mut levels = Vec::new();
        self.node(items, !shared, &mut levels, accept, emit, &mut stats);
        stats
    }

    fn node(
        &self,
        items: &mut [Item],
        free: u64,
        levels: &mut Vec<Level>,
        accept: &impl Fn(u64, u64) -> bool,
        emit: &mut impl FnMut(Item, Item, u32),
        stats: &mut SearchStats,
    ) {
        let blocks = self.k as usize + 1;
        // Bits that are constant across the bucket cannot tell its members apart: split on
        // the bits that vary, or every block over constant bits would return the whole bucket.
        let first = items.first().map_or(0, |it| it.fp);
        let free = free
            & items
                .iter()
                .fold(0, |varying, it| varying | (it.fp ^ first));
        if items.len() <= self.leaf_size || (free.count_ones() as usize) < blocks {
            self.compare(levels, accept, emit, stats).all(items);
            return;
        }
        stats.splits += 1;
        let masks: Rc<[u64]> = split_bits(free, blocks).into();
        let parent_len = items.len();
        for j in 0..blocks {
            let mask = masks[j];
            items.sort_unstable_by_key(|it| it.fp & mask);
            let mut start = 0;
            while start < items.len() {
                let key = items[start].fp & mask;
                let end = start
                    + items[start..]
                        .iter()
                        .take_while(|it| it.fp & mask == key)
                        .count();
                if end - start >= 2 {
                    levels.push(Level {
                        masks: Rc::clone(&masks),
                        chosen: j,
                    });
                    let run = &mut items[start..end];
                    if run.len() * 2 <= parent_len {
                        self.node(run, free & !mask, levels, accept, emit, stats);
                    } else {
                        self.compare(levels, accept, emit, stats).all(run);
                    }
                    levels.pop();
                }
                start = end;
            }
        }
    }

    fn compare<'a, A, E>(
        &self,
        levels: &'a [Level],
        accept: &'a A,
        emit: &'a mut E,
        stats: &'a mut SearchStats,
    ) -> Compare<'a, A, E> {
        Compare {
            k: self.k,
            levels,
            accept,
            emit,
            stats,
        }
    }
}

/// Comparing every pair of a leaf bucket: what it needs besides the items.
struct Compare<'a, A, E> {
    k: u32,
    levels: &'a [Level],
    accept: &'a A,
    emit: &'a mut E,
    stats: &'a mut SearchStats,
}

impl<A: Fn(u64, u64) -> bool, E: FnMut(Item, Item, u32)> Compare<'_, A, E> {
    /// Compares every pair of `items`. The inner loop is an xor and a population count; a
    /// build for plain x86-64 has no `popcnt` instruction and counts bits with eleven shifts,
    /// masks and a multiply, so the loop is compiled a second time with `popcnt` and chosen at
    /// run time (10M fingerprints at k = 6, where buckets hold about 150: the comparisons
    /// were 70% of the search).
    fn all(&mut self, items: &[Item]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the processor has just been found to support `popcnt`.
            unsafe { self.all_popcnt(items) };
            return;
        }
        self.all_portable(items)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    fn all_popcnt(&mut self, items: &[Item]) {
        self.all_portable(items)
    }

    #[inline(always)]
    fn all_portable(&mut self, items: &[Item]) {
        for (i, a) in items.iter().enumerate() {
            for b in &items[i + 1..] {
                self.stats.comparisons += 1;
                let d = hamming(a.fp, b.fp);
                if d <= self.k
                    && first_at_every_level(a.fp, b.fp, self.levels)
                    && (self.accept)(a.fp, b.fp)
                {
                    (self.emit)(*a, *b, d);
                }
            }
        }
    }
}

/// Whether, at every level, the pair agrees on no block before the one its branch chose.
fn first_at_every_level(a: u64, b: u64, levels: &[Level]) -> bool {
    let diff = a ^ b;
    levels
        .iter()
        .all(|level| level.masks[..level.chosen].iter().all(|&m| diff & m != 0))
}

/// Cuts the set bits of `free` into `blocks` groups of near-equal size.
fn split_bits(free: u64, blocks: usize) -> Vec<u64> {
    let positions: Vec<u32> = (0..64).rev().filter(|&p| free & (1u64 << p) != 0).collect();
    let (base, extra) = (positions.len() / blocks, positions.len() % blocks);
    let mut masks = Vec::with_capacity(blocks);
    let mut at = 0;
    for i in 0..blocks {
        let width = base + usize::from(i < extra);
        masks.push(
            positions[at..at + width]
                .iter()
                .fold(0u64, |m, &p| m | (1u64 << p)),
        );
        at += width;
    }
    masks
}

/// Folds the items of a bucket that share their whole fingerprint: each run of equal
/// fingerprints keeps only its first item in `(fp, order)` order (its representative), and
/// `member(representative, other)` is called for every other item of the run. Leaves
/// `items` holding the representatives, sorted by fingerprint.
///
/// The simple version searches the bucket as it is, where `n` equal fingerprints are
/// `n(n-1)/2` pairs at distance 0, and are compared pair by pair since no split can tell
/// them apart (templated pages that differ only in numbers: 6,000 of them were 17,997,000
/// pairs). Two equal fingerprints are at the same distance from every other fingerprint,
/// so the representative's pairs stand for its run, and the run is linked by `n - 1`
/// pairs: the same connected components. `order` (the document's number) makes the choice
/// of representative independent of the order the items arrived in.
pub fn fold_identical(
    items: &mut Vec<Item>,
    order: impl Fn(&Item) -> u64,
    mut member: impl FnMut(Item, Item),
) {
    items.sort_unstable_by_key(|it| (it.fp, order(it)));
    let mut kept = 0;
    for i in 0..items.len() {
        let it = items[i];
        if kept > 0 && items[kept - 1].fp == it.fp {
            member(items[kept - 1], it);
        } else {
            items[kept] = it;
            kept += 1;
        }
    }
    items.truncate(kept);
}

/// Every pair within the design's `k` among `items`, each once: sort each table by key and
/// search its buckets. The single-threaded version of what the dataflow does across workers.
pub fn find_pairs(
    design: &TableDesign,
    items: &[Item],
    search: &BucketSearch,
) -> (Vec<Pair>, SearchStats) {
    let mut pairs = Vec::new();
    let mut stats = SearchStats::default();
    let mut grouper = KeyGrouper::default();
    let mut bucket_items = Vec::new();
    for (t, (&mask, packer)) in design.masks().iter().zip(design.packers()).enumerate() {
        let entries = items
            .iter()
            .enumerate()
            .map(|(i, it)| (packer.pack(it.fp), i as u64));
        grouper.group(packer.bits(), items.len(), entries, |_, members| {
            bucket_items.clear();
            bucket_items.extend(members.iter().map(|&i| items[i as usize]));
            let accept = |a: u64, b: u64| design.first_shared_table(a, b) == Some(t);
            let s = search.search(&mut bucket_items, mask, &accept, &mut |a, b, d| {
                pairs.push(Pair::new(a.doc, b.doc, d))
            });
            stats.add(&s);
        });
    }
    pairs.sort_unstable();
    (pairs, stats)
}

/// The oracle: every pair within `k`, by comparing all pairs. Quadratic; for tests.
pub fn brute_force_pairs(items: &[Item], k: u32) -> Vec<Pair> {
    let mut pairs = Vec::new();
    for (i, a) in items.iter().enumerate() {
        for b in &items[i + 1..] {
            let d = hamming(a.fp, b.fp);
            if d <= k {
                pairs.push(Pair::new(a.doc, b.doc, d));
            }
        }
    }
    pairs.sort_unstable();
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::splitmix64;

    /// Random fingerprints, each with a few planted neighbours at distance 0..=k+1.
    fn planted(n: usize, k: u32, seed: u64) -> Vec<Item> {
        let mut state = seed;
        let mut items = Vec::new();
        let mut doc = 0;
        while items.len() < n {
            let base = splitmix64(&mut state);
            items.push(Item { fp: base, doc });
            doc += 1;
            for _ in 0..splitmix64(&mut state) % 4 {
                let flips = (splitmix64(&mut state) % (k as u64 + 2)) as u32;
                let mut fp = base;
                for _ in 0..flips {
                    fp ^= 1 << (splitmix64(&mut state) % 64);
                }
                items.push(Item { fp, doc });
                doc += 1;
            }
        }
        items
    }

    #[test]
    fn finds_exactly_the_brute_force_pairs() {
        for k in [0, 1, 3, 5, 8] {
            let design = TableDesign::for_k(k).unwrap();
            let items = planted(600, k, k as u64 + 11);
            let (pairs, _) = find_pairs(&design, &items, &BucketSearch::new(k));
            assert_eq!(pairs, brute_force_pairs(&items, k), "k = {k}");
        }
    }

    #[test]
    fn hot_buckets_are_split_and_stay_exact() {
        // 3000 fingerprints sharing their top 40 bits: every manku16 table bucket that
        // keys on those bits is hot.
        let mut state = 3u64;
        let prefix = 0x00ab_cdef_1234_u64 << 24;
        let items: Vec<Item> = (0..3000)
            .map(|doc| Item {
                fp: prefix | (splitmix64(&mut state) & 0xff_ffff),
                doc,
            })
            .collect();
        let design = TableDesign::manku16();
        let search = BucketSearch::new(3);
        let (pairs, stats) = find_pairs(&design, &items, &search);
        assert_eq!(pairs, brute_force_pairs(&items, 3));
        assert!(stats.splits > 0);
        let all_pairs = 3000u64 * 2999 / 2;
        assert!(stats.comparisons < all_pairs * 16 / 4, "{stats:?}");
    }

    /// The loop chosen at run time (with `popcnt` where the processor has it) against the
    /// portable one, on buckets with pairs at every distance up to k + 2.
    #[test]
    fn compare_all_paths_agree() {
        for k in [0u32, 3, 6] {
            let items = planted(300, k, 40 + k as u64);
            let search = BucketSearch::new(k);
            let accept = |a: u64, b: u64| a & 1 == b & 1 || k == 0;
            let run = |portable: bool| {
                let (mut found, mut stats) = (Vec::new(), SearchStats::default());
                let mut emit = |a: Item, b: Item, d| found.push((a.doc, b.doc, d));
                let mut compare = search.compare(&[], &accept, &mut emit, &mut stats);
                if portable {
                    compare.all_portable(&items);
                } else {
                    compare.all(&items);
                }
                (found, stats)
            };
            let (fast, slow) = (run(false), run(true));
            assert!(!slow.0.is_empty(), "k = {k}: the test needs pairs");
            assert_eq!(fast, slow, "k = {k}");
        }
    }

    #[test]
    fn clumps_of_identical_fingerprints_terminate() {
        let items: Vec<Item> = (0..500).map(|doc| Item { fp: 42, doc }).collect();
        let (pairs, _) = find_pairs(&TableDesign::manku16(), &items, &BucketSearch::new(3));
        assert_eq!(pairs.len(), 500 * 499 / 2);
    }

    #[test]
    fn folding_keeps_one_item_per_fingerprint_and_links_the_rest_to_it() {
        // Runs of equal fingerprints (up to 40 long), shuffled, numbered apart from their
        // position so that the representative must come from `order`, not the input order.
        let mut state = 17u64;
        let mut items = Vec::new();
        for run in 0..200u64 {
            let fp = splitmix64(&mut state);
            for _ in 0..1 + splitmix64(&mut state) % (1 + run % 40) {
                items.push(Item {
                    fp,
                    doc: splitmix64(&mut state) % 1_000_000,
                });
            }
        }
        items.sort_unstable_by_key(|it| splitmix64(&mut it.doc.clone()));
        let order = |it: &Item| it.doc.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        // The oracle: every fingerprint's members, the smallest in `order` first.
        let mut groups: std::collections::BTreeMap<u64, Vec<Item>> = Default::default();
        for it in &items {
            groups.entry(it.fp).or_default().push(*it);
        }
        let mut expected_reps = Vec::new();
        let mut expected_links = Vec::new();
        for members in groups.values_mut() {
            members.sort_by_key(|it| (order(it), it.doc));
            expected_reps.push(members[0]);
            expected_links.extend(members[1..].iter().map(|m| (members[0], *m)));
        }
        let mut links = Vec::new();
        let mut folded = items.clone();
        fold_identical(&mut folded, order, |rep, m| links.push((rep, m)));
        assert_eq!(folded, expected_reps);
        links.sort_by_key(|(r, m)| (r.fp, order(m), m.doc));
        expected_links.sort_by_key(|(r, m)| (r.fp, order(m), m.doc));
        assert_eq!(links, expected_links);
        assert_eq!(links.len() + folded.len(), items.len());
        assert!(links.len() > 1000, "the test needs long runs");
    }

    #[test]
    fn grouper_finds_the_shared_keys_of_a_comparison_sort() {
        let mut state = 5u64;
        for (bits, n) in [
            (0u32, 10usize),
            (4, 500),
            (12, 3000),
            (32, 2000),
            (40, 2000),
            (64, 300),
        ] {
            let keys: Vec<u64> = (0..n)
                .map(|_| {
                    let x = splitmix64(&mut state);
                    // Small key ranges collide; wide ones are made to collide by copying.
                    if bits == 0 {
                        0
                    } else if bits >= 32 && x.is_multiple_of(4) {
                        12345
                    } else {
                        x >> (64 - bits)
                    }
                })
                .collect();
            let mut expected: Vec<(u64, Vec<u64>)> = Vec::new();
            let mut sorted: Vec<(u64, u64)> = keys
                .iter()
                .enumerate()
                .map(|(i, &k)| (k, i as u64))
                .collect();
            sorted.sort_unstable();
            for run in sorted.chunk_by(|a, b| a.0 == b.0) {
                if run.len() >= 2 {
                    expected.push((run[0].0, run.iter().map(|r| r.1).collect()));
                }
            }
            let mut got = Vec::new();
            let entries = keys.iter().enumerate().map(|(i, &k)| (k, i as u64));
            KeyGrouper::default().group(bits, n, entries, |key, members| {
                let mut members = members.to_vec();
                members.sort_unstable();
                got.push((key, members));
            });
            assert_eq!(got, expected, "{bits} bits");
        }
    }

    #[test]
    fn radix_sort_by_high_bits_equals_a_comparison_sort() {
        let mut state = 9u64;
        let mut scratch = Vec::new();
        for bits in [1u32, 5, 11, 12, 22, 23, 28, 32] {
            for n in [0usize, 1, 2, 1000, 5000, MSD_MIN_LEN + 12345] {
                let mut values: Vec<u64> = (0..n)
                    .map(|i| ((splitmix64(&mut state) >> (64 - bits)) << 32) | i as u64)
                    .collect();
                let mut expected = values.clone();
                expected.sort_unstable();
                sort_by_high_bits(&mut values, &mut scratch, bits);
                let keys = |v: &[u64]| v.iter().map(|x| x >> 32).collect::<Vec<_>>();
                assert_eq!(keys(&values), keys(&expected), "{bits} bits, {n} values");
                values.sort_unstable();
                assert_eq!(values, expected, "{bits} bits, {n} values: the same values");
            }
        }
    }

    #[test]
    fn split_bits_partitions_the_free_bits() {
        let masks = split_bits(0xffff_0000_ffff_0f0f, 4);
        assert_eq!(masks.iter().fold(0, |a, m| a | m), 0xffff_0000_ffff_0f0f);
        assert_eq!(masks.iter().map(|m| m.count_ones()).sum::<u32>(), 40);
        assert!(masks.iter().all(|m| m.count_ones() == 10));
    }
}
