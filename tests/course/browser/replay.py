"""The oracle of the browser tests: each notebook replayed in-process.

The code cells of a notebook run here, in order, in one namespace (IPython magics and
shell lines skipped, exceptions of a cell caught like a ``raises-exception`` cell),
with ``memlib.notebook.explorers.explorer`` wrapped so that every explorer the notebook builds
is recorded: its view function, its store and its arguments. While recording, the
view is called with those arguments — what the explorer must show when first drawn.
After the last cell, :meth:`Replay.expect` calls the same view function on the same
store object, now in the state Run All leaves it in — what a student exploring the
widget after Run All must see. Nothing is hard-coded: the numbers come from memlib.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memlib.errors import RemoteMemoryError
from memlib.notebook.language import language, tr, use_language
from memlib.notebook.views import as_of_at_noon


@dataclass
class Recorded:
    view: Callable[..., Any]
    store: Any
    query: str
    as_of: datetime
    limit: int
    first: dict[str, Any]  # expected first draw
    then: list[dict[str, Any]]  # each planned step, over the store as it was when drawn


@dataclass
class Replay:
    notebook: Path
    explorers: list[Recorded] = field(default_factory=list)
    cell_errors: list[str] = field(default_factory=list)
    lang: str = "en"  # what the notebook's setup cell chose (an edition's use_language)

    def expect(self, index: int, query: str, as_of: datetime, limit: int) -> dict[str, Any]:
        e = self.explorers[index]
        before = language()
        use_language(self.lang)  # the kernel speaks the edition's language; so does the oracle
        try:
            return expected_value(e.view, e.store, query, as_of, limit)
        finally:
            use_language(before)


def _cell_value(value: Any) -> str | None:
    """How a cell reads in the HTML table, or None when display options may change it."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return " ".join(value.split()) if len(value) <= 40 else None
    if type(value).__name__ == "NAType":
        return "<NA>"
    return None


def expected_value(
    view: Callable[..., Any], store: Any, query: str, as_of: datetime, limit: int
) -> dict[str, Any]:
    """What an explorer of ``view`` shows for these arguments (see ``explorer``)."""
    try:
        value = view(store, query, as_of, limit)
    except RemoteMemoryError as exc:
        return {"error": tr(f"error: {exc}", f"错误：{exc}")}
    when = f"{as_of:%Y-%m-%d %H:%M} UTC"
    status = [tr(f"{view.__name__} at {when}", f"{view.__name__}，时刻 {when}")]
    if not hasattr(value, "columns"):
        return {"status": status, "text": " ".join(repr(value).split())}
    rows = len(value)
    status.append(tr(f"— {rows} rows", f"— {rows} 行"))
    columns = [str(c) for c in value.columns]
    cells: dict[str, list[str | None]] = {}
    for column in columns:
        shown = [_cell_value(v) for v in value[column].tolist()]
        if column == "memory_id" or all(c is not None for c in shown):
            cells[column] = shown
    first = value["memory_id"].iloc[0] if "memory_id" in columns and rows else None
    return {
        "status": status,
        "rows": rows,
        "columns": columns,
        "cells": cells,
        "first_memory_id": first,
    }


def _code_cells(path: Path) -> list[tuple[str, list[str]]]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    out = []
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
        out.append(("\n".join(lines), cell.get("metadata", {}).get("tags", [])))
    return out


@contextlib.contextmanager
def _patched_explorer(record: Callable[..., Any]) -> Iterator[None]:
    import importlib
    import pkgutil

    import memlib.notebook as package
    from memlib.notebook import explorers

    original = explorers.explorer
    # Every helper module that holds the function (a re-export) is patched too, so the
    # notebook records its explorers whichever module it imports the name from.
    modules = [package] + [
        importlib.import_module(f"{package.__name__}.{m.name}")
        for m in pkgutil.iter_modules(package.__path__)
    ]
    patched = [m for m in modules if getattr(m, "explorer", None) is original]

    def explorer(view: Any, store: Any, **kwargs: Any) -> Any:
        record(view, store, **kwargs)
        return original(view, store, **kwargs)

    for module in patched:
        module.explorer = explorer  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module in patched:
            module.explorer = original  # type: ignore[attr-defined]


@contextlib.contextmanager
def _quiet_matplotlib() -> Iterator[None]:
    import matplotlib

    backend = matplotlib.get_backend()
    matplotlib.use("Agg", force=True)
    try:
        yield
    finally:
        import matplotlib.pyplot as plt

        plt.close("all")
        with contextlib.suppress(Exception):
            matplotlib.use(backend, force=True)


Plan = Callable[[str, datetime, int], list[tuple[str, datetime, int]]]


def replay(notebook: Path, workdir: Path, plan: Plan) -> tuple[Replay, dict[str, Any]]:
    """Run ``notebook``'s code cells here; returns the record and the live namespace.

    ``plan(query, as_of, limit)`` gives the arguments the test will set, step by step;
    each is also computed when the explorer is drawn, so the test can tell a widget
    that redraws wrongly from a store that a later cell changed.

    Keep the namespace alive while using the record: the notebook's temporary folders
    (and so its stores) are removed when their objects are collected.
    """
    result = Replay(notebook)

    def record(
        view: Any, store: Any, *, query: str, as_of: datetime, limit: int = 5, **_: Any
    ) -> None:
        # The widget draws at 12:00 UTC on the picker's day (see ``as_of_at_noon``).
        as_of = as_of_at_noon(as_of.date())
        result.explorers.append(
            Recorded(
                view=view,
                store=store,
                query=query,
                as_of=as_of,
                limit=limit,
                first=expected_value(view, store, query, as_of, limit),
                then=[expected_value(view, store, *step) for step in plan(query, as_of, limit)],
            )
        )

    namespace: dict[str, Any] = {"__name__": "__main__"}
    workdir.mkdir(parents=True, exist_ok=True)
    old_cwd, old_tempdir, old_lang = Path.cwd(), tempfile.tempdir, language()
    os.chdir(notebook.parent)
    tempfile.tempdir = str(workdir)
    try:
        with (
            _quiet_matplotlib(),
            _patched_explorer(record),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            for number, (source, tags) in enumerate(_code_cells(notebook), start=1):
                try:
                    code = compile(source, f"<{notebook.name} cell {number}>", "exec")
                    exec(code, namespace)  # noqa: S102 - the notebook is the test input
                except Exception as exc:  # noqa: BLE001 - recorded, like Run All shows it
                    if "raises-exception" not in tags:
                        result.cell_errors.append(
                            f"code cell {number}: {type(exc).__name__}: {exc}"
                        )
    finally:
        os.chdir(old_cwd)
        tempfile.tempdir = old_tempdir
        # An edition's setup cell switched this process's language: keep it for the
        # oracle, and give the rest of the session back its own.
        result.lang = language()
        use_language(old_lang)
    return result, namespace
