//! Inputs in object stores: `s3://`, `gs://`, `az://` (and `abfs://`, `abfss://`) and plain
//! `http(s)://` URLs, read where local files are read.
//!
//! The idea: an input named by URL stays an [`crate::file::InputFile`] whose path is the
//! URL, and the few places that open a file's bytes ask [`open_range`] (a byte stream),
//! [`object_size`] (its length) or [`ObjectBytes`] (Parquet's random access) instead of the
//! file system when [`is_url`] says so. Everything above them (formats, compression,
//! splitting JSONL by byte ranges and Parquet by row groups, numbering) is the same code for
//! both, so a run over a store gives the tables of a run over the same files on disk.
//!
//! The simple version would download each object whole before reading it. Instead a
//! [`RangeReader`] streams: a task asks for [`STREAM_BLOCK_BYTES`] at a time with ranged
//! GETs, [`BLOCKS_IN_FLIGHT`] at once, and hands each piece to the reader in order as it
//! arrives, up to [`PIECES_AHEAD`] ahead, so the store's latency hides behind the parsing
//! and hashing and a store that serves each connection at a bounded rate sends on several;
//! a unit of a large JSONL object (a byte range) reads only its own bytes, and a worker that
//! starts a unit has the next one's stream started too ([`prefetch`]).
//!
//! Stores are made by the Apache Arrow project's `object_store` crate, from each cloud's
//! usual environment variables (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`, `AWS_REGION`,
//! `AWS_SKIP_SIGNATURE`, `GOOGLE_SERVICE_ACCOUNT`, `AZURE_STORAGE_ACCOUNT_NAME`, ...; see
//! docs/inputs.md). Requests run on one small Tokio runtime of the process; a worker thread
//! waits on a channel for its answer, so the readers need no async code.
//!
//! Faults: `object_store` retries a failed request (5xx, throttling, a connection refused)
//! with exponential backoff; a body cut in the middle, or a request that failed through its
//! retries, is asked again here from the byte reached, up to [`ATTEMPTS`] times, and every
//! such retry is counted ([`retries`], reported in `summary.json`). A failure that lasts is
//! an error naming the object and the byte offset.
//!
//! Outputs are written through the same stores by `write` ([`Object::put_file`],
//! [`Object::create`], ...; see [`crate::run_dir::in_store`] for the protocol).

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use object_store::path::Path as Key;
use object_store::{ClientConfigKey, ClientOptions, ObjectStore, ObjectStoreExt};

use crate::error::IoError;

mod credential_process;
pub mod publish;
mod write;

pub use write::{Stamp, PARTS_IN_FLIGHT, PUT_PART_BYTES};

/// Bytes of a Parquet object ([`ObjectBytes`]) asked for by one ranged GET and cached. 8
/// MiB: large enough that a request's latency (tens of milliseconds from a cloud store) is
/// small beside the time to decode it, small enough that two cached blocks per reading
/// worker are little memory.
pub const BLOCK_BYTES: u64 = 8 << 20;

/// How many times a request is made before it fails: the pauses between them double from
/// 100 ms up to [`MAX_PAUSE`], about half a minute in all, long enough for a store's
/// throttling to pass. The environment variable [`ATTEMPTS_VAR`] sets another number.
pub const ATTEMPTS: u32 = 10;

/// The environment variable that sets [`ATTEMPTS`] (at least 1).
pub const ATTEMPTS_VAR: &str = "NEARDUP_STORE_ATTEMPTS";

/// [`ATTEMPTS`], or what [`ATTEMPTS_VAR`] says.
fn attempts() -> u32 {
    static ATTEMPTS_SET: OnceLock<u32> = OnceLock::new();
    *ATTEMPTS_SET.get_or_init(|| {
        std::env::var(ATTEMPTS_VAR)
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(ATTEMPTS, |n: u32| n.max(1))
    })
}

/// The longest pause between two attempts of a request.
pub const MAX_PAUSE: Duration = Duration::from_secs(10);

/// The pause after the `attempt`th failure (from 1).
fn pause(attempt: u32) -> Duration {
    Duration::from_millis(100u64 << attempt.min(10)).min(MAX_PAUSE)
}

/// Whether a failed request may succeed if asked again: not when the object is missing or
/// access is refused, which asking again cannot change.
fn transient(error: &object_store::Error) -> bool {
    let lasting = matches!(
        error,
        object_store::Error::NotFound { .. }
            | object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. }
            | object_store::Error::InvalidPath { .. }
            | object_store::Error::NotSupported { .. }
            | object_store::Error::NotImplemented { .. }
            | object_store::Error::Generic {
                store: write::LOCAL_FILE,
                ..
            }
    );
    !lasting && !client_error(&error.to_string())
}

