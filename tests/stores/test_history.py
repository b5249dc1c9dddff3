"""Issue 18 on every backend: supersede, ``known_at``, ``explain`` (JSONL, SQLite, PostgreSQL).

- supersede: both records or neither, linked both ways, refused for a retracted, foreign,
  retraction or other-kind target, with nothing written; read back by a fresh store.
- known_at, the replay property: for generated histories (appends, retractions,
  supersedes, at instants with ties and fractions), ``recall(known_at=T)`` equals the
  recall of a store replayed from the operations stored up to T, for every lexical
  ranker and ``hybrid`` over stored vectors, and so does the profile at T.
- explain: the same verdict, to the byte, on every backend and ranker, and the verdict
  agrees with what ``recall`` shows (hit ⇔ among the hits at that rank; below the cut ⇔
  past ``limit``, beside the recall's last hit; below min_score ⇔ within ``limit``,
  dropped).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.pgserver import drop_schema, fresh_schema, pg_dsn, schema_url  # noqa: F401

from memlib import MemoryKind, MemorySource, RecallEngine, open_store
from memlib.errors import RemoteMemoryDuplicateError, RemoteMemoryValidationError
from memlib.rankers.embeddings import HashingEmbedder, PairEmbedder
from memlib.records import format_timestamp
from memlib.stores._base import MemoryStore
from memlib.stores._known_at import store_known_at

BACKENDS = ("jsonl", "sqlite", "postgresql")
LEXICAL = ("baseline", "bm25", "bm25+stopwords")
RANKERS = (*LEXICAL, "hybrid")
AS_OF = datetime(2026, 8, 20, 12, tzinfo=UTC)
T0 = datetime(2026, 8, 10, 8, tzinfo=UTC)
EMBEDDER = HashingEmbedder(64)
PAIRS = PairEmbedder(EMBEDDER)  # each record embedded with the turn before it


class Clock:
    """A store clock the test moves: every write is stored at ``now``."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(scope="module")
def locations(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Callable[[str, str], str]]:
    """``where(backend, name)``: one store location per (backend, name), kept for the
    module; PostgreSQL schemas are made on first use and dropped at the end."""
    root = tmp_path_factory.mktemp("history")
    schemas: dict[str, str] = {}
    dsn: list[str] = []

    def where(backend: str, name: str) -> str:
        if backend == "jsonl":
            return f"jsonl:{root / name / uuid.uuid4().hex / 'records.jsonl'}"
        if backend == "sqlite":
            return f"sqlite:{root / f'{name}.sqlite'}"
        if not dsn:
            dsn.append(request.getfixturevalue("pg_dsn"))
        if name not in schemas:
            schemas[name] = fresh_schema(dsn[0])
        return schema_url(dsn[0], schemas[name])

    yield where
    for schema in schemas.values():
        drop_schema(dsn[0], schema)


def _source(n: str, captured_at: str = "2026-08-01T12:00:00Z") -> MemorySource:
    return MemorySource(
        source_id=f"t-{n}",
        source_type="conversation_transcript",
        title=f"Transcript {n}",
        captured_at=captured_at,
    )


def _item(
    memory_id: str,
    text: str,
    *,
    kind: str = "conversation",
    captured_at: str = "2026-08-01T12:00:00Z",
    source: str | None = None,
) -> dict[str, Any]:
    return {
        "kind": kind,
        "memory_id": memory_id,
        "content": f"{text} (notes)",
        "summary": text,
        "source": _source(source or memory_id, captured_at),
    }


def _open(
    url: str, user: str, clock: Clock, *, vectors: bool = False, pairs: bool = False
) -> MemoryStore:
    options: dict[str, Any] = {"clock": clock}
    if vectors:
        options["embedder"] = PAIRS if pairs else EMBEDDER
    return open_store(url, user_id=user, **options)


# -- supersede -----------------------------------------------------------------------------


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def history_store(
    backend: str, locations: Callable[[str, str], str]
) -> Iterator[tuple[MemoryStore, Clock, str]]:
    clock = Clock()
    user = f"u-{uuid.uuid4().hex[:8]}"
    url = locations(backend, "supersede")
    store = _open(url, user, clock, vectors=True)
    store.append_many(
        [
            _item("m-1", "the default store is sqlite wal", captured_at="2026-08-01T12:00:00Z"),
            _item("m-2", "layered memory design review", captured_at="2026-08-02T12:00:00Z"),
            _item("p-1", "backend engineer", kind="profile", captured_at="2026-08-01T00:00:00Z"),
        ]
    )
    yield store, clock, url
    store.close()


