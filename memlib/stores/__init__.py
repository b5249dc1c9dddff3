"""Storage backends behind one ``MemoryStore`` protocol, opened by URL; a backend's
module is imported only when its scheme is opened (``import memlib`` loads no driver)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import RemoteMemoryValidationError
from ._base import BaseMemoryStore, IdLookup, MemoryStore, TopScanning
from ._projects import all_projects_of
from .jsonl._store import RemoteMemoryStore

__all__ = [
    "BaseMemoryStore",
    "IdLookup",
    "MemoryStore",
    "RemoteMemoryStore",
    "TopScanning",
    "all_projects_of",
    "open_store",
]

# scheme → "module:factory"; the factory takes (url, user_id=..., **options).
_BACKENDS: dict[str, str] = {
    "jsonl": "memlib.stores.jsonl._store:RemoteMemoryStore",
    "sqlite": "memlib.stores.sql._sqlite:SqliteMemoryStore",
    "postgresql": "memlib.stores.sql._postgres:PostgresMemoryStore",
    "postgres": "memlib.stores.sql._postgres:PostgresMemoryStore",
}


def open_store(url: str | Path, *, user_id: str, **options: Any) -> MemoryStore:
    """``open_store("jsonl:PATH" | "sqlite:PATH" | "postgresql://…", user_id=...)``;
    ``project="NAME"``: that project of the user only (docs/contract.md, "Projects")."""
    if isinstance(url, Path):
        url = f"jsonl:{url}"
    scheme, sep, rest = url.partition(":")
    if not sep or not scheme:
        raise RemoteMemoryValidationError(
            f"store URL must start with one of {', '.join(sorted(_BACKENDS))}: {url!r}"
        )
    scheme = scheme.lower()
    target = _BACKENDS.get(scheme)
    if target is None:
        raise RemoteMemoryValidationError(
            f"unknown store scheme {scheme!r}; known: {', '.join(sorted(_BACKENDS))}"
        )
    module_name, _, factory_name = target.partition(":")
    factory: Callable[..., MemoryStore] = getattr(
        importlib.import_module(module_name), factory_name
    )
    if scheme == "jsonl" and not rest:
        raise RemoteMemoryValidationError("jsonl store URL needs a path: jsonl:PATH")
    return factory(rest if scheme == "jsonl" else url, user_id=user_id, **options)
