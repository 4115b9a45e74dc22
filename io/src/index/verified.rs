//! The record of which index files were checked byte by byte (`INDEX/verified.json`), so
//! that a restart need not read them again.
//!
//! A [`Verify::Checksums`](super::Verify::Checksums) open reads every byte of the index: its
//! checksums, and the positions its tables and documents hold. That is what a service
//! should do before it answers from an index, and at 100 million documents it reads 21 GB
//! (26 s on a 2-core machine, more where the pages are not cached). But a generation is
//! never changed once written (a writer writes new files and renames them into place), so
//! a file checked once is the same file at the next start unless something outside the
//! index's contract changed it, and that leaves a trace in its metadata.
//!
//! Simply: a set of `(path, checksum)` pairs already checked. Each entry also keeps what
//! the file system says of the file when it was checked: its size, device and inode (a
//! file replaced by another, or the index copied elsewhere, has others), its modification
//! time, and its status-change time (which any write or `touch` moves, and which no user
//! can set back). A [`Verify::ChecksumsOnce`](super::Verify::ChecksumsOnce) open checks a
//! file in full unless its entry matches all of these and the manifest's checksum, and
//! records every file it checked. A file whose bytes change without any of these moving
//! (a failing disk under the file system) is not caught here: `neardup index verify` reads
//! every byte, whatever the record says.
//!
//! The record is rewritten whole (by renaming a new file over it) and holds only the
//! generations the manifest names. A damaged or unreadable record counts as empty (every
//! file is checked again); a record that cannot be written (a read-only index) leaves the
//! next open to check everything again, nothing worse.

use std::collections::BTreeMap;
use std::fs::Metadata;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{FileSum, Manifest};

/// The record's file, in the index's directory.
pub const VERIFIED_FILE: &str = "verified.json";

/// The layout version of [`VERIFIED_FILE`]; a record of another is ignored.
const VERSION: u32 = 1;

/// What was true of a file when every byte of it was checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Checked {
    /// The manifest's checksum of it then (16 hex digits).
    xxh3: String,
    bytes: u64,
    device: u64,
    inode: u64,
    modified_ns: i128,
    changed_ns: i128,
}

impl Checked {
    fn of(sum: &FileSum, meta: &Metadata) -> Checked {
        let (device, inode, modified_ns, changed_ns) = identity(meta);
        Checked {
            xxh3: sum.xxh3.clone(),
            bytes: meta.len(),
            device,
            inode,
            modified_ns,
            changed_ns,
        }
    }
}

/// What the file system says of one version of a file: its size, device, inode,
/// modification and status-change times, as an entry of [`VERIFIED_FILE`] keeps them. For
/// the files beside an index that are not the index's own (`neardup serve`'s saved state),
/// whose owners keep their own record of having checked them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    bytes: u64,
    device: u64,
    inode: u64,
    modified_ns: i128,
    changed_ns: i128,
}

impl Identity {
    pub fn of(meta: &Metadata) -> Identity {
        let (device, inode, modified_ns, changed_ns) = identity(meta);
        Identity {
            bytes: meta.len(),
            device,
            inode,
            modified_ns,
            changed_ns,
        }
    }

    /// Whether a file that has this identity now is the version that had `then`: never
    /// where the platform gives no status-change time.
    pub fn same_as(&self, then: &Identity) -> bool {
        self.changed_ns >= 0 && self == then
    }
}

#[cfg(unix)]
fn identity(meta: &Metadata) -> (u64, u64, i128, i128) {
    use std::os::unix::fs::MetadataExt;
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    (
        meta.dev(),
        meta.ino(),
        ns(meta.mtime(), meta.mtime_nsec()),
        ns(meta.ctime(), meta.ctime_nsec()),
    )
}

#[cfg(not(unix))]
fn identity(meta: &Metadata) -> (u64, u64, i128, i128) {
    // No inode or status-change time here: the modification time alone. A record made
    // where these are missing never vouches for a file (see `Record::vouches`).
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(-1, |d| d.as_nanos() as i128);
    (0, 0, modified, -1)
}

/// The record's file: its version and an entry for each checked file, by its path inside
/// the index (`gen-000003/table-07.bin`).
#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    neardup_verified: u32,
    files: BTreeMap<String, Checked>,
}

/// The record as an open reads it, and what that open checked.
#[derive(Debug, Default)]
pub(crate) struct Record {
    before: BTreeMap<String, Checked>,
    now: BTreeMap<String, Checked>,
}

impl Record {
    /// The record at `dir`; empty where it is absent, damaged or of another version.
    pub(crate) fn load(dir: &Path) -> Record {
        let before = std::fs::read(dir.join(VERIFIED_FILE))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<File>(&bytes).ok())
            .filter(|f| f.neardup_verified == VERSION)
            .map(|f| f.files)
            .unwrap_or_default();
        Record {
            before,
            now: BTreeMap::new(),
        }
    }

    /// Whether the file at `key` (inside the index), whose manifest checksum is `sum` and
    /// whose metadata now is `meta`, was checked whole and is unchanged since. A file it
    /// vouches for stays in the record.
    pub(crate) fn vouches(&mut self, key: &str, sum: &FileSum, meta: &Metadata) -> bool {
        let now = Checked::of(sum, meta);
        let vouched = now.changed_ns >= 0 && self.before.get(key) == Some(&now);
        if vouched {
            self.now.insert(key.to_string(), now);
        }
        vouched
    }

    /// Records that every byte of the file at `key` was checked against `sum`.
    pub(crate) fn checked(&mut self, key: &str, sum: &FileSum, meta: &Metadata) {
        self.now.insert(key.to_string(), Checked::of(sum, meta));
    }

    /// Writes the record (the files checked or vouched for by this open, under the
    /// generations of `manifest`) where it differs from the one read; errors are the
    /// caller's to ignore: a record not written costs the next open time, nothing more.
    pub(crate) fn save(self, dir: &Path, manifest: &Manifest) -> Result<(), crate::IoError> {
        let named = |key: &String| {
            let generation = key.split('/').next().unwrap_or_default();
            manifest.generations.iter().any(|g| g.dir == generation)
        };
        let files: BTreeMap<String, Checked> =
            self.now.into_iter().filter(|(k, _)| named(k)).collect();
        if files == self.before {
            return Ok(());
        }
        let file = File {
            neardup_verified: VERSION,
            files,
        };
        let json = serde_json::to_vec_pretty(&file).expect("a record serializes");
        crate::atomic::write_atomically(&dir.join(VERIFIED_FILE), &json)
    }
}
