//! The control plane of a multi-process job: a start-up handshake and a heartbeat, beside
//! timely's own connections.
//!
//! timely alone has no fault handling (see docs/deploy.md): a missing process makes everyone
//! wait forever, a process with other flags panics with an index error, a frozen or
//! partitioned host leaves the others blocked forever. So before timely starts:
//!
//! 1. **Rendezvous.** Every other process connects to process 0's hostfile address and sends
//!    a hello line: the protocol name, the job id and the job fingerprint (version,
//!    parameters, inputs, worker counts, hostfile). Process 0 ignores connections that do
//!    not speak the protocol or belong to another job, refuses a fingerprint that differs
//!    from its own (naming the process and the fields), and waits at most
//!    `connect_timeout` for everyone (naming who never came). Then it prepares the output
//!    directory, closes its listener (so timely can bind the port) and tells everyone to go.
//! 2. **Heartbeat.** The connections stay open: process 0 and every other process send each
//!    other a line every second. A closed connection (a killed process) or `peer_timeout`
//!    of silence (a frozen or unreachable one) ends this process with an error naming the
//!    lost process, after telling the others (process 0 relays it), so every process exits
//!    non-zero and nobody writes `_SUCCESS`. A finished process says `bye` first.
//!
//! The library never ends the process itself: timely's workers may be blocked on a lost
//! connection, so only the program can stop them, and it says how through the
//! [`FatalHook`] in [`ControlConfig::on_fatal`] (the `neardup` binary prints the reason and
//! exits 1). Without a hook the reason is printed and the process is left to timely.
//!
//! The design is fail-stop: a failed job is rerun (with `--overwrite`), never repaired.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::JobError;

/// The protocol name every hello starts with.
pub const PROTOCOL: &str = "neardup-control/1";
/// How long process 0 waits for everyone by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a silent peer is tolerated by default.
pub const DEFAULT_PEER_TIMEOUT: Duration = Duration::from_secs(60);
/// How often heartbeats are sent.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
/// How long a new connection may take to say hello before it is dropped.
const HELLO_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the other processes wait after "go" before timely connects (see `follow`).
const TIMELY_BIND_GRACE: Duration = Duration::from_millis(300);
/// The longest hello line accepted.
const MAX_LINE: u64 = 1 << 20;

/// Control-plane settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlConfig {
    pub connect_timeout: Duration,
    pub peer_timeout: Duration,
    /// Processes with different job ids never join each other.
    pub job_id: String,
    /// What to do when the job must stop at once (a lost or failed peer).
    pub on_fatal: Option<FatalHook>,
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            peer_timeout: DEFAULT_PEER_TIMEOUT,
            job_id: String::new(),
            on_fatal: None,
        }
    }
}

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

#[derive(Serialize, Deserialize, Debug)]
struct Hello {
    protocol: String,
    job_id: String,
    process: usize,
    fingerprint: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Debug)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Reply {
    Go,
    Abort { reason: String },
}

/// The running heartbeat; [`Control::finish`] ends it cleanly.
pub struct Control {
    done: Arc<AtomicBool>,
    peers: Vec<Arc<Mutex<TcpStream>>>,
}

/// Set while a multi-process job runs: the panic hook then leaves the diagnosis to the
/// control plane (timely panics on a lost connection before saying which peer it was).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// The running job's hook, for the panic hook (which has no other way to reach it).
static FATAL: Mutex<Option<FatalHook>> = Mutex::new(None);

/// The running heartbeat's state and connections, for [`interrupt`] (a signal handler's
/// thread has no other way to reach them).
type Heartbeat = (Arc<AtomicBool>, Vec<Arc<Mutex<TcpStream>>>);
static RUNNING: Mutex<Option<Heartbeat>> = Mutex::new(None);

/// Tells the other processes of the running job that this one stops for `reason` (e.g.
/// "process 1 (host:port) was interrupted by SIGTERM"), and ends the heartbeat so that
/// their going away is not reported as a lost peer. They stop at once, naming the reason.
/// Does nothing if no multi-process job runs.
pub fn interrupt(reason: &str) {
    let running = RUNNING.lock().ok().and_then(|mut r| r.take());
    if let Some((done, peers)) = running {
        done.store(true, Ordering::SeqCst);
        ACTIVE.store(false, Ordering::SeqCst);
        for stream in &peers {
            if let Ok(mut s) = stream.lock() {
                let _ = send_line(&mut s, &format!("abort {reason}"));
            }
        }
    }
}

