"""neardup.run against `neardup run`: the same counts and the same pairs; its errors; and
that other Python threads run while it works (the GIL is released)."""

import json
import threading
import time

import pytest

import neardup

CONFIGURATIONS = [
    ({}, []),
    ({"k": 6, "keep": "longest"}, ["-k", "6", "--keep", "longest"]),
    (
        {"scheme": "minhash", "threshold": 0.5, "stop_words": "english"},
        ["--scheme", "minhash", "--threshold", "0.5", "--stop-words", "english"],
    ),
    ({"verify": "jaccard", "min_jaccard": 0.3, "workers": 2}, ["--verify", "jaccard", "--min-jaccard", "0.3", "-w", "2"]),
]


def pairs(out):
    pq = pytest.importorskip("pyarrow.parquet")
    table = pq.read_table(out / "pairs")
    return sorted(
        zip(*(table.column(c).to_pylist() for c in ["doc_a", "doc_b", "kind", "hamming", "jaccard"]))
    )


def clusters(out):
    pq = pytest.importorskip("pyarrow.parquet")
    table = pq.read_table(out / "clusters")
    return sorted(zip(*(table.column(c).to_pylist() for c in ["doc_id", "cluster_id", "keep"])))


@pytest.mark.parametrize("options,flags", CONFIGURATIONS)
def test_run_equals_the_command_line(cli, tmp_path, example_corpus, options, flags):
    cli("run", "--quiet", "--output", tmp_path / "cli", *flags, example_corpus)
    summary = neardup.run(str(example_corpus), tmp_path / "py", **options)
    assert summary == json.loads((tmp_path / "py" / "summary.json").read_text())
    assert (tmp_path / "py" / "_SUCCESS").exists()
    want = json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert summary["counts"] == want["counts"]
    assert summary["counts"]["documents"] == 22
    assert pairs(tmp_path / "py") == pairs(tmp_path / "cli")
    assert clusters(tmp_path / "py") == clusters(tmp_path / "cli")


def test_a_run_finds_the_example_duplicates(tmp_path, example_corpus):
    summary = neardup.run([example_corpus], tmp_path / "out")
    assert summary["counts"]["pairs"] > 0
    assert summary["counts"]["exact_pairs"] + summary["counts"]["near_pairs"] == summary["counts"]["pairs"] - summary["counts"].get("url_pairs", 0)


def test_refused_configurations_raise_value_error(tmp_path, example_corpus):
    with pytest.raises(ValueError, match="--threshold applies to --method minhash"):
        neardup.run(example_corpus, tmp_path / "a", threshold=0.5)
    with pytest.raises(ValueError, match="--keep \"sometimes\""):
        neardup.run(example_corpus, tmp_path / "b", keep="sometimes")
    with pytest.raises(ValueError, match="--table-rounds"):
        neardup.run(example_corpus, tmp_path / "c", table_rounds="0")
    with pytest.raises(ValueError, match="unknown unit"):
        neardup.run(example_corpus, tmp_path / "d", memory_limit="12Q")
    with pytest.raises(ValueError, match="verify \"exact\""):
        neardup.run(example_corpus, tmp_path / "e", verify="exact")
    with pytest.raises(TypeError):
        neardup.run(example_corpus, tmp_path / "f", colour="blue")
    assert not (tmp_path / "a").exists()


def test_a_bad_record_names_the_file_and_line(tmp_path):
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text('{"id": "1", "text": "fine"}\n{"id": "2", "text": \n')
    with pytest.raises(neardup.NeardupError, match=r"bad\.jsonl:2") as caught:
        neardup.run(corpus, tmp_path / "out")
    assert "no _SUCCESS was written" in str(caught.value)
    assert not (tmp_path / "out" / "_SUCCESS").exists()
    # Skipped instead, with skip_invalid.
    summary = neardup.run(corpus, tmp_path / "skipped", skip_invalid=True)
    assert summary["counts"]["skipped"] == 1


def test_missing_inputs_and_occupied_outputs_are_library_errors(tmp_path, example_corpus):
    with pytest.raises(neardup.NeardupError, match="/no/such/corpus.jsonl"):
        neardup.run("/no/such/corpus.jsonl", tmp_path / "out")
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "mine.txt").write_text("the user's file")
    with pytest.raises(neardup.NeardupError, match="occupied exists and is not empty"):
        neardup.run(example_corpus, occupied)
    assert (occupied / "mine.txt").read_text() == "the user's file"


def test_other_threads_run_while_a_run_works(tmp_path):
    """With the GIL held for the whole run, the counting thread could not take a step until
    it ended; released, it keeps counting. The corpus doubles until a run lasts long enough
    to tell, so the check does not depend on how fast the machine is."""
    words = [f"word{i}" for i in range(5000)]
    ticks_during = []
    running = threading.Event()
    done = threading.Event()

    def count():
        while not done.is_set():
            if running.is_set():
                ticks_during.append(time.monotonic())
            time.sleep(0.001)

    counter = threading.Thread(target=count)
    counter.start()
    try:
        docs = 20000
        while True:
            corpus = tmp_path / f"big-{docs}.jsonl"
            with corpus.open("w") as f:
                for d in range(docs):
                    text = " ".join(words[(d * 7 + j * 13) % 5000] for j in range(60))
                    f.write(json.dumps({"id": str(d), "text": text}) + "\n")
            ticks_during.clear()
            running.set()
            start = time.monotonic()
            neardup.run(corpus, tmp_path / f"out-{docs}")
            end = time.monotonic()
            running.clear()
            if end - start > 0.3 or docs >= 640000:
                break
            docs *= 2
    finally:
        done.set()
        counter.join()
    ticks = [t for t in ticks_during if start <= t <= end]
    assert end - start > 0.3, "even the largest run was too short to tell"
    assert len(ticks) >= 20, f"{len(ticks)} ticks in a {end - start:.2f} s run"
