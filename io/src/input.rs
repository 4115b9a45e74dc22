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

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::compress::Compression;
use crate::error::IoError;
pub use crate::file::{Format, InputFile};
use crate::source::detect;

/// Expands files, directories and glob patterns into the files to read.
///
/// * `-` is stdin (JSONL, or one plain document when `plain` is set).
/// * A file is taken as is, its format chosen by extension (unknown means
///   JSONL); with `plain` every file is one plain-text document.
/// * A directory is searched recursively for input files (see the module
///   docs for which names count).
/// * Anything else containing `*`, `?` or `[` is a glob pattern; hidden
///   (`.`) and `_` names among its matches are skipped.
///
/// The result is sorted by path and has no duplicates. It is an error if a
/// named path does not exist, or if any pattern matched no input file (the
/// error lists all such patterns), since a pattern that silently matches
/// nothing usually means data is being left out.
pub fn expand_inputs(patterns: &[String], plain: bool) -> Result<Vec<InputFile>, IoError> {
    let mut found = Vec::new();
    let mut unmatched = Vec::new();
    for pattern in patterns {
        let before = found.len();
        expand_one(pattern, plain, &mut found)?;
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
    Ok(found)
}

fn expand_one(pattern: &str, plain: bool, out: &mut Vec<InputFile>) -> Result<(), IoError> {
    if pattern == "-" {
        out.push(InputFile::stdin(plain));
        return Ok(());
    }
    let path = Path::new(pattern);
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => walk_dir(path, plain, &mut HashSet::new(), out),
        Ok(_) => {
            out.push(named_file(path.to_path_buf(), plain));
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if is_glob(pattern) {
                expand_glob(pattern, plain, out)
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

fn expand_glob(pattern: &str, plain: bool, out: &mut Vec<InputFile>) -> Result<(), IoError> {
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
        if path.is_dir() {
            walk_dir(&path, plain, &mut HashSet::new(), out)?;
        } else {
            out.push(named_file(path, plain));
        }
    }
    Ok(())
}

/// Recursively collects input files under `dir`. `seen` holds the canonical
/// paths of directories already visited, so symlink loops end.
fn walk_dir(
    dir: &Path,
    plain: bool,
    seen: &mut HashSet<PathBuf>,
    out: &mut Vec<InputFile>,
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
            walk_dir(&path, plain, seen, out)?;
        } else if plain {
            out.push(named_file(path, true));
        } else if let Some((format, compression)) = known_format(&path) {
            out.push(InputFile {
                path,
                format,
                compression,
            });
        }
    }
    Ok(())
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

    #[test]
    fn dash_is_stdin() {
        let got = expand_inputs(&["-".to_owned()], false).unwrap();
        assert_eq!(got, vec![InputFile::stdin(false)]);
        assert!(got[0].is_stdin());
        assert_eq!(got[0].format, Format::Jsonl);
    }
}
