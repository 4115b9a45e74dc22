//! The verdict on two documents (what `neardup compare` reports): empty, exact duplicate,
//! near-duplicate or different, from the similarities measured between them and the
//! thresholds, with which thresholds were met and which missed; and [`compare_texts`], the
//! whole measurement of two texts that `neardup compare` and the Python package report.
//!
//! ```
//! use neardup_core::verdict::{decide, Measured, Thresholds, Verdict};
//!
//! let measured = Measured {
//!     a_empty: false,
//!     b_empty: false,
//!     exact_duplicate: false,
//!     hamming: Some(2),
//!     minhash_estimate: None,
//!     jaccard: 0.5,
//! };
//! let decision = decide(&measured, &Thresholds::default());
//! assert_eq!(decision.verdict, Verdict::NearDuplicate);
//! assert_eq!(decision.reason(), "hamming 2 <= 3");
//! ```

use std::fmt;

use crate::features::{FeatureConfig, FeatureKind};
use crate::similarity::DEFAULT_JACCARD;
use crate::tables::DEFAULT_K;
use crate::{encoding, minhash, simhash, similarity};
use crate::{DocFingerprint, Fingerprinter, Method, Scheme, SchemeName, Weighting};

/// What was measured between documents a and b.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    /// Document a has no features (no word with a letter): it is never a duplicate.
    pub a_empty: bool,
    pub b_empty: bool,
    /// Equal exact-duplicate keys (the same tokens in the same order).
    pub exact_duplicate: bool,
    /// Hamming distance of the simhashes (`None` for MinHash).
    pub hamming: Option<u32>,
    /// The MinHash Jaccard estimate (`None` for simhash).
    pub minhash_estimate: Option<f64>,
    /// The exact Jaccard similarity of the word-shingle sets.
    pub jaccard: f64,
}

/// The thresholds a pair is a near-duplicate at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    /// Simhashes within this many bits.
    pub k: u32,
    /// A Jaccard similarity (exact or MinHash estimate) at least this.
    pub jaccard: f64,
}

impl Default for Thresholds {
    /// [`DEFAULT_K`] and [`DEFAULT_JACCARD`]: the defaults of a run.
    fn default() -> Self {
        Thresholds {
            k: DEFAULT_K,
            jaccard: DEFAULT_JACCARD,
        }
    }
}

/// Which of the documents is empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmptySide {
    Both,
    A,
    B,
}

/// The verdict on a pair of documents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// One or both documents are empty: empty documents are never duplicates.
    Empty(EmptySide),
    ExactDuplicate,
    NearDuplicate,
    Different,
}

impl Verdict {
    /// `empty`, `exact duplicate`, `near-duplicate` or `different`.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Empty(_) => "empty",
            Verdict::ExactDuplicate => "exact duplicate",
            Verdict::NearDuplicate => "near-duplicate",
            Verdict::Different => "different",
        }
    }
}

/// One similarity held against its threshold.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Check {
    /// Met when `distance <= k`.
    Hamming { distance: u32, k: u32 },
    /// Met when `estimate >= threshold`.
    MinhashEstimate { estimate: f64, threshold: f64 },
    /// Met when `jaccard >= threshold`.
    Jaccard { jaccard: f64, threshold: f64 },
}

impl Check {
    pub fn met(&self) -> bool {
        match *self {
            Check::Hamming { distance, k } => distance <= k,
            Check::MinhashEstimate {
                estimate,
                threshold,
            } => estimate >= threshold,
            Check::Jaccard { jaccard, threshold } => jaccard >= threshold,
        }
    }
}

impl fmt::Display for Check {
    /// `hamming 2 <= 3`, `minhash estimate 0.7500 < 0.8`, `jaccard 0.9000 >= 0.8`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let met = self.met();
        match *self {
            Check::Hamming { distance, k } => {
                write!(f, "hamming {distance} {} {k}", if met { "<=" } else { ">" })
            }
            Check::MinhashEstimate {
                estimate,
                threshold,
            } => write!(
                f,
                "minhash estimate {estimate:.4} {} {threshold}",
                if met { ">=" } else { "<" }
            ),
            Check::Jaccard { jaccard, threshold } => write!(
                f,
                "jaccard {jaccard:.4} {} {threshold}",
                if met { ">=" } else { "<" }
            ),
        }
    }
}

