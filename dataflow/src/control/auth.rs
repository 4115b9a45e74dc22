//! Authentication: the job's shared secret, and the MACs that prove a line came from a
//! process that has it (see "Authentication" in the [module docs](super)).
//!
//! Every MAC is an HMAC-SHA256 under the secret over length-prefixed parts, the first of
//! which is a label naming the message (a hello, a reply, a mesh line, a data connection's
//! answer), so that no message can be replayed as another. The handshake's messages are
//! bound to a fresh random challenge of the other side; each heartbeat line is sealed with
//! a [`LineKey`] derived from both challenges and its direction, with a sequence number, so
//! that a line cannot be replayed, reordered or sent back. MACs are compared in constant
//! time.

use std::path::Path;
use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::JobError;

/// Bytes of the random challenges: 256 bits, so a challenge never repeats.
const CHALLENGE_BYTES: usize = 32;
/// Bytes of the MAC kept on each heartbeat line (of SHA-256's 32): 128 bits cannot be guessed,
/// and the lines stay short.
const LINE_MAC_BYTES: usize = 16;

/// A job's shared secret: any bytes, the same in every process (`--secret-file`). Never
/// printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<Vec<u8>>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// A secret of these bytes; refused when empty.
    pub fn new(bytes: Vec<u8>) -> Result<Secret, JobError> {
        if bytes.is_empty() {
            return Err(JobError::Cluster("the secret is empty".into()));
        }
        Ok(Secret(Arc::new(bytes)))
    }

    /// Reads a secret file: its bytes without trailing whitespace (an editor's or `echo`'s
    /// newline). Refused, naming the file, when it is empty or when anyone but its owner may
    /// read or write it (any of the mode bits 0o077): a secret others can read is none.
    pub fn from_file(path: &Path) -> Result<Secret, JobError> {
        let shown = path.display();
        let bytes = neardup_io::secret::read_secret_file(path, "secret file")
            .map_err(|e| JobError::Cluster(e.to_string()))?;
        if bytes.is_empty() {
            return Err(JobError::Cluster(format!(
                "{shown}: the secret file is empty (write a random secret into it, e.g. \
                 `head -c 32 /dev/urandom | base64 > {shown}`)"
            )));
        }
        Ok(Secret(Arc::new(bytes)))
    }

    /// HMAC-SHA256 under the secret of `parts`, each length-prefixed (so that no two lists
    /// of parts hash alike).
    pub(super) fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        mac_with(&self.0, parts)
    }

    /// Whether `tag` is the MAC of `parts`, compared in constant time.
    pub(super) fn verify(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        verify_with(&self.0, parts, tag)
    }
}

