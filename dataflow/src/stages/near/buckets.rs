//! Bucket search: within one worker's records of one round, every lane is grouped by key
//! and every bucket searched for pairs within `k` bits (or, for LSH bands, every pair in a
//! bucket is a candidate).

use neardup_core::search::{fold_identical, BucketSearch, Item, KeyGrouper};
use neardup_core::TableDesign;

use super::keys::Keys;
use crate::config::DEFAULT_HOT_BUCKET;
use crate::records::{Edge, EdgeKind, TableRecord};
use crate::report::BucketInfo;

/// Searches every bucket of this worker's records for one round.
///
/// The simple version sorts all records by (table, key) and walks the runs. Here each
/// lane (table or band) is grouped on its own, over compact `(packed key, index)` entries
/// with a radix sort ([`KeyGrouper`]), so the 40-byte records are never moved.
pub fn search(
    mut records: Vec<TableRecord>,
    keys: &Keys,
    design: &TableDesign,
    leaf_size: usize,
) -> Searched {
    // Band records carry one lane each and arrive interleaved: bring each band together.
    // Table records of one round mostly share one base, and then this pass is skipped.
    if records.windows(2).any(|w| w[0].base != w[1].base) {
        radsort::sort_by_key(&mut records, |r| r.base);
    }
    let mut grouper = KeyGrouper::default();
    let mut state = BucketState::new(design, leaf_size);
    let (mut values, mut lanes, mut members) = (Vec::new(), Vec::new(), LaneMembers::default());
    for slice in records.chunk_by(|a, b| a.base == b.base) {
        let base = slice[0].base;
        // Each lane reads 16 bytes per record from these, not the whole 40-byte record.
        values.clear();
        values.extend(slice.iter().map(|r| r.value));
        lanes.clear();
        lanes.extend(slice.iter().map(|r| r.lanes));
        members.start(&lanes);
        for bit in members.lanes() {
            let lane = base + bit;
            let key = |i: usize| (keys.packed(lane, values[i]), i as u64);
            let bucket = |_, found: &[u64]| state.bucket(keys, lane, slice, found);
            match members.of(bit, &lanes) {
                None => grouper.group(
                    keys.key_bits(lane),
                    slice.len(),
                    (0..slice.len()).map(key),
                    bucket,
                ),
                Some(list) => {
                    let entries = list.iter().map(|&i| key(i));
                    grouper.group(keys.key_bits(lane), slice.len(), entries, bucket)
                }
            }
        }
    }
    state.searched
}

/// Which records of a slice hold each lane.
///
/// The simple version scans every record for every lane, keeping those whose mask has the
/// lane's bit. With one worker every record holds every lane and the scan keeps all. With
/// more, a record holds only the lanes routed to this worker: at 16 workers, about one
/// route group of four of manku16's 16 tables, so each of the 16 scans kept about a quarter
/// of the records, a branch per record that the processor could not predict. Lanes routed
/// together (a route group, [`Keys`]) are held by the same records, so here the indices are
/// listed once and the list is kept for the next lane while it still holds exactly that
/// lane's records: no fewer (the counts agree) and none without it (each is checked). The
/// list holds an index per record of the lane, 8 bytes beside the grouper's 16 of each
/// entry ([`ENTRY_BYTES`](super::rounds::ENTRY_BYTES) counts both).
#[derive(Default)]
struct LaneMembers {
    /// Lanes some record holds, lanes every record holds.
    present: u64,
    every: u64,
    /// Records holding each lane (counted only for lanes not in `every`).
    counts: Vec<usize>,
    /// The indices of the records holding the last lane listed.
    list: Vec<usize>,
}

impl LaneMembers {
    fn start(&mut self, lanes: &[u64]) {
        self.present = lanes.iter().fold(0, |all, &l| all | l);
        self.every = lanes.iter().fold(u64::MAX, |all, &l| all & l);
        self.counts.clear();
        self.counts.resize(64, 0);
        self.list.clear();
        let partial = self.present & !self.every;
        if partial != 0 {
            for &l in lanes {
                let mut bits = l & partial;
                while bits != 0 {
                    self.counts[bits.trailing_zeros() as usize] += 1;
                    bits &= bits - 1;
                }
            }
        }
    }

    /// The lanes some record holds, in order.
    fn lanes(&self) -> impl Iterator<Item = u32> + use<> {
        let present = self.present;
        (0..64).filter(move |bit| present & (1u64 << bit) != 0)
    }

