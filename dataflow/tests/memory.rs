//! Bounded memory changes nothing: a run whose external sorts keep a few KiB in memory and
//! write everything else to sorted runs on disk gives every output table row for row as the
//! run that sorts in memory, at 1 and 3 workers, in simhash and in MinHash threshold mode;
//! the summary says what spilled, and nothing of the spill is left behind. `--write-dedup`
//! too: its kept files and `removed.parquet` are the same, and `removed.parquet` is the
//! simple version's, recomputed here from the run's tables read into maps.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use neardup_core::mix::splitmix64;
use neardup_core::Scheme;
use neardup_dataflow::{run_job, JobConfig, JobInput, Parallelism, Progress};
use neardup_io::input::expand_inputs;
use neardup_io::record::FieldSpec;

/// Families of near-duplicate texts (each a chain of 6 texts of 200 words, 3 words changed
/// at each step), and exact copies: every fourth text three more times (with ids of their
/// own, and every tenth with its original's id).
fn corpus(dir: &Path) -> PathBuf {
    let mut state = 7u64;
    let word = |state: &mut u64| format!("w{}", splitmix64(state) % 20_000);
    let mut texts = Vec::new();
    for _ in 0..60 {
        let mut words: Vec<String> = (0..200).map(|_| word(&mut state)).collect();
        for _ in 0..6 {
            texts.push(words.join(" "));
            for _ in 0..3 {
                let at = (splitmix64(&mut state) % 200) as usize;
                words[at] = word(&mut state);
            }
        }
    }
    let copies: Vec<String> = texts.iter().step_by(4).cloned().collect();
    for _ in 0..3 {
        texts.extend(copies.iter().cloned());
    }
    let path = dir.join("corpus.jsonl");
    let lines: Vec<String> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let id = if i >= 360 && i % 10 == 0 { i % 360 } else { i };
            serde_json::json!({ "id": id, "text": t }).to_string()
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// `removed.parquet`'s rows: (doc, id, kept doc, kept id, Hamming distance, Jaccard).
type Removed = (u64, Option<String>, u64, Option<String>, u8, Option<f32>);

fn removed_rows(dedup: &Path) -> Vec<Removed> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Float32Type, UInt64Type, UInt8Type};
    let file = std::fs::File::open(dedup.join("removed.parquet")).unwrap();
    let reader =
        parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(file, 1024).unwrap();
    let mut rows = Vec::new();
    for b in reader {
        let b = b.unwrap();
        let u64s = |n: &str| {
            b.column_by_name(n)
                .unwrap()
                .as_primitive::<UInt64Type>()
                .clone()
        };
        let text = |n: &str| b.column_by_name(n).unwrap().as_string::<i32>().clone();
        let (docs, kept) = (u64s("doc_id"), u64s("kept_doc_id"));
        let (ids, kept_ids) = (text("id"), text("kept_id"));
        let hamming = b
            .column_by_name("hamming")
            .unwrap()
            .as_primitive::<UInt8Type>()
            .clone();
        let jaccard = b
            .column_by_name("jaccard")
            .unwrap()
            .as_primitive::<Float32Type>()
            .clone();
        let opt = |c: &arrow::array::StringArray, i| c.is_valid(i).then(|| c.value(i).to_string());
        for i in 0..b.num_rows() {
            rows.push((
                docs.value(i),
                opt(&ids, i),
                kept.value(i),
                opt(&kept_ids, i),
                hamming.value(i),
                jaccard.is_valid(i).then(|| jaccard.value(i)),
            ));
        }
    }
    rows
}

/// The simple version of `removed.parquet`: every table of the run read into maps, each
/// removed document looked up in them, in doc order.
fn removed_oracle(run: &Path) -> Vec<Removed> {
    let run = neardup_io::run_dir::read_run(run).unwrap();
    let mut rows: Vec<Removed> = run
        .clusters
        .iter()
        .filter(|(doc, cluster)| run.kept[cluster] != **doc)
        .map(|(&doc, cluster)| {
            let kept = run.kept[cluster];
            let jaccard = run
                .jaccard_to_kept
                .get(&doc)
                .or_else(|| run.jaccard.get(&(doc.min(kept), doc.max(kept))))
                .copied();
            (
                doc,
                run.ids[&doc].clone(),
                kept,
                run.ids[&kept].clone(),
                (run.simhashes[&doc] ^ run.simhashes[&kept]).count_ones() as u8,
                jaccard,
            )
        })
        .collect();
    rows.sort_by_key(|r| r.0);
    rows
}

