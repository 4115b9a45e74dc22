#!/usr/bin/env bash
# Runs one neardup job as N processes on this machine, W worker threads each, over loopback.
#
#   scripts/local-cluster.sh N W -- SUBCOMMAND [FLAGS...] [INPUTS...]
#   scripts/local-cluster.sh 3 2 -- run --overwrite --output out examples/corpus.jsonl
#
# Picks N free loopback ports, writes a hostfile into a temporary directory, and starts
# `neardup SUBCOMMAND -n N -p I -h HOSTFILE -w W FLAGS...` for I = 0..N-1. Each process's
# stderr and stdout lines are prefixed with `[p I]` (and stay on stderr and stdout). If a process
# exits non-zero, the others are stopped (SIGTERM, then SIGKILL after 5 s) and the script
# exits with the failed process's code (128 + signal for a process killed by a signal); it
# exits 0 when every process succeeded. Ctrl-C (SIGINT) or SIGTERM stops every process.
#
# The processes authenticate each other with a shared secret (docs/deploy.md, "Secrets"):
# the script writes 32 random bytes into a private file (mode 600) in its temporary
# directory and hands it to every process as NEARDUP_SECRET_FILE, unless NEARDUP_SECRET_FILE
# is set already (then that file is used). The file is removed with the directory.
#
# The binary is $NEARDUP_BIN, or target/release/neardup of this repository
# (`cargo build --release` first). Paths in the arguments are relative to the current
# directory, as for a single process. See docs/deploy.md.
set -uo pipefail

usage() {
  echo "usage: $0 PROCESSES WORKERS -- SUBCOMMAND [FLAGS...] [INPUTS...]" >&2
  echo "example: $0 2 1 -- run --overwrite --output out examples/corpus.jsonl" >&2
  exit 2
}

[[ $# -ge 4 && $3 == "--" ]] || usage
n=$1
w=$2
shift 3
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "error: PROCESSES must be a positive integer, not '$n'" >&2; usage; }
[[ $w =~ ^[1-9][0-9]*$ ]] || { echo "error: WORKERS must be a positive integer, not '$w'" >&2; usage; }
subcommand=$1
shift

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${NEARDUP_BIN:-$repo/target/release/neardup}
if [[ ! -x $bin ]]; then
  echo "error: $bin is not an executable (build it with \`cargo build --release\` or set NEARDUP_BIN)" >&2
  exit 2
fi

# The flags below are the job's parallelism: the environment must not contradict them.
unset NEARDUP_WORKERS NEARDUP_PROCESSES NEARDUP_PROCESS NEARDUP_HOSTFILE

tmp=$(mktemp -d "${TMPDIR:-/tmp}/neardup-cluster.XXXXXX") || exit 1
hostfile=$tmp/hosts.txt
pids=()

# The job's secret: random, readable by this user only.
if [[ -z ${NEARDUP_SECRET_FILE:-} ]]; then
  secret=$tmp/secret
  if ! (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$secret") || [[ ! -s $secret ]]; then
    echo "error: cannot write a random secret into $secret" >&2
    rm -rf "$tmp"
    exit 1
  fi
  export NEARDUP_SECRET_FILE=$secret
fi

# N distinct free ports: bound all at once (so no two are the same), then released. Another
# program could take one before neardup binds it; the job then fails at start-up and can
# simply be rerun.
free_ports() {
  if command -v python3 >/dev/null 2>&1; then
    python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print("\n".join(str(s.getsockname()[1]) for s in socks))
EOF
  else
    # No python3: random ports from 20000-59999 on which nothing listens.
    local taken=" " count=0 port
    while ((count < $1)); do
      port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
      [[ $taken == *" $port "* ]] && continue
      if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        taken="$taken$port "
        echo "$port"
        count=$((count + 1))
      fi
    done
  fi
}

ports=$(free_ports "$n") || { echo "error: cannot find $n free ports" >&2; rm -rf "$tmp"; exit 1; }
{
  echo "# neardup local cluster: $n processes x $w workers"
  for port in $ports; do echo "127.0.0.1:$port"; done
} >"$hostfile"

running() {
  local pid
  for pid in "${pids[@]}"; do
    [[ $pid == ended ]] && continue
    kill -0 "$pid" 2>/dev/null && return 0
  done
  return 1
}

# SIGTERM to every process still running, SIGKILL to those still there after 5 s.
stop_all() {
  local pid i
  for pid in "${pids[@]}"; do
    [[ $pid == ended ]] || kill -TERM "$pid" 2>/dev/null
  done
  for ((i = 0; i < 50; i++)); do
    running || break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do
    [[ $pid == ended ]] || kill -KILL "$pid" 2>/dev/null
  done
  for pid in "${pids[@]}"; do
    [[ $pid == ended ]] || wait "$pid" 2>/dev/null
  done
}

# shellcheck disable=SC2329 # invoked by the traps below
on_signal() {
  local code=$1
  trap - INT TERM
  echo "local-cluster: interrupted, stopping all $n processes" >&2
  stop_all
  rm -rf "$tmp"
  exit "$code"
}
trap 'on_signal 130' INT
trap 'on_signal 143' TERM
trap 'rm -rf "$tmp"' EXIT

for ((i = 0; i < n; i++)); do
  # Background jobs of a script ignore SIGINT: the trap above stops them. The prefixers
  # ignore it too, so that they print the processes' last words after a Ctrl-C.
  "$bin" "$subcommand" -n "$n" -p "$i" -h "$hostfile" -w "$w" "$@" \
    > >(trap '' INT; exec sed -u "s/^/[p $i] /") \
    2> >(trap '' INT; exec sed -u "s/^/[p $i] /" >&2) &
  pids+=("$!")
done

# Poll rather than `wait -n`, which needs bash >= 5.1 to say which process ended (and macOS
# ships bash 3.2). bash reaps finished children and keeps their status for `wait PID`.
remaining=$n
while ((remaining > 0)); do
  for ((i = 0; i < n; i++)); do
    pid=${pids[$i]}
    [[ $pid == ended ]] && continue
    kill -0 "$pid" 2>/dev/null && continue
    wait "$pid" 2>/dev/null # (bash would print "Killed" and the command line)
    code=$?
    pids[i]=ended
    remaining=$((remaining - 1))
    if ((code != 0)); then
      echo "local-cluster: process $i exited with code $code; stopping the others" >&2
      stop_all
      # Let the stderr prefixers print what the processes wrote last.
      sleep 0.2
      exit "$code"
    fi
  done
  ((remaining > 0)) && sleep 0.2
done
# Let the stderr prefixers print what the processes wrote last.
sleep 0.2
exit 0
