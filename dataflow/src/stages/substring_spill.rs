//! The window records a worker owns, within its share of `--memory-limit`: an external sort.
//!
//! The owner of a key must see every record of that key before it can answer, and natural
//! text has nearly one distinct window per byte, so the records (32 bytes each) are the
//! search's peak. Past the worker's budget they are sorted in the order the fold reads them
//! ([`record_order`]: by key, then by first position) and written to a *run* file; at the end
//! the runs and the records still in memory are merged, a key's records meet in one group
//! whatever run they came from, and each group is folded as in memory ([`resolve_group`]).
//! The answers are therefore the same as without spilling, for any budget.
//!
//! At most [`MAX_OPEN_RUNS`] runs are merged at once; beyond that, runs are first merged
//! into longer ones (a merge pass reads and writes them once more). Run files live in the
//! worker's spill directory (`_spill/worker-N/substrings/`, or under `--spill-dir`), which
//! is removed when the search ends, fails or is stopped (see [`SpillDir`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use neardup_core::substrings::{
    record_order, resolve_group, Pos, Verdict, WindowRecord, RECORD_BYTES,
};

use crate::stages::near::spill::SpillDir;

/// The most runs merged at once (each holds a read buffer of [`RUN_BUFFER_BYTES`]).
pub const MAX_OPEN_RUNS: usize = 64;
/// The read and write buffer of a run file.
pub const RUN_BUFFER_BYTES: usize = 64 << 10;
/// The share of a worker's part of `--memory-limit` its window records may take: the text
/// the worker holds, a block's suffix array and the verdicts need the rest.
pub const RECORD_SHARE: f64 = 0.25;

/// The records a worker owns: in memory up to `budget`, in sorted runs beyond it.
pub struct OwnedRecords {
    memory: Vec<WindowRecord>,
    /// Records held in memory before a run is written (at least 1).
    budget: usize,
    dir: SpillDir,
    runs: Vec<PathBuf>,
    written: usize,
    /// Runs written (merge passes included) and their bytes.
    pub spill_runs: u64,
    pub spilled_bytes: u64,
    /// Once the fold has started: the merge, the records of the key being folded, and the
    /// runs to remove at the end.
    merger: Option<Merger>,
    group: Vec<WindowRecord>,
    merged: Vec<PathBuf>,
}

impl OwnedRecords {
    /// Records of a worker whose spill directory is `dir`, at most `budget` in memory.
    pub fn new(dir: SpillDir, budget: usize) -> Self {
        OwnedRecords {
            memory: Vec::new(),
            budget: budget.max(1),
            dir,
            runs: Vec::new(),
            written: 0,
            spill_runs: 0,
            spilled_bytes: 0,
            merger: None,
            group: Vec::new(),
            merged: Vec::new(),
        }
    }

    /// The budget in records for a worker's share of `memory_limit` (`None`: unbounded).
    pub fn budget(memory_limit: Option<u64>, workers: usize) -> usize {
        match memory_limit {
            None => usize::MAX,
            Some(limit) => {
                let share = limit as f64 / workers.max(1) as f64 * RECORD_SHARE;
                ((share / RECORD_BYTES as f64) as usize).max(1)
            }
        }
    }

    /// Takes the records of `data`, spilling a run whenever the budget is reached.
    pub fn extend(&mut self, data: &mut Vec<WindowRecord>) -> io::Result<()> {
        for r in data.drain(..) {
            self.memory.push(r);
            if self.memory.len() >= self.budget {
                self.spill()?;
            }
        }
        Ok(())
    }

    fn run_path(&mut self) -> io::Result<PathBuf> {
        let dir = self.dir.sub("substrings", true)?;
        self.written += 1;
        Ok(dir.join(format!("run-{:06}.bin", self.written)))
    }

    /// Sorts the records in memory and writes them as a run.
    fn spill(&mut self) -> io::Result<()> {
        self.memory.sort_unstable_by(record_order);
        let path = self.run_path()?;
        let mut out = RunWriter::create(&path)?;
        for r in self.memory.drain(..) {
            out.push(&r)?;
        }
        self.finish_run(out, path)
    }