/// The fail-stop of the whole job: hands the reason to the program's hook, which ends the
/// process; without one, says it and returns (the caller's thread then ends).
fn fail(hook: Option<&FatalHook>, message: &str) {
    match hook {
        Some(hook) => (hook.0)(message),
        None => eprintln!("error: {message}; no _SUCCESS was written"),
    }
}

fn install_panic_hook() {
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

fn resolve(address: &str) -> Result<SocketAddr, JobError> {
    address
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| JobError::Cluster(format!("cannot resolve hostfile address {address:?}")))
}

fn send_line(stream: &mut TcpStream, line: &str) -> std::io::Result<()> {
    stream.write_all(line.as_bytes())?;
    stream.write_all(b"\n")?;
    stream.flush()
}

/// Reads one line of at most `MAX_LINE` bytes; `None` at end of stream.
fn read_line(reader: &mut impl BufRead) -> std::io::Result<Option<String>> {
    let mut line = String::new();
    let n = reader.by_ref().take(MAX_LINE).read_line(&mut line)?;
    Ok((n > 0).then(|| line.trim_end().to_string()))
}

/// The fields in which two fingerprints differ, as `field (ours vs theirs)`.
fn differences(ours: &BTreeMap<String, Value>, theirs: &BTreeMap<String, Value>) -> Vec<String> {
    let keys: std::collections::BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
    keys.into_iter()
        .filter(|k| ours.get(*k) != theirs.get(*k))
        .map(|k| {
            let show = |v: Option<&Value>| v.map_or("missing".to_string(), |v| v.to_string());
            format!("{k} ({} vs {})", show(ours.get(k)), show(theirs.get(k)))
        })
        .collect()
}

/// Runs the start-up handshake. `prepare` runs on process 0 once everyone has arrived and
/// agreed, before anyone starts (it prepares the output directory).
pub fn rendezvous(
    addresses: &[String],
    process: usize,
    config: &ControlConfig,
    fingerprint: BTreeMap<String, Value>,
    prepare: impl FnOnce() -> Result<(), JobError>,
) -> Result<Control, JobError> {
    install_panic_hook();
    if let Ok(mut hook) = FATAL.lock() {
        hook.clone_from(&config.on_fatal);
    }
    let control = if process == 0 {
        lead(addresses, config, &fingerprint, prepare)?
    } else {
        follow(addresses, process, config, fingerprint)?
    };
    ACTIVE.store(true, Ordering::SeqCst);
    Ok(control)
}

/// Process 0: wait for everyone, check them, prepare, say go.
fn lead(
    addresses: &[String],
    config: &ControlConfig,
    fingerprint: &BTreeMap<String, Value>,
    prepare: impl FnOnce() -> Result<(), JobError>,
) -> Result<Control, JobError> {
    let listener = TcpListener::bind(resolve(&addresses[0])?).map_err(|e| {
        JobError::Cluster(format!("process 0 cannot listen on {}: {e}", addresses[0]))
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| JobError::Cluster(e.to_string()))?;
    let deadline = Instant::now() + config.connect_timeout;
    let mut peers: Vec<Option<TcpStream>> = (0..addresses.len()).map(|_| None).collect();
    let abort_all = |peers: &mut Vec<Option<TcpStream>>, reason: &str| {
        let reply = serde_json::to_string(&Reply::Abort {
            reason: reason.to_string(),
        })
        .expect("serializable");
        for stream in peers.iter_mut().flatten() {
            let _ = send_line(stream, &reply);
        }
    };
    while peers.iter().skip(1).any(Option::is_none) {
        if Instant::now() >= deadline {
            let missing: Vec<String> = (1..addresses.len())
                .filter(|&i| peers[i].is_none())
                .map(|i| format!("process {i} ({})", addresses[i]))
                .collect();
            let reason = format!(
                "{} did not connect within {} s",
                missing.join(", "),
                config.connect_timeout.as_secs()
            );
            abort_all(&mut peers, &reason);
            return Err(JobError::Cluster(reason));
        }
        let (stream, from) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(e) => {
                return Err(JobError::Cluster(format!(
                    "process 0 accepting connections: {e}"
                )))
            }
        };
        match admit(stream, from, addresses, config, fingerprint, &peers) {
            Ok(Some((i, stream))) => peers[i] = Some(stream),
            Ok(None) => {}
            Err(reason) => {
                abort_all(&mut peers, &reason);
                return Err(JobError::Cluster(reason));
            }
        }
    }
    if let Err(e) = prepare() {
        abort_all(&mut peers, &e.to_string());
        return Err(e);
    }
    // Close the listener before anyone starts, so timely can bind the port and no timely
    // connection lands in our backlog.
    drop(listener);
    let go = serde_json::to_string(&Reply::Go).expect("serializable");
    let mut streams = Vec::new();
    for (i, stream) in peers.into_iter().enumerate().skip(1) {
        let mut stream = stream.expect("all arrived");
        send_line(&mut stream, &go).map_err(|e| {
            JobError::Cluster(format!(
                "process {i} ({}) went away at start-up: {e}",
                addresses[i]
            ))
        })?;
        streams.push((i, stream));
    }
    Ok(start_heartbeat(streams, addresses, config, true))
}

