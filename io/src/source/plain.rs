//! Plain-text input: the whole file is one document.
//!
//! Used for corpora stored as one file per document (scraped pages, books,
//! source files). The file is decompressed like any other input and must be
//! UTF-8; a leading byte order mark is dropped since it is not content. The
//! document is record 0 of its file and its id is the file's path (`<stdin>`
//! for stdin). A file that is not UTF-8 is an error when the unit is opened
//! ([`IoError::InvalidUtf8`]): there is no other record to go on with.

use std::collections::HashSet;
use std::fs;
use std::io::{Read, Write};
use std::path::Path;

use super::Kept;
use super::{whole_file_of, Payload, ReadCost, RecordReader, SourceKind, SourceRecord, UnitSpec};
use crate::compress::Compression;
use crate::error::{shown, IoError};
use crate::file::InputFile;
use crate::record::{FieldSpec, Record};
use crate::stream::open_decompressed;

/// The plain-text source kind. Files are plain because the caller says so
/// (`--plain`), never by their name.
pub struct Plain;

impl SourceKind for Plain {
    fn name(&self) -> &'static str {
        "plain text"
    }

    fn claims(&self, _lower_name: &str) -> Option<Compression> {
        None
    }

    fn open(
        &self,
        file: &InputFile,
        unit: &UnitSpec,
        fields: &FieldSpec,
    ) -> Result<Box<dyn RecordReader>, IoError> {
        whole_file_of(self, file, unit)?;
        let mut record = Record {
            id: Some(shown(&file.path).to_string()),
            ..Record::default()
        };
        match fields.html {
            // HTML files are decoded from their own character set, then extracted.
            Some(mode) if mode != crate::html::HtmlMode::None => {
                let (bytes, cut) = read_bytes(file, fields.max_doc_bytes)?;
                let doc = crate::html::html_document(&bytes, None, mode);
                record.text = doc.text;
                record.truncated = cut;
                if doc.title.is_some() {
                    record.origin = Some(Box::new(crate::record::Origin {
                        title: doc.title,
                        charset: Some(doc.charset.to_owned()),
                        ..Default::default()
                    }));
                }
            }
            _ => {
                (record.text, record.truncated) = read_plain(file, fields.max_doc_bytes)?;
            }
        }
        Ok(Box::new(OneDocument(Some(record))))
    }

    fn read_cost(&self, file: &InputFile) -> Option<ReadCost> {
        Some(ReadCost::of_stream(file))
    }

    /// The file copied as it is, or nothing if its document was removed.
    fn write_kept(
        &self,
        file: &InputFile,
        removed: &HashSet<u64>,
        tmp: &Path,
    ) -> Result<Kept, IoError> {
        if removed.contains(&0) {
            return Ok(Kept {
                kept: 0,
                removed: 1,
            });
        }
        fs::copy(&file.path, tmp).map_err(|source| IoError::Write {
            path: tmp.to_path_buf(),
            cause: source,
        })?;
        Ok(Kept {
            kept: 1,
            removed: 0,
        })
    }

    /// The file's text (read as a run reads it, whole) with its ranges struck, in the
    /// file's compression; a file without ranges is copied as it is.
    fn write_struck(
        &self,
        file: &InputFile,
        removed: &HashSet<u64>,
        strikes: &super::Strikes,
        fields: &FieldSpec,
        tmp: &Path,
    ) -> Result<Kept, IoError> {
        super::refuse_strike_of_html(file, fields)?;
        let Some(ranges) = strikes.get(&0).filter(|_| !removed.contains(&0)) else {
            return self.write_kept(file, removed, tmp);
        };
        let (text, _) = read_plain(file, u64::MAX)?;
        let struck = super::strike_text(&text, ranges).map_err(|reason| IoError::Strike {
            path: file.path.clone(),
            record: "the document".into(),
            reason,
        })?;
        let write_err = |cause| IoError::Write {
            path: tmp.to_path_buf(),
            cause,
        };
        let mut out = super::create_compressed(tmp, file.compression)?;
        out.write_all(struck.as_bytes()).map_err(write_err)?;
        out.flush().map_err(write_err)?;
        Ok(Kept {
            kept: 1,
            removed: 0,
        })
    }

    fn keeps_empty_output(&self) -> bool {
        false
    }
}

