"""Explorers: an ipywidgets form (query, as_of, limit, a drop-down per ``choices``
argument) that redraws any view; ipywidgets is imported when one is built."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..errors import RemoteMemoryError
from ..stores._base import MemoryStore
from .language import tr
from .plots import pyplot
from .views import View, as_of_at_noon


def status_line(name: str, moment: datetime, rows: int | None) -> str:
    """The explorer's status line (HTML): which view, at which moment, how many rows."""
    when = f"{moment:%Y-%m-%d %H:%M} UTC"
    line = tr(f"<code>{name}</code> at {when}", f"<code>{name}</code>，时刻 {when}")
    if rows is not None:
        line += tr(f" — {rows} rows", f" — {rows} 行")
    return line


def explorer(
    view: View,
    store: MemoryStore,
    *,
    query: str,
    as_of: datetime,
    limit: int = 5,
    after: Callable[[Any], Any] | None = None,
    choices: Mapping[str, Sequence[str | None]] | None = None,
) -> Any:
    """A form that redraws ``view`` into an Output widget; ``after`` turns its value into
    something extra to show (a plot). Output goes through the widget's model, not ``with
    out:``, so nothing leaks into the cell's own outputs under nbval."""
    import ipywidgets as widgets

    wide = widgets.Layout(width="420px")
    text = widgets.Text(value=query, description="query", continuous_update=False, layout=wide)
    day = widgets.DatePicker(value=as_of.date(), description="as_of")
    size = widgets.IntSlider(
        value=limit, min=1, max=10, description="limit", continuous_update=False
    )
    # A None choice reads "(all)": the view as the plain cell under the explorer calls it.
    picks = {
        name: widgets.Dropdown(
            options=[(tr("(all)", "（全部）") if o is None else str(o), o) for o in options],
            value=options[0],
            description=name,
        )
        for name, options in (choices or {}).items()
    }
    out = widgets.Output()
    status = widgets.HTML()

    def redraw(_: Any = None) -> None:
        out.outputs = ()
        moment = as_of_at_noon(day.value or as_of.date())
        try:
            picked = {name: pick.value for name, pick in picks.items()}
            value = view(store, text.value, moment, size.value, **picked)
        except RemoteMemoryError as exc:
            status.value = ""
            out.append_stdout(tr(f"error: {exc}\n", f"错误：{exc}\n"))
            return
        rows = getattr(value, "shape", (None,))[0]
        status.value = status_line(view.__name__, moment, rows)
        out.append_display_data(value)
        extra = None if after is None else after(value)
        if extra is not None:
            figure = getattr(extra, "figure", extra)
            out.append_display_data(figure)
            pyplot().close(figure)

    for control in (text, day, size, *picks.values()):
        control.observe(redraw, names="value")
    redraw()
    rows = [widgets.HBox([text, day, size])]
    if picks:
        rows.append(widgets.HBox(list(picks.values())))
    box = widgets.VBox([*rows, status, out])
    box.redraw = redraw
    box.controls = {"query": text, "as_of": day, "limit": size, **picks}
    return box
