//! An archive file as a stream of bytes that knows where its records lie in the file.
//!
//! The simple version is `open_decompressed(file)` and a `BufReader`: every byte of the
//! decompressed archive, in order. Archives need one more thing: the place of a record *in
//! the file as stored*, so that a user can cut the original record out with a range request,
//! as Common Crawl's own index does. Crawlers write `.warc.gz` with one gzip member per
//! record for exactly that reason. So the gzip case decompresses member by member, and a
//! member's end is visible to the record parser: a record that begins where a member begins
//! and ends where it ends has a place in the file ([`ArchiveStream::end_record`]); records
//! that share a compressed member or stream (a `.warc.gz` compressed in one go, `.warc.zst`)
//! have none, and say so (`offset` and `length` are null, see docs/inputs.md).
//!
//! A corrupt or truncated gzip member is an error at the member's byte offset. The reader
//! can then [`resync`](ArchiveStream::resync) to the next gzip member header, which is how
//! `--skip-invalid` goes on after a damaged record.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::compress::Compression;
use crate::error::IoError;
use crate::file::InputFile;
use crate::stream::READ_BUFFER_BYTES;

/// The longest header line an archive may have (WARC and HTTP headers, ARC record lines).
/// Real headers are a few hundred bytes; a longer "line" is binary data or a broken record.
pub const MAX_HEADER_LINE: usize = 64 * 1024;

/// The gzip member header: magic, then the deflate method.
const GZIP_MAGIC: [u8; 3] = [0x1f, 0x8b, 0x08];

/// Counts the bytes consumed through it.
struct Counted<R> {
    inner: R,
    pos: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counted<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        self.pos += amt as u64;
        self.inner.consume(amt);
    }
}

/// An archive's bytes as stored: a local file, or an object of a store streamed by ranged
/// GETs ([`crate::store::RangeReader`], which seeks by starting a new stream).
trait ArchiveFile: Read + Seek + Send {}
impl<T: Read + Seek + Send> ArchiveFile for T {}

type Compressed = Counted<BufReader<Box<dyn ArchiveFile>>>;

/// The decompressed bytes, by compression.
enum Source {
    /// Uncompressed: decompressed positions are file offsets.
    Plain(Box<dyn ArchiveFile>),
    /// Gzip, one member at a time: `Member` while inside one, `Between` after its end.
    Member(Box<flate2::bufread::GzDecoder<Compressed>>),
    Between(Compressed),
    /// Zstd (one stream or several frames): no record has a place in the file.
    Zstd(Box<zstd::stream::read::Decoder<'static, BufReader<Box<dyn ArchiveFile>>>>),
    /// After an error nothing more is read.
    Gone,
}

/// The source as `Read`: a gzip member's end reads as the end of input until
/// [`ArchiveStream`] steps into the next member.
struct SourceRead {
    source: Source,
    /// Compressed offset where the current (or last) gzip member began.
    member_start: u64,
    /// Compressed offset where the last gzip member ended, once it has.
    member_end: Option<u64>,
}

impl Read for SourceRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.source {
            Source::Plain(f) => f.read(buf),
            Source::Zstd(d) => d.read(buf),
            Source::Member(d) => {
                let n = d.read(buf)?;
                if n == 0 && !buf.is_empty() {
                    let Source::Member(d) = std::mem::replace(&mut self.source, Source::Gone)
                    else {
                        unreachable!("matched above")
                    };
                    let inner = d.into_inner();
                    self.member_end = Some(inner.pos);
                    self.source = Source::Between(inner);
                }
                Ok(n)
            }
            Source::Between(_) | Source::Gone => Ok(0),
        }
    }
}

/// Where a record began.
#[derive(Debug, Clone, Copy)]
pub struct RecordStart {
    /// Decompressed offset.
    pub pos: u64,
    /// Offset in the file as stored, when the record starts a gzip member or the file is
    /// not compressed.
    pub file_offset: Option<u64>,
}

/// A decompressed archive that knows its gzip members. See the module docs.
pub struct ArchiveStream {
    path: PathBuf,
    compression: Compression,
    reader: BufReader<SourceRead>,
    /// Decompressed bytes consumed so far.
    pos: u64,
    /// Decompressed position where the current gzip member began.
    member_pos: u64,
    /// The current record crossed a gzip member boundary.
    crossed: bool,
}