/// Whether an error's text holds an HTTP client error (4xx) other than a timeout (408) or
/// throttling (429). A listing's failure comes as `object_store`'s `Generic` error, its
/// status only in its text ("... status code: 403 Forbidden ..."): a wrong key would
/// otherwise be asked again for half a minute.
fn client_error(message: &str) -> bool {
    message.match_indices("status code: ").any(|(at, found)| {
        message[at + found.len()..]
            .get(..3)
            .and_then(|code| code.parse::<u16>().ok())
            .is_some_and(|code| (400..500).contains(&code) && code != 408 && code != 429)
    })
}

/// Runs `request` (made again by `make` for each attempt) until it succeeds, fails in a way
/// that lasts, or has failed [`ATTEMPTS`] times; counts each retry.
async fn retried<T, F, Fut>(mut make: F) -> Result<T, object_store::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, object_store::Error>>,
{
    let mut attempt = 0;
    loop {
        match make().await {
            Ok(answer) => return Ok(answer),
            Err(e) if !transient(&e) => return Err(e),
            Err(e) => {
                attempt += 1;
                if attempt >= attempts() {
                    return Err(e);
                }
                RETRIES.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(pause(attempt)).await;
            }
        }
    }
}

/// The URL schemes read from object stores.
const SCHEMES: [&str; 8] = [
    "s3://", "s3a://", "gs://", "az://", "abfs://", "abfss://", "http://", "https://",
];

/// Whether `name` is a URL of an object store or web server rather than a local path.
pub fn is_url(name: &str) -> bool {
    let lower = name.get(..8).unwrap_or(name).to_ascii_lowercase();
    SCHEMES.iter().any(|s| lower.starts_with(s))
}

/// Whether the input at `path` is an object named by URL ([`is_url`]).
pub fn is_remote(path: &Path) -> bool {
    path.to_str().is_some_and(is_url)
}

/// Refuses a URL where only a local path will do (an index, `extract`'s output, ...):
/// [`IoError::OutputInStore`] naming `what` ("index", "output directory").
pub fn local_only(path: &Path, what: &'static str) -> Result<(), IoError> {
    match is_remote(path) {
        true => Err(IoError::OutputInStore {
            url: path.to_string_lossy().into_owned(),
            what,
        }),
        false => Ok(()),
    }
}

/// Retries of blocks made by this process so far (reads cut in the middle, requests failed
/// through `object_store`'s retries).
pub fn retries() -> u64 {
    RETRIES.load(Ordering::Relaxed)
}

static RETRIES: AtomicU64 = AtomicU64::new(0);

/// The process's runtime for store requests: two threads, enough to keep every reading
/// worker's next block in flight (the requests wait on the network, not the CPU).
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("neardup-store")
            .enable_all()
            .build()
            .expect("a Tokio runtime for object store requests")
    })
}

/// Runs `request` on the runtime and waits for its answer on the calling thread (never a
/// runtime thread); `None` if the runtime stopped.
fn block_on<T: Send + 'static>(
    request: impl std::future::Future<Output = T> + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::sync_channel(1);
    runtime().spawn(async move {
        let _ = tx.send(request.await);
    });
    rx.recv().ok()
}

/// An object: the store that holds it and its key there.
#[derive(Clone)]
pub struct Object {
    url: String,
    store: Arc<dyn ObjectStore>,
    key: Key,
}

impl std::fmt::Debug for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

fn remote_err(url: &str, offset: Option<u64>, cause: impl std::fmt::Display) -> IoError {
    IoError::Remote {
        url: url.to_owned(),
        offset,
        cause: cause.to_string(),
    }
}

