"""Views: ``view(store, query, as_of, limit)``, one per pipeline stage, and views compared;
built with the library's own stages, recalling with the fixed ``QUERY_ID`` (stable outputs).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import TYPE_CHECKING, Any

from ..candidates import retracted_ids, scan_recall_candidates, searchable_text
from ..engine import RecallEngine
from ..errors import RemoteMemoryValidationError
from ..normalize import RecallQuery, normalize_recall_query, tokenize
from ..rank import rank_key, stable_rank_recall_candidates
from ..records import MemoryKind
from ..render import render_recall_context, render_remote_profile
from ..result import RecallHit, RecallResult
from ..score import score_recall_candidate
from ..stores._base import MemoryStore
from ._common import QUERY_ID, pandas
from .fixtures import conversation_store
from .frames import records_frame
from .language import tr

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "AGENT_QUERY_PREFIX",
    "HYBRID_HASHING",
    "QUERY_ID",
    "SORT_KEYS",
    "Rendered",
    "View",
    "agent_view",
    "as_of_at_noon",
    "backends_view",
    "candidates_view",
    "counts_frame",
    "counts_view",
    "deciding_key",
    "explored_rankers",
    "hits_view",
    "keys_subset_ranks",
    "limit_sweep",
    "normalize_view",
    "overlap_view",
    "profile_block",
    "profile_view",
    "rank_keys_view",
    "rank_view",
    "rankers_view",
    "ranks_by_store",
    "recall",
    "recall_query",
    "records_view",
    "reference_hits",
    "render_view",
    "score_view",
    "tie_breaker_frame",
]

View = Callable[[MemoryStore, str, datetime, int], Any]
# The stable rank's keys, in the order they are consulted (docs/reference.md#rank).
SORT_KEYS: tuple[str, ...] = ("total", "lexical_coverage", "captured_at", "memory_id")


# The fields of a ``RecallScoreBreakdown`` that ``score_view`` shows, under their own names.
_BREAKDOWN_COLUMNS = (
    "query_term_count",
    "lexical_coverage",
    "recency",
    "lexical_contribution",
    "recency_contribution",
    "total",
)


def as_of_at_noon(day: date | datetime) -> datetime:
    """The explorer's date picker gives a day; recall happens at 12:00 UTC on it."""
    if isinstance(day, datetime):
        return day if day.tzinfo else day.replace(tzinfo=UTC)
    return datetime.combine(day, time(12, 0), tzinfo=UTC)


@dataclass(frozen=True)
class Rendered:
    """Text shown as it is (no quotes, no escapes); an empty block says so."""

    text: str

    def __repr__(self) -> str:
        return self.text or tr(
            "(empty string: nothing is injected)", "（空字符串：不注入任何内容）"
        )

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


def recall(
    store: MemoryStore, query: str, as_of: datetime, limit: int = 5, query_id: str = QUERY_ID
) -> RecallResult:
    """``RecallEngine(store).recall`` with a fixed ``query_id``, so outputs are stable."""
    return RecallEngine(store).recall(query, limit=limit, as_of=as_of, query_id=query_id)


def recall_query(
    store: MemoryStore, text: str, as_of: datetime, limit: int = 5, query_id: str = QUERY_ID
) -> RecallQuery:
    """The ``RecallQuery`` a recall of ``store`` builds, with a fixed ``query_id``."""
    return normalize_recall_query(
        text, user_scope=store.user_scope, limit=limit, query_id=query_id, issued_at=as_of
    )


def records_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """Every stored record, with how many of the query's terms it shares."""
    records = store.read_all()
    terms = set(recall_query(store, query, as_of, limit).terms)
    frame = records_frame(records)
    frame["shared_terms"] = [len(terms & set(tokenize(searchable_text(r)))) for r in records]
    return frame


def normalize_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """The ``RecallQuery`` a recall would build, one field a row."""
    q = recall_query(store, query, as_of, limit)
    data = q.to_dict()
    data["terms"] = ", ".join(q.terms)
    return pandas().DataFrame({"field": list(data), "value": [str(v) for v in data.values()]})


