"""Fuzz target: MCP tool calls, through the SDK's own stdio client, to ``memlib mcp``.

Each case is one ``tools/call`` with a fuzzed tool name and fuzzed arguments (valid
ones with a few fields dropped, added or replaced by anything, sometimes huge).
Documented result (docs/reference.md#agent, ``memlib/agent/mcp_server.py``): a tool
result with one text block — JSON when it succeeded, one line of text with ``isError``
when it was refused (never memlib's "internal error" line, which stands for a bug) — or
a protocol error for an unknown tool or a message too big to read; the session answers
the next call; the server never writes a traceback to stderr.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from memlib._runtime import scope_path  # noqa: E402
from memlib.records import format_timestamp  # noqa: E402
from memlib.sample import SAMPLE_AS_OF, SAMPLE_QUERY, open_sample_store  # noqa: E402

from . import common  # noqa: E402

TARGET = "mcp_calls"
TOOLS = ("recall_history", "remember", "update", "list", "forget", "explain")
FIELDS = {
    "recall_history": ("query", "limit"),
    "remember": (
        "content",
        "summary",
        "memory_id",
        "source_id",
        "source_type",
        "title",
        "captured_at",
    ),
    "update": ("memory_id", "content", "summary", "reason"),
    "list": ("since", "kind", "cursor", "limit"),
    "forget": ("memory_id", "reason"),
    "explain": ("query", "memory_id", "limit"),
}
# A session is started again after this many calls: a long session is one case, many
# sessions are another (start, initialize, the first call).
SESSION_CALLS = 5_000
# The largest message ``memlib mcp`` reads (README, "memlib mcp"); the arguments alone
# past it make a message past it.
MESSAGE_MAX_BYTES = 1 << 20
# A call that has no answer by then is a hang (the session is started again).
CALL_SECONDS = min(common.CASE_SECONDS, 10.0)


def _json_value(r: random.Random, limit: int = 2_000) -> Any:
    """``common.value`` kept to what JSON can carry (the client must be able to send it)."""
    value = common.value(r, limit=limit)
    if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
        return r.choice((1e308, -1e308, 0.5))
    if isinstance(value, list | dict) and value:
        # The SDK client's own encoder stops near 250 levels (its error, not the server's).
        return common.deep(r, r.choice((1, 5, 40, 150)))
    if isinstance(value, bytes | tuple | set) or type(value) is object:
        return repr(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**300:
        # Past the 4,300 digits Python's int() reads: rare, since on a tree where the
        # server drops such a line unanswered each one costs a whole CALL_SECONDS.
        return 10**5_000 if r.random() < 0.01 else r.choice((10**300, -(10**300)))
    return value


def _sendable(value: Any) -> Any:
    """``value`` without lone surrogates: the SDK client cannot encode them (a raw
    client could send them escaped; the store and import targets cover those)."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [_sendable(v) for v in value]
    if isinstance(value, dict):
        return {_sendable(k): _sendable(v) for k, v in value.items()}
    return value


def _valid(r: random.Random, tool: str, ids: list[str]) -> dict[str, Any]:
    words = " ".join(common.word(r) for _ in range(r.randint(1, 5)))
    memory = r.choice(ids) if ids and r.random() < 0.7 else f"conversation-00{r.randint(1, 9)}"
    valid: dict[str, dict[str, Any]] = {
        "recall_history": {"query": words, "limit": r.randint(1, 10)},
        "remember": {"content": f"Decided {words}.", "summary": words},
        "forget": {"memory_id": memory, "reason": "fuzz"},
        "explain": {"query": words, "memory_id": memory, "limit": r.randint(1, 10)},
    }
    return valid.get(tool, {"query": words})


