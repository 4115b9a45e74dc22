//! `neardup compare`: two documents side by side, with every similarity neardup knows and
//! the verdict a run would reach at the default thresholds.
//!
//! The Jaccard similarity and containments are exact, over the sets of word shingles
//! (`--shingle-jaccard N` words, default 3) hashed with xxh3, after the same normalization
//! as the fingerprints (NFKC and stop words, when asked for).

use std::io::{self, Write};
use std::path::Path;

use anyhow::{bail, Result};
use clap::Args;
use neardup_core::similarity::DEFAULT_JACCARD_SHINGLE;
use neardup_core::verdict::{self, compare_texts};
use neardup_core::Scheme;
use neardup_io::input::expand_inputs;
use neardup_io::record::{FieldSpec, Record};
use neardup_io::source::{SourceRecord, UnitSpec};
use serde::Serialize;

use crate::commands::write_stdout;
use crate::scheme_args::SchemeArgs;

const EXAMPLES: &str = "\
Examples:
  Two files, each read whole as one document (UTF-8; .gz and .zst are decompressed):
    neardup compare old.txt new.txt
  Two strings, as JSON:
    neardup compare --json --text 'The quick brown fox' --text 'the quick brown fox!'
  With the MinHash scheme (adds the MinHash Jaccard estimate), Jaccard over word 5-shingles:
    neardup compare --scheme minhash --shingle-jaccard 5 a.txt b.txt

Verdict: \"empty\" if either document has no words (empty documents are never duplicates);
\"exact duplicate\" if the exact-duplicate keys are equal (same tokens in the same order);
\"near-duplicate\" if the Hamming distance is at most 3 or the word-shingle Jaccard is at
least 0.8 (minhash: the MinHash estimate or the exact Jaccard is at least 0.8); else
\"different\". The output says which threshold decided.";

/// Flags of `neardup compare`.
#[derive(Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct CompareArgs {
    #[command(flatten)]
    pub scheme: SchemeArgs,

    /// Print one JSON object instead of text
    #[arg(long, help_heading = "Output")]
    pub json: bool,

    /// The n of the word shingles the exact Jaccard similarity and containments are
    /// computed over
    #[arg(
        long,
        value_name = "N",
        default_value_t = DEFAULT_JACCARD_SHINGLE as u32,
        help_heading = "Output",
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub shingle_jaccard: u32,

    /// A document given as text instead of a file (give exactly two)
    #[arg(
        long = "text",
        value_name = "TEXT",
        conflicts_with = "files",
        help_heading = "Documents"
    )]
    pub texts: Vec<String>,

    /// The two files to compare (`-` reads one of them from stdin)
    #[arg(
        value_names = ["A", "B"],
        num_args = 2,
        action = clap::ArgAction::Set,
        required_unless_present = "texts",
        help_heading = None
    )]
    pub files: Vec<String>,

    #[command(flatten)]
    pub documents: crate::input_args::DocumentArgs,
}

impl CompareArgs {
    /// What clap cannot check: `--text` must be given exactly twice.
    pub fn usage_problem(&self) -> Option<String> {
        match self.texts.len() {
            0 | 2 => None,
            n => Some(format!(
                "--text must be given exactly twice (once per document), not {n} time{}",
                if n == 1 { "" } else { "s" }
            )),
        }
    }
}

pub fn run(args: &CompareArgs) -> Result<()> {
    if args.scheme.wants_tfidf() {
        anyhow::bail!("--weights tfidf needs document frequencies from a pass over the whole corpus: use it with neardup run");
    }
    let scheme = args.scheme.to_scheme()?;
    let (a, b) = if args.texts.is_empty() {
        if args.files.iter().filter(|f| *f == "-").count() > 1 {
            bail!("only one of the two documents can be read from stdin (-)");
        }
        let mut spec = FieldSpec::default();
        args.documents.apply(&mut spec)?;
        (
            Doc::read(&args.files[0], &spec)?,
            Doc::read(&args.files[1], &spec)?,
        )
    } else {
        (
            Doc::text("--text 1", &args.texts[0]),
            Doc::text("--text 2", &args.texts[1]),
        )
    };
    let report = compare(&scheme, args.shingle_jaccard as usize, &a, &b);
    // The whole report first, then one write: stdout's errors (a closed pipe, a full disk)
    // come out as such, not inside serde_json's.
    let mut text = Vec::new();
    if args.json {
        serde_json::to_writer_pretty(&mut text, &report)?;
        writeln!(text)?;
    } else {
        report.write_text(&mut text)?;
    }
    write_stdout(&String::from_utf8(text)?)?;
    Ok(())
}

