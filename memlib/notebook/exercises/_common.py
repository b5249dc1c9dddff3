"""What graders share: the sample store, built once per process in a folder of its own.

Graders compute the expected answer from the library over this store, so a check
agrees with what the notebook shows without the notebook's variables being passed in.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from ...normalize import normalize_recall_query
from ...sample import SAMPLE_AS_OF, open_sample_store
from ...stores._base import MemoryStore
from .._common import ANY_SCOPE
from ..language import tr
from . import Verdict, wrong


def private_folder(prefix: str = "memlib-grader-") -> str:
    """A new temporary folder, removed when the process exits."""
    root = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, root, True)
    return root


@functools.cache
def sample_store() -> MemoryStore:
    """The sample corpus in a private temporary folder, removed when the process exits."""
    return open_sample_store(private_folder())


def terms_of(text: str) -> tuple[str, ...]:
    """The terms the baseline pipeline cuts ``text`` into."""
    return normalize_recall_query(
        text, user_scope=ANY_SCOPE, query_id="grader", issued_at=SAMPLE_AS_OF
    ).terms


def shape_error(message: str, /, **fields: Any) -> TypeError:
    """A ``TypeError`` for an answer of the wrong shape, in the edition's language (``tr``):
    the check shows its message as the reason the answer could not be graded."""
    return TypeError(tr(message, **fields))


def _wrong_type(answer: Any, what: str, shape: str) -> TypeError:
    # A name the learner types (``captured_at``) reads the same in every edition.
    return shape_error(
        "{what} should be {shape}, not {kind}",
        what=what if what.isidentifier() else tr(what),
        shape=tr(shape),
        kind=type(answer).__name__,
    )


def as_text(answer: Any, what: str) -> str:
    """``answer`` as a string, or a ``TypeError`` that says which shape was expected."""
    if not isinstance(answer, str):
        raise _wrong_type(answer, what, "a string")
    return answer


def as_int(answer: Any, what: str = "the answer", shape: str = "a whole number") -> int:
    """``answer`` as an int (not a bool), or a ``TypeError`` naming the shape expected."""
    if isinstance(answer, bool) or not isinstance(answer, int):
        raise _wrong_type(answer, what, shape)
    return answer


def as_number(answer: Any, what: str = "the answer") -> float:
    """``answer`` as an int or a float (not a bool), or a ``TypeError``."""
    if isinstance(answer, bool) or not isinstance(answer, int | float):
        raise _wrong_type(answer, what, "a number")
    return float(answer)


def as_function(answer: Any, takes: str) -> Callable[..., Any]:
    """``answer`` when it is a function, or a ``TypeError`` saying what it should take."""
    if not callable(answer):
        raise shape_error("the answer should be a function that {takes}", takes=tr(takes))
    function: Callable[..., Any] = answer
    return function


def missing_keys(answer: Any, keys: tuple[str, ...]) -> Verdict | None:
    """``answer`` must be a dict (a ``TypeError``); a ``wrong`` naming the keys it lacks."""
    if not isinstance(answer, Mapping):
        raise shape_error("the answer should be a dict with the keys {keys}", keys=", ".join(keys))
    missing = [key for key in keys if key not in answer]
    if missing:
        return wrong(
            "the answer needs the keys {keys}; missing: {missing}",
            keys=", ".join(keys),
            missing=", ".join(missing),
        )
    return None
