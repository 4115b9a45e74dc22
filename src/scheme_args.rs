//! The fingerprint-scheme flags every subcommand shares, and their translation into a
//! [`neardup_core::Scheme`].
//!
//! A user starts from a named preset (`--scheme`) and may override its parts. Overrides
//! that make no sense for the preset (a shingle size for single words, weights for MinHash,
//! permutations for simhash) are errors rather than silently ignored: a fingerprint computed
//! with a flag that did nothing is a fingerprint the user did not ask for.
//!
//! The feature hash belongs to the preset: lookup3 for `simhash-doc` (also when its features
//! or weights are overridden), xxh3 for `simhash-shingles` and `minhash`.

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use neardup_core::features::{FeatureKind, StopWords, DEFAULT_CHAR_NGRAM, DEFAULT_SHINGLE_WORDS};
use neardup_core::{Method, Scheme, SchemeName, Weighting};

/// The largest `--permutations` accepted: a signature this long is already far more precise
/// than any threshold needs, and a typo such as `--permutations 1280000` should not try to
/// allocate gigabytes.
pub const MAX_PERMUTATIONS: usize = 4096;

/// Flags that choose how a document becomes a fingerprint.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Scheme")]
pub struct SchemeArgs {
    /// The fingerprint recipe: simhash-doc (single words, lookup3, set weights; the
    /// interoperable default), simhash-shingles (word 3-shingles, xxh3), minhash (word
    /// 5-shingles, xxh3, 128 permutations), minhash-oph (minhash's shingles, one hash per
    /// shingle into 128 densified bins: several times faster, the same estimate)
    #[arg(long, visible_alias = "method", value_enum, default_value_t = SchemeChoice::SimhashDoc)]
    pub scheme: SchemeChoice,

    /// Override the features: single words, word shingles, or character n-grams of the
    /// normalized text
    #[arg(long, value_enum)]
    pub features: Option<FeatureChoice>,

    /// The n of word shingles or character n-grams (default: 3 words for simhash-shingles, 5
    /// for minhash, 5 characters for chars)
    #[arg(long, value_name = "N")]
    pub shingle: Option<usize>,

    /// Override the simhash weighting: each distinct feature once (set, the default) or as
    /// often as it occurs (tf)
    #[arg(long, value_enum)]
    pub weights: Option<WeightChoice>,

    /// Leave these words out of the features: `english` (the built-in 127-word list) or a
    /// file with one word per line (`#` starts a comment)
    #[arg(long, value_name = "english|PATH")]
    pub stop_words: Option<String>,

    /// Apply Unicode NFKC normalization before tokenizing (folds full-width letters,
    /// ligatures and other compatibility forms)
    #[arg(long)]
    pub nfkc: bool,

    /// The number of MinHash permutations (minhash), or bins (minhash-oph); default 128
    #[arg(long, value_name = "N")]
    pub permutations: Option<usize>,
}

/// `--scheme`: the named presets of [`SchemeName`].
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemeChoice {
    SimhashDoc,
    SimhashShingles,
    Minhash,
    MinhashOph,
}

impl SchemeChoice {
    pub fn name(self) -> SchemeName {
        match self {
            SchemeChoice::SimhashDoc => SchemeName::SimhashDoc,
            SchemeChoice::SimhashShingles => SchemeName::SimhashShingles,
            SchemeChoice::Minhash => SchemeName::Minhash,
            SchemeChoice::MinhashOph => SchemeName::MinhashOph,
        }
    }
}

/// `--features`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeatureChoice {
    /// Single tokens.
    Words,
    /// Runs of n consecutive tokens.
    Shingles,
    /// Runs of n consecutive characters of the space-joined tokens.
    Chars,
}

/// `--weights`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightChoice {
    Set,
    Tf,
    /// Term frequency times inverse document frequency (`neardup run` only: it needs a pass
    /// over the corpus)
    Tfidf,
}

impl SchemeArgs {
    /// Whether `--weights tfidf` was asked for (only `neardup run` can compute it).
    pub fn wants_tfidf(&self) -> bool {
        self.weights == Some(WeightChoice::Tfidf)
    }

    /// The scheme these flags describe, or a clear error if they contradict each other.
    pub fn to_scheme(&self) -> Result<Scheme> {
        let name = self.scheme.name();
        let mut scheme = Scheme::named(name);

        if self.shingle == Some(0) {
            bail!("--shingle must be at least 1 (it is the number of words per shingle or characters per n-gram)");
        }
        scheme.features.kind = match (self.features, self.shingle) {
            (None, None) => scheme.features.kind,
            (None, Some(n)) => match scheme.features.kind {
                FeatureKind::Words => bail!(
                    "--shingle {n} has no effect on single words, the features of --scheme {}; \
                     add --features shingles or --features chars",
                    name.as_str()
                ),
                FeatureKind::WordShingles(_) => FeatureKind::WordShingles(n),
                FeatureKind::CharNgrams(_) => FeatureKind::CharNgrams(n),
            },
            (Some(FeatureChoice::Words), Some(n)) => bail!(
                "--shingle {n} has no effect with --features words; use --features shingles or --features chars"
            ),
            (Some(FeatureChoice::Words), None) => FeatureKind::Words,
            (Some(FeatureChoice::Shingles), n) => {
                let default = match scheme.features.kind {
                    FeatureKind::WordShingles(d) => d,
                    _ => DEFAULT_SHINGLE_WORDS,
                };
                FeatureKind::WordShingles(n.unwrap_or(default))
            }
            (Some(FeatureChoice::Chars), n) => {
                FeatureKind::CharNgrams(n.unwrap_or(DEFAULT_CHAR_NGRAM))
            }
        };

        match &mut scheme.method {
            Method::Simhash(weighting) => {
                if let Some(p) = self.permutations {
                    bail!(
                        "--permutations {p} applies only to --scheme minhash and minhash-oph (--scheme {} computes a 64-bit simhash)",
                        name.as_str()
                    );
                }
                if let Some(w) = self.weights {
                    *weighting = match w {
                        WeightChoice::Set => Weighting::Set,
                        WeightChoice::Tf => Weighting::Tf,
                        // The job fills the table in from its document-frequency pass.
                        WeightChoice::Tfidf => Weighting::TfIdf(Default::default()),
                    };
                }
            }
            Method::MinHash { permutations, .. } => {
                if self.weights.is_some() {
                    bail!("--weights applies only to the simhash schemes: a MinHash signature depends on the set of features alone");
                }
                match self.permutations {
                    Some(p) if p == 0 || p > MAX_PERMUTATIONS => {
                        bail!("--permutations must be between 1 and {MAX_PERMUTATIONS}, not {p}")
                    }
                    Some(p) => *permutations = p,
                    None => {}
                }
            }
        }

        scheme.features.nfkc = self.nfkc;
        if let Some(spec) = &self.stop_words {
            scheme = scheme.with_stop_words(load_stop_words(spec)?);
        }
        Ok(scheme)
    }
}

