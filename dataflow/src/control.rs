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
//!    The other processes also watch each other directly, on a **mesh** of the same
//!    heartbeat links between every pair of them (`form_mesh`): each binds a port of its
//!    own (any free one) before its hello, process 0 hands the addresses out with `go`, and
//!    the links form before timely starts. So a partition between processes 1 and 2, which
//!    both still reach process 0, is detected by both within `peer_timeout`: each ends
//!    naming the other, and process 0 stops everyone else.
//!
//! 3. **Authentication** (with a secret, [`ControlConfig::secret`], `--secret-file`). Process
//!    0 opens every connection with a random challenge; the other process answers with its
//!    hello, its own random challenge and an HMAC-SHA256 of both under the secret; process 0
//!    answers `go` (or why not) with an HMAC over the other challenge. A connection whose MAC
//!    is missing or wrong is logged and dropped before anything in its hello is believed, so
//!    a process without the secret can neither join nor stop the job (not even by claiming
//!    to be process 1 twice or sending other parameters: those refusals stop the job, so they
//!    are only made for authenticated processes). Every heartbeat line then carries an HMAC
//!    under a key of its direction and the two challenges, with a sequence number: lines
//!    that do not verify are dropped, and a replayed or forged `abort` does nothing. MACs are
//!    compared in constant time (`hmac`'s `verify_truncated_left`). Without a secret the
//!    protocol is the same with no MACs, and a process that has one refuses a peer that has
//!    none.
//!
//! What the control plane does not cover, precisely:
//!
//! * **timely's own connections.** After `go`, each process binds its hostfile address for
//!   timely, which accepts connections from higher-numbered processes and believes the
//!   first 8 bytes of each (the sender's process index), without any authentication
//!   (timely-communication 0.32, `networking::await_connections`). Until every such
//!   connection has arrived (well under a second after `go` on a LAN), anyone who can
//!   reach that port can take a process's place (the job then fails or hangs until the
//!   heartbeat's timeout) or crash the process with a bad index. Afterwards the listener
//!   is closed. Keep the hostfile ports unreachable from outside the job (a private
//!   network, a firewall, a Kubernetes NetworkPolicy); timely's
//!   `initialize_networking_from_sockets` would let us hand it connections authenticated
//!   here instead, which would close the window.
//! * **A mesh link that cannot be made.** The mesh uses one extra port per process, chosen
//!   by the system; where a firewall lets only the hostfile ports through, the link is not
//!   made, a warning says which, and a partition between those two processes goes unseen
//!   (timely's connection between them blocks, with no timeout) until a wall-clock limit
//!   stops the job. A heartbeat link and timely's connection between the same two
//!   processes are separate TCP connections: a partition that cuts one and not the other
//!   (a firewall rule on one port) is not seen either.
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
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::thread;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;

use crate::JobError;

/// The protocol name every hello starts with.
pub const PROTOCOL: &str = "neardup-control/2";
/// How long process 0 waits for everyone by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a silent peer is tolerated by default.
pub const DEFAULT_PEER_TIMEOUT: Duration = Duration::from_secs(60);
/// How often heartbeats are sent.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
/// How long a new connection may take to say hello before it is dropped.
const HELLO_TIMEOUT: Duration = Duration::from_secs(3);
/// How often process 0 looks for a new connection while it waits for the others (a
/// non-blocking accept; short, so that start-up takes milliseconds, not a second).
const ACCEPT_POLL: Duration = Duration::from_millis(2);
/// How long a process waits before trying process 0 again when it is not listening yet.
const CONNECT_RETRY: Duration = Duration::from_millis(10);
/// What the first line of a data connection (the connections timely runs over) says.
const DATA_LABEL: &[u8] = b"neardup-control/2 data";
/// The longest line a data connection's handshake may send.
const MAX_DATA_LINE: usize = 512;
/// The longest hello line accepted.
const MAX_LINE: u64 = 1 << 20;
/// How long the mesh links between the other processes may take to form after go (they
/// connect at once; the margin is for a loaded machine).
const MESH_TIMEOUT: Duration = Duration::from_secs(10);
/// A test hook: `I-J` (e.g. `1-2`) silences the heartbeat link between processes I and J
/// in both directions, as a partition between them would (their timely connection, which a
/// test cannot cut, stays up). Used by tests/cluster_mesh.rs.
pub const DROP_LINK_ENV: &str = "NEARDUP_TEST_DROP_LINK";

/// Bytes of the random challenges: 256 bits, so a challenge never repeats.
const CHALLENGE_BYTES: usize = 32;
/// Bytes of the MAC kept on each heartbeat line (of SHA-256's 32): 128 bits cannot be guessed,
/// and the lines stay short.
const LINE_MAC_BYTES: usize = 16;

/// Control-plane settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlConfig {
    pub connect_timeout: Duration,
    pub peer_timeout: Duration,
    /// Processes with different job ids never join each other.
    pub job_id: String,
    /// What to do when the job must stop at once (a lost or failed peer).
    pub on_fatal: Option<FatalHook>,
    /// The job's shared secret: with one, only processes that have it can join or speak
    /// (see the module docs, "Authentication").
    pub secret: Option<Secret>,
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            peer_timeout: DEFAULT_PEER_TIMEOUT,
            job_id: String::new(),
            on_fatal: None,
            secret: None,
        }
    }
}

