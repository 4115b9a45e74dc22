//! Fail-stop: how the control plane ends a job it finds lost. The library never ends the
//! process itself; it hands the reason to the program's [`FatalHook`]. A panicking worker
//! (timely panics on a lost connection) waits for the heartbeat to name the lost peer, and
//! [`interrupt`] tells the other processes that this one was stopped by a signal.
//!
//! The state here is global because a panic hook and a signal handler have no other way to
//! reach the running job.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::thread;
use std::time::Duration;

use super::link::Sender;

/// The program's way to stop the whole process when the control plane finds the job lost:
/// called with the reason, from a heartbeat thread or the panic hook. It is expected not to
/// return (e.g. print and `std::process::exit(1)`).
#[derive(Clone)]
pub struct FatalHook(Arc<dyn Fn(&str) + Send + Sync>);

impl FatalHook {
    pub fn new(hook: impl Fn(&str) + Send + Sync + 'static) -> Self {
        FatalHook(Arc::new(hook))
    }
}

impl std::fmt::Debug for FatalHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FatalHook")
    }
}

impl PartialEq for FatalHook {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for FatalHook {}

/// Set while a multi-process job runs: the panic hook then leaves the diagnosis to the
/// control plane (timely panics on a lost connection before saying which peer it was).
pub(super) static ACTIVE: AtomicBool = AtomicBool::new(false);

/// The running job's hook, for the panic hook (which has no other way to reach it).
pub(super) static FATAL: Mutex<Option<FatalHook>> = Mutex::new(None);

/// The running heartbeat's state and connections, for [`interrupt`] (a signal handler's
/// thread has no other way to reach them).
type Heartbeat = (Arc<AtomicBool>, Vec<Arc<Mutex<Sender>>>);
pub(super) static RUNNING: Mutex<Option<Heartbeat>> = Mutex::new(None);

/// Tells the other processes of the running job that this one stops for `reason` (e.g.
/// "process 1 (host:port) was interrupted by SIGTERM"), and ends the heartbeat so that
/// their going away is not reported as a lost peer. They stop at once, naming the reason.
/// Does nothing if no multi-process job runs.
pub fn interrupt(reason: &str) {
    let running = RUNNING.lock().ok().and_then(|mut r| r.take());
    if let Some((done, peers)) = running {
        done.store(true, Ordering::SeqCst);
        ACTIVE.store(false, Ordering::SeqCst);
        for sender in &peers {
            if let Ok(mut s) = sender.lock() {
                // Signed like every heartbeat line when the job has a secret.
                let _ = s.send(&format!("abort {reason}"));
            }
        }
    }
}

/// The fail-stop of the whole job: hands the reason to the program's hook, which ends the
/// process; without one, says it and returns (the caller's thread then ends).
pub(super) fn fail(hook: Option<&FatalHook>, message: &str) {
    match hook {
        Some(hook) => (hook.0)(message),
        None => eprintln!("error: {message}; no _SUCCESS was written"),
    }
}

pub(super) fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if ACTIVE.load(Ordering::SeqCst) {
                // Give the heartbeat a moment to name the lost peer and exit.
                thread::sleep(Duration::from_secs(3));
                default(info);
                let hook = FATAL.lock().ok().and_then(|h| h.clone());
                fail(
                    hook.as_ref(),
                    "a worker failed (see the panic above); a peer process was probably lost",
                );
                return;
            }
            default(info);
        }));
    });
}
