//! The crate's error type.
//!
//! Every message starts with the file it is about (stdin is shown as
//! `<stdin>`), then the line or row where there is one, then what was wrong,
//! so a user reading one log line can find the bad input without context.
//!
//! Each message is complete, the underlying error's text at its end. The underlying error
//! is kept, typed, in the variant's `cause` field rather than returned by `source()`, so a
//! chain printed as `outer: inner` never says it twice.

use std::path::{Path, PathBuf};

use arrow::error::ArrowError;
use parquet::errors::ParquetError;

use crate::compress::Compression;
use crate::record::RecordError;

/// Everything that can go wrong reading inputs or writing outputs.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// A path named on the command line does not exist.
    #[error("{}: no such file or directory", shown(path))]
    NotFound { path: PathBuf },

    /// Input patterns (files, directories, globs) that matched no input file.
    #[error("{}", no_inputs_message(patterns))]
    NoInputs { patterns: Vec<String> },

    /// A glob pattern that the `glob` crate cannot parse.
    #[error("invalid glob pattern {pattern:?}: {message}")]
    BadPattern { pattern: String, message: String },

    /// An output named by URL: outputs are written to directories (local or shared) only.
    #[error(
        "{url}: the {what} cannot be in an object store (the outputs of `run`, `search` and \
         `substrings` can: --output, --write-dedup); write it to a local or shared directory \
         (docs/outputs.md, \"Outputs in an object store\")"
    )]
    OutputInStore { url: String, what: &'static str },

    /// An object store (or web server) refused or failed a request for an input, through
    /// its retries; `offset` is the first byte not read, where a read failed.
    #[error("{url}: {}{cause}", remote_where(*offset))]
    Remote {
        url: String,
        offset: Option<u64>,
        cause: String,
    },

    /// A file or directory could not be opened, listed or inspected.
    #[error("{}: cannot open: {cause}", shown(path))]
    Open {
        path: PathBuf,
        cause: std::io::Error,
    },

    /// Reading (or decompressing) a line-oriented file failed at `line`.
    #[error("{}:{line}: {}: {cause}", shown(path), read_failure(*compression))]
    Read {
        path: PathBuf,
        line: u64,
        compression: Compression,
        cause: std::io::Error,
    },

    /// Reading (or decompressing) a whole file failed.
    #[error("{}: {}: {cause}", shown(path), read_failure(*compression))]
    ReadWhole {
        path: PathBuf,
        compression: Compression,
        cause: std::io::Error,
    },

    /// Reading (or decompressing) a web archive failed; `offset` is the byte offset in the
    /// file of the gzip member being read, or of the failure in an uncompressed archive.
    #[error("{}: byte {offset}: {}: {cause}", shown(path), read_failure(*compression))]
    ArchiveRead {
        path: PathBuf,
        offset: u64,
        compression: Compression,
        cause: std::io::Error,
    },

    /// A web archive that breaks its format at `offset` (see [`IoError::ArchiveRead`]).
    #[error("{}: byte {offset}: {what}", shown(path))]
    Archive {
        path: PathBuf,
        offset: u64,
        what: String,
    },

    /// An archive record that could not be used (`record` counts from 0 in the file).
    #[error("{}: record {record}: {cause}", shown(path))]
    ArchiveRecord {
        path: PathBuf,
        record: u64,
        cause: RecordError,
    },

    /// A plain-text document that is not valid UTF-8.
    #[error("{}: invalid UTF-8 at byte offset {offset}", shown(path))]
    InvalidUtf8 { path: PathBuf, offset: u64 },

    /// A line of a file numbered by byte offsets (a large uncompressed JSONL file, read in
    /// pieces) that could not be used: `offset` is where the line starts.
    #[error("{}: line at byte {offset}: {cause}", shown(path))]
    RecordAtByte {
        path: PathBuf,
        offset: u64,
        cause: RecordError,
    },

    /// Reading a piece of a file numbered by byte offsets failed in the line at `offset`.
    #[error("{}: line at byte {offset}: {}: {cause}", shown(path), read_failure(*compression))]
    ReadAtByte {
        path: PathBuf,
        offset: u64,
        compression: Compression,
        cause: std::io::Error,
    },

    /// A JSONL record that could not be used.
    #[error("{}:{line}: {cause}", shown(path))]
    Record {
        path: PathBuf,
        line: u64,
        cause: RecordError,
    },

    /// A Parquet row that could not be used (`row` counts from 0 in the file).
    #[error("{}: row {row}: {cause}", shown(path))]
    Row {
        path: PathBuf,
        row: u64,
        cause: RecordError,
    },

    /// The file is not Parquet, or its footer or metadata is damaged.
    #[error("{}: cannot read as Parquet: {cause}", shown(path))]
    Parquet { path: PathBuf, cause: ParquetError },

    /// Decoding the data of a row group failed.
    #[error("{}: row group {row_group}: cannot decode: {cause}", shown(path))]
    Decode {
        path: PathBuf,
        row_group: usize,
        cause: ArrowError,
    },

    /// A run directory without its `_SUCCESS` marker.
    #[error("{}: no _SUCCESS: the run is incomplete or failed", shown(path))]
    Incomplete { path: PathBuf },

    /// A table of a run whose columns are not what neardup writes.
    #[error("{}: {reason}", shown(path))]
    BadTable { path: PathBuf, reason: String },

    /// The metadata describes something impossible.
    #[error("{}: corrupt Parquet metadata: {reason}", shown(path))]
    Corrupt { path: PathBuf, reason: String },

    /// A column the caller asked for is not in the file.
    #[error(
        "{}: no column {column:?}; the file has columns: {}",
        shown(path),
        available.join(", ")
    )]
    MissingColumn {
        path: PathBuf,
        column: String,
        available: Vec<String>,
    },

    /// A column exists but has a type we cannot read it as.
    #[error(
        "{}: column {column:?} has type {found}, expected {expected}",
        shown(path)
    )]
    ColumnType {
        path: PathBuf,
        column: String,
        found: String,
        expected: &'static str,
    },

    /// A single value that cannot be used, e.g. a null doc_id.
    #[error("{}: row {row}: column {column:?} {reason}", shown(path))]
    BadValue {
        path: PathBuf,
        column: String,
        row: u64,
        reason: String,
    },

    /// A row group index past the end of the file.
    #[error(
        "{}: row group {row_group} does not exist (the file has {count})",
        shown(path)
    )]
    NoSuchRowGroup {
        path: PathBuf,
        row_group: usize,
        count: usize,
    },

    /// A row group yielded a different number of rows than its unit said,
    /// e.g. because the unit came from another version of the file.
    #[error(
        "{}: row group {row_group} has {found} rows, expected {expected} (file changed?)",
        shown(path)
    )]
    RowCount {
        path: PathBuf,
        row_group: usize,
        expected: u64,
        found: u64,
    },

    /// Creating, writing, syncing or renaming an output file failed.
    #[error("{}: cannot write: {cause}", shown(path))]
    Write {
        path: PathBuf,
        cause: std::io::Error,
    },

    /// An output directory could not be read, cleared or created.
    #[error("{action} {}: {cause}", path.display())]
    Prepare {
        action: &'static str,
        path: PathBuf,
        cause: std::io::Error,
    },

    /// An output directory path names something that is not a directory.
    #[error("{} exists and is not a directory", path.display())]
    NotADirectory { path: PathBuf },

    /// An output directory that holds files, without permission to replace them.
    #[error(
        "output directory {} exists and is not empty (pass --overwrite to replace it)",
        path.display()
    )]
    NotEmpty { path: PathBuf },

    /// `--overwrite` of a directory that must never be cleared: `/`, the home or current
    /// directory, or one that is or holds a path the run reads or writes (an input, the spill
    /// directory, the other output directory).
    #[error(
        "refusing to replace {}: {reason}; nothing was deleted (choose another output directory)",
        path.display()
    )]
    Protected { path: PathBuf, reason: String },

    /// `--overwrite` of a directory neardup did not write: it has neither `.neardup` nor
    /// `summary.json`. `entries` are the first few of its entries (directories end in `/`).
    #[error(
        "refusing to replace {}: it is not a neardup output (no .neardup or summary.json); it holds {}; nothing was deleted (remove them yourself, or choose another output directory)",
        path.display(),
        listed(entries, *more)
    )]
    NotNeardupOutput {
        path: PathBuf,
        entries: Vec<String>,
        more: usize,
    },

    /// `--overwrite` of a neardup output into which other files were put: neardup deletes
    /// only what it wrote, and refuses rather than leave a mixed directory.
    #[error(
        "refusing to replace {}: besides neardup's outputs it holds {}; nothing was deleted (move them away yourself, or choose another output directory)",
        path.display(),
        listed(entries, *more)
    )]
    ForeignEntries {
        path: PathBuf,
        entries: Vec<String>,
        more: usize,
    },

    /// A directory another run is writing: its lock is held (see [`crate::lock`]).
    #[error(
        "{what} {} is in use by another neardup run ({holder}); refusing to write into it at the same time (wait for that run to end, or choose another directory)",
        path.display()
    )]
    Locked {
        path: PathBuf,
        what: &'static str,
        /// Who holds the lock, as the lock file says (pid, host, start time).
        holder: String,
    },

    /// An input named on the command line that is not a regular file or a directory (a
    /// FIFO, a socket, a device): it cannot be planned or read twice.
    #[error(
        "{}: is {kind}, not a regular file; neardup reads regular files only (to read a stream, pipe it to stdin and name `-`)",
        shown(path)
    )]
    NotRegular { path: PathBuf, kind: &'static str },

    /// A unit handed to a source kind that does not cut files that way (a row
    /// group of a JSONL file, say): the plan and the file disagree.
    #[error("{}: not a unit of a {kind} file", shown(path))]
    WrongUnit { path: PathBuf, kind: &'static str },

    /// A record whose repeated passages cannot be struck (`--strike substrings`): its
    /// ranges do not fit the text read back.
    #[error(
        "{}: {record}: cannot strike the repeated passages: {reason}",
        shown(path)
    )]
    Strike {
        path: PathBuf,
        record: String,
        reason: String,
    },

    /// An operation a source kind cannot do.
    #[error("{}: {what}", shown(path))]
    NotSupported { path: PathBuf, what: &'static str },

    /// A neardup table whose metadata (`neardup.*` keys) is incomplete or unreadable.
    #[error("{}: damaged neardup table metadata: {reason}", shown(path))]
    BadTableMeta { path: PathBuf, reason: String },

    /// A neardup table of another layout version than this neardup reads.
    #[error(
        "{}: neardup table format {found} (written by neardup {version}), but this neardup ({}) reads format {}; read it with the neardup that wrote it, or rerun",
        shown(path),
        env!("CARGO_PKG_VERSION"),
        reads
    )]
    TableFormat {
        path: PathBuf,
        found: String,
        version: String,
        /// The format this neardup reads.
        reads: u32,
    },

    /// A neardup table read as another table (a `pairs/` part given as fingerprints).
    #[error(
        "{}: a neardup {found} table, expected a {expected} table",
        shown(path)
    )]
    WrongTable {
        path: PathBuf,
        found: String,
        expected: &'static str,
    },

    /// A neardup table made by another fingerprint scheme than the reader needs.
    #[error("{}: scheme {found}, expected {expected} ({why})", shown(path))]
    WrongScheme {
        path: PathBuf,
        found: String,
        expected: String,
        why: String,
    },

    /// Two neardup tables read together whose parameters differ.
    #[error(
        "{}: made with other parameters than {}: {}; tables made differently cannot be used together",
        shown(path),
        shown(other),
        differences.join(", ")
    )]
    WrongParams {
        path: PathBuf,
        other: PathBuf,
        differences: Vec<String>,
    },

    /// A document number given twice in the fingerprint tables of a search.
    #[error(
        "{}: row {row}: doc_id {doc_id} is a duplicate (also at {} row {first_row}); document numbers must be unique",
        shown(path),
        shown(first_path)
    )]
    DuplicateDocId {
        path: PathBuf,
        row: u64,
        doc_id: u64,
        first_path: PathBuf,
        first_row: u64,
    },

    /// A directory given as an index that has no manifest.
    #[error("{}: not a neardup index (no manifest.json; make one with neardup run --index)", path.display())]
    NotAnIndex { path: PathBuf },

    /// An index file whose size, header, checksum or content is not what the manifest says.
    #[error(
        "{}: damaged index: {reason} (rebuild the index with neardup run --index, or restore it)",
        shown(path)
    )]
    IndexCorrupt { path: PathBuf, reason: String },

    /// An index of another layout version than this neardup reads.
    #[error(
        "{}: index format {found}, but this neardup ({}) reads formats {} to {}; use the neardup that wrote it, or rebuild the index",
        shown(path),
        env!("CARGO_PKG_VERSION"),
        oldest,
        newest
    )]
    IndexFormat {
        path: PathBuf,
        found: String,
        /// The oldest and the newest formats this neardup reads.
        oldest: u32,
        newest: u32,
    },

    /// A new index asked for where one exists already.
    #[error("{}: an index exists there already; add a batch with neardup run --against {} --update-index, or choose another directory", path.display(), path.display())]
    IndexExists { path: PathBuf },

    /// A new index asked for in a directory holding other files.
    #[error("{}: cannot create an index in a directory that holds {}; choose an empty or new directory", path.display(), entries.join(", "))]
    NotEmptyIndex { path: PathBuf, entries: Vec<String> },

    /// More input files than doc numbers can tell apart.
    #[error("{}: the index would number {files} input files, more than the 2^24 doc numbers allow; compact it into a new index", path.display())]
    IndexFull { path: PathBuf, files: u64 },

    /// A batch that cannot be written into an index as given (a caller's mistake).
    #[error("{}: cannot add to the index: {reason}", path.display())]
    IndexInput { path: PathBuf, reason: String },

    /// The Parquet writer failed.
    #[error("{}: cannot write Parquet: {cause}", shown(path))]
    ParquetWrite { path: PathBuf, cause: ParquetError },

    /// Building or converting an Arrow array failed.
    #[error("{}: {cause}", shown(path))]
    Arrow { path: PathBuf, cause: ArrowError },
}

