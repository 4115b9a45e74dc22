#!/usr/bin/env python3
"""Reads every output table of a neardup run with real analytics clients and checks it.

    analytics_check.py OUT [--examples-dir DIR] [--doc docs/outputs.md]

* DuckDB reads OUT/fingerprints/*.parquet, OUT/pairs/*.parquet and OUT/clusters/*.parquet and
  checks the column names and types, the row counts against summary.json, and the
  relations between the tables (pairs link existing documents with doc_a < doc_b, one kept
  document per cluster, cluster ids are the smallest doc_id, doc_id = file << 40 | record...).
* pyarrow.dataset reads the same three table directories and checks schemas (types and
  nullability) and row counts.
* Polars, if installed, checks its schema and row counts.
* Every example query in docs/outputs.md (the blocks after `<!-- example: NAME -->`) is run
  from DIR, where `out/` is the output and `corpus/` the input (DIR defaults to OUT's parent
  when OUT is named `out`; otherwise a scratch directory with an `out` link is used), and its
  result is checked against summary.json. The documented column tables must match the
  schemas expected here.

Exit status 0 if everything holds, 1 with the list of failures otherwise, 2 if duckdb or
pyarrow cannot be imported. Polars examples are reported as NOT RUN when Polars is missing
(an error if NEARDUP_REQUIRE_POLARS=1).
"""

import argparse
import ast
import glob
import json
import os
import re
import sys
import tempfile

try:
    import duckdb
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
except ImportError as e:  # pragma: no cover - reported to the Rust test
    print(f"analytics_check: cannot import duckdb and pyarrow ({e}); run scripts/test.sh", file=sys.stderr)
    sys.exit(2)

try:
    import polars as pl
except ImportError:
    pl = None

TABLES = ["fingerprints", "pairs", "clusters"]

# The contract (io/src/parquet_out.rs): column, Arrow type, DuckDB type, Polars type, nullable.
EXPECTED = {
    "fingerprints": [
        ("doc_id", "UInt64", "UBIGINT", "UInt64", False),
        ("id", "Utf8", "VARCHAR", "String", True),
        ("source", "Utf8", "VARCHAR", "String", False),
        ("record", "UInt64", "UBIGINT", "UInt64", False),
        ("simhash", "UInt64", "UBIGINT", "UInt64", False),
        ("n_tokens", "UInt32", "UINTEGER", "UInt32", False),
        ("bytes", "UInt64", "UBIGINT", "UInt64", False),
        ("empty", "Boolean", "BOOLEAN", "Boolean", False),
        ("url", "Utf8", "VARCHAR", "String", True),
        ("host", "Utf8", "VARCHAR", "String", True),
        ("fetched_at", "Timestamp(Microsecond, UTC)", "TIMESTAMP WITH TIME ZONE", "Datetime(time_unit='us', time_zone='UTC')", True),
        ("offset", "UInt64", "UBIGINT", "UInt64", True),
        ("length", "UInt64", "UBIGINT", "UInt64", True),
        ("url_normalized", "Utf8", "VARCHAR", "String", True),
    ],
    "pairs": [
        ("doc_a", "UInt64", "UBIGINT", "UInt64", False),
        ("doc_b", "UInt64", "UBIGINT", "UInt64", False),
        ("hamming", "UInt8", "UTINYINT", "UInt8", False),
        ("kind", "Utf8", "VARCHAR", "String", False),
        ("jaccard", "Float32", "FLOAT", "Float32", True),
    ],
    "clusters": [
        ("doc_id", "UInt64", "UBIGINT", "UInt64", False),
        ("cluster_id", "Int64", "BIGINT", "Int64", False),
        ("cluster_size", "UInt32", "UINTEGER", "UInt32", False),
        ("keep", "Boolean", "BOOLEAN", "Boolean", False),
        ("kept_doc_id", "UInt64", "UBIGINT", "UInt64", False),
        ("hamming", "UInt8", "UTINYINT", "UInt8", True),
        ("jaccard", "Float32", "FLOAT", "Float32", True),
    ],
}

ARROW_TYPES = {
    "UInt64": pa.uint64(),
    "Utf8": pa.string(),
    "UInt32": pa.uint32(),
    "UInt8": pa.uint8(),
    "Float32": pa.float32(),
    "Int64": pa.int64(),
    "Boolean": pa.bool_(),
    "Timestamp(Microsecond, UTC)": pa.timestamp("us", tz="UTC"),
}