/// A job's shared secret: any bytes, the same in every process (`--secret-file`). Never
/// printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<Vec<u8>>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// A secret of these bytes; refused when empty.
    pub fn new(bytes: Vec<u8>) -> Result<Secret, JobError> {
        if bytes.is_empty() {
            return Err(JobError::Cluster("the secret is empty".into()));
        }
        Ok(Secret(Arc::new(bytes)))
    }

    /// Reads a secret file: its bytes without trailing whitespace (an editor's or `echo`'s
    /// newline). Refused, naming the file, when it is empty or when anyone but its owner may
    /// read or write it (any of the mode bits 0o077): a secret others can read is none.
    pub fn from_file(path: &Path) -> Result<Secret, JobError> {
        let shown = path.display();
        let bytes = neardup_io::secret::read_secret_file(path, "secret file")
            .map_err(|e| JobError::Cluster(e.to_string()))?;
        if bytes.is_empty() {
            return Err(JobError::Cluster(format!(
                "{shown}: the secret file is empty (write a random secret into it, e.g. \
                 `head -c 32 /dev/urandom | base64 > {shown}`)"
            )));
        }
        Ok(Secret(Arc::new(bytes)))
    }

    /// HMAC-SHA256 under the secret of `parts`, each length-prefixed (so that no two lists
    /// of parts hash alike).
    fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        mac_with(&self.0, parts)
    }

    /// Whether `tag` is the MAC of `parts`, compared in constant time.
    fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        verify_with(&self.0, parts, tag)
    }
}

fn hmac_of(key: &[u8], parts: &[&[u8]]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    for part in parts {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    mac
}

fn mac_with(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    hmac_of(key, parts).finalize().into_bytes().into()
}

fn verify_with(key: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
    // `verify_truncated_left` compares the first `tag.len()` bytes in constant time (and
    // refuses an empty tag).
    tag.len() >= LINE_MAC_BYTES && hmac_of(key, parts).verify_truncated_left(tag).is_ok()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// A fresh random challenge from the operating system.
fn challenge() -> Result<Vec<u8>, JobError> {
    let mut bytes = vec![0u8; CHALLENGE_BYTES];
    getrandom::fill(&mut bytes)
        .map_err(|e| JobError::Cluster(format!("no randomness for a challenge: {e}")))?;
    Ok(bytes)
}

/// What a MAC covers: a label saying which message it is, and the message.
const HELLO_LABEL: &[u8] = b"neardup-control/2 hello";
const REPLY_LABEL: &[u8] = b"neardup-control/2 reply";
const LINE_LABEL: &[u8] = b"neardup-control/2 heartbeat";
const MESH_LABEL: &[u8] = b"neardup-control/2 mesh";
const MESH_REPLY_LABEL: &[u8] = b"neardup-control/2 mesh reply";

/// The MAC line that follows a hello or a reply: `mac HEX`, or `mac none` without a secret.
fn mac_line(secret: Option<&Secret>, parts: &[&[u8]]) -> String {
    match secret {
        Some(secret) => format!("mac {}", hex(&secret.mac(parts))),
        None => "mac none".to_string(),
    }
}

/// The authentication of one heartbeat connection, in one direction: a key derived from the
/// secret, the direction and both challenges, and the sequence number of the next line.
struct LineKey {
    key: [u8; 32],
    seq: u64,
}

impl LineKey {
    /// `from`/`to`: process indices; `lead`/`follow`: the two challenges of the handshake.
    fn new(secret: &Secret, from: usize, to: usize, lead: &[u8], follow: &[u8]) -> LineKey {
        let direction = format!("{from}->{to}");
        LineKey {
            key: secret.mac(&[LINE_LABEL, direction.as_bytes(), lead, follow]),
            seq: 0,
        }
    }

    /// `line TAB mac`, the MAC over the sequence number and the line.
    fn seal(&mut self, line: &str) -> String {
        let tag = mac_with(&self.key, &[&self.seq.to_be_bytes(), line.as_bytes()]);
        self.seq += 1;
        format!("{line}\t{}", hex(&tag[..LINE_MAC_BYTES]))
    }

    /// The line of a sealed one, if its MAC is right for the next sequence number.
    fn open<'a>(&mut self, sealed: &'a str) -> Option<&'a str> {
        let (line, tag) = sealed.rsplit_once('\t')?;
        let tag = unhex(tag)?;
        if !verify_with(&self.key, &[&self.seq.to_be_bytes(), line.as_bytes()], &tag) {
            return None;
        }
        self.seq += 1;
        Some(line)
    }
}

/// One heartbeat connection's sending end: the stream and, with a secret, the key that seals
/// every line.
struct Sender {
    stream: TcpStream,
    key: Option<LineKey>,
    /// Silenced by the test hook [`DROP_LINK_ENV`]: nothing is sent.
    muted: bool,
}

impl Sender {
    fn send(&mut self, line: &str) -> std::io::Result<()> {
        if self.muted {
            return Ok(());
        }
        let line = match self.key.as_mut() {
            Some(key) => key.seal(line),
            None => line.to_string(),
        };
        send_line(&mut self.stream, &line)
    }
}

