"""The ``recall_history`` tool: its definition for the Messages API and its handler
(docs/reference.md "The agent boundary"). It answers ``RecallResult.to_json()`` as visible
text; refused input or a failing store is an ``is_error`` result of one line (no crash).
"""

from __future__ import annotations

import copy
import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .._tokens import content_terms, tokenize_all
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
    "ERROR_MAX_CHARS",
    "STORE_ERROR_PREFIX",
    "ToolOutcome",
    "all_projects_flag",
    "clip_shown",
    "error_outcome",
    "fit_recall",
    "note_similarity",
    "note_terms",
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


def integer_field(what: str, minimum: int, maximum: int, default: int) -> dict[str, Any]:
    return {
        "type": "integer",
        "minimum": minimum,
        "maximum": maximum,
        "default": default,
        "description": f"{what}, {minimum}-{maximum} (default {default}).",
    }


def object_schema(properties: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
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
        "limit": integer_field("How many hits to return", LIMIT_MIN, LIMIT_MAX, DEFAULT_LIMIT),
    },
    ["query"],
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


def all_projects_flag(given: Mapping[str, Any]) -> bool:
    """A call's ``all_projects`` (default false), refused unless true or false."""
    value = given.get("all_projects", False)
    if not isinstance(value, bool):
        raise RemoteMemoryValidationError("all_projects must be true or false")
    return value


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
    max_chars: int | None = None,
    schema: Mapping[str, Any] = RECALL_HISTORY_INPUT_SCHEMA,
) -> ToolOutcome:
    """Run one ``recall_history`` call; contract violations become an error outcome.
    ``max_chars``: the answer's bound (``fit_recall``); ``schema``: the fields it takes
    (the MCP server's adds ``all_projects``)."""

    def recall() -> ToolOutcome:
        given = check_input(RECALL_HISTORY, schema, tool_input)
        limit = given.get("limit", DEFAULT_LIMIT)
        every = all_projects_flag(given)
        result = engine.recall(
            given["query"], limit=limit, as_of=as_of, query_id=query_id, all_projects=every
        )
        if max_chars is None:
            return ToolOutcome(content=tool_payload(result))
        return fit_recall(result, max_chars)

    return guarded(recall)


def fit_recall(result: RecallResult, max_chars: int) -> ToolOutcome:
    """``tool_payload(result)`` when it has at most ``max_chars`` characters (every
    ordinary answer); else the same JSON with the fewest hits dropped from the end that
    makes it fit, and ``hits_dropped_for_size`` saying how many; else (the query alone is
    too long once escaped) an error of one line."""
    text = tool_payload(result)
    if len(text) <= max_chars:
        return ToolOutcome(content=text)
    data = result.to_dict()
    hits = data["hits"]
    for kept in range(len(hits) - 1, -1, -1):
        fitted = {**data, "hits": hits[:kept], "hits_dropped_for_size": len(hits) - kept}
        text = visible(json.dumps(fitted, indent=2, ensure_ascii=False), "json")
        if len(text) <= max_chars:
            return ToolOutcome(content=text)
    return error_outcome(
        f"the answer to this query would be over {max_chars:,} characters even without "
        "hits: use a shorter query"
    )


def tool_payload(result: RecallResult) -> str:
    """``result.to_json()`` as the model reads it: the same JSON value, invisible and
    direction-changing characters written as ``\\uXXXX`` escapes."""
    return visible(result.to_json(), "json")


# The longest error line: a message may quote what it refuses (a 1 MB timestamp, say).
ERROR_MAX_CHARS = 4_000


def error_outcome(message: str) -> ToolOutcome:
    """An ``is_error`` outcome: one line of visible text (a message may quote a stored id),
    at most ``ERROR_MAX_CHARS`` characters (longer: clipped, ending in "…")."""
    line = " ".join(message.split())
    shown = clip_shown(line, ERROR_MAX_CHARS, lambda text: len(visible(text, "text")))
    return ToolOutcome(content=visible(shown, "text"), is_error=True)


def clip_shown(text: str, budget: int, shown_length: Callable[[str], int]) -> str:
    """``text`` as shown (``shown_length`` measures it with its escapes) when it fits
    ``budget``, else its longest prefix that fits with "…" after it. For ``visible``'s
    forms an escape is at most 12 characters, so text this short always fits."""
    if len(text) * 12 <= budget or shown_length(text) <= budget:
        return text
    low, high = 0, min(len(text), budget)  # a prefix of ``low`` characters fits
    while low < high:
        middle = (low + high + 1) // 2
        if shown_length(text[:middle] + "…") <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low] + "…"


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


# -- similarity of two notes (remember's "similar", benchmarks/similar_notes.py) ---------


def note_terms(text: str) -> Counter[str]:
    """The term counts of a note, the library's terms (``memlib._tokens``) without
    English stopwords: what two notes share that says they are about the same thing."""
    return Counter(content_terms(tokenize_all(text)))


def note_similarity(first: Counter[str], second: Counter[str]) -> float:
    """Cosine of two notes' term counts (``note_terms``), in [0, 1]: 1 for the same
    words in the same proportions, 0 for no content word in common. Symmetric, and
    independent of the store (unlike a ranker's score, which depends on the other records)."""
    if len(first) > len(second):
        first, second = second, first
    dot = sum(count * second[term] for term, count in first.items() if term in second)
    if not dot:
        return 0.0
    norm = math.sqrt(sum(c * c for c in first.values()) * sum(c * c for c in second.values()))
    return min(1.0, dot / norm)
