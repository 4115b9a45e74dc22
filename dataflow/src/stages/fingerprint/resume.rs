//! Resume parts: what the fingerprint stage leaves for `--resume`, and the source that
//! reads it back instead of the inputs (see [`crate::config::resume`] for the rules).
//!
//! Each worker writes, while it fingerprints, every document it emits (a [`DocFp`], what the
//! later stages take) to a hidden temporary file in `_resume/`, and when its stage ends, after
//! committing its part of `fingerprints/`, a last entry with its read and fingerprint counts;
//! then it renames the file to `part-NNNNN.bin`. A committed resume part is therefore whole,
//! and the fingerprints it goes with are committed. The entries are bincode, one after the
//! other: about 50 bytes a document with simhash (plus 8 per LSH band with MinHash), which
//! is written at the speed of the disk and costs a small share of the fingerprinting.
//!
//! For a MinHash index (`--index`, `--against`; [`crate::config::JobConfig::index_sketches`])
//! each document's entry is followed by a [`Sketch`]: its signature and, with
//! `--index-shingles`, its verification shingle set. A resumed run passes them over; the
//! step that writes the index reads them back ([`document_extras`]).
//!
//! A resumed run reads the parts instead of the inputs ([`resumed_docs`]): part `i` is read
//! by worker `i mod workers`, and each document is sent to its home, as the fingerprint stage
//! would have emitted it there.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use neardup_io::run_dir::{resume_part_name, RunDir};
use neardup_io::IoError;
use serde::{Deserialize, Serialize};
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::source;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::{Scope, StreamVec};

use crate::config::Resume;
use crate::progress::Progress;
use crate::records::DocFp;
use crate::report::WorkerReport;
use crate::worker::WorkerCtx;

/// A test hook: when this environment variable is set, the process kills itself (SIGKILL,
/// no clean-up of any kind) as soon as every resume part of the job is committed, which is
/// where the later stages have started: a failed run that `--resume` can take up, made
/// without timing guesses. Used by tests/resume_cli.rs.
pub const KILL_AFTER_FINGERPRINTS: &str = "NEARDUP_TEST_KILL_AFTER_FINGERPRINTS";

/// Documents a resumed reader hands on per activation.
const RESUME_BATCH: usize = 4096;

/// One entry of a resume part.
#[derive(Deserialize)]
enum Entry {
    Doc(DocFp),
    /// The last entry: the worker's read and fingerprint counts.
    End(Box<WorkerReport>),
    /// What a MinHash index keeps of the document before it (added last, so that parts
    /// without sketches read as before).
    Sketch(Sketch),
}

/// [`Entry`] as written, borrowing: the same variants in the same order, so the same bytes.
#[derive(Serialize)]
enum EntryRef<'a> {
    Doc(&'a DocFp),
    End(&'a WorkerReport),
    Sketch(SketchRef<'a>),
}

/// A document's MinHash signature, and its verification shingle set (unsorted) where the
/// index keeps them.
#[derive(Deserialize, Debug, Default, Clone, PartialEq, Eq)]
pub struct Sketch {
    pub doc_id: u64,
    pub signature: Vec<u64>,
    pub shingles: Option<Vec<u64>>,
}

/// [`Sketch`] as written, borrowing.
#[derive(Serialize)]
pub struct SketchRef<'a> {
    pub doc_id: u64,
    pub signature: &'a [u64],
    pub shingles: Option<&'a [u64]>,
}

/// A resume part being written.
pub struct ResumeWriter {
    tmp: PathBuf,
    path: PathBuf,
    out: BufWriter<File>,
}

impl ResumeWriter {
    /// Opens worker `part`'s temporary resume part in `output`'s `_resume/`.
    pub fn create(output: &Path, part: usize) -> Result<Self, IoError> {
        let dir = RunDir::new(output).resume();
        let name = resume_part_name(part);
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let write_err = |path: &Path| {
            let path = path.to_path_buf();
            move |cause| IoError::Write { path, cause }
        };
        std::fs::create_dir_all(&dir).map_err(write_err(&dir))?;
        let file = File::create(&tmp).map_err(write_err(&tmp))?;
        Ok(ResumeWriter {
            path: dir.join(name),
            out: BufWriter::new(file),
            tmp,
        })
    }

    pub fn push(&mut self, doc: &DocFp) -> Result<(), IoError> {
        bincode::serialize_into(&mut self.out, &EntryRef::Doc(doc)).map_err(|e| self.error(e))
    }

    /// Writes a document's sketch (after its [`ResumeWriter::push`]).
    pub fn push_sketch(&mut self, sketch: SketchRef<'_>) -> Result<(), IoError> {
        bincode::serialize_into(&mut self.out, &EntryRef::Sketch(sketch)).map_err(|e| self.error(e))
    }

    /// Writes the counts, syncs and renames the part into place.
    pub fn commit(mut self, report: WorkerReport) -> Result<PathBuf, IoError> {
        bincode::serialize_into(&mut self.out, &EntryRef::End(&report))
            .map_err(|e| self.error(e))?;
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |cause| IoError::Write { path, cause }
        };
        self.out.flush().map_err(io(&self.tmp))?;
        self.out.get_ref().sync_all().map_err(io(&self.tmp))?;
        std::fs::rename(&self.tmp, &self.path).map_err(io(&self.path))?;
        Ok(self.path.clone())
    }

    /// Removes the temporary file (the stage failed: nothing to resume from it).
    pub fn discard(self) {
        let _ = std::fs::remove_file(&self.tmp);
    }

    fn error(&self, e: bincode::Error) -> IoError {
        IoError::Write {
            path: self.tmp.clone(),
            cause: std::io::Error::other(e.to_string()),
        }
    }
}

