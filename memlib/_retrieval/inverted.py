"""The in-process inverted index: ``term → doc numbers`` in compact arrays (the JSONL
store keeps one per reader, so neither an append nor a recall costs O(records))."""

from __future__ import annotations

import heapq
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from itertools import chain
from typing import Any, Generic, TypeVar

from .._capabilities import ScoreBound
from .._tokens import term_stats
from ..candidates import CandidateScan, LexicalPostings
from ..errors import RemoteMemoryScopeError
from ..normalize import RecallQuery
from ..records import MemoryKind, StoredMemory

# The module, not its names: NUMPY_MIN_POSTINGS is read at call time (tests lower it).
from . import postings as runs
from .neighbours import NONE, SourceLinks, SourceOrder
from .strings import PackedStrings, SortedPositions
from .walk import Entry, candidates_for, micros_of, query_as_of, timestamp_of_micros, walk_groups

KIND_CODE = {MemoryKind.CONVERSATION: 0, MemoryKind.PROFILE: 1, MemoryKind.RETRACTION: 2}
CODE_KIND = {code: kind for kind, code in KIND_CODE.items()}


class _TermSource:
    """An index file's posting lists, read per term: ``fetch(n)`` gives term ``n``'s
    postings and term frequencies together; the half not asked for yet waits here."""

    def __init__(
        self, terms: PackedStrings, fetch: Callable[[int], tuple[array[int], array[int]]]
    ) -> None:
        self.terms = terms
        self.positions = SortedPositions(terms)  # the file's terms are sorted
        self._fetch = fetch
        self._waiting: dict[tuple[int, int], array[int]] = {}

    def take(self, n: int, which: int) -> array[int]:
        got = self._waiting.pop((n, which), None)
        if got is None:
            pair = self._fetch(n)
            self._waiting[(n, 1 - which)] = pair[1 - which]
            got = pair[which]
        return got


# ``walk_groups`` with the query's terms, limit, moment and bound: groups → top docs.
_Walk = Callable[[Iterable[tuple[int, list[Entry]]]], list[int]]

# A tail's records as a reader catching up settles them: ``(doc, term → tf)`` each.
Batch = list[tuple[int, "Counter[str]"]]


class _PackedLists(Mapping[str, "array[int]"]):
    """``term → array`` over an index file's lists, each read when first asked for. Appends
    to a list not read yet wait in ``_extra`` or as batches of term counts (``add_batch``).
    ``which``: 0 for the docs, 1 for the term frequencies."""

    def __init__(self, source: _TermSource, which: int) -> None:
        self._source, self._which = source, which
        self._taken: dict[str, array[int]] = {}
        self._extra: dict[str, array[int]] = {}
        # Invariant: a term in ``_taken`` has every batch applied; any other, none.
        self._batches: list[Batch] = []

    def _slice(self, term: str) -> array[int] | None:
        got = self._taken.get(term)
        if got is not None:
            return got
        n = self._source.positions.get(term)
        extra = self._extra.pop(term, None)
        if n is not None:
            got = self._source.take(n, self._which)
            if extra is not None:
                got.extend(extra)
        else:
            got = extra
        postings = self._which == 0
        for batch in self._batches:
            for doc, counts in batch:
                tf = counts.get(term)
                if tf:
                    if got is None:
                        got = array("I")
                    got.append(doc if postings else tf)
        if got is not None:
            self._taken[term] = got
        return got

    def add_batch(self, batch: Batch) -> None:
        """Append each record of ``batch`` (docs past every list's last) to its terms."""
        taken, postings = self._taken, self._which == 0
        if len(taken) <= 64:  # the usual case: the few terms queries asked for
            for term, target in taken.items():
                for doc, counts in batch:
                    tf = counts.get(term)
                    if tf:
                        target.append(doc if postings else tf)
        else:
            for doc, counts in batch:
                for term, tf in counts.items():
                    found = taken.get(term)
                    if found is not None:
                        found.append(doc if postings else tf)
        self._batches.append(batch)

    def _fold(self) -> None:
        """Apply the waiting batches term by term (before anything that needs order)."""
        batches, self._batches = self._batches, []
        if not batches:
            return
        applied = set(self._taken)
        postings = self._which == 0
        for batch in batches:
            for doc, counts in batch:
                for term, tf in counts.items():
                    if term not in applied:
                        self._add_now(term, (doc if postings else tf,))

    def _add_now(self, term: str, values: Iterable[int] | bytes) -> None:
        target = self._taken.get(term)
        if target is None:
            if term in self._source.positions:
                target = self._extra.setdefault(term, array("I"))
            else:
                target = self._taken[term] = array("I")
        if isinstance(values, bytes):
            target.frombytes(values)
        else:
            target.extend(values)

    def add(self, term: str, values: Iterable[int] | bytes) -> None:
        """Append ``values`` (ints, or bytes of packed ``I``) to ``term``'s list."""
        self._fold()
        self._add_now(term, values)

    def __getitem__(self, term: str) -> array[int]:
        got = self._slice(term)
        if got is None:
            raise KeyError(term)
        return got

    def _added(self) -> list[str]:
        """The terms the file does not hold, after the waiting batches."""
        self._fold()
        return [term for term in self._taken if term not in self._source.positions]

    def __iter__(self) -> Iterator[str]:
        added = self._added()
        yield from self._source.terms
        yield from added

    def __len__(self) -> int:
        return len(self._source.terms) + len(self._added())


