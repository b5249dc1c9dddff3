"""Notebook helpers: one pure view per pipeline stage, and the explorer widget.

Every view has the signature ``view(store, query, as_of, limit)`` and returns plain
data (a DataFrame, or a ``Rendered`` block) computed with the library's own stages, so
a notebook shows the real pipeline and copies none of it. ``explorer`` wraps any view
in a query / as_of / limit form. pandas, matplotlib and ipywidgets are imported here
on first use, never by ``import memlib``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from ..candidates import scan_recall_candidates, searchable_text
from ..engine import RecallEngine
from ..errors import RemoteMemoryError
from ..normalize import RecallQuery, normalize_recall_query, normalize_text, tokenize
from ..rank import rank_key
from ..records import MemoryKind, StoredMemory
from ..render import render_recall_context, render_remote_profile
from ..result import RecallResult
from ..score import LEXICAL_WEIGHT, RECENCY_HALF_LIFE_DAYS, RECENCY_WEIGHT, score_recall_candidate
from ..stores.base import MemoryStore

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "Rendered",
    "as_of_at_noon",
    "records_frame",
    "records_view",
    "normalize_frame",
    "normalize_view",
    "candidates_view",
    "score_view",
    "rank_view",
    "hits_view",
    "render_view",
    "profile_view",
    "recency_curve",
    "contribution_bars",
    "explorer",
]

View = Callable[[MemoryStore, str, datetime, int], Any]
QUERY_ID = "nb-query"


def _pd() -> Any:
    import pandas

    return pandas


def as_of_at_noon(day: date | datetime) -> datetime:
    """The explorer's date picker gives a day; recall happens at 12:00 UTC on it."""
    if isinstance(day, datetime):
        return day if day.tzinfo else day.replace(tzinfo=UTC)
    return datetime.combine(day, time(12, 0), tzinfo=UTC)


@dataclass(frozen=True)
class Rendered:
    """Text shown as it is (no quotes, no escapes), with its size."""

    text: str

    def __repr__(self) -> str:
        return self.text if self.text else "(empty string: nothing is injected)"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


def _query(store: MemoryStore, text: str, as_of: datetime, limit: int) -> RecallQuery:
    return normalize_recall_query(
        text, user_scope=store.user_scope, limit=limit, query_id=QUERY_ID, issued_at=as_of
    )


def _recall(store: MemoryStore, text: str, as_of: datetime, limit: int) -> RecallResult:
    return RecallEngine(store).recall(text, limit=limit, as_of=as_of, query_id=QUERY_ID)


# -- stage 0: stored records ------------------------------------------------------------

def records_frame(records: Iterable[StoredMemory]) -> pd.DataFrame:
    rows = [
        {
            "memory_id": r.memory_id,
            "kind": r.kind.value,
            "captured_at": r.source.captured_at,
            "stored_at": r.stored_at,
            "source_id": r.source.source_id,
            "title": r.source.title,
            "summary": r.summary,
        }
        for r in records
    ]
    return _pd().DataFrame(rows, columns=["memory_id", "kind", "captured_at", "stored_at",
                                          "source_id", "title", "summary"])


def records_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """Every stored record, with how many of the query's terms it shares."""
    q = _query(store, query, as_of, limit)
    frame = records_frame(store.read_all())
    terms = set(q.terms)
    frame["shared_terms"] = [
        len(terms & set(tokenize(searchable_text(r)))) for r in store.read_all()
    ]
    return frame


# -- stage 1: normalize -----------------------------------------------------------------

def normalize_frame(texts: Sequence[str]) -> pd.DataFrame:
    """Readable text, normalized text and terms side by side; errors shown, not raised."""
    rows = []
    for text in texts:
        try:
            q = normalize_recall_query(text, user_scope="0" * 16, query_id=QUERY_ID,
                                       issued_at=datetime(2026, 8, 10, 12, tzinfo=UTC))
            rows.append({"raw": text, "text": q.text, "normalized_text": q.normalized_text,
                         "terms": ", ".join(q.terms), "error": ""})
        except RemoteMemoryError as exc:
            rows.append({"raw": text, "text": "", "normalized_text": normalize_text(text),
                         "terms": "", "error": str(exc)})
    return _pd().DataFrame(rows)


