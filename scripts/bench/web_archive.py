#!/usr/bin/env python3
"""Web archives end to end, per core: neardup against FastWARC + Resiliparse and trafilatura.

What is timed is the whole step from a compressed archive to text (and, for neardup, to
fingerprints): read, gunzip, parse WARC and HTTP, decode the character set, extract text.
  * neardup:  `neardup hash --html text|main ARCHIVE` (one thread: hash is a plain loop),
              which also fingerprints every page (simhash-doc);
  * FastWARC + Resiliparse: ArchiveIterator (HTTP parsed), detect_encoding, bytes_to_str,
              extract_plain_text (and main_content=True), no fingerprinting;
  * trafilatura (with FastWARC reading), on the first TRAFILATURA_PAGES pages only: at about
              30 pages/s the whole archive would take minutes.
Inputs: the four shared sample archives, and a larger archive built here from their real
pages (each HTML page of the samples written REPEAT times, under distinct URLs, as WARC
response records with an HTTP head, one gzip member per record: the layout of Common Crawl).
Each figure is the median of RUNS runs of the process's CPU time (user + system), so another
process on this shared machine slows it less than wall time; records/s and MB/s count the
compressed archive and its HTML.

usage: web_archive.py [--neardup PATH] [SAMPLES_DIR]
       web_archive.py --memory [NEARDUP]   # peak memory with a 200 MB page vs a 1 MB one
env:   RUNS (3), REPEAT (20), TRAFILATURA_PAGES (300), WEB_PEERS_VENV (as web_peers.py)
"""
import gzip
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import web_peers  # noqa: E402  (the peers' venv, packages and sample readers)

ROOT = os.path.dirname(os.path.dirname(HERE))
RUNS = int(os.environ.get("RUNS", "3"))
REPEAT = int(os.environ.get("REPEAT", "20"))
TRAFILATURA_PAGES = int(os.environ.get("TRAFILATURA_PAGES", "300"))
WORK = os.environ.get("WEB_BENCH_DIR", "/tmp/neardup-web-bench")


def ensure_venv():
    """Re-run this script inside web_peers.py's venv (created and filled by it if needed)."""
    python = os.path.join(web_peers.VENV, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(web_peers.VENV):
        return
    if not os.path.exists(python):
        subprocess.check_call([sys.executable, "-m", "venv", web_peers.VENV])
    probe = subprocess.run([python, "-c", "import resiliparse, fastwarc, trafilatura"], capture_output=True)
    if probe.returncode != 0:
        subprocess.check_call(
            [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *web_peers.PACKAGES],
            stdout=sys.stderr,
        )
    os.execv(python, [python, os.path.abspath(__file__), *sys.argv[1:]])


def build_archive(samples, path):
    """REPEAT copies of every HTML page of the samples, one gzip member per WARC record."""
    pages = web_peers.html_payloads(samples)
    html_bytes = 0
    with open(path, "wb") as out:
        for r in range(REPEAT):
            for n, (url, ctype, payload) in enumerate(pages):
                head = f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {len(payload)}\r\n\r\n".encode()
                block = head + payload
                record = (
                    "WARC/1.0\r\nWARC-Type: response\r\n"
                    f"WARC-Target-URI: {url}#copy{r}\r\n"
                    "WARC-Date: 2024-05-01T12:00:00Z\r\n"
                    f"WARC-Record-ID: <urn:uuid:00000000-0000-0000-{r:04x}-{n:012x}>\r\n"
                    "Content-Type: application/http; msgtype=response\r\n"
                    f"Content-Length: {len(block)}\r\n\r\n"
                ).encode() + block + b"\r\n\r\n"
                out.write(gzip.compress(record, compresslevel=6))
                html_bytes += len(payload)
    return len(pages) * REPEAT, html_bytes


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cpu_self():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def time_neardup(neardup, mode, path):
    runs, pages = [], 0
    for _ in range(RUNS):
        before = cpu_children()
        out = subprocess.run(
            [neardup, "hash", "--quiet", "--html", mode, path], check=True, capture_output=True
        )
        runs.append(cpu_children() - before)
        pages = out.stdout.count(b"\n")
    return statistics.median(runs), pages


def resiliparse_pass(path, main_content, limit=None):
    from fastwarc.warc import ArchiveIterator, WarcRecordType
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    pages = 0
    with open(path, "rb") as f:
        for rec in ArchiveIterator(f, record_types=WarcRecordType.response, parse_http=True):
            payload = rec.reader.read()
            text = extract_plain_text(bytes_to_str(payload, detect_encoding(payload)), main_content=main_content)
            pages += bool(text is not None)
            if limit and pages >= limit:
                break
    return pages


def trafilatura_pass(path, limit):
    import trafilatura
    from fastwarc.warc import ArchiveIterator, WarcRecordType
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    pages = 0
    with open(path, "rb") as f:
        for rec in ArchiveIterator(f, record_types=WarcRecordType.response, parse_http=True):
            payload = rec.reader.read()
            trafilatura.extract(bytes_to_str(payload, detect_encoding(payload)))
            pages += 1
            if pages >= limit:
                break
    return pages


def time_python(fn):
    runs, pages = [], 0
    for _ in range(RUNS):
        before = cpu_self()
        pages = fn()
        runs.append(cpu_self() - before)
    return statistics.median(runs), pages


def max_rss_mb(cmd):
    """Peak resident memory of a command, by GNU time."""
    out = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], check=True, capture_output=True, text=True)
    return int(out.stderr.strip().splitlines()[-1]) / 1024


