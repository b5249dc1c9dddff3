"""JSON parsing with limits, for every line memlib reads (store, import, stdin, doctor).

``json`` raises ``RecursionError`` on deep nesting and ``ValueError`` past 4,300 digits,
as tracebacks far from their line. A record is strings two levels deep, so ``loads``
refuses more with a ``JSONLimitError`` (a ``ValueError``) the caller words with its line."""

from __future__ import annotations

import json
import re
from typing import Any

from .errors import RemoteMemoryValidationError

MAX_DEPTH = 32
MAX_NUMBER_CHARS = 64
UTF8_BOM = b"\xef\xbb\xbf"

# A JSON string, escapes included; what is left once strings are cut out is structure.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


class JSONLimitError(ValueError):
    """Valid or not, this JSON is beyond what memlib parses."""


def _number(text: str) -> str:
    if len(text) > MAX_NUMBER_CHARS:
        raise JSONLimitError(f"a number of {len(text):,} characters (at most {MAX_NUMBER_CHARS})")
    return text


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JSONLimitError(f"duplicate key {key!r}")
            seen.add(key)
    return data


# The hooks run only for numbers (and, strict, objects): a line of strings pays nothing.
_NUMBERS: dict[str, Any] = {
    "parse_int": lambda text: int(_number(text)),
    "parse_float": lambda text: float(_number(text)),
}
_DECODER = json.JSONDecoder(**_NUMBERS)
_STRICT = json.JSONDecoder(**_NUMBERS, object_pairs_hook=_unique)


def _depth(text: str) -> int:
    deepest = depth = 0
    for char in _STRING.sub("", text):
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def loads(text: str | bytes, *, unique_keys: bool = False) -> Any:
    """``json.loads`` bounded in depth and number size; every error is a ``ValueError``."""
    if isinstance(text, bytes | bytearray):
        text = text.decode("utf-8")
    # Counting brackets is a C loop; only a line with many of them is measured exactly.
    if text.count("[") + text.count("{") > MAX_DEPTH:
        depth = _depth(text)
        if depth > MAX_DEPTH:
            raise JSONLimitError(f"nested {depth:,} levels deep (at most {MAX_DEPTH})")
    try:
        return (_STRICT if unique_keys else _DECODER).decode(text)
    except RecursionError:  # only reachable by a lower recursion limit than ours
        raise JSONLimitError(f"nested deeper than {MAX_DEPTH} levels") from None


def loads_input_line(raw: bytes, where: str) -> Any:
    """One line of user input as JSON, refused as a store would (limits, repeated keys,
    not UTF-8 or with a BOM). ``where`` names the line."""
    if raw.startswith(UTF8_BOM):
        raise RemoteMemoryValidationError(
            f"{where}: invalid JSON: it starts with a UTF-8 byte order mark (BOM); "
            "save the input as UTF-8 without one"
        )
    try:
        return loads(raw, unique_keys=True)
    except UnicodeDecodeError as exc:
        raise RemoteMemoryValidationError(
            f"{where}: invalid JSON: not UTF-8 (byte {exc.start + 1} of the line is "
            f"{raw[exc.start]:#04x})"
        ) from None
    except ValueError as exc:  # json.JSONDecodeError, safejson.JSONLimitError
        raise RemoteMemoryValidationError(f"{where}: invalid JSON: {exc}") from None
