"""BM25 over memlib's own terms, explained term by term (SPEC §7).

For a query term t and a record d (its searchable text ``summary + " " + content``,
cut by memlib's tokenizer with repeats kept)::

    idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))          # never negative
    sat(t,d) = tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))
    bm25(d)  = Σ_t idf(t) * sat(t,d)

N is ``scan.searched_records``. df(t) is counted from the candidates, which is exact:
every searched record that holds a query term is a candidate. avgdl needs every
searched record, not only the candidates: it comes from ``scan.searched_token_count``
(``searched_content_token_count`` without stopwords); a backend that does not fill
them gets the candidates' mean length instead.

Each scoring term is one signal: ``bm25[t]`` with value sat(t,d), weight idf(t) and
contribution idf(t)·sat(t,d); the total is their sum. ``recency`` is listed as a signal
of weight 0 (it is not used, and shown so nobody has to guess). The breakdown's lexical
fields hold the BM25 total (weight 1) so that ``total = lexical + recency`` as in §3.3.

``bm25+stopwords`` removes the English stopwords of ``memlib/data/stopwords_en.txt`` from
the query's scoring terms and from the records' lengths; the query's ``terms`` and the
candidates do not change. matched_terms / query_term_count / lexical_coverage then count
the scoring (non-stopword) terms. A query made only of stopwords keeps all its terms.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from ..candidates import CandidateScan, RecallCandidate, searchable_text
from ..errors import RemoteMemoryValidationError
from ..normalize import RecallQuery, tokenize_all
from ..score import RecallScoreBreakdown, ranker_breakdown, recency_of, signal
from ..stopwords import english_stopwords
from .base import top_positions

__all__ = ["Bm25Ranker", "Bm25StopwordsRanker", "Bm25Scores", "bm25_scores", "scoring_terms"]

# Chosen on the LoCoMo development split (reports/rankers-dev-split.json; the textbook 1.2 /
# 0.75 gives R@10 0.549 for bm25 and 0.596 with stopwords left out, these 0.568 and
# 0.607). memlib's LoCoMo records repeat their text in summary and content, which for
# BM25 is the same ranking as text counted once with k1 halved.
DEFAULT_K1 = 0.6
DEFAULT_B = 0.25


@lru_cache(maxsize=16_384)
def _document(text: str) -> tuple[dict[str, int], int, int]:
    """Term frequencies, length, and length without stopwords of one searchable text."""
    tokens = tokenize_all(text)
    stop = english_stopwords()
    return dict(Counter(tokens)), len(tokens), sum(1 for t in tokens if t not in stop)


def scoring_terms(query: RecallQuery, *, stopwords: bool) -> tuple[str, ...]:
    """The query terms BM25 scores: all of them, or those that are not stopwords
    (all of them again when nothing else is left)."""
    if not stopwords:
        return query.terms
    stop = english_stopwords()
    content = tuple(t for t in query.terms if t not in stop)
    return content or query.terms


@dataclass(frozen=True)
class Bm25Scores:
    """Unrounded BM25 of every candidate, with what is needed to explain it."""

    terms: tuple[str, ...]
    idf: dict[str, float]
    avgdl: float
    per_term: tuple[dict[str, float], ...]  # one {term: sat} per candidate, matched terms only
    totals: tuple[float, ...]


def bm25_scores(
    query: RecallQuery,
    scan: CandidateScan,
    *,
    k1: float = DEFAULT_K1,
    b: float = DEFAULT_B,
    stopwords: bool = False,
) -> Bm25Scores:
    terms = scoring_terms(query, stopwords=stopwords)
    candidates: Sequence[RecallCandidate] = scan.candidates
    for candidate in candidates:
        if candidate.query_id != query.query_id:
            raise RemoteMemoryValidationError("candidate belongs to another recall query")
    docs = [_document(searchable_text(c.record)) for c in candidates]
    # Lengths without stopwords when stopwords are left out; a query of stopwords only is
    # scored on all its terms, and lengths then count every term too.
    length_index = 2 if stopwords and not _only_stopwords(query) else 1
    n = max(scan.searched_records, len(candidates), 1)
    corpus_tokens = (
        scan.searched_token_count if length_index == 1 else scan.searched_content_token_count
    )
    if corpus_tokens is not None and scan.searched_records > 0:
        avgdl = corpus_tokens / scan.searched_records
    else:
        lengths = [_length(d, length_index) for d in docs]
        avgdl = sum(lengths) / len(lengths) if lengths else 1.0
    avgdl = max(avgdl, 1e-9)
    df = {t: 0 for t in terms}
    for doc in docs:
        for t in terms:
            if t in doc[0]:
                df[t] += 1
    idf = {t: math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    per_term: list[dict[str, float]] = []
    totals: list[float] = []
    for doc in docs:
        tf_of, dl = doc[0], _length(doc, length_index)
        norm = k1 * (1.0 - b + b * dl / avgdl)
        sats = {t: tf_of[t] * (k1 + 1.0) / (tf_of[t] + norm) for t in terms if t in tf_of}
        per_term.append(sats)
        totals.append(sum(idf[t] * s for t, s in sats.items()))
    return Bm25Scores(terms, idf, avgdl, tuple(per_term), tuple(totals))


def _length(doc: tuple[dict[str, int], int, int], index: int) -> int:
    return doc[1] if index == 1 else doc[2]


def _only_stopwords(query: RecallQuery) -> bool:
    stop = english_stopwords()
    return all(t in stop for t in query.terms)


class Bm25Ranker:
    """Okapi BM25 (Lucene's non-negative idf) over memlib's terms."""

    name = "bm25"
    stopwords = False

    def __init__(self, *, k1: float = DEFAULT_K1, b: float = DEFAULT_B) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            raise RemoteMemoryValidationError("bm25 needs k1 >= 0 and 0 <= b <= 1")
        self.k1, self.b = k1, b

    def _breakdown(
        self, scores: Bm25Scores, scan: CandidateScan, i: int, as_of: datetime
    ) -> RecallScoreBreakdown:
        sats, idf = scores.per_term[i], scores.idf
        matched = tuple(t for t in scores.terms if t in sats)
        recency = recency_of(scan.candidates[i].captured_at, as_of)
        signals = [signal(f"bm25[{t}]", sats[t], idf[t], idf[t] * sats[t]) for t in matched]
        signals.append(signal("recency", recency, 0.0, 0.0))
        return ranker_breakdown(
            self.name, matched_terms=matched, query_term_count=len(scores.terms),
            recency=recency, total=scores.totals[i], signals=tuple(signals),
        )

    def score_candidates(
        self, query: RecallQuery, scan: CandidateScan, *, as_of: datetime
    ) -> tuple[RecallScoreBreakdown, ...]:
        scores = bm25_scores(query, scan, k1=self.k1, b=self.b, stopwords=self.stopwords)
        return tuple(self._breakdown(scores, scan, i, as_of) for i in range(len(scan.candidates)))

    def score_top(
        self, query: RecallQuery, scan: CandidateScan, *, as_of: datetime, limit: int
    ) -> list[tuple[int, RecallScoreBreakdown]]:
        scores = bm25_scores(query, scan, k1=self.k1, b=self.b, stopwords=self.stopwords)
        top = top_positions(scan, scores.totals, scores.per_term, scores.terms, limit)
        return [(i, self._breakdown(scores, scan, i, as_of)) for i in top]


class Bm25StopwordsRanker(Bm25Ranker):
    """BM25 with English stopwords left out of the query's scoring terms and of lengths."""

    name = "bm25+stopwords"
    stopwords = True
