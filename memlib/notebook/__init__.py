"""Notebook helpers: one pure view per pipeline stage, and the explorer widget.

Every view has the signature ``view(store, query, as_of, limit)`` and returns plain
data (a DataFrame, or a ``Rendered`` block) computed with the library's own stages, so
a notebook shows the real pipeline and copies none of it. ``explorer`` wraps any view
in a query / as_of / limit form. pandas, matplotlib and ipywidgets are imported here
on first use, never by ``import memlib``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from ..candidates import RecallCandidate, retracted_ids, scan_recall_candidates, searchable_text
from ..engine import RecallEngine
from ..errors import RemoteMemoryError
from ..normalize import RecallQuery, normalize_recall_query, normalize_text, tokenize
from ..rank import rank_key
from ..records import MemoryKind, StoredMemory, format_timestamp, parse_timestamp
from ..render import render_recall_context, render_remote_profile
from ..result import RecallResult
from ..score import (
    LEXICAL_WEIGHT,
    RECENCY_HALF_LIFE_DAYS,
    RECENCY_WEIGHT,
    RecallScoreBreakdown,
    recency_of,
    score_recall_candidate,
)
from ..stores.base import MemoryStore

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "Rendered",
    "as_of_at_noon",
    "breakdown_frame",
    "candidates_frame",
    "candidates_view",
    "contribution_bars",
    "counts_frame",
    "counts_view",
    "explorer",
    "funnel_bars",
    "hits_view",
    "normalize_frame",
    "normalize_view",
    "overlap_heatmap",
    "overlap_view",
    "profile_view",
    "query_checks_frame",
    "rank_view",
    "recency_curve",
    "records_frame",
    "records_view",
    "refusals_frame",
    "render_view",
    "score_view",
    "stored_vs_captured",
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

def _pyplot() -> Any:
    """pyplot, with the "Glyph … missing from font" warning silenced.

    The default fonts have no Han or kana glyphs: a CJK label is drawn as boxes, and
    the warning (raised when the figure is drawn, after the helper returned) would
    otherwise land in a cell's output or an explorer's Output widget.
    """
    import warnings

    import matplotlib.pyplot as plt

    warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font")
    return plt


def recency_curve(
    days: int = 120,
    ax: Any = None,
    *,
    scores: pd.DataFrame | None = None,
    as_of: datetime | None = None,
) -> Any:
    """recency = 1 / (1 + age/30) against age, with the 30-day point marked.

    Given a ``score_view`` frame and its ``as_of``, each candidate is marked on the
    curve at its own age, labelled with its memory_id.
    """
    plt = _pyplot()

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3))
    ages = [d / 2 for d in range(days * 2 + 1)]
    moment = as_of_at_noon(as_of) if as_of is not None else datetime(2026, 8, 10, 12, tzinfo=UTC)
    # The curve is drawn with the library's own recency function, never a copy of it.
    ax.plot(ages, [recency_of(moment - timedelta(days=a), moment) for a in ages],
            color="tab:blue", label="1 / (1 + age / 30)")
    if scores is not None and as_of is not None and len(scores):
        for memory_id, captured, value in zip(scores["memory_id"], scores["captured_at"],
                                              scores["recency"]):
            age = (moment - parse_timestamp(captured)).total_seconds() / 86_400
            ax.plot([max(age, 0.0)], [value], "o", color="tab:orange")
            ax.annotate(memory_id.replace("conversation-", "c-"), (max(age, 0.0), value),
                        textcoords="offset points", xytext=(4, 4), fontsize="small")
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.axvline(RECENCY_HALF_LIFE_DAYS, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("age in days (as_of − captured_at)")
    ax.set_ylabel("recency")
    ax.set_ylim(0, 1.05)
    ax.set_title("Recency decays but never reaches 0")
    return ax


def stored_vs_captured(records: pd.DataFrame, ax: Any = None) -> Any:
    """Per record (a ``records_frame``): when it happened, when the store accepted it.

    A dot is ``captured_at`` (what ranking uses), a diamond is ``stored_at``; the line
    between them is how late the evidence reached the store.
    """
    plt = _pyplot()

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.3 * max(len(records), 2) + 1.2))
    labels = list(records["memory_id"])[::-1]
    captured = [parse_timestamp(t) for t in records["captured_at"]][::-1]
    stored = [parse_timestamp(t) for t in records["stored_at"]][::-1]
    for y, (c, s) in enumerate(zip(captured, stored)):
        ax.plot([c, s], [y, y], color="lightgrey", lw=1, zorder=1)
    ax.scatter(captured, range(len(labels)), color="tab:blue", zorder=2, label="captured_at")
    ax.scatter(stored, range(len(labels)), color="tab:orange", marker="D", zorder=2,
               label="stored_at")
    ax.set_yticks(range(len(labels)), labels)
    ax.legend(loc="lower left", fontsize="small")
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_title("captured_at (the event) vs stored_at (the write)", fontsize="medium")
    return ax


def contribution_bars(scores: pd.DataFrame, ax: Any = None) -> Any:
    """Stacked bars: lexical and recency contributions of each candidate's total.

    Each bar is labelled with its ``total`` when the frame has one (a ``score_view``).
    """
    plt = _pyplot()

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.45 * max(len(scores), 2) + 1.3))
    labels = list(scores["memory_id"])[::-1]
    lexical = list(scores["lexical_contribution"])[::-1]
    recency = list(scores["recency_contribution"])[::-1]
    ax.barh(labels, lexical, color="tab:blue", label=f"lexical ({LEXICAL_WEIGHT} × coverage)")
    ax.barh(labels, recency, left=lexical, color="tab:orange",
            label=f"recency ({RECENCY_WEIGHT} × recency)")
    if "total" in scores:
        for y, (left, width, total) in enumerate(zip(lexical, recency,
                                                     list(scores["total"])[::-1])):
            ax.text(left + width + 0.01, y, f"{total:.6f}", va="center", fontsize="small")
    ax.set_xlim(0, 1.15)
    ax.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_xlabel("score (total = lexical + recency)")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize="small",
              frameon=False)
    return ax


# -- refusals: errors shown as data, never as tracebacks ----------------------------------

def refusals_frame(attempts: Mapping[str, Callable[[], Any]]) -> pd.DataFrame:
    """Run each attempt; one row each with the typed error it raised, or "accepted".

    Only ``RemoteMemoryError`` is caught: anything else is a bug and should be seen.
    """
    rows = []
    for label, attempt in attempts.items():
        try:
            attempt()
        except RemoteMemoryError as exc:
            rows.append({"attempt": label, "outcome": type(exc).__name__, "message": str(exc)})
        else:
            rows.append({"attempt": label, "outcome": "accepted", "message": ""})
    return _pd().DataFrame(rows, columns=["attempt", "outcome", "message"])


def query_checks_frame(cases: Sequence[tuple[Any, Any]]) -> pd.DataFrame:
    """``(text, limit)`` pairs through ``normalize_recall_query``: terms, or why not.

    ``text`` and ``limit`` are shown as Python literals, so ``''`` and ``'   '`` differ.
    """
    rows = []
    for text, limit in cases:
        try:
            q = normalize_recall_query(text, user_scope="0" * 16, limit=limit, query_id=QUERY_ID,
                                       issued_at=datetime(2026, 8, 10, 12, tzinfo=UTC))
            rows.append({"text": repr(text), "limit": repr(limit), "accepted": True,
                         "terms": ", ".join(q.terms), "error": ""})
        except RemoteMemoryError as exc:
            rows.append({"text": repr(text), "limit": repr(limit), "accepted": False,
                         "terms": "", "error": str(exc)})
    return _pd().DataFrame(rows, columns=["text", "limit", "accepted", "terms", "error"])


# -- candidates: overlap and counts --------------------------------------------------------

def candidates_frame(candidates: Iterable[RecallCandidate]) -> pd.DataFrame:
    """What each ``RecallCandidate`` carries, one a row (no score, no rank: not yet)."""
    rows = [
        {
            "query_id": c.query_id,
            "memory_id": c.record.memory_id,
            "searchable_terms": len(c.searchable_terms),
            "matched_terms": ", ".join(c.matched_terms),
            "captured_at": format_timestamp(c.captured_at),
        }
        for c in candidates
    ]
    return _pd().DataFrame(rows, columns=["query_id", "memory_id", "searchable_terms",
                                          "matched_terms", "captured_at"])


def overlap_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """One row per searched conversation record (indexed by memory_id), one 0/1 column
    per query term, then ``#matched`` and ``candidate?``.

    The 1s are the candidate's ``matched_terms`` as the library computed them; a row of
    0s is a searched record that did not become a candidate. (A term never contains
    ``#`` or ``?``, so no query can collide with the last two columns.)
    """
    q = _query(store, query, as_of, limit)
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
    index = _pd().Index(ids, name="memory_id")
    return _pd().DataFrame(rows, index=index, columns=[*q.terms, "#matched", "candidate?"])


def overlap_heatmap(overlap: pd.DataFrame, ax: Any = None) -> Any:
    """The ``overlap_view`` grid as a picture: a filled cell is a shared term."""
    plt = _pyplot()

    terms = [c for c in overlap.columns if c not in ("#matched", "candidate?")]
    if ax is None:
        _, ax = plt.subplots(figsize=(1.1 * max(len(terms), 2) + 2.8,
                                      0.32 * max(len(overlap), 2) + 1.2))
    grid = overlap[terms].to_numpy().tolist()
    ax.imshow(grid if len(grid) and terms else [[0]], cmap="Blues", vmin=0, vmax=1.3,
              aspect="auto")
    ax.set_xticks(range(len(terms)), terms)
    ax.xaxis.tick_top()
    labels = [f"{m}  ✔" if c else m for m, c in zip(overlap.index, overlap["candidate?"])]
    ax.set_yticks(range(len(overlap)), labels)
    ax.set_xticks([x - 0.5 for x in range(1, len(terms))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(overlap))], minor=True)
    ax.grid(which="minor", color="white", lw=1.5)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("query terms (a filled cell = the record shares that term; ✔ = candidate)")
    return ax


def counts_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """How many records each stage kept for one recall, as one row."""
    result = _recall(store, query, as_of, limit)
    return _pd().DataFrame([{
        "query": result.query.text,
        "terms": ", ".join(result.query.terms),
        "stored_records": len(store.read_all()),
        "searched_records": result.searched_records,
        "candidate_records": result.candidate_records,
        "retracted_records": result.retracted_records,
        "hits": len(result.hits),
        "empty_reason": result.empty_reason,
    }], columns=["query", "terms", "stored_records", "searched_records", "candidate_records",
                 "retracted_records", "hits", "empty_reason"])


def counts_frame(store: MemoryStore, queries: Sequence[str], as_of: datetime,
                 limit: int) -> pd.DataFrame:
    """``counts_view`` for several queries, one row each."""
    return _pd().concat([counts_view(store, q, as_of, limit) for q in queries],
                        ignore_index=True)


def funnel_bars(counts: pd.DataFrame, ax: Any = None) -> Any:
    """Horizontal bars: stored → searched → candidates → hits for the first row."""
    plt = _pyplot()

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 2.4))
    row = counts.iloc[0]
    stages = ["stored_records", "searched_records", "candidate_records", "hits"]
    values = [int(row[s]) for s in stages]
    colours = ["grey", "tab:blue", "tab:orange", "tab:green"]
    ax.barh(stages[::-1], values[::-1], color=colours[::-1])
    for y, v in enumerate(values[::-1]):
        ax.text(v + 0.2, y, str(v), va="center")
    ax.set_xlim(0, max(values + [1]) * 1.15)
    ax.set_xlabel("records")
    ax.set_title(f"what each stage keeps for {row['query']!r}", fontsize="medium")
    return ax


# -- score: one breakdown ------------------------------------------------------------------

def breakdown_frame(breakdown: RecallScoreBreakdown) -> pd.DataFrame:
    """A ``RecallScoreBreakdown`` one field a row, weights and contributions flattened."""
    data = breakdown.to_dict()
    rows: list[dict[str, str]] = []
    for key, value in data.items():
        if isinstance(value, dict):
            rows.extend({"field": f"{key}.{k}", "value": str(v)} for k, v in value.items())
        elif isinstance(value, list):
            rows.append({"field": key, "value": ", ".join(map(str, value))})
        else:
            rows.append({"field": key, "value": str(value)})
    return _pd().DataFrame(rows, columns=["field", "value"])


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
