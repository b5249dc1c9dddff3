"""[beyond] A store as it stood at a past time: ``known_at`` (docs/reference.md#known-at).

No store rewrites a record, so those with ``stored_at ≤ T`` are what it held at T. A
retraction drops its record's vector (for pairs, its successor's): the view embeds those
records again as they stood at T."""

from __future__ import annotations

from collections.abc import Container, Sequence
from datetime import datetime
from typing import Any, NoReturn, Protocol, runtime_checkable

from .._capabilities import ScoreBound
from .._retrieval import InvertedIndex, lexical_from_index, scan_from_index
from .._vectors import DenseScores, Embedder, VectorState, reads_pairs
from ..candidates import CandidateScan, LexicalPostings
from ..errors import RemoteMemoryCorruptionError, RemoteMemoryValidationError
from ..normalize import RecallQuery, as_utc, normalize_recall_query
from ..records import MemoryKind, StoredMemory, format_timestamp, parse_timestamp
from ._base import IndexedMemoryStore, MemoryStore, VectorStoring, pair_texts
from ._projects import AllProjectsStore
from ._sources import SourceNeighbours


def known_at_moment(value: datetime | str) -> datetime:
    """``known_at`` as an aware UTC datetime: a datetime (naive is UTC) or an ISO-8601 text."""
    if isinstance(value, str):
        try:
            return parse_timestamp(value)
        except RemoteMemoryCorruptionError as exc:
            # The same words as a stored timestamp's, but this one is the caller's input.
            raise RemoteMemoryValidationError(f"known_at: {exc}") from None
    if not isinstance(value, datetime):
        raise RemoteMemoryValidationError("known_at must be a datetime or an ISO-8601 timestamp")
    return as_utc(value)


@runtime_checkable
class KnownAtViewing(Protocol):
    """A store with its own view at a past time (None: it cannot, use the classes below)."""

    def known_at_view(self, known_at: datetime) -> MemoryStore | None: ...


def store_known_at(store: MemoryStore, known_at: datetime | str) -> MemoryStore:
    """``store`` as it stood at ``known_at``: its records with ``stored_at ≤ known_at``
    (all projects: each project as it stood). A store's own ``known_at_view`` answers when
    it can (the same reads as the classes below, without reading the whole scope)."""
    if isinstance(store, AllProjectsStore):
        return AllProjectsStore(store.store, [store_known_at(p, known_at) for p in store.parts])
    if isinstance(store, KnownAtStore):
        store = store.store
    moment = known_at_moment(known_at)
    if isinstance(store, KnownAtViewing) and (view := store.known_at_view(moment)) is not None:
        return view
    if isinstance(store, VectorStoring):
        return KnownAtVectorStore(store, moment)
    return KnownAtStore(store, moment)


class KnownAtStore(IndexedMemoryStore):
    """A read-only view of ``store``'s records stored at or before ``known_at``."""

    backend = "known_at"

    def __init__(self, store: MemoryStore, known_at: datetime | str) -> None:
        # Not BaseMemoryStore.__init__: the view has the scope, not the user id.
        self.store = store
        self._user_scope = store.user_scope
        self.known_at = known_at_moment(known_at)
        self._read(store)

    def _read(self, store: MemoryStore) -> None:
        """The records, their index, and the targets of the retractions stored later."""
        every = store.read_all()
        known = [parse_timestamp(r.stored_at) <= self.known_at for r in every]
        self._records = tuple(r for r, keep in zip(every, known, strict=True) if keep)
        # Targets of retractions stored after T: live at T, without a stored vector now.
        self._retracted_later = frozenset(
            r.retracts
            for r, keep in zip(every, known, strict=True)
            if not keep and r.kind is MemoryKind.RETRACTION and r.retracts is not None
        )
        self.index = InvertedIndex()
        self.index.add_many(self._records)

    def __repr__(self) -> str:
        return f"KnownAtStore({self.store!r}, known_at={format_timestamp(self.known_at)!r})"

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise RemoteMemoryValidationError(
            f"a store as known at {format_timestamp(self.known_at)} is read-only"
        )

    # Every write of the base store starts with ``_now``, before it reads its arguments.
    _now = _read_only

    def read_all(self) -> tuple[StoredMemory, ...]:
        return self._records

    def existing_ids(self, memory_ids: Sequence[str]) -> set[str]:
        return {m for m in memory_ids if m in self.index.doc_of}

    def records_by_id(self, memory_ids: Sequence[str]) -> list[StoredMemory]:
        doc_of = self.index.doc_of
        return self._load([d for m in memory_ids if (d := doc_of.get(m)) is not None])

    def source_neighbours(self, memory_ids: Sequence[str]) -> dict[str, SourceNeighbours]:
        """The neighbours at ``known_at``: a turn retracted later is still in its place."""
        found = self.index.neighbours(memory_ids)
        return {memory_id: SourceNeighbours(*pair) for memory_id, pair in found.items()}

    def _load(self, docs: Sequence[int]) -> list[StoredMemory]:
        return [self._records[d] for d in docs]

    def _check_scope(self, query: RecallQuery) -> None:
        self.index.check_scope(query, self.user_scope)

    def _scan(self, query: RecallQuery, *, top: ScoreBound | None) -> CandidateScan:
        self._check_scope(query)
        return scan_from_index(self.index, query, self._load, top=top)

    def lexical_postings(self, query: RecallQuery, terms: Sequence[str]) -> LexicalPostings:
        self._check_scope(query)
        return lexical_from_index(self.index, query, terms, self._load)


