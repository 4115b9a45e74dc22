#!/usr/bin/env python3
"""Pages, not templates: does neardup's `--html main` pair different pages of one site only
when their main contents are alike?

For each site (one or more WARC/ARC files), `neardup run --html main` (simhash-doc, k = 3,
the defaults) reports pairs. The pairs of two *different pages of one site* are kept:
  * both documents have a URL and the same host, the host of neardup's normalized URL
    (`url_normalized` in fingerprints/); pairs across hosts (mirrors, unrelated sites) are
    left out and counted;
  * their page keys differ: the normalized URL, or for a Wayback Machine URL
    (web.archive.org/web/TIMESTAMP/ORIGINAL) the original URL (scheme and host lower-cased,
    default port and fragment dropped), whose host is then the site. Equal keys are captures
    of one page (recaptures, URL variants, revisits): left out and counted.
Both pages of each kept pair are then read again from the archive (the record that
fingerprints/'s `offset` and `length` cut out; the HTTP head split off, chunked and gzip
bodies undone as neardup does, the charset found by Resiliparse's detect_encoding and
decoded by bytes_to_str) and their main contents extracted independently, by Resiliparse
(extract_plain_text(html, main_content=True)) and by trafilatura (extract, no comments; None
is an empty text). A text/plain payload is its own main content for both.

Similarity is the Jaccard index of the two main contents' word 5-gram sets (words: \\w+ of
the lower-cased text). When either text has fewer than 5 words both are compared as sets
of single words; two empty texts are alike (1.0), one empty and one not are not (0.0).
(A run of CJK characters, written without spaces, is one word.) A pair is *bad* when its
Jaccard is below 0.5 by BOTH extractors, the conservative count: on a stub page trafilatura
often falls back to the page's largest block, the site's table of contents, which makes two
stubs alike by it; the per-extractor counts are printed too. Target: on every site at most
2% of the evaluated pairs are bad.

Default sites: SITES_DIR (target/bench-sites of the repository) as built by scripts/bench/sites_crawl.sh, and
the shared web-archive samples (the two Common Crawl ARC files as one site, the two Wayback
WARC files as another); a site whose files are absent is skipped with a notice.

The peers come from scripts/bench/web_peers.py's virtual environment (WEB_PEERS_VENV,
created and filled by the pinned PACKAGES if needed), to which pyarrow is added for the
Parquet tables; the script re-runs itself with that environment's Python.

usage: sites.py [--neardup PATH] [--json FILE] [--check] [--examples N] [NAME=PATH ...]
  NAME=PATH   a site; PATH is a file or a glob (several files are one neardup run)
  --neardup   the binary (default target/release/neardup of this repository)
  --json      also write every figure, and every bad pair, to FILE
  --check     exit 1 when a site has more than 2% bad pairs
  --examples  worst pairs printed per site (default 5)
  --args      more arguments for `neardup run`, as one string (e.g. "--scheme simhash-shingles")
env: SITES_DIR, SITES_BENCH_DIR (/tmp/neardup-sites-bench: neardup's outputs), WEB_PEERS_VENV
"""
import argparse
import collections
import glob
import gzip
import io
import json
import logging
import os
import re
import subprocess
import sys
import time
import zlib
from urllib.parse import urlsplit, urlunsplit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import web_peers  # noqa: E402  (the peers' venv, their pinned packages, the ARC header)

ROOT = os.path.dirname(os.path.dirname(HERE))
SITES_DIR = os.environ.get("SITES_DIR", os.path.join(ROOT, "target", "bench-sites"))
WORK = os.environ.get("SITES_BENCH_DIR", "/tmp/neardup-sites-bench")
PYARROW = "pyarrow==26.0.1"
MODULES = ["resiliparse", "fastwarc", "trafilatura", "pyarrow"]
TARGET = 0.02
MIN_JACCARD = 0.5
SHINGLE = 5
WORD = re.compile(r"\w+")
WAYBACK = re.compile(r"^https?://web\.archive\.org/web/\d+[a-z_]*/(.+)$", re.IGNORECASE)

