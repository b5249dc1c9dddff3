"""Instants as an index keeps them: whole microseconds since the epoch, exactly.

A float timestamp orders records (as ``rank.rank_key`` does); the microseconds give
back the exact ``captured_at`` a score is computed from."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ..normalize import RecallQuery
from ..records import parse_timestamp

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)


def micros_of(moment: datetime) -> int:
    return (moment - _EPOCH) // _MICRO


def timestamp_of_micros(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


def query_as_of(query: RecallQuery) -> datetime:
    """The engine puts ``as_of`` into ``query.issued_at`` (microseconds kept)."""
    return parse_timestamp(query.issued_at)