/// Reads a connection's hello. `Ok(None)`: a foreign connection, ignored. `Err`: a process
/// of this job that does not match (the job must stop).
fn admit(
    stream: TcpStream,
    from: SocketAddr,
    addresses: &[String],
    config: &ControlConfig,
    fingerprint: &BTreeMap<String, Value>,
    peers: &[Option<TcpStream>],
) -> Result<Option<(usize, TcpStream)>, String> {
    let ignore = |why: &str| {
        eprintln!("neardup: ignored a connection from {from}: {why}");
        Ok(None)
    };
    if stream.set_nonblocking(false).is_err()
        || stream.set_read_timeout(Some(HELLO_TIMEOUT)).is_err()
    {
        return ignore("cannot configure the socket");
    }
    let mut reader = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
    let hello: Hello = match read_line(&mut reader) {
        Ok(Some(line)) => match serde_json::from_str(&line) {
            Ok(h) => h,
            Err(_) => return ignore("not the neardup control protocol"),
        },
        Ok(None) => return ignore("closed without a hello"),
        Err(_) => return ignore("no hello in time"),
    };
    if hello.protocol != PROTOCOL {
        return ignore(&format!(
            "protocol {:?}, expected {PROTOCOL}",
            hello.protocol
        ));
    }
    if hello.job_id != config.job_id {
        return ignore(&format!(
            "another job ({:?}, this is {:?})",
            hello.job_id, config.job_id
        ));
    }
    let i = hello.process;
    let refusal = if i == 0 || i >= addresses.len() {
        Some(format!(
            "a process from {from} says it is process {i}, but the hostfile has {} processes",
            addresses.len()
        ))
    } else if peers[i].is_some() {
        Some(format!(
            "two processes say they are process {i} (the second from {from})"
        ))
    } else {
        let diff = differences(fingerprint, &hello.fingerprint);
        (!diff.is_empty()).then(|| {
            format!(
                "process {i} ({}) was started differently from process 0: {}",
                addresses[i],
                diff.join(", ")
            )
        })
    };
    match refusal {
        None => Ok(Some((i, stream))),
        Some(reason) => {
            // The refused process hears why, like everyone else.
            let reply = serde_json::to_string(&Reply::Abort {
                reason: reason.clone(),
            })
            .expect("serializable");
            let mut stream = stream;
            let _ = send_line(&mut stream, &reply);
            Err(reason)
        }
    }
}

/// Every other process: say hello to process 0 and wait for go.
fn follow(
    addresses: &[String],
    process: usize,
    config: &ControlConfig,
    fingerprint: BTreeMap<String, Value>,
) -> Result<Control, JobError> {
    let deadline = Instant::now() + config.connect_timeout;
    let mut stream = loop {
        // Resolve on every attempt: a scheduler may publish process 0's name only once it runs.
        let attempt = resolve(&addresses[0])
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|lead| TcpStream::connect_timeout(&lead, Duration::from_secs(1)));
        match attempt {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(250)),
            Err(e) => {
                return Err(JobError::Cluster(format!(
                    "process 0 ({}) did not answer within {} s: {e}",
                    addresses[0],
                    config.connect_timeout.as_secs()
                )))
            }
        }
    };
    let hello = Hello {
        protocol: PROTOCOL.into(),
        job_id: config.job_id.clone(),
        process,
        fingerprint,
    };
    send_line(
        &mut stream,
        &serde_json::to_string(&hello).expect("serializable"),
    )
    .map_err(|e| JobError::Cluster(format!("cannot reach process 0 ({}): {e}", addresses[0])))?;
    // Process 0 answers once everyone has arrived: allow its whole wait and some.
    stream
        .set_read_timeout(Some(config.connect_timeout + Duration::from_secs(30)))
        .map_err(|e| JobError::Cluster(e.to_string()))?;
    let mut reader = BufReader::new(
        stream
            .try_clone()
            .map_err(|e| JobError::Cluster(e.to_string()))?,
    );
    let reply = read_line(&mut reader).map_err(|e| {
        JobError::Cluster(format!("process 0 ({}) did not say go: {e}", addresses[0]))
    })?;
    match reply.as_deref().map(serde_json::from_str::<Reply>) {
        Some(Ok(Reply::Go)) => {
            // Process 0 binds its timely port right after saying go; timely's own connect
            // retries only once a second, so give it that moment rather than a retry.
            thread::sleep(TIMELY_BIND_GRACE);
            Ok(start_heartbeat(vec![(0, stream)], addresses, config, false))
        }
        Some(Ok(Reply::Abort { reason })) => Err(JobError::Cluster(format!("process 0 stopped the job: {reason}"))),
        _ => Err(JobError::Cluster(format!("process 0 ({}) closed the connection at start-up (it ignores a process whose job id differs: check --job-id)", addresses[0]))),
    }
}

