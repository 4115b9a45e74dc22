"""Lists the records of WARC files as warcio (the reference Python WARC library) reads them.

Usage: warcio_records.py FILE...  ->  one JSON array on stdout, one object per record:
{"file", "n" (0-based position in its file), "type", "url", "status", "content_type"}.
Used by tests/web_cli.rs as the independent oracle for neardup's WARC reader.
"""
import json
import sys

from warcio.archiveiterator import ArchiveIterator

out = []
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        for n, rec in enumerate(ArchiveIterator(f)):
            http = rec.http_headers
            # warcio parses an HTTP head only where there is one; the Wayback Machine's
            # exports leave it out, and warcio then reads the page's first line as a status.
            status = http.get_statuscode() if http else None
            ctype = (http.get_header("Content-Type") if http else None) or rec.content_type
            out.append(
                {
                    "file": path,
                    "n": n,
                    "type": rec.rec_type,
                    "url": rec.rec_headers.get_header("WARC-Target-URI"),
                    "status": status,
                    "content_type": ctype,
                }
            )
json.dump(out, sys.stdout)
