//! Opening an input as a byte stream: the file or stdin, its compression undone, and read
//! line by line. Corpora are often shipped compressed and sometimes arrive truncated, so a
//! decompression failure is an error that names the file and the line reached.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;

use crate::compress::Compression;
use crate::error::IoError;
use crate::file::InputFile;
use crate::readahead::ReadAhead;

/// Size of the read buffer; large enough that syscalls are not the cost.
pub const READ_BUFFER_BYTES: usize = 256 * 1024;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Opens a file (or stdin) and undoes its compression.
pub fn open_decompressed(file: &InputFile) -> Result<Box<dyn Read + Send>, IoError> {
    let raw: Box<dyn Read + Send> = if file.is_stdin() {
        Box::new(std::io::stdin())
    } else if crate::store::is_remote(&file.path) {
        Box::new(crate::store::open_range(&file.path, 0, u64::MAX)?)
    } else {
        let f = File::open(&file.path).map_err(|source| IoError::Open {
            path: file.path.clone(),
            cause: source,
        })?;
        Box::new(f)
    };
    let open_err = |source| IoError::Open {
        path: file.path.clone(),
        cause: source,
    };
    let decoder: Box<dyn Read + Send> = match file.compression {
        Compression::None => return Ok(raw),
        // Multi-member: pigz and bgzip write several gzip members per file.
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(raw)),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(raw).map_err(open_err)?),
    };
    // Decompression runs ahead on a thread of its own, overlapping with what the reader does
    // with the bytes (crate::readahead).
    let name = file
        .path
        .file_name()
        .map_or_else(|| "stdin".into(), |n| n.to_string_lossy());
    Ok(Box::new(
        ReadAhead::spawn(decoder, &name).map_err(open_err)?,
    ))
}

/// Reads the lines of one (maybe compressed, maybe stdin) file.
///
/// Lines are numbered from 1 by default. A reader made by [`LineReader::open_bytes`] (a piece
/// of a large uncompressed file, or a whole file numbered the same way) numbers each line
/// 1 + the byte offset of its start in the file instead: what a reader of one piece can know
/// without reading the pieces before it.
pub struct LineReader {
    path: PathBuf,
    compression: Compression,
    reader: Box<dyn BufRead + Send>,
    line: u64,
    /// `Some(offset of the next line's start)` when lines are numbered by byte offset.
    offset: Option<u64>,
}

