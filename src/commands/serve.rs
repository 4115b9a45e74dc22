//! `neardup serve`: the live dedup service, an HTTP/JSON API over a saved index and the
//! documents written to it since (docs/serve.md).
//!
//! This module is the HTTP layer only: routes, limits, the bearer token, metrics and the
//! signals. The documents, their clusters and the write-ahead log are
//! [`neardup_dataflow::live::service`]. Texts are fingerprinted here, on the request's
//! thread, with the index's own scheme, and `k` is checked, as every index query does
//! ([`neardup_io::index::answer`]); the service only ever sees fingerprints and digests.
//!
//! Each route is written once, in [`router`]; /metrics labels a request with the route it
//! matched (axum's [`MatchedPath`]).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, MatchedPath, Path, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clap::Args;
use neardup_core::{encoding, Scheme, SchemeName, TableDesign};
use neardup_dataflow::live::service::{
    Answer, Config, NewDoc, Service, ServiceError, Stats, Write, MERGE_LIMIT,
};
use neardup_io::index::answer::{self, KName, TextFingerprinter};
use neardup_io::index::{IndexSpec, IndexWriter, Manifest, NewGeneration};
use serde::{Deserialize, Serialize};
use serde_json::json;
use subtle::ConstantTimeEq;

mod connections;

const EXAMPLES: &str = "\
Examples:
  Serve an index made by a run (loopback only), then ask it and write to it:
    neardup run --index idx --output out corpus.jsonl
    neardup serve --index idx
    curl -s localhost:8700/v1/query -H 'content-type: application/json' -d '{\"text\": \"a page\"}'
    curl -s -X PUT localhost:8700/v1/documents/page-1 -H 'content-type: application/json' \\
      -d '{\"text\": \"the fetched page\", \"url\": \"https://example.com/\"}'
  Start from nothing (an empty simhash-doc index, k = 3), on a free port:
    neardup serve --index idx --create --listen 127.0.0.1:0
  On every interface, with a bearer token (required off loopback):
    neardup serve --index idx --listen 0.0.0.0:8700 --token-file token.txt

Routes: POST /v1/query, PUT|GET|DELETE /v1/documents/{id}, GET /v1/stats, GET /metrics,
GET /healthz, POST /v1/checkpoint. Every write is on disk (write-ahead log, fdatasync)
before it is answered; SIGTERM drains the requests in flight and syncs the log.";

/// The address served by default (loopback: nothing outside this machine can connect).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8700";

/// The largest request body, in bytes (a 5 KB page is far below; a batch of 10,000
/// fingerprint queries is about 200 KB).
pub const DEFAULT_MAX_BODY: usize = 4 << 20;

/// How long a client may take to send a request's body before it is answered 408.
pub const DEFAULT_REQUEST_TIMEOUT_SECS: u64 = 10;

/// How often the service writes a checkpoint (the changes since the last, as an index
/// generation) while writes arrive.
pub const DEFAULT_CHECKPOINT_SECS: u64 = 300;

/// The most queries one POST /v1/query may carry.
pub const MAX_QUERIES: usize = 10_000;

/// The longest document id, in bytes.
pub const MAX_ID_BYTES: usize = 1024;

/// Runtime threads answering requests (the writer thread is apart).
pub const DEFAULT_THREADS: usize = 2;

/// The most threads answering requests (many more than the cores gain nothing).
pub const MAX_THREADS: usize = 256;

/// How long a connection may take to send a request head, after it opens or after its
/// previous answer (so also how long an idle keep-alive connection is kept).
pub const DEFAULT_HEADER_TIMEOUT_SECS: u64 = 30;

/// The most connections served at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// Descriptors kept apart from connections, beyond those open when serving starts: a
/// checkpoint's files, and the connections being refused.
const SPARE_FDS: u64 = 32 + connections::REFUSALS as u64;

/// After SIGTERM, how long an answer may take once its body has arrived.
const SHUTDOWN_MARGIN: Duration = Duration::from_secs(30);

