#!/usr/bin/env bash
# Benchmarks on this machine, each figure the median of RUNS runs (default 3), measured as a
# whole process with /usr/bin/time (wall seconds, peak RSS). Prints a markdown table.
#
#   scripts/bench/run.sh                 # all
#   scripts/bench/run.sh fingerprint     # fingerprinting MB/s per scheme (neardup hash)
#   scripts/bench/run.sh run             # neardup run on dev-medium, -w 1 and -w 2
#   scripts/bench/run.sh search          # neardup search on synthetic fingerprints
#
# Inputs: ../shared/corpora/dev-medium (100k documents, 145 MB of JSONL text, zstd).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-3}
CORPUS=${CORPUS:-../shared/corpora/dev-medium/corpus.jsonl.zst}
SEARCH_N=${SEARCH_N:-10000000}
BIN=target/release/neardup
WORK=${WORK:-$(mktemp -d)}
cargo build --release --quiet

BYTES=$(zstd -dc "$CORPUS" | wc -c)

# median_of CMD...: runs CMD RUNS times, prints "median_wall_s median_peak_kb".
median_of() {
  local walls=() rss=()
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -f "%e %M" -o "$WORK/time" "$@" >/dev/null 2>"$WORK/stderr" || { cat "$WORK/stderr" >&2; exit 1; }
    read -r w m < "$WORK/time"; walls+=("$w"); rss+=("$m")
  done
  python3 - "${walls[*]}" "${rss[*]}" <<'PY'
import statistics, sys
walls = [float(x) for x in sys.argv[1].split()]
rss = [int(x) for x in sys.argv[2].split()]
print(statistics.median(walls), statistics.median(rss))
PY
}

row() { # name wall rss bytes
  python3 -c "import sys; n,w,r,b=sys.argv[1],float(sys.argv[2]),int(sys.argv[3]),int(sys.argv[4]); print(f'| {n} | {w:.2f} | {b/1e6/w:.1f} | {r/1024:.0f} |')" "$@"
}

bench_fingerprint() {
  echo "| fingerprinting (neardup hash, 1 core, whole process) | wall s | MB/s | peak MB |"
  echo "|---|---|---|---|"
  for scheme in simhash-doc simhash-shingles minhash; do
    read -r w r < <(median_of "$BIN" hash --quiet --scheme "$scheme" "$CORPUS")
    row "$scheme" "$w" "$r" "$BYTES"
  done
  read -r w r < <(median_of sh -c "zstd -dc '$CORPUS' > /dev/null")
  row "baseline: zstd -dc alone" "$w" "$r" "$BYTES"
}

bench_run() {
  echo "| neardup run on dev-medium | wall s | MB/s | peak MB |"
  echo "|---|---|---|---|"
  for w in 1 2; do
    read -r t r < <(median_of "$BIN" run --quiet --overwrite -w "$w" --output "$WORK/out" "$CORPUS")
    row "-w $w" "$t" "$r" "$BYTES"
  done
}

bench_search() {
  local fps="$WORK/fps-$SEARCH_N.parquet"
  [ -f "$fps" ] || .venv-bench/bin/python scripts/bench/synthetic_fingerprints.py "$SEARCH_N" "$fps"
  echo "| neardup search, $SEARCH_N synthetic fingerprints, k = 3 | wall s | M fingerprints/s | peak MB |"
  echo "|---|---|---|---|"
  for w in 1 2; do
    read -r t r < <(median_of "$BIN" search --quiet --overwrite -w "$w" --output "$WORK/sout" "$fps")
    python3 -c "import sys; w,t,r,n=sys.argv[1],float(sys.argv[2]),int(sys.argv[3]),int(sys.argv[4]); print(f'| -w {w} | {t:.2f} | {n/1e6/t:.2f} | {r/1024:.0f} |')" "$w" "$t" "$r" "$SEARCH_N"
  done
}

what=${1:-all}
case "$what" in
  fingerprint) bench_fingerprint ;;
  run) bench_run ;;
  search) bench_search ;;
  all) bench_fingerprint; echo; bench_run; echo; bench_search ;;
  *) echo "unknown benchmark $what" >&2; exit 2 ;;
esac
