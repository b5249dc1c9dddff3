"""``hybrid``: BM25 (stopwords left out) fused with dense similarity and a neighbour
signal (the formula and its constants: docs/reference.md#rankers-beyond-the-baseline).

Neighbours are ordered by ``memory_id`` in natural order (``D1:9`` < ``D1:10``), never by
storage order. On a store that keeps embeddings (``score_stored``) only the union of the
best ``POOL`` by BM25 and by cosine is scored; elsewhere every candidate is embedded."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from .._capabilities import Postings, Top
from .._periods import Period, in_periods, named_periods
from .._tokens import content_terms, searchable_terms
from .._vectors import DenseScores, Embedder, exact_dot, pair_text, query_vector, reads_pairs
from ..candidates import (
    CandidateScan,
    RecallCandidate,
    check_scope,
    make_candidate,
    searchable_text,
)
from ..errors import RemoteMemoryValidationError
from ..normalize import RecallQuery
from ..records import SourceNeighbours, StoredMemory
from ..score import RecallScoreBreakdown, ranker_breakdown, recency_of, signal
from .base import top_positions
from .bm25 import (
    DEFAULT_B,
    DEFAULT_K1,
    Bm25Scores,
    _document,
    bm25_scores,
    bm25_top_docs,
    saturations,
    scoring_terms,
)

__all__ = ["HybridRanker", "POOL", "PAIR_BM25_WEIGHT", "PAIR_CONTEXT_WEIGHT"]

# Chosen by leave-one-conversation-out cross-validation on the LoCoMo development split
# over GRID (reports/crossval-dev-split.json; pairs: reports/crossval-pairs-dev-split.json).
BM25_WEIGHT = 0.5
DENSE_WEIGHT = 0.5
CONTEXT_WEIGHT = 0.5
PAIR_BM25_WEIGHT = 0.3
PAIR_CONTEXT_WEIGHT = 0.5
# Added to a record captured in a period the question names ("on October 13, 2023", "in
# June"; memlib/_periods.py): chosen by 4 of 5 folds of the same cross-validation
# (docs/retrieval.md, idea A), and held out against none in GRID.
PERIOD_WEIGHT = 0.3
_PAIR_WEIGHTS = (PAIR_BM25_WEIGHT, round(1 - PAIR_BM25_WEIGHT, 2), PAIR_CONTEXT_WEIGHT)
# (bm25 weight, context weight, period weight), dense = 1 - bm25.
GRID: tuple[dict[str, float], ...] = tuple(
    {"bm25_weight": wb, "dense_weight": round(1 - wb, 2), "context_weight": wc, "period_weight": wp}
    for wb in (0.3, 0.4, 0.5, 0.6)
    for wc in (0.2, 0.3, 0.4, 0.5, 0.6)
    for wp in (PERIOD_WEIGHT, 0.0)
)
# Records taken from each path on a store with vectors. A LoCoMo conversation has 400–700
# turns, so its lexical path holds nearly every candidate; at 100k records the union is
# what gets read and scored instead of every record sharing a stopword with the question.
POOL = 500
_WEIGHTS = ("bm25_weight", "dense_weight", "context_weight")
_DIGITS = re.compile(r"(\d+)")


@lru_cache(maxsize=65_536)
def natural_key(memory_id: str) -> tuple[tuple[int, int | str], ...]:
    """``"conv-26/D1:10"`` sorts after ``"conv-26/D1:9"``: digit runs compare as numbers."""
    return tuple(
        (1, int(part)) if part.isdigit() else (0, part) for part in _DIGITS.split(memory_id) if part
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


def calibrated(cosines: Sequence[float], model: object) -> list[float]:
    """``(cosine - mean) / (4 * deviation)`` with the model's constants (mean 0, deviation
    0.25 without): e5 puts nearly every pair of texts between 0.7 and 0.9. A per-recall
    standardisation ranked no better, and its suggested floor silenced 0.8% of the
    questions asked of another conversation's store, against 26%."""
    mean = float(getattr(model, "similarity_mean", 0.0))
    deviation = float(getattr(model, "similarity_deviation", 0.25))
    return [(c - mean) / (4.0 * deviation) for c in cosines]


