"""``memlib db init`` / ``memlib db status``: the schema of a database store (SQLite files
are also created and upgraded on first write; JSONL stores have no schema).
"""

from __future__ import annotations

import argparse
from typing import Any

from .._runtime import default_store_url, default_user_id
from ._common import write_line


def _url(args: argparse.Namespace) -> str:
    return args.store or default_store_url(args.user or default_user_id())


def cmd_db_init(args: argparse.Namespace) -> int:
    from ..stores._admin import init_store_schema

    what, before, after = init_store_schema(_url(args))
    if before == after:
        write_line(f"{what}: schema version {after}, nothing to do")
    elif before == 0:
        write_line(f"{what}: created schema version {after}")
    else:
        write_line(f"{what}: upgraded schema from version {before} to {after}")
    return 0


def cmd_db_status(args: argparse.Namespace) -> int:
    from ..stores._admin import store_schema_version

    what, version = store_schema_version(_url(args))
    write_line(f"{what}: schema version {version}" if version else f"{what}: no schema")
    return 0


def register(subparsers: Any) -> None:
    db = subparsers.add_parser("db", help="schema of a database store (--store URL)")
    db_sub = db.add_subparsers(dest="db_command", metavar="DB_COMMAND", parser_class=type(db))
    db_sub.required = True
    init = db_sub.add_parser("init", help="create or upgrade memlib's schema (idempotent)")
    init.set_defaults(func=cmd_db_init)
    status = db_sub.add_parser("status", help="print the schema version")
    status.set_defaults(func=cmd_db_status)
