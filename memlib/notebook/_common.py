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


def pandas() -> Any:
    import pandas

    return pandas


# Fonts with Han and kana glyphs, most wanted first: Debian's fonts-noto-cjk (installed by
# scripts/system-deps.sh), then fonts-wqy-microhei, then what macOS and Windows ship.
CJK_FONTS = (
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "WenQuanYi Micro Hei",
    "PingFang SC",
    "Microsoft YaHei",
)
_CJK_FILES = (
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
)


def cjk_font() -> str | None:
    """The CJK font matplotlib will fall back to, or None when the machine has none."""
    import sys

    from matplotlib import font_manager

    names = {font.name for font in font_manager.fontManager.ttflist}
    found = next((name for name in CJK_FONTS if name in names), None)
    if found is None:
        # matplotlib caches the font list of its first run: add a font installed since from
        # its file (conda-forge's font-ttf-noto-cjk: under the environment's own fonts/).
        conda = sorted((Path(sys.prefix) / "fonts").glob("NotoSansCJK*"))
        for path in [*(Path(f) for f in _CJK_FILES if Path(f).exists()), *conda]:
            font_manager.fontManager.addfont(str(path))
        names = {font.name for font in font_manager.fontManager.ttflist}
        found = next((name for name in CJK_FONTS if name in names), None)
    return found


def pyplot() -> Any:
    """pyplot, with a CJK font after DejaVu Sans, so Chinese and Japanese labels draw (glyph
    by glyph); without one, the "Glyph … missing" warning stays out of every output."""
    import warnings

    import matplotlib.pyplot as plt

    cjk = cjk_font()
    if cjk is not None:
        # A list of families is what matplotlib falls back along, glyph by glyph.
        plt.rcParams["font.family"] = ["DejaVu Sans", cjk]
    warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font")
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
