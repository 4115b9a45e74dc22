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
//!
//! One file per concept, each building on the ones before it (no file imports a later one):
//! `auth` (the secret and the MACs), `link` (lines on one connection, an opened link),
//! `stop` (the fail-stop hook, the panic hook and [`interrupt`]), `config` ([`ControlConfig`]),
//! `heartbeat` ([`Control`], the running heartbeat), `data` (the connections timely runs
//! over), `mesh` (the links between the other processes) and `handshake` ([`rendezvous`],
//! which does all of it in order).

mod auth;
mod config;
mod data;
mod handshake;
mod heartbeat;
mod link;
mod mesh;
mod stop;

pub use auth::Secret;
pub use config::{ControlConfig, DEFAULT_CONNECT_TIMEOUT, DEFAULT_PEER_TIMEOUT};
pub(crate) use handshake::differences;
pub use handshake::rendezvous;
pub use heartbeat::{Control, DROP_LINK_ENV, HEARTBEAT_INTERVAL};
pub use link::PROTOCOL;
pub use stop::{interrupt, FatalHook};
