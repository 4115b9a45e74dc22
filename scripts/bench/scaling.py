#!/usr/bin/env python3
"""Every core counts: how `neardup run` scales with workers and processes on this machine.

**The corpus.** `--copies N` copies of dev-medium (../shared/corpora/dev-medium, 145 MB of
text, 100,000 documents), made unrelated to each other as the size benchmark makes them
(scripts/bench/size.py: copy `c` permutes the letters and digits with its own seed and
shifts the ids by `c * 1,000,000`; copy 0 is dev-medium itself), written as `--shards`
uncompressed JSONL files: shard `s` holds documents `s, s + S, s + 2S, ...` of every copy, so
the shards are of like sizes and each planted family is spread over several of them. It is
made once in WORK. The 2-core target's corpus is the default, dev-medium alone in 16
shards; a 16-core machine takes `--copies 23 --shards 48` (3.3 GB of text, the issue's size).
`--source` may name an `.xz` copy of dev-medium (read with Python's own lzma, for a machine
without zstd).

**The runs.** For each mode (simhash, the default; threshold: `--method minhash --threshold
0.8`, verified) it runs `neardup run` with 1, 2, 4, ... workers up to the machine's
processors (and, with --processes, that many processes of one worker over loopback, and
`--configs` adds any `WxP`: W workers in each of P processes). Each round runs every
configuration of every mode once, in turn, so that a drift of the machine's speed falls on
all of them, and then the ceiling. After each round it prints the medians so far (and writes
them to `--json`): wall seconds, speed-up against one worker, GB of text per second, CPU seconds (user + system of
the whole job), the stages' end times from summary.json (medians), the bytes per document
sent between processes, and the CPU seconds of each worker thread (`timely:work-N`: least,
median, most) and of the other threads, sampled from /proc every 0.1 s. `--budget S` starts
no round that would end after S seconds (judged by the longest round so far; the first round
always runs), so that a run on a lent machine ends in time. `--workers 1,16` takes only those
worker counts (by default 1, 2, 4, ... up to the processors), for a second series of the rows
that matter when time is short.

**The ceiling.** What the machine itself gives: `neardup hash` over the whole corpus in one
process, against P independent processes at once, process `i` hashing shards `i, i + P, ...`
(the same bytes in all): the ceiling at P is the first wall time over the second.

**The profile.** With `--profile FOLDER`, every run sets `NEARDUP_OPERATOR_PROFILE`
(dataflow/src/profile.rs): each worker writes the seconds each operator ran and the seconds it
was parked, and `operator_profile.py FOLDER/MODE-Ww-Pp/p` puts a configuration's workers
together (the last round's run of it), to see which operator on which worker holds a stage up.

usage: scaling.py [--neardup PATH] [--runs N] [--processes] [--modes simhash,threshold]
                  [--copies N] [--shards S] [--source PATH] [--configs 4x4,..]
                  [--budget SECONDS] [--json PATH] [--profile FOLDER] [--workers 1,16]
env:   WORK (/tmp/neardup-scaling)
"""
import argparse
import glob
import json
import lzma
import multiprocessing
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(ROOT, "..", "shared", "corpora", "dev-medium", "corpus.jsonl.zst")
WORK = os.environ.get("WORK", "/tmp/neardup-scaling")
MODES = {"simhash": [], "threshold": ["--method", "minhash", "--threshold", "0.8"]}
SAMPLE_EVERY = 0.1

sys.path.insert(0, HERE)
import size  # noqa: E402  (the copies' substitutions)


def source_lines(source):
    if not os.path.exists(source):
        sys.exit(f"no {source}: the shared corpora are needed")
    if source.endswith(".xz"):
        with lzma.open(source) as f:
            return f.read().splitlines()
    return subprocess.run(["zstd", "-dc", source], check=True, capture_output=True).stdout.splitlines()


RECORDS = []


def write_shard(args):
    """Shard `s`: documents s, s + S, ... of every copy."""
    path, s, shards, copies = args
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        for c in range(copies):
            table = size.substitution(c, size.GROUPS)
            for r in RECORDS[s::shards]:
                text = r["text"] if table is None else r["text"].translate(table)
                f.write(json.dumps({"id": c * size.ID_STRIDE + int(r["id"]), "text": text},
                                   ensure_ascii=False) + "\n")
    os.replace(path + ".tmp", path)
    return path


