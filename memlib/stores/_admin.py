"""What ``memlib db init`` / ``db status`` do (``memlib.cli.db``), by store URL."""

from __future__ import annotations

from contextlib import closing

from ..errors import RemoteMemoryValidationError
from . import _BACKENDS, open_store
from .sql._common import SqlMemoryStore

_NO_SCHEMA = "JSONL store (no schema)"


def _sql_store(url: str, user_id: str) -> SqlMemoryStore | None:
    """The SQL store at ``url``; None for a JSONL one."""
    scheme, sep, _ = url.partition(":")
    if not sep:
        raise RemoteMemoryValidationError(f"store URL must start with a scheme: {url!r}")
    scheme = scheme.lower()
    if scheme == "jsonl":
        return None
    if scheme not in _BACKENDS:
        raise RemoteMemoryValidationError(f"unknown store scheme {scheme!r}")
    store = open_store(url, user_id=user_id)
    assert isinstance(store, SqlMemoryStore)
    return store


def init_store_schema(url: str) -> tuple[str, int, int]:
    """``(description, version before, version after)`` for the store at ``url``."""
    store = _sql_store(url, "memlib-db-init")
    if store is None:
        return _NO_SCHEMA, 0, 0
    with closing(store):
        return store.schema_label, *store.init_schema()


def store_schema_version(url: str) -> tuple[str, int]:
    """``(description, schema version)``; version 0: no schema yet."""
    store = _sql_store(url, "memlib-db-status")
    if store is None:
        return _NO_SCHEMA, 0
    with closing(store):
        return store.schema_label, store.schema_version()
