//! The heartbeat: once the handshake is done, every link stays open and carries a line every
//! [`HEARTBEAT_INTERVAL`] each way (see "Heartbeat" in the [module docs](super)). A reader
//! thread per link turns a closed connection, a silence of `peer_timeout` or an `abort` line
//! into the reason the job stops, tells the others, and hands the reason to the program's
//! hook. [`Control`] is the running heartbeat: it ends it after a completed run (`bye`) or
//! a failed one (`abort`).

use std::io::BufReader;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::auth::LineKey;
use super::config::ControlConfig;
use super::link::{read_line, Joined, Sender};
use super::stop::{fail, ACTIVE, RUNNING};

/// How often heartbeats are sent.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
/// A test hook: `I-J` (e.g. `1-2`) silences the heartbeat link between processes I and J
/// in both directions, as a partition between them would (their timely connection, which a
/// test cannot cut, stays up). Used by tests/cluster_mesh.rs.
pub const DROP_LINK_ENV: &str = "NEARDUP_TEST_DROP_LINK";

/// The running heartbeat; [`Control::finish`] ends it cleanly.
pub struct Control {
    pub(super) done: Arc<AtomicBool>,
    pub(super) peers: Vec<Arc<Mutex<Sender>>>,
    /// The connections timely runs the job over, one per other process in process order
    /// (`None` for this one), handed over once by [`Control::take_data_connections`].
    pub(super) data: Vec<Option<TcpStream>>,
}

/// Whether the test hook [`DROP_LINK_ENV`] silences the link between `a` and `b`.
fn link_dropped(a: usize, b: usize) -> bool {
    let Ok(spec) = std::env::var(DROP_LINK_ENV) else {
        return false;
    };
    let Some((x, y)) = spec.split_once('-') else {
        return false;
    };
    let (Ok(x), Ok(y)) = (x.trim().parse::<usize>(), y.trim().parse::<usize>()) else {
        return false;
    };
    (x, y) == (a, b) || (x, y) == (b, a)
}

/// A heartbeat connection being set up: the peer's index, the sending end, the reading end
/// and the key that opens the peer's lines.
type Peer = (
    usize,
    Arc<Mutex<Sender>>,
    BufReader<TcpStream>,
    Option<LineKey>,
);

/// Starts a sender thread (a line every second to every peer) and a reader thread per peer.
/// `me` is this process's index.
pub(super) fn start_heartbeat(
    joined: Vec<(usize, Joined)>,
    me: usize,
    addresses: &[String],
    config: &ControlConfig,
    relay: bool,
) -> Control {
    let done = Arc::new(AtomicBool::new(false));
    let mut peers: Vec<Peer> = Vec::new();
    for (i, j) in joined {
        let keys = config.secret.as_ref().map(|secret| {
            let key =
                |from, to| LineKey::new(secret, from, to, &j.lead_challenge, &j.follow_challenge);
            (key(me, i), key(i, me))
        });
        let (send_key, receive_key) = match keys {
            Some((send, receive)) => (Some(send), Some(receive)),
            None => (None, None),
        };
        let sender = Sender {
            stream: j.stream,
            key: send_key,
            muted: link_dropped(me, i),
        };
        peers.push((i, Arc::new(Mutex::new(sender)), j.reader, receive_key));
    }
    let all: Vec<Arc<Mutex<Sender>>> = peers.iter().map(|(_, s, _, _)| s.clone()).collect();
    for (i, _, reader, key) in peers {
        let (done, all, addr, timeout, hook) = (
            done.clone(),
            all.clone(),
            addresses[i].clone(),
            config.peer_timeout,
            config.on_fatal.clone(),
        );
        thread::spawn(move || {
            let deaf = link_dropped(me, i);
            let found = watch(reader, key, i, &addr, timeout, &done, &all, relay, deaf);
            if let Some(reason) = found {
                fail(hook.as_ref(), &reason);
            }
        });
    }
    {
        let (done, all) = (done.clone(), all.clone());
        thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                for sender in &all {
                    if let Ok(mut s) = sender.lock() {
                        let _ = s.send("hb");
                    }
                }
                thread::sleep(HEARTBEAT_INTERVAL);
            }
        });
    }
    if let Ok(mut running) = RUNNING.lock() {
        *running = Some((done.clone(), all.clone()));
    }
    Control {
        done,
        peers: all,
        data: Vec::new(),
    }
}

