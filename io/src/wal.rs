//! A write-ahead log: the writes a service acknowledged since its last checkpoint, so that
//! they survive a crash (`kill -9`, power loss) and are replayed on restart.
//!
//! The idea: before a write is answered, it is appended to this file and the file is synced
//! to disk (`fdatasync`). A restart replays the records over the last checkpoint. Syncing
//! costs a disk round trip (about a millisecond), so the caller groups the writes waiting at
//! one moment into one [`Wal::append`] and one [`Wal::sync`] ("group commit"): the cost is
//! paid per batch, not per write.
//!
//! ```text
//! header   magic "NDWAL\0\0\0" (8) | format u32 | 0 u32 | stamp u64        (24 bytes)
//! record   length u32 | CRC-32 of the payload u32 | payload (length bytes)  (repeated)
//! ```
//!
//! All numbers little-endian. The payload is the caller's (never empty); the stamp is the
//! caller's too (`neardup serve` records which index generation the log follows).
//!
//! **Recovery.** A crash can leave the last batch half written: its last record cut short,
//! or bytes that never reached the disk read back as zeros. Such a *torn tail* was never
//! acknowledged, so [`Wal::open`] drops it (truncating the file there) and reports it in
//! [`Replayed::torn`] (a length that runs past the end counts as a cut record only if no good
//! record follows it). Anything else that fails its length or checksum, that is a bad record
//! with other bytes after it, is damage to acknowledged writes: it is refused
//! ([`WalError::Damaged`]), naming the byte offset, and nothing is truncated.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::atomic::sync_parent;

/// The first 8 bytes of a log.
pub const WAL_MAGIC: [u8; 8] = *b"NDWAL\0\0\0";

/// The layout version in a log's header; a reader refuses any other.
pub const WAL_FORMAT: u32 = 1;

/// The bytes before the first record.
pub const WAL_HEADER_BYTES: u64 = 24;

/// The bytes before each record's payload: its length and its CRC-32.
pub const RECORD_HEADER_BYTES: u64 = 8;

/// The largest payload a record may have (a guard against a damaged length; a service's
/// records are a few hundred bytes).
pub const MAX_RECORD_BYTES: u32 = 64 << 20;

/// What can go wrong with a log.
#[derive(Debug, Error)]
pub enum WalError {
    #[error("{}: cannot {action}: {cause}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{}: not a neardup write-ahead log ({reason})", path.display())]
    NotALog { path: PathBuf, reason: String },
    #[error("{}: log format {found}, but this neardup reads format {WAL_FORMAT}", path.display())]
    Format { path: PathBuf, found: u32 },
    #[error(
        "{}: damaged log record at byte {offset} ({reason}), with {after} bytes after it: the writes from there on cannot be replayed; restore the file, or move it away to start from the last checkpoint without them",
        path.display()
    )]
    Damaged {
        path: PathBuf,
        offset: u64,
        reason: String,
        after: u64,
    },
    #[error("{}: a record of {bytes} bytes is empty or larger than {MAX_RECORD_BYTES}", path.display())]
    RecordSize { path: PathBuf, bytes: usize },
}

/// A torn tail dropped on opening: where it started and how many bytes it had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Torn {
    pub offset: u64,
    pub bytes: u64,
}

/// What a log held: its stamp, its records in order, and the torn tail dropped, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replayed {
    pub stamp: u64,
    pub records: Vec<Vec<u8>>,
    /// The length of the good part (header and whole records).
    pub good_bytes: u64,
    pub torn: Option<Torn>,
}