/// One side of the comparison.
struct Doc {
    source: String,
    text: String,
}

impl Doc {
    fn text(source: &str, text: &str) -> Doc {
        Doc {
            source: source.to_string(),
            text: text.to_string(),
        }
    }

    /// Reads a file whole (decompressing `.gz`/`.zst`), or stdin for `-`, as a plain
    /// document: HTML is extracted when `--html` says so.
    fn read(name: &str, spec: &FieldSpec) -> Result<Doc> {
        if Path::new(name).is_dir() {
            bail!("{name} is a directory: compare takes two files, each one document");
        }
        let files = expand_inputs(&[name.to_string()], true)?;
        let [file] = files.as_slice() else {
            bail!(
                "{name:?} matches {} files: compare takes two files, each one document",
                files.len()
            );
        };
        let source = if file.is_stdin() {
            "<stdin>".to_string()
        } else {
            file.path.display().to_string()
        };
        let kind = file.format.kind();
        let mut reader = kind.open(file, &UnitSpec::whole_file(file), spec)?;
        let (mut next, mut record) = (SourceRecord::default(), Record::default());
        // A plain file holds one document, or fails to open (not UTF-8).
        let read = reader.next_into(&mut next)?;
        let text = match read.then(|| next.payload.document_into(kind, spec, &mut record)) {
            Some(Some(Ok(()))) => record.text,
            _ => bail!("{source}: no document"),
        };
        Ok(Doc { source, text })
    }
}

/// Everything `compare` reports; serialized as is for `--json`: the measurement of
/// [`compare_texts`] with the documents' sources, the verdict and its reason.
#[derive(Serialize, Debug)]
struct Report {
    scheme: String,
    a: Side,
    b: Side,
    /// Hamming distance of the simhashes (null for minhash).
    hamming: Option<u32>,
    cosine_estimate: Option<f64>,
    /// Exact Jaccard similarity of the word-shingle sets.
    jaccard: f64,
    /// The n of those shingles.
    jaccard_shingle: usize,
    containment_a_in_b: f64,
    containment_b_in_a: f64,
    /// The fraction of equal signature positions (minhash only).
    minhash_jaccard_estimate: Option<f64>,
    exact_duplicate: bool,
    verdict: &'static str,
    /// Which threshold decided the verdict.
    reason: String,
}

/// One document: where it came from, then what was measured of it.
#[derive(Serialize, Debug)]
struct Side {
    source: String,
    #[serde(flatten)]
    measured: verdict::Side,
}

fn compare(scheme: &Scheme, shingle: usize, a: &Doc, b: &Doc) -> Report {
    let c = compare_texts(scheme, shingle, &a.text, &b.text);
    Report {
        scheme: c.scheme,
        a: Side {
            source: a.source.clone(),
            measured: c.a,
        },
        b: Side {
            source: b.source.clone(),
            measured: c.b,
        },
        hamming: c.hamming,
        cosine_estimate: c.cosine_estimate,
        jaccard: c.jaccard,
        jaccard_shingle: c.jaccard_shingle,
        containment_a_in_b: c.containment_a_in_b,
        containment_b_in_a: c.containment_b_in_a,
        minhash_jaccard_estimate: c.minhash_jaccard_estimate,
        exact_duplicate: c.exact_duplicate,
        verdict: c.decision.verdict.name(),
        reason: c.decision.reason(),
    }
}

