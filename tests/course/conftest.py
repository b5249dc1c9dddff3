"""Fixtures the course tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memlib.notebook.language import use_language


@pytest.fixture
def zh() -> Iterator[None]:
    """The zh edition's language for one test, English again after it."""
    use_language("zh")
    try:
        yield
    finally:
        use_language("en")