/// The S3 settings of the AWS profile files that the environment does not set: the
/// profile `AWS_PROFILE` (or `default`) of `AWS_SHARED_CREDENTIALS_FILE` (or
/// `~/.aws/credentials`: `aws_access_key_id`, `aws_secret_access_key`, `aws_session_token`)
/// and of `AWS_CONFIG_FILE` (or `~/.aws/config`, section `[profile NAME]`, or `[default]`:
/// the same keys, `region` and `endpoint_url`), and its `credential_process` when it has
/// no keys (`credential_process`). A profile that reaches its keys through a role or SSO
/// without a `credential_process` is refused, saying how to give it one; a profile named by
/// `AWS_PROFILE` that neither file has is an error.
fn aws_profile(
    mut builder: object_store::aws::AmazonS3Builder,
) -> Result<object_store::aws::AmazonS3Builder, String> {
    use object_store::aws::AmazonS3ConfigKey as K;
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    if std::env::var("AWS_SKIP_SIGNATURE").is_ok_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(builder);
    }
    let named = std::env::var("AWS_PROFILE").ok().filter(|p| !p.is_empty());
    let profile = named.clone().unwrap_or_else(|| "default".into());
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let file = |var: &str, name: &str| {
        std::env::var_os(var)
            .map(std::path::PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))
    };
    let config_section = match profile.as_str() {
        "default" => "default".to_owned(),
        name => format!("profile {name}"),
    };
    let mut found = false;
    // What the profile says beyond keys: a command that prints them, or a way to them that
    // neardup does not follow (roles, SSO).
    let (mut process, mut follows, mut keys) = (None, None, set("AWS_ACCESS_KEY_ID"));
    for (path, section) in [
        (
            file("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
            profile.clone(),
        ),
        (file("AWS_CONFIG_FILE", "config"), config_section),
    ] {
        let Some(path) = path.filter(|p| p.is_file()) else {
            continue;
        };
        let ini = ini::Ini::load_from_file(&path)
            .map_err(|e| format!("{}: cannot read the AWS profile file: {e}", path.display()))?;
        let Some(values) = ini.section(Some(section.as_str())) else {
            continue;
        };
        found = true;
        keys |= values.contains_key("aws_access_key_id");
        process = process.or(values.get("credential_process").map(str::to_string));
        follows = follows.or(FOLLOWS
            .iter()
            .find(|key| values.contains_key(**key))
            .copied());
        for (key, var, config) in [
            ("aws_access_key_id", "AWS_ACCESS_KEY_ID", K::AccessKeyId),
            (
                "aws_secret_access_key",
                "AWS_SECRET_ACCESS_KEY",
                K::SecretAccessKey,
            ),
            ("aws_session_token", "AWS_SESSION_TOKEN", K::Token),
            ("region", "AWS_REGION", K::Region),
            ("endpoint_url", "AWS_ENDPOINT_URL", K::Endpoint),
        ] {
            let also_set = var == "AWS_REGION" && set("AWS_DEFAULT_REGION");
            if let Some(value) = values.get(key).filter(|_| !set(var) && !also_set) {
                builder = builder.with_config(config, value);
            }
        }
    }
    if let (Some(command), false) = (&process, keys) {
        builder = builder.with_credentials(Arc::new(credential_process::ProcessCredentials::new(
            command,
        )));
    }
    let elsewhere = [
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    ]
    .iter()
    .chain(&["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"])
    .any(|var| set(var));
    match (found, named, follows) {
        (false, Some(name), _) => Err(format!(
            "AWS_PROFILE names the profile {name}, which neither the credentials nor the \
             config file has"
        )),
        (true, _, Some(key)) if process.is_none() && !keys && !elsewhere => Err(format!(
            "the AWS profile {profile} gets its keys through {key}, which neardup does not \
             follow: add `credential_process = aws configure export-credentials --profile \
             {profile} --format process` to it, or export its keys (docs/inputs.md, \
             \"Object stores\")"
        )),
        _ => Ok(builder),
    }
}

/// Profile keys that lead to credentials by a way neardup does not follow (an assumed role,
/// SSO): a profile with one of them and no keys or `credential_process` is refused, saying
/// how to follow it.
const FOLLOWS: [&str; 4] = ["role_arn", "sso_session", "sso_start_url", "source_profile"];

/// The environment variable that sets how long one request may take, in seconds, before it
/// fails and is asked again (from the byte reached): a stalled server is left after that
/// long. Unset, the clients' own 30 s.
pub const TIMEOUT_VAR: &str = "NEARDUP_STORE_TIMEOUT";

/// [`TIMEOUT_VAR`] as the clients' setting (`"5s"`), or `None`; a value that is not a
/// positive number of seconds is an error naming it.
fn request_timeout() -> Result<Option<String>, String> {
    let Ok(value) = std::env::var(TIMEOUT_VAR) else {
        return Ok(None);
    };
    match value.trim().parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && seconds.is_finite() => {
            Ok(Some(format!("{}ms", (seconds * 1000.0).ceil() as u64)))
        }
        _ => Err(format!(
            "{TIMEOUT_VAR}={value:?}: expected a positive number of seconds"
        )),
    }
}

/// The clients' own retries are off: every request is retried here ([`retried`],
/// [`stream_range`]), where each retry is counted and a body cut in the middle is asked for
/// again from the byte reached.
fn no_retries() -> object_store::RetryConfig {
    object_store::RetryConfig {
        max_retries: 0,
        ..Default::default()
    }
}

