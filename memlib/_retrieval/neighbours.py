"""Each conversation doc's place in its source, for ``InvertedIndex.neighbours``: a doubly
linked list per source, in arrays; a retraction unlinks its doc, so a look-up never walks
past retracted turns (``stores/_sources.py``'s answer)."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .strings import PackedStrings, SortedPositions

NONE = 0xFFFFFFFF  # no doc (no neighbour; not a conversation doc); no source


class SourceLinks:
    """The sources' names and each source's live docs as a linked list (see the module)."""

    __slots__ = ("after", "before", "last", "names", "numbers", "source_of")

    def __init__(self) -> None:
        self.names: list[str] | PackedStrings = []  # source number → source_id
        self.numbers: dict[str, int] | SortedPositions = {}  # source_id → source number
        self.last = array("I")  # per source: its latest live doc, or NONE
        self.source_of = array("I")  # per doc: its source number (NONE: not a conversation)
        self.before = array("I")  # per doc: the live doc before it in its source, or NONE
        self.after = array("I")  # per doc: the live doc after it in its source, or NONE

    @classmethod
    def from_sections(cls, sections: Mapping[str, Any]) -> SourceLinks:
        """The links an index file holds (arrays taken, not copied)."""
        links = cls()
        for name in ("names", "last", "before", "after"):
            setattr(links, name, sections[f"source_{name}"])
        links.source_of = sections["source_of"]
        order, hashes = sections["source_order"], sections["source_hashes"]
        links.numbers = SortedPositions(links.names, order, hashes)
        return links

    def number(self, name: str) -> int:
        """``name``'s source number, a new one for a source not seen yet."""
        found = self.numbers.get(name)
        if found is not None:
            return int(found)
        n = len(self.last)
        self.names.append(name)
        self.numbers[name] = n
        self.last.append(NONE)
        return n

    def pad(self, count: int) -> None:
        """Room for docs up to ``count``, none linked yet."""
        missing = count - len(self.source_of)
        if missing > 0:
            fill = array("I", b"\xff" * (4 * missing))
            self.source_of.extend(fill)
            self.before.extend(fill)
            self.after.extend(fill)

    def link(self, doc: int, source: int) -> None:
        """Put ``doc``, later than every doc linked so far, last in ``source``."""
        previous = self.last[source]
        self.before[doc] = previous
        if previous != NONE:
            self.after[previous] = doc
        self.last[source] = doc

    def unlink(self, doc: int) -> None:
        """Take a linked ``doc`` out: its neighbours become each other's."""
        previous, following = self.before[doc], self.after[doc]
        if previous != NONE:
            self.after[previous] = following
        if following != NONE:
            self.before[following] = previous
        else:
            self.last[self.source_of[doc]] = previous
        self.before[doc] = self.after[doc] = NONE


class SourceOrder:
    """``SourceLinks`` as of doc ``upto``, and what changed since, waiting to be linked (an
    index file's links stay unread until ``links()``)."""

    def __init__(self, load: Callable[[], SourceLinks] | None = None, upto: int = 0) -> None:
        self._links: SourceLinks | None = None if load is not None else SourceLinks()
        self._load = load
        self._upto = upto  # docs below are in the links, as live as they were then
        self._docs = array("I")  # conversation docs since, in append order…
        self._sources = array("I")  # …and their sources, numbered in ``_names``
        self._names: list[str] = []
        self._number: dict[str, int] = {}
        self._unlink = array("I")  # linked docs retracted since

    def add(self, doc: int, source_id: str) -> None:
        """A conversation doc appended (``doc`` past every doc noted so far)."""
        n = self._number.get(source_id)
        if n is None:
            n = self._number[source_id] = len(self._names)
            self._names.append(source_id)
        self._docs.append(doc)
        self._sources.append(n)

    def retract(self, doc: int) -> None:
        """A conversation doc's live flag just cleared (once for ever: retraction is final)."""
        if doc < self._upto:
            self._unlink.append(doc)
        # A waiting doc is linked only if live when ``links()`` comes: nothing to undo.

    def links(self, count: int, live: Sequence[int]) -> SourceLinks:
        """The links of docs up to ``count``, ``live`` their flags (reading an index file's
        links may raise ``IndexDamagedError``, with nothing changed)."""
        links = self._links
        if links is None:
            assert self._load is not None
            links = self._load()
            self._links, self._load = links, None
        if self._upto == count and not self._unlink:
            return links
        links.pad(count)
        # Unlinking first, then appending, leaves each source's live docs in append
        # order whatever the order the appends and retractions came in.
        for doc in self._unlink:
            links.unlink(doc)
        numbers = [links.number(name) for name in self._names]
        source_of = links.source_of
        for doc, waiting in zip(self._docs, self._sources, strict=True):
            source = numbers[waiting]
            source_of[doc] = source
            if live[doc]:
                links.link(doc, source)
        self._upto = count
        self._docs, self._sources, self._unlink = array("I"), array("I"), array("I")
        self._names, self._number = [], {}
        return links
