"""The inverted index and the bounded top-k walk behind every indexed backend.

The reference (``scan_recall_candidates``) tokenises every conversation record for
every query. An index keeps ``term → records`` instead, so a recall only touches the
records that share a term with the query — and, for the baseline ranker, not even all
of those: a record that matches ``m`` of the query's ``q`` terms scores at most

    total ≤ 0.85 · m/q + 0.15          (recency is never above 1)

so records are visited by matched-term count, best group first, and the walk stops as
soon as the ``limit``-th best total found so far beats that bound for every group left.
Inside a group coverage is equal and the total only grows with ``captured_at``, so the
group's best ``limit`` records are its ``limit`` most recent ones (all ties kept). The
counts a result reports (``searched_records``, ``candidate_records``,
``retracted_records``) are still exact: they come from the match counts, not from the
records visited.

Nothing here changes what a recall returns; the parity tests compare every path with
the reference scan byte for byte. numpy is used for large posting lists and imported
only when a query needs it, never by ``import memlib``.
"""

from __future__ import annotations

import heapq
import sys
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from itertools import chain
from operator import itemgetter
from typing import Any

from .candidates import CandidateScan, check_scope, make_candidate, searchable_text
from .errors import RemoteMemoryScopeError
from .normalize import RecallQuery, tokenize_all
from .records import MemoryKind, StoredMemory, parse_timestamp
from .score import DECIMALS, LEXICAL_WEIGHT, RECENCY_WEIGHT, recency_of

__all__ = [
    "NUMPY_MIN_POSTINGS",
    "count_matches",
    "pack_docs",
    "unpack_docs",
    "runs_by_term",
    "run_without",
    "InvertedIndex",
    "candidates_for",
    "captured_micros",
    "micros_of",
    "exact_total",
    "index_terms",
    "index_tokens",
    "indexed_recall",
    "query_as_of",
    "record_stats",
    "term_stats",
    "record_terms",
    "scan_from_index",
    "timestamp_of_micros",
    "top_of_matches",
    "upper_bound",
    "walk_groups",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)

# Below this many postings per query a dict count is faster than numpy (and keeps
# small stores free of the import). Tests set it to 0 to drive the numpy path.
NUMPY_MIN_POSTINGS = 512
# From this many records on, postings are inverted with numpy for the whole batch: one
# sorted pass instead of a dict look-up and an append per (term, record).
NUMPY_MIN_BATCH = 256

# ASCII text, lowered: every character that cannot be in a term becomes a space, and
# ``split`` cuts the runs left — the same terms as ``[0-9a-z_]+``, three times faster.
_ASCII_TERM_CHARS = frozenset("0123456789abcdefghijklmnopqrstuvwxyz_")
_ASCII_GAPS = str.maketrans({
    chr(code): " " for code in range(128) if chr(code) not in _ASCII_TERM_CHARS
})

KIND_CODE = {MemoryKind.CONVERSATION: 0, MemoryKind.PROFILE: 1, MemoryKind.RETRACTION: 2}
CODE_KIND = {code: kind for kind, code in KIND_CODE.items()}


