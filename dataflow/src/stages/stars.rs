//! Stars, one connected component at a time, within bounded memory.
//!
//! The simple version gathers every edge of the run at worker 0 and hands them all to
//! [`neardup_core::star::stars`] at once. That holds the whole duplicate graph in memory,
//! with the maps the stars are made from: about 400 bytes per clustered document, measured
//! (450 MB of 690 at 10 GB of text under `--memory-limit 1G`, the run's peak). But a star
//! never crosses a connected component: a center covers only its neighbours, and the greedy
//! order, the exact cover search and the choice of each document's center compare only
//! documents of one component. So the stars of the whole graph are the stars of each
//! component, made one after another:
//!
//! 1. [`label_components`]: worker 0 sorts the edges (within [`STARS_SORT_SHARE`], runs on
//!    disk beyond it), and their documents in a sort of their own; once every edge is in,
//!    the documents make a union-find, the edges are joined in it in their sorted order,
//!    and each is then labelled with its component (a document of it). Where the
//!    union-find would take more than [`UNION_FIND_SHARE`] of the limit, the edges go to
//!    [`crate::stages::components`] instead, which finds the components by sorting, and
//!    each edge is labelled as the components are read beside the edges in their order.
//! 2. [`probe_components`] (only where
//!    [`probes_unlinked`](crate::stages::clusters::probes_unlinked)): at the component's
//!    worker (a hash of the component, as in step 3), sorted by component, each component's
//!    unlinked pairs worth verifying ([`neardup_core::star::unlinked_pairs`]) go to
//!    verification; the edges pass through.
//! 3. [`make_stars`]: the labelled edges and the pairs that passed verification (labelled by
//!    the same union-find, at worker 0) go to their component's worker (a hash of the
//!    component: every worker makes the stars of its share of the components) and are
//!    sorted by component there; each component's stars, then its documents' assignments,
//!    go to their homes as the sort is walked.
//!
//! `--cluster components` takes steps 1 and 3 too, with each component made one cluster
//! ([`neardup_core::star::whole_component`]) instead of its stars.
//!
//! Within a component the edges are in the order the simple version sorted them, the
//! verified unlinked pairs after them, so the clusters are exactly the simple version's
//! (`tests/quality_cli.rs` and `dataflow/tests/oracle.rs` compare them with it; which
//! document names a component changes nothing but the order components are made in). What
//! is held at once: the union-find (13 bytes per clustered document, up to
//! [`UNION_FIND_SHARE`]) or two sorts of the components on disk, the sorts' budgets, and
//! the largest component's graph.

use std::cell::RefCell;
use std::rc::Rc;

use fxhash::FxHashMap as HashMap;
use neardup_core::mix::mix64;
use neardup_core::star::{stars, unlinked_pairs, whole_component, Centers, Link, LinkKind};
use neardup_core::Method;
use neardup_io::spill::{ExternalSort, SpillRecord};
use serde::{Deserialize, Serialize};
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::vec::Map;
use timely::dataflow::StreamVec;

use crate::config::{ClusterMode, STARS_SORT_SHARE, UNION_FIND_SHARE};
use crate::operators::collect::Give;
use crate::operators::sort::ordered_by;
use crate::operators::SortComplete;
use crate::records::{Assignment, Edge, EdgeKind};
use crate::stages::clusters::Tally;
use crate::stages::components::{self, UNION_FIND_BYTES};
use crate::worker::WorkerCtx;

/// The component of an edge not labelled yet.
const UNLABELLED: u64 = u64::MAX;

/// An edge on its way to the stars, with its component once known. `phase` 0: an edge of
/// the run; 1: an unlinked pair that passed verification for the clustering.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct InComponent {
    component: u64,
    phase: u8,
    edge: Edge,
}

impl InComponent {
    fn unlabelled(edge: Edge, phase: u8) -> Self {
        InComponent {
            component: UNLABELLED,
            phase,
            edge,
        }
    }

