#!/usr/bin/env python3
"""Puts together the per-worker files of `NEARDUP_OPERATOR_PROFILE=PATH` (see
dataflow/src/profile.rs): for each operator (by name and address, the same on every worker),
the seconds it ran on the least busy, the median and the busiest worker, which worker that
was, the sum over workers, and the last time (seconds since the job started) it stopped on
any worker; then each worker's seconds parked and working. Operators are listed busiest
first; nested scopes (`Dataflow`) are left out of the table, since their time includes their
operators'.

usage: operator_profile.py PATH [--top N] [--json OUT]
"""
import argparse
import glob
import json
import statistics
import sys


def load(path):
    rows = []
    for name in sorted(glob.glob(f"{path}.*.tsv")):
        with open(name) as f:
            header = f.readline().rstrip("\n").split("\t")
            for line in f:
                rows.append(dict(zip(header, line.rstrip("\n").split("\t"))))
    if not rows:
        sys.exit(f"no files {path}.*.tsv")
    return rows


def summarize(rows):
    workers = sorted({int(r["worker"]) for r in rows})
    ops, parked, dataflow = {}, {}, {}
    for r in rows:
        w = int(r["worker"])
        busy = float(r["busy_s"])
        if r["name"] == "(parked)":
            parked[w] = busy
            continue
        if r["name"] == "Dataflow":
            if r["addr"].count(".") == 0:
                dataflow[w] = dataflow.get(w, 0.0) + busy
            continue
        key = (r["name"], r["addr"])
        op = ops.setdefault(key, {"busy": {}, "last": 0.0, "first": None, "activations": 0})
        op["busy"][w] = busy
        op["activations"] += int(r["activations"])
        op["last"] = max(op["last"], float(r["last_stop_s"]))
    table = []
    for (name, addr), op in ops.items():
        each = [op["busy"].get(w, 0.0) for w in workers]
        busiest = max(range(len(workers)), key=lambda i: each[i])
        table.append({
            "name": name, "addr": addr, "least": min(each), "median": statistics.median(each),
            "most": each[busiest], "busiest_worker": workers[busiest], "sum": sum(each),
            "last_stop": op["last"], "activations": op["activations"],
        })
    table.sort(key=lambda t: -t["most"])
    return {"workers": workers, "operators": table,
            "parked": [parked.get(w, 0.0) for w in workers],
            "working": [dataflow.get(w, 0.0) for w in workers]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--json")
    args = ap.parse_args()
    s = summarize(load(args.path))
    print(f"{len(s['workers'])} workers; seconds each operator ran (least / median / most, the busiest "
          f"worker), the sum, and when it last stopped")
    print(f"{'operator':<22} {'addr':<6} {'least':>7} {'median':>7} {'most':>7} {'on':>3} {'sum':>8} {'last':>7}")
    for t in s["operators"][:args.top]:
        print(f"{t['name']:<22} {t['addr']:<6} {t['least']:>7.3f} {t['median']:>7.3f} {t['most']:>7.3f} "
              f"{t['busiest_worker']:>3} {t['sum']:>8.3f} {t['last_stop']:>7.3f}")
    fmt = lambda xs: "/".join(f"{x:.2f}" for x in (min(xs), statistics.median(xs), max(xs)))
    print(f"workers working (least/median/most): {fmt(s['working'])} s; parked: {fmt(s['parked'])} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(s, f, indent=1)


if __name__ == "__main__":
    main()
