//! The settings of a search for repeated passages (`neardup substrings`, `run --substrings`).

use neardup_core::substrings::Settings;

/// The most text one worker puts under one suffix array (`Block` in
/// `neardup_core::substrings`). While its suffix array exists a block costs about 9 bytes of
/// memory per byte of text (the text, 4 bytes of suffix array and 4 of permuted LCP array per
/// byte), so 32 MiB keeps that near 290 MiB per worker. Not tuned by measurement: libsais is
/// linear in the block, so the block size moves memory, not time, except that windows
/// repeated across blocks travel as records instead of being grouped inside one suffix array
/// (more records at the owners when blocks are small).
pub const DEFAULT_BLOCK_BYTES: usize = 32 << 20;

/// A search for repeated passages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SubstringJob {
    /// What is searched and reported (N, `--occurrences`, `--snap`).
    pub settings: Settings,
    /// `neardup substrings`: the search only, over every document; `false` for
    /// `run --substrings`, after the near-duplicate search, over the kept documents.
    pub only: bool,
    /// The most text under one suffix array, per worker (see [`DEFAULT_BLOCK_BYTES`]).
    pub block_bytes: usize,
    /// `--strike substrings` (implied by `neardup substrings --write-dedup`): the
    /// deduplicated corpus has the ranges taken out of the kept documents' text.
    #[serde(default)]
    pub strike: bool,
}

impl SubstringJob {
    /// `neardup substrings` with `settings`.
    pub fn only(settings: Settings) -> Self {
        SubstringJob {
            settings,
            only: true,
            block_bytes: DEFAULT_BLOCK_BYTES,
            strike: false,
        }
    }

    /// `run --substrings` with `settings`: after the near-duplicate search, over the
    /// documents its clusters keep.
    pub fn after_clusters(settings: Settings) -> Self {
        SubstringJob {
            only: false,
            ..SubstringJob::only(settings)
        }
    }
}
