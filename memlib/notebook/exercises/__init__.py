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

__all__ = [
    "Exercise",
    "Feedback",
    "Verdict",
    "all_exercises",
    "check",
    "exercise",
    "hint",
    "right",
    "wrong",
]

Status = Literal["not attempted", "try again", "correct"]


@dataclass(frozen=True)
class Verdict:
    """What a grader decided: ``ok`` and the one thing to tell the learner."""

    ok: bool
    message: str


def wrong(message: str) -> Verdict:
    return Verdict(False, message)


def right(message: str) -> Verdict:
    return Verdict(True, message)


@dataclass(frozen=True)
class Exercise:
    """One graded exercise.

    ``grade(answer, **context)`` returns a :class:`Verdict`; ``hints`` are shown one at a
    time by :func:`hint`; ``solution`` is the code of the answer cell in the solution
    notebook; ``wrong_answers`` are common mistakes, each with a part of the hint it must
    get — the tests check every one of them, so a check that accepts anything fails.
    """

    id: str
    title: str
    grade: Callable[..., Verdict]
    hints: tuple[str, ...]
    solution: str
    wrong_answers: tuple[tuple[Any, str], ...]
    context: Callable[[], Mapping[str, Any]] | None = field(default=None)


@dataclass(frozen=True)
class Feedback:
    """What a check or a hint shows: plain text, so nbval compares it like any output."""

    exercise: str
    status: Status | Literal["hint"]
    message: str

    @property
    def correct(self) -> bool:
        return self.status == "correct"

    def __repr__(self) -> str:
        marks = {"not attempted": "…", "try again": "✗", "correct": "✓", "hint": "?"}
        return f"{marks[self.status]} {self.exercise} · {self.status} — {self.message}"

    __str__ = __repr__


_REGISTRY: dict[str, Exercise] = {}
_LOADED = False


def exercise(item: Exercise) -> Exercise:
    """Register ``item`` (called by each notebook's module at import)."""
    if item.id in _REGISTRY and _REGISTRY[item.id] is not item:
        raise ValueError(f"exercise {item.id} is defined twice")
    _REGISTRY[item.id] = item
    return item


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
        return Feedback(exercise_id, "try again", f"there is no exercise {exercise_id!r} "
                        f"(the course has {known})")
    if answer is Ellipsis:
        return Feedback(item.id, "not attempted",
                        f"replace the `...` with your answer and run both cells again. "
                        f"Stuck? hint({item.id!r})")
    if item.context is not None:
        context = {**item.context(), **context}
    try:
        verdict = item.grade(answer, **context)
    except Exception as exc:  # noqa: BLE001 — a learner's answer must never show a traceback
        reason = " ".join(str(exc).split()) or type(exc).__name__
        return Feedback(item.id, "try again",
                        f"this answer could not be checked ({type(exc).__name__}: {reason}). "
                        f"hint({item.id!r}) says what shape it needs")
    if verdict.ok:
        return Feedback(item.id, "correct", verdict.message)
    return Feedback(item.id, "try again", f"{verdict.message} (more: hint({item.id!r}))")


def hint(exercise_id: str, number: int = 1) -> Feedback:
    """The ``number``-th hint of an exercise (1 is the gentlest)."""
    item = _find(exercise_id)
    if item is None:
        return Feedback(exercise_id, "hint", f"there is no exercise {exercise_id!r}")
    if not 1 <= number <= len(item.hints):
        return Feedback(item.id, "hint", f"hints are numbered 1 to {len(item.hints)}")
    more = (f" (next: hint({item.id!r}, {number + 1}))" if number < len(item.hints) else "")
    return Feedback(item.id, "hint", f"{number}/{len(item.hints)}: {item.hints[number - 1]}{more}")
