"""Notebook 10's MCP section: a real client session with ``memlib mcp`` (spawned over stdio,
as an MCP host does), a row per request, leaving out what changes between runs.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..agent.tools import summarize_tool_result

if TYPE_CHECKING:
    import pandas as pd

PROFILE_URI = "memlib://profile"

# ("tools/list", {}) · ("resources/read", {"uri": …}) · ("prompts/get", {"name": …})
# · (tool name, arguments)
McpCall = tuple[str, Mapping[str, Any]]


def server_args(store_url: str, user_id: str, *, as_of: datetime | None = None) -> list[str]:
    """The argv after ``python``: what an MCP host's configuration names, with the
    chapter's ranker (so the JSON is the library's default engine's)."""
    args = ["-m", "memlib", "--store", store_url, "--user", user_id, "mcp", "--ranker", "baseline"]
    if as_of is not None:
        args += ["--as-of", as_of.isoformat()]
    return args


def summarize_mcp_result(tool: str, text: str, is_error: bool) -> str:
    """One stable line for a tool result: no ``stored_at``, no clock."""
    if is_error or tool == "recall_history":
        return summarize_tool_result(text, is_error)
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if tool == "remember":
        source = data["source"]
        return (
            f"stored {data['memory_id']} ({data['kind']}; source {source['source_id']}, "
            f"{source['source_type']}, captured_at {source['captured_at']})"
        )
    if tool == "forget":
        return f"stored {data['memory_id']} ({data['kind']}): {data['content']}"
    if tool == "explain":
        return f"{data['verdict']}: {data['message']}"
    return text


async def _one(session: Any, request: str, arguments: Mapping[str, Any]) -> tuple[bool, str]:
    if request == "tools/list":
        listed = await session.list_tools()
        return False, ", ".join(tool.name for tool in listed.tools)
    if request == "resources/read":
        read = await session.read_resource(arguments["uri"])
        return False, "".join(getattr(part, "text", "") for part in read.contents)
    if request == "prompts/get":
        prompt = await session.get_prompt(arguments["name"])
        return False, "\n".join(getattr(m.content, "text", "") for m in prompt.messages)
    result = await session.call_tool(request, dict(arguments))
    text = "".join(getattr(part, "text", "") for part in result.content)
    return bool(result.is_error), summarize_mcp_result(request, text, bool(result.is_error))


async def mcp_transcript(
    store_url: str, user_id: str, calls: Sequence[McpCall], *, as_of: datetime | None = None
) -> pd.DataFrame:
    """``calls`` in one client session with a spawned ``memlib mcp``, a row per call."""
    import pandas as pd
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=server_args(store_url, user_id, as_of=as_of),
        # The store and the user are on the command line; nothing else leaks in.
        env={key: os.environ[key] for key in ("PATH", "HOME", "LANG") if key in os.environ},
    )
    rows = []
    with open(os.devnull, "w", encoding="utf-8") as quiet:
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            for request, arguments in calls:
                is_error, line = await _one(session, request, arguments)
                shown = json.dumps(dict(arguments), ensure_ascii=False) if arguments else ""
                rows.append((request, shown, is_error, line))
    columns = ["request", "arguments", "is_error", "result"]
    return pd.DataFrame(rows, index=range(1, len(rows) + 1), columns=columns).rename_axis("step")