fn config(
    corpus: &Path,
    out: &Path,
    (minhash, components): (bool, bool),
    workers: usize,
) -> JobConfig {
    let files = expand_inputs(&[corpus.display().to_string()], false).unwrap();
    let fields = FieldSpec {
        id_field: Some("id".into()),
        ..Default::default()
    };
    let mut builder = JobConfig::builder(JobInput::Documents { files, fields }, out.to_path_buf())
        .parallelism(Parallelism::local(workers));
    if minhash {
        builder = builder.scheme(Scheme::minhash()).threshold(Some(0.8));
    }
    if components {
        builder = builder.cluster(neardup_dataflow::config::ClusterMode::Components);
    }
    builder
        .write_dedup(Some(out.with_extension("dedup")))
        .build()
        .unwrap()
}

const TABLES: [&str; 3] = ["fingerprints", "pairs", "clusters"];

#[test]
fn spilled_sorts_give_the_outputs_of_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    // Connected components in MinHash mode: removed.parquet's similarity from pairs/.
    for (minhash, components) in [(false, false), (true, false), (true, true)] {
        let mode = (minhash, components);
        let memory = tmp.path().join(format!("memory-{minhash}-{components}"));
        let summary = run_job(config(&corpus, &memory, mode, 1), Arc::default())
            .unwrap()
            .summary;
        let removed = removed_rows(&memory.with_extension("dedup"));
        assert_eq!(removed, removed_oracle(&memory), "minhash {minhash}");
        assert!(removed.len() as u64 == summary.counts.documents_to_remove && !removed.is_empty());
        assert!(removed.iter().any(|r| r.1.is_some()), "ids are read back");
        let exact = &summary.memory.as_ref().unwrap().sorts["exact"];
        assert_eq!(exact.runs, 0, "no limit: sorted in memory");
        assert!(summary.counts.exact_duplicates > 0 && summary.counts.near_pairs > 0);
        for workers in [1, 3] {
            let out = tmp
                .path()
                .join(format!("spilled-{minhash}-{components}-{workers}"));
            let mut config = config(&corpus, &out, mode, workers);
            // A few documents per run (more runs than one merge reads: some merged early);
            // MinHash verification from the inputs read again.
            config.sort_memory = Some(1 << 10);
            config.verify_from = neardup_dataflow::config::VerifyFrom::Inputs;
            let spilled = run_job(config, Arc::new(Progress::default()))
                .unwrap()
                .summary;
            let sorts = &spilled.memory.as_ref().unwrap().sorts;
            for stage in ["exact", "clusters", "ids", "pairs"] {
                let sort = &sorts[stage];
                assert!(sort.runs > 0 && sort.spilled_bytes > 0, "{stage}: {sort:?}");
            }
            assert_eq!(sorts["exact"].records, summary.counts.documents);
            // Past the union-find's share, the clusters' components were found by sorting.
            let stars = &sorts["component stars (large)"];
            assert!(stars.records > 0 && stars.runs > 0, "{stars:?}");
            if minhash && !components {
                // Unlinked pairs verified for the stars, labelled from the sorted components
                // read a second time.
                let verified = &sorts["component verified"];
                assert!(verified.records > 0, "{verified:?}");
            }
            if minhash {
                // The sets of the documents in some link, made again, and the candidates.
                let sets = &sorts["verify sets"];
                assert!(sets.runs > 0 && sets.records > 0, "{sets:?}");
                assert!(sets.records < summary.counts.documents, "{sets:?}");
                assert!(sorts["signatures"].runs > 0, "{:?}", sorts["signatures"]);
                // The search's candidates, and the unlinked pairs the stars ask about.
                assert!(sorts["verify candidates"].records >= summary.counts.candidates);
            } else {
                assert!(
                    !sorts.contains_key("verify sets"),
                    "simhash verifies nothing"
                );
            }
            // Every kind of cluster: the edges sorted twice (three times where MinHash's
            // unlinked pairs are probed for the stars), labelled by component; the verified
            // unlinked pairs join them.
            let edges = &sorts["component edges"];
            assert!(edges.runs > 0 && edges.records > 0, "{edges:?}");
            // The edges' two documents each, and the edges again once joined.
            let documents = &sorts["component documents"];
            assert_eq!(documents.records, 2 * edges.records);
            assert_eq!(sorts["component labels"].records, edges.records);
            assert!(documents.runs > 0 && sorts["component labels"].runs > 0);
            let by_component = &sorts["by component"];
            assert!(
                by_component.runs > 0 && by_component.records >= edges.records,
                "{by_component:?}"
            );
            match sorts.get("component probes") {
                Some(probes) => {
                    assert!(minhash && !components, "only stars probe");
                    assert_eq!(probes.records, edges.records);
                }
                None => assert!(
                    !minhash || components,
                    "MinHash verified stars probe the unlinked pairs"
                ),
            }
            // Every document's number, and the assignment of each clustered one.
            assert_eq!(
                sorts["clusters"].records,
                summary.counts.documents + summary.counts.clustered_documents
            );
            assert!(summary.counts.duplicate_ids > 0);
            assert_eq!(spilled.counts.duplicate_ids, summary.counts.duplicate_ids);
            for table in TABLES {
                assert_eq!(
                    common::table_rows(&out.join(table)),
                    common::table_rows(&memory.join(table)),
                    "{table}, minhash {minhash}, {workers} workers"
                );
            }
            assert_eq!(spilled.counts.exact_groups, summary.counts.exact_groups);
            assert!(!out.join("_spill").exists(), "the spill is removed");
            // The deduplicated corpus, its removed documents sorted and joined on disk.
            let (dedup, dedup_memory) =
                (out.with_extension("dedup"), memory.with_extension("dedup"));
            assert_eq!(
                removed_rows(&dedup),
                removed,
                "minhash {minhash}, {workers} workers"
            );
            assert_eq!(
                std::fs::read(dedup.join("corpus.jsonl")).unwrap(),
                std::fs::read(dedup_memory.join("corpus.jsonl")).unwrap()
            );
        }
    }
}

