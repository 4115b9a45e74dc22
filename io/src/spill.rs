//! Sorting more records than fit in memory: sorted runs on local disk, merged.
//!
//! The simple version collects every record in a `Vec`, sorts it and walks it in order. That
//! holds the whole input at once, so memory grows with the corpus. [`ExternalSort`] holds
//! at most its budget: records are gathered in memory until their estimated size reaches the
//! budget, then sorted and written to a run file (bincode, one record after another); once
//! every record is in, the runs and what is still in memory are merged by a heap of the
//! runs' next records ([`Merged`]), which reads each run through a small buffer. The order
//! is the records' `Ord`, the same whichever records happened to share a run, so the merged
//! sequence equals the simple version's sorted `Vec` (records equal under `Ord` are equal
//! wherever it matters, by the callers' choice of `Ord`).
//!
//! When more runs than [`MAX_MERGE_FAN_IN`] pile up, the oldest are merged into one run
//! first, so the final merge never opens more files than that.
//!
//! Run files live in the directory the sorter is given (created on first use); each is
//! removed as soon as it is merged, and every one left when the sorter or its merge is
//! dropped (even on error). A failed write (a full disk) is an error naming the file.
//!
//! ```
//! use neardup_io::spill::ExternalSort;
//!
//! let dir = tempfile::tempdir().unwrap();
//! // A budget of 64 bytes: ten records of 16 bytes spill into runs of four.
//! let mut sort = ExternalSort::new(dir.path().join("sort"), 64);
//! for x in [7u64, 3, 9, 1, 8, 2, 6, 4, 5, 0] {
//!     sort.push((x % 3, x)).unwrap();
//! }
//! assert!(sort.spilled_bytes() > 0);
//! let merged: Vec<(u64, u64)> = sort.finish().unwrap().map(|r| r.unwrap()).collect();
//! let mut simple: Vec<(u64, u64)> = (0..10).map(|x| (x % 3, x)).collect();
//! simple.sort();
//! assert_eq!(merged, simple);
//! ```

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The most runs one merge reads at once (each with a [`RUN_READ_BUFFER`]); past it the
/// oldest runs are merged into one first.
pub const MAX_MERGE_FAN_IN: usize = 64;
/// Read buffer of each run while it is merged.
pub const RUN_READ_BUFFER: usize = 256 << 10;
/// Write buffer of the run being written.
pub const RUN_WRITE_BUFFER: usize = 1 << 20;

/// A record an [`ExternalSort`] can hold: ordered, written to runs with bincode, and sized
/// for the budget.
pub trait SpillRecord: Ord + Serialize + DeserializeOwned {
    /// Bytes the record takes in memory, its heap included (the default: its inline size,
    /// for records that own no heap memory).
    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
    }
}

macro_rules! plain_records {
    ($($t:ty),*) => { $(impl SpillRecord for $t {})* };
}
plain_records!(
    u64,
    u128,
    (u64, u64),
    (u64, i64),
    (i64, i64),
    (u64, bool),
    (u64, u64, u64),
    (u128, u64),
    (u128, u64, u64),
    (u128, bool, u64, u64),
    (u64, u128, u64)
);

/// What a sort did: its budget, the records it sorted, the runs it wrote and their bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SortStats {
    pub budget_bytes: u64,
    pub records: u64,
    pub runs: u64,
    pub spilled_bytes: u64,
}

impl SortStats {
    /// The two sorts' records, runs and bytes summed, and their budgets (of sorts alive
    /// together).
    pub fn plus(self, other: SortStats) -> SortStats {
        SortStats {
            budget_bytes: self.budget_bytes.saturating_add(other.budget_bytes),
            records: self.records + other.records,
            runs: self.runs + other.runs,
            spilled_bytes: self.spilled_bytes + other.spilled_bytes,
        }
    }
}

/// Records sorted within a memory budget (see the module docs).
pub struct ExternalSort<T> {
    dir: PathBuf,
    budget: usize,
    buffer: Vec<T>,
    used: usize,
    runs: Runs,
    records: u64,
}

