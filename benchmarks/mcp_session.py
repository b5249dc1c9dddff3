"""What an MCP host's session with ``memlib mcp`` costs: ``python -m benchmarks.mcp_session``.

Printed tables and a JSON report, never timed assertions (docs/mcp-bench.md has a run).
A host spawns ``memlib … mcp`` for every agent session, so the session's start is paid
as often as a fresh ``memlib recall``. For each N of ``--sizes`` (default 10k, 100k, 1M)
the seeded corpus of ``benchmarks/corpus.py`` is written to a JSONL log (with its index
file) and a SQLite file by ``cold.build_stores``, kept in ``--workdir`` so that a rerun
does not build them again. Every server is spawned through the SDK's own stdio client
(``mcp.client.stdio.stdio_client`` + ``ClientSession``), as a host spawns it, under
the wrapper every cold row uses (``common.COLD_CHILD``: ``python -c … --store URL --user
ID mcp --ranker R --as-of T``), which prints the child's own peak RSS (``VmHWM`` of
``/proc/self/status``) to its stderr when it exits; the client closes stdin at the end
of the session, the server returns and the line is read from the stderr file.

Floors, once a run (fresh processes, ``--cold-rounds`` each, median):
(a) Python's start + ``import memlib``, then exit (``cold_floor``'s, the floor of every
fresh ``memlib`` command); (b) Python's start + the SDK's server pieces memlib imports
(``mcp.server.lowlevel``, ``mcp.server.stdio``, ``mcp_types``), then ``os._exit``
(no teardown: a ready server is still alive): the floor of any Python MCP server on
this SDK; (a+b) the same with ``import memlib.agent.mcp_server`` (both, nothing run);
(d) a bare SDK server (one ``echo`` tool, no memlib) through the same
client: its session start, first call and, warm, a round trip carrying as many
characters as a median ``recall_history`` answer — the transport's own cost per call.

Per N, store (JSONL, SQLite) and ranker (baseline, bm25; not hybrid: on these stores,
which hold no vectors, its every recall embeds up to 500 candidates — docs/mcp-bench.md):

1. **session start, cold**: wall time from spawning the server until ``initialize`` and
   ``tools/list`` are answered (*ready*), until the first ``recall_history`` is answered
   (*first recall*: the first call pays what the store still had to load), then the
   ``session_start`` prompt's own call (*then prompt*: the server's instructions ask a
   host to load it once a session), and until the process has exited (*closed*), for
   the first query of each set of ``corpus.query_sets``; beside (c) a fresh ``memlib
   recall`` of the same query on the same store (``cold.recall_args``): the same recall
   without MCP.
2. **warm calls, one session**: per query (up to ``--queries`` per set), the
   ``recall_history`` round trip through the client, beside ``engine.recall`` in this
   process (the floor: the library call alone) and ``run_recall_history`` in this
   process (the tool's own handler: the recall and its JSON), each series on a store
   object of its own and with memlib's process-wide caches of record data emptied
   first, so that each meets every query and record as the fresh server did; every
   answer is compared with the handler's, byte for byte. One difference stays: this
   process has numpy loaded (the corpus is drawn with it), and a fresh server imports
   it only for a recall over ``postings.NUMPY_IMPORT_POSTINGS`` postings or more, so
   the floor is the library's numpy path where the server may take its Python one.
3. **remember, durable**: ``--remembers`` ``remember`` round trips (after ``WARMUP``
   untimed) in one session (baseline ranker), then as many ``store.append`` in this
   process (its floor: one durable append). The stores are put back afterwards (the
   JSONL log truncated to its length, the SQLite file restored from a copy).

A warm series stops after the query during which ``--budget`` seconds ran out (at least
one query), and every table says how many it timed. Options: ``--sizes``, ``--queries``,
``--budget``, ``--cold-rounds``, ``--remembers``, ``--workdir``, ``--out``, ``--quiet``
(no progress lines on stderr).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from benchmarks import corpus
from benchmarks.cold import AS_OF, build_stores, recall_args
from benchmarks.common import (
    COLD_CHILD,
    LIMIT,
    PEAK_AT_EXIT,
    ROOT,
    USER,
    ColdRunError,
    Log,
    cold_run,
    compile_package,
    dated_report,
    digest,
    peak_rss_mb,
    progress_log,
    sized_run_parser,
    summary,
    write_report,
)
from memlib import MemoryKind, MemorySource, RecallEngine
from memlib.agent.mcp_server import SESSION_START
from memlib.agent.tools import run_recall_history
from memlib.stores import open_store
from memlib.stores.jsonl._store import RemoteMemoryStore

__all__ = ["main", "tables"]

RANKERS = ("baseline", "bm25")
REMEMBERS = 100
WARMUP = 5
SESSION_TIMEOUT = 600.0
QUERY_ID_PREFIX = "bench"
# The child prints its peak like this (COLD_CHILD); the bare server below does too.
_PEAK = re.compile(r"VMHWM ([0-9.]+)")

_PEAK_AT_EXIT = PEAK_AT_EXIT
# Floors (b) and (a+b) end with os._exit, before the interpreter's teardown (about
# 0.2 s once the SDK's models are loaded): a server is *ready* while alive, so its
# floor is the imports alone. The peak is printed first, as atexit would.
_EXIT_NOW = (
    "_peak()\n"
    "sys.stderr.flush()\n"
    "import os\n"
    "os._exit(0)\n"
)
# Floor (b): what any Python MCP server on this SDK imports before it serves.
SDK_IMPORT_CHILD = _PEAK_AT_EXIT + (
    "import mcp.server.lowlevel, mcp.server.stdio, mcp_types\n"
) + _EXIT_NOW
# Floor (a+b): memlib and its MCP server module, imported, nothing run.
SERVER_IMPORT_CHILD = _PEAK_AT_EXIT + "import memlib, memlib.agent.mcp_server\n" + _EXIT_NOW
# Floor (d): the least MCP server on this SDK, built as memlib's is (the low-level
# Server, stdio), with one tool that answers ``size`` characters.
BARE_SERVER = _PEAK_AT_EXIT + (
    "import anyio\n"
    "import mcp_types as types\n"
    "from mcp.server.lowlevel import Server\n"
    "from mcp.server.stdio import stdio_server\n"
    "TOOL = types.Tool(name='echo', description='answers size characters',\n"
    "                  input_schema={'type': 'object',\n"
    "                                'properties': {'size': {'type': 'integer'}}})\n"
    "async def list_tools(ctx, params):\n"
    "    return types.ListToolsResult(tools=[TOOL])\n"
    "async def call_tool(ctx, params):\n"
    "    size = int((params.arguments or {}).get('size', 0))\n"
    "    return types.CallToolResult(content=[types.TextContent(text='a' * size)])\n"
    "server = Server('bare', on_list_tools=list_tools, on_call_tool=call_tool)\n"
    "async def main():\n"
    "    async with stdio_server() as (read, write):\n"
    "        await server.run(read, write, server.create_initialization_options())\n"
    "anyio.run(main)\n"
)


def _env() -> dict[str, str]:
    # As cold_run runs its children: byte-code written once and reused.
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


# -- one client session ----------------------------------------------------------------------

@dataclass(frozen=True)
class Spawn:
    """A server as a host's configuration names it: ``python -c PROGRAM ARGS``."""

    program: str
    args: tuple[str, ...]

    @classmethod
    def memlib_mcp(cls, url: str, ranker: str) -> Spawn:
        return cls(COLD_CHILD, ("--store", url, "--user", USER, "mcp", "--ranker", ranker,
                                "--as-of", AS_OF, "--query-id-prefix", QUERY_ID_PREFIX))


