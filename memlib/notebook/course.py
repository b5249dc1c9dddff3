"""Helpers for the second half of the course (notebooks 05–09).

They build small stores, compare rankings, flatten payloads, measure rendered blocks,
stage failures and race two real processes — always through memlib's public stages,
so a notebook shows the library at work and copies none of its logic. Every value they
return is deterministic: fixed clocks, fixed query ids, no paths, no process ids.
pandas, matplotlib and ipywidgets are imported inside the functions that need them.
"""

from __future__ import annotations

import os
import random
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine import RecallEngine
from ..errors import RemoteMemoryDuplicateError, RemoteMemoryError
from ..records import MemoryKind, MemorySource
from ..render import render_recall_context
from ..result import RecallResult
from ..sample import SAMPLE_USER_ID, fixed_clock, sample_records, scope_path
from ..stores.base import MemoryStore
from ..stores.jsonl import RemoteMemoryStore
from . import rank_view, score_view

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "COURSE_QUERY_ID",
    "SORT_KEYS",
    "budget_plot",
    "capture",
    "conversation_item",
    "conversation_store",
    "corrupt_line",
    "damaged_copy",
    "deciding_key",
    "error_table",
    "file_lines_frame",
    "file_state",
    "flatten",
    "hit_fields_frame",
    "hits_per_limit_plot",
    "insertion_order_frame",
    "keys_subset_ranks",
    "limit_sweep",
    "order_vs_rank_plot",
    "payload_outline",
    "query_check_view",
    "race_duplicate_append",
    "rank_keys_plot",
    "rank_keys_view",
    "ranks_by_store",
    "recall",
    "records_timeline",
    "redact",
    "result_counts_frame",
    "shuffled_sample_store",
    "tear_last_line",
    "tie_breaker_frame",
    "xml_elements_frame",
]

# The stable rank's keys, in the order they are consulted (SPEC §3.4).
SORT_KEYS: tuple[str, ...] = ("total", "lexical_coverage", "captured_at", "memory_id")
COURSE_QUERY_ID = "nb-query"


def _pd() -> Any:
    import pandas

    return pandas


def recall(
    store: MemoryStore,
    query: str,
    as_of: datetime,
    limit: int = 5,
    query_id: str = COURSE_QUERY_ID,
) -> RecallResult:
    """``RecallEngine(store).recall`` with a fixed ``query_id``, so outputs are stable."""
    return RecallEngine(store).recall(query, limit=limit, as_of=as_of, query_id=query_id)


# -- stores -------------------------------------------------------------------------------


def conversation_store(
    root: str | os.PathLike[str],
    name: str,
    rows: Iterable[Sequence[str]],
    *,
    user_id: str = SAMPLE_USER_ID,
) -> RemoteMemoryStore:
    """A fresh JSONL store under ``root/name`` holding one conversation record per row.

    A row is ``(memory_id, captured_at, text)``; the text is both summary and content,
    so what a record is about is visible in one column.
    """
    store = RemoteMemoryStore(
        scope_path(Path(root) / name, user_id), user_id=user_id, clock=fixed_clock()
    )
    store.append_many(
        {
            "kind": MemoryKind.CONVERSATION,
            "memory_id": memory_id,
            "content": text,
            "summary": text,
            "source": MemorySource(
                source_id=f"transcript-{memory_id}",
                source_type="conversation_transcript",
                title=memory_id,
                captured_at=captured_at,
            ),
        }
        for memory_id, captured_at, text in rows
    )
    return store


def shuffled_sample_store(
    root: str | os.PathLike[str], seed: int | None, *, user_id: str = SAMPLE_USER_ID
) -> RemoteMemoryStore:
    """The sample corpus appended in an order shuffled by ``random.Random(seed)``.

    ``seed=None`` keeps the corpus order. Each seed gets its own folder under ``root``.
    """
    items = list(sample_records())
    if seed is not None:
        random.Random(seed).shuffle(items)
    folder = Path(root) / ("original" if seed is None else f"seed-{seed}")
    store = RemoteMemoryStore(scope_path(folder, user_id), user_id=user_id, clock=fixed_clock())
    store.append_many(items)
    return store