/// A process admitted by the handshake: its connection and both challenges.
struct Joined {
    stream: TcpStream,
    /// The reader of the handshake, which may hold heartbeat lines already read from the
    /// socket (process 0 starts its heartbeat as soon as it says go): the heartbeat must go
    /// on reading from it, or those lines are lost and every later one is out of sequence.
    reader: BufReader<TcpStream>,
    lead_challenge: Vec<u8>,
    follow_challenge: Vec<u8>,
    /// Where the process takes the mesh links of higher-numbered processes (process 0's
    /// view: the address it connected from, and the port of its hello).
    mesh: Option<SocketAddr>,
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
    /// The hello's own challenge (hex), which process 0's reply must be a MAC over.
    challenge: String,
    /// The port where this process takes mesh links (see [`form_mesh`]), if it has one.
    #[serde(default)]
    mesh_port: Option<u16>,
}

#[derive(Serialize, Deserialize, Debug)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Reply {
    Go {
        /// Where each process takes mesh links (`None`: process 0, or one without a
        /// listener); signed with the reply.
        #[serde(default)]
        mesh: Vec<Option<String>>,
    },
    Abort {
        reason: String,
    },
}

/// The running heartbeat; [`Control::finish`] ends it cleanly.
pub struct Control {
    done: Arc<AtomicBool>,
    peers: Vec<Arc<Mutex<Sender>>>,
    /// The connections timely runs the job over, one per other process in process order
    /// (`None` for this one), handed over once by [`Control::take_data_connections`].
    data: Vec<Option<TcpStream>>,
}

/// Set while a multi-process job runs: the panic hook then leaves the diagnosis to the
/// control plane (timely panics on a lost connection before saying which peer it was).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// The running job's hook, for the panic hook (which has no other way to reach it).
static FATAL: Mutex<Option<FatalHook>> = Mutex::new(None);

