#!/usr/bin/env python3
"""synthetic_fingerprints.py without numpy (pyarrow only): N random fingerprints, the last 10%
copies of earlier ones with 1 to 3 bits flipped, as doc_id and simhash columns. Seed 1.

usage: synthetic_fingerprints_pyarrow.py N OUT.parquet
"""
import random, sys
import pyarrow as pa, pyarrow.parquet as pq
n = int(sys.argv[1]); rng = random.Random(1)
fps = [rng.getrandbits(64) for _ in range(n)]
planted = n // 10
for i in range(n - planted, n):
    v = fps[rng.randrange(n - planted)]
    for _ in range(rng.randint(1, 3)):
        v ^= 1 << rng.randrange(64)
    fps[i] = v
pq.write_table(pa.table({"doc_id": pa.array(range(n), pa.uint64()), "simhash": pa.array(fps, pa.uint64())}), sys.argv[2])
