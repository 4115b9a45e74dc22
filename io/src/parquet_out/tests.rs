//! The output tables' tests: every row type written and read back, the part protocol, and
//! the metadata every part carries.

use std::fs::{self, File};
use std::path::Path;

use arrow::array::{Array, AsArray};
use arrow::record_batch::RecordBatch;
use parquet::basic::Encoding;
use parquet::file::metadata::KeyValue;
use serde_json::Value;

use super::*;
use arrow::datatypes::{Float32Type, Int64Type, UInt32Type, UInt64Type, UInt8Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// Reads a whole file back, checking the schema on the way.
fn read_back<R: OutputRow>(path: &Path) -> (RecordBatch, usize) {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
    let row_groups = builder.metadata().num_row_groups();
    assert_eq!(builder.schema().fields(), R::schema().fields());
    let batches: Vec<RecordBatch> = builder.build().unwrap().map(|b| b.unwrap()).collect();
    let batch = arrow::compute::concat_batches(&R::schema(), &batches).unwrap();
    (batch, row_groups)
}

fn tmp_files(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

fn fingerprint(i: u64) -> FingerprintRow {
    FingerprintRow {
        doc_id: i,
        id: (!i.is_multiple_of(3)).then(|| format!("id-{i}")),
        source: format!("in/{}.jsonl", i % 2),
        record: i + 1,
        simhash: i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        n_tokens: i as u32 * 2,
        bytes: i * 10,
        empty: i.is_multiple_of(5),
        url: i
            .is_multiple_of(2)
            .then(|| format!("http://h{}.example/{i}", i % 7)),
        host: i.is_multiple_of(2).then(|| format!("h{}.example", i % 7)),
        fetched_at: (!i.is_multiple_of(4)).then(|| i as i64 * 1_000_000 - 5),
        offset: i.is_multiple_of(2).then_some(i * 100),
        length: i.is_multiple_of(2).then_some(i + 3),
        url_normalized: i
            .is_multiple_of(2)
            .then(|| format!("http://h{}.example/{i}", i % 7)),
    }
}

#[test]
fn fingerprints_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fingerprints");
    let mut writer = PartWriter::<FingerprintRow>::create(&out, 3, &test_meta()).unwrap();
    assert_eq!(
        tmp_files(&out),
        [format!(".part-00003.parquet.{}.tmp", std::process::id())]
    );
    // More than one batch, so buffering and flushing are both exercised.
    let n = DEFAULT_BATCH_ROWS as u64 * 2 + 17;
    for i in 0..n {
        writer.push(fingerprint(i)).unwrap();
    }
    assert_eq!(writer.rows(), n);
    let path = writer.commit().unwrap();
    assert_eq!(path, out.join("part-00003.parquet"));
    assert!(tmp_files(&out).is_empty());

    let (batch, _) = read_back::<FingerprintRow>(&path);
    assert_eq!(batch.num_rows() as u64, n);
    let c = |i: usize| batch.column(i);
    for row in 0..batch.num_rows() {
        let ids = c(1).as_string::<i32>();
        let got = FingerprintRow {
            doc_id: c(0).as_primitive::<UInt64Type>().value(row),
            id: ids.is_valid(row).then(|| ids.value(row).to_owned()),
            source: c(2).as_string::<i32>().value(row).to_owned(),
            record: c(3).as_primitive::<UInt64Type>().value(row),
            simhash: c(4).as_primitive::<UInt64Type>().value(row),
            n_tokens: c(5).as_primitive::<UInt32Type>().value(row),
            bytes: c(6).as_primitive::<UInt64Type>().value(row),
            empty: c(7).as_boolean().value(row),
            url: c(8)
                .as_string::<i32>()
                .is_valid(row)
                .then(|| c(8).as_string::<i32>().value(row).to_owned()),
            host: c(9)
                .as_string::<i32>()
                .is_valid(row)
                .then(|| c(9).as_string::<i32>().value(row).to_owned()),
            fetched_at: c(10)
                .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                .is_valid(row)
                .then(|| {
                    c(10)
                        .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                        .value(row)
                }),
            offset: c(11)
                .as_primitive::<UInt64Type>()
                .is_valid(row)
                .then(|| c(11).as_primitive::<UInt64Type>().value(row)),
            length: c(12)
                .as_primitive::<UInt64Type>()
                .is_valid(row)
                .then(|| c(12).as_primitive::<UInt64Type>().value(row)),
            url_normalized: c(13)
                .as_string::<i32>()
                .is_valid(row)
                .then(|| c(13).as_string::<i32>().value(row).to_owned()),
        };
        assert_eq!(got, fingerprint(row as u64));
    }
}

#[test]
fn pairs_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let rows = vec![
        PairRow {
            doc_a: 1,
            doc_b: 2,
            hamming: 0,
            kind: PairKind::Exact,
            jaccard: None,
        },
        PairRow {
            doc_a: 3,
            doc_b: u64::MAX,
            hamming: 64,
            kind: PairKind::Near,
            jaccard: Some(0.75),
        },
    ];
    let mut writer = PartWriter::<PairRow>::create(dir.path(), 0, &test_meta()).unwrap();
    for row in rows.clone() {
        writer.push(row).unwrap();
    }
    let (batch, _) = read_back::<PairRow>(&writer.commit().unwrap());
    let c = |i: usize| batch.column(i);
    let got: Vec<PairRow> = (0..batch.num_rows())
        .map(|row| {
            let jaccard = c(4).as_primitive::<Float32Type>();
            PairRow {
                doc_a: c(0).as_primitive::<UInt64Type>().value(row),
                doc_b: c(1).as_primitive::<UInt64Type>().value(row),
                hamming: c(2).as_primitive::<UInt8Type>().value(row),
                kind: match c(3).as_string::<i32>().value(row) {
                    "exact" => PairKind::Exact,
                    "near" => PairKind::Near,
                    other => panic!("unexpected kind {other}"),
                },
                jaccard: jaccard.is_valid(row).then(|| jaccard.value(row)),
            }
        })
        .collect();
    assert_eq!(got, rows);
}