/// The counts a resume part keeps: those of the read and fingerprint stages, which are all
/// this worker's report holds of them once its fingerprint stage has ended.
pub fn fingerprint_counts(report: &WorkerReport) -> WorkerReport {
    WorkerReport {
        documents: report.documents,
        empty: report.empty,
        skipped: report.skipped,
        blank_lines: report.blank_lines,
        skipped_records: report.skipped_records.clone(),
        truncated: report.truncated,
        skip_examples: report.skip_examples.clone(),
        keep_value_missing: report.keep_value_missing,
        bytes: report.bytes,
        parts: report.parts.clone(),
        ..WorkerReport::default()
    }
}

/// The test hook of [`KILL_AFTER_FINGERPRINTS`]: called after a resume part is committed.
pub fn kill_hook(output: &Path, parts: usize) {
    if std::env::var_os(KILL_AFTER_FINGERPRINTS).is_none() {
        return;
    }
    let dir = RunDir::new(output).resume();
    let committed = (0..parts)
        .filter(|&p| dir.join(resume_part_name(p)).is_file())
        .count();
    if committed == parts {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &std::process::id().to_string()])
            .status();
        std::process::abort();
    }
}

/// The documents of a resumed run, read from the resume parts and each sent to its home.
pub fn resumed_docs<'s>(scope: Scope<'s, u64>, ctx: Rc<WorkerCtx>) -> StreamVec<'s, u64, DocFp> {
    let Resume::From(parts) = &ctx.shared.config.resume else {
        unreachable!("resumed_docs runs only when resuming")
    };
    let mine: Vec<PathBuf> = parts
        .iter()
        .enumerate()
        .filter(|(i, _)| i % ctx.peers == ctx.index)
        .map(|(_, p)| p.clone())
        .collect();
    let reader_ctx = ctx.clone();
    let docs = source(scope, "Resume", move |capability, info| {
        let activator = scope.activator_for(info.address);
        let mut capability = Some(capability);
        let mut parts = mine.into_iter();
        let mut current: Option<PartReader> = None;
        let ctx = reader_ctx;
        move |output| {
            let Some(cap) = capability.as_mut() else {
                return;
            };
            if current.is_none() {
                match parts.next() {
                    Some(path) => match PartReader::open(path) {
                        Ok(r) => current = Some(r),
                        Err(e) => {
                            ctx.fail(e);
                            capability = None;
                            return;
                        }
                    },
                    None => {
                        ctx.stage_done("resume");
                        capability = None;
                        return;
                    }
                }
            }
            let reader = current.as_mut().expect("a part is open");
            let mut session = output.session(cap);
            let mut n = 0u64;
            let result = loop {
                if n as usize == RESUME_BATCH {
                    break Ok(false);
                }
                match reader.next() {
                    Ok(Entry::Doc(doc)) => {
                        session.give(doc);
                        n += 1;
                    }
                    Ok(Entry::End(report)) => {
                        ctx.report.borrow_mut().merge(*report);
                        break Ok(true);
                    }
                    // Kept for the index step, not for the stages.
                    Ok(Entry::Sketch(_)) => {}
                    Err(e) => break Err(e),
                }
            };
            drop(session);
            let progress = &ctx.shared.progress;
            Progress::add(&progress.docs_read, n);
            Progress::add(&progress.docs_fingerprinted, n);
            match result {
                Ok(ended) => {
                    if ended {
                        current = None;
                    }
                    activator.activate();
                }
                Err(e) => {
                    ctx.fail(e);
                    capability = None;
                }
            }
        }
    });
    let home = ctx.home.clone();
    docs.unary(
        Exchange::new(move |d: &DocFp| home.route(d.doc_id)),
        "ResumeAtHome",
        |_, _| {
            move |input, output| {
                input.for_each(|cap, data| {
                    output.session(&cap).give_iterator(data.drain(..));
                });
            }
        },
    )
}

