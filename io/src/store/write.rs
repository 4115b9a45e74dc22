//! Writing objects, for outputs in a store (see [`crate::run_dir::in_store`]).
//!
//! A store has no rename, so the guarantees of a local run directory are kept by what each
//! request does:
//! - a file is uploaded as **one whole object** ([`Object::put_file`]): one PUT up to
//!   [`PUT_PART_BYTES`], a multipart upload above, which the store shows only once it is
//!   completed; a failed upload is aborted and asked again whole;
//! - the lock is an object **created only if absent** ([`Object::create`], `If-None-Match: *`
//!   on S3, the same on Azure and Google) and taken over only **if unchanged**
//!   ([`Object::replace`], `If-Match: ETAG`), so two runs can never both hold it;
//! - [`Object::delete`] of an object already gone succeeds.
//!
//! Every request is retried as reads are (`retried`: transient failures, with a growing
//! pause, counted in [`super::retries`]).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path as Key;
use object_store::{
    ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion, WriteMultipart,
};

use super::{block_on, remember_size, remote_err, retried, sizes, Object};
use crate::error::IoError;

/// Files up to this size are uploaded by one PUT, larger ones by a multipart upload of parts
/// of this size. 16 MiB: S3 takes parts of 5 MiB to 5 GiB, at most 10,000 of them, so one
/// object may hold 160 GB; a part in flight costs its size in memory.
pub const PUT_PART_BYTES: usize = 16 << 20;

/// Parts of one multipart upload in flight at once (4 × [`PUT_PART_BYTES`] = 64 MiB of
/// memory while a part file is uploaded).
pub const PARTS_IN_FLIGHT: usize = 4;

/// The name `object_store` errors carry for a local file that could not be read during an
/// upload: such a failure lasts (see `transient`).
pub(super) const LOCAL_FILE: &str = "local file";

/// What a store says of an object: when it was last written (seconds since the Unix epoch,
/// by the store's clock) and its version tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub modified_unix: i64,
    pub e_tag: Option<String>,
}

fn local_err(path: &Path, cause: std::io::Error) -> object_store::Error {
    object_store::Error::Generic {
        store: LOCAL_FILE,
        source: format!("{}: {cause}", path.display()).into(),
    }
}

/// Uploads the file at `path` to `key` as one object (see the module docs).
async fn upload(
    store: Arc<dyn ObjectStore>,
    key: Key,
    path: PathBuf,
) -> Result<(), object_store::Error> {
    let size = std::fs::metadata(&path)
        .map_err(|e| local_err(&path, e))?
        .len();
    if size <= PUT_PART_BYTES as u64 {
        let bytes = std::fs::read(&path).map_err(|e| local_err(&path, e))?;
        store.put(&key, PutPayload::from(bytes)).await?;
        return Ok(());
    }
    let mut file = std::fs::File::open(&path).map_err(|e| local_err(&path, e))?;
    let mut writer =
        WriteMultipart::new_with_chunk_size(store.put_multipart(&key).await?, PUT_PART_BYTES);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let read = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(read) => read,
            Err(e) => {
                let _ = writer.abort().await;
                return Err(local_err(&path, e));
            }
        };
        if let Err(e) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
            let _ = writer.abort().await;
            return Err(e);
        }
        writer.write(&buf[..read]);
    }
    // `finish` aborts the upload itself when it fails.
    writer.finish().await.map(|_| ())
}

impl Object {
    fn ask<T: Send + 'static>(
        &self,
        request: impl std::future::Future<Output = Result<T, object_store::Error>> + Send + 'static,
    ) -> Result<T, object_store::Error> {
        block_on(request).unwrap_or_else(|| {
            Err(object_store::Error::Generic {
                store: "runtime",
                source: "the store's runtime stopped".into(),
            })
        })
    }

    /// Uploads the local file at `path` as this object, whole (see the module docs).
    pub fn put_file(&self, path: &Path) -> Result<(), IoError> {
        let (store, key, path) = (self.store.clone(), self.key.clone(), path.to_path_buf());
        let size = std::fs::metadata(&path).map(|m| m.len()).ok();
        self.ask(async move { retried(|| upload(store.clone(), key.clone(), path.clone())).await })
            .map_err(|e| remote_err(&self.url, None, format!("cannot upload: {e}")))?;
        if let Some(size) = size {
            remember_size(&self.url, size);
        }
        Ok(())
    }

    /// Writes `bytes` as this object, replacing any.
    pub fn put_bytes(&self, bytes: Bytes) -> Result<(), IoError> {
        let (store, key) = (self.store.clone(), self.key.clone());
        let size = bytes.len() as u64;
        self.ask(async move { retried(|| store.put(&key, PutPayload::from(bytes.clone()))).await })
            .map_err(|e| remote_err(&self.url, None, format!("cannot write: {e}")))?;
        remember_size(&self.url, size);
        Ok(())
    }

    /// Writes `bytes` as this object only if there is none: its version tag (empty if the
    /// store gives none), or `None` if there is one.
    pub fn create(&self, bytes: Bytes) -> Result<Option<String>, IoError> {
        self.put_mode(bytes, PutMode::Create)
    }

    /// Writes `bytes` over this object only if it is still the version `e_tag`: the new
    /// version tag, or `None` if it changed (or is gone) since.
    pub fn replace(&self, bytes: Bytes, e_tag: Option<String>) -> Result<Option<String>, IoError> {
        self.put_mode(
            bytes,
            PutMode::Update(UpdateVersion {
                e_tag,
                version: None,
            }),
        )
    }

    fn put_mode(&self, bytes: Bytes, mode: PutMode) -> Result<Option<String>, IoError> {
        let (store, key) = (self.store.clone(), self.key.clone());
        let answer = self.ask(async move {
            retried(|| {
                let options = PutOptions {
                    mode: mode.clone(),
                    ..PutOptions::default()
                };
                store.put_opts(&key, PutPayload::from(bytes.clone()), options)
            })
            .await
        });
        match answer {
            Ok(put) => Ok(Some(put.e_tag.unwrap_or_default())),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. }
                | object_store::Error::NotFound { .. },
            ) => Ok(None),
            Err(e) => Err(remote_err(&self.url, None, format!("cannot write: {e}"))),
        }
    }

    /// The object's bytes and [`Stamp`], or `None` if there is no such object.
    pub fn read_all(&self) -> Result<Option<(Bytes, Stamp)>, IoError> {
        let (store, key) = (self.store.clone(), self.key.clone());
        let answer = self.ask(async move {
            retried(|| async {
                let got = store.get(&key).await?;
                let stamp = Stamp {
                    modified_unix: got.meta.last_modified.timestamp(),
                    e_tag: got.meta.e_tag.clone(),
                };
                Ok((got.bytes().await?, stamp))
            })
            .await
        });
        match answer {
            Ok(found) => Ok(Some(found)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(remote_err(&self.url, None, e)),
        }
    }

    /// Deletes the object; one already gone is no error.
    pub fn delete(&self) -> Result<(), IoError> {
        let (store, key) = (self.store.clone(), self.key.clone());
        let answer = self.ask(async move { retried(|| store.delete(&key)).await });
        sizes().lock().expect("sizes").remove(&self.url);
        match answer {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(remote_err(&self.url, None, format!("cannot delete: {e}"))),
        }
    }
}