/// The run files of a sort: removed when dropped, with the directory they were written to
/// (and its parent, a worker's, once empty) if the sort created it.
#[derive(Default)]
struct Runs {
    files: Vec<PathBuf>,
    next: usize,
    spilled: u64,
    created: Option<PathBuf>,
}

impl Drop for Runs {
    fn drop(&mut self) {
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
        if let Some(dir) = &self.created {
            // Only empty directories go: another sort may share the parent.
            if std::fs::remove_dir(dir).is_ok() {
                if let Some(parent) = dir.parent() {
                    let _ = std::fs::remove_dir(parent);
                }
            }
        }
    }
}

impl Runs {
    fn new_path(&mut self, dir: &Path) -> io::Result<PathBuf> {
        if self.created.is_none() && !dir.is_dir() {
            std::fs::create_dir_all(dir).map_err(|e| in_file(dir, e))?;
            self.created = Some(dir.to_path_buf());
        }
        let path = dir.join(format!("run-{:06}.bin", self.next));
        self.next += 1;
        Ok(path)
    }

    /// Writes `records` (sorted) as a new run.
    fn write<T: Serialize>(
        &mut self,
        dir: &Path,
        records: impl Iterator<Item = io::Result<T>>,
    ) -> io::Result<()> {
        let path = self.new_path(dir)?;
        // Listed before it is written, so that a failed write is removed too.
        self.files.push(path.clone());
        let file = File::create(&path).map_err(|e| in_file(&path, e))?;
        let mut out = BufWriter::with_capacity(RUN_WRITE_BUFFER, file);
        for r in records {
            bincode::serialize_into(&mut out, &r?).map_err(|e| in_file(&path, bincode_io(e)))?;
        }
        out.flush().map_err(|e| in_file(&path, e))?;
        let bytes = out.get_ref().metadata().map(|m| m.len()).unwrap_or(0);
        self.spilled += bytes;
        Ok(())
    }
}

impl<T: SpillRecord> ExternalSort<T> {
    /// A sort that keeps up to `budget` bytes of records in memory and writes its runs to
    /// `dir` (created when the first run is written).
    pub fn new(dir: PathBuf, budget: usize) -> Self {
        ExternalSort {
            dir,
            budget: budget.max(1),
            buffer: Vec::new(),
            used: 0,
            runs: Runs::default(),
            records: 0,
        }
    }

    /// Adds a record, writing a run first if the budget is full.
    pub fn push(&mut self, record: T) -> io::Result<()> {
        if self.buffer.capacity() == 0 && self.budget < usize::MAX {
            // Room for a full budget at once. A `Vec` that doubles as it fills holds up to
            // twice what it uses (measured: the exact stage's sorts held 1.38 times their
            // budget); pages of the room not yet written are not resident. Where the room
            // cannot be had, the `Vec` grows as usual.
            let room = self.budget / std::mem::size_of::<T>().max(1) + 1;
            let _ = self.buffer.try_reserve_exact(room);
        }
        self.used += record.memory_bytes();
        self.buffer.push(record);
        self.records += 1;
        if self.used >= self.budget {
            self.spill()?;
        }
        Ok(())
    }

