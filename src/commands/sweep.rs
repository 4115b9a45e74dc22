//! `neardup eval --sweep`: a small grid of methods run on a sample of a corpus and scored
//! against the truth, to choose a method and its parameters before the real run.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use neardup_core::features::FeatureKind;
use neardup_core::minhash::Banding;
use neardup_core::similarity::DEFAULT_JACCARD_SHINGLE;
use neardup_core::{Scheme, TableDesign};
use neardup_dataflow::config::Verify;
use neardup_dataflow::{run_job, JobConfig, JobInput, Progress};
use neardup_io::input::expand_inputs;
use neardup_io::record::FieldSpec;
use neardup_io::source::Format;
use neardup_io::stream::LineReader;

use crate::commands::write_stdout;
use crate::run_scores::score_run;
use neardup_dataflow::config::LSH_MARGIN;

/// What a sweep runs on and scores against (from `neardup eval --sweep`'s flags).
pub struct SweepOptions<'a> {
    /// The JSONL corpus to sample.
    pub corpus: &'a Path,
    /// Its first `sample` records (0: all).
    pub sample: usize,
    /// The truth file.
    pub truth: &'a Path,
    /// Truth pairs at or above this Jaccard similarity are the positives.
    pub min_jaccard: f64,
}

/// One point of the grid.
struct Method {
    label: String,
    config: Box<dyn Fn(&mut JobConfig)>,
}

fn grid(min_jaccard: f64) -> Vec<Method> {
    let mut methods = Vec::new();
    for (k, verify) in [(3u32, false), (3, true), (6, true), (9, true)] {
        methods.push(Method {
            label: format!(
                "simhash-doc -k {k}{}",
                if verify {
                    format!(" --verify jaccard --min-jaccard {min_jaccard}")
                } else {
                    String::new()
                }
            ),
            config: Box::new(move |c: &mut JobConfig| {
                c.design = TableDesign::for_k(k).expect("valid k");
                c.verify = verify.then_some(Verify {
                    shingle: DEFAULT_JACCARD_SHINGLE,
                    min_jaccard,
                    estimate: false,
                });
            }),
        });
    }
    for (shingle, threshold) in [(3usize, 0.7f64), (3, 0.8), (3, 0.9), (5, 0.8)] {
        methods.push(Method {
            label: format!("--method minhash --shingle {shingle} --threshold {threshold}"),
            config: Box::new(move |c: &mut JobConfig| {
                let mut scheme = Scheme::minhash();
                scheme.features.kind = FeatureKind::WordShingles(shingle);
                c.scheme = scheme;
                c.lsh = Some(Banding::optimal(
                    threshold - LSH_MARGIN,
                    neardup_core::minhash::DEFAULT_PERMUTATIONS,
                ));
                c.verify = Some(Verify {
                    shingle,
                    min_jaccard: threshold,
                    estimate: false,
                });
            }),
        });
    }
    methods
}

/// Copies the first `n` records of a JSONL corpus (0: all) to `out`.
fn sample(corpus: &Path, n: usize, out: &Path) -> Result<()> {
    let files = expand_inputs(&[corpus.display().to_string()], false)?;
    let mut writer = std::io::BufWriter::new(
        std::fs::File::create(out).with_context(|| format!("cannot write {}", out.display()))?,
    );
    let mut taken = 0;
    let mut line = Vec::new();
    'files: for file in &files {
        if file.format != Format::Jsonl {
            bail!(
                "--sweep samples JSONL corpora; {} is not JSONL",
                file.path.display()
            );
        }
        let mut reader = LineReader::open(file)?;
        while reader.next_line(&mut line)?.is_some() {
            if n > 0 && taken == n {
                break 'files;
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            writer.write_all(&line)?;
            writer.write_all(b"\n")?;
            taken += 1;
        }
    }
    writer.flush()?;
    Ok(())
}

pub fn sweep(options: &SweepOptions) -> Result<()> {
    let work = tempfile_dir()?;
    let result = sweep_in(options, &work);
    // The work directory goes whether the sweep succeeded or not.
    let _ = std::fs::remove_dir_all(&work);
    result
}

/// The sweep, its sample and runs under `work`.
fn sweep_in(options: &SweepOptions, work: &Path) -> Result<()> {
    let sample_path = work.join("sample.jsonl");
    sample(options.corpus, options.sample, &sample_path)?;
    let files = expand_inputs(&[sample_path.display().to_string()], false)?;
    let fields = FieldSpec {
        text_field: "text".into(),
        id_field: Some("id".into()),
        extra_field: None,
        ..Default::default()
    };
    write_stdout(concat!(
        "| method | pairs | precision | recall | F1 | cluster pairs: precision | recall | seconds |\n",
        "|---|---|---|---|---|---|---|---|\n"
    ))?;
    for (i, method) in grid(options.min_jaccard).into_iter().enumerate() {
        let out = work.join(format!("run-{i}"));
        let mut config = JobConfig::new(
            JobInput::Documents {
                files: files.clone(),
                fields: fields.clone(),
            },
            out.clone(),
        );
        (method.config)(&mut config);
        let start = Instant::now();
        run_job(config, Arc::new(Progress::default()))
            .with_context(|| format!("sweep run {}", method.label))?;
        let seconds = start.elapsed().as_secs_f64();
        let scores = score_run(&out, options.truth, options.min_jaccard, true)?;
        let (p, c) = (scores.pairs, scores.clusters);
        write_stdout(&format!(
            "| `{}` | {} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} | {seconds:.2} |\n",
            method.label, p.predicted, p.precision, p.recall, p.f1, c.precision, c.recall
        ))?;
    }
    Ok(())
}

/// A fresh directory under the system's temporary directory.
fn tempfile_dir() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("neardup-sweep-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}