def memory(neardup):
    """A 200 MB page (in WARC, and as one JSONL document) against a 1 MB one: `neardup run`'s
    peak memory should not grow with the page (--max-doc-bytes, default 4 MiB)."""
    words = b" ".join(b"w%d" % (i % 50000) for i in range(2_000_000)) + b" "
    rows = []
    for size_mb in (1, 200):
        body = (words * (size_mb * 1_000_000 // len(words) + 1))[: size_mb * 1_000_000]
        block = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + body
        record = (b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://big.example/\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(block)) + block + b"\r\n\r\n"
        warc = os.path.join(WORK, f"page-{size_mb}mb.warc.gz")
        with open(warc, "wb") as f:
            f.write(gzip.compress(record, compresslevel=1))
        jsonl = os.path.join(WORK, f"page-{size_mb}mb.jsonl.gz")
        with open(jsonl, "wb") as f:
            f.write(gzip.compress(b'{"text": "' + body + b'"}\n', compresslevel=1))
        for kind, path in (("WARC", warc), ("JSONL", jsonl)):
            out = os.path.join(WORK, "memory-out")
            mb = max_rss_mb([neardup, "run", "-q", "-w", "1", "--no-id", "--overwrite", "--output", out, path])
            rows.append((kind, size_mb, os.path.getsize(path) / 1e6, mb))
    print(f"{'input':<6} {'page MB':>8} {'file MB':>8} {'max RSS MB':>11}")
    for kind, size_mb, file_mb, mb in rows:
        print(f"{kind:<6} {size_mb:>8} {file_mb:>8.1f} {mb:>11.1f}")


def main():
    args = sys.argv[1:]
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return
    if args and args[0] == "--memory":
        os.makedirs(WORK, exist_ok=True)
        memory(args[1] if len(args) > 1 else os.path.join(ROOT, "target", "release", "neardup"))
        return
    ensure_venv()
    neardup = os.path.join(ROOT, "target", "release", "neardup")
    if args and args[0] == "--neardup":
        neardup, args = args[1], args[2:]
    samples = args[0] if args else web_peers.DEFAULT_SAMPLES
    os.makedirs(WORK, exist_ok=True)
    big = os.path.join(WORK, "pages.warc.gz")
    pages, html_bytes = build_archive(samples, big)
    size = os.path.getsize(big)
    print(f"# {os.uname().nodename}: {open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}")
    print(f"# archive: {big}: {pages} HTML pages ({REPEAT} x the samples' {pages // REPEAT}), "
          f"{size / 1e6:.1f} MB gzip, {html_bytes / 1e6:.1f} MB of HTML; medians of {RUNS} runs, CPU seconds, one core")
    print(f"{'tool':<40} {'pages':>7} {'cpu_s':>8} {'pages/s':>9} {'MB/s gz':>8} {'MB/s html':>9}")
    rows = {}

    def row(name, seconds, n, scale=1.0):
        # scale: the share of the archive the tool went through (trafilatura reads a prefix)
        rows[name] = n / seconds
        print(f"{name:<40} {n:>7} {seconds:>8.3f} {n / seconds:>9.1f} "
              f"{size * scale / seconds / 1e6:>8.2f} {html_bytes * scale / seconds / 1e6:>9.2f}")
        sys.stdout.flush()

    for mode in ("text", "main"):
        s, n = time_neardup(neardup, mode, big)
        row(f"neardup hash --html {mode}", s, n)
    for main_content in (False, True):
        s, n = time_python(lambda: resiliparse_pass(big, main_content))
        row(f"fastwarc+resiliparse{' main_content' if main_content else ''}", s, n)
    s, n = time_python(lambda: trafilatura_pass(big, TRAFILATURA_PAGES))
    row("fastwarc+trafilatura (first pages)", s, n, n / pages)
    print(f"# ratios (pages/s): text / resiliparse plain = "
          f"{rows['neardup hash --html text'] / rows['fastwarc+resiliparse']:.2f}; "
          f"main / resiliparse main_content = "
          f"{rows['neardup hash --html main'] / rows['fastwarc+resiliparse main_content']:.2f}; "
          f"main / trafilatura = {rows['neardup hash --html main'] / rows['fastwarc+trafilatura (first pages)']:.1f}")


if __name__ == "__main__":
    main()
