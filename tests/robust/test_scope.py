"""Scope isolation on every backend (issue 7): alice never sees, counts or renders bob.

alice and bob share one backend (one SQLite file, one PostgreSQL schema; for JSONL the
contract's layout, one file per scope under one root). bob's records use alice's
words *and* a marker word of his own, hold an id alice also uses, a newer profile and
a retraction. Then every way of reading — the engine, the top-k index path, the store
methods, the CLI (``--store``/``--user``), the ``recall_history`` handler and the
system prompt's profile — must give alice exactly what a store holding only her
records gives her: the same bytes of tool JSON, the same counts, no marker.

SQL backends must filter by scope inside the query: the statements they run are
recorded and each one that reads records, terms or postings names ``user_scope``;
and a row whose body claims another scope than its column is refused, never shown.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

from memlib import (
    RecallEngine,
    RemoteMemoryScopeError,
    RemoteMemoryValidationError,
    normalize_recall_query,
    open_store,
    render_recall_context,
    render_remote_profile,
    user_scope_for,
)
from memlib.agent import build_system_prompt, run_recall_history
from memlib.cli import main as cli_main
from memlib.sample import fixed_clock, scope_path
from memlib.stores import IdLookup
from memlib.stores.sql._sqlite import SqliteMemoryStore

AS_OF = datetime(2026, 8, 10, 12, tzinfo=UTC)
ALICE, BOB = "alice", "bob"
MARKER = "zebrafish"  # only in bob's records
QUERIES = [
    "layered memory",
    f"{MARKER} layered memory",
    MARKER,
    "persistence sqlite",
    "shared record",
]


def _item(memory_id: str, text: str, *, kind: str = "conversation", day: int = 5) -> dict[str, Any]:
    return {
        "kind": kind,
        "memory_id": memory_id,
        "content": text,
        "summary": text[:60],
        "source": {
            "source_id": f"src-{memory_id}",
            "source_type": "conversation_transcript",
            "title": text[:30],
            "captured_at": f"2026-08-{day:02d}T12:00:00Z",
        },
    }


ALICE_ITEMS = [
    _item("a-1", "Agreed on a layered memory design with separate owners.", day=9),
    _item("a-2", "Selected SQLite WAL for local persistence.", day=3),
    _item("a-3", "Layered memory notes that were later withdrawn.", day=4),
    _item("shared-1", "A shared record id: alice's own layered memory text.", day=6),
    _item("a-p", "Alice prefers short answers.", kind="profile", day=1),
]
BOB_ITEMS = [
    _item("b-1", f"{MARKER} layered memory design secret of bob.", day=9),
    _item("b-2", f"{MARKER} persistence sqlite layered memory, bob only.", day=8),
    _item("shared-1", f"A shared record id: bob's {MARKER} layered memory text.", day=7),
    _item("b-p", f"Bob's {MARKER} profile, newer than alice's.", kind="profile", day=9),
]
BOB_WORDS = (MARKER, "bob", "b-1", "b-2", "b-p", user_scope_for(BOB))


def fill(store: Any, items: list[dict[str, Any]], retract: str) -> None:
    store.append_many(items)
    store.retract(
        retract,
        reason="withdrawn",
        source={
            "source_id": "cli",
            "source_type": "manual_retraction",
            "title": "retraction",
            "captured_at": "2026-08-09T13:00:00Z",
        },
    )


@pytest.fixture(params=["jsonl", "sqlite", "postgresql"])
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """Store URL per user on one backend; alice's and bob's data written."""
    if request.param == "jsonl":
        root = tmp_path / "root"
        out = {user: f"jsonl:{scope_path(root, user)}" for user in (ALICE, BOB)}
    elif request.param == "sqlite":
        url = f"sqlite:{tmp_path / 'shared.sqlite'}"
        out = {ALICE: url, BOB: url}
    else:
        url = request.getfixturevalue("pg_url")
        out = {ALICE: url, BOB: url}
    # bob writes first and last, so his rows surround alice's in storage order.
    bob = open_store(out[BOB], user_id=BOB, clock=fixed_clock())
    bob.append_many(BOB_ITEMS[:2])
    alice = open_store(out[ALICE], user_id=ALICE, clock=fixed_clock())
    fill(alice, ALICE_ITEMS, retract="a-3")
    bob.append_many(BOB_ITEMS[2:])
    bob.retract(
        "b-2",
        reason="withdrawn",
        source={
            "source_id": "cli",
            "source_type": "manual_retraction",
            "title": "retraction",
            "captured_at": "2026-08-09T14:00:00Z",
        },
    )
    alice.close()
    bob.close()
    return out


@pytest.fixture
def alone(tmp_path: Path) -> Any:
    """alice's records in a JSONL store of their own: what alice must see, exactly."""
    store = open_store(
        f"jsonl:{tmp_path / 'alone' / 'records.jsonl'}", user_id=ALICE, clock=fixed_clock()
    )
    fill(store, ALICE_ITEMS, retract="a-3")
    return store


