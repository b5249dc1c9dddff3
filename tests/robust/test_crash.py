"""SIGKILL at random moments (issue 7): what was acknowledged survives, nothing is half there.

A child process appends in a loop and writes each id to a pipe only after ``append()``
(or ``append_many()``) returned — after the ``fsync`` / commit. The parent kills it with
SIGKILL at a random moment, 50 times on one store, and after every kill opens the store
afresh and checks:

- it opens and reads without an error (a torn tail is ignored, never an error);
- every acknowledged id is present, with exactly the content that was written;
- anything else present is the one unit that was in flight when the child died, and
  then all of it (a batch is all or nothing);
- the raw storage is sound: every complete JSONL line is a valid record, a torn tail
  is only ever the last bytes, and the next writer removes it; SQLite passes
  ``PRAGMA integrity_check``; PostgreSQL's rows are exactly the records read back.

On PostgreSQL the kill lands on the client: the server sees the connection drop and
rolls back whatever transaction it had open, so a batch is there whole or not at all.

A JSONL ``append_many`` batch is one ``os.write``, which the kernel may stop between
pages when a SIGKILL arrives, or which may come up short (file size limit, full disk).
The store notes in its lock file where a multi-record batch begins until its fsync has
returned, so readers never see part of one and the next writer cuts it off: the tests
below kill and starve writers in the middle of large batches.
"""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import sqlite3
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

from memlib import RemoteMemoryError, RemoteMemoryStore, open_store
from memlib.stores import IdLookup

KILLS = 50
STRESS_KILLS = 500
STRESS_PER_STORE = 100
USER = "alice"
SQL_BATCH = 3  # SQLite and PostgreSQL alternate append and append_many of 3


def _content(memory_id: str) -> str:
    # Long enough that a record spans pages now and then; derived from the id, so a
    # record that is present can be checked to be whole.
    repeat = 20 + zlib.crc32(memory_id.encode()) % 60
    return f"crash test record {memory_id} " + "layered memory " * repeat


def _item(memory_id: str) -> dict[str, Any]:
    return {
        "kind": "conversation",
        "memory_id": memory_id,
        "content": _content(memory_id),
        "summary": f"crash {memory_id}",
        "source": {
            "source_id": "crash-child",
            "source_type": "crash_test",
            "title": "crash",
            "captured_at": "2026-08-09T12:00:00Z",
        },
    }


def _units(cycle: int, batch: int) -> Any:
    """The child's n-th unit: one id, or ``batch`` ids written with one append_many."""
    n = 0
    while True:
        if batch == 1 or n % 2 == 0:  # batched backends alternate append / append_many
            yield [f"c{cycle}-{n}"]
        else:
            yield [f"c{cycle}-{n}-{j}" for j in range(batch)]
        n += 1


def _child(url: str, cycle: int, batch: int, ack: int) -> None:
    store = open_store(url, user_id=USER)
    for unit in _units(cycle, batch):
        if len(unit) == 1:
            store.append(**_item(unit[0]))
        else:
            store.append_many([_item(i) for i in unit])
        os.write(ack, (" ".join(unit) + "\n").encode())  # only after fsync / commit


