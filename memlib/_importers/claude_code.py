"""Claude Code session logs: ``~/.claude/projects/<project>/<session-id>.jsonl``, one entry
a line. Imported: the ``text`` of ``user`` and ``assistant`` entries, by ``uuid``,
``sessionId``, ``timestamp`` and ``cwd`` (docs/reference.md#export)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._safejson import loads_input_line
from ..errors import RemoteMemoryValidationError
from ..records import LIMITS
from . import Converted, InputError, files_under, message_items, text_field, timestamp_of

SOURCE_TYPE = "claude_code_session"
PREFIX = "claude-code"
_ROLES = ("user", "assistant")
# Text Claude Code writes as a user message for a slash command and its output.
_COMMAND_TAGS = ("<command-name>", "<command-message>", "<local-command-stdout>")


def read_sessions(paths: Sequence[str | Path]) -> Converted:
    """Every session file named, or under a folder named (``*.jsonl``)."""
    out = Converted()
    for path in files_under(paths, "*.jsonl"):
        _read_file(path, out)
    return out


def _entries(path: Path, out: Converted) -> list[tuple[int, dict[str, Any]]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    lines = data.split(b"\n")
    entries: list[tuple[int, dict[str, Any]]] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            entry = loads_input_line(raw, f"{path}: line {number}")
        except RemoteMemoryValidationError:
            if number == len(lines):  # no newline after it: cut short by a live session
                out.skipped["incomplete last lines"] += 1
                continue
            raise
        if not isinstance(entry, dict):
            raise InputError(f"{path}: line {number}: not a JSON object")
        entries.append((number, entry))
    return entries


def _read_file(path: Path, out: Converted) -> None:
    entries = _entries(path, out)
    # One title per session, from the first folder it ran in: a record never changes.
    titles: dict[str, str] = {}
    for number, entry in entries:
        where = f"{path}: line {number}"
        kind = entry.get("type")
        reason = _skip_reason(kind, entry)
        if reason:
            out.skipped[reason] += 1
            continue
        text, blocks = _text(entry, where)
        if not text.strip():
            out.skipped["tool calls, tool results or thinking only" if blocks else "empty"] += 1
            continue
        if kind == "user" and text.lstrip().startswith(_COMMAND_TAGS):
            out.skipped["slash commands and their output"] += 1
            continue
        session = text_field(entry.get("sessionId"), f"{where}: sessionId")
        if session not in titles:
            cwd = entry.get("cwd")
            place = cwd if isinstance(cwd, str) and cwd.strip() else path.parent.name
            titles[session] = f"Claude Code session in {place}"[: LIMITS["title"]]
        captured = timestamp_of(entry.get("timestamp"), f"{where}: timestamp")
        source = dict(
            source_id=session, source_type=SOURCE_TYPE, title=titles[session], captured_at=captured
        )
        uuid = text_field(entry.get("uuid"), f"{where}: uuid")
        message_items(out, where, PREFIX, source, uuid, str(kind), text)


def _skip_reason(kind: object, entry: dict[str, Any]) -> str | None:
    if kind not in _ROLES:
        return f"{kind if isinstance(kind, str) else 'untyped'} entries"
    if entry.get("isMeta") is True:
        return "meta entries"
    if entry.get("isSidechain") is True:
        return "subagent (sidechain) entries"
    return None


def _text(entry: dict[str, Any], where: str) -> tuple[str, int]:
    """The message's text, and how many blocks of it were not text."""
    message = entry.get("message")
    if not isinstance(message, dict):
        raise InputError(f"{where}: message: must be an object")
    content = message.get("content")
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        raise InputError(f"{where}: message.content: must be a string or a list of blocks")
    texts: list[str] = []
    other = 0
    for index, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise InputError(f"{where}: message.content[{index}]: must be a block with a type")
        if block["type"] != "text":
            other += 1  # tool_use, tool_result, thinking, image…
            continue
        if not isinstance(block.get("text"), str):
            raise InputError(f"{where}: message.content[{index}].text: must be a string")
        texts.append(block["text"])
    return "\n".join(texts), other