def no_bob(text: str, query: str = "") -> None:
    """None of bob's words, ids or scope; the query's own words are alice's to echo."""
    if query:
        text = text.replace(query, "").replace(query.casefold(), "").replace(f'"{MARKER}"', "")
    for word in BOB_WORDS:
        assert word not in text, f"bob's {word!r} leaked: {text[:300]}"


def test_alice_sees_exactly_what_she_would_see_alone(urls: dict[str, str], alone: Any) -> None:
    alice = open_store(urls[ALICE], user_id=ALICE)
    try:
        for n, text in enumerate(QUERIES):
            for limit in (1, 10):
                qid = f"scope-{n}-{limit}"
                got = RecallEngine(alice).recall(text, limit=limit, as_of=AS_OF, query_id=qid)
                want = RecallEngine(alone).recall(text, limit=limit, as_of=AS_OF, query_id=qid)
                assert got.to_json() == want.to_json()  # hits, counts, empty_reason
                assert render_recall_context(got) == render_recall_context(want)
                no_bob(got.to_json(), text)
                no_bob(render_recall_context(got), text)
        result = RecallEngine(alice).recall("layered memory", limit=10, as_of=AS_OF)
        counts = (result.searched_records, result.candidate_records, result.retracted_records)
        assert counts == (3, 2, 1)
        assert [h.memory_id for h in result.hits] == ["a-1", "shared-1"]
        assert [r.memory_id for r in alice.read_all()] == [r.memory_id for r in alone.read_all()]
        assert alice.records("profile") == alone.records("profile")
        assert alice.latest_profile() == alone.latest_profile()  # bob's newer profile is not hers
        assert isinstance(alice, IdLookup)
        assert alice.existing_ids(["b-1", "b-2", "b-p", "shared-1", "a-1"]) == {"shared-1", "a-1"}
        assert "Alice prefers" in render_remote_profile(alice.latest_profile())
        no_bob(render_remote_profile(alice.latest_profile()))
        assert all(r.user_scope == user_scope_for(ALICE) for r in alice.read_all())
    finally:
        alice.close()


def test_bob_sees_his_own_and_not_alices(urls: dict[str, str]) -> None:
    """The same isolation the other way round (and bob's data really is there)."""
    bob = open_store(urls[BOB], user_id=BOB)
    try:
        result = RecallEngine(bob).recall(f"{MARKER} layered memory", limit=10, as_of=AS_OF)
        assert [h.memory_id for h in result.hits] == ["b-1", "shared-1"]
        assert (result.searched_records, result.retracted_records) == (2, 1)
        profile = bob.latest_profile()
        assert profile is not None
        assert profile.memory_id == "b-p"
        assert "alice" not in result.to_json().lower() and "a-1" not in result.to_json()
    finally:
        bob.close()


