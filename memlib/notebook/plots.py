"""Plots: matplotlib pictures of views and frames, one Axes or Figure each (matplotlib is
imported on first use).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..records import MemoryKind, StoredMemory, parse_timestamp
from ..sample import SAMPLE_AS_OF
from ..score import LEXICAL_WEIGHT, RECENCY_HALF_LIFE_DAYS, RECENCY_WEIGHT, recency_of
from ..stores._base import MemoryStore
from ._common import pandas, pyplot
from .language import tr
from .views import as_of_at_noon, recall

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def _axes(ax: Any, figsize: tuple[float, float]) -> Any:
    plt = pyplot()  # always: it sets the CJK fallback font the labels are drawn with
    return plt.subplots(figsize=figsize)[1] if ax is None else ax


def stored_vs_captured(records: pd.DataFrame, ax: Any = None) -> Any:
    """Per record (a ``records_frame``): a dot at ``captured_at`` (what ranking uses), a
    diamond at ``stored_at``; the line between is how late the evidence reached the store."""
    ax = _axes(ax, (7, 0.3 * max(len(records), 2) + 1.2))
    labels = list(records["memory_id"])[::-1]
    captured = [parse_timestamp(t) for t in records["captured_at"]][::-1]
    stored = [parse_timestamp(t) for t in records["stored_at"]][::-1]
    for y, (c, s) in enumerate(zip(captured, stored, strict=True)):
        ax.plot([c, s], [y, y], color="lightgrey", lw=1, zorder=1)
    ax.scatter(captured, range(len(labels)), color="tab:blue", zorder=2, label="captured_at")
    ax.scatter(
        stored, range(len(labels)), color="tab:orange", marker="D", zorder=2, label="stored_at"
    )
    ax.set_yticks(range(len(labels)), labels)
    ax.legend(loc="lower left", fontsize="small")
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator()  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    title = tr(
        "captured_at (the event) vs stored_at (the write)",
        "captured_at（事件发生）与 stored_at（写入存储）",
    )
    ax.set_title(title, fontsize="medium")
    return ax


def records_timeline(store: MemoryStore, title: str = "") -> Any:
    """Every record by captured_at, a row per kind; retracted crossed, injected circled."""
    import matplotlib.dates as mdates

    def when(record: StoredMemory) -> float:
        return float(mdates.date2num(record.captured_datetime))  # type: ignore[no-untyped-call]

    records = store.read_all()
    retracted = {r.retracts for r in records if r.kind is MemoryKind.RETRACTION}
    latest = store.latest_profile()
    kinds = [MemoryKind.CONVERSATION, MemoryKind.PROFILE]
    fig, ax = pyplot().subplots(figsize=(8, 2.8))
    for row, kind in enumerate(kinds):
        subset = [r for r in records if r.kind is kind]
        live = [when(r) for r in subset if r.memory_id not in retracted]
        dead = [when(r) for r in subset if r.memory_id in retracted]
        color = "tab:blue" if row == 0 else "tab:green"
        ax.scatter(live, [row] * len(live), color=color, zorder=3, label=f"{kind.value}")
        if dead:
            label = tr(f"{kind.value}, retracted", f"{kind.value}，已撤回")
            ax.scatter(
                dead, [row] * len(dead), marker="x", s=80, color="tab:red", zorder=4, label=label
            )
    if latest is not None:
        label = tr(f"injected: {latest.memory_id}", f"会话启动时注入：{latest.memory_id}")
        ax.scatter(
            [when(latest)], [1], s=260, facecolors="none", edgecolors="black", zorder=5, label=label
        )
    marked = retracted | ({latest.memory_id} if latest is not None else set())
    for record in records:
        if record.memory_id in marked:
            ax.annotate(
                record.memory_id,
                (when(record), kinds.index(record.kind)),
                textcoords="offset points",
                xytext=(0, 12),
                ha="center",
                fontsize="small",
            )
    ax.margins(x=0.12)
    ax.set_yticks(range(len(kinds)), [k.value for k in kinds])
    ax.set_ylim(-0.6, 1.6)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d"))  # type: ignore[no-untyped-call]
    ax.set_xlabel("captured_at (2026)")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small")
    ax.set_title(title or tr("records by captured_at", "按 captured_at 排列的记录"))
    fig.tight_layout()
    return fig


def overlap_heatmap(overlap: pd.DataFrame, ax: Any = None) -> Any:
    """The ``overlap_view`` grid as a picture: a filled cell is a shared term."""
    terms = [c for c in overlap.columns if c not in ("#matched", "candidate?")]
    ax = _axes(ax, (1.1 * max(len(terms), 2) + 2.8, 0.32 * max(len(overlap), 2) + 1.2))
    grid = overlap[terms].to_numpy().tolist()
    ax.imshow(grid if len(grid) and terms else [[0]], cmap="Blues", vmin=0, vmax=1.3, aspect="auto")
    ax.set_xticks(range(len(terms)), terms)
    ax.xaxis.tick_top()
    marks = zip(overlap.index, overlap["candidate?"], strict=True)
    labels = [f"{m}  ✔" if c else m for m, c in marks]
    ax.set_yticks(range(len(overlap)), labels)
    ax.set_xticks([x - 0.5 for x in range(1, len(terms))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(overlap))], minor=True)
    ax.grid(which="minor", color="white", lw=1.5)
    ax.tick_params(which="minor", length=0)
    label = tr(
        "query terms (a filled cell = the record shares that term; ✔ = candidate)",
        "查询词项（填色格 = 该记录含有这个词项；✔ = 候选）",
    )
    ax.set_xlabel(label)
    return ax


def funnel_bars(counts: pd.DataFrame, ax: Any = None) -> Any:
    """Horizontal bars: stored → searched → candidates → hits for the first row."""
    ax = _axes(ax, (6, 2.4))
    row = counts.iloc[0]
    stages = ["stored_records", "searched_records", "candidate_records", "hits"]
    values = [int(row[s]) for s in stages]
    colours = ["grey", "tab:blue", "tab:orange", "tab:green"]
    ax.barh(stages[::-1], values[::-1], color=colours[::-1])
    for y, v in enumerate(values[::-1]):
        ax.text(v + 0.2, y, str(v), va="center")
    ax.set_xlim(0, max(values + [1]) * 1.15)
    ax.set_xlabel(tr("records", "记录数"))
    ax.set_title(
        tr(f"what each stage keeps for {row['query']!r}", f"各阶段为 {row['query']!r} 留下的记录"),
        fontsize="medium",
    )
    return ax


def recency_curve(
    days: int = 120,
    ax: Any = None,
    *,
    scores: pd.DataFrame | None = None,
    as_of: datetime | None = None,
) -> Any:
    """recency = 1 / (1 + age/30) against age; given a ``score_view`` and its ``as_of``,
    each candidate marked at its own age."""
    ax = _axes(ax, (6, 3))
    ages = [d / 2 for d in range(days * 2 + 1)]
    moment = as_of_at_noon(as_of) if as_of is not None else SAMPLE_AS_OF
    # The curve is drawn with the library's own recency function, never a copy of it.
    curve = [recency_of(moment - timedelta(days=a), moment) for a in ages]
    ax.plot(ages, curve, color="tab:blue", label="1 / (1 + age / 30)")
    if scores is not None and as_of is not None and len(scores):
        for memory_id, captured, value in zip(
            scores["memory_id"], scores["captured_at"], scores["recency"], strict=True
        ):
            age = (moment - parse_timestamp(captured)).total_seconds() / 86_400
            point, name = (max(age, 0.0), value), memory_id.replace("conversation-", "c-")
            ax.plot([point[0]], [value], "o", color="tab:orange")
            ax.annotate(name, point, textcoords="offset points", xytext=(4, 4), fontsize="small")
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.axvline(RECENCY_HALF_LIFE_DAYS, color="grey", lw=0.8, ls=":")
    ax.set_xlabel(tr("age in days (as_of − captured_at)", "距今天数（as_of − captured_at）"))
    ax.set_ylabel("recency")
    ax.set_ylim(0, 1.05)
    ax.set_title(tr("Recency decays but never reaches 0", "新近度会衰减，但永不归零"))
    return ax


def contribution_bars(scores: pd.DataFrame, ax: Any = None) -> Any:
    """Stacked bars: lexical and recency contributions of each candidate's total."""
    ax = _axes(ax, (7, 0.45 * max(len(scores), 2) + 1.3))
    labels = list(scores["memory_id"])[::-1]
    lexical = list(scores["lexical_contribution"])[::-1]
    recency = list(scores["recency_contribution"])[::-1]
    lexical_label = tr(
        f"lexical ({LEXICAL_WEIGHT} × coverage)", f"词项（{LEXICAL_WEIGHT} × 覆盖率）"
    )
    recency_label = tr(
        f"recency ({RECENCY_WEIGHT} × recency)", f"新近度（{RECENCY_WEIGHT} × 新近度）"
    )
    ax.barh(labels, lexical, color="tab:blue", label=lexical_label)
    ax.barh(labels, recency, left=lexical, color="tab:orange", label=recency_label)
    if "total" in scores:
        for y, (left, width, total) in enumerate(
            zip(lexical, recency, list(scores["total"])[::-1], strict=True)
        ):
            ax.text(left + width + 0.01, y, f"{total:.6f}", va="center", fontsize="small")
    ax.set_xlim(0, 1.15)
    ax.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_xlabel(tr("score (total = lexical + recency)", "评分（total = 词项 + 新近度）"))
    ax.legend(
        loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize="small", frameon=False
    )
    return ax


