"""Terms: what the tokenizer cuts any text into, for queries, records, indexes and
rankers, and the stopwords rankers leave out (docs/reference.md#normalize). A leaf
module: it imports nothing of memlib, so ``records`` can count a record's terms."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache, lru_cache
from importlib import resources
from typing import Protocol

# The most characters ``normalize_text`` makes of one character (U+FDFA, an Arabic
# ligature, is 18 under NFKD; casefold and NFKC do not go past it — a test checks every
# code point). NFKC composes only what NFKD decomposed and casefold maps each character
# alone, so a text of n characters normalizes to at most MAX_GROWTH * n.
MAX_GROWTH = 18

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


def char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(
        re.escape(chr(lo)) + ("" if lo == hi else f"-{re.escape(chr(hi))}") for lo, hi in ranges
    )


_SPACELESS_RUN = re.compile(f"[{char_class(_SPACELESS_RANGES)}]+")


# The combining-mark ranges of one Unicode version, shipped so that a new process does
# not ask unicodedata about 135k code points (40–90 ms, every CLI call) to find them.
MARKS_RESOURCE = "combining_marks.txt"


def combining_mark_ranges() -> tuple[tuple[int, int], ...]:
    """Ranges of the code points in categories Mn, Mc, Me, from this Python's unicodedata."""
    marks: list[tuple[int, int]] = []
    # Combining marks exist only in planes 0 and 1 and the variation selectors of plane 14.
    for cp in (*range(0x20000), *range(0xE0000, 0xE1000)):
        if unicodedata.category(chr(cp)) in ("Mn", "Mc", "Me"):
            if marks and marks[-1][1] == cp - 1:
                marks[-1] = (marks[-1][0], cp)
            else:
                marks.append((cp, cp))
    return tuple(marks)


def shipped_mark_ranges() -> tuple[str, tuple[tuple[int, int], ...]]:
    """``(Unicode version, ranges)`` of ``memlib/data/combining_marks.txt``."""
    text = resources.files("memlib").joinpath("data", MARKS_RESOURCE).read_text("ascii")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    ranges = tuple((int(lo, 16), int(hi, 16)) for lo, hi in (line.split() for line in lines[1:]))
    return lines[0].strip(), ranges


@cache
def _word_run() -> re.Pattern[str]:
    # Python's \w has letters, digits and "_" but not combining marks, which would cut
    # Devanagari or decomposed text mid-word. Built on first use, not at import.
    version, marks = shipped_mark_ranges()
    if version != unicodedata.unidata_version:  # another Python: ask its own tables
        marks = combining_mark_ranges()
    return re.compile(f"[\\w{char_class(marks)}]+")


def normalize_text(text: str) -> str:
    """NFKC, then casefold, then whitespace collapsed: the form terms are cut from.

    NFKC runs once more after casefold: casefold can leave a sequence that NFKC would
    compose (``ß\u0301`` → ``ss\u0301``, which NFKC makes ``sś``), and without the second
    pass normalizing the output again would change it. With it, this is idempotent."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(unicodedata.normalize("NFKC", folded).split())


def terms_of_normalized(normalized: str) -> list[str]:
    """Every term of text already in ``normalize_text``'s form, in reading order."""
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


# -- the cut every index and ranker counts with -------------------------------------

# ASCII text, lowered: every character that cannot be in a term becomes a space, and
# ``split`` cuts the runs left — the same terms as ``[0-9a-z_]+``, three times faster.
_ASCII_GAPS = str.maketrans(
    {chr(c): " " for c in range(128) if chr(c) not in "0123456789abcdefghijklmnopqrstuvwxyz_"}
)


def tokenize_all(text: str) -> tuple[str, ...]:
    """Every term of any text in reading order, repeats kept (term frequencies, BM25).

    ``tuple(sorted(set(tokenize_all(t)))) == tokenize(t)`` for every text."""
    return tuple(terms_of_normalized(normalize_text(text)))


def tokenize(text: str) -> tuple[str, ...]:
    """Distinct sorted terms of any text, exactly as a query's terms are made."""
    return tuple(sorted(set(tokenize_all(text))))


def index_tokens(text: str) -> list[str] | tuple[str, ...]:
    """``tokenize_all(text)`` with a fast path for ASCII: there NFKC changes nothing,
    casefold is ``lower``, and there are no Han or kana runs and no combining marks, so
    a term is exactly a run of ``[0-9a-z_]`` (a property test holds the two equal)."""
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


# Stopwords are left out of a query's and a record's terms when a ranker scores
# (``bm25+stopwords``, ``hybrid``); they never change a query's ``terms`` nor which
# records are candidates.
@cache
def english_stopwords() -> frozenset[str]:
    """The shipped list: one casefolded term a line, ``#`` starts a comment line."""
    text = resources.files("memlib").joinpath("data", "stopwords_en.txt").read_text("utf-8")
    return frozenset(
        line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")
    )


def content_terms(terms: Iterable[str]) -> tuple[str, ...]:
    """``terms`` without stopwords, order kept."""
    stop = english_stopwords()
    return tuple(t for t in terms if t not in stop)


class Searchable(Protocol):
    """A record as an index reads it (``records.StoredMemory``)."""

    @property
    def summary(self) -> str: ...
    @property
    def content(self) -> str: ...


def term_stats(records: Iterable[Searchable]) -> list[tuple[list[str] | tuple[str, ...], int]]:
    """Per record: the terms of its searchable text (``candidates.searchable_text``) in
    order, repeats kept, and how many are not stopwords — what an index keeps of it."""
    stop = english_stopwords().__contains__
    texts = (index_tokens(f"{record.summary} {record.content}") for record in records)
    return [(tokens, len(tokens) - sum(map(stop, tokens))) for tokens in texts]


def record_stats(record: Searchable) -> tuple[set[str], int, int]:
    """``(distinct terms, terms with repeats, of which not stopwords)`` of a record."""
    tokens, content = term_stats((record,))[0]
    return set(tokens), len(tokens), content