    /// The order of the simple version within a component: by `(a, b, kind)`, the
    /// verified unlinked pairs after the run's edges (the rest of the key only makes the
    /// order total).
    fn key(&self) -> (u64, u8, u64, u64, u8, u8, Option<u32>) {
        let e = &self.edge;
        let kind = match e.kind {
            EdgeKind::Exact => LinkKind::Exact,
            EdgeKind::SameFingerprint => LinkKind::SameFingerprint,
            EdgeKind::Near => LinkKind::Near,
            EdgeKind::Url => LinkKind::Url,
        } as u8;
        let jaccard = e.jaccard.map(f32::to_bits);
        (
            self.component,
            self.phase,
            e.a,
            e.b,
            kind,
            e.hamming,
            jaccard,
        )
    }
}

ordered_by!(InComponent, |r| r.key());
impl SpillRecord for InComponent {}

/// What the three steps share on worker 0: the documents of the edges, sorted while the
/// edges come in; then what labels them with their component (`Labelling`, made in
/// [`label_components`], kept for labelling the verified unlinked pairs in
/// [`make_stars`], which drops it); and how many unlinked pairs [`probe_components`] sent
/// to be verified.
#[derive(Default)]
pub struct Shared {
    documents: Option<ExternalSort<u64>>,
    labelling: Labelling,
    probed: u64,
}

pub type Components = Rc<RefCell<Shared>>;

/// A new, empty sort for a step of the components on disk (`true`: the large step's).
type StepSort = Box<dyn FnMut(bool) -> ExternalSort<(u64, u64)>>;

/// How the documents get their component.
#[derive(Default)]
enum Labelling {
    /// Not made yet (or dropped once every edge is labelled).
    #[default]
    None,
    /// The union-find where it fits [`UNION_FIND_SHARE`], else the components on disk.
    Made(Box<components::Labelling<StepSort>>),
    /// Making them failed: the run fails.
    Failed,
}

impl Shared {
    /// The union-find of every document the edges name, each alone, or where it would not
    /// fit, the components on disk: made from the documents' sort when the first edge is
    /// joined (every edge is in by then).
    fn start(&mut self, ctx: &Rc<WorkerCtx>) {
        let Some(documents) = self.documents.take() else {
            return;
        };
        let fits = ctx.budget(UNION_FIND_SHARE) / UNION_FIND_BYTES;
        let steps = ctx.clone();
        let sort: StepSort = Box::new(move |large| {
            let step = if large { "large" } else { "small" };
            steps.sort(&format!("component stars ({step})"), STARS_SORT_SHARE)
        });
        let made = documents.finish().and_then(|merged| {
            let stats = merged.stats();
            Ok((components::Labelling::new(merged, fits, sort)?, stats))
        });
        self.labelling = match made {
            Ok((labelling, stats)) => {
                ctx.sorted("component documents", stats);
                Labelling::Made(Box::new(labelling))
            }
            Err(e) => {
                ctx.sort_failed("component documents", e);
                Labelling::Failed
            }
        };
    }

    /// Joins the documents of an edge (every edge comes before any is labelled); false
    /// where the run failed.
    fn join(&mut self, ctx: &Rc<WorkerCtx>, a: u64, b: u64) -> bool {
        self.start(ctx);
        let joined = match &mut self.labelling {
            Labelling::Made(labelling) => labelling.join(a, b).map(|()| true),
            _ => return false,
        };
        self.failed_unless(ctx, joined)
    }

    /// The component of `doc`, asked in ascending order of `doc` since the last
    /// [`Shared::rewind`]; `None` where the run failed.
    fn component(&mut self, ctx: &WorkerCtx, doc: u64) -> Option<u64> {
        let Labelling::Made(labelling) = &mut self.labelling else {
            return None;
        };
        let found = labelling.joined().and_then(|rounds| {
            if let Some(rounds) = rounds {
                ctx.sorted("component stars (large)", rounds.large);
                ctx.sorted("component stars (small)", rounds.small);
            }
            labelling.component(doc)
        });
        match found {
            Ok(component) => Some(component),
            Err(e) => {
                ctx.sort_failed("component stars", e);
                self.labelling = Labelling::Failed;
                None
            }
        }
    }