/// Flags of `neardup serve`.
#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct ServeArgs {
    /// The index to serve (made by neardup run --index, or --create)
    #[arg(long, value_name = "DIR")]
    pub index: PathBuf,
    /// Create an empty index (simhash-doc, k = 3) at DIR if it holds none
    #[arg(long)]
    pub create: bool,
    /// The address to listen on; port 0 picks a free port (the address is printed)
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR")]
    pub listen: SocketAddr,
    /// A file holding the bearer token every request must carry (required unless
    /// listening on loopback)
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Write the changes since the last checkpoint as an index generation this often, in
    /// seconds (0: only on POST /v1/checkpoint)
    #[arg(long, default_value_t = DEFAULT_CHECKPOINT_SECS, value_name = "SECS")]
    pub checkpoint_interval: u64,
    /// The largest request body, in bytes
    #[arg(long, default_value_t = DEFAULT_MAX_BODY, value_name = "BYTES")]
    pub max_body: usize,
    /// Seconds a client may take to send a request body
    #[arg(long, default_value_t = DEFAULT_REQUEST_TIMEOUT_SECS, value_name = "SECS")]
    pub request_timeout: u64,
    /// Seconds a connection may take to send a request head, after it opens or after its
    /// previous answer (an idle connection is closed after this long)
    #[arg(long, default_value_t = DEFAULT_HEADER_TIMEOUT_SECS, value_name = "SECS")]
    pub header_timeout: u64,
    /// Connections served at once (lowered to what the open-file limit allows); more are
    /// answered 503
    #[arg(long, default_value_t = DEFAULT_MAX_CONNECTIONS, value_name = "N")]
    pub max_connections: usize,
    /// Threads answering requests
    #[arg(long, default_value_t = DEFAULT_THREADS, value_name = "N")]
    pub threads: usize,
}

/// What every handler shares.
struct App {
    service: Service,
    scheme: Scheme,
    k: u32,
    token: Option<Vec<u8>>,
    body_timeout: Duration,
    metrics: Metrics,
    started: Instant,
}

type Shared = Arc<App>;

