"""Every notebook of every edition presents as slides (RISE): each ``## `` heading opens a
slide and each ``### `` heading a slide or sub-slide — wherever it stood in the text, since
``python -m memlib.notebook slides`` splits a cell at an inner heading — and every notebook
carries the RISE settings. The split keeps the text and, for the English notebooks, splits
the editions' catalogs alike, so an edition built afterwards is the split edition.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from memlib.notebook.__main__ import main
from memlib.notebook.slides import RISE, split_catalog, split_text, with_slides
from memlib.notebook.solutions import solution_notebook, sources
from memlib.notebook.translate import (
    StaleTranslationError,
    catalog_path,
    english_hash,
    parse_catalog,
    translated_notebook,
)

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "notebooks"
EVERY = sorted(FOLDER.rglob("*.ipynb"))  # student and solution editions, every language
ENGLISH = sorted(FOLDER.glob("*.ipynb"))
EDITIONS = sorted(p.name for p in (REPO / "i18n").iterdir() if p.is_dir())
FENCE = re.compile(r"^ {0,3}(```|~~~)")


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell: dict[str, Any]) -> str:
    return "".join(cell["source"])


def _kind(cell: dict[str, Any]) -> str | None:
    return cell.get("metadata", {}).get("slideshow", {}).get("slide_type")


def _headings(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each ``##`` / ``###`` heading outside fenced code."""
    found, fenced = [], False
    for number, line in enumerate(text.splitlines()):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and re.match(r"^#{2,3} \S", line):
            found.append((number, line))
    return found


def _notebook(*sources: str) -> dict[str, Any]:
    cells: list[dict[str, Any]] = [
        {"cell_type": "markdown", "id": f"m{i}", "metadata": {}, "source": [s]}
        for i, s in enumerate(sources)
    ]
    code: dict[str, Any] = {
        "cell_type": "code",
        "id": "k0",
        "metadata": {},
        "source": ["import memlib"],
        "outputs": [],
        "execution_count": None,
    }
    cells.insert(1, code)
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


@pytest.mark.parametrize("path", EVERY, ids=lambda p: p.relative_to(FOLDER).as_posix())
def test_every_heading_opens_a_slide(path: Path) -> None:
    notebook = _load(path)
    name = path.relative_to(FOLDER).as_posix()
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        for line_number, line in _headings(_source(cell)):
            leading = _source(cell).splitlines()[:line_number]
            assert not "".join(leading).strip(), (
                f"{name} cell {index}: {line!r} stands inside the cell, so no slide starts "
                f"there: run python -m memlib.notebook slides --folder {path.parent.name}"
            )
            wanted = {"slide"} if line.startswith("## ") else {"slide", "subslide"}
            assert _kind(cell) in wanted, f"{name} cell {index}: {line!r} is not on a new slide"
    assert notebook["metadata"].get("rise", {}) | RISE == notebook["metadata"].get("rise"), (
        f"{name}: no RISE settings: run python -m memlib.notebook slides"
    )
    assert _kind(notebook["cells"][0]) == "slide", f"{name}: the title opens no slide"
    assert notebook == with_slides(notebook), f"{name}: run python -m memlib.notebook slides"


def test_a_heading_inside_a_cell_starts_a_new_cell_and_slide() -> None:
    text = "Some words.\n\n## Second\n\nMore.\n```\n## not a heading\n```\n### Third\nEnd.\n"
    notebook = with_slides(_notebook("# Title\n\nIntro.\n\n## Goals\n\n- one", text))
    cells = notebook["cells"]
    assert [c["id"] for c in cells] == ["m0", "m0-2", "k0", "m1", "m1-2", "m1-3"]
    assert [_source(c) for c in cells if c["cell_type"] == "markdown"] == [
        "# Title\n\nIntro.",
        "## Goals\n\n- one",
        "Some words.",
        "## Second\n\nMore.\n```\n## not a heading\n```",
        "### Third\nEnd.\n",
    ]
    assert [_kind(c) for c in cells] == ["slide", "slide", "skip", None, "slide", "subslide"]
    assert notebook["metadata"]["rise"] == RISE
    assert with_slides(notebook) == notebook  # a second run changes nothing


def test_split_ids_stay_unique_and_settings_are_kept() -> None:
    notebook = _notebook("# T", "a\n## b\n## c")
    notebook["cells"][0]["id"] = "m1-2"  # already taken: the split skips it
    notebook["metadata"]["rise"] = {"theme": "serif", "scroll": False}
    out = with_slides(notebook)
    assert [c["id"] for c in out["cells"]] == ["m1-2", "k0", "m1", "m1-3", "m1-4"]
    assert out["metadata"]["rise"] == {"theme": "serif", **RISE}


def test_split_text_keeps_every_line() -> None:
    text = "# T\n\nintro\n\n\n## A\nx\n\n### B\n  \ny\n"
    parts = split_text(text)
    assert parts == ["# T\n\nintro", "## A\nx", "### B\n  \ny\n"]
    kept = [line for part in parts for line in part.splitlines() if line.strip()]
    assert kept == [line for line in text.splitlines() if line.strip()]
    assert split_text("## Only one heading\ntext") == ["## Only one heading\ntext"]


