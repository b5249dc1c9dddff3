"""Suggested score floors (``min_score``) per ranker, calibrated on the LoCoMo dev split.

    .venv/bin/python -m benchmarks.abstention [--rankers NAME ...] [--data PATH]
                                              [--out reports/abstention-dev-split.json]
                                              [--embedder e5-pair]

Runs ``memlib.eval.abstention`` (its docstring states the protocol) for each ranker with
a progress bar on stderr, prints per ranker the unfloored row, a few floors of the grid
around the suggestion, the suggestion with its ratio to the unfloored R@10 and the
leave-one-conversation-out check of it, and writes the JSON report: date, data file,
protocol, run time, and per ranker the suggestion, its cross-validation and the curve
(figures per floor and the per-question scores behind them).
``hybrid`` (loaded only when the embeddings extra is installed) scores as on a store
with vectors. After a new report, ``python -m memlib.notebook reports`` refreshes the
copy the notebooks read.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import LOCOMO_DEV, ROOT
from memlib._progress import progress_bar
from memlib.cli.evaluate import default_rankers, named_rankers
from memlib.errors import RemoteMemoryError
from memlib.eval.abstention import (
    KEEP,
    PROTOCOL,
    abstention_curve,
    check_conversations,
    check_keep,
    cross_validate,
    headline_questions,
    suggest_floor,
)
from memlib.eval.locomo import load_locomo

DATA = LOCOMO_DEV
OUT = ROOT / "reports" / "abstention-dev-split.json"
AROUND = 3  # grid floors shown on each side of the suggestion
COLUMNS = ("foreign_abstain", "own_r10", "own_h10", "own_abstain")


def _floor_text(floor: float | None) -> str:
    return "none" if floor is None else f"{floor:g}"


def table(curve: Mapping[str, Any], suggestion: Mapping[str, Any]) -> str:
    """The unfloored row, the grid floors around the suggestion, and the suggestion."""
    rows = curve["rows"]
    floored = [r for r in rows[1:] if r["floor"] is not None]
    chosen = suggestion["floor"]
    below = [r for r in floored if chosen is None or r["floor"] < chosen][-AROUND:]
    above = [] if chosen is None else [r for r in floored if r["floor"] > chosen][:AROUND]
    head = f"{'floor':>10}  " + "  ".join(f"{c:>15}" for c in COLUMNS)

    def line(row: Mapping[str, Any], mark: str = "") -> str:
        return (f"{_floor_text(row['floor']):>10}  "
                + "  ".join(f"{row[c]:>15.4f}" for c in COLUMNS) + mark)

    lines = [f"{curve['ranker']} (n = {curve['n']})", head, line(rows[0], "  (no floor)")]
    lines += [line(r) for r in below]
    lines.append(line(suggestion, "  <- suggested"))
    lines += [line(r) for r in above]
    ratio = suggestion["own_r10_ratio"]
    lines.append(
        f"suggested floor {_floor_text(chosen)}: own R@10 {suggestion['own_r10']:.4f} = "
        f"{'n/a' if ratio is None else f'{ratio:.4f}'} x unfloored "
        f"{suggestion['own_r10_unfloored']:.4f} (keep >= {suggestion['keep']}); foreign "
        f"recalls abstain {suggestion['foreign_abstain']:.1%}, own {suggestion['own_abstain']:.1%}"
        f" (largest keeping floor {suggestion['largest_floor']})"
    )
    return "\n".join(lines)


def cv_line(checked: Mapping[str, Any]) -> str:
    """Leave-one-conversation-out: each fold's floor, and the pooled figures."""
    pooled, ratio = checked["pooled"], checked["pooled"]["own_r10_ratio"]
    floors = ", ".join(f"{f['held_out']} {_floor_text(f['floor'])}" for f in checked["folds"])
    return (f"leave one conversation out (floors {floors}): own R@10 {pooled['own_r10']:.4f} = "
            f"{'n/a' if ratio is None else f'{ratio:.4f}'} x unfloored; foreign recalls "
            f"abstain {pooled['foreign_abstain']:.1%}, own {pooled['own_abstain']:.1%}")


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
    parser.add_argument("--data", type=Path, default=DATA, help="LoCoMo JSON file")
    parser.add_argument("--out", type=Path, default=OUT, help="the JSON report to write")
    parser.add_argument("--keep", type=float, default=KEEP,
                        help="share of the unfloored own R@10 the floor must keep")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--embedder", help="the model dense rankers read, as a store's "
                        "vectors would be (e.g. e5-pair); default: each ranker's own")
    args = parser.parse_args(argv)

    try:
        report = run(args)
    except RemoteMemoryError as exc:
        # Bad input (data file, ranker name, a single conversation): one line, as memlib.
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(dumps(report) + "\n", encoding="utf-8")
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
        with progress_bar(total, f"{name:<16}", enabled=not args.quiet, unit="q",
                          dynamic_ncols=True) as bar:
            curve = abstention_curve(conversations, ranker, progress=bar.update)
        curve["ranker"] = name
        suggestion = suggest_floor(curve, args.keep)
        checked = cross_validate(curve, args.keep)
        seconds[name] = round(time.perf_counter() - start, 1)
        results[name] = {"suggestion": suggestion, "cross_validated": checked, "curve": curve}
        print(table(curve, suggestion) + "\n" + cv_line(checked)
              + f"\n({seconds[name]} s)\n", flush=True)
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "data": {"file": args.data.name,
                 "sha256": hashlib.sha256(args.data.read_bytes()).hexdigest(),
                 "conversations": [c.sample_id for c in conversations], "questions": total},
        "protocol": PROTOCOL,
        "keep": args.keep,
        "embedder": args.embedder,
        "suggested_floors": {name: r["suggestion"]["floor"] for name, r in results.items()},
        "seconds": {**seconds, "total": round(time.perf_counter() - began, 1)},
        "rankers": results,
    }


if __name__ == "__main__":
    sys.exit(main())