/// An open log, appended to at its end.
#[derive(Debug)]
pub struct Wal {
    file: File,
    path: PathBuf,
    bytes: u64,
    stamp: u64,
    records: u64,
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> WalError {
    let path = path.to_path_buf();
    move |cause| WalError::Io {
        action,
        path,
        cause,
    }
}

impl Wal {
    /// Starts a new, empty log at `path` with `stamp`, replacing any log there atomically
    /// (written beside it, synced, renamed over it, the directory synced).
    pub fn create(path: &Path, stamp: u64) -> Result<Wal, WalError> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "wal".into());
        let tmp = path.with_file_name(format!(".{name}.tmp"));
        let mut header = Vec::with_capacity(WAL_HEADER_BYTES as usize);
        header.extend_from_slice(&WAL_MAGIC);
        header.extend_from_slice(&WAL_FORMAT.to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        header.extend_from_slice(&stamp.to_le_bytes());
        let written = (|| {
            let mut file = File::create(&tmp).map_err(io("create", &tmp))?;
            file.write_all(&header).map_err(io("write", &tmp))?;
            file.sync_all().map_err(io("sync", &tmp))?;
            fs::rename(&tmp, path).map_err(io("rename into place", path))
        })();
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written?;
        sync_parent(path);
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io("open", path))?;
        Ok(Wal {
            file,
            path: path.to_path_buf(),
            bytes: WAL_HEADER_BYTES,
            stamp,
            records: 0,
        })
    }

    /// Opens the log at `path` for appending after replaying it: its records, and its torn
    /// tail dropped (the file is truncated there and synced). Damage before the end is
    /// refused (see the module docs).
    pub fn open(path: &Path) -> Result<(Wal, Replayed), WalError> {
        let replayed = Wal::read(path)?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io("open", path))?;
        if replayed.torn.is_some() {
            file.set_len(replayed.good_bytes)
                .map_err(io("truncate the torn tail of", path))?;
            file.sync_all().map_err(io("sync", path))?;
        }
        let wal = Wal {
            file,
            path: path.to_path_buf(),
            bytes: replayed.good_bytes,
            stamp: replayed.stamp,
            records: replayed.records.len() as u64,
        };
        Ok((wal, replayed))
    }

    /// Reads the log at `path` without changing it.
    pub fn read(path: &Path) -> Result<Replayed, WalError> {
        let mut bytes = Vec::new();
        File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(io("read", path))?;
        parse(&bytes, path)
    }

    /// Appends `payloads` as records with one write (not yet durable: see [`Wal::sync`]).
    pub fn append<P: AsRef<[u8]>>(&mut self, payloads: &[P]) -> Result<(), WalError> {
        let total: usize = payloads
            .iter()
            .map(|p| RECORD_HEADER_BYTES as usize + p.as_ref().len())
            .sum();
        let mut buf = Vec::with_capacity(total);
        for p in payloads {
            let p = p.as_ref();
            if p.is_empty() || p.len() > MAX_RECORD_BYTES as usize {
                return Err(WalError::RecordSize {
                    path: self.path.clone(),
                    bytes: p.len(),
                });
            }
            buf.extend_from_slice(&(p.len() as u32).to_le_bytes());
            buf.extend_from_slice(&crc32fast::hash(p).to_le_bytes());
            buf.extend_from_slice(p);
        }
        if let Err(e) = self.file.write_all(&buf) {
            // Whatever part reached the file is cut off again, so that the next append does
            // not follow a half record (which replay would take for damage).
            let _ = self.file.set_len(self.bytes);
            return Err(io("append to", &self.path)(e));
        }
        self.bytes += buf.len() as u64;
        self.records += payloads.len() as u64;
        Ok(())
    }

    /// Makes every appended record durable (`fdatasync`).
    pub fn sync(&mut self) -> Result<(), WalError> {
        self.file.sync_data().map_err(io("sync", &self.path))
    }

    /// The log's size in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The records in the log (replayed and appended).
    pub fn records(&self) -> u64 {
        self.records
    }

    pub fn stamp(&self) -> u64 {
        self.stamp
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Whether a whole record with a good checksum starts anywhere from `from` on.
fn good_record_after(bytes: &[u8], from: usize) -> bool {
    let header = RECORD_HEADER_BYTES as usize;
    (from..bytes.len().saturating_sub(header)).any(|at| {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().expect("4 bytes"));
        len > 0
            && len <= MAX_RECORD_BYTES
            && at + header + len as usize <= bytes.len()
            && crc32fast::hash(&bytes[at + header..at + header + len as usize]) == crc
    })
}

/// What is wrong at a record that cannot be read.
enum Problem {
    /// It runs to or past the end of the file.
    Tail,
    /// It is bad in itself (a length no record has, a checksum mismatch).
    Bad(String),
}

