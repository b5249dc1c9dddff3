"""A progress bar on stderr when tqdm is installed (the notebook extra), else none.

A missing tqdm only costs the bar: the work and everything it prints are the same."""

from __future__ import annotations

import sys
from typing import Any


class _NoBar:
    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int = 1) -> None:
        return None


def progress_bar(total: int | None, desc: str, *, enabled: bool, unit: str, **options: Any) -> Any:
    """A context manager with ``update(n)``: tqdm on stderr, or a silent stand-in."""
    if not enabled:
        return _NoBar()
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, **options)
