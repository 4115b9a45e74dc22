#!/usr/bin/env python3
"""Several "machines" on one machine: neardup as 1, 2 and 4 processes, each in its own network
namespace (its own address, its links rate-shaped), against one process of one and of two
workers, on dev-medium cut into 16 uncompressed JSONL shards.

    sudo python3 scripts/bench/cluster_net.py            # build, run, print the tables
    RUNS=5 python3 scripts/bench/cluster_net.py --only simhash

Each configuration runs RUNS times (default 3, alternating configurations so that a slow spell
of the shared machine hits them all); the figures are medians of the whole job's wall time
(every process started to the last one done), the speed-up over one process of one worker, and
`network.bytes_per_document` from the run's summary.json (what crossed between processes).

The namespaces hang off one bridge; each host's link (its veth end, both directions) is shaped
to RATE (default 1gbit) with a token bucket (`tc tbf`). A delay (`tc netem delay 0.5ms`) is
added too when the kernel has sch_netem; when it has not (this machine's kernel, 6.18 without
modules), the delay is skipped and the script says so. Process i is pinned to core i mod
CORES with taskset, so 2 processes on 2 cores each have their own, and 4 share two by two.

Needs root (ip netns, tc), iproute2, taskset, zstd; ../shared/corpora/dev-medium.
"""

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "corpora" / "dev-medium" / "corpus.jsonl.zst"
BIN = Path(os.environ.get("NEARDUP_BIN", REPO / "target" / "release" / "neardup"))
RUNS = int(os.environ.get("RUNS", "3"))
RATE = os.environ.get("RATE", "1gbit")
DELAY = os.environ.get("DELAY", "0.5ms")
SHARDS = 16
TAG = f"ndbench{os.getpid()}"
SUBNET = "10.204.0"

MODES = {
    "simhash": [],
    "minhash": ["--method", "minhash", "--threshold", "0.8"],
}


def sh(*args, check=True, **kw):
    return subprocess.run(args, check=check, capture_output=True, text=True, **kw)


def cut_shards(dest: Path) -> list:
    """dev-medium's lines dealt into SHARDS files in contiguous runs (so each shard is a piece
    of the corpus, as shards of a crawl are)."""
    files = [dest / f"shard-{i:02}.jsonl" for i in range(SHARDS)]
    if all(f.exists() for f in files):
        return files
    dest.mkdir(parents=True, exist_ok=True)
    lines = subprocess.run(["zstd", "-dc", str(CORPUS)], check=True, capture_output=True).stdout.splitlines(True)
    per = -(-len(lines) // SHARDS)
    for i, f in enumerate(files):
        f.write_bytes(b"".join(lines[i * per:(i + 1) * per]))
    return files


class Hosts:
    """`n` namespaces on a bridge, host i at SUBNET.(i+1), links shaped."""

    def __init__(self, n: int):
        self.names = []
        self.delay = False
        try:
            self.build(n)
        except BaseException:
            self.close()
            raise

    def build(self, n: int):
        tag = f"{TAG}n{n}"
        hub = f"{tag}h"
        self.add(hub)
        sh("ip", "-n", hub, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", hub, "link", "set", "br0", "up")
        for i in range(1, n + 1):
            name = f"{tag}-{i}"
            self.add(name)
            veth = f"v{i}"
            sh("ip", "-n", hub, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", name)
            sh("ip", "-n", hub, "link", "set", veth, "master", "br0")
            sh("ip", "-n", hub, "link", "set", veth, "up")
            sh("ip", "-n", name, "addr", "add", f"{SUBNET}.{i}/24", "dev", "eth0")
            sh("ip", "-n", name, "link", "set", "eth0", "up")
            sh("ip", "-n", name, "link", "set", "lo", "up")
            for ns, dev in [(name, "eth0"), (hub, veth)]:
                self.shape(ns, dev)

    def add(self, name):
        sh("ip", "netns", "add", name)
        self.names.append(name)

    def shape(self, ns, dev):
        netem = sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "handle", "1:",
                   "netem", "delay", DELAY, check=False)
        if netem.returncode == 0:
            self.delay = True
            sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:",
               "tbf", "rate", RATE, "burst", "256kb", "latency", "50ms")
        else:
            sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", RATE,
               "burst", "256kb", "latency", "50ms")

    def host(self, i):
        return self.names[i + 1]

    def close(self):
        for name in reversed(self.names):
            sh("ip", "netns", "del", name, check=False)


def run_local(workers, mode, shards, out):
    args = [str(BIN), "run", "--quiet", "--overwrite", "-w", str(workers), "--output", str(out)]
    start = time.monotonic()
    sh(*args, *MODES[mode], *map(str, shards))
    return time.monotonic() - start


