"""Importers for the conversations people already have: one module per format, each
turning a message someone wrote into ``conversation`` records (docs/reference.md#export).
A record's id derives from its source and message ids, so a second import writes nothing."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._tokens import index_terms
from ..errors import RemoteMemoryCorruptionError, RemoteMemoryValidationError
from ..records import LIMITS, MAX_TERMS, collapse_whitespace, format_timestamp, parse_timestamp

# Room left in ``content`` for the role prefix of a part.
_PART_CHARS = LIMITS["content"] - 100


@dataclass
class Converted:
    """What an importer made of its inputs: ``(where, item)`` pairs, and what it skipped."""

    items: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    sources: set[str] = field(default_factory=set)


class InputError(RemoteMemoryValidationError):
    """Input an importer cannot read: the message names the file, place and field."""


def timestamp_of(value: object, where: str) -> str:
    """An aware ISO-8601 text or a Unix time in seconds, as a stored timestamp."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return format_timestamp(datetime.fromtimestamp(value, tz=UTC))
        except (OverflowError, OSError, ValueError):
            raise InputError(f"{where}: not a time: {value!r}") from None
    try:
        return format_timestamp(parse_timestamp(value))
    except RemoteMemoryCorruptionError as exc:
        raise InputError(f"{where}: {exc}") from None


def text_field(value: object, where: str) -> str:
    """An id the input names, as a ``source_id`` can hold it."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where}: must be a non-empty string")
    text = collapse_whitespace(value)
    if len(text) > LIMITS["source_id"]:
        raise InputError(f"{where}: longer than {LIMITS['source_id']:,} characters")
    return text


def _cut(text: str, size: int) -> list[str]:
    """``text`` in pieces of at most ``size`` characters, cut at spaces where it can."""
    pieces: list[str] = []
    while len(text) > size:
        at = text.rfind(" ", size // 2, size + 1)
        at = size if at < 0 else at
        pieces.append(text[:at].strip())
        text = text[at:].strip()
    pieces.append(text)
    return [p for p in pieces if p]


def parts_of(text: str) -> list[str]:
    """The message text in parts a record can hold (characters and distinct terms)."""
    done: list[str] = []
    todo = _cut(text, _PART_CHARS)
    while todo:
        piece = todo.pop(0)
        if len(piece) > 1 and len(index_terms(piece)) > MAX_TERMS - 50:
            todo[:0] = _cut(piece, max(1, len(piece) // 2))
        else:
            done.append(piece)
    return done


def message_items(
    out: Converted,
    where: str,
    prefix: str,
    source: dict[str, str],
    message_id: str,
    role: str,
    text: str,
) -> None:
    """Add the records of one message (one, or one per part) to ``out``: ids of ``prefix``
    and 24 hex digits of sha256 over the source and message ids."""
    text = collapse_whitespace(text)
    if not text:
        out.skipped["messages with no text"] += 1
        return
    pieces = parts_of(text)
    digest = hashlib.sha256(f"{source['source_id']}\n{message_id}".encode()).hexdigest()
    base = f"{prefix}-{digest[:24]}"
    out.sources.add(source["source_id"])
    for number, piece in enumerate(pieces, start=1):
        content = f"{role}: {piece}"
        item = {
            "kind": "conversation",
            "memory_id": base if len(pieces) == 1 else f"{base}.{number}",
            "content": content,
            "summary": content[: LIMITS["summary"]],
            "source": dict(source),
        }
        out.items.append((where, item))


def files_under(paths: Sequence[str | Path], pattern: str) -> list[Path]:
    """Each path, or for a folder every file under it matching ``pattern``, sorted."""
    found: list[Path] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found += sorted(p for p in path.rglob(pattern) if p.is_file())
        elif path.is_file():
            found.append(path)
        else:
            raise InputError(f"no such file or folder: {name}")
    return found


def reader_for(name: str) -> Callable[[Sequence[str | Path]], Converted]:
    """The importer of ``--format NAME``: ``claude-code`` or ``chatgpt``."""
    if name == "claude-code":
        from .claude_code import read_sessions

        return read_sessions
    if name == "chatgpt":
        from .chatgpt import read_conversations

        return read_conversations
    raise RemoteMemoryValidationError(f"unknown import format {name!r}")