def test_supersede_writes_both_linked_and_recall_shows_only_the_new(
    history_store: tuple[MemoryStore, Clock, str],
) -> None:
    store, clock, url = history_store
    clock.now = T0 + timedelta(days=1, seconds=0.25)
    new, retraction = store.supersede(
        "m-1",
        _item("m-1b", "the default store is postgresql", captured_at="2026-08-11T08:00:00Z"),
        reason="moved to a server",
    )
    stamp = format_timestamp(clock.now)
    assert (new.supersedes, new.stored_at) == ("m-1", stamp)
    assert (retraction.kind, retraction.retracts, retraction.superseded_by) == (
        MemoryKind.RETRACTION,
        "m-1",
        "m-1b",
    )
    assert (retraction.stored_at, retraction.content, retraction.source) == (
        stamp,
        "moved to a server",
        new.source,
    )
    # Read back by a store that did not write them: the links are stored, not remembered.
    again = _open(url, store.user_id, clock)  # type: ignore[attr-defined]
    try:
        by_id = {r.memory_id: r for r in again.read_all()}
        assert by_id["m-1b"] == new and by_id["retract-m-1"] == retraction
        assert by_id["m-1"].supersedes is None
        result = RecallEngine(again).recall("default store", as_of=AS_OF, query_id="q")
        assert [h.memory_id for h in result.hits] == ["m-1b"]
        assert result.retracted_records == 1
    finally:
        again.close()
    # The old vector went with the retraction; the new record got one.
    state = store.vector_state()  # type: ignore[attr-defined]
    assert (state.stored, state.missing) == (2, 0)


def test_a_profile_is_superseded_by_a_profile(
    history_store: tuple[MemoryStore, Clock, str],
) -> None:
    store, clock, _ = history_store
    clock.now = T0 + timedelta(hours=1)
    store.supersede(
        "p-1",
        _item("p-2", "staff engineer", kind="profile", captured_at="2026-07-01T00:00:00Z"),
        reason="promoted",
    )
    # Older captured_at than p-1, yet the latest: p-1 is no longer a candidate.
    latest = store.latest_profile()
    assert latest is not None and latest.memory_id == "p-2"


@pytest.mark.parametrize(
    ("target", "kind", "new_id", "error", "message"),
    [
        (
            "nope",
            "conversation",
            "n-1",
            RemoteMemoryValidationError,
            "cannot supersede nope: no such memory in this scope",
        ),
        (
            "retract-m-2",
            "conversation",
            "n-1",
            RemoteMemoryValidationError,
            "cannot supersede a retraction: retract-m-2",
        ),
        (
            "m-2",
            "conversation",
            "n-1",
            RemoteMemoryValidationError,
            "cannot supersede m-2: it is already retracted",
        ),
        (
            "p-1",
            "conversation",
            "n-1",
            RemoteMemoryValidationError,
            "cannot supersede profile record p-1 with a conversation record",
        ),
        ("m-1", "conversation", "m-2", RemoteMemoryDuplicateError, "duplicate memory_id: m-2"),
    ],
)
def test_refused_supersedes_write_nothing(
    history_store: tuple[MemoryStore, Clock, str],
    target: str,
    kind: str,
    new_id: str,
    error: type[Exception],
    message: str,
) -> None:
    store, clock, _ = history_store
    store.retract("m-2", reason="wrong", source=_source("r"))
    before = store.read_all()
    clock.now = T0 + timedelta(hours=2)
    with pytest.raises(error) as caught:
        store.supersede(target, _item(new_id, "replacement", kind=kind), reason="r")
    assert str(caught.value) == message
    assert store.read_all() == before


def test_a_foreign_record_cannot_be_superseded(
    history_store: tuple[MemoryStore, Clock, str], backend: str
) -> None:
    store, clock, url = history_store
    # JSONL keeps one file per scope; the SQL backends one table for every scope.
    where = url.replace("records.jsonl", "bob/records.jsonl") if backend == "jsonl" else url
    other = _open(where, f"{store.user_id}-bob", clock)  # type: ignore[attr-defined]
    try:
        other.append(**_item("b-1", "bob's secret plan"))
        with pytest.raises(
            RemoteMemoryValidationError,
            match="^cannot supersede b-1: no such memory in this scope$",
        ):
            store.supersede("b-1", _item("n-1", "taken over"), reason="r")
        assert "n-1" not in {r.memory_id for r in store.read_all()}
        assert [r.memory_id for r in other.read_all()] == ["b-1"]
    finally:
        other.close()


