"""Reading committed notebooks: their cells, a cell's source and the text it shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_cells(path: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return found


def source(cell: dict[str, Any]) -> str:
    return "".join(cell["source"])


def output_text(cell: dict[str, Any]) -> str:
    """Every text a cell shows: streams and the text/* forms of its results."""
    parts = []
    for output in cell.get("outputs", []):
        parts.append("".join(output.get("text", "")))
        for key, value in output.get("data", {}).items():
            if key.startswith("text/"):
                parts.append(value if isinstance(value, str) else "".join(value))
    return "\n".join(parts)
