"""The ``recall_history`` tool: its definition for the Messages API and its handler (SPEC §5).

The model sees only the definition below. The handler runs ``RecallEngine.recall`` and
returns ``RecallResult.to_json()`` — the contract's tool payload, as visible text (below).
Input the contract refuses (empty, punctuation only, limit out of range, a missing or
mistyped field) goes back to the model as a ``tool_result`` with ``is_error: true`` and
the contract's message, so the model can fix its query; the loop does not crash. A store
that fails under the call (corrupt, unsafe, out of space) comes back the same way, its
one-line message prefixed with ``STORE_ERROR_PREFIX`` so the model reports it instead of
retrying.

What goes back is what the model reads, so it is visible text (``memlib._visible``):
the JSON writes invisible and direction-changing characters as ``\\uXXXX`` escapes. It
decodes to exactly ``RecallResult.to_json()``, which stays the library's byte-for-byte
payload; only this model-facing copy is escaped.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
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
    "tool_result_block",
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

RECALL_HISTORY_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "maxLength": QUERY_MAX_CHARS,
            "description": (
                "The topic to search for, restated in full words (the service cannot see "
                "this chat)."
            ),
        },
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
    "required": ["query"],
    "additionalProperties": False,
}


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
        return tool_result_block(tool_use_id, self)


def tool_result_block(tool_use_id: str, outcome: ToolOutcome) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "content": outcome.content,
    }
    if outcome.is_error:
        block["is_error"] = True
    return block


def _check_input(tool_input: object) -> tuple[Any, Any]:
    if not isinstance(tool_input, Mapping):
        raise RemoteMemoryValidationError("recall_history input must be a JSON object")
    unknown = sorted(set(tool_input) - set(RECALL_HISTORY_INPUT_SCHEMA["properties"]))
    if unknown:
        raise RemoteMemoryValidationError(f"unknown recall_history field: {', '.join(unknown)}")
    if "query" not in tool_input:
        raise RemoteMemoryValidationError("recall_history needs a query")
    return tool_input["query"], tool_input.get("limit", DEFAULT_LIMIT)


def run_recall_history(
    engine: RecallEngine,
    tool_input: object,
    *,
    as_of: datetime | None = None,
    query_id: str | None = None,
) -> ToolOutcome:
    """Run one ``recall_history`` call; contract violations become an error outcome."""
    try:
        query, limit = _check_input(tool_input)
        result = engine.recall(query, limit=limit, as_of=as_of, query_id=query_id)
    except RemoteMemoryValidationError as exc:
        return error_outcome(str(exc))
    except RemoteMemoryError as exc:
        # Corruption, an unsafe path, a failed disk: the session can go on without
        # recall, and the model can tell the user why.
        return error_outcome(f"{STORE_ERROR_PREFIX}{exc}")
    return ToolOutcome(content=tool_payload(result))


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
        return (
            f"0 hits ({data.get('empty_reason')}); searched {searched}, "
            f"candidates {candidates}"
        )
    tops = ", ".join(f"{hit['memory_id']} ({hit['score']:.6f})" for hit in hits[:3])
    more = f" +{len(hits) - 3} more" if len(hits) > 3 else ""
    return (
        f"{len(hits)} hit{'s' if len(hits) != 1 else ''}: {tops}{more}; "
        f"searched {searched}, candidates {candidates}"
    )
