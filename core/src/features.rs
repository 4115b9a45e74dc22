//! Features: what of a document gets hashed.
//!
//! A document is tokenized ([`crate::tokenize`]); the tokens that hold a letter, minus any
//! stop words, are joined by single spaces into the document's *normalized text*. Features
//! are then cut from it:
//!
//! - [`FeatureKind::Words`]: every token (the simhash-doc choice);
//! - [`FeatureKind::WordShingles`]`(n)`: every run of `n` consecutive tokens, e.g. for
//!   n = 3 "the quick brown", "quick brown fox", ...;
//! - [`FeatureKind::CharNgrams`]`(n)`: every run of `n` consecutive characters of the
//!   normalized text (spaces included), robust to edits inside words.
//!
//! A document with fewer tokens (or characters) than `n` has one feature: all of it. A
//! document with no tokens has no features: it is *empty*, and is never matched.
//!
//! Each feature is hashed to 64 bits: lookup3 [`FeatureHasher::Lookup3`] for simhash-doc
//! (interoperability), xxh3 [`FeatureHasher::Xxh3`] (faster) for everything else.

use std::collections::HashSet;
use std::sync::Arc;

use xxhash_rust::xxh3::xxh3_64;

use crate::lookup3;

/// The default `n` of word shingles for simhash-shingles.
pub const DEFAULT_SHINGLE_WORDS: usize = 3;
/// The default `n` of character n-grams.
pub const DEFAULT_CHAR_NGRAM: usize = 5;

/// Which pieces of the normalized text become features.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FeatureKind {
    /// Single tokens.
    Words,
    /// Runs of `n` consecutive tokens.
    WordShingles(usize),
    /// Runs of `n` consecutive characters of the space-joined tokens.
    CharNgrams(usize),
}

/// How a feature becomes 64 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FeatureHasher {
    /// lookup3 `hashlittle2`, `(c << 32) | b` (simhash-doc).
    Lookup3,
    /// xxh3-64 with seed 0.
    Xxh3,
}

impl FeatureHasher {
    #[inline]
    pub fn hash(self, bytes: &[u8]) -> u64 {
        match self {
            FeatureHasher::Lookup3 => lookup3::feature_hash(bytes),
            FeatureHasher::Xxh3 => xxh3_64(bytes),
        }
    }
}

/// A set of lower-cased words to leave out of the features.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StopWords {
    words: HashSet<String>,
}

/// The built-in English stop list (the 127 words of NLTK's English list, which most
/// dedup tools use).
pub const ENGLISH_STOP_WORDS: &str = "i me my myself we our ours ourselves you your yours \
yourself yourselves he him his himself she her hers herself it its itself they them their \
theirs themselves what which who whom this that these those am is are was were be been being \
have has had having do does did doing a an the and but if or because as until while of at by \
for with about against between into through during before after above below to from up down \
in out on off over under again further then once here there when where why how all any both \
each few more most other some such no nor not only own same so than too very s t can will \
just don should now";

impl StopWords {
    /// The built-in English list.
    pub fn english() -> Self {
        Self::parse(ENGLISH_STOP_WORDS)
    }

    /// Words separated by whitespace; `#` starts a comment to the end of the line. Words are
    /// lower-cased.
    pub fn parse(text: &str) -> Self {
        let words = text
            .lines()
            .map(|line| line.split('#').next().unwrap_or(""))
            .flat_map(str::split_whitespace)
            .map(str::to_lowercase)
            .collect();
        StopWords { words }
    }

    pub fn contains(&self, token: &str) -> bool {
        self.words.contains(token)
    }

    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// The words, sorted: what defines the list, for recording it (table metadata).
    pub fn sorted(&self) -> Vec<&str> {
        let mut words: Vec<&str> = self.words.iter().map(String::as_str).collect();
        words.sort_unstable();
        words
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }
}

/// Everything that decides a document's features.
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureConfig {
    pub kind: FeatureKind,
    pub hasher: FeatureHasher,
    /// Apply Unicode NFKC normalization before tokenizing (folds compatibility forms such as
    /// full-width letters and ligatures).
    pub nfkc: bool,
    pub stop_words: Option<Arc<StopWords>>,
    /// Keep tokens without a letter (pure numbers) as features. simhash-doc drops them; the
    /// MinHash scheme and Jaccard verification keep them, as "word" usually means `\w+`.
    pub numbers: bool,
}

impl FeatureConfig {
    /// simhash-doc: single tokens, lookup3, no NFKC, no stop words.
    pub fn simhash_doc() -> Self {
        FeatureConfig {
            kind: FeatureKind::Words,
            hasher: FeatureHasher::Lookup3,
            nfkc: false,
            stop_words: None,
            numbers: false,
        }
    }

