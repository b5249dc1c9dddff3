"""``memlib db init`` / ``memlib db status``: the schema of a database store.

``memlib --store postgresql://…/db?schema=memlib db init`` creates memlib's schema, or
upgrades an older one, and records its version; running it again changes nothing.
SQLite files are created and upgraded on first write as well, so ``db init`` there only
saves the first writer the work. JSONL stores have no schema.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import RemoteMemoryValidationError

__all__ = ["init_store_schema", "register", "store_schema_version"]


def _url(args: argparse.Namespace) -> str:
    from ..runtime import default_store_url, default_user_id

    return args.store or default_store_url(args.user or default_user_id())


def _scheme(url: str) -> str:
    scheme, sep, _ = url.partition(":")
    if not sep:
        raise RemoteMemoryValidationError(f"store URL must start with a scheme: {url!r}")
    return scheme.lower()


def init_store_schema(url: str) -> tuple[str, int, int]:
    """``(description, version before, version after)`` for the store at ``url``."""
    scheme = _scheme(url)
    if scheme in ("postgresql", "postgres"):
        from .postgres import DEFAULT_SCHEMA, init_schema, split_url

        before, after = init_schema(url)
        return f"PostgreSQL schema {split_url(url)[1] or DEFAULT_SCHEMA}", before, after
    if scheme == "sqlite":
        from .sqlite import SqliteMemoryStore
        from .sqlite import _version as sqlite_version

        store = SqliteMemoryStore(url, user_id="memlib-db-init")
        try:
            conn = store._connect(create=False)
            before = 0 if conn is None else sqlite_version(conn)
            store.close()
            conn = store._connect(create=True)
            assert conn is not None
            return "SQLite store", before, sqlite_version(conn)
        finally:
            store.close()
    if scheme == "jsonl":
        return "JSONL store (no schema)", 0, 0
    raise RemoteMemoryValidationError(f"unknown store scheme {scheme!r}")


def store_schema_version(url: str) -> tuple[str, int]:
    scheme = _scheme(url)
    if scheme in ("postgresql", "postgres"):
        from .postgres import DEFAULT_SCHEMA, _connect, _pg_error, _psycopg, _version, split_url

        dsn, schema = split_url(url)
        name = schema or DEFAULT_SCHEMA
        conn = _connect(dsn, 10)
        try:
            return f"PostgreSQL schema {name}", _version(conn, name)
        except _psycopg().Error as exc:
            raise _pg_error(exc, f"cannot read PostgreSQL schema {name}") from None
        finally:
            conn.close()
    if scheme == "sqlite":
        from .sqlite import SqliteMemoryStore
        from .sqlite import _version as sqlite_version

        store = SqliteMemoryStore(url, user_id="memlib-db-status")
        try:
            conn = store._connect(create=False)
            return "SQLite store", 0 if conn is None else sqlite_version(conn)
        finally:
            store.close()
    if scheme == "jsonl":
        return "JSONL store (no schema)", 0
    raise RemoteMemoryValidationError(f"unknown store scheme {scheme!r}")


def cmd_db_init(args: argparse.Namespace) -> int:
    what, before, after = init_store_schema(_url(args))
    if before == after:
        sys.stdout.write(f"{what}: schema version {after}, nothing to do\n")
    elif before == 0:
        sys.stdout.write(f"{what}: created schema version {after}\n")
    else:
        sys.stdout.write(f"{what}: upgraded schema from version {before} to {after}\n")
    return 0


def cmd_db_status(args: argparse.Namespace) -> int:
    what, version = store_schema_version(_url(args))
    sys.stdout.write(f"{what}: schema version {version}\n" if version else f"{what}: no schema\n")
    return 0


def register(subparsers: Any) -> None:
    db = subparsers.add_parser("db", help="schema of a database store (--store URL)")
    db_sub = db.add_subparsers(dest="db_command", metavar="DB_COMMAND", parser_class=type(db))
    db_sub.required = True
    init = db_sub.add_parser("init", help="create or upgrade memlib's schema (idempotent)")
    init.set_defaults(func=cmd_db_init)
    status = db_sub.add_parser("status", help="print the schema version")
    status.set_defaults(func=cmd_db_status)
