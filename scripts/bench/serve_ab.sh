#!/usr/bin/env bash
# Query rates of several builds of `neardup serve` over one existing index, one after the
# other and then again (so that a drift of the shared machine falls on all of them): each
# build started afresh, LOADS loads of queries with 16 clients then one with 4, SECS each.
# The figures of docs/performance.md ("Serving a crawl: each file checked once, probes
# overlapped").
#
# usage: scripts/bench/serve_ab.sh INDEX N BUILD...
#   INDEX: an index written by `serve_bench make-index INDEX N` (scripts/bench/serve.sh
#   leaves one in its WORK_DIR/index); BUILD: paths of neardup binaries. BENCH: the load
#   generator (default the release build of examples/serve_bench.rs), ROUNDS (default 2),
#   LOADS (default 3), SECS (default 5). JSON lines on stdout, each after its build's path.
set -euo pipefail
INDEX=$1
N=$2
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
TARGET=${CARGO_TARGET_DIR:-$HERE/../../target}
BENCH=${BENCH:-$TARGET/release/examples/serve_bench}
ROUNDS=${ROUNDS:-2}
LOADS=${LOADS:-3}
SECS=${SECS:-5}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "machine: $(lscpu | grep 'Model name' | sed 's/ \+/ /g'); load: $(uptime)"
# shellcheck source=serve_common.sh
. "$HERE/serve_common.sh"
for round in $(seq "$ROUNDS"); do
  for NEARDUP in "$@"; do
    start "$INDEX" > /dev/null
    for clients in $(yes 16 | head -n "$LOADS") 4; do
      echo "$NEARDUP round $round: $("$BENCH" query "$ADDR" "$clients" "$SECS" "$N")"
    done
    kill -TERM "$PID"; wait "$PID" || true
  done
done
