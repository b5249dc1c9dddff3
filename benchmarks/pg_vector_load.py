"""What a fresh process pays to load a PostgreSQL scope's vectors (the first dense recall).

    .venv/bin/python -m benchmarks.pg_vector_load --url 'postgresql://…?schema=S' \\
        [--user bench-user] [--rounds 3] [--out reports/pg-vector-load-YYYYMMDD.json]

On an existing store with vectors (e.g. one ``benchmarks.pair_recall`` built), each row
is ``rounds`` fresh processes, each opening the store and calling ``dense_scores`` once
with the store's recorded model; the time is that call's, the memory the process's own
peak (``VmHWM``):

- **shipped**: ``COPY … (FORMAT BINARY)``, parsed as libpq hands each row over;
- **server-side cursor**: 10,000 rows a ``FETCH``, each row a driver tuple;
- **client-side result** (memlib before both): one ``execute`` whose whole result libpq
  holds while the matrix is built from it.

Floors beside them: the matrix's own bytes plus what an open store costs before any
vector (a process that opens the store and reads its vector state), and for time the same
``SELECT`` read as ``COPY … (FORMAT BINARY)`` by psycopg and thrown away: the server's
work and the transfer, with nothing kept.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from benchmarks.common import PEAK_AT_EXIT, ROOT, USER, dated_report, write_report

CHILD = PEAK_AT_EXIT + """
import time
from datetime import UTC, datetime
import numpy as np
from memlib import open_store
from memlib.normalize import normalize_recall_query
from memlib.stores.sql._postgres import PostgresMemoryStore
from memlib.stores.sql._common import SqlMemoryStore

url, user, mode = sys.argv[1:4]
if mode == "client":
    PostgresMemoryStore._vector_rows = SqlMemoryStore._vector_rows
elif mode == "cursor":
    def _cursor_rows(self, conn):
        with conn.cursor(name="memlib_vectors", binary=True) as cursor:
            cursor.itersize = 10_000
            cursor.execute(self._q(self.VECTOR_ROWS), (self.user_scope,))
            yield from cursor
    PostgresMemoryStore._vector_rows = _cursor_rows
store = open_store(url, user_id=user)
state = store.vector_state()
if mode == "copy":
    from memlib.stores.sql._postgres import split_url
    import psycopg
    dsn, _ = split_url(url)
    start = time.perf_counter()
    # The store's own statement, read and dropped: the server's work and the transfer.
    with psycopg.connect(dsn) as conn, conn.cursor().copy(
        f"COPY ({store._q(store.VECTOR_ROWS)}) TO STDOUT (FORMAT BINARY)", (store.user_scope,)
    ) as copy:
        size = sum(len(chunk) for chunk in copy)
    print(json.dumps({"seconds": time.perf_counter() - start, "bytes": size}))
elif mode in ("shipped", "cursor", "client"):
    query = normalize_recall_query("a question", user_scope=store.user_scope, limit=10,
                                   query_id="q", issued_at=datetime(2026, 12, 1, tzinfo=UTC))
    vector = np.full(state.dimension, state.dimension ** -0.5, dtype=np.float32)
    start = time.perf_counter()
    scores = store.dense_scores(query, vector, model=state.model, dimension=state.dimension)
    print(json.dumps({"seconds": time.perf_counter() - start, "vectors": len(scores.ids)}))
else:  # "open": the store opened and its vector state read, no vector loaded
    print(json.dumps({"vectors": state.stored, "dimension": state.dimension}))
""".replace("import time\n", "import json, time\n", 1)

MODES = ("shipped", "cursor", "client", "copy", "open")


def child_run(url: str, user: str, mode: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", CHILD, url, user, mode], capture_output=True,
                         text=True, cwd=ROOT, check=False, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{mode}: exit {out.returncode}: {out.stderr.strip()[-800:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result["peak_rss_mb"] = float(out.stderr.split("VMHWM")[-1].split()[0])
    return result


def measure(url: str, user: str, rounds: int) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for mode in MODES:
        runs = [child_run(url, user, mode) for _ in range(rounds)]
        row: dict[str, Any] = {"runs": runs,
                               "peak_rss_mb": round(max(r["peak_rss_mb"] for r in runs), 1)}
        if "seconds" in runs[0]:
            row["seconds_median"] = round(statistics.median(r["seconds"] for r in runs), 3)
        rows[mode] = row
    opened = rows["open"]["runs"][0]
    matrix_mb = opened["vectors"] * opened["dimension"] * 4 / 2**20
    return {
        "url_schema": url.rsplit("schema=", 1)[-1] if "schema=" in url else None,
        "vectors": opened["vectors"], "dimension": opened["dimension"],
        "rows": rows,
        "floors": {
            "memory_mb": round(rows["open"]["peak_rss_mb"] + matrix_mb, 1),
            "matrix_mb": round(matrix_mb, 1),
            "seconds": rows["copy"]["seconds_median"],
        },
    }


def table(report: dict[str, Any]) -> str:
    rows, floors = report["rows"], report["floors"]
    lines = [f"{report['vectors']:,} vectors of {report['dimension']} dimensions; fresh "
             "process each; time of dense_scores, the process's peak memory",
             f"{'':<22} {'seconds':>8} {'peak MB':>8}"]
    for mode, label in (("shipped", "binary COPY"), ("cursor", "server-side cursor"),
                        ("client", "client-side result")):
        lines.append(f"{label:<22} {rows[mode]['seconds_median']:>8.2f} "
                     f"{rows[mode]['peak_rss_mb']:>8.0f}")
    lines.append(f"{'floor':<22} {floors['seconds']:>8.2f} {floors['memory_mb']:>8.0f}"
                 f"  (COPY read and dropped; open store {rows['open']['peak_rss_mb']:.0f} MB"
                 f" + matrix {floors['matrix_mb']:.0f} MB)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--url", required=True, help="a PostgreSQL store URL with vectors")
    parser.add_argument("--user", default=USER)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=None, help="the JSON report (default: dated)")
    args = parser.parse_args(argv)
    began = time.monotonic()
    report = measure(args.url, args.user, args.rounds)
    write_report(dated_report(args.out, "pg-vector-load"), report, began, table,
                 lambda line: print(line, file=sys.stderr))
    return 0


if __name__ == "__main__":
    sys.exit(main())
