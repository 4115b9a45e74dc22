#!/usr/bin/env python3
"""Every core counts: how `neardup run` scales with workers and processes on this machine.

The corpus is dev-medium (../shared/corpora/dev-medium) in 16 uncompressed JSONL shards of
like sizes (made once in WORK). For each mode (simhash, the default; threshold:
`--method minhash --threshold 0.8`, verified) it runs `neardup run` with 1, 2, 4, ... workers
up to the machine's processors (and, with --processes, that many processes of one worker
over loopback), RUNS times each, alternating configurations run by run so that a drift of
the machine's speed falls on all of them, and prints the medians: wall seconds, speed-up
against one worker, CPU seconds (user + system of the whole job), the stages' end times
from summary.json, and the bytes per document sent between processes.

It also measures the machine's own ceiling: `neardup hash` over the corpus, alone, then two
at once (independent processes, nothing shared): the ceiling is how much more work two such
processes do in the same time.

usage: scaling.py [--neardup PATH] [--runs N] [--processes] [--modes simhash,threshold]
env:   WORK (/tmp/neardup-scaling)
"""
import argparse
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(ROOT, "..", "shared", "corpora", "dev-medium", "corpus.jsonl.zst")
WORK = os.environ.get("WORK", "/tmp/neardup-scaling")
MODES = {"simhash": [], "threshold": ["--method", "minhash", "--threshold", "0.8"]}
SHARDS = 16


def shards():
    """The 16 shards of dev-medium, made once."""
    made = sorted(glob.glob(os.path.join(WORK, "shard-*.jsonl")))
    if len(made) == SHARDS:
        return made
    if not os.path.exists(CORPUS):
        sys.exit(f"no {CORPUS}: the shared corpora are needed")
    os.makedirs(WORK, exist_ok=True)
    lines = subprocess.run(["zstd", "-dc", CORPUS], check=True, capture_output=True).stdout.splitlines(True)
    size = sum(map(len, lines)) / SHARDS
    shard, written, paths = [], 0, []
    for line in lines:
        shard.append(line)
        written += len(line)
        if written >= size * (len(paths) + 1) and len(paths) < SHARDS - 1:
            paths.append(write_shard(len(paths), shard))
            shard = []
    paths.append(write_shard(len(paths), shard))
    return paths


def write_shard(i, lines):
    path = os.path.join(WORK, f"shard-{i:02}.jsonl")
    with open(path, "wb") as f:
        f.writelines(lines)
    return path


def timed(commands):
    """Runs the commands at once; (wall seconds, CPU seconds of all of them)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for c in commands]
    if any(p.wait() for p in procs):
        sys.exit(f"failed: {commands}")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run_commands(neardup, mode, workers, processes, inputs, out):
    """The command lines of one job: one process of `workers`, or `processes` of one."""
    base = [neardup, "run", "-q", "--overwrite", *MODES[mode], "--output", out]
    if processes == 1:
        return [base + ["-w", str(workers), *inputs]]
    hosts = os.path.join(WORK, f"hosts-{processes}.txt")
    with open(hosts, "w") as f:
        f.writelines(f"127.0.0.1:{27200 + p}\n" for p in range(processes))
    return [base + ["-n", str(processes), "-p", str(p), "-h", hosts, "-w", "1", *inputs]
            for p in reversed(range(processes))]


def measure(neardup, mode, configs, inputs, runs):
    """Medians of each configuration's runs, taken in turn."""
    walls = {c: [] for c in configs}
    cpus = {c: [] for c in configs}
    summaries = {}
    for _ in range(runs):
        for c in configs:
            out = os.path.join(WORK, f"out-{mode}-{c[0]}w-{c[1]}p")
            wall, cpu = timed(run_commands(neardup, mode, c[0], c[1], inputs, out))
            walls[c].append(wall)
            cpus[c].append(cpu)
            summaries[c] = json.load(open(os.path.join(out, "summary.json")))
    return {c: (statistics.median(walls[c]), statistics.median(cpus[c]), summaries[c]) for c in configs}


def report(mode, results):
    base = results[(1, 1)][0]
    print(f"\n{mode}: {'workers':>7} {'procs':>5} {'wall s':>7} {'speed-up':>8} {'cpu s':>6} "
          f"{'B/doc':>6}  stage end times (s)")
    for (w, p), (wall, cpu, summary) in results.items():
        per_doc = summary.get("network", {}).get("bytes_per_document", 0.0)
        stages = " ".join(f"{k} {v:.2f}" for k, v in sorted(summary["stage_seconds"].items(), key=lambda x: x[1]))
        print(f"{'':{len(mode) + 1}} {w:>7} {p:>5} {wall:>7.3f} {base / wall:>7.2f}x {cpu:>6.2f} "
              f"{per_doc:>6.0f}  {stages}")


def ceiling(neardup, inputs, runs):
    """How much more two independent processes do than one, in the same time: each hashes
    the whole corpus, alone and then two at once."""
    one = [[neardup, "hash", "--format", "jsonl", *inputs]]
    alone, both = [], []
    for _ in range(runs):
        alone.append(timed(one)[0])
        both.append(timed(one + one)[0])
    ratio = 2 * statistics.median(alone) / statistics.median(both)
    print(f"\nceiling: one `hash` over the corpus {statistics.median(alone):.3f} s, two at once "
          f"{statistics.median(both):.3f} s: {ratio:.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--neardup", default=os.path.join(ROOT, "target", "release", "neardup"))
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--processes", action="store_true")
    parser.add_argument("--modes", default="simhash,threshold")
    args = parser.parse_args()
    inputs = shards()
    cores = os.cpu_count() or 1
    counts = sorted({min(2 ** i, cores) for i in range(cores.bit_length() + 1)})
    configs = [(w, 1) for w in counts] + ([(1, p) for p in counts if p > 1] if args.processes else [])
    print(f"# {os.uname().nodename}, {cores} processors; dev-medium in {SHARDS} shards; medians of {args.runs} runs")
    for mode in args.modes.split(","):
        report(mode, measure(args.neardup, mode, configs, inputs, args.runs))
    ceiling(args.neardup, inputs, args.runs)


if __name__ == "__main__":
    main()