pub fn run(args: &ServeArgs) -> Result<()> {
    neardup_io::store::local_only(&args.index, "index")?;
    check_args(args)?;
    let token = match &args.token_file {
        Some(path) => Some(read_token(path)?),
        None if !args.listen.ip().is_loopback() => bail!(
            "--listen {}: listening beyond loopback needs --token-file (a bearer token every request must carry)",
            args.listen
        ),
        None => None,
    };
    if args.create && !args.index.join(neardup_io::index::MANIFEST).exists() {
        create_index(&args.index)?;
    }
    let manifest = Manifest::load(&args.index)?;
    let scheme = serve_scheme(&manifest)
        .with_context(|| format!("{}: cannot serve this index", args.index.display()))?;
    let service = Service::open(Config {
        index: args.index.clone(),
        checkpoint_interval: (args.checkpoint_interval > 0)
            .then(|| Duration::from_secs(args.checkpoint_interval)),
        merge_limit: MERGE_LIMIT,
    })?;
    let app = Arc::new(App {
        service,
        scheme,
        k: manifest.k,
        token,
        body_timeout: Duration::from_secs(args.request_timeout),
        metrics: Metrics::default(),
        started: Instant::now(),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads)
        .enable_io()
        .enable_time()
        .build()
        .context("cannot start the runtime")?;
    let served = runtime.block_on(listen_and_serve(args, app.clone()));
    // The requests in flight have been answered; the writer syncs the log and stops.
    app.service.shutdown()?;
    drop(runtime);
    eprintln!("neardup serve: stopped; every acknowledged write is in the log");
    served
}

/// The flags' bounds that clap does not check.
fn check_args(args: &ServeArgs) -> Result<()> {
    if !(1..=MAX_THREADS).contains(&args.threads) {
        bail!(
            "--threads {}: from 1 to {MAX_THREADS} threads answer requests",
            args.threads
        );
    }
    if args.max_connections == 0 {
        bail!("--max-connections must be at least 1");
    }
    if args.header_timeout == 0 {
        bail!("--header-timeout must be at least 1 second");
    }
    Ok(())
}

/// Binds `--listen`, says so, and serves until SIGTERM or SIGINT.
async fn listen_and_serve(args: &ServeArgs, app: Shared) -> Result<()> {
    let stats = app.service.stats();
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let address = listener.local_addr()?;
    let limits = connections::Limits {
        header_timeout: Duration::from_secs(args.header_timeout),
        max_connections: connection_limit(args.max_connections)?,
        grace: Duration::from_secs(args.request_timeout) + SHUTDOWN_MARGIN,
    };
    eprintln!(
        "neardup serve: listening on http://{address} ({} documents, {} clusters, k = {}, {} log records replayed{}, started in {:.2} s)",
        stats.documents,
        stats.clusters,
        stats.k,
        stats.replayed_records,
        if stats.torn_bytes_dropped > 0 {
            format!(", a torn last record of {} bytes dropped", stats.torn_bytes_dropped)
        } else {
            String::new()
        },
        stats.startup_millis as f64 / 1000.0
    );
    let router = router(app.clone(), args.max_body);
    connections::serve(listener, router, limits, shutdown_signal()).await;
    Ok(())
}

/// The bearer token of `--token-file`: the file must be private (as a cluster's secret
/// file), the token one line of at least 16 characters that a request header can carry.
fn read_token(path: &std::path::Path) -> Result<Vec<u8>> {
    let bytes = neardup_io::secret::read_secret_file(path, "token file")?;
    let start = bytes.iter().take_while(|b| b.is_ascii_whitespace()).count();
    let token = &bytes[start..];
    if let Some(at) = token.iter().position(|b| b.is_ascii_control()) {
        let what = match token[at] {
            b'\n' => "a line break".to_string(),
            b'\r' => "a carriage return".to_string(),
            b'\t' => "a tab".to_string(),
            0 => "a NUL byte".to_string(),
            b => format!("the control character 0x{b:02x}"),
        };
        bail!(
            "{}: the token has {what} at byte {}: no request header can carry it (write the token as one line of printable characters)",
            path.display(),
            start + at
        );
    }
    if token.len() < 16 {
        bail!(
            "{}: the token must have at least 16 characters (it has {})",
            path.display(),
            token.len()
        );
    }
    Ok(token.to_vec())
}

/// `--max-connections`, lowered to what the open-file limit leaves (its soft limit is
/// raised towards the hard one first, as far as needed), so that running out of
/// descriptors cannot stop the service.
fn connection_limit(requested: usize) -> Result<usize> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Ok(requested);
    }
    // Open now: stdio, the index's lock and log, the runtime's, the listener.
    let open = std::fs::read_dir("/proc/self/fd").map_or(32, |d| d.count() as u64);
    let wanted = (requested as u64).saturating_add(open + SPARE_FDS);
    if limit.rlim_cur < wanted && limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: wanted.min(limit.rlim_max),
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit only reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit.rlim_cur = raised.rlim_cur;
        }
    }
    let room = limit.rlim_cur.saturating_sub(open + SPARE_FDS);
    if room == 0 {
        bail!(
            "the open-file limit ({}) leaves no room for connections ({open} descriptors are open and {SPARE_FDS} kept for checkpoints); raise it (ulimit -n)",
            limit.rlim_cur
        );
    }
    let allowed = room.min(requested as u64) as usize;
    if allowed < requested {
        eprintln!(
            "neardup serve: --max-connections {requested} lowered to {allowed}: the open-file limit is {} (ulimit -n), {open} descriptors are open and {SPARE_FDS} kept for checkpoints",
            limit.rlim_cur
        );
    }
    Ok(allowed)
}

/// SIGTERM or SIGINT.
async fn shutdown_signal() {
    use std::task::Poll;
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    let name = std::future::poll_fn(|cx| {
        if term.poll_recv(cx).is_ready() {
            Poll::Ready("SIGTERM")
        } else if int.poll_recv(cx).is_ready() {
            Poll::Ready("SIGINT")
        } else {
            Poll::Pending
        }
    })
    .await;
    eprintln!("neardup serve: {name}: draining the requests in flight");
}

