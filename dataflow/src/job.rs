//! The whole job: building the dataflow on every worker, running it, merging the reports,
//! and committing the output.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Probe, ToStream};
use timely::dataflow::ProbeHandle;
use timely::worker::Worker;

use crate::config::resume::Examined;
use crate::config::{JobConfig, JobInput, Resume};
use crate::control;
use crate::output;
use crate::plan::home::HomeTable;
use crate::plan::Plan;
use crate::progress::{Progress, Stage};
use crate::report::{JobSummary, Parameters, WorkerReport};
use crate::stages::clusters::{
    count_duplicate_ids, local_forest, merge_forests, prefer_canonical_hosts, write_clusters,
    KeepRanks,
};
use crate::stages::exact::fold_exact;
use crate::stages::fingerprint::fingerprint;
use crate::stages::fingerprint::resume::resumed_docs;
use crate::stages::near::search_tables;
use crate::stages::pairs::write_pairs;
use crate::stages::read::read_units;
use crate::stages::split::{split_docs, DocStreams};
use crate::stages::verify::{verify, ShingleSets};
use crate::worker::{Shared, WorkerCtx};
use crate::JobError;

/// Runs a job in this process (one of possibly several) and returns the merged summary.
///
/// On success the output directory holds every part, `summary.json` and `_SUCCESS`. If any
/// worker reported an error, the summary lists them, no `_SUCCESS` is written, and
/// [`JobError::Failed`] is returned.
///
/// The directories the job writes are locked for its whole length (see
/// [`neardup_io::lock`]): the output and `--write-dedup` directories by the process that
/// prepares them (process 0), each process's spill directory by that process. A job
/// running in this process can be stopped from outside with [`output::stop::stop`].
pub fn run_job(mut config: JobConfig, progress: Arc<Progress>) -> Result<JobSummary, JobError> {
    crate::config::validate(&config)?;
    if config.resume == Resume::Asked {
        // What the directory holds decides how the job starts (see crate::config::resume).
        config.resume = match crate::config::resume::examine(&config)? {
            Examined::Nothing => Resume::Off,
            Examined::Incomplete { .. } => Resume::Asked,
            Examined::Fingerprints { parts } => Resume::From(parts),
        };
    }
    let config = config;
    let lead = config.parallelism.process == 0;
    let mut held = Held::default();
    let prepare = |held: &mut Held| -> Result<(), JobError> {
        let run_protect = protected(&config, false);
        let run_tables = output_tables(&config);
        let dedup_protect = protected(&config, true);
        let mut targets = vec![output::Target {
            dir: &config.output,
            tables: &run_tables,
            protect: &run_protect,
            what: "output directory",
        }];
        if let Some(dir) = &config.write_dedup {
            // Checked and locked with the output, before the work, not after it.
            targets.push(output::Target {
                dir,
                tables: &[],
                protect: &dedup_protect,
                what: "--write-dedup directory",
            });
        }
        held.outputs = Some(match &config.resume {
            Resume::From(_) => {
                // The failed run's fingerprints and resume parts stay; the rest goes.
                let mut prepared = neardup_io::run_dir::prepare_resume(
                    &targets[0],
                    &[output::Table::Fingerprints],
                )?;
                if targets.len() > 1 {
                    prepared.absorb(output::prepare(&targets[1..], true)?);
                }
                prepared
            }
            // The same job's failed run, fingerprints incomplete: replaced (resume asked).
            Resume::Asked => output::prepare(&targets, true)?,
            Resume::Off => output::prepare(&targets, config.overwrite)?,
        });
        if !matches!(config.resume, Resume::From(_)) {
            crate::config::resume::write_record(&config)?;
        }
        Ok(())
    };
    let dedup = |config: &JobConfig, result: Result<JobSummary, JobError>| match (
        result,
        &config.write_dedup,
        &config.input,
    ) {
        (Ok(mut summary), Some(dir), JobInput::Documents { files, fields }) if lead => {
            let strike = config.substrings.filter(|job| job.strike).map(|_| fields);
            let near = !config.substrings.is_some_and(|job| job.only);
            let counts =
                crate::output::dedup::write_dedup(&config.output, files, dir, strike, near)?;
            summary.dedup = Some((counts.kept, counts.removed));
            Ok(summary)
        }
        (result, _, _) => result,
    };
    if config.parallelism.processes() == 1 {
        prepare(&mut held)?;
        lock_spill(&config, &mut held)?;
        let Some(registration) = output::stop::register(held.files(&config)) else {
            return Err(stopped_error());
        };
        let result = run_timely(config.clone(), progress, &registration, None);
        let result = dedup(&config, result);
        held.release(&config);
        return result;
    }
    // Several processes: agree at start-up, watch each other while running.
    let mut control_config = config.control.clone();
    control_config.job_id = config.job_id();
    let mut control = control::rendezvous(
        &config.parallelism.addresses,
        config.parallelism.process,
        &control_config,
        config.fingerprint(),
        || prepare(&mut held).and_then(|()| lock_spill(&config, &mut held)),
    )?;
    if !lead {
        if let Err(e) = lock_spill(&config, &mut held) {
            control.abort(&format!("process {}: {e}", config.parallelism.process));
            return Err(e);
        }
    }
    let Some(registration) = output::stop::register(held.files(&config)) else {
        control.abort("stopped before it started");
        return Err(stopped_error());
    };
    let sockets = control.take_data_connections();
    let result = run_timely(config.clone(), progress, &registration, Some(sockets));
    match &result {
        // Every process learns a job failure from the merged summary: a clean goodbye.
        Ok(_) | Err(JobError::Failed(_)) => control.finish(),
        // A failure only this process knows: stop the others now.
        Err(e) => control.abort(&e.to_string()),
    }
    let result = dedup(&config, result);
    held.release(&config);
    result
}

