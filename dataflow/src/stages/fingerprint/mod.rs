//! Fingerprinting: each document goes to a worker chosen by a hash of its number (its
//! *home*, see [`crate::plan::home`]), which parses it, fingerprints it, and writes its row of
//! `fingerprints/`.
//!
//! Sending documents to a home spreads parsing and hashing evenly even when one worker reads
//! one big compressed file, and gives every later stage a fixed place to send a document's
//! results back to (its clusters row is written by its home).

pub mod idf;
pub mod resume;

use std::rc::Rc;

use neardup_core::urlnorm::{host_and_path, normalize_url};
use neardup_core::{Fingerprinter, Scheme};
use neardup_io::parquet_out::{FingerprintRow, PartWriter};
use neardup_io::record::{Origin, Record};
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::StreamVec;
use xxhash_rust::xxh3::xxh3_64;

use crate::config::JobInput;
use crate::output::{OutputDirs, Table};
use crate::progress::Progress;
use crate::records::{DocFp, RawBody, RawDoc, RECORD_BITS};
use crate::stages::verify::ShingleSets;
use crate::worker::WorkerCtx;

/// Fingerprints every document at its home worker with `scheme` (the job's, with TF-IDF
/// weights filled in when the document-frequency pass ran), keeping the shingle sets that
/// verification will ask for in `sets`.
pub fn fingerprint<'s>(
    raw: StreamVec<'s, u64, RawDoc>,
    ctx: Rc<WorkerCtx>,
    scheme: Scheme,
    sets: ShingleSets,
) -> StreamVec<'s, u64, DocFp> {
    let home = ctx.home.clone();
    raw.unary_frontier(
        Exchange::new(ctx.meter("read", move |d: &RawDoc| home.route(d.doc_id))),
        "Fingerprint",
        move |_, _| {
            let mut state = FingerprintState::new(ctx.clone(), scheme.clone(), sets.clone());
            let mut finished = false;
            move |(input, frontier), output| {
                input.for_each(|cap, data| {
                    let mut session = output.session(&cap);
                    for doc in data.drain(..) {
                        if let Some(fp) = state.process(doc) {
                            session.give(fp);
                        }
                    }
                });
                if frontier.is_empty() && !finished {
                    finished = true;
                    state.finish();
                }
            }
        },
    )
}

struct FingerprintState {
    ctx: Rc<WorkerCtx>,
    fingerprinter: Fingerprinter,
    /// A second fingerprinter for verification shingles, when they differ from the scheme's.
    shingler: Option<Fingerprinter>,
    writer: Option<PartWriter<FingerprintRow>>,
    /// What `--resume` reads back of this worker's documents (see [`resume`]).
    resume: Option<resume::ResumeWriter>,
    /// Where the shingle sets for verification go.
    sets: ShingleSets,
    /// The parsed fields of the current JSONL line, reused so that its text buffer is
    /// allocated once per worker rather than once per document.
    record: Record,
    /// Searching existing fingerprints: `(doc_id, where it was read)` of every fingerprint
    /// whose home this is, to find duplicate document numbers once all have arrived (every
    /// copy of a number has the same home). 16 bytes per fingerprint until this stage ends.
    positions: Vec<(u64, u64)>,
}

/// What a document's origin (its URL and capture) gives the later stages, besides the
/// fingerprint: computed once per document at its home.
struct WebKeys {
    fetched_at: Option<i64>,
    /// xxh3-128 of the payload digest, and whether the record is a revisit.
    digest: Option<(u128, bool)>,
    /// The normalized URL (`--url-normalize`), its xxh3-128, and its host and path.
    url_normalized: Option<String>,
    url_key: Option<u128>,
    page: Option<(String, String)>,
    /// xxh3-64 of the host: the normalized URL's, else the origin's.
    host_hash: Option<u64>,
}

