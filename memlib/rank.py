"""Stage 4 — stable rank: a total order that storage order cannot change (docs/reference.md#rank).

total desc → lexical_coverage desc → captured_at desc → memory_id asc. The last key is
unique within a scope, so two equal records can never swap places between runs."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from .candidates import RecallCandidate
from .errors import RemoteMemoryValidationError
from .normalize import RecallQuery
from .result import RecallHit, RecallScope
from .score import RecallScoreBreakdown, score_recall_candidate

__all__ = ["stable_rank_recall_candidates", "rank_scored_candidates", "rank_key"]

Scored = tuple[RecallCandidate, RecallScoreBreakdown]


def rank_key(scored: Scored) -> tuple[float, float, float, str]:
    """The sort key of one scored candidate, smallest first (a float timestamp has room
    for microseconds at these magnitudes, so the order is exact)."""
    candidate, breakdown = scored
    return (
        -breakdown.total,
        -breakdown.lexical_coverage,
        -candidate.captured_at.timestamp(),
        candidate.record.memory_id,
    )


def rank_scored_candidates(
    query: RecallQuery, scored: Iterable[Scored], *, limit: int | None = None
) -> tuple[RecallHit, ...]:
    """Order scored candidates and make the top ones hits of ``query`` (a candidate of
    another recall is refused: its hit would carry this query's ``query_id``)."""
    scored = list(scored)
    if any(candidate.query_id != query.query_id for candidate, _ in scored):
        raise RemoteMemoryValidationError("candidate belongs to another recall query")
    ordered = sorted(scored, key=rank_key)[: query.limit if limit is None else limit]
    return tuple(
        RecallHit(
            query_id=query.query_id,
            memory_id=candidate.record.memory_id,
            rank=rank,
            snippet=candidate.record.summary,
            scope=RecallScope(
                candidate.record.user_scope, candidate.record.kind, candidate.record.project
            ),
            provenance=candidate.record.source,
            score_breakdown=breakdown,
        )
        for rank, (candidate, breakdown) in enumerate(ordered, start=1)
    )


def stable_rank_recall_candidates(
    query: RecallQuery, candidates: Iterable[RecallCandidate], *, as_of: datetime
) -> tuple[RecallHit, ...]:
    """Score every candidate with the baseline ranker and keep the top ``query.limit``."""
    scored = [(c, score_recall_candidate(query, c, as_of=as_of)) for c in candidates]
    return rank_scored_candidates(query, scored)
