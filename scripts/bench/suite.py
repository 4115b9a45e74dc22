#!/usr/bin/env python3
"""The benchmark suite behind scripts/bench/run.sh: runs neardup and its peers on the same
jobs in one session and writes the tables into docs/performance.md (between the
`<!-- bench:begin -->` and `<!-- bench:end -->` markers), and prints them.

Every neardup figure is a whole process measured with /usr/bin/time (wall seconds, peak RSS),
the median of RUNS runs after one warm-up run. Peer figures come from scripts/bench/peers.py,
which times the peer's work only, its input already in memory (this favours the peers).
Ratios are neardup's speed over the peer's, from the medians of this session.

usage: suite.py [SECTION ...]   sections: fingerprint search run scaling spill big (default:
       all but big; big is the 100M-fingerprint search in memory and spilled, about 10
       minutes, 11 GB of memory and 45 GB of disk)

Environment: RUNS (default 3), CORPUS (default ../shared/corpora/dev-medium/corpus.jsonl.zst),
WORK (scratch directory, default a new temporary one; synthetic fingerprints are kept there
between runs), SEARCH_SIZES (default "1000000 2000000 10000000"), NO_WRITE=1 to leave
docs/performance.md alone.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(ROOT, "target", "release", "neardup")
VENV_PY = os.path.join(ROOT, ".venv-bench", "bin", "python")
PEERS = os.path.join(ROOT, "scripts", "bench", "peers.py")
SYNTH = os.path.join(ROOT, "scripts", "bench", "synthetic_fingerprints.py")
DOC = os.path.join(ROOT, "docs", "performance.md")
RUNS = int(os.environ.get("RUNS", "3"))
CORPUS = os.path.abspath(os.environ.get(
    "CORPUS", os.path.join(ROOT, "..", "shared", "corpora", "dev-medium", "corpus.jsonl.zst")))
WORK = os.environ.get("WORK") or tempfile.mkdtemp(prefix="neardup-bench-")
SEARCH_SIZES = [int(x) for x in os.environ.get("SEARCH_SIZES", "1000000 2000000 10000000").split()]
PEER_SLICE = 20_000_000  # bytes of text for the slow Python peers

results = {}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def timed(cmd):
    """Runs cmd once under /usr/bin/time; returns (wall s, peak MB)."""
    tfile = os.path.join(WORK, "time.txt")
    p = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", tfile] + cmd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr.decode()[-2000:]}")
    wall, kb = open(tfile).read().split()[-2:]
    return float(wall), int(kb) / 1024


def median_of(cmd, runs=None):
    """Median wall seconds and median peak MB of `runs` runs after a warm-up."""
    runs = runs or RUNS
    timed(cmd)
    walls, peaks = zip(*(timed(cmd) for _ in range(runs)))
    return statistics.median(walls), statistics.median(peaks)


def peer(task, *args):
    env = dict(os.environ, RUNS=str(RUNS))
    p = subprocess.run([VENV_PY, PEERS, task, *args], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return {"error": p.stderr.strip()[-500:] or "failed"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def text_bytes():
    """UTF-8 bytes of the documents' texts, the measure peers.py and neardup's summary use."""
    if "bytes" not in results:
        code = ("import json, sys\n"
                "print(sum(len(json.loads(l)['text'].encode()) for l in sys.stdin.buffer))")
        out = subprocess.run(f"zstd -dc '{CORPUS}' | python3 -c \"{code}\"", shell=True,
                             capture_output=True, text=True, check=True).stdout
        results["bytes"] = int(out)
    return results["bytes"]


def fps_file(n):
    path = os.path.join(WORK, f"fps-{n}.parquet")
    if not os.path.exists(path):
        log(f"generating {n} synthetic fingerprints")
        subprocess.run([VENV_PY, SYNTH, str(n), path], check=True)
    return path


def mbs(nbytes, seconds):
    return nbytes / 1e6 / seconds


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------

def section_fingerprint():
    n = text_bytes()
    rows = []
    gaoya = peer("gaoya-simhash", CORPUS)
    gaoya_rate = gaoya.get("mb_per_s")
    for scheme, label in [("simhash-doc", "simhash-doc"),
                          ("simhash-shingles", "simhash, word 3-grams (simhash-shingles)"),
                          ("minhash", "MinHash-128, word 5-grams"),
                          ("minhash-oph", "one-permutation MinHash-128, word 5-grams (minhash-oph)")]:
        w, m = median_of([BIN, "hash", "--quiet", "--scheme", scheme, CORPUS])
        rate = mbs(n, w)
        ratio = f"{rate / gaoya_rate:.1f}x" if gaoya_rate and scheme.startswith("simhash") else ""
        rows.append([f"neardup {label}", f"{w:.3f}", f"{rate:.0f}", f"{m:.0f}", ratio])
    # Issue 21's target is on uncompressed JSONL: the same corpus decompressed once.
    plain = os.path.join(WORK, "corpus.jsonl")
    if not os.path.exists(plain):
        subprocess.run(f"zstd -dc '{CORPUS}' > '{plain}'", shell=True, check=True)
    w, m = median_of([BIN, "hash", "--quiet", "--scheme", "simhash-doc", plain])
    rate = mbs(n, w)
    ratio = f"{rate / gaoya_rate:.1f}x" if gaoya_rate else ""
    rows.append(["neardup simhash-doc, uncompressed JSONL", f"{w:.3f}", f"{rate:.0f}", f"{m:.0f}", ratio])
    w, m = median_of(["sh", "-c", f"zstd -dc '{CORPUS}' > /dev/null"])
    rows.append(["baseline: `zstd -dc` alone", f"{w:.3f}", f"{mbs(n, w):.0f}", f"{m:.0f}", ""])
    if gaoya_rate:
        rows.append(["gaoya 0.2.2 simhash (work only, text in memory)", f"{gaoya['median_s']:.3f}",
                     f"{gaoya_rate:.0f}", f"{gaoya['peak_rss_mb']:.0f}", "1.0x"])
    else:
        rows.append(["gaoya simhash", "", "", "", gaoya.get("error", "")])
    return ("Fingerprinting, 1 core (dev-medium)",
            table(["job", "wall s", "MB/s", "peak MB", "vs gaoya simhash"], rows))


def section_search():
    rows = []
    seomoz = {}
    for n in SEARCH_SIZES:
        fps = fps_file(n)
        if n <= 2_000_000:
            seomoz[n] = peer("seomoz-find-all", fps, "3", "6")
        for k in (3, 6):
            for w in (1, 2):
                out = os.path.join(WORK, "search-out")
                wall, m = median_of([BIN, "search", "--quiet", "--overwrite", "-k", str(k),
                                     "-w", str(w), "--output", out, fps])
                pairs = json.load(open(os.path.join(out, "summary.json")))["counts"]["pairs"]
                ratio = ""
                s = seomoz.get(n, {})
                if k == 3 and w == 1 and "median_s" in s:
                    ratio = f"{s['median_s'] / wall:.1f}x"
                rows.append([f"{n:,}", k, w, f"{wall:.2f}", f"{n / 1e6 / wall:.2f}",
                             f"{m / 1024:.2f}", f"{pairs:,}", ratio])
    for n, s in seomoz.items():
        if "median_s" in s:
            rows.append([f"{n:,}", 3, "1 (seomoz `find_all`, 6 blocks, work only)",
                         f"{s['median_s']:.2f}", f"{n / 1e6 / s['median_s']:.2f}",
                         f"{s['peak_rss_mb'] / 1024:.2f}", f"{s['result']['pairs']:,} (distinct values)", "1.0x"])
    return ("Search alone (`neardup search`, synthetic fingerprints)",
            table(["fingerprints", "k", "workers", "wall s", "M fps/s", "peak GiB", "pairs",
                   "vs seomoz find_all"], rows))


def section_run():
    n = text_bytes()
    rows = []
    out = os.path.join(WORK, "run-out")
    jobs = [("simhash-doc, k = 3", []),
            ("MinHash, threshold 0.8, verified (Jaccard)",
             ["--method", "minhash", "--threshold", "0.8", "--shingle", "3", "--verify", "jaccard"]),
            ("one-permutation MinHash (minhash-oph), threshold 0.8, verified (Jaccard)",
             ["--method", "minhash-oph", "--threshold", "0.8", "--shingle", "3", "--verify", "jaccard"])]
    gaoya = peer("gaoya-minhash-verify", CORPUS, "0.8")
    datasketch = peer("datasketch-minhash-verify", CORPUS, "0.8", "--limit-bytes", str(PEER_SLICE))
    textdedup = peer("text-dedup", CORPUS, "0.8", "--limit-bytes", str(PEER_SLICE))
    for label, args in jobs:
        for w in (1, 2):
            wall, m = median_of([BIN, "run", "--quiet", "--overwrite", "-w", str(w), *args,
                                 "--output", out, CORPUS])
            rate = mbs(n, wall)
            ratios = []
            if args and w == 1:  # per core: one worker against the single-threaded peers
                for name, p in [("gaoya", gaoya), ("datasketch", datasketch), ("text-dedup", textdedup)]:
                    if "mb_per_s" in p:
                        ratios.append(f"{rate / p['mb_per_s']:.1f}x {name}")
            rows.append([label, w, f"{wall:.3f}", f"{rate:.1f}", f"{m:.0f}", ", ".join(ratios)])
    for name, p in [("gaoya 0.2.2 MinHash + exact verification", gaoya),
                    ("datasketch 2.0.0 MinHashLSH + exact verification", datasketch),
                    ("text-dedup 0.4.0 minhash (no verification)", textdedup)]:
        if "median_s" in p:
            rows.append([f"{name} ({p['bytes'] / 1e6:.0f} MB of text, work only)", 1,
                         f"{p['median_s']:.3f}", f"{p['mb_per_s']:.1f}", f"{p['peak_rss_mb']:.0f}", ""])
        else:
            rows.append([name, "", "", "", "", p.get("error", "")[:200]])
    return ("The whole job (`neardup run`, dev-medium)",
            table(["job", "workers", "wall s", "MB/s", "peak MB", "neardup vs peer, per core (MB/s)"], rows))


def section_scaling():
    rows = []
    base = None
    for n in (1_000_000, 2_000_000, 4_000_000, 8_000_000):
        wall, m = median_of([BIN, "search", "--quiet", "--overwrite", "-w", "1", "--output",
                             os.path.join(WORK, "scale-out"), fps_file(n)])
        base = base or (n, wall, m)
        rows.append([f"search, {n / 1e6:.0f}M fingerprints", f"{n // base[0]}N", f"{wall:.2f}",
                     f"{wall / base[1]:.2f}", f"{m:.0f}", f"{m / base[2]:.2f}"])
    # Prefixes of the corpus: N = an eighth of it.
    lines = int(subprocess.run(f"zstd -dc '{CORPUS}' | wc -l", shell=True, capture_output=True,
                               text=True, check=True).stdout)
    base = None
    for part in (8, 4, 2, 1):
        path = os.path.join(WORK, f"prefix-{part}.jsonl")
        if not os.path.exists(path):
            subprocess.run(f"zstd -dc '{CORPUS}' | head -n {lines // part} > '{path}'", shell=True,
                           check=True)
        wall, m = median_of([BIN, "run", "--quiet", "--overwrite", "-w", "1", "--output",
                             os.path.join(WORK, "scale-run"), path])
        base = base or (wall, m)
        rows.append([f"run, {lines // part:,} documents (uncompressed)", f"{8 // part}N",
                     f"{wall:.2f}", f"{wall / base[0]:.2f}", f"{m:.0f}", f"{m / base[1]:.2f}"])
    return ("How cost grows with N (1 worker)",
            table(["job", "size", "wall s", "time / time at N", "peak MB", "memory / memory at N"], rows))


def section_spill():
    """10M fingerprints with one worker in memory, and spilled under a 256 MiB limit."""
    n = 10_000_000
    fps = fps_file(n)
    out = os.path.join(WORK, "spill-out")
    rows = []
    base = None
    for label, flags in [("none (in memory)", ["--memory-limit", "none"]),
                         ("256M", ["--memory-limit", "256M"]),
                         ("256M, `--table-rounds 4`", ["--memory-limit", "256M", "--table-rounds", "4"])]:
        wall, m = median_of([BIN, "search", "--quiet", "--overwrite", "-w", "1", *flags,
                             "--output", out, fps])
        summary = json.load(open(os.path.join(out, "summary.json")))
        plan = summary.get("search_plan") or {}
        bits = plan.get("spill_partition_bits")
        base = base or wall
        rows.append([label, f"{wall:.2f}", f"{wall / base:.2f}", f"{m / 1024:.2f}",
                     f"{summary['counts'].get('spilled_bytes', 0) / 1e9:.1f}",
                     plan.get("rounds", ""), "" if bits is None else 2 ** bits,
                     f"{summary['counts']['pairs']:,}"])
    return ("Spilling to disk (10M fingerprints, k = 3, 1 worker)",
            table(["--memory-limit", "wall s", "vs in memory", "peak GiB", "spilled GB",
                   "rounds", "partitions per table", "pairs"], rows))


def section_big():
    n = 100_000_000
    fps = fps_file(n)
    out = os.path.join(WORK, "big-out")
    rows = []
    for label, flags in [("none (in memory)", ["--memory-limit", "none"]),
                         ("2G (spills)", ["--memory-limit", "2G"])]:
        wall, m = timed([BIN, "search", "--quiet", "--overwrite", "-w", "1", *flags,
                         "--output", out, fps])
        summary = json.load(open(os.path.join(out, "summary.json")))
        plan = summary.get("search_plan") or {}
        rows.append([f"{n:,}", label, f"{wall:.1f}", f"{n / 1e6 / wall:.2f}", f"{m / 1024:.1f}",
                     f"{summary['counts'].get('spilled_bytes', 0) / 1e9:.1f}",
                     f"{summary['counts']['pairs']:,}", plan.get("rounds", ""),
                     f"{plan.get('estimated_bytes', 0) / 2**30:.1f}"])
    return ("100M fingerprints, k = 3, 1 worker (single run)",
            table(["fingerprints", "--memory-limit", "wall s", "M fps/s", "peak GiB",
                   "spilled GB", "pairs", "rounds", "estimated GiB"], rows))


SECTION_TITLES = [
    ("Fingerprinting, 1 core (dev-medium)", None),
    ("Search alone (`neardup search`, synthetic fingerprints)", None),
    ("The whole job (`neardup run`, dev-medium)", None),
    ("How cost grows with N (1 worker)", None),
    ("Spilling to disk (10M fingerprints, k = 3, 1 worker)", None),
    ("100M fingerprints, k = 3, 1 worker (single run)", None),
]

SECTIONS = {"fingerprint": section_fingerprint, "search": section_search, "run": section_run,
            "scaling": section_scaling, "spill": section_spill, "big": section_big}


def write_doc(blocks):
    """Replaces the tables of the sections that ran; the others stay as they were."""
    text = open(DOC).read()
    begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
    if begin not in text or end not in text:
        raise SystemExit(f"{DOC} lacks the {begin} ... {end} markers")
    head, rest = text.split(begin, 1)
    old, tail = rest.split(end, 1)
    sections = {}  # title -> body, in document order
    for chunk in old.split("\n### ")[1:]:
        title, _, body = chunk.partition("\n")
        sections[title.strip()] = body.strip()
    stamp = time.strftime("%Y-%m-%d")
    for title, tbl in blocks:
        runs = "a single run" if "single run" in title else f"medians of {RUNS} runs"
        sections[title] = f"_{stamp}, {runs}:_\n\n{tbl}"
    order = [t for t, _ in SECTION_TITLES if t in sections]
    order += [t for t in sections if t not in order]
    body = "".join(f"\n### {t}\n\n{sections[t]}\n" for t in order)
    open(DOC, "w").write(head + begin + "\n_Generated by `scripts/bench/run.sh`._\n" + body + end + tail)


def main():
    chosen = sys.argv[1:] or ["fingerprint", "search", "run", "scaling", "spill"]
    for name in chosen:
        if name not in SECTIONS:
            raise SystemExit(f"unknown section {name!r}: expected {', '.join(SECTIONS)}")
    log(f"work directory: {WORK}")
    blocks = []
    for name in chosen:
        log(f"== {name}")
        title, tbl = SECTIONS[name]()
        print(f"### {title}\n\n{tbl}\n", flush=True)
        blocks.append((title, tbl))
    if not os.environ.get("NO_WRITE"):
        write_doc(blocks)
        log(f"wrote {DOC}")


if __name__ == "__main__":
    main()
