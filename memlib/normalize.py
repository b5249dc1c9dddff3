"""Stage 1 — normalize: raw recall text → ``RecallQuery`` (SPEC §3.1).

The same tokenizer turns stored records into terms (stage 2), so a query and a record
always agree on what a "term" is.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from .errors import RemoteMemoryValidationError
from .records import collapse_whitespace, format_timestamp

__all__ = [
    "RecallQuery",
    "normalize_recall_query",
    "normalize_text",
    "tokenize",
    "tokenize_all",
    "QUERY_MAX_CHARS",
    "LIMIT_MIN",
    "LIMIT_MAX",
]

QUERY_MAX_CHARS = 2_000
LIMIT_MIN, LIMIT_MAX = 1, 10

# Scripts written without spaces. Their runs become overlapping character bigrams,
# because there is no word boundary to split on. Han (with its extension blocks and
# compatibility ideographs), Hiragana and Katakana share one class so that mixed
# Japanese text (メモリ設計) is cut the same way as Chinese.
_SPACELESS_RANGES = (
    (0x3005, 0x3005),  # 々 iteration mark
    (0x3007, 0x3007),  # 〇
    (0x3041, 0x309F),  # Hiragana (letters, marks, iteration)
    (0x30A1, 0x30FA),  # Katakana letters (not ゠ U+30A0 or ・ U+30FB: punctuation)
    (0x30FC, 0x30FF),  # ー and Katakana iteration marks
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    (0x20000, 0x2A6DF),  # Extension B
    (0x2A700, 0x2EE5F),  # Extensions C, D, E, F, I
    (0x2F800, 0x2FA1F),  # Compatibility Ideographs Supplement
    (0x30000, 0x323AF),  # Extensions G, H
)


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    parts = []
    for lo, hi in ranges:
        parts.append(re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}")
    return "".join(parts)


_SPACELESS = _char_class(_SPACELESS_RANGES)
_SPACELESS_RUN = re.compile(f"[{_SPACELESS}]+")


@cache
def _word_run() -> re.Pattern[str]:
    # Python's \w has letters, digits and "_" but not combining marks, which would cut
    # Devanagari or decomposed text mid-word. Built on first use, not at import.
    marks: list[tuple[int, int]] = []
    # Combining marks exist only in planes 0 and 1 and the variation selectors of plane 14.
    for cp in (*range(0x20000), *range(0xE0000, 0xE1000)):
        if unicodedata.category(chr(cp)) in ("Mn", "Mc", "Me"):
            if marks and marks[-1][1] == cp - 1:
                marks[-1] = (marks[-1][0], cp)
            else:
                marks.append((cp, cp))
    return re.compile(f"[\\w{_char_class(tuple(marks))}]+")


def normalize_text(text: str) -> str:
    """NFKC, then casefold, then whitespace collapsed: the form terms are cut from.

    NFKC runs once more after casefold: casefold can leave a sequence that NFKC would
    compose (``ß\u0301`` → ``ss\u0301``, which NFKC makes ``sś``), and without the second
    pass normalizing the output again would change it. With it, this is idempotent.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return collapse_whitespace(unicodedata.normalize("NFKC", folded))


def _terms_of_normalized(normalized: str) -> list[str]:
    terms: list[str] = []
    word_run = _word_run()
    position = 0
    for match in _SPACELESS_RUN.finditer(normalized):
        terms.extend(word_run.findall(normalized, position, match.start()))
        run = match.group()
        if len(run) == 1:
            terms.append(run)
        else:
            terms.extend(run[i : i + 2] for i in range(len(run) - 1))
        position = match.end()
    terms.extend(word_run.findall(normalized, position))
    return terms


def tokenize(text: str) -> tuple[str, ...]:
    """Distinct sorted terms of any text, exactly as a query's terms are made."""
    return tuple(sorted(set(_terms_of_normalized(normalize_text(text)))))


def tokenize_all(text: str) -> tuple[str, ...]:
    """Every term of any text in reading order, repeats kept (term frequencies, BM25).

    ``tuple(sorted(set(tokenize_all(t)))) == tokenize(t)`` for every text.
    """
    return tuple(_terms_of_normalized(normalize_text(text)))


@dataclass(frozen=True)
class RecallQuery:
    """One recall request. ``query_id`` binds every later stage to this request."""

    query_id: str
    text: str
    normalized_text: str
    terms: tuple[str, ...]
    user_scope: str
    limit: int
    issued_at: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "text": self.text,
            "normalized_text": self.normalized_text,
            "terms": list(self.terms),
            "user_scope": self.user_scope,
            "limit": self.limit,
            "issued_at": self.issued_at,
        }


def as_utc(moment: datetime | None) -> datetime:
    """``None`` → now; a naive datetime is taken as UTC."""
    if moment is None:
        return datetime.now(UTC)
    if not isinstance(moment, datetime):
        raise RemoteMemoryValidationError("as_of must be a datetime")
    if moment.tzinfo is None or moment.utcoffset() is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise RemoteMemoryValidationError(f"as_of is out of range: {moment.isoformat()}") from None


def new_query_id() -> str:
    return f"query-{uuid.uuid4().hex[:12]}"


def normalize_recall_query(
    text: str,
    *,
    user_scope: str,
    limit: int = 5,
    query_id: str | None = None,
    issued_at: datetime | None = None,
) -> RecallQuery:
    """Validate and normalize recall text; the order of checks is part of the contract."""
    if not isinstance(text, str):
        raise RemoteMemoryValidationError("recall query must be a string")
    readable = collapse_whitespace(text)
    if not readable:
        raise RemoteMemoryValidationError("recall query must not be empty")
    if len(readable) > QUERY_MAX_CHARS:
        raise RemoteMemoryValidationError(
            f"recall query exceeds the {QUERY_MAX_CHARS:,}-character limit"
        )
    if any("\ud800" <= ch <= "\udfff" for ch in readable):
        raise RemoteMemoryValidationError("recall query must be valid Unicode (no lone surrogates)")
    normalized = normalize_text(readable)
    terms = tuple(sorted(set(_terms_of_normalized(normalized))))
    if not terms:
        raise RemoteMemoryValidationError("recall query has no searchable terms")
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise RemoteMemoryValidationError("limit must be an integer")
    if not LIMIT_MIN <= limit <= LIMIT_MAX:
        raise RemoteMemoryValidationError(f"limit must be between {LIMIT_MIN} and {LIMIT_MAX}")
    if query_id is not None and (not isinstance(query_id, str) or not query_id.strip()):
        raise RemoteMemoryValidationError("query_id must not be empty")
    if query_id is not None and any("\ud800" <= ch <= "\udfff" for ch in query_id):
        raise RemoteMemoryValidationError("query_id must be valid Unicode (no lone surrogates)")
    return RecallQuery(
        query_id=query_id if query_id is not None else new_query_id(),
        text=readable,
        normalized_text=normalized,
        terms=terms,
        user_scope=user_scope,
        limit=limit,
        issued_at=format_timestamp(as_utc(issued_at)),
    )
