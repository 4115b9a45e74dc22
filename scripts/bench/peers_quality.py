#!/usr/bin/env python3
"""Peers on the same corpus and truth as `neardup eval`: datasketch's MinHashLSH and gaoya's
MinHash index, each with exact Jaccard verification of its candidates, scored at pair level
against the truth pairs with Jaccard >= MIN (the positives).

Shingles are word 3-grams of the lower-cased \\w+ tokens (the truth's own definition).

usage: peers_quality.py CORPUS.jsonl TRUTH.tsv [THRESHOLD=0.8] [MIN=0.8]

With NEARDUP=path/to/neardup in the environment, neardup's MinHash mode runs in the same
session and its row is printed beside the peers' (scored by `neardup eval`).
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

WORD = re.compile(r"\w+")


def shingles(text, n=3):
    words = WORD.findall(text.lower())
    if len(words) <= n:
        return {" ".join(words)} if words else set()
    return {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}


def jaccard(a, b):
    return len(a & b) / len(a | b) if a or b else 0.0


def score(name, predicted, positives, seconds):
    tp = len(predicted & positives)
    p = tp / len(predicted) if predicted else 1.0
    r = tp / len(positives) if positives else 1.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    print(f"| {name} | {len(predicted)} | {tp} | {p:.4f} | {r:.4f} | {f1:.4f} | {seconds:.1f} |")


def main():
    corpus, truth_path = sys.argv[1], sys.argv[2]
    threshold = float(sys.argv[3]) if len(sys.argv) > 3 else 0.8
    min_j = float(sys.argv[4]) if len(sys.argv) > 4 else 0.8
    docs = {}
    with open(corpus) as f:
        for line in f:
            d = json.loads(line)
            docs[str(d["id"])] = shingles(d["text"])
    positives = set()
    with open(truth_path) as f:
        next(f)
        for line in f:
            a, b, _family, j = line.split("\t")[:4]
            if float(j) >= min_j:
                positives.add(tuple(sorted((a, b))))
    print("| tool (threshold %.2f, verified) | predicted | true positives | precision | recall | F1 | seconds |" % threshold)
    print("|---|---|---|---|---|---|---|")

    def verified(candidates):
        return {p for p in candidates if jaccard(docs[p[0]], docs[p[1]]) >= threshold}

    neardup = os.environ.get("NEARDUP")
    if neardup:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.time()
            subprocess.run([neardup, "run", "-q", "--method", "minhash", "--shingle", "3", "--threshold", str(threshold),
                            "--output", f"{tmp}/out", corpus], check=True)
            seconds = time.time() - start
            report = json.loads(subprocess.run([neardup, "eval", "--json", "--run", f"{tmp}/out", "--truth", truth_path,
                                                "--min-jaccard", str(min_j)], check=True, capture_output=True, text=True).stdout)
            p = report["pairs"]
            print(f"| neardup --method minhash --shingle 3 | {p['predicted']} | {p['true_positives']} | {p['precision']:.4f} "
                  f"| {p['recall']:.4f} | {p['f1']:.4f} | {seconds:.1f} |")

    try:
        from datasketch import MinHash, MinHashLSH
        start = time.time()
        lsh = MinHashLSH(threshold=threshold, num_perm=128)
        sigs = {}
        for key, sh in docs.items():
            m = MinHash(num_perm=128)
            for s in sh:
                m.update(s.encode())
            sigs[key] = m
            lsh.insert(key, m)
        candidates = set()
        for key, m in sigs.items():
            for other in lsh.query(m):
                if other != key:
                    candidates.add(tuple(sorted((key, other))))
        score("datasketch MinHashLSH", verified(candidates), positives, time.time() - start)
    except ImportError as e:
        print(f"| datasketch | not installed: {e} | | | | | |")

    try:
        import gaoya
        start = time.time()
        index = gaoya.minhash.MinHashStringIndex(hash_size=32, jaccard_threshold=threshold, num_bands=42, band_size=3,
                                                 num_hashes=126, analyzer="word", lowercase=True, ngram_range=(3, 3))
        keys = list(docs)
        texts = {}
        with open(corpus) as f:
            for line in f:
                d = json.loads(line)
                texts[str(d["id"])] = " ".join(WORD.findall(d["text"].lower()))
        for i, key in enumerate(keys):
            index.insert_document(i, texts[key])
        candidates = set()
        for i, key in enumerate(keys):
            for j in index.query(texts[key]):
                if j != i:
                    candidates.add(tuple(sorted((key, keys[j]))))
        score("gaoya MinHashStringIndex", verified(candidates), positives, time.time() - start)
    except Exception as e:  # noqa: BLE001 - report any failure of the optional peer
        print(f"| gaoya | unavailable: {type(e).__name__}: {e} | | | | | |")


if __name__ == "__main__":
    main()
