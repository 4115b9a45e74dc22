//! Reading an index: open (map every file, check sizes and headers, and with
//! [`Verify::Checksums`] every byte), then query fingerprints and look documents up.
//!
//! Opening does not read the tables: they are memory-mapped, and a query touches only the
//! pages its binary searches land on (about `log2(n)` per table and generation).

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use neardup_core::query::{self, permutations, Permutation};
use neardup_core::TableDesign;

use super::write::{
    design_of, FLAG_BYTES, FLAG_DIGEST, FLAG_EMPTY, FLAG_FETCHED_AT, FLAG_HAS_ID, FLAG_RANK,
};
use super::{
    corrupt, generation_file, table_file, GenerationEntry, Manifest, CLUSTERS_FILE, DOCS_FILE,
    DOCUMENTS_PARQUET, HEADER_BYTES, KIND_CLUSTERS, KIND_DOCS, KIND_TABLE, MAGIC, MANIFEST,
};
use crate::error::IoError;

/// How much of an index [`Index::open`] checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    /// Every file's size and header (catches truncation and files swapped between indexes).
    Sizes,
    /// Also every file's checksum (catches any damaged byte; reads the whole index once).
    Checksums,
}

/// An open index.
pub struct Index {
    dir: PathBuf,
    manifest: Manifest,
    design: TableDesign,
    permutations: Vec<Permutation>,
    generations: Vec<GenerationMap>,
    /// The latest cluster of every document whose cluster a later generation changed.
    changes: HashMap<u64, i64>,
}

/// One generation's mapped files.
struct GenerationMap {
    docs: Mmap,
    count: usize,
    tables: Vec<Mmap>,
    indexed: usize,
    /// The layout of its files (docs/index.md): 1 or 2.
    format: u32,
}

/// Words per document before `docs.bin`'s flags: doc number, simhash, cluster, id end; and
/// from format 2 the digest (two words), rank, bytes and capture time.
fn doc_words(format: u32) -> usize {
    if format >= 2 {
        9
    } else {
        4
    }
}

/// A stored document within `k` of a query: where it is, and how far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Match {
    pub generation: usize,
    pub row: u32,
    pub hamming: u32,
}

/// A document of the index, borrowed from the mapped files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DocView<'a> {
    pub doc_id: u64,
    pub id: Option<&'a str>,
    pub simhash: u64,
    pub empty: bool,
    pub cluster_id: Option<i64>,
    /// From format 2, where the run made them (see [`super::DocEntry`]): the content
    /// digest, the keep rank under its generation's policy ([`Index::generation_keep`]),
    /// the text bytes and the capture time.
    pub digest: Option<u128>,
    pub rank: Option<u64>,
    pub bytes: Option<u64>,
    pub fetched_at: Option<i64>,
}

/// `n` little-endian words of `bytes` from byte `at` (8-aligned in a page-aligned map).
fn words(bytes: &[u8], at: usize, n: usize) -> &[u64] {
    let slice = &bytes[at..at + 8 * n];
    // SAFETY: every bit pattern is a valid u64; `align_to` only yields the aligned middle.
    let (head, middle, _) = unsafe { slice.align_to::<u64>() };
    assert!(head.is_empty(), "index words are 8-aligned");
    &middle[..n]
}

fn u32s(bytes: &[u8], at: usize, n: usize) -> &[u32] {
    let slice = &bytes[at..at + 4 * n];
    // SAFETY: as in `words`.
    let (head, middle, _) = unsafe { slice.align_to::<u32>() };
    assert!(head.is_empty(), "index rows are 4-aligned");
    &middle[..n]
}

const fn padded8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