/// The running heartbeat's state and connections, for [`interrupt`] (a signal handler's
/// thread has no other way to reach them).
type Heartbeat = (Arc<AtomicBool>, Vec<Arc<Mutex<Sender>>>);
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
pub(crate) fn differences(
    ours: &BTreeMap<String, Value>,
    theirs: &BTreeMap<String, Value>,
) -> Vec<String> {
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
    let mut peers: Vec<Option<Joined>> = (0..addresses.len()).map(|_| None).collect();
    let secret = config.secret.as_ref();
    let abort_all = |peers: &mut Vec<Option<Joined>>, reason: &str| {
        let reply = serde_json::to_string(&Reply::Abort {
            reason: reason.to_string(),
        })
        .expect("serializable");
        for joined in peers.iter_mut().flatten() {
            let _ = send_reply(&mut joined.stream, secret, &joined.follow_challenge, &reply);
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
                thread::sleep(ACCEPT_POLL);
                continue;
            }
            Err(e) => {
                return Err(JobError::Cluster(format!(
                    "process 0 accepting connections: {e}"
                )))
            }
        };
        match admit(stream, from, addresses, config, fingerprint, &peers) {
            Ok(Some((i, joined))) => peers[i] = Some(joined),
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
    // The listener stays open: the other processes connect to it again, after go, for the
    // connections timely runs the job over (see `connect_data`).
    let mesh = peers
        .iter()
        .map(|p| p.as_ref().and_then(|j| j.mesh).map(|a| a.to_string()))
        .collect();
    let go = serde_json::to_string(&Reply::Go { mesh }).expect("serializable");
    let mut streams = Vec::new();
    for (i, joined) in peers.into_iter().enumerate().skip(1) {
        let mut joined = joined.expect("all arrived");
        send_reply(&mut joined.stream, secret, &joined.follow_challenge, &go).map_err(|e| {
            JobError::Cluster(format!(
                "process {i} ({}) went away at start-up: {e}",
                addresses[i]
            ))
        })?;
        streams.push((i, joined));
    }
    let control = start_heartbeat(streams, 0, addresses, config, true);
    with_data_connections(control, listener, addresses, 0, config)
}

/// Sends a reply line and its MAC line (over the other process's challenge).
fn send_reply(
    stream: &mut TcpStream,
    secret: Option<&Secret>,
    follow_challenge: &[u8],
    reply: &str,
) -> std::io::Result<()> {
    send_line(stream, reply)?;
    send_line(
        stream,
        &mac_line(secret, &[REPLY_LABEL, follow_challenge, reply.as_bytes()]),
    )
}

/// Opens a connection with a challenge and reads its hello. `Ok(None)`: a foreign connection
/// (another protocol or job, or one that fails authentication), ignored. `Err`: an
/// authenticated process of this job that does not match (the job must stop).
fn admit(
    stream: TcpStream,
    from: SocketAddr,
    addresses: &[String],
    config: &ControlConfig,
    fingerprint: &BTreeMap<String, Value>,
    peers: &[Option<Joined>],
) -> Result<Option<(usize, Joined)>, String> {
    let ignore = |why: &str| {
        eprintln!("neardup: ignored a connection from {from}: {why}");
        Ok(None)
    };
    if stream.set_nonblocking(false).is_err()
        || stream.set_read_timeout(Some(HELLO_TIMEOUT)).is_err()
        || stream.set_write_timeout(Some(HELLO_TIMEOUT)).is_err()
    {
        return ignore("cannot configure the socket");
    }
    let lead_challenge = challenge().map_err(|e| e.to_string())?;
    let mut stream = stream;
    if send_line(&mut stream, &format!("challenge {}", hex(&lead_challenge))).is_err() {
        return ignore("closed before the challenge");
    }
    let mut reader = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
    let (line, mac) = match (read_line(&mut reader), read_line(&mut reader)) {
        (Ok(Some(line)), Ok(Some(mac))) => (line, mac),
        (Ok(_), Ok(_)) => return ignore("closed without a hello"),
        _ => return ignore("no hello in time"),
    };
    let hello: Hello = match serde_json::from_str(&line) {
        Ok(h) => h,
        Err(_) => return ignore("not the neardup control protocol"),
    };
    if hello.protocol != PROTOCOL {
        return ignore(&format!(
            "protocol {:?}, expected {PROTOCOL}",
            hello.protocol
        ));
    }
    // Nothing in the hello is believed before its MAC is checked.
    let tag = mac.strip_prefix("mac ").unwrap_or("");
    match (&config.secret, tag) {
        (Some(_), "none") => {
            return ignore("it has no secret, and this job requires one (--secret-file)")
        }
        (Some(secret), tag) => {
            let parts: [&[u8]; 3] = [HELLO_LABEL, &lead_challenge, line.as_bytes()];
            if !unhex(tag).is_some_and(|tag| secret.verify(&parts, &tag)) {
                return ignore("failed authentication (its secret is not this job's)");
            }
        }
        (None, "none") => {}
        (None, _) => return ignore(
            "it has a secret and this process has none (give every process the same --secret-file)",
        ),
    }
    let Some(follow_challenge) = unhex(&hello.challenge).filter(|c| !c.is_empty()) else {
        return ignore("a hello without a challenge");
    };
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
    let joined = Joined {
        stream,
        reader,
        lead_challenge,
        follow_challenge,
        mesh: hello.mesh_port.map(|port| SocketAddr::new(from.ip(), port)),
    };
    match refusal {
        None => Ok(Some((i, joined))),
        Some(reason) => {
            // The refused process hears why, like everyone else.
            let reply = serde_json::to_string(&Reply::Abort {
                reason: reason.clone(),
            })
            .expect("serializable");
            let mut joined = joined;
            let secret = config.secret.as_ref();
            let _ = send_reply(&mut joined.stream, secret, &joined.follow_challenge, &reply);
            Err(reason)
        }
    }
}

/// Every other process: answer process 0's challenge with a hello and wait for go.
fn follow(
    addresses: &[String],
    process: usize,
    config: &ControlConfig,
    fingerprint: BTreeMap<String, Value>,
) -> Result<Control, JobError> {
    // Listen before saying hello: once process 0 says go, every process's listener is open,
    // so the connections for timely never wait for one.
    let listener = listen(addresses, process)?;
    let deadline = Instant::now() + config.connect_timeout;
    let lead = &addresses[0];
    let closed = || {
        JobError::Cluster(format!(
            "process 0 ({lead}) closed the connection at start-up (it ignores a process whose \
             job id or secret differs: check --job-id and --secret-file; its log says why)"
        ))
    };
    let mut stream = loop {
        // Resolve on every attempt: a scheduler may publish process 0's name only once it runs.
        let attempt = resolve(lead)
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|lead| TcpStream::connect_timeout(&lead, Duration::from_secs(1)));
        match attempt {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => thread::sleep(CONNECT_RETRY),
            Err(e) => {
                return Err(JobError::Cluster(format!(
                    "process 0 ({lead}) did not answer within {} s: {e}",
                    config.connect_timeout.as_secs()
                )))
            }
        }
    };
    // Process 0 answers once everyone has arrived: allow its whole wait and some.
    stream
        .set_read_timeout(Some(config.connect_timeout + Duration::from_secs(30)))
        .map_err(|e| JobError::Cluster(e.to_string()))?;
    let mut reader = BufReader::new(
        stream
            .try_clone()
            .map_err(|e| JobError::Cluster(e.to_string()))?,
    );
    let unreachable =
        |e: std::io::Error| JobError::Cluster(format!("cannot reach process 0 ({lead}): {e}"));
    let lead_challenge = match read_line(&mut reader).map_err(unreachable)? {
        Some(line) => line
            .strip_prefix("challenge ")
            .and_then(unhex)
            .ok_or_else(|| {
                JobError::Cluster(format!(
                    "process 0 ({lead}) does not speak {PROTOCOL} (another neardup version?)"
                ))
            })?,
        None => return Err(closed()),
    };
    let follow_challenge = challenge()?;
    // The mesh listener: on this process's hostfile host, any free port.
    let mesh_listener = resolve(&addresses[process])
        .ok()
        .and_then(|a| TcpListener::bind(SocketAddr::new(a.ip(), 0)).ok());
    let hello = Hello {
        protocol: PROTOCOL.into(),
        job_id: config.job_id.clone(),
        process,
        fingerprint,
        challenge: hex(&follow_challenge),
        mesh_port: mesh_listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
            .map(|a| a.port()),
    };
    let line = serde_json::to_string(&hello).expect("serializable");
    let secret = config.secret.as_ref();
    send_line(&mut stream, &line)
        .and_then(|()| {
            send_line(
                &mut stream,
                &mac_line(secret, &[HELLO_LABEL, &lead_challenge, line.as_bytes()]),
            )
        })
        .map_err(unreachable)?;
    let said_go =
        |e: std::io::Error| JobError::Cluster(format!("process 0 ({lead}) did not say go: {e}"));
    let (Some(reply), Some(mac)) = (
        read_line(&mut reader).map_err(said_go)?,
        read_line(&mut reader).map_err(said_go)?,
    ) else {
        return Err(closed());
    };
    if let Some(secret) = secret {
        let tag = mac.strip_prefix("mac ").and_then(unhex);
        let parts: [&[u8]; 3] = [REPLY_LABEL, &follow_challenge, reply.as_bytes()];
        if !tag.is_some_and(|tag| secret.verify(&parts, &tag)) {
            return Err(JobError::Cluster(format!(
                "process 0 ({lead}) failed authentication: its reply is not signed with this \
                 job's secret (check --secret-file)"
            )));
        }
    }
    match serde_json::from_str::<Reply>(&reply) {
        Ok(Reply::Go { mesh }) => {
            let mut links = vec![(
                0,
                Joined {
                    stream,
                    reader,
                    lead_challenge,
                    follow_challenge,
                    mesh: None,
                },
            )];
            links.extend(form_mesh(process, mesh_listener, &mesh, addresses, config));
            let control = start_heartbeat(links, process, addresses, config, false);
            with_data_connections(control, listener, addresses, process, config)
        }
        Ok(Reply::Abort { reason }) => Err(JobError::Cluster(format!(
            "process 0 stopped the job: {reason}"
        ))),
        Err(_) => Err(closed()),
    }
}

