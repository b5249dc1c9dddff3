"""``memlib mcp`` and projects (docs/mcp.md, "Projects"): the project comes from
``--project``, ``$MEMLIB_PROJECT`` or the client's first workspace root; every tool stays
inside it (explain included) unless a read asks for ``all_projects``; answers name it.
Through real stdio client sessions, on JSONL, SQLite and PostgreSQL."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from support import mcp_client  # noqa: E402
from support.mcp_client import call, refused  # noqa: E402
from support.pgserver import drop_schema, fresh_schema, pg_dsn, schema_url  # noqa: E402, F401  (pg_dsn: a fixture)

from memlib import RecallEngine  # noqa: E402
from memlib.records import LIMITS, MEMORY_ID_MAX, format_timestamp  # noqa: E402
from memlib.render import render_recall_context  # noqa: E402
from memlib.sample import SAMPLE_AS_OF, fixed_clock, scope_path  # noqa: E402
from memlib.stores import open_store  # noqa: E402
from memlib.stores._base import MemoryStore  # noqa: E402

FIXED = format_timestamp(SAMPLE_AS_OF)
TAG = "\U000e0041"  # invisible: every answer writes it as a 12-character escape


def _item(memory_id: str, text: str, kind: str = "conversation") -> dict[str, Any]:
    source = {
        "source_id": "t-1",
        "source_type": "conversation_transcript",
        "title": "Transcript",
        "captured_at": "2026-08-01T12:00:00Z",
    }
    return {
        "kind": kind,
        "memory_id": memory_id,
        "content": text,
        "summary": text,
        "source": source,
    }


# "m-1" is in both projects, as remember's derived ids are; all stored at one instant.
WRITES: dict[str | None, list[dict[str, Any]]] = {
    None: [_item("n-1", "layered memory for the user")],
    "alpha": [
        _item("m-1", "layered memory design alpha"),
        _item("a-2", "alpha memory notes"),
        _item("p-a", "alpha likes tea", "profile"),
    ],
    "beta": [_item("m-1", "layered memory design beta"), _item("b-2", "beta memory")],
}


@pytest.fixture(params=("jsonl", "sqlite", "postgresql"))
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store of alice's three namespaces (no project, alpha, beta) on each backend."""
    schema = None
    if request.param == "jsonl":
        made = f"jsonl:{scope_path(tmp_path / 'memory', 'alice')}"
    elif request.param == "sqlite":
        made = f"sqlite:{tmp_path / 'memory.db'}"
    else:
        dsn = request.getfixturevalue("pg_dsn")
        schema = fresh_schema(dsn)
        made = schema_url(dsn, schema)
    for project, items in WRITES.items():
        store = open_store(made, user_id="alice", project=project, clock=fixed_clock())
        store.append_many(items)
        store.close()
    yield made
    if schema is not None:
        drop_schema(request.getfixturevalue("pg_dsn"), schema)


def _open(url: str, project: str | None) -> MemoryStore:
    return open_store(url, user_id="alice", project=project)


@asynccontextmanager
async def connect(
    url: str, env: dict[str, str], errlog: Path, *options: str, roots: list[str] | None = None
) -> AsyncIterator[ClientSession]:
    args = ["-m", "memlib", "--store", url, "--user", "alice", "mcp", "--as-of", FIXED, *options]
    server = StdioServerParameters(command=sys.executable, args=args, env=env)
    async with mcp_client.connect(server, errlog, roots=roots) as session:
        yield session


async def ok(session: ClientSession, tool: str, arguments: dict[str, Any]) -> Any:
    is_error, text = await call(session, tool, arguments)
    assert not is_error, text
    return json.loads(text)


def _hits(answer: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(h["memory_id"], h["scope"].get("project")) for h in answer["hits"]]


async def _listed(session: ClientSession, **arguments: Any) -> list[tuple[str, str | None]]:
    """Every entry of every page of list, one page of one entry at a time."""
    found, cursor = [], None
    while True:
        page = await ok(
            session, "list", {**arguments, "limit": 1, **({"cursor": cursor} if cursor else {})}
        )
        found += [(e["memory_id"], e.get("project")) for e in page["entries"]]
        if (cursor := page["next_cursor"]) is None:
            return found


