"""Suggested score floors (``min_score``) per ranker, calibrated on the LoCoMo dev split.

    .venv/bin/python -m benchmarks.abstention [--rankers NAME ...] [--data PATH]
        [--out reports/abstention-dev-split.json] [--embedder e5-pair]

The method is ``PROTOCOL`` and docs/abstention.md. A curve carries, per question, the few
scores its figures depend on: the figures at any floor come from it alone. The library's
floors (``min_score="suggested"``) are the reports': tests/pipeline/test_abstention.py
holds them to them; ``python -m memlib.notebook reports`` refreshes the notebooks' copy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_FLOOR, Decimal
from pathlib import Path
from typing import Any

from benchmarks.common import LOCOMO_DEV, ROOT
from memlib._progress import progress_bar
from memlib.cli.evaluate import default_rankers, named_rankers
from memlib.errors import RemoteMemoryError, RemoteMemoryValidationError
from memlib.eval.crossval import leave_one_out
from memlib.eval.locomo import (
    HEADLINE_CATEGORIES,
    ConversationIndex,
    ConversationVectors,
    LocomoConversation,
    LocomoQuestion,
    load_locomo,
    rank_hits,
)
from memlib.rankers import Ranker, get_ranker
from memlib.rankers.base import DenseScoring

DEPTH = 10
KEEP = 0.98
_DECIMALS = 4  # as locomo._metrics rounds its figures
OUT = ROOT / "reports" / "abstention-dev-split.json"
AROUND = 3  # grid floors shown on each side of the suggestion
COLUMNS = ("foreign_abstain", "own_r10", "own_h10", "own_abstain")
Progress = Callable[[int], None] | None

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
    return [q for q in conversation.questions if q.category in HEADLINE_CATEGORIES]


def check_conversations(conversations: Sequence[LocomoConversation]) -> None:
    if len(conversations) < 2:
        raise RemoteMemoryValidationError(
            "abstention needs at least 2 conversations (foreign recalls use the next one)"
        )


def check_keep(keep: float) -> None:
    if not 0 < keep <= 1:
        raise RemoteMemoryValidationError(f"keep must be in (0, 1]: {keep!r}")


def score_questions(
    conversations: Sequence[LocomoConversation], ranker: str | Ranker, *, progress: Progress = None
) -> tuple[QuestionScores, ...]:
    """Every headline question's own and foreign scores; ``progress(1)`` after each.
    A ``DenseScoring`` ranker scores as on a store with vectors."""
    check_conversations(conversations)
    ranker_obj = get_ranker(ranker)
    dense = isinstance(ranker_obj, DenseScoring)
    # One per conversation: its own store, and the previous conversation's foreign one.
    indexes = [
        ConversationVectors(c.records, ranker_obj.model)  # type: ignore[attr-defined]
        if dense
        else ConversationIndex(c.records)
        for c in conversations
    ]
    out: list[QuestionScores] = []
    for i, conversation in enumerate(conversations):
        j = (i + 1) % len(conversations)
        for question in headline_questions(conversation):
            own = rank_hits(ranker_obj, indexes[i], conversation, question, DEPTH)
            foreign = rank_hits(ranker_obj, indexes[j], conversations[j], question, DEPTH)
            evidence = set(question.evidence)
            out.append(
                QuestionScores(
                    evidence=len(question.evidence),
                    found=tuple(h.score for h in own if h.memory_id in evidence),
                    own_top=own[0].score if own else None,
                    foreign_top=foreign[0].score if foreign else None,
                )
            )
            if progress is not None:
                progress(1)
    return tuple(out)


def top_scores(questions: Sequence[QuestionScores]) -> list[float]:
    """The pooled top-1 scores (own and foreign), sorted; recalls with no hit have none."""
    tops = [q.own_top for q in questions] + [q.foreign_top for q in questions]
    return sorted(t for t in tops if t is not None)


def floor_grid(questions: Sequence[QuestionScores]) -> list[float]:
    """Quantiles 0..100 % of the pooled top-1 scores, and round numbers spanning them."""
    tops = top_scores(questions)
    if not tops:
        return []
    # Nearest rank, so every quantile floor is a score some recall really had.
    quantiles = {tops[max(0, math.ceil(p / 100 * len(tops)) - 1)] for p in range(101)}
    low, high = tops[0], tops[-1]
    magnitude = max(abs(low), abs(high))
    if magnitude == 0:
        return sorted(quantiles | {0.0})
    # Multiples of a power of ten, 10 to 100 of them; Decimal, so a floor reads 0.3 and
    # not 0.30000000000000004.
    step = Decimal(1).scaleb(math.floor(math.log10(magnitude)) - 1)
    first, last = math.floor(Decimal(repr(low)) / step), math.ceil(Decimal(repr(high)) / step)
    return sorted(quantiles | {float(k * step) for k in range(first, last + 1)})


def _kept(score: float | None, floor: float | None) -> bool:
    return score is not None and (floor is None or score >= floor)


def _r10(q: QuestionScores, floor: float | None) -> float:
    return sum(_kept(s, floor) for s in q.found) / q.evidence


def _exact_r10(questions: Sequence[QuestionScores], floor: float | None) -> float:
    return sum(_r10(q, floor) for q in questions) / len(questions) if questions else 0.0


def _figures(judged: Sequence[tuple[QuestionScores, float | None]]) -> dict[str, float]:
    """The four figures over questions each judged at its own floor."""
    n = len(judged)

    def share(total: float) -> float:
        return round(total / n, _DECIMALS) if n else 0.0

    return {
        "foreign_abstain": share(sum(not _kept(q.foreign_top, f) for q, f in judged)),
        "own_r10": share(sum(_r10(q, f) for q, f in judged)),
        "own_h10": share(sum(any(_kept(s, f) for s in q.found) for q, f in judged)),
        "own_abstain": share(sum(not _kept(q.own_top, f) for q, f in judged)),
    }


def figures_at(questions: Sequence[QuestionScores], floor: float | None) -> dict[str, Any]:
    """One row of a curve: the figures with hits scoring under ``floor`` dropped."""
    return {"floor": floor, **_figures([(q, floor) for q in questions])}


def curve_from_scores(
    ranker: str,
    questions: Sequence[QuestionScores],
    *,
    floors: Sequence[float] | None = None,
    conversations: Sequence[tuple[str, int]] = (),
) -> dict[str, Any]:
    """A JSON-able curve: figures per floor, and the per-question scores behind them.
    ``conversations``: ``(sample_id, count)`` of the runs of questions that share one."""
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
    conversations: Sequence[LocomoConversation], ranker: str | Ranker, *, progress: Progress = None
) -> dict[str, Any]:
    ranker_obj = get_ranker(ranker)
    name = ranker if isinstance(ranker, str) else str(getattr(ranker_obj, "name", ranker_obj))
    scores = score_questions(conversations, ranker_obj, progress=progress)
    runs = [(c.sample_id, len(headline_questions(c))) for c in conversations]
    return curve_from_scores(name, scores, conversations=runs)


def questions_of(curve: Mapping[str, Any]) -> tuple[QuestionScores, ...]:
    """The per-question scores a curve (or its JSON) carries."""
    c = curve["questions"]
    return tuple(
        QuestionScores(int(e), tuple(found), own, foreign)
        for e, found, own, foreign in zip(
            c["evidence"], c["found"], c["own_top"], c["foreign_top"], strict=True
        )
    )


def round_down_2sig(value: float) -> float:
    """``value`` rounded toward minus infinity to 2 significant digits (7.83 → 7.8)."""
    if value == 0 or not math.isfinite(value):
        return value
    # Decimal, because 0.52 / 0.01 is 51.99999… in floats and would floor to 0.51.
    exact = Decimal(repr(value))
    return float(exact.quantize(Decimal(1).scaleb(exact.adjusted() - 1), rounding=ROUND_FLOOR))


def _choose(questions: Sequence[QuestionScores], keep: float) -> tuple[float | None, float | None]:
    """The largest floor keeping ``keep`` of the unfloored own R@10, and it rounded down;
    None when nothing is found unfloored (any floor keeps a recall of 0). R@10 only falls
    when the floor passes an evidence hit's score, so the answer is one of those."""
    target = keep * _exact_r10(questions, None)
    if target <= 0:
        return None, None
    for score in sorted({s for q in questions for s in q.found}, reverse=True):
        if _exact_r10(questions, score) >= target:
            return score, round_down_2sig(score)
    return None, None


