//! The data connections: the TCP connections timely runs the job over, made and
//! authenticated here, then handed to timely (see [`connect_data`]).

use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use super::auth::{challenge, hex, unhex, Secret};
use super::config::ControlConfig;
use super::heartbeat::Control;
use super::link::{
    read_short_line, resolve, send_line, ACCEPT_POLL, CONNECT_RETRY, HELLO_TIMEOUT, PROTOCOL,
};
use crate::JobError;

/// What the first line of a data connection (the connections timely runs over) says.
const DATA_LABEL: &[u8] = b"neardup-control/2 data";

/// Connects the data connections (see `connect_data`) once the heartbeat runs; on failure
/// the others are told, and the job stops.
pub(super) fn with_data_connections(
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
