"""The schema of a database store, by URL: what ``memlib db init`` / ``db status`` do.

``init_store_schema("postgresql://…/db?schema=memlib")`` creates memlib's schema, or
upgrades an older one, and records its version; running it again changes nothing.
SQLite files are created and upgraded on first write as well, so initialising one only
saves the first writer the work. JSONL stores have no schema. The command line is
``memlib.cli.db``.
"""

from __future__ import annotations

from ..errors import RemoteMemoryValidationError
from .sql._common import SqlMemoryStore

__all__ = ["init_store_schema", "store_schema_version"]

_NO_SCHEMA = "JSONL store (no schema)"


def _sql_store(url: str, user_id: str) -> SqlMemoryStore | None:
    """The SQL store at ``url``; None for a JSONL one."""
    scheme, sep, _ = url.partition(":")
    if not sep:
        raise RemoteMemoryValidationError(f"store URL must start with a scheme: {url!r}")
    scheme = scheme.lower()
    if scheme in ("postgresql", "postgres"):
        from .sql._postgres import PostgresMemoryStore

        return PostgresMemoryStore(url, user_id=user_id)
    if scheme == "sqlite":
        from .sql._sqlite import SqliteMemoryStore

        return SqliteMemoryStore(url, user_id=user_id)
    if scheme == "jsonl":
        return None
    raise RemoteMemoryValidationError(f"unknown store scheme {scheme!r}")


def init_store_schema(url: str) -> tuple[str, int, int]:
    """``(description, version before, version after)`` for the store at ``url``."""
    store = _sql_store(url, "memlib-db-init")
    if store is None:
        return _NO_SCHEMA, 0, 0
    try:
        before, after = store.init_schema()
        return store.schema_label, before, after
    finally:
        store.close()


def store_schema_version(url: str) -> tuple[str, int]:
    """``(description, schema version)``; version 0: no schema yet."""
    store = _sql_store(url, "memlib-db-status")
    if store is None:
        return _NO_SCHEMA, 0
    try:
        return store.schema_label, store.schema_version()
    finally:
        store.close()
