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
    let (mut values, mut lanes) = (Vec::new(), Vec::new());
    for slice in records.chunk_by(|a, b| a.base == b.base) {
        let base = slice[0].base;
        // Each lane reads 16 bytes per record from these, not the whole 40-byte record.
        values.clear();
        values.extend(slice.iter().map(|r| r.value));
        lanes.clear();
        lanes.extend(slice.iter().map(|r| r.lanes));
        let present = lanes.iter().fold(0u64, |all, &l| all | l);
        for bit in (0..64).filter(|bit| present & (1u64 << bit) != 0) {
            let lane = base + bit;
            let entries = values
                .iter()
                .zip(&lanes)
                .enumerate()
                .filter(|(_, (_, &l))| l & (1u64 << bit) != 0)
                .map(|(i, (&v, _))| (keys.packed(lane, v), i as u64));
            grouper.group(keys.key_bits(lane), slice.len(), entries, |_, members| {
                state.bucket(keys, lane, slice, members)
            });
        }
    }
    state.searched
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