impl IoError {
    /// The kind of the operating-system error underneath, if there is one (a closed pipe, a
    /// full disk, a missing file).
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            IoError::Open { cause, .. }
            | IoError::Read { cause, .. }
            | IoError::ReadWhole { cause, .. }
            | IoError::ArchiveRead { cause, .. }
            | IoError::ReadAtByte { cause, .. }
            | IoError::Write { cause, .. }
            | IoError::Prepare { cause, .. } => Some(cause.kind()),
            _ => None,
        }
    }

    /// Wraps a JSONL record error with the file and 1-based line number.
    pub fn record(path: impl Into<PathBuf>, line: u64, cause: RecordError) -> Self {
        IoError::Record {
            path: path.into(),
            line,
            cause,
        }
    }

    /// Wraps a Parquet row error with the file and 0-based row number.
    pub fn row(path: impl Into<PathBuf>, row: u64, cause: RecordError) -> Self {
        IoError::Row {
            path: path.into(),
            row,
            cause,
        }
    }
}

/// How a path appears in messages: `-` is stdin, which users never typed as a
/// file name.
pub(crate) fn shown(path: &Path) -> std::path::Display<'_> {
    if path == Path::new("-") {
        Path::new("<stdin>").display()
    } else {
        path.display()
    }
}

fn read_failure(compression: Compression) -> String {
    match compression {
        Compression::None => "read failed".to_owned(),
        other => format!("{} data is truncated or corrupt", other.name()),
    }
}

fn listed(entries: &[String], more: usize) -> String {
    let mut text = entries.join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

fn no_inputs_message(patterns: &[String]) -> String {
    if patterns.is_empty() {
        return "no input files given".to_owned();
    }
    let quoted: Vec<String> = patterns.iter().map(|p| format!("{p:?}")).collect();
    format!("no input files matched {}", quoted.join(", "))
}

fn remote_where(offset: Option<u64>) -> String {
    offset.map_or_else(String::new, |at| format!("at byte {at}: "))
}