impl WebKeys {
    fn of(origin: Option<&Origin>, config: &crate::config::JobConfig) -> WebKeys {
        let fetched_at = origin.and_then(|o| o.fetched_at);
        let digest = origin.and_then(|o| {
            let d = o.payload_digest.as_deref()?;
            Some((xxhash_rust::xxh3::xxh3_128(d.as_bytes()), o.revisit))
        });
        let url_normalized = origin
            .and_then(|o| o.url.as_deref())
            .and_then(|url| normalize_url(url, config.url_normalize));
        let url_key = url_normalized
            .as_deref()
            .map(|u| xxhash_rust::xxh3::xxh3_128(u.as_bytes()));
        let page = url_normalized.as_deref().and_then(host_and_path);
        let host = page
            .as_ref()
            .map(|(host, _)| host.clone())
            .or_else(|| origin.and_then(|o| o.host()));
        let host_hash = host.as_deref().map(|h| xxh3_64(h.as_bytes()));
        WebKeys {
            fetched_at,
            digest,
            url_normalized,
            url_key,
            page,
            host_hash,
        }
    }
}

/// Where a fingerprint was read, packed like a document number: `file << RECORD_BITS | row`
/// (a row beyond 2^40 - 1 of one table, a trillion rows, would be shown as that).
fn position(file: u32, row: u64) -> u64 {
    crate::records::doc_id(file, row.min((1 << RECORD_BITS) - 1))
}

impl FingerprintState {
    fn new(ctx: Rc<WorkerCtx>, scheme: Scheme, sets: ShingleSets) -> Self {
        let config = &ctx.shared.config;
        let documents = matches!(config.input, JobInput::Documents { .. });
        let writer = if documents {
            match PartWriter::create(
                &OutputDirs::new(&config.output).table(Table::Fingerprints),
                ctx.part(),
                &crate::output::fingerprints_meta(config),
            ) {
                Ok(w) => Some(w),
                Err(e) => {
                    ctx.fail(e.to_string());
                    None
                }
            }
        } else {
            None
        };
        let resume = match writer {
            Some(_) => match resume::ResumeWriter::create(config, ctx.part()) {
                Ok(w) => Some(w),
                Err(e) => {
                    ctx.fail(e.to_string());
                    None
                }
            },
            None => None,
        };
        // Feature sets are kept unsorted: only documents in a candidate pair are ever
        // compared, and verification sorts a set the first time it is needed.
        let mut shingler = shingler_for(&scheme, ctx.shared.config.verify);
        if let Some(shingler) = shingler.as_mut() {
            shingler.set_sort_feature_set(false);
        }
        let mut fingerprinter = Fingerprinter::new(scheme);
        fingerprinter.set_sort_feature_set(false);
        FingerprintState {
            fingerprinter,
            shingler,
            writer,
            resume,
            sets,
            record: Record::default(),
            positions: Vec::new(),
            ctx,
        }
    }

    /// Fingerprints one document; `None` when it is skipped or failed.
    fn process(&mut self, doc: RawDoc) -> Option<DocFp> {
        let shared = &self.ctx.shared;
        Progress::add(&shared.progress.docs_fingerprinted, 1);
        let mut record = std::mem::take(&mut self.record);
        let parsed = match doc.body {
            RawBody::Fingerprint {
                simhash,
                bytes,
                empty,
            } => {
                self.positions
                    .push((doc.doc_id, position(doc.file, doc.record)));
                return Some(self.known_fingerprint(doc.doc_id, simhash, bytes, empty));
            }
            RawBody::Raw(line) => {
                let fields = match &shared.config.input {
                    JobInput::Documents { fields, .. } => fields,
                    JobInput::Fingerprints { .. } => {
                        unreachable!("fingerprint input has no raw records")
                    }
                };
                let kind = shared.plan.files[doc.file as usize].format.kind();
                kind.parse_into(&line, fields, &mut record).map_err(|e| {
                    kind.record_error(shared.plan.path(doc.file), doc.record, e)
                        .to_string()
                })
            }
            RawBody::Fields(fields) => {
                record = fields;
                Ok(())
            }
            RawBody::Invalid(message) => Err(message),
        };
        let result = match parsed {
            Ok(()) => self.fingerprint_record(doc.doc_id, doc.file, doc.record, &mut record),
            Err(message) => {
                if shared.config.skip_invalid {
                    self.ctx
                        .report
                        .borrow_mut()
                        .skip(doc.file, doc.record, message);
                } else {
                    self.ctx.fail(message);
                }
                None
            }
        };
        self.record = record;
        result
    }