def test_the_recall_history_tool_and_the_profile_prompt(urls: dict[str, str], alone: Any) -> None:
    alice = open_store(urls[ALICE], user_id=ALICE)
    try:
        for n, text in enumerate(QUERIES):
            outcome = run_recall_history(
                RecallEngine(alice), {"query": text, "limit": 10}, as_of=AS_OF, query_id=f"tool-{n}"
            )
            want = RecallEngine(alone).recall(text, limit=10, as_of=AS_OF, query_id=f"tool-{n}")
            assert not outcome.is_error and outcome.content == want.to_json()
            no_bob(outcome.content, text)
        prompt = build_system_prompt(alice)
        assert prompt == build_system_prompt(alone)
        assert prompt.startswith('<remote_profile memory_id="a-p"')
        no_bob(prompt)
    finally:
        alice.close()


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_cli_keeps_users_apart(
    urls: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    store = ["--store", urls[ALICE], "--user", ALICE]
    for text in QUERIES:
        code, out, err = _cli(
            capsys, *store, "recall", text, "--limit", "10", "--as-of", AS_OF.isoformat(), "--json"
        )
        assert code == 0 and err == ""
        data = json.loads(out)
        assert all(h["scope"]["user_scope"] == user_scope_for(ALICE) for h in data["hits"])
        assert data["searched_records"] == 3
        no_bob(out, text)
        code, out, err = _cli(capsys, *store, "recall", text, "--as-of", AS_OF.isoformat())
        assert code == 0 and err == ""
        no_bob(out, text)
    code, out, _ = _cli(capsys, *store, "recall", MARKER, "--as-of", AS_OF.isoformat())
    assert out.startswith("no hits (no_matching_terms): searched 3 conversation records, 0 shared")
    code, out, err = _cli(capsys, *store, "profile")
    assert code == 0 and "Alice prefers short answers." in out
    no_bob(out)
    code, out, _ = _cli(capsys, "--store", urls[BOB], "--user", BOB, "profile")
    assert code == 0 and MARKER in out  # bob's is there, for bob


def test_a_jsonl_file_of_another_user_is_refused(
    urls: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """alice pointed at bob's JSONL file: a one-line scope error, not bob's records."""
    if not urls[BOB].startswith("jsonl:"):
        assert urls[ALICE] == urls[BOB]  # SQL: one database, the scope is in every query
        return
    path = Path(urls[BOB].partition(":")[2])
    before = path.read_bytes()
    wrong = open_store(urls[BOB], user_id=ALICE)
    for read in (
        wrong.read_all,
        wrong.latest_profile,
        lambda: RecallEngine(wrong).recall("layered memory", as_of=AS_OF),
    ):
        with pytest.raises(RemoteMemoryScopeError, match="belongs to another user scope"):
            read()
    for argv in (["recall", "layered memory"], ["profile"]):
        code, out, err = _cli(capsys, "--store", urls[BOB], "--user", ALICE, *argv)
        assert code == 2 and out == "" and err.count("\n") == 1
        assert "belongs to another user scope" in err
        no_bob(err.replace("b-1", "").replace("b-2", ""))  # the id is named, nothing else
    assert path.read_bytes() == before


def test_writes_never_cross_scopes(urls: dict[str, str]) -> None:
    alice = open_store(urls[ALICE], user_id=ALICE)
    bob = open_store(urls[BOB], user_id=BOB)
    try:
        assert isinstance(bob, IdLookup)
        with pytest.raises(
            RemoteMemoryValidationError, match="cannot retract unknown memory_id: b-1"
        ):
            alice.retract("b-1", reason="x", source=BOB_ITEMS[0]["source"])
        alice.append(**_item("b-1", "alice may use bob's id for her own record"))
        assert [r.memory_id for r in bob.read_all()].count("b-1") == 1
        assert bob.existing_ids(["b-1"]) == {"b-1"}
        assert next(r for r in bob.read_all() if r.memory_id == "b-1").content.startswith(MARKER)
        # A query made for another scope is refused by the store, not answered.
        foreign = normalize_recall_query(
            "layered memory", user_scope=user_scope_for(BOB), limit=5, issued_at=AS_OF
        )
        with pytest.raises(RemoteMemoryScopeError):
            alice.scan_candidates(foreign)
    finally:
        alice.close()
        bob.close()


@pytest.mark.parametrize(
    "forged", [{"user_scope": user_scope_for(BOB)}, {"user_scope": user_scope_for(ALICE)}]
)
def test_a_caller_cannot_choose_the_scope_of_a_record(
    urls: dict[str, str], forged: dict[str, str]
) -> None:
    alice = open_store(urls[ALICE], user_id=ALICE)
    try:
        before = len(alice.read_all())
        with pytest.raises(RemoteMemoryValidationError, match="unknown record fields: user_scope"):
            alice.append_many([{**_item("forged-1", "forged layered memory"), **forged}])
        assert len(alice.read_all()) == before
    finally:
        alice.close()


def test_the_cli_refuses_a_forged_scope(
    urls: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    forged = {**_item("forged-2", "forged layered memory"), "user_scope": user_scope_for(BOB)}
    line = json.dumps(forged)
    monkeypatch.setattr("sys.stdin", io.StringIO(line + "\n"))
    code, out, err = _cli(capsys, "--store", urls[ALICE], "--user", ALICE, "append")
    assert code == 2 and out == "" and "unknown record fields: user_scope" in err
    export = tmp_path / "export.jsonl"
    export.write_text(
        json.dumps(
            {
                **_item("forged-3", "forged layered memory"),
                "user_scope": user_scope_for(BOB),
                "stored_at": "2026-08-10T08:00:00Z",
            }
        )
        + "\n"
    )
    code, out, err = _cli(
        capsys, "--store", urls[ALICE], "--user", ALICE, "import", str(export), "--no-progress"
    )
    assert code == 2 and "line 1: memory forged-3 belongs to another user scope" in err
    store = open_store(urls[ALICE], user_id=ALICE)
    assert isinstance(store, IdLookup)
    assert store.existing_ids(["forged-2", "forged-3"]) == set()
    store.close()


# -- SQL: the scope is in the query, and the stored body is checked against it --------------


def _forge_sql(url: str, memory_id: str, column_scope: str, body_scope: str) -> None:
    """A row whose ``user_scope`` column and body JSON disagree (written around the store)."""
    body = json.dumps(
        {
            "memory_id": memory_id,
            "user_scope": body_scope,
            "kind": "conversation",
            "content": f"forged {MARKER} layered memory",
            "summary": "forged",
            "source": _item(memory_id, "x")["source"],
            "stored_at": "2026-08-10T08:00:00Z",
        }
    )
    ts = datetime(2026, 8, 5, 12, tzinfo=UTC)
    row = (column_scope, memory_id, "conversation", ts.timestamp(), int(ts.timestamp() * 1e6), body)
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(url.partition(":")[2])
        conn.execute(
            "INSERT INTO records (user_scope, memory_id, kind, captured_ts, captured_us, "
            "body) VALUES (?, ?, ?, ?, ?, ?)",
            row,
        )
        conn.commit()
        conn.close()
    else:
        import psycopg

        from memlib.stores.sql._postgres import split_url

        dsn, schema = split_url(url)
        with psycopg.connect(dsn) as pg_conn:
            pg_conn.execute(
                f"INSERT INTO {schema}.records (user_scope, memory_id, kind, captured_ts, "
                "captured_us, body) VALUES (%s, %s, %s, %s, %s, %s)",
                row,
            )


def test_a_forged_scope_in_a_stored_record_is_refused(urls: dict[str, str], tmp_path: Path) -> None:
    alice_scope, bob_scope = user_scope_for(ALICE), user_scope_for(BOB)
    if urls[ALICE].startswith("jsonl:"):
        # alice's own file, one line claiming bob's scope.
        path = Path(urls[ALICE].partition(":")[2])
        line = json.loads(path.read_bytes().splitlines()[0])
        line.update(memory_id="forged", user_scope=bob_scope)
        with open(path, "ab") as handle:
            handle.write(json.dumps(line).encode() + b"\n")
    else:
        # In alice's rows, a body that claims bob's scope: refused on every read.
        _forge_sql(urls[ALICE], "forged", alice_scope, bob_scope)
        # In bob's rows, a body that claims alice's scope: alice's queries never fetch it
        # (the scope is in the WHERE clause), bob's reads refuse it.
        _forge_sql(urls[ALICE], "forged-for-alice", bob_scope, alice_scope)
        bob = open_store(urls[BOB], user_id=BOB)
        with pytest.raises(
            RemoteMemoryScopeError, match="forged-for-alice belongs to another user scope"
        ):
            bob.read_all()
        bob.close()
    alice = open_store(urls[ALICE], user_id=ALICE)
    try:
        for read in (alice.read_all, lambda: alice.records("conversation")):
            with pytest.raises(
                RemoteMemoryScopeError, match="memory forged belongs to another user scope"
            ):
                read()
        if not urls[ALICE].startswith("jsonl:"):
            # The forged row has no postings: recall never reaches it, and says nothing
            # about the other scope's row either.
            result = RecallEngine(alice).recall("layered memory", limit=10, as_of=AS_OF)
            assert [h.memory_id for h in result.hits] == ["a-1", "shared-1"]
            no_bob(result.to_json())
    finally:
        alice.close()


class _Recorder:
    """A psycopg connection that remembers every statement it runs."""

    def __init__(self, conn: Any, log: list[str]) -> None:
        self._conn, self._log = conn, log

    def execute(self, sql: Any, *args: Any, **kwargs: Any) -> Any:
        self._log.append(str(sql))
        return self._conn.execute(sql, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@pytest.fixture
def traced(urls: dict[str, str]) -> Iterator[tuple[Any, list[str]]]:
    """alice's store with a log of the SQL it runs (JSONL: no SQL, skipped by the test)."""
    log: list[str] = []
    url = urls[ALICE]
    if url.startswith("sqlite:"):
        store = open_store(url, user_id=ALICE)
        assert isinstance(store, SqliteMemoryStore)
        store.read_all()  # connects
        store._conn.set_trace_callback(log.append)
        yield store, log
        store.close()
    elif url.startswith("postgres"):
        import psycopg

        from memlib.stores.sql._postgres import split_url

        conn = psycopg.connect(split_url(url)[0], autocommit=True)
        store = open_store(url, user_id=ALICE, connection=_Recorder(conn, log))
        yield store, log
        store.close()
        conn.close()
    else:
        yield None, log


def _reads(log: list[str]) -> list[str]:
    """Statements that read a table holding per-scope data."""
    tables = ("records", "postings", "terms", "scope_stats")
    out = []
    for sql in log:
        flat = " ".join(sql.split())
        if (
            flat.upper().startswith(("SELECT", "WITH"))
            and any(f"{t} " in flat or flat.endswith(t) or f".{t}" in flat for t in tables)
            and "sqlite_master" not in flat
            and "memlib_meta" not in flat
            and "to_regclass" not in flat
            and ".meta " not in flat
        ):
            out.append(flat)
    return out


def _exercise(store: Any) -> None:
    """The full candidate scan and the store methods (the top-k path is tested below)."""
    for text in QUERIES:
        query = normalize_recall_query(text, user_scope=store.user_scope, limit=3, issued_at=AS_OF)
        store.scan_candidates(query)
    store.read_all()
    store.records("profile")
    store.latest_profile()
    store.existing_ids(["a-1", "b-1"])


def test_sql_backends_filter_by_scope_inside_every_query(traced: tuple[Any, list[str]]) -> None:
    store, log = traced
    if store is None:
        assert log == []  # JSONL: one file per scope, no SQL
        return
    _exercise(store)
    reads = _reads(log)
    assert len(reads) >= len(QUERIES) + 4  # every recall, read_all, records, profile, ids
    unscoped = [sql for sql in reads if "user_scope" not in sql]
    assert unscoped == []


def test_sqlite_top_k_path_filters_by_scope_inside_every_query(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'shared.sqlite'}"
    open_store(url, user_id=BOB).append_many(BOB_ITEMS)
    store = open_store(url, user_id=ALICE)
    assert isinstance(store, SqliteMemoryStore)
    store.append_many(ALICE_ITEMS)
    log: list[str] = []
    store._conn.set_trace_callback(log.append)
    for text in QUERIES:
        RecallEngine(store).recall(text, limit=3, as_of=AS_OF)
    reads = _reads(log)
    assert reads and [sql for sql in reads if "user_scope" not in sql] == []


def test_postgres_top_k_path_filters_by_scope_inside_every_query(pg_url: str) -> None:  # noqa: F811
    import psycopg

    from memlib.stores.sql._postgres import split_url

    open_store(pg_url, user_id=BOB).append_many(BOB_ITEMS)
    log: list[str] = []
    conn = psycopg.connect(split_url(pg_url)[0], autocommit=True)
    store = open_store(pg_url, user_id=ALICE, connection=_Recorder(conn, log))
    store.append_many(ALICE_ITEMS)
    log.clear()
    for text in QUERIES:
        RecallEngine(store).recall(text, limit=3, as_of=AS_OF)
        RecallEngine(store).recall(text, limit=3, as_of=AS_OF)
    reads = _reads(log)
    assert reads and [sql for sql in reads if "user_scope" not in sql] == []
    store.close()
    conn.close()
