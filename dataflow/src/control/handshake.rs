//! The start-up handshake (see "Rendezvous" in the [module docs](super)): process 0 waits
//! for every other process's hello ([`lead`], [`admit`]), checks its job, fingerprint and
//! MAC, prepares the output directory and says go; every other process answers process 0's
//! challenge with its hello and waits for go ([`follow`]). Then the mesh forms, the
//! heartbeat starts and the data connections are made.

use std::collections::BTreeMap;
use std::io::BufReader;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::auth::{challenge, hex, mac_line, unhex, Secret, HELLO_LABEL, REPLY_LABEL};
use super::config::ControlConfig;
use super::data::with_data_connections;
use super::heartbeat::{start_heartbeat, Control};
use super::link::{
    read_line, resolve, send_line, Joined, ACCEPT_POLL, CONNECT_RETRY, HELLO_TIMEOUT, PROTOCOL,
};
use super::mesh::form_mesh;
use super::stop::{install_panic_hook, ACTIVE, FATAL};
use crate::JobError;

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
        || stream.set_nodelay(true).is_err()
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
    if let Err(why) = check_hello_mac(config.secret.as_ref(), &mac, &lead_challenge, &line) {
        return ignore(why);
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
    let refusal = refusal_of(&hello, from, addresses, fingerprint, peers);
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

/// Whether a hello's MAC line (`mac HEX`, or `mac none`) is right for this job's secret;
/// the reason the connection is ignored when not.
fn check_hello_mac(
    secret: Option<&Secret>,
    mac: &str,
    lead_challenge: &[u8],
    line: &str,
) -> Result<(), &'static str> {
    let tag = mac.strip_prefix("mac ").unwrap_or("");
    match (secret, tag) {
        (Some(_), "none") => Err("it has no secret, and this job requires one (--secret-file)"),
        (Some(secret), tag) => {
            let parts: [&[u8]; 3] = [HELLO_LABEL, lead_challenge, line.as_bytes()];
            if !unhex(tag).is_some_and(|tag| secret.verify(&parts, &tag)) {
                return Err("failed authentication (its secret is not this job's)");
            }
            Ok(())
        }
        (None, "none") => Ok(()),
        (None, _) => Err(
            "it has a secret and this process has none (give every process the same --secret-file)",
        ),
    }
}

/// Why an authenticated hello of this job stops the job, if it does: a process index the
/// hostfile does not have, a second process with one index, or another fingerprint.
fn refusal_of(
    hello: &Hello,
    from: SocketAddr,
    addresses: &[String],
    fingerprint: &BTreeMap<String, Value>,
    peers: &[Option<Joined>],
) -> Option<String> {
    let i = hello.process;
    if i == 0 || i >= addresses.len() {
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
    let lead = &addresses[0];
    let closed = || {
        JobError::Cluster(format!(
            "process 0 ({lead}) closed the connection at start-up (it ignores a process whose \
             job id or secret differs: check --job-id and --secret-file; its log says why)"
        ))
    };
    let mut stream = dial_lead(lead, config)?;
    // Process 0 answers once everyone has arrived: allow its whole wait and some.
    stream
        .set_read_timeout(Some(config.connect_timeout + Duration::from_secs(30)))
        .and_then(|()| stream.set_nodelay(true))
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
    check_reply_mac(secret, &mac, &follow_challenge, &reply, lead)?;
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

/// Connects to process 0, trying again until `connect_timeout` has passed.
fn dial_lead(lead: &str, config: &ControlConfig) -> Result<TcpStream, JobError> {
    let deadline = Instant::now() + config.connect_timeout;
    loop {
        // Resolve on every attempt: a scheduler may publish process 0's name only once it runs.
        let attempt = resolve(lead)
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|lead| TcpStream::connect_timeout(&lead, Duration::from_secs(1)));
        match attempt {
            Ok(s) => return Ok(s),
            Err(_) if Instant::now() < deadline => thread::sleep(CONNECT_RETRY),
            Err(e) => {
                return Err(JobError::Cluster(format!(
                    "process 0 ({lead}) did not answer within {} s: {e}",
                    config.connect_timeout.as_secs()
                )))
            }
        }
    }
}

/// With a secret: whether process 0's reply is signed with it, over this process's challenge.
fn check_reply_mac(
    secret: Option<&Secret>,
    mac: &str,
    follow_challenge: &[u8],
    reply: &str,
    lead: &str,
) -> Result<(), JobError> {
    if let Some(secret) = secret {
        let tag = mac.strip_prefix("mac ").and_then(unhex);
        let parts: [&[u8]; 3] = [REPLY_LABEL, follow_challenge, reply.as_bytes()];
        if !tag.is_some_and(|tag| secret.verify(&parts, &tag)) {
            return Err(JobError::Cluster(format!(
                "process 0 ({lead}) failed authentication: its reply is not signed with this \
                 job's secret (check --secret-file)"
            )));
        }
    }
    Ok(())
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
