"""The ranker interface and what a ranker can do beyond it: ``memlib._paths`` takes the
cheapest path a store and a ranker share, each giving byte for byte what
``score_candidates`` and stage 4 give (the parity tests hold them equal)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from ._vectors import DenseScores, Embedder
from .candidates import CandidateScan, LexicalPostings
from .normalize import RecallQuery
from .records import SourceNeighbours, StoredMemory
from .score import RecallScoreBreakdown

# A store's ``lexical_postings``: the postings of the terms a ranker asks for.
Postings = Callable[[RecallQuery, Sequence[str]], LexicalPostings]
# ``(position in scan.candidates, breakdown)`` of the top ``limit``, in any order.
Top = list[tuple[int, RecallScoreBreakdown]]


@runtime_checkable
class Ranker(Protocol):
    name: str

    def score_candidates(
        self, query: RecallQuery, scan: CandidateScan, *, as_of: datetime
    ) -> tuple[RecallScoreBreakdown, ...]:
        """One breakdown per ``scan.candidates``, in the same order."""


@runtime_checkable
class TopScoring(Protocol):
    def score_top(
        self, query: RecallQuery, scan: CandidateScan, *, as_of: datetime, limit: int
    ) -> Top: ...


@runtime_checkable
class LexicalScoring(Protocol):
    def score_lexical(
        self, query: RecallQuery, postings: Postings, *, as_of: datetime, limit: int
    ) -> tuple[CandidateScan, Top]:
        """The scan it made (exact counts, its hits only) and its top ``limit``."""


@runtime_checkable
class DenseScoring(Protocol):
    def score_stored(
        self,
        query: RecallQuery,
        postings: Postings,
        dense: Callable[..., DenseScores],
        fetch: Callable[[Sequence[str]], Sequence[StoredMemory]],
        *,
        embedder: Embedder | None,
        as_of: datetime,
        limit: int,
        neighbours: Callable[[Sequence[str]], Mapping[str, SourceNeighbours]] | None = None,
    ) -> tuple[CandidateScan, Top, dict[str, int]]:
        """The store's ``dense_scores``, ``records_by_id``, embedder (used when the ranker
        has none) and ``source_neighbours`` (for pair vectors) → the scan of what it
        scored, its top ``limit`` and how many records each path gave (``retrieval``)."""


@runtime_checkable
class ScoreBound(Protocol):
    """For a fixed number of matched terms the total must not fall as ``captured_at``
    grows, and never exceed ``upper_bound``: that is what lets a top-k walk keep only
    each group's most recent records and skip the groups that cannot reach the top."""

    def exact_total(
        self, matched: int, term_count: int, captured: datetime, as_of: datetime
    ) -> float:
        """The ``total`` ``score_candidates`` gives such a record, to the last digit."""

    def upper_bound(self, matched: int, term_count: int) -> float:
        """The greatest total a record matching ``matched`` of ``term_count`` terms gets."""
