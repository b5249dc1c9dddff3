"""``memlib mcp``: the life of a memory (remember, update, list, forget), through real
client sessions of the SDK's stdio client against ``python -m memlib mcp``.

Expected values come from the library on the same store, or from the documented rules
(docs/mcp.md) computed here again: the derived id's hash, the newest-first order, the
similarity of two notes, the size bound of every answer.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from support.mcp_client import call, connect, refused  # noqa: E402

from memlib import MemoryKind, RecallEngine, RemoteMemoryStore  # noqa: E402
from memlib._runtime import scope_path  # noqa: E402
from memlib.agent.mcp_server import ANSWER_MAX_CHARS, SIMILAR_FLOOR, SIMILAR_MAX, TOOLS  # noqa: E402
from memlib.agent.tools import ERROR_MAX_CHARS, note_similarity, note_terms  # noqa: E402
from memlib.records import LIMITS, MEMORY_ID_MAX, StoredMemory, format_timestamp  # noqa: E402
from memlib.records import parse_timestamp as parse  # noqa: E402
from memlib.sample import SAMPLE_AS_OF, SAMPLE_QUERY, open_sample_store  # noqa: E402
from memlib.stores import open_store  # noqa: E402
from memlib.stores._base import MemoryStore  # noqa: E402

FIXED = format_timestamp(SAMPLE_AS_OF)
REPORTS = Path(__file__).resolve().parents[2] / "reports"
# A tag character: invisible, so every answer writes it as a 12-character escape.
TAG = "\U000e0041"


# -- helpers ---------------------------------------------------------------------------


def params(url: str, env: dict[str, str], user: str = "alice") -> StdioServerParameters:
    args = ["-m", "memlib", "--store", url, "--user", user, "mcp", "--as-of", FIXED]
    return StdioServerParameters(command=__import__("sys").executable, args=args, env=env)


async def ok(session: ClientSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    is_error, text = await call(session, tool, arguments)
    assert not is_error, text
    data = json.loads(text)
    assert isinstance(data, dict)
    return data


def documented_id(
    content: str, summary: str, source: tuple[str, str, str], captured_at: str | None
) -> str:
    """docs/mcp.md: 'mcp-' and 32 hex digits of the SHA-256 of the JSON array."""
    fields = ["conversation", content, summary, *source, captured_at]
    return "mcp-" + hashlib.sha256(json.dumps(fields, ensure_ascii=False).encode()).hexdigest()[:32]


def newest_first(records: tuple[StoredMemory, ...]) -> list[str]:
    ordered = sorted(records, key=lambda r: (parse(r.stored_at), r.memory_id), reverse=True)
    return [r.memory_id for r in ordered]


def record_part(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k not in ("status", "similar", "retraction")}


@pytest.fixture
def url(tmp_path: Path) -> str:
    open_sample_store(tmp_path / "memory")
    return f"jsonl:{scope_path(tmp_path / 'memory', 'alice')}"


@pytest.fixture
def library(url: str) -> MemoryStore:
    return open_store(url, user_id="alice")


@pytest.fixture
def session_of(url: str, subprocess_env: dict[str, str], tmp_path: Path) -> Callable[..., Any]:
    def make() -> Any:
        return connect(params(url, subprocess_env), tmp_path / "server.stderr")

    return make


# -- remember: idempotent, with similar records -----------------------------------------


def test_a_retried_remember_returns_the_stored_record_and_writes_nothing(library, session_of):
    note = {
        "content": "The quokka migration plan moves the archive to cold storage.",
        "summary": "Quokka migration plan.",
    }
    derived = documented_id(
        note["content"], note["summary"], ("mcp", "mcp_tool", note["summary"]), None
    )

    async def session_test() -> None:
        async with session_of() as session:
            first = await ok(session, "remember", note)
            assert first["status"] == "stored" and first["memory_id"] == derived
            count = len(library.read_all())
            again = await ok(session, "remember", note)
            assert again["status"] == "already_stored"
            assert record_part(again) == record_part(first)
            # Whitespace is collapsed as the record stores it: the same note.
            spaced = {k: f"  {v.replace(' ', '   ')} \n" for k, v in note.items()}
            assert (await ok(session, "remember", spaced))["memory_id"] == derived
            assert len(library.read_all()) == count  # the retries wrote nothing

            dated = {**note, "captured_at": "2026-08-09T10:00:00+02:00"}
            stored = await ok(session, "remember", dated)
            assert stored["status"] == "stored" and stored["memory_id"] == documented_id(
                note["content"],
                note["summary"],
                ("mcp", "mcp_tool", note["summary"]),
                "2026-08-09T08:00:00Z",
            )
            same_instant = {**note, "captured_at": "2026-08-09T08:00:00Z"}
            assert (await ok(session, "remember", same_instant))["status"] == "already_stored"

            named = {**note, "memory_id": "quokka-plan"}
            assert (await ok(session, "remember", named))["status"] == "stored"
            assert (await ok(session, "remember", named))["status"] == "already_stored"
            other = {**named, "content": "Something else entirely."}
            assert await refused(session, "remember", other) == "duplicate memory_id: quokka-plan"

            await ok(session, "forget", {"memory_id": derived, "reason": "Dropped."})
            assert await refused(session, "remember", note) == (
                f"memory {derived} holds this content and was retracted: give a new "
                "memory_id to store it again"
            )
            assert (await ok(session, "remember", {**note, "memory_id": "again"}))["status"] == (
                "stored"
            )

    anyio.run(session_test)
    ids = [r.memory_id for r in library.read_all()]
    assert len(ids) == len(set(ids))
    assert ids.count(derived) == 1


def test_one_note_sent_by_two_servers_at_once_is_stored_once(library, session_of):
    async def remember(session: ClientSession, note: dict[str, Any], out: list[str]) -> None:
        out.append((await ok(session, "remember", note))["status"])

    async def session_test() -> None:
        async with session_of() as first, session_of() as second:
            for number in range(3):
                note = {"content": f"Race note {number} about quokkas.", "summary": "Race."}
                statuses: list[str] = []
                # Both calls are in flight together; the store's lock decides.
                async with anyio.create_task_group() as group:
                    group.start_soon(remember, first, note, statuses)
                    group.start_soon(remember, second, note, statuses)
                assert sorted(statuses) == ["already_stored", "stored"]

    anyio.run(session_test)
    contents = [r.content for r in library.read_all() if r.content.startswith("Race note")]
    assert sorted(contents) == [f"Race note {n} about quokkas." for n in range(3)]


def test_remember_names_the_similar_records_over_the_floor(library, session_of):
    paraphrase = {
        "content": "We decided that the layered memory keeps the workspace, the user and the "
        "remote memory boundaries separate.",
        "summary": "Layered memory boundaries.",
    }
    unrelated = {"content": "Quokkas sneeze marmalade at xylophones.", "summary": "Zebra."}

    async def session_test() -> None:
        async with session_of() as session:
            answer = await ok(session, "remember", paraphrase)
            similar = answer["similar"]
            assert 1 <= len(similar) <= SIMILAR_MAX
            assert similar[0]["memory_id"] == "conversation-003"
            mine = note_terms(f"{paraphrase['summary']} {paraphrase['content']}")
            by_id = {r.memory_id: r for r in library.read_all()}
            for entry in similar:
                record = by_id[entry["memory_id"]]
                expected = note_similarity(mine, note_terms(f"{record.summary} {record.content}"))
                assert entry["similarity"] == round(expected, 4) >= SIMILAR_FLOOR
                assert entry["summary"] == record.summary
            scores = [entry["similarity"] for entry in similar]
            assert scores == sorted(scores, reverse=True)
            # A retry names the same others, never itself.
            again = await ok(session, "remember", paraphrase)
            assert again["similar"] == similar
            assert (await ok(session, "remember", unrelated))["similar"] == []

    anyio.run(session_test)


def test_the_floor_is_the_measured_one():
    reports = sorted(REPORTS.glob("similar-notes-[0-9]*[0-9].json"))
    assert reports, "benchmarks/similar_notes.py writes reports/similar-notes-DATE.json"
    report = json.loads(reports[-1].read_text(encoding="utf-8"))
    assert report["suggested_floor"] == SIMILAR_FLOOR
    held_out = report["at_floor"]["held_out"]
    assert held_out["precision"] >= 0.9 and held_out["recall"] >= 0.9


def test_similarity_is_a_symmetric_cosine_of_content_words():
    a, b = note_terms("The cat sat on the mat."), note_terms("A mat, and the cat sat.")
    assert note_similarity(a, b) == note_similarity(b, a) == pytest.approx(1.0)
    assert note_similarity(a, note_terms("Dogs bark loudly.")) == 0.0
    # Stopwords alone say nothing: "the" and "on" are shared, no content word is.
    assert note_similarity(note_terms("on the hill"), note_terms("on the boat")) == 0.0
    half = note_similarity(note_terms("cat dog"), note_terms("cat bird"))
    assert half == pytest.approx(0.5)


# -- update ------------------------------------------------------------------------------


def test_update_supersedes_in_one_write_and_a_retry_writes_nothing(library, session_of):
    change = {
        "memory_id": "conversation-003",
        "content": "The layered memory now merges user and remote memory into one layer.",
        "summary": "Merged memory layers.",
        "reason": "The design changed.",
    }

    async def session_test() -> None:
        async with session_of() as session:
            answer = await ok(session, "update", change)
            assert answer["status"] == "updated"
            new_id = answer["memory_id"]
            assert new_id == documented_id(
                change["content"], change["summary"], ("mcp", "mcp_tool", change["summary"]), None
            )
            assert answer["supersedes"] == "conversation-003"
            retraction = answer["retraction"]
            assert retraction["retracts"] == "conversation-003"
            assert retraction["superseded_by"] == new_id
            assert retraction["content"] == "The design changed."
            stored = library.retraction_of("conversation-003")
            assert stored is not None and stored.to_dict() == retraction
            [new] = [r for r in library.read_all() if r.memory_id == new_id]
            assert new.to_dict() == record_part(answer)

            count = len(library.read_all())
            again = await ok(session, "update", change)
            assert again["status"] == "already_updated"
            assert record_part(again) == record_part(answer)
            assert again["retraction"] == retraction
            assert len(library.read_all()) == count

            hits = await ok(session, "recall_history", {"query": SAMPLE_QUERY})
            ids = [hit["memory_id"] for hit in hits["hits"]]
            assert "conversation-003" not in ids and new_id in ids
            expected = RecallEngine(library).recall(SAMPLE_QUERY, as_of=SAMPLE_AS_OF)
            assert ids == [hit.memory_id for hit in expected.hits]

            other = {**change, "content": "Yet another design."}
            assert await refused(session, "update", other) == (
                "cannot supersede conversation-003: it is already retracted"
            )
            assert await refused(session, "update", {**change, "memory_id": "nope"}) == (
                "cannot supersede nope: no such memory in this scope"
            )
            assert await refused(session, "update", {**change, "memory_id": "profile-001"}) == (
                "cannot supersede profile record profile-001 with a conversation record"
            )
            # The new content is already a record of its own: two records would say it.
            to_existing = {**change, "memory_id": "conversation-009"}
            assert await refused(session, "update", to_existing) == (
                f"this content is already stored as memory {new_id}: forget "
                "conversation-009 instead if it no longer holds"
            )
            missing = {k: v for k, v in change.items() if k != "reason"}
            assert await refused(session, "update", missing) == "update needs reason"
            assert await refused(session, "update", {**change, "user": "bob"}) == (
                "unknown update field: user"
            )
            assert await refused(session, "update", {**change, "reason": " "}) == (
                "reason must not be empty"
            )

    anyio.run(session_test)


# -- list ---------------------------------------------------------------------------------


def later_store(url: str, start: datetime) -> MemoryStore:
    """alice's store whose clock ticks half a second a write from ``start``."""
    ticks = (start + timedelta(milliseconds=500 * n) for n in range(1_000))
    return open_store(url, user_id="alice", clock=lambda: next(ticks))