    fn finish_run(&mut self, out: RunWriter, path: PathBuf) -> io::Result<()> {
        self.spilled_bytes += out.finish()?;
        self.spill_runs += 1;
        self.runs.push(path);
        Ok(())
    }

    /// Folds the next `max` records (at least; a key's records are folded together) and
    /// calls `f` with their verdicts; `true` once every record is folded and the run files
    /// are removed. The stage calls it once per activation, so that verdicts flow on to
    /// their origins in batches instead of all at once.
    ///
    /// The simple version, folding all records in one call, gives every verdict to the
    /// channel at once: a queue as large as the records themselves. The run files are
    /// removed at the end (the directory goes when the search ends, with [`Self::remove`] or
    /// on drop).
    pub fn resolve_some(&mut self, max: usize, mut f: impl FnMut(Verdict)) -> io::Result<bool> {
        if self.merger.is_none() {
            let mut memory = std::mem::take(&mut self.memory);
            memory.sort_unstable_by(record_order);
            // More runs than MAX_OPEN_RUNS: merge the oldest into longer runs first.
            while self.runs.len() >= MAX_OPEN_RUNS {
                let batch: Vec<PathBuf> = self.runs.drain(..MAX_OPEN_RUNS).collect();
                let path = self.run_path()?;
                let mut out = RunWriter::create(&path)?;
                merge(&batch, Vec::new(), |r| out.push(&r))?;
                self.finish_run(out, path)?;
                for p in batch {
                    std::fs::remove_file(p)?;
                }
            }
            self.merged = std::mem::take(&mut self.runs);
            self.merger = Some(Merger::new(&self.merged, memory)?);
        }
        let merger = self.merger.as_mut().expect("started above");
        let mut taken = 0usize;
        while taken < max {
            let Some(r) = merger.next()? else {
                resolve_group(&self.group, &mut f);
                self.group = Vec::new();
                self.merger = None;
                for p in std::mem::take(&mut self.merged) {
                    std::fs::remove_file(p)?;
                }
                return Ok(true);
            };
            if self.group.last().is_some_and(|g| g.key != r.key) {
                resolve_group(&self.group, &mut f);
                self.group.clear();
            }
            self.group.push(r);
            taken += 1;
        }
        Ok(false)
    }

    /// The worker's spill directory, for messages.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Removes the spill directory and everything in it.
    pub fn remove(&mut self) {
        self.dir.remove();
    }
}

/// A run being written.
struct RunWriter {
    out: BufWriter<File>,
    bytes: u64,
}

impl RunWriter {
    fn create(path: &Path) -> io::Result<Self> {
        Ok(RunWriter {
            out: BufWriter::with_capacity(RUN_BUFFER_BYTES, File::create(path)?),
            bytes: 0,
        })
    }

    fn push(&mut self, r: &WindowRecord) -> io::Result<()> {
        self.bytes += RECORD_BYTES as u64;
        self.out.write_all(&r.to_bytes())
    }

    /// Flushes the run; its size in bytes.
    fn finish(mut self) -> io::Result<u64> {
        self.out.flush()?;
        Ok(self.bytes)
    }
}

/// A run being read.
struct RunReader(BufReader<File>);

