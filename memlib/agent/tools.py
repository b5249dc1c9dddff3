"""The ``recall_history`` tool: its definition for the Messages API and its handler
(docs/reference.md "The agent boundary").

The handler returns ``RecallResult.to_json()`` as visible text (``memlib._visible``).
Refused input and a failing store go back to the model as an ``is_error`` tool result of
one line (a store failure prefixed with ``STORE_ERROR_PREFIX``, so the model reports it
instead of retrying): the loop does not crash.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .._visible import visible
from ..engine import RecallEngine
from ..errors import RemoteMemoryError, RemoteMemoryValidationError
from ..normalize import LIMIT_MAX, LIMIT_MIN, QUERY_MAX_CHARS
from ..result import RecallResult

__all__ = [
    "DEFAULT_LIMIT",
    "RECALL_HISTORY",
    "RECALL_HISTORY_DESCRIPTION",
    "RECALL_HISTORY_INPUT_SCHEMA",
    "STORE_ERROR_PREFIX",
    "ToolOutcome",
    "error_outcome",
    "recall_history_tool",
    "run_recall_history",
    "tool_payload",
]

RECALL_HISTORY = "recall_history"
DEFAULT_LIMIT = 5
# The system prompt tells the model to fix its query after an error; this says that
# no query can fix this one.
STORE_ERROR_PREFIX = "memory store error (not a problem with the query; do not retry): "

RECALL_HISTORY_DESCRIPTION = (
    "Search the user's earlier conversations (stored conversation records) and return the "
    "best matching records as JSON: each hit has a rank, memory_id, snippet, provenance "
    "(source, title, captured_at) and a score breakdown. Call it when the user refers to "
    "past work, decisions or preferences that are not visible in this chat. "
    "The recall service cannot see the current chat: it only receives your query, so the "
    "query must restate the topic in full words, e.g. 'layered memory design decision'. "
    "'continue last time', 'that thing' or 'what we discussed' are not queries. "
    "An empty result (empty_reason 'no_matching_terms', or 'below_min_score' when every "
    "match scored under the service's floor) means nothing relevant was found; say so "
    "instead of guessing. A query without letters or digits, or a limit outside "
    f"{LIMIT_MIN}-{LIMIT_MAX}, is refused with an error message: fix the query and retry."
)


def string_field(max_chars: int, description: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": max_chars, "description": description}


def object_schema(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


RECALL_HISTORY_INPUT_SCHEMA = object_schema(
    {
        "query": string_field(
            QUERY_MAX_CHARS,
            "The topic to search for, restated in full words (the service cannot see this chat).",
        ),
        "limit": {
            "type": "integer",
            "minimum": LIMIT_MIN,
            "maximum": LIMIT_MAX,
            "default": DEFAULT_LIMIT,
            "description": (
                f"How many hits to return, {LIMIT_MIN}-{LIMIT_MAX} (default {DEFAULT_LIMIT})."
            ),
        },
    },
    "query",
)


def recall_history_tool() -> dict[str, Any]:
    """The tool definition passed as ``tools=[...]`` (a fresh copy each call)."""
    return {
        "name": RECALL_HISTORY,
        "description": RECALL_HISTORY_DESCRIPTION,
        "input_schema": copy.deepcopy(RECALL_HISTORY_INPUT_SCHEMA),
    }


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call gives back: the ``tool_result`` content and its error flag."""

    content: str
    is_error: bool = False

    def to_block(self, tool_use_id: str) -> dict[str, Any]:
        block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": self.content}
        return {**block, "is_error": True} if self.is_error else block


def check_input(tool: str, schema: Mapping[str, Any], tool_input: object) -> dict[str, Any]:
    # Only the fields: their values are the library's to check, with its own messages.
    if not isinstance(tool_input, Mapping):
        raise RemoteMemoryValidationError(f"{tool} input must be a JSON object")
    unknown = sorted(set(tool_input) - set(schema["properties"]))
    if unknown:
        raise RemoteMemoryValidationError(f"unknown {tool} field: {', '.join(unknown)}")
    missing = [name for name in schema["required"] if name not in tool_input]
    if missing:
        needs = "a query" if tool == RECALL_HISTORY else " and ".join(missing)
        raise RemoteMemoryValidationError(f"{tool} needs {needs}")
    return dict(tool_input)


def guarded(call: Callable[[], ToolOutcome]) -> ToolOutcome:
    """``call()``; a refusal of the library becomes an error outcome."""
    try:
        return call()
    except RemoteMemoryValidationError as exc:
        return error_outcome(str(exc))
    except RemoteMemoryError as exc:
        # Corruption, an unsafe path, a failed disk: the session can go on without
        # recall, and the model can tell the user why.
        return error_outcome(f"{STORE_ERROR_PREFIX}{exc}")


def run_recall_history(
    engine: RecallEngine,
    tool_input: object,
    *,
    as_of: datetime | None = None,
    query_id: str | None = None,
) -> ToolOutcome:
    """Run one ``recall_history`` call; contract violations become an error outcome."""

    def recall() -> ToolOutcome:
        given = check_input(RECALL_HISTORY, RECALL_HISTORY_INPUT_SCHEMA, tool_input)
        limit = given.get("limit", DEFAULT_LIMIT)
        result = engine.recall(given["query"], limit=limit, as_of=as_of, query_id=query_id)
        return ToolOutcome(content=tool_payload(result))

    return guarded(recall)


def tool_payload(result: RecallResult) -> str:
    """``result.to_json()`` as the model reads it: the same JSON value, invisible and
    direction-changing characters written as ``\\uXXXX`` escapes."""
    return visible(result.to_json(), "json")


def error_outcome(message: str) -> ToolOutcome:
    """An ``is_error`` outcome: one line of visible text (a message may quote a stored id)."""
    return ToolOutcome(content=visible(" ".join(message.split()), "text"), is_error=True)


def summarize_tool_result(content: str, is_error: bool | None = None) -> str:
    """One line for a transcript table: hits and scores, or the error message."""
    if is_error:
        return f"error: {content}"
    try:
        data = json.loads(content)
        hits = data["hits"]
        searched, candidates = data["searched_records"], data["candidate_records"]
    except (ValueError, KeyError, TypeError):
        return content if len(content) <= 80 else content[:77] + "..."
    if not hits:
        return f"0 hits ({data.get('empty_reason')}); searched {searched}, candidates {candidates}"
    tops = ", ".join(f"{hit['memory_id']} ({hit['score']:.6f})" for hit in hits[:3])
    more = f" +{len(hits) - 3} more" if len(hits) > 3 else ""
    return (
        f"{len(hits)} hit{'s' if len(hits) != 1 else ''}: {tops}{more}; "
        f"searched {searched}, candidates {candidates}"
    )
