//! Schemes: the complete recipe from a document's text to its fingerprint, and the
//! [`Fingerprinter`] that applies one with reusable buffers.
//!
//! | scheme | features | feature hash | weights | output |
//! |---|---|---|---|---|
//! | `simhash-doc` (default) | single tokens | lookup3 | set | 64-bit simhash |
//! | `simhash-shingles` | word 3-gram shingles | xxh3 | set | 64-bit simhash |
//! | `minhash` | word 5-gram shingles | xxh3 | set | 128 x 64-bit MinHash |
//!
//! Every part can be overridden (feature kind, n, weighting, stop words, NFKC); a scheme
//! with overrides is no longer simhash-doc and says so in its [`Scheme::describe`] name.
//!
//! A scheme is recorded beside every fingerprint it made, as its parameters
//! ([`Scheme::params`]: a JSON object in every table's metadata and in an index's
//! manifest), and rebuilt from them ([`Scheme::from_params`]) wherever text must be
//! fingerprinted to be compared with recorded fingerprints (a query of an index).

use std::sync::Arc;

use serde_json::{json, Value};
use unicode_normalization::UnicodeNormalization;
use xxhash_rust::xxh3::xxh3_64;

use crate::exact;
use crate::features::{
    hash_features_padded, FeatureConfig, FeatureHasher, FeatureKind, StopWords,
    DEFAULT_SHINGLE_WORDS,
};
use crate::minhash::{MinHasher, DEFAULT_PERMUTATIONS, DEFAULT_SEED};
use crate::oph::OnePermutation;
use crate::simhash::{dedup_sorted, dedup_unsorted, fold_unweighted, simhash_of_sorted, Weighting};
use crate::tokenize::{TokenBuffer, Tokenizer};

/// The revision of the fingerprint definitions themselves: the tokenizer, the feature
/// hashes, the folding, the MinHash permutations (docs/fingerprints.md). Bumped whenever some
/// text would get another fingerprint under the same scheme and parameters; recorded in every
/// table neardup writes, so that fingerprints of two revisions are never compared.
pub const FINGERPRINT_REVISION: u32 = 1;

/// The default `n` of word shingles in MinHash mode.
pub const DEFAULT_MINHASH_SHINGLE: usize = 5;

/// The named starting points a user picks with `--scheme`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchemeName {
    SimhashDoc,
    SimhashShingles,
    Minhash,
    MinhashOph,
}

impl SchemeName {
    pub const ALL: [SchemeName; 4] = [
        SchemeName::SimhashDoc,
        SchemeName::SimhashShingles,
        SchemeName::Minhash,
        SchemeName::MinhashOph,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SchemeName::SimhashDoc => "simhash-doc",
            SchemeName::SimhashShingles => "simhash-shingles",
            SchemeName::Minhash => "minhash",
            SchemeName::MinhashOph => "minhash-oph",
        }
    }

    pub fn parse(text: &str) -> Option<SchemeName> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// What the fingerprint is.
#[derive(Clone, Debug, PartialEq)]
pub enum Method {
    /// A 64-bit simhash under a weighting.
    Simhash(Weighting),
    /// A MinHash signature of this many values (permutations, or bins of one permutation).
    MinHash { permutations: usize, sketch: Sketch },
}

/// How a MinHash signature is computed. Both give `permutations` 64-bit values whose
/// agreement estimates the Jaccard similarity; their values differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sketch {
    /// One independent permutation per value ([`crate::minhash`], the `minhash` scheme).
    Permutations,
    /// One hash per feature split into bins, empty bins densified ([`crate::oph`], the
    /// `minhash-oph` scheme).
    OnePermutation,
}

impl Sketch {
    /// The name recorded in table metadata and descriptions.
    pub fn as_str(self) -> &'static str {
        match self {
            Sketch::Permutations => "minhash",
            Sketch::OnePermutation => "minhash-oph",
        }
    }
}

/// A complete fingerprinting recipe.
#[derive(Clone, Debug, PartialEq)]
pub struct Scheme {
    pub name: SchemeName,
    pub features: FeatureConfig,
    pub method: Method,
}