    /// Documents are asked from the smallest again (for the verified unlinked pairs).
    fn rewind(&mut self, ctx: &WorkerCtx) {
        if let Labelling::Made(labelling) = &mut self.labelling {
            let rewound = labelling.rewind().map(|()| true);
            self.failed_unless(ctx, rewound);
        }
    }

    fn failed_unless(&mut self, ctx: &WorkerCtx, done: std::io::Result<bool>) -> bool {
        match done {
            Ok(_) => true,
            Err(e) => {
                ctx.sort_failed("component stars", e);
                self.labelling = Labelling::Failed;
                false
            }
        }
    }
}

/// Worker 0: every edge, labelled with its connected component once all are in (module
/// docs, step 1). The second stream is never given to: it stands for the unlinked pairs
/// where [`probe_components`] does not run.
///
/// The simple version joins the edges' documents in a [`neardup_core::unionfind::UnionFind`]
/// as they arrive (a hash map from document to index: about 50 bytes a document) and
/// labels them once all are in. Here the documents go to a sort of their own as the edges
/// arrive, and the edges to theirs; once all are in, the documents, merged, make a
/// [`neardup_core::unionfind::SortedUnionFind`] (13 bytes a document), the edges are joined in it as their sort is
/// walked, and sorted again (already in order: the sort only keeps them until the last
/// union) to be labelled.
pub fn label_components<'s>(
    edges: StreamVec<'s, u64, Edge>,
    ctx: Rc<WorkerCtx>,
    components: Components,
) -> (StreamVec<'s, u64, InComponent>, StreamVec<'s, u64, Edge>) {
    components.borrow_mut().documents = Some(ctx.sort("component documents", STARS_SORT_SHARE));
    let (arrive, join, label) = (components.clone(), components.clone(), components);
    let (arrive_ctx, join_ctx) = (ctx.clone(), ctx.clone());
    let (fail, done) = (ctx.clone(), ctx.clone());
    let (joined, _) = edges
        .map(|e| InComponent::unlabelled(e, 0))
        .sort_complete_split::<InComponent, InComponent, Edge, _, _>(
            Exchange::new(ctx.meter("clusters", |_: &InComponent| 0)),
            "JoinComponents",
            ctx.sort("component edges", STARS_SORT_SHARE),
            (),
            move |data, _| {
                let mut shared = arrive.borrow_mut();
                let Some(sort) = shared.documents.as_mut() else {
                    return; // failed: the run fails
                };
                let pushed = data
                    .iter()
                    .try_for_each(|r| sort.push(r.edge.a).and_then(|()| sort.push(r.edge.b)));
                if let Err(e) = pushed {
                    shared.documents = None;
                    arrive_ctx.sort_failed("component documents", e);
                }
            },
            move |_, r: InComponent, out, _| {
                // Where the components could not be made, the run fails: nothing goes on.
                if join.borrow_mut().join(&join_ctx, r.edge.a, r.edge.b) {
                    out.give(r);
                }
            },
            move |_, stats, _, _| done.sorted("component edges", stats),
            move |e| fail.sort_failed("component edges", e),
        );
    let (fail, done) = (ctx.clone(), ctx.clone());
    let label_ctx = ctx.clone();
    joined.sort_complete_split(
        Pipeline,
        "LabelComponents",
        ctx.sort("component labels", STARS_SORT_SHARE),
        (),
        |_, _| {},
        move |_, mut r: InComponent, out, _| {
            // In the order of the edges' first documents.
            if let Some(component) = label.borrow_mut().component(&label_ctx, r.edge.a) {
                r.component = component;
                out.give(r);
            }
        },
        move |_, stats, _, _| done.sorted("component labels", stats),
        move |e| fail.sort_failed("component labels", e),
    )
}

/// One component's edges, gathered as the sort by component is walked.
#[derive(Default)]
struct Group {
    component: u64,
    records: Vec<InComponent>,
}