impl Report {
    fn write_text(&self, out: &mut impl Write) -> io::Result<()> {
        writeln!(out, "scheme: {}", self.scheme)?;
        for (label, side) in [("a", &self.a), ("b", &self.b)] {
            write!(out, "{label}: {}: ", side.source)?;
            match (
                &side.measured.simhash,
                &side.measured.base32,
                &side.measured.minhash,
            ) {
                (Some(hex), Some(b32), _) => write!(out, "simhash {hex} (base32 {b32})")?,
                (_, _, Some(values)) => {
                    let head: Vec<&str> = values.iter().take(2).map(String::as_str).collect();
                    write!(
                        out,
                        "minhash of {} values {},...",
                        values.len(),
                        head.join(",")
                    )?
                }
                _ => {}
            }
            write!(
                out,
                ", {}, {}",
                count(side.measured.n_tokens, "token"),
                count(side.measured.n_features, "distinct feature")
            )?;
            if side.measured.empty {
                write!(out, " (empty)")?;
            }
            writeln!(out)?;
        }
        if let (Some(h), Some(cos)) = (self.hamming, self.cosine_estimate) {
            writeln!(out, "hamming distance: {h} of 64 bits")?;
            writeln!(out, "cosine estimate: {cos:.4}")?;
        }
        if let Some(e) = self.minhash_jaccard_estimate {
            writeln!(out, "minhash jaccard estimate: {e:.4}")?;
        }
        writeln!(
            out,
            "jaccard (word {}-shingles): {:.4}",
            self.jaccard_shingle, self.jaccard
        )?;
        writeln!(
            out,
            "containment: a in b {:.4}, b in a {:.4}",
            self.containment_a_in_b, self.containment_b_in_a
        )?;
        writeln!(out, "verdict: {} ({})", self.verdict, self.reason)
    }
}

fn count(n: u32, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(scheme: Scheme, a: &str, b: &str) -> Report {
        compare(&scheme, 3, &Doc::text("a", a), &Doc::text("b", b))
    }

    #[test]
    fn help_states_the_core_thresholds() {
        use neardup_core::{DEFAULT_JACCARD, DEFAULT_K};
        assert!(EXAMPLES.contains(&format!("Hamming distance is at most {DEFAULT_K} ")));
        assert!(EXAMPLES.contains(&format!("Jaccard is at\nleast {DEFAULT_JACCARD} ")));
        assert!(EXAMPLES.contains(&format!("exact Jaccard is at least {DEFAULT_JACCARD})")));
    }

    #[test]
    fn exact_duplicates_ignore_case_and_punctuation() {
        let r = report(Scheme::simhash_doc(), "Hello, World!", "hello world");
        assert_eq!(r.verdict, "exact duplicate");
        assert!(r.exact_duplicate);
        assert_eq!(r.hamming, Some(0));
    }

    #[test]
    fn empty_is_never_a_duplicate() {
        let r = report(Scheme::simhash_doc(), "2024", "2024");
        assert_eq!(r.verdict, "empty");
        assert!(!r.exact_duplicate);
        assert_eq!(r.jaccard, 0.0);
        let r = report(Scheme::minhash(), "", "");
        assert_eq!(r.verdict, "empty");
    }

    #[test]
    fn minhash_has_no_hamming_distance() {
        let r = report(
            Scheme::minhash(),
            "one two three four five six",
            "one two three four five six seven",
        );
        assert_eq!(r.hamming, None);
        assert!(r.minhash_jaccard_estimate.is_some());
        assert_eq!(r.a.measured.minhash.as_ref().unwrap().len(), 128);
        assert!(r.a.measured.simhash.is_none());
    }

    #[test]
    fn jaccard_uses_the_scheme_normalization() {
        let mut scheme = Scheme::simhash_doc();
        scheme = scheme.with_stop_words(neardup_core::features::StopWords::english());
        let r = report(scheme, "the cat sat on the mat", "a cat sat on a mat");
        assert_eq!(r.jaccard, 1.0);
        assert!(!r.exact_duplicate);
    }
}