def test_a_twin_keeps_its_banner_after_the_title() -> None:
    student = _notebook("# Title\n\n## Goals")
    twin = with_slides(solution_notebook(student, "x.ipynb"))
    assert sources(twin) == sources(solution_notebook(with_slides(student), "x.ipynb"))
    assert [c["id"] for c in twin["cells"]][:3] == ["m0", "solutions-banner", "m0-2"]


def _catalog(notebook: dict[str, Any], *texts: str) -> str:
    markdown = [c for c in notebook["cells"] if c["cell_type"] == "markdown"]
    return "\n".join(
        f"<!-- cell {c['id']} en={english_hash(_source(c))} -->\n{t}\n"
        for c, t in zip(markdown, texts, strict=True)
    )


def test_a_catalog_splits_like_its_notebook() -> None:
    english = _notebook("# Title\n\n## Goals", "Words.\n\n## Next\n\nMore.", "## Kept")
    catalog = _catalog(english, "# 标题\n\n## 目标", "文字。\n\n## 下一节\n\n更多。", "## 保留")
    split = split_catalog(catalog, english, "x")
    assert parse_catalog(split)["m1-2"].text == "## 下一节\n\n更多。"
    assert split.endswith("<!-- cell m2 en=" + english_hash("## Kept") + " -->\n## 保留\n")
    built = translated_notebook(with_slides(english), parse_catalog(split), "x")
    unsplit = translated_notebook(english, parse_catalog(catalog), "x")
    assert sources(built) == sources(with_slides(unsplit))
    assert [_source(c) for c in built["cells"]][3:] == ["文字。", "## 下一节\n\n更多。", "## 保留"]
    assert split_catalog(split, with_slides(english), "x") == split  # nothing left to split
    # Split before its catalog (by an earlier run, or by hand): the same sections.
    assert split_catalog(catalog, with_slides(english), "x") == split
    # A section re-marked with its first part's hash, still holding the rest: split too.
    first = english_hash("Words.")
    remarked = catalog.replace(english_hash("Words.\n\n## Next\n\nMore."), first)
    assert split_catalog(remarked, with_slides(english), "x") == split


def test_a_catalog_without_the_heading_is_refused_and_a_stale_one_left() -> None:
    english = _notebook("# Title", "Words.\n\n## Next")
    with pytest.raises(ValueError, match="m1 splits at 1 heading"):
        split_catalog(_catalog(english, "# 标题", "文字。下一节"), english, "x")
    stale = _catalog(english, "# 标题", "文字。\n\n## 下一节").replace(
        english_hash("Words.\n\n## Next"), "0" * 12
    )
    assert split_catalog(stale, english, "x") == stale


@pytest.mark.parametrize(
    "case",
    [(lang, path) for lang in EDITIONS for path in ENGLISH],
    ids=lambda c: f"{c[0]}/{c[1].name}",
)
def test_each_edition_builds_the_same_after_the_split(case: tuple[str, Path]) -> None:
    """Splitting the built edition, or building it from the split English notebook and
    catalog, gives one notebook (so ``slides`` may run on notebooks/zh directly)."""
    lang, path = case
    english = _load(path)
    catalog = catalog_path(REPO, lang, path.name)
    if not catalog.exists():
        pytest.skip(f"no catalog yet (test_translations says so): {catalog.name}")
    text = catalog.read_text(encoding="utf-8")
    try:
        edition = translated_notebook(english, parse_catalog(text), path.name, lang)
    except StaleTranslationError as exc:
        pytest.skip(f"catalog out of date (test_translations says so): {exc}")
    split = parse_catalog(split_catalog(text, english, path.name))
    rebuilt = translated_notebook(with_slides(english), split, path.name, lang)
    assert sources(rebuilt) == sources(with_slides(edition))
    assert rebuilt == with_slides(edition)


def test_the_command_splits_notebooks_and_catalogs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    english = _notebook("# Title\n\n## Goals", "Words.\n\n## Next")
    (tmp_path / "nb" / "zh").mkdir(parents=True)
    (tmp_path / "i18n" / "zh").mkdir(parents=True)
    (tmp_path / "nb" / "01_x.ipynb").write_text(json.dumps(english), encoding="utf-8")
    catalog = tmp_path / "i18n" / "zh" / "01_x.md"
    catalog.write_text(_catalog(english, "# 标题\n\n## 目标", "文字。\n\n## 下一节"), "utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["slides", "--folder", "nb"]) == 0
    written = _load(tmp_path / "nb" / "01_x.ipynb")
    assert written == with_slides(english)
    assert set(parse_catalog(catalog.read_text(encoding="utf-8"))) == {"m0", "m0-2", "m1", "m1-2"}
    translated_notebook(written, parse_catalog(catalog.read_text(encoding="utf-8")), "x")
    before = catalog.read_text(encoding="utf-8")
    assert main(["slides", "--folder", "nb/zh"]) == 0  # an edition: its catalog untouched
    assert catalog.read_text(encoding="utf-8") == before
