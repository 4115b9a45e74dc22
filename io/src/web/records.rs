//! The records of an archive, head by head: what WARC and ARC files share, written once.
//!
//! Both formats are a sequence of records, each a head (WARC: a version line and header
//! fields up to a blank line; ARC: one line) saying how long the block after it is, the
//! block, and line ends. [`ArchiveRecords`] walks them: it skips the line ends between
//! records, marks where each record begins (its number is its position in the file), hands
//! the head's lines to the format ([`ArchiveFormat::read_head`], the only part that differs),
//! reads the block, and writes a record back as it was stored (`--write-dedup`). After a
//! damaged record it moves on to the next gzip member, if there is one.

use std::marker::PhantomData;

use super::stream::{ArchiveStream, RecordStart, MAX_HEADER_LINE};
use crate::error::IoError;
use crate::file::InputFile;

/// What one archive format says of its records: how a head is read, and the words its
/// messages use.
pub trait ArchiveFormat {
    /// What a head says besides the block's length (WARC's header fields, ARC's URL, date
    /// and content type).
    type Fields;
    /// The head field giving the block's length, in messages (`Content-Length`).
    const LENGTH_NAME: &'static str;
    /// The head, in messages ("the header").
    const HEAD_NAME: &'static str;
    /// What follows a record's block when it is written back.
    const RECORD_END: &'static [u8];

    /// Reads the head of the record that begins at the stream's position (its first line
    /// not read yet): what it says, and the length of the block after it.
    fn read_head(head: &mut HeadReader<'_>) -> Result<(Self::Fields, u64), IoError>;
}

/// A record's head and where it began.
#[derive(Debug, Clone)]
pub struct RecordHead<F> {
    /// The record's position among all the records of its file, from 0.
    pub number: u64,
    pub start: RecordStart,
    pub fields: F,
    /// The length of the block after the head.
    pub length: u64,
}

/// The lines of one record's head, for [`ArchiveFormat::read_head`]: each line read is
/// kept, as read, for writing the record back.
pub struct HeadReader<'a> {
    stream: &'a mut ArchiveStream,
    line: &'a mut Vec<u8>,
    raw: &'a mut Vec<u8>,
    at: u64,
}

impl HeadReader<'_> {
    /// Reads the next line of the head (at most [`MAX_HEADER_LINE`] bytes); `false` at the
    /// end of the archive.
    pub fn next_line(&mut self) -> Result<bool, IoError> {
        let more = self.stream.read_line(self.line, MAX_HEADER_LINE)?;
        self.raw.extend_from_slice(self.line);
        Ok(more)
    }

    /// The line last read, with its line end.
    pub fn line(&self) -> &[u8] {
        self.line
    }

    /// A damaged record: `what` is wrong with it, at the record's offset.
    pub fn malformed(&self, what: impl Into<String>) -> IoError {
        IoError::Archive {
            path: self.stream.path().to_path_buf(),
            offset: self.at,
            what: what.into(),
        }
    }
}

/// The records of an archive of format `F`, head by head.
pub struct ArchiveRecords<F: ArchiveFormat> {
    stream: ArchiveStream,
    next: u64,
    line: Vec<u8>,
    /// The current record's head exactly as read, for `--write-dedup`.
    raw_head: Vec<u8>,
    /// After an error nothing more can be read (an uncompressed archive cannot resync).
    done: bool,
    format: PhantomData<fn() -> F>,
}

impl<F: ArchiveFormat> ArchiveRecords<F> {
    pub fn open(file: &InputFile) -> Result<ArchiveRecords<F>, IoError> {
        Ok(ArchiveRecords {
            stream: ArchiveStream::open(file)?,
            next: 0,
            line: Vec::new(),
            raw_head: Vec::new(),
            done: false,
            format: PhantomData,
        })
    }

    /// The number the next record will have.
    pub fn next_number(&self) -> u64 {
        self.next
    }

    fn malformed(&self, offset: u64, what: impl Into<String>) -> IoError {
        IoError::Archive {
            path: self.stream.path().to_path_buf(),
            offset,
            what: what.into(),
        }
    }

    /// Reads the next record's head; `None` at the end of the archive. Empty lines between
    /// records are skipped.
    pub fn next_head(&mut self) -> Result<Option<RecordHead<F::Fields>>, IoError> {
        if self.done {
            return Ok(None);
        }
        loop {
            if self.stream.fill()?.is_empty() {
                return Ok(None);
            }
            self.stream.skip_newlines()?;
            if !self.stream.fill()?.is_empty() {
                break;
            }
        }
        let start = self.stream.begin_record();
        let number = self.next;
        self.next += 1;
        let at = start
            .file_offset
            .unwrap_or_else(|| self.stream.error_offset());
        self.raw_head.clear();
        let mut head = HeadReader {
            stream: &mut self.stream,
            line: &mut self.line,
            raw: &mut self.raw_head,
            at,
        };
        let (fields, length) = F::read_head(&mut head)?;
        Ok(Some(RecordHead {
            number,
            start,
            fields,
            length,
        }))
    }

    /// Reads the block of the record `head` (keeping at most `keep` bytes of it in `out`),
    /// and the line ends after it. Returns the record's `(offset, length)` in the file, if
    /// it has one.
    pub fn read_block(
        &mut self,
        head: &RecordHead<F::Fields>,
        keep: usize,
        out: &mut Vec<u8>,
    ) -> Result<Option<(u64, u64)>, IoError> {
        let got = self.stream.read_block(head.length, keep, out)?;
        if got < head.length {
            let at = head
                .start
                .file_offset
                .unwrap_or_else(|| self.stream.error_offset());
            return Err(self.malformed(
                at,
                format!(
                    "{} {} runs past the end of the file ({got} bytes follow {})",
                    F::LENGTH_NAME,
                    head.length,
                    F::HEAD_NAME
                ),
            ));
        }
        self.stream.skip_newlines()?;
        self.stream.end_record(head.start)
    }

    /// After an error: moves to the next gzip member, or gives up on an uncompressed or
    /// single-stream archive. `true` if reading can go on.
    pub fn recover(&mut self) -> bool {
        let ok = matches!(self.stream.resync(), Ok(true));
        self.done = !ok;
        ok
    }

    /// The next record as stored (decompressed): its head and block exactly, then
    /// [`ArchiveFormat::RECORD_END`]; its number, or `None` at the end.
    pub fn next_raw(&mut self, raw: &mut Vec<u8>) -> Result<Option<u64>, IoError> {
        raw.clear();
        let Some(head) = self.next_head()? else {
            return Ok(None);
        };
        raw.extend_from_slice(&self.raw_head);
        self.read_block(&head, usize::MAX, raw)?;
        raw.extend_from_slice(F::RECORD_END);
        Ok(Some(head.number))
    }
}
