//! The shared corpora (`../shared/corpora/` beside the repository): some tests need them, a
//! clone of the repository on its own does not have them. One file for every crate's
//! tests: `dataflow/tests/common` includes it by path.

use std::io::Write;
use std::path::PathBuf;

/// With this environment variable set to `1` (CI sets it), a test that needs the shared
/// corpora fails when they are absent instead of skipping.
pub const REQUIRE_SHARED: &str = "NEARDUP_REQUIRE_SHARED";

/// The directory `../shared/corpora/<name>` beside the repository, or `None` when it is
/// absent: then the test should return early. It prints a notice to stderr (past the test
/// harness's capture, so it shows in a normal `cargo test`), or, with
/// `NEARDUP_REQUIRE_SHARED=1`, panics.
pub fn shared_corpus(name: &str) -> Option<PathBuf> {
    let shown = format!("../shared/corpora/{name}");
    // From the workspace root (the package's directory, or the one above it that holds
    // Cargo.lock): this file also serves the tests of the workspace's other crates.
    let package = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let root = package
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").exists())
        .unwrap_or(&package);
    let dir = root.join(&shown);
    if dir.is_dir() {
        return Some(dir);
    }
    if std::env::var(REQUIRE_SHARED).as_deref() == Ok("1") {
        panic!(
            "{shown} not found ({}), and {REQUIRE_SHARED}=1 requires it: this test needs the \
             shared corpora beside the repository",
            dir.display()
        );
    }
    let test = std::thread::current()
        .name()
        .map_or_else(String::new, |name| format!(" ({name})"));
    // Straight to the stream: the test harness captures eprintln! of passing tests.
    let _ = writeln!(
        std::io::stderr(),
        "skipped{test}: {shown} not found (needs the shared corpora beside the repository)"
    );
    None
}