impl Scheme {
    pub fn simhash_doc() -> Self {
        Scheme {
            name: SchemeName::SimhashDoc,
            features: FeatureConfig::simhash_doc(),
            method: Method::Simhash(Weighting::Set),
        }
    }

    pub fn simhash_shingles() -> Self {
        Scheme {
            name: SchemeName::SimhashShingles,
            features: FeatureConfig::word_shingles(DEFAULT_SHINGLE_WORDS),
            method: Method::Simhash(Weighting::Set),
        }
    }

    pub fn minhash() -> Self {
        Scheme {
            name: SchemeName::Minhash,
            features: FeatureConfig::all_word_shingles(DEFAULT_MINHASH_SHINGLE),
            method: Method::MinHash {
                permutations: DEFAULT_PERMUTATIONS,
                sketch: Sketch::Permutations,
            },
        }
    }

    /// `minhash` with one-permutation signatures: the same shingles and signature length.
    pub fn minhash_oph() -> Self {
        Scheme {
            name: SchemeName::MinhashOph,
            features: FeatureConfig::all_word_shingles(DEFAULT_MINHASH_SHINGLE),
            method: Method::MinHash {
                permutations: DEFAULT_PERMUTATIONS,
                sketch: Sketch::OnePermutation,
            },
        }
    }

    pub fn named(name: SchemeName) -> Self {
        match name {
            SchemeName::SimhashDoc => Self::simhash_doc(),
            SchemeName::SimhashShingles => Self::simhash_shingles(),
            SchemeName::Minhash => Self::minhash(),
            SchemeName::MinhashOph => Self::minhash_oph(),
        }
    }

    /// Whether this is exactly the named preset (no overrides).
    pub fn is_preset(&self) -> bool {
        *self == Self::named(self.name)
    }

    /// A one-line description: the preset name, and the overrides if any.
    pub fn describe(&self) -> String {
        let kind = match self.features.kind {
            FeatureKind::Words => "words".to_string(),
            FeatureKind::WordShingles(n) => format!("word {n}-shingles"),
            FeatureKind::CharNgrams(n) => format!("char {n}-grams"),
        };
        let method = match &self.method {
            Method::Simhash(Weighting::Set) => "simhash, set weights".to_string(),
            Method::Simhash(Weighting::Tf) => "simhash, tf weights".to_string(),
            Method::Simhash(Weighting::TfIdf(_)) => "simhash, tf-idf weights".to_string(),
            Method::MinHash {
                permutations,
                sketch,
            } => format!("{}-{permutations}", sketch.as_str()),
        };
        let mut extras = Vec::new();
        if self.features.nfkc {
            extras.push("nfkc".to_string());
        }
        if self.features.numbers {
            extras.push("numbers kept".to_string());
        }
        if let Some(stop) = &self.features.stop_words {
            extras.push(format!("{} stop words", stop.len()));
        }
        let base = if self.is_preset() {
            self.name.as_str().to_string()
        } else {
            format!("{} (modified)", self.name.as_str())
        };
        format!(
            "{base}: {kind}, {:?} hash, {method}{}",
            self.features.hasher,
            extras.iter().map(|e| format!(", {e}")).collect::<String>()
        )
    }

    pub fn with_stop_words(mut self, words: StopWords) -> Self {
        self.features.stop_words = Some(Arc::new(words));
        self
    }
}

/// The longest signature recorded parameters may name (a damaged index manifest must not
/// make a query allocate without bound); `--permutations` accepts no more.
pub const MAX_RECORDED_PERMUTATIONS: u64 = 4096;

/// Why a scheme cannot be rebuilt from recorded parameters ([`Scheme::from_params`]). The
/// parameters come from an index's manifest, and the messages say so.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ParamsError {
    #[error("the index's scheme {0:?} is not one this neardup knows")]
    UnknownScheme(String),
    #[error("the index's features {0} are not ones this neardup knows")]
    UnknownFeatures(String),
    #[error("the index's weights {0} cannot be applied to a query")]
    Weights(String),
    #[error("the index's MinHash parameters {0} cannot be rebuilt")]
    Signature(String),
    #[error("its fingerprint parameters {recorded} cannot be rebuilt (a stop-word list other than the built-in english one?); this neardup would make {rebuilt}")]
    Differ { recorded: String, rebuilt: String },
}