/// Starts a sender thread (a line every second to every peer) and a reader thread per peer.
fn start_heartbeat(
    streams: Vec<(usize, TcpStream)>,
    addresses: &[String],
    config: &ControlConfig,
    relay: bool,
) -> Control {
    let done = Arc::new(AtomicBool::new(false));
    let peers: Vec<(usize, Arc<Mutex<TcpStream>>)> = streams
        .into_iter()
        .map(|(i, s)| (i, Arc::new(Mutex::new(s))))
        .collect();
    let all: Vec<Arc<Mutex<TcpStream>>> = peers.iter().map(|(_, s)| s.clone()).collect();
    for (i, stream) in &peers {
        let reader = stream.lock().expect("not poisoned").try_clone();
        let Ok(reader) = reader else { continue };
        let (i, done, all, addr, timeout, hook) = (
            *i,
            done.clone(),
            all.clone(),
            addresses[*i].clone(),
            config.peer_timeout,
            config.on_fatal.clone(),
        );
        thread::spawn(move || {
            if let Some(reason) = watch(reader, i, &addr, timeout, &done, &all, relay) {
                fail(hook.as_ref(), &reason);
            }
        });
    }
    {
        let (done, all) = (done.clone(), all.clone());
        thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                for stream in &all {
                    if let Ok(mut s) = stream.lock() {
                        let _ = send_line(&mut s, "hb");
                    }
                }
                thread::sleep(HEARTBEAT_INTERVAL);
            }
        });
    }
    if let Ok(mut running) = RUNNING.lock() {
        *running = Some((done.clone(), all.clone()));
    }
    Control { done, peers: all }
}

/// Reads one peer's lines until it says bye; anything else is the reason the job must stop
/// (returned, after the others were told).
fn watch(
    stream: TcpStream,
    i: usize,
    addr: &str,
    timeout: Duration,
    done: &AtomicBool,
    all: &[Arc<Mutex<TcpStream>>],
    relay: bool,
) -> Option<String> {
    let _ = stream.set_read_timeout(Some(timeout));
    let mut reader = BufReader::new(stream);
    let cause = loop {
        match read_line(&mut reader) {
            Ok(Some(line)) if line == "hb" => continue,
            Ok(Some(line)) if line == "bye" => return None,
            Ok(Some(line)) => match line.strip_prefix("abort ") {
                Some(reason) => {
                    if relay && reason.starts_with(&format!("process {i} ")) {
                        break reason.to_string();
                    }
                    if relay {
                        break format!("process {i} ({addr}) failed: {reason}");
                    }
                    return Some(format!("the job was stopped: {reason}"));
                }
                None => continue,
            },
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
    for stream in all {
        if let Ok(mut s) = stream.lock() {
            let _ = send_line(&mut s, &format!("abort {reason}"));
        }
    }
    Some(reason)
}

impl Control {
    /// No longer the running heartbeat of [`interrupt`].
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
        for stream in &self.peers {
            if let Ok(mut s) = stream.lock() {
                let _ = send_line(&mut s, "bye");
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
        for stream in &self.peers {
            if let Ok(mut s) = stream.lock() {
                let _ = send_line(&mut s, &line);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_name_the_fields() {
        let ours: BTreeMap<String, Value> = [
            ("k".to_string(), Value::from(3)),
            ("w".to_string(), Value::from(1)),
        ]
        .into();
        let theirs: BTreeMap<String, Value> = [
            ("k".to_string(), Value::from(4)),
            ("w".to_string(), Value::from(1)),
        ]
        .into();
        assert_eq!(differences(&ours, &theirs), vec!["k (3 vs 4)"]);
        assert!(differences(&ours, &ours).is_empty());
    }
}