# What one session does once ready: (session, timings to fill) -> result.
Script = Callable[[Any, dict[str, Any]], Any]


async def _session(spawn: Spawn, script: Script | None, errlog: Path) -> dict[str, Any]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable,
                                   args=["-c", spawn.program, *spawn.args],
                                   env=_env(), cwd=str(ROOT))
    out: dict[str, Any] = {}
    with open(errlog, "w", encoding="utf-8") as err, anyio.fail_after(SESSION_TIMEOUT):
        start = time.perf_counter()
        async with (stdio_client(params, errlog=err) as (read, write),
                    ClientSession(read, write) as session):
            await session.initialize()
            await session.list_tools()
            out["ready_s"] = time.perf_counter() - start
            if script is not None:
                out["start"] = start
                await script(session, out)
                del out["start"]
        out["closed_s"] = time.perf_counter() - start
    text = errlog.read_text(encoding="utf-8", errors="replace")
    if "Traceback" in text:
        raise ColdRunError(f"the server wrote a traceback: {text.strip()[-800:]}")
    peaks = _PEAK.findall(text)
    # No line: the server did not exit by itself and the client killed it.
    out["peak_rss_mb"] = round(float(peaks[-1]), 1) if peaks else None
    return out


def session(spawn: Spawn, script: Script | None, workdir: Path) -> dict[str, Any]:
    compile_package()
    errlog = workdir / "server-stderr.txt"
    return anyio.run(_session, spawn, script, errlog)


