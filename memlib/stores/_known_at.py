"""[beyond] A store as it stood at a past time: ``known_at`` (docs/reference.md#known-at).

Every record carries ``stored_at``, the instant the store accepted it, and no store ever
rewrites a record (a retraction or a supersede is a new record). So the records with
``stored_at ≤ T``, in append order, are exactly what the store held at T: retractions
stored after T are not among them, and the records they retract are live again.

``as_of`` is another clock: it says how old a record is for recency (``captured_at``
against ``as_of``). ``known_at`` says which records exist at all. A record captured
long ago but stored yesterday is old for ``as_of`` and unknown to ``known_at`` before
yesterday.

``KnownAtStore`` is a read-only store over those records, indexed in memory with the
JSONL store's own ``InvertedIndex``, so a recall through it takes the paths a store
replayed from those records takes (the top-k walk, postings with term frequencies,
stored vectors), and a property test holds the two equal on every backend. Building
one reads the scope's records once and indexes those known at T: an audit's cost, not
the hot path's (``benchmarks/`` has the figures).

Stored vectors: a retraction drops its record's vector, so a record retracted after T
has none any more. The view embeds those records again with the store's model (they
are the few a later retraction touched) and adds them to the dense scores, so the dense
path finds them as it did at T. Pair vectors: the turn after such a record read it as
its turn before at T; its stored pair (embedded again since, with another turn before)
is set aside and the pair it had at T embedded instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from .._retrieval import InvertedIndex, lexical_from_index, scan_from_index
from .._vectors import DenseScores, Embedder, VectorState, reads_pairs
from ..candidates import CandidateScan, LexicalPostings
from ..errors import RemoteMemoryCorruptionError, RemoteMemoryValidationError
from ..normalize import RecallQuery, as_utc, normalize_recall_query
from ..rankers.base import ScoreBound
from ..rankers.baseline import BaselineRanker
from ..records import MemoryKind, MemorySource, StoredMemory, format_timestamp, parse_timestamp
from ._base import MemoryStore, VectorStoring, latest_profile_of, pair_texts
from ._sources import SourceNeighbours

__all__ = ["KnownAtStore", "known_at_moment", "store_known_at"]


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


def store_known_at(store: MemoryStore, known_at: datetime | str) -> KnownAtStore:
    """``store`` as it stood at ``known_at``: its records with ``stored_at ≤ known_at``."""
    if isinstance(store, KnownAtStore):
        store = store.store
    if isinstance(store, VectorStoring):
        return KnownAtVectorStore(store, known_at)
    return KnownAtStore(store, known_at)


class KnownAtStore:
    """A read-only view of ``store``'s records stored at or before ``known_at``."""

    backend = "known_at"

    def __init__(self, store: MemoryStore, known_at: datetime | str) -> None:
        self.store = store
        self.known_at = known_at_moment(known_at)
        every = store.read_all()
        known = [parse_timestamp(r.stored_at) <= self.known_at for r in every]
        records = tuple(r for r, keep in zip(every, known, strict=True) if keep)
        # Targets of retractions stored after T: live at T, without a stored vector now.
        self._retracted_later = frozenset(
            r.retracts for r, keep in zip(every, known, strict=True)
            if not keep and r.kind is MemoryKind.RETRACTION and r.retracts is not None
        )
        self._records = records
        self.index = InvertedIndex()
        self.index.add_many(records)
        self._by_id = {r.memory_id: r for r in records}

    def __repr__(self) -> str:
        return f"KnownAtStore({self.store!r}, known_at={format_timestamp(self.known_at)!r})"

    @property
    def user_scope(self) -> str:
        return self.store.user_scope

    # -- reading ----------------------------------------------------------------------

    def read_all(self) -> tuple[StoredMemory, ...]:
        return self._records

    def records(self, kind: MemoryKind | str | None = None) -> tuple[StoredMemory, ...]:
        if kind is None:
            return self._records
        wanted = MemoryKind(kind)
        return tuple(r for r in self._records if r.kind is wanted)

    def latest_profile(self) -> StoredMemory | None:
        return latest_profile_of(self._records)

    def retraction_of(self, memory_id: str) -> StoredMemory | None:
        return next((r for r in self._records if r.retracts == memory_id), None)

    def existing_ids(self, memory_ids: Sequence[str]) -> set[str]:
        return {m for m in memory_ids if m in self._by_id}

    def records_by_id(self, memory_ids: Sequence[str]) -> list[StoredMemory]:
        return [self._by_id[m] for m in memory_ids if m in self._by_id]

    def source_neighbours(self, memory_ids: Sequence[str]) -> dict[str, SourceNeighbours]:
        """The neighbours at ``known_at``: a turn retracted later is still in its place."""
        found = self.index.neighbours(memory_ids)
        return {memory_id: SourceNeighbours(*pair) for memory_id, pair in found.items()}

    def _load(self, docs: Sequence[int]) -> list[StoredMemory]:
        return [self._records[d] for d in docs]

    def _scan(self, query: RecallQuery, *, top: ScoreBound | None) -> CandidateScan:
        self.index.check_scope(query, self.user_scope)
        return scan_from_index(self.index, query, self._load, top=top)

    def scan_candidates(self, query: RecallQuery) -> CandidateScan:
        return self._scan(query, top=None)

    def scan_top_candidates(
        self, query: RecallQuery, bound: ScoreBound | None = None
    ) -> CandidateScan:
        return self._scan(query, top=BaselineRanker() if bound is None else bound)

    def lexical_postings(self, query: RecallQuery, terms: Sequence[str]) -> LexicalPostings:
        self.index.check_scope(query, self.user_scope)
        return lexical_from_index(self.index, query, terms, self._load)

    # -- the past is read-only ---------------------------------------------------------

    def _read_only(self) -> RemoteMemoryValidationError:
        return RemoteMemoryValidationError(
            f"a store as known at {format_timestamp(self.known_at)} is read-only"
        )

    def append(
        self, *, kind: MemoryKind | str, memory_id: str, content: str, summary: str,
        source: MemorySource | Mapping[str, Any],
    ) -> StoredMemory:
        raise self._read_only()

    def append_many(self, items: Iterable[Mapping[str, Any]]) -> tuple[StoredMemory, ...]:
        raise self._read_only()

    def retract(
        self, memory_id: str, *, reason: str, source: MemorySource | Mapping[str, Any],
        retraction_id: str | None = None,
    ) -> StoredMemory:
        raise self._read_only()

    def supersede(
        self, memory_id: str, new_record: Mapping[str, Any], *, reason: str,
        source: MemorySource | Mapping[str, Any] | None = None,
        retraction_id: str | None = None,
    ) -> tuple[StoredMemory, StoredMemory]:
        raise self._read_only()

    def close(self) -> None:
        pass  # the view owns nothing; the store it reads is its caller's to close