def candidates_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """Every record with what candidate building decided about it, and why."""
    q = recall_query(store, query, as_of, limit)
    records = store.read_all()
    scan = scan_recall_candidates(q, records)
    matched = {c.record.memory_id: c.matched_terms for c in scan.candidates}
    retracted = {r.retracts for r in records if r.kind is MemoryKind.RETRACTION}
    rows = []
    for r in records:
        if r.kind is not MemoryKind.CONVERSATION:
            kind = {"profile": "用户画像", "retraction": "撤回记录"}.get(r.kind.value)
            decision = tr(f"not searched ({r.kind.value})", f"未检索（{kind or r.kind.value}）")
        elif r.memory_id in retracted:
            decision = tr("not searched (retracted)", "未检索（已撤回）")
        elif r.memory_id in matched:
            decision = "candidate"  # the stage's own name, as exercise 03 compares it
        else:
            decision = tr("searched, no shared term", "已检索，无共同词项")
        rows.append((r.memory_id, r.kind.value, ", ".join(matched.get(r.memory_id, ())), decision))
    return pandas().DataFrame(rows, columns=["memory_id", "kind", "matched_terms", "decision"])


def overlap_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """A row per searched record, a 0/1 column per query term (the candidate's matched terms),
    then ``#matched`` and ``candidate?`` (no term holds ``#`` or ``?``: no collision)."""
    q = recall_query(store, query, as_of, limit)
    records = store.read_all()
    scan = scan_recall_candidates(q, records)
    matched = {c.record.memory_id: set(c.matched_terms) for c in scan.candidates}
    retracted = retracted_ids(records)
    ids, rows = [], []
    for r in records:
        if r.kind is not MemoryKind.CONVERSATION or r.memory_id in retracted:
            continue
        terms = matched.get(r.memory_id, set())
        ids.append(r.memory_id)
        rows.append([int(t in terms) for t in q.terms] + [len(terms), r.memory_id in matched])
    index = pandas().Index(ids, name="memory_id")
    return pandas().DataFrame(rows, index=index, columns=[*q.terms, "#matched", "candidate?"])


def counts_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """How many records each stage kept for one recall, as one row."""
    result = recall(store, query, as_of, limit)
    row = {
        "query": result.query.text,
        "terms": ", ".join(result.query.terms),
        "stored_records": len(store.read_all()),
        "searched_records": result.searched_records,
        "candidate_records": result.candidate_records,
        "retracted_records": result.retracted_records,
        "hits": len(result.hits),
        "empty_reason": result.empty_reason,
    }
    return pandas().DataFrame([row])


def score_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """The breakdown of every candidate, in storage order (not ranked yet)."""
    q = recall_query(store, query, as_of, limit)
    rows = []
    for c in scan_recall_candidates(q, store.read_all()).candidates:
        b = score_recall_candidate(q, c, as_of=as_of)
        numbers = [getattr(b, name) for name in _BREAKDOWN_COLUMNS]
        terms = ", ".join(b.matched_terms)
        rows.append((c.record.memory_id, c.record.source.captured_at, terms, *numbers))
    columns = ["memory_id", "captured_at", "matched_terms", *_BREAKDOWN_COLUMNS]
    return pandas().DataFrame(rows, columns=columns)


def rank_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """Every candidate with its sort keys; rows above ``limit`` get a rank, the rest none."""
    q = recall_query(store, query, as_of, limit)
    scored = [
        (c, score_recall_candidate(q, c, as_of=as_of))
        for c in scan_recall_candidates(q, store.read_all()).candidates
    ]
    rows = []
    for position, (c, b) in enumerate(sorted(scored, key=rank_key), start=1):
        rank = position if position <= q.limit else None
        rows.append(
            (rank, c.record.memory_id, b.total, b.lexical_coverage, c.record.source.captured_at)
        )
    columns = ["rank", "memory_id", "total", "lexical_coverage", "captured_at"]
    frame = pandas().DataFrame(rows, columns=columns)
    frame["rank"] = frame["rank"].astype("Int64")
    return frame


