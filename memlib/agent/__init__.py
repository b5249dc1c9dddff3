"""The agent boundary: ``recall_history`` on the Anthropic Messages API (SPEC §5).

Two paths use the store. The latest PROFILE record is injected once, at session start,
at the top of the system prompt (``build_system_prompt``). CONVERSATION records are
searched only when the model calls ``recall_history`` (``agent_loop`` runs the call and
sends ``RecallResult.to_json()`` back as the ``tool_result``, with invisible characters
written as visible escapes: ``tool_payload``).

Importing this package imports neither ``anthropic`` nor ``httpx2`` and builds no
client: names are loaded on first use. The live client comes from
``memlib.runtime_client()``; the offline one from ``scripted_client()`` — the same SDK
class on a scripted HTTP transport.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "AGENT_RULES",
    "RECALL_HISTORY",
    "RECALL_HISTORY_DESCRIPTION",
    "RECALL_HISTORY_INPUT_SCHEMA",
    "SCRIPTED_MODEL_ID",
    "STORE_ERROR_PREFIX",
    "AgentError",
    "AgentTranscript",
    "AgentTurnLimitError",
    "FlakyAPI",
    "ModelAPIError",
    "ScriptedModel",
    "ToolOutcome",
    "TranscriptEntry",
    "agent_loop",
    "build_system_prompt",
    "derive_query",
    "explain_api_error",
    "recall_history_tool",
    "run_recall_history",
    "scripted_client",
    "summarize_tool_result",
    "tool_payload",
    "tool_result_block",
]

_HOMES = {
    "tools": (
        "RECALL_HISTORY", "RECALL_HISTORY_DESCRIPTION", "RECALL_HISTORY_INPUT_SCHEMA",
        "ToolOutcome", "recall_history_tool", "run_recall_history", "tool_result_block",
        "summarize_tool_result", "STORE_ERROR_PREFIX", "tool_payload",
    ),
    "prompt": ("AGENT_RULES", "build_system_prompt"),
    "loop": ("agent_loop", "AgentTranscript", "TranscriptEntry"),
    "errors": ("AgentError", "ModelAPIError", "AgentTurnLimitError", "explain_api_error"),
    "scripted": ("ScriptedModel", "scripted_client", "derive_query", "SCRIPTED_MODEL_ID",
                 "FlakyAPI"),
}
_WHERE = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
