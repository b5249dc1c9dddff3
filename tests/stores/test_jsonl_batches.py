"""An ``append_many`` batch whose writer died before its fsync returned is never seen.

The JSONL store notes in its lock file where a multi-record batch begins until the
batch is durable. These tests leave such a note behind (as a killed writer would) with
complete lines after it, and check every reader of the file: the store, the next
writer and ``memlib doctor``.
"""

from __future__ import annotations

import json
from pathlib import Path

from memlib import RemoteMemoryStore
from memlib.sample import SAMPLE_USER_ID, open_sample_store, sample_records
from memlib.stores.jsonl._doctor import check_store, repair_torn_tail


def _crashed_batch(root: Path) -> tuple[RemoteMemoryStore, int, list[str]]:
    store = open_sample_store(root)
    acknowledged = store.path.stat().st_size
    store.lock_path.write_bytes(b"pending %d\n" % acknowledged)
    line = json.loads(store.path.read_bytes().splitlines()[0])
    ids = ["unacked-1", "unacked-2", "unacked-3"]
    with open(store.path, "ab") as handle:
        for memory_id in ids:
            line["memory_id"] = memory_id
            handle.write(
                json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
            )
    return store, acknowledged, ids


def _ids(path: Path) -> set[str]:
    return {r.memory_id for r in RemoteMemoryStore(path, user_id=SAMPLE_USER_ID).read_all()}


def test_readers_ignore_an_unfinished_batch(tmp_path: Path) -> None:
    store, _, ids = _crashed_batch(tmp_path)
    assert _ids(store.path).isdisjoint(ids)
    assert len(_ids(store.path)) == len(sample_records())


def test_the_next_writer_cuts_it_and_clears_the_note(tmp_path: Path) -> None:
    store, acknowledged, ids = _crashed_batch(tmp_path)
    writer = RemoteMemoryStore(store.path, user_id=SAMPLE_USER_ID)
    item = dict(sample_records()[0], memory_id="unacked-1")  # the dead batch's id is free
    writer.append(**item)
    assert store.lock_path.read_bytes() == b""
    assert _ids(store.path) - {r["memory_id"] for r in sample_records()} == {"unacked-1"}
    assert store.path.stat().st_size > acknowledged


def test_a_finished_batch_leaves_no_note(tmp_path: Path) -> None:
    store = open_sample_store(tmp_path)
    assert store.lock_path.read_bytes() == b""
    assert len(_ids(store.path)) == len(sample_records())


def test_doctor_reports_and_repairs_it(tmp_path: Path) -> None:
    store, acknowledged, _ = _crashed_batch(tmp_path)
    report = check_store(store.path)
    assert not report.healthy
    assert report.torn_bytes == store.path.stat().st_size - acknowledged
    repaired = repair_torn_tail(store.path)
    assert repaired is not None and repaired[1] == report.torn_bytes
    assert store.path.stat().st_size == acknowledged
    assert store.lock_path.read_bytes() == b""
    assert check_store(store.path).healthy
