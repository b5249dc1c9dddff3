"""Scale benchmarks: ``python -m benchmarks.run`` (printed tables, not timed tests).

For each N (default 10k, 100k, 1M) on the seeded corpus of ``benchmarks/corpus.py``:

* recall latency (limit 10), median and p95 over the query set, for the reference scan,
  the indexed JSONL store, SQLite and PostgreSQL (memlib's top-k path,
  ``RecallEngine.recall``), and — as peers on the same texts — bm25s retrieve and
  SQLite FTS5 ``bm25()``; every figure also as a speed-up over the reference;
* warm lexical rows (``benchmarks/lexical.py``): every lexical ranker (baseline, bm25,
  bm25+stopwords) on JSONL, SQLite and PostgreSQL (up to ``--db-max``), over rare-term
  queries and over the same with 3 common words (``corpus.query_sets``), beside bm25s
  retrieve on the same texts and queries, and memlib's p50 over bm25s's;
* exact parity: every memlib backend's ``to_json()`` is compared with the others for every
  query and ranker, and with the reference scan for the queries the reference ran;
* bulk import rate (``append_many`` in batches of 10,000) into JSONL, SQLite, PostgreSQL;
* the indexed JSONL store opened in a fresh process: time to read and index the file,
  recall latency there, and that process's peak memory;
* cold rows (``benchmarks/cold.py``, for each N of ``--cold-sizes``): a fresh
  ``memlib recall`` process on JSONL (without, then with its index file) and on SQLite,
  every lexical ranker, both kinds of query, wall time and the process's own peak RSS,
  on the stores built above (a SQLite file is built at every cold size, even above
  ``--db-max``); the catch-up after another process appended 1,000 records; the floor
  (Python's start + ``import memlib``), once per run;
* append latency per record (one durable ``append``) at 1k, 100k (and 1M) records
  against a raw ``write`` + ``fsync`` of the same bytes on the same disk;
* floors, once per run: the least a validated append can do (timed the same way), and
  the records/s of the per-record work no import can skip — what the targets leave room
  for on the machine at hand;
* the worst case one valid record can cost (``--worst-only`` runs this part alone):
  ``--worst-records`` records each at the content limit (20,000 characters) with the
  most distinct terms a record may have (``memlib.records.MAX_TERMS``), every term new
  to the index, opened in a fresh process — its peak memory and recall time, beside
  the same figures for as many records of the usual corpus.

Then, once (``benchmarks/hybrid_scale.py``): embedding throughput — ``append_many`` on
stores opened with the embedding model against the model's raw ``encode``, on
``--embed-records`` records — and ``hybrid`` at each N of ``--hybrid-sizes`` on stores
holding a vector for every record, warm and as a fresh ``memlib recall --ranker hybrid``
beside its floor (Python's start, ``import memlib``, model load, one query embedding).
Every target of issue 15 is printed with its measured ratio and MET / NOT MET
(``benchmarks/report.py``).

A JSON report is written to ``reports/bench-YYYYMMDD.json`` (and, when it has cold rows,
their section to ``bench-YYYYMMDD-cold.json`` as ``--cold-only`` writes it). Options:
``--sizes``, ``--queries``, ``--db-max`` (largest N for the warm SQLite/PostgreSQL rows),
``--ref-max``, ``--cold-sizes``, ``--cold-rankers``, ``--cold-rounds``, ``--hybrid-sizes``,
``--hybrid-embed-max``, ``--embed-records``, ``--embedder``, ``--workdir``,
``--vector-cache`` (``--help`` says what each does); ``--cold-only``,
``--hybrid-only`` and ``--worst-only`` run one part; ``--readme-table REPORT`` prints the
README's Markdown table from a report already written. PostgreSQL runs on a throwaway
cluster started here (``tests/support/pgserver.py``, default durability settings) or on
``$MEMLIB_PG_DSN``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import gc
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks import corpus
from benchmarks.cold import catch_up, cold_floor, cold_queries, cold_rows, cold_section, cold_table
from benchmarks.common import (
    BATCH,
    LIMIT,
    ROOT,
    USER,
    Log,
    cold_run,
    digest,
    ints,
    peak_rss_mb,
    progress_log,
    recall_series,
    summary,
    timed,
)
from benchmarks.lexical import RANKERS, bm25s_peer, over_bm25s, warm_rows
from benchmarks.report import extra_tables, load_report, readme_table, targets, targets_table
from memlib import RecallEngine
from memlib.candidates import CandidateScan, scan_recall_candidates
from memlib.records import format_timestamp
from memlib.stores import open_store
from memlib.stores.jsonl._store import RemoteMemoryStore, encode_record

# Names other code may have imported from here before they moved to their own modules.
__all__ = ["BATCH", "cold_run", "cold_section", "cold_table", "digest", "main", "peak_rss_mb",
           "summary", "timed"]


# -- measuring ---------------------------------------------------------------------------

def memlib_recall(store: Any) -> Callable[[str], Any]:
    def run(text: str) -> Any:
        return RecallEngine(store).recall(text, limit=LIMIT, as_of=corpus.AS_OF, query_id="bench")
    return run


class _ReferenceStore:
    """The reference: every record tokenised for every query (``scan_recall_candidates``)."""

    def __init__(self, records: tuple[Any, ...], user_scope: str) -> None:
        self.records = records
        self.user_scope = user_scope

    def scan_candidates(self, query: Any) -> CandidateScan:
        return scan_recall_candidates(query, self.records)


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        mem = int(Path("/proc/meminfo").read_text().split()[1]) // 1024
    start = time.perf_counter()
    total = 0
    for i in range(2_000_000):
        total += i
    loop_ns = (time.perf_counter() - start) / 2_000_000 * 1e9
    return {
        "cpu": cpu, "cores": os.cpu_count(), "memory_mb": mem,
        "python": platform.python_version(), "platform": platform.platform(),
        "sqlite": sqlite3.sqlite_version,
        "python_loop_ns_per_iteration": round(loop_ns, 1),
    }


# -- the child: the indexed JSONL store opened from its file ---------------------------

def child_jsonl(path: str, queries: list[str]) -> None:
    store = RemoteMemoryStore(path, user_id=USER)
    # Whether the open starts from an index file beside the log (written by the parent's
    # first read) or reads the whole log, as every fresh process did before index files.
    index_file = store.index_path.exists()
    open_seconds, index = timed(lambda: store.index)
    # The terms of the records are worked out on the first read: what `memlib recall`
    # in a fresh process pays on top of open_s.
    first_seconds, _ = timed(lambda: memlib_recall(store)(queries[0]))
    stats, digests = recall_series(memlib_recall(store), queries)
    peak_mb = peak_rss_mb()
    print(json.dumps({"open_s": open_seconds, "first_recall_s": first_seconds,
                      "records": len(index), "recall": stats, "digests": digests,
                      "peak_rss_mb": peak_mb, "index_file": index_file}))


def run_child(path: Path, queries: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--child-jsonl", str(path),
         "--child-queries", json.dumps(queries)],
        check=True, capture_output=True, text=True, cwd=ROOT,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the worst valid record ----------------------------------------------------------------

def worst_items(count: int, seed: int = 3) -> list[dict[str, Any]]:
    """``count`` records as costly as the limits allow: 20,000 characters, MAX_TERMS terms.

    The content is a run of MAX_TERMS random Han characters (MAX_TERMS - 1 bigrams, all
    new to the index; the summary is the last term) repeated to the content limit.
    """
    import random

    from memlib.records import LIMITS, MAX_TERMS

    rng = random.Random(seed)
    items = []
    for i in range(count):
        run = "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(MAX_TERMS))
        content = ((run + " ") * (LIMITS["content"] // (MAX_TERMS + 1) + 1))[: LIMITS["content"]]
        items.append({
            "kind": "conversation", "memory_id": f"worst-{i:05d}", "content": content.strip(),
            "summary": "worst",
            "source": {"source_id": f"w-{i}", "source_type": "bench", "title": "worst case",
                       "captured_at": "2026-08-01T00:00:00Z"},
        })
    return items


def worst_case(
    count: int, workdir: Path, queries: list[str], log: Callable[[str], None]
) -> dict[str, Any]:
    """Fresh-process peak memory and recall of ``count`` worst-case records vs the usual ones."""
    from memlib.records import LIMITS, MAX_TERMS

    out: dict[str, Any] = {"records": count, "max_terms": MAX_TERMS,
                           "content_chars": LIMITS["content"]}
    for name, items in (("usual", [i for b in corpus.records(count) for i in b]),
                        ("worst", worst_items(count))):
        folder = workdir / f"worst-{name}"
        folder.mkdir()
        store = RemoteMemoryStore(folder / "records.jsonl", user_id=USER)
        for i in range(0, len(items), 500):
            store.append_many(items[i : i + 500])
        del store, items
        gc.collect()
        child = run_child(folder / "records.jsonl", queries)
        out[name] = {k: v for k, v in child.items() if k != "digests"}
        log(f"  {name}: {count:,} records, open {child['open_s']:.1f} s, first recall "
            f"{child['first_recall_s']:.1f} s, then p50 {child['recall']['p50_ms']:.2f} ms, "
            f"peak {child['peak_rss_mb']:.0f} MB")
        shutil.rmtree(folder, ignore_errors=True)
    extra = out["worst"]["peak_rss_mb"] - out["usual"]["peak_rss_mb"]
    out["bytes_per_record_above_usual"] = round(extra * 2**20 / count)
    return out


# -- peers -------------------------------------------------------------------------------

def fts5_peer(texts: list[str], queries: list[str], workdir: Path) -> dict[str, Any]:
    path = workdir / "fts5.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE VIRTUAL TABLE docs USING fts5(body)")

    def load() -> None:
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO docs (rowid, body) VALUES (?, ?)", enumerate(texts))
        conn.execute("COMMIT")

    index_s, _ = timed(load)

    def search(text: str) -> Any:
        match = " OR ".join(f'"{w}"' for w in text.split())
        return conn.execute(
            "SELECT rowid, bm25(docs) AS s FROM docs WHERE docs MATCH ? ORDER BY s LIMIT ?",
            (match, LIMIT),
        ).fetchall()

    stats, _ = recall_series(search, queries)
    conn.close()
    path.unlink()
    return {"index_s": index_s, "recall": stats}


# -- appends -----------------------------------------------------------------------------

def against_raw(
    append: Callable[[dict[str, Any]], Any], items: list[dict[str, Any]], raw_path: Path, name: str
) -> dict[str, Any]:
    """Time ``append(item)`` (it returns the record written) for each item, each paired
    with a raw write+fsync of the record's line to ``raw_path`` on the same disk."""
    fd = os.open(raw_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    times, raw_times = [], []
    try:
        for item in items:
            seconds, record = timed(lambda: append(item))  # noqa: B023 (called at once)
            times.append(seconds)
            payload = encode_record(record)
            start = time.perf_counter()
            os.write(fd, payload)
            os.fsync(fd)
            raw_times.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        raw_path.unlink()
    out = {name: summary(times), "raw_write_fsync": summary(raw_times)}
    out["ratio_p50"] = out[name]["p50_ms"] / out["raw_write_fsync"]["p50_ms"]
    return out


def append_latency(store: Any, raw_dir: Path, count: int, tag: str) -> dict[str, Any]:
    """``count`` single durable appends, each paired with a raw write+fsync of its bytes."""
    items = next(corpus.records(count, seed=5, batch=count, prefix=f"append-{tag}"))
    return against_raw(lambda item: store.append(**item), items, raw_dir / f"raw-{tag}.jsonl",
                       "store")


def bulk(store: Any, items: list[dict[str, Any]]) -> float:
    start = time.perf_counter()
    for i in range(0, len(items), BATCH):
        store.append_many(items[i : i + BATCH])
    return len(items) / (time.perf_counter() - start)


def bulk_jsonl(store: RemoteMemoryStore, items: list[dict[str, Any]]) -> float:
    """Records/s until the index is ready for a recall.

    The JSONL store works out the terms of new records on the next read (in batches
    of ``InvertedIndex.SETTLE_AT`` during a long import); what is left of that when
    the last batch is durable is timed too, so the figure compares with the others.
    """
    start = time.perf_counter()
    for i in range(0, len(items), BATCH):
        store.append_many(items[i : i + BATCH])
    store.index.settle()
    return len(items) / (time.perf_counter() - start)


# -- floors: what the targets leave room for ---------------------------------------------

def append_floor(raw_dir: Path, count: int) -> dict[str, Any]:
    """The least a validated durable append can do, timed like ``append_latency``.

    Build the record with memlib's checks, encode its line, take the lock, open the file,
    write, fsync, close: no index, no duplicate check, no torn-tail repair. No store that
    keeps the contract can do less, so this ratio is the floor of the append target on
    the machine the benchmark runs on.
    """
    from memlib.records import record_from_item

    items = next(corpus.records(count, seed=6, batch=count, prefix="floor"))
    data, lock = raw_dir / "floor.jsonl", raw_dir / "floor.jsonl.lock"
    scope = "0123456789abcdef"

    def minimal(item: dict[str, Any]) -> Any:
        record = record_from_item(item, scope, format_timestamp(datetime.now(UTC)))
        line = encode_record(record)
        lock_fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        data_fd = os.open(data, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        os.write(data_fd, line)
        os.fsync(data_fd)
        os.close(data_fd)
        os.close(lock_fd)
        return record

    try:
        return against_raw(minimal, items, raw_dir / "floor-raw.jsonl", "floor")
    finally:
        data.unlink(missing_ok=True)
        lock.unlink(missing_ok=True)


def record_floor(count: int = 50_000, rounds: int = 3) -> dict[str, Any]:
    """Records/s of the per-record work no import can skip (best of ``rounds``).

    ``checks_and_line``: memlib's checks and the JSON line, nothing written, no index.
    ``terms_only``: cutting the searchable text into terms, which every index needs.
    """
    from memlib._retrieval import index_tokens
    from memlib.records import record_from_item

    items = [item for batch in corpus.records(count, seed=8, prefix="floor") for item in batch]
    texts = [corpus.item_text(item) for item in items]
    scope, stored_at = "0123456789abcdef", "2026-08-10T12:00:00Z"
    best = {"checks_and_line": 0.0, "terms_only": 0.0}
    for _ in range(rounds):
        start = time.perf_counter()
        for item in items:
            encode_record(record_from_item(item, scope, stored_at))
        best["checks_and_line"] = max(
            best["checks_and_line"], count / (time.perf_counter() - start)
        )
        start = time.perf_counter()
        for text in texts:
            set(index_tokens(text))
        best["terms_only"] = max(best["terms_only"], count / (time.perf_counter() - start))
    return {key: round(value) for key, value in best.items()}


# -- one size ----------------------------------------------------------------------------

SET_DESCRIPTIONS = {
    "rare": "3 terms: ranks < 100, 100-5,000 and 5,000-50,000 (the standard queries)",
    "common": "the same 3 with 3 of the 5 most frequent words in front",
}


def _lexical_rows(
    store: Any, backend: str, sets: dict[str, list[str]], out: dict[str, Any],
    digests: dict[str, dict[str, dict[str, list[str]]]], log: Log,
) -> None:
    """Every lexical ranker on ``store``, both query sets, into ``out['warm_lexical']``."""
    warm = out.setdefault("warm_lexical", {
        "sets": {name: {"queries": len(qs), "description": SET_DESCRIPTIONS[name]}
                 for name, qs in sets.items()},
        "parity": {},
    })
    rows, digests[backend] = warm_rows(store, sets, log, backend)
    warm[backend] = rows
    for name, counted in rows.get("candidates", {}).items():
        warm["sets"][name].setdefault("candidates", counted)
    if backend != "jsonl" and "jsonl" in digests:
        warm["parity"][backend] = digests[backend] == digests["jsonl"]
        log(f"    {backend}: every ranker's answers equal JSONL's: {warm['parity'][backend]}")


def run_size(
    n: int, args: argparse.Namespace, workdir: Path, pg: Any, log: Log,
    cold: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every row of one N; the cold rows go to ``cold['rows']`` when N is a cold size.

    Order matters: every read of the corpus (warm rows, fresh process, reference, cold
    rows) comes before anything that changes it (catch-up, then single appends).
    """
    out: dict[str, Any] = {"n": n}
    queries = corpus.queries(args.queries)
    sets = corpus.query_sets(args.queries)
    lexical_digests: dict[str, dict[str, dict[str, list[str]]]] = {}
    cold_here = cold is not None and n in args.cold_sizes
    log(f"N={n:,}: generating the corpus")
    items = [item for batch in corpus.records(n) for item in batch]
    texts = [corpus.item_text(item) for item in items]
    folder = workdir / f"n{n}"
    folder.mkdir()
    digests: dict[str, list[str]] = {}

    # JSONL: bulk import, in-process recall, then a fresh process.
    path = folder / "records.jsonl"
    store = RemoteMemoryStore(path, user_id=USER)
    log("  JSONL bulk import")
    out["bulk_jsonl_rps"] = bulk_jsonl(store, items)
    log(f"    {out['bulk_jsonl_rps']:,.0f} records/s with the index ready")
    out["jsonl"], digests["jsonl"] = recall_series(memlib_recall(store), queries)
    log(f"  indexed JSONL recall p50 {out['jsonl']['p50_ms']:.2f} ms")
    log("  warm lexical rows, indexed JSONL")
    _lexical_rows(store, "jsonl", sets, out, lexical_digests, log)
    log("  indexed JSONL opened in a fresh process")
    child = run_child(path, queries)
    out["jsonl_fresh_process"] = {k: v for k, v in child.items() if k != "digests"}
    out["parity"] = {
        "jsonl_fresh_process": child["digests"][: len(queries)] == digests["jsonl"][: len(queries)]
    }
    log(f"    open+index {child['open_s']:.1f} s, recall p50 {child['recall']['p50_ms']:.2f} ms, "
        f"peak {child['peak_rss_mb']:.0f} MB")

    # The reference scan, on the same records (already parsed: the scan alone is timed).
    ref_queries = args.ref_queries if n <= args.ref_max else 0
    if ref_queries:
        log(f"  reference scan ({ref_queries} queries)")
        records = RemoteMemoryStore(path, user_id=USER).read_all()
        ref_store = _ReferenceStore(records, records[0].user_scope)

        def reference(text: str) -> Any:
            engine = RecallEngine(ref_store)  # type: ignore[arg-type]  # scans only
            return engine.recall(text, limit=LIMIT, as_of=corpus.AS_OF, query_id="bench")

        out["reference"], ref_digests = recall_series(reference, queries[:ref_queries], warmup=0)
        out["parity"]["reference"] = ref_digests == digests["jsonl"][:ref_queries]
        log(f"    p50 {out['reference']['p50_ms']:.0f} ms; parity {out['parity']['reference']}")
        del records, ref_store
        gc.collect()
    else:
        out["reference"] = {
            "skipped": f"N > {args.ref_max:,}: one reference query would take minutes"
        }

    # SQLite: warm rows up to --db-max; the file is built at every cold size too.
    sqlite_path = folder / "memory.db"
    if n <= args.db_max or cold_here:
        log("  SQLite bulk import")
        sqlite_store = open_store(f"sqlite:{sqlite_path}", user_id=USER)
        out["bulk_sqlite_rps"] = bulk(sqlite_store, items)
        log(f"    {out['bulk_sqlite_rps']:,.0f} records/s")
        if n <= args.db_max:
            out["sqlite"], digests["sqlite"] = recall_series(memlib_recall(sqlite_store), queries)
            out["parity"]["sqlite"] = digests["sqlite"] == digests["jsonl"]
            log(f"    recall p50 {out['sqlite']['p50_ms']:.2f} ms; "
                f"parity {out['parity']['sqlite']}")
            log("  warm lexical rows, SQLite")
            _lexical_rows(sqlite_store, "sqlite", sets, out, lexical_digests, log)
        _close(sqlite_store)
    if n > args.db_max:
        out["sqlite"] = out["postgresql"] = {"skipped": f"N > {args.db_max:,} (time budget)"}

    # Cold rows on the stores above, then the catch-up (it appends 1,000 records).
    if cold_here:
        assert cold is not None
        log(f"  cold `memlib recall` processes ({', '.join(args.cold_rankers)})")
        row = cold_rows(n, path, sqlite_path, args.cold_rankers, log, cold_queries(),
                        args.cold_rounds)
        row["catch_up_1000"] = catch_up(n, path, log, cold_queries()["rare"], args.cold_rounds)
        cold["rows"].append(row)

    if n in args.append_at:  # after every read of this corpus: appends change it
        log("  append latency (JSONL)")
        out["append_jsonl"] = append_latency(store, folder, args.appends, f"j{n}")
        log(f"    store p50 {out['append_jsonl']['store']['p50_ms']:.2f} ms, raw "
            f"{out['append_jsonl']['raw_write_fsync']['p50_ms']:.2f} ms")
        if n <= args.db_max:
            sqlite_store = open_store(f"sqlite:{sqlite_path}", user_id=USER)
            out["append_sqlite"] = append_latency(sqlite_store, folder, args.appends, f"s{n}")
            _close(sqlite_store)
    del store
    gc.collect()

    if n <= args.db_max and pg is not None:
        from memlib.stores.sql._postgres import init_schema

        schema = f"bench_{uuid.uuid4().hex[:8]}"
        url = f"{pg.dsn}?schema={schema}"
        init_schema(url)
        log("  PostgreSQL bulk import")
        pg_store: Any = open_store(url, user_id=USER)
        out["bulk_postgresql_rps"] = bulk(pg_store, items)
        log(f"    {out['bulk_postgresql_rps']:,.0f} records/s")
        pg_store._connection().execute(f"ANALYZE {schema}.postings")
        pg_store._connection().execute(f"ANALYZE {schema}.records")
        out["postgresql"], digests["postgresql"] = recall_series(
            memlib_recall(pg_store), queries
        )
        out["parity"]["postgresql"] = digests["postgresql"] == digests["jsonl"]
        log(
            f"    recall p50 {out['postgresql']['p50_ms']:.2f} ms; "
            f"parity {out['parity']['postgresql']}"
        )
        log("  warm lexical rows, PostgreSQL")
        _lexical_rows(pg_store, "postgresql", sets, out, lexical_digests, log)
        if n in args.append_at:
            out["append_postgresql"] = append_latency(pg_store, folder, args.appends, f"p{n}")
        pg_store._connection().execute(f"DROP SCHEMA {schema} CASCADE")
        pg_store.close()

    # Peers on the same texts.
    del items
    gc.collect()
    log("  bm25s")
    out["bm25s"] = bm25s_peer(texts, queries, sets)
    peer_sets = out["bm25s"].pop("sets")
    log(f"    retrieve p50 {out['bm25s']['recall']['p50_ms']:.2f} ms; " + "; ".join(
        f"{name} p50 {s['p50_ms']:.2f} ms" for name, s in peer_sets.items()))
    warm = out.get("warm_lexical")
    if warm is not None:
        warm["bm25s"] = peer_sets
        warm["over_bm25s"] = over_bm25s(warm, peer_sets, ("jsonl", "sqlite", "postgresql"))
        for backend, ratios in warm["over_bm25s"].items():
            r = ratios.get("bm25+stopwords", {})
            log(f"    {backend} bm25+stopwords over bm25s: " + ", ".join(
                f"{name} {x:.2f}x" for name, x in r.items()))
    log("  SQLite FTS5 bm25()")
    out["fts5"] = fts5_peer(texts, queries, folder)
    log(f"    p50 {out['fts5']['recall']['p50_ms']:.2f} ms")
    shutil.rmtree(folder, ignore_errors=True)
    return out


def _close(store: Any) -> None:
    close = getattr(store, "close", None)
    if close is not None:
        close()


# -- the table ---------------------------------------------------------------------------

def _cell(stats: dict[str, Any] | None, ref: float | None) -> tuple[str, str, str]:
    if not stats or "p50_ms" not in stats:
        return "—", "—", "—"
    p50, p95 = stats["p50_ms"], stats["p95_ms"]
    ratio = f"{ref / p50:,.0f}×" if ref else "—"
    return f"{p50:,.2f}", f"{p95:,.2f}", ratio


def table(report: dict[str, Any]) -> str:
    lines = [
        "| N | path | p50 ms | p95 ms | speed-up vs reference (p50) |",
        "|---:|---|---:|---:|---:|",
    ]
    for size in report["sizes"]:
        if size.get("append_only"):
            continue
        ref = (size.get("reference") or {}).get("p50_ms")
        rows = [
            ("reference scan", size.get("reference")),
            ("indexed JSONL", size.get("jsonl")),
            ("indexed JSONL, fresh process", size.get("jsonl_fresh_process", {}).get("recall")),
            ("SQLite", size.get("sqlite")),
            ("PostgreSQL", size.get("postgresql")),
            ("bm25s retrieve (peer)", size.get("bm25s", {}).get("recall")),
            ("SQLite FTS5 bm25() (peer)", size.get("fts5", {}).get("recall")),
        ]
        for name, stats in rows:
            p50, p95, ratio = _cell(stats, ref)
            if p50 == "—" and isinstance(stats, dict) and "skipped" in stats:
                p50 = f"skipped: {stats['skipped']}"
            lines.append(f"| {size['n']:,} | {name} | {p50} | {p95} | {ratio} |")
    lines += ["", "| N | store | append p50 ms | p95 ms | raw write+fsync p50 ms | ratio |",
              "|---:|---|---:|---:|---:|---:|"]
    for size in report["sizes"]:
        for key, name in (("append_jsonl", "JSONL"), ("append_sqlite", "SQLite"),
                          ("append_postgresql", "PostgreSQL")):
            a = size.get(key)
            if a:
                lines.append(
                    f"| {size['n']:,} | {name} | {a['store']['p50_ms']:.2f} "
                    f"| {a['store']['p95_ms']:.2f} "
                    f"| {a['raw_write_fsync']['p50_ms']:.2f} | {a['ratio_p50']:.2f}× |"
                )
    lines += ["", "| N | bulk import (append_many, 10k batches) | records/s |", "|---:|---|---:|"]
    for size in report["sizes"]:
        for key, name in (("bulk_jsonl_rps", "JSONL (index ready for a recall)"),
                          ("bulk_sqlite_rps", "SQLite"), ("bulk_postgresql_rps", "PostgreSQL")):
            if key in size:
                lines.append(f"| {size['n']:,} | {name} | {size[key]:,.0f} |")
    worst = report.get("worst_case")
    if worst:
        lines += ["", f"| {worst['records']:,} records in a fresh process | open s "
                  "| first recall s | then p50 ms | p95 ms | peak RSS MB |",
                  "|---|---:|---:|---:|---:|---:|"]
        for key, name in (("usual", "usual corpus (20-60 words)"),
                          ("worst", f"worst valid: {worst['content_chars']:,} characters, "
                                    f"{worst['max_terms']:,} distinct terms, all new")):
            w = worst[key]
            lines.append(f"| {name} | {w['open_s']:.1f} | {w['first_recall_s']:.1f} "
                         f"| {w['recall']['p50_ms']:.2f} | {w['recall']['p95_ms']:.2f} "
                         f"| {w['peak_rss_mb']:,.0f} |")
        lines.append(f"| bound: peak memory per worst-case record above a usual one | "
                     f"{worst['bytes_per_record_above_usual'] / 2**20:.2f} MB | | | | |")
    floors = report.get("floors")
    if floors:
        a = floors["append"]
        lines += [
            "",
            "| floor (the least the contract allows, same machine, same run) | figure |",
            "|---|---:|",
            f"| one validated append: checks, JSON line, lock, write, fsync (no index, no "
            f"duplicate check) | {a['floor']['p50_ms']:.2f} ms p50 = "
            f"{a['ratio_p50']:.2f}× raw write+fsync ({a['raw_write_fsync']['p50_ms']:.2f} ms) |",
            f"| memlib's checks + the JSON line per record, nothing written | "
            f"{floors['records']['checks_and_line']:,} records/s |",
            f"| cutting each record's text into terms, nothing else | "
            f"{floors['records']['terms_only']:,} records/s |",
        ]
    lines += ["", "| N | indexed JSONL in a fresh process | open + index s | peak RSS MB |",
              "|---:|---|---:|---:|"]
    for size in report["sizes"]:
        f = size.get("jsonl_fresh_process")
        if f:
            lines.append(
                f"| {size['n']:,} | {_opened(f)}, {f['recall'].get('n', 50)} recalls "
                f"| {f['open_s']:.1f} "
                f"| {f['peak_rss_mb']:,.0f} |"
            )
    for extra in extra_tables(report):
        lines += ["", extra]
    return "\n".join(lines)


def _opened(fresh: dict[str, Any]) -> str:
    if fresh.get("index_file"):
        return "load the index file, read the log's tail"
    return "read file, build index"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--ref-queries", type=int, default=3)
    parser.add_argument("--ref-max", type=int, default=100_000)
    parser.add_argument("--db-max", type=int, default=100_000,
                        help="largest N of the warm SQLite and PostgreSQL rows")
    parser.add_argument("--appends", type=int, default=40)
    parser.add_argument("--append-at", default="1000,100000,1000000")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "reports"))
    parser.add_argument("--worst-records", type=int, default=1000,
                        help="records of the worst-case section (0: skip it)")
    parser.add_argument("--worst-only", action="store_true",
                        help="run only the worst-case section (no sizes, no PostgreSQL)")
    parser.add_argument("--cold-only", action="store_true",
                        help="run only the cold `memlib recall` section (JSONL index file "
                             "against SQLite, catch-up, floor) on stores built for it")
    parser.add_argument("--cold-sizes", default=None,
                        help="sizes of the cold rows (default: every size of --sizes; "
                             "empty: none)")
    parser.add_argument("--cold-rankers", default=",".join(RANKERS))
    parser.add_argument("--cold-rounds", type=int, default=3,
                        help="fresh processes per cold figure (the median is reported)")
    parser.add_argument("--hybrid-sizes", default="10000,100000",
                        help="sizes of the hybrid rows (empty: none)")
    parser.add_argument("--hybrid-only", action="store_true",
                        help="run only embedding throughput and the hybrid rows")
    parser.add_argument("--hybrid-budget", type=float, default=60.0,
                        help="seconds the first warm hybrid recall may take before the warm "
                             "hybrid rows are skipped (a ranker that embeds at query time)")
    parser.add_argument("--hybrid-cold-timeout", type=float, default=300.0,
                        help="seconds a cold `memlib recall --ranker hybrid` may take")
    parser.add_argument("--hybrid-embed-max", type=int, default=0,
                        help="embed at most this many records of a hybrid corpus and reuse "
                             "their vectors for the rest (0: embed every record; the vectors "
                             "are cached in --vector-cache either way)")
    parser.add_argument("--embed-records", type=int, default=5000,
                        help="records of the embedding throughput rows (0: skip them)")
    parser.add_argument("--embed-batch", type=int, default=1000)
    parser.add_argument("--embedder", default="minilm",
                        help="embedder of the embedding and hybrid rows (memlib's "
                             "get_embedder names; 'hashing' for a quick run without torch)")
    parser.add_argument("--vector-cache", default=None,
                        help="folder of the cached corpus vectors (default: "
                             "memlib-bench-vectors in --workdir or the temporary folder)")
    parser.add_argument("--readme-table", metavar="REPORT",
                        help="print the README's Markdown table from REPORT and exit")
    parser.add_argument("--child-jsonl", help=argparse.SUPPRESS)
    parser.add_argument("--child-queries", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_jsonl:
        child_jsonl(args.child_jsonl, json.loads(args.child_queries))
        return 0
    if args.readme_table:
        print(readme_table(load_report(args.readme_table)))
        return 0
    try:
        sizes = ints(args.sizes)
        args.append_at = set(ints(args.append_at))
        args.cold_sizes = set(sizes if args.cold_sizes is None else ints(args.cold_sizes))
        args.hybrid_sizes = ints(args.hybrid_sizes)
    except ValueError as exc:
        parser.error(str(exc))
    args.cold_rankers = [r for r in args.cold_rankers.split(",") if r]
    began = time.monotonic()
    log = progress_log(began)

    if args.cold_only:
        cold_sizes = sorted(args.cold_sizes) if args.cold_sizes else sizes
        return _cold_only(args, cold_sizes, log, began)

    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "corpus": {
            "vocabulary": corpus.VOCABULARY_SIZE,
            "zipf_s": 1.0,
            "words_per_record": "20-60",
            "captured_at": "uniform over one year",
            "queries": args.queries,
            "query_terms": "3: common (rank<100), middle (100-5k), rare (5k-50k)",
            "query_sets": SET_DESCRIPTIONS,
            "limit": LIMIT,
        },
        "notes": [
            "memlib paths use RecallEngine.recall (the bounded top-k walk).",
            "reference = RecallEngine over scan_recall_candidates on already-parsed records "
            "(the file read is not timed, which favours the reference).",
            "bm25s time includes tokenising the query; FTS5 uses the unicode61 tokenizer with the "
            "3 terms OR-ed. Peers rank by BM25, not by memlib's score: their answers differ.",
            "warm_lexical: one RecallEngine per ranker, made before the clock starts; "
            "over_bm25s = memlib p50 / bm25s retrieve p50 on the same texts and queries.",
            "cold: a new `memlib recall` process, median of 3 (no index file: 1 run), wall "
            "time and the process's own VmHWM; floor = Python start + import memlib.",
            "hybrid: the corpus's vectors are written with put_vectors (embedded once, "
            "cached); each warm query is embedded on the spot (the model's cache emptied "
            "before it); hybrid floor = Python start + import memlib + model load + one "
            "query embedding, a fresh process.",
        ],
        "sizes": [],
    }
    workdir = Path(tempfile.mkdtemp(prefix="memlib-bench-", dir=args.workdir))
    workdir.chmod(0o700)
    vector_cache = Path(args.vector_cache) if args.vector_cache else (
        Path(args.workdir or tempfile.gettempdir()) / "memlib-bench-vectors")
    if args.worst_only:
        sizes, args.append_at, args.no_postgres = [], set(), True
    if args.hybrid_only:
        sizes, args.append_at, args.worst_records = [], set(), 0
    pg = None
    suffix = "-worst" if args.worst_only else "-hybrid" if args.hybrid_only else ""
    try:
        if args.worst_records:
            log(f"worst case: {args.worst_records:,} records at the content and term limits")
            report["worst_case"] = worst_case(args.worst_records, workdir,
                                              corpus.queries(args.queries), log)
            if args.worst_only:
                return _finish(report, args, began, suffix)
        if not args.no_postgres:
            if os.environ.get("MEMLIB_PG_DSN"):
                pg = type(
                    "External", (), {"dsn": os.environ["MEMLIB_PG_DSN"], "stop": lambda self: None}
                )()
            else:
                from tests.support.pgserver import start_cluster

                log("starting a throwaway PostgreSQL cluster (default durability)")
                pg = start_cluster(durable=True)
            report["machine"]["postgresql"] = _pg_version(pg.dsn)
        if 1000 in args.append_at and 1000 not in sizes:
            report["sizes"].append(_append_at_1000(args, workdir, pg, log))
        if not args.hybrid_only:
            log("floors: a minimal validated append, and the per-record work of an import")
            report["floors"] = {"append": append_floor(workdir, max(args.appends, 200)),
                                "records": record_floor()}
            log(f"    minimal append {report['floors']['append']['ratio_p50']:.2f}× raw "
                f"write+fsync; checks+line {report['floors']['records']['checks_and_line']:,}/s, "
                f"terms {report['floors']['records']['terms_only']:,}/s")
        cold: dict[str, Any] | None = None
        if args.cold_sizes & set(sizes):
            queries = cold_queries()
            cold = report["cold"] = {"query": queries["rare"], "common_query": queries["common"],
                                     "floor": cold_floor(log), "rows": []}
        for n in sizes:
            report["sizes"].append(run_size(n, args, workdir, pg, log, cold))
            _write(report, args.out, suffix)  # keep what is measured even if a later size fails
        _embedding_and_hybrid(report, args, workdir, pg, vector_cache, log)
    finally:
        if pg is not None:
            pg.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return _finish(report, args, began, suffix)


def _append_at_1000(args: argparse.Namespace, workdir: Path, pg: Any, log: Log) -> dict[str, Any]:
    log("append latency at 1,000 records")
    small = workdir / "n1000"
    small.mkdir()
    store = RemoteMemoryStore(small / "records.jsonl", user_id=USER)
    for batch in corpus.records(1000):
        store.append_many(batch)
    entry: dict[str, Any] = {
        "n": 1000,
        "append_only": True,
        "append_jsonl": append_latency(store, small, args.appends, "j1000"),
    }
    sqlite_store = open_store(f"sqlite:{small / 'memory.db'}", user_id=USER)
    for batch in corpus.records(1000):
        sqlite_store.append_many(batch)
    entry["append_sqlite"] = append_latency(sqlite_store, small, args.appends, "s1000")
    _close(sqlite_store)
    if pg is not None:
        from memlib.stores.sql._postgres import init_schema

        url = f"{pg.dsn}?schema=bench_small"
        init_schema(url)
        pg_store: Any = open_store(url, user_id=USER)
        for batch in corpus.records(1000):
            pg_store.append_many(batch)
        entry["append_postgresql"] = append_latency(pg_store, small, args.appends, "p1000")
        pg_store._connection().execute("DROP SCHEMA bench_small CASCADE")
        pg_store.close()
    return entry


def _embedding_and_hybrid(
    report: dict[str, Any], args: argparse.Namespace, workdir: Path, pg: Any,
    vector_cache: Path, log: Log,
) -> None:
    if not args.embed_records and not args.hybrid_sizes:
        return
    from memlib.rankers.embeddings import embeddings_available, get_embedder

    if args.embedder.lower() in ("minilm", "all-minilm-l6-v2") and not embeddings_available():
        report["hybrid"] = {"skipped": "the embeddings extra is not installed"}
        log("embeddings extra not installed: no embedding or hybrid rows")
        return
    from benchmarks.hybrid_scale import embedding_throughput, hybrid_rows

    load_s, model = timed(partial(get_embedder, args.embedder))
    log(f"embedder {model.name} ({model.dimension} dimensions) loaded in {load_s:.1f} s")
    if args.embed_records:
        backends = ["jsonl", "sqlite"] + (["postgresql"] if pg is not None else [])
        log(f"embedding throughput: {args.embed_records:,} records, batches of "
            f"{args.embed_batch:,}, {', '.join(backends)}")
        report["embedding"] = embedding_throughput(
            model, args.embed_records, args.embed_batch, backends, workdir, pg, log)
        report["embedding"]["model_load_s"] = round(load_s, 2)
        _write(report, args.out, "-hybrid" if args.hybrid_only else "")
    if args.hybrid_sizes:
        def backends_at(n: int) -> list[str]:
            extra = ["postgresql"] if pg is not None and n <= args.db_max else []
            return ["jsonl", "sqlite", *extra]

        report["hybrid"] = hybrid_rows(
            model, args.hybrid_sizes, backends_at, workdir, pg, vector_cache, log,
            queries=args.queries, budget_s=args.hybrid_budget,
            cold_timeout_s=args.hybrid_cold_timeout, embed_max=args.hybrid_embed_max,
        )


def _finish(report: dict[str, Any], args: argparse.Namespace, began: float,
            suffix: str = "") -> int:
    report["elapsed_s"] = round(time.monotonic() - began, 1)
    report["targets"] = targets(report)
    # A partial run never overwrites the day's full report.
    path = _write(report, args.out, suffix=suffix)
    if report.get("cold") and not suffix:
        # The cold section alone, where notebook 12 and --cold-only put it.
        _write_cold(report, args.out)
    print(f"# memlib scale benchmarks, {report['date']}")
    m = report["machine"]
    print(f"machine: {m['cpu']}, {m['cores']} cores, {m['memory_mb']:,} MB, Python {m['python']}, "
          f"SQLite {m['sqlite']}, PostgreSQL {m.get('postgresql', '—')}; "
          f"a bare Python loop iteration costs {m['python_loop_ns_per_iteration']} ns here\n")
    print(report["table_markdown"])
    print(f"\nreport: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


def _write_cold(report: dict[str, Any], folder: str) -> Path:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    cold_report = {
        "date": report["date"], "machine": report["machine"], "cold": report["cold"],
        "elapsed_s": report.get("elapsed_s"),
        "targets": [t for t in report.get("targets", [])
                    if t["target"].startswith(("cold", "catch-up"))],
    }
    cold_report["table_markdown"] = cold_table(report["cold"])
    path = out / f"bench-{report['date'].replace('-', '')}-cold.json"
    path.write_text(json.dumps(cold_report, indent=2) + "\n", encoding="utf-8")
    return path


def _cold_only(args: argparse.Namespace, sizes: Sequence[int], log: Log, began: float) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="memlib-cold-", dir=args.workdir))
    workdir.chmod(0o700)
    report: dict[str, Any] = {"date": datetime.now(UTC).strftime("%Y-%m-%d"),
                              "machine": machine()}
    try:
        report["cold"] = cold_section(sizes, workdir, log, args.cold_rankers, args.cold_rounds)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report["elapsed_s"] = round(time.monotonic() - began, 1)
    report["targets"] = targets(report)
    path = _write_cold(report, args.out)
    print(cold_table(report["cold"]))
    print()
    print(targets_table(report["targets"]))
    print(f"\nreport: {path}")
    return 0


def _pg_version(dsn: str) -> str:
    import psycopg

    with psycopg.connect(dsn) as conn:
        row = conn.execute("SHOW server_version").fetchone()
        return str(row[0]) if row else "unknown"


def _write(report: dict[str, Any], folder: str, suffix: str = "") -> Path:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"bench-{report['date'].replace('-', '')}{suffix}.json"
    report["table_markdown"] = table(report)
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    raise SystemExit(main())