    /// The records holding lane `bit`, in order: `None` when every record does.
    fn of(&mut self, bit: u32, lanes: &[u64]) -> Option<&[usize]> {
        let mask = 1u64 << bit;
        if self.every & mask != 0 {
            return None;
        }
        let still = self.list.len() == self.counts[bit as usize]
            && !self.list.is_empty()
            && self.list.iter().all(|&i| lanes[i] & mask != 0);
        if !still {
            // Without a branch per record: each index is written, and kept (the length
            // moves past it) only if its record holds the lane. The list is as long as the
            // lane's records, and a slot more for the writes after the last of them.
            let held = self.counts[bit as usize];
            self.list.clear();
            self.list.resize(held + 1, 0);
            let mut kept = 0;
            for (i, &l) in lanes.iter().enumerate() {
                self.list[kept] = i;
                kept += ((l >> bit) & 1) as usize;
            }
            self.list.truncate(kept);
        }
        Some(&self.list)
    }
}

/// What the search of one round accumulates: its edges and its counters.
struct BucketState<'a> {
    design: &'a TableDesign,
    searcher: BucketSearch,
    items: Vec<Item>,
    searched: Searched,
}

/// What the search of one round found: its edges (candidates, in MinHash mode) and its
/// counters, for the worker's report.
#[derive(Debug, Default)]
pub struct Searched {
    pub edges: Vec<Edge>,
    pub comparisons: u64,
    pub splits: u64,
    /// Buckets of at least [`DEFAULT_HOT_BUCKET`] fingerprints.
    pub hot: Vec<BucketInfo>,
}

impl<'a> BucketState<'a> {
    fn new(design: &'a TableDesign, leaf_size: usize) -> Self {
        BucketState {
            design,
            searcher: BucketSearch {
                k: design.k(),
                leaf_size,
            },
            items: Vec::new(),
            searched: Searched::default(),
        }
    }

    /// Fills `items` with the bucket's members, one per distinct fingerprint: equal
    /// fingerprints are folded to their smallest doc_id and linked to it by a
    /// [`EdgeKind::SameFingerprint`] edge from the first table (they share every table's
    /// key, so they meet in every table's bucket). Otherwise a group of `n` documents with
    /// one fingerprint (pages that differ only in numbers) would be `n(n-1)/2` pairs,
    /// compared pair by pair in every table since no split can tell them apart.
    fn fold(&mut self, table: usize, slice: &[TableRecord], members: &[u64]) {
        let record = |i: u64| &slice[i as usize];
        // Items carry their record's index, which leads back to doc_id and rank.
        self.items.clear();
        self.items.extend(members.iter().map(|&i| Item {
            fp: record(i).value,
            doc: i,
        }));
        let design = self.design;
        let edges = &mut self.searched.edges;
        fold_identical(
            &mut self.items,
            |it| record(it.doc).doc_id,
            |rep, member| {
                if design.first_shared_table(rep.fp, rep.fp) == Some(table) {
                    let (x, y) = (record(rep.doc), record(member.doc));
                    edges.push(Edge::new(
                        (x.doc_id, x.rank),
                        (y.doc_id, y.rank),
                        0,
                        EdgeKind::SameFingerprint,
                    ));
                }
            },
        );
    }

