//! Where each worker's time goes, operator by operator: a diagnostic for scaling work.
//!
//! The summary's `stage_seconds` say when each stage ended; they do not say which worker
//! held a stage up, nor whether it was working or waiting. Timely logs every time it
//! schedules an operator and every time a worker parks. With `NEARDUP_OPERATOR_PROFILE=PATH`
//! set, each worker adds those events up and, at the end of its dataflows, writes one file
//! `PATH.<worker>.tsv` (the worker's global index) with a row per operator: its address
//! and name, how often it was scheduled, the seconds it ran, and when (seconds since the
//! job started) it first started and last stopped; a row `(parked)` gives the seconds the
//! worker slept waiting for work. `scripts/bench/operator_profile.py` puts the files
//! together. The simple equivalent is timely's own log stream captured and replayed; this
//! keeps only the sums, a few dozen rows per worker, so it costs little enough to leave on
//! in a timed run.
//!
//! Nested scopes are scheduled inside their parent: a row whose address is a prefix of
//! another's includes that one's time.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use timely::logging::{ParkEvent, StartStop, TimelyEvent, TimelyEventBuilder};
use timely::worker::Worker;

/// The environment variable that turns the profile on: the path the files are named after.
pub const PROFILE_ENV: &str = "NEARDUP_OPERATOR_PROFILE";

/// One operator's sums.
#[derive(Default)]
struct Operator {
    addr: Vec<usize>,
    name: String,
    activations: u64,
    busy: Duration,
    first: Option<Duration>,
    last: Duration,
    started: Option<Duration>,
}

#[derive(Default)]
struct Sums {
    operators: BTreeMap<usize, Operator>,
    parked: Duration,
    parked_since: Option<Duration>,
}

impl Sums {
    fn take(&mut self, at: Duration, event: &TimelyEvent) {
        match event {
            TimelyEvent::Operates(op) => {
                let entry = self.operators.entry(op.id).or_default();
                entry.addr = op.addr.clone();
                entry.name = op.name.clone();
            }
            TimelyEvent::Schedule(s) => {
                let entry = self.operators.entry(s.id).or_default();
                match s.start_stop {
                    StartStop::Start => {
                        entry.started = Some(at);
                        entry.first.get_or_insert(at);
                    }
                    StartStop::Stop => {
                        if let Some(start) = entry.started.take() {
                            entry.activations += 1;
                            entry.busy += at.saturating_sub(start);
                            entry.last = at;
                        }
                    }
                }
            }
            TimelyEvent::Park(ParkEvent::Park(_)) => self.parked_since = Some(at),
            TimelyEvent::Park(ParkEvent::Unpark) => {
                if let Some(since) = self.parked_since.take() {
                    self.parked += at.saturating_sub(since);
                }
            }
            _ => {}
        }
    }
}

/// A worker's profile under way (see the module docs).
pub struct OperatorProfile {
    path: PathBuf,
    sums: Rc<RefCell<Sums>>,
    /// Seconds from the job's start to the worker's timer, which the events count from.
    offset: f64,
}

impl OperatorProfile {
    /// Starts the profile on `worker` when [`PROFILE_ENV`] names a path; call before the
    /// worker builds any dataflow. `job_start` is what the summary's stage times count from.
    pub fn start(worker: &mut Worker, job_start: Instant) -> Option<Self> {
        let path = std::env::var_os(PROFILE_ENV)?;
        let timer = worker.timer()?;
        let offset = timer
            .checked_duration_since(job_start)
            .map_or(0.0, |d| d.as_secs_f64());
        let sums = Rc::new(RefCell::new(Sums::default()));
        let taker = sums.clone();
        worker.log_register()?.insert::<TimelyEventBuilder, _>(
            "timely",
            move |_, batch: &mut Option<Vec<(Duration, TimelyEvent)>>| {
                if let Some(events) = batch {
                    let mut sums = taker.borrow_mut();
                    for (at, event) in events.iter() {
                        sums.take(*at, event);
                    }
                }
            },
        );
        let mut name = path;
        name.push(format!(".{}.tsv", worker.index()));
        Some(OperatorProfile {
            path: PathBuf::from(name),
            sums,
            offset,
        })
    }

    /// Flushes the log and writes the worker's file. A failure to write is reported on
    /// stderr and does not fail the run: the profile is a diagnostic.
    pub fn finish(self, worker: &mut Worker) {
        if let Some(mut registry) = worker.log_register() {
            registry.flush();
            registry.remove("timely");
        }
        let index = worker.index();
        let sums = self.sums.borrow();
        let mut text = String::from(
            "worker\tid\taddr\tname\tactivations\tbusy_s\tfirst_start_s\tlast_stop_s\n",
        );
        for (id, op) in &sums.operators {
            let addr: Vec<String> = op.addr.iter().map(usize::to_string).collect();
            text.push_str(&format!(
                "{index}\t{id}\t{}\t{}\t{}\t{:.6}\t{:.6}\t{:.6}\n",
                addr.join("."),
                op.name,
                op.activations,
                op.busy.as_secs_f64(),
                op.first.map_or(0.0, |d| d.as_secs_f64()) + self.offset,
                op.last.as_secs_f64() + self.offset,
            ));
        }
        text.push_str(&format!(
            "{index}\t-\t-\t(parked)\t0\t{:.6}\t0\t0\n",
            sums.parked.as_secs_f64()
        ));
        let written =
            std::fs::File::create(&self.path).and_then(|mut f| f.write_all(text.as_bytes()));
        if let Err(e) = written {
            eprintln!("neardup: the operator profile {}: {e}", self.path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use timely::logging::{OperatesEvent, ScheduleEvent};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn sums_pair_starts_with_stops_and_count_parking() {
        let mut sums = Sums::default();
        let operates = OperatesEvent {
            id: 3,
            addr: vec![0, 2],
            name: "Search".into(),
        };
        sums.take(ms(0), &TimelyEvent::Operates(operates));
        sums.take(ms(10), &TimelyEvent::Schedule(ScheduleEvent::start(3)));
        sums.take(ms(15), &TimelyEvent::Schedule(ScheduleEvent::stop(3)));
        sums.take(ms(15), &TimelyEvent::Park(ParkEvent::park(None)));
        sums.take(ms(40), &TimelyEvent::Park(ParkEvent::unpark()));
        sums.take(ms(50), &TimelyEvent::Schedule(ScheduleEvent::start(3)));
        sums.take(ms(57), &TimelyEvent::Schedule(ScheduleEvent::stop(3)));
        // A stop without its start (the log began mid-activation) adds nothing.
        sums.take(ms(60), &TimelyEvent::Schedule(ScheduleEvent::stop(3)));
        let op = &sums.operators[&3];
        assert_eq!((op.name.as_str(), op.addr.clone()), ("Search", vec![0, 2]));
        assert_eq!(op.activations, 2);
        assert_eq!(op.busy, ms(12));
        assert_eq!((op.first, op.last), (Some(ms(10)), ms(57)));
        assert_eq!(sums.parked, ms(25));
    }
}
