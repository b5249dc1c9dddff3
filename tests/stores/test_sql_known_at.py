"""Issue 36, item 4: a SQL store's own ``known_at`` view (``SqlKnownAt``: its reads cut at
``stored_us``, its runs and counts less what was stored later) answers every read as the
generic ``KnownAtVectorStore`` over the same store does — recalls with every ranker to the
byte, at every instant — on SQLite and PostgreSQL, written directly or imported with the
``stored_at`` replayed (which goes back in id order), with turn and pair vectors; after an
upgrade from schema 6 too; and the view is read-only alike."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.pgserver import drop_schema, fresh_schema, pg_dsn  # noqa: F401  (fixtures)

from memlib import MemoryKind, MemorySource, RecallEngine, RemoteMemoryStore, open_store
from memlib._bulk import ReplayClock, export_lines, import_jsonl
from memlib._retrieval import postings
from memlib._vectors import Embedder
from memlib.errors import RemoteMemoryValidationError
from memlib.rankers.embeddings import HashingEmbedder, PairEmbedder
from memlib.sample import SAMPLE_AS_OF
from memlib.stores._admin import init_store_schema
from memlib.stores._known_at import KnownAtVectorStore, store_known_at
from memlib.stores.sql._known_at import SqlKnownAt
from memlib.stores.sql._postgres import split_url
from memlib.stores.sql._schema import SCHEMA_VERSION

USER = "alice"
T0 = datetime(2026, 8, 10, 8, tzinfo=UTC)
AS_OF = datetime(2026, 8, 20, 12, tzinfo=UTC)
RANKERS = ("baseline", "bm25", "bm25+stopwords", "hybrid")
QUERIES = ("layered memory design", "the sqlite wal and the agent", "café recall")
WORDS = ("memory", "layered", "sqlite", "wal", "recall", "agent", "design", "the", "café")
NOTE = MemorySource(
    source_id="r", source_type="note", title="Withdrawn", captured_at="2026-08-10T08:00:00Z"
)
EMBEDDERS: dict[str, Embedder] = {
    "turns": HashingEmbedder(64),
    "pairs": PairEmbedder(HashingEmbedder(64)),
}
FIXTURES = Path(__file__).parents[1] / "fixtures" / "sql"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _item(memory_id: str, rng: random.Random, source: str, kind: str = "conversation") -> Any:
    text = " ".join(rng.choices(WORDS, k=rng.randint(1, 5)))
    captured = T0 - timedelta(days=rng.randint(0, 30), seconds=rng.randint(0, 3))
    return {
        "kind": kind,
        "memory_id": memory_id,
        "content": f"{text} (notes)",
        "summary": text,
        "source": MemorySource(
            source_id=source,
            source_type="conversation_transcript",
            title=f"Transcript {source}",
            captured_at=captured.isoformat(),
        ),
    }


def _history(store: Any, clock: Clock) -> None:
    """Turns of three sources, profiles, retractions and supersedes of earlier turns
    (middle turns too: their neighbours and pair texts change), at instants with ties and
    fractions, and twice back in time (a later write stored before earlier ones)."""
    rng = random.Random(36)
    live: list[str] = []
    serial = 0
    steps = (0, 1, 0.5, 3600, -1800, 0, 7200, 0.000001, 86400, -90000, 60, 1)
    for step, seconds in enumerate(steps):
        clock.now += timedelta(seconds=seconds)
        items = []
        for _ in range(rng.randint(1, 4)):
            serial += 1
            profile = rng.random() < 0.15
            source = "me" if profile else f"s-{rng.randint(0, 2)}"
            items.append(
                _item(f"r-{serial}", rng, source, "profile" if profile else "conversation")
            )
        store.append_many(items)
        live += [item["memory_id"] for item in items]
        if step >= 2:
            clock.now += timedelta(seconds=rng.choice((0, 1)))
            target = live.pop(rng.randrange(len(live)))
            if rng.random() < 0.5:
                store.retract(target, reason="withdrawn", source=NOTE)
            else:
                serial += 1
                kind = store.records_by_id([target])[0].kind.value
                new = _item(f"r-{serial}", rng, f"s-{rng.randint(0, 2)}", kind)
                store.supersede(target, new, reason="corrected")
                live.append(new["memory_id"])


def _instants(store: Any) -> list[datetime]:
    """Before everything, at every write, a hair before and after each, and after all."""
    times = sorted({datetime.fromisoformat(r.stored_at) for r in store.read_all()})
    tiny = timedelta(microseconds=1)
    found = {times[0] - timedelta(days=1), times[-1] + timedelta(days=1)}
    for t in times:
        found |= {t - tiny, t, t + tiny}
    return sorted(found)


def _answers(view: Any, ids: list[str]) -> dict[Any, Any]:
    """Every read of ``view``: the recalls of each ranker and each record read."""
    out: dict[Any, Any] = {
        (ranker, text): RecallEngine(view, ranker=ranker)
        .recall(text, limit=4, as_of=AS_OF, query_id="q")
        .to_json()
        for ranker in RANKERS
        for text in QUERIES
    }
    out["read_all"] = view.read_all()
    for kind in (None, *MemoryKind):
        out["records", kind] = view.records(kind)
    out["profile"] = view.latest_profile()
    out["retractions"] = [view.retraction_of(m) for m in ids]
    out["existing"] = view.existing_ids(ids)
    out["by_id"] = view.records_by_id(ids[::-1])
    out["neighbours"] = view.source_neighbours(ids)
    out["vector_state"] = view.vector_state()
    return out


def _same_as_generic(store: Any, reopen: Callable[[], Any]) -> None:
    ids = [r.memory_id for r in store.read_all()] + ["unknown"]
    instants = _instants(store)
    assert len(instants) > 3
    for instant in instants:
        view = store_known_at(store, instant)
        assert isinstance(view, SqlKnownAt)
        expected = _answers(KnownAtVectorStore(store, instant), ids)
        assert _answers(view, ids) == expected, instant
        # A new store each time too: the view must not lean on what the store read before.
        assert _answers(store_known_at(reopen(), instant), ids) == expected, instant


@pytest.fixture
def sql_dsn(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """``new()``: a fresh store URL of the backend (``request.param``) each call."""
    made: list[str] = []
    count = iter(range(1_000))

    def new() -> str:
        if request.param == "sqlite":
            return f"sqlite:{tmp_path / f'memlib-{next(count)}.sqlite'}"
        dsn = request.getfixturevalue("pg_dsn")
        made.append(fresh_schema(dsn))
        return f"{dsn}{'&' if '?' in dsn else '?'}schema={made[-1]}"

    yield new
    for name in made:
        drop_schema(request.getfixturevalue("pg_dsn"), name)


BACKENDS = pytest.mark.parametrize("sql_dsn", ["sqlite", "postgresql"], indirect=True)


@pytest.fixture(autouse=True)
def numpy_always(monkeypatch: pytest.MonkeyPatch) -> None:
    """The small stores here take numpy's paths, as a big one does."""
    monkeypatch.setattr(postings, "NUMPY_MIN_POSTINGS", 0)


