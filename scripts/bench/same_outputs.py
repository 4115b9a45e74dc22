#!/usr/bin/env python3
"""Do two builds of neardup give the same outputs? For performance work: run the jobs whose
code a change may touch with the old and the new binary, and compare every table row by row.

    python3 scripts/bench/same_outputs.py OLD_BINARY NEW_BINARY [--work DIR]

The jobs: `hash` of dev-medium under each scheme the old build knows (from the uncompressed
JSONL, and once from the .zst file), `search` of 2M synthetic fingerprints at k = 3 and 6,
`run` of dev-medium with simhash-doc and with verified MinHash, and `run` of the web-archive
samples (the URL stages: revisits, URL edges, hosts, mirrors), each with 1 and 2 workers.
The end of a run and the query path (`--only lifecycle`): dev-small in two batches, the first
with `--index` (simhash, and MinHash with `--index-shingles`) and `--write-dedup`, the second
`--against` that index with `--update-index`, then `query` of the second batch against the
index (1 and 2 threads); `run --substrings --write-dedup --strike`; `extract` and `export`;
and every command's `--help`, byte for byte.

`hash`, `query` and `--help` output is compared byte for byte; a deduplicated corpus file as
its sorted lines (JSONL) or rows (Parquet). A Parquet table is compared as the sorted list of its
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


def dedup_files(directory):
    """{relative path: sorted lines or rows} of a --write-dedup directory."""
    out = {}
    for dirpath, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, directory)
            if name.endswith(".parquet"):
                t = pq.read_table(path)
                out[rel] = (t.schema.names, sorted(zip(*[c.to_pylist() for c in t.columns]), key=repr))
            else:
                with open(path, "rb") as f:
                    out[rel] = sorted(f.read().split(b"\n"))
    return out


def run(binary, args, output=None):
    cmd = [binary] + args + (["--output", output] if output else [])
    return subprocess.run(cmd, capture_output=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--work", help="scratch directory kept between calls")
    parser.add_argument("--only", nargs="+", default=["hash", "run", "lifecycle"],
                        choices=["hash", "run", "lifecycle"],
                        help="the groups of jobs to run (default: all)")
    opts = parser.parse_args()
    if not os.path.exists(DEV_MEDIUM):
        sys.exit(f"needs {DEV_MEDIUM} (../shared beside the repository)")
    work = opts.work or tempfile.mkdtemp(prefix="neardup-same-")
    os.makedirs(work, exist_ok=True)
    # Both binaries run as `neardup` (clap prints the name it was started as, in --help).
    for side in ("old", "new"):
        link = os.path.join(work, f"bin-{side}", "neardup")
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.abspath(getattr(opts, side)), link)
        setattr(opts, side, link)
    plain = os.path.join(work, "dm.jsonl")
    if {"hash", "run"} & set(opts.only) and not os.path.exists(plain):
        subprocess.run(f"zstd -dc '{DEV_MEDIUM}' > '{plain}'", shell=True, check=True)
    fps = os.path.join(work, "fps-2000000.parquet")
    if "run" in opts.only and not os.path.exists(fps):
        subprocess.run([sys.executable, SYNTH, "2000000", fps], check=True)
    failed = False
    only = set(opts.only)

    def report(name, lines):
        nonlocal failed
        print(name)
        for line, same in lines:
            failed |= not same
            print(f"  {'same' if same else 'DIFFERENT'}: {line}")

    if "hash" not in only:
        schemes = []
    else:
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
    for workers in (("1", "2") if "run" in only else ()):
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
    if "lifecycle" in opts.only:
        lifecycle(opts, work, report)
    print("every output the same" if not failed else "SOME OUTPUTS DIFFER")
    sys.exit(1 if failed else 0)


def lifecycle(opts, work, report):
    """The end of a run (index, against, dedup corpus, substrings), query, extract, export,
    and --help, old against new."""
    small = os.path.join(CORPORA, "dev-small", "corpus.jsonl")
    with open(small, "rb") as f:
        lines = f.read().split(b"\n")
    batches = []
    for i, part in enumerate((lines[:6000], lines[6000:])):
        path = os.path.join(work, f"batch{i + 1}.jsonl")
        with open(path, "wb") as f:
            f.write(b"\n".join(l for l in part if l) + b"\n")
        batches.append(path)
    commands = ["hash", "compare", "run", "search", "extract", "eval", "substrings", "query",
                "index", "serve", "export", "report"]
    for command in [None] + commands:
        args = ([command] if command else []) + ["--help"]
        a, b = run(opts.old, args), run(opts.new, args)
        report(f"neardup {' '.join(args)}", [(f"{len(a.stdout):,} / {len(b.stdout):,} bytes",
                                              a.returncode == b.returncode and a.stdout == b.stdout)])
    schemes = [("simhash", []),
               ("MinHash 0.8 verified", ["--method", "minhash", "--threshold", "0.8", "--shingle", "3",
                                         "--verify", "jaccard", "--index-shingles"])]
    for workers in ("1", "2"):
        for label, extra in schemes:
            with tempfile.TemporaryDirectory(dir=work) as scratch:
                lines = []
                for side, binary in (("old", opts.old), ("new", opts.new)):
                    d = os.path.join(scratch, side)
                    os.makedirs(d)
                    first = run(binary, ["run", "--quiet", "-w", workers, *extra,
                                         "--index", f"{d}/idx", "--write-dedup", f"{d}/dedup1",
                                         batches[0]], f"{d}/out1")
                    second = run(binary, ["run", "--quiet", "-w", workers, *extra,
                                          "--against", f"{d}/idx", "--update-index",
                                          "--write-dedup", f"{d}/dedup2", batches[1]], f"{d}/out2")
                    queries = [run(binary, ["query", "--quiet", "--index", f"{d}/idx", "-w", w, batches[1]])
                               for w in ("1", "2")]
                    lines.append((first, second, queries))
                (a1, a2, aq), (b1, b2, bq) = lines
                name = f"{label}: --index, --write-dedup, then --against --update-index, query, -w {workers}"
                codes = [r.returncode for r in (a1, a2, b1, b2, *aq, *bq)]
                if any(codes):
                    report(name, [(f"exit codes {codes}", False)])
                    continue
                old, new = os.path.join(scratch, "old"), os.path.join(scratch, "new")
                rows_ = []
                for out in ("out1", "out2"):
                    rows_ += [(f"{out}/{t}: {c}", same)
                              for t, c, same in compare_dirs(f"{old}/{out}", f"{new}/{out}")]
                for dedup in ("dedup1", "dedup2"):
                    fa, fb = dedup_files(f"{old}/{dedup}"), dedup_files(f"{new}/{dedup}")
                    rows_.append((f"{dedup}: {len(fa)} / {len(fb)} files", fa == fb))
                for w, (qa, qb) in enumerate(zip(aq, bq)):
                    na, nb = qa.stdout.count(b"\n"), qb.stdout.count(b"\n")
                    rows_.append((f"query -w {w + 1}: {na:,} / {nb:,} lines", qa.stdout == qb.stdout))
                report(name, rows_)
    jobs = [("run --substrings 100 --write-dedup --strike substrings, dev-small",
             lambda b, d: [run(b, ["run", "--quiet", "--substrings", "100", "--write-dedup", f"{d}/dedup",
                                   "--strike", "substrings", small], f"{d}/out")]),
            ("extract the web-archive samples, then export a run of them",
             lambda b, d: [run(b, ["extract", "--quiet", WEB], f"{d}/extract"),
                           run(b, ["run", "--quiet", WEB], f"{d}/run"),
                           run(b, ["export", f"{d}/run"], f"{d}/export")])]
    for name, job in jobs:
        with tempfile.TemporaryDirectory(dir=work) as scratch:
            old, new = os.path.join(scratch, "old"), os.path.join(scratch, "new")
            a, b = job(opts.old, old), job(opts.new, new)
            codes = [r.returncode for r in a + b]
            if any(codes):
                report(name, [(f"exit codes {codes}", False)])
                continue
            rows_ = []
            for sub in sorted(os.listdir(old)):
                if glob.glob(os.path.join(old, sub, "*", "*.parquet")):
                    rows_ += [(f"{sub}/{t}: {c}", same) for t, c, same in
                              compare_dirs(os.path.join(old, sub), os.path.join(new, sub))]
                else:
                    fa, fb = dedup_files(os.path.join(old, sub)), dedup_files(os.path.join(new, sub))
                    rows_.append((f"{sub}: {len(fa)} / {len(fb)} files", fa == fb))
            report(name, rows_)


if __name__ == "__main__":
    main()
