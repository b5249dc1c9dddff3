"""The zh catalog of the exercises' feedback (memlib/data/zh-feedback.json), gettext style:
the English template in the code is the key, so a template without an entry would show
English in the zh edition, and an entry no code uses any more is dead text."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from memlib.notebook.exercises import _common, all_exercises, check
from memlib.notebook.language import _zh_catalog, tr, use_language

EXERCISES = Path(_common.__file__).parent
# Calls whose first argument is an English template; and, per shape check, which of
# its arguments (by position or name) are phrases of the answer's description.
TEMPLATES = {"wrong", "right", "shape_error", "tr"}
PHRASES = {
    "as_text": (1, "what"),
    "as_int": (1, "what", 2, "shape"),
    "as_number": (1, "what"),
    "as_function": (1, "takes"),
    "_wrong_type": (2, "shape"),
}


def _trees() -> Iterator[ast.Module]:
    for path in sorted(EXERCISES.glob("*.py")):
        yield ast.parse(path.read_text(encoding="utf-8"))


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _phrases(call: ast.Call, spec: tuple[Any, ...]) -> Iterator[str]:
    for index, name in zip(spec[::2], spec[1::2], strict=True):
        given = [k.value for k in call.keywords if k.arg == name]
        if len(call.args) > index:
            given.append(call.args[index])
        for node in given:
            text = _text(node)
            if text is not None and not text.isidentifier():  # names stay as typed
                yield text


def _needed() -> set[str]:
    """Every text the exercises give ``tr`` to translate, found in their source."""
    needed: set[str] = set()
    for tree in _trees():
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
                continue
            name = call.func.id
            if name in TEMPLATES and call.args and not (name == "tr" and len(call.args) > 1):
                text = _text(call.args[0])
                if text is not None:
                    needed.add(text)
            needed.update(_phrases(call, PHRASES.get(name, ())))
    for function in (_common.as_int, _common.as_number):
        for parameter in inspect.signature(function).parameters.values():
            if isinstance(parameter.default, str):
                needed.add(parameter.default)
    for item in all_exercises():
        needed.update(item.hints)
    return needed


def _constants() -> set[str]:
    found = {_text(node) for tree in _trees() for node in ast.walk(tree)}
    return {text for text in found if text} | {h for item in all_exercises() for h in item.hints}


def test_every_template_has_a_zh_entry() -> None:
    missing = sorted(_needed() - _zh_catalog().keys())
    assert not missing, f"no zh text in memlib/data/zh-feedback.json for: {missing}"


def test_every_entry_is_used() -> None:
    stale = sorted(_zh_catalog().keys() - _constants())
    assert not stale, f"entries no exercise uses: {stale}"


def test_the_collector_sees_the_templates() -> None:
    needed = _needed()
    assert "missing term(s) {missing}; your query gives {got}" in needed
    assert "the number of HTTP requests" in needed and "captured_at" not in needed


@pytest.fixture
def chinese() -> Iterator[None]:
    use_language("zh")
    yield
    use_language("en")


def test_a_grader_speaks_the_catalog(chinese: None) -> None:
    feedback = check("04.1", datetime(2026, 7, 15, 9, 0))
    assert feedback.message.startswith("naive datetime 没有时区：加上 tzinfo=UTC")
    assert tr("hints are numbered 1 to {count}", count=3) == "提示的编号是 1 到 3"
    # An explicit zh wins, and a text the catalog lacks stays as it is.
    assert tr("plot", "图") == "图" and tr("not in the catalog") == "not in the catalog"


def test_the_english_edition_fills_the_template() -> None:
    feedback = check("04.1", datetime(2026, 7, 15, 9, 0))
    assert feedback.message.startswith("a naive datetime has no timezone: add tzinfo=UTC")
    assert tr("hints are numbered 1 to {count}", count=3) == "hints are numbered 1 to 3"