@BACKENDS
@pytest.mark.parametrize("embedder", sorted(EMBEDDERS))
def test_the_view_answers_as_the_generic_class_at_every_instant(
    sql_dsn: Callable[[], str], embedder: str
) -> None:
    url, clock = sql_dsn(), Clock()
    store: Any = open_store(url, user_id=USER, clock=clock, embedder=EMBEDDERS[embedder])
    _history(store, clock)
    _same_as_generic(store, lambda: open_store(url, user_id=USER, embedder=EMBEDDERS[embedder]))


@BACKENDS
def test_an_import_that_replays_stored_at_going_back(
    sql_dsn: Callable[[], str], tmp_path: Path
) -> None:
    # A JSONL store's history (whose stored_at goes back twice), exported and imported
    # with its stored_at: the SQL rows' stored_at is not in id order.
    clock = Clock()
    source = RemoteMemoryStore(tmp_path / "source.jsonl", user_id=USER, clock=clock)
    _history(source, clock)
    lines = tmp_path / "export.jsonl"
    lines.write_text("".join(line + "\n" for line in export_lines(source)), encoding="utf-8")
    url, replay = sql_dsn(), ReplayClock()
    store: Any = open_store(url, user_id=USER, clock=replay, embedder=EMBEDDERS["pairs"])
    import_jsonl(store, lines, batch_size=3, clock=replay)
    stored = [r.stored_at for r in store.read_all()]
    assert stored == [r.stored_at for r in source.read_all()] and stored != sorted(stored)
    _same_as_generic(store, lambda: open_store(url, user_id=USER, embedder=EMBEDDERS["pairs"]))


@BACKENDS
def test_without_numpy_the_runs_are_cut_alike(
    sql_dsn: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postings, "NUMPY_MIN_POSTINGS", 10**12)
    url, clock = sql_dsn(), Clock()
    store: Any = open_store(url, user_id=USER, clock=clock)
    _history(store, clock)
    _same_as_generic(store, lambda: open_store(url, user_id=USER))


