//! Finding input files.
//!
//! The command line names inputs the way people name them in a shell: files,
//! directories and glob patterns, freely mixed. [`expand_inputs`] turns that
//! list into a sorted, deduplicated list of [`InputFile`]s, each with the
//! [`Format`] and [`Compression`] to read it with.
//!
//! Two kinds of names are treated differently, on purpose:
//!
//! * A file the user named (directly, or matched by a glob) is always taken:
//!   the user asked for it. Its format comes from its extension, and an
//!   unknown extension means JSONL (Spark and Hadoop write `part-00000`
//!   files with no extension at all).
//! * A directory is searched recursively, and only files that look like input
//!   are taken: those whose name a registered source kind claims
//!   ([`crate::source::detect`]; today `.jsonl`, `.json`, `.ndjson`, each
//!   optionally `.gz` or `.zst`, and `.parquet`). Names starting with `.` or
//!   `_` are skipped, files and directories alike, because that is where job
//!   frameworks keep their markers and scratch space (`_SUCCESS`,
//!   `_temporary/`, `.part-0.crc`).
//!
//! In plain-text mode every file is one document, so a directory yields all
//! its (non-hidden) files and the format is always [`Format::Plain`].
//!
//! What is never read, whatever the names:
//!
//! * Anything but a regular file (after following symbolic links). A named
//!   pipe, socket or device met while scanning a directory is skipped and
//!   named in a notice; one named on the command line is an error
//!   ([`IoError::NotRegular`]): it would hang the run, or be read once where
//!   the plan needs to read a file again.
//! * The same file twice. Files are identified by (device, inode), so
//!   `./a.jsonl a.jsonl`, a symbolic link inside a scanned directory and a
//!   hard link all name one file, read once under the first of its names in
//!   path order, with a notice.
//! * A neardup output met while scanning a directory (a directory holding
//!   [`crate::run_dir::MARKER`], or `_SUCCESS` beside `summary.json`): an
//!   earlier run or deduplicated corpus left inside the corpus is skipped,
//!   with a notice, rather than read as more input. A directory named on
//!   the command line is always scanned.
//!
//! [`scan_inputs`] returns these notices beside the files; the binary prints
//! them.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::compress::Compression;
use crate::error::IoError;
pub use crate::file::{Format, InputFile};
use crate::run_dir::{MARKER, SUCCESS, SUMMARY};
use crate::source::detect;

/// The files to read, and what was left out on the way.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    /// Sorted by path, each file once.
    pub files: Vec<InputFile>,
    /// Entries of scanned directories that are not regular files, with what they are.
    pub not_regular: Vec<(PathBuf, &'static str)>,
    /// Neardup outputs met while scanning directories, skipped.
    pub outputs: Vec<PathBuf>,
    /// Names of a file already taken under another name: (the name left out, the name read).
    pub same_file: Vec<(PathBuf, PathBuf)>,
}

/// How many paths a notice names before "and N more".
const NOTICE_PATHS: usize = 5;

impl Scan {
    /// One line per kind of thing left out, for the user (empty if nothing was).
    pub fn notices(&self) -> Vec<String> {
        let mut notices = Vec::new();
        let list = |items: Vec<String>| {
            let more = items.len().saturating_sub(NOTICE_PATHS);
            let mut text = items
                .into_iter()
                .take(NOTICE_PATHS)
                .collect::<Vec<_>>()
                .join(", ");
            if more > 0 {
                text.push_str(&format!(" and {more} more"));
            }
            text
        };
        if !self.not_regular.is_empty() {
            notices.push(format!(
                "skipped {} {} not a regular file: {}",
                self.not_regular.len(),
                if self.not_regular.len() == 1 {
                    "entry that is"
                } else {
                    "entries that are"
                },
                list(
                    self.not_regular
                        .iter()
                        .map(|(p, kind)| format!("{} ({kind})", p.display()))
                        .collect()
                )
            ));
        }
        if !self.outputs.is_empty() {
            notices.push(format!(
                "skipped {} neardup {} found among the inputs: {}",
                self.outputs.len(),
                if self.outputs.len() == 1 {
                    "output"
                } else {
                    "outputs"
                },
                list(
                    self.outputs
                        .iter()
                        .map(|p| format!("{}/", p.display()))
                        .collect()
                )
            ));
        }
        if !self.same_file.is_empty() {
            notices.push(format!(
                "read once {} named more than once: {}",
                if self.same_file.len() == 1 {
                    "a file"
                } else {
                    "files"
                },
                list(
                    self.same_file
                        .iter()
                        .map(|(left, read)| {
                            format!("{} (as {})", left.display(), read.display())
                        })
                        .collect()
                )
            ));
        }
        notices
    }
}

