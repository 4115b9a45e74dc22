//! An input file: its path, its format and its compression. A leaf of the crate: the
//! sources read files, the input expansion finds them, both name them so.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::compress::Compression;

/// How the contents of a file are laid out: the key of the registry of
/// source kinds ([`crate::source::kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Format {
    /// One JSON object per line.
    Jsonl,
    /// A Parquet table of documents.
    Parquet,
    /// The whole file is one document.
    Plain,
    /// A Parquet table of fingerprints (`doc_id`, `simhash`, ...), as
    /// `neardup search` reads. Never detected by name: the command says so.
    Fingerprints,
    /// A WARC 1.0/1.1 web archive (`.warc`, `.warc.gz`, `.warc.zst`).
    Warc,
    /// An ARC v1 web archive (`.arc`, `.arc.gz`).
    Arc,
}

impl Format {
    /// Every registered format, in the order [`crate::source::detect`] asks them.
    pub const ALL: [Format; 6] = [
        Format::Jsonl,
        Format::Parquet,
        Format::Plain,
        Format::Fingerprints,
        Format::Warc,
        Format::Arc,
    ];
}

/// One file to read.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct InputFile {
    /// The file's path as found; `-` means stdin.
    pub path: PathBuf,
    /// How to parse it.
    pub format: Format,
    /// How to decompress it.
    pub compression: Compression,
}

impl InputFile {
    /// Standard input: JSONL (or one plain document), never decompressed.
    pub fn stdin(plain: bool) -> Self {
        InputFile {
            path: PathBuf::from("-"),
            format: if plain { Format::Plain } else { Format::Jsonl },
            compression: Compression::None,
        }
    }

    /// True if this is standard input rather than a file.
    pub fn is_stdin(&self) -> bool {
        self.path == Path::new("-")
    }
}
