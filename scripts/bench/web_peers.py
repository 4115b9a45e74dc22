#!/usr/bin/env python3
"""HTML-to-text peers timed on the HTML payloads of the shared web-archive samples.

Times, on one core (one process, one thread), Resiliparse's extract_plain_text (plain, and
main_content=True) and trafilatura's extract on the same HTML payloads, read from the sample
archives (WARC with FastWARC, ARC with the few lines below: FastWARC reads no ARC). Every
payload is decoded to str before the clock starts (Resiliparse's detect_encoding and
bytes_to_str), so the figures time the extraction only. Each tool runs RUNS times
(environment, default 3); the median is printed as pages/s and MB/s of HTML (UTF-8 bytes).
Times are the process's CPU time, not wall time: on a shared machine other processes then
slow the figures less (neardup's own figures in io's html_speed measurement are taken the
same way).

The packages are installed into a virtual environment this script creates (WEB_PEERS_VENV,
default /tmp/neardup-web-peers-venv) from PyPI, pinned; the script then re-runs itself with
that environment's Python. Nothing is installed by hand. A Python that already has what a
command needs (resiliparse for --oracle-dir) runs it as it is.

usage:
  web_peers.py [SAMPLES_DIR]            # time the peers (default ../shared/corpora/web-archive-samples)
  web_peers.py --oracle-dir DIR         # for each DIR/*.html (UTF-8), write DIR/*.txt with
                                        # Resiliparse's extract_plain_text (defaults): the
                                        # oracle of io's text_mode_agrees_with_resiliparse test
  web_peers.py --dump DIR [SAMPLES_DIR] # write the HTML payloads as DIR/NNNNN.bin + index.json
"""
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_SAMPLES = os.path.join(ROOT, "..", "shared", "corpora", "web-archive-samples")
VENV = os.environ.get("WEB_PEERS_VENV", "/tmp/neardup-web-peers-venv")
RUNS = int(os.environ.get("RUNS", "3"))
# trafilatura needs lxml_html_clean (lxml 6 moved lxml.html.clean out) and does not declare it.
PACKAGES = ["resiliparse==2.0.1", "fastwarc==2.0.1", "trafilatura==2.3.1", "lxml_html_clean==0.4.6"]


def importable(modules):
    try:
        for module in modules:
            __import__(module)
        return True
    except ImportError:
        return False


def ensure_venv(modules):
    """Unless this Python can import `modules` already, re-run this script inside the venv,
    creating it and installing PACKAGES first."""
    python = os.path.join(VENV, "bin", "python")
    if importable(modules) or os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.path.exists(python):
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
    probe = subprocess.run(
        [python, "-c", "import resiliparse, fastwarc, trafilatura"], capture_output=True
    )
    if probe.returncode != 0:
        subprocess.check_call(
            [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *PACKAGES],
            stdout=sys.stderr,
        )
    os.execv(python, [python, os.path.abspath(__file__), *sys.argv[1:]])


ARC_HEADER = re.compile(rb"^(\S+) (\S+) (\d{14}) (\S*) (\d+)\n$")


def arc_pages(path):
    """(url, content type, payload) of each record of an ARC v1 file (HTTP head removed)."""
    data = open(path, "rb").read()
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            break
        m = ARC_HEADER.match(data[pos : nl + 1])
        if not m:
            pos = nl + 1
            continue
        length = int(m.group(5))
        body = data[nl + 1 : nl + 1 + length]
        pos = nl + 1 + length
        url = m.group(1).decode("latin-1")
        if url.startswith("filedesc:"):
            continue
        sep, k = body.find(b"\r\n\r\n"), 4
        if sep < 0:
            sep, k = body.find(b"\n\n"), 2
        head, payload = (body[:sep], body[sep + k :]) if sep >= 0 else (body, b"")
        ctype = None
        for line in head.split(b"\n")[1:]:
            if line.lower().startswith(b"content-type:"):
                ctype = line.split(b":", 1)[1].strip().decode("latin-1")
        yield url, ctype, payload


