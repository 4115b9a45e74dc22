//! Writing whole files so that readers see either the old file or the complete new one:
//! write a hidden temporary file in the same directory, sync it, rename it over the target.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use crate::error::IoError;

/// Writes `bytes` to `path` so that readers see either the old file or the
/// complete new one: write a hidden temporary file in the same directory,
/// sync it, rename it over `path`. Creates the directory if needed.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    write_atomically_with(path, |file| file.write_all(bytes))
}

/// [`write_atomically`] for a file too large to hold in memory: `write` streams its bytes
/// into the temporary file (buffered), which is then synced and renamed over `path`. Where
/// `write` fails, nothing is renamed and the temporary file is removed.
pub fn write_atomically_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), IoError> {
    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| IoError::Write {
            path,
            cause: source,
        }
    };
    let Some(name) = path.file_name() else {
        return Err(write_err(path)(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "path has no file name",
        )));
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir).map_err(write_err(dir))?;
    // The pid keeps two processes writing the same file from sharing a
    // temporary file.
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = write_and_sync(&tmp, write)
        .map_err(write_err(&tmp))
        .and_then(|()| fs::rename(&tmp, path).map_err(write_err(path)));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result?;
    sync_parent(path);
    // A file of a staging directory goes to its store now (see `store::publish`).
    crate::store::publish::published(path)
}

fn write_and_sync(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut file = std::io::BufWriter::with_capacity(1 << 20, File::create(path)?);
    write(&mut file)?;
    file.into_inner().map_err(|e| e.into_error())?.sync_all()
}

/// Makes a rename durable by syncing the directory. Best effort: some
/// filesystems refuse to sync directories, and the data itself is synced.
pub fn sync_parent(path: &Path) {
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp_files(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn write_atomically_replaces_whole_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/summary.json");
        write_atomically(&path, b"{\"a\": 1}").unwrap();
        write_atomically(&path, b"{}").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{}");
        assert!(tmp_files(&dir.path().join("sub")).is_empty());

        let blocked = dir.path().join("sub/summary.json/x");
        let err = write_atomically(&blocked, b"").unwrap_err();
        assert!(err.to_string().contains("cannot write"), "{err}");
    }
}
