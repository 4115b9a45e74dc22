//! Verification within bounded memory: the shingle sets are made again from the inputs, for
//! the documents that need them, and kept in sorted order on disk.
//!
//! The simple version ([`crate::stages::verify`]) keeps every document's shingle set at its
//! home while the corpus is read, about twice the bytes of the text: it grows with the
//! corpus. Here the fingerprint stage keeps none. Once the search has found every candidate
//! pair (and the exact and URL stages every link), each home knows which of its documents
//! a pair will ask about ([`Needed`]: a bit per document); the corpus is then read a second
//! time ([`crate::stages::read::read_units_after`]), and each home makes the sets of those
//! documents only, into an external sort by document number that is sealed into one file
//! ([`SetStore`]). A candidate pair is then checked as in memory, in two hops, each a sorted
//! merge instead of a lookup: the candidates at the home of their first document, sorted by
//! it, walk beside the sealed sets and pick up the first document's set; at the home of the
//! second, sorted by that, they walk beside the sets again and are compared. Nothing but the
//! sorts' budgets and a bit per document stays in memory, and the pairs and their
//! similarities are those of the simple version (the same sets, compared by the same
//! function).
//!
//! Disk: the sets of the documents in some candidate pair or link (8 bytes a shingle), and
//! the second hop's candidates, each with its first document's set.

use std::rc::Rc;

use neardup_core::minhash::jaccard_estimate;
use neardup_core::similarity::jaccard;
use neardup_core::{Fingerprinter, Scheme};
use neardup_io::record::Record;
use neardup_io::spill::{ExternalSort, SortedFile, SortedReader, SpillRecord};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::{Operator, OutputBuilder};
use timely::dataflow::operators::vec::Map;
use timely::dataflow::operators::Concat;
use timely::dataflow::StreamVec;

use crate::config::{JobInput, CANDIDATES_SORT_SHARE, VERIFY_SORT_SHARE};
use crate::operators::sort::ordered_by;
use crate::operators::SortComplete;
use crate::progress::Progress;
use crate::records::{Candidate, DocBits, Edge, RawBody, RawDoc};
use crate::worker::WorkerCtx;

/// A document's set, as verification compares it (see [`crate::stages::verify`]): shingles
/// sorted, or a MinHash signature as it is.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DocSet {
    pub doc: u64,
    pub set: Vec<u64>,
}

ordered_by!(DocSet, |d| d.doc);

impl SpillRecord for DocSet {
    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<DocSet>() + 8 * self.set.capacity()
    }
}

/// A candidate at the home of its first document, in the order of that document.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ByFirst(pub Edge);

ordered_by!(ByFirst, |e| (e.0.a, e.0.b));
impl SpillRecord for ByFirst {}

impl From<Edge> for ByFirst {
    fn from(e: Edge) -> Self {
        ByFirst(e)
    }
}

/// A candidate with its first document's set, at the home of its second, in that order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BySecond(pub Candidate);

ordered_by!(BySecond, |c| (c.0.edge.b, c.0.edge.a));
impl SpillRecord for BySecond {
    fn memory_bytes(&self) -> usize {
        std::mem::size_of::<BySecond>() + 8 * self.0.shingles_a.capacity()
    }
}

impl From<Candidate> for BySecond {
    fn from(c: Candidate) -> Self {
        BySecond(c)
    }
}

/// The documents of this home that some pair asks about.
pub type Needed = DocBits;

/// The sets of this home's needed documents: filled by the second pass, then sealed.
pub enum SetStore {
    Filling(ExternalSort<DocSet>),
    Sealed(SortedFile<DocSet>),
    Failed,
}

pub type SharedStore = Rc<RefCell<SetStore>>;

/// A new, empty store for this worker.
pub fn set_store(ctx: &WorkerCtx) -> SharedStore {
    Rc::new(RefCell::new(SetStore::Filling(
        ctx.sort::<DocSet>("verify sets", VERIFY_SORT_SHARE),
    )))
}

