"""``RecallEngine``: the five stages in order, over one store (docs/reference.md).

A recall is a pure function of the store's records and its arguments: the engine keeps
no state between recalls and writes nothing."""

from __future__ import annotations

from datetime import datetime

from ._paths import min_score_for, scored_candidates
from .explain import RecallExplanation, explain_recall
from .normalize import as_utc, normalize_recall_query
from .rank import rank_scored_candidates
from .rankers import DEFAULT_RANKER, Ranker, get_ranker
from .records import format_timestamp
from .result import RecallResult
from .stores._base import MemoryStore
from .stores._known_at import known_at_moment, store_known_at
from .stores._projects import projects_view


class RecallEngine:
    def __init__(
        self,
        store: MemoryStore,
        *,
        ranker: str | Ranker = DEFAULT_RANKER,
        min_score: float | str | None = None,
    ) -> None:
        self.store = store
        self.ranker = get_ranker(ranker)
        # [beyond] The floor of every recall that names none (an agent's engine: the
        # model's tool calls cannot pass one). Checked now, so a bad one fails at start.
        self.min_score = min_score_for(self.ranker, min_score, store)

    def recall(
        self,
        text: str,
        limit: int = 5,
        as_of: datetime | None = None,
        query_id: str | None = None,
        *,
        known_at: datetime | str | None = None,
        min_score: float | str | None = None,
        all_projects: bool = False,
    ) -> RecallResult:
        """The five stages over the store (``known_at``: as it stood then; ``all_projects``:
        every project of its user), keeping the hits whose score reaches ``min_score`` (a
        number, ``"suggested"``, or None for the engine's own floor, None unless given)."""
        moment = as_utc(as_of)
        floor = self.min_score
        if min_score is not None:
            floor = min_score_for(self.ranker, min_score, self.store)
        with projects_view(self.store, all_projects) as every:
            store = every if known_at is None else store_known_at(every, known_at)
            query = normalize_recall_query(
                text, user_scope=store.user_scope, limit=limit, query_id=query_id, issued_at=moment
            )
            scan, scored, retrieval = scored_candidates(
                store, self.ranker, query, moment, limit=query.limit
            )
        hits = rank_scored_candidates(query, scored)
        kept = hits if floor is None else tuple(h for h in hits if h.score >= floor)
        return RecallResult(
            query=query,
            hits=kept,
            searched_records=scan.searched_records,
            candidate_records=scan.candidate_records,
            retracted_records=scan.retracted_records,
            retrieval=retrieval,
            min_score=floor,
            below_min_score=len(hits) - len(kept),
            known_at=None if known_at is None else format_timestamp(known_at_moment(known_at)),
        )

    def explain(
        self,
        text: str,
        memory_id: str,
        limit: int = 5,
        as_of: datetime | None = None,
        query_id: str | None = None,
        *,
        known_at: datetime | str | None = None,
        min_score: float | str | None = None,
        all_projects: bool = False,
    ) -> RecallExplanation:
        """[beyond] Where ``memory_id`` stopped for this recall, and why (``explain.py``)."""
        with projects_view(self.store, all_projects) as store:
            return explain_recall(
                store,
                self.ranker,
                text,
                memory_id,
                limit=limit,
                as_of=as_of,
                query_id=query_id,
                known_at=known_at,
                min_score=self.min_score if min_score is None else min_score,
            )
