#!/usr/bin/env python3
"""No function outside tests over 100 lines, unless a comment right above it says why it must
be one piece (issue 35). CI runs this; it lists the offenders and exits 1.

    python3 scripts/long_functions.py [--limit 100] [--all]

`--all` lists every function over the limit, the explained ones too. A function is counted
from its `fn` line to its closing brace; `#[cfg(test)]` modules, `tests/` folders and
`tests.rs` files are skipped. The explanation is a `//` comment in the lines just above the
function (its doc comment or attributes may sit between) containing the words "one piece".

The scan is lexical, not a Rust parser: string, character and comment contents are blanked
before braces are counted, which is enough for this code base (checked against the functions
it reports: the line counts match an editor's).
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP_DIRS = {"target", ".git", "tests", "node_modules"}
FN = re.compile(r"\b(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)")
TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")


def blank(text):
    """The text with the contents of comments, strings and char literals replaced by spaces
    (newlines kept, so offsets and line numbers stay)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = '"' + hashes
            j = text.find(end, i + len(hashes) + 2)
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            m = re.match(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^'\\\n])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:  # a lifetime
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def closing(code, open_at):
    """The offset of the brace closing the one at open_at."""
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def functions(path):
    """(name, first line, lines, explained) of each function outside test modules."""
    text = open(path, encoding="utf-8").read()
    code = blank(text)
    skipped = []
    for m in TEST_MOD.finditer(code):
        skipped.append((m.start(), closing(code, m.end() - 1)))
    lines = text.split("\n")
    found = []
    pos = 0
    while True:
        m = FN.search(code, pos)
        if not m:
            break
        start = m.start()
        if any(a <= start <= b for a, b in skipped):
            pos = m.end()
            continue
        # The body: the first `{` before any `;` (a declaration without body has none).
        brace, semi = code.find("{", m.end()), code.find(";", m.end())
        if brace < 0 or (0 <= semi < brace):
            pos = m.end()
            continue
        end = closing(code, brace)
        first = code.count("\n", 0, start) + 1
        last = code.count("\n", 0, end) + 1
        above = []
        k = first - 2
        while k >= 0 and re.match(r"\s*(//|#\[|#!\[)", lines[k]):
            above.append(lines[k])
            k -= 1
        explained = any("one piece" in line for line in above if line.strip().startswith("//"))
        found.append((m.group(1), first, last - first + 1, explained))
        pos = m.end()  # nested functions are counted too
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--all", action="store_true", help="list the explained ones too")
    opts = parser.parse_args()
    offenders = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if not name.endswith(".rs") or name == "tests.rs":
                continue
            path = os.path.join(dirpath, name)
            for fn, line, count, explained in functions(path):
                if count > opts.limit and (opts.all or not explained):
                    rel = os.path.relpath(path, ROOT)
                    offenders.append((count, f"{rel}:{line}", fn, explained))
    for count, place, fn, explained in sorted(offenders, reverse=True):
        note = " (explained)" if explained else ""
        print(f"{place}: fn {fn} is {count} lines{note}")
    unexplained = [o for o in offenders if not o[3]]
    if unexplained:
        print(f"{len(unexplained)} function(s) over {opts.limit} lines without a comment saying why "
              "they must be one piece", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
