"""``memlib append``: one record from flags, or JSON lines on stdin."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

from .._safejson import loads_input_line
from ..errors import RemoteMemoryValidationError
from ..records import MemoryKind
from ._common import CliError, add_project_options, open_cli_store, write_json

_SOURCE_FLAGS = ("source_id", "source_type", "title", "captured_at")
_APPEND_FLAGS = ("memory_id", "content", "summary", *_SOURCE_FLAGS)


def _items_from_stdin() -> list[dict[str, Any]]:
    items = []
    # Bytes, decoded as UTF-8 (JSON's encoding) whatever the locale says; a StringIO has none.
    lines: Iterable[bytes] = getattr(sys.stdin, "buffer", None) or (
        line.encode("utf-8", "surrogatepass") for line in sys.stdin
    )
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        data = loads_input_line(line, f"stdin line {number}")
        if not isinstance(data, dict):
            raise RemoteMemoryValidationError(f"stdin line {number} is not a JSON object")
        items.append(data)
    if not items:
        raise RemoteMemoryValidationError("no record on stdin (one JSON object per line)")
    return items


def cmd_append(args: argparse.Namespace) -> int:
    if any(getattr(args, name) is not None for name in _APPEND_FLAGS):
        missing = [f"--{n.replace('_', '-')}" for n in _APPEND_FLAGS if getattr(args, n) is None]
        if missing:
            raise CliError(f"append needs {', '.join(missing)} (or a JSON line on stdin)")
        item = {name: getattr(args, name) for name in ("kind", *_APPEND_FLAGS[:3])}
        items: list[dict[str, Any]] = [
            {**item, "source": {name: getattr(args, name) for name in _SOURCE_FLAGS}}
        ]
    else:
        if sys.stdin.isatty():
            raise CliError("append needs flags (see --help) or JSON lines on stdin")
        items = _items_from_stdin()
        for item in items:
            item.setdefault("kind", args.kind)
    for record in open_cli_store(args).append_many(items):
        write_json(record.to_dict())
    return 0


def register(subparsers: Any) -> None:
    append = subparsers.add_parser(
        "append", help="append a record from flags, or JSON lines on stdin"
    )
    append.add_argument(
        "--kind",
        default=MemoryKind.CONVERSATION.value,
        choices=[MemoryKind.CONVERSATION.value, MemoryKind.PROFILE.value],
    )
    for name in _APPEND_FLAGS:
        append.add_argument(f"--{name.replace('_', '-')}")
    add_project_options(append)
    append.set_defaults(func=cmd_append)
