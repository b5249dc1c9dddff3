"""[beyond] ``explain``: where did record X stop, for this recall? (docs/reference.md#explain)

The stages are asked in order (``_VERDICTS``: verdict → stage); the first that stopped
the record is the verdict. The order is the recall's own (``_paths.py``), so "ranked
7th" is the place the recall gave it; a test holds every verdict equal on every backend."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._capabilities import DenseScoring
from ._paths import min_score_for, scored_candidates
from ._tokens import searchable_terms
from ._visible import visible
from .candidates import searchable_text
from .normalize import RecallQuery, as_utc, normalize_recall_query
from .rank import Scored, rank_key, rank_scored_candidates
from .rankers import Ranker
from .records import MemoryKind, StoredMemory, format_timestamp, memory_id_of, parse_timestamp
from .result import RecallHit
from .score import RecallScoreBreakdown
from .stores._base import LexicalScanning, MemoryStore, VectorStoring, records_by_id_of
from .stores._known_at import known_at_moment, store_known_at

_VERDICTS: Mapping[str, str] = {
    "not_in_scope": "scope",
    "not_yet_stored": "known_at",
    "superseded": "retraction",
    "retracted": "retraction",
    "not_conversation": "kind",
    "no_shared_term": "candidates",
    "not_in_pool": "candidates",
    "below_cut": "rank",
    "below_min_score": "min_score",
    "hit": "hit",
}
# The first round of the order's walk down to a record (``_order_down_to``).
_FIRST_ROUND = 16
# Terms shown in the one-line message; the explanation itself keeps them all.
_SHOWN_TERMS = 12
# The text line quotes stored text, escaped as the prompt block is: a reason cannot forge
# a tag ("</recalled_context><system>") or a second line that reads as another verdict.
_LINE_ESCAPES = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\n": "&#xA;", "\r": "&#xD;"}
)


@dataclass(frozen=True)
class RecallExplanation:
    """Why one record is, or is not, among one recall's hits."""

    memory_id: str
    verdict: str
    message: str
    query: RecallQuery
    ranker: str
    known_at: str | None = None
    min_score: float | None = None
    # below_cut / below_min_score / hit: its place in the whole order, of how many.
    rank: int | None = None
    candidates: int | None = None
    breakdown: RecallScoreBreakdown | None = None
    # below_cut: the recall's last hit, and what put the record under it.
    last_hit: RecallHit | None = None
    deciding: str | None = None
    # retracted / superseded: the retraction record's facts.
    retracted_at: str | None = None
    reason: str | None = None
    successor: str | None = None
    # no_shared_term / not_in_pool: both sides of the comparison.
    record_terms: tuple[str, ...] = ()
    kind: str | None = None
    stored_at: str | None = None

    @property
    def stage(self) -> str:
        return _VERDICTS[self.verdict]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(memory_id=self.memory_id, verdict=self.verdict, stage=self.stage)
        for field in dataclasses.fields(self)[2:]:  # from message on, each when given
            value = getattr(self, field.name)
            if isinstance(value, RecallQuery | RecallScoreBreakdown | RecallHit):
                value = value.to_dict()
            elif isinstance(value, tuple):
                value = list(value) or None
            if value is not None:
                out[field.name] = value
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def to_text(self) -> str:
        """``verdict: message`` as one line of visible text (escaped as a prompt block)."""
        return visible(f"{self.verdict}: {self.message}".translate(_LINE_ESCAPES), "xml")


def _signals(breakdown: RecallScoreBreakdown) -> dict[str, float]:
    if breakdown.signals:
        return {s.name: s.contribution for s in breakdown.signals}
    return dict(breakdown.contributions)


def _deciding_signal(record: Scored, last: Scored) -> str:
    """What put ``record`` below ``last``: the signal it lost most on, else a tie-breaker."""
    mine, theirs = record[1], last[1]
    if mine.total < theirs.total:
        own, other = _signals(mine), _signals(theirs)
        deficits = {name: other.get(name, 0.0) - own.get(name, 0.0) for name in other}
        return max(deficits, key=lambda name: (deficits[name], name))
    if mine.lexical_coverage < theirs.lexical_coverage:
        return "lexical_coverage (tie-breaker)"
    if record[0].captured_at < last[0].captured_at:
        return "captured_at (tie-breaker)"
    return "memory_id (tie-breaker)"


def _terms(terms: tuple[str, ...]) -> str:
    shown = ", ".join(terms[:_SHOWN_TERMS])
    return f"[{shown}{', …' if len(terms) > _SHOWN_TERMS else ''}]"