/// What a job holds while it runs: the locks of its output directories (process 0) and of
/// this process's spill directory.
#[derive(Default)]
struct Held {
    outputs: Option<output::Prepared>,
    spill: Option<neardup_io::lock::DirLock>,
}

impl Held {
    /// What [`output::stop::stop`] may clean for this process.
    fn files(&self, config: &JobConfig) -> output::stop::JobFiles {
        let workers = config.parallelism.workers;
        let first = config.parallelism.process * workers;
        output::stop::JobFiles {
            output: config.output.clone(),
            dedup: config.write_dedup.clone(),
            spill_root: config.spill_root(),
            spill_lock: self.spill.as_ref().map(|l| l.path().to_path_buf()),
            parts: first..first + workers,
            lead: config.parallelism.process == 0,
        }
    }

    /// Releases the locks; the spill root goes once no process uses it (each process removes
    /// its own lock file, the last one the directory).
    fn release(self, config: &JobConfig) {
        let spilled = self.spill.is_some();
        drop(self.spill);
        if spilled {
            let _ = std::fs::remove_dir(config.spill_root());
        }
        drop(self.outputs);
    }
}

/// Locks this process's share of a `--spill-dir` (the job's directory inside it): another
/// job with the same spill directory name (the same `--job-id`, or the same output) is
/// refused rather than mixing spill files. The default spill directory, inside the output
/// directory, is covered by the output's lock.
fn lock_spill(config: &JobConfig, held: &mut Held) -> Result<(), JobError> {
    if config.spill_dir.is_none() {
        return Ok(());
    }
    let root = config.spill_root();
    std::fs::create_dir_all(&root).map_err(|cause| neardup_io::IoError::Prepare {
        action: "cannot create",
        path: root.clone(),
        cause,
    })?;
    let name = format!(
        "{}.process-{}",
        neardup_io::lock::LOCK,
        config.parallelism.process
    );
    held.spill = Some(neardup_io::lock::DirLock::acquire(
        &root,
        &name,
        "spill directory",
    )?);
    Ok(())
}

fn stopped_error() -> JobError {
    JobError::Cluster(format!(
        "the job was {} before it started",
        output::stop::stopped().unwrap_or_default()
    ))
}

