"""The fuzz targets' case counts at the end of the session (terminal and JSON)."""

from __future__ import annotations

from typing import Any

from .common import COUNTS, SCALE, SEED, write_report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not COUNTS:
        return
    path = write_report()
    total = sum(entry["cases"] for entry in COUNTS.values())
    write = terminalreporter.write_line
    terminalreporter.section("memlib fuzz")
    for target, entry in sorted(COUNTS.items()):
        write(
            f"{target}: {entry['cases']:,} cases in {entry['seconds']:.1f} s, "
            f"{entry['failures']} failing"
        )
    write(f"total: {total:,} cases (seed {SEED}, scale {SCALE:g}); counts in {path}")