# An index's postings (or tfs): a dict, or an index file's lists read on demand.
Lists = dict[str, "array[int]"] | _PackedLists


def _append(lists: Lists, term: str, values: Iterable[int] | bytes) -> None:
    if isinstance(lists, _PackedLists):
        lists.add(term, values)
        return
    target = lists.get(term)
    if target is None:  # no throw-away array for a term already there
        target = lists[term] = array("I")
    target.frombytes(values) if isinstance(values, bytes) else target.extend(values)


T = TypeVar("T")


class _Settled(Generic[T]):
    """An index attribute read through ``settle()`` (from its private twin ``_name``)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = "_" + name

    def __get__(self, index: InvertedIndex, owner: type | None = None) -> T:
        index.settle()
        value: T = getattr(index, self._name)
        return value


class InvertedIndex:
    """``term → doc numbers`` plus what the walk needs per doc, all in compact arrays.

    A doc is a record's position in append order; retraction clears its ``live`` flag.
    The terms of new records wait for the first read (``settle``), so an append does not
    wait for them and a bulk import cuts a whole batch at once."""

    # Records held unsettled at most (a long import settles as it goes)…
    SETTLE_AT = 8_192
    # …and characters: a settle holds every pending term, so it is bounded by text too.
    SETTLE_CHARS = 1 << 22

    def __init__(self) -> None:
        self._postings: Lists = {}
        # Parallel to each posting list: how often the term occurs in that doc (BM25's tf).
        self._tfs: Lists = {}
        # Loaded from an index file: ids packed and found by bisection (strings.py).
        self.ids: list[str] | PackedStrings = []
        self.doc_of: dict[str, int] | SortedPositions = {}  # or a bisection over packed ids
        self.kinds = bytearray()
        self.live = bytearray()  # 1 = a conversation record that is not retracted
        self.timestamps = array("d")  # captured_at.timestamp(), exactly as rank_key
        self.micros = array("q")  # captured_at in whole microseconds (exact)
        self.retracted: set[str] = set()
        self.searched = 0
        self.retracted_conversations = 0
        # BM25's corpus statistics: terms with repeats, all / without English stopwords.
        self._tokens = array("I")
        self._content_tokens = array("I")
        self._token_count = 0
        self._content_token_count = 0
        # What rankers derive from the postings, for the next query (LexicalPostings).
        self.scratch: dict[Any, Any] = {}
        # Conversation records whose terms are not worked out yet, in append order.
        self._unsettled: list[tuple[int, StoredMemory]] = []
        self._unsettled_chars = 0
        # Each conversation doc's source and its neighbours there (``neighbours``).
        self._sources = SourceOrder()

    def __len__(self) -> int:
        return len(self.ids)

    # Terms and their statistics: settled on first read (``tfs`` parallel to ``postings``).
    postings: _Settled[Mapping[str, array[int]]] = _Settled()
    tfs: _Settled[Mapping[str, array[int]]] = _Settled()
    tokens: _Settled[array[int]] = _Settled()
    content_tokens: _Settled[array[int]] = _Settled()
    token_count: _Settled[int] = _Settled()
    content_token_count: _Settled[int] = _Settled()

    def kind_of(self, memory_id: str) -> MemoryKind | None:
        doc = self.doc_of.get(memory_id)
        return None if doc is None else CODE_KIND[self.kinds[doc]]

    def is_retracted(self, memory_id: str) -> bool:
        return memory_id in self.retracted

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
                self._sources.add(doc, record.source.source_id)
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
        postings, tfs = self._postings, self._tfs
        few = runs.batch_numpy(len(texts)) is None
        if few and isinstance(postings, _PackedLists) and isinstance(tfs, _PackedLists):
            # A reader's tail over a loaded index file: lists only for the terms asked for.
            batch = [(doc, Counter(tokens)) for doc, tokens in texts]
            postings.add_batch(batch)
            tfs.add_batch(batch)
            return
        terms = list(set(chain.from_iterable(tokens for _, tokens in texts)))
        for number, run, tf_run in runs.tf_runs_by_term(texts, {t: i for i, t in enumerate(terms)}):
            _append(postings, terms[number], run)
            _append(tfs, terms[number], tf_run)

    def _retract(self, target: str) -> None:
        if target in self.retracted:
            return
        self.retracted.add(target)
        doc = self.doc_of.get(target)
        if doc is not None and self.kinds[doc] == 0:
            self.settle()  # the target's counts leave the totals: they must be known
            self.live[doc] = 0
            self._sources.retract(doc)
            self.searched -= 1
            self.retracted_conversations += 1
            self._token_count -= self._tokens[doc]
            self._content_token_count -= self._content_tokens[doc]

    # -- persisted (the JSONL index file) --------------------------------------------

    COUNTERS = ("searched", "retracted_conversations", "_token_count", "_content_token_count")
    # Per-doc arrays, kept under their names without the leading underscore.
    ARRAYS = ("ids", "kinds", "live", "timestamps", "micros", "_tokens", "_content_tokens")

    def packed(self) -> tuple[dict[str, int], dict[str, Any]]:
        """``(counters, arrays)`` for an index file: terms sorted, each term's postings
        and tfs at ``[term_ends[n-1]:term_ends[n]]`` (this reads every list: the rewrite)."""
        self.settle()
        terms = sorted(self._postings)
        ends, postings, tfs = array("Q"), array("I"), array("I")
        for term in terms:
            postings.extend(self._postings[term])
            tfs.extend(self._tfs[term])
            ends.append(len(postings))
        counters = {name.lstrip("_"): getattr(self, name) for name in self.COUNTERS}
        sections = {name.lstrip("_"): getattr(self, name) for name in self.ARRAYS}
        sections.update(retracted=sorted(self.retracted), terms=terms, term_ends=ends)
        sections.update(postings=postings, tfs=tfs)
        links = self._sources.links(len(self.ids), self.live)
        for name in ("names", "last", "before", "after"):
            sections[f"source_{name}"] = getattr(links, name)
        sections["source_of"] = links.source_of
        return counters, sections

    @classmethod
    def from_packed(cls, counters: dict[str, int], arrays: dict[str, Any]) -> InvertedIndex:
        """The index an index file holds (arrays taken, not copied); ``fetch(n)`` (term
        ``n``'s lists) and ``sources()`` are read when first asked for."""
        index = cls()
        for name in cls.ARRAYS:
            setattr(index, name, arrays[name.lstrip("_")])
        for name in cls.COUNTERS:
            setattr(index, name, int(counters[name.lstrip("_")]))
        ids = arrays["ids"]
        index.doc_of = SortedPositions(ids, arrays["id_order"], arrays["id_hashes"])
        index.retracted = set(arrays["retracted"])
        source = _TermSource(arrays["terms"], arrays["fetch"])
        index._postings = _PackedLists(source, 0)
        index._tfs = _PackedLists(source, 1)
        load: Callable[[], dict[str, Any]] = arrays["sources"]
        index._sources = SourceOrder(lambda: SourceLinks.from_sections(load()), len(ids))
        return index

    def load_terms(self, terms: Iterable[str]) -> None:
        """Read ``terms``' lists now (an index file's damage shows here, not mid-query)."""
        postings, tfs = self.postings, self.tfs
        for term in terms:
            postings.get(term)
            tfs.get(term)

    # -- queries -------------------------------------------------------------------

    def neighbours(self, memory_ids: Iterable[str]) -> dict[str, tuple[str | None, str | None]]:
        """``memory_id → (turn before, turn after)`` for each searched conversation record
        of ``memory_ids`` (the reference: ``source_neighbours_of``)."""
        ids, doc_of, live = self.ids, self.doc_of, self.live
        links = self._sources.links(len(ids), live)
        before, after = links.before, links.after
        found: dict[str, tuple[str | None, str | None]] = {}
        for memory_id in memory_ids:
            doc = doc_of.get(memory_id)
            if doc is None or not live[doc]:  # live: a conversation doc, not retracted
                continue
            previous, following = before[doc], after[doc]
            found[memory_id] = (
                None if previous == NONE else ids[previous],
                None if following == NONE else ids[following],
            )
        return found

    def check_scope(self, query: RecallQuery, user_scope: str) -> None:
        """The reference refuses a query of another scope as soon as it sees a record."""
        if query.user_scope != user_scope and self.ids:
            raise RemoteMemoryScopeError(f"memory {self.ids[0]} belongs to another user scope")

    def _postings_of(self, terms: Sequence[str]) -> list[array[int]]:
        return [p for p in (self.postings.get(t) for t in terms) if p is not None]

    def candidate_docs(self, terms: Sequence[str]) -> list[int]:
        """Every live doc sharing a term with ``terms``, in append order (the reference's)."""
        docs = set(chain.from_iterable(self._postings_of(terms)))
        live = self.live
        return sorted(d for d in docs if live[d])

    def candidate_count(self, terms: Sequence[str]) -> int:
        """``len(candidate_docs(terms))``, counted with numpy when the postings are many."""
        postings = [p for p in self._postings_of(terms) if p]
        total = sum(len(p) for p in postings)
        if not total:
            return 0
        np = runs.postings_numpy(total)
        if np is None:
            return len(self.candidate_docs(terms))
        live = np.frombuffer(self.live, dtype=np.uint8)
        views = [np.frombuffer(p, dtype=np.uint32) for p in postings]
        try:
            if total * 8 < len(self.ids):
                docs = np.unique(np.concatenate(views))
                return int(np.count_nonzero(live[docs]))
            if not self.retracted_conversations and hasattr(np, "bitwise_count"):
                return self._count_by_bits(np, terms)
            seen = np.zeros(len(self.ids), dtype=bool)
            for view in views:
                seen[view] = True
            seen &= live.view(bool)
            return int(np.count_nonzero(seen))
        finally:
            del views, live

    def _count_by_bits(self, np: Any, terms: Sequence[str]) -> int:
        """The union of ``terms``' postings counted on bitsets kept in ``scratch`` (all live)."""
        n = len(self.ids)
        union = np.zeros((n + 7) // 8, dtype=np.uint8)
        for term in dict.fromkeys(terms):
            posting = self._postings.get(term)
            if posting:
                docs = np.frombuffer(posting, dtype=np.uint32)
                union |= runs.bitset(np, self.scratch, (term, len(posting), n), docs, n)
        return int(np.bitwise_count(union).sum())

    def top_docs(
        self, terms: Sequence[str], limit: int, as_of: datetime, bound: ScoreBound
    ) -> tuple[list[int], int]:
        """``(docs of bound's top `limit` in rank order, exact candidate count)``."""
        postings = self._postings_of(terms)
        if not postings:
            return [], 0

        def walk(groups: Iterable[tuple[int, list[Entry]]]) -> list[int]:
            return walk_groups(groups, len(terms), limit, as_of, bound)

        np = runs.postings_numpy(sum(len(p) for p in postings))
        if np is not None:
            return self._top_numpy(np, postings, len(terms), limit, walk)
        return self._top_python(postings, limit, walk)

    def _entries(self, docs: Iterable[int]) -> list[Entry]:
        ts, micros, ids = self.timestamps, self.micros, self.ids
        return [(ts[d], timestamp_of_micros(micros[d]), ids[d], d) for d in docs]

    def _top_python(
        self, postings: list[array[int]], limit: int, walk: _Walk
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

        return walk(groups()), total

    def _top_numpy(
        self, np: Any, postings: list[array[int]], term_count: int, limit: int, walk: _Walk
    ) -> tuple[list[int], int]:
        n = len(self.ids)
        total = sum(len(p) for p in postings)
        # Views, dropped before returning, so the arrays can grow again on the next append.
        views = [np.frombuffer(p, dtype=np.uint32) for p in postings]
        live = np.frombuffer(self.live, dtype=np.uint8)
        # In a list, so ``finally`` drops the view even while the generator below holds it.
        held = [np.frombuffer(self.timestamps, dtype=np.float64)]
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
                chosen: list[int] = docs.tolist()
                return chosen

            def groups() -> Iterator[tuple[int, list[Entry]]]:
                for matched in present.tolist():
                    if matched:
                        yield matched, self._entries(select(matched))

            top = walk(groups())
            found = len(cand)
        finally:
            del views, live
            held.clear()
        return top, found

    # -- for teaching --------------------------------------------------------------

    def posting_rows(self, terms: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """``[{"term", "records", "memory_ids"}]`` for a notebook table."""
        wanted = sorted(self.postings) if terms is None else list(terms)
        postings = [(term, self.postings.get(term, array("I"))) for term in wanted]
        return [
            {"term": term, "records": len(docs), "memory_ids": [self.ids[d] for d in docs]}
            for term, docs in postings
        ]


def scan_from_index(
    index: InvertedIndex,
    query: RecallQuery,
    load: Callable[[Sequence[int]], Sequence[StoredMemory]],
    *,
    top: ScoreBound | None,
) -> CandidateScan:
    """A ``CandidateScan``: every candidate in append order, or ``top``'s best ``limit``."""
    if top is not None:
        docs, candidate_count = index.top_docs(query.terms, query.limit, query_as_of(query), top)
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


def lexical_from_index(
    index: InvertedIndex,
    query: RecallQuery,
    terms: Sequence[str],
    load: Callable[[Sequence[int]], Sequence[StoredMemory]],
) -> LexicalPostings:
    """``LexicalPostings`` of ``terms`` (the query's scoring terms) answered from ``index``."""
    postings, tfs = index.postings, index.tfs
    empty = array("I")
    return LexicalPostings(
        terms=tuple(terms),
        postings=tuple((postings.get(t, empty), tfs.get(t, empty)) for t in terms),
        live=index.live,
        tokens=index.tokens,
        content_tokens=index.content_tokens,
        timestamps=index.timestamps,
        ids=index.ids,
        searched_records=index.searched,
        candidate_records=index.candidate_count(query.terms),
        retracted_records=index.retracted_conversations,
        searched_token_count=index.token_count,
        searched_content_token_count=index.content_token_count,
        candidate_docs=lambda: index.candidate_docs(query.terms),
        candidates_of=lambda docs: candidates_for(query, load(docs)),
        scratch=index.scratch,
    )