def deciding_key(ahead: Mapping[str, Any], behind: Mapping[str, Any]) -> str:
    """The first sort key on which two ranked rows differ: the one that ordered them."""
    for key in SORT_KEYS:
        if ahead[key] != behind[key]:
            return key
    return tr("(identical)", "（完全相同）")


def rank_keys_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """``rank_view`` plus, for each row, the key that put it ahead of the next row."""
    frame = rank_view(store, query, as_of, limit)
    rows = frame.to_dict("records")
    frame["ahead_of_next_by"] = [
        deciding_key(row, rows[i + 1]) if i + 1 < len(rows) else "" for i, row in enumerate(rows)
    ]
    return frame


def hits_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """The hits of ``RecallResult``: scope, provenance and score, one hit a row."""
    result = recall(store, query, as_of, limit)
    rows = [
        {
            "rank": h.rank,
            "memory_id": h.memory_id,
            "memory_kind": h.scope.memory_kind.value,
            "source_id": h.provenance.source_id,
            "captured_at": h.provenance.captured_at,
            "score": h.score,
            "snippet": h.snippet,
        }
        for h in result.hits
    ]
    columns = ["rank", "memory_id", "memory_kind", "source_id", "captured_at", "score", "snippet"]
    return pandas().DataFrame(rows, columns=columns)


def render_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> Rendered:
    """The ``<recalled_context>`` block a recall injects (empty when nothing is found)."""
    return Rendered(render_recall_context(recall(store, query, as_of, limit)))


def profile_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """Each profile: is it the one injected, is it retracted, and is it ever a hit?"""
    records = store.read_all()
    latest = store.latest_profile()
    retracted = {r.retracts for r in records if r.kind is MemoryKind.RETRACTION}
    hit_ids = {h.memory_id for h in recall(store, query, as_of, limit).hits}
    rows = [
        {
            "memory_id": r.memory_id,
            "captured_at": r.source.captured_at,
            "retracted": r.memory_id in retracted,
            "injected_at_session_start": latest is not None and r.memory_id == latest.memory_id,
            "is_a_hit": r.memory_id in hit_ids,
        }
        for r in records
        if r.kind is MemoryKind.PROFILE
    ]
    columns = ["memory_id", "captured_at", "retracted", "injected_at_session_start", "is_a_hit"]
    return pandas().DataFrame(rows, columns=columns)


def profile_block(store: MemoryStore) -> Rendered:
    """The profile block injected at session start; it depends on no query."""
    return Rendered(render_remote_profile(store.latest_profile()))


def counts_frame(
    store: MemoryStore, queries: Sequence[str], as_of: datetime, limit: int
) -> pd.DataFrame:
    """``counts_view`` for several queries, one row each."""
    return pandas().concat(
        [counts_view(store, q, as_of, limit) for q in queries], ignore_index=True
    )


def limit_sweep(
    store: MemoryStore, query: str, as_of: datetime, limits: Iterable[int] = range(1, 11)
) -> pd.DataFrame:
    """For each limit: how many hits, the last one, and the rendered block's size."""
    rows = []
    for limit in limits:
        result = recall(store, query, as_of, limit)
        last = result.hits[-1].memory_id if result.hits else None
        rendered = len(render_recall_context(result))
        rows.append((limit, len(result.hits), result.candidate_records, last, rendered))
    columns = ["limit", "hits", "candidate_records", "last_hit", "rendered_chars"]
    return pandas().DataFrame(rows, columns=columns)


def ranks_by_store(
    stores: Mapping[str, MemoryStore], query: str, as_of: datetime, limit: int
) -> pd.DataFrame:
    """The ranked memory ids of every store side by side, and whether they all agree."""
    ids = {
        label: [h.memory_id for h in recall(store, query, as_of, limit).hits]
        for label, store in stores.items()
    }
    depth = max(map(len, ids.values()), default=0)
    padded = {label: column + [None] * (depth - len(column)) for label, column in ids.items()}
    return _by_rank(pandas().DataFrame(padded))