impl LineReader {
    /// Opens `file` for reading lines. The format field is not checked: any
    /// file can be read as lines.
    pub fn open(file: &InputFile) -> Result<LineReader, IoError> {
        let inner = open_decompressed(file)?;
        Ok(LineReader {
            path: file.path.clone(),
            compression: file.compression,
            reader: Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, inner)),
            line: 0,
            offset: None,
        })
    }

    /// Opens the lines starting in bytes `start..end` of an uncompressed file (`start` a line
    /// start), numbered by byte offset (see the type's docs). `end` may be past the end of
    /// the file.
    pub fn open_bytes(file: &InputFile, start: u64, end: u64) -> Result<LineReader, IoError> {
        use std::io::{Seek, SeekFrom};
        let open_err = |cause| IoError::Open {
            path: file.path.clone(),
            cause,
        };
        let raw: Box<dyn Read + Send> = if crate::store::is_remote(&file.path) {
            Box::new(crate::store::open_range(&file.path, start, end)?)
        } else {
            let mut raw = std::fs::File::open(&file.path).map_err(open_err)?;
            raw.seek(SeekFrom::Start(start)).map_err(open_err)?;
            Box::new(raw.take(end.saturating_sub(start)))
        };
        Ok(LineReader {
            path: file.path.clone(),
            compression: file.compression,
            reader: Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, raw)),
            line: 0,
            offset: Some(start),
        })
    }

    /// The error for a failed read of the line being read.
    fn read_error(&self, cause: std::io::Error) -> IoError {
        match self.offset {
            None => IoError::Read {
                path: self.path.clone(),
                line: self.line + 1,
                compression: self.compression,
                cause,
            },
            Some(offset) => IoError::ReadAtByte {
                path: self.path.clone(),
                offset,
                compression: self.compression,
                cause,
            },
        }
    }

    /// The number of the line just read, `consumed` bytes long with its end of line, and
    /// whether it is the file's first line (which may start with a byte order mark).
    fn advance(&mut self, consumed: usize) -> (u64, bool) {
        self.line += 1;
        match self.offset.as_mut() {
            None => (self.line, self.line == 1),
            Some(offset) => {
                let start = *offset;
                *offset += consumed as u64;
                (start + 1, start == 0)
            }
        }
    }

    /// Reads the next line into `buf` (cleared first), without its trailing
    /// `\n` or `\r\n`, and returns its 1-based line number (or 1 + its byte offset, see
    /// the type's docs), or `None` at the end of the file. A UTF-8 byte order mark on line 1
    /// is dropped.
    ///
    /// A read or decompression error (for example a truncated gzip or zstd
    /// stream) is returned with the number of the line being read.
    pub fn next_line(&mut self, buf: &mut Vec<u8>) -> Result<Option<u64>, IoError> {
        buf.clear();
        let n = match self.reader.read_until(b'\n', buf) {
            Ok(n) => n,
            Err(cause) => return Err(self.read_error(cause)),
        };
        if n == 0 {
            return Ok(None);
        }
        let (number, first) = self.advance(n);
        if buf.last() == Some(&b'\n') {
            buf.pop();
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
        }
        if first && buf.starts_with(UTF8_BOM) {
            buf.drain(..UTF8_BOM.len());
        }
        Ok(Some(number))
    }

    /// Like [`next_line`](Self::next_line), but a line longer than `max` bytes is not held:
    /// it is read to its end, `buf` keeps only its first `max` bytes, and the flag says so.
    /// Memory stays bounded by `max` whatever one line holds.
    pub fn next_line_within(
        &mut self,
        buf: &mut Vec<u8>,
        max: u64,
    ) -> Result<Option<(u64, bool)>, IoError> {
        buf.clear();
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        let (mut any, mut content, mut consumed) = (false, 0usize, 0usize);
        loop {
            let chunk = match self.reader.fill_buf() {
                Ok(c) => c,
                Err(cause) => return Err(self.read_error(cause)),
            };
            if chunk.is_empty() {
                break;
            }
            any = true;
            let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            content = content.saturating_add(take - usize::from(done));
            let room = max.saturating_add(1).saturating_sub(buf.len()).min(take);
            buf.extend_from_slice(&chunk[..room]);
            self.reader.consume(take);
            consumed = consumed.saturating_add(take);
            if done {
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        let (number, first) = self.advance(consumed);
        let over = content > max;
        if over {
            buf.truncate(max);
        } else if buf.last() == Some(&b'\n') {
            buf.pop();
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
        }
        if first && buf.starts_with(UTF8_BOM) {
            buf.drain(..UTF8_BOM.len());
        }
        Ok(Some((number, over)))
    }

    /// The number of lines returned so far.
    pub fn lines_read(&self) -> u64 {
        self.line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::path::Path;

    const CONTENT: &[u8] = b"\xEF\xBB\xBFfirst\r\nsecond\n\n  third \r\nlast";
    const LINES: [&str; 5] = ["first", "second", "", "  third ", "last"];

    fn read_all(file: &InputFile) -> Result<Vec<(u64, String)>, IoError> {
        let mut reader = LineReader::open(file)?;
        let mut buf = Vec::new();
        let mut out = Vec::new();
        while let Some(n) = reader.next_line(&mut buf)? {
            out.push((n, String::from_utf8(buf.clone()).unwrap()));
        }
        Ok(out)
    }

    fn input(path: &Path, compression: Compression) -> InputFile {
        InputFile {
            path: path.to_path_buf(),
            format: crate::source::Format::Jsonl,
            compression,
        }
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    fn expected() -> Vec<(u64, String)> {
        (1..).zip(LINES.iter().map(|s| s.to_string())).collect()
    }

    #[test]
    fn reads_plain_gzip_and_zstd_lines() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("a.jsonl");
        std::fs::write(&plain, CONTENT).unwrap();
        assert_eq!(
            read_all(&input(&plain, Compression::None)).unwrap(),
            expected()
        );

        let gz = dir.path().join("a.jsonl.gz");
        // Two gzip members, as pigz writes: both must be read.
        let mut data = gzip(&CONTENT[..20]);
        data.extend(gzip(&CONTENT[20..]));
        std::fs::write(&gz, data).unwrap();
        assert_eq!(
            read_all(&input(&gz, Compression::Gzip)).unwrap(),
            expected()
        );

        let zst = dir.path().join("a.jsonl.zst");
        std::fs::write(&zst, zstd::encode_all(CONTENT, 3).unwrap()).unwrap();
        assert_eq!(
            read_all(&input(&zst, Compression::Zstd)).unwrap(),
            expected()
        );
    }

    /// Many lines, so that a truncated stream fails well after line 1.
    fn big_content() -> Vec<u8> {
        let mut data = Vec::new();
        for i in 0..20_000u32 {
            // Varying content so the compressed stream is long.
            writeln!(
                data,
                "{{\"text\": \"line {i} {}\"}}",
                i.wrapping_mul(2_654_435_761)
            )
            .unwrap();
        }
        data
    }

    fn assert_truncation_detected(path: &Path, compression: Compression, compressed: &[u8]) {
        std::fs::write(path, &compressed[..compressed.len() / 2]).unwrap();
        let err = read_all(&input(path, compression)).unwrap_err();
        let IoError::Read { line, .. } = &err else {
            panic!("expected a read error, got {err:?}");
        };
        assert!(*line > 1, "{err}");
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!(
                "{}:{line}: {} data is truncated or corrupt",
                path.display(),
                compression.name()
            )),
            "{msg}"
        );
    }

    #[test]
    fn truncated_gzip_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let compressed = gzip(&big_content());
        assert_truncation_detected(
            &dir.path().join("t.jsonl.gz"),
            Compression::Gzip,
            &compressed,
        );
    }

    #[test]
    fn truncated_zstd_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let compressed = zstd::encode_all(&big_content()[..], 3).unwrap();
        assert_truncation_detected(
            &dir.path().join("t.jsonl.zst"),
            Compression::Zstd,
            &compressed,
        );
    }

    #[test]
    fn every_truncation_point_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            (Compression::Gzip, gzip(CONTENT)),
            (Compression::Zstd, zstd::encode_all(CONTENT, 3).unwrap()),
        ];
        for (compression, compressed) in cases {
            let path = dir.path().join(format!("cut.{}", compression.name()));
            for cut in 1..compressed.len() {
                std::fs::write(&path, &compressed[..cut]).unwrap();
                let result = read_all(&input(&path, compression));
                assert!(
                    matches!(result, Err(IoError::Read { .. })),
                    "{compression:?} cut at {cut} of {}: {result:?}",
                    compressed.len()
                );
            }
        }
    }

    #[test]
    fn missing_file_is_an_open_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing.jsonl");
        let Err(err) = LineReader::open(&input(&path, Compression::None)) else {
            panic!("opened a missing file");
        };
        assert!(err
            .to_string()
            .starts_with(&format!("{}: cannot open: ", path.display())));
    }
}
