"""What every backend shares: the ``MemoryStore`` protocol and the rules of a write.

A backend supplies only storage; the rules live here, so every backend refuses the same
things with the same messages. Vectors are made before the write's lock (embedding is
slow); [beyond] pair vectors after it, once a record's turn before is certain."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

from .._capabilities import ScoreBound
from .._vectors import DenseScores, Embedder, VectorState, pack, pair_text
from .._visible import shown_name
from ..candidates import CandidateScan, LexicalPostings, scan_recall_candidates
from ..errors import RemoteMemoryDuplicateError, RemoteMemoryScopeError, RemoteMemoryValidationError
from ..normalize import RecallQuery
from ..records import (
    MemoryKind,
    MemorySource,
    StoredMemory,
    format_timestamp,
    memory_id_of,
    project_name,
    reason_text,
    record_from_item,
    user_scope_for,
)
from ..score import BaselineBound
from ._sources import SourceNeighbours, source_neighbours_of

Clock = Callable[[], datetime]

_APPEND_KEYS = ("kind", "memory_id", "content", "summary", "source")
_APPEND_KEY_SET = frozenset(_APPEND_KEYS)


@runtime_checkable
class MemoryStore(Protocol):
    """The one interface the recall engine, the CLI and the agent depend on."""

    backend: str

    @property
    def user_scope(self) -> str: ...

    def append(
        self,
        *,
        kind: MemoryKind | str,
        memory_id: str,
        content: str,
        summary: str,
        source: MemorySource | Mapping[str, Any],
    ) -> StoredMemory: ...

    def append_many(self, items: Iterable[Mapping[str, Any]]) -> tuple[StoredMemory, ...]: ...

    def retract(
        self,
        memory_id: str,
        *,
        reason: str,
        source: MemorySource | Mapping[str, Any],
        retraction_id: str | None = None,
    ) -> StoredMemory: ...

    def supersede(
        self,
        memory_id: str,
        new_record: Mapping[str, Any],
        *,
        reason: str,
        source: MemorySource | Mapping[str, Any] | None = None,
        retraction_id: str | None = None,
    ) -> tuple[StoredMemory, StoredMemory]: ...

    def read_all(self) -> tuple[StoredMemory, ...]: ...

    def records(self, kind: MemoryKind | str | None = None) -> tuple[StoredMemory, ...]: ...

    def latest_profile(self) -> StoredMemory | None: ...

    def retraction_of(self, memory_id: str) -> StoredMemory | None: ...

    def scan_candidates(self, query: RecallQuery) -> CandidateScan: ...

    def close(self) -> None: ...


@runtime_checkable
class TopScanning(Protocol):
    """An index that stops early: only ``bound``'s top ``query.limit`` candidates are built."""

    def scan_top_candidates(
        self, query: RecallQuery, bound: ScoreBound | None = None
    ) -> CandidateScan: ...


@runtime_checkable
class LexicalScanning(Protocol):
    """Postings with term frequencies and record lengths, for a lexical ranker (BM25)."""

    def lexical_postings(self, query: RecallQuery, terms: Sequence[str]) -> LexicalPostings: ...


@runtime_checkable
class IdLookup(Protocol):
    """A store that answers "which of these ids do you hold?" without reading records."""

    def existing_ids(self, memory_ids: Sequence[str]) -> set[str]: ...


@runtime_checkable
class VectorStoring(Protocol):
    """Embeddings of the searched conversation records; the first written fix the
    model, and another's are refused (``RemoteMemoryVectorModelError``) until dropped."""

    embedder: Embedder | None

    def vector_state(self) -> VectorState: ...

    def dense_scores(
        self, query: RecallQuery, vector: Any, *, model: str, dimension: int
    ) -> DenseScores: ...

    def records_without_vectors(self, limit: int) -> tuple[StoredMemory, ...]: ...

    def put_vectors(
        self,
        model: str,
        dimension: int,
        vectors: Mapping[str, bytes],
        *,
        previous: Mapping[str, str | None] | None = None,
    ) -> int:
        """Store vectors of searched conversation records (others skipped); returns how many.
        Pair vectors need ``previous``: one whose turn before changed since is skipped too."""
        ...

    def drop_vectors(self) -> int: ...

    def records_by_id(self, memory_ids: Sequence[str]) -> list[StoredMemory]: ...


