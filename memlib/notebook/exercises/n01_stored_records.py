"""Exercises of ``01_stored_records.ipynb``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ...records import MemorySource, user_scope_for
from . import Verdict, exercise, right, wrong
from ._common import as_int, as_text

OSAKA = "2026-08-10T09:30:00+09:00"
USERS = ("Straße", "STRASSE", "strasse ", "Strasse-1")


@exercise(
    "01.1",
    "the captured_at the store keeps for an Osaka timestamp",
    hints=(
        "Look at the Berlin example at the top: which form did +02:00 become?",
        "+09:00 means local time is 9 hours ahead of UTC.",
    ),
    solution='# Exercise 01.1 — solution\nanswer = "2026-08-10T00:30:00Z"',
    wrong_answers=(
        ("2026-08-10T09:30:00Z", "9 hours earlier"),
        ("2026-08-10T18:30:00Z", "subtract"),
        ("2026-08-10T00:30:00+00:00", "final Z"),
        ("2026-08-10 09:30", "without a timezone"),
        ("yesterday", "not a timestamp"),
    ),
)
def _captured_at(answer: Any) -> Verdict:
    text = as_text(answer, "captured_at").strip()
    kept = MemorySource(
        "transcript-osaka", "conversation_transcript", "Osaka trip", OSAKA
    ).captured_at
    if text == kept:
        return right(
            "{osaka} is {kept}: the store keeps every instant in UTC, with a Z",
            osaka=OSAKA,
            kept=kept,
        )
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return wrong("{text!r} is not a timestamp: write it as YYYY-MM-DDTHH:MM:SSZ", text=text)
    expected = datetime.fromisoformat(kept.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        return wrong("a timestamp without a timezone is refused: the store writes UTC as Z")
    if moment == expected:
        return wrong(
            "the right instant, but the store writes it in UTC with a final Z (not an offset)"
        )
    hours = (moment - expected).total_seconds() / 3600
    if hours == 9:
        return wrong(
            "that is the Osaka clock time: +09:00 means the clock runs 9 hours ahead "
            "of UTC, so UTC is 9 hours earlier"
        )
    if hours == 18:
        return wrong("you added the 9 hours; +09:00 means UTC is 9 hours earlier, so subtract")
    return wrong(
        "that instant is {hours:+g} hours from the one captured: subtract the offset "
        "from the local time",
        hours=hours,
    )


@exercise(
    "01.2",
    "how many scopes four user ids make",
    hints=(
        "The scope is the first 16 hex digits of sha256(user_id.strip().casefold()).",
        "Try 'Straße'.casefold() and 'Straße'.lower() in a cell.",
    ),
    solution="# Exercise 01.2 — solution\nanswer = 2",
    wrong_answers=(
        (4, "stripping spaces"),
        (3, "casefold"),
        (1, "someone else"),
        ("2", "whole number"),
    ),
)
def _scopes(answer: Any) -> Verdict:
    as_int(answer)
    scopes = {user_scope_for(user) for user in USERS}
    if answer == len(scopes):
        return right(
            "{n_users} ids, {n_scopes} scopes: strip and casefold make Straße, STRASSE "
            "and 'strasse ' one user; Strasse-1 is another",
            n_users=len(USERS),
            n_scopes=len(scopes),
        )
    if answer == len(USERS):
        return wrong(
            "a scope is computed from the id after stripping spaces and case-folding: "
            "find the ids that become equal"
        )
    if answer == len(scopes) + 1:
        return wrong("casefold() turns ß into ss (lower() does not), so Straße is strasse")
    if answer == 1:
        return wrong("Strasse-1 keeps its -1 after strip and casefold: it is someone else")
    return wrong(
        "there are {n_users} ids; group those that are equal after strip() and casefold()",
        n_users=len(USERS),
    )