RECORD_MASK = (1 << 40) - 1


class Checker:
    def __init__(self):
        self.failures = []
        self.notes = []
        self.passed = 0

    def check(self, condition, message):
        if condition:
            self.passed += 1
        else:
            self.failures.append(message)
        return condition

    def equal(self, got, want, what):
        return self.check(got == want, f"{what}: got {got!r}, expected {want!r}")


def one(con, sql):
    rows = con.sql(sql).fetchall()
    if len(rows) != 1:
        raise AssertionError(f"expected one row from {sql!r}, got {len(rows)}")
    return rows[0][0] if len(rows[0]) == 1 else rows[0]


# ---------------------------------------------------------------------------------------
# DuckDB


def check_duckdb(c, out, summary):
    counts = summary["counts"]
    k = summary["parameters"]["k"]
    con = duckdb.connect()
    glob_of = {t: os.path.join(out, t, "*.parquet").replace("'", "''") for t in TABLES}
    for t in TABLES:
        con.sql(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{glob_of[t]}')")
        described = [(r[0], r[1]) for r in con.sql(f"DESCRIBE {t}").fetchall()]
        want = [(name, duck) for name, _, duck, _, _ in EXPECTED[t]]
        c.equal(described, want, f"DuckDB columns and types of {t}/")

    # Row counts against summary.json.
    c.equal(one(con, "SELECT count(*) FROM fingerprints"), counts["documents"], "fingerprints rows = counts.documents")
    c.equal(one(con, "SELECT count(*) FROM clusters"), counts["documents"], "clusters rows = counts.documents")
    c.equal(one(con, "SELECT count(*) FROM pairs"), counts["pairs"], "pairs rows = counts.pairs")
    c.equal(one(con, "SELECT count(*) FROM pairs WHERE kind = 'exact'"), counts["exact_pairs"], "exact pairs")
    c.equal(one(con, "SELECT count(*) FROM pairs WHERE kind = 'near'"), counts["near_pairs"], "near pairs")
    c.equal(one(con, "SELECT count(*) FROM pairs WHERE kind NOT IN ('exact', 'near')"), 0, "pair kinds")
    c.equal(one(con, "SELECT count(*) FROM fingerprints WHERE empty"), counts["empty"], "empty documents")
    c.equal(one(con, "SELECT coalesce(sum(bytes), 0) FROM fingerprints"), counts["bytes"], "bytes")
    c.equal(
        one(con, "SELECT count(*) FROM clusters WHERE cluster_id >= 0"),
        counts["clustered_documents"],
        "clustered documents",
    )
    c.equal(
        one(con, "SELECT count(DISTINCT cluster_id) FROM clusters WHERE cluster_id >= 0"),
        counts["clusters"],
        "clusters",
    )
    c.equal(
        one(con, "SELECT count(*) FROM clusters WHERE NOT keep AND cluster_id >= 0"),
        counts["documents_to_remove"],
        "documents_to_remove (keep = false, cluster_id >= 0)",
    )
    c.equal(
        one(con, "SELECT count(*) FROM clusters WHERE NOT keep"),
        counts["documents_to_remove"],
        "every keep = false row is in a cluster",
    )

    # Every document exactly once in fingerprints/ and in clusters/.
    c.equal(one(con, "SELECT count(*) - count(DISTINCT doc_id) FROM fingerprints"), 0, "fingerprints doc_id unique")
    c.equal(one(con, "SELECT count(*) - count(DISTINCT doc_id) FROM clusters"), 0, "clusters doc_id unique")
    c.equal(
        one(con, "SELECT count(*) FROM fingerprints ANTI JOIN clusters USING (doc_id)"), 0, "documents without a cluster row"
    )
    c.equal(
        one(con, "SELECT count(*) FROM clusters ANTI JOIN fingerprints USING (doc_id)"), 0, "cluster rows of no document"
    )

    # doc_id = (file_index << 40) | record, files numbered as in parameters.inputs.
    inputs = summary["parameters"]["inputs"]
    con.execute("CREATE TABLE inputs (file_index UBIGINT, path VARCHAR)")
    con.executemany("INSERT INTO inputs VALUES (?, ?)", list(enumerate(inputs)))
    c.equal(
        one(
            con,
            f"""SELECT count(*) FROM fingerprints f LEFT JOIN inputs i ON i.path = f.source
                WHERE i.path IS NULL OR f.doc_id >> 40 <> i.file_index
                   OR f.doc_id & {RECORD_MASK} <> f.record""",
        ),
        0,
        "doc_id = (file_index << 40) | record",
    )
    c.check(
        one(con, "SELECT count(*) FROM fingerprints WHERE empty AND (simhash <> 0 OR n_tokens <> 0)") == 0,
        "empty documents have simhash 0 and no tokens",
    )

    # Pairs: ordered, existing, non-empty documents, listed once, distance within k.
    c.equal(one(con, "SELECT count(*) FROM pairs WHERE doc_a >= doc_b"), 0, "pairs with doc_a >= doc_b")
    c.equal(
        one(
            con,
            """SELECT count(*) FROM pairs p
               LEFT JOIN fingerprints a ON a.doc_id = p.doc_a
               LEFT JOIN fingerprints b ON b.doc_id = p.doc_b
               WHERE a.doc_id IS NULL OR b.doc_id IS NULL""",
        ),
        0,
        "pairs whose documents are not in fingerprints/",
    )
    c.equal(
        one(
            con,
            """SELECT count(*) FROM pairs p
               JOIN fingerprints a ON a.doc_id = p.doc_a
               JOIN fingerprints b ON b.doc_id = p.doc_b
               WHERE a.empty OR b.empty
                  OR p.hamming <> bit_count(xor(a.simhash, b.simhash))""",
        ),
        0,
        "pairs with an empty document or a wrong hamming",
    )
    c.equal(one(con, f"SELECT count(*) FROM pairs WHERE hamming > {k}"), 0, f"pairs beyond k = {k}")
    c.equal(
        one(con, "SELECT count(*) FROM (SELECT doc_a, doc_b FROM pairs GROUP BY ALL HAVING count(*) > 1)"),
        0,
        "pairs listed twice",
    )
    c.equal(one(con, "SELECT count(*) FROM pairs WHERE jaccard IS NOT NULL"), 0, "jaccard is null")
    # Exact pairs link members to the group's representative, which is no one's member.
    c.equal(
        one(
            con,
            """SELECT count(*) FROM pairs x JOIN pairs y ON x.doc_a = y.doc_b
               WHERE x.kind = 'exact' AND y.kind = 'exact'""",
        ),
        0,
        "exact pairs whose first document is itself folded",
    )

    # Clusters: under components, the components of the pairs; under stars (verified, the
    # default, and star), every removed document is a pair of the run with the one kept for
    # it, or an exact copy of such a document. Either way labelled by their smallest doc_id,
    # one keep each.
    rule = (summary.get("removal") or {}).get("rule", "components")
    if rule == "components":
        c.equal(
            one(
                con,
                """SELECT count(*) FROM pairs p
                   JOIN clusters a ON a.doc_id = p.doc_a JOIN clusters b ON b.doc_id = p.doc_b
                   WHERE a.cluster_id <> b.cluster_id OR a.cluster_id < 0""",
            ),
            0,
            "pairs whose documents are not in one cluster",
        )
    elif not summary["parameters"]["scheme"].startswith("minhash"):
        # Simhash: every removed document is within k bits of its kept one, recomputed from
        # fingerprints/, and clusters/ says how far.
        c.equal(
            one(
                con,
                f"""SELECT count(*) FROM clusters r
                   JOIN fingerprints fr ON fr.doc_id = r.doc_id
                   JOIN fingerprints fk ON fk.doc_id = r.kept_doc_id
                   WHERE NOT r.keep AND (bit_count(xor(fr.simhash, fk.simhash)) > {int(summary["parameters"]["k"])}
                      OR r.hamming IS DISTINCT FROM bit_count(xor(fr.simhash, fk.simhash)))""",
            ),
            0,
            "removed documents farther than k bits from their kept one, or hamming not their distance",
        )
    else:
        # MinHash: a near pair between the two documents' exact groups (a document's exact
        # group: itself, or the representative its exact pair names), or a Jaccard
        # similarity the clustering verified itself (a pair the search missed).
        group = """(SELECT f.doc_id, coalesce(e.doc_a, f.doc_id) AS grp FROM fingerprints f
                    LEFT JOIN (SELECT doc_a, doc_b FROM pairs WHERE kind = 'exact') e
                    ON e.doc_b = f.doc_id)"""
        c.equal(
            one(
                con,
                f"""SELECT count(*) FROM clusters r
                   JOIN {group} gr ON gr.doc_id = r.doc_id
                   JOIN {group} gk ON gk.doc_id = r.kept_doc_id
                   WHERE NOT r.keep AND gr.grp <> gk.grp AND r.jaccard IS NULL AND NOT EXISTS (
                     SELECT 1 FROM pairs p JOIN {group} ga ON ga.doc_id = p.doc_a
                     JOIN {group} gb ON gb.doc_id = p.doc_b
                     WHERE p.kind = 'near' AND least(ga.grp, gb.grp) = least(gr.grp, gk.grp)
                       AND greatest(ga.grp, gb.grp) = greatest(gr.grp, gk.grp))""",
            ),
            0,
            "removed documents that are no pair (nor exact copy of one) of their kept document",
        )
        c.equal(summary["removal"]["removed_unmeasured"], 0, "removal.removed_unmeasured")
    c.equal(
        one(
            con,
            """SELECT count(*) FROM clusters r JOIN clusters k ON k.doc_id = r.kept_doc_id
               WHERE NOT k.keep OR k.cluster_id <> r.cluster_id
                  OR (r.keep <> (r.kept_doc_id = r.doc_id))""",
        ),
        0,
        "kept_doc_id is the kept document of the row's cluster (itself when kept)",
    )
    c.equal(
        one(
            con,
            """SELECT count(*) FROM (
                 SELECT cluster_id, min(doc_id) AS smallest, count(*) AS n,
                        min(cluster_size) AS lo, max(cluster_size) AS hi,
                        count(*) FILTER (WHERE keep) AS kept
                 FROM clusters WHERE cluster_id >= 0 GROUP BY cluster_id)
               WHERE smallest <> cluster_id OR lo <> n OR hi <> n OR kept <> 1 OR n < 2""",
        ),
        0,
        "clusters: id = smallest doc_id, size = members, exactly one keep",
    )
    c.equal(
        one(
            con,
            """SELECT count(*) FROM clusters
               WHERE cluster_id < 0 AND (cluster_id <> -1 OR cluster_size <> 1 OR NOT keep)""",
        ),
        0,
        "unclustered rows are (-1, 1, keep)",
    )
    in_pairs = "(SELECT doc_a AS doc_id FROM pairs UNION SELECT doc_b FROM pairs)"
    if rule == "components":
        c.equal(
            one(con, f"SELECT count(*) FROM clusters WHERE (cluster_id >= 0) <> (doc_id IN {in_pairs})"),
            0,
            "a document is clustered iff it is in a pair",
        )
    else:
        # A star may leave a document of a pair alone (its duplicates were taken by others).
        c.equal(
            one(con, f"SELECT count(*) FROM clusters WHERE cluster_id >= 0 AND doc_id NOT IN {in_pairs}"),
            0,
            "a clustered document is in a pair",
        )
    largest = summary.get("largest_clusters") or []
    if largest:
        c.equal(
            one(con, "SELECT max(cluster_size) FROM clusters"),
            largest[0]["size"],
            "largest_clusters[0].size",
        )
    return con


# ---------------------------------------------------------------------------------------
# pyarrow.dataset and Polars


def check_pyarrow(c, out, summary):
    counts = summary["counts"]
    want_rows = {"fingerprints": counts["documents"], "pairs": counts["pairs"], "clusters": counts["documents"]}
    for t in TABLES:
        dataset = ds.dataset(os.path.join(out, t), format="parquet")
        want = pa.schema([pa.field(n, ARROW_TYPES[a], nullable=null) for n, a, _, _, null in EXPECTED[t]])
        c.check(
            dataset.schema.equals(want, check_metadata=False),
            f"pyarrow schema of {t}/:\n{dataset.schema}\nexpected:\n{want}",
        )
        c.equal(dataset.count_rows(), want_rows[t], f"pyarrow rows of {t}/")
        # Every part says which table it is (docs/outputs.md, "Table metadata").
        for f in dataset.files:
            meta = pq.read_metadata(f).metadata or {}
            c.equal(meta.get(b"neardup.table"), t.encode(), f"pyarrow: neardup.table of {f}")
            c.equal(meta.get(b"neardup.format"), b"1", f"pyarrow: neardup.format of {f}")
        names = sorted(os.path.basename(f) for f in dataset.files)
        c.check(
            names and all(re.fullmatch(r"part-\d{5}\.parquet", n) for n in names),
            f"pyarrow files of {t}/: {names}",
        )
    table = ds.dataset(os.path.join(out, "clusters"), format="parquet").to_table()
    c.equal(
        pc.sum(pc.invert(table["keep"]).cast(pa.int64())).as_py() or 0,
        counts["documents_to_remove"],
        "pyarrow: keep = false rows",
    )
    pairs = ds.dataset(os.path.join(out, "pairs"), format="parquet").to_table()
    if pairs.num_rows:
        c.check(pc.all(pc.less(pairs["doc_a"], pairs["doc_b"])).as_py(), "pyarrow: doc_a < doc_b")


def check_polars(c, out, summary):
    if pl is None:
        return
    counts = summary["counts"]
    want_rows = {"fingerprints": counts["documents"], "pairs": counts["pairs"], "clusters": counts["documents"]}
    for t in TABLES:
        frame = pl.scan_parquet(os.path.join(out, t, "*.parquet"))
        schema = [(name, str(dtype)) for name, dtype in frame.collect_schema().items()]
        c.equal(schema, [(n, p) for n, _, _, p, _ in EXPECTED[t]], f"Polars schema of {t}/")
        c.equal(frame.select(pl.len()).collect().item(), want_rows[t], f"Polars rows of {t}/")


# ---------------------------------------------------------------------------------------
# docs/outputs.md: the column tables and the example queries


def doc_tables(doc):
    """The column tables under `## `TABLE/`` headings: {table: [(col, arrow, duck, polars, nullable)]}."""
    tables = {}
    current = None
    for line in doc.splitlines():
        heading = re.match(r"^## `(\w+)/`", line)
        if heading:
            current = heading.group(1)
            tables[current] = []
            continue
        if line.startswith("## "):
            current = None
        if current and line.startswith("| `"):
            cells = [x.strip() for x in line.strip().strip("|").split("|")]
            tables[current].append((cells[0].strip("`"), cells[1], cells[2], cells[3], cells[4] == "yes"))
    return tables


def doc_examples(doc):
    pattern = re.compile(r"<!-- example: (\S+)((?: \S+=\S+)*) -->\s*```(\w+)\n(.*?)```", re.S)
    examples = []
    for m in pattern.finditer(doc):
        needs = dict(kv.split("=", 1) for kv in m.group(2).split())
        examples.append({"name": m.group(1), "needs": needs.get("needs"), "lang": m.group(3), "code": m.group(4)})
    return examples


def run_python(code):
    """Runs a snippet; returns (namespace, value of its last line if it is `print(x)` or `x`)."""
    tree = ast.parse(code)
    last = tree.body[-1] if tree.body else None
    target = None
    if isinstance(last, ast.Expr):
        target = last.value
        if isinstance(target, ast.Call) and getattr(target.func, "id", None) == "print" and len(target.args) == 1:
            target = target.args[0]
        tree.body = tree.body[:-1]
    namespace = {}
    exec(compile(tree, "<docs/outputs.md>", "exec"), namespace)
    value = eval(compile(ast.Expression(target), "<docs/outputs.md>", "eval"), namespace) if target else None
    return namespace, value


def rows_of(result):
    """Rows of a DuckDB relation or a Polars frame, as tuples."""
    if pl is not None and isinstance(result, pl.DataFrame):
        return result.rows()
    return result.fetchall()


def expectations(summary, con):
    counts = summary["counts"]
    kept = counts["documents"] - counts["documents_to_remove"]
    kept_bytes = one(con, "SELECT coalesce(sum(f.bytes), 0) FROM fingerprints f JOIN clusters c USING (doc_id) WHERE c.keep")
    kept_parquet = one(
        con, "SELECT count(*) FROM fingerprints f JOIN clusters c USING (doc_id) WHERE c.keep AND f.source LIKE '%.parquet'"
    )
    simhash = dict(con.sql("SELECT doc_id, simhash FROM fingerprints").fetchall())
    inputs = summary["parameters"]["inputs"]

    def top_clusters(c, rows):
        c.equal(len(rows), min(10, counts["clusters"]), "top_clusters: rows")
        if rows:
            c.equal(rows[0][1], summary["largest_clusters"][0]["size"], "top_clusters: largest size first")
            c.equal(len({r[0] for r in rows}), len(rows), "top_clusters: one row per cluster")

    def hex_ok(c, rows):
        c.equal(len(rows), min(5, counts["documents"]), "simhash_hex: rows")
        for doc_id, _, text in rows:
            c.equal(text, format(simhash[doc_id], "016x"), f"simhash_hex of {doc_id}")

    def decoded(c, rows):
        c.equal(len(rows), min(5, counts["documents"]), "decode_doc_id: rows")
        for doc_id, file_index, record, source in rows:
            c.equal((file_index << 40) | record, doc_id, "decode_doc_id: round trip")
            c.equal(inputs[file_index], source, "decode_doc_id: file_index names the source")

    def histogram(c, rows):
        c.equal(sum(n for _, n in rows), counts["clusters"], "cluster_size_histogram: clusters")
        c.equal(sum(s * n for s, n in rows), counts["clustered_documents"], "cluster_size_histogram: documents")

    def pairs_with_ids(name):
        def check(c, rows):
            c.equal(len(rows), counts["pairs"], f"{name}: rows")
            if summary["parameters"]["command_line"] and "--no-id" not in summary["parameters"]["command_line"]:
                c.check(all(r[2] is not None and r[3] is not None for r in rows), f"{name}: ids present")

        return check

    def pyarrow_dataset(c, namespace):
        c.equal(namespace["pairs"].num_rows, counts["pairs"], "pyarrow_dataset: pairs rows")
        c.equal(namespace["clusters"].num_rows, counts["documents"], "pyarrow_dataset: clusters rows")
        c.equal(namespace["to_remove"].num_rows, counts["documents_to_remove"], "pyarrow_dataset: to_remove rows")

    def table_metadata(c, namespace):
        c.equal(namespace["table"], "pairs", "table_metadata: neardup.table")
        c.equal(namespace["scheme"], "simhash-doc", "table_metadata: neardup.scheme")
        c.equal(namespace["params"]["search"]["k"], summary["parameters"]["k"], "table_metadata: k")

    def jsonl_text(c, rows):
        c.equal(len(rows), kept - kept_parquet, "deduplicated_jsonl_text: kept JSONL documents")

    return {
        "simhash_hex": hex_ok,
        "top_clusters": top_clusters,
        "top_clusters_polars": top_clusters,
        "to_remove": lambda c, rows: c.equal(len(rows), counts["documents_to_remove"], "to_remove: rows"),
        "to_remove_polars": lambda c, rows: c.equal(len(rows), counts["documents_to_remove"], "to_remove_polars: rows"),
        "pairs_with_ids": pairs_with_ids("pairs_with_ids"),
        "pairs_with_ids_polars": pairs_with_ids("pairs_with_ids_polars"),
        "deduplicated": lambda c, rows: c.equal(rows, [(kept, kept_bytes)], "deduplicated: count and bytes"),
        "deduplicated_polars": lambda c, value: c.equal(value, kept, "deduplicated_polars: height"),
        "deduplicated_parquet_text": lambda c, rows: c.equal(len(rows), kept_parquet, "deduplicated_parquet_text: rows"),
        "deduplicated_jsonl_text": jsonl_text,
        "cluster_size_histogram": histogram,
        "decode_doc_id": decoded,
        "pyarrow_dataset": pyarrow_dataset,
        "table_metadata": table_metadata,
        "table_metadata_duckdb": lambda c, rows: c.equal(
            rows, [("neardup.scheme", "simhash-doc"), ("neardup.table", "clusters")], "table_metadata_duckdb: rows"
        ),
    }


def check_doc(c, doc_path, examples_dir, summary, con):
    with open(doc_path, encoding="utf-8") as f:
        doc = f.read()

    tables = doc_tables(doc)
    for t in TABLES:
        c.equal(tables.get(t), EXPECTED[t], f"the documented columns of {t}/ ({doc_path})")

    examples = doc_examples(doc)
    expected = expectations(summary, con)
    names = [e["name"] for e in examples]
    c.equal(sorted(set(names)), sorted(expected), "the examples in the doc and the ones checked here")
    c.equal(len(names), len(set(names)), "example names are unique")

    corpus = os.path.join(examples_dir, "corpus")
    have = {
        "parquet": bool(glob.glob(os.path.join(corpus, "*.parquet"))),
        "jsonl": bool(glob.glob(os.path.join(corpus, "*.jsonl*"))),
    }
    run, not_run = [], []
    cwd = os.getcwd()
    os.chdir(examples_dir)
    try:
        for e in examples:
            name = e["name"]
            if e["needs"] and not have.get(e["needs"]):
                not_run.append(f"{name} (no {e['needs']} files in corpus/)")
                continue
            if e["lang"] == "python" and "polars" in e["code"] and pl is None:
                not_run.append(f"{name} (Polars is not installed)")
                continue
            check = expected.get(name)
            try:
                if e["lang"] == "sql":
                    result = duckdb.connect().sql(e["code"])
                    value = rows_of(result) if result is not None else None
                elif e["lang"] == "python":
                    namespace, value = run_python(e["code"])
                    if name in ("pyarrow_dataset", "table_metadata"):
                        value = namespace
                    elif value is not None and not isinstance(value, int):
                        value = rows_of(value)
                else:
                    c.check(False, f"example {name}: unknown language {e['lang']}")
                    continue
            except Exception as err:  # noqa: BLE001 - any failure of a documented query
                c.check(False, f"example {name} failed to run: {type(err).__name__}: {err}")
                continue
            run.append(name)
            if check:
                check(c, value)
    finally:
        os.chdir(cwd)
    c.notes.append(f"examples run: {', '.join(run)}")
    if not_run:
        c.notes.append(f"examples NOT run: {'; '.join(not_run)}")
        if pl is None and os.environ.get("NEARDUP_REQUIRE_POLARS") == "1":
            c.check(False, "Polars is required (NEARDUP_REQUIRE_POLARS=1) but not installed")


# ---------------------------------------------------------------------------------------


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="a neardup output directory")
    parser.add_argument("--doc", default=os.path.join(here, "..", "docs", "outputs.md"))
    parser.add_argument("--examples-dir", help="where out/ (and corpus/) are, for the doc's examples")
    args = parser.parse_args()
    out = os.path.abspath(args.out)

    c = Checker()
    if not os.path.isfile(os.path.join(out, "_SUCCESS")):
        print(f"analytics_check: {out} has no _SUCCESS: not a complete run, refusing to read it", file=sys.stderr)
        return 1
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    c.equal(summary["errors"], [], "summary.json errors")
    for t in TABLES:
        stray = [n for n in os.listdir(os.path.join(out, t)) if not re.fullmatch(r"part-\d{5}\.parquet", n)]
        c.equal(stray, [], f"files other than committed parts in {t}/")

    con = check_duckdb(c, out, summary)
    check_pyarrow(c, out, summary)
    check_polars(c, out, summary)

    scratch = None
    examples_dir = args.examples_dir
    if examples_dir is None and os.path.basename(out) == "out":
        examples_dir = os.path.dirname(out)
    if examples_dir is None:
        scratch = tempfile.TemporaryDirectory()
        examples_dir = scratch.name
        os.symlink(out, os.path.join(examples_dir, "out"))
    check_doc(c, args.doc, os.path.abspath(examples_dir), summary, con)

    versions = f"duckdb {duckdb.__version__}, pyarrow {pa.__version__}, polars {pl.__version__ if pl else 'not installed'}"
    for note in c.notes:
        print(f"analytics_check: {note}")
    if c.failures:
        print(f"analytics_check: {len(c.failures)} FAILED checks ({c.passed} passed; {versions}):", file=sys.stderr)
        for failure in c.failures:
            print(f"  - {failure}", file=sys.stderr)
        return 1
    print(f"analytics_check: all {c.passed} checks passed on {out} ({versions})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