    /// Records pushed so far.
    pub fn len(&self) -> u64 {
        self.records
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Bytes written to runs so far.
    pub fn spilled_bytes(&self) -> u64 {
        self.runs.spilled
    }

    /// Runs written so far.
    pub fn runs(&self) -> usize {
        self.runs.next
    }

    /// What the sort did so far.
    pub fn stats(&self) -> SortStats {
        SortStats {
            budget_bytes: self.budget as u64,
            records: self.records,
            runs: self.runs.next as u64,
            spilled_bytes: self.runs.spilled,
        }
    }

    fn spill(&mut self) -> io::Result<()> {
        let mut records = std::mem::take(&mut self.buffer);
        self.used = 0;
        records.sort_unstable();
        self.runs
            .write(&self.dir, records.into_iter().map(Ok::<T, io::Error>))?;
        if self.runs.files.len() >= MAX_MERGE_FAN_IN {
            // The oldest half merged into one run: the final merge stays within the fan-in.
            let oldest: Vec<PathBuf> = self.runs.files.drain(..MAX_MERGE_FAN_IN / 2).collect();
            let merged = Merged::<T>::new(oldest, Vec::new(), Runs::default())?;
            self.runs.write(&self.dir, merged)?;
            // The merged run goes first, where its records came from (the order of runs
            // does not change the result; this only keeps the oldest together).
            let last = self.runs.files.pop().expect("the run just written");
            self.runs.files.insert(0, last);
        }
        Ok(())
    }

    /// Every record pushed, in order.
    ///
    /// A sort that has written a run writes its last records as one more: the merge then
    /// holds only its read buffers, not up to a budget of records left in memory beside
    /// the next stage's sort as it fills. Without it, the memory after a sort depended on
    /// where the corpus size fell between two runs (threshold mode under `--memory-limit
    /// 4G`: 1,905 to 1,927 MB at 10 GB of text, where the exact stage kept 0.17 GB a worker
    /// of its last records while the signatures' sort filled, against 1,678 to 1,797 MB at
    /// 50 GB; docs/performance.md). A sort that never spilled stays in memory.
    pub fn finish(mut self) -> io::Result<Merged<T>> {
        if self.runs.next > 0 && !self.buffer.is_empty() {
            self.spill()?;
        }
        let stats = self.stats();
        let mut memory = std::mem::take(&mut self.buffer);
        memory.sort_unstable();
        let files = std::mem::take(&mut self.runs.files);
        let mut merged = Merged::new(files, memory, std::mem::take(&mut self.runs))?;
        merged.stats = stats;
        Ok(merged)
    }
}

impl<T: SpillRecord> ExternalSort<T> {
    /// Every record pushed, in order, in one file that can be read many times
    /// ([`SortedFile::records`]): the runs merged into it (a sort that never spilled writes
    /// its records there directly).
    pub fn seal(mut self) -> io::Result<SortedFile<T>> {
        let dir = self.dir.clone();
        let stats = self.stats();
        // The sealed file's owner removes the directory, after the file.
        let mut runs = Runs::default();
        runs.created = self.runs.created.take();
        runs.next = 999_999;
        let merged = self.finish()?;
        runs.write(&dir, merged)?;
        let path = runs.files.pop().expect("the file just written");
        Ok(SortedFile {
            path,
            stats,
            _dir: runs,
            _records: PhantomData,
        })
    }
}

/// A sort's records in order, in one file (see [`ExternalSort::seal`]): removed when
/// dropped.
pub struct SortedFile<T> {
    path: PathBuf,
    stats: SortStats,
    /// Removes the directory, if the seal created it.
    _dir: Runs,
    _records: PhantomData<T>,
}

impl<T: SpillRecord> SortedFile<T> {
    /// What the sort that made this file did.
    pub fn stats(&self) -> SortStats {
        self.stats
    }

    /// Bytes of the file.
    pub fn bytes(&self) -> u64 {
        std::fs::metadata(&self.path).map_or(0, |m| m.len())
    }

    /// The records in order, read from the start.
    pub fn records(&self) -> io::Result<SortedReader<T>> {
        let file = File::open(&self.path).map_err(|e| in_file(&self.path, e))?;
        Ok(SortedReader {
            reader: BufReader::with_capacity(RUN_READ_BUFFER, file),
            path: self.path.clone(),
            _records: PhantomData,
        })
    }
}

impl<T> Drop for SortedFile<T> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Reads a [`SortedFile`] in order.
pub struct SortedReader<T> {
    reader: BufReader<File>,
    path: PathBuf,
    _records: PhantomData<T>,
}

impl<T: SpillRecord> Iterator for SortedReader<T> {
    type Item = io::Result<T>;