# -- 05 stable rank -------------------------------------------------------------------------


def insertion_order_frame(stores: Mapping[str, MemoryStore], n: int | None = None) -> pd.DataFrame:
    """Conversation ids in the order each store holds them (position 1 = first line)."""
    columns = {
        label: [r.memory_id for r in store.read_all() if r.kind is MemoryKind.CONVERSATION][:n]
        for label, store in stores.items()
    }
    frame = _pd().DataFrame(columns)
    frame.index = range(1, len(frame) + 1)
    frame.index.name = "position"
    return frame


def ranks_by_store(
    stores: Mapping[str, MemoryStore], query: str, as_of: datetime, limit: int
) -> pd.DataFrame:
    """The ranked memory ids of every store side by side, and whether they all agree."""
    columns = {
        label: list(recall(store, query, as_of, limit).hits) for label, store in stores.items()
    }
    depth = max((len(hits) for hits in columns.values()), default=0)
    frame = _pd().DataFrame(
        {
            label: [h.memory_id for h in hits] + [None] * (depth - len(hits))
            for label, hits in columns.items()
        }
    )
    frame.index = range(1, depth + 1)
    frame.index.name = "rank"
    frame["same in every store"] = frame.nunique(axis=1, dropna=False).eq(1)
    return frame


def deciding_key(ahead: Mapping[str, Any], behind: Mapping[str, Any]) -> str:
    """The first sort key on which two ranked rows differ: the one that ordered them."""
    for key in SORT_KEYS:
        if ahead[key] != behind[key]:
            return key
    return "(identical)"


def rank_keys_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """``rank_view`` plus, for each row, the key that put it ahead of the next row."""
    frame = rank_view(store, query, as_of, limit)
    rows = frame.to_dict("records")
    frame["ahead_of_next_by"] = [
        deciding_key(row, rows[i + 1]) if i + 1 < len(rows) else "" for i, row in enumerate(rows)
    ]
    return frame


def tie_breaker_frame(
    root: str | os.PathLike[str],
    cases: Mapping[str, tuple[str, Sequence[Sequence[str]]]],
    as_of: datetime,
) -> pd.DataFrame:
    """Rank each small case ``{name: (query, rows)}`` in its own store.

    One row per record with its sort keys, its rank and, on rank 1, the key that put it
    ahead of rank 2.
    """
    frames = []
    for name, (query, rows) in cases.items():
        store = conversation_store(root, f"case-{name}", rows)
        frame = rank_keys_view(store, query, as_of, 10)
        frame.insert(0, "case", name)
        frames.append(frame)
    return _pd().concat(frames, ignore_index=True)


def keys_subset_ranks(
    stores: Mapping[str, MemoryStore],
    query: str,
    as_of: datetime,
    limit: int,
    keys: Sequence[str] = SORT_KEYS,
) -> pd.DataFrame:
    """What ranking would give with only some of its keys: a counterfactual.

    Candidates are taken in each store's file order (``score_view``) and sorted
    stably by ``keys`` alone, as a sort that forgot the later tie-breakers would.
    """
    ascending = [key == "memory_id" for key in keys]
    columns = {}
    for label, store in stores.items():
        scores = score_view(store, query, as_of, limit)
        ordered = scores.sort_values(list(keys), ascending=ascending, kind="stable")
        columns[label] = list(ordered["memory_id"])[:limit]
    frame = _pd().DataFrame(columns)
    frame.index = range(1, len(frame) + 1)
    frame.index.name = "rank"
    frame["same in every store"] = frame.nunique(axis=1, dropna=False).eq(1)
    return frame