@runtime_checkable
class SourceOrdering(Protocol):
    """A store that tells each conversation record's neighbours in its source (``sources.py``)."""

    def source_neighbours(self, memory_ids: Sequence[str]) -> dict[str, SourceNeighbours]: ...


def neighbours_in_source(
    store: MemoryStore | SourceOrdering, memory_ids: Sequence[str]
) -> dict[str, SourceNeighbours]:
    """``store.source_neighbours``, else the reference over ``read_all``."""
    if isinstance(store, SourceOrdering):
        return store.source_neighbours(memory_ids)
    return source_neighbours_of(store.read_all(), memory_ids)


def pair_texts(
    store: MemoryStore | SourceOrdering, records: Sequence[StoredMemory]
) -> tuple[list[StoredMemory], list[str], dict[str, str | None]]:
    """``(kept, texts, previous)``: those of ``records`` still searched, their
    ``pair_text`` and each one's turn before (None: the first)."""
    neighbours = neighbours_in_source(store, [r.memory_id for r in records])
    previous = {
        r.memory_id: neighbours[r.memory_id].previous for r in records if r.memory_id in neighbours
    }
    content = {r.memory_id: r.content for r in records}
    wanted = sorted({p for p in previous.values() if p is not None} - content.keys())
    if wanted:
        content.update((r.memory_id, r.content) for r in records_by_id_of(store, wanted))
    # A turn before that is gone by now (retracted since) is left out: put_vectors would
    # refuse its pair anyway.
    kept = [
        r
        for r in records
        if r.memory_id in previous
        and (previous[r.memory_id] is None or previous[r.memory_id] in content)
    ]
    texts = [
        pair_text(None if (p := previous[r.memory_id]) is None else content[p], r.content)
        for r in kept
    ]
    return kept, texts, {r.memory_id: previous[r.memory_id] for r in kept}


def records_by_id_of(store: object, memory_ids: Sequence[str]) -> list[StoredMemory]:
    """``store.records_by_id``, else a walk of ``read_all`` (a store of the protocol only)."""
    by_id = getattr(store, "records_by_id", None)
    if by_id is not None:
        return list(by_id(memory_ids))
    wanted = set(memory_ids)
    return [r for r in getattr(store, "read_all")() if r.memory_id in wanted]  # noqa: B009


class StoreState(Protocol):
    """What the write rules need to know about the records already stored."""

    def kind_of(self, memory_id: str) -> MemoryKind | None: ...

    def is_retracted(self, memory_id: str) -> bool: ...


def make_private_folders(folder: Path, mode: int = 0o700) -> None:
    """Create ``folder`` and every missing parent with ``mode`` (``mkdir(parents=True)``
    gives the parents the umask's mode, which would list every user's scope)."""
    for path in reversed((folder, *folder.parents)):
        if not path.exists():
            path.mkdir(mode=mode, exist_ok=True)


def latest_profile_of(records: Iterable[StoredMemory]) -> StoredMemory | None:
    records = tuple(records)
    retracted = {r.retracts for r in records if r.kind is MemoryKind.RETRACTION}
    profiles = [r for r in records if r.kind is MemoryKind.PROFILE and r.memory_id not in retracted]
    return max(profiles, key=lambda r: (r.captured_datetime, r.memory_id), default=None)


