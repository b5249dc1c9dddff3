"""Plots draw Chinese in the font the ``notebook`` extra installs (``noto-cjk-sans-otc``), not
in a system font: with every system CJK font hidden from matplotlib, each zh plot draws
without a missing glyph ("Glyph … missing from font" is an error here), and without the
packaged font the same drawing fails.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlib.notebook import _common
from memlib.notebook.language import use_language

sys.path.insert(0, str(Path(__file__).parent))
from test_plot_labels import CJK, DRAWINGS  # noqa: E402  (the catalogue of plot helpers)

MISSING = r"Glyph \d+ .*missing from font"


def _is_cjk(entry: Any) -> bool:
    name = entry.name
    return "CJK" in name or name in ("WenQuanYi Micro Hei", "PingFang SC", "Microsoft YaHei")


def _forget_lookups(manager: Any) -> None:
    """Clear matplotlib's caches of font look-ups and font objects (a font object warns once
    per missing glyph, so a fresh one is needed to see the warning again)."""
    from matplotlib import font_manager

    manager._findfont_cached.cache_clear()
    getattr(font_manager, "_get_font").cache_clear()  # noqa: B009 (private, not in the stubs)


@pytest.fixture
def no_system_cjk_font(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """matplotlib's font manager as on a machine without any CJK font package."""
    from matplotlib import font_manager

    manager = font_manager.fontManager
    packaged = _common.packaged_cjk_font()
    keep = [f for f in manager.ttflist if not _is_cjk(f) or (packaged and f.fname == str(packaged))]
    monkeypatch.setattr(manager, "ttflist", keep)
    _forget_lookups(manager)
    use_language("zh")
    try:
        yield manager
    finally:
        use_language("en")
        _forget_lookups(manager)
        _common.pyplot().close("all")


def _draw_strictly(name: str, root: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Build and draw ``DRAWINGS[name]``; a missing glyph fails the test. matplotlib's
    "Glyph … missing from font" warning is an error here, and since a helper may install a
    filter that ignores it, every call of matplotlib's warning
    function is also recorded, below any filter. Building counts too: a helper that calls
    ``tight_layout`` lays its text out while it builds."""
    import matplotlib._text_helpers as helpers
    from matplotlib.figure import Figure

    missing: list[str] = []

    def record(codepoint: int, fontnames: str) -> None:
        missing.append(f"Glyph {codepoint} ({chr(codepoint)}) missing from font(s) {fontnames}")
        original(codepoint, fontnames)

    original = helpers.warn_on_missing_glyph
    monkeypatch.setattr(helpers, "warn_on_missing_glyph", record)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=MISSING)
        drawn = DRAWINGS[name][0](root)
        figure = drawn if isinstance(drawn, Figure) else drawn.figure
        figure.canvas.draw()
    assert missing == [], f"{name}: {missing[:3]}"
    return figure


def test_the_notebook_extra_installs_the_font() -> None:
    path = _common.packaged_cjk_font()
    assert path is not None, (
        "noto-cjk-sans-otc is missing: pip install -c constraints.txt -e '.[notebook]'"
    )
    assert path.name == "NotoSansCJK-Regular.ttc" and path.stat().st_size > 10_000_000


def test_the_packaged_font_is_the_one_matplotlib_finds(no_system_cjk_font: Any) -> None:
    from matplotlib import font_manager

    system = [f.fname for f in no_system_cjk_font.ttflist if _is_cjk(f)]
    assert all(Path(f) == _common.packaged_cjk_font() for f in system)  # hidden for real
    plt = _common.pyplot()
    assert plt.rcParams["font.family"] == ["DejaVu Sans", _common.CJK_FAMILY]
    found = font_manager.findfont(_common.CJK_FAMILY, fallback_to_default=False)
    assert Path(found) == _common.packaged_cjk_font()


def test_the_packaged_font_wins_over_a_system_copy() -> None:
    """Where a system Noto CJK exists too, the packaged file draws (make course = make check)."""
    from matplotlib import font_manager

    _common.pyplot()
    found = font_manager.findfont(_common.CJK_FAMILY, fallback_to_default=False)
    assert Path(found) == _common.packaged_cjk_font()


@pytest.mark.parametrize("name", sorted(DRAWINGS))
def test_every_zh_plot_draws_with_the_packaged_font(
    name: str, tmp_path: Path, no_system_cjk_font: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from matplotlib.text import Text

    _common.pyplot()
    figure = _draw_strictly(name, tmp_path, monkeypatch)
    chinese = [t.get_text() for t in figure.findobj(Text) if CJK.search(t.get_text())]
    assert chinese, f"{name} draws no Chinese in zh"


def test_without_the_packaged_font_chinese_is_missing(
    tmp_path: Path, no_system_cjk_font: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above can fail: hide the package too, and the same drawing raises."""
    monkeypatch.setattr(_common, "packaged_cjk_font", lambda: None)
    monkeypatch.setattr(
        no_system_cjk_font, "ttflist", [f for f in no_system_cjk_font.ttflist if not _is_cjk(f)]
    )
    _forget_lookups(no_system_cjk_font)
    plt = _common.pyplot()
    assert plt.rcParams["font.family"] == ["DejaVu Sans"]
    with pytest.raises((UserWarning, AssertionError), match="missing from font"):
        _draw_strictly("abstention_plot", tmp_path, monkeypatch)


def test_pyplot_does_not_silence_a_missing_glyph() -> None:
    with warnings.catch_warnings():
        before = list(warnings.filters)
        _common.pyplot()
        added = [f for f in warnings.filters if f not in before]
    assert [f for f in added if f[0] == "ignore"] == []
