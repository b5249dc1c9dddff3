"""Rankers by name. A new ranker is one module plus one line in ``_RANKERS``."""

from __future__ import annotations

import importlib

from ..errors import RemoteMemoryValidationError
from .base import Ranker

__all__ = ["Ranker", "get_ranker", "ranker_names", "DEFAULT_RANKER"]

DEFAULT_RANKER = "baseline"

# name → "module:class"; imported on first use so optional dependencies stay optional.
_RANKERS: dict[str, str] = {
    "baseline": "memlib.rankers.baseline:BaselineRanker",
    "bm25": "memlib.rankers.bm25:Bm25Ranker",
    "bm25+stopwords": "memlib.rankers.bm25:Bm25StopwordsRanker",
    "hybrid": "memlib.rankers.hybrid:HybridRanker",
}


def ranker_names() -> tuple[str, ...]:
    return tuple(_RANKERS)


def get_ranker(name: str | Ranker = DEFAULT_RANKER) -> Ranker:
    if not isinstance(name, str):
        if not callable(getattr(name, "score_candidates", None)):
            raise RemoteMemoryValidationError(
                f"ranker must be a name or a Ranker, not {type(name).__name__}"
            )
        return name
    target = _RANKERS.get(name)
    if target is None:
        raise RemoteMemoryValidationError(f"unknown ranker {name!r}; known: {', '.join(_RANKERS)}")
    module_name, _, class_name = target.partition(":")
    ranker: Ranker = getattr(importlib.import_module(module_name), class_name)()
    return ranker
