"""A real stdio client session with ``memlib mcp`` and its tool calls, checked as every
answer must be: one text block, within the tool's stated size bound (refusals included),
and a server that wrote no traceback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import ListRootsResult, Root, TextContent

from memlib.agent.mcp_server import ANSWER_MAX_CHARS


@asynccontextmanager
async def connect(
    server: StdioServerParameters, errlog: Path, *, roots: list[str] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized session; ``roots``: the workspace roots the client offers."""

    async def list_roots(context: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=uri) for uri in roots or []])  # type: ignore[arg-type]

    callback = None if roots is None else list_roots
    with errlog.open("w", encoding="utf-8") as log:
        async with (
            stdio_client(server, errlog=log) as (read, write),
            ClientSession(read, write, list_roots_callback=callback) as session,
        ):
            await session.initialize()
            yield session
    assert "Traceback" not in errlog.read_text(encoding="utf-8")


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    result = await session.call_tool(tool, arguments)
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    text = result.content[0].text
    assert len(text) <= ANSWER_MAX_CHARS[tool], (tool, len(text))
    return bool(result.is_error), text


async def refused(session: ClientSession, tool: str, arguments: dict[str, Any]) -> str:
    """The refusal's text: one line, as every refusal is."""
    is_error, text = await call(session, tool, arguments)
    assert is_error, text
    assert "\n" not in text and text == text.strip()
    return text