@cache
def _numpy() -> Any | None:
    """numpy when installed (the ``scale`` extra), else None: every use has a fallback."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def count_matches(runs: Sequence[bytes], dtype: str) -> tuple[Sequence[int], Sequence[int]]:
    """``(doc ids ascending, how many of the runs hold each)`` for runs packed as ``dtype``.

    Each run lists distinct ids of one term, so a doc's count is its matched terms.
    """
    total = sum(len(run) for run in runs) // 8
    np = _numpy() if runs and total >= NUMPY_MIN_POSTINGS else None
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


def runs_by_term(
    texts: Sequence[tuple[int, Collection[str]]], number_of: dict[str, int], dtype: str
) -> list[tuple[int, bytes]]:
    """Invert ``(doc, terms)`` pairs: ``(term number, its docs packed as dtype)`` per term.

    Term numbers ascending; each term's docs ascending (``texts`` must be in doc order)
    and distinct (a term repeated in a doc counts once); ``dtype`` as in ``pack_docs``.
    numpy sorts a big batch in one pass; without numpy, or for a few docs, a dict does.
    """
    np = _numpy() if len(texts) >= NUMPY_MIN_BATCH else None
    if np is None:
        by_term: dict[int, list[int]] = {}
        for doc, terms in texts:
            for term in set(terms):
                by_term.setdefault(number_of[term], []).append(doc)
        return [(number, pack_docs(docs, dtype)) for number, docs in sorted(by_term.items())]
    flat = list(chain.from_iterable(terms for _, terms in texts))
    if not flat:
        return []  # records of punctuation only: no term, no posting
    # itemgetter looks every term up in one C loop (map() would call once per term).
    numbers = itemgetter(*flat)(number_of) if len(flat) > 1 else [number_of[flat[0]]]
    term_of = np.array(numbers, dtype=np.int64).reshape(-1)
    rows = len(texts)
    row_of = np.repeat(
        np.arange(rows, dtype=np.int64),
        np.fromiter((len(terms) for _, terms in texts), dtype=np.int64, count=rows),
    )
    # One key per (term, doc), sorted by term then doc; repeats collapse.
    keys = np.sort(term_of * rows + row_of)
    keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
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


# How posting runs are packed: "u4" native uint32 (the in-process index), "<i8"
# little-endian int64 (SQLite), ">i8" big-endian int64 (PostgreSQL, whose int8send
# writes that order, so a migration can pack runs in SQL).
_ARRAY_CODE = {"u4": "I", "<i8": "q", ">i8": "q"}


def _swapped(dtype: str) -> bool:
    return (dtype[0] == "<" and sys.byteorder != "little") or (
        dtype[0] == ">" and sys.byteorder != "big"
    )


def pack_docs(docs: Iterable[int], dtype: str) -> bytes:
    """Doc numbers as ``runs_by_term`` packs them (see ``_ARRAY_CODE``)."""
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


# -- terms and times ---------------------------------------------------------------

def index_tokens(text: str) -> list[str] | tuple[str, ...]:
    """``tokenize_all(text)`` (every term, repeats kept), with a fast path for ASCII.

    For ASCII input NFKC changes nothing, casefold is ``lower``, there are no Han or
    kana runs and no combining marks, so a term is exactly a run of ``[0-9a-z_]``.
    Anything else goes through memlib's own tokenizer. (A property test checks the two
    agree.)
    """
    if text.isascii():
        return text.lower().translate(_ASCII_GAPS).split()
    return tokenize_all(text)


def index_terms(text: str) -> set[str]:
    """The distinct terms of ``text``: ``set(tokenize(text))``."""
    return set(index_tokens(text))


@lru_cache(maxsize=65_536)
def searchable_terms(text: str) -> tuple[str, ...]:
    """``tokenize(text)``, remembered: the same records come back query after query."""
    return tuple(sorted(index_terms(text)))


def record_terms(record: StoredMemory) -> set[str]:
    return index_terms(searchable_text(record))


def _stopwords() -> frozenset[str]:
    from .rankers.stopwords import english_stopwords

    return english_stopwords()


def record_stats(record: StoredMemory) -> tuple[set[str], int, int]:
    """``(distinct terms, terms with repeats, of which not stopwords)`` of a record."""
    tokens, content = term_stats((record,))[0]
    return set(tokens), len(tokens), content


def term_stats(
    records: Iterable[StoredMemory],
) -> list[tuple[list[str] | tuple[str, ...], int]]:
    """Per record: its terms in order (repeats kept), and how many are not stopwords.

    What an index keeps of a record's text: its postings and the two token counts
    the BM25-style rankers read. One pass for a whole batch.
    """
    stop = _stopwords().__contains__
    out = []
    for record in records:
        tokens = index_tokens(searchable_text(record))
        out.append((tokens, len(tokens) - sum(map(stop, tokens))))
    return out


def captured_micros(record: StoredMemory) -> int:
    """``captured_at`` as whole microseconds since the epoch (exact)."""
    return micros_of(record.captured_datetime)


def micros_of(moment: datetime) -> int:
    """An aware instant as whole microseconds since the epoch (exact)."""
    return (moment - EPOCH) // _MICRO


def timestamp_of_micros(micros: int) -> datetime:
    return EPOCH + timedelta(microseconds=micros)


def query_as_of(query: RecallQuery) -> datetime:
    """The engine puts ``as_of`` into ``query.issued_at`` (microseconds kept)."""
    return parse_timestamp(query.issued_at)


# -- exact scores and the bound ----------------------------------------------------

def exact_total(matched: int, term_count: int, captured: datetime, as_of: datetime) -> float:
    """The baseline ``total`` of SPEC §3.3, computed exactly as ``score_recall_candidate``."""
    coverage = matched / term_count
    lexical = LEXICAL_WEIGHT * coverage
    recent = RECENCY_WEIGHT * recency_of(captured, as_of)
    return round(lexical + recent, DECIMALS)


def upper_bound(matched: int, term_count: int) -> float:
    """The greatest total a record matching ``matched`` terms can reach (recency = 1)."""
    return round(LEXICAL_WEIGHT * (matched / term_count) + RECENCY_WEIGHT * 1.0, DECIMALS)


# An entry of a group: (captured timestamp as float, captured datetime, memory_id, payload)
Entry = tuple[float, datetime, str, Any]


def walk_groups(
    groups: Iterable[tuple[int, Iterable[Entry]]], term_count: int, limit: int, as_of: datetime
) -> list[Any]:
    """The payloads of the top ``limit`` records, in rank order.

    ``groups`` yields ``(matched, entries)`` with ``matched`` strictly decreasing; each
    group's entries must contain at least its ``limit`` best records by ``captured_at``
    (all records tied with the last one included). Groups are consumed lazily, so a
    group after the stopping point is never computed.
    """
    kept: list[tuple[tuple[float, float, float, str], Any]] = []
    for matched, entries in groups:
        if len(kept) >= limit and -kept[limit - 1][0][0] > upper_bound(matched, term_count):
            break
        coverage = round(matched / term_count, DECIMALS)
        for ts, captured, memory_id, payload in entries:
            total = exact_total(matched, term_count, captured, as_of)
            # The same key as rank.rank_key: total, coverage, captured_at desc, id asc.
            kept.append(((-total, -coverage, -ts, memory_id), payload))
        kept.sort(key=lambda item: item[0])
        del kept[limit:]
    return [payload for _, payload in kept]


# A SQL store's row for the walk: (id, captured_ts, captured_us, memory_id).
RecentRow = tuple[int, float, int, str]


def top_of_matches(
    ids: Any, matched: Any, query: RecallQuery, searched: int,
    lookup: Callable[[Sequence[int]], list[RecentRow]],
    newest_first: Callable[[int], Iterable[RecentRow]],
) -> list[int]:
    """The ids of the baseline's top ``query.limit``, from ``count_matches``' output.

    For a store that keeps records in SQL. Per matched-term group it needs the group's
    ``limit`` most recent records, all ties with the last one included; ``walk_groups``
    then picks the top ``limit`` and stops before groups that cannot enter it.

    ``lookup(members)`` gives exactly those rows for a group. A big group is instead
    found by walking ``newest_first(budget)`` (the scope's rows, newest first, at least
    ``budget + 1`` of them if there are that many) and stopping after ``limit`` members
    and their ties: about ``limit·N/|group|`` rows rather than every member looked up
    and sorted. If the members turn out to be old ones, the walk gives up at the
    budget and the group is looked up after all.
    """
    limit = query.limit
    groups: dict[int, Any] = {}
    if hasattr(matched, "dtype"):  # numpy arrays from count_matches
        # Kept as arrays: the walk usually stops before the big low groups.
        for m in set(matched.tolist()):
            groups[m] = ids[matched == m]
    else:
        for record_id, m in zip(ids, matched, strict=True):
            groups.setdefault(m, []).append(record_id)

    def by_recency(members: Any) -> list[RecentRow] | None:
        wanted = set(members.tolist() if hasattr(members, "tolist") else members)
        budget = 4 * limit * max(searched, 1) // len(wanted) + 1_000
        rows: list[RecentRow] = []
        for visited, row in enumerate(newest_first(budget)):
            if len(rows) >= limit and row[1] < rows[-1][1]:
                return rows
            if visited > budget:
                return None
            if row[0] in wanted:
                rows.append(row)
        return rows

    def entries(members: Any) -> list[Entry]:
        rows = None
        if len(members) > limit and len(members) ** 2 > limit * searched:
            rows = by_recency(members)
        if rows is None:
            rows = lookup([int(i) for i in members])
        return [(ts, timestamp_of_micros(us), memory_id, row_id)
                for row_id, ts, us, memory_id in rows]

    return walk_groups(
        ((m, entries(groups[m])) for m in sorted(groups, reverse=True)),
        len(query.terms), limit, query_as_of(query),
    )


def candidates_for(
    query: RecallQuery, records: Sequence[StoredMemory]
) -> tuple[Any, ...]:
    """Full candidates (with their searchable terms) for the records a walk kept."""
    out = []
    for record in records:
        check_scope(query, record)
        terms = searchable_terms(searchable_text(record))
        candidate = make_candidate(query, record, terms)
        if candidate is not None:  # always, for records found through the index
            out.append(candidate)
    return tuple(out)


# -- the in-process index ----------------------------------------------------------

class InvertedIndex:
    """``term → doc numbers`` plus what the walk needs per doc, all in compact arrays.

    A doc number is a record's position in append order. Postings hold only searchable
    conversation records; retraction clears a doc's ``live`` flag instead of touching
    the postings, so the index is append-only like the file it mirrors.

    What the write rules need (ids, kinds, retractions, the live flags and counts) is
    kept up to date by ``add_many`` at once. The terms of new records (tokens, their
    counts and the postings) are worked out on the first read after it: a durable
    append does not wait for them, a bulk import cuts every record of a batch in one
    pass, and a writer that never recalls never pays for them. Every read of the terms
    goes through ``settle()`` first, so nobody sees an index behind its records.
    """

    # Records held unsettled at most: a long import settles as it goes, so what waits
    # is bounded (the records themselves are not kept once their terms are known).
    SETTLE_AT = 8_192
    # …and at most this many characters of text at once: what a settle holds is every
    # pending record's terms, repeats included, so it is bounded by text, not by count
    # (8,192 records of 20,000 characters each would be gigabytes of terms).
    SETTLE_CHARS = 1 << 22

    def __init__(self) -> None:
        self._postings: dict[str, array[int]] = {}
        self.ids: list[str] = []
        self.doc_of: dict[str, int] = {}
        self.kinds = bytearray()
        self.live = bytearray()  # 1 = a conversation record that is not retracted
        self.timestamps = array("d")  # captured_at.timestamp(), exactly as rank_key
        self.micros = array("q")  # captured_at in whole microseconds (exact)
        self.retracted: set[str] = set()
        self.searched = 0
        self.retracted_conversations = 0
        # Corpus statistics the reference reports for BM25-style rankers: terms with
        # repeats over the searched records, all / without English stopwords.
        self._tokens = array("I")
        self._content_tokens = array("I")
        self._token_count = 0
        self._content_token_count = 0
        # Conversation records whose terms are not worked out yet, in append order.
        self._unsettled: list[tuple[int, StoredMemory]] = []
        self._unsettled_chars = 0

    def __len__(self) -> int:
        return len(self.ids)

    # Terms and their statistics: settled on first read.
    @property
    def postings(self) -> dict[str, array[int]]:
        self.settle()
        return self._postings

    @property
    def tokens(self) -> array[int]:
        self.settle()
        return self._tokens

    @property
    def content_tokens(self) -> array[int]:
        self.settle()
        return self._content_tokens

    @property
    def token_count(self) -> int:
        self.settle()
        return self._token_count

    @property
    def content_token_count(self) -> int:
        self.settle()
        return self._content_token_count

    def kind_of(self, memory_id: str) -> MemoryKind | None:
        doc = self.doc_of.get(memory_id)
        return None if doc is None else CODE_KIND[self.kinds[doc]]

    def is_retracted(self, memory_id: str) -> bool:
        return memory_id in self.retracted

    def add(self, record: StoredMemory) -> int:
        """Index one record (in append order)."""
        return self.add_many((record,))

    def add_many(self, records: Sequence[StoredMemory]) -> int:
        """Index ``records`` in append order; returns the doc number of the first."""
        first = len(self.ids)
        ids, doc_of, kinds, live = self.ids, self.doc_of, self.kinds, self.live
        timestamps, micros = self.timestamps, self.micros
        for doc, record in enumerate(records, first):
            memory_id = record.memory_id
            kind = record.kind
            ids.append(memory_id)
            doc_of[memory_id] = doc
            kinds.append(KIND_CODE[kind])
            captured = record.captured_datetime
            timestamps.append(captured.timestamp())
            micros.append(micros_of(captured))
            if kind is MemoryKind.CONVERSATION:
                if memory_id in self.retracted:
                    live.append(0)
                    self.retracted_conversations += 1
                else:
                    live.append(1)
                    self.searched += 1
                # Not held in a local: a retraction in this batch settles (and so
                # replaces) the list.
                self._unsettled.append((doc, record))
                self._unsettled_chars += len(record.content) + len(record.summary)
            else:
                live.append(0)
                if kind is MemoryKind.RETRACTION and record.retracts is not None:
                    self._retract(record.retracts)
        if len(self._unsettled) >= self.SETTLE_AT or self._unsettled_chars >= self.SETTLE_CHARS:
            self.settle()
        return first

    def settle(self) -> None:
        """Work out the terms of every record added since the last read."""
        counts, content_counts = self._tokens, self._content_tokens
        if len(counts) < len(self.ids):
            # Records added since: 0 until their terms are known (and for ever for
            # profiles and retractions, which are never searched).
            grow = array("I", bytes(4 * (len(self.ids) - len(counts))))
            counts.extend(grow)
            content_counts.extend(grow)
        if not self._unsettled:
            return
        pending, self._unsettled, self._unsettled_chars = self._unsettled, [], 0
        start = 0
        while start < len(pending):
            end, chars = start, 0
            while end < len(pending) and (end == start or chars < self.SETTLE_CHARS):
                record = pending[end][1]
                chars += len(record.content) + len(record.summary)
                end += 1
            self._settle_part(pending[start:end])
            start = end

    def _settle_part(self, pending: Sequence[tuple[int, StoredMemory]]) -> None:
        counts, content_counts = self._tokens, self._content_tokens
        live = self.live
        texts: list[tuple[int, list[str] | tuple[str, ...]]] = []
        for (doc, _), (tokens, content) in zip(
            pending, term_stats(record for _, record in pending), strict=True
        ):
            counts[doc] = len(tokens)
            content_counts[doc] = content
            if live[doc]:
                self._token_count += len(tokens)
                self._content_token_count += content
            texts.append((doc, tokens))
        terms = list(set(chain.from_iterable(tokens for _, tokens in texts)))
        postings = self._postings
        for number, docs in runs_by_term(texts, {t: i for i, t in enumerate(terms)}, "u4"):
            posting = postings.get(terms[number])
            if posting is None:
                posting = postings[terms[number]] = array("I")
            posting.frombytes(docs)

    def _retract(self, target: str) -> None:
        if target in self.retracted:
            return
        self.retracted.add(target)
        doc = self.doc_of.get(target)
        if doc is not None and self.kinds[doc] == 0:
            self.settle()  # the target's counts leave the totals: they must be known
            self.live[doc] = 0
            self.searched -= 1
            self.retracted_conversations += 1
            self._token_count -= self._tokens[doc]
            self._content_token_count -= self._content_tokens[doc]

    # -- queries -------------------------------------------------------------------

    def check_scope(self, query: RecallQuery, user_scope: str) -> None:
        """The reference refuses a query of another scope as soon as it sees a record."""
        if query.user_scope != user_scope and self.ids:
            raise RemoteMemoryScopeError(f"memory {self.ids[0]} belongs to another user scope")

    def _postings_of(self, terms: Sequence[str]) -> list[array[int]]:
        return [p for p in (self.postings.get(t) for t in terms) if p is not None]

    def candidate_docs(self, terms: Sequence[str]) -> list[int]:
        """Every live doc sharing a term with ``terms``, in append order (the reference's)."""
        docs: set[int] = set()
        for posting in self._postings_of(terms):
            docs.update(posting)
        live = self.live
        return sorted(d for d in docs if live[d])

    def top_docs(
        self, terms: Sequence[str], limit: int, as_of: datetime
    ) -> tuple[list[int], int]:
        """``(docs of the top `limit` in rank order, exact candidate count)``."""
        postings = self._postings_of(terms)
        if not postings:
            return [], 0
        if sum(len(p) for p in postings) >= NUMPY_MIN_POSTINGS and _numpy() is not None:
            return self._top_numpy(postings, len(terms), limit, as_of)
        return self._top_python(postings, len(terms), limit, as_of)

    def _entries(self, docs: Iterable[int]) -> list[Entry]:
        ts, micros, ids = self.timestamps, self.micros, self.ids
        return [(ts[d], timestamp_of_micros(micros[d]), ids[d], d) for d in docs]

    def _top_python(
        self, postings: list[array[int]], term_count: int, limit: int, as_of: datetime
    ) -> tuple[list[int], int]:
        counts: dict[int, int] = {}
        for posting in postings:
            for doc in posting:
                counts[doc] = counts.get(doc, 0) + 1
        live = self.live
        by_group: dict[int, list[int]] = {}
        for doc, matched in counts.items():
            if live[doc]:
                by_group.setdefault(matched, []).append(doc)
        total = sum(len(docs) for docs in by_group.values())
        ts = self.timestamps

        def groups() -> Iterator[tuple[int, list[Entry]]]:
            for matched in sorted(by_group, reverse=True):
                docs = by_group[matched]
                if len(docs) > limit:
                    threshold = heapq.nlargest(limit, (ts[d] for d in docs))[-1]
                    docs = [d for d in docs if ts[d] >= threshold]
                yield matched, self._entries(docs)

        return walk_groups(groups(), term_count, limit, as_of), total

    def _top_numpy(
        self, postings: list[array[int]], term_count: int, limit: int, as_of: datetime
    ) -> tuple[list[int], int]:
        import numpy as np

        n = len(self.ids)
        total = sum(len(p) for p in postings)
        # Views, not copies; all are dropped before this method returns, so the arrays
        # can grow again on the next append.
        views = [np.frombuffer(p, dtype=np.uint32) for p in postings]
        live = np.frombuffer(self.live, dtype=np.uint8)
        # Held in a list so that ``finally`` can drop the view even while the
        # generator below (which reads it) is still referenced.
        held = [np.frombuffer(self.timestamps, dtype=np.float64)]
        cand: Any
        matched_of: Any
        counts: Any
        try:
            if total * 8 < n:
                # Few postings in a big index: sort them instead of touching all n docs.
                cand, matched_of = np.unique(np.concatenate(views), return_counts=True)
            else:
                counts = np.zeros(n, dtype=np.uint8 if term_count < 255 else np.uint32)
                for view in views:
                    counts[view] += 1  # doc numbers are distinct within one posting list
                cand = np.flatnonzero(counts)
                matched_of = counts[cand]
                del counts
            keep = live[cand].astype(bool)
            cand, matched_of = cand[keep], matched_of[keep]
            present = np.flatnonzero(np.bincount(matched_of, minlength=term_count + 1))[::-1]

            def select(matched: int) -> list[int]:
                docs = cand[matched_of == matched]
                if len(docs) > limit:
                    ts = held[0][docs]
                    cut = len(docs) - limit
                    threshold = np.partition(ts, cut)[cut]
                    docs = docs[ts >= threshold]
                return docs.tolist()

            def groups() -> Iterator[tuple[int, list[Entry]]]:
                for matched in present.tolist():
                    if matched:
                        yield matched, self._entries(select(matched))

            top = walk_groups(groups(), term_count, limit, as_of)
            found = len(cand)
        finally:
            del views, live
            held.clear()
        return top, found

    # -- for teaching --------------------------------------------------------------

    def posting_rows(self, terms: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """``[{"term", "records", "memory_ids"}]`` for a notebook table."""
        wanted = sorted(self.postings) if terms is None else list(terms)
        rows = []
        for term in wanted:
            posting = self.postings.get(term, array("I"))
            rows.append({
                "term": term,
                "records": len(posting),
                "memory_ids": [self.ids[d] for d in posting],
            })
        return rows


def scan_from_index(
    index: InvertedIndex,
    query: RecallQuery,
    load: Callable[[Sequence[int]], Sequence[StoredMemory]],
    *,
    top: bool,
) -> CandidateScan:
    """A ``CandidateScan`` answered from ``index``; ``load`` turns docs into records.

    ``top=False`` gives every candidate, in append order, like the reference; ``top=True``
    gives only the baseline ranker's top ``query.limit`` (exact counts either way).
    """
    if top:
        docs, candidate_count = index.top_docs(query.terms, query.limit, query_as_of(query))
    else:
        docs = index.candidate_docs(query.terms)
        candidate_count = len(docs)
    candidates = candidates_for(query, load(docs))
    return CandidateScan(
        candidates=candidates,
        searched_records=index.searched,
        candidate_records=candidate_count,
        retracted_records=index.retracted_conversations,
        searched_token_count=index.token_count,
        searched_content_token_count=index.content_token_count,
    )


def indexed_recall(
    store: Any,
    text: str,
    limit: int = 5,
    as_of: datetime | None = None,
    query_id: str | None = None,
) -> Any:
    """``RecallEngine(store).recall(...)``: the engine takes the top-k walk itself for the
    baseline ranker whenever the store has ``scan_top_candidates``."""
    from .engine import RecallEngine

    return RecallEngine(store).recall(text, limit=limit, as_of=as_of, query_id=query_id)
