"""``agent_loop``: the Messages API with ``recall_history``, until a final answer
(docs/reference.md "The agent boundary"). The client is any ``anthropic.Anthropic``, live or
on the offline scripted transport: the offline tests drive the code the online path runs.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..engine import RecallEngine
from ..stores._base import MemoryStore
from .errors import AgentError, AgentTurnLimitError, explain_api_error
from .prompt import build_system_prompt
from .tools import (
    RECALL_HISTORY,
    error_outcome,
    recall_history_tool,
    run_recall_history,
    summarize_tool_result,
)

__all__ = ["DEFAULT_MAX_TURNS", "AgentTranscript", "TranscriptEntry", "agent_loop"]

DEFAULT_MAX_TURNS = 6
DEFAULT_MAX_TOKENS = 1024


@dataclass(frozen=True)
class TranscriptEntry:
    """One content block of the exchange. ``turn`` 0 is the caller's input; turn N is
    the N-th model request (its answer and the tool results sent after it)."""

    turn: int
    role: str
    block_type: str
    text: str | None = None
    tool_use_id: str | None = None
    tool_name: str | None = None
    tool_input: Any = None
    content: str | None = None
    is_error: bool | None = None

    @property
    def tool_input_json(self) -> str:
        if self.block_type != "tool_use":
            return ""
        return json.dumps(self.tool_input, ensure_ascii=False)

    @property
    def result_summary(self) -> str:
        if self.block_type != "tool_result" or self.content is None:
            return ""
        return summarize_tool_result(self.content, self.is_error)

    def format(self) -> str:
        """The block as the CLI prints it: a header line, then the block's body."""
        label = f"{self.block_type} {self.tool_use_id}" if self.tool_use_id else self.block_type
        if self.is_error:
            label += " is_error"
        head = f"--- turn {self.turn} · {self.role} · {label} ---"
        if self.block_type == "text":
            body = self.text or ""
        elif self.block_type == "tool_use":
            body = f"{self.tool_name} {self.tool_input_json}"
        elif self.block_type == "tool_result":
            body = self.content or ""
        else:
            body = self.text or json.dumps(self.tool_input, ensure_ascii=False)
        return f"{head}\n{body}"


@dataclass
class AgentTranscript:
    """The whole exchange: what was sent, what came back, and how it ended."""

    model: str
    system: str
    messages: list[dict[str, Any]]
    entries: list[TranscriptEntry] = field(default_factory=list)
    requests: int = 0
    stop_reason: str | None = None

    @property
    def final_text(self) -> str:
        """The text of the model's last answer ("" before it answered)."""
        last = [e for e in self.entries if e.role == "assistant" and e.turn == self.requests]
        return "\n".join(e.text for e in last if e.block_type == "text" and e.text)

    @property
    def tool_calls(self) -> list[TranscriptEntry]:
        return [e for e in self.entries if e.block_type == "tool_use"]

    @property
    def tool_results(self) -> list[TranscriptEntry]:
        return [e for e in self.entries if e.block_type == "tool_result"]

    def to_dataframe(self) -> Any:
        """A pandas table, text on one line of at most 80 characters (pandas is imported
        here, only when a notebook asks)."""
        import pandas as pd

        rows = []
        for e in self.entries:
            text = " ".join((e.text or "").split())
            text = text if len(text) <= 80 else text[:79] + "…"
            rows.append((e.turn, e.role, e.block_type, text, e.tool_input_json, e.result_summary))
        columns = ["turn", "role", "block type", "text", "tool input", "tool result summary"]
        return pd.DataFrame(rows, columns=columns)

    def format(self) -> str:
        return "\n".join(
            [
                "=== system prompt (sent with every request, built once at session start) ===",
                self.system,
                *(e.format() for e in self.entries),
                f"=== stop_reason: {self.stop_reason} after {self.requests} model request(s) ===",
            ]
        )


