//! The pipeline's wiring: the stages connected into the dataflows every worker runs, in the
//! order the crate docs draw ([`crate`]). Each stage is a module of [`crate::stages`]; this
//! module only connects their streams, and hands the worker to [`crate::finish`] once its
//! dataflows are complete.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use neardup_core::Scheme;
use timely::dataflow::operators::{Concat, Probe};
use timely::dataflow::{ProbeHandle, Scope, StreamVec};
use timely::worker::Worker;

use crate::config::Resume;
use crate::finish::{Finish, Finished};
use crate::plan::home::HomeTable;
use crate::report::{JobSummary, WorkerReport};
use crate::stages::cluster_rows::{count_duplicate_ids, write_clusters};
use crate::stages::clusters::{prefer_canonical_hosts, probes_unlinked, RemovedAtHome};
use crate::stages::exact::fold_exact;
use crate::stages::fingerprint::fingerprint;
use crate::stages::fingerprint::resume::resumed_docs;
use crate::stages::near::search_tables;
use crate::stages::pairs::write_pairs;
use crate::stages::read::read_units;
use crate::stages::read::read_units_after;
use crate::stages::split::{split_docs, DocStreams};
use crate::stages::stars;
use crate::stages::verify::{verify, ShingleSets};
use crate::stages::verify_inputs::{
    collect_sets, mark_needed, set_store, verify_from_store, Needed, SharedStore,
};
use crate::worker::{Shared, WorkerCtx};

/// One worker: its dataflows to completion, then the end of the run
/// ([`crate::finish::exchange`]). Returns the run's summary, and on worker 0 what the step
/// before `_SUCCESS` did.
pub(crate) fn run_worker(
    worker: &mut Worker,
    shared: Arc<Shared>,
    finish: Arc<Finish>,
) -> Option<(JobSummary, Option<Finished>)> {
    let profile = crate::profile::OperatorProfile::start(worker, shared.start);
    let ctx = Rc::new(WorkerCtx {
        shared: shared.clone(),
        index: worker.index(),
        peers: worker.peers(),
        report: RefCell::new(WorkerReport::default()),
        home: HomeTable::for_plan(
            &shared.plan,
            &shared.config,
            worker.peers(),
            shared.config.parallelism.workers,
        ),
        network: Default::default(),
    });
    learn_site_templates(worker, &ctx);
    let scheme = fingerprint_scheme(worker, &ctx);
    if let Some(job) = shared.config.substrings.filter(|job| job.only) {
        // `neardup substrings`: read, parse at home, search repeated passages.
        let parsed = ProbeHandle::new();
        worker.dataflow::<u64, _, _>(|scope| {
            let raw = read_units(scope, ctx.clone(), parsed.clone());
            let docs = crate::stages::substrings::parse_documents(raw, ctx.clone(), &parsed, None);
            crate::stages::substrings::find_substrings(docs, ctx.clone(), job);
        });
    } else {
        // `run --substrings`: the documents the clusters remove, kept at their home.
        let removed = shared.config.substrings.map(|_| RemovedAtHome::default());
        worker.dataflow::<u64, _, _>(|scope| near_duplicates(scope, &ctx, scheme, removed.clone()));
        if let (Some(job), Some(removed)) = (shared.config.substrings, removed) {
            // `run --substrings`: once the clusters are complete, the corpus is read again
            // and the search runs over the documents they keep.
            run_to_completion(worker);
            search_kept_documents(worker, &ctx, job, removed);
        }
    }
    run_to_completion(worker);
    let summary = crate::finish::exchange::finish_worker(worker, &ctx, &shared, &finish);
    if let Some(profile) = profile {
        profile.finish(worker);
    }
    summary
}

/// The templates stage ([`crate::stages::templates`]) when the job wants it: its result
/// goes to [`crate::worker::Shared::templates`], where every reader built after it finds
/// it. Its readers' counters are its own; its errors, sorts and network bytes are the
/// worker's.
fn learn_site_templates(worker: &mut Worker, ctx: &Rc<WorkerCtx>) {
    let shared = &ctx.shared;
    if !shared.config.learns_site_templates() {
        return;
    }
    let pass = Rc::new(ctx.pass());
    let templates = crate::stages::templates::learn_templates(worker, pass.clone());
    let done = ctx.absorb_pass(&pass);
    let mut report = ctx.report.borrow_mut();
    report.sorts.extend(done.sorts);
    if ctx.index == 0 {
        // Every worker learns the same templates: worker 0 counts them.
        report.template_hosts = templates.hosts() as u64;
        report.template_blocks = templates.blocks() as u64;
    }
    let templates = neardup_io::html::template::SharedTemplates(Arc::new(templates));
    // Every worker of the process learns the same: the first one sets them.
    let _ = shared.templates.set(templates);
}