def test_every_tool_stays_inside_its_project(url, subprocess_env, tmp_path):
    query = {"query": "layered memory", "limit": 10}
    alpha, beta = _open(url, "alpha"), _open(url, "beta")

    async def session_test() -> None:
        errlog = tmp_path / "server.stderr"
        async with connect(url, subprocess_env, errlog, "--project", "alpha") as session:
            recalled = await ok(session, "recall_history", query)
            assert _hits(recalled) == [("m-1", "alpha"), ("a-2", "alpha")]
            # The library's answer for the same project, but for the query id.
            library = RecallEngine(alpha).recall("layered memory", 10, SAMPLE_AS_OF, "q")
            assert [h["scope"] for h in recalled["hits"]] == [
                h.scope.to_dict() for h in library.hits
            ]
            every = await ok(session, "recall_history", {**query, "all_projects": True})
            assert sorted(_hits(every), key=str) == sorted(
                [
                    ("m-1", "alpha"),
                    ("a-2", "alpha"),
                    ("m-1", "beta"),
                    ("b-2", "beta"),
                    ("n-1", None),
                ],
                key=str,
            )
            assert sorted(await _listed(session)) == [
                ("a-2", "alpha"),
                ("m-1", "alpha"),
                ("p-a", "alpha"),
            ]
            everything = sorted(await _listed(session, all_projects=True), key=str)
            expected = [(i["memory_id"], p) for p, items in WRITES.items() for i in items]
            assert everything == sorted(expected, key=str)  # m-1 twice: its two projects

            explain = {"query": "beta memory", "memory_id": "b-2"}
            assert (await ok(session, "explain", explain))["verdict"] == "not_in_scope"
            assert (await ok(session, "explain", {**explain, "all_projects": True}))[
                "verdict"
            ] == "hit"
            assert (await ok(session, "explain", {**explain, "memory_id": "n-1"}))[
                "verdict"
            ] == "not_in_scope"
            assert await refused(session, "recall_history", {**query, "all_projects": "yes"}) == (
                "all_projects must be true or false"
            )

            # Writes stay in the project: another project's id is unknown here.
            forget = {"memory_id": "b-2", "reason": "Wrong."}
            assert (
                await refused(session, "forget", forget) == "cannot retract unknown memory_id: b-2"
            )
            change = {"memory_id": "b-2", "content": "x", "summary": "x", "reason": "y"}
            assert await refused(session, "update", change) == (
                "cannot supersede b-2: no such memory in this scope"
            )
            retraction = await ok(session, "forget", {"memory_id": "m-1", "reason": "Wrong."})
            assert retraction["project"] == "alpha"
            assert beta.retraction_of("m-1") is None and alpha.retraction_of("m-1") is not None
            note = {"content": "Quokka plan for alpha.", "summary": "Quokka plan."}
            stored = await ok(session, "remember", note)
            assert stored["status"] == "stored" and stored["project"] == "alpha"
            assert stored["memory_id"] in {r.memory_id for r in alpha.read_all()}
            assert stored["memory_id"] not in {r.memory_id for r in _open(url, None).read_all()}
            profile = await session.read_resource("memlib://profile")
            assert "alpha likes tea" in profile.contents[0].text  # type: ignore[union-attr]

        # No project: the answers have no project key, as before projects.
        async with connect(url, subprocess_env, errlog) as session:
            assert _hits(await ok(session, "recall_history", query)) == [("n-1", None)]
            entries = (await ok(session, "list", {}))["entries"]
            assert [e["memory_id"] for e in entries] == ["n-1"] and "project" not in entries[0]

    anyio.run(session_test)
    alpha.close()
    beta.close()


