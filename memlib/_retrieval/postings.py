"""Posting runs: a term's distinct doc numbers ascending, packed as "u4" (the in-process
index), "<i8" (SQLite) or ">i8" (PostgreSQL's int8send order); a SQL store keeps each
doc's tf and two lengths (``LENGTHS``) beside it, and keeps the runs its recalls read
decoded between them (``RunCache``). numpy serves big batches and queries."""

from __future__ import annotations

import sys
import threading
from array import array
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import chain
from operator import itemgetter
from typing import Any

# Below this many postings per query a dict count beats numpy. Tests set it to 0; readers
# look it up on this module at call time so that the setting reaches them.
NUMPY_MIN_POSTINGS = 512
# From this many records on, a batch is inverted with numpy in one sorted pass…
NUMPY_MIN_BATCH = 256
# …once numpy is loaded: importing it (~70 ms, 20 MB) costs more than a dict takes to
# invert a reader's tail of a thousand records, so only a batch this big pays for it.
NUMPY_IMPORT_BATCH = 2_048
# The same trade for a recall: a fresh process imports numpy only for this many postings.
NUMPY_IMPORT_POSTINGS = 100_000

_ARRAY_CODE = {"u4": "I", "<u4": "I", "<i8": "q", ">i8": "q"}
# A doc's two lengths in a run's ``lengths``: (all terms, terms without stopwords).
LENGTHS = "<u4"


@cache
def numpy_or_none() -> Any | None:
    """numpy when installed (the ``scale`` extra), else None: every use has a fallback."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def _swapped(dtype: str) -> bool:
    return dtype[0] in "<>" and dtype[0] != ("<" if sys.byteorder == "little" else ">")


def pack_docs(docs: Iterable[int], dtype: str) -> bytes:
    packed = array(_ARRAY_CODE[dtype], docs)
    if _swapped(dtype):
        packed.byteswap()
    return packed.tobytes()


def unpack_docs(blob: bytes, dtype: str) -> array[int]:
    docs = array(_ARRAY_CODE[dtype])
    docs.frombytes(blob)
    if _swapped(dtype):
        docs.byteswap()
    return docs


def pack_lengths(lengths: Iterable[tuple[int, int]]) -> bytes:
    """Docs' ``(tokens, content_tokens)`` as a run's ``lengths`` (``LENGTHS``, flat)."""
    return pack_docs(chain.from_iterable(lengths), LENGTHS)


def run_columns_without(
    run: bytes, tfs: bytes, lengths: bytes, doc: int, dtype: str
) -> tuple[bytes, bytes, bytes] | None:
    """``run`` without ``doc``: the doc, its term frequency in ``tfs`` and its two
    lengths in ``lengths`` leave together; None if the doc is absent."""
    docs = unpack_docs(run, dtype)
    if doc not in docs:
        return None
    at = docs.index(doc)
    freqs = unpack_docs(tfs, dtype)
    del docs[at], freqs[at]
    size = 2 * _item_size(LENGTHS)
    rest = lengths[: at * size] + lengths[(at + 1) * size :]
    return pack_docs(docs, dtype), pack_docs(freqs, dtype), rest


def _item_size(dtype: str) -> int:
    return array(_ARRAY_CODE[dtype]).itemsize


@dataclass(frozen=True)
class MergedRuns:
    """The runs of a query's terms over one doc numbering (doc ``d`` is ``row_ids[d]``):
    each doc's lengths, and per term ``(docs ascending, tf in each)``."""

    row_ids: Sequence[int]
    tokens: Sequence[int]
    content_tokens: Sequence[int]
    postings: tuple[tuple[Sequence[int], Sequence[int]], ...]


def merge_runs(
    runs: Mapping[str, Sequence[tuple[bytes, bytes, bytes]]], terms: Sequence[str], dtype: str
) -> MergedRuns:
    """Number the docs of ``runs`` (term → its ``(ids, tfs, lengths)``) and give ``terms``'
    postings in those numbers; ValueError when a run's columns do not line up."""
    total = sum(run_postings(term_runs, dtype) for term_runs in runs.values())
    np = postings_numpy(total) if total else None
    if np is None:
        return _merge_plain(runs, terms, dtype)
    return _merge_numpy(np, runs, terms, dtype)


