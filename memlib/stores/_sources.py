"""[beyond] A conversation record's neighbours in its source: the turn before and after it.

In append order (not id order), the turn before a searched conversation record is the
latest searched one of the same ``source_id`` appended before it, the turn after the
earliest appended after it; a retracted record leaves the sequence. So a record's
predecessor changes only when a retraction takes it away (docs/retrieval.md). This is
the reference; every backend's ``source_neighbours`` is held to it by a test."""

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
    place: dict[str, tuple[list[str], int]] = {}
    for members in turns.values():
        for position, memory_id in enumerate(members):
            place[memory_id] = (members, position)
    found: dict[str, SourceNeighbours] = {}
    for memory_id in memory_ids:
        where = place.get(memory_id)
        if where is None:
            continue
        members, position = where
        found[memory_id] = SourceNeighbours(
            members[position - 1] if position > 0 else None,
            members[position + 1] if position + 1 < len(members) else None,
        )
    return found
