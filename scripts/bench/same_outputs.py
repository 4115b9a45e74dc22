#!/usr/bin/env python3
"""Do two builds of neardup give the same outputs? For performance work: run the jobs whose
code a change may touch with the old and the new binary, and compare every table row by row.

    python3 scripts/bench/same_outputs.py OLD_BINARY NEW_BINARY [--work DIR]

The jobs: `hash` of dev-medium under each scheme the old build knows (from the uncompressed
JSONL, and once from the .zst file), `search` of 2M synthetic fingerprints at k = 3 and 6,
`run` of dev-medium with simhash-doc and with verified MinHash, and `run` of the web-archive
samples (the URL stages: revisits, URL edges, hosts, mirrors), each with 1 and 2 workers.

`hash` output is compared byte for byte. A Parquet table is compared as the sorted list of its
rows (every column; the order of rows between part files depends on the workers), and its
column names must match. Exits 1 if anything differs or a job fails on one side only.

Needs pyarrow (the test venv has it) and ../shared/corpora; --work keeps the uncompressed
corpus and the fingerprints between calls (the benchmark suite's WORK directory can be reused).
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPORA = os.path.join(os.path.dirname(ROOT), "shared", "corpora")
DEV_MEDIUM = os.path.join(CORPORA, "dev-medium", "corpus.jsonl.zst")
WEB = os.path.join(CORPORA, "web-archive-samples")
SYNTH = os.path.join(ROOT, "scripts", "bench", "synthetic_fingerprints.py")


def rows(directory, table):
    files = sorted(glob.glob(os.path.join(directory, table, "*.parquet")))
    t = pq.read_table(files)
    columns = [c.to_pylist() for c in t.columns]
    return t.schema.names, sorted(zip(*columns), key=repr)


def compare_dirs(old, new):
    """(table, rows, same) for every table either side wrote."""
    tables = sorted(
        {d for base in (old, new) for d in os.listdir(base)
         if glob.glob(os.path.join(base, d, "*.parquet"))})
    out = []
    for table in tables:
        if not (os.path.isdir(os.path.join(old, table)) and os.path.isdir(os.path.join(new, table))):
            out.append((table, "only one side wrote it", False))
            continue
        names_a, a = rows(old, table)
        names_b, b = rows(new, table)
        out.append((table, f"{len(a):,} / {len(b):,} rows", names_a == names_b and a == b))
    return out


def run(binary, args, output=None):
    cmd = [binary] + args + (["--output", output] if output else [])
    return subprocess.run(cmd, capture_output=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--work", help="scratch directory kept between calls")
    opts = parser.parse_args()
    if not os.path.exists(DEV_MEDIUM):
        sys.exit(f"needs {DEV_MEDIUM} (../shared beside the repository)")
    work = opts.work or tempfile.mkdtemp(prefix="neardup-same-")
    os.makedirs(work, exist_ok=True)
    plain = os.path.join(work, "dm.jsonl")
    if not os.path.exists(plain):
        subprocess.run(f"zstd -dc '{DEV_MEDIUM}' > '{plain}'", shell=True, check=True)
    fps = os.path.join(work, "fps-2000000.parquet")
    if not os.path.exists(fps):
        subprocess.run([sys.executable, SYNTH, "2000000", fps], check=True)
    failed = False

    def report(name, lines):
        nonlocal failed
        print(name)
        for line, same in lines:
            failed |= not same
            print(f"  {'same' if same else 'DIFFERENT'}: {line}")

    schemes = ["simhash-doc", "simhash-shingles", "minhash", "minhash-oph"]
    known = run(opts.old, ["hash", "--help"]).stdout.decode()
    for scheme in [s for s in schemes if s in known]:
        jobs = [("uncompressed JSONL", plain)] + ([("zstd", DEV_MEDIUM)] if scheme == "simhash-doc" else [])
        for label, path in jobs:
            a = run(opts.old, ["hash", "--quiet", "--scheme", scheme, path])
            b = run(opts.new, ["hash", "--quiet", "--scheme", scheme, path])
            same = a.returncode == b.returncode == 0 and a.stdout == b.stdout
            lines = [r.stdout.count(b"\n") for r in (a, b)]
            report(f"hash --scheme {scheme}, {label}",
                   [(f"{lines[0]:,} / {lines[1]:,} lines", same)])

    jobs = []
    for workers in ("1", "2"):
        for k in ("3", "6"):
            jobs.append((f"search 2M fingerprints, k = {k}, -w {workers}",
                         ["search", "--quiet", "-k", k, "-w", workers, fps]))
        jobs.append((f"run simhash-doc, dev-medium .zst, -w {workers}",
                     ["run", "--quiet", "-w", workers, DEV_MEDIUM]))
        jobs.append((f"run MinHash, threshold 0.8, verified, -w {workers}",
                     ["run", "--quiet", "-w", workers, "--method", "minhash", "--threshold", "0.8",
                      "--shingle", "3", "--verify", "jaccard", plain]))
        jobs.append((f"run the web-archive samples, -w {workers}",
                     ["run", "--quiet", "-w", workers, WEB]))
    for name, args in jobs:
        with tempfile.TemporaryDirectory(dir=work) as scratch:
            old, new = os.path.join(scratch, "old"), os.path.join(scratch, "new")
            a, b = run(opts.old, args, old), run(opts.new, args, new)
            if a.returncode != 0 or b.returncode != 0:
                report(name, [(f"exit codes {a.returncode} / {b.returncode}",
                               a.returncode == b.returncode)])
                continue
            report(name, [(f"{table}: {count}", same) for table, count, same in compare_dirs(old, new)])
    print("every output the same" if not failed else "SOME OUTPUTS DIFFER")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