/// A scheme's parameters: what is recorded of it beside its fingerprints, and what it is
/// rebuilt from.
impl Scheme {
    /// What makes a fingerprint what it is, as recorded in every table's `neardup.params`
    /// (`"fingerprint"`) and in an index's manifest: the revision of the definitions, the
    /// features, their hash, the normalization, and the method with its weights or
    /// permutations. Two tables whose fingerprint parameters are equal hold comparable
    /// fingerprints. TF-IDF weights also depend on the corpus the document frequencies came
    /// from, which this does not capture.
    pub fn params(&self) -> Value {
        let (features, shingle) = match self.features.kind {
            FeatureKind::Words => ("words", None),
            FeatureKind::WordShingles(n) => ("word-shingles", Some(n)),
            FeatureKind::CharNgrams(n) => ("char-ngrams", Some(n)),
        };
        let hash = match self.features.hasher {
            FeatureHasher::Lookup3 => "lookup3",
            FeatureHasher::Xxh3 => "xxh3",
        };
        let (method, weights, permutations, seed) = match &self.method {
            Method::Simhash(w) => {
                let weights = match w {
                    Weighting::Set => "set",
                    Weighting::Tf => "tf",
                    Weighting::TfIdf(_) => "tf-idf",
                };
                ("simhash", Some(weights), None, None)
            }
            Method::MinHash {
                permutations,
                sketch,
            } => (
                sketch.as_str(),
                None,
                Some(*permutations),
                Some(DEFAULT_SEED),
            ),
        };
        // A stop list is recorded by its size and a hash of its sorted words.
        let stop_words = self.features.stop_words.as_ref().map(|words| {
            let sorted = words.sorted();
            json!({
                "words": sorted.len(),
                "xxh3": format!("{:016x}", xxh3_64(sorted.join("\n").as_bytes())),
            })
        });
        json!({
            "revision": FINGERPRINT_REVISION,
            // The key io's `parquet_out::PARAM_METHOD` reads back.
            "method": method,
            "features": features,
            "shingle": shingle,
            "feature_hash": hash,
            "nfkc": self.features.nfkc,
            "numbers": self.features.numbers,
            "stop_words": stop_words,
            "weights": weights,
            "permutations": permutations,
            "minhash_seed": seed,
        })
    }

    /// The scheme named `name` whose [`params`](Scheme::params) are `params`, rebuilt and
    /// checked: the rebuilt scheme's parameters must be exactly the recorded ones, so that
    /// what it fingerprints is comparable with what was recorded. A stop-word list can only
    /// be the built-in english one (the parameters hold its checksum, not its words); TF-IDF
    /// weights cannot be rebuilt (they need the corpus's document frequencies).
    pub fn from_params(name: &str, params: &Value) -> Result<Scheme, ParamsError> {
        let Some(name) = SchemeName::parse(name) else {
            return Err(ParamsError::UnknownScheme(name.to_string()));
        };
        let p = params;
        let mut scheme = Scheme::named(name);
        let shingle = p["shingle"].as_u64().map(|n| n as usize);
        scheme.features.kind = match (p["features"].as_str(), shingle) {
            (Some("words"), _) => FeatureKind::Words,
            (Some("word-shingles"), Some(n)) => FeatureKind::WordShingles(n),
            (Some("char-ngrams"), Some(n)) => FeatureKind::CharNgrams(n),
            (other, _) => return Err(ParamsError::UnknownFeatures(format!("{other:?}"))),
        };
        scheme.features.nfkc = p["nfkc"].as_bool().unwrap_or(false);
        scheme.features.numbers = p["numbers"].as_bool().unwrap_or(scheme.features.numbers);
        match &mut scheme.method {
            Method::Simhash(weighting) => {
                *weighting = match p["weights"].as_str() {
                    Some("set") => Weighting::Set,
                    Some("tf") => Weighting::Tf,
                    other => return Err(ParamsError::Weights(format!("{other:?}"))),
                }
            }
            Method::MinHash { permutations, .. } => {
                *permutations = match p["permutations"].as_u64() {
                    Some(n) if n > 0 && n <= MAX_RECORDED_PERMUTATIONS => n as usize,
                    _ => return Err(ParamsError::Signature(p.to_string())),
                }
            }
        }
        if !p["stop_words"].is_null() {
            // The built-in list is the one recorded parameters can name by its checksum.
            scheme = scheme.with_stop_words(StopWords::english());
        }
        let rebuilt = scheme.params();
        if rebuilt != *p {
            return Err(ParamsError::Differ {
                recorded: p.to_string(),
                rebuilt: rebuilt.to_string(),
            });
        }
        Ok(scheme)
    }