def test_a_hand_made_half_of_a_supersede_is_refused(
    history_store: tuple[MemoryStore, Clock, str],
) -> None:
    store, _, _ = history_store
    record = store.read_all()[0]
    lone = dataclasses.replace(record, memory_id="m-9", supersedes="m-2")
    with pytest.raises(RemoteMemoryValidationError, match="without its retraction"):
        store._append_batch((lone,))  # type: ignore[attr-defined]


# -- known_at: the replay property -----------------------------------------------------------

WORDS = (
    "memory",
    "layered",
    "sqlite",
    "wal",
    "recall",
    "agent",
    "design",
    "the",
    "and",
    "分层记忆",
    "远程记忆",
    "café",
    "postgresql",
)
STEPS = (
    timedelta(0),
    timedelta(0),
    timedelta(milliseconds=500),
    timedelta(seconds=1),
    timedelta(hours=3),
    timedelta(days=2),
)
CAPTURED = (
    "2026-07-01T00:00:00Z",
    "2026-08-01T12:00:00Z",
    "2026-08-01T12:00:00Z",
    "2026-08-09T23:59:59.5Z",
    "2026-08-15T00:00:00Z",
)
QUERIES = ("layered memory design", "sqlite wal and the agent", "远程记忆 recall")

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)
operation = st.one_of(
    st.tuples(
        st.just("append"),
        st.lists(
            st.tuples(texts, st.sampled_from(CAPTURED), st.booleans()), min_size=1, max_size=3
        ),
    ),
    st.tuples(st.just("retract"), st.integers(0, 30)),
    st.tuples(st.just("supersede"), st.integers(0, 30), texts, st.sampled_from(CAPTURED)),
)
histories = st.lists(st.tuples(operation, st.sampled_from(STEPS)), min_size=1, max_size=10)


def _apply(store: MemoryStore, ops: list[tuple[Any, ...]]) -> None:
    for op in ops:
        if op[0] == "append":
            store.append_many(op[1])
        elif op[0] == "retract":
            store.retract(op[1], reason="withdrawn", source=_source("r"))
        else:
            store.supersede(op[1], op[2], reason="corrected")


Plan = list[tuple[datetime, tuple[Any, ...]]]


def _plan(history: list[tuple[tuple[Any, ...], timedelta]]) -> Plan:
    """The generated history as valid operations with their instants (targets that do
    not apply are skipped, so every kept operation is one a store accepts)."""
    plan: list[tuple[datetime, tuple[Any, ...]]] = []
    live: list[tuple[str, str]] = []  # (memory_id, kind), in append order
    moment, serial = T0, itertools.count()
    for op, step in history:
        moment += step
        if op[0] == "append":
            items: list[dict[str, Any]] = []
            for text, captured, profile in op[1]:
                memory_id = f"r-{next(serial)}"
                kind = "profile" if profile else "conversation"
                items.append(
                    _item(
                        memory_id,
                        text,
                        kind=kind,
                        captured_at=captured,
                        source=f"s-{len(items) % 2}",
                    )
                )
                live.append((memory_id, kind))
            plan.append((moment, ("append", items)))
        elif live:
            memory_id, kind = live.pop(op[1] % len(live))
            if op[0] == "retract":
                plan.append((moment, ("retract", memory_id)))
            else:
                new_id = f"r-{next(serial)}"
                plan.append(
                    (
                        moment,
                        (
                            "supersede",
                            memory_id,
                            _item(new_id, op[2], kind=kind, captured_at=op[3]),
                        ),
                    )
                )
                live.append((new_id, kind))
    return plan


def _instants(plan: list[tuple[datetime, tuple[Any, ...]]]) -> list[datetime]:
    """Before everything, at every write, a hair before and after each, and after all."""
    times = sorted({t for t, _ in plan})
    tiny = timedelta(microseconds=1)
    out = {times[0] - timedelta(days=1), times[-1] + timedelta(days=1)}
    for t in times:
        out |= {t - tiny, t, t + tiny}
    return sorted(out)


