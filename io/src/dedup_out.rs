//! Writing a deduplicated corpus: the kept records of each input file, unchanged and in the
//! file's own format (JSONL stays JSONL with the same compression, Parquet stays Parquet
//! with the same schema, a plain document is copied or left out). Each format's source kind
//! writes its records ([`crate::source::SourceKind::write_kept`]); this module names the
//! output and makes it appear atomically.
//!
//! Each output file is written under a hidden temporary name and renamed when complete.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::IoError;
use crate::file::InputFile;
use crate::record::FieldSpec;
use crate::source::{Kept, Strikes};

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
/// JSONL blank lines are not records and are left out. An output its kind does not keep
/// empty (a removed plain document) is not written at all.
pub fn write_kept(file: &InputFile, removed: &HashSet<u64>, out: &Path) -> Result<Kept, IoError> {
    write_atomically(file, out, |tmp| {
        file.format.kind().write_kept(file, removed, tmp)
    })
}

/// [`write_kept`] with the byte ranges `strikes` (by record number) taken out of the kept
/// records' text, read back with `fields` (see [`crate::source::SourceKind::write_struck`]).
pub fn write_struck(
    file: &InputFile,
    removed: &HashSet<u64>,
    strikes: &Strikes,
    fields: &FieldSpec,
    out: &Path,
) -> Result<Kept, IoError> {
    write_atomically(file, out, |tmp| {
        file.format
            .kind()
            .write_struck(file, removed, strikes, fields, tmp)
    })
}

/// Runs `write` on a hidden temporary file next to `out` and renames it into place; an
/// output its kind does not keep empty is not written, and a failed one is removed.
fn write_atomically(
    file: &InputFile,
    out: &Path,
    write: impl FnOnce(&Path) -> Result<Kept, IoError>,
) -> Result<Kept, IoError> {
    let kind = file.format.kind();
    let tmp = out.with_file_name(format!(
        ".{}.tmp",
        out.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    match write(&tmp) {
        Ok(kept) if kept.kept == 0 && !kind.keeps_empty_output() => {
            let _ = fs::remove_file(&tmp);
            Ok(kept)
        }
        Ok(kept) => {
            fs::rename(&tmp, out).map_err(|source| IoError::Write {
                path: out.to_path_buf(),
                cause: source,
            })?;
            crate::store::publish::published(out)?;
            Ok(kept)
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
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
        let table = crate::parquet_in::TableFile::open(&out).unwrap();
        assert_eq!(table.schema().fields().len(), 2);
        let mut content = Vec::new();
        table
            .for_each_batch(|b| {
                let c = b.column(0).as_string::<i32>();
                content.extend((0..c.len()).map(|i| c.value(i).to_string()));
                Ok(())
            })
            .unwrap();
        assert_eq!(content, ["a", "c", "e"]);
    }

    #[test]
    fn a_removed_plain_document_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("page.html");
        fs::write(&input, "<p>hi</p>").unwrap();
        let file = &expand_inputs(&[input.display().to_string()], true).unwrap()[0];
        let out_dir = dir.path().join("out");
        fs::create_dir_all(&out_dir).unwrap();
        let out = output_path(&out_dir, file);
        let kept = write_kept(file, &[0u64].into(), &out).unwrap();
        assert_eq!(
            kept,
            Kept {
                kept: 0,
                removed: 1
            }
        );
        assert_eq!(fs::read_dir(&out_dir).unwrap().count(), 0);
        let kept = write_kept(file, &HashSet::new(), &out).unwrap();
        assert_eq!(kept.kept, 1);
        assert_eq!(fs::read_to_string(&out).unwrap(), "<p>hi</p>");
    }
}
