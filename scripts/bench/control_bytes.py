#!/usr/bin/env python3
"""How many control bytes real crawl payloads hold: the measurement behind the rule that
tells a binary payload from a text one (neardup_io::html::looks_binary; docs/inputs.md,
"Binary payloads").

For every HTTP response in the given WARC and ARC files, the payload's first 4 KiB (as
neardup looks at them: transfer and content encodings undone by FastWARC's reader) are
classified by the declared media type (HTML, plain text, or other) and by content (a
known binary signature: PNG, GIF, JPEG, PDF, ZIP, gzip, ...), and the share of "binary
data bytes" (C0 controls other than tab, line feed, form feed, carriage return and escape)
and the presence of a NUL byte are counted. The table shows, per class, how many payloads
have a NUL and how many fall in each band of control share.

usage: control_bytes.py FILE...   (runs under scripts/bench/web_peers.py's venv)
"""
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import web_peers  # noqa: E402  (the ARC reader)

SNIFF = 4096
BANDS = [0.0, 0.001, 0.01, 0.02, 0.05, 0.10, 0.30, 1.01]
SIGNATURES = [b"\x89PNG", b"GIF8", b"\xff\xd8\xff", b"%PDF", b"PK\x03\x04", b"\x1f\x8b",
              b"BM", b"RIFF", b"\x00\x00\x01\x00", b"OggS", b"ID3", b"wOFF", b"\x7fELF"]


def control_share(head):
    bad = sum(1 for b in head if b in range(1, 9) or b == 0x0b or 0x0e <= b <= 0x1a or 0x1c <= b <= 0x1f)
    return bad / max(1, len(head))


def klass(content_type, head):
    if any(head.startswith(s) for s in SIGNATURES):
        return "binary signature"
    media = (content_type or "").split(";")[0].strip().lower()
    if media in ("text/html", "application/xhtml+xml"):
        return "labelled html"
    if media == "text/plain":
        return "labelled text"
    return "other type"


def payloads(path):
    """(Content-Type, first bytes of the payload) of each HTTP response in the archive."""
    if path.endswith(".arc") or path.endswith(".arc.gz"):
        for _, content_type, payload in web_peers.arc_pages(path):
            yield content_type, payload[:SNIFF]
        return
    from fastwarc.warc import ArchiveIterator, WarcRecordType
    with open(path, "rb") as stream:
        for record in ArchiveIterator(stream, record_types=WarcRecordType.response,
                                      parse_http=True, auto_decode="all"):
            headers = record.http_headers
            if headers is None:
                continue
            yield headers.get("Content-Type"), record.reader.read(SNIFF)


def main(paths):
    table = collections.defaultdict(collections.Counter)
    examples = collections.defaultdict(list)
    for path in paths:
        for content_type, head in payloads(path):
            k = klass(content_type, head)
            share = control_share(head)
            band = next(i for i in range(len(BANDS) - 1) if share < BANDS[i + 1])
            table[k]["payloads"] += 1
            table[k]["nul"] += b"\x00" in head
            table[k][band] += 1
            if k == "labelled html" and share >= 0.01 and len(examples[k]) < 5:
                examples[k].append((path.rsplit("/", 1)[-1], round(share, 3), b"\x00" in head))
    names = [f"<{BANDS[i + 1]:.1%}" for i in range(len(BANDS) - 1)]
    print("class | payloads | with NUL | " + " | ".join(names))
    for k, row in sorted(table.items()):
        bands = " | ".join(str(row[i]) for i in range(len(BANDS) - 1))
        print(f"{k} | {row['payloads']} | {row['nul']} | {bands}")
    for k, rows in examples.items():
        print(f"{k} with >= 1% controls: {rows}")


if __name__ == "__main__":
    main(sys.argv[1:])