/// The store of a URL's bucket (or host), made once per process from the environment.
fn store_of(url: &url::Url) -> Result<Arc<dyn ObjectStore>, String> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<dyn ObjectStore>>>> = OnceLock::new();
    let root = format!("{}://{}", url.scheme(), url.authority());
    let mut stores = STORES.get_or_init(Default::default).lock().expect("stores");
    if let Some(store) = stores.get(&root) {
        return Ok(store.clone());
    }
    let timeout = request_timeout()?;
    // A cloud's builder with the timeout, the URL's bucket and no retries of its own.
    macro_rules! cloud {
        ($builder:expr, $key:path) => {{
            let mut builder = $builder;
            if let Some(timeout) = &timeout {
                builder = builder.with_config($key(ClientConfigKey::Timeout), timeout);
            }
            let built = builder.with_url(&root).with_retry(no_retries()).build();
            Arc::new(built.map_err(|e| e.to_string())?) as Arc<dyn ObjectStore>
        }};
    }
    let store: Arc<dyn ObjectStore> = match url.scheme() {
        "s3" | "s3a" => cloud!(
            aws_profile(object_store::aws::AmazonS3Builder::from_env())?,
            object_store::aws::AmazonS3ConfigKey::Client
        ),
        "gs" => cloud!(
            object_store::gcp::GoogleCloudStorageBuilder::from_env(),
            object_store::gcp::GoogleConfigKey::Client
        ),
        "az" | "abfs" | "abfss" => cloud!(
            object_store::azure::MicrosoftAzureBuilder::from_env(),
            object_store::azure::AzureConfigKey::Client
        ),
        "http" | "https" => {
            let mut options = ClientOptions::new().with_allow_http(true);
            if let Some(timeout) = &timeout {
                options = options.with_config(ClientConfigKey::Timeout, timeout);
            }
            Arc::new(
                object_store::http::HttpBuilder::new()
                    .with_url(&root)
                    .with_retry(no_retries())
                    .with_client_options(options)
                    .build()
                    .map_err(|e| e.to_string())?,
            )
        }
        other => return Err(format!("no object store for URLs of scheme {other}")),
    };
    stores.insert(root, store.clone());
    Ok(store)
}

impl Object {
    /// The object named by `url` (nothing is asked of the store yet).
    pub fn at(url: &str) -> Result<Object, IoError> {
        let parsed = url::Url::parse(url).map_err(|e| remote_err(url, None, e))?;
        let store = store_of(&parsed).map_err(|e| remote_err(url, None, e))?;
        let key = Key::from_url_path(parsed.path()).map_err(|e| remote_err(url, None, e))?;
        Ok(Object {
            url: url.to_owned(),
            store,
            key,
        })
    }

    /// The object's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The object's size in bytes (a HEAD request, remembered for the process: listings
    /// fill the same memory, so a listed object is never asked again).
    pub fn size(&self) -> Result<u64, IoError> {
        self.probe()?
            .ok_or_else(|| remote_err(&self.url, None, "no such object"))
    }

    /// The object's size, or `None` if the store has no object of that name.
    pub fn probe(&self) -> Result<Option<u64>, IoError> {
        if let Some(&size) = sizes().lock().expect("sizes").get(&self.url) {
            return Ok(Some(size));
        }
        let (store, key) = (self.store.clone(), self.key.clone());
        let head = block_on(async move { retried(|| store.head(&key)).await })
            .ok_or_else(|| remote_err(&self.url, None, "the store's runtime stopped"))?;
        match head {
            Ok(head) => {
                remember_size(&self.url, head.size);
                Ok(Some(head.size))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(remote_err(&self.url, None, e)),
        }
    }

    /// Bytes `range` of the object (clipped to its end), read as a [`RangeReader`] reads
    /// them (`stream_range`); an error names the object and the first byte not read.
    pub fn get_range(&self, range: Range<u64>) -> Result<Bytes, IoError> {
        let (tx, mut rx) = tokio::sync::mpsc::channel(PIECES_AHEAD);
        let (store, key) = (self.store.clone(), self.key.clone());
        runtime().spawn(stream_range(store, key, range.clone(), tx));
        let mut parts: Vec<Bytes> = Vec::new();
        while let Some(piece) = rx.blocking_recv() {
            match piece {
                Ok(bytes) => parts.push(bytes),
                Err((offset, cause)) => return Err(remote_err(&self.url, Some(offset), cause)),
            }
        }
        let read: u64 = parts.iter().map(|p| p.len() as u64).sum();
        if read < range.end.saturating_sub(range.start) {
            let at = range.start + read;
            return Err(remote_err(
                &self.url,
                Some(at),
                "the store's runtime stopped",
            ));
        }
        Ok(match parts.len() {
            1 => parts.pop().expect("one part"),
            _ => Bytes::from(parts.concat()),
        })
    }
}

fn sizes() -> &'static Mutex<HashMap<String, u64>> {
    static SIZES: OnceLock<Mutex<HashMap<String, u64>>> = OnceLock::new();
    SIZES.get_or_init(Default::default)
}

fn remember_size(url: &str, size: u64) {
    sizes().lock().expect("sizes").insert(url.to_owned(), size);
}

