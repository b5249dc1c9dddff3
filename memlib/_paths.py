"""Stages 2 and 3 by the fastest path a store and a ranker share, and the score floor.

``recall`` and ``explain`` both score through here: ``explain`` reports the recall's order."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime

from ._capabilities import DenseScoring, LexicalScoring, Postings, ScoreBound, TopScoring
from ._vectors import Embedder
from .candidates import CandidateScan, PostingsMoved
from .errors import RemoteMemoryValidationError
from .normalize import RecallQuery
from .rank import Scored
from .rankers import Ranker
from .rankers.embeddings import recorded_embedder
from .stores._base import (
    LexicalScanning,
    MemoryStore,
    TopScanning,
    VectorStoring,
    neighbours_in_source,
)


def min_score_for(
    ranker: Ranker, min_score: float | str | None, store: MemoryStore | None = None
) -> float | None:
    """The floor a recall applies: a number as given, ``"suggested"`` the ranker's
    calibrated one (docs/abstention.md) — for the model of ``store``'s vectors when the
    ranker's floor depends on it (hybrid on pair vectors) — None none."""
    if min_score is None:
        return None
    if min_score == "suggested":
        suggested: float | None = getattr(ranker, "suggested_min_score", None)
        for_model = getattr(ranker, "suggested_min_score_for", None)
        if for_model is not None:
            embedder = _embedder_of(store)
            suggested = for_model(None if embedder is None else str(embedder.name))
        if suggested is None:
            raise RemoteMemoryValidationError(
                f"ranker {ranker.name!r} has no suggested min_score; give a number"
            )
        return suggested
    if isinstance(min_score, str):
        try:
            min_score = float(min_score)
        except ValueError:
            raise RemoteMemoryValidationError(
                f"min_score must be a number or 'suggested', not {min_score!r}"
            ) from None
    if isinstance(min_score, bool) or not isinstance(min_score, int | float):
        raise RemoteMemoryValidationError("min_score must be a number or 'suggested'")
    try:
        floor = float(min_score)
    except OverflowError:  # an int past float's range, such as 10**400
        floor = math.inf
    if not math.isfinite(floor):
        raise RemoteMemoryValidationError("min_score must be a finite number")
    return floor


def _embedder_of(store: object) -> Embedder | None:
    """The store's embedder, else the one its vectors were made by (None: none known)."""
    if not isinstance(store, VectorStoring):
        return None
    return store.embedder or recorded_embedder(store)


def scored_candidates(
    store: MemoryStore, ranker: Ranker, query: RecallQuery, moment: datetime, *, limit: int
) -> tuple[CandidateScan, list[Scored], Mapping[str, int] | None]:
    """The scan, the top ``limit`` scored (any order; more when several tie) and the
    retrieval counts. A store's bounded walk reads ``query.limit``, not ``limit``."""
    lexical: LexicalScanning | None = store if isinstance(store, LexicalScanning) else None
    if lexical is not None:
        try:
            return _scored_lexical(store, ranker, query, moment, lexical.lexical_postings, limit)
        except PostingsMoved as moved:  # a write came between the postings and the reads
            return _scored_lexical(store, ranker, query, moment, moved.fresh, limit)
    return _scored(store, ranker, query, moment, limit)


def _scored_lexical(
    store: MemoryStore,
    ranker: Ranker,
    query: RecallQuery,
    moment: datetime,
    postings: Postings,
    limit: int,
) -> tuple[CandidateScan, list[Scored], Mapping[str, int] | None]:
    retrieval = None
    if isinstance(store, VectorStoring) and isinstance(ranker, DenseScoring):
        # The lexical and the dense path's candidates, read and scored alone.
        scan, chosen, retrieval = ranker.score_stored(
            query,
            postings,
            store.dense_scores,
            store.records_by_id,
            embedder=_embedder_of(store),
            as_of=moment,
            limit=limit,
            neighbours=lambda ids: neighbours_in_source(store, ids),
        )
    elif isinstance(ranker, LexicalScoring):
        # Scored from the index's postings: only the hits are read (rankers/base.py).
        scan, chosen = ranker.score_lexical(query, postings, as_of=moment, limit=limit)
    else:
        return _scored(store, ranker, query, moment, limit)
    return scan, [(scan.candidates[i], breakdown) for i, breakdown in chosen], retrieval


def _scored(
    store: MemoryStore, ranker: Ranker, query: RecallQuery, moment: datetime, limit: int
) -> tuple[CandidateScan, list[Scored], Mapping[str, int] | None]:
    if isinstance(ranker, TopScoring):
        scan = _scan(store, ranker, query)
        # Only the hits get their signals built (rankers/base.py explains why).
        chosen = ranker.score_top(query, scan, as_of=moment, limit=limit)
        return scan, [(scan.candidates[i], breakdown) for i, breakdown in chosen], None
    scan = _scan(store, ranker, query)
    breakdowns = ranker.score_candidates(query, scan, as_of=moment)
    return scan, list(zip(scan.candidates, breakdowns, strict=True)), None


def _scan(store: MemoryStore, ranker: Ranker, query: RecallQuery) -> CandidateScan:
    # A ranker with a bound lets an index walk best-first and stop early.
    if isinstance(store, TopScanning) and isinstance(ranker, ScoreBound):
        return store.scan_top_candidates(query, ranker)
    return store.scan_candidates(query)
