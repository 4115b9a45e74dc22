//! Spilling the table search to disk when it does not fit `--memory-limit`.
//!
//! In memory, a worker holds every record of a round and groups each table over all of
//! them ([`crate::stages::near`]). That needs about 100 bytes per (fingerprint, table) that reaches
//! the worker, whatever the rounds, so past some size only disk can help. Spilled, the
//! search becomes an external radix sort:
//!
//! 1. each (table, key) entry that arrives is appended to a partition file chosen by the
//!    leading bits of its key in that table (an external most-significant-digit pass);
//! 2. once the round is complete, each partition is read back and searched in memory,
//!    exactly as a round of its own: every bucket lies within one partition, because its
//!    members share their whole key, so the pairs are the same as in memory;
//! 3. a partition that comes out much larger than planned (keys are not uniform: near
//!    duplicates share key bits) is split again on its next bits before it is read.
//!
//! The fingerprints that wait on the sending side to be entered in later rounds
//! ([`HeldFingerprints`]) go to a file too once they pass their share of the limit.
//!
//! Files live in one directory per worker (`--spill-dir`, by default `_spill/` inside the
//! output directory), which is removed when the worker is done, or dropped, even on error.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use super::keys::Keys;
use crate::records::TableRecord;

/// Bytes of a spilled entry: its value (fingerprint or band key), doc_id and rank.
pub const ENTRY_BYTES: usize = 24;
/// Bits a partition that is too large is split on at a time (16 parts).
pub const SPLIT_BITS: u32 = 4;
/// The most leading key bits the first pass partitions on (4096 files per table).
pub const MAX_PARTITION_BITS: u32 = 12;
/// Bounds of each partition file's write buffer.
pub const MIN_BUFFER_BYTES: usize = 4 << 10;
pub const MAX_BUFFER_BYTES: usize = 1 << 20;

/// How a worker spills, the same on every worker (chosen with the rounds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpillShape {
    /// Leading key bits each table is partitioned on.
    pub bits: u32,
    /// Write buffer of each partition file.
    pub buffer_bytes: usize,
    /// A partition with more entries than this is split again before it is searched.
    pub max_entries: u64,
}

/// Where `worker`'s external sort for `stage` writes its runs
/// ([`neardup_io::spill::ExternalSort`], which creates and removes it): beside the search's
/// directory, so that neither removes the other's files.
pub fn sort_dir(root: &Path, worker: usize, stage: &str) -> PathBuf {
    root.join(format!("sorts-{worker:05}")).join(stage)
}

/// A worker's spill directory: created on first use, removed with everything in it when
/// dropped.
pub struct SpillDir {
    path: PathBuf,
    created: bool,
}

impl SpillDir {
    /// The directory of `worker` under `root`.
    pub fn new(root: &Path, worker: usize) -> Self {
        SpillDir {
            path: root.join(format!("worker-{worker:05}")),
            created: false,
        }
    }

    /// `name` inside the directory, creating the directory (and `name`, as a directory,
    /// when `dir`) if need be.
    pub fn sub(&mut self, name: &str, dir: bool) -> io::Result<PathBuf> {
        if !self.created {
            std::fs::create_dir_all(&self.path)?;
            self.created = true;
        }
        let path = self.path.join(name);
        if dir {
            std::fs::create_dir_all(&path)?;
        }
        Ok(path)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the directory and everything in it (the job's root is removed by the
    /// summary's commit, once every worker is done with it).
    pub fn remove(&mut self) {
        if self.created {
            let _ = std::fs::remove_dir_all(&self.path);
            self.created = false;
        }
    }
}

impl Drop for SpillDir {
    fn drop(&mut self) {
        self.remove();
    }
}

/// A fingerprint waiting to be entered in the tables (with its band keys in MinHash mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiting {
    pub doc_id: u64,
    pub simhash: u64,
    pub rank: u64,
}

/// The fingerprints a worker enters in the tables, replayed once per round: in memory up
/// to `max_in_memory`, then appended to a file.
///
/// The simple version is a `Vec`. Past the limit the oldest go to disk in input order, and
/// a replay reads the file first and then the tail still in memory, so every round sees
/// the same fingerprints in the same order whichever way they were kept.
pub struct HeldFingerprints {
    /// Band keys per fingerprint (0 for simhash tables).
    bands: usize,
    entries: Vec<Waiting>,
    band_keys: Vec<u64>,
    max_in_memory: usize,
    file: Option<(PathBuf, BufWriter<File>)>,
    on_disk: u64,
    spilled_bytes: u64,
}

impl HeldFingerprints {
    /// `max_in_memory`: fingerprints kept before spilling (`usize::MAX`: never spill).
    pub fn new(bands: usize, max_in_memory: usize) -> Self {
        HeldFingerprints {
            bands,
            entries: Vec::new(),
            band_keys: Vec::new(),
            max_in_memory: max_in_memory.max(1),
            file: None,
            on_disk: 0,
            spilled_bytes: 0,
        }
    }

