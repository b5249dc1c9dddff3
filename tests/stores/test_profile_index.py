"""SQLite answers ``latest_profile`` through the partial index of non-conversation
records: every session start and profile read asks it, and a scan of the scope cost
3.3 s at 1M records (docs/mcp-bench.md)."""

from __future__ import annotations

from pathlib import Path

from memlib import MemoryKind, MemorySource
from memlib.stores import open_store


def test_latest_profile_reads_the_partial_index_not_the_scope(tmp_path: Path) -> None:
    store = open_store(f"sqlite:{tmp_path / 'memory.db'}", user_id="alice")
    source = MemorySource(
        source_id="s", source_type="t", title="t", captured_at="2026-08-01T12:00:00Z"
    )
    store.append(
        kind=MemoryKind.CONVERSATION,
        memory_id="c-1",
        content="a turn",
        summary="a turn",
        source=source,
    )
    store.append(
        kind=MemoryKind.PROFILE,
        memory_id="p-1",
        content="Alice likes tea.",
        summary="profile",
        source=source,
    )
    conn = store._connection()  # type: ignore[attr-defined]
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    profile = store.latest_profile()
    conn.set_trace_callback(None)
    assert profile is not None and profile.memory_id == "p-1"
    [query] = [sql for sql in seen if "kind <> 'conversation'" in sql]
    plan = " ".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + query))
    assert "records_scope_kind" in plan, plan
    assert "records_recent" not in plan, plan
