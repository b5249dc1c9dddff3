"""Posting runs: the doc numbers of one term, packed, and the counts a query needs.

A run lists the distinct doc numbers of one term in ascending order, packed as one of
three dtypes: "u4" native uint32 (the in-process index), "<i8" little-endian int64
(SQLite), ">i8" big-endian int64 (PostgreSQL, whose int8send writes that order, so a
migration can pack runs in SQL). numpy is used for large batches and queries, imported
only when one needs it, never by ``import memlib``.
"""

from __future__ import annotations

import sys
from array import array
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from functools import cache
from itertools import chain
from operator import itemgetter
from typing import Any

__all__ = [
    "NUMPY_IMPORT_BATCH",
    "NUMPY_IMPORT_POSTINGS",
    "NUMPY_MIN_BATCH",
    "NUMPY_MIN_POSTINGS",
    "batch_numpy",
    "count_matches",
    "numpy_or_none",
    "postings_numpy",
    "pack_docs",
    "run_and_tfs_without",
    "run_without",
    "runs_by_term",
    "tf_runs_by_term",
    "unpack_docs",
]

# Below this many postings per query a dict count is faster than numpy (and keeps
# small stores free of the import). Tests set it to 0 to drive the numpy path; readers
# look it up on this module at call time so that the setting reaches them.
NUMPY_MIN_POSTINGS = 512
# From this many records on, postings are inverted with numpy for the whole batch: one
# sorted pass instead of a dict look-up and an append per (term, record)…
NUMPY_MIN_BATCH = 256
# …once numpy is loaded. Importing it costs a fresh process about 70 ms and 20 MB: more
# than a dict takes to invert a tail of a thousand records (a reader catching up on what
# others appended since its index file), so only a batch this big pays for it (an
# import's batches of 5,000 do).
NUMPY_IMPORT_BATCH = 2_048
# The same trade for a recall: counting or scoring this many postings in plain Python
# costs about what importing numpy does, so a fresh process (every CLI call, every agent
# session) imports it only for bigger lists; one that has it already uses it from
# NUMPY_MIN_POSTINGS on.
NUMPY_IMPORT_POSTINGS = 100_000

_ARRAY_CODE = {"u4": "I", "<i8": "q", ">i8": "q"}