# name, kind, file names tried in SITES_DIR (the first that exists)
CRAWLED = [
    ("kernel-docs", "Sphinx, Read the Docs theme", ["kernel-docs.warc", "kernel-docs.warc.gz"]),
    ("python-docs", "Sphinx, Python docs theme", ["python-docs.warc.gz"]),
    ("sphinx-docs", "Sphinx, sphinx13 theme", ["sphinx-docs.warc.gz"]),
    ("debian-policy", "Sphinx and DocBook, a directory listing", ["debian-policy.warc.gz"]),
    ("rust-book", "mdBook", ["rust-book.warc.gz"]),
    ("rust-unstable-book", "mdBook, mostly stubs", ["rust-unstable-book.warc.gz"]),
    ("handbook", "manual (Publican DocBook, 12 languages)", ["handbook.warc.gz"]),
    ("debian-reference", "manual (DocBook)", ["debian-reference.warc.gz"]),
    ("gettext-manual", "manual (Texinfo)", ["gettext-manual.warc.gz"]),
    ("git-manual", "manual pages (AsciiDoc)", ["git-manual.warc.gz"]),
    ("commons-lang3-api", "mostly template (javadoc)", ["commons-lang3-api.warc.gz"]),
    ("jsoncpp-api", "mostly template (Doxygen)", ["jsoncpp-api.warc.gz"]),
    ("rustdoc-crates", "mostly template (rustdoc)", ["rustdoc-crates.warc.gz"]),
]
SAMPLES = [
    ("common-crawl-arc", "Common Crawl 2008-2009 sample (many hosts)", "*.arc"),
    ("wayback", "Wayback Machine sample (many original hosts)", "*.warc.gz"),
]