def _merge_plain(
    runs: Mapping[str, Sequence[tuple[bytes, bytes, bytes]]], terms: Sequence[str], dtype: str
) -> MergedRuns:
    length_of: dict[int, tuple[int, int]] = {}
    for term_runs in runs.values():
        for ids, _, lengths in term_runs:
            flat = unpack_docs(lengths, LENGTHS)
            for at, row_id in enumerate(unpack_docs(ids, dtype)):
                length_of[row_id] = (flat[2 * at], flat[2 * at + 1])
    row_ids = array("q", sorted(length_of))
    doc_of = {row_id: doc for doc, row_id in enumerate(row_ids)}
    postings = []
    for term in terms:
        docs, freqs = array("I"), array("I")
        for ids, tfs, _ in runs.get(term, ()):
            docs.extend(doc_of[i] for i in unpack_docs(ids, dtype))
            freqs.extend(iter(unpack_docs(tfs, dtype)))
        postings.append((docs, freqs))
    return MergedRuns(
        row_ids=row_ids,
        tokens=array("I", (length_of[i][0] for i in row_ids)),
        content_tokens=array("I", (length_of[i][1] for i in row_ids)),
        postings=tuple(postings),
    )


def _as_array(np: Any, values: Any, code: str) -> array[int]:
    """A numpy array as an ``array``: indexing it gives Python ints, as the plain path's."""
    out = array(code)
    out.frombytes(memoryview(np.ascontiguousarray(values, dtype=np.dtype(code))).cast("B"))
    return out


def _merge_numpy(
    np: Any,
    runs: Mapping[str, Sequence[tuple[bytes, bytes, bytes]]],
    terms: Sequence[str],
    dtype: str,
) -> MergedRuns:
    # Every run once, grouped by term: each column is one join of bytes and one array,
    # and a term's postings are a slice of them.
    every_run: list[tuple[bytes, bytes, bytes]] = []
    slice_of: dict[str, tuple[int, int]] = {}
    size = np.dtype(dtype).itemsize
    count = 0
    for term, term_runs in runs.items():
        start = count
        for run in term_runs:
            every_run.append(run)
            count += len(run[0]) // size
        slice_of[term] = (start, count)
    ids = np.frombuffer(b"".join([i for i, _, _ in every_run]), dtype=dtype)
    ids = ids.astype(np.int64, copy=False)
    low = int(ids.min())
    span = int(ids.max()) - low + 1
    # A doc's two lengths move as one 8-byte unit (LENGTHS at the end). Each big array is
    # let go once used: fresh pages cost more here than the arithmetic.
    if span <= 4 * len(ids) + 65_536:
        # Ids of one store are dense: a mark per id in the range beats sorting them all.
        offsets = ids - low
        del ids
        seen = np.zeros(span, dtype=bool)
        seen[offsets] = True
        at = np.flatnonzero(seen)
        row_ids = at + low
        by_id = np.empty(span, dtype="<u8")
        # a doc's runs all carry its same two lengths
        by_id[offsets] = np.frombuffer(b"".join([n for _, _, n in every_run]), dtype="<u8")
        per_doc = by_id[at]
        del by_id, at
        docs = (np.cumsum(seen, dtype=np.uint32) - 1)[offsets]  # doc of each posting
        del seen, offsets
    else:
        row_ids, first = np.unique(ids, return_index=True)
        per_doc = np.frombuffer(b"".join([n for _, _, n in every_run]), dtype="<u8")[first]
        docs = np.searchsorted(row_ids, ids).astype(np.uint32)
        del ids, first
    lengths = per_doc.view(LENGTHS).reshape(-1, 2)
    tfs = np.frombuffer(b"".join([f for _, f, _ in every_run]), dtype=dtype).astype(np.uint32)
    postings = []
    for term in terms:
        start, end = slice_of.get(term, (0, 0))
        postings.append((_as_array(np, docs[start:end], "I"), _as_array(np, tfs[start:end], "I")))
    return MergedRuns(
        row_ids=_as_array(np, row_ids, "q"),
        tokens=_as_array(np, lengths[:, 0], "I"),
        content_tokens=_as_array(np, lengths[:, 1], "I"),
        postings=tuple(postings),
    )


# What a view's ``scratch`` keeps of one kind (a key's first item) at most, in bytes,
# least recently used out first: a warm process asked about the same words again reads
# what rankers and candidate counts derived from their postings, not computes it.
SCRATCH_BYTES = 64 << 20


