"""Projects (docs/contract.md, "Projects"): a namespace inside a user, isolated like a
scope on every backend; ``all_projects`` reads across them; records without a project
are stored and recalled exactly as before."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.pgserver import drop_schema, fresh_schema, pg_dsn, schema_url  # noqa: F401

from memlib import (
    MemorySource,
    RecallEngine,
    RemoteMemoryScopeError,
    RemoteMemoryValidationError,
    StoredMemory,
    open_store,
)
from memlib.records import record_json
from memlib.sample import SAMPLE_AS_OF, fixed_clock, sample_records, scope_path
from memlib.stores._base import MemoryStore
from memlib.stores._projects import all_projects_of

Opener = Callable[..., MemoryStore]
SOURCE = MemorySource("t-r", "manual_retraction", "Retraction", "2026-08-09T00:00:00Z")
TIMEOUT = 60


@pytest.fixture(params=("jsonl", "sqlite", "postgresql"))
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """``urls(place)``: a store URL of that place (a file, a database, a schema)."""
    schemas: dict[str, str] = {}
    dsn = request.getfixturevalue("pg_dsn") if request.param == "postgresql" else ""

    def url(place: str) -> str:
        if request.param == "jsonl":
            return f"jsonl:{scope_path(tmp_path / place, 'alice')}"
        if request.param == "sqlite":
            return f"sqlite:{tmp_path / place}.db"
        if place not in schemas:
            schemas[place] = fresh_schema(dsn)
        return schema_url(dsn, schemas[place])

    yield url
    for name in schemas.values():
        drop_schema(dsn, name)


@pytest.fixture
def opener(urls: Callable[[str], str]) -> Iterator[Opener]:
    opened: list[MemoryStore] = []

    def open_(project: str | None = None, place: str = "main", **options: Any) -> MemoryStore:
        options.setdefault("clock", fixed_clock())
        store = open_store(urls(place), user_id="alice", project=project, **options)
        opened.append(store)
        return store

    yield open_
    for store in opened:
        store.close()


def _item(memory_id: str, text: str, kind: str = "conversation") -> dict[str, Any]:
    return {
        "kind": kind,
        "memory_id": memory_id,
        "content": text,
        "summary": text,
        "source": {
            "source_id": "t-1",
            "source_type": "conversation_transcript",
            "title": "Transcript",
            "captured_at": "2026-08-01T12:00:00Z",
        },
    }


# Per project: the records written in it. "m-1" is in two projects, as derived ids are.
WRITES: dict[str | None, list[dict[str, Any]]] = {
    None: [_item("n-1", "layered memory for the user"), _item("p-n", "likes tea", "profile")],
    "alpha": [
        _item("m-1", "layered memory design alpha"),
        _item("a-2", "alpha memory notes"),
        _item("p-a", "alpha profile", "profile"),
    ],
    "beta 中文": [_item("m-1", "layered memory design beta"), _item("b-2", "beta memory")],
}


def _fill(opener: Opener, place: str = "main") -> dict[str | None, MemoryStore]:
    stores = {project: opener(project, place) for project in WRITES}
    for project, items in WRITES.items():
        stores[project].append_many(items)
    return stores


def _recall(store: MemoryStore, **options: Any) -> str:
    engine = RecallEngine(store, ranker=options.pop("ranker", "baseline"))
    return engine.recall("layered memory", as_of=SAMPLE_AS_OF, query_id="q", **options).to_json()


def test_each_project_reads_and_recalls_only_its_own(opener: Opener) -> None:
    _fill(opener)
    for project in WRITES:
        again = opener(project)  # a new object on the same place
        own = [(r.memory_id, r.project) for r in again.read_all()]
        assert own == [(item["memory_id"], project) for item in WRITES[project]]
        assert [r.memory_id for r in again.records("profile")] == [
            i["memory_id"] for i in WRITES[project] if i["kind"] == "profile"
        ]
        profile = again.latest_profile()
        assert profile is None or profile.project == project
        hits = json.loads(_recall(again))["hits"]
        assert {h["memory_id"] for h in hits} <= {i["memory_id"] for i in WRITES[project]}
        assert hits
        for other, items in WRITES.items():
            if other == project:
                continue
            theirs = [i["memory_id"] for i in items if i["memory_id"] != "m-1"]
            assert getattr(again, "existing_ids")(theirs) == set()  # noqa: B009
            assert getattr(again, "records_by_id")(theirs) == []  # noqa: B009
            explained = RecallEngine(again).explain("layered memory", theirs[0])
            assert explained.verdict == "not_in_scope"
            assert explained.message == f"memory {theirs[0]} is not in this scope"


def test_a_project_recalls_as_a_store_holding_only_it(opener: Opener) -> None:
    """Counts, BM25's corpus statistics and every byte of the answer: the other projects
    of the user, on the same place, change nothing."""
    _fill(opener)
    for project, items in WRITES.items():
        alone = opener(project, place=f"alone-{project}")
        alone.append_many(items)
        for ranker in ("baseline", "bm25"):
            assert _recall(opener(project), ranker=ranker) == _recall(alone, ranker=ranker)
        assert [record_json(r) for r in opener(project).read_all()] == [
            record_json(r) for r in alone.read_all()
        ]


def test_records_without_a_project_are_written_and_read_as_before(opener: Opener) -> None:
    stores = _fill(opener)
    plain = stores[None].read_all()
    assert all("project" not in r.to_dict() and '"project"' not in record_json(r) for r in plain)
    assert all(r.to_dict()["project"] == "alpha" for r in stores["alpha"].read_all())
    assert record_json(stores["alpha"].read_all()[0]).endswith(',"project":"alpha"}')
    back = StoredMemory.from_dict(json.loads(record_json(stores["alpha"].read_all()[0])))
    assert back == stores["alpha"].read_all()[0]


def test_retract_and_supersede_stay_inside_the_project(opener: Opener) -> None:
    stores = _fill(opener)
    alpha, beta = stores["alpha"], stores["beta 中文"]
    with pytest.raises(
        RemoteMemoryValidationError, match="^cannot retract unknown memory_id: b-2$"
    ):
        alpha.retract("b-2", reason="no", source=SOURCE)
    with pytest.raises(
        RemoteMemoryValidationError, match="^cannot supersede n-1: no such memory in this scope$"
    ):
        alpha.supersede("n-1", _item("n-2", "new"), reason="no")
    # The same id in two projects: retracting alpha's leaves beta's alone.
    retraction = alpha.retract("m-1", reason="wrong", source=SOURCE)
    assert retraction.project == "alpha"
    assert alpha.retraction_of("m-1") == retraction and beta.retraction_of("m-1") is None
    assert "m-1" not in {h["memory_id"] for h in json.loads(_recall(opener("alpha")))["hits"]}
    assert "m-1" in {h["memory_id"] for h in json.loads(_recall(opener("beta 中文")))["hits"]}
    new, old = beta.supersede("b-2", _item("b-3", "beta memory again"), reason="newer")
    assert (new.project, old.project) == ("beta 中文", "beta 中文")
    assert RecallEngine(opener("beta 中文")).explain("beta", "b-2").verdict == "superseded"
    assert [r.memory_id for r in opener(None).read_all()] == ["n-1", "p-n"]


def test_all_projects_reads_recalls_and_explains_across(opener: Opener) -> None:
    stores = _fill(opener)
    alpha = opener("alpha")
    stores["beta 中文"].retract("m-1", reason="wrong", source=SOURCE)
    every = all_projects_of(alpha)
    expected = [(i["memory_id"], p) for p, items in WRITES.items() for i in items]
    assert [(r.memory_id, r.project) for r in every.read_all()] == [
        *expected,
        ("retract-m-1", "beta 中文"),
    ]
    with pytest.raises(RemoteMemoryValidationError, match="not written"):
        every.append_many([_item("x", "x")])
    result = json.loads(_recall(alpha, all_projects=True))
    hits = [h["memory_id"] for h in result["hits"]]
    # beta's m-1 is retracted in beta only: alpha's is still a hit, once.
    assert sorted(hits) == ["a-2", "b-2", "m-1", "n-1"]
    assert (result["searched_records"], result["retracted_records"]) == (4, 1)
    assert json.loads(_recall(alpha))["searched_records"] == 2  # the call, not the store
    engine = RecallEngine(alpha)
    assert engine.explain("layered memory", "n-1", as_of=SAMPLE_AS_OF).verdict == "not_in_scope"
    wide = engine.explain("layered memory", "n-1", as_of=SAMPLE_AS_OF, all_projects=True)
    assert wide.verdict == "hit"
    assert engine.explain("memory", "m-1", all_projects=True).verdict == "hit"  # alpha's
    past = "2026-08-10T08:00:00Z"
    assert json.loads(_recall(alpha, all_projects=True, known_at=past))["known_at"] == past
    assert every.latest_profile() is not None


def test_bad_project_names_are_refused_in_one_line(opener: Opener) -> None:
    for name, message in [
        ("", "project must not be empty"),
        (" a", "project must hold no whitespace but single spaces between words: ' a'"),
        ("a\nb", "project must hold no whitespace but single spaces between words: 'a\\nb'"),
        ("a\u202eb", "project must not contain invisible or format characters: 'a\\u202eb' "),
        ("ｍｅｍ", "project must be in Unicode NFKC form: "),
        ("x" * 101, "project exceeds the 100-character limit"),
        (7, "project must be a string"),
    ]:
        with pytest.raises(RemoteMemoryValidationError) as caught:
            opener(name)
        assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_a_record_of_another_project_in_a_projects_file_is_refused(tmp_path: Path) -> None:
    path = scope_path(tmp_path, "alice")
    alpha = open_store(f"jsonl:{path}", user_id="alice", project="alpha")
    beta = open_store(f"jsonl:{path}", user_id="alice", project="beta")
    alpha.append_many(list(sample_records())[:2])
    beta.append_many([_item("b-1", "beta")])
    Path(beta.path).write_bytes(Path(alpha.path).read_bytes())  # type: ignore[attr-defined]
    with pytest.raises(RemoteMemoryScopeError, match="belongs to another project$"):
        open_store(f"jsonl:{path}", user_id="alice", project="beta").read_all()
    with pytest.raises(RemoteMemoryScopeError, match="belongs to another project$"):
        open_store(f"jsonl:{path}", user_id="alice").projects()  # type: ignore[attr-defined]


def _writer(url: str, project: str, rounds: int, barrier: Any) -> None:
    store = open_store(url, user_id="alice", project=project)
    for n in range(rounds):
        store.read_all()  # a stale view on purpose
        barrier.wait(TIMEOUT)
        # The same ids in both projects: only the project tells them apart.
        store.append_many([_item(f"r-{n}-{k}", f"race {project} {n}") for k in range(3)])
        if n % 2:
            store.retract(f"r-{n}-0", reason="racing", source=SOURCE)
    store.close()


def test_racing_writers_of_two_projects_cross_nothing(urls: Callable[[str], str]) -> None:
    url, rounds = urls("race"), 6
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(2)
    workers = [
        context.Process(target=_writer, args=(url, project, rounds, barrier))
        for project in ("left", "right")
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(TIMEOUT * 2)
        assert worker.exitcode == 0
    ids = [f"r-{n}-{k}" for n in range(rounds) for k in range(3)]
    for project in ("left", "right"):
        store = open_store(url, user_id="alice", project=project)
        records = store.read_all()
        assert {r.project for r in records} == {project}
        assert [r.memory_id for r in records if r.kind.value == "conversation"] == ids
        assert all(f"race {project}" in r.content for r in records if r.retracts is None)
        result = RecallEngine(store).recall(f"race {project}", limit=10)
        assert (result.searched_records, result.retracted_records) == (len(ids) - 3, 3)
        assert all(hit.memory_id in ids for hit in result.hits) and len(result.hits) == 10
        store.close()
    assert open_store(url, user_id="alice").read_all() == ()
    every = all_projects_of(open_store(url, user_id="alice"))
    assert len(every.read_all()) == 2 * (len(ids) + 3)


def test_the_upgrade_path_rebuilds_each_project(tmp_path: Path) -> None:
    """A project is a key of the ``user_scope`` column: the one upgrade path (derived
    tables rebuilt from ``records.body`` per key) rebuilds each project apart."""
    url = f"sqlite:{tmp_path / 'm.db'}"

    def answers() -> list[str]:
        out = []
        for project in WRITES:
            store = open_store(url, user_id="alice", project=project, clock=fixed_clock())
            out += [_recall(store, ranker=ranker) for ranker in ("baseline", "bm25")]
            store.close()
        return out

    for project, items in WRITES.items():
        open_store(url, user_id="alice", project=project).append_many(items)
    before = answers()
    with sqlite3.connect(tmp_path / "m.db") as conn:
        conn.execute("UPDATE memlib_meta SET value = '5' WHERE key = 'schema_version'")
        conn.execute("DELETE FROM postings")
        conn.execute("DELETE FROM scope_stats")
    assert answers() == before
    assert open_store(url, user_id="alice").projects() == (None, "alpha", "beta 中文")  # type: ignore[attr-defined]