    /// The scheme whose feature set is the verification set of word `shingle`-grams (all
    /// tokens, this scheme's normalization and stop words), or `None` when this scheme's own
    /// feature set is exactly that (MinHash mode). A run verifying candidates by exact
    /// Jaccard, and a query of a MinHash index with shingle sets, make their sets so.
    pub fn verification_scheme(&self, shingle: usize) -> Option<Scheme> {
        let wanted = FeatureConfig {
            nfkc: self.features.nfkc,
            stop_words: self.features.stop_words.clone(),
            ..FeatureConfig::all_word_shingles(shingle)
        };
        if self.features == wanted {
            return None;
        }
        let mut shingles = Scheme::simhash_shingles();
        shingles.features = wanted;
        Some(shingles)
    }
}

/// The analysis of one document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DocFingerprint {
    /// The 64-bit simhash (0 for MinHash schemes and for empty documents).
    pub simhash: u64,
    /// Tokens that went into the features (with a letter, not stop words).
    pub n_tokens: u32,
    /// Distinct features.
    pub n_features: u32,
    /// The exact-duplicate key of the normalized token stream.
    pub exact_key: u128,
}

impl DocFingerprint {
    /// A document with no features is empty: never matched.
    pub fn is_empty(&self) -> bool {
        self.n_features == 0
    }
}

/// Applies a scheme to documents, reusing its buffers: create one per thread.
pub struct Fingerprinter {
    scheme: Scheme,
    tokenizer: Tokenizer,
    /// The feature tokens joined by spaces, when they are not all the tokens.
    normalized: String,
    /// Every token joined by spaces (the exact key's input).
    all_tokens: TokenBuffer,
    /// Whether every token is a feature token, so that `all_tokens` is the normalized text.
    all_kept: bool,
    /// The byte range of each feature token, in the normalized text.
    spans: Vec<(u32, u32)>,
    hashes: Vec<u64>,
    /// Scratch space of the distinct-feature set.
    table: Vec<u64>,
    sort_feature_set: bool,
    signer: Option<Signer>,
    signature: Vec<u64>,
}

/// What computes a MinHash scheme's signatures.
enum Signer {
    Permutations(MinHasher),
    OnePermutation(OnePermutation),
}

impl Signer {
    fn new(permutations: usize, sketch: Sketch) -> Self {
        match sketch {
            Sketch::Permutations => {
                Signer::Permutations(MinHasher::new(permutations, DEFAULT_SEED))
            }
            Sketch::OnePermutation => {
                Signer::OnePermutation(OnePermutation::new(permutations, DEFAULT_SEED))
            }
        }
    }

    fn signature_into(&self, features: &[u64], out: &mut [u64]) {
        match self {
            Signer::Permutations(hasher) => hasher.signature_into(features, out),
            Signer::OnePermutation(hasher) => hasher.signature_into(features, out),
        }
    }
}

/// Zero bytes kept after the normalized text while its features are hashed, so that short
/// keys can be read with whole-word loads ([`crate::lookup3::feature_hash_in`]). The
/// joined tokens have such room already ([`TokenBuffer::padded`]).
const PADDING: &str = "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";

impl Fingerprinter {
    pub fn new(scheme: Scheme) -> Self {
        let (signer, signature) = match scheme.method {
            Method::MinHash {
                permutations,
                sketch,
            } => (
                Some(Signer::new(permutations, sketch)),
                vec![0; permutations],
            ),
            Method::Simhash(_) => (None, Vec::new()),
        };
        Fingerprinter {
            scheme,
            tokenizer: Tokenizer::new(),
            normalized: String::new(),
            all_tokens: TokenBuffer::new(),
            all_kept: true,
            spans: Vec::new(),
            hashes: Vec::new(),
            table: Vec::new(),
            sort_feature_set: true,
            signer,
            signature,
        }
    }

