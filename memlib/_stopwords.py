"""English stopwords for ranking, shipped as package data (memlib/data/stopwords_en.txt).

They are removed from a query's terms and from a record's terms when a ranker scores
(``bm25+stopwords``, ``hybrid``); they never change what a query's ``terms`` are, nor
which records are candidates. Loaded once per process on first use, not at import.

A leaf module (it imports nothing of memlib), like ``terms``: candidates, indexes and
rankers all count with it, so it sits below every one of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from importlib import resources

__all__ = ["english_stopwords", "content_terms", "STOPWORDS_RESOURCE"]

STOPWORDS_RESOURCE = "stopwords_en.txt"


@cache
def english_stopwords() -> frozenset[str]:
    """The shipped list: one casefolded term a line, ``#`` starts a comment line."""
    text = resources.files("memlib").joinpath("data", STOPWORDS_RESOURCE).read_text("utf-8")
    return frozenset(
        line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")
    )


def content_terms(terms: Iterable[str]) -> tuple[str, ...]:
    """``terms`` without stopwords, order kept."""
    stop = english_stopwords()
    return tuple(t for t in terms if t not in stop)
