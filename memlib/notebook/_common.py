"""What every helper module shares: the fixed query id, and pandas / pyplot on first use.

pandas and matplotlib are imported inside these functions, never at module level, so
``import memlib.notebook`` (and any of its modules) stays as light as ``import memlib``.
"""

from __future__ import annotations

from typing import Any

# Every recall and query a helper builds carries this id, so outputs never vary with it.
QUERY_ID = "nb-query"
# Normalizing text needs a user scope; the terms it yields do not depend on which one.
ANY_SCOPE = "0" * 16


def pandas() -> Any:
    import pandas

    return pandas


def pyplot() -> Any:
    """pyplot, with the "Glyph … missing from font" warning silenced.

    The default fonts have no Han or kana glyphs: a CJK label is drawn as boxes, and
    the warning (raised when the figure is drawn, after the helper returned) would
    otherwise land in a cell's output or an explorer's Output widget.
    """
    import warnings

    import matplotlib.pyplot as plt

    warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font")
    return plt


def write_notebook(path: Any, notebook: dict[str, Any]) -> None:
    """Write a notebook as nbformat does (keys sorted, indent 1, UTF-8 as it is), so a
    file this package writes and one Jupyter saves differ only where the content does."""
    import json
    from pathlib import Path

    text = json.dumps(notebook, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    Path(path).write_text(text, encoding="utf-8")
