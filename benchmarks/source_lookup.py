"""What a record's predecessor costs a SQLite store to find: ``python -m benchmarks.source_lookup``.

Pair vectors and pair terms (``benchmarks/retrieval_steps.py``, steps f, j and k) read
each conversation record together with the one before it in its source: the latest
searched conversation record of the same ``source_id`` appended before it
(docs/retrieval.md, "What shipping f, j and k takes"). A SQLite store keeps
``source_id`` only inside the record's JSON, so a write would need an index on it. This
measures that index on the stores ``benchmarks.mcp_session`` builds (10k, 100k, 1M
records; reused from ``--workdir``), each on a copy so the store itself is not changed:

1. **migration**: ``CREATE INDEX`` on ``(user_scope, json_extract(body,
   '$.source.source_id'), id)`` over conversation records, once, and what it adds to
   the file;
2. **lookup**, in a fresh connection: the predecessor query for ``--lookups`` records
   drawn at random (seeded), its plan (it must search the new index), beside
3. **the floor**: the same records fetched by ``memory_id`` through the store's own
   unique index — one keyed read of one row, the least any lookup of a row costs here;
4. **fresh process**: the first lookup of a new process (open the file, one query,
   timed inside the child), the predecessor query beside the keyed read, median of 5
   — what each ``memlib`` command would pay, with the file in the OS cache.

The bench corpus gives every record a source of its own, so nothing precedes a record
in its source; each lookup is bounded just above the record's own row instead, so that
it finds that row and reads it (and runs the retraction check), as a lookup in a store
of real sessions finds the turn before: one probe of the index, one row read. Before
timing, the query is checked on a small store of real sessions written through
``SqliteMemoryStore``: each turn's predecessor is the turn before it, a retracted turn
is skipped, the first turn of a session has none. PostgreSQL and JSONL
are not measured here. Printed table and a JSON report (``--out``), never timed
assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, Log, progress_log, sizes_arg, timed
from benchmarks.mcp_session import stores_for

SIZES = "10000,100000,1000000"
LOOKUPS = 500
COLD_ROUNDS = 5
SEED = 7
WORKDIR = Path(tempfile.gettempdir()) / "mcpbench"  # benchmarks.mcp_session's default

CREATE = (
    "CREATE INDEX records_source ON records "
    "(user_scope, json_extract(body, '$.source.source_id'), id) WHERE kind = 'conversation'"
)
# The latest searched conversation record of the source appended before ``id``.
PREDECESSOR = (
    "SELECT memory_id, body FROM records r WHERE r.user_scope = ? AND r.kind = 'conversation' "
    "AND json_extract(r.body, '$.source.source_id') = ? AND r.id < ? "
    "AND NOT EXISTS (SELECT 1 FROM records t WHERE t.user_scope = r.user_scope "
    "AND t.retracts = r.memory_id) ORDER BY r.id DESC LIMIT 1"
)
FLOOR = "SELECT memory_id, body FROM records WHERE user_scope = ? AND memory_id = ?"
# A fresh process: open the file and run one query, timed inside the child (what a new
# ``memlib`` process pays for its first lookup, with the file in the OS cache).
CHILD = (
    "import sqlite3, sys, time\n"
    "t = time.perf_counter()\n"
    "rows = sqlite3.connect(sys.argv[1]).execute(sys.argv[2], sys.argv[3:]).fetchall()\n"
    "print(time.perf_counter() - t, len(rows))\n"
)


def check_on_sessions(folder: Path) -> dict[str, Any]:
    """The predecessor query on real sessions: (turns checked, what it found)."""
    from memlib.stores.sqlite import SqliteMemoryStore

    path = folder / "sessions.sqlite"
    store = SqliteMemoryStore(path, user_id="sessions")
    for session in range(3):
        store.append_many(
            {"kind": "conversation", "memory_id": f"s{session}:{turn}",
             "content": f"turn {turn} of session {session}", "summary": f"turn {turn}",
             "source": {"source_id": f"session-{session}", "source_type": "transcript",
                        "title": f"session {session}", "captured_at": "2026-01-01T00:00:00Z"}}
            for turn in range(5)
        )
    store.retract("s1:2", reason="wrong", source={
        "source_id": "user", "source_type": "user_request", "title": "retract",
        "captured_at": "2026-01-02T00:00:00Z"})
    store.close()
    db = sqlite3.connect(path)
    db.execute(CREATE)
    scope = db.execute("SELECT user_scope FROM records LIMIT 1").fetchone()[0]
    found: dict[str, str | None] = {}
    for row_id, memory_id, body in db.execute(
        "SELECT id, memory_id, body FROM records WHERE kind = 'conversation' ORDER BY id"
    ).fetchall():
        source = json.loads(body)["source"]["source_id"]
        hit = db.execute(PREDECESSOR, (scope, source, row_id)).fetchone()
        found[memory_id] = hit[0] if hit else None
    db.close()
    expected = {f"s{s}:{t}": (f"s{s}:{t - 1}" if t else None) for s in range(3) for t in range(5)}
    expected["s1:3"] = "s1:1"  # s1:2 is retracted: it leaves no trace in its successor
    if found != expected:
        raise RuntimeError(f"the predecessor query is wrong: {found} != {expected}")
    return {"turns": len(found), "ok": True}


def measure(path: Path, lookups: int, folder: Path, log: Log) -> dict[str, Any]:
    copy = folder / path.name
    shutil.copyfile(path, copy)
    before = copy.stat().st_size
    db = sqlite3.connect(copy)
    records = db.execute("SELECT count(*) FROM records").fetchone()[0]
    migration_s, _ = timed(lambda: (db.execute(CREATE), db.commit()))
    db.close()
    grown_mb = (copy.stat().st_size - before) / 1e6
    db = sqlite3.connect(copy)  # a fresh connection, as a new process has
    scope = db.execute("SELECT user_scope FROM records LIMIT 1").fetchone()[0]
    top = db.execute("SELECT max(id) FROM records").fetchone()[0]
    chosen = random.Random(SEED).sample(range(1, top + 1), min(lookups, top))
    rows = [db.execute("SELECT id, memory_id, json_extract(body, '$.source.source_id') "
                       "FROM records WHERE id = ? AND kind = 'conversation'", (i,)).fetchone()
            for i in chosen]
    rows = [r for r in rows if r is not None]
    plan = " ".join(str(p[-1]) for p in db.execute(
        "EXPLAIN QUERY PLAN " + PREDECESSOR, (scope, rows[0][2], rows[0][0])).fetchall())
    if "records_source" not in plan:
        raise RuntimeError(f"the predecessor query does not search records_source: {plan}")
    work, floor = [], []
    for row_id, memory_id, source in rows:
        # Bound id + 1: the record itself is "the one before", so every lookup finds a row
        # and reads it, as a lookup in a store of real sessions does.
        args = (scope, source, row_id + 1)
        seconds, found = timed(lambda a=args: db.execute(PREDECESSOR, a).fetchall())
        if [r[0] for r in found] != [memory_id]:
            raise RuntimeError(f"the lookup for {memory_id} found {found[:1]}")
        work.append(seconds)
        floor.append(timed(lambda m=memory_id: db.execute(FLOOR, (scope, m)).fetchall())[0])
    db.close()
    row_id, memory_id, source = rows[0]
    cold_work, cold_floor = [], []
    for _ in range(COLD_ROUNDS):
        cold_work.append(fresh(copy, PREDECESSOR, scope, source, str(row_id + 1)))
        cold_floor.append(fresh(copy, FLOOR, scope, memory_id))
    copy.unlink()

    def us(seconds: Sequence[float]) -> dict[str, float]:
        ordered = sorted(seconds)
        return {"p50_us": round(statistics.median(ordered) * 1e6, 1),
                "p95_us": round(ordered[int(0.95 * (len(ordered) - 1))] * 1e6, 1)}

    result = {"records": records, "migration_s": round(migration_s, 2),
              "index_mb": round(grown_mb, 1), "plan": plan, "lookups": len(rows),
              "predecessor": us(work), "floor_by_memory_id": us(floor),
              "fresh_process": {"rounds": COLD_ROUNDS, "predecessor": us(cold_work),
                                "floor_by_memory_id": us(cold_floor)}}
    log(f"N={records:,}: index {migration_s:.1f} s (+{grown_mb:.0f} MB), predecessor "
        f"{result['predecessor']['p50_us']} us, floor {result['floor_by_memory_id']['p50_us']} us")
    return result


def fresh(path: Path, sql: str, *params: str) -> float:
    """Seconds a fresh process takes to open ``path`` and run ``sql`` once (one row)."""
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), sql, *params],
                          capture_output=True, text=True, check=True)
    seconds, found = done.stdout.split()
    if found != "1":
        raise RuntimeError(f"a fresh lookup found {found} rows, not 1")
    return float(seconds)


def table(report: dict[str, Any]) -> str:
    lines = ["SQLite: a record's predecessor in its source (p50 / p95, fresh connection)",
             f"{'records':>10}  {'index s':>8}  {'index MB':>8}  {'predecessor us':>15}  "
             f"{'floor us':>13}  {'ratio':>5}"]
    for r in report["sizes"]:
        work, floor = r["predecessor"], r["floor_by_memory_id"]
        lines.append(
            f"{r['records']:>10,}  {r['migration_s']:>8.2f}  {r['index_mb']:>8.1f}  "
            f"{work['p50_us']:>7.1f} / {work['p95_us']:<6.1f}  "
            f"{floor['p50_us']:>5.1f} / {floor['p95_us']:<5.1f}  "
            f"{work['p50_us'] / floor['p50_us']:>4.1f}x")
    lines += ["", f"first lookup in a fresh process (open + one query, median of {COLD_ROUNDS})",
              f"{'records':>10}  {'predecessor us':>15}  {'floor us':>9}"]
    for r in report["sizes"]:
        cold = r["fresh_process"]
        lines.append(f"{r['records']:>10,}  {cold['predecessor']['p50_us']:>15.1f}  "
                     f"{cold['floor_by_memory_id']['p50_us']:>9.1f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=sizes_arg, default=SIZES,
                        help=f"comma-separated store sizes (default {SIZES})")
    parser.add_argument("--lookups", type=int, default=LOOKUPS)
    parser.add_argument("--workdir", type=Path, default=WORKDIR,
                        help="where benchmarks.mcp_session keeps (or builds) its stores")
    parser.add_argument("--out", type=Path, default=None, help="the JSON report to write")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)

    log = progress_log(time.monotonic(), args.quiet)
    sizes = args.sizes
    with tempfile.TemporaryDirectory() as scratch:
        checked = check_on_sessions(Path(scratch))
        rows = [measure(stores_for(n, args.workdir, log)[0].sqlite, args.lookups,
                        Path(scratch), log) for n in sizes]
    report = {"date": datetime.now(UTC).strftime("%Y-%m-%d"), "sqlite": sqlite3.sqlite_version,
              "cpus": os.cpu_count(), "checked_on_sessions": checked, "sizes": rows}
    print(table(report))
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        shown = args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out
        print(f"report written to {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