def normalize_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """The ``RecallQuery`` a recall would build, one field a row."""
    q = _query(store, query, as_of, limit)
    data = q.to_dict()
    data["terms"] = ", ".join(q.terms)
    return _pd().DataFrame({"field": list(data), "value": [str(v) for v in data.values()]})


# -- stage 2: candidates ----------------------------------------------------------------

def candidates_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """Every record with what candidate building decided about it, and why."""
    q = _query(store, query, as_of, limit)
    records = store.read_all()
    scan = scan_recall_candidates(q, records)
    matched = {c.record.memory_id: c.matched_terms for c in scan.candidates}
    retracted = {r.retracts for r in records if r.kind is MemoryKind.RETRACTION}
    rows = []
    for r in records:
        if r.kind is not MemoryKind.CONVERSATION:
            decision = f"not searched ({r.kind.value})"
        elif r.memory_id in retracted:
            decision = "not searched (retracted)"
        elif r.memory_id in matched:
            decision = "candidate"
        else:
            decision = "searched, no shared term"
        rows.append({"memory_id": r.memory_id, "kind": r.kind.value,
                     "matched_terms": ", ".join(matched.get(r.memory_id, ())),
                     "decision": decision})
    return _pd().DataFrame(rows)


# -- stage 3: score ---------------------------------------------------------------------

def score_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """The breakdown of every candidate, in storage order (not ranked yet)."""
    q = _query(store, query, as_of, limit)
    rows = []
    for c in scan_recall_candidates(q, store.read_all()).candidates:
        b = score_recall_candidate(q, c, as_of=as_of)
        rows.append({
            "memory_id": c.record.memory_id,
            "captured_at": c.record.source.captured_at,
            "matched_terms": ", ".join(b.matched_terms),
            "query_term_count": b.query_term_count,
            "lexical_coverage": b.lexical_coverage,
            "recency": b.recency,
            "lexical_contribution": b.lexical_contribution,
            "recency_contribution": b.recency_contribution,
            "total": b.total,
        })
    columns = ["memory_id", "captured_at", "matched_terms", "query_term_count",
               "lexical_coverage", "recency", "lexical_contribution", "recency_contribution",
               "total"]
    return _pd().DataFrame(rows, columns=columns)


# -- stage 4: stable rank ---------------------------------------------------------------

def rank_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """Every candidate with its sort keys; rows above ``limit`` get a rank, the rest none."""
    q = _query(store, query, as_of, limit)
    scored = [(c, score_recall_candidate(q, c, as_of=as_of))
              for c in scan_recall_candidates(q, store.read_all()).candidates]
    rows = []
    for position, (c, b) in enumerate(sorted(scored, key=rank_key), start=1):
        rows.append({
            "rank": position if position <= q.limit else None,
            "memory_id": c.record.memory_id,
            "total": b.total,
            "lexical_coverage": b.lexical_coverage,
            "captured_at": c.record.source.captured_at,
        })
    frame = _pd().DataFrame(rows, columns=["rank", "memory_id", "total", "lexical_coverage",
                                           "captured_at"])
    frame["rank"] = frame["rank"].astype("Int64")
    return frame


# -- stage 5: hits, result, render ------------------------------------------------------

def hits_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """The hits of ``RecallResult``: scope, provenance and score, one hit a row."""
    result = _recall(store, query, as_of, limit)
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
    return _pd().DataFrame(rows, columns=["rank", "memory_id", "memory_kind", "source_id",
                                          "captured_at", "score", "snippet"])


def render_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> Rendered:
    return Rendered(render_recall_context(_recall(store, query, as_of, limit)))


def profile_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """Each profile: is it the one injected, is it retracted, and is it ever a hit?"""
    records = store.read_all()
    latest = store.latest_profile()
    retracted = {r.retracts for r in records if r.kind is MemoryKind.RETRACTION}
    hit_ids = {h.memory_id for h in _recall(store, query, as_of, limit).hits}
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
    return _pd().DataFrame(rows, columns=["memory_id", "captured_at", "retracted",
                                          "injected_at_session_start", "is_a_hit"])


