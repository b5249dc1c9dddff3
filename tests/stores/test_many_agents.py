"""Many agent sessions on one PostgreSQL server (``benchmarks/load.py``, issue 36).

Sessions are processes of their own that mix recall with every ranker (hybrid on the
hashing embedder's vectors), remembers with colliding ids, supersedes and retracts. What
is asserted are the invariants, never timings: every acknowledged write is in the store as
written and nothing else landed; every session finished within its bound; no error but
memlib's expected ones. A crash round SIGKILLs sessions mid-run. The full levels (8, 32 and
64 sessions at 30 s) are the ``stress`` test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.pgserver import fresh_url, pg_dsn, pg_url, pgvector_dsn  # noqa: F401  (fixtures)

from benchmarks import load

RECORDS = 2_000
DIMENSION = 64


@pytest.fixture(params=["postgresql", "pgvector"])
def loaded(request: pytest.FixtureRequest) -> Iterator[str]:
    """The corpus with vectors on Debian's server (hybrid in each session's client) and on
    pgvector's (hybrid in the database, on a second connection of each session)."""
    dsn = request.getfixturevalue("pg_dsn" if request.param == "postgresql" else "pgvector_dsn")
    for url in fresh_url(dsn):
        load.preload(url, RECORDS, DIMENSION)
        with load.opened(url) as store:
            assert ("in the database" in store.describe_dense_search()[0]) is (
                request.param == "pgvector"
            )
        yield url


def test_eight_sessions_keep_every_acknowledged_write(loaded: str, tmp_path: Path) -> None:
    # 20 ids to remember: sessions take each other's at once.
    plan = load.Plan(loaded, 8, 3.0, RECORDS, dimension=DIMENSION, id_pool=20)
    level = load.run_level(plan, tmp_path, slack=30.0)
    assert load.failures(level) == []
    assert level["check"]["ok"] and level["check"]["acknowledged"] > 0
    # Every operation ran, and sessions met each other's ids.
    wanted = {f"recall {r}" for r in plan.rankers} | set(load.WRITES)
    assert set(level["ops"]) == wanted
    assert level["errors_by_type"].get("RemoteMemoryDuplicateError", 0) > 0
    assert set(level["errors_by_type"]) <= load.EXPECTED


def test_killed_sessions_lose_nothing_they_acknowledged(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    load.preload(pg_url, RECORDS, 0)  # lexical sessions: no vectors to write
    plan = load.Plan(pg_url, sessions=6, seconds=3.0, preloaded=RECORDS, seed=1)
    level = load.run_level(plan, tmp_path, slack=30.0, kills=3)
    assert len(level["killed"]) == 3
    assert load.failures(level) == []
    # The store still opens, answers and takes a write.
    with load.opened(pg_url) as store:
        store.append(**_item("after-the-kills"))
        assert store.records_by_id(["after-the-kills"])


def _item(memory_id: str) -> dict[str, object]:
    source = {
        "source_id": "t",
        "source_type": "conversation_transcript",
        "title": "by hand",
        "captured_at": "2026-08-01T00:00:00Z",
    }
    return {
        "kind": "conversation",
        "memory_id": memory_id,
        "content": "x",
        "summary": "x",
        "source": source,
    }


def test_the_check_finds_a_lost_an_altered_and_an_unacknowledged_write(
    pg_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    before = load.count_records(pg_url)
    with load.opened(pg_url) as store:
        store.append(**_item("kept"))
    acks = [["kept", "conversation", "by hand", None, None, None]]
    (tmp_path / "acks-0.jsonl").write_text(json.dumps(acks[0]) + "\n", encoding="utf-8")
    assert load.check_level(pg_url, tmp_path, before, killed=0)["ok"]
    with open(tmp_path / "acks-0.jsonl", "a", encoding="utf-8") as log:
        log.write(json.dumps(["never-written", "conversation", "t", None, None, None]) + "\n")
        log.write('["torn", "conv')  # a session killed mid-line acknowledged nothing
    lost = load.check_level(pg_url, tmp_path, before, killed=0)
    assert not lost["ok"] and lost["lost_or_altered"] == 1
    (tmp_path / "acks-0.jsonl").write_text(
        json.dumps(["kept", "conversation", "another writer", None, None, None]) + "\n",
        encoding="utf-8",
    )
    assert load.check_level(pg_url, tmp_path, before, killed=0)["lost_or_altered"] == 1
    with load.opened(pg_url) as store:
        store.append(**_item("unacknowledged"))
    (tmp_path / "acks-0.jsonl").write_text(json.dumps(acks[0]) + "\n", encoding="utf-8")
    assert not load.check_level(pg_url, tmp_path, before, killed=0)["ok"]
    assert load.check_level(pg_url, tmp_path, before, killed=1)["ok"]


@pytest.mark.stress
def test_8_32_64_sessions_at_100k_records(tmp_path: Path) -> None:
    """The benchmark's levels and its crash round on a durable server of its own."""
    out = tmp_path / "out"
    args = f"--records 100000 --sessions 8,32,64 --seconds 30 --workdir {tmp_path} --out {out}"
    assert load.main(args.split()) == 0
    (path,) = out.glob("load-*.json")
    report = json.loads(path.read_text(encoding="utf-8"))
    (size,) = report["sizes"]
    assert [level["sessions"] for level in size["levels"]] == [8, 32, 64, 8]
    for level in size["levels"]:
        assert load.failures(level) == [], level["sessions"]
