"""``memlib explain TEXT --memory-id X``: where record X stopped for that recall, and why."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import write_line
from .recall import add_recall_options, open_recall_engine, recall_options


def cmd_explain(args: argparse.Namespace) -> int:
    engine = open_recall_engine(args)
    explanation = engine.explain(args.text, args.memory_id, **recall_options(args))
    if args.json:
        write_line(explanation.to_json(), "json")
    else:
        write_line(explanation.to_text(), "xml")
    return 0


def register(subparsers: Any) -> None:
    explain = subparsers.add_parser(
        "explain",
        help="say where a record stopped for a recall (scope, retraction, "
        "candidates, rank, min_score) and why",
    )
    explain.add_argument("text")
    explain.add_argument("--memory-id", required=True)
    add_recall_options(explain)
    explain.add_argument("--json", action="store_true", help="print the explanation as JSON")
    explain.set_defaults(func=cmd_explain)
