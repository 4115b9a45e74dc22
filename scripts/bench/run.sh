#!/usr/bin/env bash
# The benchmark suite: neardup and its peers (gaoya, datasketch, seomoz simhash-cpp's
# find_all, text-dedup) on the same jobs in one session; writes the tables into
# docs/performance.md and prints them. Each neardup figure is the median of RUNS whole-process
# runs (default 3) measured with /usr/bin/time; see scripts/bench/suite.py.
#
#   scripts/bench/run.sh                       # fingerprint, search, run, scaling, spill (~18 min)
#   scripts/bench/run.sh search                # one section
#   scripts/bench/run.sh big                   # 100M fingerprints in memory and spilled
#                                              # (~10 min, ~11 GB, ~45 GB disk)
#   RUNS=5 NO_WRITE=1 scripts/bench/run.sh run # more runs, leave docs/ alone
#
# Needs: zstd, python3, and the peers' packages, installed here into .venv-bench from PyPI
# (simhash-pybind builds from source with g++). Corpus: ../shared/corpora/dev-medium.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --quiet
venv=.venv-bench
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check numpy pyarrow >/dev/null
"$venv/bin/python" scripts/bench/peers.py install >&2
exec python3 scripts/bench/suite.py "$@"
