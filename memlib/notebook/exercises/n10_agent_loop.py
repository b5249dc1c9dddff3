"""Exercises of ``10_agent_loop.ipynb``.

Both graders run the real loop on the real ``anthropic`` client with a scripted HTTP
transport (offline), so the expected answer is what the library and the SDK do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import RemoteMemoryError
from ...sample import SAMPLE_AS_OF
from . import Verdict, exercise, right, wrong
from ._common import as_int, as_text, sample_store

QUESTION = "What did we decide about the layered memory design?"
# 10.1: the model's plan (a refused query first, then a good one) and the turn budget.
PLANNED = ("!!!", None)
MAX_TURNS = 2
# 10.2: what the scripted server answers to each HTTP request, in order (then 200s).
STATUSES = (529, 529)


def turn_limit_outcome() -> str:
    """What ``agent_loop`` ends with for ``PLANNED`` under ``MAX_TURNS``: the name of
    the exception it raises, or ``"end_turn"`` when the model answers."""
    from ...agent import SCRIPTED_MODEL_ID, ScriptedModel, agent_loop, scripted_client

    try:
        transcript = agent_loop(
            QUESTION,
            client=scripted_client(ScriptedModel(queries=PLANNED)),
            model=SCRIPTED_MODEL_ID,
            store=sample_store(),
            as_of=SAMPLE_AS_OF,
            max_turns=MAX_TURNS,
            query_id_prefix="grader",
        )
    except RemoteMemoryError as exc:
        return type(exc).__name__
    return str(transcript.stop_reason)


@exercise(
    "10.1",
    "how the loop ends when the turns run out",
    hints=(
        "Each model request is one turn. Count them: the first answer carries the "
        "tool_use with '!!!', the second the tool_use with the good query.",
        "After the second tool_use the loop would need a third request to send the "
        "tool_result. With max_turns=2 it has none left.",
        "The loop ends with an exception in memlib.agent; it is named after what ran out.",
    ),
    solution='# Exercise 10.1 — solution\nanswer = "AgentTurnLimitError"',
    wrong_answers=(
        ("end_turn", "count the requests"),
        ("RemoteMemoryValidationError", "never raises in the loop"),
        ("ModelAPIError", "no API call failed"),
        ("AgentError", "more precise subclass"),
        ("agentturnlimiterror", "case-sensitive"),
        (2, "should be a string"),
    ),
)
def _outcome(answer: Any) -> Verdict:
    text = as_text(answer, "the outcome (an exception's class name, or 'end_turn')")
    given = text.strip().rsplit(".", 1)[-1]
    expected = turn_limit_outcome()
    if given == expected:
        return right(
            "{expected}: the second request brought another tool_use and "
            "max_turns={max_turns} left no request to send its result with",
            expected=expected,
            max_turns=MAX_TURNS,
        )
    if given.lower() == expected.lower():
        return wrong("nearly: class names are case-sensitive ({given!r})", given=given)
    if given in ("end_turn", "answered", "answer"):
        return wrong(
            "count the requests: the refused query costs one, the good query a second "
            "— and the answer would need a third (max_turns={max_turns})",
            max_turns=MAX_TURNS,
        )
    if given in ("RemoteMemoryValidationError", "RemoteMemoryError"):
        return wrong(
            "a refused query never raises in the loop: it goes back to the model as a "
            "tool_result with is_error: true, and the model tries again"
        )
    if given == "ModelAPIError":
        return wrong(
            "every HTTP request got a 200 here: no API call failed. What runs out is "
            "something the loop counts"
        )
    if given == "AgentError":
        return wrong("close: it is an AgentError, but a more precise subclass says why")
    return wrong(
        "{given!r} is not how this run ends: follow the turns one by one (each model "
        "request is one turn)",
        given=given,
    )


def http_requests(statuses: Sequence[int] = STATUSES, max_retries: int = 2) -> int:
    """HTTP requests the SDK sends for one scripted exchange whose first answers are
    ``statuses`` (then 200s), with the retries ``runtime_client()`` leaves on."""
    from ...agent import SCRIPTED_MODEL_ID, FlakyAPI, agent_loop

    api = FlakyAPI(*statuses)
    agent_loop(
        QUESTION,
        client=api.client(max_retries=max_retries),
        model=SCRIPTED_MODEL_ID,
        store=sample_store(),
        as_of=SAMPLE_AS_OF,
        query_id_prefix="grader",
    )
    return int(api.sent)


@exercise(
    "10.2",
    "HTTP requests behind 529, 529, then success",
    hints=(
        "The SDK retries a 529 by itself (up to max_retries=2 times per messages.create); "
        "the loop only sees the call that finally succeeded or failed.",
        "The first messages.create sends three HTTP requests: 529, 529, 200 (the tool_use). "
        "What does the loop do after a tool_use?",
        "The loop sends the tool_result in a second messages.create, and the server now "
        "answers it at once.",
    ),
    solution="# Exercise 10.2 — solution\nanswer = 4",
    wrong_answers=(
        (3, "one more request"),
        (2, "transcript.requests"),
        (6, "only failed responses are retried"),
        (1, "too few"),
        (9, "too many"),
        ("4", "should be an int"),
    ),
)
def _requests(answer: Any) -> Verdict:
    as_int(answer, "the number of HTTP requests", "an int")
    expected = http_requests()
    failed = len(STATUSES)
    if answer == expected:
        return right(
            "{expected}: {failed} failed, retried by the SDK inside the first "
            "messages.create, then the tool_use and the final answer",
            expected=expected,
            failed=failed,
        )
    if answer == expected - 1:
        return wrong(
            "the tool_use answer is not the end: the loop sends the tool_result in one "
            "more request, and the model answers that"
        )
    if answer == 2:
        return wrong(
            "2 is what the loop sees (transcript.requests): the SDK's retries of the "
            "failed requests happen inside one messages.create, but they are HTTP "
            "requests too"
        )
    if answer == expected + failed:
        return wrong(
            "only failed responses are retried, and max_retries is a limit, not a "
            "count: the second messages.create gets a 200 at once"
        )
    if answer < expected:
        return wrong(
            "too few: every failed attempt is a request of its own, and so is each turn of the loop"
        )
    return wrong(
        "too many: the loop itself never retries; only the SDK does, and only after an error"
    )
