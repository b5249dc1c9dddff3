"""Where a test's stores live on each backend, and how to open another object there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlib import open_store
from memlib.sample import fixed_clock, scope_path

__all__ = ["BACKENDS", "Location", "location"]

BACKENDS = ("jsonl", "sqlite", "postgresql")


class Location:
    """One test's place on one backend: ``location(user_id, **options)`` opens a new store
    object there (the same file, database or schema each time); closed after the test."""

    def __init__(self, backend: str, tmp_path: Path, url: str | None) -> None:
        self.backend = backend
        self.tmp_path = tmp_path
        self.url = url
        self.opened: list[Any] = []

    def url_for(self, user_id: str = "alice") -> str:
        if self.backend == "jsonl":
            return f"jsonl:{scope_path(self.tmp_path, user_id)}"
        if self.backend == "sqlite":
            return f"sqlite:{self.tmp_path / 'memory.db'}"
        assert self.url is not None
        return self.url

    def __call__(self, user_id: str = "alice", **options: Any) -> Any:
        options.setdefault("clock", fixed_clock())
        store = open_store(self.url_for(user_id), user_id=user_id, **options)
        self.opened.append(store)
        return store


def location(
    request: pytest.FixtureRequest, tmp_path: Path, kind: type[Location] = Location
) -> Iterator[Any]:
    """The body of a fixture parametrised by backend name."""
    backend = str(request.param)
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    place = kind(backend, tmp_path, url)
    yield place
    for store in place.opened:
        store.close()
