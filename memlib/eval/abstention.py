"""Calibrating a per-recall score floor (``min_score``) on LoCoMo, with no extra labels.

A floor keeps a hit iff ``hit.score >= floor``; hits are ranked by score, so what it
drops is always a suffix of the ranking, and a recall whose every hit is dropped
abstains. A good floor makes a recall abstain when the store holds nothing relevant
and costs little recall when it does. LoCoMo gives both situations for free:

- **own**: each headline question (categories 1–4 with evidence) is ranked against its
  own conversation's records, depth 10, ``as_of`` = that conversation's last session,
  as :func:`memlib.eval.locomo.rank_question` does — here keeping the hits' scores;
- **foreign**: the same question is ranked against the records of the next conversation
  in file order (``(c + 1) mod n``), with that conversation's user scope and ``as_of``.
  Those records are about other people, so nothing there answers the question.

For a floor ``f``: ``foreign_abstain`` = share of foreign recalls with no hit scoring
``>= f`` (a recall with no candidate at all abstains too); ``own_r10`` / ``own_h10`` =
R@10 / H@10 as in ``locomo._metrics``, counting only the own hits kept; ``own_abstain``
= share of own recalls that abstain. The rankers' scores have different scales
(baseline in [0, 1], BM25 unbounded, hybrid fused), so each ranker's grid of floors is
its own: the 0 %, 1 %, …, 100 % quantiles of its pooled top-1 scores (own and foreign)
plus round numbers, with no floor (``None``) as the reference row.

The suggested floor is the largest number of two significant digits that keeps own
R@10 at ``keep`` (0.98) times the unfloored own R@10 or more: the largest floor that
keeps it is always one of the evidence hits' scores, so it is found exactly, then
rounded down (0.5234 → 0.52, 7.83 → 7.8) — rounding down can only keep more. Its
figures are recomputed at the rounded floor. Three conversations are few and a floor
chosen on the questions it is judged on flatters itself, so :func:`cross_validate`
also judges each conversation at the floor chosen on the others.

A curve carries, per question, the few scores its figures depend on, so the figures at
any floor (a notebook's slider, the suggestion, the cross-validation) come from the
curve alone, without ranking again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal
from typing import Any

from ..errors import RemoteMemoryValidationError
from ..rankers import Ranker, get_ranker
from ..rankers.base import DenseScoring
from .locomo import (
    HEADLINE_CATEGORIES,
    ConversationIndex,
    ConversationVectors,
    LocomoConversation,
    LocomoQuestion,
    rank_hits,
)

__all__ = [
    "DEPTH",
    "KEEP",
    "PROTOCOL",
    "QuestionScores",
    "abstention_curve",
    "check_conversations",
    "check_keep",
    "cross_validate",
    "curve_from_scores",
    "figures_at",
    "floor_grid",
    "headline_questions",
    "questions_of",
    "rank_hits",
    "round_down_2sig",
    "score_questions",
    "suggest_floor",
    "top_scores",
]

DEPTH = 10
KEEP = 0.98
_DECIMALS = 4  # as locomo._metrics rounds its figures
_QUANTILES = range(0, 101)

PROTOCOL = (
    "For every conversation c (in file order) and every question of categories 1-4 with "
    "evidence: OWN = the question ranked against c's records (depth 10, as_of = c's last "
    "session); FOREIGN = the same question ranked against the records of conversation "
    "(c+1) mod n, with its user scope and as_of (nothing there is relevant). A floor f "
    "keeps a hit iff its score >= f. foreign_abstain(f) = share of foreign recalls with no "
    "hit kept (no candidate also abstains); own_r10(f) / own_h10(f) = R@10 / H@10 counting "
    "only the own hits kept; own_abstain(f) = share of own recalls with no hit kept. "
    "Grid per ranker: quantiles 0%..100% of the pooled top-1 scores (own + foreign) plus "
    "round numbers, and no floor (None). Suggested floor: the largest floor that keeps "
    "own_r10 >= 0.98 x the unfloored own_r10, rounded down to 2 significant digits, its "
    "figures recomputed at the rounded floor."
)


@dataclass(frozen=True)
class QuestionScores:
    """What the figures of one question depend on, at any floor."""

    evidence: int  # evidence turns of the question (the R@10 denominator)
    found: tuple[float, ...]  # scores of the evidence turns in the own top DEPTH
    own_top: float | None  # best own score; None: no candidate at all
    foreign_top: float | None  # best foreign score; None: no candidate at all


def headline_questions(conversation: LocomoConversation) -> list[LocomoQuestion]:
    """The questions the protocol asks: categories 1-4 (all carry evidence once parsed)."""
    return [q for q in conversation.questions if q.category in HEADLINE_CATEGORIES]


def check_conversations(conversations: Sequence[LocomoConversation]) -> None:
    """Refuse what the protocol cannot run on: a conversation alone has no foreign one."""
    if len(conversations) < 2:
        raise RemoteMemoryValidationError(
            "abstention needs at least 2 conversations (foreign recalls use the next one)")


def check_keep(keep: float) -> None:
    if not 0 < keep <= 1:
        raise RemoteMemoryValidationError(f"keep must be in (0, 1]: {keep!r}")


def score_questions(
    conversations: Sequence[LocomoConversation],
    ranker: str | Ranker,
    *,
    progress: Callable[[int], None] | None = None,
    stored_vectors: bool = True,
) -> tuple[QuestionScores, ...]:
    """Every headline question's own and foreign scores, conversations in the given order.

    A ``DenseScoring`` ranker scores as on a store with vectors unless ``stored_vectors``
    is False, as in :func:`locomo.evaluate_ranker`. ``progress(1)`` follows each question
    (its own and its foreign recall)."""
    check_conversations(conversations)
    ranker_obj = get_ranker(ranker)
    dense = stored_vectors and isinstance(ranker_obj, DenseScoring)
    # Built once per conversation: each serves as one conversation's own store and as the
    # previous one's foreign store.
    indexes: list[ConversationIndex | ConversationVectors] = [
        ConversationVectors(c.records, ranker_obj.model)  # type: ignore[attr-defined]
        if dense else ConversationIndex(c.records)
        for c in conversations
    ]
    out: list[QuestionScores] = []
    for i, conversation in enumerate(conversations):
        j = (i + 1) % len(conversations)
        for question in headline_questions(conversation):
            own = rank_hits(ranker_obj, indexes[i], conversation, question, DEPTH)
            foreign = rank_hits(ranker_obj, indexes[j], conversations[j], question, DEPTH)
            evidence = set(question.evidence)
            out.append(QuestionScores(
                evidence=len(question.evidence),
                found=tuple(h.score for h in own if h.memory_id in evidence),
                own_top=own[0].score if own else None,
                foreign_top=foreign[0].score if foreign else None,
            ))
            if progress is not None:
                progress(1)
    return tuple(out)


def top_scores(questions: Sequence[QuestionScores]) -> list[float]:
    """The pooled top-1 scores (own and foreign), sorted; recalls with no hit have none."""
    tops = [q.own_top for q in questions] + [q.foreign_top for q in questions]
    return sorted(t for t in tops if t is not None)


def _round_numbers(low: float, high: float) -> list[float]:
    """Multiples of a power of ten spanning ``[low, high]``: between 10 and 100 of them."""
    magnitude = max(abs(low), abs(high))
    if magnitude == 0:
        return [0.0]
    step = Decimal(1).scaleb(math.floor(math.log10(magnitude)) - 1)
    first = math.floor(Decimal(repr(low)) / step)
    last = math.ceil(Decimal(repr(high)) / step)
    # Decimal arithmetic, so a floor reads 0.3 and not 0.30000000000000004.
    return [float(k * step) for k in range(first, last + 1)]


def floor_grid(questions: Sequence[QuestionScores]) -> list[float]:
    """The floors a curve reports: quantiles of the pooled top-1 scores, round numbers."""
    tops = top_scores(questions)
    if not tops:
        return []
    # Nearest rank, so every quantile floor is a score some recall really had.
    quantiles = [tops[max(0, math.ceil(p / 100 * len(tops)) - 1)] for p in _QUANTILES]
    return sorted(set(quantiles) | set(_round_numbers(tops[0], tops[-1])))


def _kept(score: float | None, floor: float | None) -> bool:
    return score is not None and (floor is None or score >= floor)


def _exact_r10(questions: Sequence[QuestionScores], floor: float | None) -> float:
    if not questions:
        return 0.0
    total = sum(sum(1 for s in q.found if _kept(s, floor)) / q.evidence for q in questions)
    return total / len(questions)


def _figures(judged: Sequence[tuple[QuestionScores, float | None]]) -> dict[str, float]:
    """The four figures over questions each judged at its own floor (cross-validation
    gives each held-out conversation the floor chosen on the others)."""
    n = len(judged)

    def share(total: float) -> float:
        return round(total / n, _DECIMALS) if n else 0.0

    return {
        "foreign_abstain": share(sum(not _kept(q.foreign_top, f) for q, f in judged)),
        "own_r10": share(sum(sum(_kept(s, f) for s in q.found) / q.evidence for q, f in judged)),
        "own_h10": share(sum(any(_kept(s, f) for s in q.found) for q, f in judged)),
        "own_abstain": share(sum(not _kept(q.own_top, f) for q, f in judged)),
    }


def figures_at(questions: Sequence[QuestionScores], floor: float | None) -> dict[str, Any]:
    """One row of a curve: the figures with hits scoring under ``floor`` dropped."""
    return {"floor": floor, **_figures([(q, floor) for q in questions])}


def curve_from_scores(
    ranker: str, questions: Sequence[QuestionScores], *, floors: Sequence[float] | None = None,
    conversations: Sequence[tuple[str, int]] = (),
) -> dict[str, Any]:
    """A JSON-able curve: figures per floor, and the per-question scores behind them.

    ``conversations`` names the runs of consecutive questions that share a conversation,
    ``(sample_id, count)`` in order: what :func:`cross_validate` holds out."""
    if conversations and sum(count for _, count in conversations) != len(questions):
        raise RemoteMemoryValidationError("conversation counts do not add up to the questions")
    grid = floor_grid(questions) if floors is None else sorted(set(floors))
    rows = [figures_at(questions, None)] + [figures_at(questions, f) for f in grid]
    return {
        "ranker": ranker,
        "n": len(questions),
        "depth": DEPTH,
        "unfloored": rows[0],
        "rows": rows,
        "conversations": [{"sample_id": sid, "questions": count} for sid, count in conversations],
        # Columns (one value per question, in protocol order) keep the report compact.
        "questions": {
            "evidence": [q.evidence for q in questions],
            "found": [list(q.found) for q in questions],
            "own_top": [q.own_top for q in questions],
            "foreign_top": [q.foreign_top for q in questions],
        },
    }


def abstention_curve(
    conversations: Sequence[LocomoConversation],
    ranker: str | Ranker,
    *,
    floors: Sequence[float] | None = None,
    progress: Callable[[int], None] | None = None,
    stored_vectors: bool = True,
) -> dict[str, Any]:
    """One ranker's abstention curve on ``conversations`` (see the module docstring)."""
    ranker_obj = get_ranker(ranker)
    name = ranker if isinstance(ranker, str) else str(getattr(ranker_obj, "name", ranker_obj))
    scores = score_questions(
        conversations, ranker_obj, progress=progress, stored_vectors=stored_vectors)
    runs = [(c.sample_id, len(headline_questions(c))) for c in conversations]
    return curve_from_scores(name, scores, floors=floors, conversations=runs)


