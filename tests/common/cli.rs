//! Running the binary: a command without the developer's environment, runs that must
//! succeed or fail in a given way.

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

use super::s;

/// The environment variables neardup's flags read: a developer's environment must not change
/// a test, so every command of the tests runs without them.
pub const ENV_VARS: [&str; 10] = [
    "NEARDUP_WORKERS",
    "NEARDUP_PROCESSES",
    "NEARDUP_PROCESS",
    "NEARDUP_HOSTFILE",
    "NEARDUP_CONNECT_TIMEOUT",
    "NEARDUP_PEER_TIMEOUT",
    "NEARDUP_JOB_ID",
    "NEARDUP_SECRET_FILE",
    "NEARDUP_STORE_ATTEMPTS",
    "NEARDUP_STORE_TIMEOUT",
];

/// The binary under test, without [`ENV_VARS`].
pub fn neardup() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_neardup"));
    for var in ENV_VARS {
        cmd.env_remove(var);
    }
    cmd
}

/// `neardup run ARGS... --output OUT INPUTS...`, which must succeed.
pub fn run_ok(out: &Path, args: &[&str], inputs: &[&Path]) -> std::process::Output {
    let mut cmd = neardup();
    cmd.arg("run").args(args).args(["--output", s(out)]);
    cmd.args(inputs.iter().map(|p| s(p)));
    let output = cmd.output().unwrap();
    assert!(
        output.status.success(),
        "neardup run {args:?} failed ({:?}):\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        out.join("_SUCCESS").is_file(),
        "no _SUCCESS in {}",
        out.display()
    );
    assert!(out.join("summary.json").is_file());
    output
}

/// `neardup search ARGS... --output OUT FINGERPRINTS`, which must succeed.
pub fn search_ok(out: &Path, args: &[&str], fingerprints: &Path) {
    let output = neardup()
        .arg("search")
        .args(args)
        .args(["--output", s(out), s(fingerprints)])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "neardup search {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(out.join("_SUCCESS").is_file());
}

/// Runs a command that must be refused: exit code 1, an `error:` on stderr containing every
/// one of `needles`. Returns stderr.
pub fn assert_refused(cmd: &mut Command, needles: &[&str]) -> String {
    let output = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(1),
        "exit code; stderr:\n{stderr}"
    );
    assert!(stderr.contains("error: "), "{stderr}");
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "stderr lacks {needle:?}:\n{stderr}"
        );
    }
    stderr
}

/// Runs a command that must fail as [`assert_refused`] says, leaving no `_SUCCESS` in `out`.
/// Returns stderr.
pub fn assert_fails(cmd: &mut Command, out: &Path, needles: &[&str]) -> String {
    let stderr = assert_refused(cmd, needles);
    assert!(
        !out.join("_SUCCESS").exists(),
        "a failed run left _SUCCESS in {}",
        out.display()
    );
    stderr
}

pub fn count(summary: &Value, name: &str) -> u64 {
    summary["counts"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("summary.json has no counts.{name}: {summary}"))
}

/// Runs a command that must succeed and returns its stdout.
pub fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.assert().success().get_output().stdout.clone();
    String::from_utf8(out).unwrap()
}