    fn next(&mut self) -> Option<io::Result<T>> {
        read_record(&mut self.reader)
            .map_err(|e| in_file(&self.path, e))
            .transpose()
    }
}

/// The merge of an [`ExternalSort`]'s runs and its in-memory records: an iterator of the
/// records in order. Its run files are removed as each is exhausted, and all of them when
/// it is dropped.
pub struct Merged<T> {
    heap: BinaryHeap<Reverse<(T, usize)>>,
    readers: Vec<Option<(BufReader<File>, PathBuf)>>,
    memory: std::vec::IntoIter<T>,
    /// Where the in-memory records stand among the sources (`readers.len()`).
    memory_source: usize,
    failed: bool,
    stats: SortStats,
    /// The sort's directory, removed last.
    _runs: Runs,
    _records: PhantomData<T>,
}

impl<T: SpillRecord> Merged<T> {
    fn new(files: Vec<PathBuf>, memory: Vec<T>, runs: Runs) -> io::Result<Self> {
        let mut merged = Merged {
            heap: BinaryHeap::with_capacity(files.len() + 1),
            readers: Vec::with_capacity(files.len()),
            memory: memory.into_iter(),
            memory_source: files.len(),
            failed: false,
            stats: SortStats::default(),
            _runs: runs,
            _records: PhantomData,
        };
        for path in files {
            let file = File::open(&path).map_err(|e| in_file(&path, e));
            // Listed before anything can fail, so that every file is removed on drop.
            merged.readers.push(None);
            let reader = BufReader::with_capacity(RUN_READ_BUFFER, file?);
            *merged.readers.last_mut().expect("just pushed") = Some((reader, path));
        }
        for source in 0..=merged.memory_source {
            merged.refill(source)?;
        }
        Ok(merged)
    }

    /// What the sort that made this merge did.
    pub fn stats(&self) -> SortStats {
        self.stats
    }

    /// Puts the next record of `source` on the heap, if it has one.
    fn refill(&mut self, source: usize) -> io::Result<()> {
        if source == self.memory_source {
            if let Some(r) = self.memory.next() {
                self.heap.push(Reverse((r, source)));
            }
            return Ok(());
        }
        let Some((reader, path)) = self.readers[source].as_mut() else {
            return Ok(());
        };
        match read_record::<T>(reader) {
            Ok(Some(r)) => self.heap.push(Reverse((r, source))),
            Ok(None) => {
                let (_, path) = self.readers[source].take().expect("an open run");
                std::fs::remove_file(&path).map_err(|e| in_file(&path, e))?;
            }
            Err(e) => return Err(in_file(path, e)),
        }
        Ok(())
    }
}

impl<T: SpillRecord> Iterator for Merged<T> {
    type Item = io::Result<T>;