class KnownAtVectorStore(KnownAtStore):
    """A view of a store that keeps embeddings: the stored vectors of the records that
    are searched at ``known_at`` and still hold one (see the module docstring)."""

    def __init__(self, store: VectorStoring, known_at: datetime | str) -> None:
        assert isinstance(store, MemoryStore)
        super().__init__(store, known_at)
        self._vectors = store
        self.embedder: Embedder | None = store.embedder

    def _at_t(self) -> tuple[Container[str], frozenset[str], int]:
        """What the dense path needs of T: which of the ids it asks about (those with a
        vector now, the targets of later retractions, their turns after) are searched at T,
        the targets of the retractions stored later, and how many records are searched."""
        index = self.index
        live = {index.ids[d] for d, flag in enumerate(index.live) if flag}
        return live, self._retracted_later, index.searched

    def vector_state(self) -> VectorState:
        now = self._vectors.vector_state()
        if now.model is None:
            return VectorState(None, 0, 0, self._at_t()[2])
        import numpy as np  # a store with a model has vectors, and so numpy

        query = normalize_recall_query(
            "vector state", user_scope=self.user_scope, limit=1, issued_at=self.known_at
        )
        zeros = np.zeros(now.dimension, dtype=np.float32)
        scores = self.dense_scores(query, zeros, model=now.model, dimension=now.dimension)
        return VectorState(now.model, now.dimension, len(scores.ids), scores.missing)

    def dense_scores(
        self, query: RecallQuery, vector: Any, *, model: str, dimension: int
    ) -> DenseScores:
        self._check_scope(query)
        now = self._vectors.dense_scores(query, vector, model=model, dimension=dimension)
        live, retracted_later, searched = self._at_t()
        stale = self._stale_pairs(live, retracted_later, model)
        keep = [
            i for i, memory_id in enumerate(now.ids) if memory_id in live and memory_id not in stale
        ]
        ids = [now.ids[i] for i in keep]
        scores = now.scores[keep]
        rows: list[Any] = [] if now.vector_of is None else [now.vector_of(i) for i in keep]
        # Live at T, without their vector of then: a later retraction dropped it (or, for
        # pairs, made it read another turn before), embedded again by the store's model.
        embedded = set(ids)
        revived = sorted(m for m in retracted_later | stale if m in live and m not in embedded)
        if revived and (embedder := self._embedder_of(model)) is not None:
            import numpy as np  # dense scores are numpy arrays already

            matrix = np.asarray(embedder.encode(self._texts(revived, model)), dtype=np.float32)
            query_vector = np.asarray(vector, dtype=np.float32).reshape(-1)
            ids += revived
            scores = np.concatenate([scores, matrix @ query_vector])
            rows += list(matrix)
        vector_of = rows.__getitem__ if now.vector_of is not None or not keep else None
        return DenseScores(ids, scores, searched - len(ids), vector_of=vector_of)

    def _stale_pairs(
        self, live: Container[str], retracted_later: frozenset[str], model: str
    ) -> set[str]:
        """Pair vectors: the records live at T whose turn before then was retracted later."""
        if not reads_pairs(model):
            return set()
        targets = sorted(m for m in retracted_later if m in live)
        return {n.next for n in self.source_neighbours(targets).values() if n.next is not None}

    def _texts(self, memory_ids: Sequence[str], model: str) -> list[str]:
        """What the records embed at T: their content, or their pair text at T."""
        records = self.records_by_id(memory_ids)
        if not reads_pairs(model):
            return [r.content for r in records]
        kept, texts, _ = pair_texts(self, records)
        assert len(kept) == len(records)  # each is live at T, and so is its turn before
        return texts

    def _embedder_of(self, model: str) -> Embedder | None:
        from ..rankers.embeddings import recorded_embedder

        embedder = self.embedder or recorded_embedder(self._vectors)
        return embedder if embedder is not None and embedder.name == model else None

    records_without_vectors = put_vectors = drop_vectors = KnownAtStore._read_only
