#!/usr/bin/env python3
"""What --resume saves: a run of dev-medium killed once its fingerprints are committed,
then resumed, against a clean run of the same command.

    cargo build --release && python3 scripts/bench/resume.py [--runs 5] [--workers 2]

Each repetition: a clean run into one directory (timed); a run into another directory that
the test hook NEARDUP_TEST_KILL_AFTER_FINGERPRINTS kills with SIGKILL as soon as every
worker's resume part is committed (the search is starting: the worst moment to lose a run
that has no resume, the best for one that has); then the same command with --resume
(timed). Prints the medians, the size of the resume parts, and checks that the resumed
tables have the clean run's counts. The corpus is ../shared/corpora/dev-medium.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CORPUS = os.path.join(ROOT, "..", "shared", "corpora", "dev-medium", "corpus.jsonl.zst")
HOOK = "NEARDUP_TEST_KILL_AFTER_FINGERPRINTS"


def binary():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    path = os.path.join(target, "release", "neardup")
    if not os.path.exists(path):
        sys.exit(f"{path} not found: run cargo build --release first")
    return path


def run(cmd, env=None):
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - start, done


def size_of(path):
    return sum(
        os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if not os.path.exists(CORPUS):
        sys.exit(f"{CORPUS} not found")
    neardup = binary()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEARDUP_")}
    clean_s, resumed_s, killed_s, resume_bytes = [], [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        clean, failed = os.path.join(tmp, "clean"), os.path.join(tmp, "failed")
        for _ in range(args.runs):
            for d in (clean, failed):
                shutil.rmtree(d, ignore_errors=True)
            base = [neardup, "run", "-q", "-w", str(args.workers)]
            secs, done = run(base + ["--output", clean, CORPUS], env)
            if done.returncode != 0:
                sys.exit(done.stderr.decode())
            clean_s.append(secs)
            secs, done = run(base + ["--output", failed, CORPUS], {**env, HOOK: "1"})
            if done.returncode != -9:
                sys.exit(f"the hook did not kill the run ({done.returncode}): {done.stderr.decode()}")
            killed_s.append(secs)
            resume_bytes = size_of(os.path.join(failed, "_resume"))
            secs, done = run(base + ["--resume", "--output", failed, CORPUS], env)
            if done.returncode != 0:
                sys.exit(done.stderr.decode())
            resumed_s.append(secs)
            counts = [
                json.load(open(os.path.join(d, "summary.json")))["counts"] for d in (clean, failed)
            ]
            if counts[0] != counts[1]:
                sys.exit(f"the resumed run differs from the clean one: {counts}")
    clean_m, resumed_m, killed_m = map(statistics.median, (clean_s, resumed_s, killed_s))
    print(f"dev-medium, -w {args.workers}, medians of {args.runs} runs")
    print(f"clean run:            {clean_m:.3f} s  ({', '.join(f'{s:.2f}' for s in clean_s)})")
    print(f"killed run (to kill): {killed_m:.3f} s")
    print(f"resumed run:          {resumed_m:.3f} s  ({', '.join(f'{s:.2f}' for s in resumed_s)})")
    print(f"saved by --resume:    {clean_m - resumed_m:.3f} s ({(clean_m - resumed_m) / clean_m:.0%})")
    print(f"resume parts:         {resume_bytes / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
