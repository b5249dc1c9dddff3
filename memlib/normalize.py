"""Stage 1 — normalize: raw recall text → ``RecallQuery`` (docs/reference.md#normalize).

The tokenizer (``memlib._tokens``) cuts stored records too (stage 2), so a query and a
record always agree on what a "term" is."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ._tokens import normalize_text, terms_of_normalized, tokenize, tokenize_all
from .errors import RemoteMemoryValidationError
from .records import check_unicode, collapse_whitespace, format_timestamp

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
        return {**dataclasses.asdict(self), "terms": list(self.terms)}


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
    check_unicode("recall query", readable)
    normalized = normalize_text(readable)
    terms = tuple(sorted(set(terms_of_normalized(normalized))))
    if not terms:
        raise RemoteMemoryValidationError("recall query has no searchable terms")
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise RemoteMemoryValidationError("limit must be an integer")
    if not LIMIT_MIN <= limit <= LIMIT_MAX:
        raise RemoteMemoryValidationError(f"limit must be between {LIMIT_MIN} and {LIMIT_MAX}")
    if query_id is not None:
        if not isinstance(query_id, str) or not query_id.strip():
            raise RemoteMemoryValidationError("query_id must not be empty")
        check_unicode("query_id", query_id)
    return RecallQuery(
        query_id=f"query-{uuid.uuid4().hex[:12]}" if query_id is None else query_id,
        text=readable,
        normalized_text=normalized,
        terms=terms,
        user_scope=user_scope,
        limit=limit,
        issued_at=format_timestamp(as_utc(issued_at)),
    )