#[test]
fn clusters_round_trip_in_row_groups_of_a_million() {
    let dir = tempfile::tempdir().unwrap();
    let n = DEFAULT_ROW_GROUP_ROWS as u64 + 5;
    let row = |i: u64| ClusterRow {
        doc_id: i,
        cluster_id: -(i as i64) / 3,
        cluster_size: (i % 7) as u32,
        keep: i.is_multiple_of(3),
        kept_doc_id: i / 3 * 3,
        hamming: (!i.is_multiple_of(3)).then_some((i % 4) as u8),
        jaccard: i.is_multiple_of(5).then_some(0.8 + (i % 11) as f32 / 100.0),
    };
    let mut writer = PartWriter::<ClusterRow>::create(dir.path(), 12, &test_meta()).unwrap();
    for i in 0..n {
        writer.push(row(i)).unwrap();
    }
    let (batch, row_groups) = read_back::<ClusterRow>(&writer.commit().unwrap());
    assert_eq!(row_groups, 2);
    assert_eq!(batch.num_rows() as u64, n);
    let c = |i: usize| batch.column(i);
    for i in (0..n).step_by(9973).chain([n - 1]) {
        let r = i as usize;
        let got = ClusterRow {
            doc_id: c(0).as_primitive::<UInt64Type>().value(r),
            cluster_id: c(1).as_primitive::<Int64Type>().value(r),
            cluster_size: c(2).as_primitive::<UInt32Type>().value(r),
            keep: c(3).as_boolean().value(r),
            kept_doc_id: c(4).as_primitive::<UInt64Type>().value(r),
            hamming: Some(c(5).as_primitive::<UInt8Type>())
                .filter(|h| h.is_valid(r))
                .map(|h| h.value(r)),
            jaccard: Some(c(6).as_primitive::<Float32Type>())
                .filter(|j| j.is_valid(r))
                .map(|j| j.value(r)),
        };
        assert_eq!(got, row(i));
    }
}

