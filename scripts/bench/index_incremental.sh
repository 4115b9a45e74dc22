#!/usr/bin/env bash
# An incremental run against a saved index beside a full rerun (docs/performance.md, "The
# saved index"): N documents indexed (`run --index`), then NEW more run `--against` the index,
# and the same N + NEW documents run from scratch; each timed REPEATS times, alternately.
#
# usage: scripts/bench/index_incremental.sh [N] [NEW] [WORK_DIR]
#   NEARDUP=path/to/neardup (default target/release/neardup), WORKERS (default 2),
#   PYTHON=python3 (standard library only).
set -euo pipefail
N=${1:-1000000}
NEW=${2:-$((N / 10))}
WORK=${3:-$(mktemp -d)}
HERE=$(cd "$(dirname "$0")" && pwd)
NEARDUP=${NEARDUP:-$HERE/../../target/release/neardup}
PYTHON=${PYTHON:-python3}
W=${WORKERS:-2}
mkdir -p "$WORK"
cd "$WORK"
[ -f base.jsonl ] || "$PYTHON" "$HERE/incremental_corpus.py" "$N" "$NEW" base.jsonl new.jsonl
rm -rf idx b0 full inc
seconds() { local s e; s=$(date +%s.%N); "$@"; e=$(date +%s.%N); echo "$e - $s" | bc; }
echo "index $N documents: $(seconds "$NEARDUP" run -q -w "$W" --index idx --output b0 base.jsonl) s"
for r in $(seq "${REPEATS:-3}"); do
  rm -rf full inc
  echo "full rerun of $((N + NEW)): $(seconds "$NEARDUP" run -q -w "$W" --output full base.jsonl new.jsonl) s"
  echo "incremental $NEW against the index: $(seconds "$NEARDUP" run -q -w "$W" --against idx --output inc new.jsonl) s"
done
