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


# The zh names of what the graders ask for (``as_text(answer, "the query")``); a name not
# here that is an identifier (``captured_at``) stays as it is, any other reads as 答案.
_WHAT_ZH = {
    "the answer": "答案",
    "the query": "查询",
    "the stage": "阶段名",
    "the weight": "权重",
    "the attribute value": "属性值",
    "the number of matched terms": "匹配的词项数",
    "the number of candidate records": "候选记录数",
    "the number of HTTP requests": "HTTP 请求数",
}
_SHAPE_ZH = {"a whole number": "整数", "an int": "int 整数", "a number": "数", "a string": "字符串"}


def _what_zh(what: str, zh: str | None) -> str:
    if zh is not None:
        return zh
    if what.isidentifier():
        return what
    return _WHAT_ZH.get(what, "答案")


def shape_error(en: str, zh: str) -> TypeError:
    """A ``TypeError`` for an answer of the wrong shape, in the edition's language: the
    check shows its message as the reason the answer could not be graded."""
    return TypeError(tr(en, zh))


def _wrong_type(
    answer: Any, what: str, shape: str, what_zh: str | None, shape_zh: str
) -> TypeError:
    kind = type(answer).__name__
    return shape_error(
        f"{what} should be {shape}, not {kind}",
        f"{_what_zh(what, what_zh)}应是{shape_zh}，而不是 {kind}",
    )


def as_text(answer: Any, what: str, zh: str | None = None) -> str:
    """``answer`` as a string, or a ``TypeError`` that says which shape was expected
    (``zh``: what ``what`` reads as in the zh edition)."""
    if not isinstance(answer, str):
        raise _wrong_type(answer, what, "a string", zh, "字符串")
    return answer


def as_int(
    answer: Any,
    what: str = "the answer",
    shape: str = "a whole number",
    zh: str | None = None,
    shape_zh: str | None = None,
) -> int:
    """``answer`` as an int (not a bool), or a ``TypeError`` naming the shape expected."""
    if isinstance(answer, bool) or not isinstance(answer, int):
        raise _wrong_type(answer, what, shape, zh, shape_zh or _SHAPE_ZH.get(shape, "整数"))
    return answer


def as_number(answer: Any, what: str = "the answer", zh: str | None = None) -> float:
    """``answer`` as an int or a float (not a bool), or a ``TypeError``."""
    if isinstance(answer, bool) or not isinstance(answer, int | float):
        raise _wrong_type(answer, what, "a number", zh, "数")
    return float(answer)


def as_function(answer: Any, takes: str, takes_zh: str) -> Callable[..., Any]:
    """``answer`` when it is a function, or a ``TypeError`` saying what it should take."""
    if not callable(answer):
        raise shape_error(
            f"the answer should be a function that {takes}", f"答案应是一个函数：它{takes_zh}"
        )
    function: Callable[..., Any] = answer
    return function


def missing_keys(answer: Any, keys: tuple[str, ...]) -> Verdict | None:
    """``answer`` must be a dict (a ``TypeError``); a ``wrong`` naming the keys it lacks."""
    if not isinstance(answer, Mapping):
        raise shape_error(
            "the answer should be a dict with the keys " + ", ".join(keys),
            "答案应是一个 dict，包含这些键：" + ", ".join(keys),
        )
    missing = [key for key in keys if key not in answer]
    if missing:
        return wrong(
            f"the answer needs the keys {', '.join(keys)}; missing: {', '.join(missing)}",
            zh=f"答案需要这些键：{', '.join(keys)}；缺少：{', '.join(missing)}",
        )
    return None
