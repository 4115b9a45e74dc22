//! Merging a run of an index's generations into one while its writer goes on (the
//! background merges of `neardup serve`).
//!
//! Each checkpoint of the service adds a generation holding the writes since the last one,
//! and each generation costs every query a probe in each of its tables. A checkpoint merges
//! the newest generations into the one it writes while they are small
//! ([`super::merge_count`]), but writes wait for that, so it carries at most a limit (1M
//! documents in the service); past it, a service that takes more than that between two
//! checkpoints would add a generation at every checkpoint, for ever.
//!
//! Larger merges are made here, in three steps. The writer plans one
//! ([`super::IndexWriter::plan_merge`]: which generations, cheap, on its own thread). Any thread
//! writes the merged generation into a hidden directory ([`MergePlan::write`]), reading
//! only the mapped files of those generations, which no writer ever changes. The writer
//! commits it with its next checkpoint ([`super::IndexWriter::checkpoint_merging`]): one manifest
//! names the merged generation in the place of the ones it merged, and the checkpoint's
//! generation after it.
//!
//! The merged generation is the composition of the run: its documents, less those a
//! generation of the run deleted, each with its latest cluster; and the
//! deletions and cluster changes that the run made to earlier documents. What later
//! generations record about the run's documents (deletions, cluster changes, made before
//! the plan or while the merge was written) stays in those generations and applies to the
//! merged one as it did to the run. So the writes that go on meanwhile never conflict with
//! the merge, and the index reads the same before and after it (the simple equivalent:
//! [`super::IndexWriter::compact`] of the run alone; the oracle test compares the index with a
//! model of the documents present through checkpoints and merges).

use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use super::build::{sorted_changes, GenerationFiles, GenerationPlan, Unplaced};
use super::carry::{changes_of, entry_of, read_origins};
use super::read::{Index, Verify};
use super::{GenerationEntry, Manifest, FILE_SHIFT};
use crate::error::IoError;

/// The number a merged generation is written under until its commit gives it its own
/// (its hidden directory is `.gen-4294967295.tmp`, removed as any writer's leftover).
const UNPLACED: u32 = u32::MAX;

/// Which of the generations `generations` a background merge takes, `present[i]` being
/// the documents generation `i` still holds ([`Index::present_rows`]): going back from the
/// newest, each while it holds at most twice the documents of the newer ones taken
/// together, none with keep decisions, and `limit` documents in all at most. A generation
/// then holds more than twice the documents of all those after it once they are not
/// merged, so the generations stay logarithmic in the writes, whatever the sizes of the
/// checkpoints (with a checkpoint's own rule, [`super::merge_count`], checkpoints that each
/// write fewer documents than the last would add a generation each), and a document is
/// rewritten about `log3(limit / checkpoint)` times. Empty where fewer than two would be
/// taken.
pub fn background_merge(
    generations: &[GenerationEntry],
    present: &[u64],
    limit: u64,
) -> Range<usize> {
    let Some(newest) = generations.len().checked_sub(1) else {
        return 0..0;
    };
    if generations[newest].keep_decisions || present[newest] > limit {
        return 0..0;
    }
    let (mut taken, mut start) = (present[newest], newest);
    for g in (0..newest).rev() {
        let n = present[g];
        if generations[g].keep_decisions || n > 2 * taken || taken + n > limit {
            break;
        }
        (taken, start) = (taken + n, g);
    }
    if newest - start >= 1 {
        start..newest + 1
    } else {
        0..0
    }
}

/// A merge of a run of generations, planned by the index's writer, to be written on any
/// thread (see the module docs).
pub struct MergePlan {
    dir: PathBuf,
    range: Range<usize>,
    replaced: Vec<GenerationEntry>,
    budget: usize,
    spill: Option<PathBuf>,
}

/// A merged generation written and not yet committed ([`super::IndexWriter::checkpoint_merging`]
/// commits it). Dropped uncommitted, it removes its files.
pub struct MergedGeneration {
    range: Range<usize>,
    replaced: Vec<GenerationEntry>,
    generation: Unplaced,
}