/// A verdict and the thresholds behind it.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub verdict: Verdict,
    /// Every threshold checked (Hamming, MinHash estimate, Jaccard, those that apply), met
    /// or missed; empty when emptiness or an exact duplicate decided.
    pub checks: Vec<Check>,
}

impl Decision {
    pub fn met(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| c.met())
    }

    pub fn missed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.met())
    }

    /// Which threshold decided, in words: the thresholds met of a near-duplicate, the
    /// thresholds missed of a different pair.
    pub fn reason(&self) -> String {
        let join = |checks: &mut dyn Iterator<Item = &Check>| {
            checks
                .map(Check::to_string)
                .collect::<Vec<_>>()
                .join(" and ")
        };
        match self.verdict {
            Verdict::Empty(EmptySide::Both) => {
                "neither document has a word with a letter: empty documents are never duplicates"
                    .into()
            }
            Verdict::Empty(EmptySide::A) => {
                "document a has no word with a letter: empty documents are never duplicates".into()
            }
            Verdict::Empty(EmptySide::B) => {
                "document b has no word with a letter: empty documents are never duplicates".into()
            }
            Verdict::ExactDuplicate => {
                "equal exact-duplicate keys: the same tokens in the same order".into()
            }
            Verdict::NearDuplicate => join(&mut self.met()),
            Verdict::Different => join(&mut self.missed()),
        }
    }
}

/// The rule: empty documents are never duplicates; equal exact keys are an exact duplicate;
/// a near-duplicate meets at least one threshold (Hamming distance when there is one, the
/// MinHash estimate when there is one, the exact Jaccard always); else different.
pub fn decide(measured: &Measured, thresholds: &Thresholds) -> Decision {
    let empty = match (measured.a_empty, measured.b_empty) {
        (true, true) => Some(EmptySide::Both),
        (true, false) => Some(EmptySide::A),
        (false, true) => Some(EmptySide::B),
        (false, false) => None,
    };
    if let Some(side) = empty {
        return Decision {
            verdict: Verdict::Empty(side),
            checks: Vec::new(),
        };
    }
    if measured.exact_duplicate {
        return Decision {
            verdict: Verdict::ExactDuplicate,
            checks: Vec::new(),
        };
    }
    let mut checks = Vec::new();
    if let Some(distance) = measured.hamming {
        checks.push(Check::Hamming {
            distance,
            k: thresholds.k,
        });
    }
    if let Some(estimate) = measured.minhash_estimate {
        checks.push(Check::MinhashEstimate {
            estimate,
            threshold: thresholds.jaccard,
        });
    }
    checks.push(Check::Jaccard {
        jaccard: measured.jaccard,
        threshold: thresholds.jaccard,
    });
    let verdict = if checks.iter().any(Check::met) {
        Verdict::NearDuplicate
    } else {
        Verdict::Different
    };
    Decision { verdict, checks }
}

/// One document as [`compare_texts`] saw it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Side {
    /// The 64-bit simhash as 16 hex digits (`None` for MinHash).
    pub simhash: Option<String>,
    /// The simhash in base32 (`None` for MinHash).
    pub base32: Option<String>,
    /// The MinHash signature as 16-digit hex values (`None` for simhash).
    pub minhash: Option<Vec<String>>,
    pub n_tokens: u32,
    pub n_features: u32,
    /// No features under the scheme: never a duplicate.
    pub empty: bool,
}

impl Side {
    fn new(fp: &DocFingerprint, signature: Option<&[u64]>) -> Side {
        let simhash = signature.is_none().then_some(fp.simhash);
        Side {
            simhash: simhash.map(encoding::to_hex),
            base32: simhash.map(encoding::to_base32),
            minhash: signature.map(|s| s.iter().map(|v| format!("{v:016x}")).collect()),
            n_tokens: fp.n_tokens,
            n_features: fp.n_features,
            empty: fp.is_empty(),
        }
    }
}

