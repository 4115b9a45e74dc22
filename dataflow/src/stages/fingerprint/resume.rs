//! Resume parts: what the fingerprint stage leaves for `--resume`, and the source that
//! reads it back instead of the inputs (see [`crate::config::resume`] for the rules).
//!
//! Each worker writes, while it fingerprints, every document it emits (a [`DocFp`], what the
//! later stages take) to a hidden temporary file in `_resume/`, and when its stage ends, after
//! committing its part of `fingerprints/`, a last entry with its read and fingerprint counts;
//! then it renames the file to `part-NNNNN.bin`. A committed resume part is therefore whole,
//! and the fingerprints it goes with are committed. The entries are bincode, a document in its
//! compact form ([`crate::wire`]): about 40 bytes with simhash (plus 8 per LSH band with
//! MinHash), which is written at the speed of
//! the disk and costs a small share of the fingerprinting.
//!
//! A part verifies itself, and is refused, naming the file, when it does not:
//!
//! ```text
//! header  magic "NDRESUME" (8) | format u32 | part u32 | parts u32 | job u128 | CRC-32 u32   (40 bytes)
//! block   length u32 | CRC-32 of the payload u32 | payload: whole entries (about 64 KiB)  (repeated)
//! ```
//!
//! All numbers little-endian. `part` is the worker's number in the job (process times
//! workers plus worker), `parts` how many the job writes, and `job` the job's identity
//! ([`crate::config::resume::record_id`]: xxh3-128 of its job record, the inputs and
//! parameters `--resume` compares), so a part copied over another, or from a run of another
//! job, is refused ([`PartIdentity`]). A block is checked before any of its entries is
//! read: one flipped byte is refused, never decoded (a damaged length would otherwise be
//! taken at its word), and the last entry must end the last block and the file.
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
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use neardup_io::index::run::SortMemory;
use neardup_io::spill::{Merged, SortStats, SpillRecord};

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

/// A test hook: `NEARDUP_TEST_KILL_AT=PHASE` kills the process (SIGKILL, no clean-up) when
/// the run reaches PHASE: `index` (`neardup run --index` or `--against --update-index` has
/// committed its index generation; `_SUCCESS` is not written yet) or `success` (`_SUCCESS`
/// is written). Used by tests/index_cli.rs.
pub const KILL_AT: &str = "NEARDUP_TEST_KILL_AT";

/// Documents a resumed reader hands on per activation.
const RESUME_BATCH: usize = 4096;

/// The first 8 bytes of a resume part.
const PART_MAGIC: [u8; 8] = *b"NDRESUME";

/// The layout of a resume part (see the module documentation); a reader refuses any other.
/// 2: the report it ends with gained `removal` (a part of format 1 would not read); 3: and
/// `sorts` and `peak_rss`; 4: documents in their compact form ([`crate::wire`]).
const PART_FORMAT: u32 = 4;

/// The bytes of a part's header, and of a block's.
const HEADER_BYTES: usize = 40;
const BLOCK_HEADER_BYTES: usize = 8;

/// A block is written once its entries pass this many bytes.
const BLOCK_BYTES: usize = 64 << 10;

/// Which part a resume part is: its number, the number of parts of its job, and the job's
/// identity ([`crate::config::resume::record_id`]). Written in its header, and compared
/// with the one expected when it is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartIdentity {
    pub part: u32,
    pub parts: u32,
    pub job: u128,
}

impl PartIdentity {
    /// The identity of worker `part`'s resume part of the job `config`.
    pub fn of(config: &crate::config::JobConfig, part: usize) -> Self {
        let parallelism = &config.parallelism;
        PartIdentity {
            part: part as u32,
            parts: (parallelism.processes() * parallelism.workers) as u32,
            job: crate::config::resume::record_id(config),
        }
    }

