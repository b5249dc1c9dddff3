"""What the helper modules share: the fixed query id, pandas / pyplot on first use (so
``import memlib.notebook`` stays as light as ``import memlib``), and notebook files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# Every recall and query a helper builds carries this id, so outputs never vary with it.
QUERY_ID = "nb-query"
# Normalizing text needs a user scope; the terms it yields do not depend on which one.
ANY_SCOPE = "0" * 16


def course_data(name: str) -> Any:
    """The course's literal tables in ``memlib/data/<name>.json``: text kept out of the code."""
    path = Path(__file__).resolve().parents[1] / "data" / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def pandas() -> Any:
    import pandas

    return pandas


# The face Chinese labels fall back to: Noto Sans CJK from the PyPI package
# ``noto-cjk-sans-otc`` (the ``notebook`` extra; the same file as Debian's fonts-noto-cjk),
# so ``make course`` needs no system font and draws what ``make check`` tests.
CJK_FAMILY = "Noto Sans CJK SC"


def packaged_cjk_font() -> Path | None:
    """NotoSansCJK-Regular.ttc from the ``noto-cjk-sans-otc`` wheel, or None without it."""
    try:
        import noto_cjk_sans_otc
    except ImportError:
        return None
    path = Path(str(noto_cjk_sans_otc.FONT_PATH))
    return path if path.is_file() else None


def pyplot() -> Any:
    """pyplot, with the packaged CJK font after DejaVu Sans, so Chinese labels draw glyph by
    glyph. A glyph no font has is not hidden: matplotlib warns "Glyph … missing from font"
    (and the tests turn that warning into an error)."""
    import matplotlib.pyplot as plt
    from matplotlib import font_manager

    path = packaged_cjk_font()
    family = ["DejaVu Sans"]
    if path is not None:
        manager, fname = font_manager.fontManager, str(path)
        if not any(entry.fname == fname for entry in manager.ttflist):
            manager.addfont(fname)  # also clears findfont's cache
            # findfont keeps the first of two equally good matches: the packaged file wins
            # over a system copy of the same family.
            manager.ttflist.sort(key=lambda entry: entry.fname != fname)
        family.append(CJK_FAMILY)
    # A list of families is what matplotlib falls back along, glyph by glyph.
    plt.rcParams["font.family"] = family
    return plt


def write_notebook(path: Any, notebook: dict[str, Any]) -> None:
    """Write a notebook as nbformat does (keys sorted, indent 1, UTF-8 as it is), so a
    file this package writes and one Jupyter saves differ only where the content does."""

    text = json.dumps(notebook, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    Path(path).write_text(text, encoding="utf-8")


def execute_notebook(notebook: dict[str, Any], cwd: Any) -> dict[str, Any]:
    """``notebook`` run in a fresh kernel in ``cwd``, without wall-clock times."""
    import nbformat
    from nbclient import NotebookClient

    node = nbformat.reads(json.dumps(notebook), as_version=4)  # type: ignore[no-untyped-call]
    NotebookClient(
        node,
        timeout=900,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(cwd)}},
    ).execute()
    result: dict[str, Any] = json.loads(nbformat.writes(node))  # type: ignore[no-untyped-call]
    return result


# A link that leaves the notebooks folder ("](../docs/…") from a notebook one folder deeper.
_UP_LINK = re.compile(r"\]\(\.\./")


def cell_source(cell: Mapping[str, Any]) -> str:
    """A cell's text, whether stored as one string or as a list of lines."""
    source = cell.get("source", "")
    return source if isinstance(source, str) else "".join(source)


def one_folder_deeper(text: str) -> str:
    """``text`` with its links out of notebooks/ fixed for a notebook one folder deeper."""
    return _UP_LINK.sub("](../../", text)


def selected_notebooks(folder: Path, names: Sequence[str] = ()) -> list[Path]:
    """The notebooks of ``folder``, or those of them ``names`` names (stem or file name)."""
    return [
        p for p in sorted(folder.glob("*.ipynb")) if not names or p.stem in names or p.name in names
    ]