impl Index {
    /// Opens the index at `dir`: the manifest, then every file of every generation it names,
    /// each checked as `verify` says. Refuses an index of another format, a missing,
    /// truncated or damaged file, naming it.
    pub fn open(dir: &Path, verify: Verify) -> Result<Index, IoError> {
        #[cfg(target_endian = "big")]
        return Err(corrupt(
            dir,
            "index files are little-endian; this machine is not".into(),
        ));
        let manifest = Manifest::load(dir)?;
        let design = design_of(&manifest, &dir.join(MANIFEST))?;
        let mut generations = Vec::with_capacity(manifest.generations.len());
        let mut changes = HashMap::new();
        for entry in &manifest.generations {
            let format = entry.format;
            let docs = map_checked(dir, entry, DOCS_FILE, verify)?;
            let path = generation_file(dir, entry, DOCS_FILE);
            let (count, id_bytes) = header(&docs, &path, KIND_DOCS, format)?;
            expect(&path, "documents", count, entry.documents)?;
            let count = count as usize;
            let size =
                HEADER_BYTES + 8 * doc_words(format) * count + padded8(count) + id_bytes as usize;
            expect(&path, "bytes", docs.len() as u64, size as u64)?;
            let mut tables = Vec::with_capacity(design.tables());
            for (t, mask) in design.masks().iter().enumerate() {
                let name = table_file(t);
                let map = map_checked(dir, entry, &name, verify)?;
                let path = generation_file(dir, entry, &name);
                let (n, recorded_mask) = header(&map, &path, KIND_TABLE, format)?;
                expect(&path, "entries", n, entry.indexed)?;
                if recorded_mask != *mask {
                    return Err(corrupt(
                        &path,
                        format!("mask {recorded_mask:016x}, expected {mask:016x}"),
                    ));
                }
                let size = HEADER_BYTES + 8 * n as usize + padded8(4 * n as usize);
                expect(&path, "bytes", map.len() as u64, size as u64)?;
                tables.push(map);
            }
            let clusters = map_checked(dir, entry, CLUSTERS_FILE, verify)?;
            let path = generation_file(dir, entry, CLUSTERS_FILE);
            let (n, _) = header(&clusters, &path, KIND_CLUSTERS, format)?;
            expect(&path, "changes", n, entry.cluster_changes)?;
            expect(
                &path,
                "bytes",
                clusters.len() as u64,
                (HEADER_BYTES + 16 * n as usize) as u64,
            )?;
            let n = n as usize;
            let docs_changed = words(&clusters, HEADER_BYTES, n);
            let new_clusters = words(&clusters, HEADER_BYTES + 8 * n, n);
            for (&doc, &cluster) in docs_changed.iter().zip(new_clusters) {
                changes.insert(doc, cluster as i64);
            }
            // The Parquet table is for other programs; its size and checksum are checked too.
            drop(map_checked(dir, entry, DOCUMENTS_PARQUET, verify)?);
            generations.push(GenerationMap {
                docs,
                count,
                tables,
                indexed: entry.indexed as usize,
                format,
            });
        }
        Ok(Index {
            dir: dir.to_path_buf(),
            permutations: permutations(&design),
            manifest,
            design,
            generations,
            changes,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn design(&self) -> &TableDesign {
        &self.design
    }

    /// The index's k: the largest a query may ask for.
    pub fn k(&self) -> u32 {
        self.design.k()
    }

    pub fn generations(&self) -> usize {
        self.generations.len()
    }

    pub fn generation_documents(&self, generation: usize) -> usize {
        self.generations[generation].count
    }

    /// The keep policy whose ranks generation `generation`'s documents carry (`None`: no
    /// ranks stored).
    pub fn generation_keep(&self, generation: usize) -> Option<&str> {
        self.manifest.generations[generation].keep.as_deref()
    }

    /// Calls `found` once for every indexed document within `k` bits of `fp` (`k` at most
    /// [`Index::k`]; the caller checks), generation by generation.
    pub fn query(&self, fp: u64, k: u32, mut found: impl FnMut(Match)) {
        let k = k.min(self.design.k());
        let mut keys: Vec<&[u64]> = Vec::with_capacity(self.design.tables());
        for (g, generation) in self.generations.iter().enumerate() {
            let n = generation.indexed;
            keys.clear();
            keys.extend(generation.tables.iter().map(|m| words(m, HEADER_BYTES, n)));
            query::query(&self.design, &self.permutations, &keys, fp, k, |m| {
                let rows = u32s(&generation.tables[m.table], HEADER_BYTES + 8 * n, n);
                found(Match {
                    generation: g,
                    row: rows[m.position],
                    hamming: m.hamming,
                })
            });
        }
    }

    /// [`Index::query`] for a batch of fingerprints: calls `found(i, m)` once for every
    /// indexed document `m` within `k` of `fps[i]`, in no particular order. Each table of
    /// each generation is walked once, left to right, for the whole batch
    /// ([`query::query_batch`]): for large batches much cheaper than one query at a time.
    pub fn query_batch(&self, fps: &[u64], k: u32, mut found: impl FnMut(usize, Match)) {
        let k = k.min(self.design.k());
        let mut keys: Vec<&[u64]> = Vec::with_capacity(self.design.tables());
        for (g, generation) in self.generations.iter().enumerate() {
            let n = generation.indexed;
            keys.clear();
            keys.extend(generation.tables.iter().map(|m| words(m, HEADER_BYTES, n)));
            query::query_batch(&self.design, &self.permutations, &keys, fps, k, |m| {
                let rows = u32s(&generation.tables[m.table], HEADER_BYTES + 8 * n, n);
                found(
                    m.query,
                    Match {
                        generation: g,
                        row: rows[m.position],
                        hamming: m.hamming,
                    },
                )
            });
        }
    }

    /// The document at `row` of generation `generation`.
    pub fn doc(&self, generation: usize, row: u32) -> DocView<'_> {
        let g = &self.generations[generation];
        let (n, r) = (g.count, row as usize);
        let bytes = &g.docs[..];
        let column = |i: usize| words(bytes, HEADER_BYTES + 8 * i * n, n);
        let doc_id = column(0)[r];
        let simhash = column(1)[r];
        let stored = column(2)[r] as i64;
        let ends = column(3);
        let flags_at = HEADER_BYTES + 8 * doc_words(g.format) * n;
        let flags = bytes[flags_at + r];
        let ids_at = flags_at + padded8(n);
        let start = if r == 0 { 0 } else { ends[r - 1] as usize };
        let id = (flags & FLAG_HAS_ID != 0).then(|| {
            std::str::from_utf8(&bytes[ids_at + start..ids_at + ends[r] as usize])
                .unwrap_or("<id not UTF-8>")
        });
        let cluster_id = match self.changes.get(&doc_id) {
            Some(&c) => Some(c),
            None => (stored >= 0).then_some(stored),
        };
        let (mut digest, mut rank, mut size, mut fetched_at) = (None, None, None, None);
        if g.format >= 2 {
            let digests = words(bytes, HEADER_BYTES + 32 * n, 2 * n);
            let has = |bit: u8| flags & bit != 0;
            digest = has(FLAG_DIGEST)
                .then(|| u128::from(digests[2 * r]) | u128::from(digests[2 * r + 1]) << 64);
            rank = has(FLAG_RANK).then(|| column(6)[r]);
            size = has(FLAG_BYTES).then(|| column(7)[r]);
            fetched_at = has(FLAG_FETCHED_AT).then(|| column(8)[r] as i64);
        }
        DocView {
            doc_id,
            id,
            simhash,
            empty: flags & FLAG_EMPTY != 0,
            cluster_id,
            digest,
            rank,
            bytes: size,
            fetched_at,
        }
    }

    /// Every document, generation by generation, in doc-number order within each.
    pub fn docs(&self) -> impl Iterator<Item = DocView<'_>> + '_ {
        (0..self.generations.len())
            .flat_map(move |g| (0..self.generations[g].count).map(move |r| self.doc(g, r as u32)))
    }
}

/// Maps one file of a generation after checking its size (and checksum) against the manifest.
fn map_checked(
    dir: &Path,
    entry: &GenerationEntry,
    name: &str,
    verify: Verify,
) -> Result<Mmap, IoError> {
    let path = generation_file(dir, entry, name);
    let sum = entry
        .checksums
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| {
            corrupt(
                &dir.join(MANIFEST),
                format!("no checksum of {}/{name}", entry.dir),
            )
        })?;
    let file = File::open(&path).map_err(|cause| IoError::Open {
        path: path.clone(),
        cause,
    })?;
    let size = file
        .metadata()
        .map_err(|cause| IoError::Open {
            path: path.clone(),
            cause,
        })?
        .len();
    if size != sum.bytes {
        let what = if size < sum.bytes {
            "truncated"
        } else {
            "too long"
        };
        return Err(corrupt(
            &path,
            format!("{what}: {size} bytes, the manifest says {}", sum.bytes),
        ));
    }
    // SAFETY: the index's files are never changed in place (a writer writes new files and
    // renames them); a file changed by someone else under the map is outside that contract.
    let map = unsafe { Mmap::map(&file) }.map_err(|cause| IoError::Open {
        path: path.clone(),
        cause,
    })?;
    if verify == Verify::Checksums {
        let found = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&map));
        if found != sum.xxh3 {
            return Err(corrupt(
                &path,
                format!("checksum {found}, the manifest says {}", sum.xxh3),
            ));
        }
    }
    Ok(map)
}

/// Checks a binary file's header (its kind, and the format its generation has); returns
/// its count and extra word.
fn header(bytes: &[u8], path: &Path, kind: u32, format: u32) -> Result<(u64, u64), IoError> {
    if bytes.len() < HEADER_BYTES {
        return Err(corrupt(
            path,
            format!("{} bytes, shorter than a header", bytes.len()),
        ));
    }
    if bytes[0..8] != MAGIC {
        return Err(corrupt(path, "not a neardup index file (bad magic)".into()));
    }
    let word32 = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let word64 = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let found = word32(8);
    if found > super::INDEX_FORMAT {
        return Err(super::unreadable_format(path.to_path_buf(), found));
    }
    if found != format {
        return Err(corrupt(
            path,
            format!("file format {found}, but the manifest says {format}"),
        ));
    }
    if word32(12) != kind {
        return Err(corrupt(
            path,
            format!("file kind {}, expected {kind}", word32(12)),
        ));
    }
    Ok((word64(16), word64(24)))
}

fn expect(path: &Path, what: &str, found: u64, expected: u64) -> Result<(), IoError> {
    if found == expected {
        return Ok(());
    }
    Err(corrupt(
        path,
        format!("{found} {what}, expected {expected}"),
    ))
}