@pytest.mark.parametrize("pairs", [False, True], ids=["turn-vectors", "pair-vectors"])
@pytest.mark.parametrize("backend_name", BACKENDS)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=histories, picks=st.lists(st.integers(0, 10_000), min_size=1, max_size=3))
def test_recall_known_at_equals_a_replay_of_what_was_stored_by_then(
    backend_name: str,
    pairs: bool,
    locations: Callable[[str, str], str],
    history: list[tuple[tuple[Any, ...], timedelta]],
    picks: list[int],
) -> None:
    plan = _plan(history)
    if not plan:
        return
    user = f"u-{uuid.uuid4().hex[:10]}"
    clock = Clock()
    store = _open(locations(backend_name, f"live-{pairs}"), user, clock, vectors=True, pairs=pairs)
    try:
        for moment, op in plan:
            clock.now = moment
            _apply(store, [op])
        instants = _instants(plan)
        for pick in {*picks, len(instants) - 1}:
            _compare_at(store, plan, instants[pick % len(instants)], backend_name, locations, pairs)
    finally:
        store.close()


def _compare_at(
    store: MemoryStore,
    plan: list[tuple[datetime, tuple[Any, ...]]],
    known_at: datetime,
    backend_name: str,
    locations: Callable[[str, str], str],
    pairs: bool = False,
) -> None:
    clock = Clock()
    # Another user in another place: its scope is put back below (a scope is a hash of
    # the user id and nothing else, and every hit carries it).
    replay = _open(
        locations(backend_name, f"replay-{pairs}"),
        f"r-{uuid.uuid4().hex}",
        clock,
        vectors=True,
        pairs=pairs,
    )
    try:
        for moment, op in plan:
            if moment <= known_at:
                clock.now = moment
                _apply(replay, [op])
        for ranker in RANKERS:
            for text in QUERIES:
                seen = (
                    RecallEngine(store, ranker=ranker)
                    .recall(text, limit=4, as_of=AS_OF, query_id="q", known_at=known_at)
                    .to_dict()
                )
                assert seen.pop("known_at") == format_timestamp(known_at)
                replayed = (
                    RecallEngine(replay, ranker=ranker)
                    .recall(text, limit=4, as_of=AS_OF, query_id="q")
                    .to_json()
                )
                assert json.dumps(seen, indent=2, ensure_ascii=False) == replayed.replace(
                    replay.user_scope, store.user_scope
                ), (ranker, text, known_at)
        profile = store_known_at(store, known_at).latest_profile()
        again = replay.latest_profile()
        assert (profile and profile.memory_id) == (again and again.memory_id)
    finally:
        replay.close()


# -- explain: parity, and agreement with recall ---------------------------------------------

CORPUS = (
    ("c-01", "layered memory design for the agent", "2026-08-01T12:00:00Z", "a"),
    ("c-02", "layered memory review notes", "2026-08-03T09:30:00Z", "a"),
    ("c-03", "the memory design of remote recall", "2026-08-09T12:00:00Z", "a"),
    ("c-04", "sqlite wal keeps the default store", "2026-08-05T08:00:00Z", "b"),
    ("c-05", "sqlite wal keeps the default store", "2026-08-05T08:00:00Z", "b"),
    ("c-06", "design of the recall tool and its query", "2026-07-28T18:00:00Z", "b"),
    ("c-07", "分层记忆 的 设计", "2026-08-06T10:00:00Z", "c"),
    ("c-08", "memory of the café meeting", "2026-06-15T09:00:00Z", "c"),
    ("c-09", "the design was withdrawn", "2026-08-07T15:00:00Z", "c"),
)
EXPLAIN_QUERIES = ("layered memory design", "sqlite default store", "分层记忆 design")
MIDWAY = T0 + timedelta(hours=12)


@pytest.fixture(scope="module")
def explained_stores(locations: Callable[[str, str], str]) -> Iterator[dict[str, MemoryStore]]:
    """The same history on every backend: the corpus at T0, then at T0 + 1 day a
    retraction of c-09, a supersede of c-04 and a new profile."""
    stores = {}
    for backend_name in BACKENDS:
        clock = Clock()
        store = _open(locations(backend_name, "explain"), "explain-user", clock, vectors=True)
        store.append_many(
            [
                _item(m, text, captured_at=captured, source=source)
                for m, text, captured, source in CORPUS
            ]
            + [_item("p-1", "backend engineer", kind="profile")]
        )
        clock.now = T0 + timedelta(days=1)
        store.retract("c-09", reason="said in jest", source=_source("r"))
        store.supersede(
            "c-04",
            _item(
                "c-04b",
                "postgresql is now the default store",
                captured_at="2026-08-10T09:00:00Z",
                source="b",
            ),
            reason="moved to a server",
        )
        stores[backend_name] = store
    yield stores
    for store in stores.values():
        store.close()