class KnownAtVectorStore(KnownAtStore):
    """A view of a store that keeps embeddings: the stored vectors of the records that
    are searched at ``known_at`` and still hold one (see the module docstring)."""

    def __init__(self, store: VectorStoring, known_at: datetime | str) -> None:
        assert isinstance(store, MemoryStore)
        super().__init__(store, known_at)
        self._vectors = store
        self.embedder: Embedder | None = store.embedder

    def _live(self) -> set[str]:
        index = self.index
        return {index.ids[d] for d, flag in enumerate(index.live) if flag}

    def vector_state(self) -> VectorState:
        now = self._vectors.vector_state()
        if now.model is None:
            return VectorState(None, 0, 0, self.index.searched)
        import numpy as np  # a store with a model has vectors, and so numpy

        scores = self.dense_scores(
            normalize_recall_query(
                "vector state", user_scope=self.user_scope, limit=1, issued_at=self.known_at
            ),
            np.zeros(now.dimension, dtype=np.float32), model=now.model, dimension=now.dimension,
        )
        return VectorState(now.model, now.dimension, len(scores.ids), scores.missing)

    def dense_scores(
        self, query: RecallQuery, vector: Any, *, model: str, dimension: int
    ) -> DenseScores:
        self.index.check_scope(query, self.user_scope)
        now = self._vectors.dense_scores(query, vector, model=model, dimension=dimension)
        live = self._live()
        stale = self._stale_pairs(live, model)
        keep = [i for i, memory_id in enumerate(now.ids)
                if memory_id in live and memory_id not in stale]
        ids = [now.ids[i] for i in keep]
        scores = now.scores[keep]
        rows: list[Any] = []
        if now.vector_of is not None:
            full = now.vector_of
            rows = [full(i) for i in keep]
        revived = self._revived(live, set(ids), stale, model)
        if revived:
            import numpy as np  # dense scores are numpy arrays already

            matrix = np.asarray(
                self._embedder_of(model).encode(self._texts(revived, model)), dtype=np.float32,
            )
            query_vector = np.asarray(vector, dtype=np.float32).reshape(-1)
            ids += revived
            scores = np.concatenate([scores, matrix @ query_vector])
            rows += list(matrix)
        return DenseScores(
            ids, scores, self.index.searched - len(ids),
            vector_of=rows.__getitem__ if now.vector_of is not None or not keep else None,
        )

    def _stale_pairs(self, live: set[str], model: str) -> set[str]:
        """Pair vectors only: the records live at T whose turn before at T was retracted
        later. Their stored pair (if any) reads another turn before: set aside, and
        embedded again as they stood at T."""
        if not reads_pairs(model):
            return set()
        targets = sorted(m for m in self._retracted_later if m in live)
        return {n.next for n in self.source_neighbours(targets).values()
                if n.next is not None}

    def _texts(self, memory_ids: Sequence[str], model: str) -> list[str]:
        """What the records embed at T: their content, or their pair text at T."""
        records = [self._by_id[m] for m in memory_ids]
        if not reads_pairs(model):
            return [r.content for r in records]
        kept, texts, _ = pair_texts(self, records)
        assert len(kept) == len(records)  # each is live at T, and so is its turn before
        return texts

    def _revived(
        self, live: set[str], embedded: set[str], stale: set[str], model: str
    ) -> list[str]:
        """Records live at T whose vector a later retraction dropped (or, for pairs, made
        read another turn before: ``stale``), when the store's model can embed them again."""
        later = set(self._retracted_later) | stale
        gone = sorted(m for m in later if m in live and m not in embedded)
        if not gone or self._embedder_of(model) is None:
            return []
        return gone

    def _embedder_of(self, model: str) -> Any:
        from ..rankers.embeddings import recorded_embedder

        embedder = self.embedder or recorded_embedder(self._vectors)
        return embedder if embedder is not None and embedder.name == model else None

    def records_without_vectors(self, limit: int) -> tuple[StoredMemory, ...]:
        raise self._read_only()

    def put_vectors(
        self, model: str, dimension: int, vectors: Mapping[str, bytes],
        *, previous: Mapping[str, str | None] | None = None,
    ) -> int:
        raise self._read_only()

    def drop_vectors(self) -> int:
        raise self._read_only()