    pub fn scheme(&self) -> &Scheme {
        &self.scheme
    }

    /// Whether [`Fingerprinter::feature_set`] is sorted (the default). A caller that never
    /// reads it, or only needs the set in any order, turns sorting off and saves a sort per
    /// document; the fingerprints and signatures do not depend on it.
    pub fn set_sort_feature_set(&mut self, sort: bool) {
        self.sort_feature_set = sort;
    }

    /// Tokenizes `text`, fills the feature hashes (one per occurrence) and returns
    /// (tokens kept, exact key).
    fn analyze(&mut self, text: &str) -> (u32, u128) {
        let nfkc;
        let text = if self.scheme.features.nfkc {
            nfkc = text.nfkc().collect::<String>();
            nfkc.as_str()
        } else {
            text
        };
        self.all_tokens.clear();
        self.spans.clear();
        let spans = &mut self.spans;
        let mut all = 0usize;
        let numbers = self.scheme.features.numbers;
        self.tokenizer
            .tokenize_into(text, &mut self.all_tokens, |start, end, has_alpha| {
                all += 1;
                if has_alpha || numbers {
                    spans.push((start as u32, end as u32));
                }
            });
        if let Some(stop_words) = self.scheme.features.stop_words.as_deref() {
            let joined = self.all_tokens.as_bytes();
            self.spans.retain(|&(s, e)| {
                let token = std::str::from_utf8(&joined[s as usize..e as usize]);
                !stop_words.contains(token.expect("tokens are UTF-8"))
            });
        }
        let exact_key = exact::token_stream_key_bytes(self.all_tokens.as_bytes());
        self.all_kept = self.spans.len() == all;
        self.hashes.clear();
        let (kind, hasher) = (self.scheme.features.kind, self.scheme.features.hasher);
        if self.all_kept {
            let (text, padded) = (self.all_tokens.as_bytes(), self.all_tokens.padded());
            hash_features_padded(kind, hasher, text, padded, &self.spans, &mut self.hashes);
        } else {
            self.gather_normalized();
            let len = self.normalized.len();
            self.normalized.push_str(PADDING);
            let padded = self.normalized.as_bytes();
            hash_features_padded(
                kind,
                hasher,
                &padded[..len],
                padded,
                &self.spans,
                &mut self.hashes,
            );
            self.normalized.truncate(len);
        }
        (self.spans.len() as u32, exact_key)
    }

    /// Copies the feature tokens (the spans, in `all_tokens`) into `normalized`, joined by
    /// single spaces, and moves the spans there. Consecutive kept tokens are copied as one
    /// run.
    fn gather_normalized(&mut self) {
        self.normalized.clear();
        let source = self.all_tokens.as_bytes();
        let mut run: Option<(usize, usize, usize)> = None; // (first span, start, end)
        let flush = |normalized: &mut String, spans: &mut [(u32, u32)], first, start, end| {
            if !normalized.is_empty() {
                normalized.push(' ');
            }
            let shift = normalized.len() as i64 - start as i64;
            let run = std::str::from_utf8(&source[start..end]).expect("tokens are UTF-8");
            normalized.push_str(run);
            for span in spans[first..].iter_mut() {
                span.0 = (span.0 as i64 + shift) as u32;
                span.1 = (span.1 as i64 + shift) as u32;
            }
        };
        for i in 0..self.spans.len() {
            let (s, e) = (self.spans[i].0 as usize, self.spans[i].1 as usize);
            run = match run {
                Some((first, start, end)) if s == end + 1 => Some((first, start, e)),
                Some((first, start, end)) => {
                    flush(
                        &mut self.normalized,
                        &mut self.spans[..i],
                        first,
                        start,
                        end,
                    );
                    Some((i, s, e))
                }
                None => Some((i, s, e)),
            };
        }
        if let Some((first, start, end)) = run {
            flush(&mut self.normalized, &mut self.spans, first, start, end);
        }
    }

