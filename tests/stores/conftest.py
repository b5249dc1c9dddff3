"""Fixtures shared by the store tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store URL on each SQL backend (PostgreSQL: the module's ``pg_url``)."""
    if request.param == "sqlite":
        yield f"sqlite:{tmp_path / 'memlib.sqlite'}"
    else:
        yield request.getfixturevalue("pg_url")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A private (0700) folder for a store's files."""
    made = tmp_path / "st"
    made.mkdir(mode=0o700)
    return made