def ensure_venv():
    """Unless this Python has MODULES, re-run inside web_peers.py's venv (made if needed)."""
    if web_peers.importable(MODULES):
        return
    python = os.path.join(web_peers.VENV, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(web_peers.VENV):
        sys.exit(f"{web_peers.VENV} lacks one of {MODULES}: remove it and run again")
    if not os.path.exists(python):
        subprocess.check_call([sys.executable, "-m", "venv", web_peers.VENV])
    probe = subprocess.run([python, "-c", "import " + ", ".join(MODULES)], capture_output=True)
    if probe.returncode != 0:
        subprocess.check_call(
            [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             *web_peers.PACKAGES, PYARROW],
            stdout=sys.stderr,
        )
    os.execv(python, [python, os.path.abspath(__file__), *sys.argv[1:]])


def default_sites():
    """(name, kind, files) of the default sites that exist; a notice for each that does not."""
    sites = []
    for name, kind, candidates in CRAWLED:
        found = [os.path.join(SITES_DIR, c) for c in candidates if os.path.exists(os.path.join(SITES_DIR, c))]
        if found:
            sites.append((name, kind, found[:1]))
        else:
            print(f"# {name}: no {' or '.join(candidates)} in {SITES_DIR}: skipped "
                  "(scripts/bench/sites_crawl.sh builds it)", file=sys.stderr)
    for name, kind, pattern in SAMPLES:
        files = sorted(glob.glob(os.path.join(web_peers.DEFAULT_SAMPLES, pattern)))
        if files:
            sites.append((name, kind, files))
        else:
            print(f"# {name}: no {pattern} in {web_peers.DEFAULT_SAMPLES}: skipped", file=sys.stderr)
    return sites


def named_sites(specs):
    """(name, kind, files) of NAME=PATH sites; the kind of a default site of that name."""
    kinds = {name: kind for name, kind, _ in CRAWLED + SAMPLES}
    sites = []
    for spec in specs:
        name, sep, pattern = spec.partition("=")
        files = sorted(glob.glob(pattern)) if sep else []
        if not sep or not name:
            sys.exit(f"a site is NAME=PATH, not {spec!r}")
        if files:
            sites.append((name, kinds.get(name, "given"), files))
        else:
            print(f"# {name}: {pattern} does not exist: skipped", file=sys.stderr)
    return sites


def run_neardup(neardup, name, files, extra):
    """`neardup run --html main` (and the `extra` arguments) over the site's files; its
    output directory and seconds."""
    out = os.path.join(WORK, name)
    os.makedirs(WORK, exist_ok=True)
    command = [neardup, "run", "--html", "main", "-q", "--overwrite", "--output", out, *extra,
               *[os.path.abspath(f) for f in files]]
    start = time.perf_counter()
    subprocess.run(command, check=True)
    seconds = time.perf_counter() - start
    if not os.path.exists(os.path.join(out, "_SUCCESS")):
        sys.exit(f"{name}: neardup wrote no {out}/_SUCCESS")
    return out, seconds


def read_tables(out):
    """The documents (doc_id -> fingerprints/ row) and the pairs of a finished run."""
    import pyarrow.dataset as ds

    columns = ["doc_id", "source", "url", "url_normalized", "offset", "length"]
    docs = ds.dataset(os.path.join(out, "fingerprints"), format="parquet").to_table(columns=columns)
    pairs = ds.dataset(os.path.join(out, "pairs"), format="parquet").to_table(
        columns=["doc_a", "doc_b", "hamming", "kind"])
    return {d["doc_id"]: d for d in docs.to_pylist()}, pairs.to_pylist()


def original_url(url):
    """The URL a Wayback capture archived, scheme and host lower-cased, default port and
    fragment dropped, empty path made /."""
    parts = urlsplit(url if "://" in url else "http://" + url)
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = (parts.hostname or "") + (f":{port}" if port and port not in (80, 443) else "")
    return urlunsplit((parts.scheme.lower(), netloc, parts.path or "/", parts.query, ""))


def page_key(doc):
    """(site, page) of a document: the host and the normalized URL, or those of the original
    page for a Wayback capture; (None, None) without a normalized URL."""
    url = doc["url_normalized"]
    if not url:
        return None, None
    wayback = WAYBACK.match(url)
    if wayback:
        url = original_url(wayback.group(1))
    return urlsplit(url).hostname, url


def classify(docs, pairs):
    """The pairs of different pages of one site, and the count of each pair left out."""
    kept, left_out = [], collections.Counter()
    for pair in pairs:
        site_a, page_a = page_key(docs[pair["doc_a"]])
        site_b, page_b = page_key(docs[pair["doc_b"]])
        if site_a is None or site_b is None:
            left_out["no URL"] += 1
        elif site_a != site_b:
            left_out["other hosts (mirrors, other sites)"] += 1
        elif page_a == page_b:
            left_out[f"one page ({pair['kind']}: recaptures, URL variants, revisits)"] += 1
        else:
            kept.append(pair)
    return kept, left_out


def record_bytes(doc):
    """The record of a document as stored in its archive (gunzipped)."""
    if doc["offset"] is None:
        sys.exit(f"{doc['source']}: records share a compressed stream; recompress it one gzip "
                 "member per record (as crawlers write)")
    with open(doc["source"], "rb") as f:
        f.seek(doc["offset"])
        data = f.read(doc["length"])
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def record_block(doc):
    """(content type of the archive header, block) of a document's WARC or ARC record."""
    data = record_bytes(doc)
    if data.startswith(b"WARC/"):
        from fastwarc.warc import ArchiveIterator

        record = next(iter(ArchiveIterator(io.BytesIO(data), parse_http=False)))
        return record.headers.get("Content-Type"), record.reader.read()
    line, _, block = data.partition(b"\n")
    header = web_peers.ARC_HEADER.match(line + b"\n")
    return (header.group(4).decode("latin-1") if header else None), block


def dechunk(body):
    """A chunked body's payload, or None when it does not parse as chunks."""
    out, pos = [], 0
    while True:
        nl = body.find(b"\r\n", pos)
        try:
            size = int(body[pos:nl].split(b";")[0], 16)
        except ValueError:
            return None
        if size == 0:
            return b"".join(out)
        out.append(body[nl + 2 : nl + 2 + size])
        pos = nl + 2 + size + 2


def http_payload(content_type, block):
    """(media type, payload) of a block: the HTTP head, when there is one, split off and its
    transfer and content encodings undone (a body that does not decode is taken as it is)."""
    if not block.startswith(b"HTTP/"):
        return content_type, block
    sep, skip = block.find(b"\r\n\r\n"), 4
    if sep < 0:
        sep, skip = block.find(b"\n\n"), 2
    head, body = (block[:sep], block[sep + skip :]) if sep >= 0 else (block, b"")
    fields = {}
    for line in head.decode("latin-1").splitlines()[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    if "chunked" in fields.get("transfer-encoding", "").lower():
        body = dechunk(body) or body
    encoding = fields.get("content-encoding", "").lower()
    if encoding in ("gzip", "x-gzip", "deflate"):
        for wbits in (47, 15, -15):
            try:
                body = zlib.decompress(body, wbits)
                break
            except zlib.error:
                continue
    return fields.get("content-type", content_type), body


class Extractor:
    """Both peers' main contents of documents, as word lists, computed once per document."""

    def __init__(self, docs):
        from resiliparse.extract.html2text import extract_plain_text
        from resiliparse.parse.encoding import bytes_to_str, detect_encoding
        import trafilatura

        logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
        self.docs, self.cache, self.seconds = docs, {}, 0.0
        self.decode = lambda payload: bytes_to_str(payload, detect_encoding(payload))
        self.resiliparse = lambda html: extract_plain_text(html, main_content=True)
        self.trafilatura = lambda html: trafilatura.extract(html, include_comments=False) or ""

    def words(self, doc_id):
        """(Resiliparse's words, trafilatura's words) of a document's main content."""
        if doc_id not in self.cache:
            start = time.process_time()
            content_type, payload = http_payload(*record_block(self.docs[doc_id]))
            text = self.decode(payload)
            if (content_type or "").split(";")[0].strip().lower() == "text/plain":
                texts = (text, text)
            else:
                texts = (self.resiliparse(text), self.trafilatura(text))
            self.cache[doc_id] = tuple(WORD.findall(t.lower()) for t in texts)
            self.seconds += time.process_time() - start
        return self.cache[doc_id]


def grams(words, n):
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def similarity(a, b):
    """Jaccard of word 5-gram sets; of word sets when either has fewer than 5 words."""
    if not a and not b:
        return 1.0
    n = SHINGLE if min(len(a), len(b)) >= SHINGLE else 1
    ga, gb = grams(a, n), grams(b, n)
    return len(ga & gb) / len(ga | gb)


def evaluate(extractor, docs, pairs):
    """Each kept pair with both Jaccards and both pages' word counts."""
    rows = []
    for pair in pairs:
        (ra, ta), (rb, tb) = extractor.words(pair["doc_a"]), extractor.words(pair["doc_b"])
        rows.append({
            "url_a": docs[pair["doc_a"]]["url"], "url_b": docs[pair["doc_b"]]["url"],
            "kind": pair["kind"], "hamming": pair["hamming"],
            "jaccard_resiliparse": similarity(ra, rb), "jaccard_trafilatura": similarity(ta, tb),
            "words_resiliparse": [len(ra), len(rb)], "words_trafilatura": [len(ta), len(tb)],
        })
    return rows


def directory(url):
    """The first path segment of a URL (its top directory), or / for a top-level page."""
    path = urlsplit(url).path.strip("/").split("/")
    return path[0] + "/" if len(path) > 1 else "/"


def site_figures(name, kind, files, neardup, extra):
    """Run neardup over one site and measure its pairs of different pages."""
    out, neardup_seconds = run_neardup(neardup, name, files, extra)
    docs, pairs = read_tables(out)
    kept, left_out = classify(docs, pairs)
    extractor = Extractor(docs)
    rows = evaluate(extractor, docs, kept)
    low = lambda r, peer: r["jaccard_" + peer] < MIN_JACCARD  # noqa: E731
    bad = [r for r in rows if low(r, "resiliparse") and low(r, "trafilatura")]
    bad.sort(key=lambda r: (max(r["jaccard_resiliparse"], r["jaccard_trafilatura"]), r["url_a"]))
    places = collections.Counter(" ~ ".join(sorted({directory(r["url_a"]), directory(r["url_b"])})) for r in bad)
    return {
        "name": name, "kind": kind, "inputs": files, "pages": len(docs),
        "reported_pairs": len(pairs), "pairs_by_kind": dict(collections.Counter(p["kind"] for p in pairs)),
        "left_out": dict(left_out), "evaluated": len(rows),
        "evaluated_by_kind": dict(collections.Counter(r["kind"] for r in rows)),
        "bad": len(bad), "bad_resiliparse": sum(low(r, "resiliparse") for r in rows),
        "bad_trafilatura": sum(low(r, "trafilatura") for r in rows),
        "share_bad": len(bad) / len(rows) if rows else 0.0,
        "bad_by_directory": dict(places.most_common()),
        "neardup_seconds": round(neardup_seconds, 2), "extract_cpu_seconds": round(extractor.seconds, 2),
        "pages_extracted": len(extractor.cache), "bad_pairs": bad,
    }


def short(url, site_url):
    """A URL without the scheme and host it shares with the other URL of its pair."""
    a, b = urlsplit(url), urlsplit(site_url)
    return url[len(f"{a.scheme}://{a.netloc}"):] if a.netloc == b.netloc else url


def print_site(site, examples):
    share = f"{100 * site['share_bad']:.1f}%"
    verdict = "ok" if site["share_bad"] <= TARGET else "OVER"
    print(f"| {site['name']} | {site['kind']} | {site['pages']} | {site['reported_pairs']} | "
          f"{sum(site['left_out'].values())} | {site['evaluated']} | {site['bad']} | "
          f"{site['bad_resiliparse']} | {site['bad_trafilatura']} | {share} | {verdict} |")
    detail = [f"    left out: {n} {why}" for why, n in sorted(site["left_out"].items())]
    detail.append(f"    pairs by kind: reported {site['pairs_by_kind']}, evaluated {site['evaluated_by_kind']}; "
                  f"neardup {site['neardup_seconds']} s, {site['pages_extracted']} pages extracted "
                  f"in {site['extract_cpu_seconds']} s CPU")
    if site["bad"]:
        top = list(site["bad_by_directory"].items())[:4]
        detail.append("    bad pairs by top directory: " + ", ".join(f"{d} {n}" for d, n in top))
    for r in site["bad_pairs"][:examples]:
        detail.append(
            f"    bad: J {r['jaccard_resiliparse']:.2f}/{r['jaccard_trafilatura']:.2f} "
            f"words {r['words_resiliparse'][0]}~{r['words_resiliparse'][1]}/"
            f"{r['words_trafilatura'][0]}~{r['words_trafilatura'][1]} {r['kind']} d={r['hamming']} "
            f"{short(r['url_a'], r['url_b'])} ~ {short(r['url_b'], r['url_a'])}")
    return detail


def report(sites, examples, seconds):
    print(f"# bad: a pair of different pages of one site whose main contents' word {SHINGLE}-gram "
          f"Jaccard is below {MIN_JACCARD} by both Resiliparse and trafilatura; target: at most "
          f"{100 * TARGET:.0f}% of a site's pairs")
    print("| site | kind | pages | reported pairs | left out | different pages of one site | bad (both) "
          "| below 0.5 by Resiliparse | by trafilatura | share bad | target |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    details = []
    for site in sites:
        details.append(f"{site['name']}:")
        details.extend(print_site(site, examples))
    print("\n" + "\n".join(details))
    print(f"# {len(sites)} sites in {seconds:.0f} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sites", nargs="*", metavar="NAME=PATH")
    parser.add_argument("--neardup", default=os.path.join(ROOT, "target", "release", "neardup"))
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--examples", type=int, default=5)
    parser.add_argument("--args", default="", help="more arguments for neardup run, one string")
    args = parser.parse_args()
    ensure_venv()
    start = time.perf_counter()
    sites = named_sites(args.sites) if args.sites else default_sites()
    extra = args.args.split()
    figures = [site_figures(name, kind, files, args.neardup, extra) for name, kind, files in sites]
    seconds = time.perf_counter() - start
    report(figures, args.examples, seconds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"target": TARGET, "min_jaccard": MIN_JACCARD, "shingle": SHINGLE,
                       "neardup": args.neardup, "args": extra, "seconds": round(seconds, 1), "sites": figures}, f, indent=1)
    over = [s["name"] for s in figures if s["share_bad"] > TARGET]
    if args.check and over:
        print(f"over the {100 * TARGET:.0f}% target: {', '.join(over)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
