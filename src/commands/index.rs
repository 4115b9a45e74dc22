//! `neardup index`: maintenance of a saved index (`compact`, `verify`, `info`) and its benchmark
//! (`bench`). What `run --index` and `run --against` write to an index is the end of a run,
//! in the library (`neardup_dataflow::finish`; docs/index.md).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use neardup_core::testing::SeededRng;
use neardup_core::Scheme;
use neardup_io::index::{Index, IndexWriter, Manifest, Verify};

/// Flags of `neardup index`.
#[derive(Args, Debug)]
pub struct IndexArgs {
    #[command(subcommand)]
    pub command: IndexCommand,
}

#[derive(Subcommand, Debug)]
pub enum IndexCommand {
    /// Merge every generation into one, so that a query probes each table once (doc numbers
    /// and clusters stay as they are)
    Compact {
        /// The index directory
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Check every byte of every file against the manifest's checksums, and what the files
    /// hold (table rows, id ends), whatever `neardup serve`'s record of checked files says;
    /// changes nothing
    Verify {
        /// The index directory
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Print the manifest: scheme, k, tables, generations, document counts
    Info {
        /// The index directory
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Measure the index (a benchmark, not a check): open time, single-query latency
    /// percentiles, a text query's latency, one-thread batch throughput; JSON on stdout
    Bench {
        /// The index directory
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Queries per measurement
        #[arg(long, default_value_t = 100_000)]
        queries: usize,
    },
}

pub fn run(args: &IndexArgs) -> Result<()> {
    match &args.command {
        IndexCommand::Compact { dir } => {
            let mut writer = IndexWriter::open(dir)?;
            let before = writer.manifest().generations.len();
            writer.compact()?;
            eprintln!(
                "neardup: {} generations compacted into one ({} documents)",
                before,
                writer.manifest().documents
            );
            Ok(())
        }
        IndexCommand::Bench { dir, queries } => bench(dir, *queries),
        IndexCommand::Verify { dir } => {
            let start = Instant::now();
            let index = Index::open(dir, Verify::Checksums)?;
            let manifest = index.manifest();
            let files: usize = manifest.generations.iter().map(|g| g.checksums.len()).sum();
            let bytes: u64 = manifest
                .generations
                .iter()
                .flat_map(|g| &g.checksums)
                .map(|s| s.bytes)
                .sum();
            eprintln!(
                "neardup: {}: sound: {} generations, {files} files, {bytes} bytes, {} documents checked in {:.1} s",
                dir.display(),
                manifest.generations.len(),
                manifest.documents,
                start.elapsed().as_secs_f64()
            );
            Ok(())
        }
        IndexCommand::Info { dir } => {
            let manifest = Manifest::load(dir)?;
            super::write_stdout(&(serde_json::to_string_pretty(&manifest)? + "\n"))?;
            Ok(())
        }
    }
}

/// Queries per `Index::query_batch` call in `index bench`: the batch `neardup query` makes
/// of a large input (per thread), a larger one, and all the queries at once (as `run
/// --against` does with its batch). A batch walks each table once, so the larger it is, the
/// closer its probes lie in the table and the fewer cache misses each costs.
const BENCH_BATCHES: [usize; 3] = [4_096, 65_536, usize::MAX];

/// Words of a synthetic 5 KB query text (`index bench`).
const BENCH_TEXT_BYTES: usize = 5_000;

/// `neardup index bench`: the figures of docs/performance.md ("The saved index").
fn bench(dir: &Path, queries: usize) -> Result<()> {
    let start = Instant::now();
    let index = Index::open(dir, Verify::Sizes)?;
    let open_sizes = start.elapsed().as_secs_f64();
    let start = Instant::now();
    drop(Index::open(dir, Verify::Checksums)?);
    let open_checksums = start.elapsed().as_secs_f64();
    if index.minhash().is_some() {
        bail!(
            "{}: a MinHash index: neardup index bench measures simhash indexes",
            dir.display()
        );
    }
    if index.generations() == 0 || index.generation_documents(0) == 0 {
        bail!("{}: the index holds no documents to measure", dir.display());
    }
    let k = index.k();
    let mut rng = SeededRng::new(7);
    let documents = index.generation_documents(0).max(1);
    // Half the queries are indexed fingerprints with a bit or two flipped (they have
    // matches), half random ones (they mostly have none).
    let fps: Vec<u64> = (0..queries)
        .map(|i| {
            if i % 2 == 0 {
                let doc = index.doc(0, rng.below(documents as u64) as u32);
                doc.simhash ^ (1 << rng.below(64)) ^ (1 << rng.below(64))
            } else {
                rng.next_u64()
            }
        })
        .collect();
    let single = single_queries(&index, &fps, k);
    let batched = batched_queries(&index, &fps, k, single.batch_matches)?;
    let text_p50 = text_query_p50(&index, &mut rng, queries, k);
    let pct =
        |p: f64| single.latencies[((single.latencies.len() - 1) as f64 * p) as usize] as f64 / 1e3;
    let report = serde_json::json!({
        "documents": index.manifest().documents,
        "tables": index.manifest().tables,
        "k": k,
        "generations": index.generations(),
        "open_seconds": open_sizes,
        "open_with_checksums_seconds": open_checksums,
        "queries": queries,
        "matches": single.matches,
        "query_p50_us": pct(0.5),
        "query_p99_us": pct(0.99),
        "text_5kb_query_p50_us": text_p50,
        "batch_queries_per_second_one_thread": queries as f64 / single.batch_seconds,
        "query_batch_queries_per_second_one_thread_by_batch_size": batched,
    });
    super::write_stdout(&(serde_json::to_string_pretty(&report)? + "\n"))?;
    Ok(())
}

/// What `index bench` measures of single queries.
struct SingleQueries {
    /// Each query's latency in nanoseconds, sorted.
    latencies: Vec<u64>,
    matches: u64,
    /// The same queries again, one after the other without timing each: their seconds and
    /// matches.
    batch_seconds: f64,
    batch_matches: u64,
}

/// The fingerprints `fps` queried one by one within `k` bits: each timed, then all timed.
fn single_queries(index: &Index, fps: &[u64], k: u32) -> SingleQueries {
    let mut latencies = Vec::with_capacity(fps.len());
    let mut matches = 0u64;
    for &fp in fps {
        let t = Instant::now();
        index.query(fp, k, |_| matches += 1);
        latencies.push(t.elapsed().as_nanos() as u64);
    }
    latencies.sort_unstable();
    let start = Instant::now();
    let mut batch_matches = 0u64;
    for &fp in fps {
        index.query(fp, k, |_| batch_matches += 1);
    }
    SingleQueries {
        latencies,
        matches,
        batch_seconds: start.elapsed().as_secs_f64(),
        batch_matches,
    }
}

/// The same queries as batches (`Index::query_batch`: each table walked once per batch) of
/// each of [`BENCH_BATCHES`]: queries per second by batch size. Each must find the
/// `expected` matches of the single queries.
fn batched_queries(
    index: &Index,
    fps: &[u64],
    k: u32,
    expected: u64,
) -> Result<serde_json::Map<String, serde_json::Value>> {
    let queries = fps.len();
    let mut batched = serde_json::Map::new();
    for size in BENCH_BATCHES {
        let size = size.min(queries);
        let start = Instant::now();
        let mut batched_matches = 0u64;
        for chunk in fps.chunks(size) {
            index.query_batch(chunk, k, |_, _| batched_matches += 1);
        }
        let seconds = start.elapsed().as_secs_f64();
        if batched_matches != expected {
            bail!(
                "query_batch of {size} found {batched_matches} matches, single queries {expected}"
            );
        }
        batched.insert(size.to_string(), (queries as f64 / seconds).into());
    }
    Ok(batched)
}

/// The median latency in microseconds of a synthetic 5 KB text fingerprinted and queried
/// (at most 1000 of them, `queries` at most). An index of fingerprints without a scheme (a
/// search over bare tables) is timed with the default scheme: the figure is the cost of
/// fingerprinting plus the query.
fn text_query_p50(index: &Index, rng: &mut SeededRng, queries: usize, k: u32) -> Option<f64> {
    let scheme = neardup_io::index::answer::simhash_scheme(index.manifest())
        .unwrap_or_else(|_| Scheme::simhash_doc());
    Some(scheme).map(|scheme| {
        let mut fingerprinter = neardup_core::Fingerprinter::new(scheme);
        fingerprinter.set_sort_feature_set(false);
        let mut times: Vec<u64> = (0..1000.min(queries))
            .map(|_| {
                let mut text = String::with_capacity(BENCH_TEXT_BYTES + 16);
                while text.len() < BENCH_TEXT_BYTES {
                    text.push_str(&rng.word());
                    text.push(' ');
                }
                let t = Instant::now();
                let fp = fingerprinter.fingerprint(&text);
                index.query(fp.simhash, k, |_| {});
                t.elapsed().as_nanos() as u64
            })
            .collect();
        times.sort_unstable();
        times[times.len() / 2] as f64 / 1e3
    })
}
