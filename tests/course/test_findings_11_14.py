"""Course-reader findings on notebooks 11–14, each held in every edition (en, zh, and the
solution twins), read from the committed notebooks and their committed outputs.

- 11 teaches rankers, not the retrieval study: no research-log markers, one chart for the
  LoCoMo figures; the study (with the figures 11 used to show) is in docs/retrieval.md.
- 14's sentences about the foreign questions a floor silences quote the range of its own
  table, and the range it prints is that table's.
- 13 announces 14 as the optional extension after the review.
- 13.1's "try again" replies point to where to look, never to the right chapter.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from memlib.notebook.exercises import check
from memlib.notebook.language import use_language
from tests.support.notebooks import read_cells, source

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "notebooks"
EDITIONS = ("", "solutions/", "zh/", "zh/solutions/")


def _plain(cell: dict[str, Any]) -> str:
    """The text a code cell showed: its streams and its plain-text results."""
    parts = []
    for output in cell.get("outputs", []):
        if "text" in output:
            parts.append("".join(output["text"]))
        parts.append("".join(output.get("data", {}).get("text/plain", "")))
    return "".join(parts)


def _editions(name: str) -> list[Path]:
    return [FOLDER / f"{edition}{name}" for edition in EDITIONS]


def _ids(path: Path) -> str:
    return path.relative_to(FOLDER).as_posix()


# -- 11: rankers, not the research log ------------------------------------------------------

RESEARCH_LOG = (
    re.compile(r"\bsteps? [a-o]\b", re.I),  # "step a" … "step o", "steps k to o"
    re.compile(r"\b[a-o] → [a-o]\b"),  # "a → c"
    re.compile(r"第 ?[a-o] ?(?:到 ?[a-o] ?)?步"),  # 第 k 步, 第 k 到 o 步
    re.compile(r"(?<![\d.])0\.78(?!\d)"),  # the project's target
    re.compile(r"bootstrap|自助", re.I),
    re.compile(r"\btarget\b", re.I),
    re.compile(r"(?<!学习)目标"),  # 学习目标 is "learning goals"
    re.compile(r"retrieval[-_]steps|sensitivity_frame|steps_frame"),
)


@pytest.mark.parametrize("path", _editions("11_rankers.ipynb"), ids=_ids)
def test_11_has_no_research_log(path: Path) -> None:
    for index, cell in enumerate(read_cells(path)):
        text = source(cell)
        for marker in RESEARCH_LOG:
            found = marker.search(text)
            assert found is None, f"{_ids(path)} cell {index}: {found.group(0)!r}"


@pytest.mark.parametrize("path", _editions("11_rankers.ipynb")[1::2], ids=_ids)
def test_11_shows_the_locomo_figures_in_one_chart(path: Path) -> None:
    cells = read_cells(path)
    start = next(i for i, c in enumerate(cells) if source(c).startswith("## LoCoMo"))
    end = next(
        i
        for i, c in enumerate(cells)
        if i > start and source(c).startswith(("## Explore", "## 探索"))
    )
    charts = [
        i
        for i in range(start, end)
        for output in cells[i].get("outputs", [])
        if "image/png" in output.get("data", {})
    ]
    assert len(charts) == 1, f"{_ids(path)}: charts in the LoCoMo section at cells {charts}"


@pytest.mark.parametrize("path", _editions("11_rankers.ipynb")[1::2], ids=_ids)
def test_11_lesson_quotes_its_own_table(path: Path) -> None:
    """The lesson's figures (BM25, stopwords out, dense, pair vectors: cross-validated, to
    2 places) are those of the in-sample / cross-validated table above it."""
    cells = read_cells(path)
    table = next(i for i, c in enumerate(cells) if "crossval-pairs-dev-split" in source(c))
    rows = {
        line[:21].strip(): float(line.split()[-1])
        for line in _plain(cells[table]).splitlines()[1:]
        if line.strip()
    }
    wanted = ("bm25", "bm25+stopwords", "hybrid", "hybrid, pair vectors")
    lesson = next(c for c in cells[table + 1 :] if c["cell_type"] == "markdown")
    quoted = re.findall(r"(?<![\d.])0\.\d\d(?!\d)", source(lesson))
    assert quoted == [f"{rows[name]:.2f}" for name in wanted], _ids(path)


def test_the_retrieval_doc_keeps_the_grid_figures_11_showed() -> None:
    """The "other grids" table notebook 11 used to print is in docs/retrieval.md, each
    figure the report's to 3 places."""
    report = json.loads(
        (REPO / "reports" / "retrieval-steps-dev-split.json").read_text(encoding="utf-8")
    )
    doc = (REPO / "docs" / "retrieval.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([a-o]) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", doc, re.M)
    cv = {s["key"]: s["cross_validated"] for s in report["steps"]}
    expected = [
        (
            key,
            f"{cv[key]:.3f}",
            f"{grids['wider']['cross_validated']:.3f}",
            f"{grids['finer']['cross_validated']:.3f}",
        )
        for key, grids in report["grid_sensitivity"].items()
    ]
    assert rows == expected