def rank_keys_plot(frame: pd.DataFrame, ax: Any = None) -> Any:
    """A ``rank_keys_view`` as bars, each labelled with the key that ranked it."""
    ax = _axes(ax, (7.5, 0.5 * max(len(frame), 2) + 1.2))
    labels = [
        tr(f"{memory_id} (rank {rank})", f"{memory_id}（第 {rank} 名）")
        if rank is not pandas().NA
        else tr(f"{memory_id} (past limit)", f"{memory_id}（超出 limit）")
        for rank, memory_id in zip(frame["rank"], frame["memory_id"], strict=True)
    ]
    positions = list(range(len(frame)))
    colors = ["tab:blue" if ranked else "lightgrey" for ranked in frame["rank"].notna()]
    ax.barh(positions, frame["total"], color=colors)
    for y, (total, coverage, key) in enumerate(
        zip(frame["total"], frame["lexical_coverage"], frame["ahead_of_next_by"], strict=True)
    ):
        note = tr(f"{total:.6f} · coverage {coverage:.2f}", f"{total:.6f} · 覆盖率 {coverage:.2f}")
        if key:
            note += tr(f" · ahead by {key}", f" · 凭 {key} 领先")
        ax.text(total + 0.01, y, note, va="center", fontsize="small")
    ax.set_yticks(positions, labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 2.0)
    ax.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_xlabel(
        tr("total (grey: scored, then cut by the limit)", "total（灰色：已评分，但被 limit 截掉）")
    )
    label = tr(
        "ranked candidates and the key that ordered each pair",
        "排好序的候选，以及决定每一对先后的排序键",
    )
    ax.set_title(label)
    ax.figure.tight_layout()
    return ax


