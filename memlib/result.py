"""What a recall returns: hits and the result around them (docs/reference.md#result).

A hit is a read-only projection of one stored record for one query. It is never
written anywhere; another query, ``as_of`` or ``limit`` gives other hits."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .normalize import RecallQuery
from .records import MemoryKind, MemorySource
from .score import RecallScoreBreakdown

EMPTY_REASON_NO_MATCH = "no_matching_terms"
# [beyond] Every hit was under the recall's ``min_score``: the model reads "nothing
# relevant", not "nothing shares a word".
EMPTY_REASON_BELOW_MIN_SCORE = "below_min_score"


@dataclass(frozen=True)
class RecallScope:
    user_scope: str
    memory_kind: MemoryKind
    # [beyond] The hit's project (docs/contract.md, "Projects"); None: none, and no key.
    project: str | None = None

    def to_dict(self) -> dict[str, str]:
        out = {"user_scope": self.user_scope, "memory_kind": self.memory_kind.value}
        if self.project is not None:
            out["project"] = self.project
        return out


@dataclass(frozen=True)
class RecallHit:
    query_id: str
    memory_id: str
    rank: int
    snippet: str
    scope: RecallScope
    provenance: MemorySource
    score_breakdown: RecallScoreBreakdown

    @property
    def source(self) -> MemorySource:
        """Compatibility view for callers written before ``provenance``."""
        return self.provenance

    @property
    def score(self) -> float:
        """Compatibility view: the scalar total."""
        return self.score_breakdown.total

    def to_dict(self) -> dict[str, Any]:
        provenance = self.provenance.to_dict()
        return {
            "query_id": self.query_id,
            "memory_id": self.memory_id,
            "rank": self.rank,
            "snippet": self.snippet,
            "scope": self.scope.to_dict(),
            "provenance": provenance,
            "source": dict(provenance),
            "score": self.score,
            "score_breakdown": self.score_breakdown.to_dict(),
        }


@dataclass(frozen=True)
class RecallResult:
    query: RecallQuery
    hits: tuple[RecallHit, ...]
    searched_records: int
    candidate_records: int
    retracted_records: int = 0
    # [beyond] How many records each retrieval path gave (``hybrid`` on a store with
    # vectors: lexical, dense, both, unembedded); absent for single-path rankers.
    retrieval: Mapping[str, int] | None = None
    # [beyond] The floor this recall was given and how many of its top ``limit`` it dropped.
    min_score: float | None = None
    below_min_score: int = 0
    # [beyond] The instant the recall saw the store as of (``stored_at ≤ known_at``).
    known_at: str | None = None

    @property
    def empty_reason(self) -> str | None:
        # Derived, so it can never disagree with the hits.
        if self.hits:
            return None
        return EMPTY_REASON_BELOW_MIN_SCORE if self.below_min_score else EMPTY_REASON_NO_MATCH

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "query": self.query.to_dict(),
            "hits": [hit.to_dict() for hit in self.hits],
            "searched_records": self.searched_records,
            "candidate_records": self.candidate_records,
            "retracted_records": self.retracted_records,
        }
        if self.retrieval is not None:
            out["retrieval"] = dict(self.retrieval)
        # Only when asked for, so a plain recall keeps the chapter's exact JSON.
        if self.known_at is not None:
            out["known_at"] = self.known_at
        if self.min_score is not None:
            out["min_score"] = self.min_score
            out["below_min_score"] = self.below_min_score
        out["empty_reason"] = self.empty_reason
        return out

    def to_json(self) -> str:
        """The ``recall_history`` tool payload."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)