/// The one record of a plain file.
struct OneDocument(Option<Record>);

impl RecordReader for OneDocument {
    fn next_into(&mut self, out: &mut SourceRecord) -> Result<bool, IoError> {
        match self.0.take() {
            Some(record) => {
                out.record = 0;
                out.payload = Payload::Fields(record);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// The first `max` bytes of `file` (maybe compressed, maybe stdin), and whether there were more.
pub fn read_bytes(file: &InputFile, max: u64) -> Result<(Vec<u8>, bool), IoError> {
    let mut bytes = Vec::new();
    open_decompressed(file)?
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| IoError::ReadWhole {
            path: file.path.clone(),
            compression: file.compression,
            cause: source,
        })?;
    let over = bytes.len() as u64 > max;
    bytes.truncate(max as usize);
    Ok((bytes, over))
}

/// Reads `file` (maybe compressed, maybe stdin) as one UTF-8 document, at most `max` bytes
/// of it (the rest is not even decompressed); `true` with it if the file was longer. A file
/// cut inside a character keeps the whole characters before the cut.
pub fn read_plain(file: &InputFile, max: u64) -> Result<(String, bool), IoError> {
    let (bytes, over) = read_bytes(file, max)?;
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    match std::str::from_utf8(body) {
        // Cut inside a character: keep the whole characters before the cut.
        Err(e) if over && e.error_len().is_none() => Ok((
            std::str::from_utf8(&body[..e.valid_up_to()])
                .expect("valid prefix")
                .to_owned(),
            true,
        )),
        Ok(text) => Ok((text.to_owned(), over)),
        Err(e) => Err(IoError::InvalidUtf8 {
            path: file.path.clone(),
            // Offsets count from the start of the (decompressed) file.
            offset: (e.valid_up_to() + bytes.len() - body.len()) as u64,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Format;

    fn plain(path: &Path, compression: Compression) -> InputFile {
        InputFile {
            path: path.to_path_buf(),
            format: Format::Plain,
            compression,
        }
    }

    #[test]
    fn reads_whole_files_and_drops_the_bom() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, "\u{feff}one\ntwo\r\n").unwrap();
        assert_eq!(
            read_plain(&plain(&path, Compression::None), u64::MAX)
                .unwrap()
                .0,
            "one\ntwo\r\n"
        );

        let zst = dir.path().join("a.txt.zst");
        std::fs::write(&zst, zstd::encode_all(&b"caf\xC3\xA9"[..], 1).unwrap()).unwrap();
        assert_eq!(
            read_plain(&plain(&zst, Compression::Zstd), u64::MAX)
                .unwrap()
                .0,
            "café"
        );
    }

    #[test]
    fn invalid_utf8_names_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.txt");
        std::fs::write(&path, b"\xEF\xBB\xBFabc\xC3(").unwrap();
        let err = read_plain(&plain(&path, Compression::None), u64::MAX).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}: invalid UTF-8 at byte offset 6", path.display())
        );
    }

    #[test]
    fn truncated_zstd_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.txt.zst");
        let data: Vec<u8> = (0..100_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let compressed = zstd::encode_all(&data[..], 3).unwrap();
        std::fs::write(&path, &compressed[..compressed.len() / 2]).unwrap();
        let err = read_plain(&plain(&path, Compression::Zstd), u64::MAX).unwrap_err();
        assert!(
            err.to_string().starts_with(&format!(
                "{}: zstd data is truncated or corrupt",
                path.display()
            )),
            "{err}"
        );
    }
}