def _text(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


def first_call(tool: str, arguments: Mapping[str, Any], prompt: bool = False) -> Script:
    """A script that makes one call and times it from the spawn; with ``prompt``, then
    gets the ``session_start`` prompt (as the server's instructions ask a host to, once
    a session) and times that call alone."""

    async def script(client: Any, out: dict[str, Any]) -> None:
        result = await client.call_tool(tool, dict(arguments))
        out["first_call_s"] = time.perf_counter() - out["start"]
        if result.is_error:
            raise ColdRunError(f"{tool} answered an error: {_text(result)[:300]}")
        out["answer"] = digest(_text(result))
        if prompt:
            start = time.perf_counter()
            await client.get_prompt(SESSION_START)
            out["prompt_s"] = time.perf_counter() - start

    return script


def cold_sessions(spawn: Spawn, script: Script, rounds: int, workdir: Path) -> dict[str, Any]:
    """Median ready / first call / closed of ``rounds`` fresh sessions, peak RSS the max."""
    runs = [session(spawn, script, workdir) for _ in range(rounds)]
    peaks = [r["peak_rss_mb"] for r in runs if r["peak_rss_mb"] is not None]
    out: dict[str, Any] = {
        key: round(statistics.median(r[key] for r in runs), 4)
        for key in ("ready_s", "first_call_s", "prompt_s", "closed_s") if key in runs[0]
    }
    out["first_calls_s"] = [round(r["first_call_s"], 4) for r in runs]
    out["peak_rss_mb"] = max(peaks) if peaks else None
    out["rounds"] = rounds
    out["same_answer_every_round"] = len({r["answer"] for r in runs}) == 1
    return out


# -- the stores, built once per workdir ------------------------------------------------------

@dataclass(frozen=True)
class Stores:
    n: int
    jsonl: Path
    sqlite: Path

    @property
    def urls(self) -> dict[str, str]:
        return {"jsonl": f"jsonl:{self.jsonl}", "sqlite": f"sqlite:{self.sqlite}"}


def stores_for(n: int, workdir: Path, log: Log) -> tuple[Stores, float | None]:
    """The stores of ``n`` records in ``workdir`` (built unless a marker says they are),
    and the seconds the build took (``None``: reused)."""
    folder = workdir / f"mcp-{n}"
    marker = folder / "built.json"
    stores = Stores(n, folder / "records.jsonl", folder / "records.sqlite")
    if marker.exists():
        built = json.loads(marker.read_text(encoding="utf-8"))
        if built.get("n") == n and stores.jsonl.exists() and stores.sqlite.exists():
            # A run stopped between a remember series and its undo leaves a longer log.
            if stores.jsonl.stat().st_size > built["jsonl_bytes"]:
                os.truncate(stores.jsonl, built["jsonl_bytes"])
            log(f"N={n:,}: reusing the stores in {folder}")
            return stores, None
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    log(f"N={n:,}: building the JSONL and SQLite stores in {folder}")
    start = time.perf_counter()
    build_stores(n, folder)
    reader = RemoteMemoryStore(stores.jsonl, user_id=USER)
    if not reader.index_path.exists() and not reader.write_index_file():
        raise RuntimeError(f"no index file could be written for {stores.jsonl}")
    seconds = time.perf_counter() - start
    marker.write_text(json.dumps({"n": n, "jsonl_bytes": stores.jsonl.stat().st_size}),
                      encoding="utf-8")
    log(f"N={n:,}: built in {seconds:.0f} s")
    return stores, seconds


# -- floors -----------------------------------------------------------------------------------

def floors(rounds: int, payload_chars: int, budget: float, workdir: Path,
           log: Log) -> dict[str, Any]:
    out: dict[str, Any] = {}
    out["import_memlib"] = cold_run([], rounds=rounds)
    out["import_sdk_server"] = cold_run([], rounds=rounds, child=SDK_IMPORT_CHILD)
    out["import_memlib_mcp_server"] = cold_run([], rounds=rounds,
                                               child=SERVER_IMPORT_CHILD)
    bare = Spawn(BARE_SERVER, ())
    out["bare_session"] = cold_sessions(bare, first_call("echo", {"size": payload_chars}),
                                        rounds, workdir)
    out["echo_chars"] = payload_chars
    out["echo_warm"] = {str(size): echo_series(bare, size, budget, workdir)
                        for size in (0, payload_chars)}
    log(f"floors: import memlib {_s(out['import_memlib']['wall_s'])}, SDK server imports "
        f"{_s(out['import_sdk_server']['wall_s'])}, both "
        f"{_s(out['import_memlib_mcp_server']['wall_s'])}; bare SDK server ready "
        f"{_s(out['bare_session']['ready_s'])}, first echo "
        f"{_s(out['bare_session']['first_call_s'])}; echo round trip p50 "
        f"{out['echo_warm']['0']['p50_ms']:.2f} ms (empty), "
        f"{out['echo_warm'][str(payload_chars)]['p50_ms']:.2f} ms ({payload_chars:,} chars)")
    return out


def echo_series(bare: Spawn, size: int, budget: float, workdir: Path,
                calls: int = 200) -> dict[str, Any]:
    times: list[float] = []

    async def script(client: Any, out: dict[str, Any]) -> None:
        for _ in range(WARMUP):
            await client.call_tool("echo", {"size": size})
        began = time.perf_counter()
        for _ in range(calls):
            start = time.perf_counter()
            await client.call_tool("echo", {"size": size})
            times.append(time.perf_counter() - start)
            if time.perf_counter() - began > budget:
                break

    session(bare, script, workdir)
    return summary(times)


def payload_chars(stores: Stores) -> int:
    """The median length of a ``recall_history`` answer (rare queries, the first store)."""
    store = open_store(stores.urls["jsonl"], user_id=USER)
    engine = RecallEngine(store)
    lengths = [len(run_recall_history(engine, {"query": q, "limit": LIMIT},
                                      as_of=corpus.AS_OF, query_id="bench-000").content)
               for q in corpus.query_sets(5)["rare"]]
    store.close()
    return int(statistics.median(lengths))


# -- 1. session start, cold -------------------------------------------------------------------

def cold_rows(stores: Stores, rankers: Sequence[str], rounds: int, workdir: Path,
              floor: Mapping[str, Any], log: Log) -> dict[str, Any]:
    sets = corpus.query_sets(1)
    out: dict[str, Any] = {}
    for backend, url in stores.urls.items():
        out[backend] = {}
        for ranker in rankers:
            out[backend][ranker] = {}
            for name, (query,) in sets.items():
                mcp = cold_sessions(Spawn.memlib_mcp(url, ranker),
                                    first_call("recall_history",
                                               {"query": query, "limit": LIMIT}, prompt=True),
                                    rounds, workdir)
                cli = cold_run(recall_args(url, query, ranker), rounds)
                cell = {
                    "session": mcp, "cli_recall": cli,
                    "ready_minus_sdk_import_s": round(
                        mcp["ready_s"] - floor["import_sdk_server"]["wall_s"], 4),
                    "ready_minus_bare_ready_s": round(
                        mcp["ready_s"] - floor["bare_session"]["ready_s"], 4),
                    "first_recall_minus_cli_s": round(mcp["first_call_s"] - cli["wall_s"], 4),
                    "first_recall_over_cli": round(mcp["first_call_s"] / cli["wall_s"], 2),
                }
                out[backend][ranker][name] = cell
                log(f"  cold {backend} {ranker} {name}: ready {_s(mcp['ready_s'])}, first "
                    f"recall {_s(mcp['first_call_s'])} ({mcp['peak_rss_mb']} MB), prompt "
                    f"{_s(mcp['prompt_s'])}, closed "
                    f"{_s(mcp['closed_s'])}; memlib recall {_s(cli['wall_s'])} "
                    f"({cli['peak_rss_mb']} MB); first recall − CLI "
                    f"{cell['first_recall_minus_cli_s'] * 1e3:+.0f} ms")
    return out


# -- 2. warm calls ---------------------------------------------------------------------------

def warm_rows(stores: Stores, rankers: Sequence[str], queries: int, budget: float,
              workdir: Path, log: Log) -> dict[str, Any]:
    every = corpus.query_sets(queries + 1)
    sets = {name: qs[:queries] for name, qs in every.items()}
    warmup = every["rare"][-1]
    out: dict[str, Any] = {}
    for backend, url in stores.urls.items():
        out[backend] = {}
        for ranker in rankers:
            out[backend][ranker] = warm_cell(url, ranker, sets, warmup, budget, workdir)
            for name, c in out[backend][ranker].items():
                log(f"  warm {backend} {ranker} {name}: {c['queries']} queries; recall p50 "
                    f"{c['recall']['p50_ms']:.2f} ms, handler {c['handler']['p50_ms']:.2f} "
                    f"ms, MCP {c['mcp']['p50_ms']:.2f} ms ({c['mcp_over_recall']}×); same "
                    f"answers {c['same_as_handler']}")
    return out


def warm_cell(url: str, ranker: str, sets: Mapping[str, Sequence[str]], warmup: str,
              budget: float, workdir: Path) -> dict[str, Any]:
    """One session: the warmup query, then each set's queries, timed per call; then the
    same calls in this process, each kind on its own store object."""
    timed: dict[str, list[tuple[str, float, str]]] = {name: [] for name in sets}

    async def script(client: Any, out: dict[str, Any]) -> None:
        await client.call_tool("recall_history", {"query": warmup, "limit": LIMIT})
        for name, queries in sets.items():
            began = time.perf_counter()
            for query in queries:
                start = time.perf_counter()
                result = await client.call_tool("recall_history",
                                                {"query": query, "limit": LIMIT})
                seconds = time.perf_counter() - start
                if result.is_error:
                    raise ColdRunError(f"recall_history answered an error: {_text(result)}")
                timed[name].append((query, seconds, digest(_text(result))))
                if time.perf_counter() - began > budget:
                    break

    mcp = session(Spawn.memlib_mcp(url, ranker), script, workdir)
    recall_s = _in_process(url, ranker, warmup, timed, handler=False)
    handler_s = _in_process(url, ranker, warmup, timed, handler=True)
    out: dict[str, Any] = {}
    for name, calls in timed.items():
        recall = summary([seconds for seconds, _ in recall_s[name]])
        handler = summary([seconds for seconds, _ in handler_s[name]])
        mcp_stats = summary([seconds for _, seconds, _ in calls])
        same = [answer for _, _, answer in calls] == [answer for _, answer in handler_s[name]]
        out[name] = {
            "queries": len(calls), "recall": recall, "handler": handler, "mcp": mcp_stats,
            "mcp_over_recall": round(mcp_stats["p50_ms"] / recall["p50_ms"], 2),
            "mcp_minus_recall_ms": round(mcp_stats["p50_ms"] - recall["p50_ms"], 3),
            "mcp_minus_handler_ms": round(mcp_stats["p50_ms"] - handler["p50_ms"], 3),
            "same_as_handler": same,
            "server_peak_rss_mb": mcp["peak_rss_mb"],
        }
    return out


def _in_process(
    url: str, ranker: str, warmup: str, timed: Mapping[str, Sequence[tuple[str, float, str]]],
    *, handler: bool,
) -> dict[str, list[tuple[float, str]]]:
    """The calls the server timed, in its order and with its query ids, on a store object
    of their own, from memlib's process-wide caches emptied: as the server met them.
    ``handler``: the tool's handler (recall and JSON), else ``engine.recall`` alone."""
    _empty_data_caches()
    store = open_store(url, user_id=USER)
    engine = RecallEngine(store, ranker=ranker)

    def call(query: str, number: int) -> str:
        if handler:
            return run_recall_history(engine, {"query": query, "limit": LIMIT},
                                      as_of=corpus.AS_OF, query_id=_qid(number)).content
        engine.recall(query, limit=LIMIT, as_of=corpus.AS_OF, query_id=_qid(number))
        return ""

    call(warmup, 1)
    number = 1
    out: dict[str, list[tuple[float, str]]] = {}
    for name, calls in timed.items():
        out[name] = []
        for query, _, _ in calls:
            number += 1
            start = time.perf_counter()
            text = call(query, number)
            seconds = time.perf_counter() - start
            out[name].append((seconds, digest(text) if handler else ""))
    store.close()
    gc.collect()
    return out


def _empty_data_caches() -> None:
    """Empty memlib's bounded ``lru_cache``s (terms of a record's text, a timestamp's
    parse, a document's BM25 statistics: keyed by what records hold). A fresh server has
    them empty; this process would otherwise have them filled by every earlier series,
    on the same records, and its floor would be a recall no fresh server can make. The
    unbounded ``functools.cache`` tables (stopwords, …) hold no record data."""
    for name, module in list(sys.modules.items()):
        if name != "memlib" and not name.startswith("memlib."):
            continue
        for value in list(vars(module).values()):
            parameters = getattr(value, "cache_parameters", None)
            if callable(parameters) and parameters().get("maxsize") is not None:
                value.cache_clear()


def _qid(number: int) -> str:
    return f"{QUERY_ID_PREFIX}-{number:03d}"


# -- 3. remember, durable --------------------------------------------------------------------

def remember_rows(stores: Stores, count: int, workdir: Path, log: Log) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for backend, url in stores.urls.items():
        with _put_back(stores, backend, workdir):
            cell = remember_cell(url, count, workdir)
        out[backend] = cell
        log(f"  remember {backend}: MCP p50 {cell['mcp']['p50_ms']:.2f} ms p95 "
            f"{cell['mcp']['p95_ms']:.2f} ms; store.append p50 "
            f"{cell['append']['p50_ms']:.2f} ms ({cell['mcp_over_append']}×)")
    return out


class _put_back:  # noqa: N801 (used as a context manager, named as one)
    """Undo the writes of a remember series: the JSONL log truncated to its length (its
    index file must not have moved; it is written again if it did), the SQLite file
    replaced by a copy taken before."""

    def __init__(self, stores: Stores, backend: str, workdir: Path) -> None:
        self.stores, self.backend = stores, backend
        self.copy = workdir / "sqlite-before-remember"

    def __enter__(self) -> None:
        if self.backend == "jsonl":
            self.size = self.stores.jsonl.stat().st_size
            self.index = RemoteMemoryStore(self.stores.jsonl, user_id=USER).index_path
            self.index_stat = _stat(self.index)
        else:
            shutil.copyfile(self.stores.sqlite, self.copy)

    def __exit__(self, *exc: object) -> None:
        if self.backend == "jsonl":
            os.truncate(self.stores.jsonl, self.size)
            if _stat(self.index) != self.index_stat:
                self.index.unlink(missing_ok=True)
                RemoteMemoryStore(self.stores.jsonl, user_id=USER).write_index_file()
        else:
            for suffix in ("-wal", "-shm"):
                Path(f"{self.stores.sqlite}{suffix}").unlink(missing_ok=True)
            os.replace(self.copy, self.stores.sqlite)


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns


def _items(count: int, seed: int, prefix: str) -> list[dict[str, Any]]:
    return next(corpus.records(count, seed=seed, batch=count, prefix=prefix))


def remember_cell(url: str, count: int, workdir: Path) -> dict[str, Any]:
    mcp_items = _items(WARMUP + count, 21, "mcpmem")
    lib_items = _items(WARMUP + count, 22, "libmem")
    times: list[float] = []

    async def script(client: Any, out: dict[str, Any]) -> None:
        for i, item in enumerate(mcp_items):
            arguments = {"content": item["content"], "summary": item["summary"],
                         "memory_id": item["memory_id"], **item["source"]}
            start = time.perf_counter()
            result = await client.call_tool("remember", arguments)
            seconds = time.perf_counter() - start
            if result.is_error:
                raise ColdRunError(f"remember answered an error: {_text(result)}")
            if i >= WARMUP:
                times.append(seconds)

    served = session(Spawn.memlib_mcp(url, "baseline"), script, workdir)
    store = open_store(url, user_id=USER)
    floor: list[float] = []
    for i, item in enumerate(lib_items):
        source = MemorySource(**item["source"])
        start = time.perf_counter()
        store.append(kind=MemoryKind.CONVERSATION, memory_id=item["memory_id"],
                     content=item["content"], summary=item["summary"], source=source)
        seconds = time.perf_counter() - start
        if i >= WARMUP:
            floor.append(seconds)
    store.close()
    mcp, append = summary(times), summary(floor)
    return {"mcp": mcp, "append": append,
            "mcp_over_append": round(mcp["p50_ms"] / append["p50_ms"], 2),
            "mcp_minus_append_ms": round(mcp["p50_ms"] - append["p50_ms"], 3),
            "server_peak_rss_mb": served["peak_rss_mb"]}


# -- one N ------------------------------------------------------------------------------------

def run_size(stores: Stores, args: argparse.Namespace, floor: Mapping[str, Any],
             workdir: Path, log: Log) -> dict[str, Any]:
    n = stores.n
    rankers = list(RANKERS)
    row: dict[str, Any] = {"n": n, "rankers": rankers,
                           "jsonl_mb": round(stores.jsonl.stat().st_size / 2**20, 1),
                           "sqlite_mb": round(stores.sqlite.stat().st_size / 2**20, 1)}
    log(f"N={n:,}: session start, cold")
    row["cold"] = cold_rows(stores, rankers, args.cold_rounds, workdir, floor, log)
    log(f"N={n:,}: warm calls")
    row["warm"] = warm_rows(stores, rankers, args.queries, args.budget, workdir, log)
    if args.remembers > 0:
        log(f"N={n:,}: remember")
        row["remember"] = remember_rows(stores, args.remembers, workdir, log)
    row["benchmark_peak_rss_mb"] = round(peak_rss_mb(), 1)  # this process, so far
    return row


# -- tables ----------------------------------------------------------------------------------

def _s(seconds: float) -> str:
    if seconds < 0.01:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e3:,.0f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def _ms(stats: Mapping[str, Any] | None) -> str:
    if not stats:
        return "—"
    return f"{stats['p50_ms']:,.2f} / {stats['p95_ms']:,.2f}"


def _mb(value: float | None) -> str:
    return "—" if value is None else f"{value} MB"


def tables(report: Mapping[str, Any]) -> str:
    """Every table of ``report`` in Markdown."""
    f = report["floor"]
    bare = f["bare_session"]
    lines = ["", "floors: fresh processes (median wall time, the child's peak RSS)", "",
             "| floor | wall | peak RSS |", "|---|---:|---:|",
             f"| (a) python + `import memlib` | {_s(f['import_memlib']['wall_s'])} | "
             f"{_mb(f['import_memlib']['peak_rss_mb'])} |",
             f"| (b) python + the SDK's server imports | "
             f"{_s(f['import_sdk_server']['wall_s'])} | "
             f"{_mb(f['import_sdk_server']['peak_rss_mb'])} |",
             f"| (a+b) python + `import memlib.agent.mcp_server` | "
             f"{_s(f['import_memlib_mcp_server']['wall_s'])} | "
             f"{_mb(f['import_memlib_mcp_server']['peak_rss_mb'])} |",
             f"| (d) bare SDK server: ready (initialize + tools/list) | {_s(bare['ready_s'])} | "
             f"{_mb(bare['peak_rss_mb'])} |",
             f"| (d) bare SDK server: first call answered ({f['echo_chars']:,} chars) | "
             f"{_s(bare['first_call_s'])} | |",
             f"| (d) bare SDK server: closed | {_s(bare['closed_s'])} | |",
             "", "(d) warm round trip of the bare server's echo tool, p50 / p95 ms: "
             + ", ".join(f"{int(size):,} chars {_ms(stats)}"
                         for size, stats in f["echo_warm"].items())]
    lines += ["", "session start, cold: spawn → answered (median of the rounds); "
              "(c) = a fresh `memlib recall` of the same query", "",
              "| N | store | ranker | query | ready | ready − (b) | ready − (d) ready "
              "| first recall | (c) `memlib recall` | first recall − (c) | then prompt "
              "| closed | server peak | (c) peak |",
              "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in report["sizes"]:
        for backend, by_ranker in row["cold"].items():
            for ranker, by_set in by_ranker.items():
                for name, c in by_set.items():
                    s, cli = c["session"], c["cli_recall"]
                    lines.append(
                        f"| {row['n']:,} | {backend} | {ranker} | {name} | {_s(s['ready_s'])} "
                        f"| {_s(c['ready_minus_sdk_import_s'])} | "
                        f"{_s(c['ready_minus_bare_ready_s'])} | {_s(s['first_call_s'])} | "
                        f"{_s(cli['wall_s'])} | {c['first_recall_minus_cli_s'] * 1e3:+,.0f} ms "
                        f"| {_s(s['prompt_s'])} | {_s(s['closed_s'])} | {_mb(s['peak_rss_mb'])} | "
                        f"{_mb(cli['peak_rss_mb'])} |")
    lines += ["", "warm calls in one session: p50 / p95 ms (floor: `engine.recall` in "
              "process; handler: `run_recall_history` in process)", "",
              "| N | store | ranker | set | queries | recall (floor) | handler | MCP round trip "
              "| × floor | MCP − floor | MCP − handler | same answers |",
              "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for row in report["sizes"]:
        for backend, by_ranker in row["warm"].items():
            for ranker, by_set in by_ranker.items():
                for name, c in by_set.items():
                    lines.append(
                        f"| {row['n']:,} | {backend} | {ranker} | {name} | {c['queries']} | "
                        f"{_ms(c['recall'])} | {_ms(c['handler'])} | {_ms(c['mcp'])} | "
                        f"{c['mcp_over_recall']}× | {c['mcp_minus_recall_ms']:.2f} ms | "
                        f"{c['mcp_minus_handler_ms']:.2f} ms | {c['same_as_handler']} |")
    rows = [row for row in report["sizes"] if "remember" in row]
    if rows:
        lines += ["", "remember, durable: p50 / p95 ms (floor: `store.append` in process)", "",
                  "| N | store | calls | MCP `remember` | `store.append` (floor) | × floor "
                  "| MCP − floor |", "|---:|---|---:|---:|---:|---:|---:|"]
        for row in rows:
            for backend, c in row["remember"].items():
                lines.append(f"| {row['n']:,} | {backend} | {c['mcp']['n']} | {_ms(c['mcp'])} "
                             f"| {_ms(c['append'])} | {c['mcp_over_append']}× | "
                             f"{c['mcp_minus_append_ms']:.2f} ms |")
    return "\n".join(lines)


# -- main ------------------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    parser = sized_run_parser(__doc__, budget=30.0)
    parser.add_argument("--remembers", type=int, default=REMEMBERS)
    parser.add_argument("--workdir", default=None,
                        help="where the stores are kept (reused by a rerun; default: a "
                        "temporary folder, removed at the end)")
    parser.add_argument("--out", default=None,
                        help="the JSON report (default: reports/mcp-session-YYYYMMDD.json)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    sizes = args.sizes
    out = dated_report(args.out, "mcp-session")
    began = time.monotonic()
    log = progress_log(began, args.quiet)

    from importlib.metadata import version

    from benchmarks.run import machine

    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": {**machine(), "mcp_sdk": version("mcp"),
                    "load_average_at_start": list(os.getloadavg())},
        "settings": {"limit": LIMIT, "queries": args.queries, "budget_s": args.budget,
                     "cold_rounds": args.cold_rounds, "remembers": args.remembers,
                     "warmup": WARMUP, "rankers": list(RANKERS),
                     "as_of": AS_OF},
    }
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="memlib-m-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        built = {n: stores_for(n, workdir, log) for n in sizes}
        report["build_s"] = {str(n): None if s is None else round(s, 1)
                             for n, (_, s) in built.items()}
        log("floors: fresh processes and the bare SDK server")
        chars = payload_chars(built[sizes[0]][0])
        report["floor"] = floor = floors(args.cold_rounds, chars, args.budget, workdir, log)
        report["sizes"] = []
        for n in sizes:
            report["sizes"].append(run_size(built[n][0], args, floor, workdir, log))
            print(tables({**report, "sizes": report["sizes"][-1:]}), flush=True)
    except ColdRunError as exc:
        log(f"a server or a fresh process failed: {exc}")
        raise
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    report["machine"]["load_average_at_end"] = list(os.getloadavg())
    write_report(out, report, began, tables, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