/// Marks, at each document's home, the documents that `links` (candidates, exact and URL
/// links: anything verification may be asked about) name. The stream returned gives
/// nothing and is complete once every worker's links are marked here: the second pass
/// waits for it.
pub fn mark_needed<'s>(
    links: StreamVec<'s, u64, Edge>,
    ctx: Rc<WorkerCtx>,
    needed: Rc<RefCell<Needed>>,
) -> StreamVec<'s, u64, ()> {
    let home = ctx.home.clone();
    let ends = links.unary(Pipeline, "LinkEnds", |_, _| {
        move |input, output| {
            input.for_each(|cap, data| {
                let mut session = output.session(&cap);
                for e in data.drain(..) {
                    session.give(e.a);
                    session.give(e.b);
                }
            })
        }
    });
    ends.unary_frontier::<CapacityContainerBuilder<Vec<()>>, _, _, _>(
        Exchange::new(ctx.meter("verify", move |&d: &u64| home.route(d))),
        "MarkNeeded",
        move |cap, _| {
            let mut cap = Some(cap);
            move |(input, frontier), _output| {
                input.for_each(|_, data| {
                    let mut needed = needed.borrow_mut();
                    for &d in data.iter() {
                        needed.insert(d);
                    }
                });
                if frontier.is_empty() {
                    drop(cap.take());
                }
            }
        },
    )
}

/// The second pass at each home: the needed documents of `raw` (the corpus read again)
/// parsed and shingled into `store`, which is sealed once the pass is complete. Returns the
/// stream that is complete once the store is sealed, and the stream whose frontier follows
/// the documents parsed (for the readers' pace).
pub fn collect_sets<'s>(
    raw: StreamVec<'s, u64, RawDoc>,
    marked: StreamVec<'s, u64, ()>,
    ctx: Rc<WorkerCtx>,
    scheme: Scheme,
    needed: Rc<RefCell<Needed>>,
    store: SharedStore,
) -> (StreamVec<'s, u64, ()>, StreamVec<'s, u64, ()>) {
    let home = ctx.home.clone();
    let mut builder = OperatorBuilder::new("CollectSets".to_owned(), raw.scope());
    let mut raw_in = builder.new_input(
        raw,
        Exchange::new(ctx.meter("read", move |d: &RawDoc| home.route(d.doc_id))),
    );
    let mut marked_in = builder.new_input(marked, Pipeline);
    let (ready, ready_stream) = builder.new_output::<Vec<()>>();
    let (parsed, parsed_stream) = builder.new_output::<Vec<()>>();
    let outputs = (
        OutputBuilder::<_, CapacityContainerBuilder<Vec<()>>>::from(ready),
        OutputBuilder::<_, CapacityContainerBuilder<Vec<()>>>::from(parsed),
    );
    builder.build(move |mut capabilities| {
        // Nothing is ever given: the outputs only carry frontiers.
        let _outputs = outputs;
        // The parsed output holds nothing: its frontier follows the documents.
        capabilities.pop();
        let mut held = capabilities.pop();
        let mut maker = SetMaker::new(ctx.clone(), scheme);
        let mut waiting: Vec<RawDoc> = Vec::new();
        move |frontiers| {
            marked_in.for_each(|_, _| {});
            raw_in.for_each(|_, data| waiting.append(data));
            if !frontiers[1].is_empty() {
                // Not every mark has arrived: the documents wait.
                return;
            }
            maker.take(&mut waiting, &needed.borrow(), &store);
            if frontiers[0].is_empty() && held.is_some() {
                seal(&store, &ctx);
                held = None;
            }
        }
    });
    (ready_stream, parsed_stream)
}

/// Seals the store: the sets sorted into one file.
fn seal(store: &SharedStore, ctx: &WorkerCtx) {
    let mut store = store.borrow_mut();
    store_sealed(&mut store, ctx);
}