def profile_block(store: MemoryStore) -> Rendered:
    return Rendered(render_remote_profile(store.latest_profile()))


# -- plots ------------------------------------------------------------------------------

def recency_curve(days: int = 120, ax: Any = None) -> Any:
    """recency = 1 / (1 + age/30) against age, with the 30-day point marked."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3))
    ages = [d / 2 for d in range(days * 2 + 1)]
    ax.plot(ages, [1 / (1 + a / RECENCY_HALF_LIFE_DAYS) for a in ages], color="tab:blue")
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.axvline(RECENCY_HALF_LIFE_DAYS, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("age in days (as_of − captured_at)")
    ax.set_ylabel("recency")
    ax.set_ylim(0, 1.05)
    ax.set_title("Recency decays but never reaches 0")
    return ax


def contribution_bars(scores: pd.DataFrame, ax: Any = None) -> Any:
    """Stacked bars: lexical and recency contributions of each candidate's total."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.45 * max(len(scores), 2) + 1))
    labels = list(scores["memory_id"])[::-1]
    lexical = list(scores["lexical_contribution"])[::-1]
    recency = list(scores["recency_contribution"])[::-1]
    ax.barh(labels, lexical, color="tab:blue", label=f"lexical ({LEXICAL_WEIGHT} × coverage)")
    ax.barh(labels, recency, left=lexical, color="tab:orange",
            label=f"recency ({RECENCY_WEIGHT} × recency)")
    ax.set_xlim(0, 1)
    ax.set_xlabel("score")
    ax.legend(loc="lower right", fontsize="small")
    return ax


# -- the explorer -----------------------------------------------------------------------

def explorer(
    view: View,
    store: MemoryStore,
    *,
    query: str,
    as_of: datetime,
    limit: int = 5,
    after: Callable[[Any], Any] | None = None,
) -> Any:
    """A query / as_of / limit form that redraws ``view`` into an Output widget.

    Output goes through the widget's model (``outputs``, ``append_display_data``), not
    ``with out:``, so nothing leaks into the cell's own outputs under nbval. A contract
    error is shown as its one-line message, never as a traceback. ``after``, when
    given, turns the view's value into something extra to show (a plot).
    """
    import ipywidgets as widgets

    text = widgets.Text(value=query, description="query", continuous_update=False,
                        layout=widgets.Layout(width="420px"))
    day = widgets.DatePicker(value=as_of.date(), description="as_of")
    size = widgets.IntSlider(value=limit, min=1, max=10, description="limit",
                             continuous_update=False)
    out = widgets.Output()
    status = widgets.HTML()

    def redraw(_: Any = None) -> None:
        out.outputs = ()
        moment = as_of_at_noon(day.value or as_of.date())
        try:
            value = view(store, text.value, moment, size.value)
        except RemoteMemoryError as exc:
            status.value = ""
            out.append_stdout(f"error: {exc}\n")
            return
        rows = getattr(value, "shape", (None,))[0]
        status.value = (f"<code>{view.__name__}</code> at {moment:%Y-%m-%d %H:%M} UTC"
                        + (f" — {rows} rows" if rows is not None else ""))
        out.append_display_data(value)
        if after is not None:
            extra = after(value)
            if extra is not None:
                _show_figure(out, extra)

    for control in (text, day, size):
        control.observe(redraw, names="value")
    redraw()
    box = widgets.VBox([widgets.HBox([text, day, size]), status, out])
    box.redraw = redraw  # type: ignore[attr-defined]
    box.controls = {"query": text, "as_of": day, "limit": size}  # type: ignore[attr-defined]
    return box


def _show_figure(out: Any, ax_or_fig: Any) -> None:
    import matplotlib.pyplot as plt

    figure = getattr(ax_or_fig, "figure", ax_or_fig)
    out.append_display_data(figure)
    plt.close(figure)


def bind(view: View, store: MemoryStore) -> Callable[[str, datetime, int], Any]:
    """``view(query, as_of, limit)`` with the store fixed, for cells that check numbers."""
    return functools.wraps(view)(functools.partial(view, store))