def kept(
    scratch: dict[Any, Any] | None, key: tuple[Any, ...], make: Callable[[], tuple[Any, ...]]
) -> tuple[Any, ...]:
    """``make()`` (numpy arrays), kept in ``scratch`` under ``key``."""
    if scratch is None:
        return make()
    kind = key[0]
    got: tuple[Any, ...] | None = scratch.pop(key, None)
    if got is None:
        got = make()
        held = scratch.get(kind, 0) + sum(a.nbytes for a in got)
        for old in [k for k in scratch if isinstance(k, tuple) and k[0] == kind]:
            if held <= SCRATCH_BYTES:
                break
            held -= sum(a.nbytes for a in scratch.pop(old))
        scratch[kind] = held
    scratch[key] = got  # last: the most recently used
    return got


def bitset(np: Any, scratch: dict[Any, Any] | None, key: tuple[Any, ...], docs: Any, n: int) -> Any:
    """``docs`` (uint32) as a bitset of ``n`` docs (numpy packbits), kept in ``scratch``
    under ``("bits", *key)``: 1M docs take 125 kB."""

    def make() -> tuple[Any, ...]:
        seen = np.zeros(n, dtype=bool)
        seen[docs] = True
        return (np.packbits(seen),)

    return kept(scratch, ("bits", *key), make)[0]


# Postings a ``RunCache`` keeps at most (a doc number and a term frequency: 8 bytes
# each): 64 MB, the runs of a few words that are in most records of a 1M-record scope
# and of a hundred other queries' words (benchmarks/corpus.py: 7.5M postings).
RUN_CACHE_POSTINGS = 8_000_000
# A ``RunCache`` numbers docs by row id: not when that would number more than
# ``4 * records + DENSE_SLACK`` docs (a scope whose ids other scopes' ids sit between).
DENSE_SLACK = 65_536


