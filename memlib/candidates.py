"""Stage 2 — candidates: which conversation records overlap the query.

The rules for learners: docs/reference.md#candidates.

A candidate has no score and no rank yet; it only says "this record shares terms with
this query". Keeping it separate is what lets an index or another retriever replace
this stage without touching scoring or ranking.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._stopwords import english_stopwords
from .errors import RemoteMemoryScopeError
from .normalize import RecallQuery, tokenize_all
from .records import MemoryKind, StoredMemory

__all__ = [
    "RecallCandidate",
    "CandidateScan",
    "LexicalPostings",
    "build_recall_candidates",
    "scan_recall_candidates",
    "searchable_text",
    "retracted_ids",
]


@dataclass(frozen=True)
class RecallCandidate:
    query_id: str
    record: StoredMemory
    searchable_terms: tuple[str, ...]
    matched_terms: tuple[str, ...]
    captured_at: datetime

    @property
    def memory_id(self) -> str:
        return self.record.memory_id


@dataclass(frozen=True)
class CandidateScan:
    """The candidates plus the counts that explain an empty or short result."""

    candidates: tuple[RecallCandidate, ...]
    searched_records: int
    candidate_records: int
    retracted_records: int
    # [beyond] Corpus statistics for rankers beyond the baseline (BM25's average
    # document length): terms counted with repeats (``tokenize_all``) over the searchable
    # text of every searched record, all of them / without the English stopwords of
    # memlib/data/stopwords_en.txt. None when a backend does not provide them.
    searched_token_count: int | None = None
    searched_content_token_count: int | None = None


@dataclass(frozen=True)
class LexicalPostings:
    """What an index holds for a lexical ranker's scoring terms, read without a record.

    Doc numbers index every per-doc sequence. ``postings[i]`` is ``(docs ascending, tf
    of terms[i] in each)`` over every conversation record that holds the term, searched
    or retracted: ``live[doc]`` is 1 for a searched record. ``tokens`` / ``content_tokens``
    are each doc's length in terms with repeats, all / without English stopwords (what
    the reference cuts from ``searchable_text`` with ``tokenize_all``); ``timestamps``
    (``captured_at.timestamp()``) and ``ids`` give stage 4's tie-breaks. The counts are
    the ones ``scan_candidates`` reports. ``candidate_docs()`` lists every candidate of
    the query (all of ``query.terms``, not only the scoring ones), ascending;
    ``candidates_of(docs)`` reads and builds those docs' candidates only, so that
    ``scan(docs)`` parses the hits and nothing else. ``prefetch(docs)`` is called before
    ``timestamps`` / ``ids`` are read at ``docs``, so that a store which keeps them on
    disk reads the few a ranking needs in one query instead of every candidate's.
    ``scratch`` (None: none) is a dict that lives as long as the index behind the view,
    where a ranker may keep what it derived from the postings for the next query of a
    warm process (bm25's per-term saturations, keyed by everything they depend on).
    """

    terms: tuple[str, ...]
    postings: tuple[tuple[Sequence[int], Sequence[int]], ...]
    live: Sequence[int]
    tokens: Sequence[int]
    content_tokens: Sequence[int]
    timestamps: Sequence[float]
    ids: Sequence[str]
    searched_records: int
    candidate_records: int
    retracted_records: int
    searched_token_count: int
    searched_content_token_count: int
    candidate_docs: Callable[[], Sequence[int]]
    candidates_of: Callable[[Sequence[int]], tuple[RecallCandidate, ...]]
    prefetch: Callable[[Sequence[int]], None] = lambda docs: None
    scratch: dict[Any, Any] | None = None

    def scan(self, docs: Sequence[int]) -> CandidateScan:
        """A ``CandidateScan`` of exactly ``docs``' candidates, in that order, with the
        counts of the whole scan."""
        return CandidateScan(
            candidates=self.candidates_of(docs),
            searched_records=self.searched_records,
            candidate_records=self.candidate_records,
            retracted_records=self.retracted_records,
            searched_token_count=self.searched_token_count,
            searched_content_token_count=self.searched_content_token_count,
        )


def searchable_text(record: StoredMemory) -> str:
    return f"{record.summary} {record.content}"


def retracted_ids(records: Iterable[StoredMemory]) -> frozenset[str]:
    return frozenset(
        r.retracts for r in records if r.kind is MemoryKind.RETRACTION and r.retracts is not None
    )


def make_candidate(
    query: RecallQuery, record: StoredMemory, searchable_terms: tuple[str, ...],
    *, require_match: bool = True,
) -> RecallCandidate | None:
    """The candidate for one record with known terms, or None when nothing overlaps
    (``require_match=False``: a candidate all the same, as a dense retriever finds one)."""
    query_terms = set(query.terms)
    matched = tuple(t for t in searchable_terms if t in query_terms)
    if not matched and require_match:
        return None
    return RecallCandidate(
        query_id=query.query_id,
        record=record,
        searchable_terms=searchable_terms,
        matched_terms=matched,
        captured_at=record.captured_datetime,
    )


def check_scope(query: RecallQuery, record: StoredMemory) -> None:
    if record.user_scope != query.user_scope:
        raise RemoteMemoryScopeError(f"memory {record.memory_id} belongs to another user scope")


def scan_recall_candidates(query: RecallQuery, records: Iterable[StoredMemory]) -> CandidateScan:
    """The reference full scan: every record examined, in the order given."""
    records = tuple(records)
    for record in records:
        check_scope(query, record)
    retracted = retracted_ids(records)
    stopwords = english_stopwords()
    candidates: list[RecallCandidate] = []
    searched = retracted_count = token_count = content_token_count = 0
    for record in records:
        if record.kind is not MemoryKind.CONVERSATION:
            continue
        if record.memory_id in retracted:
            retracted_count += 1
            continue
        searched += 1
        tokens = tokenize_all(searchable_text(record))
        token_count += len(tokens)
        content_token_count += sum(1 for t in tokens if t not in stopwords)
        candidate = make_candidate(query, record, tuple(sorted(set(tokens))))
        if candidate is not None:
            candidates.append(candidate)
    return CandidateScan(
        candidates=tuple(candidates),
        searched_records=searched,
        candidate_records=len(candidates),
        retracted_records=retracted_count,
        searched_token_count=token_count,
        searched_content_token_count=content_token_count,
    )


def build_recall_candidates(
    query: RecallQuery, records: Iterable[StoredMemory]
) -> tuple[RecallCandidate, ...]:
    """Conversation records (not retracted) that share at least one term with the query."""
    return scan_recall_candidates(query, records).candidates