/// An empty index of the default scheme and design.
fn create_index(dir: &std::path::Path) -> Result<()> {
    let scheme = Scheme::simhash_doc();
    let spec = IndexSpec {
        scheme: scheme.name.as_str().to_string(),
        fingerprint: scheme.params(),
        design: TableDesign::manku16(),
        minhash: None,
    };
    let mut writer = IndexWriter::create(dir, &spec)?;
    writer.add(NewGeneration::default())?;
    Ok(())
}

/// The index's scheme, refused for MinHash (its tables are LSH bands, not permutation
/// tables: `neardup query` answers them).
fn serve_scheme(manifest: &Manifest) -> Result<Scheme> {
    let scheme = SchemeName::parse(&manifest.scheme);
    if manifest.minhash.is_some()
        || matches!(scheme, Some(SchemeName::Minhash | SchemeName::MinhashOph))
    {
        bail!(
            "its scheme is {:?}: neardup serve answers simhash indexes (simhash-doc, simhash-shingles) only",
            manifest.scheme
        );
    }
    Ok(answer::simhash_scheme(manifest)?)
}

/// Every route, written once: its path and its handlers by method. The path is also the
/// route's /metrics label ([`route_of`]).
fn router(app: Shared, max_body: usize) -> Router {
    Router::new()
        .route("/v1/query", post(query))
        .route(
            "/v1/documents/{id}",
            get(get_document).put(put_document).delete(delete_document),
        )
        .route("/v1/stats", get(stats))
        .route("/v1/checkpoint", post(checkpoint))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn_with_state(app.clone(), authorize))
        .layer(middleware::from_fn_with_state(app.clone(), measure))
        .with_state(app)
}

/// A JSON error: `{"error": message}` with its status.
struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, message.into())
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        let status = match e {
            ServiceError::Stopped | ServiceError::Failed(_) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError(status, e.to_string())
    }
}

/// A JSON body: read within the request timeout, with every rejection as a JSON error
/// (415 without a JSON content type, 413 over the size limit, 400 for anything else).
struct Body<T>(T);

impl<T: serde::de::DeserializeOwned + Send> FromRequest<Shared> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, app: &Shared) -> Result<Self, Self::Rejection> {
        let read = Json::<T>::from_request(req, app);
        match tokio::time::timeout(app.body_timeout, read).await {
            Err(_) => Err(ApiError(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {} s",
                    app.body_timeout.as_secs()
                ),
            )),
            Ok(Ok(Json(value))) => Ok(Body(value)),
            Ok(Err(rejection)) => Err(rejection_error(rejection)),
        }
    }
}

fn rejection_error(rejection: JsonRejection) -> ApiError {
    let status = match rejection.status() {
        s @ (StatusCode::PAYLOAD_TOO_LARGE | StatusCode::UNSUPPORTED_MEDIA_TYPE) => s,
        _ => StatusCode::BAD_REQUEST,
    };
    let message = match &rejection {
        JsonRejection::MissingJsonContentType(_) => {
            "expected a JSON body with content-type: application/json".to_string()
        }
        _ if status == StatusCode::PAYLOAD_TOO_LARGE => {
            "the request body is larger than the limit (--max-body)".to_string()
        }
        _ => rejection.body_text(),
    };
    ApiError(status, message)
}

/// `POST /v1/query`: texts or fingerprints, one or a batch.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryBody {
    text: Option<String>,
    #[serde(default)]
    texts: Vec<String>,
    fingerprint: Option<String>,
    #[serde(default)]
    fingerprints: Vec<String>,
    k: Option<u32>,
}

#[derive(Serialize)]
struct QueryResult {
    /// `text:N` (the N-th text, from 1) or the fingerprint as given.
    query: String,
    fingerprint: Option<String>,
    matches: Vec<neardup_dataflow::live::service::Neighbour>,
}