/// The size of the object at `path` (a URL, [`is_remote`]).
pub fn object_size(path: &Path) -> Result<u64, IoError> {
    Object::at(&path.to_string_lossy())?.size()
}

/// Every object whose key starts with `url`'s path (the prefix, as a store lists it:
/// `s3://bucket/dir/` lists `dir/` and everything below), as `(url, size)` sorted by key.
pub fn list(url: &str) -> Result<Vec<(String, u64)>, IoError> {
    use futures_util::TryStreamExt;
    let parsed = url::Url::parse(url).map_err(|e| remote_err(url, None, e))?;
    let store = store_of(&parsed).map_err(|e| remote_err(url, None, e))?;
    let path = parsed.path().trim_matches('/');
    let prefix = match path {
        "" => None,
        p => Some(Key::from_url_path(p).map_err(|e| remote_err(url, None, e))?),
    };
    let listed =
        block_on(
            async move { retried(|| store.list(prefix.as_ref()).try_collect::<Vec<_>>()).await },
        )
        .ok_or_else(|| remote_err(url, None, "the store's runtime stopped"))?
        .map_err(|e| remote_err(url, None, e))?;
    let root = format!("{}://{}", parsed.scheme(), parsed.authority());
    let mut objects: Vec<(String, u64)> = listed
        .into_iter()
        .map(|meta| {
            let url = format!("{root}/{}", meta.location);
            remember_size(&url, meta.size);
            (url, meta.size)
        })
        .collect();
    objects.sort();
    Ok(objects)
}

/// How many received pieces of an object a [`RangeReader`] holds ahead of its reader: the
/// pieces are what the connection delivers (16 to 64 KiB), so a reader holds a few MiB at
/// most, enough that the next request's latency passes while it parses.
pub const PIECES_AHEAD: usize = 256;

/// What a reader's stream sends: a piece of the object, or the failure that ended it (the
/// first byte not read, and why).
type Piece = Result<Bytes, (u64, String)>;

/// Reads bytes `start..end` of an object (clipped to its end) as a stream: a task of the
/// store's runtime asks for them by ranged GETs of [`STREAM_BLOCK_BYTES`],
/// [`BLOCKS_IN_FLIGHT`] at once, and hands each piece to the reader in order as it
/// arrives, up to [`PIECES_AHEAD`] ahead of it; a GET
/// that fails is asked again from the byte reached (see the module docs). It can also seek,
/// which starts a new stream there.
pub struct RangeReader {
    object: Object,
    end: u64,
    /// The next byte to be handed out.
    at: u64,
    /// The piece being read, from `at`.
    piece: Bytes,
    /// The stream of the pieces after it.
    stream: Option<tokio::sync::mpsc::Receiver<Piece>>,
}

impl RangeReader {
    /// A reader of bytes `start..end` of `object` (`end` may be past its end).
    pub fn new(object: Object, start: u64, end: u64) -> Result<RangeReader, IoError> {
        let end = end.min(object.size()?);
        let mut reader = RangeReader {
            object,
            end,
            at: start.min(end),
            piece: Bytes::new(),
            stream: None,
        };
        reader.start_stream();
        Ok(reader)
    }

    /// Starts streaming from `at` (nothing when at the end).
    fn start_stream(&mut self) {
        self.stream = (self.at < self.end).then(|| {
            let (tx, rx) = tokio::sync::mpsc::channel(PIECES_AHEAD);
            let (store, key) = (self.object.store.clone(), self.object.key.clone());
            runtime().spawn(stream_range(store, key, self.at..self.end, tx));
            rx
        });
    }
}

/// Blocks of one stream asked for at once: the reader drains the first while the others
/// arrive, so that a store that serves each request at a bounded rate (a few tens of MB/s
/// per connection is common) sends several at a time.
pub const BLOCKS_IN_FLIGHT: usize = 4;

/// Streams bytes `range` of `key` into `tx` by ranged GETs of at most [`STREAM_BLOCK_BYTES`],
/// [`BLOCKS_IN_FLIGHT`] at a time: each block is fetched by a task of its own into a channel
/// of its own, and the blocks' pieces are handed on in order, the first block's as they
/// arrive. A failure that lasts ends the stream as its last message. Stops when the reader
/// is gone (the fetches stop when their channels are dropped).
async fn stream_range(
    store: Arc<dyn ObjectStore>,
    key: Key,
    range: Range<u64>,
    tx: tokio::sync::mpsc::Sender<Piece>,
) {
    let mut next = range.start;
    let mut pending: std::collections::VecDeque<tokio::sync::mpsc::Receiver<Piece>> =
        Default::default();
    loop {
        while pending.len() < BLOCKS_IN_FLIGHT && next < range.end {
            let block = next..(next + STREAM_BLOCK_BYTES).min(range.end);
            next = block.end;
            let (block_tx, block_rx) = tokio::sync::mpsc::channel(PIECES_AHEAD);
            tokio::spawn(fetch_block(store.clone(), key.clone(), block, block_tx));
            pending.push_back(block_rx);
        }
        let Some(mut block) = pending.pop_front() else {
            return;
        };
        while let Some(piece) = block.recv().await {
            let failed = piece.is_err();
            if tx.send(piece).await.is_err() || failed {
                return;
            }
        }
    }
}