#[test]
fn document_numbers_are_delta_encoded_and_fingerprints_plain() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let dir = tempfile::tempdir().unwrap();
    let mut writer = PartWriter::<PairRow>::create(dir.path(), 0, &test_meta()).unwrap();
    for i in 0..10_000u64 {
        writer
            .push(PairRow {
                doc_a: i,
                doc_b: i + 1 + i % 5,
                hamming: (i % 4) as u8,
                kind: PairKind::Near,
                jaccard: None,
            })
            .unwrap();
    }
    let path = writer.commit().unwrap();
    let reader = SerializedFileReader::new(fs::File::open(&path).unwrap()).unwrap();
    let group = reader.metadata().row_group(0);
    let encodings = |name: &str| {
        let column = (0..group.num_columns())
            .map(|i| group.column(i))
            .find(|c| c.column_path().string() == name)
            .expect("column");
        column.encodings().collect::<Vec<_>>()
    };
    for name in ["doc_a", "doc_b"] {
        let used = encodings(name);
        assert!(
            used.contains(&Encoding::DELTA_BINARY_PACKED),
            "{name}: {used:?}"
        );
        assert!(
            !used.contains(&Encoding::RLE_DICTIONARY),
            "{name}: {used:?}"
        );
    }
    // Small repeated values keep their dictionary.
    assert!(encodings("hamming").contains(&Encoding::RLE_DICTIONARY));

    let mut writer = PartWriter::<FingerprintRow>::create(dir.path(), 1, &test_meta()).unwrap();
    for i in 0..1000 {
        writer.push(fingerprint(i)).unwrap();
    }
    let path = writer.commit().unwrap();
    let reader = SerializedFileReader::new(fs::File::open(&path).unwrap()).unwrap();
    let group = reader.metadata().row_group(0);
    let simhash = (0..group.num_columns())
        .map(|i| group.column(i))
        .find(|c| c.column_path().string() == "simhash")
        .expect("simhash column");
    let used: Vec<_> = simhash.encodings().collect();
    assert!(!used.contains(&Encoding::RLE_DICTIONARY), "{used:?}");
}

#[test]
fn dropped_writer_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = PartWriter::<ClusterRow>::create(dir.path(), 1, &test_meta()).unwrap();
    writer.push(ClusterRow::alone(1)).unwrap();
    assert_eq!(tmp_files(dir.path()).len(), 1);
    drop(writer);
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn empty_parts_are_valid_files() {
    let dir = tempfile::tempdir().unwrap();
    let writer = PartWriter::<PairRow>::create(dir.path(), 0, &test_meta()).unwrap();
    let (batch, _) = read_back::<PairRow>(&writer.commit().unwrap());
    assert_eq!(batch.num_rows(), 0);
}

