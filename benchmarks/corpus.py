"""A seeded synthetic corpus for the scale benchmarks; everything is a pure function of the seed.

Word ``r`` of a 50,000-word vocabulary is drawn with probability ∝ 1 / r (Zipf, s = 1);
a record has 20–60 words and a 6-word summary of them, ``captured_at`` uniform over the
year before ``AS_OF``. A query has 3 terms, one common (rank < 100), one middling
(100–5,000) and one rare (5,000–50,000), so it touches a large posting list and small ones.
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
    words: dict[str, None] = {}  # a set in the order drawn
    while len(words) < size:
        lengths = rng.integers(1, 4, size=size)
        parts = rng.integers(0, len(syllables), size=(size, 3))
        for length, row in zip(lengths.tolist(), parts.tolist(), strict=True):
            words["".join(syllables[k] for k in row[:length])] = None
            if len(words) == size:
                break
    return list(words)


def records(
    n: int, *, seed: int = 12, batch: int = 10_000, prefix: str = "rec"
) -> Iterator[list[dict[str, Any]]]:
    """``append_many`` items in batches of ``batch``; the same ``seed`` gives the same corpus."""
    words = np.array(vocabulary(), dtype=object)
    cdf = np.cumsum(1.0 / np.arange(1, len(words) + 1))
    cdf = cdf / float(cdf[-1])
    rng = np.random.default_rng(seed)
    start = AS_OF - timedelta(seconds=YEAR_SECONDS)
    for made in range(0, n, batch):
        lengths = rng.integers(20, 61, size=min(batch, n - made))
        drawn = words[np.searchsorted(cdf, rng.random(int(lengths.sum())))]
        offsets = rng.integers(0, YEAR_SECONDS, size=len(lengths))
        yield [
            {
                "kind": "conversation",
                "memory_id": f"{prefix}-{made + i:07d}",
                "content": " ".join(chunk),
                "summary": " ".join(chunk[:6]),
                "source": {
                    "source_id": f"transcript-{made + i:07d}",
                    "source_type": "conversation_transcript",
                    "title": f"Session {made + i}",
                    "captured_at": (start + timedelta(seconds=int(offsets[i]))).strftime(
                        "%Y-%m-%dT%H:%M:%SZ"
                    ),
                },
            }
            for i, chunk in enumerate(np.split(drawn, np.cumsum(lengths)[:-1]))
        ]


def query_sets(count: int = 50, *, seed: int = 99) -> dict[str, list[str]]:
    """``rare``: ``count`` 3-term queries; ``common``: each with 3 common words in front.

    The common words are drawn among the ``COMMON_WORDS`` most frequent words that are
    not English stopwords (none of them is with this vocabulary), so that
    ``bm25+stopwords`` has to score them like every other ranker.
    """
    from memlib._tokens import english_stopwords

    words, stop = vocabulary(), english_stopwords()
    frequent = [w for w in words if w not in stop][:COMMON_WORDS]
    rng = np.random.default_rng(seed)
    spans = ((0, 100), (100, 5_000), (5_000, len(words)))
    rare = [" ".join(words[int(rng.integers(*s))] for s in spans) for _ in range(count)]
    rng = np.random.default_rng(seed + 1)
    common = []
    for query in rare:
        picks = rng.choice(len(frequent), size=3, replace=False)
        common.append(" ".join([*(frequent[int(i)] for i in picks), query]))
    return {"rare": rare, "common": common}