impl MergePlan {
    /// The merge of `replaced`, the generations `range` of the index at `dir`, its
    /// tables' sorts within `budget` bytes, spilling to `spill` (see
    /// [`super::IndexWriter::plan_merge`]).
    pub(super) fn new(
        dir: PathBuf,
        range: Range<usize>,
        replaced: Vec<GenerationEntry>,
        (budget, spill): (usize, Option<PathBuf>),
    ) -> MergePlan {
        MergePlan {
            dir,
            range,
            replaced,
            budget,
            spill,
        }
    }

    /// The generations merged.
    pub fn range(&self) -> Range<usize> {
        self.range.clone()
    }

    /// Writes the merged generation into its hidden directory, reading the generations
    /// merged as the index maps them (checked against their checksums first). `cancel`
    /// set stops it between two documents with an error.
    pub fn write(self, cancel: &AtomicBool) -> Result<MergedGeneration, IoError> {
        let index = Index::open(&self.dir, Verify::Sizes)?;
        let fits = index.manifest().generations.get(self.range.clone());
        if fits != Some(&self.replaced[..]) {
            return Err(IoError::IndexInput {
                path: self.dir.clone(),
                reason: "the generations to merge changed since the merge was planned".into(),
            });
        }
        index.verify_generations(self.range.clone())?;
        let first = &self.replaced[0];
        let last = &self.replaced[self.replaced.len() - 1];
        let first_file = first.file_offset;
        let earlier = |doc: u64| doc >> FILE_SHIFT < first_file;
        // The run's own changes (those of earlier documents are the merged generation's to
        // record).
        let (changes, gone) = changes_of(&index, self.range.clone());
        let mut generation = GenerationFiles::create(GenerationPlan {
            dir: &self.dir,
            manifest: index.manifest(),
            number: UNPLACED,
            file_offset: first_file,
            files: last.file_offset + last.files - first_file,
            keep: None,
            decisions: false,
            budget: self.budget,
            spill: self.spill.as_deref(),
        })?;
        generation.delete(
            gone.iter()
                .filter(|&(&doc, _)| earlier(doc))
                .map(|(&d, &i)| (d, i))
                .collect(),
        );
        for (g, entry) in self.range.clone().zip(&self.replaced) {
            // One generation's sources and urls at a time.
            let origins = read_origins(&self.dir, std::slice::from_ref(entry))?;
            for row in 0..index.generation_documents(g) as u32 {
                if cancel.load(Ordering::Relaxed) {
                    return Err(IoError::IndexInput {
                        path: self.dir.clone(),
                        reason: "the merge was cancelled".into(),
                    });
                }
                let doc = index.doc_id(g, row);
                if gone.contains_key(&doc) {
                    continue;
                }
                // Its latest cluster: the index's view applies every generation's changes.
                let mut entry = entry_of(&index.doc(g, row));
                (entry.rank, entry.removed) = (None, false);
                if let Some((source, url)) = origins.get(&doc) {
                    (entry.source, entry.url) = (source.clone(), url.clone());
                }
                generation.push(entry)?;
            }
        }
        let changes = changes
            .into_iter()
            .filter(|&(doc, _)| earlier(doc))
            .collect();
        let (generation, _) =
            generation.finish_unplaced(sorted_changes(changes), std::iter::empty())?;
        Ok(MergedGeneration {
            range: self.range,
            replaced: self.replaced,
            generation,
        })
    }
}

impl std::fmt::Debug for MergedGeneration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergedGeneration")
            .field("range", &self.range)
            .field("documents", &self.documents())
            .finish()
    }
}

impl MergedGeneration {
    /// The generations it replaces.
    pub fn range(&self) -> Range<usize> {
        self.range.clone()
    }

    /// The documents it holds.
    pub fn documents(&self) -> u64 {
        self.generation.entry().documents
    }

    /// Whether `manifest` still holds the generations it replaces, in their places (a
    /// checkpoint that merged some of them since, or a compaction, leaves it stale).
    pub fn fits(&self, manifest: &Manifest) -> bool {
        manifest.generations.get(self.range.clone()) == Some(&self.replaced[..])
    }

    /// Its files renamed into place as generation `number`; its entry.
    pub(super) fn place(self, number: u32) -> Result<GenerationEntry, IoError> {
        self.generation.place(number)
    }
}