    fn header(&self) -> [u8; HEADER_BYTES] {
        let mut h = [0u8; HEADER_BYTES];
        h[..8].copy_from_slice(&PART_MAGIC);
        h[8..12].copy_from_slice(&PART_FORMAT.to_le_bytes());
        h[12..16].copy_from_slice(&self.part.to_le_bytes());
        h[16..20].copy_from_slice(&self.parts.to_le_bytes());
        h[20..36].copy_from_slice(&self.job.to_le_bytes());
        let crc = crc32fast::hash(&h[..36]);
        h[36..].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Reads a header: the identity it holds, or why it is no resume part's.
    fn read(h: &[u8; HEADER_BYTES]) -> Result<Self, String> {
        let word = |at: usize| u32::from_le_bytes(h[at..at + 4].try_into().expect("4 bytes"));
        if h[..8] != PART_MAGIC {
            return Err("no resume part header".into());
        }
        if crc32fast::hash(&h[..36]) != word(36) {
            return Err("its header fails its checksum".into());
        }
        if word(8) != PART_FORMAT {
            return Err(format!(
                "resume part format {}, but this neardup reads format {PART_FORMAT}",
                word(8)
            ));
        }
        Ok(PartIdentity {
            part: word(12),
            parts: word(16),
            job: u128::from_le_bytes(h[20..36].try_into().expect("16 bytes")),
        })
    }
}

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
#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq, Eq)]
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
    /// The entries of the block being filled.
    block: Vec<u8>,
}

impl ResumeWriter {
    /// Opens worker `part`'s temporary resume part in the `_resume/` of the job `config`'s
    /// output, and writes its header.
    pub fn create(config: &crate::config::JobConfig, part: usize) -> Result<Self, IoError> {
        let dir = RunDir::new(&config.output).resume();
        let name = resume_part_name(part);
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let write_err = |path: &Path| {
            let path = path.to_path_buf();
            move |cause| IoError::Write { path, cause }
        };
        std::fs::create_dir_all(&dir).map_err(write_err(&dir))?;
        let file = File::create(&tmp).map_err(write_err(&tmp))?;
        let mut out = BufWriter::new(file);
        out.write_all(&PartIdentity::of(config, part).header())
            .map_err(write_err(&tmp))?;
        Ok(ResumeWriter {
            path: dir.join(name),
            out,
            tmp,
            block: Vec::with_capacity(BLOCK_BYTES + 1024),
        })
    }

    pub fn push(&mut self, doc: &DocFp) -> Result<(), IoError> {
        self.put(&EntryRef::Doc(doc))
    }

    /// Writes a document's sketch (after its [`ResumeWriter::push`]).
    pub fn push_sketch(&mut self, sketch: SketchRef<'_>) -> Result<(), IoError> {
        self.put(&EntryRef::Sketch(sketch))
    }

    fn put(&mut self, entry: &EntryRef<'_>) -> Result<(), IoError> {
        bincode::serialize_into(&mut self.block, entry).map_err(|e| self.error(e))?;
        if self.block.len() >= BLOCK_BYTES {
            self.write_block()?;
        }
        Ok(())
    }

    /// Writes the entries gathered as one block: length, CRC-32, payload.
    fn write_block(&mut self) -> Result<(), IoError> {
        if self.block.is_empty() {
            return Ok(());
        }
        let length = u32::try_from(self.block.len())
            .map_err(|_| self.error(bincode::Error::from(bincode::ErrorKind::SizeLimit)))?;
        let mut head = [0u8; BLOCK_HEADER_BYTES];
        head[..4].copy_from_slice(&length.to_le_bytes());
        head[4..].copy_from_slice(&crc32fast::hash(&self.block).to_le_bytes());
        let written = self
            .out
            .write_all(&head)
            .and_then(|()| self.out.write_all(&self.block));
        written.map_err(|cause| IoError::Write {
            path: self.tmp.clone(),
            cause,
        })?;
        self.block.clear();
        Ok(())
    }

    /// Writes the counts, syncs and renames the part into place.
    pub fn commit(mut self, report: WorkerReport) -> Result<PathBuf, IoError> {
        bincode::serialize_into(&mut self.block, &EntryRef::End(&report))
            .map_err(|e| self.error(e))?;
        self.write_block()?;
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
        kill_self();
    }
}

/// The test hook of [`KILL_AT`]: called when the run reaches `phase`.
pub fn kill_at(phase: &str) {
    if std::env::var_os(KILL_AT).is_some_and(|p| p == phase) {
        kill_self();
    }
}

fn kill_self() {
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &std::process::id().to_string()])
        .status();
    std::process::abort();
}