/// Bytes asked for by one ranged GET of a stream. 4 MiB with [`BLOCKS_IN_FLIGHT`] = 4: of
/// 8, 4 and 2 MiB (8 MiB one at a time before), the fastest reading of dev-medium's 16
/// shards of 9 MB from the loopback S3 server (docs/performance.md); at most 16 MiB in
/// flight per stream.
pub const STREAM_BLOCK_BYTES: u64 = 4 << 20;

/// Streams bytes `block` of `key` into `tx`, asked again from the byte reached after a
/// failure, up to [`ATTEMPTS`] times with a growing pause; a failure that lasts is sent as
/// the last message.
async fn fetch_block(
    store: Arc<dyn ObjectStore>,
    key: Key,
    block: Range<u64>,
    tx: tokio::sync::mpsc::Sender<Piece>,
) {
    let mut at = block.start;
    let mut attempt = 0;
    while at < block.end {
        match stream_block(&*store, &key, at..block.end, &tx, &mut at).await {
            Ok(true) => attempt = 0,
            Ok(false) => return,
            Err((lasting, cause)) => {
                attempt += 1;
                if lasting || attempt >= attempts() {
                    let _ = tx.send(Err((at, cause))).await;
                    return;
                }
                RETRIES.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(pause(attempt)).await;
            }
        }
    }
}

/// Streams bytes `range` of `key` into `tx`, moving `at` past each piece sent: `Ok(false)`
/// when the reader is gone. A failure says whether it lasts (asking again cannot help).
async fn stream_block(
    store: &dyn ObjectStore,
    key: &Key,
    range: Range<u64>,
    tx: &tokio::sync::mpsc::Sender<Piece>,
    at: &mut u64,
) -> Result<bool, (bool, String)> {
    use futures_util::StreamExt;
    let failed = |e: object_store::Error| (!transient(&e), e.to_string());
    let options = object_store::GetOptions {
        range: Some(range.clone().into()),
        ..Default::default()
    };
    let mut stream = store
        .get_opts(key, options)
        .await
        .map_err(failed)?
        .into_stream();
    while let Some(piece) = stream.next().await {
        let piece = piece.map_err(failed)?;
        *at += piece.len() as u64;
        if tx.send(Ok(piece)).await.is_err() {
            return Ok(false);
        }
    }
    if *at < range.end {
        return Err((
            false,
            format!(
                "the store sent {} bytes of {}",
                *at - range.start,
                range.end - range.start
            ),
        ));
    }
    Ok(true)
}

fn io_error(e: IoError) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

impl Read for RangeReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.piece.is_empty() {
            let Some(stream) = self.stream.as_mut() else {
                return Ok(0);
            };
            match stream.blocking_recv() {
                Some(Ok(piece)) => self.piece = piece,
                Some(Err((offset, cause))) => {
                    self.stream = None;
                    return Err(io_error(remote_err(&self.object.url, Some(offset), cause)));
                }
                None if self.at < self.end => {
                    self.stream = None;
                    return Err(io_error(remote_err(
                        &self.object.url,
                        Some(self.at),
                        "the store's runtime stopped",
                    )));
                }
                None => self.stream = None,
            }
        }
        let n = buf.len().min(self.piece.len());
        buf[..n].copy_from_slice(&self.piece[..n]);
        let _ = self.piece.split_to(n);
        self.at += n as u64;
        Ok(n)
    }
}

impl Seek for RangeReader {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        let to = match pos {
            SeekFrom::Start(to) => Some(to),
            SeekFrom::End(back) => self.end.checked_add_signed(back),
            SeekFrom::Current(by) => self.at.checked_add_signed(by),
        }
        .ok_or_else(|| std::io::Error::other("seek before the start of the object"))?;
        if to != self.at {
            self.at = to.min(self.end);
            self.piece = Bytes::new();
            self.start_stream();
        }
        Ok(self.at)
    }
}

/// A reader of an object whose every read is one ranged GET of the bytes asked for: for
/// reading a little here and there (the line starts of a large JSONL object's pieces), where
/// a [`RangeReader`]'s stream would read ahead for nothing.
pub struct ReadAt {
    object: Object,
    size: u64,
    at: u64,
}

