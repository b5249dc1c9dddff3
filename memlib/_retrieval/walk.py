"""The bounded top-k walk: the best ``limit`` records without scoring every candidate.

Groups by matched-term count are visited best first, until the ``limit``-th best total
beats every group left's bound; in a group the total grows with ``captured_at``, so its
best ``limit`` are its most recent (ties kept). An index keeps instants as exact whole
microseconds since the epoch (the float timestamp only orders, as ``rank.rank_key``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from .._capabilities import ScoreBound
from .._tokens import searchable_terms
from ..candidates import RecallCandidate, check_scope, make_candidate, searchable_text
from ..normalize import RecallQuery
from ..records import StoredMemory, parse_timestamp
from ..score import DECIMALS

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)


def micros_of(moment: datetime) -> int:
    return (moment - _EPOCH) // _MICRO


def timestamp_of_micros(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


def query_as_of(query: RecallQuery) -> datetime:
    """The engine puts ``as_of`` into ``query.issued_at`` (microseconds kept)."""
    return parse_timestamp(query.issued_at)


# An entry of a group: (captured timestamp as float, captured datetime, memory_id, payload)
Entry = tuple[float, datetime, str, Any]

# A SQL store's row for the walk: (id, captured_ts, captured_us, memory_id).
RecentRow = tuple[int, float, int, str]


def walk_groups(
    groups: Iterable[tuple[int, Iterable[Entry]]],
    term_count: int,
    limit: int,
    as_of: datetime,
    bound: ScoreBound,
) -> list[Any]:
    """The payloads of ``bound``'s top ``limit``, in rank order. ``groups`` yields
    ``(matched, entries)``, ``matched`` decreasing, each with at least its ``limit`` most
    recent records and their ties; groups past the stopping point are never computed."""
    kept: list[tuple[tuple[float, float, float, str], Any]] = []
    for matched, entries in groups:
        if len(kept) >= limit and -kept[limit - 1][0][0] > bound.upper_bound(matched, term_count):
            break
        coverage = round(matched / term_count, DECIMALS)
        for ts, captured, memory_id, payload in entries:
            total = bound.exact_total(matched, term_count, captured, as_of)
            # The same key as rank.rank_key: total, coverage, captured_at desc, id asc.
            kept.append(((-total, -coverage, -ts, memory_id), payload))
        kept.sort(key=lambda item: item[0])
        del kept[limit:]
    return [payload for _, payload in kept]


def top_of_matches(
    ids: Any,
    matched: Any,
    query: RecallQuery,
    searched: int,
    lookup: Callable[[Sequence[int]], list[RecentRow]],
    newest_first: Callable[[int], Iterable[RecentRow]],
    bound: ScoreBound,
) -> list[int]:
    """The ids of ``bound``'s top ``query.limit`` from ``count_matches``' output, for a SQL
    store. ``lookup(members)`` gives a group's rows; a big group is found instead by walking
    ``newest_first(budget)`` until ``limit`` members and their ties (giving up at the budget)."""
    limit = query.limit
    groups: dict[int, Any] = {}
    if hasattr(matched, "dtype"):  # numpy arrays from count_matches
        # Kept as arrays: the walk usually stops before the big low groups.
        for m in set(matched.tolist()):
            groups[m] = ids[matched == m]
    else:
        for record_id, m in zip(ids, matched, strict=True):
            groups.setdefault(m, []).append(record_id)

    def by_recency(members: Any) -> list[RecentRow] | None:
        wanted = set(members.tolist() if hasattr(members, "tolist") else members)
        budget = 4 * limit * max(searched, 1) // len(wanted) + 1_000
        rows: list[RecentRow] = []
        for visited, row in enumerate(newest_first(budget)):
            if len(rows) >= limit and row[1] < rows[-1][1]:
                return rows
            if visited > budget:
                return None
            if row[0] in wanted:
                rows.append(row)
        return rows

    def entries(members: Any) -> list[Entry]:
        rows = None
        if len(members) > limit and len(members) ** 2 > limit * searched:
            rows = by_recency(members)
        if rows is None:
            rows = lookup([int(i) for i in members])
        return [
            (ts, timestamp_of_micros(us), memory_id, row_id) for row_id, ts, us, memory_id in rows
        ]

    best_first = ((m, entries(groups[m])) for m in sorted(groups, reverse=True))
    return walk_groups(best_first, len(query.terms), limit, query_as_of(query), bound)


def candidates_for(
    query: RecallQuery, records: Sequence[StoredMemory]
) -> tuple[RecallCandidate, ...]:
    """Full candidates (with their searchable terms) for the records an index found."""
    out = []
    for record in records:
        check_scope(query, record)
        candidate = make_candidate(query, record, searchable_terms(searchable_text(record)))
        if candidate is not None:  # always, for records found through the index
            out.append(candidate)
    return tuple(out)
