"""What ``store.source_neighbours`` costs, as shipped: ``python -m benchmarks.source_lookup``.

Pair vectors and pair terms (``benchmarks/retrieval_steps.py``, steps f, j and k) read
each conversation record together with the turn before it in its source. Stores answer
that through ``SourceOrdering.source_neighbours(memory_ids)`` (``memlib/stores/_sources.py``
is the reference): SQLite and PostgreSQL with one statement over the ``records_source``
index (schema 6), JSONL from whatever it has when this runs. This measures the public
method on the path a user takes, on every backend (``jsonl:``, ``sqlite:``, PostgreSQL),
at 10k, 100k and 1M records (``--sizes``).

**Corpus**: real sessions. Every source (``source.source_id``) is a session of 20 turns;
four sessions are interleaved at a time (seeded), so append order is not source order,
and one record in 2,000 (at least 3) is retracted afterwards. Texts are the scale
benchmarks' (``benchmarks/corpus.py``). Each store is built once per size in
``--workdir`` through ``store.append_many`` in batches of 10,000 (what ``memlib import``
does), and reused while its marker (files) or its record count (PostgreSQL) says it is
built. PostgreSQL is a cluster kept in the workdir (default durability; initdb/pg_ctl
as ``tests/support/pgserver.py`` runs them), or ``--pg-url``; when it cannot be started
the run says so and measures the other two.

**Correctness first**, on every store: the answer for about 200 random ids (a few of
them retracted, which must be left out) equals the mapping computed from the corpus
layout, and, up to 20,000 records, ``source_neighbours_of(store.read_all(), ids)``.

Then, per backend and size:

1. **warm**: in one open store, the median per call of ``source_neighbours`` of one
   random id (``--lookups`` calls) and of 1,000 random ids (what a recall over about
   1,000 candidates would ask; ``--lookups`` calls, each series cut at ``--budget``
   seconds). **Floor**: ``records_by_id`` of the same ids on the same store object,
   interleaved call by call — a keyed read of the same rows by ``memory_id`` (SQL: the
   unique index; JSONL: the id map and the rows' bytes), the least a lookup that has to
   find those rows costs on that store. A neighbour lookup must find each asked row and
   then its neighbours, so it cannot go below it — except that ``records_by_id`` also
   parses each row into a ``StoredMemory`` (about 20 us a record), which an answer of
   ids skips: so beside it, ``existing_ids`` of the same ids (``ids only``: the keyed
   probe of the same rows with nothing parsed; JSONL: the in-memory id map), the floor
   of a batch where parsing dominates.
2. **fresh process**: a child ``python -c`` imports memlib, opens the store and makes
   one ``source_neighbours`` call of one id, timed inside the child (import apart from
   open + call), median of ``--cold-rounds`` (5). Floor: the same child making one
   ``records_by_id`` call of the same id — what a new ``memlib`` process pays to read
   one record, with the files in the OS cache.
3. **migration** (SQLite): a copy of the store made schema 5 (``DROP INDEX
   records_source``, ``schema_version`` 5 in ``memlib_meta``) is opened as a user would
   open it after upgrading: the first open plus one call (which creates the index), and
   the index's size (pages the file grew by, plus free pages the drop left and the
   index reused).

A printed table and a JSON report (``--out``, default ``reports/source-neighbours-YYYYMMDD.json``),
never timed assertions. The figures are those of the machine the report names.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import corpus
from benchmarks.common import (
    BATCH,
    ROOT,
    USER,
    Log,
    compile_package,
    dated_report,
    progress_log,
    sizes_arg,
    timed,
    write_report,
)

SIZES = "10000,100000,1000000"
BACKENDS = ("jsonl", "sqlite", "postgresql")
LOOKUPS = 300
BATCH_IDS = 1_000
CHECKS = 200
READ_ALL_CHECK_MAX = 20_000  # the read_all reference above this is too slow
COLD_ROUNDS = 5
BUDGET = 30.0
TURNS = 20  # turns a session
INTERLEAVED = 4  # sessions appended interleaved
RETRACT_ONE_IN = 2_000
SEED = 7
WORKDIR = Path(tempfile.gettempdir()) / "srcbench"
RETRACTION_SOURCE = {"source_id": "bench-retractions", "source_type": "user_request",
                     "title": "retract", "captured_at": "2026-08-10T12:00:00Z"}

# A fresh process: import memlib, open the store, one call; timed inside the child.
CHILD = (
    "import sys, time\n"
    "t0 = time.perf_counter()\n"
    "from memlib.stores import open_store\n"
    "t1 = time.perf_counter()\n"
    "store = open_store(sys.argv[2], user_id=sys.argv[3])\n"
    "ids = sys.argv[4:]\n"
    "if sys.argv[1] == 'neighbours':\n"
    "    found = len(store.source_neighbours(ids))\n"
    "else:\n"
    "    found = len(store.records_by_id(ids))\n"
    "t2 = time.perf_counter()\n"
    "print(t1 - t0, t2 - t1, found)\n"
)


# -- the corpus: sessions of TURNS turns, INTERLEAVED at a time ------------------------------

@dataclass(frozen=True)
class Layout:
    """Which record is which turn of which source, in append order (no text)."""

    ids: list[str]
    sources: list[str]
    retracted: list[str]

    def expected(self, memory_ids: Sequence[str]) -> dict[str, tuple[str | None, str | None]]:
        """The reference answer, from the layout alone (the store is not read)."""
        gone = set(self.retracted)
        wanted = set(memory_ids)
        turns: dict[str, list[str]] = {}
        for memory_id, source in zip(self.ids, self.sources, strict=True):
            if memory_id not in gone:
                turns.setdefault(source, []).append(memory_id)
        found: dict[str, tuple[str | None, str | None]] = {}
        for members in turns.values():
            for i, memory_id in enumerate(members):
                if memory_id in wanted:
                    found[memory_id] = (members[i - 1] if i else None,
                                        members[i + 1] if i + 1 < len(members) else None)
        return {m: found[m] for m in memory_ids if m in found}


def layout(n: int) -> Layout:
    rng = random.Random(SEED)
    group = TURNS * INTERLEAVED
    ids: list[str] = []
    sources: list[str] = []
    first = 0
    for start in range(0, n, group):
        slots = [k for k in range(INTERLEAVED) for _ in range(TURNS)]
        rng.shuffle(slots)
        turn = [0] * INTERLEAVED
        for k in slots[: min(group, n - start)]:
            ids.append(f"s{first + k:07d}-t{turn[k]:02d}")
            sources.append(f"session-{first + k:07d}")
            turn[k] += 1
        first += INTERLEAVED
    retracted = sorted(rng.sample(ids, min(n, max(3, n // RETRACT_ONE_IN))))
    return Layout(ids, sources, retracted)


def items(n: int, plan: Layout) -> Iterator[list[dict[str, Any]]]:
    """``append_many`` batches: the scale corpus's texts, given the sessions' ids."""
    done = 0
    for batch in corpus.records(n, batch=BATCH):
        for item in batch:
            source = plan.sources[done]
            item["memory_id"] = plan.ids[done]
            item["source"]["source_id"] = source
            item["source"]["title"] = source
            done += 1
        yield batch


# -- the stores ----------------------------------------------------------------------------

@dataclass
class Postgres:
    dsn: str
    pid: int | None = None  # the postmaster this run started (stopped at the end), else None

    def stop(self) -> None:
        if self.pid is None:
            return
        try:
            os.kill(self.pid, signal.SIGINT)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        self.pid = None


def start_postgres(workdir: Path, log: Log) -> Postgres:
    """A cluster kept in ``workdir/pg`` (created once), started on a free port."""
    import glob
    import pwd

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    initdb = Path(found[-1]) if found else Path(shutil.which("initdb") or "initdb")
    if not initdb.exists():
        raise RuntimeError("PostgreSQL is not installed (no initdb)")
    bindir = initdb.parent
    folder, data = workdir / "pg", workdir / "pg" / "data"
    prefix: list[str] = []
    owner: tuple[int, int] | None = None
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        owner = (entry.pw_uid, entry.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    if not (data / "PG_VERSION").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        if owner:
            os.chown(folder, *owner)
        os.chmod(folder, 0o700)
        log(f"initdb in {folder}")
        subprocess.run([*prefix, str(initdb), "-D", str(data), "-U", "postgres", "-A", "trust",
                        "-E", "UTF8", "--locale=C.UTF-8"], check=True, capture_output=True,
                       text=True)
    pidfile = data / "postmaster.pid"
    if pidfile.exists():  # left running by a run that was killed: use it, leave it
        lines = pidfile.read_text().splitlines()
        try:
            os.kill(int(lines[0]), 0)
            return Postgres(f"postgresql://postgres@127.0.0.1:{lines[3]}/postgres")
        except (ProcessLookupError, ValueError, IndexError):
            pass
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1"
    subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"),
                    "-w", "-t", "60", "-o", options, "start"], check=True, capture_output=True,
                   text=True)
    pid = int(pidfile.read_text().split("\n", 1)[0])
    return Postgres(f"postgresql://postgres@127.0.0.1:{port}/postgres", pid)


def pg_records(url: str) -> int:
    """Records in the schema of ``url`` (0 when it has none)."""
    import psycopg

    from memlib.stores.sql._postgres import split_url

    dsn, schema = split_url(url)
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = %s AND "
                           "tablename = 'records'", (schema,)).fetchone()
        if not row or not row[0]:
            return 0
        got = conn.execute(f'SELECT count(*) FROM "{schema}".records').fetchone()
        return int(got[0]) if got else 0


def pg_reset(url: str) -> None:
    import psycopg

    from memlib.stores.sql._postgres import init_schema, split_url

    dsn, schema = split_url(url)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    init_schema(url)


def urls_for(n: int, folder: Path, pg: Postgres | None, backends: Sequence[str]) -> dict[str, str]:
    urls = {"jsonl": f"jsonl:{folder / 'records.jsonl'}",
            "sqlite": f"sqlite:{folder / 'records.sqlite'}"}
    if pg is not None:
        urls["postgresql"] = f"{pg.dsn}?schema=srcbench_{n}"
    return {name: url for name, url in urls.items() if name in backends}


def built_already(name: str, url: str, folder: Path, appended: int) -> bool:
    if name == "postgresql":
        return pg_records(url) == appended
    marker = folder / f"built-{name}"
    if not marker.exists() or marker.read_text().strip() != str(appended):
        return False
    # A file built by another memlib may hold another records_source (ab503ac changed its
    # expression within schema 6): its query would not search it. Rebuild it then.
    return name != "sqlite" or sqlite_index(folder / "records.sqlite") == shipped_index()


def sqlite_index(path: Path) -> str | None:
    db = sqlite3.connect(path)
    try:
        row = db.execute("SELECT sql FROM sqlite_master WHERE name = 'records_source'").fetchone()
    finally:
        db.close()
    return " ".join(row[0].split()) if row and row[0] else None


def shipped_index() -> str:
    from memlib.stores.sql._sqlite import SqliteMemoryStore

    (create,) = SqliteMemoryStore.MIGRATIONS[5]  # type: ignore[misc]
    return " ".join(str(create).replace("IF NOT EXISTS ", "").split())


def plan_of(store: Any) -> dict[str, Any]:
    """The neighbours statement's plan (SQL stores): does it search records_source by
    scope *and* source, as it must to cost one probe a neighbour?"""

    if store.backend == "sqlite":
        conn = store._connection()
        sql = store._q(store._neighbours_sql())
        rows = conn.execute("EXPLAIN QUERY PLAN " + sql,
                            (store.user_scope, store._many(["x"]))).fetchall()
        text = " | ".join(str(r[-1]) for r in rows)
        by_source = "records_source (user_scope=? AND" in text
    elif store.backend == "postgresql":
        conn = store._connection()
        sql = store._q(store._neighbours_sql())
        rows = conn.execute("EXPLAIN " + sql, (store.user_scope, store._many(["x"]))).fetchall()
        text = " | ".join(str(r[0]).strip() for r in rows)
        by_source = "records_source" in text
    else:
        return {}
    return {"plan": text, "searches_records_source_by_source": by_source}


def build(n: int, plan: Layout, urls: dict[str, str], folder: Path,
          log: Log) -> dict[str, dict[str, Any]]:
    """Build those stores of ``urls`` not yet built; their build seconds (or reuse)."""
    from memlib.stores import open_store

    appended = n + len(plan.retracted)
    todo = {name: url for name, url in urls.items()
            if not built_already(name, url, folder, appended)}
    out: dict[str, dict[str, Any]] = {name: {"reused": True} for name in urls if name not in todo}
    if out:
        log(f"N={n:,}: reusing {', '.join(out)} in {folder}")
    if not todo:
        return out
    folder.mkdir(parents=True, exist_ok=True)
    for name, url in todo.items():
        (folder / f"built-{name}").unlink(missing_ok=True)
        if name == "postgresql":
            pg_reset(url)
        else:
            stem = "records.jsonl" if name == "jsonl" else "records.sqlite"
            for old in folder.glob(stem + "*"):
                old.unlink()
    log(f"N={n:,}: building {'+'.join(todo)} ({n:,} records in sessions of {TURNS}, "
        f"{len(plan.retracted)} retracted) in {folder}")
    stores = {name: open_store(url, user_id=USER) for name, url in todo.items()}
    spent = dict.fromkeys(stores, 0.0)
    done, shown = 0, 0
    for batch in items(n, plan):
        for name, store in stores.items():
            seconds, _ = timed(lambda s=store, b=batch: s.append_many(b))
            spent[name] += seconds
        done += len(batch)
        if done - shown >= 100_000 or done == n:
            shown = done
            log(f"  N={n:,}: {done:,} appended (" + ", ".join(
                f"{k} {done / v:,.0f}/s" for k, v in spent.items()) + ")")
    for memory_id in plan.retracted:
        for name, store in stores.items():
            seconds, _ = timed(lambda s=store, m=memory_id: s.retract(
                m, reason="benchmark: a retracted turn", source=RETRACTION_SOURCE))
            spent[name] += seconds
    if "jsonl" in stores:  # what a recall would wait for, then the index file a reader loads
        jsonl: Any = stores["jsonl"]
        seconds, _ = timed(jsonl.index.settle)
        spent["jsonl"] += seconds
    for store in stores.values():
        store.close()
    del stores
    gc.collect()
    if "jsonl" in todo:
        from memlib.stores.jsonl._store import RemoteMemoryStore

        seconds, _ = timed(lambda: RemoteMemoryStore(
            folder / "records.jsonl", user_id=USER).write_index_file())
        spent["jsonl"] += seconds
    for name in todo:
        out[name] = {"seconds": round(spent[name], 1), "records_per_s": round(n / spent[name])}
        if name != "postgresql":
            (folder / f"built-{name}").write_text(str(appended))
    log(f"N={n:,}: built (" + ", ".join(f"{k} {v['seconds']:,.0f} s" for k, v in out.items()
                                        if "seconds" in v) + ")")
    return out


# -- measuring -------------------------------------------------------------------------------

def check(store: Any, plan: Layout, n: int, rng: random.Random) -> dict[str, Any]:
    """The store's answer for ~CHECKS random ids (a few retracted) against the layout's,
    and against the reference over read_all up to READ_ALL_CHECK_MAX records."""
    from memlib.stores._sources import source_neighbours_of

    asked = rng.sample(plan.ids, min(CHECKS, len(plan.ids)))
    asked += [m for m in plan.retracted[:5] if m not in asked]
    got = {m: (v.previous, v.next) for m, v in store.source_neighbours(asked).items()}
    expected = plan.expected(asked)
    if got != expected:
        wrong = [m for m in asked if got.get(m) != expected.get(m)][:3]
        raise RuntimeError(f"{store.backend}: source_neighbours is wrong for {wrong}: "
                           f"{[got.get(m) for m in wrong]} != {[expected.get(m) for m in wrong]}")
    with_previous = sum(1 for p, _ in got.values() if p is not None)
    result: dict[str, Any] = {"ids": len(asked), "answered": len(got),
                              "with_previous": with_previous, "against_layout": True,
                              "against_read_all": None, "ok": True}
    if n <= READ_ALL_CHECK_MAX:
        reference = {m: (v.previous, v.next)
                     for m, v in source_neighbours_of(store.read_all(), asked).items()}
        if reference != got:
            raise RuntimeError(f"{store.backend}: source_neighbours differs from the reference")
        result["against_read_all"] = True
    return result


def us(seconds: Sequence[float]) -> dict[str, Any]:
    ordered = sorted(seconds)
    return {"p50_us": round(statistics.median(ordered) * 1e6, 1),
            "p95_us": round(ordered[int(0.95 * (len(ordered) - 1))] * 1e6, 1),
            "calls": len(ordered)}


def paired_series(store: Any, draws: list[list[str]], budget: float) -> dict[str, Any]:
    """``source_neighbours`` and ``records_by_id`` of the same ids, call by call."""
    for ids in draws[:3]:  # warm-up
        store.source_neighbours(ids)
        store.records_by_id(ids)
        store.existing_ids(ids)
    work, floor, keys = [], [], []
    began = time.monotonic()
    for ids in draws:
        work.append(timed(lambda i=ids: store.source_neighbours(i))[0])
        floor.append(timed(lambda i=ids: store.records_by_id(i))[0])
        keys.append(timed(lambda i=ids: store.existing_ids(i))[0])
        if time.monotonic() - began > budget and len(work) >= 5:
            break
    out = {"ids_per_call": len(draws[0]), "neighbours": us(work), "floor": us(floor),
           "ids_only": us(keys)}
    out["ratio"] = round(out["neighbours"]["p50_us"] / out["floor"]["p50_us"], 2)
    return out


def fresh(url: str, what: str, memory_id: str, rounds: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    imports, calls = [], []
    for _ in range(rounds):
        done = subprocess.run([sys.executable, "-c", CHILD, what, url, USER, memory_id],
                              capture_output=True, text=True, cwd=ROOT, env=env, check=False,
                              timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"a fresh {what} process failed: {done.stderr.strip()[-800:]}")
        imported, called, found = done.stdout.split()
        if found != "1":
            raise RuntimeError(f"a fresh {what} process found {found} answers, not 1")
        imports.append(float(imported))
        calls.append(float(called))
    return {"import_ms": round(statistics.median(imports) * 1e3, 2),
            "open_and_call_ms": round(statistics.median(calls) * 1e3, 2),
            "open_and_call_all_ms": [round(c * 1e3, 2) for c in calls]}


def migration(path: Path, scratch: Path, memory_id: str) -> dict[str, Any]:
    """A schema-5 copy of the SQLite store, opened once as a user would after upgrading."""
    from memlib.stores import open_store

    copy = scratch / "schema5.sqlite"
    for extra in ("", "-wal", "-shm"):
        Path(f"{copy}{extra}").unlink(missing_ok=True)
        if Path(f"{path}{extra}").exists():
            shutil.copyfile(f"{path}{extra}", f"{copy}{extra}")
    db = sqlite3.connect(copy)
    db.execute("DROP INDEX records_source")
    db.execute("UPDATE memlib_meta SET value = '5' WHERE key = 'schema_version'")
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = db.execute("PRAGMA page_size").fetchone()[0]
    free_before = db.execute("PRAGMA freelist_count").fetchone()[0]
    db.close()
    size_before = copy.stat().st_size

    def first_open() -> int:
        store = open_store(f"sqlite:{copy}", user_id=USER)
        found = len(store.source_neighbours([memory_id]))
        store.close()
        return found

    seconds, found = timed(first_open)
    db = sqlite3.connect(copy)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    has_index = db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                           "name = 'records_source'").fetchone()[0] == 1
    version = db.execute("SELECT value FROM memlib_meta WHERE key = 'schema_version'").fetchone()
    free_after = db.execute("PRAGMA freelist_count").fetchone()[0]
    db.close()
    grown = copy.stat().st_size - size_before
    for extra in ("", "-wal", "-shm"):
        Path(f"{copy}{extra}").unlink(missing_ok=True)
    if not has_index or found != 1:
        raise RuntimeError("opening a schema-5 SQLite store did not create records_source")
    return {"first_open_and_call_s": round(seconds, 2), "schema_after": int(version[0]),
            "index_mb": round((grown + (free_before - free_after) * page) / 1e6, 1),
            "file_grew_mb": round(grown / 1e6, 1),
            "free_pages_reused_mb": round((free_before - free_after) * page / 1e6, 1)}


def measure(n: int, name: str, url: str, plan: Layout, args: argparse.Namespace,
            log: Log) -> dict[str, Any]:
    from memlib.stores import open_store

    rng = random.Random(f"{SEED}-{n}-{name}")
    store: Any = open_store(url, user_id=USER)
    out: dict[str, Any] = {"checked": check(store, plan, n, rng)}
    try:
        out.update(plan_of(store))
    except Exception as exc:  # noqa: BLE001 (the plan is informative; the timing goes on)
        out["plan"] = f"not read: {type(exc).__name__}: {exc}"
    if out.get("searches_records_source_by_source") is False:
        log(f"N={n:,} {name}: the neighbours statement does not search records_source by "
            f"source: {out['plan']}")
    singles = [[rng.choice(plan.ids)] for _ in range(args.lookups)]
    batches = [rng.sample(plan.ids, min(BATCH_IDS, len(plan.ids))) for _ in range(args.lookups)]
    out["warm"] = {"one_id": paired_series(store, singles, args.budget),
                   "batch": paired_series(store, batches, args.budget)}
    store.close()
    live = set(plan.ids) - set(plan.retracted)
    chosen = next(m for m in (rng.choice(plan.ids) for _ in range(100)) if m in live)
    compile_package()
    out["fresh_process"] = {"rounds": args.cold_rounds, "memory_id": chosen,
                            "neighbours": fresh(url, "neighbours", chosen, args.cold_rounds),
                            "floor": fresh(url, "floor", chosen, args.cold_rounds)}
    warm, cold = out["warm"], out["fresh_process"]
    log(f"N={n:,} {name}: 1 id {warm['one_id']['neighbours']['p50_us']} us (floor "
        f"{warm['one_id']['floor']['p50_us']}), {BATCH_IDS} ids "
        f"{warm['batch']['neighbours']['p50_us']} us (floor {warm['batch']['floor']['p50_us']}); "
        f"fresh {cold['neighbours']['open_and_call_ms']} ms (floor "
        f"{cold['floor']['open_and_call_ms']})")
    return out


# -- the report ------------------------------------------------------------------------------

def tables(report: dict[str, Any]) -> str:
    lines = ["source_neighbours, warm (p50 us per call; floor: records_by_id of the same ids, "
             "same store object)",
             f"{'records':>10}  {'backend':<10}  {'1 id':>9}  {'floor':>9}  {'ratio':>5}  "
             f"{'1000 ids':>10}  {'floor':>10}  {'ratio':>5}  {'ids only':>9}  {'calls':>9}"]
    for size in report["sizes"]:
        for name, row in size["backends"].items():
            one, many = row["warm"]["one_id"], row["warm"]["batch"]
            lines.append(
                f"{size['records']:>10,}  {name:<10}  {one['neighbours']['p50_us']:>9,.1f}  "
                f"{one['floor']['p50_us']:>9,.1f}  {one['ratio']:>4.1f}x  "
                f"{many['neighbours']['p50_us']:>10,.0f}  {many['floor']['p50_us']:>10,.0f}  "
                f"{many['ratio']:>4.1f}x  {many['ids_only']['p50_us']:>9,.0f}  "
                f"{one['neighbours']['calls']:>4}/{many['neighbours']['calls']:<4}")
    lines += ["", "fresh process, one id (median ms, timed in the child; floor: records_by_id)",
              f"{'records':>10}  {'backend':<10}  {'import':>8}  {'open+call':>10}  "
              f"{'floor':>8}"]
    for size in report["sizes"]:
        for name, row in size["backends"].items():
            cold = row["fresh_process"]
            lines.append(f"{size['records']:>10,}  {name:<10}  "
                         f"{cold['neighbours']['import_ms']:>8.1f}  "
                         f"{cold['neighbours']['open_and_call_ms']:>10.1f}  "
                         f"{cold['floor']['open_and_call_ms']:>8.1f}")
    lines += ["", "SQLite schema 5 -> 6: first open + one call (creates records_source)",
              f"{'records':>10}  {'seconds':>8}  {'index MB':>8}  {'file grew MB':>12}"]
    for size in report["sizes"]:
        m = size.get("sqlite_migration")
        if m:
            lines.append(f"{size['records']:>10,}  {m['first_open_and_call_s']:>8.2f}  "
                         f"{m['index_mb']:>8.1f}  {m['file_grew_mb']:>12.1f}")
    lines += ["", "builds (append_many, 10k batches, then the retractions one by one)",
              f"{'records':>10}  {'backend':<10}  {'seconds':>8}  {'records/s':>10}"]
    for size in report["sizes"]:
        for name, built in size["builds"].items():
            if "seconds" in built:
                lines.append(f"{size['records']:>10,}  {name:<10}  {built['seconds']:>8,.0f}  "
                             f"{built['records_per_s']:>10,}")
            else:
                lines.append(f"{size['records']:>10,}  {name:<10}  {'reused':>8}")
    if report.get("postgresql_skipped"):
        lines += ["", f"PostgreSQL not measured: {report['postgresql_skipped']}"]
    return "\n".join(lines)


def postgres_or_skip(
    pg_url: str | None, workdir: Path, log: Log
) -> tuple[Postgres | None, str | None, str | None]:
    """``(server, its version, None)``: ``--pg-url``, else a cluster in ``workdir``; or
    ``(None, None, why)`` when none can be started (the run measures the other two)."""
    try:
        pg = Postgres(pg_url) if pg_url else start_postgres(workdir, log)
        from benchmarks.run import _pg_version

        return pg, _pg_version(pg.dsn), None
    except Exception as exc:  # noqa: BLE001 (any failure: measure the other two)
        reason = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
        print(f"PostgreSQL could not be started, measuring the others: {reason}",
              file=sys.stderr)
        return None, None, reason


def backends_arg(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in BACKENDS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"backends are among {','.join(BACKENDS)}: {text!r}")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=sizes_arg, default=SIZES,
                        help=f"comma-separated store sizes (default {SIZES})")
    parser.add_argument("--backends", type=backends_arg, default=",".join(BACKENDS))
    parser.add_argument("--lookups", type=int, default=LOOKUPS,
                        help="warm calls per series (one id, and 1,000 ids)")
    parser.add_argument("--budget", type=float, default=BUDGET,
                        help="seconds a warm series may take before it stops (at least 5 calls)")
    parser.add_argument("--cold-rounds", type=int, default=COLD_ROUNDS)
    parser.add_argument("--workdir", type=Path, default=WORKDIR,
                        help="where the stores are kept (built once per size)")
    parser.add_argument("--pg-url", default=None,
                        help="a PostgreSQL server to use (default: a cluster in the workdir)")
    parser.add_argument("--out", default=None, help="the JSON report to write")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)

    began = time.monotonic()
    log = progress_log(began, args.quiet)
    out = dated_report(args.out, "source-neighbours")
    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                    "sqlite": sqlite3.sqlite_version, "load_average_at_start": os.getloadavg(),
                    "note": "2 cores shared with other work (other engineers' tests and builds)"},
        "settings": {"turns_per_source": TURNS, "interleaved_sources": INTERLEAVED,
                     "retracted_one_in": RETRACT_ONE_IN, "lookups": args.lookups,
                     "batch_ids": BATCH_IDS, "budget_s": args.budget,
                     "cold_rounds": args.cold_rounds, "checks": CHECKS, "seed": SEED},
        "sizes": [],
    }
    args.workdir.mkdir(parents=True, exist_ok=True)
    pg: Postgres | None = None
    backends = list(args.backends)
    if "postgresql" in backends:
        pg, version, reason = postgres_or_skip(args.pg_url, args.workdir, log)
        if pg is None:
            report["postgresql_skipped"] = reason
            backends.remove("postgresql")
        else:
            report["machine"]["postgresql"] = version
    try:
        for n in args.sizes:
            plan = layout(n)
            folder = args.workdir / f"n-{n}"
            urls = urls_for(n, folder, pg, backends)
            size: dict[str, Any] = {"records": n, "retracted": len(plan.retracted),
                                    "sources": len(set(plan.sources)),
                                    "builds": build(n, plan, urls, folder, log), "backends": {}}
            for name, url in urls.items():
                size["backends"][name] = measure(n, name, url, plan, args, log)
            if "sqlite" in urls:
                live = sorted(set(plan.ids) - set(plan.retracted))
                log(f"N={n:,}: SQLite schema-5 copy, first open")
                size["sqlite_migration"] = migration(folder / "records.sqlite", folder,
                                                     live[len(live) // 2])
            report["sizes"].append(size)
    finally:
        if pg is not None:
            pg.stop()
    write_report(out, report, began, tables, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