/// The documents of a resumed run, read from the resume parts and each sent to its home.
pub fn resumed_docs<'s>(scope: Scope<'s, u64>, ctx: Rc<WorkerCtx>) -> StreamVec<'s, u64, DocFp> {
    let Resume::From(parts) = &ctx.shared.config.resume else {
        unreachable!("resumed_docs runs only when resuming")
    };
    let job = crate::config::resume::record_id(&ctx.shared.config);
    let mine: Vec<(PathBuf, PartIdentity)> = parts
        .iter()
        .enumerate()
        .filter(|(i, _)| i % ctx.peers == ctx.index)
        .map(|(i, p)| {
            let identity = PartIdentity {
                part: i as u32,
                parts: parts.len() as u32,
                job,
            };
            (p.clone(), identity)
        })
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
                    Some((path, identity)) => match PartReader::open(path, identity) {
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

/// Reads one resume part, entry by entry, each block verified before its entries are.
struct PartReader {
    path: PathBuf,
    input: BufReader<File>,
    /// The file's length, and the byte offset of the next block.
    length: u64,
    offset: u64,
    /// The current block's payload, and where its next entry starts.
    block: Vec<u8>,
    at: usize,
}

impl PartReader {
    /// Opens a part and reads its header: refused unless it is the part `expected` says
    /// (with `None` for the part and parts, the part its file name says, of any number).
    fn open(path: PathBuf, expected: PartIdentity) -> Result<Self, String> {
        let file = File::open(&path)
            .map_err(|e| format!("--resume: cannot open {}: {e}", path.display()))?;
        let length = file.metadata().map(|m| m.len()).unwrap_or(0);
        let mut reader = PartReader {
            path,
            input: BufReader::new(file),
            length,
            offset: HEADER_BYTES as u64,
            block: Vec::new(),
            at: 0,
        };
        let mut header = [0u8; HEADER_BYTES];
        if length < HEADER_BYTES as u64 {
            return Err(reader.damaged(0, "it is shorter than a header"));
        }
        reader
            .input
            .read_exact(&mut header)
            .map_err(|e| reader.damaged(0, &e.to_string()))?;
        let found = PartIdentity::read(&header).map_err(|e| reader.damaged(0, &e))?;
        let mut expected = expected;
        if expected.parts == 0 {
            // Any number of parts: the one its name says.
            expected.part = part_number(&reader.path).unwrap_or(u32::MAX);
            expected.parts = found.parts;
        }
        if (found.part, found.parts) != (expected.part, expected.parts) {
            return Err(reader.refused(&format!(
                "holds part {} of {}, not part {} of {}",
                found.part, found.parts, expected.part, expected.parts
            )));
        }
        if found.job != expected.job {
            return Err(reader.refused("belongs to a run of another job"));
        }
        Ok(reader)
    }

    fn next(&mut self) -> Result<Entry, String> {
        if self.at == self.block.len() {
            self.read_block()?;
        }
        let mut rest = &self.block[self.at..];
        let entry: Entry = bincode::deserialize_from(&mut rest).map_err(|e| {
            // A verified block that does not decode: written by something else.
            self.damaged(self.offset, &format!("an entry does not decode ({e})"))
        })?;
        self.at = self.block.len() - rest.len();
        if matches!(entry, Entry::End(_))
            && (self.at != self.block.len() || self.offset != self.length)
        {
            return Err(self.damaged(self.offset, "bytes follow its last entry"));
        }
        Ok(entry)
    }

    /// Reads the next block and checks its length and CRC-32.
    fn read_block(&mut self) -> Result<(), String> {
        let start = self.offset;
        if start == self.length {
            return Err(self.damaged(start, "it ends before its last entry"));
        }
        let mut head = [0u8; BLOCK_HEADER_BYTES];
        self.input
            .read_exact(&mut head)
            .map_err(|e| self.damaged(start, &format!("a cut block header ({e})")))?;
        let length = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as u64;
        let crc = u32::from_le_bytes(head[4..].try_into().expect("4 bytes"));
        let end = start + BLOCK_HEADER_BYTES as u64 + length;
        if length == 0 || end > self.length {
            return Err(self.damaged(
                start,
                &format!("a block of {length} bytes, past the end of the file"),
            ));
        }
        self.block.resize(length as usize, 0);
        self.input
            .read_exact(&mut self.block)
            .map_err(|e| self.damaged(start, &e.to_string()))?;
        if crc32fast::hash(&self.block) != crc {
            return Err(self.damaged(start, "a block fails its checksum"));
        }
        self.offset = end;
        self.at = 0;
        Ok(())
    }

    fn damaged(&self, offset: u64, what: &str) -> String {
        format!(
            "--resume: {} is damaged at byte {offset}: {what}; run again with --overwrite (the corpus is read again)",
            self.path.display()
        )
    }

    fn refused(&self, what: &str) -> String {
        format!(
            "--resume: {} {what} (copied from elsewhere?); run again with --overwrite (the corpus is read again)",
            self.path.display()
        )
    }
}

/// The part number a resume part's file name says (`part-00003.bin`: 3).
fn part_number(path: &Path) -> Option<u32> {
    path.file_name()?
        .to_str()?
        .strip_prefix("part-")?
        .strip_suffix(".bin")?
        .parse()
        .ok()
}

/// What a step that runs before `_SUCCESS` (see [`crate::finish`]) learns
/// from the committed resume parts of a run about every fingerprinted document, in
/// ascending doc number. None of it is in an output table; `neardup run --index|--against`
/// store it in the index.
///
/// The simple version is two maps by doc number, filled in one pass over the parts; these
/// are two external sorts filled in that pass, merged, so that the step holds their budget
/// whatever the run's size.
pub struct DocumentExtras {
    /// `(doc, exact-duplicate key (0: none made), keep rank)`.
    pub keys: std::iter::Peekable<Merged<(u64, u128, u64)>>,
    /// The sketches (signature, shingle set) a run made for a MinHash index
    /// ([`crate::config::JobConfig::index_sketches`]); `None` unless asked for.
    pub sketches: Option<std::iter::Peekable<Merged<SketchByDoc>>>,
    /// What the two sorts did.
    pub sorted: SortStats,
}

/// A [`Sketch`] ordered by its doc number, for the sort of [`DocumentExtras`].
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct SketchByDoc(pub Sketch);

impl PartialEq for SketchByDoc {
    fn eq(&self, other: &Self) -> bool {
        self.0.doc_id == other.0.doc_id
    }
}

impl Eq for SketchByDoc {}

impl PartialOrd for SketchByDoc {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SketchByDoc {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.doc_id.cmp(&other.0.doc_id)
    }
}

impl SpillRecord for SketchByDoc {
    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + 8 * self.0.signature.capacity()
            + self.0.shingles.as_ref().map_or(0, |s| 8 * s.capacity())
    }
}