class BaseMemoryStore:
    """Shared behaviour; a backend implements ``read_all`` and ``_append_batch``."""

    backend = "base"

    def __init__(
        self,
        *,
        user_id: str,
        clock: Clock | None = None,
        embedder: Embedder | None = None,
        project: str | None = None,
    ) -> None:
        self._user_id = user_id
        self._user_scope = user_scope_for(user_id)
        self._clock: Clock = clock or (lambda: datetime.now(UTC))
        self.embedder = embedder
        # [beyond] A namespace inside the user (docs/contract.md, "Projects"): the store
        # reads and writes its records only, as if they were another scope's.
        self.project = None if project is None else project_name(project)

    @property
    def user_scope(self) -> str:
        return self._user_scope

    @property
    def _key(self) -> str:
        """Where the backend keeps this store's records: the scope, or ``scope/project``."""
        return self._user_scope if self.project is None else f"{self._user_scope}/{self.project}"

    def _check_owner(self, record: StoredMemory) -> StoredMemory:
        """``record`` if it is this store's (scope and project), else the scope error."""
        if record.user_scope != self._user_scope:
            raise RemoteMemoryScopeError(f"memory {record.memory_id} belongs to another user scope")
        if record.project != self.project:
            raise RemoteMemoryScopeError(f"memory {record.memory_id} belongs to another project")
        return record

    def projects(self) -> tuple[str | None, ...]:
        """[beyond] The projects holding records of this user (None: those without one)."""
        raise NotImplementedError

    def in_project(self, project: str | None) -> BaseMemoryStore:
        """[beyond] The same store, user and options for ``project`` (None: no project)."""
        raise NotImplementedError

    @property
    def user_id(self) -> str:
        return self._user_id

    # -- building records ---------------------------------------------------------

    def _now(self) -> str:
        moment = self._clock()
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return format_timestamp(moment)

    def _record(self, item: Mapping[str, Any], stored_at: str) -> StoredMemory:
        # A plain dict with exactly the five keys is the common case (a bulk import
        # pays this per record); anything else takes the checks that word the error.
        if type(item) is not dict or item.keys() != _APPEND_KEY_SET:
            if not isinstance(item, Mapping):
                raise RemoteMemoryValidationError("each record to append must be a mapping")
            missing = [k for k in _APPEND_KEYS if k not in item]
            if missing:
                raise RemoteMemoryValidationError(f"record is missing {', '.join(missing)}")
            unknown = sorted(set(item) - _APPEND_KEY_SET)
            if unknown:
                raise RemoteMemoryValidationError(
                    f"unknown record fields: {', '.join(map(shown_name, unknown))}"
                )
        kind = item["kind"]
        if kind in (MemoryKind.RETRACTION, MemoryKind.RETRACTION.value):
            raise RemoteMemoryValidationError("use retract() to write a retraction")
        return record_from_item(item, self._user_scope, stored_at, self.project)

    # -- the rules of a write -----------------------------------------------------

    @staticmethod
    def check_batch(batch: Sequence[StoredMemory], state: StoreState) -> None:
        """Raise unless ``batch`` may be appended to ``state`` (called under the
        backend's lock or transaction, so the answer cannot go stale)."""
        seen = {record.memory_id: record.kind for record in batch}
        BaseMemoryStore._check_supersede(batch, state, seen)
        # Retraction rules first: retracting the same record twice is "already
        # retracted", not a clash of the default retraction ids.
        retracted_here: set[str] = set()
        for record in batch:
            if record.kind is not MemoryKind.RETRACTION or record.retracts is None:
                continue
            target = record.retracts
            kind = state.kind_of(target) or seen.get(target)
            if kind is None:
                raise RemoteMemoryValidationError(f"cannot retract unknown memory_id: {target}")
            if kind is MemoryKind.RETRACTION:
                raise RemoteMemoryValidationError(f"cannot retract a retraction: {target}")
            if target in retracted_here or state.is_retracted(target):
                raise RemoteMemoryValidationError(f"memory {target} is already retracted")
            retracted_here.add(target)
        counted: set[str] = set()
        duplicates: dict[str, None] = {}  # in batch order, each once
        for record in batch:
            if record.memory_id in counted or state.kind_of(record.memory_id) is not None:
                duplicates[record.memory_id] = None
            counted.add(record.memory_id)
        if duplicates:
            raise RemoteMemoryDuplicateError(list(duplicates))

    @staticmethod
    def _check_supersede(
        batch: Sequence[StoredMemory], state: StoreState, seen: Mapping[str, MemoryKind]
    ) -> None:
        """A supersede's own rules (the retraction rules hold too): the pair is one
        batch naming each other, so no reader sees one without the other."""
        by_id = {record.memory_id: record for record in batch}
        for record in batch:
            if record.supersedes is not None:
                links = [r for r in batch if r.superseded_by == record.memory_id]
                if len(links) != 1 or links[0].retracts != record.supersedes:
                    raise RemoteMemoryValidationError(
                        f"memory {record.memory_id} names {record.supersedes} in 'supersedes' "
                        "without its retraction in the same batch (use supersede())"
                    )
            if record.superseded_by is None:
                continue
            new = by_id.get(record.superseded_by)
            target = record.retracts
            if new is None or new.supersedes != target:
                raise RemoteMemoryValidationError(
                    f"retraction {record.memory_id} names a successor that is not in its "
                    "batch (use supersede())"
                )
            kind = state.kind_of(target) if target is not None else None
            if kind is None:
                if target in seen:
                    raise RemoteMemoryValidationError(
                        f"cannot supersede {target}: it is written in the same batch"
                    )
                raise RemoteMemoryValidationError(
                    f"cannot supersede {target}: no such memory in this scope"
                )
            if kind is MemoryKind.RETRACTION:
                raise RemoteMemoryValidationError(f"cannot supersede a retraction: {target}")
            if target is not None and state.is_retracted(target):
                raise RemoteMemoryValidationError(
                    f"cannot supersede {target}: it is already retracted"
                )
            if new.kind is not kind:
                raise RemoteMemoryValidationError(
                    f"cannot supersede {kind.value} record {target} with a {new.kind.value} record"
                )

    def _append_batch(
        self, batch: Sequence[StoredMemory], vectors: Mapping[str, bytes] | None = None
    ) -> None:
        """Write ``batch`` and its ``vectors`` atomically; a retraction drops its target's."""
        raise NotImplementedError

    def _vectors_of(self, batch: Sequence[StoredMemory]) -> dict[str, bytes] | None:
        """The batch's conversation records embedded by ``self.embedder`` (None without one)."""
        if self.embedder is None:
            return None
        records = [r for r in batch if r.kind is MemoryKind.CONVERSATION]
        if not records or self.embedder.pairs:
            # Still checked: a store opened with another model writes nothing; pairs come later.
            return {}
        matrix = self.embedder.encode([r.content for r in records])
        return {r.memory_id: pack(row) for r, row in zip(records, matrix, strict=True)}

    def _store_batch(self, batch: Sequence[StoredMemory], *, embed: bool = True) -> None:
        """``_append_batch`` with the batch's vectors (``embed=False``: a lone retraction
        is not checked against the model); pair vectors right after."""
        embedder = self.embedder
        if embedder is None or not embedder.pairs:
            self._append_batch(batch, self._vectors_of(batch) if embed else None)
            return
        if not all(callable(getattr(self, m, None)) for m in ("put_vectors", "records_by_id")):
            # Refused before the write: the records would land and their pairs fail.
            raise RemoteMemoryValidationError(
                f"pair vectors ({getattr(embedder, 'name', '?')}) need a store that keeps "
                f"vectors (put_vectors, records_by_id); {type(self).__name__} does not"
            )
        store = cast(VectorStoring, self)
        # The successors a retraction takes the pair from, found before it lands; found
        # late or racing another writer, put_vectors's check keeps what is stored right.
        targets = [r.retracts for r in batch if r.retracts is not None]
        neighbours = self.source_neighbours(targets).values() if targets else ()
        successors = [n.next for n in neighbours if n.next is not None]
        self._append_batch(batch, self._vectors_of(batch) if embed else None)
        fresh = [r for r in batch if r.kind is MemoryKind.CONVERSATION]
        if successors:
            fresh += store.records_by_id(successors)
        kept, texts, previous = pair_texts(self, fresh)
        if kept:
            matrix = embedder.encode(texts)
            vectors = {r.memory_id: pack(row) for r, row in zip(kept, matrix, strict=True)}
            store.put_vectors(embedder.name, embedder.dimension, vectors, previous=previous)

    # -- the public surface -------------------------------------------------------

    def append(
        self,
        *,
        kind: MemoryKind | str,
        memory_id: str,
        content: str,
        summary: str,
        source: MemorySource | Mapping[str, Any],
    ) -> StoredMemory:
        item = dict(kind=kind, memory_id=memory_id, content=content, summary=summary, source=source)
        # append_many((item,))[0], without the batch plumbing: an agent's durable
        # append is timed against a bare write+fsync.
        record = self._record(item, self._now())
        self._store_batch((record,))
        return record

    def append_many(self, items: Iterable[Mapping[str, Any]]) -> tuple[StoredMemory, ...]:
        """All or nothing: every item is validated before the one write."""
        stored_at = self._now()
        batch = tuple(self._record(item, stored_at) for item in items)
        if batch:
            self._store_batch(batch)
        return batch

    def retract(
        self,
        memory_id: str,
        *,
        reason: str,
        source: MemorySource | Mapping[str, Any],
        retraction_id: str | None = None,
    ) -> StoredMemory:
        """Append a RETRACTION that names ``memory_id``; history is never rewritten."""
        record = self._retraction(
            memory_id, reason, source, retraction_id, self._now(), f"Retracts {memory_id}"
        )
        self._store_batch((record,), embed=False)
        return record

    def _retraction(
        self,
        memory_id: str,
        reason: str,
        source: MemorySource | Mapping[str, Any],
        retraction_id: str | None,
        stored_at: str,
        summary: str,
        superseded_by: str | None = None,
    ) -> StoredMemory:
        default = f"retract-{memory_id}"
        if len(default) > 200:
            default = "retract-" + hashlib.sha256(memory_id.encode("utf-8")).hexdigest()[:32]
        return StoredMemory(
            memory_id=retraction_id or default,
            user_scope=self._user_scope,
            kind=MemoryKind.RETRACTION,
            content=reason_text(reason),
            summary=summary,
            source=source if isinstance(source, MemorySource) else MemorySource.from_dict(source),
            stored_at=stored_at,
            retracts=memory_id,
            superseded_by=superseded_by,
            project=self.project,
        )

    def supersede(
        self,
        memory_id: str,
        new_record: Mapping[str, Any],
        *,
        reason: str,
        source: MemorySource | Mapping[str, Any] | None = None,
        retraction_id: str | None = None,
    ) -> tuple[StoredMemory, StoredMemory]:
        """[beyond] Replace ``memory_id`` by ``new_record`` in one atomic batch of the new
        record and the old one's retraction; returns ``(new, retraction)``."""
        stored_at = self._now()
        made = self._record(new_record, stored_at)
        new = dataclasses.replace(made, supersedes=memory_id_of(memory_id))
        retraction = self._retraction(
            memory_id,
            reason,
            new.source if source is None else source,
            retraction_id,
            stored_at,
            f"Superseded {memory_id} by {new.memory_id}",
            new.memory_id,
        )
        self._store_batch((new, retraction))
        return new, retraction

    def read_all(self) -> tuple[StoredMemory, ...]:
        raise NotImplementedError

    def records(self, kind: MemoryKind | str | None = None) -> tuple[StoredMemory, ...]:
        records = self.read_all()
        if kind is None:
            return records
        wanted = MemoryKind(kind)
        return tuple(r for r in records if r.kind is wanted)

    def latest_profile(self) -> StoredMemory | None:
        return latest_profile_of(self.read_all())

    def retraction_of(self, memory_id: str) -> StoredMemory | None:
        """The retraction naming ``memory_id`` (a record is retracted at most once)."""
        return next(
            (r for r in self.records(MemoryKind.RETRACTION) if r.retracts == memory_id), None
        )

    def scan_candidates(self, query: RecallQuery) -> CandidateScan:
        """The reference scan; a backend with an index may answer faster, never differently."""
        return scan_recall_candidates(query, self.read_all())

    def source_neighbours(self, memory_ids: Sequence[str]) -> dict[str, SourceNeighbours]:
        return source_neighbours_of(self.read_all(), memory_ids)

    def close(self) -> None:
        pass

    def __enter__(self) -> BaseMemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class IndexedMemoryStore(BaseMemoryStore):
    """A backend with a term index: both scans are its ``_scan``, whole (``top=None``)
    or walked for ``top``'s best ``query.limit`` (``TopScanning``)."""

    def _scan(self, query: RecallQuery, *, top: ScoreBound | None) -> CandidateScan:
        raise NotImplementedError

    def scan_candidates(self, query: RecallQuery) -> CandidateScan:
        return self._scan(query, top=None)

    def scan_top_candidates(
        self, query: RecallQuery, bound: ScoreBound | None = None
    ) -> CandidateScan:
        return self._scan(query, top=BaselineBound() if bound is None else bound)
