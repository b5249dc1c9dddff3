"""``memlib demo``: recall on the sample corpus (``--lang zh``: the Chinese one), the same
output every run."""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from typing import Any

from ..engine import RecallEngine
from ..records import format_timestamp
from ..render import render_recall_context, render_remote_profile
from ._common import write_line
from .recall import limit_arg

DEMO_QUERY = "layered memory"
DEMO_QUERY_ID = "demo-query-001"
# The query of each sample corpus (``memlib.sample.SAMPLE_QUERY_ZH`` for zh; written out so
# that ``memlib --help`` does not import the sample module).
DEMO_QUERIES = {"en": DEMO_QUERY, "zh": "分层记忆"}


def cmd_demo(args: argparse.Namespace) -> int:
    from ..sample import SAMPLE_AS_OF, open_sample_store

    query = DEMO_QUERIES[args.lang]
    kept = contextlib.nullcontext(args.root)
    with kept if args.root else tempfile.TemporaryDirectory(prefix="memlib-demo-") as root:
        store = open_sample_store(root, lang=args.lang)
        result = RecallEngine(store).recall(
            query, limit=args.limit, as_of=SAMPLE_AS_OF, query_id=DEMO_QUERY_ID
        )
        write_line("# Session start: the latest profile snapshot")
        write_line(render_remote_profile(store.latest_profile()), "xml")
        write_line("")
        at = format_timestamp(SAMPLE_AS_OF)
        write_line(f"# recall_history({query!r}, limit={args.limit}) at {at}")
        write_line(result.to_json(), "json")
        write_line("")
        write_line("# Rendered context for the prompt")
        write_line(render_recall_context(result) or "(no hits: nothing is injected)", "xml")
    return 0


def register(subparsers: Any) -> None:
    demo = subparsers.add_parser(
        "demo", help="offline demo on the sample corpus (same output every run)"
    )
    demo.add_argument("--limit", type=limit_arg, default=5)
    demo.add_argument(
        "--lang",
        choices=tuple(DEMO_QUERIES),
        default="en",
        help="language of the sample corpus and query: en (default) or zh (Chinese, "
        "query 分层记忆)",
    )
    demo.add_argument(
        "--root", help="keep the demo store in this folder instead of a temporary one"
    )
    demo.set_defaults(func=cmd_demo)