thread_local! {
    /// Each request thread's fingerprinter (it keeps buffers between texts).
    static FINGERPRINTER: RefCell<Option<TextFingerprinter>> = const { RefCell::new(None) };
}

/// A text's fingerprint and digest (`None`: no features).
fn fingerprint(scheme: &Scheme, text: &str) -> Option<(u64, u128)> {
    FINGERPRINTER.with(|cell| {
        let mut cell = cell.borrow_mut();
        let f = cell.get_or_insert_with(|| TextFingerprinter::new(scheme));
        let fp = f.fingerprint(text)?;
        Some((fp.simhash, fp.exact_key))
    })
}

async fn query(
    State(app): State<Shared>,
    Body(body): Body<QueryBody>,
) -> Result<Response, ApiError> {
    let k = answer::check_k(app.k, body.k, KName::Field).map_err(|e| bad_request(e.to_string()))?;
    let texts: Vec<String> = body.text.into_iter().chain(body.texts).collect();
    let hexes: Vec<String> = body
        .fingerprint
        .into_iter()
        .chain(body.fingerprints)
        .collect();
    let n = texts.len() + hexes.len();
    if n == 0 {
        return Err(bad_request(
            "nothing to query: give text, texts, fingerprint or fingerprints",
        ));
    }
    if n > MAX_QUERIES {
        return Err(bad_request(format!(
            "{n} queries in one request; at most {MAX_QUERIES}"
        )));
    }
    let mut fps = Vec::with_capacity(hexes.len());
    for hex in &hexes {
        let fp = encoding::from_hex(hex)
            .map_err(|_| bad_request(format!("fingerprint {hex:?}: expected 16 hex digits")))?;
        fps.push(fp);
    }
    let mut results = Vec::with_capacity(n);
    for (i, text) in texts.iter().enumerate() {
        let found = fingerprint(&app.scheme, text);
        results.push(QueryResult {
            query: format!("text:{}", i + 1),
            fingerprint: found.map(|f| encoding::to_hex(f.0)),
            // An empty text is never matched, as in a run.
            matches: match found {
                Some((fp, digest)) => app.service.query(fp, k, Some(digest)),
                None => Vec::new(),
            },
        });
    }
    for (hex, fp) in hexes.into_iter().zip(fps) {
        results.push(QueryResult {
            query: hex,
            fingerprint: Some(encoding::to_hex(fp)),
            matches: app.service.query(fp, k, None),
        });
    }
    Ok(Json(json!({ "k": k, "results": results })).into_response())
}

/// `PUT /v1/documents/{id}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PutBody {
    text: String,
    url: Option<String>,
    time: Option<String>,
}

fn check_id(id: &str) -> Result<(), ApiError> {
    if id.is_empty() || id.len() > MAX_ID_BYTES {
        return Err(bad_request(format!(
            "a document id has 1 to {MAX_ID_BYTES} bytes (this one has {})",
            id.len()
        )));
    }
    Ok(())
}

async fn put_document(
    State(app): State<Shared>,
    Path(id): Path<String>,
    Body(body): Body<PutBody>,
) -> Result<Response, ApiError> {
    check_id(&id)?;
    let found = fingerprint(&app.scheme, &body.text);
    let write = Write::Put(NewDoc {
        id,
        simhash: found.map_or(0, |f| f.0),
        digest: found.map_or(0, |f| f.1),
        empty: found.is_none(),
        url: body.url,
        time: body.time,
    });
    match submit(&app, write).await? {
        Answer::Put(answer) => {
            let mut value = serde_json::to_value(&answer).map_err(internal)?;
            value["fingerprint"] = json!(found.map(|f| encoding::to_hex(f.0)));
            Ok(Json(value).into_response())
        }
        Answer::Delete(_) => Err(internal("a put answered as a delete")),
    }
}

async fn delete_document(
    State(app): State<Shared>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    check_id(&id)?;
    match submit(&app, Write::Delete(id.clone())).await? {
        Answer::Delete(Some(gone)) => Ok(Json(
            json!({"id": gone.id, "doc_id": gone.doc_id, "deleted": true}),
        )
        .into_response()),
        Answer::Delete(None) => Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no document {id:?}"),
        )),
        Answer::Put(_) => Err(internal("a delete answered as a put")),
    }
}

