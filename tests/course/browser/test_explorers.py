"""The course the way a student meets it: JupyterLab in headless Chromium.

For every notebook under ``notebooks/`` whose code calls ``explorer(``, the test opens
it in a real JupyterLab, waits for the kernel, clears the committed outputs and runs
all cells, then drives each explorer widget like a student: types a new query,
changes ``as_of`` and ``limit``, and after each change checks the redrawn table — row
count, columns, the ``memory_id`` column (so the first memory_id) and every short
text / integer / boolean cell — against the same view computed here, in-process, over
the sample corpus. An invalid query must show the contract's one-line error in the
widget, not a traceback, and a valid query afterwards must bring the table back.

Screenshots go to ``screenshots/`` (git-ignored): one per notebook and one per
explorer. The browser is Debian's ``/usr/bin/chromium`` driven by Playwright through
``executable_path`` (never ``playwright install``). These tests never skip: a missing
browser or Playwright is a failure that says what to install.

``MEMLIB_BROWSER_NOTEBOOKS=/some/dir`` points the test at another notebook folder
(used to develop the harness before the course existed); the default is the repo's
``notebooks/``. ``MEMLIB_CHROMIUM`` overrides the browser path.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest

from memlib.notebook.views import as_of_at_noon

from .jupyterlab import JupyterLab, running_jupyterlab
from .replay import replay

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[3]
NOTEBOOKS = Path(os.environ.get("MEMLIB_BROWSER_NOTEBOOKS") or REPO / "notebooks").resolve()
SCREENSHOTS = REPO / "screenshots"
CHROMIUM = os.environ.get("MEMLIB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# What the student types. Chosen so that each step changes what most views show on
# the sample corpus (new terms, an earlier day that reorders by recency, fewer hits).
NEW_QUERY = "remote memory course"
NEW_AS_OF = date(2026, 8, 6)
NEW_LIMIT = 2
INVALID_QUERY = "!!!"
CONTRACT_ERROR = "recall query has no searchable terms"


# A reader of another edition types in its language (bigrams, not words, for zh).
EDITION_QUERIES = {"zh": "分层记忆设计"}


def plan(
    query: str, as_of: datetime, limit: int, new_query: str = NEW_QUERY
) -> list[tuple[str, datetime, int]]:
    """The arguments after each edit: query, then as_of, then limit, then '!!!', then back."""
    new_as_of = as_of_at_noon(NEW_AS_OF)
    return [
        (new_query, as_of, limit),
        (new_query, new_as_of, limit),
        (new_query, new_as_of, NEW_LIMIT),
        (INVALID_QUERY, new_as_of, NEW_LIMIT),
        (new_query, new_as_of, NEW_LIMIT),
    ]


def plan_for(name: str) -> Any:
    """The plan for the notebook ``name`` (``zh/02_normalize.ipynb`` types Chinese)."""
    edition = name.split("/")[0] if "/" in name else ""
    return functools.partial(plan, new_query=EDITION_QUERIES.get(edition, NEW_QUERY))


# Generous: two shared cores, JupyterLab, a kernel per notebook and Chromium.
KERNEL_IDLE_TIMEOUT = 90_000  # ms
RUN_ALL_TIMEOUT = 240.0  # s
REDRAW_TIMEOUT = 60.0  # s
UI_TIMEOUT = 30_000  # ms

EXPLORER_CALL = re.compile(r"(?<![\w.])(?:[A-Za-z_][\w]*\.)*explorer\s*\(")
EXPLORER_DEF = re.compile(r"^\s*def\s+explorer\s*\(", re.MULTILINE)
EXPLORER_SELECTOR = ".widget-vbox:has(> .widget-hbox .widget-datepicker)"


def _code_sources(path: Path) -> list[str]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in cells
        if c["cell_type"] == "code"
    ]


def _explorer_cells(path: Path) -> int:
    """How many code cells call ``explorer(`` (each must show at least one widget)."""
    return sum(1 for src in _code_sources(path) if EXPLORER_CALL.search(EXPLORER_DEF.sub("", src)))


# The other editions share the English code cells; one zh notebook is driven too, the one
# whose explorer a Chinese reader tries Chinese queries in.
EDITION_NOTEBOOKS = ("zh/02_normalize.ipynb",)


def explorer_notebooks() -> list[Path]:
    if not NOTEBOOKS.is_dir():
        return []
    found = sorted(NOTEBOOKS.glob("*.ipynb"))
    found += [NOTEBOOKS / name for name in EDITION_NOTEBOOKS if (NOTEBOOKS / name).exists()]
    return [p for p in found if _explorer_cells(p)]


def _relative(path: Path) -> str:
    """The notebook as JupyterLab names it: relative to the served folder."""
    return path.relative_to(NOTEBOOKS).as_posix()


DISCOVERED = explorer_notebooks()


# -- requirements: fail, never skip -----------------------------------------------------


def _require_browser() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:  # pragma: no cover - environment problem
        pytest.fail(
            f"Playwright for Python is not installed ({exc}); install the 'browser' extra "
            "(pip install -e '.[browser]'); do NOT run `playwright install`",
            pytrace=False,
        )
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(
            f"no Chromium at {CHROMIUM}; install Debian's package: "
            "`apt-get install -y chromium` (or run `make system-deps`)",
            pytrace=False,
        )
    return sync_playwright


# -- fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLab]:
    _require_browser()
    # JupyterLab serves a copy: running cells in the browser must never touch the
    # committed notebooks (outputs, widget state, checkpoints).
    root = tmp_path_factory.mktemp("course") / "notebooks"
    shutil.copytree(NOTEBOOKS, root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    with running_jupyterlab(root, pythonpath=REPO) as server:
        yield server


@pytest.fixture(scope="module")
def browser(lab: JupyterLab) -> Iterator[Any]:
    sync_playwright = _require_browser()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


# -- reading and driving one explorer ---------------------------------------------------

READ_EXPLORER = """
(box) => {
  const output = box.querySelector(':scope > .widget-output');
  const status = box.querySelector(':scope > .widget-html');
  const table = output ? output.querySelector('table.dataframe') : null;
  const norm = (t) => (t || '').split(/\\s+/).filter(Boolean).join(' ');
  let columns = null, rows = null;
  if (table) {
    const head = table.querySelector('thead tr:last-child');
    columns = Array.from(head ? head.children : []).slice(1).map((c) => norm(c.innerText));
    rows = Array.from(table.querySelectorAll(':scope > tbody > tr')).map(
      (tr) => Array.from(tr.querySelectorAll(':scope > td')).map((td) => norm(td.innerText)));
  }
  return {
    query: box.querySelector(".widget-text input[type='text']").value,
    as_of: box.querySelector(".widget-datepicker input[type='date']").value,
    limit: norm(box.querySelector('.widget-readout').innerText),
    view: (status && status.querySelector('code')) ? status.querySelector('code').innerText : null,
    status: norm(status ? status.innerText : ''),
    output: norm(output ? output.innerText : ''),
    stderr: output ? output.querySelectorAll(
      "[data-mime-type='application/vnd.jupyter.stderr']").length : 0,
    images: output ? Array.from(output.querySelectorAll('img'))
      .filter((img) => img.complete && img.naturalWidth > 0).length : 0,
    img_elements: output ? output.querySelectorAll('img').length : 0,
    columns: columns,
    rows: rows,
  };
}
"""


def mismatches(state: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    if "error" in expected:
        if expected["error"] not in state["output"]:
            problems.append(
                f"widget output should show {expected['error']!r}, shows {state['output'][:300]!r}"
            )
        if "Traceback" in state["output"] or state["stderr"]:
            problems.append("widget output shows a traceback / stderr instead of one line")
        if state["rows"] is not None or state["images"]:
            problems.append("a table or plot is still shown next to the error")
        return problems
    if state["images"] != expected.get("images", 0):
        problems.append(
            f"{state['images']} plots shown, expected {expected.get('images', 0)} "
            "(as many as the first draw)"
        )
    if expected.get("contains") and expected["contains"] not in state["output"]:
        problems.append(f"output should contain {expected['contains']!r}")
    for bit in expected["status"]:
        if bit not in state["status"]:
            problems.append(f"status line should contain {bit!r}, is {state['status']!r}")
    if "text" in expected:
        if expected["text"] not in state["output"]:
            problems.append(
                f"output should read {expected['text'][:200]!r}…, reads {state['output'][:200]!r}…"
            )
        return problems
    if state["rows"] is None:
        return problems + [f"no table rendered; output reads {state['output'][:300]!r}"]
    if state["columns"] != expected["columns"]:
        problems.append(f"columns {state['columns']} != {expected['columns']}")
        return problems
    if len(state["rows"]) != expected["rows"]:
        problems.append(f"{len(state['rows'])} rows rendered, expected {expected['rows']}")
    for column, cells in expected["cells"].items():
        i = expected["columns"].index(column)
        shown = [row[i] if i < len(row) else None for row in state["rows"]]
        want = [c for c in cells]
        if column == "memory_id":
            if shown != want:
                problems.append(
                    f"memory_id column {shown} != {want} (first: {shown[:1]} vs {want[:1]})"
                )
        elif shown != want:
            problems.append(f"column {column!r}: {shown} != {want}")
    return problems


def _summary(expected: dict[str, Any], other: dict[str, Any] | None = None) -> str:
    if "error" in expected:
        return repr(expected["error"])
    if "rows" in expected:
        text = f"{expected['rows']} rows, first memory_id {expected['first_memory_id']!r}"
        if other is not None and "cells" in other:
            changed = {k: v for k, v in expected["cells"].items() if other["cells"].get(k) != v}
            if changed:
                text += f", {changed}"
        return text
    return repr(expected.get("text", "")[:80])


def wait_for(box: Any, expected: dict[str, Any], what: str) -> dict[str, Any]:
    deadline = time.monotonic() + REDRAW_TIMEOUT
    while True:
        state = box.evaluate(READ_EXPLORER)
        problems = mismatches(state, expected)
        if not problems:
            return state
        if time.monotonic() > deadline:
            pytest.fail(
                f"{what}: the explorer did not redraw as expected within "
                f"{REDRAW_TIMEOUT:.0f} s:\n  " + "\n  ".join(problems),
                pytrace=False,
            )
        time.sleep(0.25)


def set_query(box: Any, text: str) -> None:
    field = box.locator(".widget-text input[type='text']").first
    field.click()
    field.fill(text)
    field.press("Enter")


def set_as_of(box: Any, day: date) -> None:
    box.locator(".widget-datepicker input[type='date']").first.fill(day.isoformat())


def set_limit(box: Any, limit: int) -> None:
    readout = box.locator(".widget-readout").first
    readout.click()
    readout.fill(str(limit))
    readout.press("Enter")


# -- driving the notebook ---------------------------------------------------------------


def click_menu(page: Any, menu: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(menu)}$")).click()
    page.locator(
        ".lm-Menu-itemLabel:visible", has_text=re.compile(f"^{re.escape(item)}$")
    ).first.click()


def dismiss_popups(page: Any) -> None:
    # "Would you like to receive official Jupyter news?" (normally switched off by the
    # isolated settings; clicked away when it shows anyway).
    button = page.locator(".jp-Notification-Toast button:visible", has_text=re.compile("^No$"))
    if button.count():
        button.first.click()


def wait_kernel_idle(page: Any) -> None:
    page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\| Idle$")).first.wait_for(
        timeout=KERNEL_IDLE_TIMEOUT
    )


PROMPTS = """
() => Array.from(document.querySelectorAll(
  '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-CodeCell'))
  .map((cell) => {
    const prompt = cell.querySelector('.jp-InputPrompt');
    const errors = Array.from(cell.querySelectorAll(
      ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"))
      .map((e) => e.innerText.slice(-600));
    return {prompt: prompt ? prompt.innerText.trim() : '', errors: errors};
  })
"""


def run_all_cells(page: Any, name: str) -> None:
    # Clear the committed outputs first: "[n]:" prompts can then only come from this run.
    click_menu(page, "Edit", "Clear Outputs of All Cells")
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputPrompt'))"
        ".every((p) => !/\\[\\d+\\]/.test(p.innerText))",
        timeout=UI_TIMEOUT,
    )
    click_menu(page, "Run", "Run All Cells")
    deadline = time.monotonic() + RUN_ALL_TIMEOUT
    stalled_since: float | None = None
    while True:
        cells = page.evaluate(PROMPTS)
        prompts = [c["prompt"] for c in cells]
        if cells and all(re.fullmatch(r"\[\d+\]:", p) for p in prompts):
            break
        idle = page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"\| Idle$")).count()
        started = any(re.fullmatch(r"\[\d+\]:", p) for p in prompts)
        if idle and started and not any("*" in p for p in prompts):
            stalled_since = stalled_since or time.monotonic()
        else:
            stalled_since = None
        if (stalled_since and time.monotonic() - stalled_since > 8) or (
            time.monotonic() > deadline
        ):
            errors = [e for c in cells for e in c["errors"]]
            pytest.fail(
                f"{name}: Run All Cells did not run every cell (prompts {prompts})"
                + ("; errors:\n" + "\n---\n".join(errors) if errors else ""),
                pytrace=False,
            )
        time.sleep(0.5)
    wait_kernel_idle(page)


def screenshot(target: Any, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    target.screenshot(path=str(SCREENSHOTS / name))


# -- the tests --------------------------------------------------------------------------


def test_the_course_has_explorers() -> None:
    """Discovery itself is checked, so an empty course cannot pass by testing nothing."""
    assert DISCOVERED, (
        f"no notebook under {NOTEBOOKS} calls explorer(...); the browser tests have "
        "nothing to drive"
    )


@pytest.mark.parametrize("path", DISCOVERED, ids=lambda p: _relative(p).removesuffix(".ipynb"))
def test_explorers_redraw_in_jupyterlab(
    path: Path, lab: JupyterLab, browser: Any, tmp_path: Path
) -> None:
    clock = time.monotonic()
    phases: list[str] = []
    name = _relative(path)
    shot = name.removesuffix(".ipynb").replace("/", "-")
    for stale in SCREENSHOTS.glob(f"{shot}*.png"):  # this run's pictures only
        stale.unlink()

    def phase(name: str) -> None:
        nonlocal clock
        now = time.monotonic()
        phases.append(f"{name} {now - clock:.1f}s")
        clock = now

    # The oracle: the same notebook run here, recording each explorer's view and store.
    steps_for = plan_for(name)
    record, namespace = replay(lab.root / name, tmp_path / "replay", steps_for)
    phase("replay")
    assert record.explorers, f"{path.name}: replaying it built no explorer"
    # After Run All the widgets read their stores as the last cell left them; that
    # must still be the store each explorer was drawn on (a student runs all cells,
    # then explores), or the widget shows numbers no check cell ever saw.
    after_run_all = []
    for index, recorded in enumerate(record.explorers):
        steps = steps_for(recorded.query, recorded.as_of, recorded.limit)
        now_values = [record.expect(index, *step) for step in steps]
        for step, now, then in zip(steps, now_values, recorded.then, strict=True):
            assert now == then, (
                f"{path.name} explorer #{index + 1} ({recorded.view.__name__}): a cell after "
                f"the explorer changed its store — when drawn, the widget would show "
                f"{_summary(then, now)} for {step[0]!r}; after Run All it shows "
                f"{_summary(now, then)}. "
                "A student who runs all cells and then explores meets a different (or "
                "empty) store: leave the explorer's store as it was when drawn (no cleanup "
                "of its folder at the end; write to another store)"
            )
        after_run_all.append(now_values)

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(UI_TIMEOUT)
    try:
        page.goto(lab.lab_url(name), wait_until="domcontentloaded")
        wait_kernel_idle(page)
        dismiss_popups(page)
        phase("open")
        run_all_cells(page, name)
        phase("run-all")

        notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook")
        broken = notebook.get_by_text("Error displaying widget")
        assert broken.count() == 0, f"{path.name}: a widget did not render"
        boxes = notebook.locator(EXPLORER_SELECTOR)
        assert boxes.count() == len(record.explorers), (
            f"{path.name}: the notebook builds {len(record.explorers)} explorers, "
            f"{boxes.count()} rendered in JupyterLab"
        )

        for index, recorded in enumerate(record.explorers):
            box = boxes.nth(index)
            box.scroll_into_view_if_needed()
            view = recorded.view.__name__
            what = f"{path.name} explorer #{index + 1} ({view})"
            state = box.evaluate(READ_EXPLORER)
            assert state["view"] == view, (
                f"{what}: the widget's status line names {state['view']!r}: {state['status']!r}"
            )
            day, limit = recorded.as_of.date(), recorded.limit
            assert (state["query"], state["as_of"], state["limit"]) == (
                recorded.query,
                day.isoformat(),
                str(limit),
            ), f"{what}: controls start at {state['query']!r}, {state['as_of']}, {state['limit']}"
            plots = state["img_elements"]  # drawn by ``after=``: every redraw redraws them

            # What Run All drew, for the notebook's own arguments.
            wait_for(box, {**recorded.first, "images": plots}, f"{what}, as first drawn")

            now_values = after_run_all[index]
            expected = [e if "error" in e else {**e, "images": plots} for e in now_values]
            typed = steps_for.keywords["new_query"]
            labels = [
                f"query={typed!r}",
                f"as_of={NEW_AS_OF}",
                f"limit={NEW_LIMIT}",
                f"query={INVALID_QUERY!r}",
                f"query={typed!r} after the error",
            ]
            if "error" not in expected[3]:
                # A view that reports refusals itself (a table of errors): the message must
                # then be in what it draws.
                expected[3] = {**expected[3], "contains": CONTRACT_ERROR}
            assert CONTRACT_ERROR in json.dumps(expected[3], ensure_ascii=False), (
                f"{view} did not refuse {INVALID_QUERY!r} with the contract's error"
            )
            # A student edits each control in turn; each edit must redraw.
            set_query(box, typed)
            wait_for(box, expected[0], f"{what}, {labels[0]}")
            set_as_of(box, NEW_AS_OF)
            wait_for(box, expected[1], f"{what}, {labels[1]}")
            set_limit(box, NEW_LIMIT)
            final = wait_for(box, expected[2], f"{what}, {labels[2]}")
            assert final["limit"] == str(NEW_LIMIT)
            screenshot(box, f"{shot}-explorer-{index + 1}.png")
            # An invalid query: the contract's one-line message in the widget, no traceback;
            set_query(box, INVALID_QUERY)
            wait_for(box, expected[3], f"{what}, {labels[3]}")
            # ... and the widget recovers with the next valid query.
            set_query(box, typed)
            wait_for(box, expected[4], f"{what}, {labels[4]}")
            box.scroll_into_view_if_needed()
        phase("explore")
        screenshot(page, f"{shot}.png")
    except BaseException:
        with contextlib.suppress(Exception):  # best effort: the real failure matters
            screenshot(page, f"{shot}-FAILED.png")
        raise
    finally:
        page.close()
        namespace.clear()
        # Free the kernel now: two shared cores, and the next notebook starts its own.
        with contextlib.suppress(Exception):  # the server is stopped by pid at the end anyway
            for session in lab.api("sessions") or []:
                lab.api(f"sessions/{session['id']}", method="DELETE")
        print(f"{path.name}: " + ", ".join(phases))