def append_notes(store: MemoryStore, prefix: str, count: int) -> None:
    for number in range(count):
        store.append(
            kind="conversation",
            memory_id=f"{prefix}-{number}",
            content=f"Note {number} about {prefix}.",
            summary=f"{prefix} {number}",
            source={
                "source_id": prefix,
                "source_type": "test",
                "title": prefix,
                "captured_at": FIXED,
            },
        )


async def all_pages(
    session: ClientSession, arguments: dict[str, Any], between: Callable[[], None] | None = None
) -> list[str]:
    ids: list[str] = []
    cursor: str | None = None
    while True:
        page = await ok(session, "list", {**arguments, **({"cursor": cursor} if cursor else {})})
        ids += [entry["memory_id"] for entry in page["entries"]]
        cursor = page["next_cursor"]
        assert page["more"] is (cursor is not None)
        if cursor is None:
            return ids
        if between is not None:
            between()


def test_list_pages_newest_first_and_appends_do_not_move_a_cursor(url, library, session_of):
    # Stored at 08:00:00.5Z, 08:00:01Z...: a fraction sorts by time, not as text.
    append_notes(later_store(url, SAMPLE_AS_OF.replace(hour=8, microsecond=500_000)), "a", 5)

    async def session_test() -> None:
        async with session_of() as session:
            await ok(session, "forget", {"memory_id": "conversation-002", "reason": "Wrong."})
            expected = newest_first(library.read_all())
            late = later_store(url, datetime.now(UTC) + timedelta(days=1))
            added: list[int] = []

            def append_one() -> None:
                append_notes(late, f"late{len(added)}", 1)
                added.append(1)

            # Other writers append between the pages: the pages go on where they were.
            assert await all_pages(session, {"limit": 4}, between=append_one) == expected
            assert len(added) == -(-len(expected) // 4) - 1
            now = newest_first(library.read_all())
            assert await all_pages(session, {"limit": 50}) == now
            assert now[: len(added)] == [f"late{n}-0" for n in reversed(range(len(added)))]

            page = await ok(session, "list", {"limit": 3})
            first = page["entries"][0]
            [record] = [r for r in library.read_all() if r.memory_id == first["memory_id"]]
            assert first == {
                "memory_id": record.memory_id,
                "kind": "conversation",
                "stored_at": record.stored_at,
                "captured_at": record.source.captured_at,
                "summary": record.summary,
            }
            retractions = await all_pages(session, {"kind": "retraction"})
            assert retractions == newest_first(library.records(MemoryKind.RETRACTION))
            [retracted] = [
                e
                for e in (await ok(session, "list", {"limit": 50, "kind": "conversation"}))[
                    "entries"
                ]
                if e["memory_id"] == "conversation-002"
            ]
            assert retracted["retracted"] is True
            since = "2026-08-10T08:00:01Z"
            assert await all_pages(session, {"since": since}) == [
                m
                for m in now
                if parse(next(r for r in library.read_all() if r.memory_id == m).stored_at)
                >= parse(since)
            ]

    anyio.run(session_test)


def test_list_refuses_bad_arguments_with_one_line(session_of):
    cases: list[tuple[dict[str, Any], str]] = [
        ({"limit": 0}, "limit must be between 1 and 50"),
        ({"limit": 51}, "limit must be between 1 and 50"),
        ({"limit": "5"}, "limit must be an integer"),
        ({"limit": True}, "limit must be an integer"),
        ({"kind": "notes"}, "kind must be one of conversation, profile, retraction: 'notes'"),
        ({"kind": 3}, "kind must be a string"),
        (
            {"since": "yesterday"},
            "since must be an ISO-8601 instant with a time zone, e.g. "
            "2026-08-10T12:00:00Z: 'yesterday'",
        ),
        ({"cursor": "abc"}, "cursor is not a next_cursor of list: start again without one"),
        ({"cursor": "c1.!!!"}, "cursor is not a next_cursor of list: start again without one"),
        ({"cursor": "c1.WzFd"}, "cursor is not a next_cursor of list: start again without one"),
        ({"user": "bob"}, "unknown list field: user"),
    ]

    async def session_test() -> None:
        async with session_of() as session:
            for arguments, message in cases:
                assert await refused(session, "list", arguments) == message, arguments
            # A refusal that quotes a huge value is clipped to ERROR_MAX_CHARS.
            for tool, arguments in [
                ("list", {"since": "x" * 400_000}),
                ("list", {"kind": "\u200b" * 50_000}),
                ("remember", {"content": "c", "summary": "s", "captured_at": "y" * 400_000}),
            ]:
                text = await refused(session, tool, arguments)
                assert len(text) <= ERROR_MAX_CHARS and text.endswith("…"), text[:80]
                assert text.startswith(("since must be", "kind must be", "captured_at must"))
            assert (await ok(session, "list", {}))["entries"]  # still serving

    anyio.run(session_test)


# -- the size bound of every answer ------------------------------------------------------


def test_every_tool_states_its_bound():
    assert set(ANSWER_MAX_CHARS) == {spec.name for spec in TOOLS}
    docs = (REPORTS.parent / "docs" / "mcp.md").read_text(encoding="utf-8")
    for spec in TOOLS:
        bound = f"{ANSWER_MAX_CHARS[spec.name]:,}"
        assert f"{bound} characters" in spec.description, spec.name
        # docs/mcp.md's table says the same.
        [row] = [line for line in docs.splitlines() if line.startswith(f"| `{spec.name}` |")]
        assert row.endswith(f"| {bound} |"), row


def worst_note(word: str, memory_id: str | None = None) -> dict[str, Any]:
    """A remember with every field at its limit, the text all tag characters but a word."""
    note = {
        "content": f"{word} " + TAG * (LIMITS["content"] - len(word) - 1),
        "summary": f"{word} " + TAG * (LIMITS["summary"] - len(word) - 1),
        "title": TAG * LIMITS["title"],
        "source_id": TAG * LIMITS["source_id"],
        "source_type": TAG * LIMITS["source_type"],
        "captured_at": FIXED,
    }
    if memory_id is not None:
        note["memory_id"] = memory_id
    return note


def long_id(number: int) -> str:
    """The longest new id an answer can show: '"' is two characters in JSON (an invisible
    character, four or twelve, is refused in a new id)."""
    return f"{number}" + '"' * (MEMORY_ID_MAX - len(str(number)))


def test_answers_stay_under_their_bounds_on_the_worst_records(session_of):
    async def session_test() -> None:
        async with session_of() as session:
            for number in range(12):
                answer = await ok(session, "remember", worst_note("quokka", long_id(number)))
                assert answer["status"] == "stored"
                assert set(answer.get("clipped", [])) == set(LIMITS)
            # Near the bound: similar records are the worst ones too.
            assert len(answer["similar"]) == SIMILAR_MAX
            change = {**worst_note("quokka"), "memory_id": long_id(0), "reason": TAG * 20_000}
            del change["title"], change["source_id"], change["source_type"], change["captured_at"]
            answer = await ok(session, "update", change)
            assert answer["status"] == "updated"
            await ok(session, "forget", {"memory_id": long_id(1), "reason": TAG * 20_000})
            for limit in (1, 50):
                page = await ok(session, "list", {"limit": limit})
                assert page["entries"]
            recall = await ok(session, "recall_history", {"query": "quokka", "limit": 10})
            assert recall["hits"] and recall["hits_dropped_for_size"] > 0
            long_query = "quokka " + "\u200b" * 1_990
            is_error, text = await call(
                session, "explain", {"query": long_query, "memory_id": long_id(5)}
            )
            assert is_error or json.loads(text)["memory_id"] == long_id(5)

    anyio.run(session_test)


# -- a store of 100,000 records ---------------------------------------------------------

BIG = 100_000


@pytest.fixture(scope="session")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """100k conversation records of LoCoMo-like length, written in bulk (seconds)."""
    path = tmp_path_factory.mktemp("big") / "records.jsonl"
    store = open_store(f"jsonl:{path}", user_id="alice")
    rng = random.Random(7)
    words = [
        f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "pe", "ro", "su", "ti") for b in range(400)
    ]
    for start in range(0, BIG, 10_000):
        batch = []
        for number in range(start, start + 10_000):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(8, 40)))
            batch.append(
                {
                    "kind": "conversation",
                    "memory_id": f"turn-{number:06d}",
                    "content": text,
                    "summary": text[:120],
                    "source": {
                        "source_id": f"session-{number // 20}",
                        "source_type": "conversation_transcript",
                        "title": f"Session {number // 20}",
                        "captured_at": FIXED,
                    },
                }
            )
        store.append_many(batch)
    # As a store in use has it (memlib doctor --repair writes it too): the server loads
    # the index instead of building it from the log.
    assert isinstance(store, RemoteMemoryStore) and store.write_index_file()
    store.close()
    return f"jsonl:{path}"


