"""``python -m benchmarks.pair_recall`` runs end to end at a tiny size (a few seconds).

What the full run relies on is checked, not its speed: the session stores are built
(``benchmarks.source_lookup``) and copied once per vector kind, turn and pair vectors
are put for every live record under their two model names, the vectors are those
``HashingEmbedder(384)`` gives, turn and pair recalls both return hits warm and in a
fresh ``memlib recall`` (which answers as the warm engine does: it picked the store's
recorded model), the floor of the extra work was measured, a second run reuses the
copies, and a bad ``--sizes`` is one line. PostgreSQL is left out.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks import pair_recall

ROOT = Path(__file__).resolve().parents[2]


def run(tmp_path: Path, out: Path, backends: str = "jsonl,sqlite",
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.pair_recall", "--sizes", "300",
         "--backends", backends, "--queries", "6", "--cold-rounds", "1",
         "--workdir", str(tmp_path / "work"), "--sessions", str(tmp_path / "sessions"),
         "--out", str(out), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_runs_at_a_tiny_size(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    done = run(tmp_path, out)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["settings"]["models"] == {"turn": "memlib-hashing-384",
                                            "pair": "memlib-hashing-384+pair"}
    assert "load_average_at_start" in report["machine"]
    (size,) = report["sizes"]
    assert size["records"] == 300 and size["retracted"] == 3
    assert size["vectors_check"]["max_abs_difference"] < 1e-5
    live = 300 - 3
    for name in ("jsonl", "sqlite"):
        for kind in pair_recall.KINDS:
            built = size["builds"][f"{name}-{kind}"]
            assert built["stored"] == live
            assert built["model"] == report["settings"]["models"][kind]
        row = size["backends"][name]
        warm = row["warm"]
        for kind in pair_recall.KINDS:
            assert warm[kind]["n"] == 6 and warm[kind]["p50_ms"] > 0
            assert warm[kind]["with_hits"] == 6
        assert warm["ratio_p50"] > 0
        floor = warm["floor_source_neighbours"]
        assert floor["p50_ms"] > 0 and floor["ids_mean"] > 0
        fresh = row["fresh_process"]
        for kind in pair_recall.KINDS:
            assert fresh[kind]["wall_s"] > 0 and fresh[kind]["peak_rss_mb"] > 0
            assert fresh[kind]["hits"] > 0 and fresh[kind]["same_as_warm"]
    assert "pair p50" in done.stdout and "fresh process" in done.stdout

    again = run(tmp_path, tmp_path / "again.json", backends="sqlite")
    assert again.returncode == 0, again.stderr[-2000:]
    reused = json.loads((tmp_path / "again.json").read_text(encoding="utf-8"))
    builds = reused["sizes"][0]["builds"]
    assert set(builds) == {"sqlite-turn", "sqlite-pair"}
    for key, built in builds.items():
        assert built == {**size["builds"][key], "reused": True}


def test_a_bad_size_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.pair_recall", "--sizes", "10,x"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "error: argument --sizes: not comma-separated integers: '10,x'" in done.stderr
    assert "Traceback" not in done.stderr