/// `english` is the built-in list; anything else is a path to a word list.
fn load_stop_words(spec: &str) -> Result<StopWords> {
    if spec == "english" {
        return Ok(StopWords::english());
    }
    let text = std::fs::read_to_string(spec)
        .with_context(|| format!("cannot read the stop-word list {spec:?}"))?;
    let words = StopWords::parse(&text);
    if words.is_empty() {
        bail!("the stop-word list {spec:?} holds no words (expected one word per line)");
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use neardup_core::features::FeatureHasher;
    use neardup_core::Sketch;

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        scheme: SchemeArgs,
    }

    fn scheme(args: &[&str]) -> Result<Scheme> {
        let probe = Probe::try_parse_from(std::iter::once("probe").chain(args.iter().copied()))
            .expect("flags parse");
        probe.scheme.to_scheme()
    }

    fn error(args: &[&str]) -> String {
        format!("{:#}", scheme(args).unwrap_err())
    }

    #[test]
    fn presets_are_the_core_presets() {
        assert_eq!(scheme(&[]).unwrap(), Scheme::simhash_doc());
        assert_eq!(
            scheme(&["--scheme", "simhash-shingles"]).unwrap(),
            Scheme::simhash_shingles()
        );
        assert_eq!(scheme(&["--scheme", "minhash"]).unwrap(), Scheme::minhash());
    }

    #[test]
    fn overrides_apply() {
        let s = scheme(&["--features", "shingles"]).unwrap();
        assert_eq!(s.features.kind, FeatureKind::WordShingles(3));
        assert_eq!(
            s.features.hasher,
            FeatureHasher::Lookup3,
            "the preset keeps its hash"
        );
        let s = scheme(&["--features", "chars", "--shingle", "4", "--nfkc"]).unwrap();
        assert_eq!(s.features.kind, FeatureKind::CharNgrams(4));
        assert!(s.features.nfkc);
        let s = scheme(&[
            "--scheme",
            "minhash",
            "--shingle",
            "7",
            "--permutations",
            "64",
        ])
        .unwrap();
        assert_eq!(s.features.kind, FeatureKind::WordShingles(7));
        assert_eq!(
            s.method,
            Method::MinHash {
                permutations: 64,
                sketch: Sketch::Permutations
            }
        );
        let s = scheme(&["--scheme", "minhash-oph", "--permutations", "256"]).unwrap();
        assert_eq!(
            s.method,
            Method::MinHash {
                permutations: 256,
                sketch: Sketch::OnePermutation
            }
        );
        assert_eq!(s.features, Scheme::minhash().features);
        let s = scheme(&["--scheme", "minhash", "--features", "shingles"]).unwrap();
        assert_eq!(s.features.kind, FeatureKind::WordShingles(5));
        let s = scheme(&["--weights", "tf", "--stop-words", "english"]).unwrap();
        assert_eq!(s.method, Method::Simhash(Weighting::Tf));
        assert_eq!(s.features.stop_words.unwrap().len(), 127);
    }

    #[test]
    fn nonsense_is_a_clear_error() {
        assert!(error(&["--shingle", "0", "--features", "shingles"]).contains("at least 1"));
        assert!(error(&["--shingle", "3"]).contains("--features shingles"));
        assert!(error(&["--features", "words", "--shingle", "2"]).contains("no effect"));
        assert!(error(&["--scheme", "minhash", "--permutations", "0"]).contains("between 1"));
        assert!(error(&["--permutations", "64"]).contains("only to --scheme minhash"));
        assert!(error(&["--scheme", "minhash", "--weights", "tf"]).contains("simhash schemes"));
        assert!(error(&["--stop-words", "/no/such/list"]).contains("/no/such/list"));
    }

    #[test]
    fn stop_word_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stop.txt");
        std::fs::write(&path, "The\nof # comment\n").unwrap();
        let s = scheme(&["--stop-words", path.to_str().unwrap()]).unwrap();
        let words = s.features.stop_words.unwrap();
        assert!(words.contains("the") && words.contains("of") && words.len() == 2);
        std::fs::write(&path, "# nothing\n").unwrap();
        assert!(error(&["--stop-words", path.to_str().unwrap()]).contains("holds no words"));
    }
}
