//! Files that hold a secret: a cluster's `--secret-file`, `neardup serve --token-file`. One
//! check for all of them: a secret that others may read is none, so such a file is refused.

use std::path::{Path, PathBuf};

/// Why a secret file was refused. `what` names the file's role ("secret file", "token
/// file") in the message.
#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    #[error("{}: cannot read the {what}: {source}", path.display())]
    Read {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
    #[error(
        "{}: the {what} may be read or written by others (mode {mode:03o}); make it private with `chmod 600 {}`",
        path.display(),
        path.display()
    )]
    NotPrivate {
        path: PathBuf,
        what: &'static str,
        mode: u32,
    },
}

/// A secret file's bytes without trailing whitespace (an editor's or `echo`'s newline);
/// refused, naming the file, when anyone but its owner may read or write it (any of the
/// mode bits 0o077). Empty is the caller's to refuse (its advice differs).
pub fn read_secret_file(path: &Path, what: &'static str) -> Result<Vec<u8>, SecretFileError> {
    let read = |source| SecretFileError::Read {
        path: path.to_path_buf(),
        what,
        source,
    };
    let meta = std::fs::metadata(path).map_err(read)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(SecretFileError::NotPrivate {
                path: path.to_path_buf(),
                what,
                mode,
            });
        }
    }
    #[cfg(not(unix))]
    let _ = meta;
    let mut bytes = std::fs::read(path).map_err(read)?;
    while bytes.last().is_some_and(|b| b.is_ascii_whitespace()) {
        bytes.pop();
    }
    Ok(bytes)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_secret_file_others_may_read_or_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "s3cret\n\n").unwrap();
        for mode in [0o644, 0o640, 0o604, 0o620, 0o602, 0o666] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(
                read_secret_file(&path, "token file")
                    .unwrap_err()
                    .to_string(),
                format!(
                    "{0}: the token file may be read or written by others (mode {mode:03o}); \
                     make it private with `chmod 600 {0}`",
                    path.display()
                )
            );
        }
        for mode in [0o600, 0o400] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(read_secret_file(&path, "token file").unwrap(), b"s3cret");
        }
        let missing = dir.path().join("missing");
        assert!(read_secret_file(&missing, "secret file")
            .unwrap_err()
            .to_string()
            .starts_with(&format!(
                "{}: cannot read the secret file: ",
                missing.display()
            )));
    }
}
