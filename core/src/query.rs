//! Querying saved permutation tables: every stored fingerprint within `k` bits of one
//! query fingerprint, by probing each table at the query's key (Manku, Jain and Das Sarma,
//! WWW 2007, section 3.1).
//!
//! A table of a [`TableDesign`] keeps every fingerprint *permuted*: the bits under the
//! table's mask moved to the top (in order) and the other bits below them (in order). Sorted
//! by the permuted value, the fingerprints that share the table's key with a query are one
//! contiguous run, found by two binary searches for the range `[key << free, (key << free) |
//! (2^free - 1)]`. A permutation of bits keeps Hamming distances, so the run's members are
//! compared with the permuted query directly, never unpermuted.
//!
//! A stored fingerprint within `k` of the query shares its key in at least one table (the
//! design's pigeonhole guarantee), and it is reported only from the first table in which it
//! does ([`TableDesign::first_shared_table`]), so each match comes exactly once without a
//! set of seen matches. A query may ask for a `k` smaller than the design's (the answer is
//! then the subset within that `k`), never a larger one: the tables do not guarantee it.
//!
//! The simple version compares the query with every stored fingerprint; [`brute_force`]
//! does exactly that and is the oracle of the tests.
//!
//! A table is anything that is a [`KeyTable`]: a slice of permuted fingerprints (the simple
//! layout, 8 bytes an entry beside its row), or a [`CompactTable`] (2 bytes an entry beside
//! its row, the rest fixed by a directory or read from the documents' fingerprints).

mod compact;

use std::ops::Range;

pub use compact::{
    bucket_and_tag, directory_bits, CompactArrays, CompactTable, MAX_DIRECTORY_BITS,
};

use crate::simhash::hamming;
use crate::tables::{KeyPacker, TableDesign};

/// One table's permutation: key bits first, the free bits after them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permutation {
    mask: u64,
    key: KeyPacker,
    free: KeyPacker,
}

impl Permutation {
    pub fn new(mask: u64) -> Self {
        Permutation {
            mask,
            key: KeyPacker::new(mask),
            free: KeyPacker::new(!mask),
        }
    }

    /// The table's key mask.
    pub fn mask(&self) -> u64 {
        self.mask
    }

    /// The number of bits below the key in a permuted fingerprint.
    pub fn free_bits(&self) -> u32 {
        self.free.bits()
    }

    /// `fp` with the key bits on top.
    #[inline]
    pub fn permute(&self, fp: u64) -> u64 {
        let free = self.free.bits();
        let key = self.key.pack(fp);
        let high = if free == 64 { 0 } else { key << free };
        high | self.free.pack(fp)
    }

    /// The inclusive range of permuted values that share `fp`'s key.
    #[inline]
    pub fn key_range(&self, fp: u64) -> (u64, u64) {
        self.key_range_of_permuted(self.permute(fp))
    }

    /// [`Permutation::key_range`] of a fingerprint already permuted (`permuted` is
    /// `self.permute(fp)`): its key bits kept, the bits below them all 0 and all 1.
    #[inline]
    pub fn key_range_of_permuted(&self, permuted: u64) -> (u64, u64) {
        let free = self.free.bits();
        let low_mask = if free == 64 {
            u64::MAX
        } else {
            (1u64 << free) - 1
        };
        let lo = permuted & !low_mask;
        (lo, lo | low_mask)
    }
}

/// A table of either layout, as an index whose generations were written in different
/// formats holds them.
#[derive(Clone, Copy, Debug)]
pub enum Table<'a> {
    /// The simple layout: the permuted fingerprints.
    Keys(&'a [u64]),
    /// The compact layout.
    Compact(CompactTable<'a>),
}

impl KeyTable for Table<'_> {
    fn len(&self) -> usize {
        match self {
            Table::Keys(t) => KeyTable::len(t),
            Table::Compact(t) => t.len(),
        }
    }

    fn known_bits(&self) -> u32 {
        match self {
            Table::Keys(t) => t.known_bits(),
            Table::Compact(t) => t.known_bits(),
        }
    }

    #[inline]
    fn candidates(&self, permutation: &Permutation, permuted: u64, from: usize) -> Range<usize> {
        match self {
            Table::Keys(t) => t.candidates(permutation, permuted, from),
            Table::Compact(t) => t.candidates(permutation, permuted, from),
        }
    }

    #[inline]
    fn stored(&self, position: usize) -> Stored {
        match self {
            Table::Keys(t) => t.stored(position),
            Table::Compact(t) => t.stored(position),
        }
    }

    #[inline]
    fn prefetch(&self, permuted: u64, stage: Prefetch) {
        if let Table::Compact(t) = self {
            t.prefetch(permuted, stage);
        }
    }

    fn prefixes(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        let (keys, compact) = match self {
            Table::Keys(t) => (Some(t.prefixes()), None),
            Table::Compact(t) => (None, Some(t.prefixes())),
        };
        keys.into_iter()
            .flatten()
            .chain(compact.into_iter().flatten())
    }
}