def rank_keys_plot(frame: pd.DataFrame, ax: Any = None) -> Any:
    """Totals as bars in rank order, each labelled with the key that ranked it."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 0.5 * max(len(frame), 2) + 1.2))
    labels = [
        f"{memory_id} (rank {rank})" if rank is not _pd().NA else f"{memory_id} (past limit)"
        for rank, memory_id in zip(frame["rank"], frame["memory_id"], strict=True)
    ]
    positions = list(range(len(frame)))
    ax.barh(
        positions,
        frame["total"],
        color=["tab:blue" if ranked else "lightgrey" for ranked in frame["rank"].notna()],
    )
    for y, (total, coverage, key) in enumerate(
        zip(frame["total"], frame["lexical_coverage"], frame["ahead_of_next_by"])
    ):
        note = f"{total:.6f} · coverage {coverage:.2f}" + (f" · ahead by {key}" if key else "")
        ax.text(total + 0.01, y, note, va="center", fontsize="small")
    ax.set_yticks(positions, labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 2.0)
    ax.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_xlabel("total (grey: scored, then cut by the limit)")
    ax.set_title("ranked candidates and the key that ordered each pair")
    ax.figure.tight_layout()
    return ax


def order_vs_rank_plot(
    stores: Mapping[str, MemoryStore], query: str, as_of: datetime, limit: int = 10
) -> Any:
    """Left: where each hit sits in each store's file. Right: the rank it gets."""
    import matplotlib.pyplot as plt

    labels = list(stores)
    hits = {label: recall(store, query, as_of, limit).hits for label, store in stores.items()}
    ids = [h.memory_id for h in hits[labels[0]]]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), sharey=False)
    for memory_id in ids:
        positions = []
        for label in labels:
            order = [r.memory_id for r in stores[label].read_all()]
            positions.append(order.index(memory_id) + 1)
        left.plot(labels, positions, marker="o", label=memory_id)
        right.plot(
            labels,
            [next(h.rank for h in hits[label] if h.memory_id == memory_id) for label in labels],
            marker="o",
            label=memory_id,
        )
    left.set_title("line in the JSONL file (shuffled)")
    left.set_ylabel("position")
    right.set_title("rank (the same in every store)")
    right.set_ylabel("rank")
    for ax in (left, right):
        ax.invert_yaxis()
        ax.tick_params(axis="x", labelrotation=30)
    right.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize="small")
    fig.suptitle(f"query {query!r}: insertion order moves, rank does not")
    fig.tight_layout()
    return fig


# -- 06 hits and the tool result ----------------------------------------------------------


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys; lists become comma-separated text."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "."))
        elif isinstance(value, list):
            flat[name] = ", ".join(str(v) for v in value)
        else:
            flat[name] = value
    return flat


def hit_fields_frame(result: RecallResult) -> pd.DataFrame:
    """Every field of every hit's JSON, one field a row, one hit a column."""
    frame = _pd().DataFrame({f"rank {h.rank}": flatten(h.to_dict()) for h in result.hits})
    frame.index.name = "field"
    return frame.astype(str)


def payload_outline(payload: str) -> pd.DataFrame:
    """The top level of a ``to_json()`` payload: each key, its JSON type and a preview."""
    import json

    data = json.loads(payload)
    names = {
        dict: "object",
        list: "array",
        str: "string",
        int: "number",
        float: "number",
        bool: "boolean",
        type(None): "null",
    }
    rows = []
    for key, value in data.items():
        if isinstance(value, dict):
            preview = "{" + ", ".join(value) + "}"
        elif isinstance(value, list):
            preview = f"{len(value)} item(s)"
        else:
            preview = json.dumps(value, ensure_ascii=False)
        rows.append({"key": key, "json_type": names[type(value)], "value": preview})
    return _pd().DataFrame(rows)


def result_counts_frame(results: Mapping[str, RecallResult]) -> pd.DataFrame:
    """What each result says about itself: hit and record counts, empty_reason."""
    rows = [
        {
            "case": label,
            "query": r.query.text,
            "limit": r.query.limit,
            "hits": len(r.hits),
            "searched_records": r.searched_records,
            "candidate_records": r.candidate_records,
            "retracted_records": r.retracted_records,
            "empty_reason": r.empty_reason or "null",
        }
        for label, r in results.items()
    ]
    return _pd().DataFrame(rows)


def limit_sweep(
    store: MemoryStore, query: str, as_of: datetime, limits: Iterable[int] = range(1, 11)
) -> pd.DataFrame:
    """For each limit: how many hits, the last one, and the rendered block's size."""
    rows = []
    for limit in limits:
        result = recall(store, query, as_of, limit)
        rows.append(
            {
                "limit": limit,
                "hits": len(result.hits),
                "candidate_records": result.candidate_records,
                "last_hit": result.hits[-1].memory_id if result.hits else None,
                "rendered_chars": len(render_recall_context(result)),
            }
        )
    return _pd().DataFrame(rows)


