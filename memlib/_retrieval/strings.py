"""Strings packed in one UTF-8 blob, read one at a time (the index file's ids and terms):
a query needs a few, and decoding all up front cost more than the rest of the load."""

from __future__ import annotations

import zlib
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import accumulate, islice
from typing import overload


def pack_strings(strings: Iterable[str]) -> tuple[bytes, array[int]]:
    """``(blob, ends)``: the UTF-8 of ``strings`` back to back, and where each ends."""
    strings = strings if isinstance(strings, list) else list(strings)
    text = "".join(strings)
    blob = text.encode("utf-8")
    # ASCII (ids, most terms): a string's bytes are its characters, no encode apiece.
    sizes = (
        map(len, strings) if len(blob) == len(text) else (len(s.encode("utf-8")) for s in strings)
    )
    return blob, array("Q", accumulate(sizes))


class PackedStrings(Sequence[str]):
    """A list of strings over ``(blob, ends)``; ``append`` adds past the packed ones."""

    def __init__(self, blob: bytes | memoryview = b"", ends: Sequence[int] = ()) -> None:
        self._blob, self._ends = blob, ends
        self._packed = len(ends)
        self._added: list[str] = []

    def __len__(self) -> int:
        return self._packed + len(self._added)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if 0 <= i < self._packed:
            start = self._ends[i - 1] if i else 0
            return str(self._blob[start : self._ends[i]], "utf-8")
        if self._packed <= i < len(self):
            return self._added[i - self._packed]
        raise IndexError("string index out of range")

    def __iter__(self) -> Iterator[str]:
        if self._packed:
            # One decode of the whole blob, cut at the ends (faster than one per string).
            text = bytes(self._blob[: self._ends[self._packed - 1]])
            start = 0
            for end in self._ends:
                yield str(text[start:end], "utf-8")
                start = end
        yield from self._added

    def append(self, text: str) -> None:
        self._added.append(text)


class SortedPositions(Mapping[str, int]):
    """``string → its number`` in a ``PackedStrings``, found by bisection: over the sorted
    strings, or with ``order`` over their CRC-32s (``hashed_order``: integers at C speed
    plus one decode). Strings set afterwards live in a dict."""

    def __init__(
        self,
        strings: Sequence[str],
        order: Sequence[int] | None = None,
        hashes: Sequence[int] | None = None,
    ) -> None:
        self._strings, self._order, self._hashes = strings, order, hashes
        self._count = len(strings)
        self._added: dict[str, int] = {}

    def _packed_position(self, key: str) -> int | None:
        hashes, order = self._hashes, self._order
        if hashes is not None and order is not None:
            wanted = crc32_of(key)
            at = bisect_left(hashes, wanted)
            while at < self._count and hashes[at] == wanted:  # a collision: rare
                if self._strings[order[at]] == key:
                    return order[at]
                at += 1
            return None
        # No order: the strings are sorted themselves, and str comparison is code-point
        # order, the UTF-8 byte order the file was sorted in.
        at = bisect_left(self._strings, key, 0, self._count)
        return at if at < self._count and self._strings[at] == key else None

    def __getitem__(self, key: str) -> int:
        if key in self._added:
            return self._added[key]
        n = self._packed_position(key)
        if n is None:
            raise KeyError(key)
        return n

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key)

    def __setitem__(self, key: str, value: int) -> None:
        self._added[key] = value

    def __iter__(self) -> Iterator[str]:
        for text in islice(self._strings, self._count):
            if text not in self._added:
                yield text
        yield from self._added

    def __len__(self) -> int:
        return sum(1 for _ in self)


def crc32_of(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


def hashed_order(strings: Sequence[str]) -> tuple[array[int], array[int]]:
    """``(order, hashes)`` for ``SortedPositions``: the numbers of ``strings`` sorted by
    their CRC-32, and those CRC-32s in that order."""
    hashes = [crc32_of(text) for text in strings]
    order = sorted(range(len(hashes)), key=hashes.__getitem__)
    return array("I", order), array("I", (hashes[n] for n in order))