/// Everything measured between two texts and the verdict at the default thresholds: what
/// `neardup compare` and the Python package's `compare` report (their field names are the
/// keys of `neardup compare --json`).
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The scheme, as [`Scheme::describe`] gives it.
    pub scheme: String,
    pub a: Side,
    pub b: Side,
    /// Hamming distance of the simhashes (`None` for MinHash).
    pub hamming: Option<u32>,
    pub cosine_estimate: Option<f64>,
    /// Exact Jaccard similarity of the word-shingle sets (0 when a document is empty).
    pub jaccard: f64,
    /// The n of those shingles.
    pub jaccard_shingle: usize,
    pub containment_a_in_b: f64,
    pub containment_b_in_a: f64,
    /// The fraction of equal signature positions (MinHash only).
    pub minhash_jaccard_estimate: Option<f64>,
    pub exact_duplicate: bool,
    pub decision: Decision,
}

/// The scheme the exact Jaccard of [`compare_texts`] is computed with: word `n`-shingles of
/// all tokens (numbers included, as verification in a run does), xxh3, with the
/// normalization (NFKC, stop words) of the fingerprint scheme.
pub fn jaccard_scheme(scheme: &Scheme, n: usize) -> Scheme {
    Scheme {
        name: SchemeName::SimhashShingles,
        features: FeatureConfig {
            kind: FeatureKind::WordShingles(n),
            nfkc: scheme.features.nfkc,
            stop_words: scheme.features.stop_words.clone(),
            ..FeatureConfig::all_word_shingles(n)
        },
        method: Method::Simhash(Weighting::Set),
    }
}

