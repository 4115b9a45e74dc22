//! One connection between two processes of the job, as both ends see it: the protocol's
//! name and timings, lines written and read with a bounded length, an address resolved, and
//! the two things every opened link becomes: a [`Joined`] (the stream, its reader and the
//! two challenges of its handshake) and, once the heartbeat runs, a [`Sender`] that seals
//! every line it sends.
//!
//! Everything above this module (the handshake, the data connections, the mesh, the
//! heartbeat) speaks through these few functions, so a line means the same everywhere: text
//! ended by `\n`, at most [`MAX_LINE`] bytes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::auth::LineKey;
use crate::JobError;

/// The protocol name every hello starts with.
pub const PROTOCOL: &str = "neardup-control/2";
/// How long a new connection may take to say hello before it is dropped.
pub(super) const HELLO_TIMEOUT: Duration = Duration::from_secs(3);
/// How often process 0 looks for a new connection while it waits for the others (a
/// non-blocking accept; short, so that start-up takes milliseconds, not a second).
pub(super) const ACCEPT_POLL: Duration = Duration::from_millis(2);
/// How long a process waits before trying process 0 again when it is not listening yet.
pub(super) const CONNECT_RETRY: Duration = Duration::from_millis(10);
/// The longest line a data connection's handshake may send.
const MAX_DATA_LINE: usize = 512;
/// The longest hello line accepted.
const MAX_LINE: u64 = 1 << 20;

/// One heartbeat connection's sending end: the stream and, with a secret, the key that seals
/// every line.
pub(super) struct Sender {
    pub(super) stream: TcpStream,
    pub(super) key: Option<LineKey>,
    /// Silenced by the test hook [`DROP_LINK_ENV`](super::DROP_LINK_ENV): nothing is sent.
    pub(super) muted: bool,
}

impl Sender {
    pub(super) fn send(&mut self, line: &str) -> std::io::Result<()> {
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
pub(super) struct Joined {
    pub(super) stream: TcpStream,
    /// The reader of the handshake, which may hold heartbeat lines already read from the
    /// socket (process 0 starts its heartbeat as soon as it says go): the heartbeat must go
    /// on reading from it, or those lines are lost and every later one is out of sequence.
    pub(super) reader: BufReader<TcpStream>,
    pub(super) lead_challenge: Vec<u8>,
    pub(super) follow_challenge: Vec<u8>,
    /// Where the process takes the mesh links of higher-numbered processes (process 0's
    /// view: the address it connected from, and the port of its hello).
    pub(super) mesh: Option<SocketAddr>,
}

pub(super) fn resolve(address: &str) -> Result<SocketAddr, JobError> {
    address
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| JobError::Cluster(format!("cannot resolve hostfile address {address:?}")))
}

/// Sends one line. The control links set `TCP_NODELAY`: their lines are small and answered
/// (a line held back by Nagle's algorithm waited for the peer's delayed acknowledgement,
/// 40 ms on Linux, at every exchange: a 2-process job of one document took 66 ms against 8
/// for one process).
pub(super) fn send_line(stream: &mut TcpStream, line: &str) -> std::io::Result<()> {
    // One write, one segment: the control links set TCP_NODELAY, and a line written in two
    // pieces would still cost two segments.
    let mut buffer = Vec::with_capacity(line.len() + 1);
    buffer.extend_from_slice(line.as_bytes());
    buffer.push(b'\n');
    stream.write_all(&buffer)?;
    stream.flush()
}

/// Reads one line of at most `MAX_LINE` bytes; `None` at end of stream.
pub(super) fn read_line(reader: &mut impl BufRead) -> std::io::Result<Option<String>> {
    let mut line = String::new();
    let n = reader.by_ref().take(MAX_LINE).read_line(&mut line)?;
    Ok((n > 0).then(|| line.trim_end().to_string()))
}

/// Reads one line of at most [`MAX_DATA_LINE`] bytes, byte by byte (nothing after its `\n`
/// is read); `None` if the stream ends first.
pub(super) fn read_short_line(stream: &mut TcpStream) -> std::io::Result<Option<String>> {
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
