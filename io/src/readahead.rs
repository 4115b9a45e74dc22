//! Decompression on a thread of its own, ahead of the reader.
//!
//! The simple version reads a decoder directly: the worker that fingerprints a `.zst` or
//! `.gz` file also decompresses it, one after the other (zstd alone is about a third of
//! `neardup hash` on a compressed corpus, docs/performance.md). [`ReadAhead`] moves the
//! decoder to a thread that fills chunks of [`CHUNK_BYTES`] and hands them over a bounded
//! channel, [`CHUNKS_AHEAD`] at most, so decompression overlaps with tokenizing and hashing
//! on another core. Spent chunks go back to the thread to be filled again, so reading
//! allocates nothing once started.
//!
//! The bytes and errors the reader sees are those of the decoder, in order: a chunk cut
//! short by an error is handed over first, then the error. Dropping the reader stops the
//! thread at its next hand-over (its send fails), so an early stop leaves nothing running.

use std::io::{self, Read};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

/// Bytes decompressed per hand-over: large enough that the channel is not the cost, small
/// enough that the reader starts soon.
pub const CHUNK_BYTES: usize = 1 << 20;
/// Chunks decompressed ahead of the reader at most (memory: this many chunks, plus one being
/// read and one being filled).
pub const CHUNKS_AHEAD: usize = 4;

/// What the thread hands over: a filled chunk, or the decoder's error (after which nothing
/// more comes). The end of the stream is the channel closing.
type Message = io::Result<Vec<u8>>;

/// A [`Read`] over a decoder that runs on its own thread.
pub struct ReadAhead {
    chunks: Receiver<Message>,
    spent: SyncSender<Vec<u8>>,
    current: Vec<u8>,
    at: usize,
    thread: Option<JoinHandle<()>>,
    /// Set once the stream ended or failed: later reads return 0.
    done: bool,
}

impl ReadAhead {
    /// Starts a thread that reads `inner` ahead. `name` names the thread (for profiles and
    /// panics).
    pub fn spawn<R: Read + Send + 'static>(mut inner: R, name: &str) -> io::Result<ReadAhead> {
        let (send_chunk, chunks) = sync_channel::<Message>(CHUNKS_AHEAD);
        // Spent chunks come back here; the thread allocates only when none is waiting.
        let (spent, returned) = sync_channel::<Vec<u8>>(CHUNKS_AHEAD + 2);
        let thread = std::thread::Builder::new()
            .name(format!("decompress {name}"))
            .spawn(move || loop {
                let mut chunk = returned
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(CHUNK_BYTES));
                chunk.clear();
                chunk.resize(CHUNK_BYTES, 0);
                let mut filled = 0;
                let mut failure = None;
                while filled < CHUNK_BYTES {
                    match inner.read(&mut chunk[filled..]) {
                        Ok(0) => break,
                        Ok(n) => filled += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            failure = Some(e);
                            break;
                        }
                    }
                }
                chunk.truncate(filled);
                let end = filled < CHUNK_BYTES;
                if filled > 0 && send_chunk.send(Ok(chunk)).is_err() {
                    return; // the reader is gone
                }
                if let Some(e) = failure {
                    let _ = send_chunk.send(Err(e));
                    return;
                }
                if end {
                    return; // dropping the sender ends the stream
                }
            })?;
        Ok(ReadAhead {
            chunks,
            spent,
            current: Vec::new(),
            at: 0,
            thread: Some(thread),
            done: false,
        })
    }
}

impl Read for ReadAhead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.current.len() {
            if self.done || buf.is_empty() {
                return Ok(0);
            }
            match self.chunks.recv() {
                Ok(Ok(chunk)) => {
                    let spent = std::mem::replace(&mut self.current, chunk);
                    self.at = 0;
                    // A full return queue just drops the buffer.
                    let _ = self.spent.try_send(spent);
                }
                Ok(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                Err(_) => {
                    self.done = true;
                    return Ok(0);
                }
            }
        }
        let n = buf.len().min(self.current.len() - self.at);
        buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        // Close our end first so that a thread blocked on sending wakes up and stops; then
        // wait for it, so that no decoder outlives its reader.
        let (_, closed) = sync_channel(0);
        drop(std::mem::replace(&mut self.chunks, closed));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that yields `data` in pieces of `step` bytes, then fails if `fail` is set.
    struct Pieces {
        data: Vec<u8>,
        at: usize,
        step: usize,
        fail: bool,
    }

    impl Read for Pieces {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.at == self.data.len() {
                return if self.fail {
                    Err(io::Error::new(io::ErrorKind::InvalidData, "corrupt frame"))
                } else {
                    Ok(0)
                };
            }
            let n = buf.len().min(self.step).min(self.data.len() - self.at);
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 % 251) as u8).collect()
    }

    #[test]
    fn hands_over_every_byte_in_order() {
        for len in [
            0,
            1,
            CHUNK_BYTES - 1,
            CHUNK_BYTES,
            CHUNK_BYTES + 1,
            5 * CHUNK_BYTES + 17,
        ] {
            for step in [1000, 65536, CHUNK_BYTES * 2] {
                let input = data(len);
                let source = Pieces {
                    data: input.clone(),
                    at: 0,
                    step,
                    fail: false,
                };
                let mut out = Vec::new();
                ReadAhead::spawn(source, "test")
                    .unwrap()
                    .read_to_end(&mut out)
                    .unwrap();
                assert_eq!(out.len(), input.len(), "len {len} step {step}");
                assert!(out == input, "len {len} step {step}");
            }
        }
    }

    #[test]
    fn an_error_comes_after_the_bytes_before_it() {
        let input = data(CHUNK_BYTES + 5000);
        let source = Pieces {
            data: input.clone(),
            at: 0,
            step: 4096,
            fail: true,
        };
        let mut reader = ReadAhead::spawn(source, "test").unwrap();
        let mut out = Vec::new();
        let mut buf = vec![0; 10_000];
        let error = loop {
            match reader.read(&mut buf) {
                Ok(0) => panic!("the stream ended without its error"),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => break e,
            }
        };
        assert!(out == input, "every byte before the error is read first");
        assert_eq!(error.to_string(), "corrupt frame");
        assert_eq!(reader.read(&mut buf).unwrap(), 0, "nothing after the error");
    }

    #[test]
    fn dropping_the_reader_early_stops_the_thread() {
        let source = Pieces {
            data: data(20 * CHUNK_BYTES),
            at: 0,
            step: 65536,
            fail: false,
        };
        let mut reader = ReadAhead::spawn(source, "test").unwrap();
        let mut buf = [0u8; 10];
        reader.read_exact(&mut buf).unwrap();
        drop(reader); // joins the thread: a hang here fails the test by its timeout
    }
}
