"""Slide metadata, so each notebook presents as slides in RISE for JupyterLab.

The rule is the notebook's own outline, so nobody tags cells by hand and a new section
is a new slide: the title cell and every ``## `` section open a slide, every ``### ``
subsection a sub-slide, and the setup cell (the first code cell: imports and a
temporary store) is skipped. Every other cell follows the slide it is under.

    python -m memlib.notebook slides          # (re)write the metadata of every notebook

A test checks that every committed notebook already carries exactly this metadata.
"""

from __future__ import annotations

import copy
from typing import Any

from ._common import cell_source

__all__ = ["slide_type", "with_slides"]


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