class RunCache:
    """Terms' runs decoded once and numbered ``doc = row id - base`` (ascending as the
    ids), kept while ``key`` holds, least recently used first: a warm query of terms
    held reads no run. ``tokens`` / ``content_tokens``: each doc's two lengths (0 where
    no term held has it); ``scratch``: what rankers derive from the postings (bm25's
    saturations). Arrays handed out are never changed but for lengths not known yet:
    renumbering replaces them."""

    def __init__(self, key: Any) -> None:
        self.key = key
        self.terms: dict[str, tuple[array[int], array[int]]] = {}  # term → (docs, tfs)
        self.postings = 0
        self.scratch: dict[Any, Any] = {}
        self.base = 0
        self.tokens: array[int] = array("I")
        self.content_tokens: array[int] = array("I")
        self._lock = threading.Lock()

    def missing(self, terms: Iterable[str]) -> list[str]:
        """Those of ``terms`` not held (the held ones now the most recently used)."""
        with self._lock:
            held = {t: self.terms.pop(t) for t in terms if t in self.terms}
            self.terms.update(held)
        return [t for t in terms if t not in held]

    def merged(
        self,
        np: Any,
        runs: Mapping[str, Sequence[tuple[bytes, bytes, bytes]]],
        read: Sequence[str],
        asked: Sequence[str],
        terms: Sequence[str],
        dtype: str,
        records: int,
    ) -> tuple[MergedRuns, int, Callable[[], list[int]]] | None:
        """``merge_runs`` of the ``asked`` terms, held or ``read`` (their ``runs``),
        numbered here, how many docs hold one and a function listing them; the read
        ones are kept.
        None, keeping nothing, when a held term has gone meanwhile or the ids would
        number more than ``4 * records + DENSE_SLACK`` docs.
        ValueError when a run's columns do not line up."""
        decoded = {t: _decoded(np, r, dtype) for t, r in runs.items() if r}
        with self._lock:
            if read and not self._number(np, decoded, read, records):
                return None
            if any(t not in self.terms for t in asked):
                return None
            self._fit(asked)
            merged = MergedRuns(
                row_ids=range(self.base, self.base + len(self.tokens)),
                tokens=self.tokens,
                content_tokens=self.content_tokens,
                postings=tuple(self.terms[t] for t in terms),
            )
            return merged, *self._candidates(np, asked)

    def _candidates(self, np: Any, asked: Sequence[str]) -> tuple[int, Callable[[], list[int]]]:
        """How many docs hold one of ``asked``, and a function listing them. Many: on
        bitsets, a big term's kept in ``scratch`` for this numbering."""
        n = len(self.tokens)
        views = {t: np.frombuffer(self.terms[t][0], np.uint32) for t in asked}
        if sum(map(len, views.values())) * 8 < n or not hasattr(np, "bitwise_count"):
            # sorted, then each first of its value (np.unique hashes first: several times slower)
            docs = np.sort(np.concatenate([np.zeros(0, np.uint32), *views.values()]))
            docs = docs[np.concatenate(([True], docs[1:] != docs[:-1]))] if len(docs) else docs
            return len(docs), docs.tolist
        union = np.zeros((n + 7) // 8, dtype=np.uint8)
        for term, docs in views.items():
            if len(docs) * 32 < n:  # its bitset would be the bigger: marked bit by bit
                np.bitwise_or.at(union, docs >> 3, np.left_shift(1, 7 - (docs & 7), dtype=np.uint8))
                continue
            union |= bitset(np, self.scratch, (term, len(docs), self.base, n), docs, n)
        return int(np.bitwise_count(union).sum()), lambda: np.flatnonzero(
            np.unpackbits(union, count=n)
        ).tolist()

    def _number(
        self, np: Any, decoded: dict[str, tuple[Any, Any, bytes]], read: Sequence[str], records: int
    ) -> bool:
        """Keep the ``read`` terms (``decoded``: those with runs), renumbering what is held
        when one of them has an id below ``base``."""
        ends = [(int(ids[0]), int(ids[-1])) for ids, _, _ in decoded.values()]
        if self.tokens or not ends:
            ends.append((self.base, self.base + len(self.tokens) - 1))
        base = min(first for first, _ in ends)
        size = max(last for _, last in ends) - base + 1
        if size > 4 * records + DENSE_SLACK:
            return False
        same = (base, size) == (self.base, len(self.tokens))
        if self.tokens and base != self.base:  # a doc below the first: every one moves up
            for term, (held, freqs) in self.terms.items():
                moved = np.frombuffer(held, np.uint32) + np.uint32(self.base - base)
                self.terms[term] = (_as_array(np, moved, "I"), freqs)
        new = []
        for term in read:
            ids, tfs, lengths = decoded.get(term) or (np.zeros(0, np.int64), (), b"")
            docs = np.subtract(ids, base, dtype=np.int64).astype(np.uint32)
            new.append((docs, lengths))
            self.terms[term] = (_as_array(np, docs, "I"), _as_array(np, tfs, "I"))
            self.postings += len(docs)
        self._lengths(np, base, size, new, same)
        return True

    def _lengths(
        self, np: Any, base: int, size: int, new: list[tuple[Any, bytes]], same: bool
    ) -> None:
        """``tokens`` / ``content_tokens`` of ``size`` docs from ``base`` with those of the
        ``new`` docs ((docs, their lengths packed) each): written into the arrays held
        when the numbering is the same (a doc's lengths never change while ``key``
        holds, so a reader of them sees the same values), else into new ones."""
        if same:
            tokens = np.frombuffer(self.tokens, np.uint32)
            content = np.frombuffer(self.content_tokens, np.uint32)
        else:
            tokens, content = np.zeros(size, np.uint32), np.zeros(size, np.uint32)
            at = self.base - base
            tokens[at : at + len(self.tokens)] = self.tokens
            content[at : at + len(self.tokens)] = self.content_tokens
        for docs, lengths in new:
            pairs = np.frombuffer(lengths, LENGTHS).reshape(-1, 2)
            tokens[docs], content[docs] = pairs[:, 0], pairs[:, 1]
        if not same:
            self.base = base
            self.tokens = _as_array(np, tokens, "I")
            self.content_tokens = _as_array(np, content, "I")

    def _fit(self, kept: Sequence[str]) -> None:
        """Let go of the least recently used terms but ``kept`` while past the budget."""
        for old in list(self.terms):
            if self.postings <= RUN_CACHE_POSTINGS:
                break
            if old not in kept:
                self.postings -= len(self.terms.pop(old)[0])


def _decoded(
    np: Any, term_runs: Sequence[tuple[bytes, bytes, bytes]], dtype: str
) -> tuple[Any, Any, bytes]:
    """One term's runs (ascending, disjoint) as its ids (int64), term frequencies and
    lengths (packed); ValueError when a run's columns do not line up."""
    run_postings(term_runs, dtype)
    ids = np.frombuffer(b"".join([i for i, _, _ in term_runs]), dtype=dtype)
    tfs = np.frombuffer(b"".join([f for _, f, _ in term_runs]), dtype=dtype)
    return ids.astype(np.int64), tfs, b"".join([n for _, _, n in term_runs])


def run_postings(term_runs: Iterable[tuple[bytes, bytes, bytes]], dtype: str) -> int:
    """How many postings ``term_runs`` hold; ValueError when a run's columns do not line up."""
    size, pair = _item_size(dtype), 2 * _item_size(LENGTHS)
    total = 0
    for ids, tfs, lengths in term_runs:
        count = len(ids) // size
        if len(ids) != count * size or len(tfs) != len(ids) or len(lengths) != count * pair:
            raise ValueError("a posting run's ids, term frequencies and lengths differ")
        total += count
    return total


def count_matches(runs: Sequence[bytes], dtype: str) -> tuple[Sequence[int], Sequence[int]]:
    """``(doc ids ascending, how many of the runs hold each)``: each run lists one term's
    distinct ids, so a doc's count is its matched terms."""
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
    if total >= NUMPY_MIN_POSTINGS and ("numpy" in sys.modules or total >= NUMPY_IMPORT_POSTINGS):
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


def tf_runs_by_term(
    texts: Sequence[tuple[int, Sequence[str]]], number_of: dict[str, int], dtype: str = "u4"
) -> list[tuple[int, bytes, bytes]]:
    """Invert ``(doc, terms)`` pairs (in doc order): ``(term number, its distinct docs, the
    term's frequency in each)`` packed as ``dtype``, term numbers ascending."""
    return [run[:3] for run in _tf_runs(texts, number_of, dtype, None)]


def tf_length_runs_by_term(
    texts: Sequence[tuple[int, Sequence[str]]],
    lengths: Sequence[tuple[int, int]],
    number_of: dict[str, int],
    dtype: str,
) -> list[tuple[int, bytes, bytes, bytes]]:
    """``tf_runs_by_term`` with, per run, the two lengths of each of its docs
    (``lengths[i]`` is ``texts[i]``'s, packed as ``pack_lengths``): a SQL store's runs."""
    if len(lengths) != len(texts):
        raise ValueError("one pair of lengths per text")
    return _tf_runs(texts, number_of, dtype, lengths)


def _tf_runs(
    texts: Sequence[tuple[int, Collection[str]]],
    number_of: dict[str, int],
    dtype: str,
    lengths: Sequence[tuple[int, int]] | None,
) -> list[tuple[int, bytes, bytes, bytes]]:
    np = batch_numpy(len(texts))
    if np is None:
        by_term: dict[int, tuple[list[int], list[int], list[tuple[int, int]]]] = {}
        for row, (doc, terms) in enumerate(texts):
            pair = lengths[row] if lengths is not None else (0, 0)
            for term, tf in Counter(terms).items():
                docs, tfs, pairs = by_term.setdefault(number_of[term], ([], [], []))
                docs.append(doc)
                tfs.append(tf)
                pairs.append(pair)
        return [
            (
                number,
                pack_docs(docs, dtype),
                pack_docs(tfs, dtype),
                pack_lengths(pairs) if lengths is not None else b"",
            )
            for number, (docs, tfs, pairs) in sorted(by_term.items())
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
    packed_lengths = b""
    if lengths is not None:
        pairs = np.array(lengths, dtype=np.int64).reshape(rows, 2)
        packed_lengths = pairs[row_of].astype(LENGTHS).tobytes()
    size = np.dtype(dtype).itemsize
    pair_size = 2 * np.dtype(LENGTHS).itemsize
    cuts = np.flatnonzero(np.diff(term_of)) + 1
    starts = np.concatenate(([0], cuts))
    ends = np.append(cuts, len(keys))
    return [
        (
            number,
            packed[start * size : end * size],
            packed_tf[start * size : end * size],
            packed_lengths[start * pair_size : end * pair_size],
        )
        for number, start, end in zip(
            term_of[starts].tolist(), starts.tolist(), ends.tolist(), strict=True
        )
    ]