/// Reads one resume part, entry by entry.
struct PartReader {
    path: PathBuf,
    input: BufReader<File>,
    entries: u64,
}

impl PartReader {
    fn open(path: PathBuf) -> Result<Self, String> {
        let file = File::open(&path)
            .map_err(|e| format!("--resume: cannot open {}: {e}", path.display()))?;
        Ok(PartReader {
            path,
            input: BufReader::new(file),
            entries: 0,
        })
    }

    fn next(&mut self) -> Result<Entry, String> {
        self.entries += 1;
        bincode::deserialize_from(&mut self.input).map_err(|e| {
            format!(
                "--resume: {} is damaged at entry {}: {e}; run again with --overwrite",
                self.path.display(),
                self.entries
            )
        })
    }
}

/// What a step that runs before `_SUCCESS` (see [`crate::config::BeforeCommit`]) learns
/// from the committed resume parts of a run about every fingerprinted document, by doc
/// number. None of it is in an output table; `neardup run --index|--against` store it in
/// the index.
#[derive(Debug, Default)]
pub struct DocumentExtras {
    /// The exact-duplicate key (0: none made) and keep rank.
    pub keys: std::collections::HashMap<u64, (u128, u64)>,
    /// The sketch (signature, shingle set) a run made for a MinHash index
    /// ([`crate::config::JobConfig::index_sketches`]); empty unless asked for.
    pub sketches: std::collections::HashMap<u64, Sketch>,
}

/// [`DocumentExtras`] of `output`, its sketches only with `sketches`, in one pass over the
/// resume parts.
pub fn document_extras(output: &Path, sketches: bool) -> Result<DocumentExtras, String> {
    let mut extras = DocumentExtras::default();
    each_entry(output, |entry| match entry {
        Entry::Doc(doc) => {
            extras.keys.insert(doc.doc_id, (doc.exact_key, doc.rank));
        }
        Entry::Sketch(sketch) if sketches => {
            extras.sketches.insert(sketch.doc_id, sketch);
        }
        _ => {}
    })?;
    Ok(extras)
}

/// Calls `each` with every document and sketch entry of `output`'s committed resume parts,
/// part by part.
fn each_entry(output: &Path, mut each: impl FnMut(Entry)) -> Result<(), String> {
    for path in resume_parts(output)? {
        let mut reader = PartReader::open(path)?;
        loop {
            match reader.next()? {
                Entry::End(_) => break,
                entry => each(entry),
            }
        }
    }
    Ok(())
}

/// The committed resume parts of `output`, in part order.
fn resume_parts(output: &Path) -> Result<Vec<PathBuf>, String> {
    let dir = RunDir::new(output).resume();
    let listing = std::fs::read_dir(&dir)
        .map_err(|e| format!("cannot list the resume parts in {}: {e}", dir.display()))?;
    let mut parts: Vec<PathBuf> = listing
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("part-") && n.ends_with(".bin"))
        })
        .collect();
    parts.sort();
    Ok(parts)
}