/// A stored entry's fingerprint as a table gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    /// Permuted for the table (the simple layout stores it so).
    Permuted(u64),
    /// Plain (a compact table reads it by the entry's row).
    Plain(u64),
    /// None: the entry's row names no document (a damaged table not verified).
    Missing,
}

/// One table as a query reads it: entries sorted by their permuted fingerprints.
///
/// The simple version is a sorted `&[u64]` of the permuted fingerprints themselves;
/// [`CompactTable`] stores less and reads a candidate's fingerprint by its row.
pub trait KeyTable {
    /// The number of entries.
    fn len(&self) -> usize;

    /// Whether the table has no entries.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many of a permuted fingerprint's top bits [`KeyTable::prefixes`] gives.
    fn known_bits(&self) -> u32;

    /// Positions holding every entry whose permuted fingerprint shares `permuted`'s key
    /// (its top bits under `permutation`), perhaps with others (the caller checks that a
    /// match shares the key). `from` is a guess of the answer's start (0 when unknown),
    /// where a search may begin.
    fn candidates(&self, permutation: &Permutation, permuted: u64, from: usize) -> Range<usize>;

    /// The entry at `position`'s fingerprint.
    fn stored(&self, position: usize) -> Stored;

    /// Every entry in order, as its position and its permuted fingerprint's top
    /// [`KeyTable::known_bits`] bits (the bits below them 0).
    fn prefixes(&self) -> impl Iterator<Item = (usize, u64)> + '_;

    /// Starts loading, without waiting for it, what [`KeyTable::candidates`] for
    /// `permuted` reads at `stage` (a compact table's directory entry, then its bucket's
    /// tags); nothing by default. Changes no answer: see [`prefetch`].
    #[inline]
    fn prefetch(&self, _permuted: u64, _stage: Prefetch) {}
}

/// The stages of a probe whose reads [`prefetch`] starts early: each needs the one before
/// it to have arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefetch {
    /// A compact table's directory entry of the query's bucket.
    Directory,
    /// The first tags of the bucket (reads the directory entry).
    Run,
}

/// Hints that `fp` will be probed in `tables` (of `permutations`): each table starts loading
/// what the probe reads at `stage` ([`KeyTable::prefetch`]).
///
/// Simply: nothing (a probe reads what it needs when it needs it). But at 100M documents a
/// table's directory entry and tags are each a cache (and TLB) miss, and a probe cannot
/// read its tags before its directory entry has arrived: one probe after another, a query
/// of 4 generations of 16 tables waits for 128 misses in turn. Started for every table
/// first (`Directory` for all, then `Run` for all, then [`query`]), the misses of the
/// probes overlap.
pub fn prefetch<T: KeyTable>(permutations: &[Permutation], tables: &[T], fp: u64, stage: Prefetch) {
    for (permutation, table) in permutations.iter().zip(tables) {
        table.prefetch(permutation.permute(fp), stage);
    }
}

/// Starts loading the cache line at `p` (never faults, whatever `p` is).
#[inline(always)]
pub(crate) fn prefetch_line<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads nothing the program sees and never faults.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The simple table. Its run is found by two binary searches, each about `log2(n)` steps,
/// and on a memory-mapped table of millions of keys nearly every step is a cache (and TLB)
/// miss. The keys of a table are close to uniform (permuted fingerprints), so [`query`]
/// guesses the run's start by interpolation (`n * key / 2^64`), and it is found by galloping
/// from the guess, which takes a few steps near the guess and never more than twice a
/// binary search's; the end is found by galloping from the start (runs are short).
impl KeyTable for &[u64] {
    fn len(&self) -> usize {
        <[u64]>::len(self)
    }