impl Group {
    /// Adds `r`; returns the finished group first when `r` begins a new component.
    fn add(&mut self, r: InComponent) -> Option<Vec<InComponent>> {
        let finished = (!self.records.is_empty() && r.component != self.component)
            .then(|| std::mem::take(&mut self.records));
        self.component = r.component;
        self.records.push(r);
        finished
    }

    fn take(&mut self) -> Vec<InComponent> {
        std::mem::take(&mut self.records)
    }
}

/// The ranks and links of one component's edges.
fn graph_of(records: &[InComponent]) -> (HashMap<u64, u64>, Vec<Link>) {
    let mut ranks = HashMap::default();
    let links = records
        .iter()
        .map(|r| {
            ranks.insert(r.edge.a, r.edge.rank_a);
            ranks.insert(r.edge.b, r.edge.rank_b);
            r.edge.link()
        })
        .collect();
    (ranks, links)
}

/// Where [`probes_unlinked`](crate::stages::clusters::probes_unlinked), at each component's
/// worker: each component's unlinked pairs worth verifying, as edges (second stream, to
/// verification); the labelled edges pass through (first), already at the worker that makes
/// their component's stars.
///
/// This step ran at worker 0 before, as the labelling does; on a 16-core machine it was
/// 0.39 s of one worker's time after the search in threshold mode (2.32 GB of text), with
/// the other fifteen idle.
pub fn probe_components<'s>(
    labelled: StreamVec<'s, u64, InComponent>,
    ctx: Rc<WorkerCtx>,
    components: Components,
) -> (StreamVec<'s, u64, InComponent>, StreamVec<'s, u64, Edge>) {
    let fail = ctx.clone();
    let done = ctx.clone();
    let probe = move |records: &[InComponent], out: &mut dyn FnMut(Edge)| {
        let (ranks, links) = graph_of(records);
        let rank = |doc: u64| (doc, ranks.get(&doc).copied().unwrap_or(u64::MAX));
        for (a, b) in unlinked_pairs(&ranks, &links) {
            components.borrow_mut().probed += 1;
            out(Edge::new(rank(a), rank(b), 0, EdgeKind::Near));
        }
    };
    let probe_end = probe.clone();
    labelled.sort_complete_split(
        Exchange::new(ctx.meter("clusters", |r: &InComponent| mix64(r.component))),
        "ProbeComponents",
        ctx.sort("component probes", STARS_SORT_SHARE),
        Group::default(),
        |_, _| {},
        move |group, r: InComponent, through, probes: &mut Give<'_, '_, u64, Edge>| {
            through.give(r.clone());
            if let Some(records) = group.add(r) {
                probe(&records, &mut |e| probes.give(e));
            }
        },
        move |mut group, stats, _, probes| {
            probe_end(&group.take(), &mut |e| probes.give(e));
            done.sorted("component probes", stats);
        },
        move |e| fail.sort_failed("component probes", e),
    )
}

