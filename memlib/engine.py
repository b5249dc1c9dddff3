"""``RecallEngine``: the five stages in order, over one store (docs/reference.md).

The engine holds no state of its own between recalls and writes nothing: a recall is
a pure function of the store's records, the text, ``limit`` and ``as_of``.
"""

from __future__ import annotations

from datetime import datetime

from .candidates import CandidateScan
from .normalize import RecallQuery, as_utc, normalize_recall_query
from .rank import rank_scored_candidates
from .rankers import DEFAULT_RANKER, Ranker, get_ranker
from .rankers.base import DenseScoring, LexicalScoring, ScoreBound, TopScoring
from .rankers.embeddings import recorded_embedder
from .result import RecallResult
from .stores.base import LexicalScanning, MemoryStore, TopScanning, VectorStoring

__all__ = ["RecallEngine"]


class RecallEngine:
    def __init__(self, store: MemoryStore, *, ranker: str | Ranker = DEFAULT_RANKER) -> None:
        self.store = store
        self.ranker = get_ranker(ranker)

    def _scan(self, query: RecallQuery) -> CandidateScan:
        # A store with an index may walk candidates best-first and stop early, pruning
        # by the ranker's own bound; a ranker without one must see every candidate.
        if isinstance(self.store, TopScanning) and isinstance(self.ranker, ScoreBound):
            return self.store.scan_top_candidates(query, self.ranker)
        return self.store.scan_candidates(query)

    def recall(
        self,
        text: str,
        limit: int = 5,
        as_of: datetime | None = None,
        query_id: str | None = None,
    ) -> RecallResult:
        moment = as_utc(as_of)
        query = normalize_recall_query(
            text, user_scope=self.store.user_scope, limit=limit, query_id=query_id,
            issued_at=moment,
        )
        retrieval = None
        store = self.store
        lexical: LexicalScanning | None = store if isinstance(store, LexicalScanning) else None
        vectors: VectorStoring | None = store if isinstance(store, VectorStoring) else None
        if lexical is not None and vectors is not None and isinstance(self.ranker, DenseScoring):
            # The lexical and the dense path's candidates, read and scored alone.
            # The store's embedder, else the one its vectors were made by (when memlib
            # knows it by name): a store opened without one still embeds the question
            # with its vectors' model, as the CLI does.
            embedder = vectors.embedder or recorded_embedder(vectors)
            scan, chosen, retrieval = self.ranker.score_stored(
                query, lexical.lexical_postings, vectors.dense_scores, vectors.records_by_id,
                embedder=embedder, as_of=moment, limit=query.limit,
            )
            scored = [(scan.candidates[i], breakdown) for i, breakdown in chosen]
        elif lexical is not None and isinstance(self.ranker, LexicalScoring):
            # Scored from the index's postings: only the hits are read (rankers/base.py).
            scan, chosen = self.ranker.score_lexical(
                query, lexical.lexical_postings, as_of=moment, limit=query.limit
            )
            scored = [(scan.candidates[i], breakdown) for i, breakdown in chosen]
        elif isinstance(self.ranker, TopScoring):
            scan = self._scan(query)
            # Only the hits get their signals built (rankers/base.py explains why).
            chosen = self.ranker.score_top(query, scan, as_of=moment, limit=query.limit)
            scored = [(scan.candidates[i], breakdown) for i, breakdown in chosen]
        else:
            scan = self._scan(query)
            breakdowns = self.ranker.score_candidates(query, scan, as_of=moment)
            scored = list(zip(scan.candidates, breakdowns, strict=True))
        hits = rank_scored_candidates(query, scored)
        return RecallResult(
            query=query,
            hits=hits,
            searched_records=scan.searched_records,
            candidate_records=scan.candidate_records,
            retracted_records=scan.retracted_records,
            retrieval=retrieval,
        )