fn store_sealed(store: &mut SetStore, ctx: &WorkerCtx) {
    let SetStore::Filling(sort) = std::mem::replace(store, SetStore::Failed) else {
        return;
    };
    match sort.seal() {
        Ok(file) => {
            ctx.sorted("verify sets", file.stats());
            *store = SetStore::Sealed(file);
        }
        Err(e) => ctx.sort_failed("verify sets", e),
    }
}

/// Makes the sets of needed documents as the fingerprint stage made them.
struct SetMaker {
    ctx: Rc<WorkerCtx>,
    fingerprinter: Fingerprinter,
    shingler: Option<Fingerprinter>,
    record: Record,
}

impl SetMaker {
    fn new(ctx: Rc<WorkerCtx>, scheme: Scheme) -> Self {
        let verify = ctx.shared.config.verify.filter(|v| !v.estimate);
        let shingler = verify.and_then(|v| {
            scheme
                .verification_scheme(v.shingle)
                .map(Fingerprinter::new)
        });
        SetMaker {
            ctx,
            fingerprinter: Fingerprinter::new(scheme),
            shingler,
            record: Record::default(),
        }
    }

    /// Shingles the needed documents of `docs` into `store`.
    fn take(&mut self, docs: &mut Vec<RawDoc>, needed: &Needed, store: &SharedStore) {
        let mut store = store.borrow_mut();
        for doc in docs.drain(..) {
            if !needed.contains(doc.doc_id) {
                continue;
            }
            let Some(set) = self.set_of(doc.doc_id, doc.file, doc.body) else {
                continue;
            };
            if let SetStore::Filling(sort) = &mut *store {
                if let Err(e) = sort.push(set) {
                    self.ctx.sort_failed("verify sets", e);
                    *store = SetStore::Failed;
                }
            }
        }
    }

    /// The document's set, parsed as the fingerprint stage parsed it; `None` for a record
    /// that failed to parse (the first pass reported it).
    fn set_of(&mut self, doc: u64, file: u32, body: RawBody) -> Option<DocSet> {
        let shared = &self.ctx.shared;
        let record = &mut self.record;
        match body {
            RawBody::Raw(line) => {
                let JobInput::Documents { fields, .. } = &shared.config.input else {
                    return None;
                };
                let kind = shared.plan.files[file as usize].format.kind();
                kind.parse_into(&line, fields, record).ok()?;
            }
            RawBody::Fields(fields) => *record = fields,
            RawBody::Fingerprint { .. } | RawBody::Invalid(_) => return None,
        }
        let verify = shared.config.verify?;
        let set: Vec<u64> = if verify.estimate {
            self.fingerprinter.fingerprint(&record.text);
            self.fingerprinter.signature().to_vec()
        } else {
            let mut set = match self.shingler.as_mut() {
                Some(shingler) => {
                    shingler.fingerprint(&record.text);
                    shingler.feature_set().to_vec()
                }
                None => {
                    self.fingerprinter.fingerprint(&record.text);
                    self.fingerprinter.feature_set().to_vec()
                }
            };
            set.sort_unstable();
            set
        };
        Some(DocSet { doc, set })
    }
}

/// Walks a sealed store beside a sorted stream of document numbers.
struct StoreWalk {
    reader: Option<SortedReader<DocSet>>,
    current: Option<DocSet>,
    failed: bool,
}

impl StoreWalk {
    fn new() -> Self {
        StoreWalk {
            reader: None,
            current: None,
            failed: false,
        }
    }

    /// The set of `doc` (empty if the store has none), for `doc`s in increasing order.
    fn set_of(&mut self, doc: u64, store: &SharedStore, ctx: &WorkerCtx) -> &[u64] {
        if self.failed {
            return &[];
        }
        if self.reader.is_none() {
            let opened = match &*store.borrow() {
                SetStore::Sealed(file) => file.records().map(Some),
                _ => Ok(None),
            };
            match opened {
                Ok(Some(reader)) => self.reader = Some(reader),
                Ok(None) => {
                    self.failed = true;
                    return &[];
                }
                Err(e) => {
                    ctx.sort_failed("verify sets", e);
                    self.failed = true;
                    return &[];
                }
            }
        }
        while self.current.as_ref().is_none_or(|c| c.doc < doc) {
            match self.reader.as_mut().and_then(|r| r.next()) {
                Some(Ok(set)) => self.current = Some(set),
                Some(Err(e)) => {
                    ctx.sort_failed("verify sets", e);
                    self.failed = true;
                    return &[];
                }
                None => {
                    self.current = None;
                    break;
                }
            }
        }
        match &self.current {
            Some(c) if c.doc == doc => &c.set,
            _ => &[],
        }
    }
}