impl RunReader {
    fn next(&mut self) -> io::Result<Option<WindowRecord>> {
        let mut buf = [0u8; RECORD_BYTES];
        match self.0.read_exact(&mut buf) {
            Ok(()) => Ok(Some(WindowRecord::from_bytes(&buf))),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The records of the sorted `runs` and of `memory` (sorted), in [`record_order`].
fn merge(
    runs: &[PathBuf],
    memory: Vec<WindowRecord>,
    mut each: impl FnMut(WindowRecord) -> io::Result<()>,
) -> io::Result<()> {
    let mut merger = Merger::new(runs, memory)?;
    while let Some(r) = merger.next()? {
        each(r)?;
    }
    Ok(())
}

/// Sorted runs and sorted records in memory, merged one record at a time.
struct Merger {
    readers: Vec<RunReader>,
    memory: std::vec::IntoIter<WindowRecord>,
    /// The next record of each source; source `readers.len()` is the memory.
    heads: Vec<Option<WindowRecord>>,
    heap: BinaryHeap<Reverse<((u128, Pos), usize)>>,
}

impl Merger {
    fn new(runs: &[PathBuf], memory: Vec<WindowRecord>) -> io::Result<Self> {
        let mut readers = runs
            .iter()
            .map(|p| {
                Ok(RunReader(BufReader::with_capacity(
                    RUN_BUFFER_BYTES,
                    File::open(p)?,
                )))
            })
            .collect::<io::Result<Vec<_>>>()?;
        let mut memory = memory.into_iter();
        let mut heads: Vec<Option<WindowRecord>> = Vec::with_capacity(readers.len() + 1);
        let mut heap = BinaryHeap::new();
        for (i, reader) in readers.iter_mut().enumerate() {
            let head = reader.next()?;
            if let Some(r) = &head {
                heap.push(Reverse(((r.key, r.first()), i)));
            }
            heads.push(head);
        }
        let head = memory.next();
        if let Some(r) = &head {
            heap.push(Reverse(((r.key, r.first()), readers.len())));
        }
        heads.push(head);
        Ok(Merger {
            readers,
            memory,
            heads,
            heap,
        })
    }

    /// The next record: the head of the source on top of the heap, whose next record then
    /// takes its place on top and sinks once (instead of a pop and a push, two passes).
    fn next(&mut self) -> io::Result<Option<WindowRecord>> {
        let Some(mut top) = self.heap.peek_mut() else {
            return Ok(None);
        };
        let Reverse((_, i)) = *top;
        let r = self.heads[i].take().expect("a head for every heap entry");
        let next = if i == self.readers.len() {
            self.memory.next()
        } else {
            self.readers[i].next()?
        };
        match &next {
            Some(n) => *top = Reverse(((n.key, n.first()), i)),
            None => {
                std::collections::binary_heap::PeekMut::pop(top);
            }
        }
        self.heads[i] = next;
        Ok(Some(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use neardup_core::substrings::resolve;

    fn records(seed: u64, n: usize) -> Vec<WindowRecord> {
        let mut x = seed;
        (0..n)
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let key = (x >> 60) as u128; // few keys: many groups of several records
                let first = Pos {
                    doc_id: (x >> 20) % 7,
                    offset: i as u32,
                };
                WindowRecord::new(key, first, 1 + (x as usize % 2), (x >> 8) as u32 % 3)
            })
            .collect()
    }

    #[test]
    fn spilled_runs_give_the_verdicts_of_memory() {
        let tmp = tempfile::tempdir().unwrap();
        for budget in [1, 3, 10, 1000] {
            let mut all = records(budget as u64, 500);
            let mut want = Vec::new();
            resolve(&mut all.clone(), |v| want.push(v));
            let mut owned = OwnedRecords::new(SpillDir::new(tmp.path(), budget), budget);
            for chunk in all.chunks_mut(7) {
                owned.extend(&mut chunk.to_vec()).unwrap();
            }
            // In batches of 5 records, as the stage folds them.
            let mut got = Vec::new();
            while !owned.resolve_some(5, |v| got.push(v)).unwrap() {}
            let key = |v: &Verdict| (v.first, v.origin, v.is_global_first);
            want.sort_by_key(key);
            got.sort_by_key(key);
            assert_eq!(got, want, "budget {budget}");
            assert!(!want.is_empty());
            if budget < 500 {
                assert!(owned.spill_runs >= (500 / budget) as u64);
                assert!(owned.spilled_bytes >= 500 * RECORD_BYTES as u64);
            }
            let dir = owned.dir().to_path_buf();
            drop(owned);
            assert!(!dir.exists(), "the spill directory is removed");
            all.clear();
        }
    }
}
