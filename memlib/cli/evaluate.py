"""``memlib eval locomo``: recall@k / hit@k and session level (Sany / Sall) of each ranker,
the tables on stdout, optionally a JSON report. A ranker with a dense path (``hybrid``) is
also reported over the lexical candidates alone (``NAME/lexical-only``); on two or more
conversations, each ranker's leave-one-conversation-out figure follows unless ``--no-cv``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import RemoteMemoryValidationError
from ._common import embedder_name, write_line

__all__ = ["cmd_eval_locomo", "default_rankers", "parse_ks", "register"]


def parse_ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--k must be integers separated by commas: {text!r}"
        ) from None
    if not ks or any(k < 1 for k in ks):
        raise argparse.ArgumentTypeError(f"--k must be positive integers: {text!r}")
    return tuple(sorted(set(ks)))


def default_rankers() -> list[str]:
    """Every registered ranker; ``hybrid`` only when the embeddings extra is installed."""
    from ..rankers import ranker_names
    from ..rankers.embeddings import embeddings_available

    available = embeddings_available()
    return [name for name in ranker_names() if name != "hybrid" or available]


def named_rankers(names: Sequence[str], embedder: str | None = None) -> dict[str, Any]:
    """The rankers of ``names``; with ``embedder``, those that read a model (``hybrid``)
    read that one's vectors, as on a store embedded with it (``e5-pair``: pairs)."""
    from ..rankers import get_ranker

    rankers = {name: get_ranker(name) for name in names}
    if embedder:
        from ..rankers.embeddings import get_embedder

        model = get_embedder(embedder)
        rankers = {
            name: r.with_model(model) if hasattr(r, "with_model") else r
            for name, r in rankers.items()
        }
    return rankers


def cmd_eval_locomo(args: argparse.Namespace) -> int:
    from .._capabilities import DenseScoring
    from .._progress import progress_bar
    from ..eval.locomo import DEFAULT_KS, evaluate_ranker, format_table, load_locomo
    from ..rankers.embeddings import get_embedder

    ks = args.k or DEFAULT_KS
    names = list(dict.fromkeys(args.ranker or default_rankers()))
    named = embedder_name(args)
    rankers = named_rankers(names, named)  # unknown names fail before work
    if named:
        write_line(f"dense rankers read vectors of {get_embedder(named).name}")
    for name in (args.report, args.cv_report):  # a bad folder fails before minutes of work
        if name and not Path(name).parent.exists():
            raise RemoteMemoryValidationError(f"report folder does not exist: {Path(name).parent}")
    if args.conversations is not None and args.conversations < 1:
        raise RemoteMemoryValidationError("--conversations must be a positive integer")
    data = args.data
    if data == "zh-check":  # the packaged Chinese check set
        from ..sample import chinese_check_set_path

        data = chinese_check_set_path()
    conversations = load_locomo(data)[: args.conversations]
    total = sum(len(c.questions) for c in conversations)
    report: dict[str, Any] = {}
    runs = [(name, ranker, True) for name, ranker in rankers.items()]
    # The reference over lexical candidates alone; pair vectors have none (a scan knows no
    # record's turn before), so a pair model's ranker shows its stored-vector row only.
    runs += [
        (f"{name}/lexical-only", ranker, False)
        for name, ranker in rankers.items()
        if isinstance(ranker, DenseScoring) and not getattr(ranker, "reads_pairs", False)
    ]

    def bar_of(count: int, label: str) -> Any:
        return progress_bar(
            count, f"{label:<16}", enabled=not args.quiet, unit="q", dynamic_ncols=True
        )

    for name, ranker, dense in runs:
        with bar_of(total, name) as bar:
            report[name] = evaluate_ranker(
                conversations, ranker, ks=ks, progress=bar.update, stored_vectors=dense
            )
    write_line(format_table(report, ks))
    if not args.no_cv and len(conversations) >= 2:
        from ..eval.crossval import cross_validate, format_crossval

        crossval: dict[str, Any] = {}
        for name, ranker in rankers.items():
            settings = len(getattr(ranker, "grid", ()) or (None,))
            with bar_of(total * settings, name + " cv") as bar:
                crossval[name] = cross_validate(conversations, ranker, ks=ks, progress=bar.update)
        write_line("\n" + format_crossval(crossval))
        if args.cv_report:
            _write_report(args.cv_report, crossval)
    if args.report:
        _write_report(args.report, report)
    return 0


def _write_report(name: str, report: Any) -> None:
    # Its folder was checked before the run.
    Path(name).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    write_line(f"report written to {name}")


def register(subparsers: Any) -> None:
    evaluate = subparsers.add_parser("eval", help="evaluate rankers on a benchmark")
    benchmarks = evaluate.add_subparsers(
        dest="benchmark", metavar="BENCHMARK", parser_class=type(evaluate), required=True
    )
    locomo = benchmarks.add_parser(
        "locomo", help="recall@k / hit@k on LoCoMo-format data (categories 1-4; 5 apart)"
    )
    locomo.add_argument(
        "--data",
        required=True,
        help="LoCoMo JSON file (a list of samples), or zh-check: the packaged Chinese check set",
    )
    locomo.add_argument(
        "--ranker",
        action="append",
        help="ranker name; repeat for several (default: every available ranker)",
    )
    locomo.add_argument(
        "--conversations",
        type=int,
        help="only the first N conversations (3: the split of the README's figures)",
    )
    locomo.add_argument("--k", type=parse_ks, help="cut-offs, e.g. 1,5,10 (the default)")
    locomo.add_argument("--report", help="write the JSON report to this file")
    locomo.add_argument("--quiet", action="store_true", help="no progress bar")
    locomo.add_argument(
        "--no-cv", action="store_true", help="skip the leave-one-conversation-out figures"
    )
    locomo.add_argument("--cv-report", help="write the cross-validation report to this file")
    locomo.set_defaults(func=cmd_eval_locomo)
