"""Exercises of ``09_failures_and_concurrency.ipynb``."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import RemoteMemoryError
from ...sample import SAMPLE_AS_OF, SAMPLE_QUERY, SAMPLE_USER_ID, fixed_clock
from ...stores.jsonl._store import RemoteMemoryStore
from ..fixtures import conversation_item
from ..views import recall
from . import Verdict, exercise, right, wrong
from ._common import sample_store, shape_error

LIMIT_MESSAGE = "limit must be an integer"
USER_MESSAGE = "user_id must not be empty"
HANDLES = ("outcome", "lines", "records")


def _refusal(action: Any) -> RemoteMemoryError | None:
    try:
        action()
    except RemoteMemoryError as exc:
        return exc
    return None


@exercise(
    "09.1",
    "a limit that is not an integer, a user id that is empty",
    hints=(
        "normalize checks the type of limit before its range: which values are not an int?",
        "A user id is refused when it has no visible character — the id is stripped first.",
    ),
    solution='# Exercise 09.1 — solution\nanswer = {"limit": 2.0, "user_id": "   "}',
    wrong_answers=(
        ({"limit": "5x", "user_id": "   "}, "is a string"),
        ({"limit": True, "user_id": "   "}, "neither a string nor a bool"),
        ({"limit": 11, "user_id": "   "}, "out of range"),
        ({"limit": 5, "user_id": "   "}, "accepts"),
        ({"limit": 2.0, "user_id": "bob"}, "opens for"),
        ((2.0, "   "), "should be a dict"),
    ),
)
def _two_refusals(answer: Any) -> Verdict:
    if not isinstance(answer, Mapping) or set(answer) != {"limit", "user_id"}:
        raise shape_error('the answer should be a dict {"limit": ..., "user_id": ...}')
    limit, user_id = answer["limit"], answer["user_id"]
    if isinstance(limit, str):
        return wrong(
            "the limit is a string: the table above has that case — find a value of another type"
        )
    if isinstance(limit, bool):
        return wrong("True is in the table above: find a value that is neither a string nor a bool")
    refused = _refusal(lambda: recall(sample_store(), SAMPLE_QUERY, SAMPLE_AS_OF, limit))
    if refused is None:
        return wrong("recall accepts limit={limit!r}: nothing is refused", limit=limit)
    if str(refused) != LIMIT_MESSAGE:
        return wrong(
            "recall refuses limit={limit!r} with “{refused}”: that is an integer out "
            "of range — use a value that is not an int at all",
            limit=limit,
            refused=refused,
        )
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        path = Path(root) / "records.jsonl"
        opened = _refusal(lambda: RemoteMemoryStore(path, user_id=user_id).read_all())
    if opened is None:
        return wrong(
            "a store opens for user_id={user_id!r}: every user id with a visible "
            "character is someone's",
            user_id=user_id,
        )
    if str(opened) != USER_MESSAGE:
        return wrong(
            "opening refuses user_id={user_id!r} with “{opened}”, not “{user_message}”",
            user_id=user_id,
            opened=opened,
            user_message=USER_MESSAGE,
        )
    return right(
        "limit={limit!r} and user_id={user_id!r} are refused as {kind}s, before "
        "anything is read or written",
        limit=limit,
        user_id=user_id,
        kind=type(refused).__name__,
    )


def _handles() -> dict[str, Any]:
    """The two-handle scenario of 09.2, run on a new file."""
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        path = Path(root) / "two-handles" / "records.jsonl"
        first = RemoteMemoryStore(path, user_id=SAMPLE_USER_ID, clock=fixed_clock())
        second = RemoteMemoryStore(path, user_id=SAMPLE_USER_ID, clock=fixed_clock())
        first.read_all()
        second.read_all()
        first.append(**conversation_item("conversation-020"))
        refused = _refusal(lambda: second.append(**conversation_item("conversation-020")))
        second.append(**conversation_item("conversation-021"))
        return {
            "outcome": "ok" if refused is None else type(refused).__name__,
            "lines": len(path.read_bytes().splitlines()),
            "records": len(second.read_all()),
        }


@exercise(
    "09.2",
    "two handles on one file append the same id",
    hints=(
        "Each handle keeps its own cache of the file, as two processes would.",
        "An append takes the lock, then refreshes its ids from the file, then checks, then "
        "writes: what does second find when it refreshes?",
        "A refused append leaves the file as it was.",
    ),
    solution=(
        "# Exercise 09.2 — solution\n"
        'answer = {"outcome": "RemoteMemoryDuplicateError", "lines": 2, "records": 2}'
    ),
    wrong_answers=(
        ({"outcome": "ok", "lines": 3, "records": 3}, "brings its ids up to date"),
        ({"outcome": "RemoteMemoryDuplicateError", "lines": 3, "records": 3}, "writes nothing"),
        ({"outcome": "RemoteMemoryDuplicateError", "lines": 2, "records": 1}, "reads the file"),
        ({"outcome": "RemoteMemoryValidationError", "lines": 2, "records": 2}, "more precise"),
        ({"outcome": "ok"}, "should be a dict"),
    ),
)
def _two_handles(answer: Any) -> Verdict:
    if not isinstance(answer, Mapping) or not set(HANDLES) <= set(answer):
        raise shape_error(
            'the answer should be a dict {"outcome": ..., "lines": ..., "records": ...}'
        )
    want = _handles()
    outcome = answer["outcome"]
    if isinstance(outcome, type):
        outcome = outcome.__name__
    if outcome != want["outcome"]:
        if outcome == "ok":
            return wrong(
                "second read the store before first wrote, but each append takes the "
                "lock and brings its ids up to date from the file before it checks: "
                "second sees first's line"
            )
        if outcome == "RemoteMemoryValidationError":
            return wrong(
                "it is a validation error, but a more precise class says which rule was broken"
            )
        return wrong(
            "{outcome!r} is not what second.append raises: “ok”, or the class name of the error",
            outcome=outcome,
        )
    lines, records = answer["lines"], answer["records"]
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (lines, records)):
        return wrong("lines and records are whole numbers")
    if lines != want["lines"]:
        if lines > want["lines"]:
            return wrong(
                "a refused append writes nothing: the duplicate is refused inside the "
                "lock, before the write"
            )
        return wrong("count again: every append that was not refused is one line")
    if records != want["records"]:
        return wrong(
            "a handle reads the file again on every read_all: second returns every "
            "line, first's included"
        )
    return right(
        "{outcome} inside the lock, {lines} lines: the check and the write happen "
        "under one lock, against the file as it is",
        outcome=want["outcome"],
        lines=want["lines"],
    )