/// Key-value pairs as a file would hold them.
fn kv(pairs: &[(&str, &str)]) -> Vec<KeyValue> {
    pairs
        .iter()
        .map(|(k, v)| KeyValue::new(k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn every_part_says_what_it_is_and_what_made_it() {
    let dir = tempfile::tempdir().unwrap();
    let meta = test_meta();
    let fps = PartWriter::<FingerprintRow>::create(&dir.path().join("f"), 0, &meta).unwrap();
    let pairs = PartWriter::<PairRow>::create(&dir.path().join("p"), 0, &meta).unwrap();
    let clusters = PartWriter::<ClusterRow>::create(&dir.path().join("c"), 0, &meta).unwrap();
    let removed =
        PartWriter::<RemovedRow>::create_file(&dir.path().join("removed.parquet"), &meta).unwrap();
    let paths = [
        fps.commit().unwrap(),
        pairs.commit().unwrap(),
        clusters.commit().unwrap(),
        removed.commit().unwrap(),
    ];
    for (path, table) in paths
        .iter()
        .zip(["fingerprints", "pairs", "clusters", "removed"])
    {
        let tag = TableTag::of_file(path).unwrap().expect("tagged");
        assert_eq!(tag.table, table);
        assert_eq!(tag.version, env!("CARGO_PKG_VERSION"));
        assert_eq!(tag.meta, meta);
        // The raw keys, as any Parquet reader sees them.
        let file = File::open(path).unwrap();
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        let kvs = builder
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .unwrap();
        let value = |key: &str| {
            kvs.iter()
                .find(|kv| kv.key == key)
                .and_then(|kv| kv.value.clone())
                .unwrap_or_else(|| panic!("{key} missing"))
        };
        assert_eq!(value("neardup.format"), "1");
        assert_eq!(value("neardup.table"), table);
        assert_eq!(value("neardup.scheme"), "simhash-doc");
        let params: Value = serde_json::from_str(&value("neardup.params")).unwrap();
        assert_eq!(params["fingerprint"]["method"], "simhash");
        assert_eq!(params["search"]["k"], 3);
    }
}

#[test]
fn tables_of_other_tools_have_no_tag() {
    let path = Path::new("t.parquet");
    assert_eq!(TableTag::from_key_values(path, None).unwrap(), None);
    let other = kv(&[("ARROW:schema", "xyz"), ("writer", "spark")]);
    assert_eq!(TableTag::from_key_values(path, Some(&other)).unwrap(), None);
}

#[test]
fn another_format_and_damaged_metadata_are_refused() {
    let path = Path::new("fp/part-00000.parquet");
    let future = kv(&[
        ("neardup.format", "2"),
        ("neardup.version", "9.0.0"),
        ("neardup.table", "fingerprints"),
    ]);
    assert_eq!(
        TableTag::from_key_values(path, Some(&future))
            .unwrap_err()
            .to_string(),
        format!(
            "fp/part-00000.parquet: neardup table format 2 (written by neardup 9.0.0), but \
             this neardup ({}) reads format 1; read it with the neardup that wrote it, or rerun",
            env!("CARGO_PKG_VERSION")
        )
    );
    let no_scheme = kv(&[("neardup.format", "1"), ("neardup.table", "pairs")]);
    assert_eq!(
        TableTag::from_key_values(path, Some(&no_scheme))
            .unwrap_err()
            .to_string(),
        "fp/part-00000.parquet: damaged neardup table metadata: no neardup.scheme"
    );
    let bad_json = kv(&[
        ("neardup.format", "1"),
        ("neardup.table", "pairs"),
        ("neardup.scheme", "minhash"),
        ("neardup.params", "{k: 3"),
    ]);
    let message = TableTag::from_key_values(path, Some(&bad_json))
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with(
            "fp/part-00000.parquet: damaged neardup table metadata: neardup.params is not JSON: "
        ),
        "{message}"
    );
}

#[test]
fn tables_of_other_origins_are_told_apart() {
    let tag = |scheme: &str, params: Value| TableTag {
        table: "fingerprints".into(),
        version: "0.1.0".into(),
        meta: TableMeta {
            scheme: scheme.into(),
            params,
        },
    };
    let (a, b) = (Path::new("a.parquet"), Path::new("b.parquet"));
    let doc = tag(
        "simhash-doc",
        serde_json::json!({"fingerprint": {"shingle": null}}),
    );
    let shingles = tag(
        "simhash-shingles",
        serde_json::json!({"fingerprint": {"shingle": 3}}),
    );
    assert_eq!(
        shingles
            .expect_same_origin(b, &doc, a, Some("fingerprint"))
            .unwrap_err()
            .to_string(),
        "b.parquet: scheme simhash-shingles, expected simhash-doc (as in a.parquet: tables \
         made by different schemes cannot be used together)"
    );
    let five = tag(
        "simhash-shingles",
        serde_json::json!({"fingerprint": {"shingle": 5}, "search": {"k": 6}}),
    );
    assert_eq!(
        five.expect_same_origin(b, &shingles, a, Some("fingerprint"))
            .unwrap_err()
            .to_string(),
        "b.parquet: made with other parameters than a.parquet: shingle (5 vs 3); tables \
         made differently cannot be used together"
    );
    // Only the part asked for is compared.
    let three = tag(
        "simhash-shingles",
        serde_json::json!({"fingerprint": {"shingle": 3}, "search": {"k": 6}}),
    );
    three
        .expect_same_origin(b, &shingles, a, Some("fingerprint"))
        .unwrap();
    assert!(three.expect_same_origin(b, &shingles, a, None).is_err());
    assert_eq!(
        doc.expect_table(a, "pairs").unwrap_err().to_string(),
        "a.parquet: a neardup fingerprints table, expected a pairs table"
    );
}
