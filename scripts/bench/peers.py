#!/usr/bin/env python3
"""Peer tools timed on the same jobs as scripts/bench/run.sh, for side-by-side speed figures.

Each task loads its input into memory first (decompressing the corpus, parsing JSON, reading
Parquet) and only then starts the clock, so the figures time the peer's *work only*. This
favours the peers: neardup's figures in run.sh are whole processes, reading and decompressing
included. Each task runs RUNS times (environment, default 3) and prints ONE JSON object on
stdout: tool, task, input, bytes (text tasks, the UTF-8 bytes of the texts processed) or n
(fingerprint tasks), runs (seconds), median_s, peak_rss_mb (the process's maximum RSS over all
runs, the in-memory input included), result (counts that show the work was real), params, note.

Threads: gaoya's bulk methods use rayon; THREADS (environment, default 1) sets
RAYON_NUM_THREADS and text-dedup's num_proc. Everything else is single-threaded Python/C++.

usage:
  peers.py install                                   # install what the tasks need (idempotent)
  peers.py gaoya-simhash CORPUS [--limit-bytes B]
  peers.py gaoya-minhash-verify CORPUS [THRESHOLD=0.8] [--limit-bytes B]
  peers.py datasketch-minhash-verify CORPUS [THRESHOLD=0.8] [--limit-bytes B]
  peers.py seomoz-find-all FPS.parquet [K=3] [BLOCKS=6]
  peers.py text-dedup CORPUS [THRESHOLD=0.8] [--limit-bytes B=20000000]

CORPUS is JSONL ({"id", "text"} per line), optionally zstd-compressed (.zst). --limit-bytes
keeps the first documents whose texts total at most B UTF-8 bytes.

Shingles for the MinHash tasks are word 3-grams of the lower-cased \\w+ tokens (the truth's
definition, as in peers_quality.py); computing them is part of the timed work.
"""
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = int(os.environ.get("RUNS", "3"))
THREADS = int(os.environ.get("THREADS", "1"))
# rayon reads this when its global pool starts, i.e. at gaoya's first bulk call.
os.environ.setdefault("RAYON_NUM_THREADS", str(THREADS))

# The shingles and Jaccard of the quality comparison (the truth's definition).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers_quality import WORD, jaccard, shingles  # noqa: E402

# (import name, pip requirement): required by the tasks.
REQUIRED = [
    ("numpy", "numpy"),
    ("pyarrow", "pyarrow"),
    ("zstandard", "zstandard"),
    ("datasketch", "datasketch==2.0.0"),
    ("gaoya", "gaoya==0.2.2"),
    # sdist only: built from source with pybind11 and a C++ compiler (g++).
    ("simhash", "simhash-pybind==0.0.3"),
]
OPTIONAL = [("text_dedup.minhash", "text-dedup==0.4.0")]


# ---------------------------------------------------------------------------------------------
# helpers

def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def emit(obj, out=None):
    (out or sys.stdout).write(json.dumps(obj) + "\n")
    (out or sys.stdout).flush()


def fail(tool, task, msg, code=1):
    emit({"tool": tool, "task": task, "error": msg})
    sys.exit(code)


def parse_args(argv, positional_defaults, limit_default=None):
    """Splits argv into positionals (filled from defaults) and --limit-bytes."""
    limit = limit_default
    pos = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--limit-bytes":
            limit = int(float(argv[i + 1]))
            i += 2
            continue
        if a.startswith("--limit-bytes="):
            limit = int(float(a.split("=", 1)[1]))
        else:
            pos.append(a)
        i += 1
    if not pos:
        sys.exit(__doc__)
    values = pos + positional_defaults[len(pos):]
    return values, limit


