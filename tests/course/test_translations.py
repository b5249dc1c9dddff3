"""The other editions (notebooks/zh/) are built from the English notebooks and a catalog
per notebook (i18n/zh/), and cannot drift: a change to an English cell that its catalog
has not followed, or an edited edition, fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from memlib.notebook.exercises import STATUS_WORDS
from memlib.notebook.solutions import answer_cells, solution_notebook, sources
from memlib.notebook.translate import (
    StaleTranslationError,
    catalog_path,
    english_hash,
    parse_catalog,
    translated_notebook,
)

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "notebooks"
ENGLISH = sorted(FOLDER.glob("*.ipynb"))
EDITIONS = sorted(p.name for p in (REPO / "i18n").iterdir() if p.is_dir())
CASES = [(lang, path) for lang in EDITIONS for path in ENGLISH]
CJK = re.compile(r"[\u3400-\u9fff\u3040-\u30ff]")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _id(case: tuple[str, Path]) -> str:
    return f"{case[0]}/{case[1].name}"


def test_there_is_a_chinese_edition() -> None:
    assert "zh" in EDITIONS


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_edition_is_built_from_its_catalog(case: tuple[str, Path]) -> None:
    lang, path = case
    catalog = parse_catalog(catalog_path(REPO, lang, path.name).read_text(encoding="utf-8"))
    rebuilt = translated_notebook(_load(path), catalog, path.name, lang)
    edition = FOLDER / lang / path.name
    assert edition.exists(), f"run python -m memlib.notebook translate {lang} {path.stem}"
    assert sources(_load(edition)) == sources(rebuilt), (
        f"{lang}/{path.name} differs from its build: run "
        f"python -m memlib.notebook translate {lang} {path.stem}"
    )


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_every_section_is_translated(case: tuple[str, Path]) -> None:
    lang, path = case
    catalog = parse_catalog(catalog_path(REPO, lang, path.name).read_text(encoding="utf-8"))
    if lang == "zh":
        untranslated = [
            cell_id for cell_id, s in catalog.items() if not s.code and not CJK.search(s.text)
        ]
        assert untranslated == [], f"{lang}/{path.name}: sections still in English: {untranslated}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_edition_twin_and_links(case: tuple[str, Path]) -> None:
    lang, path = case
    edition = _load(FOLDER / lang / path.name)
    twin_path = FOLDER / lang / "solutions" / path.name
    assert twin_path.exists(), f"run python -m memlib.notebook solutions --folder notebooks/{lang}"
    twin = _load(twin_path)
    assert sources(twin) == sources(solution_notebook(edition, path.name, lang))
    correct = STATUS_WORDS[lang]["correct"]
    for index, exercise_id in answer_cells(twin):
        text = json.dumps(twin["cells"][index + 1].get("outputs", []), ensure_ascii=False)
        assert f"{exercise_id} · {correct}" in text, f"{lang}/solutions/{path.name} {exercise_id}"
    for cell in edition["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        for target in LINK.findall("".join(cell["source"])):
            if target.startswith(("http://", "https://", "#", "mailto:")):
                continue
            file = target.partition("#")[0]
            assert (FOLDER / lang / file).resolve().exists(), f"{lang}/{path.name}: {target}"


def test_a_changed_english_cell_stops_the_build() -> None:
    english: dict[str, Any] = {
        "cells": [{"cell_type": "markdown", "id": "m1", "metadata": {}, "source": ["# Title"]}]
    }
    catalog = parse_catalog(f"<!-- cell m1 en={english_hash('# Title')} -->\n# 标题\n")
    assert "".join(translated_notebook(english, catalog, "x")["cells"][0]["source"]) == "# 标题"
    code: dict[str, Any] = {
        "cell_type": "code",
        "id": "k1",
        "metadata": {},
        "outputs": [],
        "execution_count": 3,
        "source": ["print('layered memory')"],
    }
    english["cells"].append(code)
    built = translated_notebook(english, catalog, "x", "zh")["cells"][1]
    assert "".join(built["source"]).startswith("from memlib.notebook.language import")
    assert built["execution_count"] is None
    swapped = parse_catalog(
        f"<!-- cell m1 en={english_hash('# Title')} -->\n# 标题\n"
        f"<!-- code k1 en={english_hash(chr(10).join(code['source']))} -->\n"
        "```python\nprint('分层记忆')\n```\n"
    )
    built = translated_notebook(english, swapped, "x", "zh")["cells"][1]
    assert "".join(built["source"]).endswith("print('分层记忆')")
    english["cells"].pop()
    english["cells"][0]["source"] = ["# A new title"]
    with pytest.raises(StaleTranslationError, match="m1 \\(English changed"):
        translated_notebook(english, catalog, "x")
    with pytest.raises(StaleTranslationError, match="m1 \\(missing\\)"):
        translated_notebook(english, {}, "x")


def test_a_stale_catalog_is_one_line_from_the_build_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from memlib.notebook.__main__ import main

    (tmp_path / "notebooks").mkdir()
    (tmp_path / "i18n" / "zh").mkdir(parents=True)
    english = {
        "cells": [{"cell_type": "markdown", "id": "m1", "metadata": {}, "source": ["# Title"]}],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (tmp_path / "notebooks" / "x.ipynb").write_text(json.dumps(english), encoding="utf-8")
    (tmp_path / "i18n" / "zh" / "x.md").write_text(
        "<!-- cell m1 en=000000000000 -->\n# 标题\n", encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    assert main(["translate", "zh", "--no-execute"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "m1 (English changed" in err
    assert not (tmp_path / "notebooks" / "zh" / "x.ipynb").exists()
