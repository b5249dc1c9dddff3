"""Every notebook presents as slides in RISE for JupyterLab, in headless Chromium.

RISE serves a notebook at ``/rise/<path>`` and turns it into reveal.js sections. Each
cell whose slide type is ``slide`` must open one top-level section (the rule is
``memlib.notebook.slides``), the first section must be the notebook's title, and the
skipped setup cell must not be shown.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from .jupyterlab import JupyterLab
from .test_explorers import NOTEBOOKS, UI_TIMEOUT, browser, lab  # noqa: F401 — fixtures

pytestmark = pytest.mark.browser

# RISE's reading of the metadata is the same for every notebook, and tests/course/test_slides.py
# checks every notebook's metadata without a browser: the browser shows RISE on the tour and on
# two notebooks whose headings stood inside a cell (split by `python -m memlib.notebook slides`).
SAMPLED = ("00_tour.ipynb", "05_stable_rank.ipynb", "14_explain_and_time.ipynb")
SLIDES = [p for p in sorted(NOTEBOOKS.glob("*.ipynb")) if p.name in SAMPLED]


def _cells(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _kind(cell: dict[str, Any]) -> str | None:
    return cell.get("metadata", {}).get("slideshow", {}).get("slide_type")


def test_the_sampled_notebooks_exist() -> None:
    assert [p.name for p in SLIDES] == list(SAMPLED)


@pytest.mark.parametrize("path", SLIDES, ids=lambda p: p.name)
def test_notebook_presents_as_slides(lab: JupyterLab, browser: Any, path: Path) -> None:  # noqa: F811
    cells = _cells(path)
    slides = sum(1 for c in cells if _kind(c) == "slide")
    setup = next("".join(c["source"]) for c in cells if _kind(c) == "skip")
    title = "".join(cells[0]["source"]).splitlines()[0].removeprefix("# ")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(UI_TIMEOUT)
    try:
        page.goto(f"{lab.url}/rise/{path.name}?token={lab.token}", wait_until="domcontentloaded")
        sections = page.locator(".reveal .slides > section")
        # The deck is built first and its markdown rendered after: wait for the title
        # heading, then for the metadata's number of sections (polled, not slept on).
        sections.first.locator("h1").first.wait_for(state="visible")
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        with contextlib.suppress(PlaywrightTimeout):  # the assert below says what it saw
            page.wait_for_function(
                f"() => document.querySelectorAll('.reveal .slides > section').length >= {slides}"
            )
        assert sections.count() == slides, (
            f"{path.name}: RISE shows {sections.count()} slides, the metadata has {slides}"
        )
        first = sections.first.inner_text()
        assert first.startswith(title.replace("`", "")), f"{path.name}: first slide {first[:80]!r}"
        shown = page.locator(".reveal .slides").inner_text()
        assert setup.splitlines()[0] not in shown or setup.splitlines()[0] in first, (
            f"{path.name}: the skipped setup cell is on a slide"
        )
    finally:
        page.close()
