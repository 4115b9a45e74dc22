#!/usr/bin/env bash
# Runs one neardup job over ssh: one process per hostfile line.
#
#   deploy/ssh/launch.sh HOSTFILE -- SUBCOMMAND [FLAGS...] [INPUTS...]
#   deploy/ssh/launch.sh hosts.txt -- run -w 16 --output /shared/out /shared/corpus/
#
# HOSTFILE lists one `host:port` per line in process order (`#` comments and blank lines
# are ignored), exactly as neardup reads it: process I binds the port of line I and is
# started by `ssh HOST` (the part before the last `:`; `[v6]:port` works too). The binary,
# the inputs and the output directory must be at the same paths on every host (a shared
# file system for inputs and outputs); use absolute paths. The launcher copies the hostfile
# to each host (into $NEARDUP_REMOTE_TMP, default /tmp), starts
#   cd $PWD && exec $NEARDUP_BIN SUBCOMMAND -n N -p I -h REMOTE_HOSTFILE FLAGS...
# and prefixes every line the process writes with `[p I HOST]`.
#
# When a process fails (non-zero exit, or its ssh connection fails: ssh exits 255, also
# when the remote process is killed by a signal), the launcher kills every other process,
# on its host (`ssh HOST kill`, SIGTERM then SIGKILL) and locally (the ssh client), and
# exits with the first failure's code. Ctrl-C or SIGTERM does the same. Exit 0 when every
# process succeeded. neardup stops a job that lost a process by itself (heartbeat); the
# kill is for processes that cannot notice, and for the launcher's own Ctrl-C.
#
# The processes authenticate each other with a shared secret (docs/deploy.md, "Secrets"):
# the launcher makes 32 random bytes (or reads NEARDUP_SECRET_FILE here, if set), and sends
# them to each host over ssh's standard input (never on a command line, where `ps` would
# show them) into a private file (umask 077) beside the hostfile, removed with it; every
# process gets `--secret-file` that file.
#
# Environment:
#   NEARDUP_SECRET_FILE a file holding the job's secret (default: a fresh random one)
#   NEARDUP_BIN         remote path of the binary (default: `command -v neardup` here, or
#                       this repository's target/release/neardup)
#   NEARDUP_SSH         the ssh command (default: ssh)
#   NEARDUP_SSH_OPTS    options for every ssh call (default: -o BatchMode=yes)
#   NEARDUP_REMOTE_TMP  remote directory for the hostfile and pid file (default: /tmp)
#   NEARDUP_TIME_LIMIT  seconds after which every process is stopped and the launcher
#                       exits 124 (default: none); for hangs neardup cannot detect
# Workers per process go in FLAGS (`-w 16`); NEARDUP_* variables are not forwarded.
# See deploy/ssh/README.md and docs/deploy.md.
set -uo pipefail

usage() {
  echo "usage: $0 HOSTFILE -- SUBCOMMAND [FLAGS...] [INPUTS...]" >&2
  echo "example: $0 hosts.txt -- run -w 16 --output /shared/out /shared/corpus/" >&2
  exit 2
}

[[ $# -ge 3 && $2 == "--" ]] || usage
hostfile=$1
shift 2
[[ -r $hostfile ]] || { echo "error: cannot read hostfile $hostfile" >&2; exit 2; }

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ -z ${NEARDUP_BIN:-} ]]; then
  if NEARDUP_BIN=$(command -v neardup); then
    :
  elif [[ -x $repo/target/release/neardup ]]; then
    NEARDUP_BIN=$repo/target/release/neardup
  else
    echo "error: no neardup on PATH and no $repo/target/release/neardup: set NEARDUP_BIN" >&2
    exit 2
  fi
fi
read -r -a ssh_cmd <<<"${NEARDUP_SSH:-ssh}"
read -r -a ssh_opts <<<"${NEARDUP_SSH_OPTS--o BatchMode=yes}"
remote_tmp=${NEARDUP_REMOTE_TMP:-/tmp}
time_limit=${NEARDUP_TIME_LIMIT:-}
if [[ -n $time_limit && ! $time_limit =~ ^[1-9][0-9]*$ ]]; then
  echo "error: NEARDUP_TIME_LIMIT must be a positive number of seconds, not '$time_limit'" >&2
  exit 2
fi