def _block_to_param(block: Any) -> dict[str, Any]:
    """An SDK content block → the dict sent back as assistant content."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    # Other blocks (thinking, server tools) must go back exactly as they came.
    return dict(block.to_dict(exclude_none=True))


def _entries_of_message(turn: int, message: dict[str, Any]) -> list[TranscriptEntry]:
    role = message.get("role", "?")
    content = message.get("content")
    if isinstance(content, str):
        return [TranscriptEntry(turn, role, "text", text=content)]
    return [_entry_of_param(turn, role, block) for block in content or ()]


def _entry_of_param(turn: int, role: str, block: dict[str, Any]) -> TranscriptEntry:
    kind = block.get("type", "?")
    if kind == "text":
        return TranscriptEntry(turn, role, kind, text=block.get("text"))
    if kind == "tool_use":
        name, tool_input = block.get("name"), block.get("input")
        return TranscriptEntry(
            turn, role, kind, tool_use_id=block.get("id"), tool_name=name, tool_input=tool_input
        )
    if kind == "tool_result":
        content = block.get("content")
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        error = bool(block.get("is_error", False))
        return TranscriptEntry(
            turn, role, kind, tool_use_id=block.get("tool_use_id"), content=content, is_error=error
        )
    return TranscriptEntry(turn, role, kind, tool_input=block)


def agent_loop(
    messages: str | Sequence[dict[str, Any]],
    *,
    client: Any,
    model: str,
    store: MemoryStore | None = None,
    engine: RecallEngine | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
    as_of: datetime | None = None,
    system: str | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    query_id_prefix: str | None = None,
    on_entry: Callable[[TranscriptEntry], None] | None = None,
) -> AgentTranscript:
    """Drive the model until it answers; return the transcript.

    ``messages`` is the conversation so far (a string is one user message). ``system``
    defaults to ``build_system_prompt(store)``; pass the same string again to continue a
    session, so the profile is injected once. Raises ``ModelAPIError`` for a failed API
    call and ``AgentTurnLimitError`` after ``max_turns`` requests still asking for tools.
    """
    if engine is None:
        if store is None:
            raise AgentError("agent_loop needs a store or an engine")
        engine = RecallEngine(store)
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
        raise AgentError("max_turns must be a positive integer")
    conversation = _conversation(messages)
    if system is None:
        system = build_system_prompt(engine.store)
    transcript = AgentTranscript(model=model, system=system, messages=conversation)

    def record(entry: TranscriptEntry) -> None:
        transcript.entries.append(entry)
        if on_entry is not None:
            on_entry(entry)

    for message in conversation:
        for entry in _entries_of_message(0, message):
            record(entry)

    import anthropic  # the client exists, so the SDK is installed and loaded

    tools = [recall_history_tool()]
    secrets = (getattr(client, "api_key", None),)
    numbers = itertools.count(1)
    query_ids = (f"{query_id_prefix}-{n:03d}" if query_id_prefix else None for n in numbers)
    for turn in range(1, max_turns + 1):
        try:
            response = client.messages.create(
                model=model,
                system=system,
                tools=tools,
                messages=conversation,
                max_tokens=max_tokens,
            )
        except anthropic.APIError as exc:
            raise explain_api_error(exc, model=model, secrets=secrets) from None
        transcript.requests = turn
        transcript.stop_reason = response.stop_reason
        assistant = [_block_to_param(block) for block in response.content]
        conversation.append({"role": "assistant", "content": assistant})
        for block in assistant:
            record(_entry_of_param(turn, "assistant", block))
        if response.stop_reason != "tool_use":
            return transcript
        if turn == max_turns:
            break  # no request left to send the results with

        results = []
        for result in _run_tools(engine, assistant, as_of=as_of, query_ids=query_ids):
            results.append(result)
            record(_entry_of_param(turn, "user", result))
        conversation.append({"role": "user", "content": results})

    raise AgentTurnLimitError(
        f"the model was still calling tools after {max_turns} requests "
        f"(max_turns={max_turns}); no final answer",
        transcript=transcript,
    )


def _conversation(messages: str | Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    conversation = (
        [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)
    )
    if not conversation:
        raise AgentError("agent_loop needs at least one message")
    return conversation


def _run_tools(
    engine: RecallEngine,
    assistant: list[dict[str, Any]],
    *,
    as_of: datetime | None,
    query_ids: Iterator[str | None],
) -> Iterator[dict[str, Any]]:
    """The ``tool_result`` block of every ``tool_use`` block of the model's answer."""
    tool_uses = [block for block in assistant if block["type"] == "tool_use"]
    if not tool_uses:
        raise AgentError("the model stopped for tool_use but sent no tool_use block")
    for block in tool_uses:
        if block["name"] == RECALL_HISTORY:
            query_id = next(query_ids)
            outcome = run_recall_history(engine, block["input"], as_of=as_of, query_id=query_id)
        else:
            outcome = error_outcome(f"unknown tool: {block['name']}")
        yield outcome.to_block(block["id"])