/// Binds this process's listener on its own hostfile address.
fn listen(addresses: &[String], me: usize) -> Result<TcpListener, JobError> {
    TcpListener::bind(resolve(&addresses[me])?).map_err(|e| {
        JobError::Cluster(format!(
            "process {me} cannot listen on {}: {e}",
            addresses[me]
        ))
    })
}

/// Connects the data connections (see `connect_data`) once the heartbeat runs; on failure
/// the others are told, and the job stops.
fn with_data_connections(
    mut control: Control,
    listener: TcpListener,
    addresses: &[String],
    me: usize,
    config: &ControlConfig,
) -> Result<Control, JobError> {
    match connect_data(listener, addresses, me, config) {
        Ok(data) => {
            control.data = data;
            Ok(control)
        }
        Err(reason) => {
            let reason = format!("process {me} ({}): {reason}", addresses[me]);
            control.abort(&reason);
            Err(JobError::Cluster(reason))
        }
    }
}

/// The connections timely runs the job over, made by neardup instead of timely.
///
/// The simple way is timely's own: every process binds its port when timely starts, and
/// connects to the lower ones, retrying once a second, while waiting for the higher ones
/// with a poll that also sleeps a second. That costs a second or more at every start, and
/// anyone who reaches a port in that moment is taken for a process of the job. Here every
/// process has been listening since before the handshake, so after go process `i` connects
/// to every process below it at once and accepts every process above it; each connection
/// proves itself first (the acceptor sends a fresh challenge, the connector answers with
/// the job id, its index and, with `--secret-file`, an HMAC over them and the challenge),
/// and a connection that does not is dropped and logged. The sockets are then handed to
/// timely (`initialize_networking_from_sockets`), which speaks its own protocol over them
/// from the first byte on. The handshake reads byte by byte, so that no byte of timely's
/// can be taken into a buffer of ours.
///
/// Returns one connection per other process, in process order, `None` at `me`.
fn connect_data(
    listener: TcpListener,
    addresses: &[String],
    me: usize,
    config: &ControlConfig,
) -> Result<Vec<Option<TcpStream>>, String> {
    let deadline = Instant::now() + config.connect_timeout;
    let mut data: Vec<Option<TcpStream>> = (0..addresses.len()).map(|_| None).collect();
    // Lower processes first: they only wait for their own lower ones, so nobody waits in a
    // circle.
    for (j, address) in addresses.iter().enumerate().take(me) {
        data[j] = Some(dial_data(address, j, me, config, deadline)?);
    }
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("cannot configure the listener: {e}"))?;
    while data.iter().skip(me + 1).any(Option::is_none) {
        if Instant::now() >= deadline {
            let missing: Vec<String> = (me + 1..addresses.len())
                .filter(|&j| data[j].is_none())
                .map(|j| format!("process {j} ({})", addresses[j]))
                .collect();
            return Err(format!(
                "{} did not open its data connection within {} s",
                missing.join(", "),
                config.connect_timeout.as_secs()
            ));
        }
        let (stream, from) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                thread::sleep(ACCEPT_POLL);
                continue;
            }
            Err(e) => return Err(format!("accepting data connections: {e}")),
        };
        match accept_data(stream, me, addresses.len(), config) {
            Ok((j, stream)) if data[j].is_none() => data[j] = Some(stream),
            Ok((j, _)) => eprintln!(
                "neardup: ignored a connection from {from}: a second data connection from process {j}"
            ),
            Err(why) => eprintln!("neardup: ignored a connection from {from}: {why}"),
        }
    }
    for stream in data.iter().flatten() {
        stream
            .set_read_timeout(None)
            .and_then(|()| stream.set_write_timeout(None))
            .and_then(|()| stream.set_nodelay(true))
            .map_err(|e| format!("cannot configure a data connection: {e}"))?;
    }
    Ok(data)
}

