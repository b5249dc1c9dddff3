"""nbval executes each notebook's code once per language: the solution editions
(notebooks/solutions/, notebooks/zh/solutions/). A student edition is its twin but for
the answer cells, so it is proven here without a kernel: every other code cell is the
twin's, source and committed outputs (hence checked by the twin's nbval run), and each
check cell shows what ``check(id, ...)`` says in the edition's language ("not
attempted"). That check never reads the notebook's state, so running it here is exact.
"""

from __future__ import annotations

import ast
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from IPython.core.formatters import PlainTextFormatter

from memlib.notebook.exercises import check
from memlib.notebook.language import use_language
from memlib.notebook.solutions import answer_cells

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "notebooks"
STUDENT = sorted([*FOLDER.glob("*.ipynb"), *FOLDER.glob("zh/*.ipynb")])
EXECUTED = [
    REPO / p
    for p in tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"][
        "ini_options"
    ]["testpaths"]
]
CHECK_CALL = re.compile(r"^check\(\"(\d\d\.\d+)\", (\w+)\b")


def _code(path: Path) -> list[dict[str, Any]]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [c for c in cells if c["cell_type"] == "code"]


def _source(cell: dict[str, Any]) -> str:
    return "".join(cell["source"])


def _without_widget_ids(cell: dict[str, Any]) -> str:
    """A widget's model id is new at every run (nbval ignores those outputs anyway)."""
    return re.sub(r'"model_id": "[0-9a-f]{32}"', '"model_id": ""', json.dumps(cell))


def _names(source: str, ctx: type[ast.expr_context]) -> set[str]:
    tree = ast.parse(source)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}
    if ctx is ast.Store:
        names |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        names |= {
            a.asname or a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.Import | ast.ImportFrom)
            for a in n.names
        }
    return names


def _executed(path: Path) -> bool:
    return any(path.is_relative_to(folder) for folder in EXECUTED)


@pytest.mark.parametrize(
    "path", sorted(FOLDER.rglob("*.ipynb")), ids=lambda p: p.relative_to(FOLDER).as_posix()
)
def test_every_notebook_runs_under_nbval_or_its_twin_does(path: Path) -> None:
    twin = path.parent / "solutions" / path.name
    assert _executed(path) or (path in STUDENT and _executed(twin)), (
        f"{path.relative_to(REPO)}: neither it nor a twin is under pytest's testpaths"
    )


@pytest.mark.parametrize("path", STUDENT, ids=lambda p: p.relative_to(FOLDER).as_posix())
def test_student_edition_is_its_executed_twin_but_for_the_answers(path: Path) -> None:
    lang = "zh" if path.parent.name == "zh" else "en"
    name = path.relative_to(FOLDER).as_posix()
    mine, twin = _code(path), _code(path.parent / "solutions" / path.name)
    assert len(mine) == len(twin), f"{name}: not as many code cells as its twin"
    answers = {i for i, _ in answer_cells({"cells": mine})}
    assert answers == {i for i, _ in answer_cells({"cells": twin})}, name
    # What the twin's answers or its checks' context may change: a later cell that reads
    # it would run differently here than in the twin.
    touched: set[str] = set()
    for index, (cell, other) in enumerate(zip(mine, twin, strict=True)):
        if index in answers:
            assert cell["outputs"] == [], f"{name} cell {index}: an answer cell shows output"
            touched |= _names(_source(cell), ast.Store) | _names(_source(other), ast.Store)
            continue
        if index - 1 in answers:  # its check: the twin says "correct", this edition runs here
            assert _source(cell) == _source(other), f"{name} cell {index}: not the twin's check"
            call = CHECK_CALL.match(_source(cell))
            assert call, f"{name} cell {index} should be check(id, answer)"
            namespace: dict[str, Any] = {}
            exec(_source(mine[index - 1]), namespace)  # noqa: S102 — `answer = ...`
            # Unwritten, so check() returns before its context (store=…) matters.
            assert namespace[call.group(2)] is Ellipsis, f"{name} cell {index - 1} is answered"
            use_language(lang)
            shown = PlainTextFormatter()(check(call.group(1), ...))
            committed = [
                {k: "".join(v) for k, v in o.get("data", {}).items()} for o in cell["outputs"]
            ]
            assert committed == [{"text/plain": shown}], (
                f"{name} cell {index}: the committed check output is not {shown!r}: "
                f"re-run the notebook"
            )
            touched |= _names(_source(cell), ast.Load) - {"check"}  # the twin's grader gets them
            continue
        assert _without_widget_ids(cell) == _without_widget_ids(other), (
            f"{name} cell {index} differs from its solution twin's (source or outputs): "
            f"re-run python -m memlib.notebook solutions"
        )
        read = _names(_source(cell), ast.Load) & touched
        assert not read, f"{name} cell {index} reads {read}, set by an exercise above it"
