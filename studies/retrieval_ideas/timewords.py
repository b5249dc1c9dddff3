"""Time in English text without a model: what a question asks (a "when" question, a named
period) and whether a turn speaks of time. Plain regular expressions, English only."""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta

MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m and m != "May"})
_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december)"
_WEEKDAY = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)"

# A question that asks for a time: "When did…", "What year…", "How long ago…".
WHEN = re.compile(
    r"^\s*(when\b|what (date|day|month|year|time|week)\b|which (date|day|month|year|week)\b"
    r"|how long ago\b|in what (month|year)\b)"
    r"|\b(when|what year|what month|how long ago|how long has|how long did|how many years)\b",
    re.I,
)
# A turn that speaks of time (what a "when" question's evidence often holds).
TIME_WORDS = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|ago|last (night|week|weekend|month|year|"
    r"summer|winter|spring|fall|autumn|friday|saturday|sunday|monday|tuesday|wednesday|thursday)"
    r"|next (week|weekend|month|year|summer|friday|saturday|sunday|monday)"
    r"|this (week|weekend|month|year|summer|morning|afternoon|evening|past)"
    rf"|recently|the other day|a few (days|weeks|months|years)|since|{_MONTH}|{_WEEKDAY}"
    r"|(19|20)\d\d|birthday|anniversary|weekend)\b",
    re.I,
)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}(?:\s+(\d{{4}}))?\b", re.I)
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH},?\s+(\d{{4}})\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_YEAR = re.compile(r"\b(?:in|of|during|since)\s+((?:19|20)\d\d)\b", re.I)
_RELATIVE = re.compile(r"\b(last|this|past) (week|weekend|month|year)\b", re.I)
# "may" is a verb far more often than a month: only with a year or after in/during/of.
_MAY_MONTH = re.compile(r"\b(in|during|of|early|late|mid)\s+may\b", re.I)


def asks_when(question: str) -> bool:
    return bool(WHEN.search(question))


def speaks_of_time(text: str) -> bool:
    return bool(TIME_WORDS.search(text))


def _month_span(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def periods(question: str, issued_at: datetime) -> list[tuple[datetime, datetime]]:
    """The periods a question names: "on 8 May 2023" (that day), "in June" (June of any
    year in the conversation: the issue year and the one before), "in 2022", "last week"
    (before ``issued_at``). Empty when it names none."""
    found: list[tuple[datetime, datetime]] = []
    for day, month, year in _DAY_MONTH_YEAR.findall(question):
        start = datetime(int(year), MONTHS[month.lower()], int(day), tzinfo=UTC)
        found.append((start, start + timedelta(days=1)))
    for month, day, year in _MONTH_DAY_YEAR.findall(question):
        start = datetime(int(year), MONTHS[month.lower()], int(day), tzinfo=UTC)
        found.append((start, start + timedelta(days=1)))
    if found:
        return found
    for match in _MONTH_YEAR.finditer(question):
        month, year = match.group(1).lower(), match.group(2)
        if month == "may" and not year and not _MAY_MONTH.search(question):
            continue
        years = [int(year)] if year else [issued_at.year, issued_at.year - 1]
        found += [_month_span(y, MONTHS[month]) for y in years]
    for year in _YEAR.findall(question):
        found.append((datetime(int(year), 1, 1, tzinfo=UTC), datetime(int(year) + 1, 1, 1, tzinfo=UTC)))
    for _, unit in _RELATIVE.findall(question):
        days = {"week": 7, "weekend": 7, "month": 31, "year": 366}[unit.lower()]
        found.append((issued_at - timedelta(days=days), issued_at))
    return found