/// Expands files, directories and glob patterns into the files to read: [`scan_inputs`]
/// without its notices.
pub fn expand_inputs(patterns: &[String], plain: bool) -> Result<Vec<InputFile>, IoError> {
    Ok(scan_inputs(patterns, plain)?.files)
}

/// Expands files, directories and glob patterns into the files to read.
///
/// * `-` is stdin (JSONL, or one plain document when `plain` is set).
/// * A file is taken as is, its format chosen by extension (unknown means
///   JSONL); with `plain` every file is one plain-text document. A named
///   pipe, socket or device is an error.
/// * A directory is searched recursively for input files (see the module
///   docs for which names count, and what is skipped).
/// * Anything else containing `*`, `?` or `[` is a glob pattern; hidden
///   (`.`) and `_` names among its matches are skipped.
///
/// The result is sorted by path and holds each file once (by device and
/// inode). It is an error if a named path does not exist, or if any pattern
/// matched no input file (the error lists all such patterns), since a
/// pattern that silently matches nothing usually means data is being left
/// out.
pub fn scan_inputs(patterns: &[String], plain: bool) -> Result<Scan, IoError> {
    let mut scan = Scan::default();
    let mut found = Vec::new();
    let mut unmatched = Vec::new();
    for pattern in patterns {
        let before = found.len();
        expand_one(pattern, plain, &mut found, &mut scan)?;
        if found.len() == before {
            unmatched.push(pattern.clone());
        }
    }
    if patterns.is_empty() || !unmatched.is_empty() {
        return Err(IoError::NoInputs {
            patterns: unmatched,
        });
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found.dedup_by(|a, b| a.path == b.path);
    // The same file under several names: keep the first name in path order.
    let mut first_name: HashMap<(u64, u64), PathBuf> = HashMap::new();
    for file in found {
        match file_identity(&file) {
            Some(id) => match first_name.get(&id) {
                Some(read) => scan.same_file.push((file.path, read.clone())),
                None => {
                    first_name.insert(id, file.path.clone());
                    scan.files.push(file);
                }
            },
            None => scan.files.push(file),
        }
    }
    scan.not_regular.sort();
    scan.outputs.sort();
    Ok(scan)
}

/// A file's (device, inode), following symbolic links; `None` for stdin or where the
/// system has no such thing.
fn file_identity(file: &InputFile) -> Option<(u64, u64)> {
    if file.is_stdin() {
        return None;
    }
    identity(&fs::metadata(&file.path).ok()?)
}

#[cfg(unix)]
fn identity(meta: &fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn identity(_meta: &fs::Metadata) -> Option<(u64, u64)> {
    None
}

/// What a file that is not a regular file or a directory is, for messages.
fn special_kind(meta: &fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            return "a named pipe (FIFO)";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
    }
    let _ = meta;
    "neither a file nor a directory"
}

/// Whether `dir` is a neardup output: it holds the marker, or `_SUCCESS` beside
/// `summary.json` (runs of versions before the marker).
fn is_neardup_output(dir: &Path) -> bool {
    dir.join(MARKER).is_file() || (dir.join(SUCCESS).is_file() && dir.join(SUMMARY).is_file())
}

/// A named file (on the command line or matched by a glob): taken if it is a regular file.
fn take_named(path: PathBuf, meta: &fs::Metadata, plain: bool) -> Result<InputFile, IoError> {
    if meta.is_file() {
        Ok(named_file(path, plain))
    } else {
        Err(IoError::NotRegular {
            kind: special_kind(meta),
            path,
        })
    }
}

fn expand_one(
    pattern: &str,
    plain: bool,
    out: &mut Vec<InputFile>,
    scan: &mut Scan,
) -> Result<(), IoError> {
    if pattern == "-" {
        out.push(InputFile::stdin(plain));
        return Ok(());
    }
    if crate::store::is_url(pattern) {
        return expand_url(pattern, plain, out, scan);
    }
    let path = Path::new(pattern);
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => walk_dir(path, plain, &mut HashSet::new(), out, scan),
        Ok(meta) => {
            out.push(take_named(path.to_path_buf(), &meta, plain)?);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if is_glob(pattern) {
                expand_glob(pattern, plain, out, scan)
            } else {
                Err(IoError::NotFound {
                    path: path.to_path_buf(),
                })
            }
        }
        Err(source) => Err(IoError::Open {
            path: path.to_path_buf(),
            cause: source,
        }),
    }
}

fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '['])
}

fn expand_glob(
    pattern: &str,
    plain: bool,
    out: &mut Vec<InputFile>,
    scan: &mut Scan,
) -> Result<(), IoError> {
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        // `*` must not pick up `.crc` files and other hidden companions.
        require_literal_leading_dot: true,
    };
    let paths = glob::glob_with(pattern, options).map_err(|e| IoError::BadPattern {
        pattern: pattern.to_owned(),
        message: e.to_string(),
    })?;
    for entry in paths {
        let path = entry.map_err(|e| IoError::Open {
            path: e.path().to_path_buf(),
            cause: e.into(),
        })?;
        if is_skipped_name(&path) {
            continue;
        }
        let meta = fs::metadata(&path).map_err(|source| IoError::Open {
            path: path.clone(),
            cause: source,
        })?;
        if meta.is_dir() {
            walk_dir(&path, plain, &mut HashSet::new(), out, scan)?;
        } else {
            out.push(take_named(path, &meta, plain)?);
        }
    }
    Ok(())
}

/// Recursively collects input files under `dir`. `seen` holds the canonical
/// paths of directories already visited, so symlink loops end. Entries that
/// are not regular files, and neardup outputs, are skipped into `scan`.
fn walk_dir(
    dir: &Path,
    plain: bool,
    seen: &mut HashSet<PathBuf>,
    out: &mut Vec<InputFile>,
    scan: &mut Scan,
) -> Result<(), IoError> {
    let open_err = |source| IoError::Open {
        path: dir.to_path_buf(),
        cause: source,
    };
    if !seen.insert(fs::canonicalize(dir).map_err(open_err)?) {
        return Ok(());
    }
    for entry in fs::read_dir(dir).map_err(open_err)? {
        let path = entry.map_err(open_err)?.path();
        if is_skipped_name(&path) {
            continue;
        }
        // `fs::metadata` follows symlinks: linked data files are common.
        let meta = fs::metadata(&path).map_err(|source| IoError::Open {
            path: path.clone(),
            cause: source,
        })?;
        if meta.is_dir() {
            if is_neardup_output(&path) {
                scan.outputs.push(path);
            } else {
                walk_dir(&path, plain, seen, out, scan)?;
            }
        } else if plain {
            if meta.is_file() {
                out.push(named_file(path, true));
            } else {
                scan.not_regular.push((path, special_kind(&meta)));
            }
        } else if let Some((format, compression)) = known_format(&path) {
            if meta.is_file() {
                out.push(InputFile {
                    path,
                    format,
                    compression,
                });
            } else {
                scan.not_regular.push((path, special_kind(&meta)));
            }
        }
    }
    Ok(())
}

