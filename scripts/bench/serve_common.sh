# Shared by scripts/bench/serve.sh, serve_writes.sh and serve_sustained.sh (sourced): the
# binaries, memory of a process, starting the service and reading its stats. Uses ROOT (the
# repository), NEARDUP (the binary) and WORK (the work directory).

# The release builds of the service and its load generator, built first unless BUILD=0
# (NEARDUP and BENCH may name others).
release_binaries() {
  local target=${CARGO_TARGET_DIR:-$ROOT/target}
  [ "${BUILD:-1}" = 0 ] || (cd "$ROOT" && cargo build -q --release --bin neardup --example serve_bench)
  NEARDUP=${NEARDUP:-$target/release/neardup}
  BENCH=${BENCH:-$target/release/examples/serve_bench}
}

# Reads the index in WORK/index into the page cache as a service that has run a while holds
# it: docs.bin first (read for a match's id and digest only), then the tables and the saved
# state, which every query and put reads, last and twice (so that they are the most recently
# and most often used, and the first to stay where the cache cannot hold the whole index).
warm_index() {
  cat "$WORK"/index/gen-*/docs.bin > /dev/null 2>&1 || true
  for _ in 1 2; do
    cat "$WORK"/index/gen-*/table-*.bin "$WORK"/index/serve-state.bin > /dev/null 2>&1 || true
  done
}

# A field of the running service's /v1/stats (ADDR).
stat_field() { curl -s "http://$ADDR/v1/stats" | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
# The heap's part (anonymous pages) and the mapped files' (the index, in the page cache).
anon_kib() { awk '/RssAnon/ {print $2}' "/proc/$1/status"; }
file_kib() { awk '/RssFile/ {print $2}' "/proc/$1/status"; }
# The mapped files' resident pages by kind (from smaps): the tables, docs.bin, the saved
# state, and any other file (the binary, libraries).
mapped_by_kind() {
  awk '/^[0-9a-f]+-[0-9a-f]+ / { f = $6 }
       /^Rss:/ { if (f ~ /table-[0-9]+\.bin$/) t += $2; else if (f ~ /docs\.bin$/) d += $2;
                 else if (f ~ /serve-state\.bin$/) s += $2; else if (f ~ /^\//) o += $2 }
       END { printf "tables %d KiB, docs.bin %d KiB, serve-state.bin %d KiB, other files %d KiB", t, d, s, o }' \
    "/proc/$1/smaps"
}

# Starts the service on a free port; sets PID and ADDR, prints the start-up seconds.
# CHECKPOINT_INTERVAL: the service's own checkpoints, every that many seconds (default 0:
# only those the script asks for).
start() {
  local log=$WORK/serve.log
  : > "$log"
  local t0; t0=$(date +%s.%N)
  "$NEARDUP" serve --index "$1" --listen 127.0.0.1:0 --checkpoint-interval "${CHECKPOINT_INTERVAL:-0}" 2>"$log" &
  PID=$!
  until grep -q 'listening on' "$log"; do
    kill -0 "$PID" 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.02
  done
  local t1; t1=$(date +%s.%N)
  ADDR=$(sed -n 's/.*listening on http:\/\/\([^ ]*\).*/\1/p' "$log" | head -1)
  echo "start-up: $(echo "$t1 - $t0" | bc) s ($(grep -o 'listening on.*' "$log"))"
}