/// As [`crate::stages::verify::verify`], with the sets of `store`: repeated candidates
/// removed and, when verification is on, only pairs whose similarity reaches the threshold
/// kept. `ready`: complete once the store is sealed.
pub fn verify_from_store<'s>(
    candidates: StreamVec<'s, u64, Edge>,
    ready: StreamVec<'s, u64, ()>,
    ctx: Rc<WorkerCtx>,
    store: SharedStore,
    search: bool,
) -> StreamVec<'s, u64, Edge> {
    let (home_a, home_b) = (ctx.home.clone(), ctx.home.clone());
    // The candidates wait for the store: an empty stream of edges complete with it.
    let waiting = ready.flat_map(|()| None::<Edge>);
    let (first_ctx, first_end, first_fail) = (ctx.clone(), ctx.clone(), ctx.clone());
    let first_store = store.clone();
    let (with_a, _) = candidates
        .concat(waiting)
        .sort_complete_split::<ByFirst, Candidate, (), _, _>(
            Exchange::new(ctx.meter("verify", move |e: &Edge| home_a.route(e.a))),
            "CandidatesAtA",
            ctx.sort::<ByFirst>("verify candidates", CANDIDATES_SORT_SHARE),
            (StoreWalk::new(), None::<(u64, u64)>),
            |_, _| {},
            move |(walk, last), ByFirst(edge), out, _| {
                if *last == Some((edge.a, edge.b)) {
                    return;
                }
                *last = Some((edge.a, edge.b));
                let shingles_a = match first_ctx.shared.config.verify {
                    Some(_) => walk.set_of(edge.a, &first_store, &first_ctx).to_vec(),
                    None => Vec::new(),
                };
                out.give(Candidate { edge, shingles_a });
            },
            move |_, stats, _, _| first_end.sorted("verify candidates", stats),
            move |e| first_fail.sort_failed("verify candidates", e),
        );
    let (second_ctx, end_ctx, second_fail) = (ctx.clone(), ctx.clone(), ctx.clone());
    let (verified, _) = with_a.sort_complete_split::<BySecond, Edge, (), _, _>(
        Exchange::new(ctx.meter("verify", move |c: &Candidate| home_b.route(c.edge.b))),
        "VerifyAtB",
        ctx.sort::<BySecond>("verify pairs", VERIFY_SORT_SHARE),
        StoreWalk::new(),
        |_, _| {},
        move |walk,
              BySecond(Candidate {
                  mut edge,
                  shingles_a,
              }),
              out,
              _| {
            let ctx = &second_ctx;
            if let Some(v) = ctx.shared.config.verify {
                let shingles_b = walk.set_of(edge.b, &store, ctx);
                let similarity = if v.estimate {
                    jaccard_estimate(&shingles_a, shingles_b)
                } else {
                    jaccard(&shingles_a, shingles_b)
                };
                if similarity < v.min_jaccard {
                    ctx.report.borrow_mut().rejected += u64::from(search);
                    return;
                }
                edge.jaccard = Some(similarity as f32);
            }
            if search {
                ctx.report.borrow_mut().near_pairs += 1;
                Progress::add(&ctx.shared.progress.pairs, 1);
            }
            out.give(edge);
        },
        move |_, stats, _, _| end_ctx.sorted("verify pairs", stats),
        move |e| second_fail.sort_failed("verify pairs", e),
    );
    verified
}