def _ratio(kept: float, unfloored: float) -> dict[str, float | None]:
    return {
        "own_r10_unfloored": round(unfloored, _DECIMALS),
        "own_r10_ratio": round(kept / unfloored, _DECIMALS) if unfloored else None,
    }


def suggest_floor(curve: Mapping[str, Any], keep: float = KEEP) -> dict[str, Any]:
    """The suggested floor of a curve and its figures, recomputed there exactly
    (``floor`` None: nothing found unfloored, or no evidence hit ranked)."""
    check_keep(keep)
    questions = questions_of(curve)
    unfloored = _exact_r10(questions, None)
    largest, floor = _choose(questions, keep)
    fits = [
        r["floor"]
        for r in curve["rows"]
        if r["floor"] is not None and _exact_r10(questions, r["floor"]) >= keep * unfloored
    ]
    return {
        "ranker": curve["ranker"],
        "keep": keep,
        **figures_at(questions, floor),
        **_ratio(_exact_r10(questions, floor), unfloored),
        "largest_floor": largest,
        "largest_grid_floor": max(fits) if fits and unfloored > 0 else None,
    }


def cross_validate(curve: Mapping[str, Any], keep: float = KEEP) -> dict[str, Any]:
    """Each conversation's questions judged at the floor :func:`suggest_floor` chooses on
    the others'; ``pooled`` judges every question at its fold's floor."""
    check_keep(keep)
    runs = curve.get("conversations") or []
    if len(runs) < 2:
        raise RemoteMemoryValidationError("cross-validation needs a curve of 2+ conversations")
    questions = questions_of(curve)
    groups, start = [], 0
    for run in runs:
        groups.append((run["sample_id"], questions[start : start + int(run["questions"])]))
        start += int(run["questions"])
    folds: list[dict[str, Any]] = []
    judged: list[tuple[QuestionScores, float | None]] = []
    for (sample_id, held), others in leave_one_out(groups):
        _, floor = _choose([q for _, qs in others for q in qs], keep)
        judged += [(q, floor) for q in held]
        folds.append(
            {
                "held_out": sample_id,
                "floor": floor,
                "n": len(held),
                **_figures([(q, floor) for q in held]),
                **_ratio(_exact_r10(held, floor), _exact_r10(held, None)),
            }
        )
    kept = sum(_r10(q, f) for q, f in judged) / len(questions)
    pooled = _ratio(kept, _exact_r10(questions, None))
    return {"keep": keep, "folds": folds, "pooled": {**_figures(judged), **pooled}}