def hits_per_limit_plot(sweeps: Mapping[str, pd.DataFrame]) -> Any:
    """Hits against limit for several queries: each line flattens at its candidate count."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    ax.plot([1, 10], [1, 10], color="grey", lw=0.8, ls=":", label="hits = limit")
    # Thick lines first, so a line that runs along another stays visible on top of it.
    widths = [7 - 2 * i for i in range(len(sweeps))]
    for (label, frame), width in zip(sweeps.items(), widths, strict=True):
        ax.plot(frame["limit"], frame["hits"], marker="o", lw=max(width, 1.5), label=label)
    ax.set_xlabel("limit")
    ax.set_ylabel("hits returned")
    ax.set_xticks(range(1, 11))
    ax.set_ylim(-0.3, 10.5)
    ax.set_title("limit caps the hits; the candidates cap them too")
    ax.legend(fontsize="small", loc="upper left")
    fig.tight_layout()
    return fig


# -- 07 render --------------------------------------------------------------------------


def xml_elements_frame(text: str) -> pd.DataFrame:
    """Parse a rendered block with ElementTree; one row per element, in document order."""
    root = ET.fromstring(text)
    rows = []

    def walk(element: ET.Element, depth: int, path: str) -> None:
        here = f"{path}/{element.tag}" if path else element.tag
        body = (element.text or "").strip()
        rows.append({"depth": depth, "path": here, "attributes": len(element.attrib), "text": body})
        for child in element:
            walk(child, depth + 1, here)

    walk(root, 0, "")
    return _pd().DataFrame(rows)


def budget_plot(sweep: pd.DataFrame, budget: int = 4_000) -> Any:
    """Rendered characters per limit as bars, against a prompt budget line."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    over = sweep["rendered_chars"] > budget
    colors = ["tab:red" if o else "tab:blue" for o in over]
    ax.bar(sweep["limit"], sweep["rendered_chars"], color=colors)
    ax.axhline(budget, color="black", lw=1, ls="--")
    ax.text(0.6, budget, f" budget {budget:,} characters", va="bottom", fontsize="small")
    ax.set_xticks(list(sweep["limit"]))
    ax.set_xlabel("limit")
    ax.set_ylabel("characters in <recalled_context>")
    ax.set_ylim(0, max(budget, int(sweep["rendered_chars"].max())) * 1.15)
    ax.set_title("the rendered block grows with each hit (red: over budget)")
    fig.tight_layout()
    return fig


# -- 08 profile ---------------------------------------------------------------------------


def records_timeline(store: MemoryStore, title: str = "") -> Any:
    """Every record by captured_at, one row per kind; retracted ones crossed out,
    the profile injected at session start circled."""
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    records = store.read_all()
    retracted = {r.retracts for r in records if r.kind is MemoryKind.RETRACTION}
    latest = store.latest_profile()
    kinds = [MemoryKind.CONVERSATION, MemoryKind.PROFILE]
    fig, ax = plt.subplots(figsize=(8, 2.8))
    for row, kind in enumerate(kinds):
        subset = [r for r in records if r.kind is kind]
        live = [
            mdates.date2num(r.captured_datetime) for r in subset if r.memory_id not in retracted
        ]
        dead = [mdates.date2num(r.captured_datetime) for r in subset if r.memory_id in retracted]
        ax.scatter(
            live,
            [row] * len(live),
            color="tab:blue" if row == 0 else "tab:green",
            zorder=3,
            label=f"{kind.value}",
        )
        if dead:
            ax.scatter(
                dead,
                [row] * len(dead),
                marker="x",
                s=80,
                color="tab:red",
                zorder=4,
                label=f"{kind.value}, retracted",
            )
    if latest is not None:
        ax.scatter(
            [mdates.date2num(latest.captured_datetime)],
            [1],
            s=260,
            facecolors="none",
            edgecolors="black",
            zorder=5,
            label=f"injected: {latest.memory_id}",
        )
    for record in records:
        is_latest = latest is not None and record.memory_id == latest.memory_id
        if record.memory_id in retracted or is_latest:
            row = kinds.index(record.kind)
            ax.annotate(
                record.memory_id,
                (mdates.date2num(record.captured_datetime), row),
                textcoords="offset points",
                xytext=(0, 12),
                ha="center",
                fontsize="small",
            )
    ax.margins(x=0.12)
    ax.set_yticks(range(len(kinds)), [k.value for k in kinds])
    ax.set_ylim(-0.6, 1.6)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d"))
    ax.set_xlabel("captured_at (2026)")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small")
    ax.set_title(title or "records by captured_at")
    fig.tight_layout()
    return fig