def run_cluster(hosts: Hosts, n, mode, shards, out, hostfile: Path):
    port = 7100
    hostfile.write_text("".join(f"{SUBNET}.{i + 1}:{port}\n" for i in range(n)))
    cores = os.cpu_count() or 1
    procs = []
    start = time.monotonic()
    for i in range(n):
        cmd = ["ip", "netns", "exec", hosts.host(i), "taskset", "-c", str(i % cores), str(BIN), "run", "--quiet",
               "--overwrite", "-w", "1", "-n", str(n), "-p", str(i), "-h", str(hostfile), "--output", str(out),
               *MODES[mode], *map(str, shards)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    for i, p in enumerate(procs):
        _, err = p.communicate(timeout=600)
        if p.returncode != 0:
            sys.exit(f"process {i} of {n} failed ({p.returncode}):\n{err}")
    return time.monotonic() - start


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def startup(work: Path, runs: int):
    """Two processes over the 22-document example on loopback, against one process: the
    fixed cost of a multi-process job (wall seconds, medians)."""
    example = REPO / "examples" / "corpus.jsonl"
    two, one = [], []
    for r in range(runs):
        hostfile = work / "hosts-startup.txt"
        hostfile.write_text(f"127.0.0.1:{free_port()}\n127.0.0.1:{free_port()}\n")
        out = work / "startup"
        start = time.monotonic()
        procs = [subprocess.Popen([str(BIN), "run", "--quiet", "--overwrite", "-n", "2", "-p", str(i), "-h",
                                   str(hostfile), "--output", str(out), str(example)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for i in range(2)]
        for p in procs:
            _, err = p.communicate(timeout=60)
            if p.returncode != 0:
                sys.exit(f"start-up run failed:\n{err}")
        two.append(time.monotonic() - start)
        start = time.monotonic()
        sh(str(BIN), "run", "--quiet", "--overwrite", "--output", str(work / "startup-1"), str(example))
        one.append(time.monotonic() - start)
    return statistics.median(two), statistics.median(one)


def main():
    if os.geteuid() != 0:
        sys.exit("needs root (ip netns, tc)")
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    if not os.environ.get("NEARDUP_BIN"):
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=REPO, check=True)
    work = Path(tempfile.mkdtemp(prefix="nd-cluster-net-"))
    shards = cut_shards(Path("/tmp/nd-dev-medium-16"))
    configs = [("1 process, 1 worker", 1, 1), ("1 process, 2 workers", 1, 2), ("2 processes, 1 worker each", 2, 1),
               ("4 processes, 1 worker each", 4, 1)]
    two, one = startup(work, max(RUNS, 5))
    hosts = {}
    try:
        for n in (2, 4):
            hosts[n] = Hosts(n)
        delay = any(h.delay for h in hosts.values())
        rows = []
        for mode in MODES:
            if only and mode != only:
                continue
            times = {c[0]: [] for c in configs}
            per_doc = {}
            for _ in range(RUNS):
                for name, n, w in configs:
                    out = work / f"{mode}-{n}-{w}"
                    if n == 1:
                        t = run_local(w, mode, shards, out)
                    else:
                        t = run_cluster(hosts[n], n, mode, shards, out, work / f"hosts-{n}.txt")
                    times[name].append(t)
                    summary = json.loads((out / "summary.json").read_text())
                    per_doc[name] = (summary["network"]["bytes_per_document"], summary["network"]["by_stage"])
            base = statistics.median(times[configs[0][0]])
            for name, n, w in configs:
                med = statistics.median(times[name])
                rows.append((mode, name, med, base / med, per_doc[name]))
    finally:
        for h in hosts.values():
            h.close()
        shutil.rmtree(work, ignore_errors=True)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"machine: {os.cpu_count()} cores, {cpu}; links {RATE}"
          + (f", delay {DELAY}" if delay else ", no delay (the kernel has no sch_netem)") + f"; medians of {RUNS}")
    print(f"start-up: 2 processes over the 22-document example on loopback {two:.3f} s, one process {one:.3f} s")
    print("| mode | configuration | wall s | speed-up | bytes/document between processes | by stage |")
    print("|---|---|---|---|---|---|")
    for mode, name, med, speed, (bpd, by_stage) in rows:
        stages = ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in by_stage.items()) or "-"
        print(f"| {mode} | {name} | {med:.2f} | {speed:.2f}x | {bpd:.0f} | {stages} |")


if __name__ == "__main__":
    main()