    fn known_bits(&self) -> u32 {
        64
    }

    #[inline]
    fn candidates(&self, permutation: &Permutation, permuted: u64, from: usize) -> Range<usize> {
        let (lo, hi) = permutation.key_range_of_permuted(permuted);
        let start = lower_bound_from(self, lo, from);
        let end = match hi.checked_add(1) {
            Some(after) => lower_bound_from(self, after, start),
            None => <[u64]>::len(self),
        };
        start..end
    }

    #[inline]
    fn stored(&self, position: usize) -> Stored {
        Stored::Permuted(self[position])
    }

    fn prefixes(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.iter().copied().enumerate()
    }
}

/// The distance of a stored entry from a query (`fp`, and `permuted` for the table), and
/// the stored plain fingerprint, where it is within `k`.
#[inline]
fn within(
    permutation: &Permutation,
    stored: Stored,
    fp: u64,
    permuted: u64,
    k: u32,
) -> Option<(u32, u64)> {
    match stored {
        Stored::Permuted(s) => {
            let distance = hamming(s, permuted);
            // The key bits of a table are the same bits in permuted and plain form, so
            // the plain difference is recovered from the permuted one only for a match.
            (distance <= k).then(|| {
                (
                    distance,
                    fp ^ unpermute_difference(permutation, s ^ permuted),
                )
            })
        }
        Stored::Plain(s) => {
            let distance = hamming(s, fp);
            (distance <= k).then_some((distance, s))
        }
        Stored::Missing => None,
    }
}

/// The permutations of every table of a design, in table order.
pub fn permutations(design: &TableDesign) -> Vec<Permutation> {
    design
        .masks()
        .iter()
        .map(|&m| Permutation::new(m))
        .collect()
}

/// The positions in `sorted` (ascending) whose value is `key`: a MinHash index's band table
/// probed at a query's band key. Band keys are hashes, close to uniform, so the start is
/// guessed by interpolation and found by galloping, as a query probes a simple table.
#[inline]
pub fn equal_range(sorted: &[u64], key: u64) -> Range<usize> {
    run_between(sorted, key, key)
}

/// The positions in `sorted` (ascending, close to uniform) of the values in `lo..=hi`: the
/// start guessed by interpolation and found by galloping, the end by galloping from it.
#[inline]
fn run_between(sorted: &[u64], lo: u64, hi: u64) -> Range<usize> {
    let guess = ((u128::from(lo) * sorted.len() as u128) >> 64) as usize;
    let start = lower_bound_from(sorted, lo, guess);
    let end = match hi.checked_add(1) {
        Some(after) => lower_bound_from(sorted, after, start),
        None => sorted.len(),
    };
    start..end
}

/// The first position of `sorted` whose value is at least `target` (as
/// `partition_point(|&v| v < target)`), searched by galloping outwards from `guess`.
pub fn lower_bound_from(sorted: &[u64], target: u64, guess: usize) -> usize {
    let n = sorted.len();
    if n == 0 {
        return 0;
    }
    let g = guess.min(n - 1);
    let (lo, hi) = if sorted[g] < target {
        // The answer is after g: double the step until a value reaches the target.
        let (mut lo, mut hi, mut step) = (g + 1, g + 1, 1usize);
        while hi < n && sorted[hi] < target {
            lo = hi + 1;
            hi = lo.saturating_add(step);
            step = step.saturating_mul(2);
        }
        (lo, hi.min(n))
    } else {
        // The answer is at or before g.
        let (mut hi, mut step) = (g, 1usize);
        loop {
            if hi == 0 {
                return 0;
            }
            let next = hi.saturating_sub(step);
            if sorted[next] >= target {
                hi = next;
                step = step.saturating_mul(2);
            } else {
                break (next + 1, hi);
            }
        }
    };
    lo + sorted[lo..hi].partition_point(|&v| v < target)
}

/// A stored fingerprint within `k` of a query: its table and position there, and the
/// distance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableMatch {
    pub table: usize,
    pub position: usize,
    pub hamming: u32,
}