@cache
def numpy_or_none() -> Any | None:
    """numpy when installed (the ``scale`` extra), else None: every use has a fallback."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def _swapped(dtype: str) -> bool:
    return (dtype[0] == "<" and sys.byteorder != "little") or (
        dtype[0] == ">" and sys.byteorder != "big"
    )


def pack_docs(docs: Iterable[int], dtype: str) -> bytes:
    """Doc numbers packed as ``dtype`` (see the module docstring)."""
    packed = array(_ARRAY_CODE[dtype], docs)
    if _swapped(dtype):
        packed.byteswap()
    return packed.tobytes()


def unpack_docs(blob: bytes, dtype: str) -> array[int]:
    """The doc numbers ``pack_docs(docs, dtype)`` packed."""
    docs = array(_ARRAY_CODE[dtype])
    docs.frombytes(blob)
    if _swapped(dtype):
        docs.byteswap()
    return docs


def run_without(run: bytes, doc: int, dtype: str) -> bytes | None:
    """``run`` with ``doc`` taken out (``b""`` if it was the only one); None if absent.

    How a SQL store retracts a record from one of its terms' runs.
    """
    docs = unpack_docs(run, dtype)
    if doc not in docs:
        return None
    docs.remove(doc)
    return pack_docs(docs, dtype)


def run_and_tfs_without(
    run: bytes, tfs: bytes, doc: int, dtype: str
) -> tuple[bytes, bytes] | None:
    """``run_without`` for a run and its parallel run of term frequencies: the doc and
    its tf leave together; None if the doc is absent."""
    docs = unpack_docs(run, dtype)
    if doc not in docs:
        return None
    at = docs.index(doc)
    freqs = unpack_docs(tfs, dtype)
    del docs[at]
    if len(freqs) > at:
        del freqs[at]
    return pack_docs(docs, dtype), pack_docs(freqs, dtype)


def count_matches(runs: Sequence[bytes], dtype: str) -> tuple[Sequence[int], Sequence[int]]:
    """``(doc ids ascending, how many of the runs hold each)`` for runs packed as ``dtype``.

    Each run lists distinct ids of one term, so a doc's count is its matched terms.
    """
    total = sum(len(run) for run in runs) // 8
    np = postings_numpy(total) if runs else None
    if np is not None:
        ids, counts = np.unique(
            np.concatenate([np.frombuffer(run, dtype=dtype) for run in runs]), return_counts=True
        )
        return ids, counts  # numpy arrays: a caller groups them without a Python loop
    tally: dict[int, int] = {}
    for run in runs:
        for doc in unpack_docs(run, dtype):
            tally[doc] = tally.get(doc, 0) + 1
    ordered = sorted(tally)
    return ordered, [tally[doc] for doc in ordered]


def postings_numpy(total: int) -> Any | None:
    """numpy, if ``total`` postings are worth counting or scoring with it; else None."""
    if total >= NUMPY_MIN_POSTINGS and (
        "numpy" in sys.modules or total >= NUMPY_IMPORT_POSTINGS
    ):
        return numpy_or_none()
    return None


def batch_numpy(records: int) -> Any | None:
    """numpy, if a batch of ``records`` is worth inverting with it; else None."""
    if records >= NUMPY_MIN_BATCH and ("numpy" in sys.modules or records >= NUMPY_IMPORT_BATCH):
        return numpy_or_none()
    return None


def _pair_keys(
    np: Any, texts: Sequence[tuple[int, Collection[str]]], number_of: dict[str, int]
) -> Any | None:
    """One int64 key ``term number * rows + row`` per term occurrence, sorted (so by term,
    then doc, repeats side by side); None when the texts hold no term at all."""
    flat = list(chain.from_iterable(terms for _, terms in texts))
    if not flat:
        return None
    # itemgetter looks every term up in one C loop (map() would call once per term).
    numbers = itemgetter(*flat)(number_of) if len(flat) > 1 else [number_of[flat[0]]]
    term_of = np.array(numbers, dtype=np.int64).reshape(-1)
    rows = len(texts)
    row_of = np.repeat(
        np.arange(rows, dtype=np.int64),
        np.fromiter((len(terms) for _, terms in texts), dtype=np.int64, count=rows),
    )
    return np.sort(term_of * rows + row_of)


def runs_by_term(
    texts: Sequence[tuple[int, Collection[str]]], number_of: dict[str, int], dtype: str
) -> list[tuple[int, bytes]]:
    """Invert ``(doc, terms)`` pairs: ``(term number, its docs packed as dtype)`` per term.

    Term numbers ascending; each term's docs ascending (``texts`` must be in doc order)
    and distinct (a term repeated in a doc counts once); ``dtype`` as in ``pack_docs``.
    numpy sorts a big batch in one pass; without numpy, or for a few docs, a dict does.
    """
    np = batch_numpy(len(texts))
    if np is None:
        by_term: dict[int, list[int]] = {}
        for doc, terms in texts:
            for term in set(terms):
                by_term.setdefault(number_of[term], []).append(doc)
        return [(number, pack_docs(docs, dtype)) for number, docs in sorted(by_term.items())]
    keys = _pair_keys(np, texts, number_of)
    if keys is None:
        return []  # records of punctuation only: no term, no posting
    rows = len(texts)
    keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]  # repeats collapse
    term_of, row_of = np.divmod(keys, rows)
    docs = np.fromiter((doc for doc, _ in texts), dtype=np.int64, count=rows)[row_of]
    packed = docs.astype(dtype).tobytes()
    cuts = np.flatnonzero(np.diff(term_of)) + 1
    starts = np.concatenate(([0], cuts))
    # Slices of one bytes object: a numpy slice per term costs several times more.
    size = np.dtype(dtype).itemsize
    return list(zip(
        term_of[starts].tolist(),
        map(packed.__getitem__, map(slice, (starts * size).tolist(),
                                    (np.append(cuts, len(keys)) * size).tolist())),
        strict=True,
    ))


def tf_runs_by_term(
    texts: Sequence[tuple[int, Sequence[str]]], number_of: dict[str, int], dtype: str = "u4"
) -> list[tuple[int, bytes, bytes]]:
    """``runs_by_term`` for the in-process index ("u4"), with each posting's term frequency.

    ``(term number, its docs packed as uint32, how often the term occurs in each of them
    packed as uint32)`` per term: repeats within a doc are counted, not collapsed (the
    ``tf`` of BM25). Term numbers ascending, docs ascending (``texts`` in doc order).
    """
    np = batch_numpy(len(texts))
    if np is None:
        by_term: dict[int, tuple[list[int], list[int]]] = {}
        for doc, terms in texts:
            for term, tf in Counter(terms).items():
                docs, tfs = by_term.setdefault(number_of[term], ([], []))
                docs.append(doc)
                tfs.append(tf)
        return [
            (number, pack_docs(docs, dtype), pack_docs(tfs, dtype))
            for number, (docs, tfs) in sorted(by_term.items())
        ]
    keys = _pair_keys(np, texts, number_of)
    if keys is None:
        return []
    rows = len(texts)
    first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    tf = np.diff(np.append(first, len(keys))).astype("u4")
    keys = keys[first]
    term_of, row_of = np.divmod(keys, rows)
    docs = np.fromiter((doc for doc, _ in texts), dtype=np.int64, count=rows)[row_of]
    packed = docs.astype(dtype).tobytes()
    packed_tf = tf.astype(dtype).tobytes()
    size = np.dtype(dtype).itemsize
    cuts = np.flatnonzero(np.diff(term_of)) + 1
    starts = (np.concatenate(([0], cuts)) * size).tolist()
    ends = (np.append(cuts, len(keys)) * size).tolist()
    return [
        (number, packed[start:end], packed_tf[start:end])
        for number, start, end in zip(term_of[np.concatenate(([0], cuts))].tolist(),
                                      starts, ends, strict=True)
    ]
