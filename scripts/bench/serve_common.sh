# Shared by scripts/bench/serve.sh and serve_writes.sh (sourced): memory of a process, and
# starting the service. Uses NEARDUP (the binary) and WORK (the work directory).

rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
# The heap's part (anonymous pages) and the mapped files' (the index, in the page cache).
anon_kib() { awk '/RssAnon/ {print $2}' "/proc/$1/status"; }
file_kib() { awk '/RssFile/ {print $2}' "/proc/$1/status"; }

# Starts the service on a free port; sets PID and ADDR, prints the start-up seconds.
start() {
  local log=$WORK/serve.log
  : > "$log"
  local t0; t0=$(date +%s.%N)
  "$NEARDUP" serve --index "$1" --listen 127.0.0.1:0 --checkpoint-interval 0 2>"$log" &
  PID=$!
  until grep -q 'listening on' "$log"; do
    kill -0 "$PID" 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.02
  done
  local t1; t1=$(date +%s.%N)
  ADDR=$(sed -n 's/.*listening on http:\/\/\([^ ]*\).*/\1/p' "$log" | head -1)
  echo "start-up: $(echo "$t1 - $t0" | bc) s ($(grep -o 'listening on.*' "$log"))"
}
