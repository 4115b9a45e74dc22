//! The mesh: heartbeat links between every two processes other than process 0, so that a
//! partition between two of them is seen (see [`form_mesh`]).

use std::io::BufReader;
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use super::auth::{challenge, hex, mac_line, unhex, MESH_LABEL, MESH_REPLY_LABEL};
use super::config::ControlConfig;
use super::link::{read_line, resolve, send_line, Joined, HELLO_TIMEOUT};

/// How long the mesh links between the other processes may take to form after go (they
/// connect at once; the margin is for a loaded machine).
const MESH_TIMEOUT: Duration = Duration::from_secs(10);

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
pub(super) fn form_mesh(
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
    stream.set_nodelay(true).map_err(io)?;
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
    stream.set_nodelay(true).map_err(io)?;
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
