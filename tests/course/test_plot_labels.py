"""Every plot helper speaks the edition's language: English words in English, Chinese in zh.

Each helper is drawn as the notebooks call it, once per language. English labels carry no
CJK; in zh the helper's titles and labels do, every text that changed is Chinese, and the
drawing finds a glyph for every character (the packaged CJK font ``plots.pyplot`` registers).
Notebook 11's ranker chart and notebook 12's cold/warm chart are also checked for layout:
no two tick labels or notes overlap, the bars' colours differ in hue, and no line runs
through the floor's label.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memlib import MemorySource
from memlib.notebook import fixtures, frames, history, plots, views
from memlib.notebook.language import use_language
from memlib.notebook.plots import pyplot
from memlib.sample import SAMPLE_AS_OF, SAMPLE_QUERY, open_sample_store

CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


def _retracted_store(root: Path) -> Any:
    store = open_sample_store(root)
    request = MemorySource(
        source_id="request-0810",
        source_type="user_request",
        title="Forget",
        captured_at="2026-08-10T07:00:00Z",
    )
    store.retract("profile-002", reason="Misattributed.", source=request)
    store.retract("conversation-003", reason="Asked to forget.", source=request)
    return store


def _order_stores(root: Path) -> dict[str, Any]:
    stores = {"original": fixtures.shuffled_sample_store(root, None)}
    stores.update({f"seed {s}": fixtures.shuffled_sample_store(root, s) for s in (1, 2)})
    return stores


def _budget_sweep(root: Path) -> Any:
    return views.limit_sweep(open_sample_store(root), "the memory", SAMPLE_AS_OF)


def _against_n() -> tuple[Any, float]:
    """Notebook 12's ``against_n`` table and floor, built as its cell builds them."""
    import pandas as pd

    from memlib.notebook.reports import load_report

    report = load_report("bench")
    rankers = ("baseline", "bm25", "bm25+stopwords")
    cold = {
        (row["n"], ranker): row[ranker]["jsonl_index"]["wall_s"] * 1000
        for row in report["cold"]["rows"]
        for ranker in rankers
        if ranker in row
    }
    frame = pd.DataFrame(
        [
            {
                "N": size["n"],
                "ranker": ranker,
                "warm, rare (ms)": size["warm_lexical"]["jsonl"][ranker]["rare"]["p50_ms"],
                "bm25s warm, rare (ms)": size["warm_lexical"]["bm25s"]["rare"]["p50_ms"],
                "cold, rare (ms)": cold.get((size["n"], ranker), float("nan")),
            }
            for size in report["sizes"]
            if "warm_lexical" in size
            for ranker in rankers
        ]
    )
    return frame, report["cold"]["floor"]["wall_s"] * 1000


def _rankers_report() -> Any:
    from memlib.notebook.reports import load_report

    return load_report("rankers-dev-split")


def _abstention_report() -> Any:
    from memlib.notebook.reports import load_report

    return load_report("abstention-dev-split")


# Each helper with its arguments (built in a fresh folder) and the parts of its picture that
# are prose, so must be Chinese in zh. Field names (`recency`, `limit` …) stay as they are.
DRAWINGS: dict[str, tuple[Callable[[Path], Any], tuple[str, ...]]] = {
    "stored_vs_captured": (
        lambda root: plots.stored_vs_captured(
            frames.records_frame(open_sample_store(root).read_all())
        ),
        ("title",),
    ),
    "records_timeline": (
        lambda root: plots.records_timeline(_retracted_store(root)),
        ("title", "legend"),
    ),
    "overlap_heatmap": (
        lambda root: plots.overlap_heatmap(
            views.overlap_view(open_sample_store(root), "remote memory design", SAMPLE_AS_OF, 5)
        ),
        ("xlabel",),
    ),
    "funnel_bars": (
        lambda root: plots.funnel_bars(
            views.counts_view(open_sample_store(root), SAMPLE_QUERY, SAMPLE_AS_OF, 2)
        ),
        ("title", "xlabel"),
    ),
    "recency_curve": (
        lambda root: plots.recency_curve(
            scores=views.score_view(open_sample_store(root), SAMPLE_QUERY, SAMPLE_AS_OF, 5),
            as_of=SAMPLE_AS_OF,
        ),
        ("title", "xlabel"),
    ),
    "contribution_bars": (
        lambda root: plots.contribution_bars(
            views.score_view(open_sample_store(root), "conversation memory", SAMPLE_AS_OF, 5)
        ),
        ("xlabel", "legend"),
    ),
    "rank_keys_plot": (
        lambda root: plots.rank_keys_plot(
            views.rank_keys_view(
                open_sample_store(root), "memory embedding reranker", SAMPLE_AS_OF, 3
            )
        ),
        ("title", "xlabel", "text", "yticks"),
    ),
    "order_vs_rank_plot": (
        lambda root: plots.order_vs_rank_plot(
            _order_stores(root), "memory embedding reranker", SAMPLE_AS_OF
        ),
        ("suptitle", "title", "ylabel"),
    ),
    "hits_per_limit_plot": (
        lambda root: plots.hits_per_limit_plot(
            {
                q: views.limit_sweep(open_sample_store(root / "s"), q, SAMPLE_AS_OF)
                for q in (SAMPLE_QUERY, "memory recall")
            }
        ),
        ("title", "ylabel"),
    ),
    "budget_plot": (
        lambda root: plots.budget_plot(_budget_sweep(root), 4_000),
        ("title", "ylabel", "text"),
    ),
    "rankers_recall_plot": (
        lambda root: plots.rankers_recall_plot(_rankers_report()),
        ("title", "xlabel", "xticks"),
    ),
    "cold_warm_plot": (lambda root: plots.cold_warm_plot(*_against_n()), ("title", "legend")),
    # notebook 14's plot (memlib.notebook.history), drawn in the same font
    "abstention_plot": (
        lambda root: history.abstention_plot(_abstention_report()),
        ("title", "xlabel", "ylabel"),
    ),
}