fn hmac_of(key: &[u8], parts: &[&[u8]]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    for part in parts {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    mac
}

fn mac_with(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    hmac_of(key, parts).finalize().into_bytes().into()
}

fn verify_with(key: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
    // `verify_truncated_left` compares the first `tag.len()` bytes in constant time (and
    // refuses an empty tag).
    tag.len() >= LINE_MAC_BYTES && hmac_of(key, parts).verify_truncated_left(tag).is_ok()
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// A fresh random challenge from the operating system.
pub(super) fn challenge() -> Result<Vec<u8>, JobError> {
    let mut bytes = vec![0u8; CHALLENGE_BYTES];
    getrandom::fill(&mut bytes)
        .map_err(|e| JobError::Cluster(format!("no randomness for a challenge: {e}")))?;
    Ok(bytes)
}

/// What a MAC covers: a label saying which message it is, and the message.
pub(super) const HELLO_LABEL: &[u8] = b"neardup-control/2 hello";
pub(super) const REPLY_LABEL: &[u8] = b"neardup-control/2 reply";
const LINE_LABEL: &[u8] = b"neardup-control/2 heartbeat";
pub(super) const MESH_LABEL: &[u8] = b"neardup-control/2 mesh";
pub(super) const MESH_REPLY_LABEL: &[u8] = b"neardup-control/2 mesh reply";

/// The MAC line that follows a hello or a reply: `mac HEX`, or `mac none` without a secret.
pub(super) fn mac_line(secret: Option<&Secret>, parts: &[&[u8]]) -> String {
    match secret {
        Some(secret) => format!("mac {}", hex(&secret.mac(parts))),
        None => "mac none".to_string(),
    }
}

/// The authentication of one heartbeat connection, in one direction: a key derived from the
/// secret, the direction and both challenges, and the sequence number of the next line.
pub(super) struct LineKey {
    key: [u8; 32],
    seq: u64,
}

impl LineKey {
    /// `from`/`to`: process indices; `lead`/`follow`: the two challenges of the handshake.
    pub(super) fn new(
        secret: &Secret,
        from: usize,
        to: usize,
        lead: &[u8],
        follow: &[u8],
    ) -> LineKey {
        let direction = format!("{from}->{to}");
        LineKey {
            key: secret.mac(&[LINE_LABEL, direction.as_bytes(), lead, follow]),
            seq: 0,
        }
    }

    /// `line TAB mac`, the MAC over the sequence number and the line.
    pub(super) fn seal(&mut self, line: &str) -> String {
        let tag = mac_with(&self.key, &[&self.seq.to_be_bytes(), line.as_bytes()]);
        self.seq += 1;
        format!("{line}\t{}", hex(&tag[..LINE_MAC_BYTES]))
    }

    /// The line of a sealed one, if its MAC is right for the next sequence number.
    pub(super) fn open<'a>(&mut self, sealed: &'a str) -> Option<&'a str> {
        let (line, tag) = sealed.rsplit_once('\t')?;
        let tag = unhex(tag)?;
        if !verify_with(&self.key, &[&self.seq.to_be_bytes(), line.as_bytes()], &tag) {
            return None;
        }
        self.seq += 1;
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_lines_open_once_in_order_and_only_with_their_key() {
        let secret = Secret::new(b"s3cret".to_vec()).unwrap();
        let (lead, follow) = (vec![1u8; 32], vec![2u8; 32]);
        let mut send = LineKey::new(&secret, 0, 1, &lead, &follow);
        let mut receive = LineKey::new(&secret, 0, 1, &lead, &follow);
        let first = send.seal("hb");
        let second = send.seal("abort stop");
        assert_eq!(receive.open(&first), Some("hb"));
        // A replay of an earlier line, and a line of the other direction, do not open.
        assert_eq!(receive.open(&first), None);
        let mut back = LineKey::new(&secret, 1, 0, &lead, &follow);
        assert_eq!(receive.open(&back.seal("abort stop")), None);
        // Another secret, or a changed line, do not open either.
        let other = Secret::new(b"other".to_vec()).unwrap();
        let mut forged = LineKey::new(&other, 0, 1, &lead, &follow);
        forged.seq = 1;
        assert_eq!(receive.open(&forged.seal("abort stop")), None);
        assert_eq!(receive.open(&second.replace("stop", "stap")), None);
        assert_eq!(receive.open("abort stop"), None);
        assert_eq!(receive.open(&second), Some("abort stop"));
    }

    #[test]
    fn macs_cover_every_part_and_their_boundaries() {
        let secret = Secret::new(b"k".to_vec()).unwrap();
        let tag = secret.mac(&[b"ab", b"c"]);
        assert!(secret.verify(&[b"ab", b"c"], &tag));
        assert!(!secret.verify(&[b"a", b"bc"], &tag));
        assert!(!secret.verify(&[b"ab", b"c"], &tag[..8]), "too short a tag");
        assert!(!Secret::new(b"K".to_vec())
            .unwrap()
            .verify(&[b"ab", b"c"], &tag));
        assert_eq!(unhex(&hex(&tag)).as_deref(), Some(&tag[..]));
        assert_eq!(unhex("zz"), None);
        assert_eq!(format!("{secret:?}"), "Secret(..)");
    }

    #[cfg(unix)]
    #[test]
    fn secret_files_must_be_private_and_not_empty() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "abc\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let message = |r: Result<Secret, JobError>| r.unwrap_err().to_string();
        assert_eq!(
            message(Secret::from_file(&path)),
            format!(
                "cluster: {0}: the secret file may be read or written by others (mode 644); \
                 make it private with `chmod 600 {0}`",
                path.display()
            )
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            Secret::from_file(&path).unwrap(),
            Secret::new(b"abc".to_vec()).unwrap()
        );
        std::fs::write(&path, "\n").unwrap();
        assert!(message(Secret::from_file(&path)).starts_with(&format!(
            "cluster: {}: the secret file is empty",
            path.display()
        )));
    }
}
