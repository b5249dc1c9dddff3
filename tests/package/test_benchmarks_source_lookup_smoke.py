"""``python -m benchmarks.source_lookup`` runs end to end at a tiny size (a few seconds).

What the full run relies on is checked, not its speed: the predecessor query is right
on real sessions (and the check catches a query that forgets retractions), its plan
searches the new index, every size has its figures beside the floor's (warm and in a
fresh process), and a bad ``--sizes`` is one line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import source_lookup

ROOT = Path(__file__).resolve().parents[2]


def test_runs_at_a_tiny_size(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.source_lookup", "--sizes", "300", "--lookups", "40",
         "--workdir", str(tmp_path / "work"), "--out", str(out), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["checked_on_sessions"] == {"turns": 15, "ok": True}
    (row,) = report["sizes"]
    assert row["records"] == 300 and row["lookups"] > 0
    assert "records_source" in row["plan"]
    assert row["predecessor"]["p50_us"] > 0 and row["floor_by_memory_id"]["p50_us"] > 0
    cold = row["fresh_process"]
    assert cold["rounds"] == source_lookup.COLD_ROUNDS
    assert cold["predecessor"]["p50_us"] > 0 and cold["floor_by_memory_id"]["p50_us"] > 0
    assert "predecessor us" in done.stdout and "fresh process" in done.stdout


def test_a_bad_size_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.source_lookup", "--sizes", "10,x"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "error: argument --sizes: not comma-separated integers: '10,x'" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_session_check_catches_a_query_that_forgets_retractions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = source_lookup.PREDECESSOR.split(" AND NOT EXISTS")[0]
    forgetful = kept + " ORDER BY r.id DESC LIMIT 1"
    monkeypatch.setattr(source_lookup, "PREDECESSOR", forgetful)
    with pytest.raises(RuntimeError, match="predecessor query is wrong"):
        source_lookup.check_on_sessions(tmp_path)
