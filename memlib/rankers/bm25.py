"""BM25 over memlib's own terms (docs/reference.md#rankers-beyond-the-baseline): one signal
``bm25[t]`` per scoring term (value sat, weight idf), ``recency`` at weight 0.

From an index (``score_lexical``) every record holding a scoring term is scored roughly,
and those that may reach the top are scored again with the reference's expressions in
the same order: the result is ``bm25_scores``' over a full scan to the last bit."""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from .._capabilities import Postings, Top
from .._retrieval import postings as runs  # the module: tests lower NUMPY_MIN_POSTINGS
from .._tokens import content_terms, english_stopwords, tokenize_all
from ..candidates import CandidateScan, LexicalPostings, RecallCandidate, searchable_text
from ..errors import RemoteMemoryValidationError
from ..normalize import RecallQuery
from ..score import DECIMALS, RecallScoreBreakdown, ranker_breakdown, recency_of, signal
from .base import top_positions

__all__ = ["Bm25Ranker", "Bm25StopwordsRanker", "Bm25Scores", "bm25_scores", "scoring_terms"]

# Chosen on the LoCoMo development split's first three conversations; on all five
# (reports/rankers-dev-split.json) the textbook 1.2 / 0.75 gives R@10 0.527 for bm25 and
# 0.577 with stopwords left out, these 0.543 and 0.591. Its records repeat their text in
# summary and content (``memlib.eval.locomo``).
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
    return (content_terms(query.terms) or query.terms) if stopwords else query.terms


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
    content = stopwords and bool(content_terms(query.terms))
    lengths = [d[2] if content else d[1] for d in docs]
    n = max(scan.searched_records, len(candidates), 1)
    corpus_tokens = scan.searched_content_token_count if content else scan.searched_token_count
    if corpus_tokens is not None and scan.searched_records > 0:
        avgdl = corpus_tokens / scan.searched_records
    else:
        avgdl = sum(lengths) / len(lengths) if lengths else 1.0
    avgdl = max(avgdl, 1e-9)
    df = {t: sum(t in doc[0] for doc in docs) for t in terms}
    idf = {t: math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    per_term = tuple(
        saturations(d[0], terms, dl, avgdl, k1, b) for d, dl in zip(docs, lengths, strict=True)
    )
    totals = tuple(sum(idf[t] * s for t, s in sats.items()) for sats in per_term)
    return Bm25Scores(terms, idf, avgdl, per_term, totals)


def saturations(
    tf_of: Mapping[str, int], terms: Sequence[str], dl: int, avgdl: float, k1: float, b: float
) -> dict[str, float]:
    """``{term: sat}`` of the ``terms`` one document (term frequencies ``tf_of``) holds."""
    norm = k1 * (1.0 - b + b * dl / avgdl)
    return {t: tf_of[t] * (k1 + 1.0) / (tf_of[t] + norm) for t in terms if t in tf_of}


# Candidates whose unrounded numpy total is within this (relative, or absolute below 1)
# of the ``limit``-th best are scored again exactly: rounding to six decimals moves a
# total by at most 5e-7, and numpy's float32 totals differ from Python's by about 1e-6
# of their size at most (a few terms, each a product and a quotient of float32s).
_MARGIN = 1e-5


def _exact_sats(
    terms: Sequence[str],
    pairs: Sequence[Sequence[tuple[int, int]]],
    lengths: Sequence[int],
    avgdl: float,
    k1: float,
    b: float,
) -> dict[int, dict[str, float]]:
    """``{doc: {term: sat}}`` from ``(doc, tf)`` pairs per term, as ``bm25_scores`` does."""
    sats: dict[int, dict[str, float]] = {}
    for t, term_pairs in zip(terms, pairs, strict=True):
        for doc, tf in term_pairs:
            norm = k1 * (1.0 - b + b * lengths[doc] / avgdl)
            sats.setdefault(doc, {})[t] = tf * (k1 + 1.0) / (tf + norm)
    return sats


# A term in at least 1 / DENSE_SHARE of the docs is kept as every doc's part of the total
# and tf (0 where absent): adding it is one pass over the docs, not a scatter per posting,
# and a doc's tf is read at its place, not searched for among the postings.
DENSE_SHARE = 8


def _saturations(
    np: Any, d: Any, f: Any, length: Any, fit: tuple[bool, float, float, float]
) -> Any:
    """``tf / (tf + k1 (1 - b + b dl / avgdl))`` of each posting (float32); ``fit``:
    (stopwords left out of lengths, avgdl, k1, b)."""
    _, avgdl, k1, b = fit
    tf = f.astype(np.float32)
    norm = length[d].astype(np.float32) * np.float32(k1 * b / avgdl)
    norm += np.float32(k1 * (1.0 - b))
    norm += tf
    return np.divide(tf, norm, out=tf)


def _add_term(
    np: Any,
    view: LexicalPostings,
    total: Any,
    posting: tuple[str, Any, Any],
    gain: Any,
    live: Any,
    length: Any,
    fit: tuple[bool, float, float, float],
) -> tuple[Any, Any]:
    """Add ``gain · sat`` of ``posting`` (term, docs, tfs) to ``total``. Returns its live
    (docs, tfs), or for a dense term (None, every doc's tf) (the caller drops retracted
    docs from ``total``)."""
    term, d, f = posting
    n_docs = len(total)
    if len(d) * DENSE_SHARE >= n_docs:
        # Keyed by the docs' count as well: a store renumbering its docs numbers more.
        key: tuple[Any, ...] = ("bm25", "dense", term, len(d), n_docs, float(gain), *fit)

        def dense() -> tuple[Any, Any]:
            values = np.zeros(n_docs, dtype=np.float32)
            values[d] = gain * _saturations(np, d, f, length, fit)
            freqs = np.zeros(n_docs, dtype=np.uint16 if f.max() <= 0xFFFF else np.uint32)
            freqs[d] = f
            return values, freqs

        values, freqs = runs.kept(view.scratch, key, dense)
        np.add(total, values, out=total)
        return None, freqs
    key = ("bm25", term, len(d), float(gain), *fit)
    (part,) = runs.kept(view.scratch, key, lambda: (gain * _saturations(np, d, f, length, fit),))
    if live is not None:
        keep = live[d]
        d, f, part = d[keep], f[keep], part[keep]  # copies: the index's arrays are free
    # (add.at: one pass, faster than ``total[d] += …``'s gather and scatter.)
    np.add.at(total, d, part)
    return d, f


def _python_superset(
    pairs: list[list[tuple[int, int]]],
    lengths: Sequence[int],
    idf: Sequence[float],
    avgdl: float,
    k1: float,
    b: float,
    limit: int,
) -> tuple[int, list[list[tuple[int, int]]]]:
    """``_numpy_superset`` without numpy: one pass of plain totals, then only the docs that
    may reach the top ``limit`` keep their pairs (keying every one cost more than scoring)."""
    total: dict[int, float] = {}
    get = total.get
    scale, base = k1 * b / avgdl, k1 * (1.0 - b)
    for term_pairs, weight in zip(pairs, idf, strict=True):
        gain = weight * (k1 + 1.0)
        for doc, tf in term_pairs:
            total[doc] = get(doc, 0.0) + gain * tf / (tf + base + scale * lengths[doc])
    holding = len(total)
    if holding <= limit:
        return holding, pairs
    kth = heapq.nlargest(limit, total.values())[-1]
    floor = kth - _MARGIN * max(1.0, abs(kth))
    return holding, [[(d, tf) for d, tf in term_pairs if total[d] >= floor] for term_pairs in pairs]


def _near_top(np: Any, total: Any, k: int) -> Any:
    """The docs (ascending) whose ``total`` is within ``_MARGIN`` of the ``k``-th largest
    or above (``total`` holds more than ``k`` values > 0). The partition runs over the
    docs near the top only, found by falling thresholds; so does the cut, when the floor
    is at or above the threshold (the usual case)."""
    top = float(total.max())
    for threshold in (top * 0.9, top * 0.7, top * 0.4, 0.0):
        near = np.flatnonzero(total >= threshold) if threshold else np.flatnonzero(total)
        if len(near) >= k:
            break
    values = total[near]
    kth = float(np.partition(values, len(values) - k)[len(values) - k])
    floor = kth - _MARGIN * max(1.0, abs(kth))
    # (``near`` holds ``total > 0`` on the last try: a floor of 0 or less is not within.)
    if floor >= threshold and (threshold or floor > 0):
        return near[values >= floor]
    return np.flatnonzero(total >= floor)


def _pairs_at(np: Any, d: Any, f: Any, scored: Any, listed: list[int]) -> list[tuple[int, int]]:
    """``(doc, tf)`` of the ``scored`` docs (``listed``: the same as ints) in ``d`` / ``f``
    (``d`` None: ``f`` holds every doc's tf, 0 where absent)."""
    if d is None:
        return [(doc, tf) for doc, tf in zip(listed, f[scored].tolist(), strict=True) if tf]
    if not len(d):
        return []
    at = np.searchsorted(d, scored).tolist()
    end = len(d)
    return [(doc, int(f[i])) for doc, i in zip(listed, at, strict=True) if i < end and d[i] == doc]


def _numpy_superset(
    np: Any,
    view: LexicalPostings,
    lengths: Sequence[int],
    idf: Sequence[float],
    limit: int,
    fit: tuple[bool, float, float, float],
    most: int,
) -> tuple[int, list[list[tuple[int, int]]]]:
    """``(records holding a scoring term — at least ``most``, the most any term's live
    postings hold, and exact when not above ``limit`` —, (doc, tf) pairs per term of those
    that may reach the top)``. float32 throughout (off by ~1e-6 relative at most, far
    inside ``_MARGIN``): half the memory traffic of float64, twice as fast on common words."""
    k1 = fit[2]
    n_docs = len(view.live)
    # Every posting of a store without retractions is live: no mask, no copies.
    live = (
        np.frombuffer(view.live, dtype=np.uint8).view(bool)
        if n_docs and view.retracted_records
        else None
    )
    length = np.frombuffer(lengths, dtype=np.uint32) if n_docs else np.zeros(0, np.uint32)
    try:
        total = np.zeros(n_docs, dtype=np.float32)
        kept = []
        for term, (docs, tfs), weight in zip(view.terms, view.postings, idf, strict=True):
            if not len(docs):
                kept.append((np.zeros(0, np.uint32), np.zeros(0, np.uint32)))
                continue
            posting = (term, np.frombuffer(docs, np.uint32), np.frombuffer(tfs, np.uint32))
            gain = np.float32(weight * (k1 + 1.0))
            kept.append(_add_term(np, view, total, posting, gain, live, length, fit))
        if live is not None:
            np.multiply(total, live, out=total)  # a dense term's retracted docs
        # idf > 0 always (Lucene's form), so a doc holds a term iff its total is > 0.
        holding = most if most > limit else int(np.count_nonzero(total))
        scored = _near_top(np, total, limit) if holding > limit else np.flatnonzero(total)
        if live is not None:
            scored = scored[live[scored]]  # a floor at or below 0 lets dead docs in
    finally:
        del live, length
    listed = scored.tolist()
    scored = scored.astype(np.uint32)  # as the docs: searchsorted would copy them to int64
    return holding, [_pairs_at(np, d, f, scored, listed) for d, f in kept]


def bm25_top_docs(
    query: RecallQuery, view: LexicalPostings, *, k1: float, b: float, stopwords: bool, limit: int
) -> tuple[list[int], Bm25Scores]:
    """The docs of the top ``limit`` (stage 4's key) and their ``Bm25Scores``, in that
    order — what ``bm25_scores`` + ``top_positions`` give over a full scan."""
    terms = view.terms
    if view.candidate_records == 0 or view.searched_records == 0:
        return [], Bm25Scores(terms, {}, 1.0, (), ())
    content = stopwords and bool(content_terms(query.terms))
    lengths = view.content_tokens if content else view.tokens
    corpus_tokens = view.searched_content_token_count if content else view.searched_token_count
    searched = view.searched_records
    n = max(searched, view.candidate_records, 1)
    avgdl = max(corpus_tokens / searched, 1e-9)
    np = runs.postings_numpy(sum(len(docs) for docs, _ in view.postings))
    if np is None:
        pairs = [
            [(d, tf) for d, tf in zip(docs, tfs, strict=True) if view.live[d]]
            for docs, tfs in view.postings
        ]
        df = {t: len(p) for t, p in zip(terms, pairs, strict=True)}
    elif not view.retracted_records:  # every posting live
        df = {t: len(docs) for t, (docs, _) in zip(terms, view.postings, strict=True)}
    else:
        alive = np.frombuffer(view.live, dtype=np.uint8)
        df = {
            t: int(np.count_nonzero(alive[np.frombuffer(docs, dtype=np.uint32)]))
            for t, (docs, _) in zip(terms, view.postings, strict=True)
        }
    idf = {t: math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    weights = [idf[t] for t in terms]
    if np is not None:
        fit = (content, avgdl, k1, b)
        holding, pairs = _numpy_superset(
            np, view, lengths, weights, limit, fit, max(df.values(), default=0)
        )
    else:
        holding, pairs = _python_superset(pairs, lengths, weights, avgdl, k1, b, limit)
    sats = _exact_sats(terms, pairs, lengths, avgdl, k1, b)
    totals = {doc: sum(idf[t] * s for t, s in doc_sats.items()) for doc, doc_sats in sats.items()}
    ts, ids = view.timestamps, view.ids

    def score_key(doc: int) -> tuple[float, float, float]:
        return (
            -round(totals.get(doc, 0), DECIMALS),
            -round(len(sats.get(doc, ())) / len(terms), DECIMALS),
            -ts[doc],
        )

    pool: list[int] = list(sats)
    if holding < limit and view.candidate_records > holding:
        # Candidates through a stopword only: total 0, after every scored record.
        pool.extend(d for d in view.candidate_docs() if d not in sats)
    view.prefetch(pool)
    # Stage 4's key ends with the memory id; reading an id costs more than the rest of
    # the key (an index file's ids are decoded one by one), so the ids are read only for
    # the docs that are in the top ``limit`` or tied with its last on everything else.
    keyed = [(score_key(doc), doc) for doc in pool]
    best = heapq.nsmallest(limit, keyed)
    chosen = [(k, doc) for k, doc in keyed if k <= best[-1][0]] if best else []
    top = [doc for _, doc in sorted(chosen, key=lambda kd: (*kd[0], ids[kd[1]]))[:limit]]
    return top, Bm25Scores(
        terms, idf, avgdl, tuple(sats.get(d, {}) for d in top), tuple(totals.get(d, 0) for d in top)
    )


class Bm25Ranker:
    """Okapi BM25 (Lucene's non-negative idf) over memlib's terms."""

    name = "bm25"
    # The min_score "suggested" gives: calibrated on LoCoMo dev (docs/abstention.md).
    suggested_min_score = 6.1
    stopwords = False
    # What leave-one-conversation-out cross-validation chooses k1 and b among
    # (memlib.eval.crossval; reports/crossval-dev-split.json).
    grid: tuple[dict[str, float], ...] = tuple(
        {"k1": k1, "b": b} for k1 in (0.3, 0.6, 0.9, 1.2) for b in (0.25, 0.5, 0.75)
    )

    def __init__(self, *, k1: float = DEFAULT_K1, b: float = DEFAULT_B) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            raise RemoteMemoryValidationError("bm25 needs k1 >= 0 and 0 <= b <= 1")
        self.k1, self.b = k1, b

    def with_params(self, **params: float) -> Bm25Ranker:
        """The same ranker with other parameters (``k1``, ``b``)."""
        return type(self)(**{"k1": self.k1, "b": self.b, **params})

    def _breakdown(
        self, scores: Bm25Scores, scan: CandidateScan, i: int, as_of: datetime
    ) -> RecallScoreBreakdown:
        sats, idf = scores.per_term[i], scores.idf
        matched = tuple(t for t in scores.terms if t in sats)
        recency = recency_of(scan.candidates[i].captured_at, as_of)
        signals = [signal(f"bm25[{t}]", sats[t], idf[t], idf[t] * sats[t]) for t in matched]
        signals.append(signal("recency", recency, 0.0, 0.0))
        return ranker_breakdown(
            self.name,
            matched_terms=matched,
            query_term_count=len(scores.terms),
            recency=recency,
            total=scores.totals[i],
            signals=tuple(signals),
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

    def score_lexical(
        self, query: RecallQuery, postings: Postings, *, as_of: datetime, limit: int
    ) -> tuple[CandidateScan, Top]:
        """``score_top`` from an index's postings: only the hits are read (``LexicalScoring``)."""
        view = postings(query, scoring_terms(query, stopwords=self.stopwords))
        docs, scores = bm25_top_docs(
            query, view, k1=self.k1, b=self.b, stopwords=self.stopwords, limit=limit
        )
        scan = view.scan(docs)
        return scan, [(i, self._breakdown(scores, scan, i, as_of)) for i in range(len(docs))]


class Bm25StopwordsRanker(Bm25Ranker):
    """BM25 with English stopwords left out of the query's scoring terms and of lengths."""

    name = "bm25+stopwords"
    # The min_score "suggested" gives: calibrated on LoCoMo dev (docs/abstention.md).
    suggested_min_score = 4.6
    stopwords = True