/// Parses a whole log (`path` only names it in errors).
pub fn parse(bytes: &[u8], path: &Path) -> Result<Replayed, WalError> {
    let not_a_log = |reason: String| WalError::NotALog {
        path: path.to_path_buf(),
        reason,
    };
    if bytes.len() < WAL_HEADER_BYTES as usize {
        return Err(not_a_log(format!(
            "{} bytes, shorter than the {WAL_HEADER_BYTES}-byte header",
            bytes.len()
        )));
    }
    if bytes[..8] != WAL_MAGIC {
        return Err(not_a_log("bad magic".into()));
    }
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let format = u32_at(8);
    if format != WAL_FORMAT {
        return Err(WalError::Format {
            path: path.to_path_buf(),
            found: format,
        });
    }
    let stamp = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
    let mut records = Vec::new();
    let mut at = WAL_HEADER_BYTES as usize;
    let end = bytes.len();
    let header = RECORD_HEADER_BYTES as usize;
    let torn = loop {
        if at == end {
            break None;
        }
        let problem = if end - at < header {
            Problem::Tail
        } else {
            let len = u32_at(at);
            let crc = u32_at(at + 4);
            if len == 0 || len > MAX_RECORD_BYTES {
                Problem::Bad(format!("impossible length {len}"))
            } else if at + header + len as usize > end {
                // A cut record, or a damaged length: only a whole good record after it
                // tells them apart.
                if good_record_after(bytes, at + 1) {
                    Problem::Bad(format!("length {len} runs past the end of the file"))
                } else {
                    Problem::Tail
                }
            } else {
                let payload = &bytes[at + header..at + header + len as usize];
                if crc32fast::hash(payload) == crc {
                    records.push(payload.to_vec());
                    at += header + len as usize;
                    continue;
                }
                if at + header + len as usize == end {
                    Problem::Tail
                } else {
                    Problem::Bad("checksum mismatch".into())
                }
            }
        };
        match problem {
            // A record that runs to (or past) the end: the unacknowledged tail of a crash.
            Problem::Tail => {
                break Some(Torn {
                    offset: at as u64,
                    bytes: (end - at) as u64,
                })
            }
            Problem::Bad(reason) => {
                // Zeros to the end are blocks the crash kept from the disk: also a tail.
                if bytes[at..].iter().all(|&b| b == 0) {
                    break Some(Torn {
                        offset: at as u64,
                        bytes: (end - at) as u64,
                    });
                }
                return Err(WalError::Damaged {
                    path: path.to_path_buf(),
                    offset: at as u64,
                    reason,
                    after: (end - at) as u64,
                });
            }
        }
    };
    Ok(Replayed {
        stamp,
        records,
        good_bytes: at as u64,
        torn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payloads() -> Vec<Vec<u8>> {
        (1..=5u8)
            .map(|i| (0..i * 7).map(|b| b.wrapping_mul(31) ^ i).collect())
            .collect()
    }

    fn write_log(dir: &Path, payloads: &[Vec<u8>]) -> (PathBuf, Vec<u64>) {
        let path = dir.join("test.wal");
        let mut wal = Wal::create(&path, 42).unwrap();
        let mut ends = vec![wal.bytes()];
        for p in payloads {
            wal.append(std::slice::from_ref(p)).unwrap();
            ends.push(wal.bytes());
        }
        wal.sync().unwrap();
        (path, ends)
    }

    #[test]
    fn records_come_back_in_order_and_appends_continue_after_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let all = payloads();
        let (path, _) = write_log(dir.path(), &all[..3]);
        let (mut wal, replayed) = Wal::open(&path).unwrap();
        assert_eq!(replayed.stamp, 42);
        assert_eq!(replayed.records, all[..3]);
        assert_eq!(replayed.torn, None);
        wal.append(&all[3..]).unwrap();
        wal.sync().unwrap();
        assert_eq!(Wal::read(&path).unwrap().records, all);
        assert_eq!(wal.records(), 5);
        // A new log replaces the old one.
        Wal::create(&path, 43).unwrap();
        let fresh = Wal::read(&path).unwrap();
        assert_eq!((fresh.stamp, fresh.records.len()), (43, 0));
    }

    #[test]
    fn every_cut_of_the_last_record_is_dropped_as_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let all = payloads();
        let (path, ends) = write_log(dir.path(), &all);
        let full = fs::read(&path).unwrap();
        let last_start = ends[ends.len() - 2];
        for cut in last_start + 1..full.len() as u64 {
            fs::write(&path, &full[..cut as usize]).unwrap();
            let (mut wal, replayed) = Wal::open(&path).unwrap();
            assert_eq!(replayed.records, all[..4], "cut at {cut}");
            assert_eq!(
                replayed.torn,
                Some(Torn {
                    offset: last_start,
                    bytes: cut - last_start
                })
            );
            // The file was truncated to its good part, so new records follow cleanly.
            assert_eq!(fs::metadata(&path).unwrap().len(), last_start);
            wal.append(&[b"after".to_vec()]).unwrap();
            wal.sync().unwrap();
            let again = Wal::read(&path).unwrap();
            assert_eq!(again.records.len(), 5);
            assert_eq!(again.records[4], b"after");
            assert_eq!(again.torn, None);
        }
        // A cut exactly between records is no tear at all.
        fs::write(&path, &full[..last_start as usize]).unwrap();
        let replayed = Wal::read(&path).unwrap();
        assert_eq!((replayed.records.len(), replayed.torn), (4, None));
    }

    #[test]
    fn a_damaged_last_record_and_a_zero_filled_tail_are_torn_tails() {
        let dir = tempfile::tempdir().unwrap();
        let all = payloads();
        let (path, ends) = write_log(dir.path(), &all);
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        fs::write(&path, &bytes).unwrap();
        let replayed = Wal::read(&path).unwrap();
        assert_eq!(replayed.records, all[..4]);
        assert_eq!(replayed.torn.unwrap().offset, ends[4]);
        // Zeros after the good records (blocks never written) are dropped too.
        let mut bytes = fs::read(&path).unwrap()[..ends[4] as usize].to_vec();
        bytes.extend(std::iter::repeat_n(0u8, 4096));
        fs::write(&path, &bytes).unwrap();
        let replayed = Wal::read(&path).unwrap();
        assert_eq!(replayed.records, all[..4]);
        assert_eq!(
            replayed.torn,
            Some(Torn {
                offset: ends[4],
                bytes: 4096
            })
        );
    }

    #[test]
    fn damage_before_the_end_is_refused_naming_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let all = payloads();
        let (path, ends) = write_log(dir.path(), &all);
        let full = fs::read(&path).unwrap();
        // A flipped byte in every record but the last, payload and header alike.
        for (r, &start) in ends[..all.len() - 1].iter().enumerate() {
            for at in [start + 1, start + 5, start + RECORD_HEADER_BYTES] {
                let mut bytes = full.clone();
                bytes[at as usize] ^= 0x40;
                fs::write(&path, &bytes).unwrap();
                match Wal::open(&path) {
                    Err(WalError::Damaged { offset, after, .. }) => {
                        assert_eq!(offset, start, "record {r} byte {at}");
                        assert_eq!(after, full.len() as u64 - start);
                    }
                    other => panic!("record {r} byte {at}: {other:?}"),
                }
                // Nothing was truncated.
                assert_eq!(fs::read(&path).unwrap(), bytes);
            }
        }
        let mut bytes = full.clone();
        bytes[ends[1] as usize + 9] ^= 1;
        fs::write(&path, &bytes).unwrap();
        let message = Wal::open(&path).unwrap_err().to_string();
        assert!(
            message.contains(&format!("damaged log record at byte {}", ends[1])),
            "{message}"
        );
    }

    #[test]
    fn other_files_and_formats_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.wal");
        fs::write(&path, b"hello").unwrap();
        assert!(matches!(Wal::read(&path), Err(WalError::NotALog { .. })));
        fs::write(&path, [0u8; 24]).unwrap();
        assert!(matches!(Wal::read(&path), Err(WalError::NotALog { .. })));
        let mut header = WAL_MAGIC.to_vec();
        header.extend_from_slice(&9u32.to_le_bytes());
        header.extend_from_slice(&[0; 12]);
        fs::write(&path, &header).unwrap();
        assert!(matches!(
            Wal::read(&path),
            Err(WalError::Format { found: 9, .. })
        ));
        let mut wal = Wal::create(&path, 1).unwrap();
        assert!(matches!(
            wal.append(&[Vec::<u8>::new()]),
            Err(WalError::RecordSize { bytes: 0, .. })
        ));
    }
}
