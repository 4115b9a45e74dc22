//! The records of the service's write-ahead log (`INDEX/serve.wal`, framed by
//! [`neardup_io::wal`]) and the digests its checkpoints keep beside the index.
//!
//! A record holds what a write changed, never the text: a put's document number, id,
//! fingerprint, content digest and metadata; a delete's id. Replaying the records in order
//! over the index they followed rebuilds the same documents with the same numbers.

use std::path::Path;

use fxhash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::ServiceError;

/// The log's file name inside the index directory.
pub const LOG_FILE: &str = "serve.wal";

/// The log a checkpoint starts, until its generation is committed.
pub const NEXT_LOG_FILE: &str = "serve.wal.next";

/// The digests of the documents the service wrote into index format 1 generations (which
/// have no place for them), kept beside the index by the checkpoints of earlier neardup
/// versions: still read, never written (every generation written now holds its digests).
pub const DIGESTS_FILE: &str = "serve-digests.bin";

const DIGESTS_MAGIC: [u8; 8] = *b"NDDIGST\0";

/// One acknowledged write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    Put {
        doc: u64,
        id: String,
        simhash: u64,
        digest: u128,
        empty: bool,
        url: Option<String>,
        time: Option<String>,
    },
    Delete {
        id: String,
    },
}

impl Record {
    pub fn encode(&self) -> Vec<u8> {
        bincode::serialize(self).expect("a record serializes")
    }

    /// Decodes a record: all of `bytes`, as [`Record::encode`] wrote it. The error says what
    /// is wrong in words (the caller names the log, the record and its offset).
    pub fn decode(bytes: &[u8]) -> Result<Record, String> {
        use bincode::Options;
        let options = bincode::DefaultOptions::new()
            .with_fixint_encoding()
            .reject_trailing_bytes();
        options.deserialize(bytes).map_err(|e| match *e {
            bincode::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
                format!(
                    "a length inside it (of an id, url or time) runs past its {} bytes",
                    bytes.len()
                )
            }
            bincode::ErrorKind::InvalidUtf8Encoding(_) => {
                "an id, url or time that is not UTF-8".to_string()
            }
            bincode::ErrorKind::InvalidTagEncoding(tag) => {
                format!("tag {tag} where a put (0) or a delete (1), or a url or time absent (0) or present (1), belongs")
            }
            bincode::ErrorKind::InvalidBoolEncoding(b) => format!("{b} where a flag is 0 or 1"),
            bincode::ErrorKind::Custom(m) if m.contains("bytes remaining") => {
                format!("bytes after its end (its fields end before its {} bytes)", bytes.len())
            }
            other => other.to_string(),
        })
    }
}

/// Reads the digests file of the index at `dir` (none: no digests).
pub fn read_digests(dir: &Path) -> Result<FxHashMap<u64, u128>, ServiceError> {
    let path = dir.join(DIGESTS_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(FxHashMap::default()),
        Err(cause) => return Err(neardup_io::IoError::Open { path, cause }.into()),
    };
    let bad = |reason: &str| ServiceError::BadDigests {
        path: path.clone(),
        reason: reason.to_string(),
    };
    if bytes.len() < 16 || bytes[..8] != DIGESTS_MAGIC || (bytes.len() - 16) % 24 != 0 {
        return Err(bad("not a digests file of neardup serve"));
    }
    let (body, sum) = bytes[8..].split_at(bytes.len() - 16);
    if xxhash_rust::xxh3::xxh3_64(body).to_le_bytes() != sum {
        return Err(bad("checksum mismatch"));
    }
    Ok(body
        .chunks_exact(24)
        .map(|c| {
            (
                u64::from_le_bytes(c[..8].try_into().expect("8")),
                u128::from_le_bytes(c[8..].try_into().expect("16")),
            )
        })
        .collect())
}
