"""Plots draw Chinese: the set-up installs a CJK font and the course helpers find it."""

from __future__ import annotations

import warnings
from typing import Any

from memlib.notebook._common import cjk_font, pyplot


def test_the_set_up_installed_a_cjk_font_that_matplotlib_finds() -> None:
    # scripts/system-deps.sh installs fonts-noto-cjk; without it this is None.
    assert cjk_font() is not None, "no CJK font: run scripts/system-deps.sh (fonts-noto-cjk)"


def test_a_chinese_title_draws_without_a_missing_glyph() -> None:
    plt = pyplot()
    figure, axes = plt.subplots()
    try:
        axes.set_title("分层记忆 メモリ layered memory")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            figure.canvas.draw()
    finally:
        plt.close(figure)
    missing = [str(w.message) for w in caught if "missing from font" in str(w.message)]
    assert missing == []


def test_a_font_installed_after_matplotlib_cached_its_list_is_found(monkeypatch: Any) -> None:
    from matplotlib import font_manager

    manager = font_manager.fontManager
    monkeypatch.setattr(manager, "ttflist", [f for f in manager.ttflist if "CJK" not in f.name])
    assert cjk_font() is not None
