"""Exercises of ``13_boundaries_and_review.ipynb``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...sample import SAMPLE_AS_OF
from .._common import course_data
from ..boundaries import BOUNDARIES, CHECKLIST, RESULT_ITEMS, audit_result, tampered_results
from ..language import tr
from . import Verdict, exercise, right, wrong
from ._common import sample_store, shape_error


@dataclass(frozen=True)
class Situation:
    """A question an agent meets, the core object it is about, and why that decides."""

    text: str
    about: str  # a ``Boundary.core_object``: the owner is looked up, never typed in
    why: str
    why_zh: str


# From memlib/data/boundaries.json. A wrong reply gives ``why``: what the situation is about,
# and which column of §1's table to read it against. It never names the owning chapter
# (tests/course/test_findings_11_14).
SITUATIONS: dict[str, Situation] = {
    label: Situation(**row) for label, row in course_data("boundaries")["situations"].items()
}
CHAPTERS = tuple(b.chapter for b in BOUNDARIES)


def owner_of(situation: Situation) -> str:
    """The chapter whose core object the situation is about (from the boundary table)."""
    return next(b.chapter for b in BOUNDARIES if b.core_object == situation.about)


def _labelled(answer: Any, what: str) -> dict[str, Any]:
    if not isinstance(answer, Mapping):
        kind = type(answer).__name__
        raise shape_error(
            "the answer should be a dict like {what}, not {kind}", what=what, kind=kind
        )
    return {str(key).strip().upper(): value for key, value in answer.items()}


def _chapter(value: Any) -> str | None:
    """``"s09"``, ``"S9"``, ``"09"`` or ``9`` as ``"s09"``; None when it is none of these."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return f"s{value:02d}"
    if isinstance(value, str):
        match = re.fullmatch(r"s?(\d{1,2})", value.strip().lower())
        if match:
            return f"s{int(match.group(1)):02d}"
    return None


@exercise(
    "13.1",
    "which chapter owns each situation",
    hints=(
        "For each situation ask the table's question column: is it about this turn, this "
        "project, this user, long-term history, or a huge tool output?",
        "A preference stated for every project belongs to the user (s11); a decision from "
        "months ago is history that only a recall brings back (s12).",
        'The answer is a dict of five labels, e.g. {"A": "s09", "B": "s10", …}.',
    ),
    solution=(
        "# Exercise 13.1 — solution\n"
        'answer = {"A": "s09", "B": "s10", "C": "s11", "D": "s12", "E": "s13"}'
    ),
    wrong_answers=(
        ({"A": "s09", "B": "s10", "C": "s12", "D": "s12", "E": "s13"}, "C: not s12"),
        ({"A": "s12", "B": "s10", "C": "s11", "D": "s12", "E": "s13"}, "this very session"),
        ({"A": "s09", "B": "s11", "C": "s11", "D": "s12", "E": "s13"}, "fact of one project"),
        ({"A": "s09", "B": "s10", "C": "s11", "D": "s12", "E": "s12"}, "huge output"),
        ({"A": "s09", "B": "s10", "C": "s11", "D": "s12"}, "missing E"),
        ({"A": "s09", "B": "s10", "C": "s11", "D": "s12", "E": "s14"}, "not a chapter"),
        ("s12", "should be a dict"),
    ),
)
def _owners(answer: Any) -> Verdict:
    given = _labelled(answer, '{"A": "s09", "B": …}')
    missing = [label for label in SITUATIONS if label not in given]
    if missing:
        return wrong(
            "give a chapter for each of {situations}: missing {missing}",
            situations=", ".join(SITUATIONS),
            missing=", ".join(missing),
        )
    problems: list[str] = []
    for label, situation in SITUATIONS.items():
        chapter = _chapter(given[label])
        if chapter not in CHAPTERS:
            problems.append(
                tr(
                    "{label}: {given!r} is not a chapter of the table ({chapters})",
                    label=label,
                    given=given[label],
                    chapters=", ".join(CHAPTERS),
                )
            )
        elif chapter != owner_of(situation):
            why = tr(situation.why, situation.why_zh)
            problems.append(
                tr("{label}: not {chapter} — {why}", label=label, chapter=chapter, why=why)
            )
    if problems:
        return _first_two(problems)
    owners = ", ".join(f"{label} {owner_of(s)}" for label, s in SITUATIONS.items())
    return right(
        "{owners}: each question goes to the chapter whose core object it is about", owners=owners
    )


def _first_two(problems: list[str]) -> Verdict:
    more = " …" if len(problems) > 2 else ""
    return Verdict(False, tr("; ").join(problems[:2]) + more)


@exercise(
    "13.2",
    "which checklist item each broken result violates",
    hints=(
        "One result alone can show items 2 to 8. Go down them for each table: normalized "
        "terms, the three counts, query_id, scope and source, the sum of contributions, "
        "the order of the ranks, the number of hits against the limit.",
        "A: compare the two rows field by field — what decides between two equal totals? "
        "B: add lexical_contribution and recency_contribution. C: read the query's limit.",
        'The answer is a dict of item numbers, e.g. {"A": 4, "B": 5, "C": 6}.',
    ),
    solution='# Exercise 13.2 — solution\nanswer = {"A": 7, "B": 6, "C": 8}',
    wrong_answers=(
        ({"A": 4, "B": 6, "C": 8}, "A: item 4 holds"),
        ({"A": 7, "B": 3, "C": 8}, "B: item 3 holds"),
        ({"A": 7, "B": 6, "C": 9}, "cannot be seen in one result"),
        ({"A": 7, "B": 6, "C": 12}, "numbered 1 to 9"),
        ({"A": 7, "B": 6}, "missing C"),
        ([7, 6, 8], "should be a dict"),
    ),
)
def _violated(answer: Any) -> Verdict:
    given = _labelled(answer, '{"A": 4, "B": …}')
    results = tampered_results(sample_store(), SAMPLE_AS_OF)
    missing = [label for label in results if label not in given]
    if missing:
        return wrong(
            "give an item number for each of {results}: missing {missing}",
            results=", ".join(results),
            missing=", ".join(missing),
        )
    numbers = [item.number for item in CHECKLIST]
    titles_zh = {item.number: item.zh for item in CHECKLIST}
    # The audit's facts stay in English in both editions: they are the library's own output.
    problems: list[str] = []
    found: list[str] = []
    for label, result in results.items():
        audit = audit_result(result)
        failing = [n for n, (ok, _) in audit.items() if not ok]
        number = given[label]
        if isinstance(number, bool) or not isinstance(number, int):
            raise shape_error(
                "{label} should be an item number (an int), not {number!r}",
                label=label,
                number=number,
            )
        fields = {"label": label, "number": number, "title": titles_zh.get(number)}
        if number not in numbers:
            problems.append(
                tr(
                    "{label}: the checklist items are numbered {first} to {last}",
                    **fields,
                    first=numbers[0],
                    last=numbers[-1],
                )
            )
        elif number in failing:
            found.append(
                tr("{label} breaks item {number} ({fact})", **fields, fact=audit[number][1])
            )
        elif number in audit:
            problems.append(
                tr(
                    "{label}: item {number} holds for this result — {fact}",
                    **fields,
                    fact=audit[number][1],
                )
            )
        else:
            problems.append(
                tr(
                    "{label}: item {number} cannot be seen in one result (it needs the "
                    "model's query or the store before and after); look at items "
                    "{first}–{last}",
                    **fields,
                    first=RESULT_ITEMS[0],
                    last=RESULT_ITEMS[-1],
                )
            )
    if problems:
        return _first_two(problems)
    return Verdict(True, tr("; ").join(found))