def test_no_answer_exceeds_its_bound_on_100k_records(big_store, subprocess_env, tmp_path):
    async def session_test() -> None:
        async with connect(params(big_store, subprocess_env), tmp_path / "big.stderr") as session:
            page = await ok(session, "list", {"limit": 50})
            assert len(page["entries"]) == 50 and page["more"] is True
            page = await ok(session, "list", {"limit": 50, "cursor": page["next_cursor"]})
            assert len(page["entries"]) == 50
            recall = await ok(session, "recall_history", {"query": "ka1 lo2 mi3", "limit": 10})
            assert len(recall["hits"]) == 10
            text = " ".join(f"ka{n} lo{n} mi{n}" for n in range(40))
            stored = await ok(session, "remember", {"content": text, "summary": "ka1 lo1"})
            assert len(stored["similar"]) <= SIMILAR_MAX
            await ok(
                session,
                "update",
                {
                    "memory_id": "turn-000001",
                    "content": text + " pe1",
                    "summary": "pe1",
                    "reason": "changed",
                },
            )
            await ok(session, "forget", {"memory_id": "turn-000002", "reason": "wrong"})
            await ok(session, "explain", {"query": "ka1 lo2", "memory_id": "turn-000003"})

    anyio.run(session_test)


# -- the similarity study's code, on a tiny LoCoMo-shaped file -----------------------------


