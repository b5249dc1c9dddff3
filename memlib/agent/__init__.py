"""The agent boundary: ``recall_history`` on the Anthropic Messages API
(docs/reference.md "The agent boundary").

Importing this package imports neither ``anthropic`` nor ``httpx2``: the scripted model
(``memlib.agent.scripted``) is loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from .errors import AgentError, AgentTurnLimitError, ModelAPIError, explain_api_error
from .loop import AgentTranscript, TranscriptEntry, agent_loop
from .prompt import AGENT_RULES, build_system_prompt
from .tools import (
    RECALL_HISTORY,
    RECALL_HISTORY_DESCRIPTION,
    RECALL_HISTORY_INPUT_SCHEMA,
    STORE_ERROR_PREFIX,
    ToolOutcome,
    recall_history_tool,
    run_recall_history,
    summarize_tool_result,
    tool_payload,
)

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
]

_SCRIPTED = ("ScriptedModel", "scripted_client", "derive_query", "SCRIPTED_MODEL_ID", "FlakyAPI")


def __getattr__(name: str) -> Any:
    if name not in _SCRIPTED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.scripted"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