impl ArchiveStream {
    /// Opens an archive file. Archives are never read from stdin: a record's place needs a
    /// file.
    pub fn open(file: &InputFile) -> Result<ArchiveStream, IoError> {
        let f: Box<dyn ArchiveFile> = if crate::store::is_remote(&file.path) {
            Box::new(crate::store::open_range(&file.path, 0, u64::MAX)?)
        } else {
            Box::new(File::open(&file.path).map_err(|cause| IoError::Open {
                path: file.path.clone(),
                cause,
            })?)
        };
        let source = match file.compression {
            Compression::None => Source::Plain(f),
            Compression::Gzip => Source::Between(Counted {
                inner: BufReader::with_capacity(READ_BUFFER_BYTES, f),
                pos: 0,
            }),
            Compression::Zstd => Source::Zstd(Box::new(
                zstd::stream::read::Decoder::new(f).map_err(|cause| IoError::Open {
                    path: file.path.clone(),
                    cause,
                })?,
            )),
        };
        let mut stream = ArchiveStream {
            path: file.path.clone(),
            compression: file.compression,
            reader: BufReader::with_capacity(
                READ_BUFFER_BYTES,
                SourceRead {
                    source,
                    member_start: 0,
                    member_end: Some(0),
                },
            ),
            pos: 0,
            member_pos: 0,
            crossed: false,
        };
        stream.next_member()?;
        Ok(stream)
    }

    /// The archive's path, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The decompressed bytes consumed so far.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Where an error at the current position is reported: the file offset for an
    /// uncompressed archive, the start of the gzip member otherwise (the decompressed
    /// position for zstd).
    pub fn error_offset(&self) -> u64 {
        match &self.reader.get_ref().source {
            Source::Plain(_) | Source::Zstd(_) | Source::Gone => self.pos,
            Source::Member(_) | Source::Between(_) => self.reader.get_ref().member_start,
        }
    }

    fn read_error(&self, cause: io::Error) -> IoError {
        IoError::ArchiveRead {
            path: self.path.clone(),
            offset: self.error_offset(),
            compression: self.compression,
            cause,
        }
    }

    /// Marks the start of a record (after any bytes between records were skipped).
    pub fn begin_record(&mut self) -> RecordStart {
        self.crossed = false;
        let inner = self.reader.get_ref();
        let file_offset = match &inner.source {
            Source::Plain(_) => Some(self.pos),
            Source::Member(_) if self.pos == self.member_pos => Some(inner.member_start),
            _ => None,
        };
        RecordStart {
            pos: self.pos,
            file_offset,
        }
    }

    /// The record that began at `start` has been read: its `(offset, length)` in the file
    /// as stored, if it has one (see the module docs).
    pub fn end_record(&mut self, start: RecordStart) -> Result<Option<(u64, u64)>, IoError> {
        let Some(offset) = start.file_offset else {
            return Ok(None);
        };
        if self.crossed {
            return Ok(None);
        }
        if matches!(self.reader.get_ref().source, Source::Plain(_)) {
            return Ok(Some((offset, self.pos - start.pos)));
        }
        // A gzip record has a place only if its member ends here.
        if !self.fill_in_member()?.is_empty() {
            return Ok(None);
        }
        let inner = self.reader.get_ref();
        Ok(match (&inner.source, inner.member_end) {
            (Source::Between(_), Some(end)) => Some((offset, end - offset)),
            _ => None,
        })
    }

    /// The buffered bytes of the current gzip member, without stepping into the next one.
    fn fill_in_member(&mut self) -> Result<&[u8], IoError> {
        match self.reader.fill_buf() {
            Ok(_) => {}
            Err(cause) => return Err(self.read_error(cause)),
        }
        Ok(self.reader.buffer())
    }

    /// The buffered bytes, stepping into the next gzip member when one ends; empty only at
    /// the end of the archive.
    pub fn fill(&mut self) -> Result<&[u8], IoError> {
        loop {
            if !self.fill_in_member()?.is_empty() {
                break;
            }
            if !self.next_member()? {
                break;
            }
            self.crossed = true;
        }
        Ok(self.reader.buffer())
    }

    /// Consumes `n` buffered bytes.
    pub fn consume(&mut self, n: usize) {
        self.reader.consume(n);
        self.pos += n as u64;
    }

    /// Steps into the next gzip member if the current one has ended: `false` at the end of
    /// the file, and for other compressions.
    fn next_member(&mut self) -> Result<bool, IoError> {
        let inner = self.reader.get_mut();
        let Source::Between(compressed) = &mut inner.source else {
            return Ok(false);
        };
        let at = compressed.pos;
        let more = match compressed.fill_buf() {
            Ok(buf) => !buf.is_empty(),
            Err(cause) => {
                return Err(IoError::ArchiveRead {
                    path: self.path.clone(),
                    offset: at,
                    compression: self.compression,
                    cause,
                })
            }
        };
        if !more {
            return Ok(false);
        }
        let Source::Between(compressed) = std::mem::replace(&mut inner.source, Source::Gone) else {
            unreachable!("matched above")
        };
        inner.member_start = compressed.pos;
        inner.member_end = None;
        inner.source = Source::Member(Box::new(flate2::bufread::GzDecoder::new(compressed)));
        self.member_pos = self.pos;
        Ok(true)
    }