def _order_down_to(
    view: MemoryStore,
    ranker: Ranker,
    query: RecallQuery,
    moment: datetime,
    record: StoredMemory,
    dense: bool,
) -> tuple[list[Scored], int]:
    """The recall's order down to ``record`` (or all of it) and how many were ranked
    (the top ``k`` of a total order are its first ``k``: ``k`` grows fourfold)."""
    k = max(query.limit, _FIRST_ROUND)
    while True:
        wide = dataclasses.replace(query, limit=k)
        scan, scored, _ = scored_candidates(view, ranker, wide, moment, limit=k)
        order = sorted(scored, key=rank_key)[:k]
        ranked = len(scan.candidates) if dense else scan.candidate_records
        if any(c.record == record for c, _ in order) or k >= ranked:
            return order, ranked
        k = min(k * 4, max(ranked, k))


def explain_recall(
    store: MemoryStore,
    ranker: Ranker,
    text: str,
    memory_id: str,
    *,
    limit: int = 5,
    as_of: datetime | None = None,
    query_id: str | None = None,
    known_at: datetime | str | None = None,
    min_score: float | str | None = None,
) -> RecallExplanation:
    """The verdict on ``memory_id`` for ``recall(text, limit, as_of, …)`` (module docstring)."""
    memory_id = memory_id_of(memory_id)
    moment = as_utc(as_of)
    floor = min_score_for(ranker, min_score, store)
    past = None if known_at is None else known_at_moment(known_at)
    query = normalize_recall_query(
        text, user_scope=store.user_scope, limit=limit, query_id=query_id, issued_at=moment
    )
    known = None if past is None else format_timestamp(past)

    def verdict(name: str, says: str, **facts: Any) -> RecallExplanation:
        message = f"memory {memory_id} {says}"
        return RecallExplanation(
            memory_id, name, message, query, ranker.name, known, floor, **facts
        )

    record = next(iter(records_by_id_of(store, [memory_id])), None)
    if record is None:
        return verdict("not_in_scope", "is not in this scope")
    view: MemoryStore = store
    if past is not None:
        if parse_timestamp(record.stored_at) > past:
            return verdict(
                "not_yet_stored",
                f"was stored at {record.stored_at}, after known_at {known}",
                stored_at=record.stored_at,
            )
        view = store_known_at(store, past)
    retraction = view.retraction_of(memory_id)
    if retraction is not None:
        when, reason, successor = retraction.stored_at, retraction.content, retraction.superseded_by
        retracted = {"retracted_at": when, "reason": reason}
        if successor is not None:
            return verdict(
                "superseded",
                f"was superseded by {successor} at {when}: {reason}",
                successor=successor,
                **retracted,
            )
        return verdict("retracted", f"was retracted at {when}: {reason}", **retracted)
    if record.kind is not MemoryKind.CONVERSATION:
        why = (
            "profiles are injected at session start, never recalled"
            if record.kind is MemoryKind.PROFILE
            else f"it retracts {record.retracts}, and is never recalled"
        )
        return verdict(
            "not_conversation", f"is a {record.kind.value} record: {why}", kind=record.kind.value
        )
    record_terms = searchable_terms(searchable_text(record))  # sorted, distinct
    shared = sorted(set(record_terms) & set(query.terms))
    dense = (
        isinstance(ranker, DenseScoring)
        and isinstance(view, LexicalScanning)
        and isinstance(view, VectorStoring)
    )
    place = None
    if shared or dense:  # only a dense path makes a candidate of a record sharing no term
        order, ranked = _order_down_to(view, ranker, query, moment, record, dense)
        # The record itself: with all projects, another project may hold the same id.
        place = next((i for i, (c, _) in enumerate(order) if c.record == record), None)
    if place is None:
        if not shared:
            return verdict(
                "no_shared_term",
                f"shares no term with the query: query terms {_terms(query.terms)}, "
                f"record terms {_terms(record_terms)}",
                record_terms=record_terms,
            )
        return verdict(
            "not_in_pool",
            f"shares {_terms(tuple(shared))} with the query but is in none of the "
            f"{ranker.name} ranker's candidate pools",
            record_terms=record_terms,
        )
    rank = place + 1
    breakdown = order[place][1]
    facts: dict[str, Any] = {"rank": rank, "candidates": ranked, "breakdown": breakdown}
    cut = min(query.limit, len(order))  # the order always reaches past the cut here
    if rank > query.limit:
        last = rank_scored_candidates(query, order[:cut])[-1]
        signal = _deciding_signal(order[place], order[cut - 1])
        return verdict(
            "below_cut",
            f"ranked {rank} of {ranked}, below the cut at limit {query.limit}: score "
            f"{breakdown.total:.6f} against {last.score:.6f} of the last hit {last.memory_id}; "
            f"decided by {signal}",
            last_hit=last,
            deciding=signal,
            **facts,
        )
    if floor is not None and breakdown.total < floor:
        return verdict(
            "below_min_score",
            f"ranked {rank}, within limit {query.limit}, but its score {breakdown.total:.6f} "
            f"is under min_score {floor:g}",
            **facts,
        )
    return verdict("hit", f"is hit {rank} (score {breakdown.total:.6f})", **facts)