/// A crawl of the families above as one WARC file: each text a capture on one of five
/// hosts, every two texts under one URL (captures of one page, paired by URL), the near
/// and exact copies spread over hosts (pairs that cross hosts), and a revisit record for
/// every seventh capture's payload digest (and one for a digest not in the crawl). Host
/// `h0` is mirrored whole under `/mirror/` on `m.example`, and 12 of its pages at their
/// own paths on `part.example` (a partial mirror).
fn crawl(dir: &Path) -> PathBuf {
    use neardup_io::web::testing::{http, warc_with};
    let lines = std::fs::read_to_string(corpus(dir)).unwrap();
    let profile = "http://netpreserve.org/warc/1.0/revisit/identical-payload-digest";
    let msgtype = "application/http; msgtype=response";
    let mut records = Vec::new();
    for (i, line) in lines.lines().enumerate() {
        // Two captures of each URL.
        let text: serde_json::Value = serde_json::from_str(line).unwrap();
        let url = format!("http://h{}.example/p{}", i / 2 % 5, i / 2);
        let digest = format!("sha1:D{i}");
        let page = http(200, "text/plain", text["text"].as_str().unwrap().as_bytes());
        let digest_field = [("WARC-Payload-Digest", digest.as_str())];
        records.push(warc_with(
            "response",
            Some(&url),
            msgtype,
            &page,
            &digest_field,
        ));
        if i / 2 % 5 == 0 && i % 2 == 0 {
            let copies = [
                Some(format!("http://m.example/mirror/p{}", i / 2)),
                (i < 120).then(|| format!("http://part.example/p{}", i / 2)),
            ];
            for copy in copies.into_iter().flatten() {
                records.push(warc_with("response", Some(&copy), msgtype, &page, &[]));
            }
        }
        if i % 7 == 0 {
            let fields = [
                ("WARC-Payload-Digest", digest.as_str()),
                ("WARC-Profile", profile),
            ];
            records.push(warc_with("revisit", Some(&url), msgtype, b"", &fields));
        }
    }
    let fields = [
        ("WARC-Payload-Digest", "sha1:absent"),
        ("WARC-Profile", profile),
    ];
    records.push(warc_with(
        "revisit",
        Some("http://z.example/"),
        msgtype,
        b"",
        &fields,
    ));
    let path = dir.join("crawl.warc");
    std::fs::write(&path, records.concat()).unwrap();
    path
}

#[test]
fn the_web_stages_spilled_give_the_outputs_of_memory() {
    web_stages_spilled(None);
}