/// What `--overwrite` of an output directory must never delete: the inputs, the user's spill
/// directory (the default `_spill` in the output directory is neardup's own) and the other
/// output directory (`--write-dedup` for the run directory, `--output` for the dedup one).
fn protected(config: &JobConfig, for_dedup: bool) -> Vec<output::Protected> {
    let mut protect: Vec<output::Protected> = match &config.input {
        JobInput::Documents { files, .. } => files
            .iter()
            .filter(|f| !f.is_stdin())
            .map(|f| output::Protected::new(&f.path, "the input"))
            .collect(),
        JobInput::Fingerprints { files } => files
            .iter()
            .map(|f| output::Protected::new(f, "the input"))
            .collect(),
    };
    if let Some(dir) = &config.spill_dir {
        protect.push(output::Protected::new(dir, "the spill directory"));
    }
    if for_dedup {
        protect.push(output::Protected::new(
            &config.output,
            "the --output directory",
        ));
    } else if let Some(dir) = &config.write_dedup {
        protect.push(output::Protected::new(dir, "the --write-dedup directory"));
    }
    protect
}

fn output_tables(config: &JobConfig) -> Vec<output::Table> {
    match config.substrings {
        Some(job) if job.only => return vec![output::Table::Substrings],
        Some(_) => {
            let mut tables = near_tables(config).to_vec();
            tables.push(output::Table::Substrings);
            return tables;
        }
        None => {}
    }
    near_tables(config).to_vec()
}

fn near_tables(config: &JobConfig) -> &'static [output::Table] {
    match config.input {
        JobInput::Documents { .. } if config.urls_known() => &[
            output::Table::Fingerprints,
            output::Table::Pairs,
            output::Table::Clusters,
            output::Table::Mirrors,
            output::Table::Hosts,
        ],
        JobInput::Documents { .. } => &[
            output::Table::Fingerprints,
            output::Table::Pairs,
            output::Table::Clusters,
        ],
        JobInput::Fingerprints { .. } => &[output::Table::Pairs, output::Table::Clusters],
    }
}

/// Plans the input and runs the dataflow on this process's workers; with several processes,
/// over the connections the control plane made (`sockets`, see `control::connect_data`).
fn run_timely(
    config: JobConfig,
    progress: Arc<Progress>,
    registration: &output::stop::Registration,
    sockets: Option<Vec<Option<std::net::TcpStream>>>,
) -> Result<JobSummary, JobError> {
    let plan = Plan::build(&config.input)?;
    let (allocators, others) = match sockets {
        None => config.parallelism.timely_config().communication.try_build(),
        Some(sockets) => cluster_allocators(sockets, &config),
    }
    .map_err(JobError::Cluster)?;
    let shared = Arc::new(Shared {
        config,
        plan,
        progress,
        abort: AtomicBool::new(false),
        start: Instant::now(),
    });
    registration.running(Arc::downgrade(&shared));
    let guards = timely::execute::execute_from(
        allocators,
        others,
        timely::WorkerConfig::default(),
        move |worker| run_worker(worker, shared.clone()),
    )
    .map_err(JobError::Cluster)?;
    let mut summary = None;
    for result in guards.join() {
        match result {
            Ok(s) => summary = summary.or(s),
            Err(panic) => return Err(JobError::Cluster(format!("a worker failed: {panic}"))),
        }
    }
    let summary =
        summary.ok_or_else(|| JobError::Cluster("no worker returned a summary".into()))?;
    if summary.succeeded() {
        Ok(summary)
    } else {
        Err(JobError::Failed(Box::new(summary)))
    }
}

/// timely's allocators for this process's workers over connections already made, as
/// timely's own `Config::Cluster` builds them over connections it makes itself.
#[allow(clippy::type_complexity)]
fn cluster_allocators(
    sockets: Vec<Option<std::net::TcpStream>>,
    config: &JobConfig,
) -> Result<
    (
        Vec<timely::communication::AllocatorBuilder>,
        Box<dyn std::any::Any + Send>,
    ),
    String,
