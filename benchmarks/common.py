"""What every benchmark section shares: timing, digests, stores, fresh processes (apart
from ``run.py``, which imports the sections)."""

from __future__ import annotations

import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.corpus import AS_OF

ROOT = Path(__file__).resolve().parents[1]
# The LoCoMo development split, read from ../shared (never copied into the project).
LOCOMO_DEV = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
LIMIT = 10
USER = "bench-user"
BATCH = 10_000
# Seconds a fresh process may take before it counts as failed (its row says so).
COLD_TIMEOUT_S = 300.0

Log = Callable[[str], None]


def ints(text: str) -> list[int]:
    """``"10000,100000"`` -> ``[10000, 100000]`` (empty parts skipped)."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"not comma-separated integers: {text!r}") from None


def progress_log(began: float) -> Log:
    """Progress lines on stderr, each with the seconds since ``began`` (monotonic)."""
    return lambda message: print(
        f"[{time.monotonic() - began:7.1f}s] {message}", file=sys.stderr, flush=True
    )


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of ``values`` (0 when there are none)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] if ordered else 0.0


def summary(seconds: Sequence[float]) -> dict[str, Any]:
    if not seconds:
        return {}
    p95 = percentile(seconds, 0.95)
    return {"p50_ms": statistics.median(seconds) * 1e3, "p95_ms": p95 * 1e3, "n": len(seconds)}


def bench_recall(engine: Any) -> Callable[[str], Any]:
    return partial(engine.recall, limit=LIMIT, as_of=AS_OF, query_id="bench")


def p50_p95(rows: dict[str, Any], digits: int) -> str:
    """``rare p50 1.00 ms p95 2.00 ms; common ...``: a progress line's figures."""
    f = f".{digits}f"
    return "; ".join(
        f"{k} p50 {s['p50_ms']:{f}} ms p95 {s['p95_ms']:{f}} ms" for k, s in rows.items()
    )


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def recall_series(
    recall: Callable[[str], Any],
    queries: Sequence[str],
    warmup: int = 2,
    candidates: list[int] | None = None,
    before: Callable[[], object] | None = None,
    inspect: Callable[[Any], None] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Time ``recall`` per query; ``before`` runs ahead of each and ``inspect`` (with the
    result) after it, outside the clock, as does collecting ``candidate_records``."""
    for q in queries[:warmup]:
        recall(q)
    times, digests = [], []
    for q in queries:
        if before is not None:
            before()
        seconds, result = timed(lambda: recall(q))  # noqa: B023 (called at once)
        times.append(seconds)
        digests.append(digest(result.to_json() if hasattr(result, "to_json") else str(result)))
        if candidates is not None and hasattr(result, "candidate_records"):
            candidates.append(int(result.candidate_records))
        if inspect is not None:
            inspect(result)
    return summary(times), digests


def new_store_url(backend: str, folder: Path, pg: Any, tag: str) -> tuple[str, str | None]:
    """A new store's URL, and the PostgreSQL schema to drop afterwards (None otherwise)."""
    if backend in ("jsonl", "sqlite"):
        return f"{backend}:{folder / f'{tag}.{backend}'}", None
    from memlib.stores.sql._postgres import init_schema
    from tests.support.pgserver import schema_url

    schema = f"bench_{uuid.uuid4().hex[:8]}"
    url = schema_url(pg.dsn, schema)
    init_schema(url)
    return url, schema


def same_as_first(by_backend: Mapping[str, Any]) -> dict[str, bool]:
    """Per backend, whether its value equals the first backend's (answers' digests)."""
    first = next(iter(by_backend.values()))
    return {b: v == first for b, v in by_backend.items()}


def drop(store: Any, schema: str | None) -> None:
    """Close ``store``, dropping its PostgreSQL schema first when it has one."""
    if schema is not None:
        store._connection().execute(f"DROP SCHEMA {schema} CASCADE")
    store.close()


# The child prints its own peak memory (VmHWM) to stderr at exit; the wall time is the
# parent's. With arguments it is `memlib ARGS`; with none, Python's start and `import
# memlib` (the floor of every cold row); with "--embed-floor NAME TEXT", that plus loading
# the embedder NAME and embedding TEXT once (the floor of a cold hybrid recall);
# "--mcp-floor [NAME TEXT]" imports the MCP server (and its SDK) as well, and says "ready"
# then, where a session would start to answer (``mcp_floor_run`` stops its clock there).
COLD_CHILD = (
    "import atexit, sys\n"
    "def _peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            print('VMHWM', int(line.split()[1]) / 1024, file=sys.stderr)\n"
    "atexit.register(_peak)\n"
    "argv = sys.argv[1:]\n"
    "floor = argv[:1] in (['--embed-floor'], ['--mcp-floor'])\n"
    "if floor or not argv:\n"
    "    import memlib\n"
    "if argv[:1] == ['--mcp-floor']:\n"
    "    import memlib.agent.mcp_server\n"
    "if floor and len(argv) == 3:\n"
    "    from memlib.rankers import embeddings\n"
    "    from memlib._vectors import query_vector\n"
    # A question is embedded as hybrid embeds it at recall time (e5's "query:" prefix).
    "    query_vector(embeddings.get_embedder(argv[1]), argv[2])\n"
    "if argv[:1] == ['--mcp-floor']:\n"
    "    print('ready', flush=True)\n"
    "elif argv and not floor:\n"
    "    import runpy\n"
    "    sys.argv = ['memlib', *argv]\n"
    "    runpy.run_module('memlib', run_name='__main__')\n"
)


class ColdRunError(RuntimeError):
    """A fresh process failed or ran out of time; the message says which and why."""


_compiled: list[bool] = []


def _child_env() -> dict[str, str]:
    """The environment of a fresh process, as a user's machine runs it: byte-code written
    once and reused (a shell with PYTHONDONTWRITEBYTECODE would make every fresh process
    compile memlib again); no ``$MEMLIB_*`` (``$MEMLIB_EMBEDDER`` would change a row's
    ranker, ``$MEMLIB_STORE`` its store)."""
    if not _compiled:
        import compileall

        compileall.compile_dir(str(ROOT / "memlib"), quiet=1)
        _compiled.append(True)
    return {
        k: v
        for k, v in os.environ.items()
        if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("MEMLIB_")
    }


def _rounds(
    run: Callable[[], tuple[float, str, str]], rounds: int, before: Callable[[], object] | None
) -> dict[str, Any]:
    """``rounds`` runs of ``run`` (wall seconds, its stdout or answer, its stderr): the
    median wall time, the greatest peak the child printed, a digest of the first answer."""
    walls, peaks, answers = [], [], []
    for _ in range(rounds):
        if before is not None:
            before()
        wall, answer, err = run()
        walls.append(wall)
        peaks.append(float(err.split("VMHWM")[-1].split()[0]))
        answers.append(digest(answer))
    return {
        "wall_s": round(statistics.median(walls), 4),
        "walls_s": [round(w, 4) for w in walls],
        "peak_rss_mb": round(max(peaks), 1),
        "answer": answers[0],
        "same_answer_every_round": len(set(answers)) == 1,
    }


def cold_run(
    args: Sequence[str],
    rounds: int = 3,
    before: Callable[[], object] | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Median wall time and peak RSS of ``rounds`` fresh processes of ``COLD_CHILD``;
    ``answer``, a digest of the first round's stdout, compares backends' answers."""
    cmd, env = [sys.executable, "-c", COLD_CHILD, *args], _child_env()

    def run() -> tuple[float, str, str]:
        start = time.perf_counter()
        try:
            out = subprocess.run(
                cmd, capture_output=True, text=True, cwd=ROOT, check=False, timeout=timeout, env=env
            )
        except subprocess.TimeoutExpired:
            raise ColdRunError(f"no answer within {timeout:.0f} s") from None
        wall = time.perf_counter() - start
        if out.returncode != 0:
            raise ColdRunError(f"exit {out.returncode}: {out.stderr.strip()[-500:]}")
        return wall, out.stdout, out.stderr

    return _rounds(run, rounds, before)


def mcp_floor_run(args: Sequence[str], rounds: int = 3) -> dict[str, Any]:
    """``cold_run`` of ``--mcp-floor ARGS``, timed from the spawn to the child's "ready", as
    a cold session is timed to its answer: neither counts the process's exit."""
    cmd, env = [sys.executable, "-c", COLD_CHILD, "--mcp-floor", *args], _child_env()

    def run() -> tuple[float, str, str]:
        start = time.perf_counter()
        with subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env
        ) as child:
            assert child.stdout is not None
            ready = child.stdout.readline()
            wall = time.perf_counter() - start
            out, err = child.communicate()
        if child.returncode != 0 or ready != "ready\n":
            raise ColdRunError(f"exit {child.returncode}: {err.strip()[-500:]}")
        return wall, ready + out, err

    return _rounds(run, rounds, None)


def mcp_args(url: str, *embedder: str) -> list[str]:
    """``memlib mcp`` on stdio at a fixed ``--as-of`` (the same answer on every backend and
    round); its ranker is the default one: bm25+stopwords, or hybrid with ``embedder``."""
    named = ["--embedder", *embedder] if embedder else []
    tail = f"mcp --as-of {AS_OF:%Y-%m-%dT%H:%M:%SZ} --query-id-prefix cold"
    return ["--store", url, "--user", USER, *named, *tail.split()]


async def _mcp_session(
    args: Sequence[str], query: str, env: dict[str, str]
) -> tuple[float, str, str]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server = StdioServerParameters(
        command=sys.executable, args=["-c", COLD_CHILD, *args], env=env, cwd=ROOT
    )
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
        start = time.perf_counter()
        async with (
            stdio_client(server, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.list_tools()
            result = await session.call_tool("recall_history", {"query": query, "limit": LIMIT})
            wall = time.perf_counter() - start
        errlog.seek(0)
        err = errlog.read()  # the server has exited: its peak is in it
    text = " ".join(getattr(block, "text", "") for block in result.content)
    if result.is_error or "VMHWM" not in err:
        raise ColdRunError(f"recall_history: {text[:300]} {err.strip()[-500:]}")
    return wall, text, err


def mcp_cold_run(
    args: Sequence[str], query: str, rounds: int = 3, timeout: float | None = None
) -> dict[str, Any]:
    """A fresh ``memlib mcp`` server (``args``, from ``mcp_args``) per round, driven by the
    MCP SDK's stdio client: wall time from the spawn to the first ``recall_history``
    answer (initialize, tools/list, the call), and the server's own peak RSS (VmHWM,
    printed as it exits on the closed stdin). The keys of ``cold_run``."""
    import anyio

    env = _child_env()

    async def session() -> tuple[float, str, str]:
        with anyio.fail_after(timeout):
            return await _mcp_session(args, query, env)

    def run() -> tuple[float, str, str]:
        try:
            return anyio.run(session)
        except TimeoutError:
            raise ColdRunError(f"no answer within {timeout:.0f} s") from None

    return _rounds(run, rounds, None)


def recall_args(url: str, query: str, ranker: str) -> list[str]:
    # A fixed --as-of: the printed answer is then the same on every backend and round.
    tail = f"--limit 10 --ranker {ranker} --as-of {AS_OF:%Y-%m-%dT%H:%M:%SZ} --query-id cold"
    return ["--store", url, "--user", USER, "recall", query, *tail.split()]