/// `--keep canonical-host`'s two sorts (by document, then by cluster) spilled give the
/// kept documents of memory too.
#[test]
fn keep_canonical_host_spilled_gives_the_outputs_of_memory() {
    web_stages_spilled(Some("canonical-host"));
}

fn web_stages_spilled(keep: Option<&str>) {
    let tmp = tempfile::tempdir().unwrap();
    let crawl = crawl(tmp.path());
    let config = |out: &Path, workers: usize| {
        let files = expand_inputs(&[crawl.display().to_string()], false).unwrap();
        let input = JobInput::Documents {
            files,
            fields: FieldSpec::default(),
        };
        JobConfig::builder(input, out.to_path_buf())
            .parallelism(Parallelism::local(workers))
            .keep_or_default(keep)
            .build()
            .unwrap()
    };
    let memory = tmp.path().join("memory");
    let summary = run_job(config(&memory, 1), Arc::default()).unwrap().summary;
    let counts = &summary.counts;
    let captures = std::fs::read_to_string(tmp.path().join("corpus.jsonl"))
        .unwrap()
        .lines()
        .count() as u64;
    assert_eq!(counts.url_pairs, captures / 2, "two captures of each URL");
    assert_eq!(counts.revisits_linked, captures.div_ceil(7));
    assert!(counts.cross_host_pairs > 0 && counts.exact_duplicates > 0);
    // m.example mirrors h0; part.example is a partial mirror of both.
    assert_eq!((counts.mirrors, counts.partial_mirrors), (1, 2));
    for workers in [1, 3] {
        let out = tmp.path().join(format!("spilled-{workers}"));
        let mut config = config(&out, workers);
        config.sort_memory = Some(1 << 10);
        let spilled = run_job(config, Arc::new(Progress::default()))
            .unwrap()
            .summary;
        let sorts = &spilled.memory.as_ref().unwrap().sorts;
        // The host rows spill where each clustered page's document comes to its host's
        // worker; the three mirror candidates fit in 1 KiB.
        let canonical = [
            "canonical hosts by document",
            "canonical hosts by cluster",
            "mirror host rows",
        ];
        assert_eq!(
            sorts["mirror candidates"].records,
            3 * 3,
            "a candidate, two answers"
        );
        let stages = [
            "urls",
            "revisits",
            "hosts at a",
            "hosts at b",
            "mirror pages",
            "mirror clusters",
            "mirror links",
            "mirror hosts",
        ];
        for stage in stages
            .iter()
            .chain(keep.map_or(&[][..], |_| &canonical[..]))
        {
            let sort = &sorts[*stage];
            assert!(sort.runs > 0 && sort.spilled_bytes > 0, "{stage}: {sort:?}");
        }
        assert_eq!(keep.is_some(), sorts.contains_key(canonical[0]));
        let c = &spilled.counts;
        assert_eq!(
            (c.url_pairs, c.cross_host_pairs, c.revisits_linked),
            (
                counts.url_pairs,
                counts.cross_host_pairs,
                counts.revisits_linked
            ),
            "{workers} workers"
        );
        assert_eq!((c.mirrors, c.partial_mirrors), (1, 2));
        for table in TABLES.iter().chain(&["mirrors", "hosts"]) {
            assert_eq!(
                common::table_rows(&out.join(table)),
                common::table_rows(&memory.join(table)),
                "{table}, {workers} workers"
            );
        }
        assert!(!out.join("_spill").exists(), "the spill is removed");
    }
}