def _figure(drawn: Any) -> Any:
    from matplotlib.figure import Figure

    return drawn if isinstance(drawn, Figure) else drawn.figure


def _draw(name: str, root: Path) -> tuple[dict[str, list[str]], list[str], list[str]]:
    """The prose parts of ``name``'s picture, every text in it, and the glyph warnings."""
    plt = pyplot()
    figure = _figure(DRAWINGS[name][0](root))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            figure.canvas.draw()
        from matplotlib.text import Text

        everything = [t.get_text() for t in figure.findobj(Text) if t.get_text()]
        parts: dict[str, list[str]] = {
            key: []
            for key in (
                "suptitle",
                "title",
                "xlabel",
                "ylabel",
                "legend",
                "text",
                "yticks",
                "xticks",
            )
        }
        if figure._suptitle is not None:
            parts["suptitle"].append(figure._suptitle.get_text())
        for ax in figure.axes:
            parts["title"] += [ax.get_title(loc) for loc in ("left", "center", "right")]
            parts["xlabel"].append(ax.get_xlabel())
            parts["ylabel"].append(ax.get_ylabel())
            legend = ax.get_legend()
            if legend is not None:
                parts["legend"] += [t.get_text() for t in legend.get_texts()]
            parts["text"] += [t.get_text() for t in ax.texts]
            parts["yticks"] += [t.get_text() for t in ax.get_yticklabels()]
            parts["xticks"] += [t.get_text() for t in ax.get_xticklabels()]
    finally:
        plt.close(figure)
    parts = {key: [v for v in values if v] for key, values in parts.items()}
    missing = [str(w.message) for w in caught if "missing from font" in str(w.message)]
    return parts, everything, missing


@pytest.mark.parametrize("name", sorted(DRAWINGS))
def test_english_labels_carry_no_chinese(name: str, tmp_path: Path) -> None:
    parts, everything, missing = _draw(name, tmp_path)
    for part in DRAWINGS[name][1]:
        assert parts[part], f"{name} draws no {part}"
    assert [t for t in everything if CJK.search(t)] == []
    assert missing == []


@pytest.mark.parametrize("name", sorted(DRAWINGS))
def test_chinese_labels_are_chinese_and_draw(name: str, tmp_path: Path, zh: None) -> None:
    use_language("en")
    _, english, _ = _draw(name, tmp_path / "en")
    use_language("zh")
    parts, chinese, missing = _draw(name, tmp_path / "zh")
    for part in DRAWINGS[name][1]:
        assert any(CJK.search(text) for text in parts[part]), f"{name}: {part} {parts[part]}"
    # A text that is not the English one is a translation, so it must hold Chinese.
    changed = sorted(set(chinese) - set(english))
    assert changed, f"{name} draws the same texts in both languages"
    assert [t for t in changed if not CJK.search(t)] == []
    assert missing == [], f"{name}: {missing}"


# -- notebook 13's tables: their prose headers and row labels follow the language too ------


def _tables(root: Path) -> dict[str, Any]:
    from memlib.notebook import boundaries

    store = open_sample_store(root)
    report = boundaries.ProbeReport(
        code="pass",
        sockets=0,
        connections=0,
        files_written=(),
        folders_created=(),
        processes=0,
        env_read=(),
        anthropic_imported=False,
        error=None,
        left_on_disk=(),
        printed="",
    )
    return {
        "boundary_frame": boundaries.boundary_frame(store, SAMPLE_QUERY, SAMPLE_AS_OF),
        "checklist_frame": boundaries.checklist_frame(store, SAMPLE_QUERY, SAMPLE_AS_OF),
        "probe_frame": boundaries.probe_frame([report]),
        "commands_frame": boundaries.commands_frame(commands=("demo",)),
        "contract_shape_frame": boundaries.contract_shape_frame(store, SAMPLE_QUERY, SAMPLE_AS_OF),
        "query_id_frame": boundaries.query_id_frame(store, SAMPLE_QUERY, SAMPLE_AS_OF),
        "review_view": boundaries.review_view(store, SAMPLE_QUERY, SAMPLE_AS_OF, 5),
    }