> {
    use timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets;
    use timely::communication::allocator::ProcessBuilder;
    let threads = config.parallelism.workers;
    let hooks = timely::communication::Hooks::default();
    let local =
        ProcessBuilder::new_typed_vector(threads, hooks.refill.clone(), hooks.spill.clone());
    let (builders, guard) = initialize_networking_from_sockets(
        local,
        sockets,
        config.parallelism.process,
        threads,
        hooks,
    )
    .map_err(|e| format!("failed to initialize networking: {e}"))?;
    Ok((
        builders
            .into_iter()
            .map(timely::communication::AllocatorBuilder::Tcp)
            .collect(),
        Box::new(guard),
    ))
}

/// One worker: the main dataflow to completion, then the report exchange.
fn run_worker(worker: &mut Worker, shared: Arc<Shared>) -> Option<JobSummary> {
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
    // The scheme the fingerprint stage uses: the job's, with TF-IDF weights filled in.
    let mut scheme = shared.config.scheme.clone();
    let resumed = matches!(shared.config.resume, Resume::From(_));
    let tf_idf = matches!(
        scheme.method,
        neardup_core::Method::Simhash(neardup_core::Weighting::TfIdf(_))
    );
    // A resumed run has its fingerprints: no document frequencies to count.
    if tf_idf && !resumed {
        // A first pass counts document frequencies; its reader's counters are its own.
        let pass = Rc::new(WorkerCtx {
            shared: shared.clone(),
            index: ctx.index,
            peers: ctx.peers,
            report: RefCell::new(WorkerReport::default()),
            home: ctx.home.clone(),
            network: Default::default(),
        });
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
    if let Some(job) = shared.config.substrings.filter(|job| job.only) {
        // `neardup substrings`: read, parse at home, search repeated passages.
        let parsed = ProbeHandle::new();
        worker.dataflow::<u64, _, _>(|scope| {
            let raw = read_units(scope, ctx.clone(), parsed.clone());
            let docs = crate::stages::substrings::parse_documents(raw, ctx.clone(), &parsed, None);
            crate::stages::substrings::find_substrings(docs, ctx.clone(), job);
        });
        return finish_worker(worker, &ctx, &shared);
    }
    let fingerprinted = ProbeHandle::new();
    // What the fingerprint stage hands to verification, at each document's home.
    let sets = ShingleSets::default();
    // `run --substrings`: the documents the clusters remove, kept at their home.
    let removed = shared
        .config
        .substrings
        .map(|_| crate::stages::clusters::RemovedAtHome::default());
    worker.dataflow::<u64, _, _>(|scope| {
        let docs = if resumed {
            resumed_docs(scope, ctx.clone())
        } else {
            let raw = read_units(scope, ctx.clone(), fingerprinted.clone());
            fingerprint(raw, ctx.clone(), scheme, sets.clone()).probe_with(&fingerprinted)
        };
        // Every reader of `docs` but the last gets its own copy of each batch (timely clones
        // a message per extra reader), so the stages that only URLs feed (payload digests,
        // URLs and hosts all come with them: web archives or --url-field) are left out
        // without them: their streams would be empty. The duplicate-id count and the
        // clusters read projections that `split_docs` makes as it hands the batch on: with
        // no URLs, no batch of documents is copied.
        let urls_known = ctx.shared.config.urls_known();
        let DocStreams {
            docs,
            doc_ids,
            id_hashes,
        } = split_docs(docs);
        count_duplicate_ids(id_hashes, ctx.clone());
        let (reps, mut exact_edges) = fold_exact(docs.clone(), ctx.clone());
        if urls_known {
            let revisit_edges = crate::stages::revisits::link_revisits(docs.clone(), ctx.clone());
            exact_edges = timely::dataflow::operators::Concat::concat(exact_edges, revisit_edges);
        }
        let mut near_edges = search_tables(reps, ctx.clone());
        if ctx.shared.config.verify.is_some() || ctx.shared.config.lsh.is_some() {
            near_edges = verify(near_edges, ctx.clone(), sets);
        }
        if urls_known {
            let url_edges = crate::stages::urls::link_urls(docs.clone(), ctx.clone());
            near_edges = timely::dataflow::operators::Concat::concat(near_edges, url_edges);
        }
        let edges = write_pairs(
            timely::dataflow::operators::Concat::concat(exact_edges, near_edges),
            ctx.clone(),
        );
        if urls_known {
            crate::stages::urls::count_cross_host(docs.clone(), edges.clone(), ctx.clone());
        }
        let keep_ranks = KeepRanks::default();
        let mut assignments = merge_forests(
            local_forest(edges, ctx.clone()),
            ctx.clone(),
            keep_ranks.clone(),
        );
        if urls_known {
            let mirroring = crate::stages::mirrors::detect_mirrors(
                docs.clone(),
                assignments.clone(),
                ctx.clone(),
            );
            // --keep canonical-host: the kept documents are chosen again, now that the
            // mirror groups are known.
            if ctx.shared.config.keep.prefers_canonical_hosts() {
                assignments =
                    prefer_canonical_hosts(assignments, mirroring, keep_ranks, ctx.clone());
            }
        }
        write_clusters(doc_ids, assignments, ctx.clone(), removed.clone());
    });
    if let (Some(job), Some(removed)) = (shared.config.substrings, removed) {
        // `run --substrings`: once the clusters are complete, the corpus is read again and
        // the search runs over the documents they keep.
        run_to_completion(worker);
        search_kept_documents(worker, &ctx, job, removed);
    }
    finish_worker(worker, &ctx, &shared)
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
    removed: crate::stages::clusters::RemovedAtHome,
) {
    let pass = Rc::new(WorkerCtx {
        shared: ctx.shared.clone(),
        index: ctx.index,
        peers: ctx.peers,
        report: RefCell::new(WorkerReport::default()),
        home: ctx.home.clone(),
        network: Default::default(),
    });
    let parsed = ProbeHandle::new();
    worker.dataflow::<u64, _, _>(|scope| {
        let raw = read_units(scope, pass.clone(), parsed.clone());
        let docs =
            crate::stages::substrings::parse_documents(raw, pass.clone(), &parsed, Some(removed));
        crate::stages::substrings::find_substrings(docs, pass.clone(), job);
    });
    run_to_completion(worker);
    let done = pass.report.take();
    let mut report = ctx.report.borrow_mut();
    report.errors.extend(done.errors);
    report.parts.extend(done.parts);
    report.substrings = done.substrings;
    for (stage, secs) in done.stage_seconds {
        report.stage_done(&stage, secs);
    }
    report.add_network(pass.network.bytes());
}

/// Steps the worker until every dataflow installed is complete. (A worker without
/// dataflows would park for ever in `step_or_park`: nothing would wake it.)
fn run_to_completion(worker: &mut Worker) {
    while worker.has_dataflows() && worker.step_or_park(None) {}
}

/// Runs the main dataflow to completion, then the report exchange.
fn finish_worker(
    worker: &mut Worker,
    ctx: &Rc<WorkerCtx>,
    shared: &Arc<Shared>,
) -> Option<JobSummary> {
    run_to_completion(worker);
    shared.progress.reach(Stage::Committing);
    let mut report = ctx.report.replace(WorkerReport::default());
    report.add_network(ctx.network.bytes());
    let verdict = exchange_reports(worker, report, shared);
    shared.progress.reach(Stage::Done);
    verdict
}

/// Sends every worker's report to worker 0, which merges them, commits the output, and
/// sends the summary back to every worker.
fn exchange_reports(
    worker: &mut Worker,
    report: WorkerReport,
    shared: &Arc<Shared>,
) -> Option<JobSummary> {
    let peers = worker.peers();
    let verdict: Rc<RefCell<Option<JobSummary>>> = Rc::new(RefCell::new(None));
    let sink = verdict.clone();
    let shared = shared.clone();
    worker.dataflow::<u64, _, _>(|scope| {
        vec![report]
            .to_stream(scope)
            .container::<Vec<_>>()
            .unary_frontier(
                Exchange::new(|_: &WorkerReport| 0),
                "MergeReports",
                move |cap, _| {
                    let mut cap = Some(cap);
                    let mut merged: Option<WorkerReport> = None;
                    move |(input, frontier), output| {
                        input.for_each(|_, data| {
                            for r in data.drain(..) {
                                match merged.as_mut() {
                                    Some(m) => m.merge(r),
                                    None => merged = Some(r),
                                }
                            }
                        });
                        if frontier.is_empty() {
                            if let (Some(cap), Some(report)) = (cap.take(), merged.take()) {
                                let summary = finalize(report, &shared);
                                output
                                    .session(&cap)
                                    .give_iterator((0..peers).map(|i| (i, summary.clone())));
                            }
                        }
                    }
                },
            )
            .sink(
                Exchange::new(|(i, _): &(usize, JobSummary)| *i as u64),
                "Verdict",
                move |(input, _)| {
                    input.for_each(|_, data| {
                        for (_, summary) in data.drain(..) {
                            *sink.borrow_mut() = Some(summary);
                        }
                    });
                },
            );
    });
    while worker.step_or_park(None) {}
    verdict.take()
}

/// A keep column that no document has is a mistake (a typo, a column of another corpus):
/// fail rather than silently keep by input order. Some documents without it is a warning.
fn check_keep_column(summary: &mut JobSummary, config: &JobConfig) {
    let Some(column) = config.keep.column() else {
        return;
    };
    let (missing, documents) = (summary.counts.keep_value_missing, summary.counts.documents);
    if documents > 0 && missing == documents {
        summary.errors.push(format!(
            "--keep {}: no document has a numeric field {column:?}",
            config.keep.describe()
        ));
    } else if missing > 0 {
        summary.warnings.push(format!(
            "--keep {}: {missing} of {documents} documents have no field {column:?} and rank last",
            config.keep.describe()
        ));
    }
}

/// Worker 0: the summary, summary.json, and `_SUCCESS` if every worker succeeded.
fn finalize(mut report: WorkerReport, shared: &Shared) -> JobSummary {
    let config = &shared.config;
    report.stage_done("total", shared.start.elapsed().as_secs_f64());
    let parameters = Parameters {
        scheme: config.scheme.describe(),
        k: config.design.k(),
        tables: config.design.to_string(),
        keep: config.keep.describe(),
        exact: config.exact,
        skip_invalid: config.skip_invalid,
        inputs: shared
            .plan
            .files
            .iter()
            .map(|f| f.path.display().to_string())
            .collect(),
        workers_per_process: config.parallelism.workers,
        processes: config.parallelism.processes(),
        command_line: config.command_line.clone(),
    };
    let mut summary = JobSummary::from_report(report, parameters);
    check_keep_column(&mut summary, config);
    if let Some(largest) = summary
        .largest_clusters
        .first()
        .filter(|c| c.size > config.cluster_warning)
    {
        summary.warnings.push(format!(
            "cluster {} holds {} documents (more than {}): chained near-duplicates or shared boilerplate? Try --cluster star, or verification",
            largest.cluster_id, largest.size, config.cluster_warning
        ));
    }
    // Every worker has removed its own spill directory by now; the job's goes too.
    let _ = std::fs::remove_dir(config.spill_root());
    if let Some(step) = config
        .before_commit
        .as_ref()
        .filter(|_| summary.succeeded())
    {
        if let Err(e) = (step.0)(&config.output) {
            summary.errors.push(e);
        }
    }
    if let Err(e) = output::commit(&config.output, &mut summary) {
        summary.errors.push(e.to_string());
    }
    crate::stages::fingerprint::resume::kill_at("success");
    if config.output.join(neardup_io::run_dir::SUCCESS).is_file() {
        // Complete: nothing left to resume.
        if let Err(e) = neardup_io::run_dir::remove_resume(&config.output) {
            summary.warnings.push(e.to_string());
        }
    }
    summary
}