    /// Searches one bucket: the records at `members` of `slice`, which share their key in
    /// `lane`.
    fn bucket(&mut self, keys: &Keys, lane: u32, slice: &[TableRecord], members: &[u64]) {
        let record = |i: u64| &slice[i as usize];
        if members.len() >= DEFAULT_HOT_BUCKET {
            self.searched.hot.push(BucketInfo {
                table: lane,
                key: format!("{:016x}", keys.key(lane, record(members[0]).value)),
                size: members.len() as u64,
            });
        }
        if let Keys::Bands = keys {
            // Every pair sharing a band is a candidate; the same pair from several bands is
            // removed, and candidates are verified, in the next stage.
            for (i, &x) in members.iter().enumerate() {
                for &y in &members[i + 1..] {
                    let (x, y) = (record(x), record(y));
                    self.searched.edges.push(Edge::new(
                        (x.doc_id, x.rank),
                        (y.doc_id, y.rank),
                        0,
                        EdgeKind::Near,
                    ));
                }
            }
            self.searched.comparisons += (members.len() * (members.len() - 1) / 2) as u64;
            return;
        }
        let design = self.design;
        let table = lane as usize;
        if let [x, y] = members {
            // Most buckets are a single pair: compare it directly.
            let (x, y) = (record(*x), record(*y));
            self.searched.comparisons += 1;
            let d = neardup_core::hamming(x.value, y.value);
            if d <= self.searcher.k && design.first_shared_table(x.value, y.value) == Some(table) {
                // Two equal fingerprints are a group of one fingerprint, folded as below.
                let kind = match d {
                    0 => EdgeKind::SameFingerprint,
                    _ => EdgeKind::Near,
                };
                self.searched.edges.push(Edge::new(
                    (x.doc_id, x.rank),
                    (y.doc_id, y.rank),
                    d,
                    kind,
                ));
            }
            return;
        }
        self.fold(table, slice, members);
        if self.items.len() < 2 {
            return;
        }
        let accept = |a: u64, b: u64| design.first_shared_table(a, b) == Some(table);
        let edges = &mut self.searched.edges;
        let stats = self.searcher.search(
            &mut self.items,
            design.masks()[table],
            &accept,
            &mut |a, b, d| {
                let (x, y) = (record(a.doc), record(b.doc));
                edges.push(Edge::new(
                    (x.doc_id, x.rank),
                    (y.doc_id, y.rank),
                    d,
                    EdgeKind::Near,
                ));
            },
        );
        self.searched.comparisons += stats.comparisons;
        self.searched.splits += stats.splits;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::near::enter::group_by_worker;
    use neardup_core::mix::splitmix64;
    use neardup_core::search::DEFAULT_LEAF_SIZE;

    /// The simple version of [`LaneMembers::of`]: every record scanned for the lane's bit.
    fn scanned(lanes: &[u64], bit: u32) -> Vec<usize> {
        (0..lanes.len())
            .filter(|&i| lanes[i] & (1 << bit) != 0)
            .collect()
    }

    #[test]
    fn each_lane_lists_exactly_the_records_holding_it() {
        let mut state = 3u64;
        let cases: Vec<Vec<u64>> = vec![
            // One worker: every record holds every lane.
            vec![0xffff; 50],
            // Several workers: whole route groups of four lanes.
            (0..200)
                .map(|_| {
                    let r = splitmix64(&mut state);
                    (0..4)
                        .filter(|g| r >> g & 1 == 1)
                        .fold(0, |m, g| m | 0xf << (4 * g))
                })
                .collect(),
            // Lanes routed alone.
            (0..200).map(|_| splitmix64(&mut state) & 0xffff).collect(),
            // Lanes 0 and 1 are held by two records each, but not the same two: the list
            // of lane 0 must not stand for lane 1.
            vec![0b01, 0b10, 0b11],
        ];
        for lanes in &cases {
            let mut members = LaneMembers::default();
            members.start(lanes);
            let present = lanes.iter().fold(0u64, |all, &l| all | l);
            assert_eq!(members.lanes().count(), present.count_ones() as usize);
            for bit in members.lanes() {
                let listed = match members.of(bit, lanes) {
                    None => (0..lanes.len()).collect(),
                    Some(list) => list.to_vec(),
                };
                assert_eq!(listed, scanned(lanes, bit), "lane {bit} of {lanes:?}");
            }
        }
    }

    /// The searches of every worker together, each over the records the table entry routes
    /// to it, against brute force: every pair within `k` bits, once.
    #[test]
    fn the_workers_together_find_every_pair_within_k_once() {
        let mut state = 11u64;
        let mut fps: Vec<u64> = (0..3_000).map(|_| splitmix64(&mut state)).collect();
        for _ in 0..400 {
            let source = fps[(splitmix64(&mut state) % 3_000) as usize];
            let flips = 1 + splitmix64(&mut state) % 3;
            let near = (0..flips).fold(source, |v, _| v ^ 1 << (splitmix64(&mut state) % 64));
            if !fps.contains(&near) {
                fps.push(near);
            }
        }
        for design in [
            TableDesign::manku16(),
            TableDesign::blocks(5, 3).expect("10 tables"),
        ] {
            let k = design.k();
            let mut expected = Vec::new();
            for (a, &x) in fps.iter().enumerate() {
                for (b, &y) in fps.iter().enumerate().skip(a + 1) {
                    if (x ^ y).count_ones() <= k {
                        expected.push((a as u64, b as u64, (x ^ y).count_ones()));
                    }
                }
            }
            assert!(
                expected.len() > 300,
                "the planted pairs: {}",
                expected.len()
            );
            let keys = Keys::tables(design.masks());
            let tables = design.masks().len();
            for peers in [1usize, 2, 3, 16] {
                let mut records = vec![Vec::new(); peers];
                let mut groups = Vec::new();
                for (doc, &fp) in fps.iter().enumerate() {
                    for base in (0..tables).step_by(64) {
                        group_by_worker(
                            &keys,
                            base..(base + 64).min(tables),
                            fp,
                            peers,
                            &mut groups,
                        );
                        for &(worker, lanes) in &groups {
                            records[worker as usize].push(TableRecord {
                                base: base as u32,
                                lanes,
                                value: fp,
                                doc_id: doc as u64,
                                rank: doc as u64,
                            });
                        }
                    }
                }
                let mut found: Vec<(u64, u64, u32)> = records
                    .into_iter()
                    .flat_map(|r| search(r, &keys, &design, DEFAULT_LEAF_SIZE).edges)
                    .map(|e| (e.a, e.b, e.hamming as u32))
                    .collect();
                found.sort_unstable();
                assert_eq!(found, expected, "{peers} workers, {tables} tables");
            }
        }
    }
}