def load_corpus(path, limit_bytes=None):
    """Returns (ids, texts, total UTF-8 bytes of the texts). Not timed."""
    if path.endswith(".zst"):
        try:
            import zstandard
            import io
            raw = open(path, "rb")
            stream = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(raw), encoding="utf-8")
        except ImportError:
            stream = subprocess.Popen(["zstd", "-dc", path], stdout=subprocess.PIPE, text=True,
                                      encoding="utf-8").stdout
    else:
        stream = open(path, encoding="utf-8")
    ids, texts, total = [], [], 0
    with stream:
        for line in stream:
            if not line.strip():
                continue
            d = json.loads(line)
            text = d["text"]
            size = len(text.encode("utf-8"))
            if limit_bytes is not None and total + size > limit_bytes:
                break
            ids.append(d["id"])
            texts.append(text)
            total += size
    return ids, texts, total


def normalized(text):
    """The lower-cased \\w+ tokens joined by single spaces."""
    return " ".join(WORD.findall(text.lower()))


def timed(work, runs=RUNS):
    """Runs work() `runs` times; returns (seconds per run, last result)."""
    times, result = [], None
    for _ in range(runs):
        result = None  # drop the previous run's state before the next one
        start = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - start)
    return times, result


def report(tool, task, inp, size_key, size, times, result, params, note, extra=None, out=None):
    obj = {"tool": tool, "task": task, "input": inp, size_key: size,
           "runs": [round(t, 4) for t in times], "median_s": round(statistics.median(times), 4),
           "peak_rss_mb": round(peak_rss_mb(), 1), "result": result, "params": params,
           "threads": THREADS, "note": note}
    if size_key == "bytes":
        obj["mb_per_s"] = round(size / 1e6 / statistics.median(times), 2)
    if extra:
        obj.update(extra)
    emit(obj, out)


# ---------------------------------------------------------------------------------------------
# install

def pip_install(req):
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", req]
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode == 0, (p.stderr or p.stdout).strip()


def importable(name):
    p = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True)
    return p.returncode == 0, p.stderr.strip().splitlines()[-1:] if p.returncode else []


def task_install(_argv):
    failed = []
    status = {}
    for name, req in REQUIRED:
        ok, _ = importable(name)
        if not ok:
            ok, msg = pip_install(req)
            if ok:
                ok, err = importable(name)
                msg = "; ".join(err)
            if not ok:
                failed.append(f"{req}: {msg[-2000:]}")
        status[req] = "ok" if ok else "FAILED"
    for name, req in OPTIONAL:
        ok, err = importable(name)
        why = ""
        if not ok:
            ok, why = pip_install(req)
            if ok:
                ok, err = importable(name)
                why = "installed but import fails: " + "; ".join(err) if not ok else ""
        status[req] = "ok" if ok else "unavailable (optional): " + why[-600:]
    emit({"tool": "install", "python": sys.executable, "status": status})
    if failed:
        print("peers.py install: required package(s) failed:\n  " + "\n  ".join(failed), file=sys.stderr)
        sys.exit(1)


# ---------------------------------------------------------------------------------------------
# tasks

def task_gaoya_simhash(argv):
    (corpus,), limit = parse_args(argv, [None])
    from gaoya.gaoya import simhash as gs
    _, texts, total = load_corpus(corpus, limit)
    params = {"class": "gaoya.gaoya.simhash.SimHash64StringIntIndex", "method": "par_bulk_doc2signatures",
              "analyzer": "word", "lowercase": True, "ngram_range": [1, 1]}
    # The index object only holds the tokenizer settings here: doc2signature does not insert.
    index = gs.SimHash64StringIntIndex(6, 3, "word", True, (1, 1))

    def work():
        return index.par_bulk_doc2signatures(texts)

    times, sigs = timed(work)
    xor = 0
    for s in sigs:
        xor ^= s
    report("gaoya", "gaoya-simhash", corpus, "bytes", total, times,
           {"fingerprints": len(sigs), "distinct": len(set(sigs)), "xor": f"{xor:016x}"}, params,
           "64-bit simhash of the whitespace-separated words of the lower-cased text, one per document "
           "(gaoya's 'word' analyzer splits on whitespace, punctuation stays attached; counts as weights); "
           "fingerprints only, no index insertion",
           {"docs": len(texts)})


