"""Bulk import: ``append_many`` batches and ``memlib import FILE.jsonl`` on every backend."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

from memlib import RecallEngine, RemoteMemoryDuplicateError, RemoteMemoryValidationError, open_store
from memlib._bulk import import_jsonl
from memlib.cli import main
from memlib.sample import SAMPLE_AS_OF, fixed_clock, sample_records, scope_path


def _line(item: dict[str, Any]) -> str:
    data = dict(item)
    data["kind"] = str(data["kind"])
    data["source"] = data["source"].to_dict()
    return json.dumps(data, ensure_ascii=False)


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _items(n: int, prefix: str = "bulk") -> list[str]:
    return [
        json.dumps(
            {
                "kind": "conversation",
                "memory_id": f"{prefix}-{i:04d}",
                "summary": f"bulk record {i}",
                "content": f"layered memory bulk import number {i} 记忆",
                "source": {
                    "source_id": f"s-{i}",
                    "source_type": "import",
                    "title": "bulk",
                    "captured_at": f"2026-08-0{1 + i % 9}T00:00:00Z",
                },
            }
        )
        for i in range(n)
    ]


@pytest.fixture(params=("jsonl", "sqlite", "postgresql"))
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "jsonl":
        return f"jsonl:{scope_path(tmp_path, 'alice')}"
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'bulk.db'}"
    return str(request.getfixturevalue("pg_url"))


def test_import_file_in_batches(url: str, tmp_path: Path) -> None:
    source = _write(tmp_path / "in.jsonl", [_line(i) for i in sample_records()] + ["", *_items(30)])
    store = open_store(url, user_id="alice", clock=fixed_clock())
    report = import_jsonl(store, source, batch_size=7)
    assert (report.records, report.batches) == (45, 7)
    records = open_store(url, user_id="alice").read_all()
    assert [r.memory_id for r in records][:15] == [i["memory_id"] for i in sample_records()]
    assert len(records) == 45
    result = RecallEngine(store).recall("layered memory", as_of=SAMPLE_AS_OF, query_id="q")
    assert result.candidate_records == 33 and result.hits[0].memory_id == "conversation-003"
    store.close()


def test_duplicates_in_file_or_store_are_reported_by_id_and_nothing_is_written(
    url: str, tmp_path: Path
) -> None:
    store = open_store(url, user_id="alice", clock=fixed_clock())
    in_file = _write(tmp_path / "dup.jsonl", _items(5) + _items(2))
    duplicate = RemoteMemoryDuplicateError
    with pytest.raises(duplicate, match="^duplicate memory_id: bulk-0000, bulk-0001$"):
        import_jsonl(store, in_file, batch_size=2)
    assert store.read_all() == ()
    store.append_many([json.loads(x) for x in _items(8)[6:]])  # bulk-0006, bulk-0007
    in_store = _write(tmp_path / "dup2.jsonl", _items(10))
    with pytest.raises(duplicate, match="^duplicate memory_id: bulk-0006, bulk-0007$"):
        import_jsonl(store, in_store, batch_size=3)
    stored = open_store(url, user_id="alice").read_all()
    assert [r.memory_id for r in stored] == ["bulk-0006", "bulk-0007"]
    store.close()


def test_a_bad_line_names_its_number_and_nothing_is_written(tmp_path: Path) -> None:
    url = f"jsonl:{scope_path(tmp_path, 'alice')}"
    store = open_store(url, user_id="alice")

    def source(captured_at: str) -> dict[str, str]:
        return {"source_id": "s", "source_type": "t", "title": "t", "captured_at": captured_at}

    cases = {
        "{not json": "line 3: invalid JSON",
        json.dumps(
            {
                "memory_id": "x",
                "summary": "s",
                "content": " ",
                "source": source("2026-08-01T00:00:00Z"),
            }
        ): "line 3: content must not be empty",
        json.dumps(
            {"memory_id": "x", "summary": "s", "content": "c", "source": source("yesterday")}
        ): "line 3: invalid timestamp: 'yesterday'",
        json.dumps({"memory_id": "x"}): "line 3: record is missing content, summary, source",
        json.dumps(
            {"memory_id": "x", "kind": "retraction"}
        ): "line 3: retractions are not imported",
        json.dumps(
            {"memory_id": "x", "user_scope": "0" * 16}
        ): "line 3: memory x belongs to another user scope",
        "[1, 2]": "line 3: not a JSON object",
    }
    for bad, message in cases.items():
        path = _write(tmp_path / "bad.jsonl", _items(2) + [bad] + _items(3, "more"))
        with pytest.raises(Exception) as info:
            import_jsonl(store, path, batch_size=1)
        assert str(info.value).startswith(message), (bad, str(info.value))
        assert store.read_all() == ()


def test_exported_records_import_into_another_store(tmp_path: Path) -> None:
    from memlib.sample import open_sample_store

    origin = open_sample_store(tmp_path / "origin")
    exported = _write(
        tmp_path / "export.jsonl",
        [json.dumps(r.to_dict(), ensure_ascii=False) for r in origin.read_all()],
    )
    target = open_store(f"sqlite:{tmp_path / 't.db'}", user_id="alice", clock=fixed_clock())
    assert import_jsonl(target, exported).records == 15
    assert target.read_all() == origin.read_all()


def test_import_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _write(tmp_path / "in.jsonl", _items(12))
    url = f"sqlite:{tmp_path / 'cli.db'}"
    assert (
        main(
            [
                "--store",
                url,
                "--user",
                "alice",
                "import",
                str(source),
                "--batch-size",
                "5",
                "--progress",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert captured.out == "imported 12 records in 3 batches\n"
    assert "importing" in captured.err  # the tqdm bar
    assert main(["--store", url, "--user", "alice", "import", str(source), "--no-progress"]) == 2
    assert capsys.readouterr().err.startswith("memlib: error: duplicate memory_id: bulk-0000, ")
    assert main(["--store", url, "--user", "alice", "import", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["import", str(source), "--batch-size", "0"])
    assert len(open_store(url, user_id="alice").read_all()) == 12


def test_append_many_is_one_write_per_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One write and one fsync of the records file per batch, whatever its size. (The
    lock file is fsynced too, twice: it notes where the batch began until it is durable.)"""
    import os

    path = scope_path(tmp_path, "alice")
    store = open_store(f"jsonl:{path}", user_id="alice", clock=fixed_clock())
    calls: dict[str, list[str]] = {"write": [], "fsync": []}
    real_write, real_fsync = os.write, os.fsync

    def name(fd: int) -> str:
        return os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))

    def write(fd: int, data: bytes) -> int:
        calls["write"].append(name(fd))
        return real_write(fd, data)

    def fsync(fd: int) -> None:
        calls["fsync"].append(name(fd))
        real_fsync(fd)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)
    store.append_many([json.loads(x) for x in _items(500)])
    once = {
        "write": ["records.jsonl"],
        "fsync": ["records.jsonl.lock", "records.jsonl", "records.jsonl.lock"],
    }
    assert calls == once
    with pytest.raises(RemoteMemoryValidationError):
        store.append_many([json.loads(x) for x in _items(3, "new")] + [{"memory_id": "bad"}])
    assert calls == once
    assert len(store.read_all()) == 500