def _floor_text(floor: float | None) -> str:
    return "none" if floor is None else f"{floor:g}"


def _ratio_text(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.4f}"


def table(curve: Mapping[str, Any], suggestion: Mapping[str, Any]) -> str:
    """The unfloored row, the grid floors around the suggestion, and the suggestion."""
    rows = curve["rows"]
    floored = [r for r in rows[1:] if r["floor"] is not None]
    chosen = suggestion["floor"]
    below = [r for r in floored if chosen is None or r["floor"] < chosen][-AROUND:]
    above = [] if chosen is None else [r for r in floored if r["floor"] > chosen][:AROUND]

    def line(row: Mapping[str, Any], mark: str = "") -> str:
        cells = "  ".join(f"{row[c]:>15.4f}" for c in COLUMNS)
        return f"{_floor_text(row['floor']):>10}  {cells}{mark}"

    head = f"{'floor':>10}  " + "  ".join(f"{c:>15}" for c in COLUMNS)
    lines = [
        f"{curve['ranker']} (n = {curve['n']})",
        head,
        line(rows[0], "  (no floor)"),
        *map(line, below),
        line(suggestion, "  <- suggested"),
        *map(line, above),
    ]
    s = suggestion
    lines.append(
        f"suggested floor {_floor_text(chosen)}: own R@10 {s['own_r10']:.4f} = "
        f"{_ratio_text(s['own_r10_ratio'])} x unfloored {s['own_r10_unfloored']:.4f} (keep >= "
        f"{s['keep']}); foreign recalls abstain {s['foreign_abstain']:.1%}, own "
        f"{s['own_abstain']:.1%} (largest keeping floor {s['largest_floor']})"
    )
    return "\n".join(lines)