/// An input named by URL (see [`crate::store`]): an object, taken as a named file; a prefix
/// (`s3://bucket/dir/`, or a name with no object of its own), scanned as a directory; or a
/// glob over keys, whose matches are objects, or prefixes scanned as directories. The rules
/// of names are those of local files: a scan takes only names a source kind claims, skips
/// names starting with `.` or `_` and neardup outputs (a prefix holding the marker, or
/// `_SUCCESS` beside `summary.json`); `*` does not cross a `/`.
fn expand_url(
    pattern: &str,
    plain: bool,
    out: &mut Vec<InputFile>,
    scan: &mut Scan,
) -> Result<(), IoError> {
    let listable = !pattern.to_ascii_lowercase().starts_with("http");
    // Where the name's path starts (after `scheme://authority`).
    let path_start = pattern
        .find("://")
        .and_then(|s| pattern[s + 3..].find('/').map(|p| s + 3 + p))
        .unwrap_or(pattern.len());
    if listable && is_glob(&pattern[path_start..]) {
        let first = path_start + pattern[path_start..].find(['*', '?', '[']).unwrap_or(0);
        let dir = &pattern[..=pattern[..first].rfind('/').unwrap_or(path_start)];
        let glob = glob::Pattern::new(pattern).map_err(|e| IoError::BadPattern {
            pattern: pattern.to_owned(),
            message: e.to_string(),
        })?;
        let options = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: true,
        };
        let mut dirs: Vec<String> = Vec::new();
        for (url, _) in crate::store::list(dir)? {
            // The shortest name made of the object's first components that the glob
            // matches: the object itself, or a prefix above it (a directory).
            let mut end = dir.len();
            let matched = loop {
                let next = url[end..].find('/').map_or(url.len(), |p| end + p);
                if skipped_component(&url[end..next]) {
                    break None;
                }
                if glob.matches_with(&url[..next], options) {
                    break Some(next);
                }
                if next == url.len() {
                    break None;
                }
                end = next + 1;
            };
            match matched {
                Some(end) if end == url.len() => out.push(named_file(PathBuf::from(url), plain)),
                Some(end) => dirs.push(url[..=end].to_owned()),
                None => {}
            }
        }
        dirs.dedup();
        for dir in dirs {
            scan_prefix(&dir, plain, out, scan)?;
        }
        return Ok(());
    }
    let object = crate::store::Object::at(pattern)?;
    if !pattern.ends_with('/') && object.probe()?.is_some() {
        out.push(named_file(PathBuf::from(pattern), plain));
        return Ok(());
    }
    if !listable {
        return Err(IoError::NotFound {
            path: PathBuf::from(pattern),
        });
    }
    let dir = match pattern.ends_with('/') {
        true => pattern.to_owned(),
        false => format!("{pattern}/"),
    };
    scan_prefix(&dir, plain, out, scan)
}

/// The objects under the prefix `dir` (ending in `/`), as a directory is scanned.
fn scan_prefix(
    dir: &str,
    plain: bool,
    out: &mut Vec<InputFile>,
    scan: &mut Scan,
) -> Result<(), IoError> {
    let objects = crate::store::list(dir)?;
    // The prefixes that are neardup outputs: their objects are skipped.
    let names: HashSet<&str> = objects.iter().map(|(url, _)| url.as_str()).collect();
    let mut outputs: Vec<String> = objects
        .iter()
        .filter_map(|(url, _)| {
            let (parent, name) = url.rsplit_once('/')?;
            let output = name == MARKER
                || (name == SUCCESS && names.contains(format!("{parent}/{SUMMARY}").as_str()));
            output.then(|| format!("{parent}/"))
        })
        .collect();
    outputs.sort();
    outputs.dedup();
    for (url, _) in &objects {
        let relative = &url[dir.len().min(url.len())..];
        if relative.split('/').any(skipped_component) {
            continue;
        }
        if outputs
            .iter()
            .any(|o| url.starts_with(o.as_str()) && o.len() > dir.len())
        {
            continue;
        }
        let path = PathBuf::from(url);
        if plain {
            out.push(named_file(path, true));
        } else if let Some((format, compression)) = known_format(&path) {
            out.push(InputFile {
                path,
                format,
                compression,
            });
        }
    }
    scan.outputs.extend(
        outputs
            .into_iter()
            .filter(|o| o.len() > dir.len())
            .map(|o| PathBuf::from(o.trim_end_matches('/'))),
    );
    Ok(())
}