def _by_rank(frame: pd.DataFrame) -> pd.DataFrame:
    frame.index = pandas().RangeIndex(1, len(frame) + 1, name="rank")
    frame["same in every store"] = frame.nunique(axis=1, dropna=False).eq(1)
    return frame


def keys_subset_ranks(
    stores: Mapping[str, MemoryStore],
    query: str,
    as_of: datetime,
    limit: int,
    keys: Sequence[str] = SORT_KEYS,
) -> pd.DataFrame:
    """Each store's ranking with only ``keys``: candidates in file order, sorted stably."""
    ascending = [key == "memory_id" for key in keys]
    columns = {}
    for label, store in stores.items():
        scores = score_view(store, query, as_of, limit)
        ordered = scores.sort_values(list(keys), ascending=ascending, kind="stable")
        columns[label] = list(ordered["memory_id"])[:limit]
    return _by_rank(pandas().DataFrame(columns))


def tie_breaker_frame(
    root: str | os.PathLike[str],
    cases: Mapping[str, tuple[str, Sequence[Sequence[str]]]],
    as_of: datetime,
) -> pd.DataFrame:
    """Each case ``{name: (query, rows)}`` in its own store: ``rank_keys_view`` of each."""
    frames = []
    for name, (query, rows) in cases.items():
        store = conversation_store(root, f"case-{name}", rows)
        frame = rank_keys_view(store, query, as_of, 10)
        frame.insert(0, "case", name)
        frames.append(frame)
    return pandas().concat(frames, ignore_index=True)


# -- beyond the chapter: the agent loop, the rankers, the backends ------------------------
# The recall ids of an explored exchange: fixed, so its tool results never vary.
AGENT_QUERY_PREFIX = "nb-explore"
# The hybrid ranker with an embedder that needs no model: exact and offline.
HYBRID_HASHING = "hybrid (hashing)"


def agent_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """One offline exchange through ``agent_loop`` and the scripted model, a block a row."""
    from ..agent import SCRIPTED_MODEL_ID, ScriptedModel, agent_loop, scripted_client

    model = ScriptedModel(queries=(query,), limit=limit)
    transcript = agent_loop(
        query,
        client=scripted_client(model),
        model=SCRIPTED_MODEL_ID,
        store=store,
        as_of=as_of,
        query_id_prefix=AGENT_QUERY_PREFIX,
    )
    rows = []
    for entry in transcript.entries:
        hits: int | None = None
        hit_ids = ""
        text = " ".join((entry.text or "").split())
        if entry.block_type == "tool_result" and entry.content is not None:
            if entry.is_error:
                text = entry.content
            else:
                ids = [hit["memory_id"] for hit in json.loads(entry.content)["hits"]]
                hits, hit_ids = len(ids), ", ".join(ids)
        rows.append(
            {
                "turn": entry.turn,
                "role": entry.role,
                "block": entry.block_type,
                "tool_use_id": entry.tool_use_id or "",
                "tool_input": entry.tool_input_json,
                "is_error": entry.is_error,
                "hits": hits,
                "hit_ids": hit_ids,
                "text": text,
            }
        )
    frame = pandas().DataFrame(rows)  # never empty: the user's message is the first row
    frame["is_error"] = frame["is_error"].astype("boolean")
    frame["hits"] = frame["hits"].astype("Int64")
    return frame


