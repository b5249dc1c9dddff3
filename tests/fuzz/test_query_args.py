"""Fuzz target: recall arguments across the three backends (jsonl, sqlite, postgresql).

The same records go into each backend; each case draws ``(query, limit, as_of,
min_score, known_at, ranker, user_id)`` and recalls on all three. Documented result
(docs/reference.md#backends, #normalize): byte-identical ``to_json()`` everywhere, or
the same error class everywhere — a ``RemoteMemoryValidationError`` of one line, since
the store is healthy and only the arguments can be wrong. A user id that is not NFKC or
not visible is refused by every store (docs/contract.md).

One case in twelve appends instead: a record whose text or id holds what backends
could store differently (U+0000, NFD, format characters, a lone surrogate), into a scope
of its own on each backend, then recalls it; the same parity holds, and a new id that
is not NFC or not visible is refused (docs/contract.md).
"""

from __future__ import annotations

import math
import random
import shutil
import unicodedata
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from support.pgserver import drop_schema, fresh_schema, pg_dsn, schema_url  # noqa: F401

from memlib import RecallEngine, open_store
from memlib._runtime import scope_path
from memlib.errors import RemoteMemoryValidationError
from memlib.stores._base import MemoryStore

from . import common

TARGET = "query_args"
BACKENDS = ("jsonl", "sqlite", "postgresql")
USERS = (
    "alice",
    "  ALICE ",
    "bob",
    "",
    " ",
    "\x00",
    "ali\x00ce",
    "a\u0301lice",
    "\u00e1lice",
    "\u202ealice",
    "x" * 10_000,
    "ﬁ",
    "\ud800",
    None,
    5,
)
RANKERS = ("baseline", "bm25", "bm25+stopwords")
HOSTILE_RANKERS = ("", "BM25", "baseline ", "bm25\x00", "unknown", "\u202ebm25", None, 5)
CLOCK = datetime(2026, 8, 10, 12, tzinfo=UTC)


def _clock() -> datetime:
    return CLOCK


def _items() -> list[dict[str, Any]]:
    """A corpus with ties, old and new records, several languages, a profile."""
    r = random.Random(f"{common.SEED}:{TARGET}:corpus")
    items = []
    for i in range(40):
        words = " ".join(common.word(r) for _ in range(r.randint(2, 9)))
        items.append(
            {
                "kind": "conversation" if i % 13 else "profile",
                "memory_id": f"q-{i:03d}" if i % 7 else f"Q-{i:03d}-{common.word(r)}",
                "content": words,
                "summary": " ".join(common.word(r) for _ in range(r.randint(1, 3))),
                "source": {
                    "source_id": f"s-{i % 5}",
                    "source_type": "test",
                    "title": f"t {i}",
                    "captured_at": r.choice(common.TIMESTAMPS_OK),
                },
            }
        )
    return items


class Backends:
    """One store per backend and user id, opened once (a PostgreSQL connection each)."""

    def __init__(self, folder: Path, pg_url: str) -> None:
        self.folder = folder
        self.urls = {"sqlite": f"sqlite:{folder / 'memlib.sqlite'}", "postgresql": pg_url}
        self.stores: dict[tuple[str, Any], tuple[MemoryStore | None, BaseException | None]] = {}
        items = _items()
        for backend in BACKENDS:
            store = self.open(backend, "alice")[0]
            assert store is not None
            store.append_many(items)
            store.retract("q-003", reason="wrong", source=items[0]["source"])

    def url(self, backend: str, user: Any) -> str:
        if backend != "jsonl":
            return self.urls[backend]
        # One file per scope, as the runtime lays them out; a user id that has no scope
        # gets a path of its own, so that the store's own check is what refuses it.
        try:
            return f"jsonl:{scope_path(self.folder / 'jsonl', user)}"
        except Exception:  # noqa: BLE001
            return f"jsonl:{self.folder / 'jsonl' / 'no-scope' / 'records.jsonl'}"

    def open(self, backend: str, user: Any) -> tuple[MemoryStore | None, BaseException | None]:
        key = (backend, user)
        if key not in self.stores:
            self.stores[key] = common.timed(
                lambda: open_store(self.url(backend, user), user_id=user, clock=_clock)
            )
        return self.stores[key]


