"""Leave one conversation out: the honest figure for a ranker's tuned defaults.

Each conversation is judged at the setting of the ranker's ``grid`` with the best R@10 on
the *other* conversations; the figure is the mean of these folds, with a 95% percentile
bootstrap over the held-out questions (what it owes to which questions were asked)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from ..errors import RemoteMemoryValidationError
from ..rankers import Ranker, get_ranker
from .locomo import (
    DEFAULT_KS,
    HEADLINE_CATEGORIES,
    LocomoConversation,
    Row,
    _metrics,
    conversation_rows,
    question_recall,
)

__all__ = [
    "CHOOSE_BY",
    "cross_validate",
    "format_crossval",
    "bootstrap_interval",
    "bootstrap_means",
    "interval_95",
    "leave_one_out",
]

CHOOSE_BY = "R@10"
BOOTSTRAP_SAMPLES = 2_000
BOOTSTRAP_SEED = 20261204


T = TypeVar("T")


def leave_one_out(groups: Sequence[T]) -> Iterator[tuple[T, list[T]]]:
    """Each group held out, beside the others in order (the one loop of every
    leave-one-conversation-out figure: here, and the score floors' calibration)."""
    for i, held in enumerate(groups):
        yield held, [*groups[:i], *groups[i + 1 :]]


def _headline(rows: Sequence[Row]) -> list[Row]:
    return [r for r in rows if r[0] in HEADLINE_CATEGORIES]


def bootstrap_means(folds: Sequence[Sequence[float]]) -> list[float]:
    """``BOOTSTRAP_SAMPLES`` means of the folds' means, each fold's values drawn again with
    replacement, sorted (a fixed seed: the same folds, the same draws)."""
    rng = random.Random(BOOTSTRAP_SEED)
    folds = [list(f) for f in folds if len(f)]
    if not folds:
        return [0.0] * BOOTSTRAP_SAMPLES
    means = []
    for _ in range(BOOTSTRAP_SAMPLES):
        total = 0.0
        for values in folds:
            n = len(values)
            total += sum(values[int(rng.random() * n)] for _ in range(n)) / n
        means.append(total / len(folds))
    means.sort()
    return means


def bootstrap_interval(folds: Sequence[Sequence[float]]) -> list[float]:
    """The 95% percentile interval of ``bootstrap_means(folds)``."""
    return interval_95(bootstrap_means(folds))


def interval_95(means: Sequence[float]) -> list[float]:
    """The 2.5th and 97.5th percentiles of sorted ``bootstrap_means``, to 4 places."""
    last = len(means) - 1
    return [round(means[int(0.025 * last)], 4), round(means[int(0.975 * last)], 4)]


def cross_validate(
    conversations: Sequence[LocomoConversation],
    ranker: str | Ranker,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    stored_vectors: bool = True,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """One ranker's report (module docstring); needs 2 or more conversations."""
    if len(conversations) < 2:
        raise RemoteMemoryValidationError("cross-validation needs 2 or more conversations")
    base = get_ranker(ranker)
    grid: tuple[Mapping[str, Any], ...] = tuple(getattr(base, "grid", ()) or ({},))
    ks = tuple(sorted(set(ks) | {10}))
    rows_of = partial(
        conversation_rows, depth=max(ks), stored_vectors=stored_vectors, progress=progress
    )
    # rows[setting][conversation]: every setting measured once on every conversation.
    rows: list[list[list[Row]]] = []
    for params in grid:
        tuned = base.with_params(**params) if params else base  # type: ignore[attr-defined]
        rows.append([rows_of(c, tuned) for c in conversations])

    def metrics(setting: int, members: Sequence[int]) -> dict[str, float]:
        return _metrics(_headline([r for m in members for r in rows[setting][m]]), ks)

    def score(setting: int, members: Sequence[int]) -> float:
        return metrics(setting, members)[CHOOSE_BY]  # 0.0 when no question

    everyone = range(len(conversations))
    folds: list[dict[str, Any]] = []
    held_out: list[list[float]] = []
    for held, train in leave_one_out(everyone):
        chosen = max(range(len(grid)), key=lambda s: (score(s, train), -s))
        held_out.append([question_recall(r, 10) for r in _headline(rows[chosen][held])])
        folds.append(
            {
                "held_out": conversations[held].sample_id,
                "chosen": dict(grid[chosen]),
                "train": round(score(chosen, train), 4),
                "held_out_metrics": metrics(chosen, [held]),
            }
        )
    best = max(range(len(grid)), key=lambda s: (score(s, everyone), -s))

    def is_shipped(params: Mapping[str, Any]) -> bool:
        return all(getattr(base, k, None) == v for k, v in params.items())

    shipped = next((s for s, params in enumerate(grid) if is_shipped(params)), None)
    keys = [f"R@{k}" for k in ks] + [f"H@{k}" for k in ks]
    return {
        "ranker": base.name,
        "grid": [dict(p) for p in grid],
        "choose_by": CHOOSE_BY,
        "folds": folds,
        "cross_validated": {
            **{
                key: round(sum(f["held_out_metrics"][key] for f in folds) / len(folds), 4)
                for key in keys
            },
            "R@10_interval_95": bootstrap_interval(held_out),
        },
        "in_sample": {"chosen": dict(grid[best]), **metrics(best, everyone)},
        "shipped": None
        if shipped is None
        else {"params": dict(grid[shipped]), **metrics(shipped, everyone)},
    }


def _params(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "(nothing to tune)"


def format_crossval(reports: Mapping[str, Mapping[str, Any]]) -> str:
    """One line per ranker: R@10 cross-validated (mean of the held-out folds) beside
    in-sample and the shipped defaults', then each fold's choice."""
    width = max([len("ranker"), *(len(n) for n in reports)])
    lines = [
        "leave-one-conversation-out R@10 (categories 1-4; chosen by R@10 on the others)",
        f"{'ranker':<{width}}  {'cross-validated':>15}  {'95% (questions)':>15}  "
        f"{'in-sample':>9}  {'shipped':>7}",
    ]
    for name, rep in reports.items():
        shipped = rep["shipped"]["R@10"] if rep.get("shipped") else float("nan")
        low, high = rep["cross_validated"].get("R@10_interval_95") or (None, None)
        interval = "-" if low is None else f"{low:.3f}-{high:.3f}"
        lines.append(
            f"{name:<{width}}  {rep['cross_validated']['R@10']:>15.3f}  {interval:>15}  "
            f"{rep['in_sample']['R@10']:>9.3f}  {shipped:>7.3f}"
        )
    for name, rep in reports.items():
        if len(rep["grid"]) < 2:
            continue
        lines.append(f"{name}: in-sample choice {_params(rep['in_sample']['chosen'])}")
        for fold in rep["folds"]:
            lines.append(
                f"  held out {fold['held_out']}: {_params(fold['chosen'])} → "
                f"{fold['held_out_metrics']['R@10']:.3f}"
            )
    return "\n".join(lines)