/// The MAC of a data connection's answer (or `-` without a secret).
fn data_mac(secret: Option<&Secret>, challenge: &[u8], job_id: &str, from: usize) -> String {
    match secret {
        Some(secret) => hex(&secret.mac(&[
            DATA_LABEL,
            challenge,
            job_id.as_bytes(),
            from.to_string().as_bytes(),
        ])),
        None => "-".into(),
    }
}

/// Process `me`'s data connection to the lower process `j`.
fn dial_data(
    address: &str,
    j: usize,
    me: usize,
    config: &ControlConfig,
    deadline: Instant,
) -> Result<TcpStream, String> {
    let mut stream = loop {
        match resolve(address)
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|a| TcpStream::connect_timeout(&a, Duration::from_secs(1)))
        {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => thread::sleep(CONNECT_RETRY),
            Err(e) => {
                return Err(format!(
                    "cannot open a data connection to process {j} ({address}): {e}"
                ))
            }
        }
    };
    let failed = |e: std::io::Error| {
        format!("data connection to process {j} ({address}) failed at start-up: {e}")
    };
    stream
        .set_read_timeout(Some(
            deadline
                .saturating_duration_since(Instant::now())
                .max(HELLO_TIMEOUT),
        ))
        .map_err(failed)?;
    let challenge = read_short_line(&mut stream)
        .map_err(failed)?
        .and_then(|line| line.strip_prefix("challenge ").and_then(unhex))
        .ok_or_else(|| format!("process {j} ({address}) did not answer its data connection"))?;
    let mac = data_mac(config.secret.as_ref(), &challenge, &config.job_id, me);
    let line = format!("data {} {me} {mac}", config.job_id);
    send_line(&mut stream, &line).map_err(failed)?;
    Ok(stream)
}

/// A data connection from a higher process: its index and the stream, or why it is not one.
fn accept_data(
    stream: TcpStream,
    me: usize,
    processes: usize,
    config: &ControlConfig,
) -> Result<(usize, TcpStream), String> {
    let mut stream = stream;
    stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_read_timeout(Some(HELLO_TIMEOUT)))
        .and_then(|()| stream.set_write_timeout(Some(HELLO_TIMEOUT)))
        .map_err(|e| format!("cannot configure the socket: {e}"))?;
    let challenge = challenge().map_err(|e| e.to_string())?;
    send_line(&mut stream, &format!("challenge {}", hex(&challenge)))
        .map_err(|_| "closed before the challenge".to_string())?;
    let line = read_short_line(&mut stream)
        .map_err(|_| "no answer in time".to_string())?
        .ok_or("closed without an answer")?;
    let mut words = line.split(' ');
    let (Some("data"), Some(job_id), Some(from), Some(mac), None) = (
        words.next(),
        words.next(),
        words.next(),
        words.next(),
        words.next(),
    ) else {
        return Err(format!("not a {PROTOCOL} data connection"));
    };
    if job_id != config.job_id {
        return Err(format!("another job ({job_id:?})"));
    }
    let from: usize = from
        .parse()
        .ok()
        .filter(|&j| j > me && j < processes)
        .ok_or_else(|| format!("no process {from} connects to process {me}"))?;
    if let Some(secret) = config.secret.as_ref() {
        let from_text = from.to_string();
        let parts: [&[u8]; 4] = [
            DATA_LABEL,
            &challenge,
            job_id.as_bytes(),
            from_text.as_bytes(),
        ];
        if !unhex(mac).is_some_and(|tag| secret.verify(&parts, &tag)) {
            return Err(format!(
                "claims to be process {from} but failed authentication (check --secret-file)"
            ));
        }
    }
    Ok((from, stream))
}

/// Reads one line of at most [`MAX_DATA_LINE`] bytes, byte by byte (nothing after its `\n`
/// is read); `None` if the stream ends first.
fn read_short_line(stream: &mut TcpStream) -> std::io::Result<Option<String>> {
    use std::io::Read;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        if stream.read(&mut byte)? == 0 {
            return Ok(None);
        }
        if byte[0] == b'\n' {
            return Ok(String::from_utf8(line).ok());
        }
        line.push(byte[0]);
        if line.len() > MAX_DATA_LINE {
            return Err(std::io::Error::other("line too long"));
        }
    }
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