/// Calls `found` once for every stored fingerprint within `k` bits of `fp`. `tables[t]` is
/// table `t` of `design`, sorted ascending by permuted fingerprint (see the module docs);
/// `k` must not exceed the design's.
pub fn query<T: KeyTable>(
    design: &TableDesign,
    permutations: &[Permutation],
    tables: &[T],
    fp: u64,
    k: u32,
    mut found: impl FnMut(TableMatch),
) {
    debug_assert!(
        k <= design.k(),
        "a query within {k} of a k = {} design",
        design.k()
    );
    debug_assert_eq!(tables.len(), design.tables());
    for (t, (permutation, table)) in permutations.iter().zip(tables).enumerate() {
        let query = permutation.permute(fp);
        let guess = ((u128::from(query) * table.len() as u128) >> 64) as usize;
        for position in table.candidates(permutation, query, guess) {
            let stored = table.stored(position);
            let Some((distance, other)) = within(permutation, stored, fp, query, k) else {
                continue;
            };
            // The first table where the two share a key reports them.
            if design.first_shared_table(fp, other) == Some(t) {
                found(TableMatch {
                    table: t,
                    position,
                    hamming: distance,
                });
            }
        }
    }
}

/// A query of a batch that matched: which query (its position in the batch), and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMatch {
    pub query: usize,
    pub table: usize,
    pub position: usize,
    pub hamming: u32,
}

/// [`query`] for a batch of fingerprints at once: per table, the batch is sorted by its
/// permuted keys and the table walked once from left to right, each probe galloping on from
/// where the previous one ended, so a large batch reads each table about once, in order,
/// instead of landing at random places `2 log2(n)` times per query. Calls `found` exactly
/// once for every pair of a query and a stored fingerprint within `k` bits (the matches of
/// [`query`], for each query), table by table.
pub fn query_batch<T: KeyTable>(
    design: &TableDesign,
    permutations: &[Permutation],
    tables: &[T],
    fps: &[u64],
    k: u32,
    found: impl FnMut(BatchMatch),
) {
    query_batch_by_table(design, permutations, tables, fps, k, found, |_| {});
}

/// [`query_batch`], calling `walked(t)` once table `t` has been walked for the whole batch
/// (before the next table): where the tables are mapped files, the caller may hand a walked
/// table's pages back, so that a batch keeps one table's pages resident, not every table's.
pub fn query_batch_by_table<T: KeyTable>(
    design: &TableDesign,
    permutations: &[Permutation],
    tables: &[T],
    fps: &[u64],
    k: u32,
    mut found: impl FnMut(BatchMatch),
    mut walked: impl FnMut(usize),
) {
    debug_assert!(k <= design.k());
    debug_assert_eq!(tables.len(), design.tables());
    let mut order: Vec<(u64, u32)> = Vec::with_capacity(fps.len());
    for (t, (permutation, table)) in permutations.iter().zip(tables).enumerate() {
        order.clear();
        order.extend(
            fps.iter()
                .enumerate()
                .map(|(i, &fp)| (permutation.permute(fp), i as u32)),
        );
        // By key, the batch's order among equal keys (stable): the order of sorting the
        // pairs. A radix sort: asking 10M documents in batches of a million (a service's
        // first start-up, before `self_join`), 15.1-17.0 s with `sort_unstable`, 13.7-13.9.
        radsort::sort_by_key(&mut order, |&(permuted, _)| permuted);
        let mut cursor = 0usize;
        for &(permuted, i) in &order {
            let fp = fps[i as usize];
            // The permutation was computed once, for the sort.
            let run = table.candidates(permutation, permuted, cursor);
            cursor = run.start;
            for position in run {
                let stored = table.stored(position);
                let Some((distance, other)) = within(permutation, stored, fp, permuted, k) else {
                    continue;
                };
                if design.first_shared_table(fp, other) == Some(t) {
                    found(BatchMatch {
                        query: i as usize,
                        table: t,
                        position,
                        hamming: distance,
                    });
                }
            }
        }
        walked(t);
    }
}

/// A pair of stored fingerprints within `k` of each other ([`self_join`]): each as its
/// generation (which of the tables' sets) and position in that set's table `table`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairMatch {
    pub table: usize,
    pub a: (usize, usize),
    pub b: (usize, usize),
    pub hamming: u32,
}

