"""Exercises of ``10_agent_loop.ipynb``.

Both graders run the real loop on the real ``anthropic`` client with a scripted HTTP
transport (offline), so the expected answer is what the library and the SDK do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import RemoteMemoryError
from ...sample import SAMPLE_AS_OF
from . import Exercise, Verdict, right, wrong
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


def _outcome(answer: Any) -> Verdict:
    text = as_text(
        answer,
        "the outcome (an exception's class name, or 'end_turn')",
        zh="结局（一个异常的类名，或 'end_turn'）",
    )
    given = text.strip().rsplit(".", 1)[-1]
    expected = turn_limit_outcome()
    if given == expected:
        return right(
            f"{expected}: the second request brought another tool_use and "
            f"max_turns={MAX_TURNS} left no request to send its result with",
            zh=f"{expected}：第二次请求又带回一个 tool_use，而 max_turns={MAX_TURNS} "
            "已不剩请求来发送它的结果",
        )
    if given.lower() == expected.lower():
        return wrong(
            f"nearly: class names are case-sensitive ({given!r})",
            zh=f"差一点：类名区分大小写（{given!r}）",
        )
    if given in ("end_turn", "answered", "answer"):
        return wrong(
            f"count the requests: the refused query costs one, the good query a "
            f"second — and the answer would need a third (max_turns={MAX_TURNS})",
            zh=f"数一数请求：被拒绝的查询用掉一次，好的查询用掉第二次——"
            f"回答还需要第三次（max_turns={MAX_TURNS}）",
        )
    if given in ("RemoteMemoryValidationError", "RemoteMemoryError"):
        return wrong(
            "a refused query never raises in the loop: it goes back to the model as "
            "a tool_result with is_error: true, and the model tries again",
            zh="被拒绝的查询在循环中从不抛出异常：它作为 is_error: true 的 "
            "tool_result 回到模型，模型再试一次",
        )
    if given == "ModelAPIError":
        return wrong(
            "every HTTP request got a 200 here: no API call failed. What runs out "
            "is something the loop counts",
            zh="这里每个 HTTP 请求都得到 200：没有 API 调用失败。耗尽的是循环自己计数的东西",
        )
    if given == "AgentError":
        return wrong(
            "close: it is an AgentError, but a more precise subclass says why",
            zh="接近了：它是一个 AgentError，但有一个更精确的子类说明原因",
        )
    return wrong(
        f"{given!r} is not how this run ends: follow the turns one by one "
        "(each model request is one turn)",
        zh=f"这次运行不是以 {given!r} 结束的：逐轮跟踪（每次模型请求算一轮）",
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


def _requests(answer: Any) -> Verdict:
    as_int(answer, "the number of HTTP requests", "an int", zh="HTTP 请求数")
    expected = http_requests()
    failed = len(STATUSES)
    if answer == expected:
        return right(
            f"{expected}: {failed} failed, retried by the SDK inside the first "
            f"messages.create, then the tool_use and the final answer",
            zh=f"{expected}：{failed} 次失败，由 SDK 在第一次 messages.create 内部重试，"
            "然后是 tool_use 和最终回答",
        )
    if answer == expected - 1:
        return wrong(
            "the tool_use answer is not the end: the loop sends the tool_result in "
            "one more request, and the model answers that",
            zh="tool_use 的回答不是终点：循环再发一次请求送出 tool_result，模型回答的是这次请求",
        )
    if answer == 2:
        return wrong(
            "2 is what the loop sees (transcript.requests): the SDK's retries of "
            "the failed requests happen inside one messages.create, but they are "
            "HTTP requests too",
            zh="2 是循环看到的次数（transcript.requests）：SDK 对失败请求的重试发生在"
            "同一次 messages.create 内部，但它们也是 HTTP 请求",
        )
    if answer == expected + failed:
        return wrong(
            "only failed responses are retried, and max_retries is a limit, not a "
            "count: the second messages.create gets a 200 at once",
            zh="只有失败的响应才会重试，而且 max_retries 是上限，不是次数："
            "第二次 messages.create 立即得到 200",
        )
    if answer < expected:
        return wrong(
            "too few: every failed attempt is a request of its own, and so is "
            "each turn of the loop",
            zh="太少了：每次失败的尝试都是一个单独的请求，循环的每一轮也是",
        )
    return wrong(
        "too many: the loop itself never retries; only the SDK does, and only after an error",
        zh="太多了：循环本身从不重试；只有 SDK 重试，而且只在出错之后",
    )


Exercise(
    id="10.1",
    title="how the loop ends when the turns run out",
    grade=_outcome,
    hints=(
        "Each model request is one turn. Count them: the first answer carries the "
        "tool_use with '!!!', the second the tool_use with the good query.",
        "After the second tool_use the loop would need a third request to send the "
        "tool_result. With max_turns=2 it has none left.",
        "The loop ends with an exception in memlib.agent; it is named after what ran out.",
    ),
    hints_zh=(
        "每次模型请求算一轮。数一数：第一个回答带着查询 '!!!' 的 tool_use，"
        "第二个带着好查询的 tool_use。",
        "第二个 tool_use 之后，循环需要第三次请求才能送出 tool_result。"
        "max_turns=2 时已经没有请求可用。",
        "循环以 memlib.agent 中的一个异常结束；它以耗尽的东西命名。",
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
).register()

Exercise(
    id="10.2",
    title="HTTP requests behind 529, 529, then success",
    grade=_requests,
    hints=(
        "The SDK retries a 529 by itself (up to max_retries=2 times per messages.create); "
        "the loop only sees the call that finally succeeded or failed.",
        "The first messages.create sends three HTTP requests: 529, 529, 200 (the tool_use). "
        "What does the loop do after a tool_use?",
        "The loop sends the tool_result in a second messages.create, and the server now "
        "answers it at once.",
    ),
    hints_zh=(
        "SDK 会自己重试 529（每次 messages.create 最多 max_retries=2 次）；"
        "循环只看到最终成功或失败的那次调用。",
        "第一次 messages.create 发出三个 HTTP 请求：529、529、200（tool_use）。"
        "循环在 tool_use 之后做什么？",
        "循环在第二次 messages.create 中送出 tool_result，这次服务器立即回答。",
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
).register()
