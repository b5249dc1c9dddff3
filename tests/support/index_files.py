"""Index files of an older format, made from a current one (tests of the "older format
means rebuild" rule)."""

from __future__ import annotations

import hashlib
import json

from memlib.stores import jsonl_index

__all__ = ["ADDED_IN", "older_format"]

# The sections each format added, last first: an older file is a newer one without them.
ADDED_IN = {3: "digests", 2: "tfs"}


def older_format(data: bytes, version: int) -> bytes:
    """A genuine file of format ``version`` made from a current one: the sections added
    since (format 2: each posting's term frequency; 3: each record's line digest) cut."""
    body = data[: -32]
    size = int.from_bytes(body[12:16], "little")
    header = json.loads(body[16: 16 + size])
    rest = body[16 + size:]
    names = [name for name, _ in jsonl_index.SECTIONS]
    for newer in range(jsonl_index.FORMAT, version, -1):
        assert names.pop() == ADDED_IN[newer]  # the last section is the newest
        length = header["sections"].pop(ADDED_IN[newer])
        rest = rest[: len(rest) - ((length + 7) & ~7)]
    encoded = json.dumps(header, sort_keys=True).encode()
    body = (jsonl_index.MAGIC + version.to_bytes(4, "little") + len(encoded).to_bytes(4, "little")
            + encoded + rest)
    return body + hashlib.sha256(body).digest()