/// `--index` within the limit: the generation a run writes with sorts of 1 KiB (the run's
/// documents, its resume parts' extras and every table spilled into runs) is the one it
/// writes in memory, file for file (the manifest's sizes and checksums), at 1 and 3
/// workers, in simhash mode and in MinHash threshold mode with the shingle sets; the summary
/// lists the step's sorts, and nothing of their spill is left.
#[test]
fn an_index_written_spilled_is_the_index_written_in_memory() {
    use neardup_dataflow::finish::IndexStep;
    use neardup_dataflow::{run_job_with, Finish};
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    for minhash in [false, true] {
        let mut written = Vec::new();
        for (workers, sort_memory) in [(1, None), (1, Some(1 << 10)), (3, Some(1 << 10))] {
            let name = format!("index-{minhash}-{workers}-{}", sort_memory.is_some());
            let out = tmp.path().join(&name);
            let index = tmp.path().join(format!("{name}.index"));
            let mut config = config(&corpus, &out, (minhash, false), workers);
            config.write_dedup = None;
            config.sort_memory = sort_memory;
            // What the binary does for --index --index-shingles: the workers keep the sketches.
            config.index_sketches =
                neardup_dataflow::finish::index::sketches_to_keep(&config, Some(minhash), None)
                    .unwrap();
            let step = IndexStep::create(&index, &config, minhash)
                .unwrap()
                .unwrap();
            let outcome = run_job_with(config, Finish::index(step), Arc::default()).unwrap();
            let documents = outcome.summary.counts.documents;
            assert_eq!(outcome.index.unwrap().documents, documents);
            let sorts = &outcome.summary.memory.as_ref().unwrap().sorts;
            let (read, tables) = (&sorts["index read"], &sorts["index tables"]);
            // The documents and their keys (and sketches), and 16 tables or the bands.
            assert!(read.records > 2 * documents, "{read:?}");
            assert!(tables.records >= 8 * (documents - 1), "{tables:?}");
            match sort_memory {
                Some(_) => assert!(read.runs > 0 && tables.runs > 0, "{read:?} {tables:?}"),
                None => assert_eq!(read.runs + tables.runs, 0, "no limit: in memory"),
            }
            assert!(!out.join("_spill").exists(), "the spill is removed");
            let manifest: serde_json::Value =
                serde_json::from_slice(&std::fs::read(index.join("manifest.json")).unwrap())
                    .unwrap();
            let files = manifest["generations"][0]["checksums"].clone();
            assert!(files.as_array().unwrap().len() > 10, "{files}");
            let left: Vec<_> = std::fs::read_dir(index.join("gen-00000"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with('.') || n.ends_with(".rows"))
                .collect();
            assert!(left.is_empty(), "temporary columns left: {left:?}");
            written.push(files);
        }
        assert_eq!(
            written[0], written[1],
            "minhash {minhash}: spilled at 1 worker"
        );
        assert_eq!(
            written[0], written[2],
            "minhash {minhash}: spilled at 3 workers"
        );
    }
}

/// A batch for `--against` an index of [`corpus`]: every third of its texts with one word
/// changed, every seventh as it is, and new texts with near duplicates of their own.
fn batch_corpus(dir: &Path, indexed: &Path) -> PathBuf {
    let mut state = 11u64;
    let word = |state: &mut u64| format!("v{}", splitmix64(state) % 20_000);
    let mut texts = Vec::new();
    for (i, line) in std::fs::read_to_string(indexed)
        .unwrap()
        .lines()
        .enumerate()
    {
        let text = serde_json::from_str::<serde_json::Value>(line).unwrap()["text"]
            .as_str()
            .unwrap()
            .to_string();
        if i % 3 == 0 {
            let mut words: Vec<&str> = text.split(' ').collect();
            words[17] = "changed";
            texts.push(words.join(" "));
        } else if i % 7 == 0 {
            texts.push(text);
        }
    }
    for _ in 0..40 {
        let mut words: Vec<String> = (0..200).map(|_| word(&mut state)).collect();
        for _ in 0..3 {
            texts.push(words.join(" "));
            let at = (splitmix64(&mut state) % 200) as usize;
            words[at] = word(&mut state);
        }
    }
    let path = dir.join("batch.jsonl");
    let lines: Vec<String> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| serde_json::json!({ "id": format!("b{i}"), "text": t }).to_string())
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// The columns of every row group of the Parquet file at `path`.
fn parquet_columns(path: &Path) -> Vec<Vec<arrow::array::ArrayRef>> {
    let file = std::fs::File::open(path).unwrap();
    let reader =
        parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(file, 1024).unwrap();
    reader.map(|b| b.unwrap().columns().to_vec()).collect()
}

/// `--against --update-index` with its sorts spilled (the batch read back, and kept for the
/// new generation, in runs of a few documents; simhash documents probing the index a few at
/// a time) finds what it finds in memory: the same `against-*` rows and the same new
/// generation, file for file, at 1 and 3 workers, in simhash mode and in MinHash threshold
/// mode with the shingle sets, under stars and connected components.
#[test]
fn against_spilled_is_against_in_memory() {
    use neardup_dataflow::finish::{against, AgainstStep, IndexStep};
    use neardup_dataflow::{run_job_with, Finish};
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    let batch = batch_corpus(tmp.path(), &corpus);
    for minhash in [false, true] {
        let base = tmp.path().join(format!("base-{minhash}.index"));
        let mut indexed = config(
            &corpus,
            &tmp.path().join(format!("base-{minhash}")),
            (minhash, false),
            1,
        );
        indexed.write_dedup = None;
        indexed.index_sketches =
            neardup_dataflow::finish::index::sketches_to_keep(&indexed, Some(minhash), None)
                .unwrap();
        let step = IndexStep::create(&base, &indexed, minhash)
            .unwrap()
            .unwrap();
        run_job_with(indexed, Finish::index(step), Arc::default()).unwrap();
        for components in [false, true] {
            let mut found = Vec::new();
            for (workers, sort_memory) in [(1, None), (1, Some(1 << 10)), (3, Some(1 << 10))] {
                let name = format!(
                    "against-{minhash}-{components}-{workers}-{}",
                    sort_memory.is_some()
                );
                let index = tmp.path().join(format!("{name}.index"));
                copy_dir(&base, &index);
                let out = tmp.path().join(&name);
                let mut config = config(&batch, &out, (minhash, components), workers);
                config.write_dedup = None;
                config.sort_memory = sort_memory;
                config.index_sketches =
                    neardup_dataflow::finish::index::sketches_to_keep(&config, None, Some(&index))
                        .unwrap();
                let (manifest, _) = against::check(&index, &config, true).unwrap();
                let step = AgainstStep::new(&index, manifest, &config, true, false).unwrap();
                let outcome = run_job_with(config, Finish::against(step), Arc::default()).unwrap();
                let done = outcome.against.unwrap();
                assert!(done.added);
                let f = &done.found;
                assert_eq!(f.new_documents, outcome.summary.counts.documents);
                assert!(
                    f.indexed_pairs > 0 && f.batch_pairs > 0 && f.removed > 0,
                    "{f:?}"
                );
                let sorts = &outcome.summary.memory.as_ref().unwrap().sorts;
                let batch_sort = &sorts["against batch"];
                assert_eq!(batch_sort.records, f.new_documents);
                match sort_memory {
                    Some(_) => assert!(batch_sort.runs > 0 && sorts["against read"].runs > 0),
                    None => assert_eq!(batch_sort.runs + sorts["against read"].runs, 0),
                }
                // MinHash stars verify the batch's unlinked pairs from sketches on disk.
                let sketches = sorts.get("against sketches");
                assert_eq!(sketches.is_some(), minhash && !components, "{sorts:?}");
                if let (Some(sketches), Some(_)) = (sketches, sort_memory) {
                    assert!(sketches.records > 0 && sketches.runs > 0, "{sketches:?}");
                }
                // The pairs and the clusters' rows go to sorts as they are found.
                let (pairs, rows) = (&sorts["against pairs"], &sorts["against clusters"]);
                assert_eq!(pairs.records, f.batch_pairs + f.indexed_pairs);
                assert!(rows.records > f.removed, "{rows:?}");
                match sort_memory {
                    Some(_) => assert!(pairs.runs > 0 && rows.runs > 0, "{pairs:?} {rows:?}"),
                    None => assert_eq!(pairs.runs + rows.runs, 0),
                }
                // So do the documents in a pair, the batch's own pairs and the new
                // documents' decisions; under stars the links are grouped by component
                // through sorts, and their components found on disk past the union-find's
                // share of the step's memory.
                let held = &sorts["against held"];
                assert_eq!(sorts["against batch pairs"].records, f.batch_pairs);
                assert!(held.records >= f.removed, "{held:?}");
                assert!(sorts["against decisions"].records > f.removed);
                let links = sorts.get("against links");
                assert_eq!(links.is_some(), !components, "{sorts:?}");
                if let Some(links) = links {
                    assert!(links.records > 0 && links.records <= f.batch_pairs);
                    let on_disk = sorts.get("against components (large)");
                    assert_eq!(on_disk.is_some(), sort_memory.is_some(), "{sorts:?}");
                }
                // Under components every pair is an edge of the graph on disk.
                let edges = sorts.get("against graph edges");
                assert_eq!(edges.is_some(), components, "{sorts:?}");
                if let Some(edges) = edges {
                    assert_eq!(edges.records, f.batch_pairs + f.indexed_pairs);
                    let on_disk = sorts.get("against graph components (large)");
                    assert_eq!(on_disk.is_some(), sort_memory.is_some(), "{sorts:?}");
                }
                // The joined indexed clusters stay on disk, their members found by a scan
                // through a filter and a sort; the changes and merges go to sorts.
                let joined = &sorts["against joined"];
                assert!(
                    f.joined > 0 && joined.records >= f.joined,
                    "{f:?} {joined:?}"
                );
                let candidates = &sorts["against indexed candidates"];
                assert!(candidates.records >= f.joined, "{candidates:?}");
                let changes = &sorts["against changes"];
                assert_eq!(sorts["against merges"].records, f.merges);
                match sort_memory {
                    Some(_) => assert!(held.runs > 0 && links.is_none_or(|l| l.runs > 0)),
                    None => assert_eq!(held.runs + links.map_or(0, |l| l.runs), 0),
                }
                match sort_memory {
                    Some(_) => assert!(joined.runs > 0 && candidates.runs > 0, "{sorts:?}"),
                    None => assert_eq!(joined.runs + candidates.runs + changes.runs, 0),
                }
                assert!(!out.join("_spill").exists(), "the spill is removed");
                let manifest: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(index.join("manifest.json")).unwrap())
                        .unwrap();
                let generation = manifest["generations"][1]["checksums"].clone();
                assert!(generation.as_array().unwrap().len() > 5, "{generation}");
                let tables: Vec<_> = ["against-pairs", "against-clusters", "against-merges"]
                    .iter()
                    .map(|t| parquet_columns(&out.join(format!("{t}.parquet"))))
                    .collect();
                found.push((format!("{f:?}"), tables, generation));
            }
            let mode = format!("minhash {minhash}, components {components}");
            assert!(found[0] == found[1], "{mode}: spilled at 1 worker");
            assert!(found[0] == found[2], "{mode}: spilled at 3 workers");
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A run whose resume part a worker could not write (here removed) cannot make an index or
/// be compared with one: those steps read every document's digest and keep rank from the
/// resume parts, and refuse, naming the document, where one has none (they wrote the
/// documents without a rank or exact key before). The parts are those of a run whose
/// `--against` step failed (its index changed while it ran), which keeps them.
#[test]
fn an_index_needs_every_documents_resume_entry() {
    use neardup_dataflow::finish::index::batch_documents;
    use neardup_dataflow::finish::{against, AgainstStep, IndexStep};
    use neardup_dataflow::{run_job_with, Finish};
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    let index = tmp.path().join("base.index");
    let mut indexed = config(&corpus, &tmp.path().join("base"), (false, false), 1);
    indexed.write_dedup = None;
    let step = IndexStep::create(&index, &indexed, false).unwrap().unwrap();
    run_job_with(indexed, Finish::index(step), Arc::default()).unwrap();
    let batch = batch_corpus(tmp.path(), &corpus);
    let out = tmp.path().join("run");
    let mut config = config(&batch, &out, (false, false), 2);
    config.write_dedup = None;
    let job = neardup_dataflow::config::resume::record_id(&config);
    let (manifest, _) = against::check(&index, &config, false).unwrap();
    let step = AgainstStep::new(&index, manifest, &config, false, false).unwrap();
    // Another writer changes the index while the batch runs: the step refuses.
    let path = index.join("manifest.json");
    let mut edited: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edited["neardup_version"] = "another".into();
    std::fs::write(&path, serde_json::to_vec(&edited).unwrap()).unwrap();
    let failed = run_job_with(config, Finish::against(step), Arc::default());
    assert!(failed.is_err_and(|e| e.to_string().contains("changed while the batch ran")));
    let memory = neardup_io::index::run::SortMemory::unbounded(&tmp.path().join("spill"));
    let read = |out: &Path| -> Result<usize, String> {
        let docs = batch_documents(out, None, job, &memory).map_err(|e| e.to_string())?;
        let docs = docs.collect().map_err(|e| e.to_string())?.docs;
        assert!(
            docs.iter().all(|d| d.rank.is_some()),
            "every document ranked"
        );
        Ok(docs.len())
    };
    let lines = std::fs::read_to_string(&batch).unwrap().lines().count();
    assert_eq!(read(&out), Ok(lines));
    let parts: Vec<_> = std::fs::read_dir(out.join("_resume"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("part-")
        })
        .collect();
    assert_eq!(parts.len(), 2, "{parts:?}");
    std::fs::remove_file(&parts[1]).unwrap();
    let refused = read(&out).unwrap_err();
    assert!(
        refused.contains("the resume parts hold no entry of document")
            && refused.contains("a worker could not write its part"),
        "{refused}"
    );
}