def api_failures_frame(
    store: MemoryStore, question: str, as_of: datetime, cases: Mapping[str, Sequence[int | str]]
) -> pd.DataFrame:
    """One offline exchange per case, the API (``FlakyAPI``) failing first as it says."""
    from ..agent import SCRIPTED_MODEL_ID, FlakyAPI, ModelAPIError, agent_loop

    key = "demo-key-0123456789"  # not a real key: the flaky server echoes it back
    rows = []
    for label, failures in cases.items():
        api = FlakyAPI(*failures)
        try:
            transcript = agent_loop(
                question,
                client=api.client(api_key=key),
                model=SCRIPTED_MODEL_ID,
                store=store,
                as_of=as_of,
                query_id_prefix="nb-api",
            )
            stop = transcript.stop_reason
            ends_with, reason, status = tr(f"an answer ({stop})", f"回答（{stop}）"), "", None
            message = transcript.final_text.splitlines()[0]
        except ModelAPIError as exc:
            ends_with, reason, status = type(exc).__name__, exc.reason, exc.status_code
            message = str(exc)
        retries = api.failed - (reason != "")
        rows.append((label, api.sent, retries, ends_with, reason, status, message, key in message))
    columns = ["server answers", "HTTP requests", "SDK retries", "loop ends with", "reason"]
    columns += ["status_code", "message", "key in message"]
    frame = pandas().DataFrame(rows, columns=columns)
    frame["status_code"] = frame["status_code"].astype("Int64")
    return frame


def explored_rankers() -> dict[str, Any]:
    """The built-in lexical rankers, and ``hybrid`` with the hashing embedder (no model)."""
    from ..rankers import get_ranker
    from ..rankers.embeddings import HashingEmbedder
    from ..rankers.hybrid import HybridRanker

    rankers: dict[str, Any] = {
        name: get_ranker(name) for name in ("baseline", "bm25", "bm25+stopwords")
    }
    rankers[HYBRID_HASHING] = HybridRanker(model=HashingEmbedder())
    return rankers


def rankers_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """One row per rank, per ranker (totals on its own scale): ``memory_id`` and ``total``."""
    results = {
        label: RecallEngine(store, ranker=ranker).recall(
            query, limit=limit, as_of=as_of, query_id=QUERY_ID
        )
        for label, ranker in explored_rankers().items()
    }
    return _side_by_side({label: result.hits for label, result in results.items()}, False)


def _side_by_side(columns: Mapping[str, Sequence[RecallHit]], equal: bool) -> pd.DataFrame:
    rows = []
    for position in range(max(len(hits) for hits in columns.values())):
        row: dict[str, Any] = {"rank": position + 1}
        found = [hits[position] if position < len(hits) else None for hits in columns.values()]
        for label, hit in zip(columns, found, strict=True):
            row[f"{label} memory_id"] = hit.memory_id if hit else None
            row[f"{label} total"] = hit.score if hit else None
        if equal:
            dicts = [hit.to_dict() if hit else None for hit in found]
            row["equal"] = all(d is not None and d == dicts[0] for d in dicts)
        rows.append(row)
    names = ["rank"] + [f"{label} {part}" for label in columns for part in ("memory_id", "total")]
    return pandas().DataFrame(rows, columns=[*names, "equal"] if equal else names)


def reference_hits(
    store: MemoryStore, query: str, as_of: datetime, limit: int
) -> tuple[RecallHit, ...]:
    """The chapter's own pipeline over ``store.read_all()``: full scan, score, rank."""
    q = recall_query(store, query, as_of, limit)
    return stable_rank_recall_candidates(
        q, scan_recall_candidates(q, store.read_all()).candidates, as_of=as_of
    )


def backends_view(
    stores: Mapping[str, MemoryStore], query: str, as_of: datetime, limit: int
) -> pd.DataFrame:
    """The same recall through every store and through ``reference_hits`` over the first
    store's records; ``equal``: every column's hit is the same ``RecallHit``, not only id."""
    if not stores:
        raise RemoteMemoryValidationError("backends_view needs at least one store")
    columns: dict[str, tuple[RecallHit, ...]] = {
        label: recall(store, query, as_of, limit).hits for label, store in stores.items()
    }
    columns["reference"] = reference_hits(next(iter(stores.values())), query, as_of, limit)
    return _side_by_side(columns, True)
