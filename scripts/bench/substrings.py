#!/usr/bin/env python3
"""Benchmark `neardup substrings` against the reference tool (google-research/
deduplicate-text-datasets: `make` + `self-similar` + `collect`) on the same text, in the same
run, and check that `--occurrences all` gives the same ranges as the reference's output.

    python3 scripts/bench/substrings.py [--corpus ../shared/corpora/dev-medium/corpus.jsonl.zst]
        [--min-bytes 50] [--repeats 3] [--work /tmp/substrings-bench] [--memory-limit 512M]
        [--assemble-mb 1000 --assemble-from DIR...]

With --assemble-mb the corpus is assembled from real text: the --corpus documents, then every
text file under the --assemble-from directories (a Python standard library, the Rust
toolchain's HTML documentation, C headers: code, documentation and boilerplate, with the
repeated licence headers and navigation that substring deduplication is for).

Needs release builds: `cargo build --release --bin neardup` (the script finds the binary
under $CARGO_TARGET_DIR or ./target), and the reference built from a scratch copy of
../shared/peers/deduplicate-text-datasets (the script copies and builds it with
`cargo build --release` when --reference is not given). Prints one line per run and the
medians: wall seconds, CPU seconds (user + system: "per core"), peak RSS (GNU time -v).

The reference sees the documents as its own loader writes them (`scripts/load_dataset.py`):
each document is preceded by b"\\xff\\xff" and its 4-byte little-endian number. Its byte
ranges over that file are cut at the documents, then merged, snapped inward to UTF-8
characters and dropped below N exactly as neardup's ranges are (docs/substrings.md), and
compared with neardup's rows.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def read_texts(corpus):
    """Every document's text (JSONL, optionally zstd), in line order: doc_id = line."""
    if corpus.endswith(".zst"):
        data = subprocess.run(["zstd", "-dc", corpus], check=True, capture_output=True).stdout
    else:
        data = open(corpus, "rb").read()
    texts = []
    for line in data.splitlines():
        if line.strip():
            texts.append(json.loads(line)["text"].encode("utf-8"))
        else:
            texts.append(None)  # a blank line keeps its number
    return texts


def timed(cmd, stdout=None):
    """Runs cmd under GNU time -v: (wall s, cpu s, peak KiB)."""
    res = subprocess.run(["/usr/bin/time", "-v"] + cmd, stdout=stdout, stderr=subprocess.PIPE, text=True)
    if res.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{res.stderr[-3000:]}")
    err = res.stderr

    def field(name):
        m = re.search(re.escape(name) + r":\s*([^\n]+)", err)
        return m.group(1).strip()

    wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)")
    parts = [float(p) for p in wall.split(":")]
    secs = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    cpu = float(field("User time (seconds)")) + float(field("System time (seconds)"))
    return secs, cpu, int(field("Maximum resident set size (kbytes)"))


def is_boundary(text, i):
    return i <= 0 or i >= len(text) or (text[i] & 0xC0) != 0x80


def finish(text, spans, n):
    """Merged, snapped inward to characters, at least n bytes."""
    out = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    done = []
    for s, e in out:
        while s < e and not is_boundary(text, s):
            s += 1
        while e > s and not is_boundary(text, e):
            e -= 1
        if e - s >= n:
            done.append((s, e))
    return done


def reference_ranges(byterange_file, starts, texts, n):
    """The reference's ranges, cut at the documents: {doc_id: [(start, end)]}."""
    import bisect

    spans = {}
    lines = open(byterange_file).read().split("\n")
    body = lines[lines.index("out") + 1:] if "out" in lines else lines
    for line in body:
        if not line.strip():
            continue
        a, b = map(int, line.split())
        k = max(bisect.bisect_right(starts, a) - 1, 0)
        while k < len(starts) and starts[k] < b:
            s, e = starts[k], starts[k] + len(texts[k] or b"")
            lo, hi = max(a, s), min(b, e)
            if lo < hi:
                spans.setdefault(k, []).append((lo - s, hi - s))
            k += 1
    return {k: finish(texts[k], v, n) for k, v in spans.items() if finish(texts[k], v, n)}


# An uncompressed JSONL file larger than this is read in pieces and numbers its records by
# the byte offset of each line's start (docs/inputs.md), not by line.
SPLIT_BYTES = 32 << 20


