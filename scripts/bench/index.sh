#!/usr/bin/env bash
# The saved index's figures (docs/performance.md, "The saved index"): an index of N synthetic
# fingerprints (default 10 million), made by `neardup search --index`, then measured by
# `neardup index bench`: open time (sizes only, and with every checksum), single-fingerprint
# query latency p50 and p99, a 5 KB text query (fingerprinting included) p50, and one-thread
# batch throughput.
#
# usage: scripts/bench/index.sh [N] [WORK_DIR]
#   needs a release build (cargo build --release) and python3 with numpy and pyarrow for
#   scripts/bench/synthetic_fingerprints.py (PYTHON=/path/to/venv/bin/python).
set -euo pipefail
N=${1:-10000000}
WORK=${2:-$(mktemp -d)}
HERE=$(cd "$(dirname "$0")" && pwd)
NEARDUP=${NEARDUP:-$HERE/../../target/release/neardup}
PYTHON=${PYTHON:-python3}
mkdir -p "$WORK"
FPS="$WORK/fps.parquet"
[ -f "$FPS" ] || "$PYTHON" "$HERE/synthetic_fingerprints.py" "$N" "$FPS" 1
rm -rf "$WORK/out" "$WORK/index"
start=$(date +%s.%N)
"$NEARDUP" search -q -w "${WORKERS:-2}" --index "$WORK/index" --output "$WORK/out" "$FPS"
end=$(date +%s.%N)
echo "{\"search_and_index_seconds\": $(echo "$end - $start" | bc)}"
du -sh "$WORK/index"
"$NEARDUP" index bench --queries "${QUERIES:-200000}" "$WORK/index"
