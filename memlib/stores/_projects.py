"""[beyond] Every project of a user at once: ``all_projects`` (docs/contract.md, "Projects").

Each project is a scope of its own (``scope/project``) and answers alone; the view joins
the answers. Two projects may hold the same id: the view keeps both, in project order (no
project first, then by name), and asks the first project holding an id about it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

from ..candidates import CandidateScan
from ..errors import RemoteMemoryValidationError
from ..normalize import RecallQuery
from ..records import StoredMemory
from ._base import BaseMemoryStore, MemoryStore, neighbours_in_source, records_by_id_of
from ._sources import SourceNeighbours


def all_projects_of(store: MemoryStore) -> AllProjectsStore:
    """A read-only view of every project of ``store``'s user, ``store``'s own included."""
    if isinstance(store, AllProjectsStore):
        return store
    if not isinstance(store, BaseMemoryStore):
        raise RemoteMemoryValidationError(f"{type(store).__name__} has no projects")
    own, names = store.project, store.projects()
    parts = [store if name == own else store.in_project(name) for name in names]
    return AllProjectsStore(store, parts if own in names else [*parts, store])


@contextmanager
def projects_view(store: MemoryStore, all_projects: bool) -> Iterator[MemoryStore]:
    """``store``, or the view of all its user's projects (closed after the call)."""
    if not all_projects:
        yield store
        return
    view = all_projects_of(store)
    try:
        yield view
    finally:
        if view is not store:
            view.close()


def _total(counts: Iterable[int | None]) -> int | None:
    """The sum, or None when a project does not count (a store without the statistics)."""
    known = list(counts)
    return None if None in known else sum(c for c in known if c is not None)


class AllProjectsStore(BaseMemoryStore):
    """The records of ``parts`` (one store a project), read only."""

    backend = "all_projects"

    def __init__(self, store: MemoryStore, parts: Sequence[MemoryStore]) -> None:
        # Not BaseMemoryStore.__init__: the view has the scope, not the user id.
        self.store = store
        self._user_scope = store.user_scope
        self.project = None
        self.embedder = None
        self.parts = tuple(parts)

    def __repr__(self) -> str:
        return f"AllProjectsStore({self.store!r})"

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise RemoteMemoryValidationError("all projects are read together, not written")

    _now = _read_only  # every write of the base store starts with it

    def read_all(self) -> tuple[StoredMemory, ...]:
        return tuple(r for part in self.parts for r in part.read_all())

    def latest_profile(self) -> StoredMemory | None:
        profiles = [p for part in self.parts if (p := part.latest_profile()) is not None]
        return max(profiles, key=lambda r: (r.captured_datetime, r.memory_id), default=None)

    def _holder(self, memory_id: str) -> MemoryStore | None:
        return next((p for p in self.parts if records_by_id_of(p, [memory_id])), None)

    def retraction_of(self, memory_id: str) -> StoredMemory | None:
        holder = self._holder(memory_id)
        return None if holder is None else holder.retraction_of(memory_id)

    def records_by_id(self, memory_ids: Sequence[str]) -> list[StoredMemory]:
        found = [r for part in self.parts for r in records_by_id_of(part, memory_ids)]
        order = {memory_id: i for i, memory_id in reversed(list(enumerate(memory_ids)))}
        return sorted(found, key=lambda r: order[r.memory_id])

    def existing_ids(self, memory_ids: Sequence[str]) -> set[str]:
        return {r.memory_id for r in self.records_by_id(memory_ids)}

    def source_neighbours(self, memory_ids: Sequence[str]) -> dict[str, SourceNeighbours]:
        found: dict[str, SourceNeighbours] = {}
        for part in reversed(self.parts):  # the first project holding an id wins
            found.update(neighbours_in_source(part, memory_ids))
        return found

    def scan_candidates(self, query: RecallQuery) -> CandidateScan:
        """Each project's own scan (its index, its retractions), joined."""
        scans = [part.scan_candidates(query) for part in self.parts]
        return CandidateScan(
            candidates=tuple(c for s in scans for c in s.candidates),
            searched_records=sum(s.searched_records for s in scans),
            candidate_records=sum(s.candidate_records for s in scans),
            retracted_records=sum(s.retracted_records for s in scans),
            searched_token_count=_total(s.searched_token_count for s in scans),
            searched_content_token_count=_total(s.searched_content_token_count for s in scans),
        )

    def close(self) -> None:
        """Closes the stores the view opened, not the one it was made from."""
        for part in self.parts:
            if part is not self.store:
                part.close()
