#!/usr/bin/env python3
"""Mirror hosts within the memory limit (issue 32): a synthetic crawl of many pages on
many hosts, some hosts mirrored whole under another host's directory, run by two builds
under one `--memory-limit`; prints each run's wall time, peak resident memory and the
mirrors stage's time, and checks that both builds write the same `mirrors/` and `hosts/`.

    python3 scripts/bench/mirrors.py --pages 2000000 --bin A --bin B [--memory-limit 256M]

**The crawl** (`crawl.jsonl`, made once in `--work`): `--pages` pages on `--pages / 200`
hosts (`hNNNNN.example`, paths `/dDD/pNNNNN.html`, 60 words each drawn from 50,000, so no two
pages are alike); every tenth host mirrored whole under `/mirror/hNNNNN/` on one of 20
mirror hosts, 9 of its 10 pages copied exactly, and every hundredth page also served at
`/print/` on its own host. Every page carries its URL (`--url-field url`), so the URL,
cross-host and mirror stages all run.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time


def build(path, pages):
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(50_000)]
    hosts = max(1, pages // 200)
    n = 0
    with open(path, "w") as out:
        def page(url, text):
            nonlocal n
            out.write(json.dumps({"id": f"d{n}", "url": url, "text": text}) + "\n")
            n += 1
        for i in range(pages):
            host = i % hosts
            text = " ".join(rng.choice(vocab) for _ in range(60))
            path_ = f"/d{i // hosts % 20:02d}/p{i:07d}.html"
            page(f"http://h{host:05d}.example{path_}", text)
            if host % 10 == 0 and i // hosts % 10 != 0:
                page(f"http://m{host // 10 % 20:02d}.example/mirror/h{host:05d}{path_}", text)
            if i % 100 == 0:
                page(f"http://h{host:05d}.example/print{path_}", text)
    return n


def rows(table_dir):
    import pyarrow.parquet as pq
    out = []
    for name in sorted(os.listdir(table_dir)):
        if name.endswith(".parquet"):
            out.extend(tuple(r.values()) for r in pq.read_table(os.path.join(table_dir, name)).to_pylist())
    return sorted(out, key=repr)


def run(binary, crawl, out, limit, workers):
    cmd = ["/usr/bin/time", "-v", binary, "run", "--url-field", "url", "-w", str(workers),
           "--memory-limit", limit, "--overwrite", "--output", out, crawl]
    t = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t
    if p.returncode != 0:
        sys.exit(f"{binary} failed:\n{p.stderr[-3000:]}")
    rss = next(int(l.split()[-1]) for l in p.stderr.splitlines() if "Maximum resident" in l)
    summary = json.load(open(os.path.join(out, "summary.json")))
    stages = summary.get("stage_seconds", {})
    return {"wall_s": round(wall, 1), "peak_rss_mb": round(rss / 1024),
            "mirrors_s": stages.get("mirrors"), "mirrors": summary["counts"].get("mirrors"),
            "partial": summary["counts"].get("partial_mirrors"),
            "documents": summary["counts"]["documents"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=2_000_000)
    ap.add_argument("--bin", action="append", required=True)
    ap.add_argument("--memory-limit", default="256M")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--work", default="/tmp/neardup-mirrors-bench")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    crawl = os.path.join(a.work, f"crawl-{a.pages}.jsonl")
    if not os.path.exists(crawl):
        docs = build(crawl + ".tmp", a.pages)
        os.rename(crawl + ".tmp", crawl)
        print(f"built {crawl}: {docs} documents, {os.path.getsize(crawl) / 1e6:.0f} MB", flush=True)
    tables = []
    for i, binary in enumerate(a.bin):
        out = os.path.join(a.work, f"out-{i}")
        r = run(binary, crawl, out, a.memory_limit, a.workers)
        print(json.dumps({"bin": binary, **r}), flush=True)
        tables.append((rows(os.path.join(out, "mirrors")), rows(os.path.join(out, "hosts"))))
    same = all(t == tables[0] for t in tables)
    print(f"mirrors/ and hosts/ the same in every build: {same} "
          f"({len(tables[0][0])} mirror rows, {len(tables[0][1])} hosts)")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