# -- 09 failures and concurrency ----------------------------------------------------------


def redact(text: str, *roots: str | os.PathLike[str]) -> str:
    """``text`` with each root folder (and its resolved form) shown as ``<tmp>``."""
    for root in roots:
        for form in {str(root), str(Path(root).resolve())}:
            text = text.replace(form, "<tmp>")
    return text


def conversation_item(
    memory_id: str = "conversation-new",
    *,
    content: str = "A new conversation about layered memory.",
    summary: str = "New conversation.",
    title: str = "New conversation",
    captured_at: str = "2026-08-10T10:00:00Z",
) -> dict[str, Any]:
    """A valid ``append`` item; change one keyword to break one rule.

    The source is built here, so a bad ``captured_at`` or ``title`` fails where the
    item is made — before anything reaches the store.
    """
    return {
        "kind": MemoryKind.CONVERSATION,
        "memory_id": memory_id,
        "content": content,
        "summary": summary,
        "source": MemorySource(
            source_id=f"transcript-{memory_id}",
            source_type="conversation_transcript",
            title=title,
            captured_at=captured_at,
        ),
    }


def capture(action: Callable[[], Any], *roots: str | os.PathLike[str]) -> dict[str, str]:
    """Run ``action``; return the memlib error it raised as type and message, or "ok"."""
    try:
        value = action()
    except RemoteMemoryError as exc:
        return {"error_type": type(exc).__name__, "message": redact(str(exc), *roots)}
    shown = f"{len(value)} item(s)" if isinstance(value, (tuple, list)) else type(value).__name__
    return {"error_type": "(no error)", "message": f"returned {shown}"}


def error_table(
    cases: Mapping[str, Callable[[], Any]], *roots: str | os.PathLike[str]
) -> pd.DataFrame:
    """case → error type → message, one row per case; no traceback, no path."""
    rows = [{"case": name, **capture(action, *roots)} for name, action in cases.items()]
    frame = _pd().DataFrame(rows, columns=["case", "error_type", "message"])
    return frame


def query_check_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """What a recall with these arguments gives: its hits, or the error, as one row."""
    outcome = capture(lambda: recall(store, query, as_of, limit).hits)
    return _pd().DataFrame([{"query": query, "limit": limit, **outcome}])


