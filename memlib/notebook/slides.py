"""RISE slide metadata from each notebook's own outline: the title and each ``## `` open a
slide, each ``### `` a sub-slide, the setup cell (the first code cell) is skipped.
"""

from __future__ import annotations

import copy
from typing import Any

from ._common import cell_source


def slide_type(cell: dict[str, Any], index: int, first_code: int) -> str | None:
    """The RISE slide type of a cell, or None for "under the current slide"."""
    text = cell_source(cell)
    if index == 0:
        return "slide"
    if index == first_code:
        return "skip"
    if cell["cell_type"] == "markdown":
        if text.startswith("## "):
            return "slide"
        if text.startswith("### "):
            return "subslide"
    return None


def with_slides(notebook: dict[str, Any]) -> dict[str, Any]:
    """``notebook`` with each cell's ``slideshow`` metadata set by the rule above."""
    out = copy.deepcopy(notebook)
    cells = out["cells"]
    first_code = next((i for i, c in enumerate(cells) if c["cell_type"] == "code"), -1)
    for index, cell in enumerate(cells):
        metadata = cell.setdefault("metadata", {})
        kind = slide_type(cell, index, first_code)
        if kind is None:
            metadata.pop("slideshow", None)
        else:
            metadata["slideshow"] = {"slide_type": kind}
    return out