def questions_of(curve: Mapping[str, Any]) -> tuple[QuestionScores, ...]:
    """The per-question scores a curve (or its JSON) carries."""
    columns = curve["questions"]
    return tuple(
        QuestionScores(evidence=int(e), found=tuple(found), own_top=own, foreign_top=foreign)
        for e, found, own, foreign in zip(
            columns["evidence"], columns["found"], columns["own_top"], columns["foreign_top"],
            strict=True,
        )
    )


def round_down_2sig(value: float) -> float:
    """``value`` rounded toward minus infinity to 2 significant digits (7.83 → 7.8)."""
    if value == 0 or not math.isfinite(value):
        return value
    # Decimal, because 0.52 / 0.01 is 51.99999… in floats and would floor to 0.51.
    exact = Decimal(repr(value))
    step = Decimal(1).scaleb(exact.adjusted() - 1)
    return float(exact.quantize(step, rounding=ROUND_FLOOR))


def _largest_keeping(questions: Sequence[QuestionScores], target: float) -> float | None:
    """The largest floor with own R@10 >= ``target``: R@10 only falls when the floor
    passes an evidence hit's score, so the answer is one of those scores."""
    for score in sorted({s for q in questions for s in q.found}, reverse=True):
        if _exact_r10(questions, score) >= target:
            return score
    return None