    /// Fingerprints one document. For MinHash schemes the signature is then available from
    /// [`Fingerprinter::signature`].
    pub fn fingerprint(&mut self, text: &str) -> DocFingerprint {
        let (n_tokens, exact_key) = self.analyze(text);
        let (simhash_value, distinct) = match &self.scheme.method {
            Method::Simhash(Weighting::Set) | Method::MinHash { .. } => {
                // Each distinct feature once: a hash set, no sort.
                let distinct = dedup_unsorted(&mut self.hashes, &mut self.table);
                self.hashes.truncate(distinct);
                let value = match self.scheme.method {
                    Method::Simhash(_) => fold_unweighted(&self.hashes),
                    Method::MinHash { .. } => 0,
                };
                if self.sort_feature_set {
                    self.hashes.sort_unstable();
                }
                (value, distinct)
            }
            Method::Simhash(weighting) => {
                // One sort serves the weighting (runs of equal hashes) and the distinct set.
                self.hashes.sort_unstable();
                let value = simhash_of_sorted(&self.hashes, weighting);
                let distinct = dedup_sorted(&mut self.hashes);
                self.hashes.truncate(distinct);
                (value, distinct)
            }
        };
        if let Some(signer) = &self.signer {
            signer.signature_into(&self.hashes, &mut self.signature);
        }
        DocFingerprint {
            simhash: simhash_value,
            n_tokens,
            n_features: distinct as u32,
            exact_key,
        }
    }

    /// The distinct feature hashes of the last document fingerprinted: sorted, unless
    /// [`Fingerprinter::set_sort_feature_set`] turned that off.
    pub fn feature_set(&self) -> &[u64] {
        &self.hashes
    }

    /// The MinHash signature of the last document (empty for simhash schemes).
    pub fn signature(&self) -> &[u64] {
        &self.signature
    }

    /// The normalized text of the last document: its feature tokens joined by spaces.
    pub fn normalized_text(&self) -> &str {
        if self.all_kept {
            self.all_tokens.as_str()
        } else {
            &self.normalized
        }
    }
}

