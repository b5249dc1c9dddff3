"""The periods an English question names ("on October 13, 2023", "in June", "in 2022", "last
week"): ``hybrid`` credits a record captured inside one (docs/retrieval.md, idea A)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from .normalize import as_utc

__all__ = ["in_periods", "named_periods"]

_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH = rf"({'|'.join(_MONTHS)})"
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH},?\s+(\d{{4}})\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}(?:\s+(\d{{4}}))?\b", re.I)
_YEAR = re.compile(r"\b(?:in|of|during|since)\s+((?:19|20)\d\d)\b", re.I)
_RELATIVE = re.compile(r"\b(?:last|this|past) (week|weekend|month|year)\b", re.I)
# "may" and "march" alone are verbs far more often than months.
_VERBS = ("may", "march")
_AS_MONTH = re.compile(r"\b(?:in|during|of|early|late|mid)\s+(may|march)\b", re.I)
_RELATIVE_DAYS = {"week": 7, "weekend": 7, "month": 31, "year": 366}

Period = tuple[datetime, datetime]


def _day(year: str, month: str, day: str) -> list[Period]:
    try:
        start = datetime(int(year), _MONTHS.index(month.lower()) + 1, int(day), tzinfo=UTC)
        return [(start, start + timedelta(days=1))]
    except (ValueError, OverflowError):  # "February 30", year 0 or 9999: no day to credit
        return []


def _month(year: int, month: str) -> list[Period]:
    number = _MONTHS.index(month.lower()) + 1
    if not 1 <= year < 9999:  # a year before or after datetime's
        return []
    start = datetime(year, number, 1, tzinfo=UTC)
    return [(start, datetime(year + (number == 12), number % 12 + 1, 1, tzinfo=UTC))]


def named_periods(text: str, as_of: datetime) -> tuple[Period, ...]:
    """``[start, end)`` of each period ``text`` names: a day, else months (a month without
    a year: in ``as_of``'s year or the one before), years, and "last week/month/year"
    (up to ``as_of``, UTC when naive). Empty when it names none."""
    as_of = as_utc(as_of)
    days = [p for d, m, y in _DAY_MONTH_YEAR.findall(text) for p in _day(y, m, d)]
    days += [p for m, d, y in _MONTH_DAY_YEAR.findall(text) for p in _day(y, m, d)]
    if days:
        return tuple(days)
    found: list[Period] = []
    as_months = {m.lower() for m in _AS_MONTH.findall(text)}
    for month, year in _MONTH_YEAR.findall(text):
        if month.lower() in _VERBS and not year and month.lower() not in as_months:
            continue
        years = [int(year)] if year else [as_of.year, as_of.year - 1]
        found += [p for y in years for p in _month(y, month)]
    for year in _YEAR.findall(text):
        found.append(
            (datetime(int(year), 1, 1, tzinfo=UTC), datetime(int(year) + 1, 1, 1, tzinfo=UTC))
        )
    for unit in _RELATIVE.findall(text):
        if as_of.year > 2:  # a year back from datetime's first would overflow
            found.append((as_of - timedelta(days=_RELATIVE_DAYS[unit.lower()]), as_of))
    return tuple(found)


def in_periods(moment: datetime, periods: tuple[Period, ...]) -> bool:
    return any(start <= moment < end for start, end in periods)
