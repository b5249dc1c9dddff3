"""The ChatGPT data export: ``conversations.json`` (alone, in its folder or ``.zip``).

A conversation's ``mapping`` holds node id → ``{message, parent, children}``; what is shown
is the branch from ``current_node`` up to the root (other branches are edits or retries).
Imported: the text of ``user`` and ``assistant`` messages (docs/reference.md#export)."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..records import LIMITS, collapse_whitespace
from . import Converted, InputError, message_items, text_field, timestamp_of

SOURCE_TYPE = "chatgpt_conversation"
PREFIX = "chatgpt"
_FILE = "conversations.json"
_UNTITLED = "Untitled ChatGPT conversation"


def read_conversations(paths: Sequence[str | Path]) -> Converted:
    out = Converted()
    for name in paths:
        path, data = _load(Path(name))
        if not isinstance(data, list):
            raise InputError(f"{path}: must be a JSON list of conversations")
        for index, conversation in enumerate(data):
            _conversation(conversation, f"{path}: conversations[{index}]", out)
    return out


def _load(path: Path) -> tuple[str, Any]:
    """``(name for messages, parsed JSON)`` of a file, a folder holding it, or a zip."""
    try:
        if path.is_dir():
            path = path / _FILE
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                names = [n for n in archive.namelist() if n.rsplit("/", 1)[-1] == _FILE]
                if not names:
                    raise InputError(f"{path}: the archive holds no {_FILE}")
                shown, raw = f"{path}!{names[0]}", archive.read(names[0])
        else:
            shown, raw = str(path), path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except zipfile.BadZipFile as exc:
        raise InputError(f"{path}: not a readable zip archive: {exc}") from None
    try:
        return shown, json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{shown}: not UTF-8 (byte {exc.start + 1})") from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{shown}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"
        ) from None
    except (RecursionError, ValueError) as exc:
        raise InputError(f"{shown}: invalid JSON: {exc}") from None


def _conversation(conversation: Any, where: str, out: Converted) -> None:
    if not isinstance(conversation, dict):
        raise InputError(f"{where}: must be an object")
    mapping = conversation.get("mapping")
    if not isinstance(mapping, dict):
        raise InputError(f"{where}.mapping: must be an object of node id → node")
    ident = conversation.get("conversation_id", conversation.get("id"))
    source_id = text_field(ident, f"{where}.conversation_id")
    title = conversation.get("title")
    if not isinstance(title, str) or not title.strip():
        title = _UNTITLED
    title = collapse_whitespace(title)[: LIMITS["title"]]
    start = conversation.get("create_time")
    for node_id in _branch(mapping, conversation.get("current_node"), where):
        node_where = f"{where}.mapping[{_key(node_id)}]"
        message = mapping[node_id].get("message")
        # The root and other nodes have no message; _message counts one not imported.
        found = None if message is None else _message(message, f"{node_where}.message", out)
        if found is None:
            continue
        when = message.get("create_time")
        captured = timestamp_of(
            start if when is None else when, f"{node_where}.message.create_time"
        )
        source = dict(
            source_id=source_id, source_type=SOURCE_TYPE, title=title, captured_at=captured
        )
        message_id = message.get("id", node_id)
        if not isinstance(message_id, str) or not message_id:
            raise InputError(f"{node_where}.message.id: must be a non-empty string")
        message_items(out, node_where, PREFIX, source, message_id, *found)


def _key(node_id: object) -> str:
    return json.dumps(node_id, ensure_ascii=False)


def _branch(mapping: dict[str, Any], current: object, where: str) -> list[str]:
    """The node ids from the root down to ``current``."""
    if not isinstance(current, str) or current not in mapping:
        raise InputError(f"{where}.current_node: must name a node of mapping")
    path: list[str] = []
    node_id: object = current
    while node_id is not None:
        if not isinstance(node_id, str) or node_id not in mapping:
            raise InputError(f"{where}.mapping[{_key(path[-1])}].parent: names no node of mapping")
        if node_id in path:
            raise InputError(f"{where}.mapping[{_key(path[-1])}].parent: the parents form a loop")
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise InputError(f"{where}.mapping[{_key(node_id)}]: must be an object")
        path.append(node_id)
        node_id = node.get("parent")
    return path[::-1]


def _message(message: Any, where: str, out: Converted) -> tuple[str, str] | None:
    """``(role, text)`` of a message to import, else None (counted in ``out.skipped``)."""
    if not isinstance(message, dict):
        raise InputError(f"{where}: must be an object")
    author = message.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    if not isinstance(role, str):
        raise InputError(f"{where}.author.role: must be a string")
    content = message.get("content")
    if not isinstance(content, dict) or not isinstance(content.get("content_type"), str):
        raise InputError(f"{where}.content.content_type: must be a string")
    kind = content["content_type"]
    metadata = message.get("metadata")
    reason = None
    if role not in ("user", "assistant"):
        reason = f"{role} messages"
    elif isinstance(metadata, dict) and metadata.get("is_visually_hidden_from_conversation"):
        reason = "hidden messages"
    elif message.get("recipient", "all") != "all":
        reason = "calls to a tool"
    elif kind not in ("text", "multimodal_text"):
        reason = f"{kind} content"
    if reason is not None:
        out.skipped[reason] += 1
        return None
    parts = content.get("parts")
    if not isinstance(parts, list):
        raise InputError(f"{where}.content.parts: must be a list")
    texts = [p for p in parts if isinstance(p, str)]
    if len(texts) < len(parts):
        out.skipped["non-text parts (images, files)"] += len(parts) - len(texts)
    return role, "\n".join(texts)
