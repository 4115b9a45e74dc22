#!/usr/bin/env bash
# `neardup serve`'s figures (docs/performance.md, "Serving"): over an index of N documents
# (default 1 million, random fingerprints with near copies, written by
# examples/serve_bench.rs), the start-up time and memory per document, single-fingerprint
# queries per second with p50/p99 latency, 5 KB page puts per second with p50/p99, then
# kill -9 during puts and the time to recover (replay the log) on restart.
#
# usage: scripts/bench/serve.sh [N] [WORK_DIR]
#   builds the release binary and the example (PROFILE=debug: the dev build instead, for a
#   quick look; its figures are not the service's); CLIENTS (default 4) keep-alive connections,
#   SECS (default 20) seconds per load, ROUNDS (default 3) rounds of each load (medians in
#   docs/performance.md). The load generator runs on the same machine as the service.
set -euo pipefail
N=${1:-1000000}
WORK=${2:-$(mktemp -d)}
CLIENTS=${CLIENTS:-4}
SECS=${SECS:-20}
ROUNDS=${ROUNDS:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$HERE/../..
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
PROFILE=${PROFILE:-release}
if [ "${BUILD:-1}" = 0 ]; then
  : # BUILD=0: use the binaries already built.
elif [ "$PROFILE" = release ]; then
  (cd "$ROOT" && cargo build -q --release --bin neardup --example serve_bench)
else
  (cd "$ROOT" && cargo build -q --bin neardup --example serve_bench)
fi
# NEARDUP: another build of the service to measure (its figures beside this one's).
NEARDUP=${NEARDUP:-$TARGET/$PROFILE/neardup}
# BENCH: another build of the load generator (its make-index writes that build's format).
BENCH=${BENCH:-$TARGET/$PROFILE/examples/serve_bench}
mkdir -p "$WORK"
echo "profile: $PROFILE; machine: $(lscpu | grep 'Model name' | sed 's/ \+/ /g'); load: $(uptime)"

# shellcheck source=serve_common.sh
. "$HERE/serve_common.sh"
# The same service over an empty index: the memory baseline.
rm -rf "$WORK/empty"
"$BENCH" make-index "$WORK/empty" 0
start "$WORK/empty"
EMPTY_RSS=$(rss_kib "$PID")
EMPTY_ANON=$(anon_kib "$PID")
kill -TERM "$PID"; wait "$PID" || true

rm -rf "$WORK/index"
# GENERATION: the most documents a generation of the index holds (default all: one).
"$BENCH" make-index "$WORK/index" "$N" ${GENERATION:+"$GENERATION"}
# The first start over a new index computes the service's state (ids, clusters) and saves
# it beside the index (serve-state.bin); every later start maps it.
echo -n "first "
start "$WORK/index"
echo "first start, heap: $(( ($(anon_kib "$PID") - EMPTY_ANON) * 1024 / N )) bytes per document"
kill -TERM "$PID"; wait "$PID" || true
start "$WORK/index"
RSS=$(rss_kib "$PID")
echo "memory: $RSS KiB resident with $N documents, $EMPTY_RSS KiB empty: $(( (RSS - EMPTY_RSS) * 1024 / N )) bytes per document"
ANON=$(anon_kib "$PID")
echo "of which heap: $(( (ANON - EMPTY_ANON) * 1024 / N )) bytes per document; mapped index files in the page cache: $(file_kib "$PID") KiB"
echo "mapped, by file: $(mapped_by_kind "$PID")"

for round in $(seq "$ROUNDS"); do
  "$BENCH" query "$ADDR" "$CLIENTS" "$SECS" "$N"
  "$BENCH" put "$ADDR" "$CLIENTS" "$SECS"
done
echo "after the loads: $(rss_kib "$PID") KiB resident, $(( ($(rss_kib "$PID") - EMPTY_RSS) * 1024 / N )) bytes per document; heap $(( ($(anon_kib "$PID") - EMPTY_ANON) * 1024 / N )) bytes per document; mapped $(file_kib "$PID") KiB"
echo "mapped, by file: $(mapped_by_kind "$PID")"

# kill -9 in the middle of puts (after RECOVERY_SECS of them, default 3: the log records
# to replay grow with it), then the time to come back with the log replayed.
RECOVERY_SECS=${RECOVERY_SECS:-3}
"$BENCH" put "$ADDR" "$CLIENTS" $((RECOVERY_SECS + 2)) > /dev/null 2>&1 &
LOADER=$!
sleep "$RECOVERY_SECS"
kill -9 "$PID"
wait "$PID" 2>/dev/null || true
wait "$LOADER" 2>/dev/null || true
ls -l "$WORK/index/serve.wal"
start "$WORK/index"
curl -s "http://$ADDR/v1/stats"; echo
kill -TERM "$PID"; wait "$PID" || true