    fn next(&mut self) -> Option<io::Result<T>> {
        if self.failed {
            return None;
        }
        let Reverse((record, source)) = self.heap.pop()?;
        if let Err(e) = self.refill(source) {
            self.failed = true;
            return Some(Err(e));
        }
        Some(Ok(record))
    }
}

impl<T> Drop for Merged<T> {
    fn drop(&mut self) {
        for (_, path) in self.readers.iter().flatten() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The next record of a run, or `None` at its clean end.
fn read_record<T: DeserializeOwned>(reader: &mut BufReader<File>) -> io::Result<Option<T>> {
    use std::io::BufRead;
    if reader.fill_buf()?.is_empty() {
        return Ok(None);
    }
    bincode::deserialize_from(reader)
        .map(Some)
        .map_err(bincode_io)
}

// bincode's error type is a box: the lint's advice cannot apply.
#[allow(clippy::boxed_local)]
fn bincode_io(e: bincode::Error) -> io::Error {
    match *e {
        bincode::ErrorKind::Io(e) => e,
        other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
    }
}

/// `e`, naming the file it happened in.
fn in_file(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shuffled(n: u64, seed: u64) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = (0..n)
            .map(|i| (neardup_core::mix::mix64(i ^ seed) % 1000, i))
            .collect();
        v.sort_by_key(|&(_, i)| neardup_core::mix::mix64(i.wrapping_mul(31) ^ seed));
        v
    }

    fn files_in(dir: &Path) -> usize {
        std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
    }

    #[test]
    fn merged_runs_equal_the_simple_sort_at_every_budget() {
        for (budget, n) in [
            (1usize, 50u64),
            (16 * 7, 1000),
            (16 * 1000, 5000),
            (1 << 30, 3000),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let input = shuffled(n, budget as u64);
            let mut sort = ExternalSort::new(dir.path().join("s"), budget);
            for &r in &input {
                sort.push(r).unwrap();
            }
            assert_eq!(sort.len(), n);
            let spilled = sort.runs() > 0;
            assert_eq!(spilled, budget < 16 * n as usize, "budget {budget}");
            let merged: Vec<_> = sort.finish().unwrap().map(|r| r.unwrap()).collect();
            let mut simple = input.clone();
            simple.sort();
            assert_eq!(merged, simple, "budget {budget}");
            assert!(
                !dir.path().join("s").exists(),
                "every run removed once merged"
            );
        }
    }

    #[test]
    fn a_sealed_sort_reads_in_order_as_often_as_asked() {
        for budget in [16 * 10, 1 << 30] {
            let dir = tempfile::tempdir().unwrap();
            let mut sort = ExternalSort::new(dir.path().join("s"), budget);
            let input = shuffled(500, 9);
            for &r in &input {
                sort.push(r).unwrap();
            }
            let sealed = sort.seal().unwrap();
            let mut simple = input.clone();
            simple.sort();
            for _ in 0..2 {
                let read: Vec<_> = sealed.records().unwrap().map(|r| r.unwrap()).collect();
                assert_eq!(read, simple);
            }
            assert_eq!(
                files_in(&dir.path().join("s")),
                1,
                "one file, the runs gone"
            );
            drop(sealed);
            assert!(!dir.path().join("s").exists());
        }
    }

    #[test]
    fn more_runs_than_the_fan_in_are_merged_first() {
        let dir = tempfile::tempdir().unwrap();
        let n = (MAX_MERGE_FAN_IN as u64) * 5;
        // One record per run: five times the fan-in.
        let mut sort = ExternalSort::new(dir.path().join("s"), 1);
        let input = shuffled(n, 7);
        for &r in &input {
            sort.push(r).unwrap();
            assert!(files_in(&dir.path().join("s")) <= MAX_MERGE_FAN_IN);
        }
        let merged: Vec<_> = sort.finish().unwrap().map(|r| r.unwrap()).collect();
        let mut simple = input;
        simple.sort();
        assert_eq!(merged, simple);
    }

    #[test]
    fn runs_are_removed_when_the_sort_or_its_merge_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut sort = ExternalSort::new(path.clone(), 16 * 10);
        for r in shuffled(100, 1) {
            sort.push(r).unwrap();
        }
        assert!(files_in(&path) > 0);
        drop(sort);
        assert_eq!(files_in(&path), 0);

        let mut sort = ExternalSort::new(path.clone(), 16 * 10);
        for r in shuffled(100, 2) {
            sort.push(r).unwrap();
        }
        let mut merged = sort.finish().unwrap();
        merged.next().unwrap().unwrap();
        assert!(files_in(&path) > 0);
        drop(merged);
        assert_eq!(files_in(&path), 0);
    }

    #[test]
    fn a_damaged_run_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let mut sort = ExternalSort::new(path.clone(), 16 * 10);
        for r in shuffled(100, 3) {
            sort.push(r).unwrap();
        }
        // Cut the first run in the middle of a record.
        let run = path.join("run-000000.bin");
        let len = std::fs::metadata(&run).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&run)
            .unwrap()
            .set_len(len - 3)
            .unwrap();
        let error = sort
            .finish()
            .and_then(|m| m.collect::<io::Result<Vec<_>>>())
            .unwrap_err();
        assert!(error.to_string().contains("run-000000.bin"), "{error}");
    }

    #[test]
    fn a_run_that_cannot_be_written_is_an_error_naming_it() {
        // A run written where a file stands in the way of its directory fails, named.
        let mut runs = Runs::default();
        let dir = tempfile::tempdir().unwrap();
        let blocked = dir.path().join("not-a-dir");
        std::fs::write(&blocked, b"x").unwrap();
        let e = runs
            .write::<u64>(&blocked.join("sub"), std::iter::once(Ok(1)))
            .unwrap_err();
        assert!(e.to_string().contains("not-a-dir"), "{e}");
    }
}
