"""memlib's MCP server side by side with the MCP memory servers people use, on LoCoMo.

Every server is driven only through its own MCP tools, from the SDK's stdio client
(``mcp.client.stdio.stdio_client`` + ``ClientSession``), one fresh server and data folder
per conversation (so a question is ranked over its own conversation only, as ``memlib
eval locomo`` does):

1. *write*: spawn the server, store every turn of the conversation with its write tool
   (one call per turn), close it;
2. *search*: spawn it again on the filled store (what a host does at a session's start),
   time spawn → ``initialize`` answered (*ready*) and spawn → first search answered
   (*start*), then ask every question of the conversation (categories 1–4 with
   evidence) with its search tool, limit 10 where the tool takes one, each call timed.

A returned result is mapped back to the turn(s) it holds; R@10 *turn level* = the share of
the question's evidence turns among the first 10 turns returned (memlib's metric);
*session level* = the share of questions with one of the first 10 results in one of its
evidence sessions (the figure most peers publish). Answer size: the text blocks of the
search answer, counted in tokens by the regex ``\\w+|[^\\w\\s]`` (words and punctuation
marks; about 1.3 of these per word of English prose) and in characters.

    python -m benchmarks.mcp_peers [--conversations 2] [--servers NAME,…] [--peers /tmp/peers]
        [--workdir /tmp/mcp-peers] [--out reports/mcp-peers-YYYYMMDD.json]

Peers are installed outside the repository (``docs/mcp-peers.md`` has the commands):
``PEERS/node`` (npm ``@modelcontextprotocol/server-memory``), ``PEERS/bm`` (a Python 3.12
venv with ``basic-memory``), ``PEERS/mms`` (a venv of Debian's Python 3.11, whose sqlite3
can load extensions, with ``mcp-memory-service-lite``). A server whose files are missing
is reported as not run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from benchmarks.common import LOCOMO_DEV, percentile, progress_log
from memlib.eval.locomo import LocomoConversation, LocomoQuestion, load_locomo

K = 10
TOKEN = re.compile(r"\w+|[^\w\s]")
_STOPWORDS: frozenset[str] | None = None


def tokens(text: str) -> int:
    return len(TOKEN.findall(text))


def content_words(question: str) -> list[str]:
    """The question's distinct words less English stopwords (memlib's list), in order."""
    global _STOPWORDS
    if _STOPWORDS is None:
        from memlib._tokens import english_stopwords

        _STOPWORDS = frozenset(english_stopwords())
    words = [w for w in re.findall(r"[a-z0-9']+", question.lower()) if len(w) > 1]
    return list(dict.fromkeys(w.strip("'") for w in words if w not in _STOPWORDS))


def turn_id(memory_id: str) -> str:
    return memory_id.split("/", 1)[1]


def session_of(dia_id: str) -> str:
    return dia_id.split(":", 1)[0]


def session_number(dia_id: str) -> int:
    return int(session_of(dia_id)[1:])


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


@dataclass
class Found:
    """What one search answered: turns (dia ids, best first, may repeat: kept first) and
    results (each a set of dia ids; a result may hold a whole session)."""

    turns: list[str]
    results: list[set[str]]


@dataclass
class Server:
    """One server: how to spawn it on a data folder, write a turn, ask a question."""

    name: str
    version: str
    mapping: str
    params: Callable[[Path, LocomoConversation], StdioServerParameters]
    write: Callable[[ClientSession, LocomoConversation], Awaitable[list[float]]]
    search: Callable[[ClientSession, LocomoQuestion], Awaitable[tuple[Found, str, int]]]
    available: Callable[[], str | None]  # None, or why it cannot run
    offline_notes: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # writes the server declined


# -- helpers for every server --------------------------------------------------------------


async def timed_call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> Any:
    began = time.perf_counter()
    result = await session.call_tool(tool, arguments)
    return time.perf_counter() - began, result


async def write_each(
    session: ClientSession,
    tool: str,
    calls: Iterable[tuple[str, dict[str, Any]]],
    refused: list[str] | None = None,
) -> list[float]:
    """One timed ``tool`` call per ``(turn, arguments)``, the seconds of each. A refusal
    stops the run, unless ``refused`` is given and the server dropped the turn as a
    near-duplicate of one it holds (mcp-memory-service's default): then it is listed there,
    and that turn cannot be found, as for the server's own users."""
    times = []
    for turn, arguments in calls:
        seconds, result = await timed_call(session, tool, arguments)
        if result.is_error:
            if refused is None or "Duplicate content" not in text_of(result):
                raise RuntimeError(f"{tool} refused: {text_of(result)}")
            refused.append(turn)
        times.append(seconds)
    return times


def turn_rows(conversation: LocomoConversation) -> list[tuple[str, int, str, str]]:
    """``(dia_id, session number, content, captured_at)`` of each turn, in order."""
    return [
        (
            turn_id(r.memory_id),
            session_number(turn_id(r.memory_id)),
            r.content,
            r.source.captured_at,
        )
        for r in conversation.records
    ]


def by_content(conversation: LocomoConversation) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for dia_id, _, content, _ in turn_rows(conversation):
        out.setdefault(content, []).append(dia_id)
    return out


def python_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(extra)
    return env


# -- memlib ------------------------------------------------------------------------------


def memlib_server(label: str, global_args: Sequence[str], mcp_args: Sequence[str]) -> Server:
    def params(folder: Path, conversation: LocomoConversation) -> StdioServerParameters:
        store = f"sqlite:{folder / 'memory.db'}"
        as_of = conversation.as_of.strftime("%Y-%m-%dT%H:%M:%SZ")
        args = ["-m", "memlib", "--store", store, "--user", "locomo", *global_args, "mcp"]
        return StdioServerParameters(
            command=sys.executable,
            args=[*args, *mcp_args, "--as-of", as_of],
            env=python_env({"WORKBUDDY_HOME": str(folder / "home")}),
        )

    async def write(session: ClientSession, conversation: LocomoConversation) -> list[float]:
        calls = (
            (
                record.memory_id,
                {
                    "content": record.content,
                    "summary": record.summary,
                    "memory_id": record.memory_id,
                    "source_id": record.source.source_id,
                    "source_type": record.source.source_type,
                    "title": record.source.title,
                    "captured_at": record.source.captured_at,
                },
            )
            for record in conversation.records
        )
        return await write_each(session, "remember", calls)

    async def search(session: ClientSession, question: LocomoQuestion) -> tuple[Found, str, int]:
        seconds, result = await timed_call(
            session, "recall_history", {"query": question.question, "limit": K}
        )
        text = text_of(result)
        ids = [turn_id(m) for m in re.findall(r'"memory_id":\s*"([^"]+)"', text)]
        return Found(ids, [{i} for i in ids]), text, int(seconds * 1e9)

    def available() -> str | None:
        return None

    from importlib.metadata import version

    return Server(
        name=label,
        version=f"memlib {version('memlib')}",
        mapping="one `remember` per turn (memory_id, source = the session, captured_at)",
        params=params,
        write=write,
        search=search,
        available=available,
    )


# -- @modelcontextprotocol/server-memory ---------------------------------------------------


def server_memory(peers: Path, mode: str) -> Server:
    """The official knowledge-graph server: an entity per session, a turn per observation.

    ``mode``: ``question``, the question as the query (the tool matches the whole query as
    a case-insensitive substring of names, types and observations); ``words``, one
    ``search_nodes`` per content word of the question, merged in the client (observations
    ranked by how many of the words they contain, then in graph order)."""
    entry = peers / "node" / "node_modules" / "@modelcontextprotocol" / "server-memory"
    contents: dict[str, list[str]] = {}

    def params(folder: Path, conversation: LocomoConversation) -> StdioServerParameters:
        contents.clear()
        contents.update(by_content(conversation))
        return StdioServerParameters(
            command=shutil.which("node") or "node",
            args=[str(entry / "dist" / "index.js")],
            env={**os.environ, "MEMORY_FILE_PATH": str(folder / "memory.jsonl")},
        )

    def entity(conversation: LocomoConversation, number: int) -> str:
        return f"{conversation.sample_id} session {number}"

    async def write(session: ClientSession, conversation: LocomoConversation) -> list[float]:
        sessions = sorted({n for _, n, _, _ in turn_rows(conversation)})
        await session.call_tool(
            "create_entities",
            {
                "entities": [
                    {
                        "name": entity(conversation, n),
                        "entityType": "conversation_session",
                        "observations": [],
                    }
                    for n in sessions
                ]
            },
        )
        calls = (
            (
                dia_id,
                {
                    "observations": [
                        {"entityName": entity(conversation, number), "contents": [content]}
                    ]
                },
            )
            for dia_id, number, content, _ in turn_rows(conversation)
        )
        return await write_each(session, "add_observations", calls)

    def graph_of(result: Any) -> dict[str, Any]:
        structured = getattr(result, "structured_content", None)
        if isinstance(structured, dict) and "entities" in structured:
            return structured
        graph: dict[str, Any] = json.loads(text_of(result))
        return graph

    async def search(session: ClientSession, question: LocomoQuestion) -> tuple[Found, str, int]:
        queries = [question.question] if mode == "question" else content_words(question.question)
        total, texts = 0.0, []
        entities: dict[str, list[str]] = {}  # name -> observations, first seen first
        matched: dict[str, int] = {}  # observation -> how many queries matched it
        for query in queries:
            seconds, result = await timed_call(session, "search_nodes", {"query": query})
            total += seconds
            texts.append(text_of(result))
            for e in graph_of(result).get("entities", []):
                entities.setdefault(e["name"], list(e.get("observations", [])))
                for o in e.get("observations", []):
                    if query.lower() in o.lower():
                        matched[o] = matched.get(o, 0) + 1
        return (
            merged(entities, matched, contents, by_words=mode == "words"),
            "\n".join(texts),
            int(total * 1e9),
        )

    def available() -> str | None:
        return None if (entry / "dist" / "index.js").exists() else f"not installed: {entry}"

    try:
        package = json.loads((entry / "package.json").read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError):
        package = "?"
    label = "server-memory" + (" (question)" if mode == "question" else " (words)")
    return Server(
        name=label,
        version=f"@modelcontextprotocol/server-memory {package}, node {node_version()}",
        mapping=(
            "an entity per session (`<conversation> session N`), one `add_observations` "
            "call per turn; `search_nodes` "
            + (
                "with the question"
                if mode == "question"
                else "once per content word, observations ranked by words matched (client)"
            )
        ),
        params=params,
        write=write,
        search=search,
        available=available,
    )


def merged(
    entities: dict[str, list[str]],
    matched: dict[str, int],
    contents: dict[str, list[str]],
    *,
    by_words: bool,
) -> Found:
    """What ``search_nodes`` answered, as turns: every observation of the entities found
    in the order given (a result = an entity), or (``by_words``) only the observations that
    contain a searched word, most words first (a result = a turn)."""
    ordered = [o for obs in entities.values() for o in obs]
    if not by_words:
        results = [{d for o in obs for d in contents.get(o, [])} for obs in entities.values()]
        return Found([d for o in ordered for d in contents.get(o, [])], results)
    position = {o: i for i, o in enumerate(ordered)}
    ranked = sorted(
        (o for o in dict.fromkeys(ordered) if o in matched),
        key=lambda o: (-matched[o], position[o]),
    )
    turns = [d for o in ranked for d in contents.get(o, [])]
    return Found(turns, [{d} for d in turns])


def node_version() -> str:
    import subprocess

    try:
        return subprocess.run(
            ["node", "--version"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def pip_version(python: Path, package: str) -> str:
    import subprocess

    try:
        out = subprocess.run(
            [str(python), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


# -- basic-memory --------------------------------------------------------------------------


def basic_memory(peers: Path) -> Server:
    """Markdown notes + SQLite FTS5: a note per turn (title = the turn's dia id, folder =
    the session), ``search_notes`` with the question."""
    venv = peers / "bm"
    exe = venv / "bin" / "basic-memory"

    def params(folder: Path, conversation: LocomoConversation) -> StdioServerParameters:
        home = folder / "home"
        project = folder / "notes"
        return StdioServerParameters(
            command=str(exe),
            args=["mcp"],
            env=python_env(
                {
                    "HOME": str(home),
                    "BASIC_MEMORY_HOME": str(project),
                    "BASIC_MEMORY_CONFIG_DIR": str(home / ".basic-memory"),
                    "BASIC_MEMORY_SYNC_CHANGES": "false",
                }
            ),
        )

    async def write(session: ClientSession, conversation: LocomoConversation) -> list[float]:
        calls = (
            (
                dia_id,
                {
                    "title": f"{conversation.sample_id} {dia_id.replace(':', '-')}",
                    "content": content,
                    "directory": f"session-{number}",
                },
            )
            for dia_id, number, content, _ in turn_rows(conversation)
        )
        return await write_each(session, "write_note", calls)

    title = re.compile(r"(conv-\d+)[ -]D(\d+)-(\d+)", re.IGNORECASE)

    async def search(session: ClientSession, question: LocomoQuestion) -> tuple[Found, str, int]:
        seconds, result = await timed_call(
            session, "search_notes", {"query": question.question, "page_size": K}
        )
        text = text_of(result)
        ids: list[str] = []
        for match in title.finditer(text):
            dia_id = f"D{int(match.group(2))}:{int(match.group(3))}"
            if dia_id not in ids:
                ids.append(dia_id)
        return Found(ids, [{i} for i in ids]), text, int(seconds * 1e9)

    def available() -> str | None:
        return None if exe.exists() else f"not installed: {exe}"

    return Server(
        name="basic-memory",
        version=f"basic-memory {pip_version(venv / 'bin' / 'python', 'basic-memory')}",
        mapping="a `write_note` per turn (title = conversation + dia id, folder = session); "
        "`search_notes` with the question",
        params=params,
        write=write,
        search=search,
        available=available,
    )


# -- mcp-memory-service(-lite) ---------------------------------------------------------------


MMS_MODEL = Path(".cache/mcp_memory/onnx_models/all-MiniLM-L6-v2/onnx")


def memory_service(peers: Path, search_mode: str, *, model: bool) -> Server:
    """SQLite-vec + ONNX MiniLM: ``memory_store`` per turn (tags: conversation, session,
    dia id), ``memory_search`` with the question.

    Its model is downloaded on first use, which cannot happen offline: with ``model``,
    ``HOME`` is ``PEERS/mms-home``, where ``docs/mcp-peers.md`` has put an ONNX export of
    all-MiniLM-L6-v2 that PyPI packages ship; without, an empty home: the server falls
    back to its hash embeddings."""
    venv = peers / "mms"
    exe = venv / "bin" / "memory"
    home = peers / ("mms-home" if model else "mms-home-empty")
    contents: dict[str, list[str]] = {}
    refused: list[str] = []

    def params(folder: Path, conversation: LocomoConversation) -> StdioServerParameters:
        contents.clear()
        contents.update(by_content(conversation))
        return StdioServerParameters(
            command=str(exe),
            args=["server"],
            env=python_env(
                {
                    "HOME": str(home),  # where it caches its model
                    "MCP_MEMORY_STORAGE_BACKEND": "sqlite_vec",
                    "MCP_MEMORY_SQLITE_PATH": str(folder / "memory.db"),
                    "MCP_MEMORY_BACKUPS_PATH": str(folder / "backups"),
                    # Never try the network (it would fail here after a DNS look-up).
                    "MCP_MEMORY_ONNX_ALLOW_DOWNLOAD": "0",
                    # Without the model it falls back to hash embeddings, which it
                    # refuses on a filled database unless told.
                    **({} if model else {"MCP_MEMORY_ALLOW_HASH_EMBEDDINGS": "1"}),
                }
            ),
        )

    async def write(session: ClientSession, conversation: LocomoConversation) -> list[float]:
        calls = (
            (
                f"{conversation.sample_id}/{dia_id}",
                {
                    "content": content,
                    "tags": f"{conversation.sample_id},session-{number},turn-{dia_id}",
                },
            )
            for dia_id, number, content, _ in turn_rows(conversation)
        )
        return await write_each(session, "memory_store", calls, refused)

    async def search(session: ClientSession, question: LocomoQuestion) -> tuple[Found, str, int]:
        seconds, result = await timed_call(
            session, "memory_search", {"query": question.question, "mode": search_mode, "limit": K}
        )
        text = text_of(result)
        ids = list(dict.fromkeys(re.findall(r"turn-(D\d+:\d+)", text)))
        if not ids:  # no tags shown: map each result's content back, in order
            entries = re.findall(r"^\d+\. (.*?)\n\s+Hash:", text, re.MULTILINE | re.DOTALL)
            ids = list(dict.fromkeys(d for c in entries for d in contents.get(c.strip(), [])))
        return Found(ids, [{i} for i in ids]), text, int(seconds * 1e9)

    def available() -> str | None:
        if not exe.exists():
            return f"not installed: {exe}"
        if model and not (home / MMS_MODEL / "model.onnx").exists():
            return f"no model at {home / MMS_MODEL} (it cannot download one offline)"
        return None

    embeddings = "MiniLM int8" if model else "hash"
    return Server(
        name=f"mcp-memory-service-lite ({search_mode} / {embeddings})",
        version="mcp-memory-service-lite "
        + pip_version(venv / "bin" / "python", "mcp-memory-service-lite"),
        mapping="a `memory_store` per turn (tags: conversation, session, dia id); "
        f"`memory_search` mode {search_mode} with the question, limit 10",
        params=params,
        write=write,
        search=search,
        available=available,
        refused=refused,
    )


# -- the run -------------------------------------------------------------------------------


async def run_server(
    server: Server, conversations: Sequence[LocomoConversation], workdir: Path, log: Any
) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    write_times: list[float] = []
    search_times: list[float] = []
    sizes: list[int] = []
    chars: list[int] = []
    starts: list[dict[str, float]] = []
    write_seconds = 0.0
    server.refused.clear()
    for conversation in conversations:
        folder = workdir / re.sub(r"\W+", "-", server.name) / conversation.sample_id
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        errlog_path = folder / "stderr.log"
        with errlog_path.open("w", encoding="utf-8") as errlog:
            began = time.perf_counter()
            async with (
                stdio_client(server.params(folder, conversation), errlog=errlog) as (r, w),
                ClientSession(r, w) as session,
            ):
                await session.initialize()
                write_times += await server.write(session, conversation)
            write_seconds += time.perf_counter() - began
            log(f"{server.name} {conversation.sample_id}: wrote {len(conversation.records)} turns")
            began = time.perf_counter()
            async with (
                stdio_client(server.params(folder, conversation), errlog=errlog) as (r, w),
                ClientSession(r, w) as session,
            ):
                await session.initialize()
                ready = time.perf_counter() - began
                first = None
                for question in conversation.questions:
                    if question.category not in (1, 2, 3, 4):
                        continue
                    found, text, nanos = await server.search(session, question)
                    if first is None:
                        first = time.perf_counter() - began
                    search_times.append(nanos / 1e9)
                    sizes.append(tokens(text))
                    chars.append(len(text))
                    evidence = {turn_id(e) for e in question.evidence}
                    sessions = {session_of(e) for e in evidence}
                    top_turns = list(dict.fromkeys(found.turns))[:K]
                    top_results = found.results[:K]
                    rows.append(
                        {
                            "question_id": question.question_id,
                            "category": question.category,
                            "turn_recall": len(evidence & set(top_turns)) / len(evidence),
                            "session_hit": any(
                                session_of(d) in sessions for res in top_results for d in res
                            ),
                            "returned": len(found.results),
                        }
                    )
                starts.append({"ready_s": ready, "first_answer_s": first or 0.0})
        log(f"{server.name} {conversation.sample_id}: asked {len(rows)} questions so far")
    n = len(rows)
    return {
        "version": server.version,
        "mapping": server.mapping,
        "questions": n,
        "R@10_turn": round(sum(r["turn_recall"] for r in rows) / n, 4) if n else None,
        "R@10_session": round(sum(r["session_hit"] for r in rows) / n, 4) if n else None,
        "empty_answers": sum(1 for r in rows if r["returned"] == 0),
        "search_p50_ms": round(statistics.median(search_times) * 1e3, 1),
        "search_p95_ms": round(percentile(search_times, 0.95) * 1e3, 1),
        "answer_tokens_p50": statistics.median(sizes),
        "answer_tokens_mean": round(statistics.fmean(sizes), 1),
        "answer_chars_p50": statistics.median(chars),
        "start_ready_s": [round(s["ready_s"], 3) for s in starts],
        "start_first_answer_s": [round(s["first_answer_s"], 3) for s in starts],
        "write_p50_ms": round(statistics.median(write_times) * 1e3, 1),
        "write_total_s": round(write_seconds, 1),
        "writes_refused": len(server.refused),
        "by_category": {
            str(c): {
                "n": len(sub),
                "R@10_turn": round(sum(r["turn_recall"] for r in sub) / len(sub), 4),
                "R@10_session": round(sum(r["session_hit"] for r in sub) / len(sub), 4),
            }
            for c in (1, 2, 3, 4)
            if (sub := [r for r in rows if r["category"] == c])
        },
        "offline": server.offline_notes,
    }


def all_servers(peers: Path) -> dict[str, Server]:
    servers = [
        memlib_server("memlib (default)", [], []),  # bm25+stopwords
        # The README's host configurations: hybrid, the default once a model is named.
        memlib_server("memlib (e5-pair)", ["--embedder", "e5-pair"], []),
        memlib_server("memlib (baseline)", [], ["--ranker", "baseline"]),  # the chapter's
        server_memory(peers, "question"),
        server_memory(peers, "words"),
        basic_memory(peers),
        memory_service(peers, "semantic", model=True),
        memory_service(peers, "hybrid", model=True),
        memory_service(peers, "semantic", model=False),
    ]
    return {s.name: s for s in servers}


def chance(conversations: Sequence[LocomoConversation]) -> dict[str, float]:
    """What 10 turns drawn at random would score (expected values): the floor to read
    both metrics against (a session-level hit is easy when a conversation has ~20
    sessions)."""
    from math import comb

    turn = session = 0.0
    n = 0
    for conversation in conversations:
        ids = [turn_id(r.memory_id) for r in conversation.records]
        size = len(ids)
        for question in conversation.questions:
            if question.category not in (1, 2, 3, 4):
                continue
            n += 1
            turn += min(K, size) / size
            sessions = {session_of(turn_id(e)) for e in question.evidence}
            inside = sum(1 for i in ids if session_of(i) in sessions)
            drawn = min(K, size)
            session += 1 - comb(size - inside, drawn) / comb(size, drawn)
    if not n:
        return {}
    return {"R@10_turn": round(turn / n, 4), "R@10_session": round(session / n, 4)}


def markdown_table(report: dict[str, Any]) -> str:
    """The report as the table of ``docs/mcp-peers.md``."""
    lines = [
        "| server | R@10 turn | R@10 session | empty answers | search p50 ms | answer tokens p50 "
        "| start s (spawn → first answer) | write p50 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    if report.get("chance"):
        c = report["chance"]
        lines.append(
            f"| *10 random turns (expected)* | {c['R@10_turn']:.3f} | {c['R@10_session']:.3f} "
            "| | | | | |"
        )
    for name, row in report["servers"].items():
        if "questions" not in row:
            lines.append(f"| {name} | {row.get('not_run') or row.get('failed')} ||||||| ")
            continue
        starts = "–".join(f"{s:.1f}" for s in sorted(row["start_first_answer_s"]))
        lines.append(
            f"| {name} | {row['R@10_turn']:.3f} | {row['R@10_session']:.3f} "
            f"| {row['empty_answers']} | {row['search_p50_ms']:.1f} "
            f"| {row['answer_tokens_p50']:,.0f} | {starts} | {row['write_p50_ms']:.1f} |"
        )
    return "\n".join(lines)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mcp_peers", description=__doc__)
    parser.add_argument("--data", type=Path, default=LOCOMO_DEV)
    parser.add_argument("--conversations", type=int, default=2, help="the first N of the split")
    parser.add_argument("--servers", default="", help="comma-separated names (default: all)")
    parser.add_argument("--peers", type=Path, default=Path("/tmp/peers"))
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/mcp-peers"))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--table", type=Path, default=None, help="print a report as markdown")
    args = parser.parse_args(argv)
    if args.table:
        print(markdown_table(json.loads(args.table.read_text(encoding="utf-8"))))
        return 0
    log = progress_log(time.monotonic())
    conversations = load_locomo(args.data)[: args.conversations]
    servers = all_servers(args.peers)
    names = [n.strip() for n in args.servers.split(",") if n.strip()] or list(servers)
    unknown = [n for n in names if n not in servers]
    if unknown:
        parser.error(f"unknown servers {unknown}; known: {list(servers)}")
    report: dict[str, Any] = {
        "benchmark": "mcp-peers",
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {
            "cpu": cpu_model(),
            "cores": os.cpu_count(),
            "load_1min_at_start": os.getloadavg()[0],
            "python": platform.python_version(),
        },
        "corpus": {
            "conversations": [c.sample_id for c in conversations],
            "turns": sum(len(c.records) for c in conversations),
            "questions": sum(
                1 for c in conversations for q in c.questions if q.category in (1, 2, 3, 4)
            ),
        },
        "k": K,
        "chance": chance(conversations),
        "tokenizer": r"regex \w+|[^\w\s] over the answer's text blocks",
        "servers": {},
    }
    for name in names:
        server = servers[name]
        why = server.available()
        if why:
            report["servers"][name] = {"not_run": why}
            log(f"{name}: not run ({why})")
            continue
        try:
            report["servers"][name] = anyio.run(
                run_server, server, conversations, args.workdir, log
            )
        except Exception as exc:  # a peer that fails is reported, the others still run
            while isinstance(exc, ExceptionGroup) and exc.exceptions:
                exc = exc.exceptions[0]  # the task group's: say what failed inside
            report["servers"][name] = {"failed": f"{type(exc).__name__}: {exc}"[:500]}
        log(f"{name}: {json.dumps(report['servers'][name])[:300]}")
        if args.out:  # written after every server, so a long run keeps what it measured
            args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