# The hostfile as neardup reads it: comments and blank lines dropped.
addresses=()
while IFS= read -r line || [[ -n $line ]]; do
  line=${line%%#*}
  line=$(echo "$line" | tr -d '[:space:]')
  [[ -n $line ]] && addresses+=("$line")
done <"$hostfile"
n=${#addresses[@]}
((n > 0)) || { echo "error: hostfile $hostfile lists no host:port" >&2; exit 2; }
hosts=()
for a in "${addresses[@]}"; do
  [[ $a == *:* ]] || { echo "error: hostfile line '$a' is not host:port" >&2; exit 2; }
  h=${a%:*}
  h=${h#[}
  hosts+=("${h%]}")
done

# The job's secret: one line, the same for every process.
if [[ -n ${NEARDUP_SECRET_FILE:-} ]]; then
  secret=$(head -n 1 "$NEARDUP_SECRET_FILE") || { echo "error: cannot read NEARDUP_SECRET_FILE $NEARDUP_SECRET_FILE" >&2; exit 2; }
else
  secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
fi
[[ -n $secret ]] || { echo "error: the secret is empty" >&2; exit 2; }

# Single-quotes a word for the remote POSIX shell.
quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

subcommand=$1
shift
args=""
for a in "$@"; do args+=" $(quote "$a")"; done
lines=""
for a in "${addresses[@]}"; do lines+=" $(quote "$a")"; done

# One remote directory per process and launch: the hostfile and the process's pid.
tag="$(hostname -s 2>/dev/null || echo local)-$$-$RANDOM"
remote_dir() { echo "$remote_tmp/neardup-launch-$tag-$1"; }

remote_command() {
  local i=$1 dir
  dir=$(quote "$(remote_dir "$i")")
  printf '%s' "umask 077 && mkdir -p $dir && printf '%s\n'$lines > $dir/hosts && echo \$\$ > $dir/pid && " \
    "IFS= read -r s && printf '%s\n' \"\$s\" > $dir/secret && unset s && " \
    "{ cd $(quote "$PWD") 2>/dev/null || echo $(quote "launch.sh: $PWD does not exist here; relative paths are relative to the home directory") >&2; } && " \
    "exec $(quote "$NEARDUP_BIN") $(quote "$subcommand") -n $n -p $i -h $dir/hosts --secret-file $dir/secret$args"
}

pids=()

# Kills process I on its host: SIGTERM, then SIGKILL after 5 s, then removes its directory.
remote_kill() {
  local dir
  dir=$(quote "$(remote_dir "$1")")
  "${ssh_cmd[@]}" "${ssh_opts[@]}" "${hosts[$1]}" \
    "p=\$(cat $dir/pid 2>/dev/null) && [ -n \"\$p\" ] && kill -TERM \$p 2>/dev/null && { i=0; while kill -0 \$p 2>/dev/null && [ \$i -lt 50 ]; do sleep 0.1; i=\$((i+1)); done; kill -KILL \$p 2>/dev/null; }; rm -rf $dir" \
    </dev/null >/dev/null 2>&1
}

remote_cleanup() {
  local i
  for ((i = 0; i < n; i++)); do
    "${ssh_cmd[@]}" "${ssh_opts[@]}" "${hosts[$i]}" "rm -rf $(quote "$(remote_dir "$i")")" \
      </dev/null >/dev/null 2>&1 &
  done
  wait
}

# Every process still running: killed on its host (in parallel), then its ssh client.
stop_all() {
  local i killers=()
  for ((i = 0; i < n; i++)); do
    if [[ ${pids[$i]:-ended} != ended ]]; then
      remote_kill "$i" &
      killers+=("$!")
    fi
  done
  for pid in "${killers[@]}"; do wait "$pid"; done
  for ((i = 0; i < n; i++)); do
    [[ ${pids[$i]:-ended} != ended ]] && kill -TERM "${pids[$i]}" 2>/dev/null
  done
  for ((i = 0; i < n; i++)); do
    [[ ${pids[$i]:-ended} != ended ]] && wait "${pids[$i]}" 2>/dev/null
  done
}

# shellcheck disable=SC2329 # invoked by the traps below
on_signal() {
  trap - INT TERM
  echo "launch.sh: interrupted, stopping all $n processes" >&2
  stop_all
  remote_cleanup
  exit "$1"
}
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

echo "launch.sh: $n processes on ${hosts[*]}" >&2
for ((i = 0; i < n; i++)); do
  prefix="[p $i ${hosts[$i]}] "
  prefix=${prefix//\//\\/}
  "${ssh_cmd[@]}" "${ssh_opts[@]}" "${hosts[$i]}" "$(remote_command "$i")" <<<"$secret" \
    > >(trap '' INT; exec sed -u "s/^/$prefix/") \
    2> >(trap '' INT; exec sed -u "s/^/$prefix/" >&2) &
  pids+=("$!")
done

SECONDS=0
remaining=$n
while ((remaining > 0)); do
  if [[ -n $time_limit ]] && ((SECONDS >= time_limit)); then
    echo "launch.sh: NEARDUP_TIME_LIMIT of $time_limit s reached; stopping all processes" >&2
    trap - INT TERM
    stop_all
    remote_cleanup
    sleep 0.2
    exit 124
  fi
  for ((i = 0; i < n; i++)); do
    pid=${pids[$i]}
    [[ $pid == ended ]] && continue
    kill -0 "$pid" 2>/dev/null && continue
    wait "$pid" 2>/dev/null
    code=$?
    pids[i]=ended
    remaining=$((remaining - 1))
    if ((code != 0)); then
      echo "launch.sh: process $i on ${hosts[$i]} exited with code $code; stopping the others" >&2
      trap - INT TERM
      stop_all
      remote_cleanup
      sleep 0.2
      exit "$code"
    fi
  done
  ((remaining > 0)) && sleep 0.5
done
remote_cleanup
sleep 0.2
exit 0