@dataclass(frozen=True)
class _Fused:
    """Every signal of one recall, before any breakdown is built."""

    lexical: Bm25Scores
    cosine: list[float]
    dense: list[float]
    scaled: list[float]
    context: list[float]
    totals: list[float]
    next_cosine: list[float] | None = None  # pair vectors only
    period: list[float] | None = None  # only when the question names a period


class HybridRanker:
    name = "hybrid"
    # The min_score "suggested" gives: calibrated on LoCoMo dev (docs/abstention.md), on
    # turn vectors and on pair vectors (reports/abstention-pairs-dev-split.json).
    suggested_min_score = 0.33
    pair_suggested_min_score = 0.27
    grid = GRID

    def __init__(
        self,
        *,
        bm25_weight: float | None = None,
        dense_weight: float | None = None,
        context_weight: float | None = None,
        period_weight: float = PERIOD_WEIGHT,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        model: Embedder | None = None,
    ) -> None:
        # None: the defaults, which for pair vectors are the pair model's (here when the
        # ranker is given that model, at recall when a store of pairs hands it over).
        chosen = (bm25_weight, dense_weight, context_weight)
        self._chosen = chosen != (None, None, None)
        pairs = model is not None and model.pairs
        defaults = _PAIR_WEIGHTS if pairs else (BM25_WEIGHT, DENSE_WEIGHT, CONTEXT_WEIGHT)
        weights = (d if c is None else c for c, d in zip(chosen, defaults, strict=True))
        self.bm25_weight, self.dense_weight, self.context_weight = weights
        self.period_weight, self.k1, self.b = period_weight, k1, b
        self._model = model

    def suggested_min_score_for(self, model: str | None) -> float:
        """The suggested floor for a store of ``model``'s vectors (the ranker's own first)."""
        pairs = self.reads_pairs if self._model is not None else reads_pairs(model)
        return self.pair_suggested_min_score if pairs else self.suggested_min_score

    def with_params(self, **params: float) -> HybridRanker:
        """The same ranker (and the same loaded model) with other weights."""
        current = {name: getattr(self, name) for name in (*_WEIGHTS, "period_weight", "k1", "b")}
        return HybridRanker(**{**current, **params}, model=self._model)

    @property
    def reads_pairs(self) -> bool:
        """Whether the ranker was given a pair model (only a store's vectors serve pairs)."""
        return self._model is not None and self._model.pairs

    def with_model(self, model: Embedder) -> HybridRanker:
        """The same weights (or defaults) read through another model, e.g. pair vectors."""
        weights = {name: getattr(self, name) if self._chosen else None for name in _WEIGHTS}
        return HybridRanker(
            **weights, period_weight=self.period_weight, k1=self.k1, b=self.b, model=model
        )

    @property
    def model(self) -> Embedder:
        if self._model is None:
            from .embeddings import E5Model

            self._model = E5Model()
        return self._model

    def _fuse(self, query: RecallQuery, scan: CandidateScan, as_of: datetime) -> _Fused:
        """Every signal of a scan's candidates, embedded now (the reference)."""
        lexical = bm25_scores(query, scan, k1=self.k1, b=self.b, stopwords=True)
        model = self.model
        if model.pairs:
            # A scan holds no record's turn before: pairs are read from a store's vectors.
            raise RemoteMemoryValidationError(
                "pair vectors are scored from a store that keeps them, not from a scan"
            )
        cosine: list[float] = []
        if scan.candidates:
            records = model.encode([c.record.content for c in scan.candidates])
            question = query_vector(model, query.text)
            cosine = [exact_dot(vector, question) for vector in records]
        return self._fuse_with(scan, lexical, cosine, model, None, named_periods(query.text, as_of))

    def _fuse_with(
        self,
        scan: CandidateScan,
        lexical: Bm25Scores,
        cosine: list[float],
        model: object,
        next_cosine: list[float] | None = None,
        periods: tuple[Period, ...] = (),
    ) -> _Fused:
        best = max(lexical.totals, default=0.0)
        scaled = [raw / best if best > 0 else 0.0 for raw in lexical.totals]
        dense = calibrated(cosine, model)
        if next_cosine is not None:  # pair vectors: the mean with the next pair's
            dense = [
                (own + after) / 2
                for own, after in zip(dense, calibrated(next_cosine, model), strict=True)
            ]
        own = [
            self.bm25_weight * x + self.dense_weight * c for x, c in zip(scaled, dense, strict=True)
        ]
        context = neighbour_best(scan.candidates, own)
        totals = [
            self.bm25_weight * scaled[i]
            + self.dense_weight * dense[i]
            + self.context_weight * context[i]
            for i in range(len(scan.candidates))
        ]
        period = None
        if periods:
            period = [float(in_periods(c.captured_at, periods)) for c in scan.candidates]
            totals = [t + self.period_weight * p for t, p in zip(totals, period, strict=True)]
        return _Fused(lexical, cosine, dense, scaled, context, totals, next_cosine, period)

    def _breakdown(
        self, fused: _Fused, scan: CandidateScan, i: int, as_of: datetime
    ) -> RecallScoreBreakdown:
        lexical, sats = fused.lexical, fused.lexical.per_term[i]
        recency = recency_of(scan.candidates[i].captured_at, as_of)
        bm25_w, dense_w, context_w = self.bm25_weight, self.dense_weight, self.context_weight
        after = fused.next_cosine
        pair = () if after is None else (signal("next_cosine", after[i], 0.0, 0.0),)
        period, period_w = fused.period, self.period_weight
        dated = (
            () if period is None else (signal("period", period[i], period_w, period_w * period[i]),)
        )
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
                *dated,
                signal("bm25_raw", lexical.totals[i], 0.0, 0.0),
                signal("cosine", fused.cosine[i], 0.0, 0.0),
                *pair,
                signal("recency", recency, 0.0, 0.0),
            ),
        )

    def score_candidates(
        self, query: RecallQuery, scan: CandidateScan, *, as_of: datetime
    ) -> tuple[RecallScoreBreakdown, ...]:
        fused = self._fuse(query, scan, as_of)
        return tuple(self._breakdown(fused, scan, i, as_of) for i in range(len(scan.candidates)))

    def score_top(
        self, query: RecallQuery, scan: CandidateScan, *, as_of: datetime, limit: int
    ) -> list[tuple[int, RecallScoreBreakdown]]:
        fused = self._fuse(query, scan, as_of)
        lexical = fused.lexical
        top = top_positions(scan, fused.totals, lexical.per_term, lexical.terms, limit)
        return [(i, self._breakdown(fused, scan, i, as_of)) for i in top]

    # -- on a store that keeps vectors ----------------------------------------------

    def score_stored(
        self,
        query: RecallQuery,
        postings: Postings,
        dense: Callable[..., DenseScores],
        fetch: Callable[[Sequence[str]], Sequence[StoredMemory]],
        *,
        embedder: Embedder | None = None,
        as_of: datetime,
        limit: int,
        neighbours: Callable[[Sequence[str]], Mapping[str, SourceNeighbours]] | None = None,
    ) -> tuple[CandidateScan, Top, dict[str, int]]:
        """``DenseScoring``: the union of the lexical and the dense path (module docstring);
        a record not embedded yet is embedded now, reachable by the lexical path only."""
        # The model the ranker was given, else the store's (its vectors' model).
        model = self._model or embedder or self.model
        # A store of pairs hands them over: read them as a ranker given that model would
        # (its default weights are the pair model's unless weights were chosen).
        ranker = self.with_model(model) if model.pairs and not self.reads_pairs else self
        terms = scoring_terms(query, stopwords=True)
        question = query_vector(model, query.text)
        scores = dense(query, question, model=model.name, dimension=model.dimension)
        dense_top_of = scores.top_soon(POOL)  # a server searches while the lexical path reads
        view = postings(query, terms)
        top_docs, lexical = bm25_top_docs(
            query, view, k1=self.k1, b=self.b, stopwords=True, limit=POOL
        )
        lexical_scan = view.scan(top_docs)
        lexical_ids = [c.record.memory_id for c in lexical_scan.candidates]
        similarity = scores.exact(lexical_ids, question)  # read meanwhile too
        dense_top = dense_top_of()
        found = set(lexical_ids)
        extra_ids = [memory_id for memory_id, _ in dense_top if memory_id not in found]
        candidates = list(lexical_scan.candidates)
        per_term = list(lexical.per_term)
        raw = list(lexical.totals)
        idf, avgdl = lexical.idf, lexical.avgdl
        content = bool(content_terms(query.terms))
        for record in scores.records(extra_ids, fetch):
            check_scope(query, record)
            text = searchable_text(record)
            candidate = make_candidate(query, record, searchable_terms(text), require_match=False)
            assert candidate is not None  # require_match=False always gives one
            candidates.append(candidate)
            sats: dict[str, float] = {}
            if idf:  # else no record shares a scoring term: BM25 0
                tf_of, length, content_length = _document(text)
                dl = content_length if content else length
                sats = saturations(tf_of, terms, dl, avgdl, self.k1, self.b)
            per_term.append(sats)
            raw.append(sum(idf[t] * s for t, s in sats.items()))
        ids = [c.record.memory_id for c in candidates]
        pairs = model.pairs
        around: Mapping[str, SourceNeighbours] = {}
        if pairs:
            if neighbours is None:
                raise RemoteMemoryValidationError(
                    "pair vectors need a store that knows each record's turn before it"
                )
            around = neighbours(ids)
        following = {m: n.next for m, n in around.items() if n.next is not None}
        later = ids[len(lexical_ids) :] + sorted(set(following.values()) - set(ids))
        similarity.update(scores.exact(later, question))
        unembedded = [c for c in candidates if c.record.memory_id not in similarity]
        if unembedded:  # not embedded yet: computed now, reachable by the lexical path only
            vectors = model.encode(self._texts_of(unembedded, around, fetch, pairs))
            for candidate, vector in zip(unembedded, vectors, strict=True):
                similarity[candidate.record.memory_id] = exact_dot(vector, question)
        scan = dataclasses.replace(lexical_scan, candidates=tuple(candidates))
        next_cosine = None
        if pairs:  # the next pair's similarity; the candidate's own when there is none
            next_cosine = [similarity.get(following.get(m, m), similarity[m]) for m in ids]
        fused = ranker._fuse_with(
            scan,
            Bm25Scores(terms, idf, avgdl, tuple(per_term), tuple(raw)),
            [similarity[m] for m in ids],
            model,
            next_cosine,
            named_periods(query.text, as_of),
        )
        top = top_positions(scan, fused.totals, fused.lexical.per_term, terms, limit)
        paths = {
            "lexical": len(top_docs),
            "dense": len(dense_top),
            "both": len(dense_top) - len(extra_ids),
            "unembedded": len(unembedded),
        }
        return scan, [(i, ranker._breakdown(fused, scan, i, as_of)) for i in top], paths

    @staticmethod
    def _texts_of(
        records: Sequence[RecallCandidate],
        around: Mapping[str, SourceNeighbours],
        fetch: Callable[[Sequence[str]], Sequence[StoredMemory]],
        pairs: bool,
    ) -> list[str]:
        """What a candidate without a stored vector is embedded as: its content, or on a
        store of pairs its pair text (the turn before read through ``fetch``)."""
        if not pairs:
            return [c.record.content for c in records]
        ids = [c.record.memory_id for c in records]
        before = {m: around[m].previous for m in ids if m in around}
        wanted = sorted({p for p in before.values() if p is not None})
        content = {r.memory_id: r.content for r in fetch(wanted)}
        return [
            pair_text(content.get(before.get(m) or ""), c.record.content)
            for m, c in zip(ids, records, strict=True)
        ]