def line_numbers(corpus):
    """{doc_id: line} for a corpus whose doc_ids are byte offsets, else None."""
    if corpus.endswith(".zst") or os.path.getsize(corpus) <= SPLIT_BYTES:
        return None
    numbers, offset = {}, 0
    with open(corpus, "rb") as f:
        for i, line in enumerate(f):
            numbers[offset] = i
            offset += len(line)
    return numbers


def neardup_ranges(out, numbers=None):
    import pyarrow.parquet as pq  # the project's Python clients install pyarrow

    got = {}
    table = pq.read_table(os.path.join(out, "substrings"))
    for d, s, e in zip(*(table.column(c).to_pylist() for c in ("doc_id", "start", "end"))):
        got.setdefault(numbers[d] if numbers else d, []).append((s, e))
    return {k: sorted(v) for k, v in got.items()}


TEXT_SUFFIXES = (".py", ".rs", ".h", ".c", ".html", ".md", ".txt", ".rst", ".js", ".css", ".toml")


def assemble(texts, roots, mb, work):
    """`texts`, then every UTF-8 text file under `roots` (sorted paths, at most 8 MB each),
    up to `mb` MB of text; written as JSONL to `work`. Returns (texts, path)."""
    out, total, files = [], 0, 0
    limit = mb * 1e6
    for t in texts:
        if total >= limit:
            break
        out.append(t)
        total += len(t or b"")
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                if total >= limit or not name.endswith(TEXT_SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                try:
                    if os.path.islink(path) or os.path.getsize(path) > 8e6:
                        continue
                    data = open(path, "rb").read()
                    data.decode("utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                out.append(data)
                total += len(data)
                files += 1
    path = os.path.join(work, "assembled.jsonl")
    with open(path, "w") as f:
        for t in out:
            f.write(json.dumps({"text": (t or b"").decode("utf-8")}) + "\n")
    print(f"assembled {path}: {len(out)} documents ({files} files from {', '.join(roots)}), {total / 1e6:.1f} MB of text")
    return out, path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(ROOT, "..", "shared", "corpora", "dev-medium", "corpus.jsonl.zst"))
    ap.add_argument("--min-bytes", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--work", default="/tmp/substrings-bench")
    ap.add_argument("--neardup")
    ap.add_argument("--reference")
    ap.add_argument("--max-mb", type=float, help="only the first documents, up to this many MB of text")
    ap.add_argument("--memory-limit", help="neardup's --memory-limit (window records past a quarter of each worker's share spill)")
    ap.add_argument("--assemble-mb", type=float,
                    help="assemble a corpus of this many MB of text: the --corpus documents, then every text "
                         "file under --assemble-from (one document each, in path order)")
    ap.add_argument("--assemble-from", nargs="*", default=[],
                    help="directories of real text for --assemble-mb (e.g. a Python standard library, the "
                         "Rust toolchain's HTML docs, /usr/include)")
    args = ap.parse_args()
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    neardup = args.neardup or os.path.join(target, "release", "neardup")
    os.makedirs(args.work, exist_ok=True)
    reference = args.reference
    if reference is None:
        src = os.path.join(args.work, "peer-dtd")
        if not os.path.isdir(src):
            shutil.copytree(os.path.join(ROOT, "..", "shared", "peers", "deduplicate-text-datasets"), src)
        subprocess.run(["cargo", "build", "--release"], cwd=src, check=True)
        reference = os.path.join(target, "release", "dedup_dataset")

    texts = read_texts(args.corpus)
    corpus = args.corpus
    if args.assemble_mb:
        texts, corpus = assemble(texts, args.assemble_from, args.assemble_mb, args.work)
    if args.max_mb:
        # A prefix of the corpus, written as JSONL for neardup (same documents, same numbers).
        kept, total = [], 0
        for t in texts:
            if total >= args.max_mb * 1e6:
                break
            kept.append(t)
            total += len(t or b"")
        texts = kept
        corpus = os.path.join(args.work, "prefix.jsonl")
        with open(corpus, "w") as f:
            for t in texts:
                f.write(json.dumps({"text": (t or b"").decode("utf-8")}) + "\n")
    # The reference's input: separator + 4-byte number + text per document.
    data_file = os.path.join(args.work, "data.bin")
    starts = []
    with open(data_file, "wb") as f:
        pos = 0
        for i, t in enumerate(texts):
            sep = b"\xff\xff" + struct.pack("<I", i)
            f.write(sep)
            pos += len(sep)
            starts.append(pos)
            t = t or b""
            f.write(t)
            pos += len(t)
    text_bytes = sum(len(t or b"") for t in texts)
    print(f"corpus {corpus}: {len(texts)} documents, {text_bytes / 1e6:.1f} MB of text; N = {args.min_bytes}")
    print(f"machine: {os.cpu_count()} cores; " + open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": \t"))

    results = {}
    n = str(args.min_bytes)
    byteranges = os.path.join(args.work, "reference.byterange")
    for r in range(args.repeats):
        cache = os.path.join(args.work, "cache")
        shutil.rmtree(cache, ignore_errors=True)
        os.makedirs(cache)
        for name in os.listdir(args.work):
            if name.startswith("data.bin.") and name != "data.bin":
                os.remove(os.path.join(args.work, name))
        steps = [
            timed([reference, "make", "--data-file", data_file]),
            timed([reference, "self-similar", "--data-file", data_file, "--length-threshold", n,
                   "--cache-dir", cache, "--num-threads", "1"]),
            timed([reference, "collect", "--data-file", data_file, "--cache-dir", cache,
                   "--length-threshold", n], stdout=open(byteranges, "w")),
        ]
        ref = (sum(s[0] for s in steps), sum(s[1] for s in steps), max(s[2] for s in steps))
        results.setdefault("reference (1 thread)", []).append(ref)
        print(f"run {r}: reference wall {ref[0]:.1f}s cpu {ref[1]:.1f}s peak {ref[2] / 1024:.0f} MiB", flush=True)
        for w in args.workers.split(","):
            out = os.path.join(args.work, f"out-w{w}")
            limit = ["--memory-limit", args.memory_limit] if args.memory_limit else []
            # Both tools see every document whole (neardup cuts at --max-doc-bytes, 4 MiB).
            whole = ["--max-doc-bytes", str(max([4 << 20] + [len(t or b"") for t in texts]))]
            res = timed([neardup, "substrings", "-q", "-w", w, "--min-bytes", n, "--occurrences", "all",
                         "--no-id", "--overwrite"] + limit + whole + ["--output", out, corpus])
            results.setdefault(f"neardup -w {w}", []).append(res)
            print(f"run {r}: neardup -w {w} wall {res[0]:.1f}s cpu {res[1]:.1f}s peak {res[2] / 1024:.0f} MiB", flush=True)

    want = reference_ranges(byteranges, starts, texts, args.min_bytes)
    numbers = line_numbers(corpus)
    for w in args.workers.split(","):
        got = neardup_ranges(os.path.join(args.work, f"out-w{w}"), numbers)
        same = got == want
        print(f"neardup -w {w} --occurrences all: {sum(map(len, got.values()))} ranges in {len(got)} documents; "
              f"reference: {sum(map(len, want.values()))} in {len(want)}; identical: {same}")
        if not same:
            # The reference's windows run into its separators (b"\xff\xff" and a number
            # before each document), so it can differ within N bytes of a document's ends.
            edge = inner = 0
            for k in set(got) | set(want):
                for s, e in set(got.get(k, [])) ^ set(want.get(k, [])):
                    if s < args.min_bytes or e > len(texts[k] or b"") - args.min_bytes:
                        edge += 1
                    else:
                        inner += 1
            print(f"  ranges that differ: {edge} within N bytes of a document's start or end, {inner} elsewhere")
            diff = sorted(set(got) ^ set(want))[:5] or [k for k in got if got[k] != want.get(k)][:5]
            for k in diff:
                print(f"  doc {k}: neardup {got.get(k)} reference {want.get(k)}")
    print("medians (wall s, cpu s = per-core time, peak MiB):")
    for name, runs in results.items():
        print(f"  {name}: {statistics.median(r[0] for r in runs):.1f} s, "
              f"{statistics.median(r[1] for r in runs):.1f} cpu s, "
              f"{statistics.median(r[2] for r in runs) / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