async fn get_document(
    State(app): State<Shared>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    check_id(&id)?;
    match app.service.get(&id) {
        Some(info) => Ok(Json(info).into_response()),
        None => Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no document {id:?}"),
        )),
    }
}

/// Hands a write to the service's writer and waits for its (durable) answer.
async fn submit(app: &App, write: Write) -> Result<Answer, ApiError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    app.service.submit(write, move |answer| {
        let _ = tx.send(answer);
    });
    match rx.await {
        Ok(answer) => Ok(answer?),
        Err(_) => Err(ServiceError::Stopped.into()),
    }
}

async fn checkpoint(State(app): State<Shared>) -> Result<Response, ApiError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    app.service.submit_checkpoint(move |answer| {
        let _ = tx.send(answer);
    });
    match rx.await {
        Ok(info) => Ok(Json(info?).into_response()),
        Err(_) => Err(ServiceError::Stopped.into()),
    }
}

async fn stats(State(app): State<Shared>) -> Response {
    let stats = app.service.stats();
    let mut value = serde_json::to_value(&stats).unwrap_or_default();
    value["uptime_seconds"] = json!(app.started.elapsed().as_secs());
    Json(value).into_response()
}

/// `GET /healthz`: ok, or 503 once writes are refused (reads are still answered).
async fn healthz(State(app): State<Shared>) -> Response {
    match app.service.stats().write_failure {
        None => Json(json!({"status": "ok"})).into_response(),
        Some(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({
                "status": "refusing writes",
                "reason": format!("a log write failed ({reason}); reads are answered, writes are refused until a restart"),
            })),
        )
            .into_response(),
    }
}

async fn not_found(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError(
        StatusCode::NOT_FOUND,
        format!("no route {method} {}", uri.path()),
    )
}

async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{} does not take {method}", uri.path()),
    )
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
}