def test_a_postgresql_import_and_embed_leave_the_planner_statistics(
    tmp_path: Path,
    pg_url: str,  # noqa: F811
) -> None:
    """Until autovacuum runs, PostgreSQL plans on guesses (a scope scan for a neighbour
    lookup, a sort on disk to load vectors): an import and ``memlib embed`` ANALYZE."""
    from memlib.cli import main

    store = open_store(pg_url, user_id="alice", clock=fixed_clock())
    schema = store.schema  # type: ignore[attr-defined]
    conn = store._connection()  # type: ignore[attr-defined]

    def analysed(table: str) -> bool:
        row = conn.execute(
            "SELECT last_analyze FROM pg_stat_user_tables WHERE schemaname = %s AND relname = %s",
            (schema, table),
        ).fetchone()
        return row is not None and row[0] is not None

    assert not analysed("records")
    import_jsonl(store, _write(tmp_path / "in.jsonl", _items(40)), batch_size=16)
    assert analysed("records") and analysed("postings")
    conn.execute(f"SELECT pg_stat_reset_single_table_counters('{schema}.vectors'::regclass)")
    assert not analysed("vectors")
    assert main(["--store", pg_url, "--user", "alice", "--embedder", "hashing", "embed"]) == 0
    assert analysed("vectors")
