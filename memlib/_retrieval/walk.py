"""The bounded top-k walk: the best ``limit`` records without scoring every candidate.

A store that can count, per record, how many of a query's ``q`` terms it matches
groups its matches by that count ``m``. For a ranker that is a ``ScoreBound`` (the
baseline: ``total ≤ 0.85 · m/q + 0.15``) groups are visited best first, and the walk
stops as soon as the ``limit``-th best total found so far beats the bound of every
group left. Inside a group the total only grows with ``captured_at``, so the group's
best ``limit`` records are its ``limit`` most recent ones (all ties kept). The counts a
result reports stay exact: they come from the match counts, not from the records
visited.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from ..candidates import RecallCandidate, check_scope, make_candidate, searchable_text
from ..normalize import RecallQuery
from ..rankers.base import ScoreBound
from ..records import StoredMemory
from ..score import DECIMALS
from .times import query_as_of, timestamp_of_micros
from .tokens import searchable_terms

__all__ = ["Entry", "RecentRow", "candidates_for", "top_of_matches", "walk_groups"]

# An entry of a group: (captured timestamp as float, captured datetime, memory_id, payload)
Entry = tuple[float, datetime, str, Any]

# A SQL store's row for the walk: (id, captured_ts, captured_us, memory_id).
RecentRow = tuple[int, float, int, str]


def walk_groups(
    groups: Iterable[tuple[int, Iterable[Entry]]], term_count: int, limit: int,
    as_of: datetime, bound: ScoreBound,
) -> list[Any]:
    """The payloads of the top ``limit`` records by ``bound``'s totals, in rank order.

    ``groups`` yields ``(matched, entries)`` with ``matched`` strictly decreasing; each
    group's entries must contain at least its ``limit`` best records by ``captured_at``
    (all records tied with the last one included). Groups are consumed lazily, so a
    group after the stopping point is never computed.
    """
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
    ids: Any, matched: Any, query: RecallQuery, searched: int,
    lookup: Callable[[Sequence[int]], list[RecentRow]],
    newest_first: Callable[[int], Iterable[RecentRow]],
    bound: ScoreBound,
) -> list[int]:
    """The ids of ``bound``'s top ``query.limit``, from ``count_matches``' output.

    For a store that keeps records in SQL. Per matched-term group it needs the group's
    ``limit`` most recent records, all ties with the last one included; ``walk_groups``
    then picks the top ``limit`` and stops before groups that cannot enter it.

    ``lookup(members)`` gives exactly those rows for a group. A big group is instead
    found by walking ``newest_first(budget)`` (the scope's rows, newest first, at least
    ``budget + 1`` of them if there are that many) and stopping after ``limit`` members
    and their ties: about ``limit·N/|group|`` rows rather than every member looked up
    and sorted. If the members turn out to be old ones, the walk gives up at the
    budget and the group is looked up after all.
    """
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
        return [(ts, timestamp_of_micros(us), memory_id, row_id)
                for row_id, ts, us, memory_id in rows]

    return walk_groups(
        ((m, entries(groups[m])) for m in sorted(groups, reverse=True)),
        len(query.terms), limit, query_as_of(query), bound,
    )


def candidates_for(
    query: RecallQuery, records: Sequence[StoredMemory]
) -> tuple[RecallCandidate, ...]:
    """Full candidates (with their searchable terms) for the records an index found."""
    out = []
    for record in records:
        check_scope(query, record)
        terms = searchable_terms(searchable_text(record))
        candidate = make_candidate(query, record, terms)
        if candidate is not None:  # always, for records found through the index
            out.append(candidate)
    return tuple(out)