/// A name of a scanned prefix's key that is a marker, checksum or scratch space.
fn skipped_component(name: &str) -> bool {
    name.starts_with('.') || name.starts_with('_')
}

/// Names starting with `.` or `_` are markers, checksums or scratch space.
fn is_skipped_name(path: &Path) -> bool {
    path.file_name()
        .map(|name| {
            let name = name.to_string_lossy();
            name.starts_with('.') || name.starts_with('_')
        })
        .unwrap_or(false)
}

/// A file the user asked for: always read, JSONL unless it looks otherwise.
fn named_file(path: PathBuf, plain: bool) -> InputFile {
    let name = lower_name(&path);
    let compression = Compression::split_suffix(&name).1;
    let (format, compression) = if plain {
        (Format::Plain, compression)
    } else {
        detect(&name).unwrap_or((Format::Jsonl, compression))
    };
    InputFile {
        path,
        format,
        compression,
    }
}

/// The format of a file whose name a registered source kind claims, or `None`.
fn known_format(path: &Path) -> Option<(Format, Compression)> {
    detect(&lower_name(path))
}

fn lower_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(path, b"{}\n").unwrap();
    }

    fn s(path: &Path) -> String {
        path.to_string_lossy().into_owned()
    }

    #[test]
    fn named_files_get_format_and_compression_from_their_names() {
        let dir = tempfile::tempdir().unwrap();
        let names = ["b.jsonl.gz", "a.parquet", "c.zst", "d.txt", "e.NDJSON"];
        for name in names {
            touch(&dir.path().join(name));
        }
        let patterns: Vec<String> = names.iter().map(|n| s(&dir.path().join(n))).collect();
        let got: Vec<(String, Format, Compression)> = expand_inputs(&patterns, false)
            .unwrap()
            .into_iter()
            .map(|f| (lower_name(&f.path), f.format, f.compression))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a.parquet".into(), Format::Parquet, Compression::None),
                ("b.jsonl.gz".into(), Format::Jsonl, Compression::Gzip),
                ("c.zst".into(), Format::Jsonl, Compression::Zstd),
                ("d.txt".into(), Format::Jsonl, Compression::None),
                ("e.ndjson".into(), Format::Jsonl, Compression::None),
            ]
        );
    }

    #[test]
    fn plain_mode_makes_named_files_plain_but_keeps_compression() {
        let dir = tempfile::tempdir().unwrap();
        touch(&dir.path().join("a.jsonl"));
        touch(&dir.path().join("b.txt.gz"));
        let patterns = vec![
            s(&dir.path().join("a.jsonl")),
            s(&dir.path().join("b.txt.gz")),
        ];
        let got = expand_inputs(&patterns, true).unwrap();
        assert!(got.iter().all(|f| f.format == Format::Plain));
        assert_eq!(got[1].compression, Compression::Gzip);
    }

    #[test]
    fn directories_are_searched_recursively_and_skip_markers() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for name in [
            "z.jsonl",
            "sub/a.json.zst",
            "sub/deeper/b.parquet",
            "sub/c.ndjson.gz",
            "readme.md",
            "_SUCCESS",
            ".hidden.jsonl",
            "_temporary/x.jsonl",
            ".git/y.jsonl",
            "sub/part-0.parquet.crc",
        ] {
            touch(&root.join(name));
        }
        let got: Vec<PathBuf> = expand_inputs(&[s(root)], false)
            .unwrap()
            .into_iter()
            .map(|f| f.path.strip_prefix(root).unwrap().to_path_buf())
            .collect();
        let want: Vec<PathBuf> = [
            "sub/a.json.zst",
            "sub/c.ndjson.gz",
            "sub/deeper/b.parquet",
            "z.jsonl",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn plain_directories_yield_every_visible_file() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a.txt", "b.md", "_SUCCESS", ".x"] {
            touch(&dir.path().join(name));
        }
        let got = expand_inputs(&[s(dir.path())], true).unwrap();
        let names: Vec<String> = got.iter().map(|f| lower_name(&f.path)).collect();
        assert_eq!(names, ["a.txt", "b.md"]);
        assert!(got.iter().all(|f| f.format == Format::Plain));
    }

    #[test]
    fn globs_match_sorted_and_deduplicated() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["p2.jsonl", "p1.jsonl", "p3.txt", "_p4.jsonl", ".p5.jsonl"] {
            touch(&dir.path().join(name));
        }
        let patterns = vec![
            s(&dir.path().join("p*")),
            s(&dir.path().join("p1.jsonl")),
            s(&dir.path().join("*.jsonl")),
        ];
        let got = expand_inputs(&patterns, false).unwrap();
        let names: Vec<String> = got.iter().map(|f| lower_name(&f.path)).collect();
        assert_eq!(names, ["p1.jsonl", "p2.jsonl", "p3.txt"]);
    }

    #[test]
    fn unmatched_patterns_are_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        touch(&dir.path().join("a.jsonl"));
        fs::create_dir(dir.path().join("empty")).unwrap();
        let glob = s(&dir.path().join("*.parquet"));
        let empty = s(&dir.path().join("empty"));
        let patterns = vec![s(&dir.path().join("a.jsonl")), glob.clone(), empty.clone()];
        let err = expand_inputs(&patterns, false).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("no input files matched {glob:?}, {empty:?}")
        );
        let err = expand_inputs(&[], false).unwrap_err();
        assert_eq!(err.to_string(), "no input files given");
    }

    #[test]
    fn missing_paths_and_bad_globs_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.jsonl");
        let err = expand_inputs(&[s(&missing)], false).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}: no such file or directory", missing.display())
        );
        let err = expand_inputs(&[s(&dir.path().join("[z"))], false).unwrap_err();
        assert!(matches!(err, IoError::BadPattern { .. }), "{err}");
    }

    fn mkfifo(path: &Path) {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success());
    }

    #[test]
    fn a_fifo_met_in_a_directory_is_skipped_and_named_and_a_named_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        touch(&dir.path().join("a.jsonl"));
        let fifo = dir.path().join("b.jsonl");
        mkfifo(&fifo);
        mkfifo(&dir.path().join("c.unknown"));
        let scan = scan_inputs(&[s(dir.path())], false).unwrap();
        let names: Vec<String> = scan.files.iter().map(|f| lower_name(&f.path)).collect();
        assert_eq!(names, ["a.jsonl"]);
        assert_eq!(scan.not_regular, [(fifo.clone(), "a named pipe (FIFO)")]);
        assert_eq!(
            scan.notices(),
            [format!(
                "skipped 1 entry that is not a regular file: {} (a named pipe (FIFO))",
                fifo.display()
            )]
        );
        // Plain mode reads every name, so it names both.
        let plain = scan_inputs(&[s(dir.path())], true).unwrap();
        assert_eq!(plain.not_regular.len(), 2);

        let err = expand_inputs(&[s(&fifo)], false).unwrap_err();
        assert!(matches!(err, IoError::NotRegular { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "{}: is a named pipe (FIFO), not a regular file; neardup reads regular files \
                 only (to read a stream, pipe it to stdin and name `-`)",
                fifo.display()
            )
        );
        let err = expand_inputs(&[s(&dir.path().join("b.*"))], false).unwrap_err();
        assert!(matches!(err, IoError::NotRegular { .. }), "{err:?}");
        let err = expand_inputs(&["/dev/null".to_string()], false).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("/dev/null: is a character device, not a regular file"),
            "{err}"
        );
    }

    #[test]
    fn a_file_under_several_names_is_read_once_under_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        touch(&root.join("corpus/a.jsonl"));
        touch(&root.join("corpus/b.jsonl"));
        std::os::unix::fs::symlink(root.join("corpus/a.jsonl"), root.join("corpus/z.jsonl"))
            .unwrap();
        fs::hard_link(root.join("corpus/b.jsonl"), root.join("corpus/y.jsonl")).unwrap();
        std::os::unix::fs::symlink(root.join("corpus"), root.join("link")).unwrap();
        let scan = scan_inputs(
            &[
                s(&root.join("link/a.jsonl")),
                s(&root.join("corpus/a.jsonl")),
                s(&root.join("corpus")),
            ],
            false,
        )
        .unwrap();
        let got: Vec<PathBuf> = scan.files.iter().map(|f| f.path.clone()).collect();
        assert_eq!(
            got,
            [root.join("corpus/a.jsonl"), root.join("corpus/b.jsonl")]
        );
        assert_eq!(
            scan.same_file,
            [
                (root.join("corpus/y.jsonl"), root.join("corpus/b.jsonl")),
                (root.join("corpus/z.jsonl"), root.join("corpus/a.jsonl")),
                (root.join("link/a.jsonl"), root.join("corpus/a.jsonl")),
            ]
        );
        let notices = scan.notices();
        assert_eq!(notices.len(), 1);
        assert!(
            notices[0].starts_with("read once files named more than once: "),
            "{notices:?}"
        );
    }

    #[test]
    fn neardup_outputs_inside_a_scanned_directory_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        touch(&root.join("data/a.jsonl"));
        // A run with the marker, a dedup corpus, and a run of a version before the marker.
        touch(&root.join("data/out/.neardup"));
        touch(&root.join("data/out/fingerprints/part-00000.parquet"));
        touch(&root.join("data/dedup/.neardup"));
        touch(&root.join("data/dedup/a.jsonl"));
        touch(&root.join("data/old/_SUCCESS"));
        touch(&root.join("data/old/summary.json"));
        touch(&root.join("data/old/x.jsonl"));
        // Only one of the two files of an old run: an ordinary directory.
        touch(&root.join("data/notrun/_SUCCESS"));
        touch(&root.join("data/notrun/n.jsonl"));
        let scan = scan_inputs(&[s(&root.join("data"))], false).unwrap();
        let got: Vec<PathBuf> = scan
            .files
            .iter()
            .map(|f| f.path.strip_prefix(root).unwrap().to_path_buf())
            .collect();
        assert_eq!(
            got,
            [
                PathBuf::from("data/a.jsonl"),
                PathBuf::from("data/notrun/n.jsonl")
            ]
        );
        assert_eq!(
            scan.outputs,
            [
                root.join("data/dedup"),
                root.join("data/old"),
                root.join("data/out")
            ]
        );
        assert!(scan.notices()[0].starts_with("skipped 3 neardup outputs found among the inputs: "));
        // Named on the command line, an output directory is scanned: the user asked for it.
        let named = scan_inputs(&[s(&root.join("data/dedup"))], false).unwrap();
        assert_eq!(named.files.len(), 1);
    }

    #[test]
    fn dash_is_stdin() {
        let got = expand_inputs(&["-".to_owned()], false).unwrap();
        assert_eq!(got, vec![InputFile::stdin(false)]);
        assert!(got[0].is_stdin());
        assert_eq!(got[0].format, Format::Jsonl);
    }
}