def order_vs_rank_plot(
    stores: Mapping[str, MemoryStore], query: str, as_of: datetime, limit: int = 10
) -> Any:
    """Left: where each hit sits in each store's file. Right: the rank it gets."""
    labels = list(stores)
    hits = {label: recall(store, query, as_of, limit).hits for label, store in stores.items()}
    ids = [h.memory_id for h in hits[labels[0]]]
    fig, (left, right) = pyplot().subplots(1, 2, figsize=(10, 3.8), sharey=False)
    for memory_id in ids:
        orders = [[r.memory_id for r in stores[label].read_all()] for label in labels]
        positions = [order.index(memory_id) + 1 for order in orders]
        left.plot(labels, positions, marker="o", label=memory_id)
        right.plot(
            labels,
            [next(h.rank for h in hits[label] if h.memory_id == memory_id) for label in labels],
            marker="o",
            label=memory_id,
        )
    left.set_title(tr("line in the JSONL file (shuffled)", "在 JSONL 文件中的行（已打乱）"))
    left.set_ylabel(tr("position", "位置"))
    right.set_title(tr("rank (the same in every store)", "rank（在每个存储中都相同）"))
    right.set_ylabel("rank")
    for ax in (left, right):
        ax.invert_yaxis()
        ax.tick_params(axis="x", labelrotation=30)
    right.legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize="small")
    label = tr(
        f"query {query!r}: insertion order moves, rank does not",
        f"查询 {query!r}：插入顺序会变，rank 不变",
    )
    fig.suptitle(label)
    fig.tight_layout()
    return fig


def hits_per_limit_plot(sweeps: Mapping[str, pd.DataFrame]) -> Any:
    """Hits against limit per query (``limit_sweep`` frames)."""
    fig, ax = pyplot().subplots(figsize=(6.5, 3.6))
    ax.plot([1, 10], [1, 10], color="grey", lw=0.8, ls=":", label="hits = limit")
    # Thick lines first, so a line that runs along another stays visible on top of it.
    widths = [7 - 2 * i for i in range(len(sweeps))]
    for (label, frame), width in zip(sweeps.items(), widths, strict=True):
        ax.plot(frame["limit"], frame["hits"], marker="o", lw=max(width, 1.5), label=label)
    ax.set_xlabel("limit")
    ax.set_ylabel(tr("hits returned", "返回的命中数"))
    ax.set_xticks(range(1, 11))
    ax.set_ylim(-0.3, 10.5)
    label = tr(
        "limit caps the hits; the candidates cap them too", "limit 限制命中数，候选数量同样限制它"
    )
    ax.set_title(label)
    ax.legend(fontsize="small", loc="upper left")
    fig.tight_layout()
    return fig


def budget_plot(sweep: pd.DataFrame, budget: int = 4_000) -> Any:
    """Rendered characters per limit (a ``limit_sweep``) against a prompt budget."""
    fig, ax = pyplot().subplots(figsize=(6.5, 3.6))
    over = sweep["rendered_chars"] > budget
    colors = ["tab:red" if o else "tab:blue" for o in over]
    ax.bar(sweep["limit"], sweep["rendered_chars"], color=colors)
    ax.axhline(budget, color="black", lw=1, ls="--")
    note = tr(f" budget {budget:,} characters", f" 预算 {budget:,} 字符")
    ax.text(0.6, budget, note, va="bottom", fontsize="small")
    ax.set_xticks(list(sweep["limit"]))
    ax.set_xlabel("limit")
    ax.set_ylabel(tr("characters in <recalled_context>", "<recalled_context> 中的字符数"))
    ax.set_ylim(0, max(budget, int(sweep["rendered_chars"].max())) * 1.15)
    label = tr(
        "the rendered block grows with each hit (red: over budget)",
        "渲染块随每个命中增长（红色：超出预算）",
    )
    ax.set_title(label)
    fig.tight_layout()
    return fig
