"""Other editions of the course: the same code cells, the prose from a catalog.

The English notebooks in ``notebooks/`` are the source of every code cell. An edition
(``zh``) keeps its prose in one Markdown file per notebook, ``i18n/zh/<name>.md``: each
markdown cell of the notebook is one section, opened by a marker that names the cell and
the English text it translates::

    <!-- cell c04 en=3f2a9c1b7d20 -->
    ## 1 · 存储

A section opened by ``<!-- code c07 en=… -->`` holds one ```python block that replaces that
code cell in the edition: an example that teaches better in the edition's language (a
Chinese query, the Chinese sample corpus). The build (``python -m memlib.notebook
translate zh``) writes ``notebooks/zh/<name>.ipynb``: the English notebook with each
markdown cell replaced by its section (links that leave the notebooks folder one folder
deeper), each replaced code cell, and ``use_language("zh")`` atop the setup cell (so
exercise feedback, plot labels and widgets speak Chinese), then runs it.

``en=`` is the first 12 hex digits of the SHA-256 of the English cell (markdown or code):
when the English text changes, the build stops and names the sections to update, so an
edit to one edition cannot silently skip the other. A test rebuilds every edition from
its catalog and compares.

``python -m memlib.notebook translate zh --template NAME`` writes a catalog to start from:
current translations are kept; a new or changed markdown cell comes back in English, with
the current ``en=`` (the old translation is in git).
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._common import cell_source, one_folder_deeper

__all__ = [
    "Catalog",
    "StaleTranslationError",
    "catalog_template",
    "english_hash",
    "parse_catalog",
    "translated_notebook",
]

_MARKER = re.compile(
    r"^<!-- (?P<kind>cell|code) (?P<id>[\w-]+) en=(?P<en>[0-9a-f]{12}) -->[ \t]*$", re.M
)
_FENCE = re.compile(r"\A```python\n(?P<code>.*?)\n```\Z", re.S)
# What the build puts at the top of an edition's setup cell (its first code cell).
SETUP = (
    "from memlib.notebook.language import use_language\n\n"
    'use_language("{lang}")  # this edition speaks {lang}: feedback, labels, widgets\n\n'
)


class StaleTranslationError(ValueError):
    """A catalog misses a markdown cell, or translates an older English text of it."""


@dataclass(frozen=True)
class Section:
    cell_id: str
    english: str  # the hash of the English text it translates
    text: str
    code: bool = False  # a code cell this edition replaces (an example in its language)


Catalog = Mapping[str, Section]


def english_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def parse_catalog(text: str) -> dict[str, Section]:
    """The sections of a catalog file, by cell id."""
    markers = list(_MARKER.finditer(text))
    sections: dict[str, Section] = {}
    for number, marker in enumerate(markers):
        end = markers[number + 1].start() if number + 1 < len(markers) else len(text)
        body = text[marker.end() : end].strip("\n")
        cell_id = marker.group("id")
        if cell_id in sections:
            raise StaleTranslationError(f"cell {cell_id} has two sections")
        code = marker.group("kind") == "code"
        if code:
            fenced = _FENCE.match(body)
            if fenced is None:
                raise StaleTranslationError(f"code {cell_id}: put the code in one ```python block")
            body = fenced.group("code")
        sections[cell_id] = Section(cell_id, marker.group("en"), body, code)
    return sections


def catalog_template(notebook: Mapping[str, Any], old: Catalog | None = None) -> str:
    """A catalog of ``notebook``: each section the old translation when it is current,
    else the English text to translate."""
    parts = []
    for cell in notebook["cells"]:
        kept = (old or {}).get(cell["id"])
        if cell["cell_type"] != "markdown":
            if kept is not None and kept.code:  # an edition's own example: kept as it is
                parts.append(
                    f"<!-- code {cell['id']} en={kept.english} -->\n```python\n{kept.text}\n```\n"
                )
            continue
        english = cell_source(cell)
        digest = english_hash(english)
        body = kept.text if kept is not None and kept.english == digest else english
        parts.append(f"<!-- cell {cell['id']} en={digest} -->\n{body.strip(chr(10))}\n")
    return "\n".join(parts)


def translated_notebook(
    english: Mapping[str, Any], catalog: Catalog, name: str, lang: str = "zh"
) -> dict[str, Any]:
    """``english`` with each markdown cell from ``catalog`` (and the code cells it
    replaces), ``use_language(lang)`` atop the setup cell; outputs not yet computed.

    Raises :class:`StaleTranslationError` naming every missing or outdated section.
    """
    edition = copy.deepcopy(dict(english))
    problems = []
    used = set()
    setup_done = False
    for cell in edition["cells"]:
        section = catalog.get(cell["id"])
        digest = english_hash(cell_source(cell))
        if cell["cell_type"] == "markdown" or (section is not None and section.code):
            if section is None:
                problems.append(f"{cell['id']} (missing)")
                continue
            if section.english != digest:
                problems.append(f"{cell['id']} (English changed: en={digest})")
                continue
            used.add(cell["id"])
            text = section.text
            if cell["cell_type"] == "markdown":
                text = one_folder_deeper(text)
            cell["source"] = text.splitlines(keepends=True)
        if cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
            if not setup_done:
                cell["source"] = (SETUP.format(lang=lang) + cell_source(cell)).splitlines(
                    keepends=True
                )
                setup_done = True
    unused = sorted(set(catalog) - used - {p.split()[0] for p in problems})
    problems += [f"{cell_id} (no such cell)" for cell_id in unused]
    if problems:
        raise StaleTranslationError(
            f"{name}: update these sections of its catalog: " + ", ".join(problems)
        )
    return edition


def catalog_path(root: Path, lang: str, name: str) -> Path:
    return root / "i18n" / lang / f"{Path(name).stem}.md"
