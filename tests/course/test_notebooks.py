"""The committed notebooks are what nbval can trust.

nbval re-executes the solution editions and compares outputs (so stale outputs fail
there; test_editions.py ties each student edition to its twin); these checks catch what
it cannot, in all four editions: cells left unexecuted or run out of order, errors
saved as outputs, machine-specific text, and output comparison switched off for cells
that are not widgets.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

FOLDER = Path(__file__).resolve().parents[2] / "notebooks"
# The student notebooks, their solution twins, and every other edition (notebooks/zh/)
# with its twins: all are committed with outputs, so all are checked here.
NOTEBOOKS = sorted(p for p in FOLDER.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
HELPERS = sorted(
    p.stem
    for p in (Path(__file__).resolve().parents[2] / "memlib" / "notebook").glob("*.py")
    if p.stem != "__init__"
)
HEAVY = ("pandas", "numpy", "matplotlib", "ipywidgets")
IGNORE_TAGS = {"nbval-ignore-output", "nbval-skip", "raises-exception"}
LEAKS = re.compile(
    r"/tmp/|/root/|/home/|/work/|0x[0-9a-f]{6,}|sk-ant-[A-Za-z0-9_-]{6,}|memlib-demo-|tmp[a-z0-9_]{8}"
)


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _text(output: dict) -> str:
    parts = []
    if "text" in output:
        parts.append("".join(output["text"]))
    for key, value in output.get("data", {}).items():
        if key.startswith("text/") or key == "application/json":
            parts.append(value if isinstance(value, str) else "".join(value))
    return "\n".join(parts)


def test_there_is_a_course() -> None:
    assert len(NOTEBOOKS) >= 1


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.relative_to(FOLDER).as_posix())
def test_executed_top_to_bottom(path: Path) -> None:
    counts = [c.get("execution_count") for c in _cells(path) if c["cell_type"] == "code"]
    assert counts, f"{path.name} has no code cell"
    assert counts == list(range(1, len(counts) + 1)), (
        f"{path.name}: execution counts {counts} — re-run it top to bottom in a fresh kernel"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.relative_to(FOLDER).as_posix())
def test_no_errors_or_machine_specific_output(path: Path) -> None:
    for index, cell in enumerate(_cells(path)):
        # nbclient's record_timing writes wall-clock times into cell metadata.
        assert "execution" not in cell.get("metadata", {}), (
            f"{path.name} cell {index} records execution times: run with record_timing=False"
        )
        for output in cell.get("outputs", []):
            assert output.get("output_type") != "error", f"{path.name} cell {index} saved an error"
            leak = LEAKS.search(_text(output))
            assert leak is None, f"{path.name} cell {index} prints {leak.group()!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.relative_to(FOLDER).as_posix())
def test_only_widget_cells_skip_comparison(path: Path) -> None:
    for index, cell in enumerate(_cells(path)):
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell["cell_type"] != "code" or not tags & IGNORE_TAGS:
            continue
        source = "".join(cell["source"])
        assert re.search(r"explorer\(|widgets\.|\.value\s*=|MODEL_ID|ANTHROPIC_API_KEY", source), (
            f"{path.name} cell {index} skips output comparison "
            "but is not a widget or live-model cell"
        )


def test_importing_the_course_helpers_loads_no_heavy_package() -> None:
    """pandas, matplotlib and ipywidgets load when a helper runs, not on import."""
    imports = "; ".join(f"import memlib.notebook.{name}" for name in HELPERS)
    probe = (
        f"import sys; import memlib.notebook; {imports}; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", proc.stdout