    /// Word `n`-gram shingles of every token, numbers included, hashed with xxh3: the sets
    /// MinHash estimates and verification compares.
    pub fn all_word_shingles(n: usize) -> Self {
        FeatureConfig {
            numbers: true,
            ..Self::word_shingles(n)
        }
    }

    /// Word `n`-gram shingles hashed with xxh3.
    pub fn word_shingles(n: usize) -> Self {
        FeatureConfig {
            kind: FeatureKind::WordShingles(n.max(1)),
            hasher: FeatureHasher::Xxh3,
            nfkc: false,
            stop_words: None,
            numbers: false,
        }
    }
}

/// Appends the feature hashes of a normalized text to `out`, one per feature occurrence
/// (repeats included: weighting decides what they count for).
///
/// `text` is the normalized text (tokens joined by single spaces) and `spans` the byte range
/// of each token in it.
pub fn hash_features(
    kind: FeatureKind,
    hasher: FeatureHasher,
    text: &str,
    spans: &[(u32, u32)],
    out: &mut Vec<u64>,
) {
    hash_features_padded(kind, hasher, text.as_bytes(), text.as_bytes(), spans, out);
}

/// [`hash_features`] of `text`, which is the start of `padded`: bytes after the text (16
/// are enough) let short keys be read with whole-word loads. `text` must be valid UTF-8.
pub(crate) fn hash_features_padded(
    kind: FeatureKind,
    hasher: FeatureHasher,
    text: &[u8],
    padded: &[u8],
    spans: &[(u32, u32)],
    out: &mut Vec<u64>,
) {
    if spans.is_empty() {
        return;
    }
    let bytes = text;
    match kind {
        FeatureKind::Words => match hasher {
            FeatureHasher::Lookup3 => lookup3::feature_hashes_in(padded, spans, out),
            FeatureHasher::Xxh3 => out.extend(
                spans
                    .iter()
                    .map(|&(s, e)| xxh3_64(&bytes[s as usize..e as usize])),
            ),
        },
        FeatureKind::WordShingles(n) => {
            let n = n.max(1);
            if spans.len() <= n {
                out.push(hasher.hash(bytes));
                return;
            }
            out.extend(spans.windows(n).map(|w| {
                let (start, end) = (w[0].0 as usize, w[n - 1].1 as usize);
                hasher.hash(&bytes[start..end])
            }));
        }
        FeatureKind::CharNgrams(n) => {
            let n = n.max(1);
            // Character starts: every byte that is not a UTF-8 continuation byte.
            let starts: Vec<usize> = (0..bytes.len())
                .filter(|&i| bytes[i] & 0xc0 != 0x80)
                .collect();
            if starts.len() <= n {
                out.push(hasher.hash(bytes));
                return;
            }
            for i in 0..=starts.len() - n {
                let end = starts.get(i + n).copied().unwrap_or(bytes.len());
                out.push(hasher.hash(&bytes[starts[i]..end]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans_of(text: &str) -> Vec<(u32, u32)> {
        let mut spans = Vec::new();
        let mut pos = 0u32;
        for word in text.split(' ') {
            spans.push((pos, pos + word.len() as u32));
            pos += word.len() as u32 + 1;
        }
        spans
    }

    fn features(kind: FeatureKind, text: &str) -> Vec<u64> {
        let mut out = Vec::new();
        hash_features(kind, FeatureHasher::Xxh3, text, &spans_of(text), &mut out);
        out
    }

    #[test]
    fn word_shingles_are_token_windows() {
        let text = "a b c d";
        let expected: Vec<u64> = ["a b c", "b c d"]
            .iter()
            .map(|s| xxh3_64(s.as_bytes()))
            .collect();
        assert_eq!(features(FeatureKind::WordShingles(3), text), expected);
        // Shorter than n: the whole text is one shingle.
        assert_eq!(
            features(FeatureKind::WordShingles(5), text),
            vec![xxh3_64(b"a b c d")]
        );
    }

    #[test]
    fn char_ngrams_respect_character_boundaries() {
        let text = "héé";
        let expected: Vec<u64> = ["hé", "éé"].iter().map(|s| xxh3_64(s.as_bytes())).collect();
        assert_eq!(features(FeatureKind::CharNgrams(2), text), expected);
    }

    #[test]
    fn words_use_the_chosen_hasher() {
        let mut out = Vec::new();
        hash_features(
            FeatureKind::Words,
            FeatureHasher::Lookup3,
            "the",
            &[(0, 3)],
            &mut out,
        );
        assert_eq!(out, vec![0x0717627632fcc083]);
    }

    #[test]
    fn stop_word_lists_parse() {
        let list = StopWords::parse("The # article\nof  and\n# only a comment\n");
        assert!(list.contains("the") && list.contains("of") && list.contains("and"));
        assert_eq!(list.len(), 3);
        assert!(StopWords::english().contains("the"));
        assert_eq!(StopWords::english().len(), 127);
    }
}