def file_lines_frame(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The raw lines of a JSONL file: complete or torn, bytes, and the id if it parses."""
    import json

    parts = Path(path).read_bytes().split(b"\n")
    rows = []
    for number, raw in enumerate(parts, start=1):
        last = number == len(parts)
        if last and not raw:
            break  # the file ends with "\n": nothing after it
        try:
            memory_id = json.loads(raw)["memory_id"]
        except (ValueError, KeyError, TypeError):
            memory_id = "(not a JSON record)"
        rows.append(
            {
                "line": number,
                "ends_with_newline": not last,
                "bytes": len(raw),
                "memory_id": memory_id,
            }
        )
    return _pd().DataFrame(rows)


def corrupt_line(path: str | os.PathLike[str], line: int, garbage: bytes = b"{not json") -> None:
    """Replace line ``line`` (1-based) of a file with ``garbage``: damage to read past."""
    target = Path(path)
    lines = target.read_bytes().split(b"\n")
    lines[line - 1] = garbage
    target.write_bytes(b"\n".join(lines))


def damaged_copy(
    source: str | os.PathLike[str],
    folder: str | os.PathLike[str],
    line: int,
    garbage: bytes = b"{not json",
    *,
    user_id: str = SAMPLE_USER_ID,
) -> RemoteMemoryStore:
    """A store over a copy of the JSONL file ``source`` in ``folder``, with ``line`` damaged."""
    copy = Path(folder) / "records.jsonl"
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_bytes(Path(source).read_bytes())
    corrupt_line(copy, line, garbage)
    return RemoteMemoryStore(copy, user_id=user_id)


def tear_last_line(path: str | os.PathLike[str], keep: float = 0.5) -> int:
    """Append the first ``keep`` fraction of a copy of the last record, with no newline:
    what a writer that died before ``fsync`` returned leaves behind. Returns the bytes."""
    target = Path(path)
    last = target.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    torn = last[: max(1, int(len(last) * keep))]
    with open(target, "ab") as handle:
        handle.write(torn)
    return len(torn)


def file_state(path: str | os.PathLike[str], *, user_id: str = SAMPLE_USER_ID) -> dict[str, int]:
    """Complete lines on disk, bytes of an unfinished last line, and what a reader sees."""
    data = Path(path).read_bytes()
    return {
        "complete_lines": data.count(b"\n"),
        "unfinished_tail_bytes": len(data) - (data.rfind(b"\n") + 1),
        "records_a_reader_sees": len(RemoteMemoryStore(path, user_id=user_id).read_all()),
    }


def _race_worker(path: str, user_id: str, memory_id: str, barrier: Any, results: Any) -> None:
    store = RemoteMemoryStore(path, user_id=user_id, clock=fixed_clock())
    saw_free = all(r.memory_id != memory_id for r in store.read_all())
    item = {
        "kind": MemoryKind.CONVERSATION,
        "memory_id": memory_id,
        "content": "Two writers submitted this record at the same moment.",
        "summary": "Racing append.",
        "source": MemorySource(
            source_id=f"transcript-{memory_id}",
            source_type="conversation_transcript",
            title="Racing append",
            captured_at="2026-08-10T11:00:00Z",
        ),
    }
    barrier.wait(timeout=60)
    try:
        store.append_many([item])
        outcome = "success"
    except RemoteMemoryDuplicateError:
        outcome = "RemoteMemoryDuplicateError"
    except (RemoteMemoryError, OSError) as exc:  # reported, not hidden: the table shows it
        outcome = type(exc).__name__
    results.put((saw_free, outcome))


def race_duplicate_append(
    path: str | os.PathLike[str],
    *,
    user_id: str = SAMPLE_USER_ID,
    rounds: int = 3,
    processes: int = 2,
) -> pd.DataFrame:
    """Start ``processes`` real processes per round that append the same memory_id at
    once (a barrier releases them together) to the JSONL file at ``path``.

    One row per round, with counts only — which process won is left out, so the table is
    the same on every run: processes that saw the id free beforehand, successes,
    duplicate errors, other outcomes, and lines in the file carrying that id.
    """
    import json
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    rows = []
    for number in range(1, rounds + 1):
        memory_id = f"race-{number:02d}"
        barrier = context.Barrier(processes)
        results = context.Queue()
        workers = [
            context.Process(
                target=_race_worker, args=(str(path), user_id, memory_id, barrier, results)
            )
            for _ in range(processes)
        ]
        for worker in workers:
            worker.start()
        outcomes = [results.get(timeout=120) for _ in workers]
        for worker in workers:
            worker.join(timeout=120)
        lines = [json.loads(raw) for raw in Path(path).read_bytes().splitlines() if raw]
        rows.append(
            {
                "round": number,
                "memory_id": memory_id,
                "processes": processes,
                "saw_id_free_before": sum(saw for saw, _ in outcomes),
                "successes": sum(o == "success" for _, o in outcomes),
                "duplicate_errors": sum(o == "RemoteMemoryDuplicateError" for _, o in outcomes),
                "other_outcomes": sum(
                    o not in ("success", "RemoteMemoryDuplicateError") for _, o in outcomes
                ),
                "lines_with_this_id": sum(line.get("memory_id") == memory_id for line in lines),
            }
        )
    return _pd().DataFrame(rows)