def task_gaoya_minhash_verify(argv):
    (corpus, threshold), limit = parse_args(argv, [None, "0.8"])
    threshold = float(threshold)
    import gaoya
    _, texts, total = load_corpus(corpus, limit)
    probe = gaoya.minhash.MinHashStringIndex(hash_size=32, jaccard_threshold=threshold, num_bands=None,
                                             band_size=None, num_hashes=128, analyzer="word",
                                             lowercase=False, ngram_range=(3, 3), id_container="vec")
    params = {"class": "gaoya.minhash.MinHashStringIndex", "hash_size": 32, "num_hashes_requested": 128,
              "id_container": "vec", "analyzer": "word", "ngram_range": [3, 3],
              "threshold": threshold, "index": repr(probe)}
    del probe

    def work():
        norms = [normalized(t) for t in texts]
        index = gaoya.minhash.MinHashStringIndex(hash_size=32, jaccard_threshold=threshold, num_bands=None,
                                                 band_size=None, num_hashes=128, analyzer="word",
                                                 lowercase=False, ngram_range=(3, 3), id_container="vec")
        index.par_bulk_insert_docs(list(range(len(norms))), norms)
        candidates = set()
        for i, found in enumerate(index.par_bulk_query(norms)):
            for j in found:
                if j > i:
                    candidates.add((i, j))
                elif j < i:
                    candidates.add((j, i))
        cache = {}

        def sh(i):
            s = cache.get(i)
            if s is None:
                s = cache[i] = shingles(texts[i])
            return s

        verified = sum(1 for a, b in candidates if jaccard(sh(a), sh(b)) >= threshold)
        return {"candidates": len(candidates), "verified_pairs": verified}

    times, result = timed(work)
    report("gaoya", "gaoya-minhash-verify", corpus, "bytes", total, times, result, params,
           "timed: \\w+ normalization, gaoya bulk insert (its own 3-gram shingling + MinHash) and bulk query "
           "(gaoya filters band candidates by estimated Jaccard), then exact Jaccard of word 3-gram sets "
           "for the candidate pairs", {"docs": len(texts)})


def task_datasketch_minhash_verify(argv):
    (corpus, threshold), limit = parse_args(argv, [None, "0.8"])
    threshold = float(threshold)
    from datasketch import MinHash, MinHashLSH
    _, texts, total = load_corpus(corpus, limit)
    probe = MinHashLSH(threshold=threshold, num_perm=128)
    params = {"class": "datasketch.MinHashLSH", "num_perm": 128, "threshold": threshold,
              "bands": probe.b, "rows": probe.r, "minhash_update": "update_batch"}
    del probe

    def work():
        lsh = MinHashLSH(threshold=threshold, num_perm=128)
        sets, sigs = [], []
        for i, text in enumerate(texts):
            s = shingles(text)
            m = MinHash(num_perm=128)
            m.update_batch([x.encode("utf-8") for x in s])
            sets.append(s)
            sigs.append(m)
            lsh.insert(i, m)
        candidates = set()
        for i, m in enumerate(sigs):
            for j in lsh.query(m):
                if j != i:
                    candidates.add((i, j) if i < j else (j, i))
        verified = sum(1 for a, b in candidates if jaccard(sets[a], sets[b]) >= threshold)
        return {"candidates": len(candidates), "verified_pairs": verified}

    times, result = timed(work)
    report("datasketch", "datasketch-minhash-verify", corpus, "bytes", total, times, result, params,
           "timed: word 3-gram shingling, MinHash(num_perm=128).update_batch, MinHashLSH insert and query "
           "(band candidates, no estimate filter), exact Jaccard of the candidates"
           + (f"; first documents up to --limit-bytes {limit}" if limit is not None else ""),
           {"docs": len(texts), "limit_bytes": limit})


