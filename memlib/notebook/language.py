"""The language of the course's own words: exercise feedback, plot labels, widget status.

The English edition never calls :func:`use_language`; the build of another edition adds
``use_language("zh")`` to the top of each notebook's setup cell, so the same code cells
speak the learner's language. Field names of the contract (``memory_id`` …) and the
library's own error messages stay as they are in every edition: learners type the first
and search for the second.
"""

from __future__ import annotations

import functools
import json
from importlib.resources import files
from typing import Any

LANGUAGES = ("en", "zh")
_current = "en"


def use_language(lang: str) -> None:
    """Speak ``lang`` from now on, in this process."""
    global _current
    if lang not in LANGUAGES:
        raise ValueError(f"no language {lang!r}; the course has {', '.join(LANGUAGES)}")
    _current = lang


def language() -> str:
    return _current


@functools.cache
def _zh_catalog() -> dict[str, str]:
    """The zh texts of the exercises, keyed by their English template (gettext style)."""
    text = files("memlib").joinpath("data/zh-feedback.json").read_text(encoding="utf-8")
    catalog: dict[str, str] = json.loads(text)
    return catalog


def tr(en: str, zh: str | None = None, /, **fields: Any) -> str:
    """``en`` in the English edition; in the zh edition ``zh``, or when there is none, the
    catalog's text for ``en`` (``en`` itself if it has none). ``fields`` fill the
    template's ``{name}`` slots."""
    text = en
    if _current == "zh":
        text = zh if zh is not None else _zh_catalog().get(en, en)
    return text.format(**fields) if fields else text