/// The exact-duplicate key of raw bytes (re-exported for symmetry).
pub fn raw_exact_key(bytes: &[u8]) -> u128 {
    exact::raw_key(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::{to_base32, to_hex};

    #[test]
    fn params_rebuild_the_scheme() {
        let mut shingles = Scheme::simhash_shingles();
        shingles.features.nfkc = true;
        let stopped = Scheme::simhash_doc().with_stop_words(StopWords::english());
        for scheme in [
            Scheme::simhash_doc(),
            shingles,
            stopped,
            Scheme::minhash(),
            Scheme::minhash_oph(),
        ] {
            let rebuilt = Scheme::from_params(scheme.name.as_str(), &scheme.params()).unwrap();
            assert_eq!(rebuilt.params(), scheme.params());
            assert_eq!(rebuilt.describe(), scheme.describe());
        }
        let params = Scheme::simhash_doc().params();
        assert_eq!(
            Scheme::from_params("simhash-x", &params)
                .unwrap_err()
                .to_string(),
            "the index's scheme \"simhash-x\" is not one this neardup knows"
        );
        let mut tf_idf = params.clone();
        tf_idf["weights"] = json!("tf-idf");
        assert!(matches!(
            Scheme::from_params("simhash-doc", &tf_idf),
            Err(ParamsError::Weights(_))
        ));
        let mut other = params;
        other["revision"] = json!(FINGERPRINT_REVISION + 1);
        assert!(matches!(
            Scheme::from_params("simhash-doc", &other),
            Err(ParamsError::Differ { .. })
        ));
    }

    fn fp(scheme: Scheme, text: &str) -> DocFingerprint {
        Fingerprinter::new(scheme).fingerprint(text)
    }

    fn tf_doc() -> Scheme {
        let mut s = Scheme::simhash_doc();
        s.method = Method::Simhash(Weighting::Tf);
        s
    }

    /// The golden vectors of the simhash-doc scheme (docs/fingerprints.md).
    const GOLDEN: &[(&str, &str, &str, &str)] = &[
        ("", "0000000000000000", "aaaaaaaaaaaaa", "0000000000000000"),
        (
            "Four score and seven years ago",
            "30e7840624325000",
            "gdtyibregjiaa",
            "30e7840624325000",
        ),
        (
            "The quick brown fox jumps over the lazy dog.",
            "83052266e2554591",
            "qmcsezxckvczc",
            "83172276e2f5c591",
        ),
        (
            "the the the cat",
            "0506620030f44080",
            "audgeabq6raia",
            "0717627632fcc083",
        ),
        (
            "Ünïcödé façade — naïve café 123 4u2 x_y",
            "850322a04a503246",
            "qubsfickkazem",
            "850322a04a503246",
        ),
        (
            "co\u{00AD}operate co\u{200B}operate",
            "009409fb4f405d21",
            "ackat62pibosc",
            "009409fb4f405d21",
        ),
        (
            "2024 12345 42",
            "0000000000000000",
            "aaaaaaaaaaaaa",
            "0000000000000000",
        ),
    ];

    #[test]
    fn simhash_doc_golden_vectors() {
        for &(text, hex, b32, tf_hex) in GOLDEN {
            let set = fp(Scheme::simhash_doc(), text);
            assert_eq!(to_hex(set.simhash), hex, "{text:?}");
            assert_eq!(to_base32(set.simhash), b32, "{text:?}");
            assert_eq!(to_hex(fp(tf_doc(), text).simhash), tf_hex, "tf {text:?}");
        }
    }

    #[test]
    fn empty_documents_are_flagged() {
        assert!(fp(Scheme::simhash_doc(), "").is_empty());
        assert!(fp(Scheme::simhash_doc(), "2024 12345 42").is_empty());
        assert!(fp(Scheme::simhash_doc(), " ... ").is_empty());
        assert!(!fp(Scheme::simhash_doc(), "a").is_empty());
        assert!(fp(Scheme::minhash(), " ... ").is_empty());
        // MinHash keeps numbers as words: a number alone is content there.
        assert!(!fp(Scheme::minhash(), "2024").is_empty());
    }

    #[test]
    fn exact_key_ignores_case_space_punctuation_but_not_numbers() {
        let a = fp(Scheme::simhash_doc(), "Hello, World! 2024");
        let b = fp(Scheme::simhash_doc(), "hello world 2024");
        let c = fp(Scheme::simhash_doc(), "hello world 2025");
        assert_eq!(a.exact_key, b.exact_key);
        assert_ne!(a.exact_key, c.exact_key);
        assert_eq!(a.simhash, c.simhash, "numbers are not simhash-doc features");
    }

    #[test]
    fn stop_words_leave_the_features() {
        let scheme = Scheme::simhash_doc().with_stop_words(StopWords::english());
        assert_eq!(
            fp(scheme.clone(), "the cat").simhash,
            fp(Scheme::simhash_doc(), "cat").simhash
        );
        assert_eq!(fp(scheme.clone(), "the cat").n_tokens, 1);
        assert!(fp(scheme, "the of and").is_empty());
    }

    #[test]
    fn nfkc_folds_compatibility_forms() {
        let mut scheme = Scheme::simhash_doc();
        let wide = "ｆｕｌｌｗｉｄｔｈ ﬁne";
        assert_ne!(
            fp(scheme.clone(), wide).simhash,
            fp(scheme.clone(), "fullwidth fine").simhash
        );
        scheme.features.nfkc = true;
        assert_eq!(
            fp(scheme.clone(), wide).simhash,
            fp(scheme, "fullwidth fine").simhash
        );
    }

    #[test]
    fn minhash_signatures_of_similar_documents_agree_often() {
        let mut f = Fingerprinter::new(Scheme::minhash());
        let base = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty";
        f.fingerprint(base);
        let a = f.signature().to_vec();
        f.fingerprint(&base.replace("twenty", "twentyone"));
        let b = f.signature().to_vec();
        let est = crate::minhash::jaccard_estimate(&a, &b);
        // 16 shingles, 15 shared: J = 15/17.
        assert!((est - 15.0 / 17.0).abs() < 0.2, "{est}");
        assert_eq!(f.feature_set().len(), 16);
    }

    #[test]
    fn describe_names_presets_and_overrides() {
        assert!(Scheme::simhash_doc().describe().starts_with("simhash-doc:"));
        assert!(tf_doc().describe().starts_with("simhash-doc (modified)"));
    }
}
