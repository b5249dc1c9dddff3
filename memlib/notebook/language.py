"""The language of the course's own words: exercise feedback, plot labels, widget status.

The English edition never calls :func:`use_language`; the build of another edition adds
``use_language("zh")`` to the top of each notebook's setup cell, so the same code cells
speak the learner's language. Field names of the contract (``memory_id`` …) and the
library's own error messages stay as they are in every edition: learners type the first
and search for the second.
"""

from __future__ import annotations

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


def tr(en: str, zh: str | None = None) -> str:
    """``zh`` in the zh edition when there is one, else ``en``."""
    return zh if _current == "zh" and zh is not None else en