def tiny_conversation(number: int) -> dict[str, Any]:
    turns = [
        "I adopted a grey kitten called Pebble last weekend.",
        "My sister is running the Lisbon marathon in October.",
        "We repainted the kitchen a pale yellow colour.",
        "The bakery on our street closed for good.",
    ]
    session = [
        {"speaker": "A", "dia_id": f"D1:{n + 1}", "text": text} for n, text in enumerate(turns)
    ]
    observations = [
        ["A adopted a grey kitten named Pebble.", "D1:1"],
        ["A's sister will run the marathon in Lisbon in October.", ["D1:2"]],
    ]
    return {
        "sample_id": f"conv-{number}",
        "conversation": {"speaker_a": "A", "session_1": session},
        "observation": {"session_1_observation": {"A": observations}},
    }


def test_the_similarity_study_labels_its_pairs_and_chooses_a_floor(tmp_path):
    from benchmarks import similar_notes

    pairs = similar_notes.make_pairs(tiny_conversation(0))
    labels = [(p.label, p.second_id) for p in pairs]
    assert [(label, dia) for label, dia in labels if label != "related"] == [
        ("paraphrase", "D1:1"),
        ("duplicate", "D1:1"),
        ("paraphrase", "D1:2"),
        ("duplicate", "D1:2"),
    ]
    related = [dia for label, dia in labels if label == "related"]
    # One per observation, never its own evidence turn.
    assert len(related) == 2 and related[0] != "D1:1" and related[1] != "D1:2"
    for p in pairs:
        assert p.score == note_similarity(note_terms(p.first), note_terms(p.second))
    edited = similar_notes.light_edit("The bakery on our street closed for good.", "x")
    assert edited != "The bakery on our street closed for good."
    assert edited == similar_notes.light_edit("The bakery on our street closed for good.", "x")

    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([tiny_conversation(n) for n in range(5)]), encoding="utf-8")
    report = similar_notes.run(data)
    assert report["calibration"] == ["conv-0", "conv-1", "conv-2"]
    assert report["held_out"] == ["conv-3", "conv-4"]
    floor = report["suggested_floor"]
    related_scores = [p.score for p in pairs if p.label == "related"]
    similar_scores = [p.score for p in pairs if p.label != "related"]
    # Separable here: the floor lies between the two groups.
    assert max(related_scores) < floor <= min(similar_scores)
    assert report["at_floor"]["held_out"]["f1"] == 1.0