/// The scheme the fingerprint stage uses: the job's, with TF-IDF weights filled in by a
/// first pass that counts document frequencies (its reader's counters are its own). A
/// resumed run has its fingerprints: no document frequencies to count.
fn fingerprint_scheme(worker: &mut Worker, ctx: &Rc<WorkerCtx>) -> Scheme {
    let shared = &ctx.shared;
    let mut scheme = shared.config.scheme.clone();
    let resumed = matches!(shared.config.resume, Resume::From(_));
    let tf_idf = matches!(
        scheme.method,
        neardup_core::Method::Simhash(neardup_core::Weighting::TfIdf(_))
    );
    if tf_idf && !resumed {
        let pass = Rc::new(ctx.pass());
        let table = crate::stages::fingerprint::idf::document_frequencies(worker, pass.clone());
        ctx.report
            .borrow_mut()
            .errors
            .extend(pass.report.take().errors);
        ctx.report.borrow_mut().add_network(pass.network.bytes());
        scheme.method =
            neardup_core::Method::Simhash(neardup_core::Weighting::TfIdf(Arc::new(table)));
        ctx.stage_done("document frequencies");
    }
    scheme
}

/// The main dataflow: documents read and fingerprinted (or a resumed run's fingerprints),
/// exact duplicates folded, the tables searched, candidates verified, pairs written and
/// clustered, mirrors found where documents have URLs. `removed`: with `run --substrings`,
/// where the clusters leave the documents they remove.
fn near_duplicates<'s>(
    scope: Scope<'s, u64>,
    ctx: &Rc<WorkerCtx>,
    scheme: Scheme,
    removed: Option<RemovedAtHome>,
) {
    let config = &ctx.shared.config;
    // What the fingerprint stage hands to verification, at each document's home (nothing
    // when verification makes the sets again from the inputs).
    let from_inputs = config.verifies_from_inputs();
    let sets = match from_inputs {
        true => ShingleSets::none(),
        false => ShingleSets::default(),
    };
    let docs = if matches!(config.resume, Resume::From(_)) {
        resumed_docs(scope, ctx.clone())
    } else {
        let fingerprinted = ProbeHandle::new();
        let raw = read_units(scope, ctx.clone(), fingerprinted.clone());
        fingerprint(raw, ctx.clone(), scheme.clone(), sets.clone()).probe_with(&fingerprinted)
    };
    // Every reader of `docs` but the last gets its own copy of each batch (timely clones
    // a message per extra reader), so the stages that only URLs feed (payload digests,
    // URLs and hosts all come with them: web archives or --url-field) are left out
    // without them: their streams would be empty. The duplicate-id count and the
    // clusters read projections that `split_docs` makes as it hands the batch on: with
    // no URLs, no batch of documents is copied.
    let urls_known = config.urls_known();
    let DocStreams {
        docs,
        doc_ids,
        id_hashes,
    } = split_docs(docs);
    count_duplicate_ids(id_hashes, ctx.clone());
    let (reps, mut exact_edges) = fold_exact(docs.clone(), ctx.clone());
    if urls_known {
        let revisit_edges = crate::stages::revisits::link_revisits(docs.clone(), ctx.clone());
        exact_edges = exact_edges.concat(revisit_edges);
    }
    let mut near_edges = search_tables(reps, ctx.clone());
    let url_edges = urls_known.then(|| crate::stages::urls::link_urls(docs.clone(), ctx.clone()));
    // With the sets made again from the inputs: every link verification may be asked about
    // marks its documents, the corpus is read again once all are marked, and the sets go
    // to a store on disk (`Verifier::Store`).
    let verifier = if from_inputs {
        let links = near_edges.clone().concat(exact_edges.clone());
        let links = match &url_edges {
            Some(urls) => links.concat(urls.clone()),
            None => links,
        };
        let (store, ready) = store_sets(links, ctx, scheme.clone());
        Verifier::Store(store, ready)
    } else {
        Verifier::Memory(sets)
    };
    if config.verify.is_some() || config.lsh.is_some() {
        near_edges = verifier.verify(near_edges, ctx, true);
    }
    if let Some(url_edges) = url_edges {
        near_edges = near_edges.concat(url_edges);
    }
    let edges = write_pairs(exact_edges.concat(near_edges), ctx.clone());
    if urls_known {
        crate::stages::urls::count_cross_host(docs.clone(), edges.clone(), ctx.clone());
    }
    // Worker 0 labels the edges with their components and makes the clusters a component
    // at a time: stars (with each component's unlinked pairs worth it verified where the
    // documents' sets are), or under `--cluster components` the whole component.
    let components = stars::Components::default();
    let (mut labelled, mut unlinked) =
        stars::label_components(edges, ctx.clone(), components.clone());
    if probes_unlinked(config) {
        (labelled, unlinked) = stars::probe_components(labelled, ctx.clone(), components.clone());
    }
    let verified = if config.cluster.stars() {
        verifier.verify(unlinked, ctx, false)
    } else {
        unlinked
    };
    let (mut assignments, keep_ranks) =
        stars::make_stars(labelled, verified, ctx.clone(), components);
    if urls_known {
        let mirroring =
            crate::stages::mirrors::detect_mirrors(docs.clone(), assignments.clone(), ctx.clone());
        // --keep canonical-host: the kept documents are chosen again, now that the
        // mirror groups are known.
        if config.keep.prefers_canonical_hosts() {
            assignments = prefer_canonical_hosts(assignments, mirroring, keep_ranks, ctx.clone());
        }
    }
    write_clusters(doc_ids, assignments, ctx.clone(), removed);
}