@BACKENDS
def test_the_view_is_read_only_with_the_generic_words(sql_dsn: Callable[[], str]) -> None:
    clock = Clock()
    store: Any = open_store(sql_dsn(), user_id=USER, clock=clock, embedder=EMBEDDERS["turns"])
    _history(store, clock)
    instant = _instants(store)[5]
    item = _item("new", random.Random(0), "s-0")
    writes: dict[str, Callable[[Any], Any]] = {
        "append": lambda s: s.append(**item),
        "append_many": lambda s: s.append_many([item]),
        "retract": lambda s: s.retract("r-1", reason="x", source=NOTE),
        "supersede": lambda s: s.supersede("r-1", item, reason="x"),
        "put_vectors": lambda s: s.put_vectors("m", 2, {}),
        "drop_vectors": lambda s: s.drop_vectors(),
        "records_without_vectors": lambda s: s.records_without_vectors(5),
    }
    before = store.read_all()
    for name, write in writes.items():
        words = []
        for view in (store_known_at(store, instant), KnownAtVectorStore(store, instant)):
            with pytest.raises(RemoteMemoryValidationError) as refused:
                write(view)
            words.append(str(refused.value))
        assert words[0] == words[1] and "read-only" in words[0], name
    assert store.read_all() == before


@BACKENDS
def test_a_view_sees_no_write_made_after_it_read(sql_dsn: Callable[[], str]) -> None:
    # The view holds what T takes from the scope while the scope's counts stay; a write
    # in between (a retraction of a turn known at T, new turns) is read anew.
    url, clock = sql_dsn(), Clock()
    store: Any = open_store(url, user_id=USER, clock=clock)
    _history(store, clock)
    instant = _instants(store)[len(_instants(store)) // 2]
    ids = [r.memory_id for r in store.read_all()]
    view = store_known_at(store, instant)
    expected = _answers(KnownAtVectorStore(store, instant), ids)
    assert _answers(view, ids) == expected
    clock.now += timedelta(days=400)
    other = open_store(url, user_id=USER, clock=clock)
    target = next(
        r.memory_id
        for r in view.records(MemoryKind.CONVERSATION)
        if store.retraction_of(r.memory_id) is None
    )
    other.retract(target, reason="later", source=NOTE)
    other.append_many([_item("late", random.Random(1), "s-0")])
    assert _answers(view, ids) == _answers(KnownAtVectorStore(store, instant), ids) == expected


def _upgraded(sql_dsn: Callable[[], str], backend: str) -> str:
    """A store that schema 6's memlib wrote (tests/fixtures/sql), upgraded."""
    url = sql_dsn()
    name = "sqlite" if backend == "sqlite" else "postgres"
    fixture = (FIXTURES / f"{name}-v6.sql").read_text(encoding="utf-8")
    if backend == "sqlite":
        conn = sqlite3.connect(url.removeprefix("sqlite:"))
        conn.executescript(fixture)
        conn.close()
        Path(url.removeprefix("sqlite:")).chmod(0o600)
        return url
    import psycopg

    dsn, schema = split_url(url)
    assert schema is not None
    with psycopg.connect(dsn, autocommit=True) as pg:
        pg.execute(f"DROP SCHEMA {schema} CASCADE")
        pg.execute(fixture.replace("memlib_fixture", schema))
    assert init_store_schema(url)[1:] == (6, 7)
    return url


@pytest.mark.parametrize("sql_dsn", ["sqlite", "postgresql"], indirect=True)
def test_a_store_upgraded_from_schema_6_answers_alike(
    sql_dsn: Callable[[], str], request: pytest.FixtureRequest
) -> None:
    backend = request.node.callspec.params["sql_dsn"]
    url = _upgraded(sql_dsn, backend)
    clock = Clock()
    clock.now = datetime.fromisoformat(SAMPLE_AS_OF.isoformat()) + timedelta(days=1)
    store: Any = open_store(url, user_id=USER, clock=clock, embedder=EMBEDDERS["pairs"])
    old = store.records(MemoryKind.CONVERSATION)  # SQLite upgrades on this first read
    assert store.schema_version() == SCHEMA_VERSION == 7
    # every row's stored_us, filled from its body by the upgrade
    assert store._read("SELECT count(*) FROM {s}records WHERE stored_us IS NULL") == [(0,)]
    assert store.drop_vectors()  # the fixture's model's, of 4 dimensions
    _history(store, clock)
    store.retract(old[0].memory_id, reason="later", source=NOTE)
    _same_as_generic(store, lambda: open_store(url, user_id=USER, embedder=EMBEDDERS["pairs"]))
