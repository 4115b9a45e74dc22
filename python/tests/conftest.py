"""Fixtures of the Python package's tests: the `neardup` binary the package is checked
against, the repository's example corpus, and the shared corpora and notes beside the
repository (../shared), which a test skips without, with a notice, unless
NEARDUP_REQUIRE_SHARED=1 (as CI sets it): then it fails, as the Rust tests do
(tests/common/shared.rs)."""

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
REQUIRE_SHARED = "NEARDUP_REQUIRE_SHARED"


def _binary() -> Path:
    if "NEARDUP_BIN" in os.environ:
        return Path(os.environ["NEARDUP_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "debug" / "neardup"


@pytest.fixture(scope="session")
def neardup_bin() -> Path:
    path = _binary()
    if not path.is_file():
        pytest.fail(
            f"the neardup binary {path} is not there: build it with `cargo build` "
            "(or set NEARDUP_BIN); scripts/test.sh does"
        )
    return path


@pytest.fixture(scope="session")
def cli(neardup_bin):
    """Runs the binary; returns its stdout (the test fails on a non-zero exit)."""

    def run(*args, input=None):
        done = subprocess.run(
            [str(neardup_bin), *map(str, args)],
            input=input,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, f"neardup {' '.join(map(str, args))}: {done.stderr}"
        return done.stdout

    return run


@pytest.fixture(scope="session")
def cli_json(cli):
    return lambda *args: json.loads(cli(*args))


@pytest.fixture(scope="session")
def example_corpus() -> Path:
    return REPO / "examples" / "corpus.jsonl"


def shared(relative: str) -> Path:
    """`../shared/<relative>`, or a skip (a failure under NEARDUP_REQUIRE_SHARED=1)."""
    path = SHARED / relative
    if path.exists():
        return path
    message = f"../shared/{relative} not found (needs the shared corpora and notes beside the repository)"
    if os.environ.get(REQUIRE_SHARED) == "1":
        pytest.fail(f"{message}, and {REQUIRE_SHARED}=1 requires it")
    pytest.skip(message)
