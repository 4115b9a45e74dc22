//! AWS `credential_process`: credentials printed by a command that a profile names, the
//! standard way to hand a tool credentials that come from SSO, an assumed role or a vault.
//! (`aws configure export-credentials --profile NAME --format process` prints them for any
//! profile the AWS CLI understands, so `credential_process = aws configure
//! export-credentials --profile NAME --format process` lets neardup use it.)
//!
//! The command runs through `sh -c`; what it prints is the JSON the AWS documentation
//! specifies: `"Version": 1`, `AccessKeyId`, `SecretAccessKey`, and optionally
//! `SessionToken` and `Expiration` (RFC 3339). The credentials are kept until
//! [`REFRESH_BEFORE`] their expiry, then the command runs again. A command that fails, or
//! prints anything else, is an error that lasts (not asked again), naming the command.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::aws::AwsCredential;
use object_store::CredentialProvider;

/// How long before their `Expiration` credentials are asked for again: five minutes, the
/// margin the AWS SDKs leave.
pub const REFRESH_BEFORE: Duration = Duration::from_secs(300);

/// Credentials from a profile's `credential_process` (see the module docs).
#[derive(Debug)]
pub(super) struct ProcessCredentials {
    command: String,
    cached: Mutex<Option<Cached>>,
}

#[derive(Debug)]
struct Cached {
    credential: Arc<AwsCredential>,
    /// Seconds since the Unix epoch; `None`: never.
    expires: Option<i64>,
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl ProcessCredentials {
    pub(super) fn new(command: &str) -> ProcessCredentials {
        ProcessCredentials {
            command: command.to_string(),
            cached: Mutex::new(None),
        }
    }

    /// Runs the command and reads what it printed.
    fn run(&self) -> Result<Cached, String> {
        let failed = |why: String| format!("credential_process `{}`: {why}", self.command);
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| failed(format!("cannot run it: {e}")))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(failed(format!(
                "it failed ({}): {}",
                output.status,
                stderr.trim()
            )));
        }
        parse(&output.stdout).map_err(failed)
    }
}

/// The credentials in a `credential_process` command's output.
fn parse(printed: &[u8]) -> Result<Cached, String> {
    let json: serde_json::Value =
        serde_json::from_slice(printed).map_err(|e| format!("it printed no JSON object ({e})"))?;
    if json["Version"].as_u64() != Some(1) {
        return Err(format!("it printed Version {}, not 1", json["Version"]));
    }
    let field = |name: &str| json[name].as_str().map(str::to_string);
    let (Some(key_id), Some(secret_key)) = (field("AccessKeyId"), field("SecretAccessKey")) else {
        return Err("it printed no AccessKeyId and SecretAccessKey".into());
    };
    let expires = match field("Expiration") {
        None => None,
        Some(text) => Some(
            chrono::DateTime::parse_from_rfc3339(&text)
                .map_err(|e| format!("Expiration {text:?} is not an RFC 3339 time ({e})"))?
                .timestamp(),
        ),
    };
    Ok(Cached {
        credential: Arc::new(AwsCredential {
            key_id,
            secret_key,
            token: field("SessionToken"),
        }),
        expires,
    })
}

#[async_trait::async_trait]
impl CredentialProvider for ProcessCredentials {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        let mut cached = self.cached.lock().expect("credentials");
        let fresh = |c: &&Cached| {
            c.expires
                .is_none_or(|at| at - now_unix() > REFRESH_BEFORE.as_secs() as i64)
        };
        if let Some(c) = cached.as_ref().filter(fresh) {
            return Ok(c.credential.clone());
        }
        let got = self
            .run()
            .map_err(|why| object_store::Error::Unauthenticated {
                path: "credential_process".into(),
                source: why.into(),
            })?;
        let credential = got.credential.clone();
        *cached = Some(got);
        Ok(credential)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_credentials_are_read_as_specified() {
        let got = parse(
            br#"{"Version": 1, "AccessKeyId": "AK", "SecretAccessKey": "SK",
                 "SessionToken": "T", "Expiration": "2026-11-27T20:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!(got.credential.key_id, "AK");
        assert_eq!(got.credential.secret_key, "SK");
        assert_eq!(got.credential.token.as_deref(), Some("T"));
        assert_eq!(got.expires, Some(1_795_809_600));
        let lasting = parse(br#"{"Version": 1, "AccessKeyId": "AK", "SecretAccessKey": "SK"}"#);
        assert_eq!(lasting.unwrap().expires, None);
        for (bad, says) in [
            (&b"not json"[..], "no JSON"),
            (br#"{"Version": 2, "AccessKeyId": "A", "SecretAccessKey": "S"}"#, "Version 2"),
            (br#"{"Version": 1, "AccessKeyId": "A"}"#, "no AccessKeyId"),
            (
                br#"{"Version": 1, "AccessKeyId": "A", "SecretAccessKey": "S", "Expiration": "soon"}"#,
                "not an RFC 3339",
            ),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(says), "{err}");
        }
    }

    #[test]
    fn a_failing_command_is_named() {
        let credentials = ProcessCredentials::new("echo broken >&2; exit 3");
        let err = credentials.run().unwrap_err();
        assert!(
            err.contains("echo broken") && err.contains("broken"),
            "{err}"
        );
    }
}