    fn known_fingerprint(
        &mut self,
        doc_id: u64,
        simhash: u64,
        bytes: Option<u64>,
        empty: bool,
    ) -> DocFp {
        let rank = self
            .ctx
            .shared
            .config
            .keep
            .rank(bytes.unwrap_or(0), None, None);
        let mut report = self.ctx.report.borrow_mut();
        report.documents += 1;
        report.bytes += bytes.unwrap_or(0);
        report.empty += u64::from(empty);
        DocFp {
            doc_id,
            simhash,
            exact_key: 0,
            rank,
            empty,
            id_hash: None,
            bands: Vec::new(),
            digest: None,
            url_key: None,
            host_hash: None,
            page: None,
        }
    }

    fn fingerprint_record(
        &mut self,
        doc_id: u64,
        file: u32,
        record_index: u64,
        record: &mut Record,
    ) -> Option<DocFp> {
        let fp = self.fingerprinter.fingerprint(&record.text);
        let bytes = record.text.len() as u64;
        let config = &self.ctx.shared.config;
        let origin = record.origin.take();
        let web = WebKeys::of(origin.as_deref(), config);
        let rank = config.keep.rank(bytes, record.extra, web.fetched_at);
        let id_hash = record.id.as_ref().map(|id| xxh3_64(id.as_bytes()));
        {
            let mut report = self.ctx.report.borrow_mut();
            report.documents += 1;
            report.bytes += bytes;
            report.empty += u64::from(fp.is_empty());
            report.keep_value_missing +=
                u64::from(config.keep.missing(record.extra, web.fetched_at));
            report.truncated += u64::from(record.truncated);
        }
        if let Some(writer) = self.writer.as_mut() {
            let row = FingerprintRow {
                doc_id,
                id: record.id.take(),
                source: self.ctx.shared.plan.file_name(file).to_owned(),
                record: record_index,
                simhash: fp.simhash,
                n_tokens: fp.n_tokens,
                bytes,
                empty: fp.is_empty(),
                host: origin.as_ref().and_then(|o| o.host()),
                url: origin.as_ref().and_then(|o| o.url.clone()),
                fetched_at: web.fetched_at,
                offset: origin.as_ref().and_then(|o| o.offset),
                length: origin.as_ref().and_then(|o| o.length),
                url_normalized: web.url_normalized,
            };
            if let Err(e) = writer.push(row) {
                self.ctx.fail(e.to_string());
                self.writer = None;
            }
        }
        let exact_key = if config.exact { fp.exact_key } else { 0 };
        let bands = match (&config.lsh, fp.is_empty()) {
            (Some(banding), false) => banding.band_keys(self.fingerprinter.signature()).collect(),
            _ => Vec::new(),
        };
        let set = if fp.is_empty() {
            None
        } else {
            self.verification_set(&record.text)
        };
        let doc = DocFp {
            doc_id,
            simhash: fp.simhash,
            exact_key,
            rank,
            empty: fp.is_empty(),
            id_hash,
            bands,
            digest: web.digest,
            url_key: web.url_key,
            host_hash: web.host_hash,
            page: web.page.map(Box::new),
        };
        self.write_resume(&doc, set.as_ref());
        if let Some((set, _)) = set {
            self.sets.insert(doc_id, set);
        }
        Some(doc)
    }