/// The mesh: heartbeat links between the processes other than process 0, so that a
/// partition between two of them is seen (the star around process 0 does not see it).
/// Process `me` connects to every lower-numbered process but 0 at the address process 0's
/// go gave (`mesh`, signed with the go), and takes the connections of the higher-numbered
/// ones on `listener`. Each link is opened like the star's: the accepting process sends a
/// challenge, the connecting one answers `mesh FROM TO CHALLENGE` with a MAC over both under
/// the secret, and the accepting one says `ok` with a MAC over the other challenge; the
/// heartbeat lines are then sealed with keys of both challenges, as on the star. A link that
/// cannot be made within [`MESH_TIMEOUT`] (a firewall closing the extra ports) is reported
/// as a warning, and the job runs without it: such a partition would go unnoticed, as
/// before the mesh.
fn form_mesh(
    me: usize,
    listener: Option<TcpListener>,
    mesh: &[Option<String>],
    addresses: &[String],
    config: &ControlConfig,
) -> Vec<(usize, Joined)> {
    let n = addresses.len();
    let deadline = Instant::now() + MESH_TIMEOUT;
    let acceptor = listener.filter(|_| me + 1 < n).map(|listener| {
        let config = config.clone();
        thread::spawn(move || accept_mesh(listener, me, n, &config, deadline))
    });
    let mut links = Vec::new();
    for (to, hostfile_address) in addresses.iter().enumerate().take(me).skip(1) {
        let result = match mesh.get(to).cloned().flatten() {
            Some(address) => connect_mesh(&address, me, to, config, deadline),
            None => Err("it has no mesh address".to_string()),
        };
        match result {
            Ok(joined) => links.push((to, joined)),
            Err(why) => warn_no_link(me, to, hostfile_address, &why),
        }
    }
    let accepted = acceptor.and_then(|a| a.join().ok()).unwrap_or_default();
    for (from, hostfile_address) in addresses.iter().enumerate().skip(me + 1) {
        if !accepted.iter().any(|(i, _)| *i == from) {
            warn_no_link(me, from, hostfile_address, "it did not connect");
        }
    }
    links.extend(accepted);
    links
}

fn warn_no_link(me: usize, other: usize, address: &str, why: &str) {
    eprintln!(
        "neardup: warning: no heartbeat link between process {me} and process {other} \
         ({address}): {why}; a partition between the two would not be detected"
    );
}

/// Connects to process `to`'s mesh listener and opens the link (see [`form_mesh`]).
fn connect_mesh(
    address: &str,
    me: usize,
    to: usize,
    config: &ControlConfig,
    deadline: Instant,
) -> Result<Joined, String> {
    let target = resolve(address).map_err(|e| e.to_string())?;
    let stream = loop {
        match TcpStream::connect_timeout(&target, Duration::from_secs(1)) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("cannot connect to {address}: {e}")),
        }
    };
    let io = |e: std::io::Error| format!("{address}: {e}");
    stream.set_read_timeout(Some(HELLO_TIMEOUT)).map_err(io)?;
    let mut stream = stream;
    let mut reader = BufReader::new(stream.try_clone().map_err(io)?);
    let theirs = read_line(&mut reader)
        .map_err(io)?
        .and_then(|l| l.strip_prefix("challenge ").and_then(unhex))
        .ok_or_else(|| format!("{address} sent no challenge"))?;
    let mine = challenge().map_err(|e| e.to_string())?;
    let line = format!("mesh {me} {to} {}", hex(&mine));
    let secret = config.secret.as_ref();
    send_line(&mut stream, &line).map_err(io)?;
    send_line(
        &mut stream,
        &mac_line(secret, &[MESH_LABEL, &theirs, line.as_bytes()]),
    )
    .map_err(io)?;
    let (Some(reply), Some(mac)) = (
        read_line(&mut reader).map_err(io)?,
        read_line(&mut reader).map_err(io)?,
    ) else {
        return Err(format!(
            "{address} closed the link (another job or secret?)"
        ));
    };
    if reply != "ok" {
        return Err(format!("{address} refused the link: {reply}"));
    }
    if let Some(secret) = secret {
        let tag = mac.strip_prefix("mac ").and_then(unhex);
        let parts: [&[u8]; 3] = [MESH_REPLY_LABEL, &mine, reply.as_bytes()];
        if !tag.is_some_and(|tag| secret.verify(&parts, &tag)) {
            return Err(format!("{address} failed authentication"));
        }
    }
    Ok(Joined {
        stream,
        reader,
        lead_challenge: theirs,
        follow_challenge: mine,
        mesh: None,
    })
}

/// Takes the mesh links of the processes numbered above `me`, until each has come or the
/// deadline; connections that do not open a link of this job (see [`form_mesh`]) are
/// logged and dropped.
fn accept_mesh(
    listener: TcpListener,
    me: usize,
    n: usize,
    config: &ControlConfig,
    deadline: Instant,
) -> Vec<(usize, Joined)> {
    let mut links: Vec<(usize, Joined)> = Vec::new();
    if listener.set_nonblocking(true).is_err() {
        return links;
    }
    while links.len() < n - me - 1 && Instant::now() < deadline {
        let (stream, from) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(10));
                continue;
            }
            Err(_) => break,
        };
        match open_mesh(stream, me, n, config, &links) {
            Ok(link) => links.push(link),
            Err(why) => eprintln!("neardup: ignored a mesh connection from {from}: {why}"),
        }
    }
    links
}

