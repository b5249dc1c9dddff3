"""Plots: matplotlib pictures of views and frames, one Axes or Figure each (matplotlib is
imported on first use). Every label goes through ``tr``; ``pyplot`` draws Chinese in the
packaged CJK font (see ``_common.pyplot``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..records import MemoryKind, StoredMemory, parse_timestamp
from ..sample import SAMPLE_AS_OF
from ..score import LEXICAL_WEIGHT, RECENCY_HALF_LIFE_DAYS, RECENCY_WEIGHT, recency_of
from ..stores._base import MemoryStore
from ._common import pandas
from ._common import pyplot as pyplot  # the notebooks import it from here
from .language import tr
from .views import as_of_at_noon, recall

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def _axes(ax: Any, figsize: tuple[float, float]) -> Any:
    plt = pyplot()  # always: it sets the CJK fallback font the labels are drawn with
    return plt.subplots(figsize=figsize)[1] if ax is None else ax


def _kind(value: str) -> str:
    """A record kind as the edition names it."""
    names = {"conversation": "对话记录", "profile": "用户画像", "retraction": "撤回记录"}
    return tr(value, names.get(value))


def stored_vs_captured(records: pd.DataFrame, ax: Any = None) -> Any:
    """Per record (a ``records_frame``): a dot at ``captured_at`` (what ranking uses), a
    diamond at ``stored_at``; the line between is how late the evidence reached the store."""
    import matplotlib.dates as mdates

    ax = _axes(ax, (7, 0.3 * max(len(records), 2) + 1.2))
    labels = list(records["memory_id"])[::-1]
    captured = [parse_timestamp(t) for t in records["captured_at"]][::-1]
    stored = [parse_timestamp(t) for t in records["stored_at"]][::-1]
    for y, (c, s) in enumerate(zip(captured, stored, strict=True)):
        ax.plot([c, s], [y, y], color="lightgrey", lw=1, zorder=1)
    captured_label = tr("captured_at", "captured_at（事件时间）")
    stored_label = tr("stored_at", "stored_at（入库时间）")
    rows = range(len(labels))
    ax.scatter(captured, rows, color="tab:blue", zorder=2, label=captured_label)
    ax.scatter(stored, rows, color="tab:orange", marker="D", zorder=2, label=stored_label)
    ax.set_yticks(rows, labels)
    ax.legend(loc="lower left", fontsize="small")
    locator = mdates.AutoDateLocator()  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    title = tr(
        "captured_at (the event) vs stored_at (the write)",
        "captured_at（事件时间）与 stored_at（入库时间）",
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
        ax.scatter(live, [row] * len(live), color=color, zorder=3, label=_kind(kind.value))
        if dead:
            label = tr(f"{kind.value}, retracted", f"{_kind(kind.value)}，已撤回")
            ax.scatter(
                dead, [row] * len(dead), marker="x", s=80, color="tab:red", zorder=4, label=label
            )
    if latest is not None:
        label = tr(f"injected: {latest.memory_id}", f"会话启动时注入：{latest.memory_id}")
        ax.scatter(
            [when(latest)], [1], s=260, facecolors="none", edgecolors="black", zorder=5, label=label
        )
    marked = retracted | ({latest.memory_id} if latest is not None else set())
    above = {"textcoords": "offset points", "xytext": (0, 12), "ha": "center", "fontsize": "small"}
    for record in records:
        if record.memory_id in marked:
            ax.annotate(record.memory_id, (when(record), kinds.index(record.kind)), **above)
    ax.margins(x=0.12)
    ax.set_yticks(range(len(kinds)), [_kind(k.value) for k in kinds])
    ax.set_ylim(-0.6, 1.6)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d"))  # type: ignore[no-untyped-call]
    ax.set_xlabel(tr("captured_at (2026)", "captured_at（事件时间，2026 年）"))
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
    ax.plot(ages, curve, color="tab:blue", label=tr("1 / (1 + age / 30)", "1 / (1 + 天数 / 30)"))
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
    ax.set_ylabel(tr("recency", "新近度（recency）"))
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
        f"lexical ({LEXICAL_WEIGHT} × coverage)", f"词面（{LEXICAL_WEIGHT} × 覆盖率）"
    )
    recency_label = tr(
        f"recency ({RECENCY_WEIGHT} × recency)", f"新近度（{RECENCY_WEIGHT} × 新近度）"
    )
    ax.barh(labels, lexical, color="tab:blue", label=lexical_label)
    ax.barh(labels, recency, left=lexical, color="tab:orange", label=recency_label)
    if "total" in scores:
        totals = list(scores["total"])[::-1]
        for y, (left, width, total) in enumerate(zip(lexical, recency, totals, strict=True)):
            ax.text(left + width + 0.01, y, f"{total:.6f}", va="center", fontsize="small")
    ax.set_xlim(0, 1.15)
    ax.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_xlabel(tr("score (total = lexical + recency)", "评分（total = 词面 + 新近度）"))
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
    orders = [[r.memory_id for r in stores[label].read_all()] for label in labels]
    ranks = [{h.memory_id: h.rank for h in hits[label]} for label in labels]
    for memory_id in ids:
        positions = [order.index(memory_id) + 1 for order in orders]
        left.plot(labels, positions, marker="o", label=memory_id)
        right.plot(labels, [rank[memory_id] for rank in ranks], marker="o", label=memory_id)
    left.set_title(tr("line in the JSONL file (shuffled)", "在 JSONL 文件中的行（已打乱）"))
    left.set_ylabel(tr("position", "位置"))
    right.set_title(tr("rank (the same in every store)", "rank（在每个存储中都相同）"))
    right.set_ylabel(tr("rank", "名次（rank）"))
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
    label = tr("hits = limit", "命中数 = limit")
    ax.plot([1, 10], [1, 10], color="grey", lw=0.8, ls=":", label=label)
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


# -- notebooks 11 and 12: the rankers on LoCoMo, cold and warm recall against N ------------
# One colour per ranker, of distinct hues (the two hybrid variants too), the same in both
# panels; a ranker not listed takes the next colour of the tab10 cycle.
RANKER_COLOURS: Mapping[str, str] = {
    "baseline": "#7f7f7f",
    "bm25": "#1f77b4",
    "bm25+stopwords": "#2ca02c",
    "hybrid": "#ff7f0e",
    "hybrid/lexical-only": "#9467bd",
}
# LoCoMo's question categories 1-4, as the report keys them.
LOCOMO_CATEGORIES: Mapping[str, tuple[str, str]] = {
    "1": ("1 multi-hop", "1 多跳"),
    "2": ("2 temporal", "2 时间"),
    "3": ("3 open-domain", "3 开放域"),
    "4": ("4 single-hop", "4 单跳"),
}


def _ranker_colours(names: Sequence[str]) -> list[str]:
    spare = iter(["#d62728", "#8c564b", "#e377c2", "#bcbd22", "#17becf"])
    return [RANKER_COLOURS.get(name) or next(spare, "#000000") for name in names]


def rankers_recall_plot(report: Mapping[str, Any]) -> Any:
    """A rankers report (``load_report("rankers-dev-split")``): overall R@10 per ranker as
    horizontal bars (names never collide), then R@10 per question category, a bar per ranker
    in the same colours."""
    names = list(report)
    colours = _ranker_colours(names)
    overall = [float(report[name]["overall"]["R@10"]) for name in names]
    fig, (left, right) = pyplot().subplots(
        1, 2, figsize=(11.5, 3.8), gridspec_kw={"width_ratios": [1, 1.25]}
    )
    positions = list(range(len(names)))
    left.barh(positions, overall, color=colours, height=0.7)
    left.set_yticks(positions, names)
    left.invert_yaxis()
    for y, value in enumerate(overall):
        left.text(value + 0.015, y, f"{value:.3f}", va="center", fontsize=8)
    left.set_xlim(0, 1.15)
    left.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    left.set_xlabel(tr("R@10 (categories 1-4)", "R@10（类别 1–4）"))
    left.set_title(tr("overall (in-sample)", "总体（样本内）"))
    categories = [c for c in LOCOMO_CATEGORIES if all(c in report[n]["by_category"] for n in names)]
    width = 0.8 / max(len(names), 1)
    for i, (name, colour) in enumerate(zip(names, colours, strict=True)):
        xs = [c + (i - (len(names) - 1) / 2) * width for c in range(len(categories))]
        values = [float(report[name]["by_category"][c]["R@10"]) for c in categories]
        right.bar(xs, values, width=width, color=colour, label=name)
    # "1 multi-hop" as "1" over "multi-hop": four names fit under their groups at any width.
    names_shown = [tr(*LOCOMO_CATEGORIES[c]).replace(" ", "\n", 1) for c in categories]
    right.set_xticks(range(len(categories)), names_shown)
    right.set_ylim(0, 1)
    right.set_ylabel("R@10")
    right.set_title(tr("R@10 by question category", "各问题类别的 R@10"))
    right.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def cold_warm_plot(against_n: pd.DataFrame, floor_ms: float) -> Any:
    """Notebook 12's ``against_n`` (per N and ranker: warm and cold rare-term p50, and the
    bm25s peer) on log axes, with the floor (python + ``import memlib``) as a line named in
    the legend, outside the plot, where no line can run through its label."""
    fig, ax = pyplot().subplots(figsize=(10, 4.5))
    for ranker in dict.fromkeys(against_n["ranker"]):
        part = against_n[against_n["ranker"] == ranker]
        warm = tr(f"{ranker}, warm", f"{ranker}，热启动")
        cold = tr(f"{ranker}, cold (new process)", f"{ranker}，冷启动（新进程）")
        (line,) = ax.plot(part["N"], part["warm, rare (ms)"], marker="o", label=warm)
        ax.plot(part["N"], part["cold, rare (ms)"], "s:", color=line.get_color(), label=cold)
    peer = against_n.drop_duplicates("N")
    label = tr("bm25s, warm (peer)", "bm25s，热启动（对照）")
    ax.plot(peer["N"], peer["bm25s warm, rare (ms)"], "^--", color="gray", label=label)
    label = tr(
        f"floor: python + import memlib ({floor_ms:.0f} ms)",
        f"下限：python 启动 + import memlib（{floor_ms:.0f} 毫秒）",
    )
    ax.axhline(floor_ms, color="black", linewidth=0.8, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(tr("records N", "记录数 N"))
    ax.set_ylabel(
        tr("recall p50, JSONL store (ms, log scale)", "召回 p50，JSONL 存储（毫秒，对数刻度）")
    )
    ax.set_title(
        tr(
            "Cold and warm recall against N (rare-term queries)",
            "冷启动与热启动召回随 N 的变化（罕见词项查询）",
        )
    )
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    return fig
