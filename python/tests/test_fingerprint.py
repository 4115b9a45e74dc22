"""neardup.fingerprint against `neardup hash`, the golden vectors of the simhash-doc
definition, and pyarrow in and out."""

import json
import re

import pytest

import neardup
from conftest import shared

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "the the the cat",
    "Ünïcödé façade — naïve café 123 4u2 x_y",
    "ＦＵＬＬ ｗｉｄｔｈ letters and the ﬁne ligature",
    "Of the people, by the people, for the people.",
    "2024 12345 42",
    "",
    "one two three four five six seven eight nine ten eleven twelve",
]

SCHEMES = ["simhash-doc", "simhash-shingles", "minhash", "minhash-oph"]


def hash_cli(cli, tmp_path, texts, scheme, nfkc, stop_words):
    corpus = tmp_path / "texts.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts)),
        encoding="utf-8",
    )
    args = ["hash", "--quiet", "--format", "jsonl", "--scheme", scheme]
    if nfkc:
        args.append("--nfkc")
    if stop_words:
        args += ["--stop-words", stop_words]
    lines = [json.loads(line) for line in cli(*args, corpus).splitlines()]
    assert [line["id"] for line in lines] == [str(i) for i in range(len(texts))]
    if scheme.startswith("minhash"):
        return [[int(v, 16) for v in line["minhash"]] for line in lines]
    return [int(line["simhash"], 16) for line in lines]


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("nfkc", [False, True])
@pytest.mark.parametrize("stop_words", [None, "english"])
def test_fingerprints_equal_neardup_hash(cli, tmp_path, example_corpus, scheme, nfkc, stop_words):
    texts = TEXTS + [json.loads(line)["text"] for line in example_corpus.read_text().splitlines()]
    got = neardup.fingerprint(texts, scheme=scheme, nfkc=nfkc, stop_words=stop_words)
    assert got == hash_cli(cli, tmp_path, texts, scheme, nfkc, stop_words)
    if scheme.startswith("minhash"):
        assert all(len(s) == 128 for s in got)
    else:
        assert got[TEXTS.index("")] == 0


def test_nfkc_and_stop_words_change_fingerprints():
    text = ["ＦＵＬＬ ｗｉｄｔｈ letters and the ﬁne ligature"]
    assert neardup.fingerprint(text) != neardup.fingerprint(text, nfkc=True)
    assert neardup.fingerprint(text) != neardup.fingerprint(text, stop_words="english")


def test_stop_words_as_a_file_or_a_list(tmp_path):
    words = tmp_path / "stop.txt"
    words.write_text("the\nof # a comment\n")
    text = ["the history of the town"]
    from_file = neardup.fingerprint(text, stop_words=str(words))
    assert from_file == neardup.fingerprint(text, stop_words=words)
    assert from_file == neardup.fingerprint(text, stop_words=["the", "of"])
    assert from_file == neardup.fingerprint(["history town"])


def golden_vectors():
    """The simhash-doc rows of the definition's golden-vector table: (text, hex, tf hex)."""
    note = shared("notes/simhash-doc.md").read_text(encoding="utf-8")
    rows = []
    for line in note.splitlines():
        m = re.match(r'^\| "(.*)" \| [^|]* \| ([0-9a-f]{16}) \| [a-z2-7]{13}[^|]* \| (\S+) \|$', line)
        if m:
            text = re.sub(r"\\u([0-9A-Fa-f]{4})", lambda u: chr(int(u.group(1), 16)), m.group(1))
            tf = m.group(2) if m.group(3) == "same" else m.group(3)
            rows.append((text, int(m.group(2), 16), int(tf, 16)))
    return rows


def test_golden_vectors_of_simhash_doc():
    rows = golden_vectors()
    assert len(rows) == 7, rows
    texts = [r[0] for r in rows]
    assert neardup.fingerprint(texts) == [r[1] for r in rows]
    assert texts[-2] == "co\u00adoperate co\u200boperate"


def test_none_stays_none():
    got = neardup.fingerprint(["a cat", None, ""], scheme="minhash")
    assert got[1] is None and len(got[0]) == 128 and len(got[2]) == 128


def test_pyarrow_in_and_out():
    pa = pytest.importorskip("pyarrow")
    texts = TEXTS + [None]
    want = neardup.fingerprint(texts)
    for array in [pa.array(texts), pa.array(texts, type=pa.large_string())]:
        got = neardup.fingerprint(array)
        assert isinstance(got, pa.Array) and got.type == pa.uint64()
        assert got.to_pylist() == want
        assert got.null_count == 1 and not got[len(texts) - 1].is_valid
    chunked = pa.chunked_array([texts[:3], texts[3:]], type=pa.large_string())
    got = neardup.fingerprint(chunked)
    assert isinstance(got, pa.ChunkedArray) and got.num_chunks == 2
    assert got.type == pa.uint64() and got.to_pylist() == want
    signatures = neardup.fingerprint(pa.array(texts), scheme="minhash")
    assert signatures.type == pa.list_(pa.uint64())
    assert signatures.to_pylist() == neardup.fingerprint(texts, scheme="minhash")
    empty = neardup.fingerprint(pa.array([], type=pa.string()))
    assert len(empty) == 0 and empty.type == pa.uint64()


def test_bad_arguments_raise():
    with pytest.raises(TypeError, match="not one str"):
        neardup.fingerprint("a single string")
    with pytest.raises(TypeError, match=r"texts\[1\] is a int"):
        neardup.fingerprint(["a", 1])
    with pytest.raises(ValueError, match="scheme \"minhashes\" is not one of"):
        neardup.fingerprint(["a"], scheme="minhashes")
    with pytest.raises(ValueError, match="holds no words"):
        neardup.fingerprint(["a"], stop_words=[])
    with pytest.raises(neardup.NeardupError, match="/no/such/list"):
        neardup.fingerprint(["a"], stop_words="/no/such/list")
    pa = pytest.importorskip("pyarrow")
    with pytest.raises(TypeError, match="array of strings"):
        neardup.fingerprint(pa.array([1, 2]))