/// Measures texts `a` and `b` under `scheme`: fingerprints, the exact Jaccard similarity and
/// containments of their word `shingle`-shingle sets, the MinHash estimate or the Hamming
/// distance, and [`decide`]s at the default [`Thresholds`].
///
/// ```
/// use neardup_core::{verdict::{compare_texts, Verdict}, Scheme};
///
/// let c = compare_texts(&Scheme::simhash_doc(), 3, "Hello, World!", "hello world");
/// assert_eq!(c.decision.verdict, Verdict::ExactDuplicate);
/// assert_eq!(c.hamming, Some(0));
/// ```
pub fn compare_texts(scheme: &Scheme, shingle: usize, a: &str, b: &str) -> Comparison {
    let is_minhash = matches!(scheme.method, Method::MinHash { .. });
    let mut fingerprinter = Fingerprinter::new(scheme.clone());
    let fa = fingerprinter.fingerprint(a);
    let sig_a = fingerprinter.signature().to_vec();
    let fb = fingerprinter.fingerprint(b);
    let sig_b = fingerprinter.signature().to_vec();

    let mut shingler = Fingerprinter::new(jaccard_scheme(scheme, shingle));
    shingler.fingerprint(a);
    let set_a = shingler.feature_set().to_vec();
    shingler.fingerprint(b);
    let set_b = shingler.feature_set();
    // An empty document (no features under the scheme) is never a duplicate, whatever its
    // shingles: the same rule as in a run.
    let any_empty = fa.is_empty() || fb.is_empty();
    let jaccard = if any_empty {
        0.0
    } else {
        similarity::jaccard(&set_a, set_b)
    };
    let (hamming, minhash_estimate) = if is_minhash {
        (None, Some(minhash::jaccard_estimate(&sig_a, &sig_b)))
    } else {
        (Some(crate::hamming(fa.simhash, fb.simhash)), None)
    };
    let exact_duplicate = !any_empty && fa.exact_key == fb.exact_key;
    let decision = decide(
        &Measured {
            a_empty: fa.is_empty(),
            b_empty: fb.is_empty(),
            exact_duplicate,
            hamming,
            minhash_estimate,
            jaccard,
        },
        &Thresholds::default(),
    );
    Comparison {
        scheme: scheme.describe(),
        a: Side::new(&fa, is_minhash.then_some(&sig_a[..])),
        b: Side::new(&fb, is_minhash.then_some(&sig_b[..])),
        hamming,
        cosine_estimate: hamming.map(simhash::cosine_estimate),
        jaccard,
        jaccard_shingle: shingle,
        containment_a_in_b: similarity::containment(&set_a, set_b),
        containment_b_in_a: similarity::containment(set_b, &set_a),
        minhash_jaccard_estimate: minhash_estimate,
        exact_duplicate,
        decision,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn simhash(hamming: u32, jaccard: f64) -> Measured {
        Measured {
            a_empty: false,
            b_empty: false,
            exact_duplicate: false,
            hamming: Some(hamming),
            minhash_estimate: None,
            jaccard,
        }
    }

    fn minhash(estimate: f64, jaccard: f64) -> Measured {
        Measured {
            hamming: None,
            minhash_estimate: Some(estimate),
            ..simhash(0, jaccard)
        }
    }

    fn decide_default(m: Measured) -> (&'static str, String) {
        let d = decide(&m, &Thresholds::default());
        (d.verdict.name(), d.reason())
    }

    #[test]
    fn the_defaults_are_k_3_and_jaccard_0_8() {
        assert_eq!(Thresholds::default(), Thresholds { k: 3, jaccard: 0.8 });
    }

    #[test]
    fn empty_wins_over_everything() {
        let both = Measured {
            a_empty: true,
            b_empty: true,
            exact_duplicate: true,
            ..simhash(0, 1.0)
        };
        let d = decide(&both, &Thresholds::default());
        assert_eq!(d.verdict, Verdict::Empty(EmptySide::Both));
        assert!(d.checks.is_empty());
        assert_eq!(
            d.reason(),
            "neither document has a word with a letter: empty documents are never duplicates"
        );
        let a = Measured {
            b_empty: false,
            ..both
        };
        assert_eq!(
            decide_default(a),
            (
                "empty",
                "document a has no word with a letter: empty documents are never duplicates".into()
            )
        );
        let b = Measured {
            a_empty: false,
            ..both
        };
        assert_eq!(
            decide(&b, &Thresholds::default()).verdict,
            Verdict::Empty(EmptySide::B)
        );
    }

    #[test]
    fn exact_duplicate_wins_over_thresholds() {
        let m = Measured {
            exact_duplicate: true,
            ..simhash(40, 0.0)
        };
        assert_eq!(
            decide_default(m),
            (
                "exact duplicate",
                "equal exact-duplicate keys: the same tokens in the same order".into()
            )
        );
    }

    #[test]
    fn hamming_at_k_is_near_and_above_k_is_not() {
        assert_eq!(
            decide_default(simhash(3, 0.5)),
            ("near-duplicate", "hamming 3 <= 3".into())
        );
        assert_eq!(
            decide_default(simhash(4, 0.5)),
            ("different", "hamming 4 > 3 and jaccard 0.5000 < 0.8".into())
        );
    }

    #[test]
    fn every_met_threshold_is_named() {
        assert_eq!(
            decide_default(simhash(0, 0.8)),
            (
                "near-duplicate",
                "hamming 0 <= 3 and jaccard 0.8000 >= 0.8".into()
            )
        );
        // Jaccard alone suffices.
        let d = decide(&simhash(10, 0.85), &Thresholds::default());
        assert_eq!(d.verdict, Verdict::NearDuplicate);
        assert_eq!(d.met().count(), 1);
        assert_eq!(
            d.missed().copied().collect::<Vec<_>>(),
            [Check::Hamming { distance: 10, k: 3 }]
        );
        assert_eq!(d.reason(), "jaccard 0.8500 >= 0.8");
    }

    #[test]
    fn minhash_checks_the_estimate_and_the_exact_jaccard() {
        assert_eq!(
            decide_default(minhash(0.8125, 0.7)),
            ("near-duplicate", "minhash estimate 0.8125 >= 0.8".into())
        );
        assert_eq!(
            decide_default(minhash(0.75, 0.79999)),
            (
                "different",
                "minhash estimate 0.7500 < 0.8 and jaccard 0.8000 < 0.8".into()
            )
        );
    }

    #[test]
    fn other_thresholds() {
        let t = Thresholds { k: 6, jaccard: 0.5 };
        let d = decide(&simhash(5, 0.4), &t);
        assert_eq!(d.verdict, Verdict::NearDuplicate);
        assert_eq!(d.reason(), "hamming 5 <= 6");
        let d = decide(&minhash(0.45, 0.4), &t);
        assert_eq!(d.verdict, Verdict::Different);
        assert_eq!(
            d.reason(),
            "minhash estimate 0.4500 < 0.5 and jaccard 0.4000 < 0.5"
        );
    }
}