def warc_pages(path):
    """(url, content type, payload) of each response record (these blocks have no HTTP head)."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    with open(path, "rb") as f:
        for rec in ArchiveIterator(f, record_types=WarcRecordType.response, parse_http=False):
            yield (
                rec.headers.get("WARC-Target-URI"),
                rec.headers.get("Content-Type"),
                rec.reader.read(),
            )


def html_payloads(samples):
    pages = []
    for name in sorted(os.listdir(samples)):
        path = os.path.join(samples, name)
        if name.endswith(".arc"):
            records = arc_pages(path)
        elif name.endswith(".warc.gz") or name.endswith(".warc"):
            records = warc_pages(path)
        else:
            continue
        for url, ctype, payload in records:
            if ctype and ctype.split(";")[0].strip().lower() in ("text/html", "application/xhtml+xml"):
                pages.append((url, ctype, payload))
    return pages


def time_tool(name, fn, htmls, total_bytes):
    runs = []
    for _ in range(RUNS):
        start = time.process_time()
        out = 0
        for html in htmls:
            out += len(fn(html) or "")
        runs.append(time.process_time() - start)
    median = statistics.median(runs)
    print(
        f"{name:<34} {len(htmls):>6} {total_bytes / 1e6:>8.2f} {median:>9.3f} "
        f"{len(htmls) / median:>9.1f} {total_bytes / median / 1e6:>8.2f} {out:>10}"
    )
    sys.stdout.flush()


def bench(samples):
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding
    import trafilatura

    pages = html_payloads(samples)
    htmls = [bytes_to_str(p, detect_encoding(p)) for _, _, p in pages]
    total = sum(len(h.encode("utf-8")) for h in htmls)
    print(f"# {len(htmls)} HTML payloads from {os.path.abspath(samples)}, {RUNS} runs, one core")
    print(f"{'tool':<34} {'pages':>6} {'MB':>8} {'median_cpu_s':>9} {'pages/s':>9} {'MB/s':>8} {'out_chars':>10}")
    time_tool("resiliparse extract_plain_text", extract_plain_text, htmls, total)
    time_tool(
        "resiliparse main_content=True",
        lambda h: extract_plain_text(h, main_content=True),
        htmls,
        total,
    )
    time_tool(
        "trafilatura extract",
        lambda h: trafilatura.extract(h, include_comments=False),
        htmls,
        total,
    )


def oracle(directory):
    from resiliparse.extract.html2text import extract_plain_text

    for name in sorted(os.listdir(directory)):
        if name.endswith(".html"):
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                text = extract_plain_text(f.read())
            with open(os.path.join(directory, name[:-5] + ".txt"), "w", encoding="utf-8") as f:
                f.write(text)


def dump(directory, samples):
    os.makedirs(directory, exist_ok=True)
    index = []
    for n, (url, ctype, payload) in enumerate(html_payloads(samples)):
        with open(os.path.join(directory, f"{n:05d}.bin"), "wb") as f:
            f.write(payload)
        index.append({"n": n, "url": url, "content_type": ctype})
    with open(os.path.join(directory, "index.json"), "w") as f:
        json.dump(index, f, indent=0)
    print(f"{len(index)} HTML payloads written to {directory}")


def main():
    args = sys.argv[1:]
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return
    if args and args[0] == "--oracle-dir":
        ensure_venv(["resiliparse"])
        oracle(args[1])
    elif args and args[0] == "--dump":
        ensure_venv(["fastwarc"])
        dump(args[1], args[2] if len(args) > 2 else DEFAULT_SAMPLES)
    else:
        ensure_venv(["resiliparse", "fastwarc", "trafilatura"])
        bench(args[0] if args else DEFAULT_SAMPLES)


if __name__ == "__main__":
    main()
