"""Stage 2 — candidates: which conversation records overlap the query.

The rules for learners: docs/reference.md#candidates. A candidate has no score yet:
keeping it apart lets an index or another retriever replace this stage alone."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._tokens import english_stopwords
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
    # [beyond] Corpus statistics for BM25's average document length: terms with repeats
    # (``tokenize_all``) over every searched record, all / without English stopwords.
    searched_token_count: int | None = None
    searched_content_token_count: int | None = None


@dataclass(frozen=True)
class LexicalPostings:
    """What an index holds for a lexical ranker's scoring terms, read without a record.

    ``postings[i]``: ``(docs ascending, tf of terms[i] in each)``, searched or retracted
    (``live[doc]``). ``candidates_of(docs)`` builds only those docs' candidates;
    ``prefetch(docs)`` comes before ``timestamps`` / ``ids`` are read at ``docs``.
    ``scratch`` lives as long as the index, for what a ranker derives from the postings.
    Either read may raise ``PostingsMoved``: the view was of a state the store has left."""

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
        """A ``CandidateScan`` of ``docs``' candidates, in order, with the whole scan's counts."""
        return CandidateScan(
            candidates=self.candidates_of(docs),
            searched_records=self.searched_records,
            candidate_records=self.candidate_records,
            retracted_records=self.retracted_records,
            searched_token_count=self.searched_token_count,
            searched_content_token_count=self.searched_content_token_count,
        )


class PostingsMoved(Exception):
    """A view's postings were of a state the store has since left, as its first read
    found: a SQL store's warm view is checked there, not before, saving a round trip.
    ``fresh`` reads postings that cannot raise it; stage 2 is redone with them."""

    def __init__(self, fresh: Callable[[RecallQuery, Sequence[str]], LexicalPostings]) -> None:
        super().__init__("the postings moved since they were read")
        self.fresh = fresh


def searchable_text(record: StoredMemory) -> str:
    return f"{record.summary} {record.content}"


def retracted_ids(records: Iterable[StoredMemory]) -> frozenset[str]:
    return frozenset(
        r.retracts for r in records if r.kind is MemoryKind.RETRACTION and r.retracts is not None
    )


def make_candidate(
    query: RecallQuery,
    record: StoredMemory,
    searchable_terms: tuple[str, ...],
    *,
    require_match: bool = True,
) -> RecallCandidate | None:
    """The candidate for one record with known terms, or None when nothing overlaps
    (``require_match=False``: a candidate all the same, as a dense retriever finds one)."""
    query_terms = set(query.terms)
    matched = tuple(t for t in searchable_terms if t in query_terms)
    if not matched and require_match:
        return None
    return RecallCandidate(
        query.query_id, record, searchable_terms, matched, record.captured_datetime
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