/// [`DocumentExtras`] of `output`, its sketches only with `sketches`, in one pass over the
/// resume parts, each refused unless it is of the job `job`
/// ([`crate::config::resume::record_id`]); the sorts keep `memory` (the keys a fifth of it,
/// the sketches the rest).
pub fn document_extras(
    output: &Path,
    sketches: bool,
    job: u128,
    memory: &SortMemory,
) -> Result<DocumentExtras, String> {
    let (keys_memory, sketches_memory) = match sketches {
        true => (memory.part(0.2, "keys"), memory.part(0.8, "sketches")),
        false => (memory.part(1.0, "keys"), memory.part(0.0, "sketches")),
    };
    let failed = |memory: &SortMemory| {
        let dir = memory.dir.clone();
        move |e: std::io::Error| format!("{}: cannot write: {e}", dir.display())
    };
    let mut keys = keys_memory.sort::<(u64, u128, u64)>();
    let mut sorted_sketches = sketches.then(|| sketches_memory.sort::<SketchByDoc>());
    let mut error = None;
    each_entry(output, job, |entry| {
        let pushed = match entry {
            Entry::Doc(doc) => keys
                .push((doc.doc_id, doc.exact_key, doc.rank))
                .map_err(failed(&keys_memory)),
            Entry::Sketch(sketch) => match &mut sorted_sketches {
                Some(sort) => sort
                    .push(SketchByDoc(sketch))
                    .map_err(failed(&sketches_memory)),
                None => Ok(()),
            },
            _ => Ok(()),
        };
        if let Err(e) = pushed {
            error.get_or_insert(e);
        }
    })?;
    if let Some(e) = error {
        return Err(e);
    }
    let sorted = match &sorted_sketches {
        Some(sort) => keys.stats().plus(sort.stats()),
        None => keys.stats(),
    };
    Ok(DocumentExtras {
        keys: keys.finish().map_err(failed(&keys_memory))?.peekable(),
        sketches: match sorted_sketches {
            Some(sort) => Some(sort.finish().map_err(failed(&sketches_memory))?.peekable()),
            None => None,
        },
        sorted,
    })
}

/// Calls `each` with every document and sketch entry of `output`'s committed resume parts,
/// part by part.
fn each_entry(output: &Path, job: u128, mut each: impl FnMut(Entry)) -> Result<(), String> {
    for path in resume_parts(output)? {
        let expected = PartIdentity {
            part: 0,
            parts: 0,
            job,
        };
        let mut reader = PartReader::open(path, expected)?;
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