def _choose(
    questions: Sequence[QuestionScores], keep: float,
) -> tuple[float | None, float | None]:
    """The largest floor keeping ``keep`` of the unfloored own R@10, and it rounded down;
    None when nothing is found unfloored (any floor keeps a recall of 0)."""
    unfloored = _exact_r10(questions, None)
    largest = _largest_keeping(questions, keep * unfloored) if unfloored > 0 else None
    return largest, None if largest is None else round_down_2sig(largest)


def suggest_floor(curve: Mapping[str, Any], keep: float = KEEP) -> dict[str, Any]:
    """The suggested floor of a curve and its figures, recomputed there exactly.

    ``floor`` is None when no floor is worth suggesting: nothing was found unfloored
    (any floor keeps a recall of 0), or no evidence hit was ranked."""
    check_keep(keep)
    questions = questions_of(curve)
    unfloored = _exact_r10(questions, None)
    largest, floor = _choose(questions, keep)
    figures = figures_at(questions, floor)
    r10 = _exact_r10(questions, floor)
    fits = [r["floor"] for r in curve["rows"]
            if r["floor"] is not None and _exact_r10(questions, r["floor"]) >= keep * unfloored]
    return {
        "ranker": curve["ranker"],
        "keep": keep,
        **figures,
        "own_r10_unfloored": round(unfloored, _DECIMALS),
        "own_r10_ratio": round(r10 / unfloored, _DECIMALS) if unfloored else None,
        "largest_floor": largest,
        "largest_grid_floor": max(fits) if fits and unfloored > 0 else None,
    }