    pub fn len(&self) -> u64 {
        self.on_disk + self.entries.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes written to disk so far.
    pub fn spilled_bytes(&self) -> u64 {
        self.spilled_bytes
    }

    /// Adds a fingerprint; when memory is full, moves what is held to the file in `dir`.
    pub fn push(&mut self, entry: Waiting, bands: &[u64], dir: &mut SpillDir) -> io::Result<()> {
        debug_assert_eq!(bands.len(), self.bands);
        self.entries.push(entry);
        self.band_keys.extend_from_slice(bands);
        if self.entries.len() >= self.max_in_memory {
            self.spill(dir)?;
        }
        Ok(())
    }

    fn spill(&mut self, dir: &mut SpillDir) -> io::Result<()> {
        if self.file.is_none() {
            let path = dir.sub("held", false)?;
            let file = BufWriter::with_capacity(MAX_BUFFER_BYTES, File::create(&path)?);
            self.file = Some((path, file));
        }
        let (_, file) = self.file.as_mut().expect("just opened");
        let bands = self.bands;
        for (i, e) in self.entries.iter().enumerate() {
            file.write_all(&e.doc_id.to_le_bytes())?;
            file.write_all(&e.simhash.to_le_bytes())?;
            file.write_all(&e.rank.to_le_bytes())?;
            for key in &self.band_keys[i * bands..(i + 1) * bands] {
                file.write_all(&key.to_le_bytes())?;
            }
        }
        let n = self.entries.len() as u64;
        self.on_disk += n;
        self.spilled_bytes += n * (24 + 8 * bands as u64);
        self.entries.clear();
        self.band_keys.clear();
        Ok(())
    }

    /// Starts a replay from the first fingerprint.
    pub fn replay(&mut self) -> io::Result<Replay> {
        let reader = match self.file.as_mut() {
            Some((path, file)) => {
                file.flush()?;
                Some(BufReader::with_capacity(
                    MAX_BUFFER_BYTES,
                    File::open(&*path)?,
                ))
            }
            None => None,
        };
        Ok(Replay {
            reader,
            disk_left: self.on_disk,
            next_in_memory: 0,
            bands: vec![0; self.bands],
        })
    }

    /// Calls `each` on up to `max` more fingerprints of `replay`, in order; returns how
    /// many (0 once the replay is over).
    pub fn next_chunk(
        &self,
        replay: &mut Replay,
        max: usize,
        mut each: impl FnMut(&Waiting, &[u64]),
    ) -> io::Result<usize> {
        let mut done = 0;
        while done < max && replay.disk_left > 0 {
            let reader = replay.reader.as_mut().expect("a file for spilled entries");
            let entry = Waiting {
                doc_id: read_u64(reader)?,
                simhash: read_u64(reader)?,
                rank: read_u64(reader)?,
            };
            for key in replay.bands.iter_mut() {
                *key = read_u64(reader)?;
            }
            each(&entry, &replay.bands);
            replay.disk_left -= 1;
            done += 1;
        }
        let bands = self.bands;
        while done < max && replay.next_in_memory < self.entries.len() {
            let i = replay.next_in_memory;
            each(
                &self.entries[i],
                &self.band_keys[i * bands..(i + 1) * bands],
            );
            replay.next_in_memory += 1;
            done += 1;
        }
        Ok(done)
    }
}

/// A position in a [`HeldFingerprints`] replay.
pub struct Replay {
    reader: Option<BufReader<File>>,
    disk_left: u64,
    next_in_memory: usize,
    bands: Vec<u64>,
}

impl Drop for HeldFingerprints {
    fn drop(&mut self) {
        if let Some((path, _)) = self.file.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn read_u64(reader: &mut impl Read) -> io::Result<u64> {
    let mut bytes = [0u8; 8];
    reader.read_exact(&mut bytes)?;
    Ok(u64::from_le_bytes(bytes))
}

/// Bits `skip .. skip + take` (counted from the most significant) of `value`'s key in
/// `lane`, as an integer below `2^take`; 0 past the end of the key.
pub(crate) fn key_prefix(keys: &Keys, lane: u32, value: u64, skip: u32, take: u32) -> usize {
    let width = keys.key_bits(lane);
    if take == 0 || skip >= width {
        return 0;
    }
    let aligned = keys.packed(lane, value) << (64 - width);
    let rest = aligned << skip;
    (rest >> (64 - take.min(64 - skip))) as usize
}

/// One round's table entries, partitioned to files by the leading bits of their keys.
pub struct Partitions {
    dir: PathBuf,
    shape: SpillShape,
    /// Write buffers and entry counts by `lane << bits | partition`.
    buffers: Vec<Vec<u8>>,
    counts: Vec<u64>,
    spilled_bytes: u64,
}

impl Partitions {
    /// Partitions for `lanes` tables (or bands) in the directory `dir` (which exists).
    pub fn new(dir: PathBuf, lanes: usize, shape: SpillShape) -> Self {
        let n = lanes << shape.bits;
        Partitions {
            dir,
            shape,
            buffers: vec![Vec::new(); n],
            counts: vec![0; n],
            spilled_bytes: 0,
        }
    }

    fn path(&self, lane: u32, partition: usize) -> PathBuf {
        self.dir.join(format!("t{lane:04}-{partition:04x}"))
    }

    /// Appends one entry per lane of `record`.
    pub(crate) fn add(&mut self, keys: &Keys, record: &TableRecord) -> io::Result<()> {
        let mut lanes = record.lanes;
        while lanes != 0 {
            let lane = record.base + lanes.trailing_zeros();
            lanes &= lanes - 1;
            let partition = key_prefix(keys, lane, record.value, 0, self.shape.bits);
            let slot = ((lane as usize) << self.shape.bits) | partition;
            let buffer = &mut self.buffers[slot];
            encode(buffer, record);
            self.counts[slot] += 1;
            if buffer.len() >= self.shape.buffer_bytes {
                self.flush(slot)?;
            }
        }
        Ok(())
    }

    fn flush(&mut self, slot: usize) -> io::Result<()> {
        let (lane, partition) = (slot >> self.shape.bits, slot & ((1 << self.shape.bits) - 1));
        let path = self.path(lane as u32, partition);
        let buffer = &mut self.buffers[slot];
        append(&path, buffer)?;
        self.spilled_bytes += buffer.len() as u64;
        buffer.clear();
        Ok(())
    }

    /// Bytes written to disk so far.
    pub fn spilled_bytes(&self) -> u64 {
        self.spilled_bytes
    }

    /// Every partition, to be read back one at a time ([`PartitionWalk::next`]), after the
    /// write buffers are flushed.
    pub(crate) fn walk(mut self) -> io::Result<PartitionWalk> {
        for slot in 0..self.buffers.len() {
            if !self.buffers[slot].is_empty() {
                self.flush(slot)?;
            }
        }
        self.buffers = Vec::new();
        let bits = self.shape.bits;
        // A stack: the first partition on top.
        let pending = (0..self.counts.len())
            .rev()
            .filter(|&slot| self.counts[slot] > 0)
            .map(|slot| {
                let lane = (slot >> bits) as u32;
                Pending {
                    path: self.path(lane, slot & ((1 << bits) - 1)),
                    lane,
                    skip: bits,
                    count: self.counts[slot],
                }
            })
            .collect();
        Ok(PartitionWalk {
            partitions: self,
            pending,
        })
    }
}

/// A partition file still to be searched: the entries of `lane` whose first `skip` key bits
/// are equal.
struct Pending {
    path: PathBuf,
    lane: u32,
    skip: u32,
    count: u64,
}

/// A round's partitions read back one at a time, each file removed once read.
///
/// The simple version reads every partition and searches each in one call. But the
/// search's pairs then wait in timely's queues until the whole round is searched (the
/// operators after it run only once it returns): at 50 GB of text, 14.8M candidate pairs,
/// about 0.6 GB at the end of the search that 10 GB (3M) did not have. Read one partition
/// per activation, the pairs of one partition wait at most.
pub(crate) struct PartitionWalk {
    partitions: Partitions,
    pending: Vec<Pending>,
}

impl PartitionWalk {
    /// The next partition's entries, one lane each, splitting an oversized partition
    /// first (by [`SPLIT_BITS`] more key bits, until it fits or every key bit is used);
    /// `None` once every partition was read.
    pub(crate) fn next(&mut self, keys: &Keys) -> io::Result<Option<Vec<TableRecord>>> {
        while let Some(p) = self.pending.pop() {
            if p.count <= self.partitions.shape.max_entries || p.skip >= keys.key_bits(p.lane) {
                let records = read_partition(&p.path, p.lane, p.count)?;
                std::fs::remove_file(&p.path)?;
                return Ok(Some(records));
            }
            self.split(keys, p)?;
        }
        Ok(None)
    }

    /// Bytes written to disk: the partitions, and again the split ones.
    pub(crate) fn spilled_bytes(&self) -> u64 {
        self.partitions.spilled_bytes
    }

    /// Splits `p` into files by the next key bits, which go on the stack in its place.
    fn split(&mut self, keys: &Keys, p: Pending) -> io::Result<()> {
        let take = SPLIT_BITS.min(keys.key_bits(p.lane) - p.skip);
        let parts: Vec<PathBuf> = (0..1usize << take)
            .map(|i| PathBuf::from(format!("{}.{i:x}", p.path.display())))
            .collect();
        let mut buffers = vec![Vec::new(); parts.len()];
        let mut counts = vec![0u64; parts.len()];
        let mut written = 0u64;
        read_entries(&p.path, p.lane, p.count, |record| {
            let part = key_prefix(keys, p.lane, record.value, p.skip, take);
            encode(&mut buffers[part], &record);
            counts[part] += 1;
            if buffers[part].len() >= MAX_BUFFER_BYTES {
                append(&parts[part], &buffers[part])?;
                written += buffers[part].len() as u64;
                buffers[part].clear();
            }
            Ok(())
        })?;
        std::fs::remove_file(&p.path)?;
        for (part, buffer) in buffers.iter().enumerate() {
            if !buffer.is_empty() {
                append(&parts[part], buffer)?;
                written += buffer.len() as u64;
            }
        }
        self.partitions.spilled_bytes += written;
        for (part, path) in parts.into_iter().enumerate().rev() {
            if counts[part] > 0 {
                self.pending.push(Pending {
                    path,
                    lane: p.lane,
                    skip: p.skip + take,
                    count: counts[part],
                });
            }
        }
        Ok(())
    }
}

fn encode(buffer: &mut Vec<u8>, record: &TableRecord) {
    let mut bytes = [0u8; ENTRY_BYTES];
    bytes[..8].copy_from_slice(&record.value.to_le_bytes());
    bytes[8..16].copy_from_slice(&record.doc_id.to_le_bytes());
    bytes[16..].copy_from_slice(&record.rank.to_le_bytes());
    buffer.extend_from_slice(&bytes);
}

fn decode(bytes: &[u8], lane: u32) -> TableRecord {
    let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    TableRecord {
        base: lane,
        lanes: 1,
        value: word(0),
        doc_id: word(8),
        rank: word(16),
    }
}

/// Calls `each` on the `count` entries of the partition file `path`, read a large chunk at
/// a time.
fn read_entries(
    path: &Path,
    lane: u32,
    count: u64,
    mut each: impl FnMut(TableRecord) -> io::Result<()>,
) -> io::Result<()> {
    const CHUNK: usize = MAX_BUFFER_BYTES / ENTRY_BYTES;
    let mut file = File::open(path)?;
    let mut bytes = vec![0u8; CHUNK * ENTRY_BYTES];
    let mut left = count;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        let chunk = &mut bytes[..n * ENTRY_BYTES];
        file.read_exact(chunk)?;
        for entry in chunk.chunks_exact(ENTRY_BYTES) {
            each(decode(entry, lane))?;
        }
        left -= n as u64;
    }
    Ok(())
}

fn append(path: &Path, bytes: &[u8]) -> io::Result<()> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(bytes)
}

fn read_partition(path: &Path, lane: u32, count: u64) -> io::Result<Vec<TableRecord>> {
    let mut records = Vec::with_capacity(count as usize);
    read_entries(path, lane, count, |record| {
        records.push(record);
        Ok(())
    })?;
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_core::mix::splitmix64;
    use neardup_core::TableDesign;

    fn manku16() -> Keys {
        let design = TableDesign::manku16();
        Keys::tables(design.masks())
    }

    #[test]
    fn key_prefix_reads_the_leading_bits_of_the_packed_key() {
        let keys = manku16();
        let mut state = 7;
        for _ in 0..1000 {
            let value = splitmix64(&mut state);
            for lane in 0..16 {
                let width = keys.key_bits(lane);
                let packed = keys.packed(lane, value);
                // The simple version: bit by bit, from the most significant key bit.
                let bit = |i: u32| (i < width) as u64 & (packed >> (width - 1 - i.min(width - 1)));
                for (skip, take) in [(0, 1), (0, 8), (3, 4), (width - 2, 4), (width, 4)] {
                    let expected = (skip..skip + take).fold(0u64, |acc, i| acc << 1 | bit(i));
                    let got = key_prefix(&keys, lane, value, skip, take) as u64;
                    assert_eq!(got, expected, "lane {lane} skip {skip} take {take}");
                }
            }
        }
    }

    #[test]
    fn held_fingerprints_replay_in_order_from_disk_and_memory() {
        let tmp = tempfile::tempdir().unwrap();
        let mut dir = SpillDir::new(tmp.path(), 3);
        let mut held = HeldFingerprints::new(2, 100);
        let entry = |i: u64| Waiting {
            doc_id: i,
            simhash: i * 31,
            rank: i % 7,
        };
        for i in 0..1050 {
            held.push(entry(i), &[i, !i], &mut dir).unwrap();
        }
        assert_eq!(held.len(), 1050);
        assert_eq!(held.spilled_bytes(), 1000 * 40);
        for _round in 0..2 {
            let mut replay = held.replay().unwrap();
            let mut seen = Vec::new();
            while held
                .next_chunk(&mut replay, 128, |e, bands| seen.push((*e, bands.to_vec())))
                .unwrap()
                > 0
            {}
            let expected: Vec<_> = (0..1050).map(|i| (entry(i), vec![i, !i])).collect();
            assert_eq!(seen, expected);
        }
        let path = dir.path().to_path_buf();
        assert!(path.join("held").exists());
        drop(held);
        assert!(!path.join("held").exists());
        drop(dir);
        assert!(!path.exists());
    }

    /// Buckets as (lane, key) -> sorted doc ids, from a list of records.
    fn buckets(keys: &Keys, records: &[TableRecord]) -> Vec<(u32, u64, Vec<u64>)> {
        let mut map = std::collections::BTreeMap::<(u32, u64), Vec<u64>>::new();
        for r in records {
            for bit in 0..64 {
                if r.lanes & (1 << bit) != 0 {
                    let lane = r.base + bit;
                    map.entry((lane, keys.key(lane, r.value)))
                        .or_default()
                        .push(r.doc_id);
                }
            }
        }
        map.into_iter()
            .map(|((lane, key), mut docs)| {
                docs.sort_unstable();
                (lane, key, docs)
            })
            .collect()
    }

    #[test]
    fn partitions_keep_every_bucket_whole() {
        let keys = manku16();
        let tmp = tempfile::tempdir().unwrap();
        let mut dir = SpillDir::new(tmp.path(), 0);
        let mut state = 11;
        let mut records = Vec::new();
        // Random fingerprints, and a clump sharing 48 bits, which must be split repeatedly.
        for i in 0..6000u64 {
            let value = if i % 3 == 0 {
                0xabcd_ef01_2345_0000 | (splitmix64(&mut state) & 0xffff)
            } else {
                splitmix64(&mut state)
            };
            let lanes = splitmix64(&mut state) & 0xffff | 1;
            records.push(TableRecord {
                base: 0,
                lanes,
                value,
                doc_id: i,
                rank: i % 5,
            });
        }
        let shape = SpillShape {
            bits: 3,
            buffer_bytes: 4096,
            max_entries: 100,
        };
        let mut partitions = Partitions::new(dir.sub("round-1", true).unwrap(), 16, shape);
        for r in &records {
            partitions.add(&keys, r).unwrap();
        }
        let mut largest = 0;
        let mut read_back = Vec::new();
        let mut walk = partitions.walk().unwrap();
        while let Some(part) = walk.next(&keys).unwrap() {
            assert!(part.iter().all(|r| r.lanes == 1 && r.base == part[0].base));
            // Only a partition whose key bits are all used can stay over the limit.
            if part.len() > 100 {
                let key = keys.key(part[0].base, part[0].value);
                assert!(part.iter().all(|r| keys.key(r.base, r.value) == key));
            }
            largest = largest.max(part.len());
            read_back.extend(part);
        }
        let written = walk.spilled_bytes();
        let entries: u64 = records.iter().map(|r| r.lanes.count_ones() as u64).sum();
        assert_eq!(read_back.len() as u64, entries);
        // The clump's entries were written again when split.
        assert!(written > entries * ENTRY_BYTES as u64, "{written}");
        assert_eq!(buckets(&keys, &read_back), buckets(&keys, &records));
        assert!(largest > 0);
        let round = dir.path().join("round-1");
        assert_eq!(
            std::fs::read_dir(round).unwrap().count(),
            0,
            "files removed"
        );
    }
}
