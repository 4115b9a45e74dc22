//! Writing a deduplicated corpus: the kept records of each input file, unchanged and in the
//! file's own format (JSONL stays JSONL with the same compression, Parquet stays Parquet
//! with the same schema, a plain document is copied or left out).
//!
//! Each output file is written under a hidden temporary name and renamed when complete.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use arrow::array::{BooleanArray, RecordBatch};
use arrow::compute::filter_record_batch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression as ParquetCompression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::error::IoError;
use crate::input::{Compression, Format, InputFile};
use crate::jsonl::LineReader;

/// How many records of a file were written and left out.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Kept {
    pub kept: u64,
    pub removed: u64,
}

fn write_err(path: &Path) -> impl Fn(std::io::Error) -> IoError + '_ {
    move |source| IoError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// The output name of input `file` in `dir`: its file name (`stdin.jsonl` for stdin).
pub fn output_path(dir: &Path, file: &InputFile) -> PathBuf {
    let name = if file.is_stdin() {
        "stdin.jsonl".into()
    } else {
        file.path
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_default()
    };
    dir.join(name)
}

/// Copies the records of `file` whose 0-based record number is not in `removed` to `out`.
/// JSONL blank lines are not records and are left out.
pub fn write_kept(file: &InputFile, removed: &HashSet<u64>, out: &Path) -> Result<Kept, IoError> {
    let tmp = out.with_file_name(format!(
        ".{}.tmp",
        out.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    let result = match file.format {
        Format::Jsonl => write_jsonl(file, removed, &tmp),
        Format::Parquet => write_parquet(&file.path, removed, &tmp),
        Format::Plain => write_plain(file, removed, &tmp),
    };
    match result {
        Ok(kept) => {
            fs::rename(&tmp, out).map_err(write_err(out))?;
            Ok(kept)
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn write_jsonl(file: &InputFile, removed: &HashSet<u64>, tmp: &Path) -> Result<Kept, IoError> {
    let sink = BufWriter::new(File::create(tmp).map_err(write_err(tmp))?);
    let mut out: Box<dyn Write> = match file.compression {
        Compression::None => Box::new(sink),
        Compression::Gzip => Box::new(flate2::write::GzEncoder::new(
            sink,
            flate2::Compression::default(),
        )),
        Compression::Zstd => Box::new(
            zstd::Encoder::new(sink, 3)
                .map_err(write_err(tmp))?
                .auto_finish(),
        ),
    };
    let mut reader = LineReader::open(file)?;
    let mut line = Vec::new();
    let mut kept = Kept::default();
    while let Some(number) = reader.next_line(&mut line)? {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if removed.contains(&(number - 1)) {
            kept.removed += 1;
            continue;
        }
        out.write_all(&line)
            .and_then(|_| out.write_all(b"\n"))
            .map_err(write_err(tmp))?;
        kept.kept += 1;
    }
    out.flush().map_err(write_err(tmp))?;
    drop(out);
    Ok(kept)
}

fn write_parquet(path: &Path, removed: &HashSet<u64>, tmp: &Path) -> Result<Kept, IoError> {
    let open = File::open(path).map_err(|source| IoError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let parquet_err = |source| IoError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let reader = ParquetRecordBatchReaderBuilder::try_new(open).map_err(parquet_err)?;
    let schema = reader.schema().clone();
    let props = WriterProperties::builder()
        .set_compression(ParquetCompression::ZSTD(
            ZstdLevel::try_new(3).expect("valid level"),
        ))
        .build();
    let sink = File::create(tmp).map_err(write_err(tmp))?;
    let write_parquet_err = |source| IoError::ParquetWrite {
        path: tmp.to_path_buf(),
        source,
    };
    let mut writer = ArrowWriter::try_new(sink, schema, Some(props)).map_err(write_parquet_err)?;
    let mut row = 0u64;
    let mut kept = Kept::default();
    for batch in reader.build().map_err(parquet_err)? {
        let batch: RecordBatch = batch.map_err(|e| IoError::Corrupt {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let keep: BooleanArray = (0..batch.num_rows() as u64)
            .map(|i| Some(!removed.contains(&(row + i))))
            .collect();
        row += batch.num_rows() as u64;
        let filtered = filter_record_batch(&batch, &keep).map_err(|e| IoError::Corrupt {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        kept.kept += filtered.num_rows() as u64;
        kept.removed += (batch.num_rows() - filtered.num_rows()) as u64;
        writer.write(&filtered).map_err(write_parquet_err)?;
    }
    writer.close().map_err(write_parquet_err)?;
    Ok(kept)
}

fn write_plain(file: &InputFile, removed: &HashSet<u64>, tmp: &Path) -> Result<Kept, IoError> {
    if removed.contains(&0) {
        // An empty marker file keeps the rename protocol simple; the caller deletes it.
        File::create(tmp).map_err(write_err(tmp))?;
        return Ok(Kept {
            kept: 0,
            removed: 1,
        });
    }
    fs::copy(&file.path, tmp).map_err(write_err(tmp))?;
    Ok(Kept {
        kept: 1,
        removed: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::expand_inputs;

    #[test]
    fn jsonl_keeps_unremoved_lines_unchanged_in_the_same_compression() {
        let dir = tempfile::tempdir().unwrap();
        let lines = [
            "{\"id\":0,\"text\":\"a\"}",
            "{\"id\": 1, \"text\": \"b\"}",
            "",
            "{\"text\":\"d\\u00e9\"}",
        ];
        for (name, compress) in [("x.jsonl", false), ("x.jsonl.zst", true)] {
            let input = dir.path().join(name);
            let body = lines.join("\n") + "\n";
            if compress {
                fs::write(&input, zstd::encode_all(body.as_bytes(), 3).unwrap()).unwrap();
            } else {
                fs::write(&input, &body).unwrap();
            }
            let file = &expand_inputs(&[input.display().to_string()], false).unwrap()[0];
            let out_dir = dir.path().join(format!("out-{name}"));
            fs::create_dir_all(&out_dir).unwrap();
            let out = output_path(&out_dir, file);
            let kept = write_kept(file, &[1u64].into(), &out).unwrap();
            assert_eq!(
                kept,
                Kept {
                    kept: 2,
                    removed: 1
                }
            );
            let bytes = fs::read(&out).unwrap();
            let text = if compress {
                String::from_utf8(zstd::decode_all(&bytes[..]).unwrap()).unwrap()
            } else {
                String::from_utf8(bytes).unwrap()
            };
            assert_eq!(text, format!("{}\n{}\n", lines[0], lines[3]));
            assert_eq!(
                fs::read_dir(&out_dir).unwrap().count(),
                1,
                "no temporary file left"
            );
        }
    }

    #[test]
    fn parquet_keeps_the_schema_and_the_unremoved_rows() {
        use arrow::array::{Array, AsArray, Int64Array, StringArray};
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("docs.parquet");
        crate::test_util::write_parquet(
            &input,
            vec![
                (
                    "content",
                    Arc::new(StringArray::from(vec!["a", "b", "c", "d", "e"]))
                        as arrow::array::ArrayRef,
                ),
                ("score", Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5]))),
            ],
            2,
        );
        let file = &expand_inputs(&[input.display().to_string()], false).unwrap()[0];
        let out = dir.path().join("out.parquet");
        let kept = write_kept(file, &[1u64, 3].into(), &out).unwrap();
        assert_eq!(
            kept,
            Kept {
                kept: 3,
                removed: 2
            }
        );
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&out).unwrap()).unwrap();
        assert_eq!(reader.schema().fields().len(), 2);
        let mut content = Vec::new();
        for b in reader.build().unwrap() {
            let b = b.unwrap();
            let c = b.column(0).as_string::<i32>();
            content.extend((0..c.len()).map(|i| c.value(i).to_string()));
        }
        assert_eq!(content, ["a", "c", "e"]);
    }
}
