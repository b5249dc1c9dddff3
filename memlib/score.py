"""Stage 3 — score: an explained number for one candidate (docs/reference.md#score).

Term coverage plus a little credit for recency; every part is returned, not just the
total, so a reader can say why a record scored what it did."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .candidates import RecallCandidate
from .errors import RemoteMemoryValidationError
from .normalize import RecallQuery, as_utc

__all__ = [
    "RecallScoreBreakdown",
    "RecallSignal",
    "score_recall_candidate",
    "LEXICAL_WEIGHT",
    "RECENCY_WEIGHT",
    "RECENCY_HALF_LIFE_DAYS",
    "recency_of",
    "ranker_breakdown",
    "signal",
]

LEXICAL_WEIGHT = 0.85
RECENCY_WEIGHT = 0.15
# Not a true half-life: 1 / (1 + age/30) is 0.5 at 30 days and never reaches 0, so an
# old record that matches every term still beats a fresh one that matches fewer.
RECENCY_HALF_LIFE_DAYS = 30.0
DECIMALS = 6


@dataclass(frozen=True)
class RecallSignal:
    """One named input of a ranker: its raw value, its weight and what it added."""

    name: str
    value: float
    weight: float
    contribution: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class RecallScoreBreakdown:
    matched_terms: tuple[str, ...]
    query_term_count: int
    lexical_coverage: float
    recency: float
    lexical_contribution: float
    recency_contribution: float
    total: float
    lexical_weight: float = LEXICAL_WEIGHT
    recency_weight: float = RECENCY_WEIGHT
    # Rankers beyond the baseline (docs/reference.md#rankers) name themselves and list
    # their signals; the baseline leaves both empty so its JSON stays exactly the chapter's.
    ranker: str | None = None
    signals: tuple[RecallSignal, ...] = field(default=())

    @property
    def weights(self) -> dict[str, float]:
        return {"lexical": self.lexical_weight, "recency": self.recency_weight}

    @property
    def contributions(self) -> dict[str, float]:
        return {"lexical": self.lexical_contribution, "recency": self.recency_contribution}

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "matched_terms": list(self.matched_terms),
            "query_term_count": self.query_term_count,
            "lexical_coverage": self.lexical_coverage,
            "recency": self.recency,
            "weights": self.weights,
            "contributions": self.contributions,
            "total": self.total,
        }
        if self.ranker is not None:
            data["ranker"] = self.ranker
            data["signals"] = [s.to_dict() for s in self.signals]
        return data


def signal(name: str, value: float, weight: float, contribution: float) -> RecallSignal:
    """``RecallSignal`` with its numbers rounded to DECIMALS, as every ranker shows them."""
    return RecallSignal(
        name, round(value, DECIMALS), round(weight, DECIMALS), round(contribution, DECIMALS)
    )


def ranker_breakdown(
    ranker: str,
    *,
    matched_terms: tuple[str, ...],
    query_term_count: int,
    recency: float,
    total: float,
    signals: tuple[RecallSignal, ...],
) -> RecallScoreBreakdown:
    """The breakdown of a ranker beyond the baseline: its total sits in the lexical fields
    with weight 1, so ``total = lexical + recency`` and the tie-breakers hold."""
    rounded = round(total, DECIMALS)
    return RecallScoreBreakdown(
        matched_terms=matched_terms,
        query_term_count=query_term_count,
        lexical_coverage=round(len(matched_terms) / query_term_count, DECIMALS),
        recency=round(recency, DECIMALS),
        lexical_contribution=rounded,
        recency_contribution=0.0,
        total=rounded,
        lexical_weight=1.0,
        recency_weight=0.0,
        ranker=ranker,
        signals=signals,
    )


def recency_of(captured_at: datetime, as_of: datetime) -> float:
    age_days = max(0.0, (as_utc(as_of) - captured_at).total_seconds() / 86_400)
    return 1.0 / (1.0 + age_days / RECENCY_HALF_LIFE_DAYS)


class BaselineBound:
    """The chapter's total as a ``ScoreBound``: recency is never above 1, so a record
    matching ``m`` of ``q`` terms scores at most 0.85 · m/q + 0.15 — what lets an index walk
    the matches best group first and stop early."""

    def exact_total(
        self, matched: int, term_count: int, captured: datetime, as_of: datetime
    ) -> float:
        """The total ``score_recall_candidate`` gives such a record, to the last digit."""
        lexical = LEXICAL_WEIGHT * (matched / term_count)
        return round(lexical + RECENCY_WEIGHT * recency_of(captured, as_of), DECIMALS)

    def upper_bound(self, matched: int, term_count: int) -> float:
        return round(LEXICAL_WEIGHT * (matched / term_count) + RECENCY_WEIGHT, DECIMALS)


def score_recall_candidate(
    query: RecallQuery, candidate: RecallCandidate, *, as_of: datetime
) -> RecallScoreBreakdown:
    if candidate.query_id != query.query_id:
        raise RemoteMemoryValidationError("candidate belongs to another recall query")
    coverage = len(candidate.matched_terms) / len(query.terms)
    recency = recency_of(candidate.captured_at, as_of)
    lexical = LEXICAL_WEIGHT * coverage
    recent = RECENCY_WEIGHT * recency
    return RecallScoreBreakdown(
        matched_terms=candidate.matched_terms,
        query_term_count=len(query.terms),
        lexical_coverage=round(coverage, DECIMALS),
        recency=round(recency, DECIMALS),
        lexical_contribution=round(lexical, DECIMALS),
        recency_contribution=round(recent, DECIMALS),
        # Rounded once from the exact sum, so it can differ in the last digit from the
        # sum of the two rounded contributions; the contract fixes this choice.
        total=round(lexical + recent, DECIMALS),
    )