/// The labelled edges and the unlinked pairs that passed verification (labelled at worker
/// 0), sorted by component at the component's worker, make each component's stars; each
/// clustered document's assignment goes on (to its home) as its component is done. Under
/// `--keep canonical-host` the second stream gives each clustered document's keep rank,
/// `(doc_id, rank)`, for
/// [`prefer_canonical_hosts`](crate::stages::clusters::prefer_canonical_hosts).
pub fn make_stars<'s>(
    labelled: StreamVec<'s, u64, InComponent>,
    verified: StreamVec<'s, u64, Edge>,
    ctx: Rc<WorkerCtx>,
    components: Components,
) -> (
    StreamVec<'s, u64, Assignment>,
    StreamVec<'s, u64, (u64, u64)>,
) {
    use timely::dataflow::operators::Concat;
    let shape = match ctx.shared.config.cluster {
        ClusterMode::Star => Some(Centers::Rank),
        ClusterMode::Components => None,
        ClusterMode::Verified => Some(Centers::Coverage),
    };
    let keep_ranks = ctx.shared.config.keep.prefers_canonical_hosts();
    let simhash = matches!(ctx.shared.config.scheme.method, Method::Simhash(_));
    let fail = ctx.clone();
    let done = ctx.clone();
    let make = move |records: Vec<InComponent>,
                     tally: &mut Tally,
                     out: &mut dyn FnMut(Assignment),
                     ranks_out: &mut dyn FnMut((u64, u64))| {
        tally.probes_verified += records.iter().filter(|r| r.phase == 1).count() as u64;
        let (ranks, links) = graph_of(&records);
        drop(records);
        // Connected components would remove every document of this one but one.
        tally.components_would_remove += ranks.len() as u64 - 1;
        let members = match shape {
            Some(centers) => stars(&ranks, &links, centers),
            None => whole_component(&ranks),
        };
        if keep_ranks {
            ranks.into_iter().for_each(&mut *ranks_out);
        }
        let mut assignments: Vec<Assignment> = members
            .into_iter()
            .map(|m| Assignment {
                doc_id: m.doc,
                cluster_id: m.cluster,
                cluster_size: 0,
                keep: m.kept == m.doc,
                kept_doc_id: m.kept,
                hamming: m.hamming.filter(|_| simhash),
                jaccard: m.jaccard,
            })
            .collect();
        tally.add(&mut assignments);
        assignments.into_iter().for_each(out);
    };
    let make_end = make;
    let (label, drop_union_find) = (components.clone(), components.clone());
    let drop_union_find_end = components;
    let verified = label_verified(verified, &ctx, label);
    labelled.concat(verified).sort_complete_split(
        Exchange::new(ctx.meter("clusters", |r: &InComponent| mix64(r.component))),
        "MakeStars",
        ctx.sort("by component", STARS_SORT_SHARE),
        (Group::default(), Tally::default()),
        |_, _| {},
        move |(group, tally): &mut (Group, Tally),
              r: InComponent,
              out: &mut Give<'_, '_, u64, Assignment>,
              ranks: &mut Give<'_, '_, u64, (u64, u64)>| {
            // Every edge is in: the union-find (worker 0's) is no longer needed.
            drop_union_find.borrow_mut().labelling = Labelling::None;
            if let Some(records) = group.add(r) {
                make(records, tally, &mut |a| out.give(a), &mut |r| ranks.give(r));
            }
        },
        move |(mut group, mut tally), stats, out, ranks| {
            let records = group.take();
            if !records.is_empty() {
                make_end(records, &mut tally, &mut |a| out.give(a), &mut |r| {
                    ranks.give(r)
                });
            }
            let mut shared = drop_union_find_end.borrow_mut();
            shared.labelling = Labelling::None;
            tally.probes_checked = shared.probed;
            done.sorted("by component", stats);
            tally.report(&done);
            done.stage_done("cluster");
        },
        move |e| fail.sort_failed("by component", e),
    )
}

/// Worker 0: the unlinked pairs that passed verification join the component of their
/// documents, sorted by their first document as the edges were (where the components are
/// on disk, they are read in that order).
fn label_verified<'s>(
    verified: StreamVec<'s, u64, Edge>,
    ctx: &Rc<WorkerCtx>,
    label: Components,
) -> StreamVec<'s, u64, InComponent> {
    let (label_ctx, fail, done) = (ctx.clone(), ctx.clone(), ctx.clone());
    let (labelled, _) = verified
        .map(|e| InComponent::unlabelled(e, 1))
        .sort_complete_split::<InComponent, InComponent, (), _, _>(
            Exchange::new(ctx.meter("clusters", |_: &InComponent| 0)),
            "LabelVerified",
            ctx.sort("component verified", STARS_SORT_SHARE),
            false,
            |_, _| {},
            move |rewound: &mut bool, mut r: InComponent, out, _| {
                let mut shared = label.borrow_mut();
                if !std::mem::replace(rewound, true) {
                    shared.rewind(&label_ctx);
                }
                if let Some(component) = shared.component(&label_ctx, r.edge.a) {
                    r.component = component;
                    out.give(r);
                }
            },
            move |_, stats, _, _| done.sorted("component verified", stats),
            move |e| fail.sort_failed("component verified", e),
        );
    labelled
}
