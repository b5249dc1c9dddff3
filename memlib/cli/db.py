"""``memlib db init`` / ``memlib db status``: the schema of a database store (SQLite files
are also created and upgraded on first write; JSONL stores have no schema). On PostgreSQL
both say where dense search runs: with pgvector in the database, or in the client.
"""

from __future__ import annotations

import argparse
from typing import Any

from .._runtime import default_store_url, default_user_id
from ..errors import RemoteMemoryValidationError
from ._common import write_line


def _url(args: argparse.Namespace) -> str:
    return args.store or default_store_url(args.user or default_user_id())


def _postgres(url: str) -> Any:
    """The PostgreSQL store at ``url``; None for another backend."""
    if not url.lower().startswith(("postgresql:", "postgres:")):
        return None
    from ..stores.sql._postgres import PostgresMemoryStore

    return PostgresMemoryStore(url, user_id="memlib-db")


def cmd_db_init(args: argparse.Namespace) -> int:
    from ..stores._admin import init_store_schema

    url = _url(args)
    postgres = _postgres(url)
    if args.hnsw and postgres is None:
        raise RemoteMemoryValidationError("--hnsw is for PostgreSQL stores (pgvector)")
    what, before, after = init_store_schema(url)
    if before == after:
        write_line(f"{what}: schema version {after}, nothing to do")
    elif before == 0:
        write_line(f"{what}: created schema version {after}")
    else:
        write_line(f"{what}: upgraded schema from version {before} to {after}")
    if args.hnsw:
        dimensions = postgres.build_hnsw()
        if not dimensions:
            write_line("HNSW: no vectors yet; run `db init --hnsw` again once they are stored")
    if postgres is not None:
        line, offered = postgres.describe_dense_search()
        if offered:  # else nothing new to say: the client searches, as before pgvector
            write_line(f"dense search: {line}")
    return 0


def cmd_db_status(args: argparse.Namespace) -> int:
    from ..stores._admin import store_schema_version

    url = _url(args)
    what, version = store_schema_version(url)
    write_line(f"{what}: schema version {version}" if version else f"{what}: no schema")
    postgres = _postgres(url)
    if version and postgres is not None:
        write_line(f"dense search: {postgres.describe_dense_search()[0]}")
    return 0


def register(subparsers: Any) -> None:
    db = subparsers.add_parser("db", help="schema of a database store (--store URL)")
    db_sub = db.add_subparsers(dest="db_command", metavar="DB_COMMAND", parser_class=type(db))
    db_sub.required = True
    init = db_sub.add_parser("init", help="create or upgrade memlib's schema (idempotent)")
    init.add_argument(
        "--hnsw",
        action="store_true",
        help="PostgreSQL with pgvector: index the stored vectors with HNSW (approximate search)",
    )
    init.set_defaults(func=cmd_db_init)
    status = db_sub.add_parser("status", help="print the schema version and the dense search")
    status.set_defaults(func=cmd_db_status)
