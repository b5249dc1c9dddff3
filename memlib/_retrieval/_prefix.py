"""An ``InvertedIndex`` cut at a doc: the index its first ``count`` docs alone would make,
without reading them again (a JSONL store's ``known_at``: the log prefix stored by then).

The per-doc arrays are copied up to ``count``; liveness and the corpus totals are worked
out again from the retractions among those docs only; a posting list is cut when first
asked for, and the source links are made again only when neighbours are."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import compress, islice
from typing import overload

from ..records import MemoryKind
from .inverted import KIND_CODE, InvertedIndex
from .neighbours import NONE, SourceLinks, SourceOrder

_CONVERSATION = KIND_CODE[MemoryKind.CONVERSATION]
# kinds → live before any retraction: 1 for a conversation doc, 0 for the others.
_LIVE = bytes(int(code == _CONVERSATION) for code in range(256))


class _Ids(Sequence[str]):
    """The first ``count`` of ``ids`` (the index's own, which may grow meanwhile)."""

    def __init__(self, ids: Sequence[str], count: int) -> None:
        self._ids, self._count = ids, count

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._count))]
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError("id index out of range")
        return self._ids[i]

    def __iter__(self) -> Iterator[str]:
        return islice(self._ids, self._count)


class _Docs(Mapping[str, int]):
    """``memory_id → doc`` for the docs below ``count``."""

    def __init__(self, doc_of: Mapping[str, int], ids: Sequence[str]) -> None:
        self._doc_of, self._ids = doc_of, ids

    def __getitem__(self, memory_id: str) -> int:
        doc = self._doc_of.get(memory_id)
        if doc is None or doc >= len(self._ids):
            raise KeyError(memory_id)
        return doc

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


class _Lists(Mapping[str, "array[int]"]):
    """The postings (``which`` 0) or tfs (1) of the docs below ``count``: copies cut from
    the index's lists (ascending docs) when a term is first asked for, kept in ``cut``
    for both sides (the index's own lists may grow meanwhile)."""

    def __init__(
        self, index: InvertedIndex, count: int, which: int, cut: dict[str, tuple[array[int], ...]]
    ) -> None:
        self._index, self._count, self._which, self._cut = index, count, which, cut

    def __getitem__(self, term: str) -> array[int]:
        found = self._cut.get(term)
        if found is None:
            docs = self._index.postings.get(term)
            at = 0 if docs is None else bisect_left(docs, self._count)
            found = self._cut[term] = (
                () if docs is None or not at else (docs[:at], self._index.tfs[term][:at])
            )
        if not found:
            raise KeyError(term)
        return found[self._which]

    def __iter__(self) -> Iterator[str]:
        # For teaching only (``posting_rows``): every term of the index, looked at.
        return (term for term in list(self._index.postings) if term in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def index_prefix(index: InvertedIndex, count: int, retracted: Iterable[str]) -> InvertedIndex:
    """``index`` as its first ``count`` docs alone make it, ``retracted`` the targets of
    the retractions among them: what ``InvertedIndex().add_many`` of those records holds."""
    prefix = InvertedIndex()
    kinds = index.kinds[:count]
    live = kinds.translate(_LIVE)
    prefix.retracted = set(retracted)
    doc_of = index.doc_of
    for memory_id in prefix.retracted:
        doc = doc_of.get(memory_id)
        if doc is not None and doc < count and live[doc]:
            live[doc] = 0
            prefix.retracted_conversations += 1
    tokens, content_tokens = index.tokens[:count], index.content_tokens[:count]
    prefix.ids = ids = _Ids(index.ids, count)  # type: ignore[assignment]
    prefix.doc_of = _Docs(doc_of, ids)  # type: ignore[assignment]
    prefix.kinds, prefix.live = kinds, live
    prefix.timestamps, prefix.micros = index.timestamps[:count], index.micros[:count]
    prefix._tokens, prefix._content_tokens = tokens, content_tokens
    prefix.searched = live.count(1)
    prefix._token_count = sum(compress(tokens, live))
    prefix._content_token_count = sum(compress(content_tokens, live))
    cut: dict[str, tuple[array[int], ...]] = {}
    prefix._postings = _Lists(index, count, 0, cut)  # type: ignore[assignment]
    prefix._tfs = _Lists(index, count, 1, cut)  # type: ignore[assignment]
    prefix._sources = SourceOrder(lambda: _links(index, count, live), count)
    return prefix


def _links(index: InvertedIndex, count: int, live: bytearray) -> SourceLinks:
    """The source links of the docs below ``count``, ``live`` their flags then."""
    whole = index._sources.links(len(index.ids), index.live)
    links = SourceLinks()
    links.last = array("I", [NONE]) * len(whole.last)
    links.pad(count)
    links.source_of = whole.source_of[:count]
    for doc in compress(range(count), live):
        links.link(doc, links.source_of[doc])
    return links
