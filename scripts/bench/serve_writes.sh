#!/usr/bin/env bash
# `neardup serve` under many writes (docs/performance.md, "Serving a crawl"): over an index
# of N documents (`examples/serve_bench.rs make-index`, as scripts/bench/serve.sh makes it),
# queries with 4 and 16 clients, then FOUR_SECS of 5 KB page puts with 4 clients and
# PUT_SECS with 16, the heap
# each written document costs, queries again, a checkpoint's time and the heap after it,
# then puts, kill -9 and the time to recover.
#
# usage: scripts/bench/serve_writes.sh [N] [WORK_DIR]
#   PUT_SECS (default 140: about a million puts on a 2-core machine) seconds of puts;
#   RECOVER_SECS (default 15: about 100,000) seconds of puts before the kill -9; SECS
#   (default 5) seconds per query load; DURING_SECS (default 5) seconds of puts of new
#   pages right after each checkpoint, while its state file is written;
#   NEARDUP another build of the service to measure. Release build.
#   GENERATION: the most documents a generation of the index holds (as serve.sh);
#   REUSE=1: measure the index already in WORK_DIR/index (written by serve.sh or an earlier
#   run; its log is removed first); CHECKPOINT=0: no checkpoint; MERGE_SECS (default 0):
#   after the checkpoint, that many seconds of puts and a second checkpoint, which merges
#   the first's generation where it holds no more documents than the writes since
#   (docs/serve.md); the puts replace the first's pages, or with MERGE_IDS=new are new
#   pages (the merge then carries the first's over).
set -euo pipefail
N=${1:-1000000}
WORK=${2:-$(mktemp -d)}
PUT_SECS=${PUT_SECS:-140}
RECOVER_SECS=${RECOVER_SECS:-15}
SECS=${SECS:-5}
DURING_SECS=${DURING_SECS:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$HERE/../..
# shellcheck source=serve_common.sh
. "$HERE/serve_common.sh"
release_binaries
mkdir -p "$WORK"
echo "machine: $(lscpu | grep 'Model name' | sed 's/ \+/ /g'); load: $(uptime)"


if [ "${REUSE:-0}" = 1 ]; then
  rm -f "$WORK/index/serve.wal"
  # Its pages into the page cache (what a serving machine has after a while): read cold
  # from disk, a query at 100M documents waits on the disk for every probe.
  warm_index
else
  rm -rf "$WORK/index"
  "$BENCH" make-index "$WORK/index" "$N" ${GENERATION:+"$GENERATION"}
fi
# The first start saves the service's state beside the index; measure from the second.
start "$WORK/index"; kill -TERM "$PID"; wait "$PID" || true
start "$WORK/index"
# A first load maps the pages queries read into the process (a minor fault each): not
# measured, so that the rates before and after the writes compare alike.
"$BENCH" query "$ADDR" 16 "$SECS" "$N" > /dev/null
for clients in 4 16; do "$BENCH" query "$ADDR" "$clients" "$SECS" "$N"; done
HEAP0=$(anon_kib "$PID")
# PUTs with 4 clients first (FOUR_SECS, default 10: new pages of their own), then the
# PUT_SECS of 16.
"$BENCH" put "$ADDR" 4 "${FOUR_SECS:-10}" four
"$BENCH" put "$ADDR" 16 "$PUT_SECS"
WRITTEN=$(stat_field written_since_checkpoint)
HEAP1=$(anon_kib "$PID")
echo "after $WRITTEN writes: heap $HEAP1 KiB (was $HEAP0): $(( (HEAP1 - HEAP0) * 1024 / WRITTEN )) bytes a written document; mapped $(file_kib "$PID") KiB: $(mapped_by_kind "$PID")"
for clients in 4 16; do "$BENCH" query "$ADDR" "$clients" "$SECS" "$N"; done
if [ "${CHECKPOINT:-1}" = 1 ]; then
  checkpoint() {
    t0=$(date +%s.%N)
    curl -s -X POST "http://$ADDR/v1/checkpoint"; echo
    echo "checkpoint: $(echo "$(date +%s.%N) - $t0" | bc) s; heap after it $(anon_kib "$PID") KiB; generations $(python3 -c "import json; m=json.load(open('$WORK/index/manifest.json')); print([g['documents'] for g in m['generations']], 'deleted', sum(g.get('deleted', 0) for g in m['generations']))")"
    du -sh "$WORK/index" | cut -f1 | sed 's/^/index on disk: /'
    # Writes go on while the checkpoint's state file is written (in the background since
    # issue 36: `state_pending`); then the time it took.
    "$BENCH" put "$ADDR" 16 "$DURING_SECS" during
    while [ "$(stat_field state_pending 2>/dev/null || echo False)" = True ]; do sleep 0.2; done
    echo "state written after the checkpoint in $(stat_field state_millis 2>/dev/null || echo '?') ms"
  }
  checkpoint
  for clients in 4 16; do "$BENCH" query "$ADDR" "$clients" "$SECS" "$N"; done
  if [ "${MERGE_SECS:-0}" -gt 0 ]; then
    if [ "${MERGE_IDS:-same}" = new ]; then prefix=more; else prefix=bench; fi
    "$BENCH" put "$ADDR" 16 "$MERGE_SECS" "$prefix"
    echo "written since the checkpoint: $(stat_field written_since_checkpoint)"
    checkpoint
    for clients in 4 16; do "$BENCH" query "$ADDR" "$clients" "$SECS" "$N"; done
  fi
fi
# Writes since the checkpoint, then kill -9 and the recovery.
"$BENCH" put "$ADDR" 16 "$((RECOVER_SECS + 5))" > /dev/null 2>&1 &
LOADER=$!
sleep "$RECOVER_SECS"
kill -9 "$PID"
wait "$PID" 2>/dev/null || true
wait "$LOADER" 2>/dev/null || true
ls -l "$WORK/index/serve.wal"
start "$WORK/index"
echo "recovered: $(stat_field replayed_records) log records replayed; heap $(anon_kib "$PID") KiB"
kill -TERM "$PID"; wait "$PID" || true