    /// Writes the document (and its sketch, for a MinHash index) to this worker's resume
    /// part; on failure the part is given up, with a warning (resuming is a convenience:
    /// the run itself goes on without it).
    fn write_resume(&mut self, doc: &DocFp, set: Option<&(Box<[u64]>, bool)>) {
        let Some(resume) = self.resume.as_mut() else {
            return;
        };
        let mut written = resume.push(doc);
        if let (Ok(()), Some(sketches)) = (&written, self.ctx.shared.config.index_sketches) {
            // An empty document has no signature (the index writes an empty set's).
            let signature = if doc.empty {
                &[][..]
            } else {
                self.fingerprinter.signature()
            };
            written = resume.push_sketch(resume::SketchRef {
                doc_id: doc.doc_id,
                signature,
                shingles: set
                    .filter(|(_, shingles)| *shingles && sketches.shingles)
                    .map(|(set, _)| &set[..]),
            });
        }
        if let Err(e) = written {
            self.ctx
                .report
                .borrow_mut()
                .warnings
                .push(format!("{e}: this run cannot be resumed if it fails"));
            if let Some(resume) = self.resume.take() {
                resume.discard();
            }
        }
    }

    /// With verification on, the set the document is verified by, kept (unsorted) at its
    /// home for the candidate pairs that will ask for it: its shingle set (`true`), or its
    /// signature when verification estimates (`false`). The scheme's own feature set serves
    /// when it is the same shingling (MinHash mode); otherwise the text is shingled once
    /// more. A MinHash index with shingle sets writes the same set to the resume part.
    fn verification_set(&mut self, text: &str) -> Option<(Box<[u64]>, bool)> {
        let verify = self.ctx.shared.config.verify?;
        if verify.estimate {
            return Some((self.fingerprinter.signature().into(), false));
        }
        let set: &[u64] = match self.shingler.as_mut() {
            Some(shingler) => {
                shingler.fingerprint(text);
                shingler.feature_set()
            }
            None => self.fingerprinter.feature_set(),
        };
        Some((set.into(), true))
    }

    /// Fails the job on the first duplicate document number among the fingerprints read
    /// here (the smallest such number, so the message does not depend on arrival order).
    fn check_duplicates(&mut self) {
        let mut positions = std::mem::take(&mut self.positions);
        positions.sort_unstable();
        let Some(pair) = positions.windows(2).find(|w| w[0].0 == w[1].0) else {
            return;
        };
        let plan = &self.ctx.shared.plan;
        let at = |pos: u64| {
            let file = (pos >> RECORD_BITS) as u32;
            (plan.path(file).clone(), pos & ((1 << RECORD_BITS) - 1))
        };
        let ((first_path, first_row), (path, row)) = (at(pair[0].1), at(pair[1].1));
        let error = neardup_io::IoError::DuplicateDocId {
            path,
            row,
            doc_id: pair[0].0,
            first_path,
            first_row,
        };
        self.ctx.fail(error.to_string());
    }

    fn finish(&mut self) {
        self.check_duplicates();
        if let Some(writer) = self.writer.take() {
            match writer.commit() {
                Ok(path) => self
                    .ctx
                    .report
                    .borrow_mut()
                    .parts
                    .push(path.display().to_string()),
                Err(e) => self.ctx.fail(e.to_string()),
            }
        }
        if let Some(resume) = self.resume.take() {
            let counts = resume::fingerprint_counts(&self.ctx.report.borrow());
            if !self.ctx.report.borrow().errors.is_empty() {
                resume.discard();
            } else if let Err(e) = resume.commit(counts) {
                self.ctx
                    .report
                    .borrow_mut()
                    .warnings
                    .push(format!("{e}: this run cannot be resumed if it fails"));
            } else {
                let parallelism = &self.ctx.shared.config.parallelism;
                resume::kill_hook(
                    &self.ctx.shared.config.output,
                    parallelism.processes() * parallelism.workers,
                );
            }
        }
        self.ctx.stage_done("fingerprint");
        self.ctx
            .shared
            .progress
            .reach(crate::progress::Stage::Exact);
    }
}

/// The fingerprinter of verification shingles (word n-grams of all tokens, with the scheme's
/// normalization), or `None` when the scheme's own feature set is exactly that (MinHash mode)
/// or no shingles are kept. Decided once, not per document.
fn shingler_for(scheme: &Scheme, verify: Option<crate::config::Verify>) -> Option<Fingerprinter> {
    let verify = verify.filter(|v| !v.estimate)?;
    scheme
        .verification_scheme(verify.shingle)
        .map(Fingerprinter::new)
}
