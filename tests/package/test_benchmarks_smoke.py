"""The benchmark's entry points run end to end at a tiny size (about 12 s).

``python -m benchmarks.run`` at N=100 (2 queries a set, 10 records embedded, one round
of each cold row): warm lexical rows beside bm25s, cold processes, catch-up, embedding
throughput and hybrid (with the hashing embedder: no model), the targets, and
``--readme-table`` on the report it wrote. What is checked is what the full run relies
on: every row is there, answers agree across backends, the report's keys are those
notebook 12 and the README table read. Speed is not checked here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

ROOT = Path(__file__).resolve().parents[2]
N = 100
QUERIES = 2
RANKERS = ("baseline", "bm25", "bm25+stopwords")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.run", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    pytest.importorskip("bm25s")
    out = tmp_path_factory.mktemp("bench")
    done = _run(
        *f"--sizes {N} --queries {QUERIES} --ref-queries 1 --no-postgres --cold-rankers baseline "
        f"--cold-rounds 1 --hybrid-sizes {N} --embed-records 10 --embedder hashing".split(),
        *("--append-at", "", "--out", str(out), "--workdir", str(out)),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = [p for p in out.glob("bench-????????.json")]
    return json.loads(path.read_text(encoding="utf-8")), path


def test_warm_lexical_rows_every_ranker_both_sets_beside_bm25s(
    report: tuple[dict[str, Any], Path],
) -> None:
    (size,) = report[0]["sizes"]
    warm = size["warm_lexical"]
    for backend in ("jsonl", "sqlite"):
        for ranker in RANKERS:
            for name in ("rare", "common"):
                assert warm[backend][ranker][name]["n"] == QUERIES
                assert warm[backend][ranker][name]["p50_ms"] > 0
                assert warm["over_bm25s"][backend][ranker][name] > 0
    assert warm["parity"] == {"sqlite": True}
    assert set(warm["bm25s"]) == {"rare", "common"}
    # Three words in nearly every record make nearly every record a candidate.
    rare, common = (warm["sets"][s]["candidates"]["mean"] for s in ("rare", "common"))
    assert rare < common <= N
    assert common > 0.9 * N


def test_cold_rows_and_catch_up_keep_the_keys_notebook_12_reads(
    report: tuple[dict[str, Any], Path],
) -> None:
    data, path = report
    (row,) = data["cold"]["rows"]
    cell = row["baseline"]
    for key in ("jsonl_no_index", "jsonl_index", "sqlite"):
        assert cell[key]["wall_s"] > 0 and cell[key]["peak_rss_mb"] > 0
    assert cell["same_answer"] and cell["common"]["same_answer"]
    assert row["catch_up_1000"]["over_fresh"] > 0
    assert data["cold"]["floor"]["wall_s"] > 0
    companion = json.loads(path.with_name(f"{path.stem}-cold.json").read_text("utf-8"))
    assert companion["cold"] == data["cold"]


def test_embedding_and_hybrid_rows_hold_a_vector_for_every_record(
    report: tuple[dict[str, Any], Path],
) -> None:
    data, _ = report
    assert data["embedding"]["raw_encode_rps"] > 0
    for backend in ("jsonl", "sqlite"):
        stored = data["embedding"]["stores"][backend]["vectors"]
        assert (stored["stored"], stored["missing"]) == (10, 0)
    (row,) = data["hybrid"]["rows"]
    for backend in ("jsonl", "sqlite"):
        cell = row[backend]
        assert (cell["vectors"]["stored"], cell["vectors"]["missing"]) == (N, 0)
        assert cell["warm"]["rare"]["p50_ms"] > 0
        assert cell["cold"]["common"]["wall_s"] > 0
    assert row["parity"] == {"jsonl": True, "sqlite": True}
    assert row["cold_same_answer"] == {"jsonl": True, "sqlite": True}


def test_targets_and_the_readme_table(report: tuple[dict[str, Any], Path]) -> None:
    data, path = report
    names = {t["target"] for t in data["targets"]}
    assert {
        "bm25+stopwords warm p50 <= 2x bm25s retrieve",
        "cold memlib recall on JSONL <= 1.5x SQLite",
        "catch-up: cold recall after 1,000 appended <= 1.2x one without",
        "hybrid warm p50 <= 100 ms",
        "hybrid cold memlib recall <= its floor + 1 s",
    } <= names
    for t in data["targets"]:
        assert t["met"] == (
            t["measured"] <= t["limit"] if t["unit"] != "records/s" else t["measured"] >= t["limit"]
        )
    done = _run("--readme-table", str(path))
    assert done.returncode == 0, done.stderr[-2000:]
    for text in (
        "bm25s retrieve (peer)",
        "JSONL + index file",
        "hybrid floor",
        data["date"],
        data["machine"]["cpu"],
    ):
        assert text in done.stdout
    # The README's targets: one line per target and size it names (N=100 is named only
    # by the no-regression targets, which hold at every size).
    rows = [
        line
        for line in done.stdout.splitlines()
        if line.startswith("| ") and line.split(" | ")[0][2:] in names
    ]
    named = {(t["target"], t["n"]) for t in data["targets"] if t["at_named_size"]}
    assert len(rows) == len(named) >= 1


def test_forget_empties_the_model_behind_the_pair_wrapper(monkeypatch: pytest.MonkeyPatch) -> None:
    # The throughput and warm hybrid figures must embed every text: the cache emptied
    # before each is the model's, also when the benchmark holds a pair embedder over it
    # (with a full cache, a store "embedded" 30,000 records a second).
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.hybrid_scale import forget
    from memlib._vectors import Embedder
    from memlib.rankers.embeddings import PairEmbedder, get_embedder

    class Loaded:
        name, dimension = "loaded", 8

        def __init__(self) -> None:
            self.cache = {"a text": [0.0]}

        def forget(self) -> None:
            self.cache.clear()

    loaded = Loaded()
    forget(loaded)
    assert loaded.cache == {}
    loaded.cache["a text"] = [0.0]
    forget(PairEmbedder(cast(Embedder, loaded)))  # a model with a cache only: all forget reads
    assert loaded.cache == {}
    forget(get_embedder("hashing"))  # nothing cached, nothing to do
