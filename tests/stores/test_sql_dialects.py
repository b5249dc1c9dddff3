"""The two SQL dialects keep one contract: what one handles, the other does too.

``SqlMemoryStore`` holds the algorithm once; these tests run it through SQLite and
PostgreSQL and hold both to the JSONL store (the reference index) on the cases a
dialect could get wrong on its own. A batch that writes a record and retracts it
together can only be built by a backend's ``_append_batch`` (``append_many`` refuses
retractions), which is how a future import of exported history would write it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

from memlib import MemoryKind, RecallEngine, RemoteMemoryValidationError, StoredMemory, open_store
from memlib.normalize import normalize_recall_query
from memlib.sample import SAMPLE_AS_OF, fixed_clock
from memlib.stores._base import BaseMemoryStore
from memlib.stores.sql._common import SqlMemoryStore

USER = "alice"
SOURCE = {
    "source_id": "s",
    "source_type": "dialect_test",
    "title": "dialects",
    "captured_at": "2026-08-09T12:00:00Z",
}
QUERIES = ("layered memory", "retracted twice", "profile tea")


def _item(kind: str, memory_id: str, content: str) -> dict[str, Any]:
    return {
        "kind": kind,
        "memory_id": memory_id,
        "content": content,
        "summary": content[:40],
        "source": SOURCE,
    }


def _batch(store: BaseMemoryStore) -> tuple[StoredMemory, ...]:
    """Two conversations, a profile, and retractions of a conversation and the profile."""
    stored_at = store._now()
    records = [
        store._record(item, stored_at)
        for item in (
            _item("conversation", "c-1", "layered memory, retracted twice over in this batch"),
            _item("conversation", "c-2", "layered memory that stays"),
            _item("profile", "p-1", "profile: likes tea"),
        )
    ]
    retractions = [
        StoredMemory(
            memory_id=f"retract-{target}",
            user_scope=store.user_scope,
            kind=MemoryKind.RETRACTION,
            content="wrong",
            summary=f"Retracts {target}",
            source=records[0].source,
            stored_at=stored_at,
            retracts=target,
        )
        for target in ("c-1", "p-1")
    ]
    return (*records, *retractions)


def _seen(store: Any) -> list[Any]:
    """Every count and candidate a scan gives, and each recall's JSON."""
    out: list[Any] = []
    for text in QUERIES:
        query = normalize_recall_query(
            text, user_scope=store.user_scope, limit=3, issued_at=SAMPLE_AS_OF
        )
        scan = store.scan_candidates(query)
        out.append(
            (
                scan.searched_records,
                scan.candidate_records,
                scan.retracted_records,
                scan.searched_token_count,
                scan.searched_content_token_count,
                [c.memory_id for c in scan.candidates],
            )
        )
        out.append(
            RecallEngine(store).recall(text, limit=3, as_of=SAMPLE_AS_OF, query_id="q").to_json()
        )
    return out


def test_a_record_retracted_in_its_own_batch_leaves_the_index(sql_url: str, tmp_path: Path) -> None:
    reference = open_store(f"jsonl:{tmp_path / 'ref.jsonl'}", user_id=USER, clock=fixed_clock())
    store = open_store(sql_url, user_id=USER, clock=fixed_clock())
    assert isinstance(store, SqlMemoryStore)
    for target in (reference, store):
        assert isinstance(target, BaseMemoryStore)
        target._append_batch(_batch(target))
    assert store.read_all() == reference.read_all()
    seen = _seen(store)
    assert seen == _seen(reference)
    searched, candidates, retracted = seen[0][:3]
    assert (searched, candidates, retracted) == (1, 1, 1)  # c-2 only; c-1 retracted
    rows = store.posting_rows()
    assert rows and all("c-1" not in row["memory_ids"] for row in rows)
    with pytest.raises(RemoteMemoryValidationError, match="memory c-1 is already retracted"):
        store.retract("c-1", reason="again", source=SOURCE)
    store.close()
    reopened = open_store(sql_url, user_id=USER)  # as another client sees it
    assert _seen(reopened) == seen
    reopened.close()


def test_one_batch_or_two_leave_the_same_index(sql_url: str) -> None:
    """The same records written in one batch, or the retractions after the rest."""
    together = open_store(sql_url, user_id=USER, clock=fixed_clock())
    apart = open_store(sql_url, user_id="bob", clock=fixed_clock())
    assert isinstance(together, SqlMemoryStore) and isinstance(apart, SqlMemoryStore)
    together._append_batch(_batch(together))
    batch = _batch(apart)
    apart._append_batch(batch[:3])
    apart._append_batch(batch[3:])
    assert together.posting_rows() == apart.posting_rows()
    assert [row[:5] for row in _seen(together)[::2]] == [row[:5] for row in _seen(apart)[::2]]
    together.close()
    apart.close()