def task_seomoz_find_all(argv):
    (path, k, blocks), _ = parse_args(argv, [None, "3", "6"])
    k, blocks = int(k), int(blocks)
    import pyarrow.parquet as pq
    import simhash
    col = pq.read_table(path, columns=["simhash"]).column("simhash")
    n = len(col)
    hashes = set(col.to_numpy().tolist())  # find_all wants a set of Python ints (-> unordered_set<uint64>)
    del col

    def work():
        return len(simhash.find_all(hashes, blocks, k))

    times, pairs = timed(work)
    report("simhash-pybind (seomoz simhash-cpp)", "seomoz-find-all", path, "n", n, times,
           {"pairs": pairs, "distinct_fingerprints": len(hashes)},
           {"function": "simhash.find_all", "different_bits": k, "number_of_blocks": blocks,
            "permutations": _comb(blocks, k)},
           "timed: find_all on a prebuilt Python set of the fingerprints (the pybind11 conversion to "
           "std::unordered_set is inside the call); it works on distinct fingerprint values, so pairs "
           "are pairs of distinct values within Hamming distance k, not document pairs")


def _comb(n, r):
    from math import comb
    return comb(n, r)


def task_text_dedup(argv):
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # text-dedup logs through rich, which writes to stdout
    try:
        (corpus, threshold), limit = parse_args(argv, [None, "0.8"], limit_default=20_000_000)
        threshold = float(threshold)
        try:
            import datasets
            from text_dedup import minhash as td_minhash
        except Exception as e:  # noqa: BLE001 - any failure means the peer cannot run here
            emit({"tool": "text-dedup", "error": f"cannot import text_dedup.minhash: {type(e).__name__}: {e}"},
                 real_stdout)
            return
        _, texts, total = load_corpus(corpus, limit)
        tmp = tempfile.mkdtemp(prefix="peers-text-dedup-")
        args_common = ["--local", "--column", "text", "--num_proc", str(THREADS), "--ngram", "3",
                       "--num_perm", "128", "--threshold", str(threshold), "--hash_func", "xxh3"]
        try:
            times, after = [], None
            for r in range(RUNS):
                # A fresh on-disk copy each run (untimed), so no run reuses another's cache files.
                src, out = os.path.join(tmp, f"in{r}"), os.path.join(tmp, f"out{r}")
                datasets.Dataset.from_dict({"text": texts}).save_to_disk(src)
                start = time.perf_counter()
                td_minhash.main.main(args=["--path", src, "--output", out] + args_common, standalone_mode=False)
                times.append(time.perf_counter() - start)
                after = len(datasets.load_from_disk(out))
                shutil.rmtree(src, ignore_errors=True)
                shutil.rmtree(out, ignore_errors=True)
        except Exception as e:  # noqa: BLE001
            emit({"tool": "text-dedup", "error": f"run failed: {type(e).__name__}: {e}"}, real_stdout)
            return
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        import importlib.metadata as md
        report("text-dedup " + md.version("text-dedup"), "text-dedup", corpus, "bytes", total, times,
               {"docs_in": len(texts), "docs_kept": after, "docs_removed": len(texts) - after},
               {"module": "text_dedup.minhash", "args": args_common, "datasets": md.version("datasets")},
               "timed: text_dedup.minhash main() on a saved HF dataset (load_from_disk, MinHash over "
               "xxh3 of word 3-grams of \\W-split tokens, LSH bands (its optimal b, r), union-find, "
               "filter, save_to_disk); no exact verification; result counts documents, not pairs"
               + (f"; first documents up to --limit-bytes {limit}" if limit is not None else ""),
               {"docs": len(texts), "limit_bytes": limit}, out=real_stdout)
    finally:
        sys.stdout = real_stdout


TASKS = {
    "install": task_install,
    "gaoya-simhash": task_gaoya_simhash,
    "gaoya-minhash-verify": task_gaoya_minhash_verify,
    "datasketch-minhash-verify": task_datasketch_minhash_verify,
    "seomoz-find-all": task_seomoz_find_all,
    "text-dedup": task_text_dedup,
}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in TASKS:
        sys.exit(__doc__)
    TASKS[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