def corpus(source, copies, shards):
    """The shards, made once; (paths, bytes of text)."""
    folder = os.path.join(WORK, f"corpus-{copies}x{shards}")
    made = sorted(glob.glob(os.path.join(folder, "shard-*.jsonl")))
    meta = os.path.join(folder, "corpus.json")
    if len(made) != shards or not os.path.exists(meta):
        os.makedirs(folder, exist_ok=True)
        records = [json.loads(line) for line in source_lines(source) if line.strip()]
        # As in the size benchmark: a text of few distinct letters would be the same in two
        # copies, so such documents are left out when there are several copies.
        RECORDS.extend(r for r in records
                       if copies == 1 or size.distinct_symbols(r["text"]) >= size.MIN_DISTINCT_SYMBOLS)
        size.GROUPS.update(size.alphabet(RECORDS))
        jobs = [(os.path.join(folder, f"shard-{s:03}.jsonl"), s, shards, copies) for s in range(shards)]
        with multiprocessing.get_context("fork").Pool(os.cpu_count()) as pool:
            made = sorted(pool.map(write_shard, jobs))
        text_bytes = copies * sum(len(r["text"].encode()) for r in RECORDS)
        with open(meta, "w") as f:
            json.dump({"copies": copies, "shards": shards, "documents": copies * len(RECORDS),
                       "text_bytes": text_bytes, "jsonl_bytes": sum(map(os.path.getsize, made))}, f)
    return made, json.load(open(meta))["text_bytes"]


def thread_times(pids, seen, stop):
    """Until `stop`: the CPU seconds of every thread of `pids`, the last value seen."""
    tick = os.sysconf("SC_CLK_TCK")
    while True:
        for pid in pids:
            for task in glob.glob(f"/proc/{pid}/task/*"):
                try:
                    stat = open(os.path.join(task, "stat")).read()
                except OSError:
                    continue
                name = stat[stat.index("(") + 1:stat.rindex(")")]
                fields = stat[stat.rindex(")") + 2:].split()
                seen[(pid, task)] = (name, (int(fields[11]) + int(fields[12])) / tick)
        if stop.wait(SAMPLE_EVERY):
            return


def timed(commands, env=None):
    """Runs the commands at once; (wall seconds, CPU seconds of all of them, per-thread CPU)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env) for c in commands]
    seen, stop = {}, threading.Event()
    sampler = threading.Thread(target=thread_times, args=([p.pid for p in procs], seen, stop))
    sampler.start()
    errors = [p.communicate()[1] for p in procs]
    wall = time.perf_counter() - start
    stop.set()
    sampler.join()
    if any(p.returncode for p in procs):
        sys.exit(f"failed: {commands}\n" + b"".join(errors).decode(errors="replace")[-2000:])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), list(seen.values())


def run_commands(neardup, mode, workers, processes, inputs, out):
    """The command lines of one job: `processes` processes of `workers` workers."""
    base = [neardup, "run", "-q", "--overwrite", *MODES[mode], "--output", out]
    if processes == 1:
        return [base + ["-w", str(workers), *inputs]]
    hosts = os.path.join(WORK, f"hosts-{processes}.txt")
    with open(hosts, "w") as f:
        f.writelines(f"127.0.0.1:{27200 + p}\n" for p in range(processes))
    return [base + ["-n", str(processes), "-p", str(p), "-h", hosts, "-w", str(workers), *inputs]
            for p in reversed(range(processes))]


def threads_summary(threads):
    """Worker threads' CPU seconds (least, median, most) and the other threads' by name."""
    workers = sorted(cpu for name, cpu in threads if name.startswith("timely:work"))
    others = {}
    for name, cpu in threads:
        if not name.startswith("timely:work"):
            key = name.rstrip("0123456789-")
            others[key] = others.get(key, 0.0) + cpu
    return {"workers": [min(workers), statistics.median(workers), max(workers)] if workers else [],
            "each_worker": workers,
            "others": {k: round(v, 2) for k, v in sorted(others.items()) if v >= 0.01}}


def medians(runs):
    """The medians of one configuration's runs."""
    stages = {}
    for r in runs:
        for k, v in r["summary"]["stage_seconds"].items():
            stages.setdefault(k, []).append(v)
    last = runs[-1]
    return {
        "runs": len(runs),
        "wall": statistics.median(r["wall"] for r in runs),
        "cpu": statistics.median(r["cpu"] for r in runs),
        "stages": {k: statistics.median(v) for k, v in stages.items()},
        "bytes_per_document": last["summary"].get("network", {}).get("bytes_per_document", 0.0),
        "threads": threads_summary(last["threads"]),
    }