impl ReadAt {
    /// A reader of the object at `path` (a URL), from its start.
    pub fn open(path: &Path) -> Result<ReadAt, IoError> {
        let object = Object::at(&path.to_string_lossy())?;
        let size = object.size()?;
        Ok(ReadAt {
            object,
            size,
            at: 0,
        })
    }
}

impl Read for ReadAt {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let end = (self.at + buf.len() as u64).min(self.size);
        if end <= self.at {
            return Ok(0);
        }
        let bytes = self.object.get_range(self.at..end).map_err(io_error)?;
        buf[..bytes.len()].copy_from_slice(&bytes);
        self.at += bytes.len() as u64;
        Ok(bytes.len())
    }
}

impl Seek for ReadAt {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.at = match pos {
            SeekFrom::Start(to) => Some(to),
            SeekFrom::End(back) => self.size.checked_add_signed(back),
            SeekFrom::Current(by) => self.at.checked_add_signed(by),
        }
        .ok_or_else(|| std::io::Error::other("seek before the start of the object"))?;
        Ok(self.at)
    }
}

/// Opens bytes `start..end` of the object at `path` (a URL) for reading.
pub fn open_range(path: &Path, start: u64, end: u64) -> Result<RangeReader, IoError> {
    let url = path.to_string_lossy();
    let key = (url.to_string(), start, end);
    let mut started = prefetched().lock().expect("prefetched");
    if let Some(at) = started.iter().position(|(k, _)| *k == key) {
        let (_, reader) = started.remove(at).expect("found");
        return Ok(reader);
    }
    drop(started);
    RangeReader::new(Object::at(&url)?, start, end)
}

/// Streams started ahead of their readers, by what they read (URL, start, end).
type Prefetched = std::collections::VecDeque<((String, u64, u64), RangeReader)>;

fn prefetched() -> &'static Mutex<Prefetched> {
    static PREFETCHED: OnceLock<Mutex<Prefetched>> = OnceLock::new();
    PREFETCHED.get_or_init(Default::default)
}

/// Streams started ahead at most, over the process: the oldest is dropped (its requests
/// stopped) to make room. One per reading worker is what [`prefetch`]'s callers start.
pub const PREFETCHED_AT_MOST: usize = 32;

/// Starts streaming bytes `start..end` of the object at `path` (a URL; nothing for a local
/// path) for an [`open_range`] of the same bytes soon: a worker that starts a unit asks for
/// its next one, so that the next object's first blocks arrive while this one is read (a
/// store serves each request at a bounded rate, and a unit of a few MiB is one or two
/// requests). Failures are left for the `open_range` to meet.
pub fn prefetch(path: &Path, start: u64, end: u64) {
    if !is_remote(path) {
        return;
    }
    let url = path.to_string_lossy();
    let Ok(reader) = Object::at(&url).and_then(|o| RangeReader::new(o, start, end)) else {
        return;
    };
    let mut started = prefetched().lock().expect("prefetched");
    if started.len() >= PREFETCHED_AT_MOST {
        started.pop_front();
    }
    started.push_back(((url.to_string(), start, end), reader));
}

/// A Parquet file's bytes for the Parquet reader: a local file, or an object read by
/// ranged GETs.
///
/// The Parquet reader asks for small pieces (the footer's last 8 bytes, then each page's
/// header and its data), one request each if passed on as they come. So the object's bytes
/// are asked for by blocks of [`BLOCK_BYTES`] (the footer with the last [`TAIL_BYTES`]), the
/// last two kept: the pages of the column chunks of a row group are read in order, from the
/// few blocks that hold them.
pub enum ObjectBytes {
    Local(std::fs::File),
    Remote(RemoteBytes),
}

/// How much of an object's end is read when its footer is asked for: 1 MiB, which holds
/// the footer of any table of documents of a sane number of row groups and columns.
pub const TAIL_BYTES: u64 = 1 << 20;

/// An object read through a few cached blocks (see [`ObjectBytes`]).
pub struct RemoteBytes {
    object: Object,
    size: u64,
    /// The blocks read last, newest first: (their first byte, their bytes).
    blocks: Mutex<Vec<(u64, Bytes)>>,
}

impl RemoteBytes {
    /// Bytes `start..start + len` (clipped to the end), from a cached block or a new one.
    fn bytes(&self, start: u64, len: u64) -> Result<Bytes, IoError> {
        let start = start.min(self.size);
        let end = (start + len).min(self.size);
        let mut blocks = self.blocks.lock().expect("blocks");
        if let Some((at, block)) = blocks
            .iter()
            .find(|(at, b)| *at <= start && end <= at + b.len() as u64)
        {
            return Ok(block.slice((start - at) as usize..(end - at) as usize));
        }
        let from = match start >= self.size.saturating_sub(TAIL_BYTES) {
            true => self.size.saturating_sub(TAIL_BYTES),
            false => start,
        };
        let to = (from + BLOCK_BYTES.max(end - from)).min(self.size);
        let block = self.object.get_range(from..to)?;
        let piece = block.slice((start - from) as usize..(end - from) as usize);
        blocks.insert(0, (from, block));
        blocks.truncate(2);
        Ok(piece)
    }
}

