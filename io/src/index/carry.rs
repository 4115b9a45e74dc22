//! What a rewrite of generations carries over from the generations it replaces: their
//! documents as a new generation takes them, their sources and urls (in their Parquet
//! tables), and the cluster changes and deletions they record. Shared by a checkpoint's own
//! merge ([`super::write`]) and a background merge ([`super::merge`]).

use std::collections::HashMap;
use std::fs::{self, File};
use std::path::Path;

use super::build::DocEntry;
use super::read::{DocView, Index};
use super::{GenerationEntry, DOCUMENTS_PARQUET, MANIFEST};
use crate::error::IoError;
use crate::parquet_in::TableFile;

/// The cluster changes (-1: alone) and deletions (`true`: the document was indexed) that
/// the generations `range` of `index` record, by document, a later one's over an earlier.
pub(super) fn changes_of(
    index: &Index,
    range: std::ops::Range<usize>,
) -> (HashMap<u64, i64>, HashMap<u64, bool>) {
    let mut changes: HashMap<u64, i64> = HashMap::new();
    let mut gone: HashMap<u64, bool> = HashMap::new();
    for g in range {
        let clusters = index.generation_changes(g, false).into_iter();
        changes.extend(clusters.map(|(doc, cluster)| (doc, cluster as i64)));
        let deletes = index.generation_changes(g, true).into_iter();
        gone.extend(deletes.map(|(doc, indexed)| (doc, indexed != 0)));
    }
    (changes, gone)
}

/// A document of an index as a new generation takes it (its source and url are in the
/// Parquet tables only: left empty).
pub(super) fn entry_of(view: &DocView<'_>) -> DocEntry {
    DocEntry {
        doc_id: view.doc_id,
        id: view.id.map(str::to_string),
        source: String::new(),
        url: None,
        simhash: view.simhash,
        empty: view.empty,
        cluster_id: view.cluster_id,
        digest: view.digest,
        rank: view.rank,
        bytes: view.bytes,
        fetched_at: view.fetched_at,
        signature: view.signature.to_vec(),
        shingles: view.shingles.map(<[u64]>::to_vec),
        removed: view.kept == Some(false),
    }
}

/// Opens file `name` of generation `g` after checking it against the manifest's size and
/// checksum (a generation is only ever rewritten from data that verified).
fn open_verified(dir: &Path, g: &GenerationEntry, name: &str) -> Result<File, IoError> {
    use std::io::{Read, Seek};
    let path = super::generation_file(dir, g, name);
    let open = |cause| IoError::Open {
        path: path.clone(),
        cause,
    };
    if !fs::symlink_metadata(&path).map_err(open)?.is_file() {
        return Err(super::corrupt(
            &path,
            "not a file inside the index (a symbolic link or a directory)".into(),
        ));
    }
    let mut file = File::open(&path).map_err(open)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(open)?;
    let found = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes));
    match g.checksums.iter().find(|s| s.name == name) {
        Some(sum) if sum.bytes == bytes.len() as u64 && sum.xxh3 == found => {}
        Some(sum) => {
            return Err(super::corrupt(
                &path,
                format!(
                    "{} bytes of checksum {found}, the manifest says {} bytes of checksum {}",
                    bytes.len(),
                    sum.bytes,
                    sum.xxh3
                ),
            ))
        }
        None => {
            return Err(super::corrupt(
                &dir.join(MANIFEST),
                format!("no checksum of {}/{name}", g.dir),
            ))
        }
    }
    file.rewind().map_err(open)?;
    Ok(file)
}

/// doc number -> (source, url), from every generation's `documents.parquet`.
pub(super) fn read_origins(
    dir: &Path,
    generations: &[GenerationEntry],
) -> Result<HashMap<u64, (String, Option<String>)>, IoError> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::UInt64Type;
    let mut out = HashMap::new();
    for g in generations {
        let path = super::generation_file(dir, g, DOCUMENTS_PARQUET);
        let file = open_verified(dir, g, DOCUMENTS_PARQUET)?;
        TableFile::of_file(&path, file)?.for_each_batch(|batch| {
            let bad = || IoError::BadTable {
                path: path.clone(),
                reason: "not an index documents table".into(),
            };
            let docs = batch
                .column_by_name("doc_id")
                .and_then(|c| c.as_primitive_opt::<UInt64Type>())
                .ok_or_else(bad)?;
            let sources = batch
                .column_by_name("source")
                .and_then(|c| c.as_string_opt::<i32>())
                .ok_or_else(bad)?;
            let urls = batch
                .column_by_name("url")
                .and_then(|c| c.as_string_opt::<i32>())
                .ok_or_else(bad)?;
            for i in 0..batch.num_rows() {
                out.insert(
                    docs.value(i),
                    (
                        sources.value(i).to_string(),
                        urls.is_valid(i).then(|| urls.value(i).to_string()),
                    ),
                );
            }
            Ok(())
        })?;
    }
    Ok(out)
}