def report(results, ceilings, text_bytes, out):
    lines = []
    for mode, configs in results.items():
        base = medians(configs[(1, 1)])["wall"] if (1, 1) in configs else None
        lines.append(f"\n{mode}: {'workers':>7} {'procs':>5} {'wall s':>7} {'speed-up':>8} {'GB/s':>5} "
                     f"{'cpu s':>6} {'B/doc':>6}  workers' cpu s (least/median/most)  stage end times (s)")
        for (w, p), runs in configs.items():
            m = medians(runs)
            speed = f"{base / m['wall']:>7.2f}x" if base else f"{'':>8}"
            cpu = "/".join(f"{x:.1f}" for x in m["threads"]["workers"])
            stages = " ".join(f"{k} {v:.2f}" for k, v in sorted(m["stages"].items(), key=lambda x: x[1]))
            lines.append(f"{'':{len(mode) + 1}} {w:>7} {p:>5} {m['wall']:>7.3f} {speed} "
                         f"{text_bytes / m['wall'] / 1e9:>5.2f} {m['cpu']:>6.2f} "
                         f"{m['bytes_per_document']:>6.0f}  {cpu:>20}  {stages}")
            if out:
                out.write(json.dumps({"mode": mode, "workers": w, "processes": p, **m,
                                      "walls": [r["wall"] for r in runs]}) + "\n")
    if ceilings:
        one = statistics.median(ceilings[1])
        parts = []
        for p, walls in sorted(ceilings.items()):
            parts.append(f"{p}: {statistics.median(walls):.3f} s, {one / statistics.median(walls):.2f}x")
            if out:
                out.write(json.dumps({"ceiling": p, "walls": walls, "ratio": one / statistics.median(walls)}) + "\n")
        lines.append("\nceiling (independent `hash` processes over the same bytes): " + "; ".join(parts))
    print("\n".join(lines), flush=True)


def configurations(args, cores):
    counts = sorted({min(2 ** i, cores) for i in range(cores.bit_length() + 1)})
    if args.workers:
        counts = sorted({int(w) for w in args.workers.split(",")})
    configs = [(w, 1) for w in counts]
    if args.processes:
        configs += [(1, p) for p in counts if p > 1]
    for spec in filter(None, args.configs.split(",")):
        w, p = spec.split("x")
        configs.append((int(w), int(p)))
    return counts, list(dict.fromkeys(configs))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--neardup", default=os.path.join(ROOT, "target", "release", "neardup"))
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--processes", action="store_true")
    parser.add_argument("--modes", default="simhash,threshold")
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--source", default=CORPUS)
    parser.add_argument("--configs", default="", help="more configurations, WxP: W workers in each of P processes")
    parser.add_argument("--budget", type=float, default=float("inf"),
                        help="start no round that would end after this many seconds (by the longest so far)")
    parser.add_argument("--workers", help="only these worker counts, e.g. 1,16 (default: 1, 2, 4, ... the processors)")
    parser.add_argument("--json", help="the medians after each round, as JSON lines (rewritten)")
    parser.add_argument("--profile", help="a folder: each run's operator profile (NEARDUP_OPERATOR_PROFILE, "
                        "dataflow/src/profile.rs) goes to FOLDER/MODE-Ww-Pp/p.N.tsv, the last round's kept; "
                        "read them with operator_profile.py")
    args = parser.parse_args()
    started = time.perf_counter()
    cores = os.cpu_count() or 1
    counts, configs = configurations(args, cores)
    inputs, text_bytes = corpus(args.source, args.copies, args.shards)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"# {platform.node()}: {cores} processors ({cpu}); {args.copies} copies of dev-medium in "
          f"{args.shards} shards, {text_bytes / 1e9:.2f} GB of text (made in {time.perf_counter() - started:.0f} s); "
          f"up to {args.runs} rounds", flush=True)
    modes = args.modes.split(",")
    results = {mode: {c: [] for c in configs} for mode in modes}
    ceilings = {p: [] for p in counts}
    longest_round = 0.0
    for round_ in range(args.runs):
        elapsed = time.perf_counter() - started
        if round_ > 0 and elapsed + longest_round > args.budget:
            print(f"# budget of {args.budget:.0f} s: {round_} rounds (another would end near "
                  f"{elapsed + longest_round:.0f} s)", flush=True)
            break
        round_started = time.perf_counter()
        for mode in modes:
            for w, p in configs:
                out = os.path.join(WORK, f"out-{mode}-{w}w-{p}p")
                env = None
                if args.profile:
                    folder = os.path.join(args.profile, f"{mode}-{w}w-{p}p")
                    os.makedirs(folder, exist_ok=True)
                    env = dict(os.environ, NEARDUP_OPERATOR_PROFILE=os.path.join(folder, "p"))
                wall, cpu_s, threads = timed(run_commands(args.neardup, mode, w, p, inputs, out), env)
                summary = json.load(open(os.path.join(out, "summary.json")))
                results[mode][(w, p)].append({"wall": wall, "cpu": cpu_s, "summary": summary, "threads": threads})
        for p in counts:
            commands = [[args.neardup, "hash", "--format", "jsonl", *inputs[i::p]] for i in range(p)]
            ceilings[p].append(timed(commands)[0])
        longest_round = max(longest_round, time.perf_counter() - round_started)
        print(f"\n## after round {round_ + 1} ({time.perf_counter() - started:.0f} s)", flush=True)
        out = open(args.json + ".tmp", "w") if args.json else None
        report(results, ceilings, text_bytes, out)
        if out:
            out.close()
            os.replace(args.json + ".tmp", args.json)


if __name__ == "__main__":
    main()