/// Every pair of stored fingerprints within `k` bits of each other, once, where the stored
/// fingerprints are several sets of tables (`sets[g][t]`: set `g`'s table `t`, sorted).
///
/// The simple version asks each stored fingerprint as a query ([`query_batch`]), which
/// sorts the whole batch by each table's permutation: but each table *is* the stored
/// fingerprints sorted by that permutation. Here each table is walked once, the sets'
/// tables merged in order, and the entries sharing a key compared with each other: a pair
/// is reported from the first table in which the two share a key
/// ([`TableDesign::first_shared_table`]), as a query reports a match. Where a table knows
/// fewer bits than its key ([`KeyTable::known_bits`]), the entries sharing the bits known
/// are compared, and the check of the first shared table drops those of other keys.
pub fn self_join<T: KeyTable>(
    design: &TableDesign,
    permutations: &[Permutation],
    sets: &[Vec<T>],
    k: u32,
    mut found: impl FnMut(PairMatch),
) {
    debug_assert!(k <= design.k());
    // One key's entries: (set, position); their fingerprints are read only where a key has
    // two or more (a compact table reads each from the documents, a random read).
    let mut group: Vec<(usize, usize)> = Vec::new();
    let mut stored: Vec<(Stored, usize, usize)> = Vec::new();
    for (t, permutation) in permutations.iter().enumerate() {
        let key_bits = 64 - permutation.free_bits();
        let bits = sets
            .iter()
            .map(|set| set[t].known_bits())
            .fold(key_bits, u32::min);
        let top = |prefix: u64| if bits == 0 { 0 } else { prefix >> (64 - bits) };
        let mut walks: Vec<_> = sets
            .iter()
            .map(|set| {
                set[t]
                    .prefixes()
                    .map(|(p, prefix)| (top(prefix), p))
                    .peekable()
            })
            .collect();
        group.clear();
        let mut group_key = 0u64;
        loop {
            // The next entry in order over every set.
            let mut next: Option<(u64, usize)> = None;
            for (g, walk) in walks.iter_mut().enumerate() {
                if let Some(&(key, _)) = walk.peek() {
                    if next.is_none_or(|(best, _)| key < best) {
                        next = Some((key, g));
                    }
                }
            }
            let entry = next.map(|(key, g)| {
                let (_, position) = walks[g].next().expect("peeked");
                (key, g, position)
            });
            if entry.is_none_or(|e| e.0 != group_key) {
                if group.len() > 1 {
                    stored.clear();
                    stored.extend(group.iter().map(|&(g, p)| (sets[g][t].stored(p), g, p)));
                    pairs_of(design, permutation, t, &stored, k, &mut found);
                }
                group.clear();
            }
            let Some((key, g, position)) = entry else {
                break;
            };
            group_key = key;
            group.push((g, position));
        }
    }
}

/// The pairs within `k` among one key's entries of table `t` (see [`self_join`]).
fn pairs_of(
    design: &TableDesign,
    permutation: &Permutation,
    t: usize,
    group: &[(Stored, usize, usize)],
    k: u32,
    found: &mut impl FnMut(PairMatch),
) {
    for (i, &(x, gx, px)) in group.iter().enumerate() {
        for &(y, gy, py) in &group[i + 1..] {
            let (distance, fx, fy) = match (x, y) {
                (Stored::Permuted(x), Stored::Permuted(y)) => {
                    let distance = hamming(x, y);
                    if distance > k {
                        continue;
                    }
                    let plain = |v| unpermute_difference(permutation, v);
                    (distance, plain(x), plain(y))
                }
                (Stored::Missing, _) | (_, Stored::Missing) => continue,
                (x, y) => {
                    let plain = |s| match s {
                        Stored::Permuted(v) => unpermute_difference(permutation, v),
                        Stored::Plain(v) => v,
                        Stored::Missing => unreachable!("matched above"),
                    };
                    let (fx, fy) = (plain(x), plain(y));
                    let distance = hamming(fx, fy);
                    if distance > k {
                        continue;
                    }
                    (distance, fx, fy)
                }
            };
            if design.first_shared_table(fx, fy) == Some(t) {
                found(PairMatch {
                    table: t,
                    a: (gx, px),
                    b: (gy, py),
                    hamming: distance,
                });
            }
        }
    }
}

