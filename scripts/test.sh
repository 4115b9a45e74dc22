#!/usr/bin/env bash
# The whole test suite: Rust unit, property, oracle and end-to-end tests, including the
# analytics-client test that opens every output table with DuckDB and pyarrow.
#
# The Python clients are installed into .venv-test (once; reused afterwards) and handed to
# the tests through NEARDUP_PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-test
if ! "$venv/bin/python" -c 'import duckdb, pyarrow, polars, warcio' 2>/dev/null; then
  echo "installing duckdb, pyarrow, polars and warcio into $venv (first run only)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check duckdb pyarrow polars warcio
fi
export NEARDUP_PYTHON="$PWD/$venv/bin/python"

# The report's browser test (tests/report_browser.rs) renders a page in Debian's Chromium.
if [ ! -x /usr/bin/chromium ]; then
  echo "installing Debian's chromium for the report's browser test (first run only)" >&2
  { apt-get install -y -q chromium >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; } ||
    echo "warning: chromium could not be installed; the browser test will skip (or fail under NEARDUP_REQUIRE_SHARED=1)" >&2
fi

cargo test --workspace --all-targets "$@"
cargo test --workspace --doc
