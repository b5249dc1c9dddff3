"""In the zh edition, the words the course helpers write themselves are Chinese: no label of a
view, frame, explorer or plot holds an English phrase.

The rule: a phrase is two or more ASCII words in a row (letters only, separated by spaces,
commas, colons). Identifiers are not words (``bm25``, ``memory_id``, ``R@10``,
``hybrid/lexical-only`` hold a digit, ``_``, ``@``, ``/`` or ``-``), and neither is what the
learner or the data brings: quoted text, the queries the helpers were given.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from memlib import MemorySource
from memlib.notebook import explorers, frames, views
from memlib.sample import SAMPLE_AS_OF, SAMPLE_QUERY, open_sample_store

sys.path.insert(0, str(Path(__file__).parent))
from test_plot_labels import CJK, DRAWINGS  # noqa: E402  (the catalogue of plot helpers)

_WORD = r"[A-Za-z]+(?:'[a-z]+)?"
# Two words in a row; a word is bounded by space, comma, start or end (not by _ @ / - . +).
PHRASE = re.compile(rf"(?<![\w@/.+-]){_WORD}(?:[ ,:;]+{_WORD})+(?![\w@/.+-])")
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
# Code, not prose: shown as it is typed.
CODE = ("import memlib",)
# What the drawings and views below are given: the learner's words, not the course's.
DATA = (
    *(SAMPLE_QUERY, "memory recall", "memory embedding reranker", "remote memory design"),
    *("conversation memory", "the memory"),
)


def english_phrases(text: str) -> list[str]:
    text = QUOTED.sub("", text)
    for allowed in (*CODE, *DATA):
        text = text.replace(allowed, "")
    return PHRASE.findall(text)


def test_the_rule_finds_english_and_passes_identifiers() -> None:
    assert english_phrases("searched, no shared term") == ["searched, no shared term"]
    assert english_phrases("hybrid target") == ["hybrid target"]
    assert english_phrases("bm25+stopwords 目标 ≥ 0.60") == []
    assert english_phrases("R@10（类别 1–4）") == []
    assert english_phrases("hybrid/lexical-only") == []
    assert english_phrases("memory_id · 查询 'layered memory design'") == []
    assert english_phrases("下限：python 启动 + import memlib（85 毫秒）") == []
    assert english_phrases("not searched (profile)") == ["not searched"]
    assert english_phrases("floor: python + import memlib") == ["floor: python"]


def _store(root: Path) -> Any:
    store = open_sample_store(root)
    request = MemorySource(
        source_id="request-0810",
        source_type="user_request",
        title="Forget",
        captured_at="2026-08-10T07:00:00Z",
    )
    store.retract("conversation-003", reason="Asked to forget.", source=request)
    return store


# -- plots ----------------------------------------------------------------------------------


def _texts(figure: Any) -> list[str]:
    from matplotlib.text import Text

    figure.canvas.draw()
    return [t.get_text() for t in figure.findobj(Text) if t.get_text()]


@pytest.mark.parametrize("name", sorted(DRAWINGS))
def test_no_plot_label_is_english_in_zh(name: str, tmp_path: Path, zh: None) -> None:
    from matplotlib.figure import Figure

    from memlib.notebook.plots import pyplot

    drawn = DRAWINGS[name][0](tmp_path)
    figure = drawn if isinstance(drawn, Figure) else drawn.figure
    try:
        texts = _texts(figure)
    finally:
        pyplot().close(figure)
    assert {t: english_phrases(t) for t in texts if english_phrases(t)} == {}


# -- views, frames and the explorer ---------------------------------------------------------


def test_candidate_decisions_are_chinese(tmp_path: Path, zh: None) -> None:
    view = views.candidates_view(_store(tmp_path), SAMPLE_QUERY, SAMPLE_AS_OF, 5)
    decisions = set(view["decision"])
    assert len(decisions) == 5, decisions  # candidate, searched, profile, retraction, retracted
    assert {d: english_phrases(d) for d in decisions if english_phrases(d)} == {}
    # "candidate" is the stage's own name (exercise 03 selects rows by it); the rest is prose.
    assert all(CJK.search(d) for d in decisions - {"candidate"})


def test_the_other_view_and_frame_labels_are_chinese(tmp_path: Path, zh: None) -> None:
    labels = [
        repr(views.Rendered("")),
        views.deciding_key({k: 1 for k in views.SORT_KEYS}, {k: 1 for k in views.SORT_KEYS}),
        frames.payload_outline('{"hits": [1, 2]}')["value"].iloc[0],
    ]
    damaged = tmp_path / "records.jsonl"
    damaged.write_bytes(b'{"memory_id": "m-1"}\n{not json\n')
    labels.append(frames.file_lines_frame(damaged)["memory_id"].iloc[1])
    assert {t: english_phrases(t) for t in labels if english_phrases(t)} == {}
    assert all(CJK.search(t) for t in labels), labels


def test_the_agent_loops_ending_is_chinese(tmp_path: Path, zh: None) -> None:
    frame = views.api_failures_frame(
        open_sample_store(tmp_path), SAMPLE_QUERY, SAMPLE_AS_OF, {"ok": ()}
    )
    ending = frame["loop ends with"].iloc[0]
    assert CJK.search(ending) and english_phrases(ending) == [], ending


def _html_text(html: str) -> str:
    return re.sub(r"<code>[^<]*</code>", "", html)


def records_of_kind(store: Any, query: str, as_of: Any, limit: int, kind: str | None = None) -> Any:
    frame = views.records_view(store, query, as_of, limit)
    return frame if kind is None else frame[frame["kind"] == kind]


def test_the_explorer_speaks_chinese(tmp_path: Path, zh: None) -> None:
    store = open_sample_store(tmp_path)
    box = explorers.explorer(
        records_of_kind,
        store,
        query=SAMPLE_QUERY,
        as_of=SAMPLE_AS_OF,
        choices={"kind": [None, "profile"]},
    )
    # children: controls, drop-downs, status line, output
    status = box.children[2].value
    options = [label for label, _ in box.controls["kind"].options]
    shown = [_html_text(status), *options]
    assert {t: english_phrases(t) for t in shown if english_phrases(t)} == {}
    assert CJK.search(_html_text(status)) and CJK.search(options[0]), shown
    assert "records_of_kind" in status and f"{SAMPLE_AS_OF:%Y-%m-%d}" in status


def test_the_explorer_status_line_in_english_is_unchanged() -> None:
    from datetime import UTC, datetime

    line = explorers.status_line("rank_view", datetime(2026, 8, 10, 12, tzinfo=UTC), 3)
    assert line == "<code>rank_view</code> at 2026-08-10 12:00 UTC — 3 rows"


def test_single_word_labels_are_chinese_too(tmp_path: Path, zh: None) -> None:
    """Kind names and the recency axis: one English word each, so the phrase rule alone would
    pass them."""
    from memlib.notebook import plots

    timeline = plots.records_timeline(_store(tmp_path / "t"))
    curve = plots.recency_curve().figure
    try:
        (ax,) = timeline.axes
        kinds = [t.get_text() for t in ax.get_yticklabels()]
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        shown = kinds + legend + [curve.axes[0].get_ylabel()]
        assert [t for t in shown if not CJK.search(t)] == []
    finally:
        plots.pyplot().close("all")
