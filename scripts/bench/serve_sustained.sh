#!/usr/bin/env bash
# `neardup serve` under a steady stream of writes that spans its own checkpoints
# (docs/performance.md, "Serving a crawl"): over the index in WORK_DIR/index (written by
# serve.sh or serve_writes.sh), the service checkpointing every CHECKPOINT_INTERVAL seconds,
# 16 clients put 5 KB pages of new ids for SECS seconds. Prints the whole load's rate and
# latencies, the same for each WINDOW seconds of it (when the checkpoints fall, and what they
# cost the writes around them), each checkpoint the service made, and the disk's reads and
# writes a second (vmstat) over the load. Then queries, and a stop.
#
# usage: scripts/bench/serve_sustained.sh N WORK_DIR
#   SECS (default 120), CHECKPOINT_INTERVAL (default 30), WINDOW (default 5), CLIENTS
#   (default 16); NEARDUP another build of the service. Release build; BUILD=0 uses the
#   binaries already built.
set -euo pipefail
N=${1:?usage: serve_sustained.sh N WORK_DIR}
WORK=${2:?usage: serve_sustained.sh N WORK_DIR}
SECS=${SECS:-120}
WINDOW=${WINDOW:-5}
CLIENTS=${CLIENTS:-16}
export CHECKPOINT_INTERVAL=${CHECKPOINT_INTERVAL:-30}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$HERE/../..
# shellcheck source=serve_common.sh
. "$HERE/serve_common.sh"
release_binaries
[ -d "$WORK/index" ] || { echo "no index in $WORK/index: run serve.sh or serve_writes.sh first" >&2; exit 2; }
echo "machine: $(lscpu | grep 'Model name' | sed 's/ \+/ /g'); load: $(uptime)"


rm -f "$WORK/index/serve.wal"
warm_index
start "$WORK/index"
"$BENCH" query "$ADDR" 16 5 "$N" > /dev/null
"$BENCH" query "$ADDR" 16 5 "$N"
# A prefix of this run's own, so that the puts are new pages, as a crawl's mostly are.
prefix=steady$(date +%s)
vmstat 1 > "$WORK/vmstat.log" &
VMSTAT=$!
BENCH_WINDOW=$WINDOW "$BENCH" put "$ADDR" "$CLIENTS" "$SECS" "$prefix" 2> "$WORK/windows.log"
kill "$VMSTAT"; wait "$VMSTAT" 2>/dev/null || true
cat "$WORK/windows.log"
echo "checkpoints made: $(stat_field checkpoints); written since the last: $(stat_field written_since_checkpoint); background merges committed: $(stat_field merges 2>/dev/null || echo '?') (the last written in $(stat_field merge_millis 2>/dev/null || echo '?') ms)"
echo "generations: $(python3 -c "import json; m=json.load(open('$WORK/index/manifest.json')); print(len(m['generations']), [g['documents'] for g in m['generations']])")"
grep "checkpoint" "$WORK/serve.log" | tail -20 || true
# vmstat's bi / bo (blocks of 1 KiB read and written a second), one line a second.
awk '$1 ~ /^[0-9]+$/ { printf "%s/%s ", $9, $10 } END { print "" }' "$WORK/vmstat.log" | sed 's/^/disk KiB a second read\/written: /'
# Queries while the last checkpoint's state file may still be written, then after it.
echo "state file being written: $(stat_field state_pending)"
"$BENCH" query "$ADDR" 16 5 "$N"
while [ "$(stat_field state_pending)" = True ]; do sleep 0.2; done
echo "state written in $(stat_field state_millis) ms"
"$BENCH" query "$ADDR" 16 5 "$N"
kill -TERM "$PID"; wait "$PID" || true