/// The bearer token, when one is configured (every route but /healthz).
async fn authorize(State(app): State<Shared>, req: Request, next: Next) -> Response {
    let Some(token) = &app.token else {
        return next.run(req).await;
    };
    if req.uri().path() == "/healthz" {
        return next.run(req).await;
    }
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .unwrap_or_default();
    // Constant time: how much of a guess matched must not show in the answer's timing.
    if given.len() == token.len() && bool::from(given.ct_eq(token)) {
        return next.run(req).await;
    }
    let mut response = ApiError(
        StatusCode::UNAUTHORIZED,
        "a bearer token is required: Authorization: Bearer <token of --token-file>".into(),
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// What a request is counted by: its method, its route ([`route_of`]) and its status.
type RequestKey = (&'static str, Arc<str>, u16);

/// Request counts by route and status, and a latency histogram, for /metrics.
#[derive(Default)]
struct Metrics {
    requests: Mutex<BTreeMap<RequestKey, u64>>,
    /// Counts per [`LATENCY_BUCKETS`] upper bound (the last: above them all).
    latency: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    latency_sum_micros: AtomicU64,
}

/// The latency histogram's bucket bounds, in seconds.
const LATENCY_BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0,
];

/// A request's route as /metrics names it: the route of [`router`] it matched, `other`
/// where none did (never the raw path: ids would make unbounded label sets).
fn route_of(req: &Request) -> Arc<str> {
    match req.extensions().get::<MatchedPath>() {
        Some(path) => path.as_str().into(),
        None => "other".into(),
    }
}

fn method_of(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::PUT => "PUT",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        _ => "other",
    }
}

async fn measure(State(app): State<Shared>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = route_of(&req);
    let method = method_of(req.method());
    let response = next.run(req).await;
    let seconds = started.elapsed().as_secs_f64();
    let m = &app.metrics;
    *m.requests
        .lock()
        .expect("metrics lock")
        .entry((method, route, response.status().as_u16()))
        .or_default() += 1;
    let bucket = LATENCY_BUCKETS
        .iter()
        .position(|&b| seconds <= b)
        .unwrap_or(LATENCY_BUCKETS.len());
    m.latency[bucket].fetch_add(1, Ordering::Relaxed);
    m.latency_sum_micros
        .fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
    response
}

/// `(name, kind, help, value)` of each figure of `/v1/stats` that `/metrics` exports.
fn exported(stats: &Stats) -> [(&'static str, &'static str, &'static str, u64); 14] {
    [
        ("documents", "gauge", "Documents present.", stats.documents),
        (
            "indexed_documents",
            "gauge",
            "Documents present with features.",
            stats.indexed,
        ),
        (
            "clusters",
            "gauge",
            "Clusters of two or more documents.",
            stats.clusters,
        ),
        (
            "clustered_documents",
            "gauge",
            "Documents in clusters.",
            stats.clustered_documents,
        ),
        (
            "log_bytes",
            "gauge",
            "Size of the write-ahead log.",
            stats.log_bytes,
        ),
        (
            "log_records",
            "gauge",
            "Records in the write-ahead log.",
            stats.log_records,
        ),
        (
            "written_since_checkpoint",
            "gauge",
            "Documents written since the last checkpoint.",
            stats.written_since_checkpoint,
        ),
        (
            "generation",
            "gauge",
            "The index generation of the last checkpoint.",
            u64::from(stats.generation),
        ),
        (
            "state_pending",
            "gauge",
            "1 while the last checkpoint's state file is written (in the background).",
            u64::from(stats.state_pending),
        ),
        (
            "merge_running",
            "gauge",
            "1 while a background merge of generations is written.",
            u64::from(stats.merge_running),
        ),
        (
            "writes_total",
            "counter",
            "Writes that changed something (a delete of an absent id is none).",
            stats.writes,
        ),
        (
            "write_batches_total",
            "counter",
            "Log syncs (one per batch of writes).",
            stats.batches,
        ),
        (
            "checkpoints_total",
            "counter",
            "Checkpoints written.",
            stats.checkpoints,
        ),
        (
            "merges_total",
            "counter",
            "Background merges of generations committed.",
            stats.merges,
        ),
    ]
}

/// `GET /metrics`: the Prometheus text format.
async fn metrics(State(app): State<Shared>) -> Response {
    let stats: Stats = app.service.stats();
    let mut out = String::new();
    for (name, kind, help, value) in exported(&stats) {
        out.push_str(&format!(
            "# HELP neardup_{name} {help}\n# TYPE neardup_{name} {kind}\nneardup_{name} {value}\n"
        ));
    }
    out.push_str("# HELP neardup_http_requests_total Requests answered, by method, route and status.\n# TYPE neardup_http_requests_total counter\n");
    for ((method, route, status), n) in app.metrics.requests.lock().expect("metrics lock").iter() {
        out.push_str(&format!(
            "neardup_http_requests_total{{method=\"{method}\",route=\"{route}\",status=\"{status}\"}} {n}\n"
        ));
    }
    out.push_str("# HELP neardup_http_request_duration_seconds Time to answer a request.\n# TYPE neardup_http_request_duration_seconds histogram\n");
    let mut cumulative = 0;
    for (i, bound) in LATENCY_BUCKETS.iter().enumerate() {
        cumulative += app.metrics.latency[i].load(Ordering::Relaxed);
        out.push_str(&format!(
            "neardup_http_request_duration_seconds_bucket{{le=\"{bound}\"}} {cumulative}\n"
        ));
    }
    cumulative += app.metrics.latency[LATENCY_BUCKETS.len()].load(Ordering::Relaxed);
    out.push_str(&format!(
        "neardup_http_request_duration_seconds_bucket{{le=\"+Inf\"}} {cumulative}\nneardup_http_request_duration_seconds_sum {}\nneardup_http_request_duration_seconds_count {cumulative}\n",
        app.metrics.latency_sum_micros.load(Ordering::Relaxed) as f64 / 1e6
    ));
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        out,
    )
        .into_response()
}