    /// Reads a line (up to and including `\n`) into `out` (cleared first), crossing gzip
    /// members. Returns `Ok(false)` at the end of the archive with nothing read; a line
    /// longer than `max` bytes is an error naming `what` was being read.
    pub fn read_line(&mut self, out: &mut Vec<u8>, max: usize) -> Result<bool, IoError> {
        out.clear();
        loop {
            let buf = self.fill()?;
            if buf.is_empty() {
                return Ok(!out.is_empty());
            }
            let (take, done) = match memchr_newline(buf) {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            if out.len() + take > max {
                return Err(IoError::Archive {
                    path: self.path.clone(),
                    offset: self.error_offset(),
                    what: format!("a header line longer than {max} bytes"),
                });
            }
            out.extend_from_slice(&buf[..take]);
            self.consume(take);
            if done {
                return Ok(true);
            }
        }
    }

    /// Reads `n` bytes, appending the first `keep` of them to `out` and discarding the rest;
    /// returns how many bytes there were (fewer than `n` only at the end of the archive).
    pub fn read_block(&mut self, n: u64, keep: usize, out: &mut Vec<u8>) -> Result<u64, IoError> {
        let mut done = 0u64;
        let mut kept = 0usize;
        while done < n {
            let buf = self.fill()?;
            if buf.is_empty() {
                break;
            }
            let take = buf.len().min((n - done) as usize);
            let k = take.min(keep - kept);
            out.extend_from_slice(&buf[..k]);
            kept += k;
            self.consume(take);
            done += take as u64;
        }
        Ok(done)
    }

    /// Skips newlines (`\r`, `\n`) after a record, within the current gzip member (so
    /// that [`end_record`](Self::end_record) can still see the member end).
    pub fn skip_newlines(&mut self) -> Result<(), IoError> {
        loop {
            let buf = self.fill_in_member()?;
            let n = buf
                .iter()
                .take_while(|&&b| b == b'\n' || b == b'\r')
                .count();
            if n == 0 {
                return Ok(());
            }
            self.consume(n);
        }
    }

    /// After an error in a gzip member: moves to the next gzip member header after the
    /// damaged member's start. Returns `false` if there is none (or the archive is not
    /// gzip, where nothing can be resynchronised).
    pub fn resync(&mut self) -> Result<bool, IoError> {
        let inner = self.reader.get_mut();
        let from = inner.member_start + 1;
        let compressed = match std::mem::replace(&mut inner.source, Source::Gone) {
            Source::Member(d) => d.into_inner(),
            Source::Between(c) => c,
            _ => return Ok(false),
        };
        let mut file = compressed.inner;
        let seek_err = |cause| IoError::ArchiveRead {
            path: self.path.clone(),
            offset: from,
            compression: self.compression,
            cause,
        };
        file.seek(SeekFrom::Start(from)).map_err(seek_err)?;
        // Scan for the magic byte by byte (a prefix may end one buffer and the rest begin
        // the next), then seek back to its first byte.
        let (mut at, mut matched) = (from, 0usize);
        let start = 'scan: loop {
            let buf = file.fill_buf().map_err(seek_err)?;
            if buf.is_empty() {
                return Ok(false);
            }
            for (i, &b) in buf.iter().enumerate() {
                matched = if b == GZIP_MAGIC[matched] {
                    matched + 1
                } else {
                    usize::from(b == GZIP_MAGIC[0])
                };
                if matched == GZIP_MAGIC.len() {
                    break 'scan at + i as u64 + 1 - GZIP_MAGIC.len() as u64;
                }
            }
            let n = buf.len();
            file.consume(n);
            at += n as u64;
        };
        file.seek(SeekFrom::Start(start)).map_err(seek_err)?;
        let at = start;
        // Drop what the decompressed reader still buffers of the damaged member.
        let buffered = self.reader.buffer().len();
        self.reader.consume(buffered);
        let inner = self.reader.get_mut();
        inner.source = Source::Between(Counted {
            inner: file,
            pos: at,
        });
        inner.member_end = Some(at);
        self.next_member()
    }
}

fn memchr_newline(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}
