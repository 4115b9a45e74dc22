#!/usr/bin/env python3
"""Writes a synthetic fingerprint table for `neardup search` benchmarks.

N random 64-bit fingerprints, about 10% of them in small planted families (1 to 3 neighbours
at Hamming distance 1 to 3), as a Parquet file with the columns neardup search reads:
doc_id (UInt64) and simhash (UInt64). Deterministic for a given seed.

usage: synthetic_fingerprints.py N OUT.parquet [SEED]
"""
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def main():
    n = int(sys.argv[1])
    out = sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    # Plant neighbours: the last 10% copy a random earlier fingerprint with 1-3 bits flipped.
    planted = n // 10
    sources = rng.integers(0, n - planted, size=planted)
    flipped = fps[sources].copy()
    for _ in range(3):
        bits = rng.integers(0, 64, size=planted).astype(np.uint64)
        mask = rng.random(planted) < 0.7
        flipped[mask] ^= np.left_shift(np.uint64(1), bits[mask])
    fps[n - planted:] = flipped
    table = pa.table({"doc_id": pa.array(np.arange(n, dtype=np.uint64)), "simhash": pa.array(fps)})
    pq.write_table(table, out, row_group_size=1_000_000, compression="zstd")


if __name__ == "__main__":
    main()
