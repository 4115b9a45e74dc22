//! `neardup serve`'s connections: HTTP/1.1 by hyper, with what `axum::serve` lacks.
//!
//! - A deadline for each request head (`--header-timeout`): a connection that sends no
//!   complete head within it, after opening or after its previous answer, is closed (hyper's
//!   `header_read_timeout`: it runs while a connection waits for a head, so an idle
//!   keep-alive connection is closed by it too).
//! - A bound on the connections served at once (`--max-connections`, lowered to what the
//!   open-file limit allows): beyond it a connection is answered 503 and closed, so that
//!   running out of file descriptors cannot stop the service.
//! - A shutdown that ends: on SIGTERM no connection is accepted; an idle one is closed, a
//!   request in flight is answered (within a grace period) and its connection closed, and a
//!   connection with no request in flight (a head still arriving) is closed.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::{service_fn, Service as _};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

/// Connections answered 503 at once, beyond the limit (each holds a descriptor for at most
/// [`REFUSAL_TIME`]); beyond these, a connection is closed without an answer.
pub const REFUSALS: usize = 8;

/// How long a refused connection is kept to deliver its 503.
const REFUSAL_TIME: Duration = Duration::from_secs(1);

/// After SIGTERM: how long a connection with no request in flight is kept (an answer just
/// made may still be on its way out), and how often connections look.
const FLUSH_TIME: Duration = Duration::from_millis(500);
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// The limits of the connections.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub header_timeout: Duration,
    pub max_connections: usize,
    /// After SIGTERM, how long a request in flight may take to be answered.
    pub grace: Duration,
}

/// Serves `router` on `listener` until `shutdown` completes, then until every connection
/// has been closed (see the module docs).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(REFUSALS));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
        };
        while tasks.try_join_next().is_some() {}
        if let Ok(slot) = slots.clone().try_acquire_owned() {
            let served = serve_one(stream, router.clone(), slot, stop_rx.clone(), limits);
            tasks.spawn(served);
        } else if let Ok(slot) = refusals.clone().try_acquire_owned() {
            tasks.spawn(refuse(stream, limits.max_connections, slot));
        }
        // Else the stream is dropped: closed without an answer.
    }
    drop(listener);
    let _ = stop_tx.send(true);
    while tasks.join_next().await.is_some() {}
}

/// A failed accept: a connection reset before it was taken is nothing; anything else (out
/// of descriptors, of memory) is said, and accepting pauses a moment rather than spin.
async fn accept_failed(e: std::io::Error) {
    use std::io::ErrorKind::*;
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted
    ) {
        return;
    }
    eprintln!("neardup serve: cannot accept a connection: {e}");
    tokio::time::sleep(Duration::from_millis(250)).await;
}

/// Decrements its count when dropped: the requests of a connection being answered.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn enter(count: &Arc<AtomicUsize>) -> InFlight {
        count.fetch_add(1, Ordering::SeqCst);
        InFlight(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One connection, holding its `slot` until it is closed.
async fn serve_one(
    stream: TcpStream,
    router: Router,
    slot: OwnedSemaphorePermit,
    mut stop: watch::Receiver<bool>,
    limits: Limits,
) {
    let _ = stream.set_nodelay(true);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let router = TowerToHyperService::new(router);
    let count = in_flight.clone();
    let service = service_fn(move |request: Request<Incoming>| {
        let entered = InFlight::enter(&count);
        let answer = router.call(request);
        async move {
            let response = answer.await;
            drop(entered);
            response
        }
    });
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let mut conn = pin!(http.serve_connection(TokioIo::new(stream), service));
    let stopped = tokio::select! {
        _ = conn.as_mut() => false,
        // The one change there is: the shutdown.
        _ = stop.changed() => true,
    };
    if stopped {
        // Closes an idle connection now, and the others once their answer is written.
        conn.as_mut().graceful_shutdown();
        drain(conn, &in_flight, limits.grace).await;
    }
    drop(slot);
}

/// After SIGTERM: polls `conn` while it has a request in flight (at most `grace`), and
/// [`FLUSH_TIME`] once it has none, then drops it (a head still arriving is never waited
/// for).
async fn drain<C: Future>(mut conn: Pin<&mut C>, in_flight: &AtomicUsize, grace: Duration) {
    let started = Instant::now();
    let mut quiet_since = None;
    loop {
        tokio::select! {
            _ = conn.as_mut() => return,
            () = tokio::time::sleep(LOOK_EVERY) => {}
        }
        let now = Instant::now();
        if in_flight.load(Ordering::SeqCst) > 0 {
            quiet_since = None;
            if now - started >= grace {
                return;
            }
        } else if now - *quiet_since.get_or_insert(now) >= FLUSH_TIME {
            return;
        }
    }
}

/// A connection beyond the limit: answered 503 (JSON, as every error), then closed once the
/// client has closed or after [`REFUSAL_TIME`].
async fn refuse(stream: TcpStream, max: usize, slot: OwnedSemaphorePermit) {
    let body = serde_json::json!({
        "error": format!(
            "too many connections: the service serves {max} at once (--max-connections); try again"
        )
    })
    .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(REFUSAL_TIME, write_then_drain(stream, answer.as_bytes())).await;
    drop(slot);
}

/// Writes `bytes` and ends the stream's sending side, then reads (and drops) what the
/// client sends until it closes: closing a socket with unread bytes would reset the
/// connection, and the client could lose the answer.
async fn write_then_drain(stream: TcpStream, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    let stream = stream.into_std()?;
    stream.shutdown(std::net::Shutdown::Write)?;
    let stream = TcpStream::from_std(stream)?;
    let mut sink = [0u8; 4096];
    loop {
        stream.readable().await?;
        match stream.try_read(&mut sink) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}
