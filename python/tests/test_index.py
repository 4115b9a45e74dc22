"""neardup.Index against `neardup query` over an index `neardup run --index` made."""

import json

import pytest

import neardup

QUERIES = [
    "THE RIVER RISES IN THE HILLS ABOVE THE TOWN AND RUNS WEST THROUGH A NARROW VALLEY OF OAK AND ASH BEFORE IT REACHES THE SEA.",
    "To bake the bread, mix the flour, water, salt and yeast into a rough dough, let it rest for half an hour, then knead it until smooth.",
    "nothing like any document of the corpus at all, really",
    "2024 12345",
]


@pytest.fixture(scope="module")
def index(cli, example_corpus, tmp_path_factory):
    dir = tmp_path_factory.mktemp("index")
    cli("run", "--quiet", "-k", "6", "--index", dir / "idx", "--output", dir / "out", example_corpus)
    return dir / "idx"


def cli_matches(cli, index, texts, k=None):
    args = ["query", "--quiet", "--index", index]
    if k is not None:
        args += ["-k", k]
    for t in texts:
        args += ["--text", t]
    by_query = [[] for _ in texts]
    for line in cli(*args).splitlines():
        row = json.loads(line)
        n = int(row.pop("query").removeprefix("text:"))
        by_query[n - 1].append(row)
    return by_query


@pytest.mark.parametrize("k", [None, 0, 3, 6])
def test_query_equals_the_command_line(cli, example_corpus, index, k):
    texts = QUERIES + [json.loads(l)["text"] for l in example_corpus.read_text().splitlines()]
    got = neardup.Index(index).query(texts, k=k)
    assert got == cli_matches(cli, index, texts, k)
    assert len(got) == len(texts)
    assert got[-1] and got[QUERIES.index("2024 12345")] == []


def test_query_takes_pyarrow(index):
    pa = pytest.importorskip("pyarrow")
    idx = neardup.Index(index)
    assert idx.query(pa.array(QUERIES)) == idx.query(QUERIES)
    assert idx.k == 6
    assert "k=6" in repr(idx)


def test_query_errors(index, tmp_path):
    with pytest.raises(ValueError, match="larger than the index's k = 6"):
        neardup.Index(index).query(["a"], k=7)
    with pytest.raises(neardup.NeardupError, match=str(tmp_path / "none")):
        neardup.Index(tmp_path / "none")