def _moment(r: random.Random, *, valid: bool) -> Any:
    if valid:
        roll = r.random()
        if roll < 0.75:
            return CLOCK + timedelta(
                days=r.choice((0, 1, -30, 365, -3650)),
                microseconds=r.choice((0, 1, 250_000, 999_999)),
            )
        if roll < 0.85:
            return CLOCK.replace(tzinfo=None)
        return CLOCK.astimezone(timezone(timedelta(hours=r.choice((-12, 5.5, 14)))))
    if r.random() < 0.4:
        return r.choice(
            (
                datetime.min,
                datetime.max,
                datetime.min.replace(tzinfo=UTC),
                datetime.max.replace(tzinfo=UTC),
                datetime.max.replace(tzinfo=timezone(timedelta(hours=-23))),
                datetime.min.replace(tzinfo=timezone(timedelta(hours=23))),
            )
        )
    return common.timestamp(r)


def _valid(r: random.Random) -> dict[str, Any]:
    query = " ".join(common.word(r) for _ in range(r.randint(1, 4)))
    if r.random() < 0.3:
        query = unicodedata.normalize(r.choice(("NFD", "NFKD")), query)
    return {
        "query": query,
        "limit": r.randint(1, 10),
        "as_of": _moment(r, valid=True),
        "min_score": r.choice((None, None, None, 0.0, 0.3, 0.5, 0.85, "suggested", "0.5")),
        "known_at": None
        if r.random() < 0.7
        else r.choice((_moment(r, valid=True), r.choice(common.TIMESTAMPS_OK))),
        "ranker": r.choice(RANKERS),
        "user": "alice" if r.random() < 0.8 else "  ALICE ",
    }


def _hostile(r: random.Random, name: str) -> Any:
    if name == "query":
        return common.text(r, limit=2_000) if r.random() < 0.8 else common.value(r, limit=2_000)
    if name == "limit":
        return common.number(r) if r.random() < 0.8 else common.value(r)
    if name in ("as_of", "known_at"):
        moment = _moment(r, valid=False)
        # as_of=None is "now", read by each backend's recall a moment apart: recency
        # may differ in the sixth decimal, which is no disagreement of the backends.
        return CLOCK if moment is None and name == "as_of" else moment
    if name == "min_score":
        return r.choice(
            (
                -1,
                2,
                "nan",
                "inf",
                "1e400",
                "",
                " 0.5 ",
                "0x10",
                10**400,
                -(10**400),
                math.nan,
                math.inf,
                True,
                [],
                "\x00",
                "suggested\n",
            )
        )
    if name == "ranker":
        return r.choice(HOSTILE_RANKERS)
    return r.choice(USERS)


def _arguments(r: random.Random) -> dict[str, Any]:
    """Valid arguments with none, one or a few of them hostile (all wrong at once tests
    only the first check)."""
    args = _valid(r)
    for name in r.sample(sorted(args), r.choice((0, 0, 1, 1, 1, 1, 2, 3))):
        args[name] = _hostile(r, name)
    return args


def _recall(backends: Backends, backend: str, args: dict[str, Any]) -> tuple[Any, ...]:
    store, exc = backends.open(backend, args["user"])
    if exc is not None:
        return ("error", exc)
    assert store is not None

    def call() -> str:
        engine = RecallEngine(store, ranker=args["ranker"])
        return engine.recall(
            args["query"],
            limit=args["limit"],
            as_of=args["as_of"],
            query_id="q",
            known_at=args["known_at"],
            min_score=args["min_score"],
        ).to_json()

    result, exc = common.timed(call)
    return ("ok", result) if exc is None else ("error", exc)


def _append(backends: Backends, backend: str, item: dict[str, Any]) -> tuple[Any, ...]:
    """One append to a scope of its own (so one backend's refusal cannot change what the
    next case finds): the record as stored, then a recall of it."""
    user = f"writer-{item['source']['source_id']}"
    store, exc = common.timed(
        lambda: open_store(backends.url(backend, user), user_id=user, clock=_clock)
    )
    if exc is not None:
        return ("error", exc)
    assert store is not None

    def call() -> str:
        record = store.append(**item)
        query = f"{item['summary']}"
        try:
            found = RecallEngine(store).recall(query, as_of=CLOCK, query_id="q").to_json()
        except RemoteMemoryValidationError as refused:  # a summary with no term
            found = f"refused: {type(refused).__name__}"
        return f"{record.to_dict()!r}\n{found}"

    try:
        result, exc = common.timed(call)
    finally:
        store.close()
    return ("ok", result) if exc is None else ("error", exc)


