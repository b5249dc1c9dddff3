"""One shape for every notebook: learning goals, explorer, exercises, takeaways, a
questionnaire, further reading and the Previous / Contents / Next line — with links that
resolve inside the repository, and no reference to a contract a learner cannot open."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "notebooks"
STUDENT = sorted(FOLDER.glob("*.ipynb"))
SECTIONS = ("## Explore", "## Exercise", "## Takeaways", "## Questionnaire", "## Further reading")
LINK = re.compile(r"\]\(([^)\s]+)\)")
NAV = re.compile(
    r"^(?:\[← Previous: (?P<prev_title>[^\]]+)\]\((?P<prev>[^)]+)\) · )?"
    r"\[Contents\]\(00_tour\.ipynb#Contents\)"
    r"(?: · \[Next: (?P<next_title>[^\]]+) →\]\((?P<next>[^)]+)\))?$"
)


def _cells(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict[str, Any]) -> str:
    return "".join(cell["source"])


def _title(path: Path) -> str:
    """``03 · Candidates`` from the notebook's first heading."""
    first = _source(_cells(path)[0]).splitlines()[0]
    return first.removeprefix("# ").split(":")[0].strip()


def test_the_course_is_numbered_without_gaps() -> None:
    numbers = [int(p.name[:2]) for p in STUDENT]
    assert numbers == list(range(len(numbers))), numbers


@pytest.mark.parametrize("path", STUDENT, ids=lambda p: p.name)
def test_sections_in_order(path: Path) -> None:
    cells = _cells(path)
    first = _source(cells[0])
    assert first.startswith(f"# {path.name[:2]} · "), f"{path.name}: title '# NN · …' first"
    headings = [
        line
        for c in cells
        if c["cell_type"] == "markdown"
        for line in _source(c).splitlines()
        if line.startswith("## ")
    ]
    # The learning goals follow the title (on a slide of their own: tests/course/test_slides.py).
    assert headings and headings[0] == "## Learning goals", f"{path.name}: goals first"
    first_code = next(i for i, c in enumerate(cells) if c["cell_type"] == "code")
    assert any("## Learning goals" in _source(c) for c in cells[:first_code]), (
        f"{path.name}: the learning goals belong before the setup cell"
    )
    positions = []
    for section in SECTIONS:
        found = [i for i, h in enumerate(headings) if h.startswith(section)]
        assert found, f"{path.name} has no '{section}' section"
        positions.append(found[0])
    assert positions == sorted(positions), f"{path.name}: sections out of order: {headings}"
    code = "\n".join(_source(c) for c in cells if c["cell_type"] == "code")
    assert re.search(r"(?<![\w.])explorer\(", code), f"{path.name} has no explorer"


@pytest.mark.parametrize("path", STUDENT, ids=lambda p: p.name)
def test_navigation_line(path: Path) -> None:
    last = _source(_cells(path)[-1]).strip()
    match = NAV.match(last)
    assert match, f"{path.name}: the last cell should be the navigation line, not {last!r}"
    index = STUDENT.index(path)
    neighbours = {
        "prev": STUDENT[index - 1] if index else None,
        "next": STUDENT[index + 1] if index + 1 < len(STUDENT) else None,
    }
    for side, expected in neighbours.items():
        if expected is None:
            assert match.group(side) is None, f"{path.name} has no {side} notebook"
            continue
        assert match.group(side) == expected.name, f"{path.name}: {side} → {expected.name}"
        assert match.group(f"{side}_title") == _title(expected), (
            f"{path.name}: the {side} link should read {_title(expected)!r}"
        )


@pytest.mark.parametrize("path", STUDENT, ids=lambda p: p.name)
def test_links_resolve_and_no_outside_contract(path: Path) -> None:
    reference = (REPO / "docs" / "reference.md").read_text(encoding="utf-8")
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', reference))
    for index, cell in enumerate(_cells(path)):
        text = _source(cell)
        assert "SPEC" not in text and "../shared" not in text, (
            f"{path.name} cell {index} points at the contract outside the repository: "
            "link ../docs/reference.md instead"
        )
        if cell["cell_type"] != "markdown":
            continue
        for target in LINK.findall(text):
            if target.startswith(("http://", "https://", "#", "mailto:")):
                continue
            file, _, anchor = target.partition("#")
            resolved = (FOLDER / file).resolve()
            assert resolved.exists(), f"{path.name} cell {index}: broken link {target}"
            if resolved.name == "reference.md" and anchor:
                assert anchor in anchors, f"{path.name} cell {index}: no anchor #{anchor}"