def cross_validate(curve: Mapping[str, Any], keep: float = KEEP) -> dict[str, Any]:
    """Leave one conversation out: each conversation's questions judged at the floor
    chosen on the other conversations', as :func:`suggest_floor` chooses it.

    A floor chosen on the questions it is then judged on flatters itself; the data's
    README asks for this figure beside the in-sample one. ``pooled`` judges every
    question at its fold's floor; its ratio is to the unfloored own R@10 of all."""
    check_keep(keep)
    runs = curve.get("conversations") or []
    if len(runs) < 2:
        raise RemoteMemoryValidationError("cross-validation needs a curve of 2+ conversations")
    questions = questions_of(curve)
    folds: list[dict[str, Any]] = []
    judged: list[tuple[QuestionScores, float | None]] = []
    start = 0
    for run in runs:
        end = start + int(run["questions"])
        held = questions[start:end]
        _, floor = _choose(questions[:start] + questions[end:], keep)
        judged += [(q, floor) for q in held]
        unfloored = _exact_r10(held, None)
        folds.append({
            "held_out": run["sample_id"], "floor": floor, "n": len(held),
            **_figures([(q, floor) for q in held]),
            "own_r10_unfloored": round(unfloored, _DECIMALS),
            "own_r10_ratio": (
                round(_exact_r10(held, floor) / unfloored, _DECIMALS) if unfloored else None),
        })
        start = end
    unfloored = _exact_r10(questions, None)
    kept = sum(sum(_kept(s, f) for s in q.found) / q.evidence for q, f in judged)
    return {
        "keep": keep,
        "folds": folds,
        "pooled": {
            **_figures(judged),
            "own_r10_unfloored": round(unfloored, _DECIMALS),
            "own_r10_ratio": (
                round(kept / len(questions) / unfloored, _DECIMALS) if unfloored else None),
        },
    }