# -- 14: the share of foreign questions silenced --------------------------------------------

RANGE = re.compile(r"(\d+(?:\.\d+)?)\s*%?\s*[–-]\s*(\d+(?:\.\d+)?)\s*%")


def _foreign_abstain(cells: list[dict[str, Any]]) -> list[float]:
    """The ``foreign abstain`` column of the committed abstention table."""
    cell = next(c for c in cells if "history.abstention_frame(" in source(c))
    (table,) = [
        "".join(o["data"]["text/plain"]) for o in cell["outputs"] if "data" in o
    ]  # the frame as shown: its header, a blank index line, one row per ranker
    lines = table.splitlines()
    header = lines[0]
    column = header.index("foreign abstain") + len("foreign abstain")
    values = []
    for line in lines[2:]:
        if not line.strip():
            break
        values.append(float(line[:column].split()[-1]))
    return values


@pytest.mark.parametrize("path", _editions("14_explain_and_time.ipynb"), ids=_ids)
def test_14_quotes_the_range_of_its_own_table(path: Path) -> None:
    cells = read_cells(path)
    shares = _foreign_abstain(cells)
    assert len(shares) == 4, shares
    expected = (f"{100 * min(shares):.1f}", f"{100 * max(shares):.1f}")
    stated = [
        (index, found.groups())
        for index, cell in enumerate(cells)
        if cell["cell_type"] == "markdown"
        for found in RANGE.finditer(source(cell))
    ]
    assert len(stated) >= 2, f"{_ids(path)}: the explanation and the takeaway quote the range"
    for index, figures in stated:
        assert figures == expected, f"{_ids(path)} cell {index}: {figures} is not {expected}"
    printed = [RANGE.findall(_plain(c)) for c in cells if c["cell_type"] == "code"]
    assert [expected] in printed, f"{_ids(path)}: the range is printed from the report"


# -- 13: 14 follows, optional ---------------------------------------------------------------

OPTIONAL = re.compile(r"optional|选读|可选")


@pytest.mark.parametrize("path", _editions("13_boundaries_and_review.ipynb"), ids=_ids)
def test_13_announces_14_as_optional(path: Path) -> None:
    cells = read_cells(path)
    body = [source(c) for c in cells[:-1] if c["cell_type"] == "markdown"]  # not the nav line
    announced = [t for t in body if "14_explain_and_time.ipynb" in t and OPTIONAL.search(t)]
    assert announced, f"{_ids(path)}: no cell links 14 as the optional extension"
    # The first one is the introduction, so a learner knows before the review starts.
    assert announced[0] == body[0], f"{_ids(path)}: the introduction should say it"


# -- 13.1: a wrong reply points to where to look ---------------------------------------------


def _wrong_owner_answers() -> list[tuple[str, str, str]]:
    from memlib.notebook.exercises.n13_boundaries import CHAPTERS, SITUATIONS, owner_of

    return [
        (label, owner_of(situation), chapter)
        for label, situation in SITUATIONS.items()
        for chapter in CHAPTERS
        if chapter != owner_of(situation)
    ]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("case", _wrong_owner_answers(), ids=lambda c: f"{c[0]}-given-{c[2]}")
def test_13_1_wrong_reply_does_not_name_the_answer(case: tuple[str, str, str], lang: str) -> None:
    from memlib.notebook.exercises.n13_boundaries import SITUATIONS, owner_of

    label, owner, given = case
    answer = {key: owner_of(s) for key, s in SITUATIONS.items()}
    answer[label] = given
    use_language(lang)
    try:
        verdict = check("13.1", answer)
    finally:
        use_language("en")
    assert verdict.status == "try again"
    number = int(owner[1:])
    assert not re.search(rf"\bs0?{number}\b|第 ?0?{number} ?章", verdict.message), verdict.message
    assert "§1" in verdict.message, f"the reply should say where to look: {verdict.message}"