@pytest.mark.parametrize("ranker", RANKERS)
def test_explain_gives_one_verdict_on_every_backend_and_agrees_with_recall(
    explained_stores: dict[str, MemoryStore], ranker: str
) -> None:
    ids = [m for m, *_ in CORPUS] + ["c-04b", "p-1", "retract-c-09", "not-there"]
    verdicts: set[str] = set()
    for text, known_at, min_score in itertools.product(
        EXPLAIN_QUERIES, (None, MIDWAY), (None, 0.6 if ranker == "baseline" else None)
    ):
        options: dict[str, Any] = {
            "limit": 2,
            "as_of": AS_OF,
            "query_id": "q",
            "known_at": known_at,
            "min_score": min_score,
        }
        per_backend = {
            name: [
                RecallEngine(store, ranker=ranker).explain(text, m, **options).to_json()
                for m in ids
            ]
            for name, store in explained_stores.items()
        }
        assert per_backend["sqlite"] == per_backend["jsonl"], (text, known_at)
        assert per_backend["postgresql"] == per_backend["jsonl"], (text, known_at)
        engine = RecallEngine(explained_stores["jsonl"], ranker=ranker)
        result = engine.recall(text, **options)
        # The cut by limit comes before the floor: its last hit is the unfloored one's.
        cut = engine.recall(text, **{**options, "min_score": None})
        shown = {h.memory_id: h for h in result.hits}
        for memory_id, raw in zip(ids, per_backend["jsonl"], strict=True):
            said = json.loads(raw)
            verdicts.add(said["verdict"])
            assert (said["verdict"] == "hit") == (memory_id in shown), said["message"]
            if said["verdict"] == "hit":
                assert said["rank"] == shown[memory_id].rank
                assert said["breakdown"] == shown[memory_id].score_breakdown.to_dict()
            elif said["verdict"] == "below_cut":
                assert said["rank"] > 2 and len(result.hits) + result.below_min_score == 2
                assert said["last_hit"] == cut.hits[-1].to_dict()
                assert said["breakdown"]["total"] <= said["last_hit"]["score"]
            elif said["verdict"] == "below_min_score":
                assert said["rank"] <= 2 and said["breakdown"]["total"] < min_score
    expected = {
        "hit",
        "below_cut",
        "superseded",
        "retracted",
        "not_conversation",
        "not_in_scope",
        "not_yet_stored",
    }
    if ranker != "hybrid":  # its dense path makes a candidate of every embedded record
        expected.add("no_shared_term")
    if ranker == "baseline":
        expected.add("below_min_score")
    assert expected <= verdicts


def test_explain_names_the_stage_and_the_facts(explained_stores: dict[str, MemoryStore]) -> None:
    engine = RecallEngine(explained_stores["sqlite"])
    said = {
        m: engine.explain("layered memory design", m, limit=2, as_of=AS_OF, query_id="q")
        for m in ("c-01", "c-02", "c-03", "c-04", "c-09", "p-1", "not-there", "c-07")
    }
    assert said["c-04"].message == (
        "memory c-04 was superseded by c-04b at 2026-08-11T08:00:00Z: moved to a server"
    )
    assert said["c-09"].message == (
        "memory c-09 was retracted at 2026-08-11T08:00:00Z: said in jest"
    )
    assert said["not-there"].message == "memory not-there is not in this scope"
    assert said["p-1"].verdict == "not_conversation" and said["p-1"].stage == "kind"
    assert said["c-07"].verdict == "no_shared_term"
    assert said["c-07"].record_terms == ("notes", "分层", "层记", "的", "记忆", "设计")
    # c-01 and c-02 both cover 2 of 3 terms; c-01 is older: recency decided, and the
    # breakdowns say so.
    below = said["c-02"] if said["c-02"].verdict == "below_cut" else said["c-01"]
    assert below.verdict == "below_cut" and below.deciding == "recency"
    assert below.last_hit is not None and below.breakdown is not None
    assert below.breakdown.lexical_coverage == below.last_hit.score_breakdown.lexical_coverage
    assert below.breakdown.recency < below.last_hit.score_breakdown.recency
    # Before the supersede, the old record is back, and the new one was not stored yet.
    then = engine.explain("sqlite default store", "c-04", limit=2, as_of=AS_OF, known_at=MIDWAY)
    assert then.verdict == "hit"
    later = engine.explain("sqlite default store", "c-04b", limit=2, as_of=AS_OF, known_at=MIDWAY)
    assert later.message == (
        "memory c-04b was stored at 2026-08-11T08:00:00Z, after known_at 2026-08-10T20:00:00Z"
    )


