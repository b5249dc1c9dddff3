"""``memlib recall TEXT``: the rendered context (or ``--json``, the tool JSON) for a query."""

from __future__ import annotations

import argparse
from typing import Any

from .._capabilities import DenseScoring
from ..engine import RecallEngine
from ..rankers import get_ranker
from ..render import render_recall_context
from ..stores._base import VectorStoring
from ._common import (
    add_project_options,
    int_arg,
    open_cli_store,
    parse_as_of,
    store_embedder,
    write_line,
)

__all__ = ["add_recall_options", "cmd_recall", "limit_arg", "open_recall_engine", "register"]


limit_arg = int_arg("limit must be an integer")


def open_recall_engine(
    args: argparse.Namespace, *, min_score: float | str | None = None
) -> RecallEngine:
    """The store and ranker of the command line; ``min_score`` floors every recall."""
    store = open_cli_store(args)
    ranker = get_ranker(args.ranker)
    if isinstance(ranker, DenseScoring) and isinstance(store, VectorStoring):
        store_embedder(store, args)  # the query is embedded by the model of the stored vectors
    return RecallEngine(store, ranker=ranker, min_score=min_score)


def recall_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of ``engine.recall`` and ``engine.explain`` from ``add_recall_options``."""
    return {
        "limit": args.limit,
        "as_of": parse_as_of(args.as_of),
        "query_id": args.query_id,
        "known_at": parse_as_of(args.known_at, "--known-at"),
        "min_score": args.min_score,
        "all_projects": args.all_projects,
    }


def cmd_recall(args: argparse.Namespace) -> int:
    result = open_recall_engine(args).recall(args.text, **recall_options(args))
    if args.json:
        write_line(result.to_json(), "json")
    elif result.hits:
        write_line(render_recall_context(result), "xml")
    elif result.below_min_score:
        write_line(
            f"no hits ({result.empty_reason}): {result.below_min_score} scored under "
            f"min_score {result.min_score:g}"
        )
    else:
        write_line(
            f"no hits ({result.empty_reason}): searched {result.searched_records} "
            f"conversation records, {result.candidate_records} shared a term"
        )
    return 0


def add_recall_options(parser: Any) -> None:
    """The options ``recall`` and ``explain`` share: the same recall, explained or run."""
    parser.add_argument("--limit", type=limit_arg, default=5)
    parser.add_argument("--as-of", help="ISO-8601 instant for recency (default: now, UTC)")
    parser.add_argument(
        "--known-at",
        help="ISO-8601 instant: recall the store as it stood then "
        "(records and retractions stored at or before it)",
    )
    parser.add_argument(
        "--min-score",
        help="drop hits scoring under this floor: a number, or 'suggested' "
        "(the ranker's calibrated floor)",
    )
    parser.add_argument("--query-id")
    parser.add_argument("--ranker", default="baseline")
    add_project_options(parser, all_projects=True)


def register(subparsers: Any) -> None:
    recall = subparsers.add_parser("recall", help="recall conversation records for a query")
    recall.add_argument("text")
    add_recall_options(recall)
    recall.add_argument("--json", action="store_true", help="print the tool JSON")
    recall.set_defaults(func=cmd_recall)
