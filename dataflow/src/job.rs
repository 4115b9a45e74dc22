//! A run's lifecycle: start (the output directories checked, prepared and locked; with
//! several processes, the control plane's rendezvous), the dataflow run on every worker
//! ([`crate::pipeline`] wires it), and the end of the run ([`crate::finish`]: the reports
//! merged, the step before `_SUCCESS`, the commit, the deduplicated corpus), whose
//! [`RunOutcome`] [`run_job`] returns.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use crate::config::resume::Examined;
use crate::config::{JobConfig, JobInput, Resume};
use crate::control;
use crate::finish::{Finish, Finished, RunOutcome};
use crate::output;
use crate::plan::Plan;
use crate::progress::Progress;
use crate::report::JobSummary;
use crate::worker::Shared;
use crate::JobError;

/// Runs a job in this process (one of possibly several), with no step before `_SUCCESS`:
/// [`run_job_with`] and [`Finish::default`].
pub fn run_job(config: JobConfig, progress: Arc<Progress>) -> Result<RunOutcome, JobError> {
    run_job_with(config, Finish::default(), progress)
}

/// Runs a job in this process (one of possibly several), ending it as [`crate::finish`]
/// says with `finish` (`--index`, `--against`), and returns what happened.
///
/// On success the output directory holds every part, `summary.json` and `_SUCCESS`. If any
/// worker reported an error (or the step before `_SUCCESS` failed), the summary lists them,
/// no `_SUCCESS` is written, and [`JobError::Failed`] is returned.
///
/// The directories the job writes are locked for its whole length (see
/// [`neardup_io::lock`]): the output and `--write-dedup` directories by the process that
/// prepares them (process 0), each process's spill directory by that process. A job
/// running in this process can be stopped from outside with [`output::stop::stop`].
pub fn run_job_with(
    mut config: JobConfig,
    finish: Finish,
    progress: Arc<Progress>,
) -> Result<RunOutcome, JobError> {
    crate::config::validate(&config)?;
    // Outputs in a store: written through staging directories (see output::in_store),
    // removed when `_staging` goes, at the end of this function whatever its result.
    let _staging = output::in_store::stage(&mut config)?;
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
    let finish = Arc::new(finish);
    let mut held = Held::default();
    if config.parallelism.processes() == 1 {
        prepare(&config, &mut held)?;
        lock_spill(&config, &mut held)?;
        let Some(registration) = output::stop::register(held.files(&config)) else {
            return Err(stopped_error());
        };
        let result = run_timely(config.clone(), progress, &registration, None, finish);
        let result = crate::finish::dedup::after_success(&config, result, lead);
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
        || prepare(&config, &mut held).and_then(|()| lock_spill(&config, &mut held)),
    )?;
    if !lead {
        let prepared =
            prepare_staging(&config, &mut held).and_then(|()| lock_spill(&config, &mut held));
        if let Err(e) = prepared {
            control.abort(&format!("process {}: {e}", config.parallelism.process));
            return Err(e);
        }
    }
    let Some(registration) = output::stop::register(held.files(&config)) else {
        control.abort("stopped before it started");
        return Err(stopped_error());
    };
    let sockets = control.take_data_connections();
    let result = run_timely(
        config.clone(),
        progress,
        &registration,
        Some(sockets),
        finish,
    );
    match &result {
        // Every process learns a job failure from the merged summary: a clean goodbye.
        Ok(_) | Err(JobError::Failed(_)) => control.finish(),
        // A failure only this process knows: stop the others now.
        Err(e) => control.abort(&e.to_string()),
    }
    let result = crate::finish::dedup::after_success(&config, result, lead);
    held.release(&config);
    result
}

/// Checks, locks and prepares the directories the job writes (process 0): the output
/// directory, and `--write-dedup`'s with it, before the work, not after it; then records
/// the job for `--resume`.
fn prepare(config: &JobConfig, held: &mut Held) -> Result<(), JobError> {
    // Store directories first: their locks before anything is changed anywhere.
    let store_locks = output::in_store::prepare(config, |staged| {
        protected(config, staged.staging != config.output)
    })?;
    let run_protect = protected(config, false);
    let run_tables = output_tables(config);
    let dedup_protect = protected(config, true);
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
            let mut prepared =
                neardup_io::run_dir::prepare_resume(&targets[0], &[output::Table::Fingerprints])?;
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
        crate::config::resume::write_record(config)?;
    }
    held.publishing = Some(output::in_store::Publishing::start(config, store_locks));
    Ok(())
}

/// Prepares this process's staging directories of store outputs (a process other than 0:
/// process 0 prepares its own with the store's, in [`prepare`]).
fn prepare_staging(config: &JobConfig, held: &mut Held) -> Result<(), JobError> {
    if config.staged.is_empty() {
        return Ok(());
    }
    let tables = output_tables(config);
    let targets: Vec<output::Target> = config
        .staged
        .iter()
        .map(|staged| output::Target {
            dir: &staged.staging,
            tables: if staged.staging == config.output {
                &tables
            } else {
                &[]
            },
            protect: &[],
            what: staged.what,
        })
        .collect();
    held.outputs = Some(output::prepare(&targets, false)?);
    held.publishing = Some(output::in_store::Publishing::start(config, Vec::new()));
    Ok(())
}

/// What a job holds while it runs: the locks of its output directories (process 0) and of
/// this process's spill directory.
#[derive(Default)]
struct Held {
    outputs: Option<output::Prepared>,
    /// Outputs in a store: the staging directories published, the store locks.
    publishing: Option<output::in_store::Publishing>,
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
        drop(self.publishing);
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
    finish: Arc<Finish>,
) -> Result<RunOutcome, JobError> {
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
        templates: Default::default(),
        start: Instant::now(),
    });
    registration.running(Arc::downgrade(&shared));
    let guards = timely::execute::execute_from(
        allocators,
        others,
        timely::WorkerConfig::default(),
        move |worker| crate::pipeline::run_worker(worker, shared.clone(), finish.clone()),
    )
    .map_err(JobError::Cluster)?;
    let mut summary: Option<JobSummary> = None;
    let mut finished: Option<Finished> = None;
    for result in guards.join() {
        match result {
            Ok(Some((s, f))) => {
                summary = summary.or(Some(s));
                finished = finished.or(f);
            }
            Ok(None) => {}
            Err(panic) => return Err(JobError::Cluster(format!("a worker failed: {panic}"))),
        }
    }
    let summary =
        summary.ok_or_else(|| JobError::Cluster("no worker returned a summary".into()))?;
    if !summary.succeeded() {
        return Err(JobError::Failed(Box::new(summary)));
    }
    let finished = finished.unwrap_or_default();
    Ok(RunOutcome {
        summary,
        against: finished.against,
        index: finished.index,
        dedup: None,
    })
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