/// A reader from a cached block on, then from the object itself.
struct ThenObject {
    head: Bytes,
    rest: Option<(Object, u64, u64)>,
    reader: Option<RangeReader>,
}

impl Read for ThenObject {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !self.head.is_empty() {
            let n = buf.len().min(self.head.len());
            buf[..n].copy_from_slice(&self.head[..n]);
            let _ = self.head.split_to(n);
            return Ok(n);
        }
        if let Some((object, start, end)) = self.rest.take() {
            self.reader = Some(RangeReader::new(object, start, end).map_err(io_error)?);
        }
        match self.reader.as_mut() {
            Some(reader) => reader.read(buf),
            None => Ok(0),
        }
    }
}

impl ObjectBytes {
    /// Opens the file or object at `path`.
    pub fn open(path: &Path) -> Result<ObjectBytes, IoError> {
        if is_remote(path) {
            let object = Object::at(&path.to_string_lossy())?;
            let size = object.size()?;
            Ok(ObjectBytes::Remote(RemoteBytes {
                object,
                size,
                blocks: Mutex::new(Vec::new()),
            }))
        } else {
            std::fs::File::open(path)
                .map(ObjectBytes::Local)
                .map_err(|cause| IoError::Open {
                    path: path.to_path_buf(),
                    cause,
                })
        }
    }
}

fn external(e: IoError) -> parquet::errors::ParquetError {
    parquet::errors::ParquetError::External(Box::new(e))
}

impl parquet::file::reader::Length for ObjectBytes {
    fn len(&self) -> u64 {
        match self {
            ObjectBytes::Local(file) => file.len(),
            ObjectBytes::Remote(remote) => remote.size,
        }
    }
}

impl parquet::file::reader::ChunkReader for ObjectBytes {
    type T = Box<dyn Read + Send>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        match self {
            ObjectBytes::Local(file) => Ok(Box::new(file.get_read(start)?)),
            ObjectBytes::Remote(remote) if start >= remote.size => Ok(Box::new(std::io::empty())),
            ObjectBytes::Remote(remote) => {
                // What the cached block holds from `start`, then the object after it.
                let head = remote.bytes(start, 1).map_err(external)?;
                let blocks = remote.blocks.lock().expect("blocks");
                let (at, block) = blocks
                    .iter()
                    .find(|(at, b)| *at <= start && start < at + b.len() as u64)
                    .cloned()
                    .unwrap_or((start, head));
                let block_end = at + block.len() as u64;
                Ok(Box::new(ThenObject {
                    head: block.slice((start - at) as usize..),
                    rest: (block_end < remote.size)
                        .then(|| (remote.object.clone(), block_end, remote.size)),
                    reader: None,
                }))
            }
        }
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        match self {
            ObjectBytes::Local(file) => file.get_bytes(start, length),
            ObjectBytes::Remote(remote) => remote.bytes(start, length as u64).map_err(external),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths() {
        for url in [
            "s3://b/k",
            "S3://b/",
            "gs://b/x.jsonl",
            "az://c/p",
            "abfss://c@a/p",
        ] {
            assert!(is_url(url), "{url}");
        }
        for url in ["http://host/x", "https://host/x.parquet", "s3a://b/k"] {
            assert!(is_url(url), "{url}");
        }
        for path in ["data/s3://x", "s3:/b", "/tmp/a.jsonl", "-", "", "file.s3"] {
            assert!(!is_url(path), "{path}");
        }
    }

    #[test]
    fn client_errors_last_and_throttling_passes() {
        let said = |code: &str| {
            format!(
                "Generic S3 error: Error performing list request: Error performing GET \
                 http://127.0.0.1:9/b?list-type=2 in 1ms - Server returned non-2xx status \
                 code: {code}: <Error/>"
            )
        };
        assert!(client_error(&said("403 Forbidden")));
        assert!(client_error(&said("400 Bad Request")));
        assert!(!client_error(&said("429 Too Many Requests")));
        assert!(!client_error(&said("408 Request Timeout")));
        assert!(!client_error(&said("503 Service Unavailable")));
        assert!(!client_error(&said("500 Internal Server Error")));
        assert!(!client_error("error sending request: connection reset"));
    }

    #[test]
    fn pauses_double_to_their_bound() {
        assert_eq!(pause(1), Duration::from_millis(200));
        assert_eq!(pause(2), Duration::from_millis(400));
        assert_eq!(pause(9), MAX_PAUSE);
        assert_eq!(pause(40), MAX_PAUSE);
    }
}
