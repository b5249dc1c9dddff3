"""[beyond] A conversation record's neighbours in its source: the turn before and after it.

In append order, the turn before a searched conversation record is the latest searched
one of the same ``source_id`` appended before it, the turn after the earliest appended
after it; a retracted record leaves the sequence, so a record's predecessor changes only
when a retraction takes it away (docs/retrieval.md). Every backend is held to this
reference by a test."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..records import MemoryKind, SourceNeighbours, StoredMemory

__all__ = ["SourceNeighbours", "source_neighbours_of"]  # SourceNeighbours: from records


def source_neighbours_of(
    records: Iterable[StoredMemory], memory_ids: Sequence[str]
) -> dict[str, SourceNeighbours]:
    """Each of ``memory_ids`` that is a searched conversation record of ``records`` (one
    scope, append order) with its neighbours; other ids are left out."""
    every = list(records)
    retracted = {r.retracts for r in every if r.kind is MemoryKind.RETRACTION}
    turns: dict[str, list[str]] = {}
    for record in every:
        if record.kind is MemoryKind.CONVERSATION and record.memory_id not in retracted:
            turns.setdefault(record.source.source_id, []).append(record.memory_id)
    found: dict[str, SourceNeighbours] = {}
    for members in turns.values():
        befores, afters = [None, *members[:-1]], [*members[1:], None]
        for before, memory_id, after in zip(befores, members, afters, strict=True):
            found[memory_id] = SourceNeighbours(before, after)
    return {m: found[m] for m in memory_ids if m in found}