def cv_line(checked: Mapping[str, Any]) -> str:
    """Leave-one-conversation-out: each fold's floor, and the pooled figures."""
    pooled = checked["pooled"]
    floors = ", ".join(f"{f['held_out']} {_floor_text(f['floor'])}" for f in checked["folds"])
    return (
        f"leave one conversation out (floors {floors}): own R@10 {pooled['own_r10']:.4f} = "
        f"{_ratio_text(pooled['own_r10_ratio'])} x unfloored; foreign recalls "
        f"abstain {pooled['foreign_abstain']:.1%}, own {pooled['own_abstain']:.1%}"
    )


def _flat(value: Any) -> bool:
    scalar = (str, int, float, bool, type(None))
    if isinstance(value, list):
        return all(isinstance(v, scalar) or (isinstance(v, list) and _flat(v)) for v in value)
    if isinstance(value, dict):
        return all(isinstance(v, scalar) for v in value.values())
    return True


def dumps(value: Any, level: int = 0) -> str:
    """JSON with one line per row and per column: indented all the way down, the
    per-question columns would make the report thousands of lines long."""
    if _flat(value):
        return json.dumps(value, ensure_ascii=False)
    pad, inner = " " * level, " " * (level + 1)
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {dumps(v, level + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    items = [f"{inner}{dumps(v, level + 1)}" for v in value]
    return "[\n" + ",\n".join(items) + f"\n{pad}]"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rankers", nargs="+", help="default: every available ranker")
    parser.add_argument("--data", type=Path, default=LOCOMO_DEV, help="LoCoMo JSON file")
    parser.add_argument("--out", type=Path, default=OUT, help="the JSON report to write")
    parser.add_argument(
        "--keep",
        type=float,
        default=KEEP,
        help="share of the unfloored own R@10 the floor must keep",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--embedder",
        help="the model dense rankers read, as a store's "
        "vectors would be (e.g. e5-pair); default: each ranker's own",
    )
    args = parser.parse_args(argv)
    try:
        report = run(args)
        args.out.write_text(dumps(report) + "\n", encoding="utf-8")
    except RemoteMemoryError as exc:
        # Bad input (data file, ranker name, a single conversation): one line, as memlib.
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the report's file, after the whole run: still one line
        print(f"error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    print(f"suggested floors: {report['suggested_floors']}")
    print(f"report written to {args.out} ({report['seconds']['total']} s)")
    return 0


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every ranker's curve and suggestion, printed as it completes; the report."""
    names = list(dict.fromkeys(args.rankers or default_rankers()))
    rankers = named_rankers(names, args.embedder)  # unknown names fail first
    if not args.out.parent.is_dir():
        raise RemoteMemoryError(f"report folder does not exist: {args.out.parent}")
    check_keep(args.keep)  # before any ranking, not after the last ranker ran
    conversations = load_locomo(args.data)
    check_conversations(conversations)
    total = sum(len(headline_questions(c)) for c in conversations)
    began = time.perf_counter()
    results: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    for name, ranker in rankers.items():
        start = time.perf_counter()
        with progress_bar(
            total, f"{name:<16}", enabled=not args.quiet, unit="q", dynamic_ncols=True
        ) as bar:
            curve = abstention_curve(conversations, ranker, progress=bar.update)
        curve["ranker"] = name
        suggestion = suggest_floor(curve, args.keep)
        checked = cross_validate(curve, args.keep)
        seconds[name] = round(time.perf_counter() - start, 1)
        results[name] = {"suggestion": suggestion, "cross_validated": checked, "curve": curve}
        print(f"{table(curve, suggestion)}\n{cv_line(checked)}\n({seconds[name]} s)\n", flush=True)
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "data": {
            "file": args.data.name,
            "sha256": hashlib.sha256(args.data.read_bytes()).hexdigest(),
            "conversations": [c.sample_id for c in conversations],
            "questions": total,
        },
        "protocol": PROTOCOL,
        "keep": args.keep,
        "embedder": args.embedder,
        "suggested_floors": {name: r["suggestion"]["floor"] for name, r in results.items()},
        "seconds": {**seconds, "total": round(time.perf_counter() - began, 1)},
        "rankers": results,
    }


if __name__ == "__main__":
    sys.exit(main())