def test_a_supersede_cut_short_by_a_crash_is_neither_half(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """JSONL: a writer killed between the supersede's write and its fsync leaves the
    pair behind its batch note (as ``store.supersede`` writes it); readers see neither
    half, the old record still stands, and the next writer cuts both lines."""
    from memlib.sample import open_sample_store

    root = tmp_path_factory.mktemp("crashed-supersede")
    store = open_sample_store(root)
    acknowledged = store.path.stat().st_size
    scratch = open_sample_store(tmp_path_factory.mktemp("scratch"))
    new, retraction = scratch.supersede(
        "conversation-001",
        _item("conversation-099", "postgresql is the default store"),
        reason="moved",
    )
    store.lock_path.write_bytes(b"pending %d\n" % acknowledged)
    with open(store.path, "ab") as handle:
        for record in (new, retraction):
            handle.write(
                (
                    json.dumps(record.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"
                ).encode()
            )
    reader = open_sample_store(root)
    ids = {r.memory_id for r in reader.read_all()}
    assert {"conversation-099", "retract-conversation-001"}.isdisjoint(ids)
    hits = RecallEngine(reader).recall("sqlite default store", as_of=AS_OF, query_id="q").hits
    assert hits[0].memory_id == "conversation-001"
    # The next write cuts the unacknowledged pair before it appends.
    reader.append(**_item("m-after", "after the crash"))
    assert store.path.read_bytes().count(b"conversation-099") == 0


@pytest.mark.parametrize("ranker", LEXICAL)
@pytest.mark.parametrize("backend_name", BACKENDS)
def test_explain_walks_down_to_a_record_ranked_far_below_the_cut(
    backend_name: str, ranker: str, locations: Callable[[str, str], str]
) -> None:
    """Explain reads the order in growing rounds (16, 64, 256 …); a record ranked in the
    hundreds gets the place the whole reference order gives it."""
    from memlib.candidates import scan_recall_candidates
    from memlib.normalize import normalize_recall_query
    from memlib.rank import rank_key
    from memlib.rankers import get_ranker

    clock = Clock()
    store = _open(locations(backend_name, "deep"), f"deep-{uuid.uuid4().hex[:8]}", clock)
    try:
        words = ("memory", "design", "layered", "recall", "agent", "store")
        store.append_many(
            [
                _item(
                    f"d-{n:03d}",
                    " ".join(words[: 1 + n % len(words)]) + f" note {n % 7}",
                    captured_at=f"2026-0{1 + n % 8}-{1 + n % 28:02d}T12:00:00Z",
                )
                for n in range(300)
            ]
        )
        query = normalize_recall_query(
            "memory design layered note 3",
            user_scope=store.user_scope,
            limit=3,
            query_id="q",
            issued_at=AS_OF,
        )
        scan = scan_recall_candidates(query, store.read_all())
        breakdowns = get_ranker(ranker).score_candidates(query, scan, as_of=AS_OF)
        whole = sorted(zip(scan.candidates, breakdowns, strict=True), key=rank_key)
        engine = RecallEngine(store, ranker=ranker)
        for place in (0, 2, 3, 40, 150, len(whole) - 1):
            memory_id = whole[place][0].record.memory_id
            said = engine.explain(
                "memory design layered note 3", memory_id, limit=3, as_of=AS_OF, query_id="q"
            )
            assert said.rank == place + 1, (memory_id, said.message)
            assert said.candidates == len(whole)
            assert said.breakdown == whole[place][1]
            assert said.verdict == ("hit" if place < 3 else "below_cut")
    finally:
        store.close()