def _item(r: random.Random, number: int) -> dict[str, Any]:
    """A record whose text or id may hold what the backends store differently."""
    tricky = ("\x00", "e\u0301", "\u00e9", "\u212b", "\u00c5", "\ufeff", "\u200b", "\ud800")

    def hostile() -> str:
        return f"{common.word(r)}{r.choice(tricky)}{common.word(r)}"

    item: dict[str, Any] = {
        "kind": "conversation",
        "memory_id": f"w-{number}",
        "content": f"written {common.word(r)} {common.word(r)}",
        "summary": common.word(r),
        "source": {
            "source_id": f"s{number}",
            "source_type": "test",
            "title": "t",
            "captured_at": "2026-08-01T12:00:00Z",
        },
    }
    for name in r.sample(("memory_id", "content", "summary", "title"), r.randint(1, 2)):
        if name == "title":
            item["source"] = {**item["source"], "title": hostile()}
        elif name == "memory_id":
            item[name] = (
                unicodedata.normalize(r.choice(("NFC", "NFD")), f"café-{r.randint(0, 50)}")
                if r.random() < 0.5
                else f"w-{number}{r.choice(tricky)}"
            )
        else:
            item[name] = hostile()
    return item


def one_case(backends: Backends, number: int, failures: common.Failures) -> None:
    r = common.rng(TARGET, number)
    if r.random() < 0.08:
        args = _item(r, number)
        outcomes = {backend: _append(backends, backend, args) for backend in BACKENDS}
    else:
        args = _arguments(r)
        outcomes = {backend: _recall(backends, backend, args) for backend in BACKENDS}
    shown = "{" + ", ".join(f"{k!r}: {common.brief(v, 120)}" for k, v in args.items()) + "}"
    detail = f"{shown}: " + "; ".join(
        f"{b}: {o[1]!r}" if o[0] == "error" else f"{b}: ok" for b, o in outcomes.items()
    )

    def fail(what: str, error: BaseException | None = None) -> None:
        failures.add(common.signature(what, error), number, detail[:1_500], size=len(shown))

    errors = {b: o[1] for b, o in outcomes.items() if o[0] == "error"}
    mix = ", ".join(sorted({type(e).__name__ for e in errors.values()})) or "ok"
    failures.note(f"{'append' if 'kind' in args else 'recall'}: {mix}")
    for backend, exc in errors.items():
        problem = common.typed_problem(exc)
        if problem is not None:
            return fail(f"{backend}: {problem}", exc)
        if not isinstance(exc, RemoteMemoryValidationError):
            return fail(f"{backend}: bad arguments raised {type(exc).__name__}", exc)
    if errors and len(errors) < len(BACKENDS):
        first = next(iter(errors.values()))
        return fail(f"only {', '.join(errors)} refused", first)
    if errors:
        classes = {type(exc) for exc in errors.values()}
        if len(classes) > 1:
            fail("the backends refused with different classes")
        return
    if "kind" in args and common.hidden_or_not_nfc(args["memory_id"]):
        return fail("a new memory_id that is not NFC or not visible was accepted")
    if "kind" not in args and common.refused_user_id(args["user"]):
        return fail("a user id that is not NFKC or not visible was accepted")
    texts = {outcome[1] for outcome in outcomes.values()}
    if len(texts) > 1:
        differ = [b for b in BACKENDS[1:] if outcomes[b][1] != outcomes["jsonl"][1]]
        fail(f"to_json differs from jsonl on {', '.join(differ)}")


@pytest.fixture
def backends(tmp_path: Path, pg_dsn: str) -> Iterator[Backends]:  # noqa: F811
    folder = common.work_folder(tmp_path)
    schema = fresh_schema(pg_dsn)
    try:
        yield Backends(folder, schema_url(pg_dsn, schema))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        drop_schema(pg_dsn, schema)


def _run(backends: Backends, *, stress: bool) -> None:
    with common.Run(TARGET) as run:
        for number in common.cases(300, 100_000, stress=stress):
            one_case(backends, number, run.failures)
            run.count += 1
    run.check()


def test_query_args_sample(backends: Backends) -> None:
    _run(backends, stress=False)


@pytest.mark.stress
def test_query_args_full(backends: Backends) -> None:
    _run(backends, stress=True)
