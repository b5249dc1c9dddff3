"""``memlib recall TEXT``: the rendered context (or ``--json``, the tool JSON) for a query."""

from __future__ import annotations

import argparse
from typing import Any

from ..engine import RecallEngine
from ..rankers import get_ranker
from ..rankers.base import DenseScoring
from ..render import render_recall_context
from ..stores.base import VectorStoring
from ._common import open_cli_store, parse_as_of, store_embedder, write_line

__all__ = ["cmd_recall", "limit_arg", "register"]


def limit_arg(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("limit must be an integer") from None


def cmd_recall(args: argparse.Namespace) -> int:
    store = open_cli_store(args)
    ranker = get_ranker(args.ranker)
    if isinstance(ranker, DenseScoring) and isinstance(store, VectorStoring):
        store_embedder(store, args)  # the query is embedded by the model of the stored vectors
    engine = RecallEngine(store, ranker=ranker)
    result = engine.recall(
        args.text, limit=args.limit, as_of=parse_as_of(args.as_of), query_id=args.query_id
    )
    if args.json:
        write_line(result.to_json())
    elif result.hits:
        write_line(render_recall_context(result))
    else:
        write_line(
            f"no hits ({result.empty_reason}): searched {result.searched_records} "
            f"conversation records, {result.candidate_records} shared a term"
        )
    return 0


def register(subparsers: Any) -> None:
    recall = subparsers.add_parser("recall", help="recall conversation records for a query")
    recall.add_argument("text")
    recall.add_argument("--limit", type=limit_arg, default=5)
    recall.add_argument("--as-of", help="ISO-8601 instant (default: now, UTC)")
    recall.add_argument("--query-id")
    recall.add_argument("--ranker", default="baseline")
    recall.add_argument("--json", action="store_true", help="print the tool JSON")
    recall.set_defaults(func=cmd_recall)
