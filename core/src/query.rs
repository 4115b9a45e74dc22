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

use std::ops::Range;

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

/// The permutations of every table of a design, in table order.
pub fn permutations(design: &TableDesign) -> Vec<Permutation> {
    design
        .masks()
        .iter()
        .map(|&m| Permutation::new(m))
        .collect()
}

/// The positions in `sorted` (ascending permuted fingerprints) of the run sharing `fp`'s key.
///
/// The simple version is two binary searches; each takes about `log2(n)` steps, and on a
/// memory-mapped table of millions of keys nearly every step is a cache (and TLB) miss. The
/// keys of a table are close to uniform (permuted fingerprints), so the run's start is first
/// guessed by interpolation (`n * lo / 2^64`) and then found by galloping from the guess,
/// which takes a few steps near the guess and never more than twice a binary search's; the
/// end is found by galloping from the start (runs are short).
#[inline]
pub fn probe(permutation: &Permutation, sorted: &[u64], fp: u64) -> Range<usize> {
    let (lo, hi) = permutation.key_range(fp);
    run_between(sorted, lo, hi)
}

/// The positions in `sorted` (ascending) whose value is `key`: a MinHash index's band table
/// probed at a query's band key. Band keys are hashes, close to uniform, so the start is
/// guessed by interpolation and found by galloping, as in [`probe`].
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
pub fn query(
    design: &TableDesign,
    permutations: &[Permutation],
    tables: &[&[u64]],
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
        for position in probe(permutation, table, fp) {
            let stored = table[position];
            let distance = hamming(stored, query);
            if distance > k {
                continue;
            }
            // The first table where the two share a key reports them; the key bits of a
            // table are the same bits in permuted and plain form, so the plain difference
            // is what `first_shared_table` needs: it is recovered from the permuted one.
            let other = fp ^ unpermute_difference(permutation, stored ^ query);
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
pub fn query_batch(
    design: &TableDesign,
    permutations: &[Permutation],
    tables: &[&[u64]],
    fps: &[u64],
    k: u32,
    found: impl FnMut(BatchMatch),
) {
    query_batch_by_table(design, permutations, tables, fps, k, found, |_| {});
}

/// [`query_batch`], calling `walked(t)` once table `t` has been walked for the whole batch
/// (before the next table): where the tables are mapped files, the caller may hand a walked
/// table's pages back, so that a batch keeps one table's pages resident, not every table's.
pub fn query_batch_by_table(
    design: &TableDesign,
    permutations: &[Permutation],
    tables: &[&[u64]],
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
            let (lo, hi) = permutation.key_range_of_permuted(permuted);
            let start = lower_bound_from(table, lo, cursor);
            let end = match hi.checked_add(1) {
                Some(after) => lower_bound_from(table, after, start),
                None => table.len(),
            };
            cursor = start;
            for (position, &stored) in table.iter().enumerate().take(end).skip(start) {
                let distance = hamming(stored, permuted);
                if distance > k {
                    continue;
                }
                let other = fp ^ unpermute_difference(permutation, stored ^ permuted);
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
/// ([`TableDesign::first_shared_table`]), as a query reports a match.
pub fn self_join(
    design: &TableDesign,
    permutations: &[Permutation],
    sets: &[Vec<&[u64]>],
    k: u32,
    mut found: impl FnMut(PairMatch),
) {
    debug_assert!(k <= design.k());
    // One key's entries: (permuted, set, position).
    let mut group: Vec<(u64, usize, usize)> = Vec::new();
    let mut cursors: Vec<usize> = vec![0; sets.len()];
    for (t, permutation) in permutations.iter().enumerate() {
        cursors.iter_mut().for_each(|c| *c = 0);
        group.clear();
        let mut group_hi = 0u64;
        loop {
            // The next entry in order over every set.
            let next = (0..sets.len())
                .filter(|&g| cursors[g] < sets[g][t].len())
                .min_by_key(|&g| sets[g][t][cursors[g]]);
            let entry = next.map(|g| {
                let position = cursors[g];
                cursors[g] += 1;
                (sets[g][t][position], g, position)
            });
            if entry.is_none_or(|e| group.is_empty() || e.0 > group_hi) {
                pairs_of(design, permutation, t, &group, k, &mut found);
                group.clear();
            }
            let Some(entry) = entry else { break };
            if group.is_empty() {
                group_hi = permutation.key_range_of_permuted(entry.0).1;
            }
            group.push(entry);
        }
    }
}

/// The pairs within `k` among one key's entries of table `t` (see [`self_join`]).
fn pairs_of(
    design: &TableDesign,
    permutation: &Permutation,
    t: usize,
    group: &[(u64, usize, usize)],
    k: u32,
    found: &mut impl FnMut(PairMatch),
) {
    for (i, &(x, gx, px)) in group.iter().enumerate() {
        for &(y, gy, py) in &group[i + 1..] {
            let distance = hamming(x, y);
            if distance > k {
                continue;
            }
            let (fx, fy) = (
                unpermute_difference(permutation, x),
                unpermute_difference(permutation, y),
            );
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

    fn answer(
        design: &TableDesign,
        built: &[Vec<(u64, usize)>],
        fp: u64,
        k: u32,
    ) -> Vec<(usize, u32)> {
        let keys: Vec<Vec<u64>> = built
            .iter()
            .map(|t| t.iter().map(|e| e.0).collect())
            .collect();
        let slices: Vec<&[u64]> = keys.iter().map(Vec::as_slice).collect();
        let mut out = Vec::new();
        query(design, &permutations(design), &slices, fp, k, |m| {
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
        for (design, spread) in [
            (TableDesign::manku16(), 5),
            (TableDesign::blocks(6, 3).unwrap(), 5),
            (TableDesign::for_k(5).unwrap(), 8),
            (TableDesign::for_k(0).unwrap(), 1),
        ] {
            let stored = corpus(&mut rng, 3000, spread);
            let built = build(&design, &stored);
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
                    assert_eq!(answer(&design, &built, fp, k), expected, "{design} k {k}");
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
            let keys: Vec<Vec<u64>> = built
                .iter()
                .map(|t| t.iter().map(|e| e.0).collect())
                .collect();
            let slices: Vec<&[u64]> = keys.iter().map(Vec::as_slice).collect();
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
        assert_eq!(probe(&p, &[], 42), 0..0);
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
            let built: Vec<Vec<Vec<u64>>> = stored
                .iter()
                .map(|fps| {
                    perms
                        .iter()
                        .map(|p| {
                            let mut t: Vec<u64> = fps.iter().map(|&f| p.permute(f)).collect();
                            t.sort_unstable();
                            t
                        })
                        .collect()
                })
                .collect();
            let sets: Vec<Vec<&[u64]>> = built
                .iter()
                .map(|set| set.iter().map(|t| t.as_slice()).collect())
                .collect();
            for k in [0, 1, design.k()] {
                let mut got: Vec<(u64, u64, u32)> = Vec::new();
                self_join(&design, &perms, &sets, k, |m| {
                    let fp = |(g, p): (usize, usize)| {
                        unpermute_difference(&perms[m.table], built[g][m.table][p])
                    };
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
                assert_eq!(got, want, "{design} k {k}");
            }
        }
    }
}
