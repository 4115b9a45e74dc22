"""Type stubs of the neardup extension module (see python/src/lib.rs)."""

import os
from typing import Any, Dict, List, Literal, Optional, Sequence, Union, overload

__version__: str

Scheme = Literal["simhash-doc", "simhash-shingles", "minhash", "minhash-oph"]
StopWords = Union[Literal["english"], str, "os.PathLike[str]", Sequence[str]]

class NeardupError(Exception):
    """An error of the library: an input that cannot be read or parsed, an output that
    cannot be written, a run that failed. The message names the file (and line)."""

@overload
def fingerprint(
    texts: Sequence[Optional[str]],
    scheme: Scheme = "simhash-doc",
    nfkc: bool = False,
    stop_words: Optional[StopWords] = None,
) -> List[Any]: ...
@overload
def fingerprint(
    texts: Any,
    scheme: Scheme = "simhash-doc",
    nfkc: bool = False,
    stop_words: Optional[StopWords] = None,
) -> Any: ...
def fingerprint(
    texts: Any,
    scheme: Scheme = "simhash-doc",
    nfkc: bool = False,
    stop_words: Optional[StopWords] = None,
) -> Any:
    """Fingerprints of texts, as `neardup hash` computes them.

    A list of str gives a list: one 64-bit int per text for the simhash schemes (0 for an
    empty document), one list of int (the signature) for minhash; None stays None. A pyarrow
    Array or ChunkedArray of strings gives the same kind of pyarrow object, of type uint64
    (or list<uint64>), nulls kept."""

def compare(
    a: str,
    b: str,
    scheme: Scheme = "simhash-doc",
    nfkc: bool = False,
    stop_words: Optional[StopWords] = None,
    shingle: int = 3,
) -> Dict[str, Any]:
    """The fields of `neardup compare --json` (without the documents' `source`): `scheme`,
    `a` and `b` (simhash, base32, minhash, n_tokens, n_features, empty), `hamming`,
    `cosine_estimate`, `jaccard`, `jaccard_shingle`, `containment_a_in_b`,
    `containment_b_in_a`, `minhash_jaccard_estimate`, `exact_duplicate`, `verdict`,
    `reason`."""

def run(
    inputs: Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]],
    output: Union[str, "os.PathLike[str]"],
    *,
    scheme: Scheme = "simhash-doc",
    nfkc: bool = False,
    stop_words: Optional[StopWords] = None,
    k: int = 3,
    tables: str = "auto",
    threshold: Optional[float] = None,
    verify: Optional[Literal["none", "jaccard", "minhash"]] = None,
    min_jaccard: Optional[float] = None,
    keep: Optional[str] = None,
    workers: int = 1,
    exact: bool = True,
    overwrite: bool = False,
    skip_invalid: bool = False,
    text_field: str = "text",
    id_field: Optional[str] = "id",
    memory_limit: str = "auto",
    table_rounds: str = "auto",
) -> Dict[str, Any]:
    """Runs neardup over the inputs as `neardup run` does, writing the run's tables to
    `output`, with the GIL released. Returns output/summary.json as a dict. Raises
    ValueError for a configuration the library refuses, NeardupError for a run that
    failed."""

class Index:
    """A saved index (made by `neardup run --index`)."""

    def __init__(self, path: Union[str, "os.PathLike[str]"]) -> None: ...
    @property
    def k(self) -> int:
        """The largest distance the index answers."""
    def query(
        self, texts: Any, k: Optional[int] = None
    ) -> List[List[Dict[str, Any]]]:
        """For each text, the indexed documents within k bits: dicts with `id`, `doc_id`,
        `hamming` and `cluster_id`, sorted by doc_id."""
