"""What graders share: the sample store, built once per process in a folder of its own.

Graders compute the expected answer from the library over this store, so a check
agrees with what the notebook shows without the notebook's variables being passed in.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any

from ...normalize import normalize_recall_query
from ...sample import SAMPLE_AS_OF, open_sample_store
from ...stores._base import MemoryStore
from .._common import ANY_SCOPE
from . import Verdict, wrong


@functools.cache
def sample_store() -> MemoryStore:
    """The sample corpus in a private temporary folder, removed when the process exits."""
    root = tempfile.mkdtemp(prefix="memlib-grader-")
    atexit.register(shutil.rmtree, root, True)
    return open_sample_store(root)


def terms_of(text: str) -> tuple[str, ...]:
    """The terms the baseline pipeline cuts ``text`` into."""
    return normalize_recall_query(
        text, user_scope=ANY_SCOPE, query_id="grader", issued_at=SAMPLE_AS_OF
    ).terms


def as_text(answer: Any, what: str) -> str:
    """``answer`` as a string, or a ``TypeError`` that says which shape was expected."""
    if not isinstance(answer, str):
        raise TypeError(f"{what} should be a string, not {type(answer).__name__}")
    return answer


def as_int(answer: Any, what: str = "the answer", shape: str = "a whole number") -> int:
    """``answer`` as an int (not a bool), or a ``TypeError`` naming the shape expected."""
    if isinstance(answer, bool) or not isinstance(answer, int):
        raise TypeError(f"{what} should be {shape}, not {type(answer).__name__}")
    return answer


def as_number(answer: Any, what: str = "the answer") -> float:
    """``answer`` as an int or a float (not a bool), or a ``TypeError``."""
    if isinstance(answer, bool) or not isinstance(answer, int | float):
        raise TypeError(f"{what} should be a number, not {type(answer).__name__}")
    return float(answer)


def missing_keys(answer: Any, keys: tuple[str, ...]) -> Verdict | None:
    """``answer`` must be a dict (a ``TypeError``); a ``wrong`` naming the keys it lacks."""
    if not isinstance(answer, Mapping):
        raise TypeError("the answer should be a dict with the keys " + ", ".join(keys))
    missing = [key for key in keys if key not in answer]
    if missing:
        return wrong(
            f"the answer needs the keys {', '.join(keys)}; missing: {', '.join(missing)}",
            zh=f"答案需要这些键：{', '.join(keys)}；缺少：{', '.join(missing)}",
        )
    return None
