//! How a JSONL file splits into units: whole when compressed or small, in pieces of about
//! [`SPLIT_BYTES`] cut at line starts when large, numbered by byte offset then.

use std::fs::File;

use super::super::{Locator, UnitSpec};
use crate::compress::Compression;
use crate::error::IoError;
use crate::file::InputFile;

/// Uncompressed JSONL files larger than this are read in pieces of about this size, and
/// numbered by byte offset. 32 MiB: at about 300 MB/s of reading and fingerprinting per core
/// (docs/performance.md) a piece is a tenth of a second of work, small enough to balance a
/// few workers over one big file, and large enough that per-piece costs (an open, a seek)
/// vanish; files below it (the shards of most corpora) keep line numbers.
pub const SPLIT_BYTES: u64 = 32 << 20;

/// Whether `file`'s records are numbered by the byte offsets of their lines (an
/// uncompressed regular file larger than [`SPLIT_BYTES`]) rather than by line numbers.
pub fn numbered_by_offset(file: &InputFile) -> bool {
    file.compression == Compression::None
        && !file.is_stdin()
        && size_of(file).is_ok_and(|size| size.is_some_and(|s| s > SPLIT_BYTES))
}

/// The size of a regular file or an object in a store; `None` for anything else.
pub fn size_of(file: &InputFile) -> Result<Option<u64>, IoError> {
    if crate::store::is_remote(&file.path) {
        return crate::store::object_size(&file.path).map(Some);
    }
    let meta = std::fs::metadata(&file.path).map_err(|cause| IoError::Open {
        path: file.path.clone(),
        cause,
    })?;
    Ok(meta.is_file().then_some(meta.len()))
}

trait ReadSeek: std::io::Read + std::io::Seek {}
impl<T: std::io::Read + std::io::Seek> ReadSeek for T {}

/// The pieces of an uncompressed file of `size` bytes: each starts after the end of the line
/// holding the byte `piece` bytes after the previous start (a line longer than a piece makes
/// fewer pieces).
pub(super) fn pieces(file: &InputFile, size: u64, piece: u64) -> Result<Vec<UnitSpec>, IoError> {
    use std::io::{BufRead, BufReader, Seek, SeekFrom};
    let open_err = |cause| IoError::Open {
        path: file.path.clone(),
        cause,
    };
    let mut starts = vec![0u64];
    let raw: Box<dyn ReadSeek> = if crate::store::is_remote(&file.path) {
        // One ranged GET per fill of the buffer: only the line that holds each cut is read.
        Box::new(crate::store::ReadAt::open(&file.path)?)
    } else {
        Box::new(File::open(&file.path).map_err(open_err)?)
    };
    let mut raw = BufReader::with_capacity(64 << 10, raw);
    let mut cut = piece;
    while cut < size {
        // The piece starts after the end of the line holding byte `cut - 1`.
        raw.seek(SeekFrom::Start(cut - 1)).map_err(open_err)?;
        let mut skipped = Vec::new();
        let n = raw.read_until(b'\n', &mut skipped).map_err(open_err)?;
        let start = cut - 1 + n as u64;
        if start >= size {
            break;
        }
        starts.push(start);
        cut = start + piece;
    }
    starts.push(size);
    Ok(starts
        .windows(2)
        .enumerate()
        .map(|(index, w)| UnitSpec {
            index,
            weight: w[1] - w[0],
            locator: Locator::Bytes {
                start: w[0],
                end: w[1],
            },
        })
        .collect())
}
