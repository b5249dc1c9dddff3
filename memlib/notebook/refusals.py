"""Refusals as tables, so a notebook shows errors, not tracebacks: only
``RemoteMemoryError`` is caught; anything else is a bug and should be seen.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import RemoteMemoryError
from ..normalize import normalize_recall_query
from ..sample import SAMPLE_AS_OF
from ..stores._base import MemoryStore
from ._common import ANY_SCOPE, QUERY_ID, pandas
from .language import tr
from .views import recall

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def redact(text: str, *roots: str | os.PathLike[str], shown: str = "<tmp>") -> str:
    """``text`` with each root folder (and its resolved form) shown as ``shown``."""
    for root in roots:
        for form in {str(root), str(Path(root).resolve())}:
            text = text.replace(form, shown)
    return text


def capture(action: Callable[[], Any], *roots: str | os.PathLike[str]) -> dict[str, str]:
    """The memlib error ``action`` raised (paths redacted), or what it returned (in the
    edition's language: the library's own messages stay as they are)."""
    try:
        value = action()
    except RemoteMemoryError as exc:
        return {"error_type": type(exc).__name__, "message": redact(str(exc), *roots)}
    if isinstance(value, (tuple, list)):
        returned = tr(f"returned {len(value)} item(s)", f"返回了 {len(value)} 项")
    else:
        returned = tr(f"returned {type(value).__name__}", f"返回了 {type(value).__name__}")
    return {"error_type": tr("(no error)", "（无错误）"), "message": returned}


def error_table(
    cases: Mapping[str, Callable[[], Any]], *roots: str | os.PathLike[str]
) -> pd.DataFrame:
    """case → error type → message, one row per case; no traceback, no path."""
    rows = [{"case": name, **capture(action, *roots)} for name, action in cases.items()]
    return pandas().DataFrame(rows, columns=["case", "error_type", "message"])


def refusals_frame(attempts: Mapping[str, Callable[[], Any]]) -> pd.DataFrame:
    """Run each attempt; one row each with the typed error it raised, or "accepted"."""
    rows = []
    for label, attempt in attempts.items():
        try:
            attempt()
        except RemoteMemoryError as exc:
            rows.append({"attempt": label, "outcome": type(exc).__name__, "message": str(exc)})
        else:
            rows.append({"attempt": label, "outcome": "accepted", "message": ""})
    return pandas().DataFrame(rows, columns=["attempt", "outcome", "message"])


def query_checks_frame(cases: Sequence[tuple[Any, Any]]) -> pd.DataFrame:
    """``(text, limit)`` pairs (shown as literals) through ``normalize_recall_query``."""
    rows = []
    for text, limit in cases:
        try:
            q = normalize_recall_query(
                text, user_scope=ANY_SCOPE, limit=limit, query_id=QUERY_ID, issued_at=SAMPLE_AS_OF
            )
            outcome = {"accepted": True, "terms": ", ".join(q.terms), "error": ""}
        except RemoteMemoryError as exc:
            outcome = {"accepted": False, "terms": "", "error": str(exc)}
        rows.append({"text": repr(text), "limit": repr(limit), **outcome})
    return pandas().DataFrame(rows, columns=["text", "limit", "accepted", "terms", "error"])


def query_check_view(store: MemoryStore, query: str, as_of: datetime, limit: int) -> pd.DataFrame:
    """A view: what a recall with these arguments gives — its hits, or the error — as one row."""
    outcome = capture(lambda: recall(store, query, as_of, limit).hits)
    return pandas().DataFrame([{"query": query, "limit": limit, **outcome}])
