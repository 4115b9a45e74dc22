"""neardup.compare against `neardup compare --json`."""

import pytest

import neardup

PAIRS = [
    ("The quick brown fox jumps over the lazy dog.", "the quick brown fox jumps over the lazy dog"),
    (
        "one two three four five six seven eight nine ten eleven twelve",
        "one two three four five six seven eight nine ten eleven twelve thirteen",
    ),
    ("To bake the bread, mix the flour and water.", "A good map shows what the traveller needs."),
    ("2024 12345", "Hello world"),
]


@pytest.mark.parametrize("scheme", ["simhash-doc", "simhash-shingles", "minhash"])
@pytest.mark.parametrize("a,b", PAIRS)
def test_compare_equals_the_command_line(cli_json, scheme, a, b):
    want = cli_json("compare", "--json", "--scheme", scheme, "--text", a, "--text", b)
    for side in ("a", "b"):
        del want[side]["source"]
    assert neardup.compare(a, b, scheme=scheme) == want


def test_compare_options_equal_the_command_line(cli_json):
    a, b = "the cat sat on the mat", "a cat sat on a mat"
    want = cli_json(
        "compare", "--json", "--stop-words", "english", "--nfkc", "--shingle-jaccard", "2",
        "--text", a, "--text", b,
    )
    for side in ("a", "b"):
        del want[side]["source"]
    got = neardup.compare(a, b, stop_words="english", nfkc=True, shingle=2)
    assert got == want
    assert got["jaccard"] == 1.0 and got["jaccard_shingle"] == 2


def test_compare_verdicts():
    assert neardup.compare("Hello, World!", "hello world")["verdict"] == "exact duplicate"
    assert neardup.compare("", "Hello world")["verdict"] == "empty"
    with pytest.raises(ValueError, match="shingle must be at least 1"):
        neardup.compare("a", "b", shingle=0)
