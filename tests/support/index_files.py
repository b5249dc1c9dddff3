"""Index files changed the way a test needs them, validly signed again (tests of the
"another scope / an older format means rebuild" rules)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from memlib.stores.jsonl import _index as jsonl_index

__all__ = ["older_format", "resign"]

_PREFIX = len(jsonl_index.MAGIC) + 8


def resign(
    data: bytes, *, header: dict[str, Any] | None = None, version: int | None = None
) -> bytes:
    """``data`` (a current index file) with its header fields or version changed and its
    checksum valid again: whole and undamaged, only what the test changed differs."""
    size = int.from_bytes(data[12:16], "little")
    old = json.loads(data[_PREFIX : _PREFIX + size])
    sections = data[(_PREFIX + size + 7) & ~7 : -32]  # offsets count from the first
    encoded = json.dumps({**old, **(header or {})}, sort_keys=True).encode()
    ver = (version if version is not None else jsonl_index.FORMAT).to_bytes(4, "little")
    head = jsonl_index.MAGIC + ver + len(encoded).to_bytes(4, "little") + encoded
    return head + b"\0" * (-len(head) % 8) + sections + hashlib.sha256(head).digest()


def older_format(data: bytes, version: int) -> bytes:
    """A file that says it is of format ``version``, otherwise whole and for this very log.

    A reader refuses every format but its own before it reads further (format 2 added the
    term frequencies, 3 the line digests, 4 the per-term checksums and packed strings, 5
    the sources, 6 the stored_at), so the version field is what is tested.
    """
    assert version < jsonl_index.FORMAT
    return resign(data, version=version)
