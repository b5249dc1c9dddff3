"""A seeded synthetic corpus for the scale benchmarks.

* a vocabulary of 50,000 distinct pronounceable ASCII words, ranked; word ``r`` is drawn
  with probability ∝ 1 / r (Zipf, s = 1), so a few words are in almost every record and
  most are rare;
* each record has 20–60 words of content and a 6-word summary taken from them;
* ``captured_at`` is uniform over the year before ``AS_OF``;
* queries have 3 terms: one common (rank < 100), one middling (100–5,000) and one rare
  (5,000–50,000), so a query touches a large posting list and small ones together;
* ``query_sets`` gives those queries again (``rare``: no word in nearly every record;
  about 7k candidates at 100k records, median) and each of them with 3 of the 5 most
  frequent words put in front (``common``: "3 common + 3 rare terms", about 98k
  candidates at 100k — nearly every record shares a word with the query).

Everything is a pure function of the seed.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

VOCABULARY_SIZE = 50_000
# The common words of ``query_sets``: 3 drawn from this many of the most frequent words
# (each is in 50–96% of the records; any 3 of them together are in 96–99%).
COMMON_WORDS = 5
AS_OF = datetime(2026, 8, 10, 12, 0, tzinfo=UTC)
YEAR_SECONDS = 365 * 86_400
_ONSETS = (*"bcdfghjklmnprstvwz", "br", "ch", "dr", "fl", "gr", "kl", "pr", "sh", "st", "tr")
_VOWELS = (*"aeiou", "ai", "ea", "io", "ou")
_CODAS = ("", *"nrstlmx")


def vocabulary(size: int = VOCABULARY_SIZE, seed: int = 7) -> list[str]:
    rng = np.random.default_rng(seed)
    syllables = [o + v + c for o in _ONSETS for v in _VOWELS for c in _CODAS]
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        lengths = rng.integers(1, 4, size=size)
        parts = rng.integers(0, len(syllables), size=(size, 3))
        for length, row in zip(lengths.tolist(), parts.tolist(), strict=True):
            word = "".join(syllables[k] for k in row[:length])
            if word not in seen:
                seen.add(word)
                words.append(word)
                if len(words) == size:
                    break
    return words


def _zipf_cdf(size: int) -> np.ndarray:
    weights = 1.0 / np.arange(1, size + 1)
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


def records(
    n: int, *, seed: int = 12, batch: int = 10_000, prefix: str = "rec"
) -> Iterator[list[dict[str, Any]]]:
    """``append_many`` items in batches of ``batch``; the same ``seed`` gives the same corpus."""
    words = np.array(vocabulary(), dtype=object)
    cdf = _zipf_cdf(len(words))
    rng = np.random.default_rng(seed)
    start = AS_OF - timedelta(seconds=YEAR_SECONDS)
    made = 0
    while made < n:
        count = min(batch, n - made)
        lengths = rng.integers(20, 61, size=count)
        picks = np.searchsorted(cdf, rng.random(int(lengths.sum())))
        drawn = words[picks]
        offsets = rng.integers(0, YEAR_SECONDS, size=count)
        out = []
        position = 0
        for i in range(count):
            length = int(lengths[i])
            chunk = drawn[position : position + length]
            position += length
            number = made + i
            captured = start + timedelta(seconds=int(offsets[i]))
            out.append(
                {
                    "kind": "conversation",
                    "memory_id": f"{prefix}-{number:07d}",
                    "content": " ".join(chunk),
                    "summary": " ".join(chunk[:6]),
                    "source": {
                        "source_id": f"transcript-{number:07d}",
                        "source_type": "conversation_transcript",
                        "title": f"Session {number}",
                        "captured_at": captured.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    },
                }
            )
        made += count
        yield out


def queries(count: int = 50, *, seed: int = 99) -> list[str]:
    words = vocabulary()
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        common = words[int(rng.integers(0, 100))]
        middle = words[int(rng.integers(100, 5_000))]
        rare = words[int(rng.integers(5_000, len(words)))]
        out.append(f"{common} {middle} {rare}")
    return out


def query_sets(count: int = 50, *, seed: int = 99) -> dict[str, list[str]]:
    """``rare``: ``queries(count)``; ``common``: each with 3 common words in front.

    The common words are drawn among the ``COMMON_WORDS`` most frequent words that are
    not English stopwords (none of them is with this vocabulary), so that
    ``bm25+stopwords`` has to score them like every other ranker.
    """
    from memlib._tokens import english_stopwords

    stop = english_stopwords()
    frequent = [w for w in vocabulary() if w not in stop][:COMMON_WORDS]
    rng = np.random.default_rng(seed + 1)
    rare = queries(count, seed=seed)
    common = []
    for query in rare:
        picks = rng.choice(len(frequent), size=3, replace=False)
        common.append(" ".join([*(frequent[int(i)] for i in picks), query]))
    return {"rare": rare, "common": common}


def item_text(item: dict[str, Any]) -> str:
    """The searchable text of an item, as memlib builds it (summary + " " + content)."""
    return f"{item['summary']} {item['content']}"