# Which project the server picks does not depend on the backend (the tests above hold
# isolation on each): one JSONL store.
@pytest.mark.parametrize("url", ["jsonl"], indirect=True)
def test_the_project_comes_from_flag_environment_or_roots(url, subprocess_env, tmp_path):
    errlog = tmp_path / "server.stderr"
    query = {"query": "layered memory"}

    async def project_of(env: dict[str, str], *options: str, roots: list[str] | None) -> Any:
        async with connect(url, env, errlog, *options, roots=roots) as session:
            hits = _hits(await ok(session, "recall_history", query))
            return hits[0][1] if hits else "nothing"

    root = ["file:///home/alice/work/beta", "file:///home/alice/alpha"]
    env = {**subprocess_env, "MEMLIB_PROJECT": "alpha"}

    async def session_test() -> None:
        assert await project_of(subprocess_env, roots=root) == "beta"  # the first root
        assert await project_of(subprocess_env, roots=None) is None  # no roots offered
        assert await project_of(env, roots=root) == "alpha"
        assert await project_of(env, "--project", "beta", roots=None) == "beta"
        assert await project_of(subprocess_env, "--project", "alpha", roots=root) == "alpha"
        # Set but empty: no project, and the roots are not asked.
        assert await project_of({**subprocess_env, "MEMLIB_PROJECT": ""}, roots=root) is None
        assert await project_of(subprocess_env, roots=["file:///srv/no%20such"]) == "nothing"
        # A root whose name no project may have: no project, said in one line.
        assert await project_of(subprocess_env, roots=["file:///srv/a%E2%80%AEb"]) is None
        said = errlog.read_text(encoding="utf-8").strip().splitlines()
        assert said == [
            "memlib mcp: no project from the workspace root: project must not contain "
            "invisible or format characters: 'a\\u202eb' holds U+202E"
        ]

    anyio.run(session_test)


def test_answers_naming_the_longest_project_stay_under_their_bounds(subprocess_env, tmp_path):
    """A project of 100 '"' (two characters each in JSON) on the worst records."""
    url = f"jsonl:{scope_path(tmp_path / 'memory', 'alice')}"
    project = '"' * 100

    def note(number: int) -> dict[str, Any]:
        return {
            "content": "quokka " + TAG * (LIMITS["content"] - 7),
            "summary": "quokka " + TAG * (LIMITS["summary"] - 7),
            "title": TAG * LIMITS["title"],
            "source_id": TAG * LIMITS["source_id"],
            "source_type": TAG * LIMITS["source_type"],
            "captured_at": FIXED,
            "memory_id": f"{number}" + '"' * (MEMORY_ID_MAX - len(str(number))),
        }

    async def session_test() -> None:
        errlog = tmp_path / "server.stderr"
        async with connect(url, subprocess_env, errlog, "--project", project) as session:
            for number in range(6):
                assert (await ok(session, "remember", note(number)))["project"] == project
            change = {k: v for k, v in note(0).items() if k in ("content", "summary", "memory_id")}
            await ok(session, "update", {**change, "reason": TAG * 20_000})
            await ok(session, "forget", {"memory_id": note(1)["memory_id"], "reason": TAG * 20_000})
            for limit in (1, 50):
                page = await ok(session, "list", {"limit": limit, "all_projects": True})
                assert page["entries"] and page["entries"][0]["project"] == project
            if page["next_cursor"]:
                await ok(session, "list", {"cursor": page["next_cursor"]})
            recall = await ok(session, "recall_history", {"query": "quokka", "limit": 10})
            assert recall["hits"][0]["scope"]["project"] == project

    anyio.run(session_test)


def test_a_hit_names_its_project_only_when_it_has_one(url):
    """The recall JSON's ``scope`` and the prompt block's ``<hit>`` (``render``)."""
    for project in (None, "alpha"):
        store = _open(url, project)
        result = RecallEngine(store).recall("layered memory", 10, SAMPLE_AS_OF, "q")
        block = render_recall_context(result)
        assert result.hits and block.count("<hit ") == len(result.hits)
        if project is None:
            assert "project" not in result.to_json() and "project=" not in block
        else:
            assert all(h.to_dict()["scope"]["project"] == project for h in result.hits)
            assert block.count(f'memory_kind="conversation" project="{project}">') == len(
                result.hits
            )
        store.close()
