//! Publishing a staging directory: while a directory is registered ([`register`]), every
//! file committed under it is uploaded, whole, to the same name under a store URL
//! ([`published`], which every writer calls once a file is renamed into place). The run
//! directory's protocol on a store is [`crate::run_dir::in_store`]'s; this is the hook the
//! writers share, below the run directory so that they need not know it.

use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::Object;
use crate::error::IoError;

/// Where a staging directory's committed files go.
struct Publishing {
    staging: PathBuf,
    /// Ends with `/`.
    url: String,
    /// Names kept local: a first component (a directory) or a last one (a file).
    local: Vec<&'static str>,
    lost: Option<Arc<AtomicBool>>,
}

fn publishing() -> &'static Mutex<Vec<Publishing>> {
    static PUBLISHING: OnceLock<Mutex<Vec<Publishing>>> = OnceLock::new();
    PUBLISHING.get_or_init(Default::default)
}

/// A staging directory being published; dropped, it no longer is.
#[derive(Debug)]
pub struct Published {
    staging: PathBuf,
}

/// Starts publishing `staging` to `url` (a store directory's URL ending in `/`): files whose
/// first or last name is one of `local` stay local; once `lost` is set (the store's lock was
/// taken over by another run) every upload is refused.
pub fn register(
    staging: &Path,
    url: &str,
    local: &[&'static str],
    lost: Option<Arc<AtomicBool>>,
) -> Published {
    publishing().lock().expect("publishing").push(Publishing {
        staging: staging.to_path_buf(),
        url: url.to_string(),
        local: local.to_vec(),
        lost,
    });
    Published {
        staging: staging.to_path_buf(),
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        publishing()
            .lock()
            .expect("publishing")
            .retain(|p| p.staging != self.staging);
    }
}

/// Called by every writer once `path` is committed (renamed into place): if it lies in a
/// staging directory being published, uploads it to its name under the store URL, whole.
pub fn published(path: &Path) -> Result<(), IoError> {
    let target = {
        let publishing = publishing().lock().expect("publishing");
        publishing.iter().find_map(|p| {
            let relative = path.strip_prefix(&p.staging).ok()?;
            let names: Vec<&str> = relative
                .components()
                .map(|c| match c {
                    Component::Normal(name) => name.to_str(),
                    _ => None,
                })
                .collect::<Option<_>>()?;
            let local = [names.first(), names.last()]
                .into_iter()
                .flatten()
                .any(|name| p.local.contains(name));
            Some((
                format!("{}{}", p.url, names.join("/")),
                local,
                p.lost.clone(),
            ))
        })
    };
    let Some((url, local, lost)) = target else {
        return Ok(());
    };
    if local {
        return Ok(());
    }
    if lost.is_some_and(|l| l.load(Ordering::SeqCst)) {
        return Err(IoError::Remote {
            url,
            offset: None,
            cause: "not written: another run took over this directory's lock (this run did not renew it in time)".into(),
        });
    }
    Object::at(&url)?.put_file(path)
}
