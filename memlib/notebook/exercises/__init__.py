"""Graded exercises: ``check("04.1", answer)`` and ``hint("04.1")``.

Each notebook's exercises live in one module of this package (``n04_score`` for
``04_score.ipynb``), found by name, so adding a notebook's exercises is one new file.
An exercise grades an answer against the library itself (the expected value is
computed, never typed in), recognises the common wrong answers to give a targeted
hint, and carries the code of its solution, which ``memlib.notebook.solutions``
writes into ``notebooks/solutions/``.

A check never raises: an unanswered cell (``answer = ...``) is "not attempted yet",
an answer of the wrong shape or one that makes the grader fail is "try again" with a
one-line reason, and only ``correct`` confirms.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..language import _zh_catalog, language, tr

__all__ = [
    "STATUS_WORDS",
    "Exercise",
    "Feedback",
    "Verdict",
    "all_exercises",
    "check",
    "hint",
    "right",
    "wrong",
]

Status = Literal["not attempted", "try again", "correct"]


@dataclass(frozen=True)
class Verdict:
    """What a grader decided: ``ok`` and the one thing to tell the learner, in the
    edition's language."""

    ok: bool
    message: str


def wrong(message: str, /, **fields: Any) -> Verdict:
    """``message`` is an English template, translated through the zh catalog (``tr``)."""
    return Verdict(False, tr(message, **fields))


def right(message: str, /, **fields: Any) -> Verdict:
    return Verdict(True, tr(message, **fields))


@dataclass(frozen=True)
class Exercise:
    """One graded exercise.

    ``grade(answer, **context)`` returns a :class:`Verdict`; ``hints`` are shown one at a
    time by :func:`hint` (translated through the zh catalog); ``solution`` is the code of the
    answer cell in the solution notebook; ``wrong_answers`` are common mistakes, each with
    a part of the hint it must get — the tests check every one of them, so a check that
    accepts anything fails.
    """

    id: str
    title: str
    grade: Callable[..., Verdict]
    hints: tuple[str, ...]
    solution: str
    wrong_answers: tuple[tuple[Any, str], ...]
    context: Callable[[], Mapping[str, Any]] | None = field(default=None)

    @property
    def hints_zh(self) -> tuple[str, ...]:
        return tuple(_zh_catalog().get(text, text) for text in self.hints)

    def register(self) -> Exercise:
        """Add this exercise to the course (each notebook's module does, at import)."""
        if _REGISTRY.setdefault(self.id, self) is not self:
            raise ValueError(f"exercise {self.id} is defined twice")
        return self


def exercise(
    id: str,
    title: str,
    *,
    hints: tuple[str, ...],
    solution: str,
    wrong_answers: tuple[tuple[Any, str], ...],
    context: Callable[[], Mapping[str, Any]] | None = None,
) -> Callable[[Callable[..., Verdict]], Callable[..., Verdict]]:
    """Register the decorated grader as the :class:`Exercise` ``id``."""

    def register(grade: Callable[..., Verdict]) -> Callable[..., Verdict]:
        Exercise(id, title, grade, hints, solution, wrong_answers, context).register()
        return grade

    return register


# What each status reads as, per language (the English words are also the statuses).
_MARKS = {"not attempted": "…", "try again": "✗", "correct": "✓", "hint": "?"}
STATUS_WORDS = {
    "en": {status: status for status in _MARKS},
    "zh": {"not attempted": "尚未作答", "try again": "再试一次", "correct": "正确", "hint": "提示"},
}


@dataclass(frozen=True)
class Feedback:
    """What a check or a hint shows: plain text, so nbval compares it like any output."""

    exercise: str
    status: Status | Literal["hint"]
    message: str
    lang: str = field(default_factory=language)

    @property
    def correct(self) -> bool:
        return self.status == "correct"

    def __repr__(self) -> str:
        word = STATUS_WORDS[self.lang][self.status]
        return f"{_MARKS[self.status]} {self.exercise} · {word} — {self.message}"

    __str__ = __repr__


_REGISTRY: dict[str, Exercise] = {}
_LOADED = False


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("n") and module.name[1:3].isdigit():
            importlib.import_module(f"{__name__}.{module.name}")
    _LOADED = True


def all_exercises() -> tuple[Exercise, ...]:
    """Every exercise of the course, in notebook order."""
    _load()
    return tuple(sorted(_REGISTRY.values(), key=lambda e: tuple(map(int, e.id.split(".")))))


def _find(exercise_id: str) -> Exercise | None:
    _load()
    return _REGISTRY.get(exercise_id)


def check(exercise_id: str, answer: Any, **context: Any) -> Feedback:
    """Grade ``answer``: not attempted yet, try again (with a hint), or correct."""
    item = _find(exercise_id)
    if item is None:
        known = ", ".join(e.id for e in all_exercises())
        message = "there is no exercise {id!r} (the course has {known})"
        return Feedback(exercise_id, "try again", tr(message, id=exercise_id, known=known))
    more = f"hint({item.id!r})"
    if answer is Ellipsis:
        message = "replace the `...` with your answer and run both cells again. Stuck? {more}"
        return Feedback(item.id, "not attempted", tr(message, more=more))
    if item.context is not None:
        context = {**item.context(), **context}
    try:
        verdict = item.grade(answer, **context)
    except Exception as exc:  # noqa: BLE001 — a learner's answer must never show a traceback
        reason = " ".join(str(exc).split()) or type(exc).__name__
        message = (
            "this answer could not be checked ({kind}: {reason}). {more} says what shape it needs"
        )
        return Feedback(
            item.id, "try again", tr(message, kind=type(exc).__name__, reason=reason, more=more)
        )
    if verdict.ok:
        return Feedback(item.id, "correct", verdict.message)
    return Feedback(item.id, "try again", verdict.message + tr(" (more: {more})", more=more))


def hint(exercise_id: str, number: int = 1) -> Feedback:
    """The ``number``-th hint of an exercise (1 is the gentlest)."""
    item = _find(exercise_id)
    if item is None:
        return Feedback(exercise_id, "hint", tr("there is no exercise {id!r}", id=exercise_id))
    count = len(item.hints)
    if not 1 <= number <= count:
        return Feedback(item.id, "hint", tr("hints are numbered 1 to {count}", count=count))
    more = ""
    if number < count:
        more = tr(" (next: hint({id!r}, {number}))", id=item.id, number=number + 1)
    return Feedback(item.id, "hint", f"{number}/{count}: {tr(item.hints[number - 1])}{more}")
