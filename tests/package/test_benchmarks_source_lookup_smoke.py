"""``python -m benchmarks.source_lookup`` runs end to end at a tiny size (a few seconds).

What the full run relies on is checked, not its speed: the corpus is real sessions
(interleaved, some turns retracted), every store's ``source_neighbours`` passed the
correctness check (against the corpus layout and ``source_neighbours_of`` over
``read_all``) and the check catches a wrong answer, SQLite's statement searches
``records_source`` by source, every backend has its warm and fresh-process figures
beside their floors, the schema-5 copy gains the index on open, and a bad ``--sizes``
is one line. PostgreSQL is left out (``--backends jsonl,sqlite``).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import source_lookup
from memlib.stores._sources import SourceNeighbours

ROOT = Path(__file__).resolve().parents[2]


def test_runs_at_a_tiny_size(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.source_lookup", "--sizes", "200",
         "--backends", "jsonl,sqlite", "--lookups", "20", "--cold-rounds", "2",
         "--workdir", str(tmp_path / "work"), "--out", str(out), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    (size,) = report["sizes"]
    assert size["records"] == 200 and size["retracted"] == 3 and size["sources"] == 12
    assert set(size["backends"]) == {"jsonl", "sqlite"}
    for name, row in size["backends"].items():
        checked = row["checked"]
        assert checked["ok"] and checked["against_layout"] and checked["against_read_all"], name
        assert checked["answered"] > 0 and checked["with_previous"] > 0
        for series in ("one_id", "batch"):
            warm = row["warm"][series]
            assert warm["neighbours"]["p50_us"] > 0 and warm["floor"]["p50_us"] > 0
            assert warm["ids_only"]["p50_us"] > 0
        cold = row["fresh_process"]
        assert cold["rounds"] == 2
        assert cold["neighbours"]["open_and_call_ms"] > 0 and cold["floor"]["open_and_call_ms"] > 0
        assert name in size["builds"]
    assert size["backends"]["sqlite"]["searches_records_source_by_source"] is True
    assert size["sqlite_migration"]["schema_after"] == 6
    assert "1000 ids" in done.stdout and "fresh process" in done.stdout
    assert "schema 5 -> 6" in done.stdout


def test_the_corpus_is_interleaved_sessions() -> None:
    plan = source_lookup.layout(400)
    assert len(plan.ids) == len(set(plan.ids)) == 400
    first_sessions = plan.sources[:source_lookup.TURNS]
    assert len(set(first_sessions)) > 1  # append order is not source order
    per_source: dict[str, int] = {}
    for source in plan.sources:
        per_source[source] = per_source.get(source, 0) + 1
    assert set(per_source.values()) == {source_lookup.TURNS}
    assert plan.retracted and set(plan.retracted) <= set(plan.ids)


def test_the_check_catches_a_wrong_answer() -> None:
    plan = source_lookup.layout(200)

    class Forgetful:
        """Answers every id with no turn before it."""

        backend = "forgetful"

        def source_neighbours(self, ids: list[str]) -> dict[str, SourceNeighbours]:
            right = plan.expected(ids)
            return {m: SourceNeighbours(None, after) for m, (_, after) in right.items()}

    with pytest.raises(RuntimeError, match="source_neighbours is wrong"):
        source_lookup.check(Forgetful(), plan, 10**6, random.Random(1))


def test_a_bad_size_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.source_lookup", "--sizes", "10,x"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "error: argument --sizes: not comma-separated integers: '10,x'" in done.stderr
    assert "Traceback" not in done.stderr