/// The plain bit difference whose permutation is `diff`.
#[inline]
fn unpermute_difference(permutation: &Permutation, diff: u64) -> u64 {
    let free = permutation.free_bits();
    let (key_part, free_part) = if free == 64 {
        (0, diff)
    } else {
        (diff >> free, diff & ((1u64 << free) - 1))
    };
    deposit(key_part, permutation.mask) | deposit(free_part, !permutation.mask)
}

/// Spreads the low bits of `bits` over the set bits of `mask`, lowest first (the inverse of
/// [`KeyPacker::pack`]).
#[inline]
fn deposit(mut bits: u64, mask: u64) -> u64 {
    let mut out = 0;
    let mut rest = mask;
    while rest != 0 && bits != 0 {
        let low = rest & rest.wrapping_neg();
        if bits & 1 == 1 {
            out |= low;
        }
        bits >>= 1;
        rest &= rest - 1;
    }
    out
}

/// Every `(index, distance)` of `stored` within `k` bits of `fp`: the oracle.
pub fn brute_force(stored: &[u64], fp: u64, k: u32) -> Vec<(usize, u32)> {
    stored
        .iter()
        .enumerate()
        .map(|(i, &s)| (i, hamming(s, fp)))
        .filter(|&(_, d)| d <= k)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::SeededRng;

    /// Stored fingerprints with many near neighbours: random centres and copies with a few
    /// bits flipped.
    fn corpus(rng: &mut SeededRng, n: usize, spread: u32) -> Vec<u64> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let centre = rng.next_u64();
            out.push(centre);
            for _ in 0..rng.below(4) {
                let mut v = centre;
                for _ in 0..rng.below(u64::from(spread) + 1) {
                    v ^= 1 << rng.below(64);
                }
                out.push(v);
            }
        }
        out.truncate(n);
        out
    }

    /// The tables of a design over `stored`, as an index holds them: (permuted, index) sorted.
    fn build(design: &TableDesign, stored: &[u64]) -> Vec<Vec<(u64, usize)>> {
        permutations(design)
            .iter()
            .map(|p| {
                let mut table: Vec<(u64, usize)> = stored
                    .iter()
                    .enumerate()
                    .map(|(i, &fp)| (p.permute(fp), i))
                    .collect();
                table.sort_unstable();
                table
            })
            .collect()
    }

    /// Both layouts of built tables, owned: the simple one's keys, and the compact one's
    /// arrays over the stored fingerprints.
    struct Layouts {
        keys: Vec<Vec<u64>>,
        compact: Vec<CompactArrays>,
        stored: Vec<u64>,
    }

    impl Layouts {
        fn of(design: &TableDesign, built: &[Vec<(u64, usize)>], stored: &[u64]) -> Self {
            let perms = permutations(design);
            Layouts {
                keys: built
                    .iter()
                    .map(|t| t.iter().map(|e| e.0).collect())
                    .collect(),
                compact: built
                    .iter()
                    .zip(&perms)
                    .map(|(t, p)| {
                        let entries: Vec<(u64, u32)> =
                            t.iter().map(|&(key, row)| (key, row as u32)).collect();
                        CompactArrays::of(&entries, 64 - p.free_bits())
                    })
                    .collect(),
                stored: stored.to_vec(),
            }
        }

        /// The tables in the simple layout (`compact` false) or the compact one.
        fn tables(&self, compact: bool) -> Vec<Table<'_>> {
            if compact {
                self.compact
                    .iter()
                    .map(|arrays| Table::Compact(arrays.table(&self.stored)))
                    .collect()
            } else {
                self.keys.iter().map(|t| Table::Keys(t)).collect()
            }
        }
    }

    fn answer(
        design: &TableDesign,
        built: &[Vec<(u64, usize)>],
        tables: &[Table<'_>],
        fp: u64,
        k: u32,
    ) -> Vec<(usize, u32)> {
        let mut out = Vec::new();
        query(design, &permutations(design), tables, fp, k, |m| {
            out.push((built[m.table][m.position].1, m.hamming))
        });
        out.sort_unstable();
        out
    }

    #[test]
    fn permutations_are_bijections_that_keep_distances() {
        let mut rng = SeededRng::new(3);
        for design in [
            TableDesign::manku16(),
            TableDesign::blocks(5, 3).unwrap(),
            TableDesign::for_k(0).unwrap(),
        ] {
            for p in permutations(&design) {
                for _ in 0..200 {
                    let (a, b) = (rng.next_u64(), rng.next_u64());
                    assert_eq!(hamming(p.permute(a), p.permute(b)), hamming(a, b));
                    assert_eq!(unpermute_difference(&p, p.permute(a ^ b)), a ^ b);
                    let (lo, hi) = p.key_range(a);
                    let shares = a & p.mask() == b & p.mask();
                    assert_eq!((lo..=hi).contains(&p.permute(b)), shares);
                    assert!((lo..=hi).contains(&p.permute(a)));
                }
            }
        }
    }

    #[test]
    fn queries_find_exactly_the_brute_force_neighbours_once() {
        let mut rng = SeededRng::new(17);
        // 70,000 stored: a compact manku16 table's directory and tag fix its whole key;
        // 3,000: fewer bits, and the candidates hold other keys.
        for (design, spread, n) in [
            (TableDesign::manku16(), 5, 3000),
            (TableDesign::manku16(), 5, 70_000),
            (TableDesign::blocks(6, 3).unwrap(), 5, 3000),
            (TableDesign::for_k(5).unwrap(), 8, 3000),
            (TableDesign::for_k(0).unwrap(), 1, 3000),
        ] {
            let stored = corpus(&mut rng, n, spread);
            let built = build(&design, &stored);
            let layouts = Layouts::of(&design, &built, &stored);
            let (simple, compact) = (layouts.tables(false), layouts.tables(true));
            for i in 0..400 {
                // Stored fingerprints (their copies are neighbours) and fresh ones nearby.
                let fp = if i % 2 == 0 {
                    stored[rng.below(stored.len() as u64) as usize]
                } else {
                    stored[rng.below(stored.len() as u64) as usize] ^ (1 << rng.below(64))
                };
                for k in 0..=design.k() {
                    let mut expected = brute_force(&stored, fp, k);
                    expected.sort_unstable();
                    let got = answer(&design, &built, &simple, fp, k);
                    assert_eq!(got, expected, "{design} k {k}");
                    let got = answer(&design, &built, &compact, fp, k);
                    assert_eq!(got, expected, "{design} k {k}, compact, n {n}");
                }
            }
        }
    }

    #[test]
    fn a_batch_finds_what_its_queries_find_one_at_a_time() {
        let mut rng = SeededRng::new(41);
        for design in [TableDesign::manku16(), TableDesign::blocks(6, 3).unwrap()] {
            let stored = corpus(&mut rng, 4000, 5);
            let built = build(&design, &stored);
            let layouts = Layouts::of(&design, &built, &stored);
            let (slices, compact) = (layouts.tables(false), layouts.tables(true));
            let perms = permutations(&design);
            // Stored fingerprints, near ones, random ones and repeats, in no order.
            let fps: Vec<u64> = (0..1500)
                .map(|i| match i % 4 {
                    0 => stored[rng.below(stored.len() as u64) as usize],
                    1 => stored[rng.below(stored.len() as u64) as usize] ^ (1 << rng.below(64)),
                    2 => rng.next_u64(),
                    _ => stored[7],
                })
                .collect();
            for k in [0, 2, design.k()] {
                let mut one_by_one = Vec::new();
                for (i, &fp) in fps.iter().enumerate() {
                    query(&design, &perms, &slices, fp, k, |m| {
                        one_by_one.push((i, built[m.table][m.position].1, m.hamming))
                    });
                }
                let mut batch = Vec::new();
                query_batch(&design, &perms, &slices, &fps, k, |m| {
                    batch.push((m.query, built[m.table][m.position].1, m.hamming))
                });
                one_by_one.sort_unstable();
                batch.sort_unstable();
                assert!(one_by_one.len() > fps.len() / 2);
                assert_eq!(batch, one_by_one, "{design} k {k}");
                let mut of_compact = Vec::new();
                query_batch(&design, &perms, &compact, &fps, k, |m| {
                    of_compact.push((m.query, built[m.table][m.position].1, m.hamming))
                });
                of_compact.sort_unstable();
                assert_eq!(of_compact, one_by_one, "{design} k {k}, compact");
                let mut unique = batch.clone();
                unique.dedup();
                assert_eq!(unique.len(), batch.len(), "a match twice");
            }
        }
    }

    #[test]
    fn galloping_finds_what_a_binary_search_finds() {
        let mut rng = SeededRng::new(29);
        for n in [0usize, 1, 2, 3, 10, 100, 1000] {
            let mut sorted: Vec<u64> = (0..n).map(|_| rng.below(50) * 1000).collect();
            sorted.sort_unstable();
            for target in (0..52_000).step_by(500) {
                let expected = sorted.partition_point(|&v| v < target);
                for guess in [0, 1, n / 2, n.saturating_sub(1), n + 5] {
                    assert_eq!(lower_bound_from(&sorted, target, guess), expected);
                }
            }
        }
    }

    #[test]
    fn equal_ranges_are_those_of_a_linear_scan() {
        let mut rng = SeededRng::new(31);
        for n in [0usize, 1, 5, 200] {
            let mut sorted: Vec<u64> = (0..n).map(|_| rng.below(40) << 58).collect();
            sorted.push(u64::MAX);
            sorted.sort_unstable();
            for key in (0..42u64).map(|k| k << 58).chain([u64::MAX, 7]) {
                let first = sorted.iter().position(|&v| v == key);
                let count = sorted.iter().filter(|&&v| v == key).count();
                let range = equal_range(&sorted, key);
                assert_eq!(range.len(), count, "key {key:x}");
                if let Some(first) = first {
                    assert_eq!(range.start, first);
                }
            }
        }
    }

    #[test]
    fn probing_an_empty_table_finds_nothing() {
        let p = Permutation::new(TableDesign::manku16().masks()[0]);
        let empty: &[u64] = &[];
        assert_eq!(empty.candidates(&p, 42, 0), 0..0);
        let arrays = CompactArrays::of(&[], 28);
        let compact = arrays.table(&[]);
        assert_eq!(compact.candidates(&p, 42, 0), 0..0);
        assert_eq!(compact.prefixes().count(), 0);
    }

    #[test]
    fn a_self_join_finds_every_pair_that_queries_find_once() {
        let mut rng = SeededRng::new(41);
        for design in [
            TableDesign::for_k(3).unwrap(),
            TableDesign::for_k(2).unwrap(),
        ] {
            let perms = permutations(&design);
            // Two sets of tables (two generations), each of near copies.
            let stored: Vec<Vec<u64>> = vec![corpus(&mut rng, 700, 4), corpus(&mut rng, 300, 4)];
            let built: Vec<Vec<Vec<(u64, usize)>>> =
                stored.iter().map(|fps| build(&design, fps)).collect();
            let layouts: Vec<Layouts> = built
                .iter()
                .zip(&stored)
                .map(|(b, s)| Layouts::of(&design, b, s))
                .collect();
            // Both simple, both compact, and one of each (an index whose generations were
            // written in different formats).
            let choices = [[false, false], [true, true], [false, true], [true, false]];
            for (k, compact) in [0, 1, design.k()]
                .into_iter()
                .flat_map(|k| choices.map(|c| (k, c)))
            {
                let sets: Vec<Vec<Table<'_>>> = layouts
                    .iter()
                    .zip(compact)
                    .map(|(l, c)| l.tables(c))
                    .collect();
                let mut got: Vec<(u64, u64, u32)> = Vec::new();
                self_join(&design, &perms, &sets, k, |m| {
                    let fp = |(g, p): (usize, usize)| stored[g][built[g][m.table][p].1];
                    let (a, b) = (fp(m.a), fp(m.b));
                    got.push((a.min(b), a.max(b), m.hamming));
                });
                got.sort_unstable();
                // The oracle: every pair of the stored fingerprints by brute force
                // (duplicates of one fingerprint are pairs too).
                let all: Vec<u64> = stored.iter().flatten().copied().collect();
                let mut want = Vec::new();
                for i in 0..all.len() {
                    for j in i + 1..all.len() {
                        let d = hamming(all[i], all[j]);
                        if d <= k {
                            want.push((all[i].min(all[j]), all[i].max(all[j]), d));
                        }
                    }
                }
                want.sort_unstable();
                assert!(want.len() > 100, "too few pairs to test");
                assert_eq!(got, want, "{design} k {k}, compact {compact:?}");
            }
        }
    }
}