/// The accepting side of one mesh link.
fn open_mesh(
    stream: TcpStream,
    me: usize,
    n: usize,
    config: &ControlConfig,
    links: &[(usize, Joined)],
) -> Result<(usize, Joined), String> {
    let io = |e: std::io::Error| e.to_string();
    stream.set_nonblocking(false).map_err(io)?;
    stream.set_read_timeout(Some(HELLO_TIMEOUT)).map_err(io)?;
    stream.set_write_timeout(Some(HELLO_TIMEOUT)).map_err(io)?;
    let mut stream = stream;
    let mine = challenge().map_err(|e| e.to_string())?;
    send_line(&mut stream, &format!("challenge {}", hex(&mine))).map_err(io)?;
    let mut reader = BufReader::new(stream.try_clone().map_err(io)?);
    let (Some(line), Some(mac)) = (
        read_line(&mut reader).map_err(io)?,
        read_line(&mut reader).map_err(io)?,
    ) else {
        return Err("closed without opening a link".into());
    };
    let tag = mac.strip_prefix("mac ").unwrap_or("");
    match (&config.secret, tag) {
        (Some(_), "none") => return Err("it has no secret".into()),
        (Some(secret), tag) => {
            let parts: [&[u8]; 3] = [MESH_LABEL, &mine, line.as_bytes()];
            if !unhex(tag).is_some_and(|tag| secret.verify(&parts, &tag)) {
                return Err("failed authentication".into());
            }
        }
        (None, "none") => {}
        (None, _) => return Err("it has a secret and this process has none".into()),
    }
    let fields: Vec<&str> = line.split(' ').collect();
    let (from, to, theirs) = match fields.as_slice() {
        ["mesh", from, to, theirs] => (from.parse::<usize>(), to.parse::<usize>(), unhex(theirs)),
        _ => return Err("not a mesh link of the control protocol".into()),
    };
    let (Ok(from), Ok(to), Some(theirs)) = (from, to, theirs) else {
        return Err("a malformed mesh line".into());
    };
    if to != me || from <= me || from >= n || links.iter().any(|(i, _)| *i == from) {
        return Err(format!("an unexpected link from process {from} to {to}"));
    }
    send_line(&mut stream, "ok").map_err(io)?;
    let secret = config.secret.as_ref();
    send_line(
        &mut stream,
        &mac_line(secret, &[MESH_REPLY_LABEL, &theirs, b"ok"]),
    )
    .map_err(io)?;
    Ok((
        from,
        Joined {
            stream,
            reader,
            lead_challenge: mine,
            follow_challenge: theirs,
            mesh: None,
        },
    ))
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
fn start_heartbeat(
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

    #[test]
    fn sealed_lines_open_once_in_order_and_only_with_their_key() {
        let secret = Secret::new(b"s3cret".to_vec()).unwrap();
        let (lead, follow) = (vec![1u8; 32], vec![2u8; 32]);
        let mut send = LineKey::new(&secret, 0, 1, &lead, &follow);
        let mut receive = LineKey::new(&secret, 0, 1, &lead, &follow);
        let first = send.seal("hb");
        let second = send.seal("abort stop");
        assert_eq!(receive.open(&first), Some("hb"));
        // A replay of an earlier line, and a line of the other direction, do not open.
        assert_eq!(receive.open(&first), None);
        let mut back = LineKey::new(&secret, 1, 0, &lead, &follow);
        assert_eq!(receive.open(&back.seal("abort stop")), None);
        // Another secret, or a changed line, do not open either.
        let other = Secret::new(b"other".to_vec()).unwrap();
        let mut forged = LineKey::new(&other, 0, 1, &lead, &follow);
        forged.seq = 1;
        assert_eq!(receive.open(&forged.seal("abort stop")), None);
        assert_eq!(receive.open(&second.replace("stop", "stap")), None);
        assert_eq!(receive.open("abort stop"), None);
        assert_eq!(receive.open(&second), Some("abort stop"));
    }

    #[test]
    fn macs_cover_every_part_and_their_boundaries() {
        let secret = Secret::new(b"k".to_vec()).unwrap();
        let tag = secret.mac(&[b"ab", b"c"]);
        assert!(secret.verify(&[b"ab", b"c"], &tag));
        assert!(!secret.verify(&[b"a", b"bc"], &tag));
        assert!(!secret.verify(&[b"ab", b"c"], &tag[..8]), "too short a tag");
        assert!(!Secret::new(b"K".to_vec())
            .unwrap()
            .verify(&[b"ab", b"c"], &tag));
        assert_eq!(unhex(&hex(&tag)).as_deref(), Some(&tag[..]));
        assert_eq!(unhex("zz"), None);
        assert_eq!(format!("{secret:?}"), "Secret(..)");
    }

    #[cfg(unix)]
    #[test]
    fn secret_files_must_be_private_and_not_empty() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "abc\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let message = |r: Result<Secret, JobError>| r.unwrap_err().to_string();
        assert_eq!(
            message(Secret::from_file(&path)),
            format!(
                "cluster: {0}: the secret file may be read or written by others (mode 644); \
                 make it private with `chmod 600 {0}`",
                path.display()
            )
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            Secret::from_file(&path).unwrap(),
            Secret::new(b"abc".to_vec()).unwrap()
        );
        std::fs::write(&path, "\n").unwrap();
        assert!(message(Secret::from_file(&path)).starts_with(&format!(
            "cluster: {}: the secret file is empty",
            path.display()
        )));
    }
}
