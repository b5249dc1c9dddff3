"""RISE slides from each notebook's own outline: the title and every ``## `` heading open a
slide, every ``### `` heading a sub-slide, the setup cell (the first code cell) is skipped.
RISE's slide type belongs to a cell, so a markdown cell with a heading in its middle is split
in two there (ids ``<id>-2``, ``<id>-3``, …), and :func:`split_catalog` splits the sections
of an edition's catalog alike, so the edition builds as before.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ._common import cell_source

# The notebook's RISE settings (metadata "rise", read over the user's RISE settings).
RISE: dict[str, Any] = {
    "width": "100%",  # the window's size: reveal.js then never scales a slide down, and a
    "height": "100%",  # frame wider than the window scrolls inside its output area
    "scroll": True,  # a slide taller than the window scrolls instead of being cut off
    "center": False,  # top-aligned: a slide does not jump when a cell's output appears
}
# The banner the solution twin inserts after the title (``memlib.notebook.solutions``).
_SOLUTIONS_BANNER = "solutions-banner"
_HEADING = re.compile(r"^(##|###) \S", re.M)
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_BLANK_END = re.compile(r"(?:\n[ \t]*)+\Z")


def heading_offsets(text: str) -> list[int]:
    """Where each ``## `` / ``### `` heading line of a markdown text starts, but the first
    (a heading that already opens the text, or text before the first heading, stays in the
    cell) — headings inside fenced code are not headings."""
    offsets = []
    fenced = False
    position = 0
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and _HEADING.match(line) and text[:position].strip():
            offsets.append(position)
        position += len(line)
    return offsets


def split_text(text: str) -> list[str]:
    """``text`` cut before each heading :func:`heading_offsets` finds; every part but the
    last without its trailing blank lines (the last is the text's own end)."""
    bounds = [0, *heading_offsets(text), len(text)]
    parts = [text[start:end] for start, end in zip(bounds, bounds[1:], strict=False)]
    return [_BLANK_END.sub("", part) for part in parts[:-1]] + parts[-1:]


def _part_ids(cell_id: str, count: int, taken: set[str]) -> list[str]:
    """``cell_id`` and the ids of the ``count - 1`` cells split off it: ``<id>-2``, …"""
    ids = [cell_id]
    number = 2
    while len(ids) < count:
        candidate = f"{cell_id}-{number}"
        if candidate not in taken:
            ids.append(candidate)
            taken.add(candidate)
        number += 1
    return ids


def _split_cells(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``cells`` with each markdown cell split at its inner headings."""
    if len(cells) > 1 and cells[1].get("id") == _SOLUTIONS_BANNER:
        # A solution twin's banner follows the title cell: the parts split off the title
        # cell follow the banner, where the twin's build (from the split notebook) puts them.
        rest = _split_cells([cells[0], *cells[2:]])
        return [rest[0], cells[1], *rest[1:]]
    taken = {str(c["id"]) for c in cells if "id" in c}
    out: list[dict[str, Any]] = []
    for cell in cells:
        parts = split_text(cell_source(cell)) if cell["cell_type"] == "markdown" else []
        if len(parts) < 2:
            out.append(cell)
            continue
        ids = _part_ids(str(cell.get("id", "")), len(parts), taken)
        for number, (part, part_id) in enumerate(zip(parts, ids, strict=True)):
            piece = copy.deepcopy(cell)
            if number and "id" in cell:
                piece["id"] = part_id
            piece["source"] = part.splitlines(keepends=True)
            out.append(piece)
    return out


def slide_type(cell: dict[str, Any], index: int, first_code: int) -> str | None:
    """The RISE slide type of a cell, or None for "under the current slide"."""
    text = cell_source(cell).lstrip("\n")
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
    """``notebook`` with its markdown cells split at inner headings, each cell's
    ``slideshow`` metadata set by the rule above, and the RISE settings."""
    out = copy.deepcopy(notebook)
    cells = _split_cells(out["cells"])
    out["cells"] = cells
    first_code = next((i for i, c in enumerate(cells) if c["cell_type"] == "code"), -1)
    for index, cell in enumerate(cells):
        metadata = cell.setdefault("metadata", {})
        kind = slide_type(cell, index, first_code)
        if kind is None:
            metadata.pop("slideshow", None)
        else:
            metadata["slideshow"] = {"slide_type": kind}
    out.setdefault("metadata", {})["rise"] = {**out["metadata"].get("rise", {}), **RISE}
    return out


_MARKER = r"^<!-- cell {id} en=(?P<en>[0-9a-f]{{12}}) -->[ \t]*\n"
_NEXT = re.compile(r"^<!-- (?:cell|code) [\w-]+ en=[0-9a-f]{12} -->[ \t]*$", re.M)
# What may have stood between two parts before the split took it away (the hash decides).
_JOINTS = ("\n\n", "\n", "\n\n\n")


def split_catalog(catalog: str, english: Mapping[str, Any], name: str) -> str:
    """``catalog`` (of the English notebook ``english``, before or after :func:`with_slides`)
    with the section of each cell :func:`with_slides` splits split the same way, at the
    translation's own headings, each part marked with its English part's hash. A missing or
    outdated section is left for the build to name; a current one without its English
    cell's headings raises ``ValueError``."""
    from .translate import english_hash, parse_catalog

    sections = parse_catalog(catalog)
    for group in _split_groups(_split_cells(copy.deepcopy(english["cells"])), sections):
        cell_id = str(group[0]["id"])
        english_parts = [cell_source(c) for c in group]
        joined = {
            english_hash(_joined(english_parts, joints))
            for joints in itertools.product(_JOINTS, repeat=len(group) - 1)
        }
        # Also current: a section marked with its first part's hash (updated after the
        # split) that still holds the translation of the rest.
        if sections[cell_id].english not in joined | {english_hash(english_parts[0])}:
            continue  # a translation of an older text: the build says so
        marker = re.search(_MARKER.format(id=re.escape(cell_id)), catalog, re.M)
        if marker is None:
            continue
        following = _NEXT.search(catalog, marker.end())
        end = following.start() if following else len(catalog)
        body = catalog[marker.end() : end]
        kept_end = body[len(body.rstrip("\n")) :]
        translated = split_text(body.strip("\n"))
        if len(translated) != len(group):
            raise ValueError(
                f"{name}: cell {cell_id} splits at {len(group) - 1} heading(s), its "
                f"translation at {len(translated) - 1}: give the translation the same headings"
            )
        parts = [
            f"<!-- cell {c['id']} en={english_hash(cell_source(c))} -->\n{text.strip(chr(10))}\n"
            for c, text in zip(group, translated, strict=True)
        ]
        new = "\n".join(parts).rstrip("\n") + kept_end
        catalog = catalog[: marker.start()] + new + catalog[end:]
    return catalog


def _joined(parts: Sequence[str], joints: Sequence[str]) -> str:
    return parts[0] + "".join(joint + part for joint, part in zip(joints, parts[1:], strict=True))


def _split_groups(
    cells: Sequence[dict[str, Any]], sections: Mapping[str, Any]
) -> list[list[dict[str, Any]]]:
    """Each run of markdown cells ``<id>``, ``<id>-2``, … where ``<id>`` has a section
    (of a markdown cell) and the others have none: a cell and the parts split off it."""
    groups = []
    for index, cell in enumerate(cells):
        section = sections.get(str(cell.get("id")))
        if cell["cell_type"] != "markdown" or section is None or section.code:
            continue
        part = re.compile(re.escape(str(cell["id"])) + r"-\d+")
        group = [cell]
        for later in cells[index + 1 :]:
            later_id = str(later.get("id"))
            markdown = later["cell_type"] == "markdown"
            if not markdown or later_id in sections or not part.fullmatch(later_id):
                break
            group.append(later)
        if len(group) > 1:
            groups.append(group)
    return groups
