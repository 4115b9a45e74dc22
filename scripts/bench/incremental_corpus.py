#!/usr/bin/env python3
"""Writes the corpus of the incremental benchmark (scripts/bench/index_incremental.sh).

N + NEW documents of 60 words drawn from a 20,000-word vocabulary, 10% of them near copies
(one word changed) of an earlier document; the first N go to BASE, the last NEW to NEW (so
new documents also copy indexed ones). JSON lines {"id", "text"}. Deterministic (seed 5).

usage: incremental_corpus.py N NEW BASE.jsonl NEW.jsonl
"""
import json, random, sys
n = int(sys.argv[1]); new = int(sys.argv[2]); rng = random.Random(5)
vocab = ["w%05d" % i for i in range(20000)]
docs = []
for i in range(n + new):
    if docs and rng.random() < 0.1:
        words = rng.choice(docs).split(" ")
        words[rng.randrange(len(words))] = rng.choice(vocab)
    else:
        words = [rng.choice(vocab) for _ in range(60)]
    docs.append(" ".join(words))
with open(sys.argv[3], "w") as f:
    for i in range(n):
        f.write(json.dumps({"id": "d%d" % i, "text": docs[i]}) + "\n")
with open(sys.argv[4], "w") as f:
    for i in range(n, n + new):
        f.write(json.dumps({"id": "d%d" % i, "text": docs[i]}) + "\n")
