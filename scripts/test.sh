#!/usr/bin/env bash
# The whole test suite: Rust unit, property, oracle and end-to-end tests, including the
# analytics-client test that opens every output table with DuckDB and pyarrow; then the
# Python package (python/), built into .venv-test, and its pytest tests.
#
# The Python clients are installed into .venv-test (once; reused afterwards) and handed to
# the tests through NEARDUP_PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-test
if ! "$venv/bin/python" -c 'import duckdb, pyarrow, polars, warcio, pytest, maturin, azure.storage.blob' 2>/dev/null; then
  echo "installing duckdb, pyarrow, polars, warcio, pytest, maturin and azure-storage-blob into $venv (first run only)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check duckdb pyarrow polars warcio pytest maturin azure-storage-blob
fi
export NEARDUP_PYTHON="$PWD/$venv/bin/python"

# The report's browser test (tests/report_browser.rs) renders a page in Debian's Chromium.
if [ ! -x /usr/bin/chromium ]; then
  echo "installing Debian's chromium for the report's browser test (first run only)" >&2
  { apt-get install -y -q chromium >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; } ||
    echo "warning: chromium could not be installed; the browser test will skip (or fail under NEARDUP_REQUIRE_SHARED=1)" >&2
fi

# One target directory for the workspace and the Python package (its own Cargo workspace):
# the package's dev build then reuses the dependencies the test build compiled.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

# The object store tests (tests/store_cli.rs) read from a real S3-compatible server on
# loopback: s3s-fs, a Rust S3 server over a directory, from crates.io (0.14.1: later
# releases need a newer Rust than the machine's). Built once into the target directory.
s3_server="$CARGO_TARGET_DIR/tools/bin/s3s-fs"
if [ ! -x "$s3_server" ]; then
  echo "installing s3s-fs, an S3 server for the object store tests (first run only)" >&2
  cargo install --quiet --locked s3s-fs@0.14.1 --features binary --root "$CARGO_TARGET_DIR/tools" ||
    echo "warning: s3s-fs could not be installed; the object store tests will skip (or fail under NEARDUP_REQUIRE_SHARED=1)" >&2
fi
export NEARDUP_S3_SERVER="$s3_server"
# ... and from Azure's emulator, Azurite (Microsoft's, from the npm registry), the blobs
# uploaded by Microsoft's Python client (azure-storage-blob, installed above).
azurite_dir="$CARGO_TARGET_DIR/tools/azurite"
if [ ! -x "$azurite_dir/node_modules/.bin/azurite-blob" ]; then
  echo "installing Azurite, Azure's storage emulator, for the object store tests (first run only)" >&2
  npm install --silent --no-audit --no-fund --prefix "$azurite_dir" azurite@3.35.0 >/dev/null ||
    echo "warning: Azurite could not be installed; its test will skip (or fail under NEARDUP_REQUIRE_SHARED=1)" >&2
fi
export NEARDUP_AZURITE="$azurite_dir/node_modules/.bin/azurite-blob"

cargo test --workspace --all-targets "$@"
cargo test --workspace --doc

# The Python package, built with the dev profile (as the tests' build) by maturin, the
# build backend installed above, and installed into the venv; then its tests, against the
# binary the Rust tests built.
echo "building the Python package (python/) into $venv" >&2
PATH="$PWD/$venv/bin:$PATH" MATURIN_PEP517_ARGS="--profile dev" "$venv/bin/pip" install --quiet --disable-pip-version-check \
  --no-build-isolation --force-reinstall --no-deps ./python
export NEARDUP_BIN="$CARGO_TARGET_DIR/debug/neardup"
status=0
"$venv/bin/python" -m pytest -q python/tests || status=$?
if [ "$status" -eq 5 ]; then
  echo "error: pytest collected no tests in python/tests" >&2
  exit 1
fi
exit "$status"
