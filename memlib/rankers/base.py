"""The ranker interface (SPEC §7).

A ranker turns the candidates of one recall into one explained breakdown each. It
never sorts: the stable tie-breakers of stage 4 are the same for every ranker.

A ranker may also offer ``score_top``: the breakdowns of only the candidates that
stage 4 would keep. A recall shows ``limit`` hits, and building every signal of every
candidate (hundreds on a conversation) cost more than the scoring itself. The
selection uses stage 4's own key on the same rounded numbers, so the result is the
one ``score_candidates`` + stage 4 give (a test holds them equal).

A ranker may also be a ``ScoreBound``: its total depends only on how many query terms
a record matches and when it was captured, and it says how high that total can go. A
store with an index then walks the matches best group first and stops early
(``memlib._retrieval.walk``); the engine offers that walk only to such a ranker.

A ranker may also be ``LexicalScoring``: given a store whose index keeps term
frequencies and lengths (``stores.base.LexicalScanning``), it scores from the postings
of its own scoring terms and parses only its hits (BM25 does).

A ranker may also be ``DenseScoring``: given a store that also keeps embeddings
(``stores.base.VectorStoring``), it scores the union of its lexical and its dense
candidates and reads only those (``hybrid`` does).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from .._vectors import DenseScores, Embedder
from ..candidates import CandidateScan, LexicalPostings
from ..normalize import RecallQuery
from ..records import SourceNeighbours, StoredMemory
from ..score import DECIMALS, RecallScoreBreakdown

__all__ = [
    "DenseScoring", "LexicalScoring", "Ranker", "ScoreBound", "TopScoring", "top_positions",
]


@runtime_checkable
class Ranker(Protocol):
    name: str

    def score_candidates(
        self, query: RecallQuery, scan: CandidateScan, *, as_of: datetime
    ) -> tuple[RecallScoreBreakdown, ...]:
        """One breakdown per ``scan.candidates``, in the same order."""
        ...


@runtime_checkable
class TopScoring(Protocol):
    def score_top(
        self, query: RecallQuery, scan: CandidateScan, *, as_of: datetime, limit: int
    ) -> list[tuple[int, RecallScoreBreakdown]]:
        """``(position in scan.candidates, breakdown)`` of the top ``limit`` (any order)."""
        ...


@runtime_checkable
class LexicalScoring(Protocol):
    """A ranker that scores from an index's postings, not from the records.

    ``postings`` is a ``LexicalScanning`` store's ``lexical_postings``: the ranker asks
    it for its scoring terms. It returns the scan it made (exact counts, candidates of
    its hits only) and its top ``limit`` as ``score_top`` would: the recall is the one
    ``scan_candidates`` + ``score_top`` give, byte for byte.
    """

    def score_lexical(
        self, query: RecallQuery,
        postings: Callable[[RecallQuery, Sequence[str]], LexicalPostings],
        *, as_of: datetime, limit: int,
    ) -> tuple[CandidateScan, list[tuple[int, RecallScoreBreakdown]]]:
        """``(scan, [(position in scan.candidates, breakdown)])`` of the top ``limit``."""
        ...


@runtime_checkable
class DenseScoring(Protocol):
    """A ranker that scores lexical and dense candidates from a store's index and vectors.

    ``postings`` is the store's ``lexical_postings``, ``dense`` its ``dense_scores``,
    ``fetch`` its ``records_by_id``, ``embedder`` its embedder (the model of its vectors,
    used when the ranker was given none) and ``neighbours`` its ``source_neighbours``
    (what pair vectors need). Returns the scan of what it scored, its top
    ``limit`` as ``score_top`` would, and how many records each path gave (the result's
    ``retrieval``).
    """

    def score_stored(
        self, query: RecallQuery,
        postings: Callable[[RecallQuery, Sequence[str]], LexicalPostings],
        dense: Callable[..., DenseScores],
        fetch: Callable[[Sequence[str]], Sequence[StoredMemory]],
        *, embedder: Embedder | None, as_of: datetime, limit: int,
        neighbours: Callable[[Sequence[str]], Mapping[str, SourceNeighbours]] | None = None,
    ) -> tuple[CandidateScan, list[tuple[int, RecallScoreBreakdown]], dict[str, int]]:
        ...


@runtime_checkable
class ScoreBound(Protocol):
    """A ranker whose ``total`` is a function of matched terms and ``captured_at`` alone.

    For a fixed number of matched terms the total must not fall as ``captured_at``
    grows, and never exceed ``upper_bound``: that is what lets a top-k walk keep only
    each group's most recent records and skip the groups that cannot reach the top.
    """

    def exact_total(
        self, matched: int, term_count: int, captured: datetime, as_of: datetime
    ) -> float:
        """The ``total`` ``score_candidates`` gives such a record, to the last digit."""
        ...

    def upper_bound(self, matched: int, term_count: int) -> float:
        """The greatest total a record matching ``matched`` of ``term_count`` terms gets."""
        ...


def top_positions(
    scan: CandidateScan, totals: Sequence[float], per_term: Sequence[Collection[str]],
    terms: Sequence[str], limit: int,
) -> list[int]:
    """Positions of the top ``limit`` candidates by stage 4's key (``rank.rank_key``).

    ``totals`` unrounded and ``per_term[i]`` the scoring terms candidate ``i`` holds:
    both are rounded here exactly as ``score.ranker_breakdown`` rounds them.
    """
    candidates = scan.candidates

    def key(i: int) -> tuple[float, float, float, str]:
        candidate = candidates[i]
        matched = sum(t in per_term[i] for t in terms)
        return (
            -round(totals[i], DECIMALS),
            -round(matched / len(terms), DECIMALS),
            -candidate.captured_at.timestamp(),
            candidate.record.memory_id,
        )

    return heapq.nsmallest(limit, range(len(candidates)), key=key)