def _arguments(r: random.Random, tool: str, ids: list[str]) -> dict[str, Any]:
    args = _valid(r, tool, ids)
    for _ in range(r.choice((0, 0, 1, 1, 1, 2, 3))):
        roll = r.random()
        if roll < 0.55:
            name = r.choice(FIELDS.get(tool, ("query",)))
            made = (
                common.timestamp(r)
                if name == "captured_at"
                else common.memory_id(r, 0)
                if name == "memory_id"
                else None
            )
            # Only their strings as drawn: any other value goes through _json_value.
            args[name] = made if isinstance(made, str) else _json_value(r, limit=20_000)
        elif roll < 0.7 and args:
            del args[r.choice(sorted(args))]
        elif roll < 0.85:
            args[
                r.choice(
                    (
                        "user_id",
                        "user",
                        "scope",
                        "x",
                        "query\n",
                        "",
                        "Limit",
                        "\x00",
                        "\u202equery",
                        "a" * 300,
                    )
                )
            ] = _json_value(r)
        elif roll < 0.93:
            args[r.choice(FIELDS.get(tool, ("query",)))] = common.deep(r, r.choice((5, 40, 150)))
        else:  # big: under and over the largest message the server reads
            size = r.choice((30_000, 300_000, 1_100_000, 3_000_000))
            args[r.choice(FIELDS.get(tool, ("query",)))] = "word " * (size // 5)
    return _sendable(args)


@asynccontextmanager
async def _session(params: StdioServerParameters, errlog: Any) -> AsyncIterator[ClientSession]:
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _size(args: Any) -> int:
    try:
        return len(json.dumps(args))
    except (TypeError, ValueError):
        return 0


async def _drive(
    params: StdioServerParameters, errlog: Path, numbers: range, run: common.Run
) -> None:
    failures = run.failures
    ids: list[str] = []
    numbers_iter = iter(numbers)
    finished = False
    while not finished:
        with errlog.open("a", encoding="utf-8") as log:
            async with _session(params, log) as session:
                for calls, number in enumerate(numbers_iter):
                    r = common.rng(TARGET, number)
                    tool = (
                        r.choice(TOOLS)
                        if r.random() < 0.95
                        else r.choice(
                            (
                                "",
                                "recall",
                                "RECALL_HISTORY",
                                "recall_history\n",
                                "\u202eforget",
                                "x" * 500,
                            )
                        )
                    )
                    args = _arguments(r, tool, ids)
                    detail = f"{tool!r} {common.brief(args)}"

                    def fail(
                        what: str,
                        error: BaseException | None = None,
                        detail: str = detail,
                        number: int = number,
                        args: Any = args,
                    ) -> None:
                        failures.add(
                            common.signature(what, error),
                            number,
                            f"{detail} -> {error!r}" if error else detail,
                            size=_size(args),
                        )

                    try:
                        with anyio.fail_after(CALL_SECONDS):
                            result = await session.call_tool(tool, args)
                    except MCPError as exc:
                        run.count += 1
                        failures.note("protocol error")
                        # Refused before the tool: an unknown tool, a message over the
                        # size limit, or one Python's json cannot read (a huge integer).
                        if tool in TOOLS and 0 < _size(args) < 1_000_000:
                            fail("a protocol error for a known tool", exc)
                        elif not common.one_line(str(exc)):
                            fail("a protocol error of more than one line", exc)
                        continue
                    except TimeoutError as exc:
                        run.count += 1
                        size = _size(args)
                        fail(
                            "no answer in time to a message of "
                            f"{'over' if size > 1 << 20 else 'under'} 1 MiB"
                            f"{'' if size else ' (that json.dumps refuses)'}",
                            exc,
                        )
                        break  # the session may be stuck: start another
                    except Exception as exc:  # noqa: BLE001
                        run.count += 1
                        fail("the session failed", exc)
                        break
                    run.count += 1
                    if _size(args) > MESSAGE_MAX_BYTES:
                        # Refused as it streams in, before any of it is parsed.
                        fail("a message over 1 MiB was read and answered by the tool")
                        continue
                    if len(result.content) != 1 or result.content[0].type != "text":
                        fail("not one text block")
                        continue
                    text = result.content[0].text
                    failures.note(
                        f"{tool if tool in TOOLS else 'other'}: "
                        f"{'error' if result.is_error else 'ok'}"
                    )
                    if result.is_error:
                        if not common.one_line(text):
                            fail("an error result of more than one line", ValueError(text))
                        elif text.startswith("internal error"):
                            fail("an internal error", ValueError(text))
                    else:
                        try:
                            data = json.loads(text)
                        except ValueError as exc:
                            fail("a result that is not JSON", exc)
                            continue
                        if tool == "remember" and isinstance(data, dict):
                            ids.append(data.get("memory_id", ""))
                    if calls + 1 >= SESSION_CALLS:
                        break
                else:
                    finished = True
                # Still alive: a plain call answers after whatever came before.
                try:
                    with anyio.fail_after(common.CASE_SECONDS):
                        last = await session.call_tool("recall_history", {"query": SAMPLE_QUERY})
                    if last.is_error:
                        failures.add(
                            "the session's last call was refused",
                            -1,
                            str(getattr(last.content[0], "text", last.content[0])),
                        )
                except Exception as exc:  # noqa: BLE001
                    failures.add(
                        common.signature("the session did not answer at the end", exc),
                        -1,
                        repr(exc),
                    )
    if "Traceback" in errlog.read_text(encoding="utf-8"):
        text = errlog.read_text(encoding="utf-8")
        at = text.index("Traceback")
        failures.add("a traceback on the server's stderr", -1, text[at : at + 1_500])


def _run(tmp_path: Path, env: dict[str, str], *, stress: bool) -> None:
    folder = common.work_folder(tmp_path)
    try:
        root = folder / "memory"
        open_sample_store(root)
        url = f"jsonl:{scope_path(root, 'alice')}"
        args = [
            "-m",
            "memlib",
            "--store",
            url,
            "--user",
            "alice",
            "mcp",
            "--as-of",
            format_timestamp(SAMPLE_AS_OF),
        ]
        params = StdioServerParameters(command=sys.executable, args=args, env=env)
        with common.Run(TARGET) as run:
            anyio.run(
                _drive,
                params,
                folder / "server.stderr",
                common.cases(150, 60_000, stress=stress),
                run,
            )
        run.check()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_mcp_calls_sample(tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    _run(tmp_path, subprocess_env, stress=False)


@pytest.mark.stress
def test_mcp_calls_full(tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    _run(tmp_path, subprocess_env, stress=True)
