//! Compression, chosen by a file's suffix (`.gz`, `.zst`) and the same for every format:
//! any source kind that reads a byte stream (JSONL, plain text) opens it through
//! [`crate::stream::open_decompressed`], which undoes it.

use serde::{Deserialize, Serialize};

/// How the bytes of a file are compressed, decided by its suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Compression {
    /// Read as is.
    None,
    /// `.gz`: gzip, possibly several concatenated members (as `pigz` and
    /// `bgzip` write).
    Gzip,
    /// `.zst`: zstd, possibly several concatenated frames.
    Zstd,
}

impl Compression {
    /// A short name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "uncompressed",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }

    /// Splits a compression suffix off a (lower-cased) file name:
    /// `"a.jsonl.gz"` is `("a.jsonl", Gzip)`, `"a.jsonl"` is `("a.jsonl", None)`.
    pub fn split_suffix(name: &str) -> (&str, Compression) {
        if let Some(stem) = name.strip_suffix(".gz") {
            (stem, Compression::Gzip)
        } else if let Some(stem) = name.strip_suffix(".zst") {
            (stem, Compression::Zstd)
        } else {
            (name, Compression::None)
        }
    }

    /// Reading cost per byte of a compressed file, relative to fingerprinting its text with
    /// simhash-doc (about 3.4 ns per byte), or `None` when uncompressed (the format's own
    /// cost applies then): zstd decompression with line splitting is about 2 ns per byte of
    /// text and files are about 3.5 times smaller than their text; gzip about twice zstd.
    /// The zstd figure is tuned: with 2 workers on dev-medium, 1.0, 1.5, 2.0 and 3.0 gave
    /// about 0.84, 0.79, 0.83 and 0.93 s (pairwise runs), as the reading worker also spends
    /// time handing batches on that the model does not count. Used to balance work (see
    /// [`crate::source::ReadCost`]); it moves load, never correctness.
    pub fn read_cost_per_byte(self) -> Option<f64> {
        match self {
            Compression::Zstd => Some(1.5),
            Compression::Gzip => Some(4.0),
            Compression::None => None,
        }
    }

    /// Bytes of text per byte of file: compressed files hold about 3.5 times their size in
    /// text.
    pub fn expansion(self) -> f64 {
        match self {
            Compression::None => 1.0,
            _ => 3.5,
        }
    }
}
