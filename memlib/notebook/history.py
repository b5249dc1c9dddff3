"""Notebook 14's history and views: explain, known_at, supersede, min_score. The history is
the sample corpus plus three later writes at pinned instants (001 superseded by 014, 008
retracted, 015 imported late), made from the constants here (``history_store`` for tests).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine import RecallEngine
from ..explain import RecallExplanation
from ..records import MemorySource, StoredMemory, format_timestamp
from ..result import RecallResult
from ..sample import fixed_clock, open_sample_store
from ..stores._base import MemoryStore
from ..stores.jsonl._store import RemoteMemoryStore
from ._common import QUERY_ID, course_data, pandas, pyplot
from .frames import records_frame
from .language import tr

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

SUPERSEDED_AT = datetime(2026, 8, 11, 9, 0, tzinfo=UTC)
RETRACTED_AT = datetime(2026, 8, 11, 10, 0, tzinfo=UTC)
IMPORTED_AT = datetime(2026, 8, 12, 9, 0, tzinfo=UTC)
# Recalls after the changes: a day after the last of them was captured.
LATER_AS_OF = datetime(2026, 8, 12, 12, 0, tzinfo=UTC)

# The records of the three later writes and of exercise 14.3's replacement of
# conversation-009 ("kept conversation memory for one year"): memlib/data/history.json.
_WRITES = course_data("history")
SUPERSEDE_ITEM: Mapping[str, Any] = _WRITES["supersede_item"]
SUPERSEDE_REASON = "The team moved the default store to a server."
RETRACTION_SOURCE = MemorySource(**_WRITES["retraction_source"])
RETRACTION_REASON = "The café plan was a joke, not a decision."
LATE_ITEM: Mapping[str, Any] = _WRITES["late_item"]
RETENTION_ITEM: Mapping[str, Any] = _WRITES["retention_item"]


def writer_at(store: RemoteMemoryStore, moment: datetime) -> RemoteMemoryStore:
    """The same JSONL file with a clock pinned at ``moment`` (a notebook's must not move)."""
    return RemoteMemoryStore(store.path, user_id=store.user_id, clock=fixed_clock(moment))


def history_store(root: str | Path) -> RemoteMemoryStore:
    """The sample store under ``root`` with the three later writes of this module."""
    store = open_sample_store(root)
    writer_at(store, SUPERSEDED_AT).supersede(
        "conversation-001", dict(SUPERSEDE_ITEM), reason=SUPERSEDE_REASON
    )
    writer_at(store, RETRACTED_AT).retract(
        "conversation-008", reason=RETRACTION_REASON, source=RETRACTION_SOURCE
    )
    writer_at(store, IMPORTED_AT).append(**LATE_ITEM)
    return store


def history_frame(records: Iterable[StoredMemory]) -> pd.DataFrame:
    """Records with their links: what a supersede or a retraction names, and when."""
    base = ("memory_id", "kind", "captured_at", "stored_at")
    return records_frame(records, (*base, "retracts", "supersedes", "superseded_by", "summary"))


def explain(
    store: MemoryStore, query: str, memory_id: str, as_of: datetime, limit: int = 5, **options: Any
) -> RecallExplanation:
    """``RecallEngine(store).explain`` with the notebooks' fixed ``query_id``."""
    return RecallEngine(store).explain(
        query, memory_id, limit=limit, as_of=as_of, query_id=QUERY_ID, **options
    )


def explain_view(
    store: MemoryStore, query: str, as_of: datetime, limit: int, memory_id: str | None = None
) -> pd.DataFrame:
    """The verdict on every record of the store (or on ``memory_id``) for one recall."""
    ids = [memory_id] if memory_id else [r.memory_id for r in store.read_all()]
    rows = []
    for one in ids:
        said = explain(store, query, one, as_of, limit)
        rank = said.rank if said.rank is not None else ""
        total = f"{said.breakdown.total:.6f}" if said.breakdown is not None else ""
        rows.append((one, said.verdict, said.stage, rank, total, said.message))
    columns = ["memory_id", "verdict", "stage", "rank", "total", "message"]
    return pandas().DataFrame(rows, columns=columns)


def beside_frame(said: RecallExplanation) -> pd.DataFrame:
    """A below-the-cut record's contributions beside the last hit's, signal by signal."""
    if said.breakdown is None or said.last_hit is None:
        raise ValueError(f"{said.memory_id} is not below the cut: {said.verdict}")
    mine, theirs = said.breakdown, said.last_hit.score_breakdown

    def signals(b: Any) -> dict[str, float]:
        return {s.name: s.contribution for s in b.signals} if b.signals else dict(b.contributions)

    own, other = signals(mine), signals(theirs)
    own["total"], other["total"] = mine.total, theirs.total  # the last row
    rows = [
        {
            "signal": name,
            said.memory_id: own.get(name, 0.0),
            said.last_hit.memory_id: other[name],
            "difference": round(own.get(name, 0.0) - other[name], 6),
        }
        for name in other
    ]
    return pandas().DataFrame(rows).set_index("signal")


def _hits_text(result: RecallResult) -> str:
    return ", ".join(f"{h.memory_id} ({h.score:.3f})" for h in result.hits) or "—"


def known_at_view(
    store: MemoryStore, query: str, as_of: datetime, limit: int, instants: Sequence[datetime | None]
) -> pd.DataFrame:
    """One recall per ``known_at`` (None: the store as it is now)."""
    engine = RecallEngine(store)
    rows = []
    for instant in instants:
        result = engine.recall(query, limit=limit, as_of=as_of, query_id=QUERY_ID, known_at=instant)
        when = format_timestamp(instant) if instant else tr("now", "现在")
        rows.append((when, _hits_text(result), result.searched_records, result.retracted_records))
    columns = ["known_at", "hits", "searched_records", "retracted_records"]
    return pandas().DataFrame(rows, columns=columns)


def clocks_frame(
    store: MemoryStore,
    query: str,
    memory_id: str,
    limit: int,
    pairs: Sequence[tuple[datetime, datetime | None]],
) -> pd.DataFrame:
    """What each (as_of, known_at) pair does to one record: its recency, or its absence."""
    rows = []
    for as_of, known_at in pairs:
        said = explain(store, query, memory_id, as_of, limit, known_at=known_at)
        b = said.breakdown
        recency, total = (f"{b.recency:.6f}", f"{b.total:.6f}") if b is not None else ("", "")
        known = format_timestamp(known_at) if known_at else "—"
        rows.append((format_timestamp(as_of), known, said.verdict, recency, total))
    return pandas().DataFrame(rows, columns=["as_of", "known_at", "verdict", "recency", "total"])


def floor_view(
    store: MemoryStore, query: str, as_of: datetime, limit: int, floors: Sequence[float | None]
) -> pd.DataFrame:
    """One recall per floor: what is kept, how many were dropped, and the empty reason."""
    engine = RecallEngine(store)
    rows = []
    for floor in floors:
        result = engine.recall(query, limit=limit, as_of=as_of, query_id=QUERY_ID, min_score=floor)
        shown = "—" if floor is None else floor
        rows.append((shown, _hits_text(result), result.below_min_score, result.empty_reason or ""))
    columns = ["min_score", "hits", "below_min_score", "empty_reason"]
    return pandas().DataFrame(rows, columns=columns)


def abstention_frame(report: Mapping[str, Any]) -> pd.DataFrame:
    """Each ranker's suggested floor and what it buys on LoCoMo (the packaged report)."""
    rows = []
    for name, ranker in report["rankers"].items():
        chosen = ranker["suggestion"]
        rows.append(
            {
                "ranker": name,
                "min_score": chosen["floor"],
                "foreign abstain": chosen["foreign_abstain"],
                "own R@10, no floor": chosen["own_r10_unfloored"],
                "own R@10": chosen["own_r10"],
                "R@10 kept": chosen["own_r10_ratio"],
            }
        )
    return pandas().DataFrame(rows).set_index("ranker")


def abstention_plot(report: Mapping[str, Any]) -> Any:
    """Per ranker, each floor: foreign questions silenced against own R@10 kept."""
    fig, ax = pyplot().subplots(figsize=(7, 4.2))
    for name, ranker in report["rankers"].items():
        rows = [r for r in ranker["curve"]["rows"] if r["floor"] is not None]
        unfloored = ranker["suggestion"]["own_r10_unfloored"]
        xs = [r["foreign_abstain"] for r in rows]
        ys = [r["own_r10"] / unfloored if unfloored else 0.0 for r in rows]
        (line,) = ax.plot(xs, ys, marker=".", lw=1, label=name)
        chosen = [ranker["suggestion"]["foreign_abstain"]], [ranker["suggestion"]["own_r10_ratio"]]
        ax.scatter(*chosen, s=120, facecolors="none", edgecolors=line.get_color(), linewidths=2)
    ax.axhline(report["keep"], color="grey", ls=":", lw=1)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    label = tr(
        "share of foreign questions that abstain (higher is better)",
        "外部问题中弃答的比例（越高越好）",
    )
    ax.set_xlabel(label)
    ax.set_ylabel(tr("own R@10 kept (share of no floor)", "自身 R@10 保留比例（相对无下限）"))
    label = tr(
        "min_score on LoCoMo dev: silence vs recall (circle: suggested)",
        "LoCoMo 开发集上的 min_score：弃答与召回（圆圈：建议值）",
    )
    ax.set_title(label)
    ax.legend(fontsize="small", loc="lower left")
    fig.tight_layout()
    return fig
