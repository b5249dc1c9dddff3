"""What a record contributes to an index: its terms, and the token counts BM25 reads.

The cut is the tokenizer's (``memlib._tokens`` through ``normalize.tokenize_all``), with a
fast path for ASCII text that gives the same terms (a property test holds them equal).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from .._stopwords import english_stopwords
from ..candidates import searchable_text
from ..normalize import tokenize_all
from ..records import StoredMemory

__all__ = ["index_terms", "index_tokens", "record_stats", "searchable_terms", "term_stats"]

# ASCII text, lowered: every character that cannot be in a term becomes a space, and
# ``split`` cuts the runs left — the same terms as ``[0-9a-z_]+``, three times faster.
_ASCII_TERM_CHARS = frozenset("0123456789abcdefghijklmnopqrstuvwxyz_")
_ASCII_GAPS = str.maketrans({
    chr(code): " " for code in range(128) if chr(code) not in _ASCII_TERM_CHARS
})


def index_tokens(text: str) -> list[str] | tuple[str, ...]:
    """``tokenize_all(text)`` (every term, repeats kept), with a fast path for ASCII.

    For ASCII input NFKC changes nothing, casefold is ``lower``, there are no Han or
    kana runs and no combining marks, so a term is exactly a run of ``[0-9a-z_]``.
    Anything else goes through memlib's own tokenizer.
    """
    if text.isascii():
        return text.lower().translate(_ASCII_GAPS).split()
    return tokenize_all(text)


def index_terms(text: str) -> set[str]:
    """The distinct terms of ``text``: ``set(tokenize(text))``."""
    return set(index_tokens(text))


@lru_cache(maxsize=65_536)
def searchable_terms(text: str) -> tuple[str, ...]:
    """``tokenize(text)``, remembered: the same records come back query after query."""
    return tuple(sorted(index_terms(text)))


def term_stats(
    records: Iterable[StoredMemory],
) -> list[tuple[list[str] | tuple[str, ...], int]]:
    """Per record: its terms in order (repeats kept), and how many are not stopwords.

    What an index keeps of a record's text: its postings and the two token counts
    the BM25-style rankers read. One pass for a whole batch.
    """
    stop = english_stopwords().__contains__
    out = []
    for record in records:
        tokens = index_tokens(searchable_text(record))
        out.append((tokens, len(tokens) - sum(map(stop, tokens))))
    return out


def record_stats(record: StoredMemory) -> tuple[set[str], int, int]:
    """``(distinct terms, terms with repeats, of which not stopwords)`` of a record."""
    tokens, content = term_stats((record,))[0]
    return set(tokens), len(tokens), content
