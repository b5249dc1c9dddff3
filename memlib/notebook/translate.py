"""Other editions of the course (``zh``): the English notebooks' code cells, the prose from
``i18n/<lang>/<name>.md``, one section per markdown cell opened by ``<!-- cell ID en=HASH -->``
(or ``<!-- code ID en=HASH -->`` around a ```python block that replaces a code cell). HASH is
the start of the English text's SHA-256: a changed English cell stops the build and is named,
so an edit to one edition cannot silently skip the other (docs/instructor.md).
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
    """``english`` with each markdown cell (and each code cell it replaces) from ``catalog``,
    ``use_language(lang)`` atop the setup cell, no outputs; a missing or outdated section
    raises :class:`StaleTranslationError`, naming every one."""
    edition = copy.deepcopy(dict(english))
    problems, checked = [], set()
    for cell in edition["cells"]:
        section = catalog.get(cell["id"])
        markdown = cell["cell_type"] == "markdown"
        if not markdown and (section is None or not section.code):
            continue
        digest = english_hash(cell_source(cell))
        if section is None:
            problems.append(f"{cell['id']} (missing)")
        elif section.english != digest:
            problems.append(f"{cell['id']} (English changed: en={digest})")
        else:
            text = one_folder_deeper(section.text) if markdown else section.text
            cell["source"] = text.splitlines(keepends=True)
        checked.add(cell["id"])
    problems += [f"{cell_id} (no such cell)" for cell_id in sorted(set(catalog) - checked)]
    if problems:
        raise StaleTranslationError(
            f"{name}: update these sections of its catalog: " + ", ".join(problems)
        )
    code = [cell for cell in edition["cells"] if cell["cell_type"] == "code"]
    for cell in code:
        cell["outputs"], cell["execution_count"] = [], None
    if code:
        setup = SETUP.format(lang=lang) + cell_source(code[0])
        code[0]["source"] = setup.splitlines(keepends=True)
    return edition


def catalog_path(root: Path, lang: str, name: str) -> Path:
    return root / "i18n" / lang / f"{Path(name).stem}.md"
