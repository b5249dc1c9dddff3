"""[beyond] A conversation record's neighbours in its source: the turn before and after it.

A source (``source.source_id``: one session transcript, one chat) is a sequence of turns,
and a store keeps its records in append order. So the turn *before* a searched
conversation record is the latest searched conversation record of the same source
appended before it, and the turn *after* is the earliest appended after it. A retracted
record is out of the sequence (its neighbours become each other's); profiles and
retractions have no place in one. Append order, not ``memory_id`` order: a record's
predecessor is fixed when it is written and changes only when a retraction takes the
predecessor away, which is what lets a store keep anything derived from the pair
(docs/retrieval.md, "Pair vectors in the library").

``source_neighbours_of`` is the reference, over a scope's records in append order; a
store answers ``SourceOrdering.source_neighbours`` from its own index, never
differently (``tests/stores/test_source_neighbours.py`` holds every backend to it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..records import MemoryKind, SourceNeighbours, StoredMemory

__all__ = ["SourceNeighbours", "source_neighbours_of"]  # SourceNeighbours: from records


def source_neighbours_of(
    records: Iterable[StoredMemory], memory_ids: Sequence[str]
) -> dict[str, SourceNeighbours]:
    """For each of ``memory_ids`` that is a searched conversation record of ``records``
    (one scope, in append order), its neighbours in its source; other ids are left out."""
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
