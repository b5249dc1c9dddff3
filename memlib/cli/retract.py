"""``memlib retract MEMORY_ID --reason TEXT``: append a RETRACTION record."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import add_project_options, cli_source, open_cli_store, write_json


def cmd_retract(args: argparse.Namespace) -> int:
    store = open_cli_store(args)
    source = cli_source(args, "manual_retraction", f"Retraction of {args.memory_id}")
    record = store.retract(args.memory_id, reason=args.reason, source=source)
    write_json(record.to_dict())
    return 0


def register(subparsers: Any) -> None:
    retract = subparsers.add_parser("retract", help="retract a record (appends a RETRACTION)")
    retract.add_argument("memory_id")
    retract.add_argument("--reason", required=True)
    retract.add_argument("--source-id", default="cli")
    retract.add_argument("--captured-at")
    add_project_options(retract)
    retract.set_defaults(func=cmd_retract)