def _spawn(target: Any, *args: Any) -> tuple[int, int]:
    """Fork a child running ``target(*args, ack_fd)``; (pid, read end of the ack pipe)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns into pytest
        code = 0
        try:
            os.close(read)
            target(*args, write)
        except BaseException:  # noqa: BLE001
            code = 3
        os._exit(code)
    os.close(write)
    return pid, read


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        data = os.read(fd, 65536)
        if not data:
            break
        chunks.append(data)
    os.close(fd)
    return b"".join(chunks)


def _raw_jsonl(path: Path) -> tuple[dict[str, dict[str, Any]], bytes]:
    """(records of the complete lines by id, torn tail); every complete line must parse."""
    data = path.read_bytes() if path.exists() else b""
    lines = data.split(b"\n")
    records: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(lines[:-1], start=1):
        record = json.loads(line)
        assert record["memory_id"] not in records, f"line {number} repeats an id"
        records[record["memory_id"]] = record
    return records, lines[-1]


def _postgres_rows(url: str) -> list[str]:
    """The memory ids of every row of the schema, read below the store, sorted."""
    import psycopg

    from memlib.stores.sql._postgres import split_url

    dsn, schema = split_url(url)
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(f"SELECT memory_id FROM {schema}.records").fetchall()
    return sorted(memory_id for (memory_id,) in rows)


class Verifier:
    """Everything acknowledged so far, and the checks after each kill."""

    def __init__(self, url: str, batch: int, full_every: int = 1) -> None:
        self.url = url
        self.batch = batch
        # Every ``full_every``-th kill the whole store is opened afresh and checked
        # record by record; in between (stress) only this cycle's ids are looked up.
        self.full_every = full_every
        self.acked: set[str] = set()
        self.in_flight_seen = 0  # kills after which the unacknowledged unit was present
        self.torn_tails = 0
        self.kills_during_appends = 0

    def after_kill(self, cycle: int, acks: bytes) -> None:
        lines = acks.decode().split("\n")
        assert lines[-1] == "", "an acknowledgement line was cut"
        units = [line.split(" ") for line in lines[:-1]]
        for unit in units:
            self.acked.update(unit)
        if units:
            self.kills_during_appends += 1
        expected_units = _units(cycle, self.batch)
        for _ in units:
            next(expected_units)
        in_flight = set(next(expected_units))
        if cycle % self.full_every:
            self._quick_check(cycle, units, in_flight)
            return

        store = open_store(self.url, user_id=USER)
        try:
            records = {r.memory_id: r for r in store.read_all()}
        finally:
            store.close()
        missing = self.acked - set(records)
        assert not missing, f"acknowledged appends lost: {sorted(missing)[:5]}"
        for memory_id, record in records.items():
            assert record.content == " ".join(_content(memory_id).split()), memory_id
        mine = {m for m in records if m.startswith(f"c{cycle}-")}
        extra = mine - self.acked
        earlier = set(records) - self.acked - mine
        assert not earlier, f"records of an earlier cycle appeared: {sorted(earlier)[:5]}"
        if extra:
            assert extra == in_flight, (
                f"cycle {cycle}: a unit is half present: {sorted(extra)} of {sorted(in_flight)}"
            )
            self.in_flight_seen += 1
            self.acked |= extra  # it is there now; later cycles must keep it
        scheme, _, rest = self.url.partition(":")
        if scheme == "jsonl":
            raw, tail = _raw_jsonl(Path(rest))
            assert set(raw) == set(records)
            if tail:
                self.torn_tails += 1
        elif scheme in ("postgresql", "postgres"):
            assert _postgres_rows(self.url) == sorted(records)
        elif Path(rest).exists():  # a kill before the first write leaves no file
            conn = sqlite3.connect(rest)
            try:
                assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
                tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
                count = 0
                if "records" in tables:
                    (count,) = conn.execute("SELECT count(*) FROM records").fetchone()
            finally:
                conn.close()
            assert count == len(records)
        else:
            assert not records

    def _quick_check(self, cycle: int, units: list[list[str]], in_flight: set[str]) -> None:
        mine = {m for unit in units for m in unit}
        store = open_store(self.url, user_id=USER)
        assert isinstance(store, IdLookup)
        try:
            present = store.existing_ids(sorted(mine | in_flight))
        finally:
            store.close()
        assert mine <= present, f"acknowledged appends lost: {sorted(mine - present)[:5]}"
        extra = present - mine
        if extra:
            assert extra == in_flight, f"cycle {cycle}: a unit is half present: {sorted(extra)}"
            self.in_flight_seen += 1
            self.acked |= extra

    def final(self) -> None:
        """The store still takes writes after the last kill, and the file is whole."""
        store = open_store(self.url, user_id=USER)
        store.append(**_item("after-the-last-kill"))
        assert {r.memory_id for r in store.read_all()} == self.acked | {"after-the-last-kill"}
        store.close()
        scheme, _, rest = self.url.partition(":")
        if scheme == "jsonl":
            raw, tail = _raw_jsonl(Path(rest))
            assert tail == b"" and len(raw) == len(self.acked) + 1


def run_kills(url: str, kills: int, batch: int, seed: int, full_every: int = 1) -> Verifier:
    rng = random.Random(seed)
    verifier = Verifier(url, batch, full_every)
    for cycle in range(kills):
        pid, ack = _spawn(_child, url, cycle, batch)
        first = b""
        if rng.random() < 0.2:
            # While the child opens the store or makes its first append.
            time.sleep(rng.uniform(0.0, 0.02))
        else:
            # Inside the append loop: lock, refresh, write, fsync / commit, ack.
            while not first.endswith(b"\n"):
                data = os.read(ack, 1)
                assert data, "the child died before its first append"
                first += data
            time.sleep(rng.uniform(0.0, 0.05))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, (
            f"the child ended on its own (status {status}) before the kill"
        )
        verifier.after_kill(cycle, first + _read_all(ack))
    verifier.final()
    assert verifier.acked, "nothing was ever acknowledged: the test proved nothing"
    assert verifier.kills_during_appends >= kills // 2  # most kills hit the loop
    return verifier


@pytest.fixture(params=["jsonl", "sqlite", "postgresql"])
def crash_backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, int]:
    if request.param == "jsonl":
        # Single appends: one line per write. Large batches are tested below.
        return f"jsonl:{tmp_path / 'users' / 'scope' / 'records.jsonl'}", 1
    if request.param == "postgresql":
        return request.getfixturevalue("pg_url"), SQL_BATCH
    return f"sqlite:{tmp_path / 'db' / 'memlib.sqlite'}", SQL_BATCH


def test_sigkill_50_times_loses_nothing_acknowledged(crash_backend: tuple[str, int]) -> None:
    url, batch = crash_backend
    verifier = run_kills(url, KILLS, batch, seed=7)
    print(
        f"{url.split(':')[0]}: {KILLS} kills survived, {len(verifier.acked)} records, "
        f"{verifier.torn_tails} torn tails, {verifier.in_flight_seen} in-flight units whole"
    )


@pytest.mark.stress
@pytest.mark.parametrize("segment", range(STRESS_KILLS // STRESS_PER_STORE))
def test_sigkill_stress(crash_backend: tuple[str, int], segment: int) -> None:
    """10 × the kills, in stores of STRESS_PER_STORE kills each: every new child
    re-reads the whole store when it opens it, so one store of 500 kills would spend
    its time parsing rather than being killed."""
    url, batch = crash_backend
    verifier = run_kills(url, STRESS_PER_STORE, batch, seed=11 + segment, full_every=10)
    print(
        f"{url.split(':')[0]} segment {segment}: {STRESS_PER_STORE} kills survived, "
        f"{len(verifier.acked)} records, {verifier.torn_tails} torn tails, "
        f"{verifier.in_flight_seen} in-flight units whole"
    )


def test_a_torn_tail_is_ignored_and_cut_by_the_next_writer(tmp_path: Path) -> None:
    """The state a kill inside ``os.write`` leaves, made by hand: read, then repaired."""
    path = tmp_path / "records.jsonl"
    store = RemoteMemoryStore(path, user_id=USER)
    store.append(**_item("whole"))
    whole = path.read_bytes()
    with open(path, "ab") as handle:
        handle.write(b'{"memory_id":"torn","user_scope":"')
    fresh = RemoteMemoryStore(path, user_id=USER)
    assert [r.memory_id for r in fresh.read_all()] == ["whole"]
    assert path.read_bytes().startswith(whole) and len(path.read_bytes()) > len(whole)  # untouched
    fresh.append(**_item("next"))
    raw, tail = _raw_jsonl(path)
    assert list(raw) == ["whole", "next"] and tail == b""
    assert path.read_bytes().startswith(whole)


# -- the known gap: a batch write cut short ----------------------------------------------

BIG_BATCH = 1_000  # records of ~19 KB: one os.write of ~19 MB


def _big_item(memory_id: str) -> dict[str, Any]:
    item = _item(memory_id)
    item["content"] = f"{memory_id} " + "x" * 19_000
    return item


def _big_batch_child(path: str, attempt: int, ack: int) -> None:
    store = RemoteMemoryStore(path, user_id=USER)
    real_write = os.write

    def announcing_write(fd: int, data: bytes) -> int:
        if fd != ack and len(data) > 1 << 20:
            real_write(ack, b"W")  # "the big write starts now": the parent kills
        return real_write(fd, data)

    os.write = announcing_write  # type: ignore[assignment]
    store.append_many([_big_item(f"b{attempt}-{j}") for j in range(BIG_BATCH)])
    real_write(ack, b"A")  # acknowledged (never reached when the kill lands in time)


def test_sigkill_inside_a_large_append_many_leaves_nothing_half_present(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    for attempt in range(25):
        pid, ack = _spawn(_big_batch_child, str(path), attempt)
        first = os.read(ack, 1)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        acked = first == b"A" or b"A" in _read_all(ack)
        present = [
            r.memory_id
            for r in RemoteMemoryStore(path, user_id=USER).read_all()
            if r.memory_id.startswith(f"b{attempt}-")
        ]
        assert len(present) in ((BIG_BATCH,) if acked else (0, BIG_BATCH)), (
            f"attempt {attempt}: {len(present)} of {BIG_BATCH} records of an "
            f"unacknowledged batch are readable"
        )
        path.unlink(missing_ok=True)


def _short_write_child(path: str, limit: int, ack: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit comes up short
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    store = RemoteMemoryStore(path, user_id=USER)
    try:
        store.append_many([_item(f"short-{j}") for j in range(5)])
    except RemoteMemoryError as exc:
        os.write(ack, f"refused: {exc}".encode())
    else:
        os.write(ack, b"acknowledged")


def test_a_short_batch_write_is_all_or_nothing(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    store = RemoteMemoryStore(path, user_id=USER)
    store.append(**_item("before"))
    line = len(path.read_bytes())
    limit = line * 3 + line // 2  # room for about 2.5 more lines of the 5-line batch
    pid, ack = _spawn(_short_write_child, str(path), limit)
    _, status = os.waitpid(pid, 0)
    outcome = _read_all(ack).decode()
    # The short write is followed by one of the rest, which names the reason.
    assert os.WEXITSTATUS(status) == 0 and outcome.startswith("refused: cannot write"), outcome
    assert "File too large (EFBIG)" in outcome, outcome
    present = sorted(r.memory_id for r in RemoteMemoryStore(path, user_id=USER).read_all())
    assert present == ["before"], f"a refused batch left {present[1:]} behind"
