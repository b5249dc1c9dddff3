"""``memlib supersede OLD_ID --memory-id NEW --content … --reason …``: replace a record, as
one atomic batch; the old record stays in the history (``recall --known-at``).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..records import MemoryKind
from ._common import add_project_options, cli_source, open_cli_store, write_json


def cmd_supersede(args: argparse.Namespace) -> int:
    store = open_cli_store(args)
    source = cli_source(args, args.source_type, args.title or f"Supersedes {args.old_id}")
    new, retraction = store.supersede(
        args.old_id,
        {
            "kind": args.kind,
            "memory_id": args.memory_id,
            "content": args.content,
            "summary": args.summary or args.content,
            "source": source,
        },
        reason=args.reason,
    )
    for record in (new, retraction):
        write_json(record.to_dict())
    return 0


def register(subparsers: Any) -> None:
    supersede = subparsers.add_parser(
        "supersede", help="replace a record by a new one, keeping the old in the history"
    )
    supersede.add_argument("old_id", metavar="OLD_ID")
    supersede.add_argument("--memory-id", required=True, help="the new record's id")
    supersede.add_argument("--content", required=True)
    supersede.add_argument("--summary", help="(default: the content)")
    supersede.add_argument("--reason", required=True, help="why the old record is replaced")
    supersede.add_argument(
        "--kind",
        default=MemoryKind.CONVERSATION.value,
        choices=[MemoryKind.CONVERSATION.value, MemoryKind.PROFILE.value],
        help="the old record's kind (default: conversation)",
    )
    supersede.add_argument("--source-id", default="cli")
    supersede.add_argument("--source-type", default="conversation_transcript")
    supersede.add_argument("--title")
    supersede.add_argument("--captured-at", help="ISO-8601 (default: now, UTC)")
    add_project_options(supersede)
    supersede.set_defaults(func=cmd_supersede)