/// Reads one peer's lines until it says bye; anything else is the reason the job must stop
/// (returned, after the others were told). With a key, a line whose MAC does not verify is
/// dropped (and said once): it did not come from the peer.
///
/// `deaf`: the test hook [`DROP_LINK_ENV`] cut this link, and like a real partition it
/// delivers nothing, not even the close of the peer's socket when the peer exits (which
/// would otherwise race with the relay through process 0 and name a different cause).
#[allow(clippy::too_many_arguments)]
fn watch(
    mut reader: BufReader<TcpStream>,
    mut key: Option<LineKey>,
    i: usize,
    addr: &str,
    timeout: Duration,
    done: &AtomicBool,
    all: &[Arc<Mutex<Sender>>],
    relay: bool,
    deaf: bool,
) -> Option<String> {
    let _ = reader.get_ref().set_read_timeout(Some(timeout));
    let mut warned = false;
    let cause = loop {
        if deaf {
            let silent_since = Instant::now();
            while silent_since.elapsed() < timeout {
                if done.load(Ordering::SeqCst) {
                    return None;
                }
                thread::sleep(Duration::from_millis(20));
            }
            break format!(
                "no heartbeat for {} s (frozen or unreachable)",
                timeout.as_secs()
            );
        }
        let sealed = match read_line(&mut reader) {
            Ok(Some(line)) => line,
            Ok(None) => break "its connection closed (the process died or was killed)".to_string(),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break format!(
                    "no heartbeat for {} s (frozen or unreachable)",
                    timeout.as_secs()
                )
            }
            Err(e) => break format!("its connection broke: {e}"),
        };
        let line = match key.as_mut() {
            Some(key) => match key.open(&sealed) {
                Some(line) => line.to_string(),
                None => {
                    if !warned {
                        eprintln!(
                            "neardup: dropped a control line from process {i} ({addr}) that is \
                             not signed with this job's secret"
                        );
                        warned = true;
                    }
                    continue;
                }
            },
            None => sealed,
        };
        match line.as_str() {
            "hb" => continue,
            "bye" => return None,
            line => match line.strip_prefix("abort ") {
                Some(reason) => {
                    // An interrupted process says so itself ("process I (...) was
                    // interrupted by SIGTERM"): relayed as it is.
                    if relay && reason.starts_with(&format!("process {i} ")) {
                        break reason.to_string();
                    }
                    if relay {
                        break format!("process {i} ({addr}) failed: {reason}");
                    }
                    // This process stops itself (a signal: `stop::interrupt` set `done`
                    // before telling the others), and process 0 passes its own abort back:
                    // the signal's handler ends the process, with the signal's exit code.
                    if done.load(Ordering::SeqCst) {
                        return None;
                    }
                    return Some(format!("the job was stopped: {reason}"));
                }
                None => continue,
            },
        }
    };
    if done.load(Ordering::SeqCst) {
        return None;
    }
    let reason = if cause.starts_with("process ") {
        cause
    } else {
        format!("lost process {i} ({addr}): {cause}")
    };
    // Tell everyone else before going (process 0 relays to all; others tell process 0).
    for sender in all {
        if let Ok(mut s) = sender.lock() {
            let _ = s.send(&format!("abort {reason}"));
        }
    }
    Some(reason)
}

impl Control {
    /// The connections timely runs the job over (see `connect_data`): one per other
    /// process, in process order, `None` at this process's own place.
    pub fn take_data_connections(&mut self) -> Vec<Option<TcpStream>> {
        std::mem::take(&mut self.data)
    }

    /// No longer the running heartbeat of [`interrupt`](super::interrupt).
    fn forget(&self) {
        if let Ok(mut running) = RUNNING.lock() {
            if running
                .as_ref()
                .is_some_and(|(done, _)| Arc::ptr_eq(done, &self.done))
            {
                *running = None;
            }
        }
    }

    /// Ends the heartbeat after a completed run: peers are told `bye`, so closing the
    /// connections is not mistaken for a failure.
    pub fn finish(self) {
        self.forget();
        self.done.store(true, Ordering::SeqCst);
        ACTIVE.store(false, Ordering::SeqCst);
        for sender in &self.peers {
            if let Ok(mut s) = sender.lock() {
                let _ = s.send("bye");
            }
        }
    }

    /// Reports a failure of this process to the others before it exits non-zero, so they
    /// stop at once rather than waiting for timely or the heartbeat.
    pub fn abort(self, reason: &str) {
        self.forget();
        self.done.store(true, Ordering::SeqCst);
        ACTIVE.store(false, Ordering::SeqCst);
        let line = format!("abort {reason}");
        for sender in &self.peers {
            if let Ok(mut s) = sender.lock() {
                let _ = s.send(&line);
            }
        }
    }
}