def test_notebook_13_tables_name_their_columns_in_the_language(tmp_path: Path, zh: None) -> None:
    use_language("en")
    english = _tables(tmp_path / "en")
    use_language("zh")
    chinese = _tables(tmp_path / "zh")
    for name, frame in english.items():
        other = chinese[name]
        assert frame.shape == other.shape, name
        # The checklist shows the chapter's own Chinese items in both editions, under 清单.
        assert [c for c in frame.columns if CJK.search(c) and c != "清单"] == [], name
        renamed = [z for e, z in zip(frame.columns, other.columns, strict=True) if e != z]
        assert renamed, f"{name}: no header changed"
        assert [c for c in renamed if not CJK.search(c)] == [], name
    # Row labels: the review's outputs that are prose, not field names, are translated too.
    en_rows = list(english["review_view"].iloc[:, 2])
    zh_rows = list(chinese["review_view"].iloc[:, 2])
    changed = [z for e, z in zip(en_rows, zh_rows, strict=True) if e != z]
    assert changed and all(CJK.search(z) for z in changed)
    assert "searched_records" in zh_rows and "query_id" in zh_rows  # field names stay


# -- layout: notebook 11's ranker chart and notebook 12's cold/warm chart -------------------


def _overlapping(texts: list[Any], renderer: Any) -> list[tuple[str, str]]:
    """Pairs of visible, non-empty texts whose window extents overlap."""
    shown = [t for t in texts if t.get_visible() and t.get_text()]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in shown]
    return [
        (a, b)
        for i, (a, box) in enumerate(boxes)
        for b, other in boxes[i + 1 :]
        if box.overlaps(other)
    ]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_rankers_chart_has_no_overlapping_labels(lang: str, zh: None) -> None:
    use_language(lang)
    figure = plots.rankers_recall_plot(_rankers_report())
    try:
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        for ax in figure.axes:
            for texts in (ax.get_xticklabels(), ax.get_yticklabels(), ax.texts):
                assert _overlapping(list(texts), renderer) == []
            names = [t.get_text() for t in ax.get_yticklabels() + ax.get_xticklabels()]
            assert names, "no tick labels drawn"
    finally:
        pyplot().close(figure)


def _hue_clashes(colours: list[tuple[float, float, float]]) -> list[tuple[int, int]]:
    """Pairs of colours a reader cannot tell apart: two greys, or two hues within 30°."""
    import colorsys

    hsv = [colorsys.rgb_to_hsv(*c) for c in colours]
    clashes = []
    for i, (h1, s1, v1) in enumerate(hsv):
        for j in range(i + 1, len(hsv)):
            h2, s2, v2 = hsv[j]
            grey1, grey2 = s1 < 0.15 or v1 < 0.15, s2 < 0.15 or v2 < 0.15
            if grey1 or grey2:
                if grey1 and grey2:
                    clashes.append((i, j))
                continue
            if min(abs(h1 - h2), 1 - abs(h1 - h2)) < 30 / 360:
                clashes.append((i, j))
    return clashes


def test_the_rankers_chart_gives_each_ranker_its_own_hue() -> None:
    from matplotlib.colors import to_rgb

    report = _rankers_report()
    figure = plots.rankers_recall_plot(report)
    try:
        left, right = figure.axes
        bars = [to_rgb(p.get_facecolor()) for p in left.patches]
        assert len(bars) == len(report)
        assert _hue_clashes(bars) == []
        # The category panel uses the same colour for the same ranker.
        legend = right.get_legend()
        named = {
            t.get_text(): to_rgb(h.get_facecolor())
            for t, h in zip(legend.get_texts(), legend.legend_handles, strict=True)
        }
        names = [t.get_text() for t in left.get_yticklabels()]
        assert [named[n] for n in names] == bars
    finally:
        pyplot().close(figure)


def _crosses(line: Any, box: Any, steps: int = 400) -> bool:
    """Whether ``line`` (a Line2D) passes through ``box`` (display coordinates)."""
    import numpy as np

    xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))
    xy = xy[np.isfinite(xy).all(axis=1)]
    for start, end in zip(xy[:-1], xy[1:], strict=True):
        for t in np.linspace(0.0, 1.0, steps):
            x, y = start + t * (end - start)
            if box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1:
                return True
    return False


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_line_runs_through_the_floor_label(lang: str, zh: None) -> None:
    from matplotlib.text import Text

    use_language(lang)
    figure = plots.cold_warm_plot(*_against_n())
    try:
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        (ax,) = figure.axes
        labels = [t for t in figure.findobj(Text) if "import memlib" in t.get_text()]
        assert len(labels) == 1, [t.get_text() for t in labels]
        box = labels[0].get_window_extent(renderer)
        assert [ln.get_label() for ln in ax.get_lines() if _crosses(ln, box)] == []
    finally:
        pyplot().close(figure)