/// Where verification finds the sets it compares (see [`crate::config::VerifyFrom`]).
enum Verifier<'s> {
    /// Kept at each home by the fingerprint stage.
    Memory(ShingleSets),
    /// Made again from the inputs into a store on disk; the stream is complete once the
    /// store is sealed.
    Store(SharedStore, StreamVec<'s, u64, ()>),
}

impl<'s> Verifier<'s> {
    fn verify(
        &self,
        candidates: StreamVec<'s, u64, crate::records::Edge>,
        ctx: &Rc<WorkerCtx>,
        search: bool,
    ) -> StreamVec<'s, u64, crate::records::Edge> {
        match self {
            Verifier::Memory(sets) => verify(candidates, ctx.clone(), sets.clone(), search),
            Verifier::Store(store, ready) => verify_from_store(
                candidates,
                ready.clone(),
                ctx.clone(),
                store.clone(),
                search,
            ),
        }
    }
}

/// The sets for verification made again from the inputs: the documents `links` name marked
/// at their homes, the corpus read a second time once all are, and their sets stored.
fn store_sets<'s>(
    links: StreamVec<'s, u64, crate::records::Edge>,
    ctx: &Rc<WorkerCtx>,
    scheme: Scheme,
) -> (SharedStore, StreamVec<'s, u64, ()>) {
    let needed = Rc::new(RefCell::new(Needed::default()));
    let store = set_store(ctx);
    let marked = mark_needed(links, ctx.clone(), needed.clone());
    let parsed = ProbeHandle::new();
    let raw = read_units_after(marked.clone(), ctx.clone(), parsed.clone());
    let (ready, progress) = collect_sets(raw, marked, ctx.clone(), scheme, needed, store.clone());
    progress.probe_with(&parsed);
    (store, ready)
}

/// The second pass of `run --substrings`: reads the corpus again and searches repeated
/// passages in the documents the clusters keep. A removed document is dropped at its home
/// before it is parsed: it is never scanned and never holds a first copy. The pass has its
/// own reader counters (the first pass counted the corpus); its errors, parts, stage times
/// and the search's counts go to the worker's report.
fn search_kept_documents(
    worker: &mut Worker,
    ctx: &Rc<WorkerCtx>,
    job: crate::config::SubstringJob,
    removed: RemovedAtHome,
) {
    let pass = Rc::new(ctx.pass());
    let parsed = ProbeHandle::new();
    worker.dataflow::<u64, _, _>(|scope| {
        let raw = read_units(scope, pass.clone(), parsed.clone());
        let docs =
            crate::stages::substrings::parse_documents(raw, pass.clone(), &parsed, Some(removed));
        crate::stages::substrings::find_substrings(docs, pass.clone(), job);
    });
    run_to_completion(worker);
    let done = ctx.absorb_pass(&pass);
    let mut report = ctx.report.borrow_mut();
    report.parts.extend(done.parts);
    report.substrings = done.substrings;
}

/// Steps the worker until every dataflow installed is complete. (A worker without
/// dataflows would park for ever in `step_or_park`: nothing would wake it.)
fn run_to_completion(worker: &mut Worker) {
    while worker.has_dataflows() && worker.step_or_park(None) {}
}
