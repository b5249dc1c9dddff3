"""Two processes supersede the same records at once (issue 18), on every backend.

Each process opens its own store; for each of ``s-0`` … ``s-N`` both wait on a barrier
and then supersede it, so the two collide on every record. A supersede is one
batch checked under the store's lock or transaction, so for every record:

- exactly one process was told it won, and the store holds its successor and one
  retraction naming it (``superseded_by``);
- the other was refused with "already retracted", and its successor was never written;
- a fresh store reads the result cleanly, and recall shows each winner, never an old one.
"""

from __future__ import annotations

import json
import multiprocessing
import traceback
from pathlib import Path
from typing import Any

import pytest
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

from memlib import RecallEngine, RemoteMemoryValidationError, open_store

ROUNDS = 40
USER = "alice"
TIMEOUT = 300


def _item(memory_id: str, text: str) -> dict[str, Any]:
    return {
        "kind": "conversation",
        "memory_id": memory_id,
        "content": f"{text} (content)",
        "summary": text,
        "source": {
            "source_id": memory_id,
            "source_type": "race_test",
            "title": memory_id,
            "captured_at": "2026-08-09T12:00:00Z",
        },
    }


def _racer(url: str, who: int, barrier: Any, out: str) -> None:
    results: list[dict[str, Any]] = []
    try:
        store = open_store(url, user_id=USER)
        for k in range(ROUNDS):
            barrier.wait(TIMEOUT)  # every round a fresh start line: a real race for s-k
            try:
                store.supersede(
                    f"s-{k}",
                    _item(f"s-{k}-by-{who}", f"record {k} rewritten"),
                    reason=f"writer {who}",
                )
            except RemoteMemoryValidationError as exc:
                results.append({"k": k, "outcome": "refused", "message": str(exc)})
            else:
                results.append({"k": k, "outcome": "won"})
        store.close()
    except BaseException:  # noqa: BLE001 - the parent reads the file and fails the test
        results.append({"k": -1, "outcome": "crash", "message": traceback.format_exc()})
    Path(out).write_text(json.dumps(results), encoding="utf-8")


@pytest.fixture(params=["jsonl", "sqlite", "postgresql"])
def race_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "jsonl":
        return f"jsonl:{tmp_path / 'users' / 'scope' / 'records.jsonl'}"
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'db' / 'memlib.sqlite'}"
    return str(request.getfixturevalue("pg_url"))


def test_two_processes_superseding_the_same_records_one_wins_each(
    race_url: str, tmp_path: Path
) -> None:
    store = open_store(race_url, user_id=USER)
    store.append_many([_item(f"s-{k}", f"record {k} original") for k in range(ROUNDS)])
    store.close()
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(2)
    outs = [tmp_path / f"racer-{who}.json" for who in range(2)]
    processes = [
        context.Process(target=_racer, args=(race_url, who, barrier, str(out)))
        for who, out in enumerate(outs)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(TIMEOUT)
        if process.exitcode is None:
            process.kill()
            process.join()
    assert [p.exitcode for p in processes] == [0, 0]
    results = [json.loads(out.read_text(encoding="utf-8")) for out in outs]
    crashes = [r for per in results for r in per if r["outcome"] == "crash"]
    assert not crashes, crashes[0]["message"]

    fresh = open_store(race_url, user_id=USER)
    try:
        by_id = {r.memory_id: r for r in fresh.read_all()}
        for k in range(ROUNDS):
            outcomes = {who: results[who][k] for who in range(2)}
            won = [who for who, r in outcomes.items() if r["outcome"] == "won"]
            assert len(won) == 1, (k, outcomes)
            loser = 1 - won[0]
            assert outcomes[loser]["message"] == f"cannot supersede s-{k}: it is already retracted"
            assert f"s-{k}-by-{loser}" not in by_id, "a refused supersede left its new record"
            retraction = by_id[f"retract-s-{k}"]
            assert retraction.superseded_by == f"s-{k}-by-{won[0]}"
            assert by_id[f"s-{k}-by-{won[0]}"].supersedes == f"s-{k}"
        assert len(by_id) == 3 * ROUNDS
        hits = RecallEngine(fresh).recall("record rewritten", limit=10).hits
        assert hits and all("-by-" in h.memory_id for h in hits)
    finally:
        fresh.close()
