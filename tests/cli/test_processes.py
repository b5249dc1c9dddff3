"""docs/reference.md "Stores": two real processes racing on one JSONL file.

Each child opens its own store and reads the file *before* the barrier, so its cached
id set is stale by the time it writes: only the lock plus "bring the id set up to date
inside the lock" can keep the file free of duplicates.
"""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

from memlib import RemoteMemoryDuplicateError, RemoteMemoryStore

TIMEOUT = 30


def _item(memory_id: str, who: str) -> dict:
    return {
        "kind": "conversation",
        "memory_id": memory_id,
        "content": f"written by {who}",
        "summary": f"race {memory_id}",
        "source": {
            "source_id": f"src-{who}",
            "source_type": "test",
            "title": "race",
            "captured_at": "2026-08-09T12:00:00Z",
        },
    }


def _race_worker(path: str, batches: list[list[str]], who: str, barrier, results) -> None:
    store = RemoteMemoryStore(path, user_id="alice")
    for ids in batches:
        store.read_all()  # a stale view on purpose
        barrier.wait(TIMEOUT)
        try:
            store.append_many([_item(i, who) for i in ids])
        except RemoteMemoryDuplicateError as exc:
            results.put((who, tuple(ids), "duplicate", str(exc)))
        except Exception as exc:  # noqa: BLE001 - anything else is reported to the parent
            results.put((who, tuple(ids), "error", repr(exc)))
        else:
            results.put((who, tuple(ids), "ok", ""))


def _run(context_name: str, path: Path, plans: dict[str, list[list[str]]]) -> list[tuple]:
    context: Any = multiprocessing.get_context(context_name)
    barrier = context.Barrier(len(plans))
    results = context.Queue()
    processes = [
        context.Process(target=_race_worker, args=(str(path), batches, who, barrier, results))
        for who, batches in plans.items()
    ]
    for process in processes:
        process.start()
    expected = sum(len(batches) for batches in plans.values())
    collected = [results.get(timeout=TIMEOUT) for _ in range(expected)]
    for process in processes:
        process.join(TIMEOUT)
        assert process.exitcode == 0
    return collected


def _file_ids(path: Path) -> list[str]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return [json.loads(line)["memory_id"] for line in data.splitlines()]


def test_same_memory_id_at_the_same_moment_exactly_one_wins(tmp_path):
    path = tmp_path / "users" / "alice" / "records.jsonl"
    rounds = 6
    ids = [[f"race-{n}"] for n in range(rounds)]
    results = _run("fork", path, {"A": ids, "B": ids})
    assert not [r for r in results if r[2] == "error"], results
    for n in range(rounds):
        outcome = sorted(r[2] for r in results if r[1] == (f"race-{n}",))
        assert outcome == ["duplicate", "ok"], (n, results)
        (message,) = [r[3] for r in results if r[1] == (f"race-{n}",) and r[2] == "duplicate"]
        assert message == f"duplicate memory_id: race-{n}"
    assert _file_ids(path) == [f"race-{n}" for n in range(rounds)]
    # the winner's text is what is stored, whole
    stored = RemoteMemoryStore(path, user_id="alice").read_all()
    winners = {r[1][0]: r[0] for r in results if r[2] == "ok"}
    assert all(s.content == f"written by {winners[s.memory_id]}" for s in stored)


def test_overlapping_batches_one_batch_wins_whole(tmp_path):
    path = tmp_path / "records.jsonl"
    plans = {
        "A": [["a-1", "shared-1", "a-2"], ["a-3", "shared-2"]],
        "B": [["b-1", "shared-1"], ["shared-2", "b-2", "b-3"]],
    }
    results = _run("fork", path, plans)
    assert not [r for r in results if r[2] == "error"], results
    stored = _file_ids(path)
    for round_number in range(2):
        batches = {who: tuple(plans[who][round_number]) for who in plans}
        outcomes = {
            who: next(r[2] for r in results if r[0] == who and r[1] == batches[who])
            for who in plans
        }
        assert sorted(outcomes.values()) == ["duplicate", "ok"]
        for who, batch in batches.items():
            own = [i for i in batch if not i.startswith("shared-")]
            present = [i in stored for i in own]
            assert present == [outcomes[who] == "ok"] * len(own)  # all or nothing
    assert sorted(i for i in stored if i.startswith("shared-")) == ["shared-1", "shared-2"]
    assert len(stored) == len(set(stored))


def test_interleaved_appends_from_two_processes_keep_every_line_whole(tmp_path):
    path = tmp_path / "records.jsonl"
    plans = {who: [[f"{who}-{n}-{k}" for k in range(3)] for n in range(10)] for who in ("A", "B")}
    results = _run("fork", path, plans)
    assert {r[2] for r in results} == {"ok"}, results
    stored = _file_ids(path)
    assert sorted(stored) == sorted(i for batches in plans.values() for b in batches for i in b)
    # each batch is one write: its lines stay together, in order
    for batches in plans.values():
        for batch in batches:
            start = stored.index(batch[0])
            assert stored[start : start + len(batch)] == batch
    assert len(RemoteMemoryStore(path, user_id="alice").read_all()) == 60
