"""``python -m benchmarks.mcp_session`` runs end to end at a tiny size (about 30 s).

At N=300, one round, two queries per set: every floor, every cold session and warm
series of both stores and both lexical rankers, and the remember series. What is
checked is what the full run relies on: every cell is there with positive figures, the
servers' own peak RSS came back through the wrapper, the MCP answers equal the tool
handler's in process, and the stores are as they were built once the remember series
wrote into them (a rerun reuses them). Speed is not checked here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

ROOT = Path(__file__).resolve().parents[2]
N = 300
QUERIES = 2
REMEMBERS = 3
BACKENDS = ("jsonl", "sqlite")
RANKERS = ("baseline", "bm25")
SETS = ("rare", "common")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, Path]:
    work = tmp_path_factory.mktemp("mcp-bench")
    out = work / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.mcp_session", "--sizes", str(N), "--queries",
         str(QUERIES), "--cold-rounds", "1", "--remembers", str(REMEMBERS), "--budget", "5",
         "--workdir", str(work), "--out", str(out), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(out.read_text(encoding="utf-8")), done.stdout, work


def test_floors_are_fresh_processes_and_a_bare_server_session(
    run: tuple[dict[str, Any], str, Path],
) -> None:
    floor = run[0]["floor"]
    for key in ("import_memlib", "import_sdk_server", "import_memlib_mcp_server"):
        assert floor[key]["wall_s"] > 0 and floor[key]["peak_rss_mb"] > 0
    # memlib's server module imports the SDK's server pieces: it cannot weigh less.
    assert floor["import_memlib_mcp_server"]["peak_rss_mb"] >= (
        floor["import_sdk_server"]["peak_rss_mb"])
    bare = floor["bare_session"]
    assert 0 < bare["ready_s"] <= bare["first_call_s"] <= bare["closed_s"]
    assert bare["peak_rss_mb"] > 0
    assert floor["echo_chars"] > 0
    for stats in floor["echo_warm"].values():
        assert stats["n"] >= 1 and stats["p50_ms"] > 0


def test_every_cold_session_is_timed_beside_a_fresh_memlib_recall(
    run: tuple[dict[str, Any], str, Path],
) -> None:
    (size,) = run[0]["sizes"]
    assert size["n"] == N
    for backend in BACKENDS:
        for ranker in RANKERS:
            for name in SETS:
                cell = size["cold"][backend][ranker][name]
                s = cell["session"]
                assert 0 < s["ready_s"] <= s["first_call_s"] <= s["closed_s"]
                assert 0 < s["prompt_s"] < s["closed_s"]
                # The server exited by itself and its wrapper reported its peak.
                assert s["peak_rss_mb"] is not None and s["peak_rss_mb"] > 0
                assert cell["cli_recall"]["wall_s"] > 0
                assert cell["first_recall_minus_cli_s"] == pytest.approx(
                    s["first_call_s"] - cell["cli_recall"]["wall_s"], abs=1e-3)


def test_warm_calls_answer_as_the_handler_does_in_process(
    run: tuple[dict[str, Any], str, Path],
) -> None:
    (size,) = run[0]["sizes"]
    for backend in BACKENDS:
        for ranker in RANKERS:
            for name in SETS:
                c = size["warm"][backend][ranker][name]
                assert c["queries"] == QUERIES
                assert c["same_as_handler"] is True
                for kind in ("recall", "handler", "mcp"):
                    assert c[kind]["n"] == QUERIES and c[kind]["p50_ms"] > 0
                assert c["mcp_over_recall"] > 0


def test_remember_series_and_the_stores_are_put_back(
    run: tuple[dict[str, Any], str, Path],
) -> None:
    data, stdout, work = run
    (size,) = data["sizes"]
    for backend in BACKENDS:
        c = size["remember"][backend]
        assert c["mcp"]["n"] == REMEMBERS and c["append"]["n"] == REMEMBERS
        assert c["mcp"]["p50_ms"] > 0 and c["append"]["p50_ms"] > 0
    from memlib.stores import open_store

    folder = work / f"mcp-{N}"
    for url in (f"jsonl:{folder / 'records.jsonl'}", f"sqlite:{folder / 'records.sqlite'}"):
        store = open_store(url, user_id="bench-user")
        try:
            ids = {record.memory_id for record in store.read_all()}
        finally:
            store.close()
        assert len(ids) == N
        assert not any(i.startswith(("mcpmem-", "libmem-")) for i in ids)
    for heading in ("session start, cold", "warm calls in one session", "remember, durable",
                    "(b) python + the SDK's server imports"):
        assert heading in stdout
