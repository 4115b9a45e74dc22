#!/usr/bin/env python3
"""Query speed of neardup's saved index beside gaoya's and datasketch's in-memory MinHash
LSH indexes, on the same documents in the same run (docs/performance.md, "The saved index").

BASE (JSON lines {"id", "text"}) is indexed by each; QUERIES are then asked one at a time
(and, for gaoya, as one parallel bulk query). neardup's figure is a whole `neardup query`
process over the query file, so it includes starting, opening the index (with checksums),
reading the JSON and fingerprinting. Each is timed REPEATS times; medians are printed as JSON.

usage: index_peers.py NEARDUP INDEX_DIR BASE.jsonl QUERIES.jsonl [REPEATS]
  (INDEX_DIR made by `neardup run --index INDEX_DIR BASE.jsonl`; needs datasketch and gaoya:
  pip install datasketch gaoya, in a virtual environment outside the tree)
"""
import json
import statistics
import subprocess
import sys
import time

from datasketch import MinHash, MinHashLSH
from gaoya.minhash import MinHashStringIndex

NUM_PERM = 128
THRESHOLD = 0.8
SHINGLE = 3


def shingles(text):
    words = text.lower().split()
    return {" ".join(words[i:i + SHINGLE]) for i in range(max(1, len(words) - SHINGLE + 1))}


def signature(text):
    m = MinHash(num_perm=NUM_PERM)
    m.update_batch([s.encode() for s in shingles(text)])
    return m


def main():
    neardup, index, base_path, query_path = sys.argv[1:5]
    repeats = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    base = [json.loads(line) for line in open(base_path)]
    queries = [json.loads(line)["text"] for line in open(query_path)]
    q = len(queries)
    out = {"documents": len(base), "queries": q}

    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([neardup, "query", "-q", "-w", "1", "--index", index, query_path],
                       check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    out["neardup_query_process_per_s"] = q / statistics.median(times)

    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
    start = time.perf_counter()
    for d in base:
        lsh.insert(d["id"], signature(d["text"]))
    out["datasketch_build_s"] = time.perf_counter() - start
    with_sig, ready = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        sigs = [signature(t) for t in queries]
        middle = time.perf_counter()
        for s in sigs:
            lsh.query(s)
        end = time.perf_counter()
        with_sig.append(end - start)
        ready.append(end - middle)
    out["datasketch_query_with_signature_per_s"] = q / statistics.median(with_sig)
    out["datasketch_query_ready_signature_per_s"] = q / statistics.median(ready)

    g = MinHashStringIndex(hash_size=32, jaccard_threshold=THRESHOLD, num_bands=42,
                           band_size=3, analyzer="word", lowercase=True,
                           ngram_range=(SHINGLE, SHINGLE))
    start = time.perf_counter()
    g.par_bulk_insert_docs(list(range(len(base))), [d["text"] for d in base])
    out["gaoya_build_s"] = time.perf_counter() - start
    one, bulk = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        for t in queries:
            g.query(t)
        one.append(time.perf_counter() - start)
        start = time.perf_counter()
        g.par_bulk_query(queries)
        bulk.append(time.perf_counter() - start)
    out["gaoya_query_one_at_a_time_per_s"] = q / statistics.median(one)
    out["gaoya_par_bulk_query_per_s"] = q / statistics.median(bulk)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
