"""Cold rows: a fresh ``memlib recall`` process on JSONL (with its index file) and SQLite.

Every figure is a fresh process: median wall time of ``rounds`` (the no-index rows: one
run, it rewrites the file) and the child's own peak RSS (VmHWM), beside the floor
(Python's start plus ``import memlib``). ``cold_section`` builds its own stores
(``--cold-only``); the full run hands ``cold_rows`` the stores of its warm rows.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks import corpus
from benchmarks.common import USER, Log, close, cold_run
from memlib.stores import open_store
from memlib.stores.jsonl._store import RemoteMemoryStore

AS_OF = corpus.AS_OF.strftime("%Y-%m-%dT%H:%M:%SZ")


def cold_queries() -> dict[str, str]:
    """The first query of each set (the rare one is the one every earlier cold row used)."""
    sets = corpus.query_sets(1)
    return {"rare": sets["rare"][0], "common": sets["common"][0]}


def cold_start(log: Log) -> dict[str, Any]:
    queries = cold_queries()
    floor = cold_run([], rounds=5)
    log(f"floor (python + import memlib): {floor['wall_s']:.3f} s, {floor['peak_rss_mb']} MB")
    return {"query": queries["rare"], "common_query": queries["common"], "floor": floor, "rows": []}


def recall_args(url: str, query: str, ranker: str) -> list[str]:
    # A fixed --as-of: the printed answer is then the same on every backend and round.
    tail = f"--limit 10 --ranker {ranker} --as-of {AS_OF} --query-id cold"
    return ["--store", url, "--user", USER, "recall", query, *tail.split()]


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


def cold_rows(
    n: int, jsonl_path: Path, sqlite_path: Path, rankers: Sequence[str], log: Log, rounds: int
) -> dict[str, Any]:
    """One row of cold figures for stores already holding the corpus of ``n`` records, per
    lexical ranker: the rare query with no index file (one run), with it and on SQLite; the
    common query with it and on SQLite. Then the catch-up, which appends 1,000 records."""
    queries = cold_queries()
    urls = (f"jsonl:{jsonl_path}", f"sqlite:{sqlite_path}")
    index_path = RemoteMemoryStore(jsonl_path, user_id=USER).index_path
    row: dict[str, Any] = {"n": n}
    for ranker in rankers:
        # The first cold recall rebuilds from the log (what a new process paid before
        # the index file) and writes the file.
        index_path.unlink(missing_ok=True)
        rebuild = cold_run(recall_args(urls[0], queries["rare"], ranker), rounds=1)
        written_by_recall = index_path.exists()
        if not written_by_recall:
            _ensure_index_file(jsonl_path)
        rare, common = (
            [cold_run(recall_args(url, queries[name], ranker), rounds) for url in urls]
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
    row["index_file_mb"] = round(index_path.stat().st_size / 2**20, 1)
    row["log_mb"] = round(jsonl_path.stat().st_size / 2**20, 1)
    row["catch_up_1000"] = catch_up(n, jsonl_path, log, queries["rare"], rounds)
    return row


def catch_up(n: int, jsonl_path: Path, log: Log, query: str, rounds: int) -> dict[str, Any]:
    """A cold recall after another process appended 1,000 records (the log grows by them),
    against one without, from the same index file (restored before every run: a reader
    would otherwise rewrite it)."""
    args = recall_args(f"jsonl:{jsonl_path}", query, "baseline")
    index_path = RemoteMemoryStore(jsonl_path, user_id=USER).index_path
    if not _ensure_index_file(jsonl_path):
        raise RuntimeError(f"no index file could be written for {jsonl_path}")
    without = cold_run(args, rounds)
    saved = index_path.read_bytes()
    writer = RemoteMemoryStore(jsonl_path, user_id=USER)
    for batch in corpus.records(1_000, seed=99, prefix="late"):
        writer.append_many(batch)
    restore = partial(index_path.write_bytes, saved)
    caught = cold_run(args, rounds, before=restore)
    restore()
    floor_s = tail_floor(jsonl_path, 1_000)
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


def cold_section(
    sizes: Sequence[int], workdir: Path, log: Log, rankers: Sequence[str], rounds: int
) -> dict[str, Any]:
    """``--cold-only``: the cold rows on a JSONL log and a SQLite file of their own per N."""
    out = cold_start(log)
    for n in sizes:
        folder = workdir / f"cold-{n}"
        log(f"N={n:,}: building the JSONL and SQLite stores")
        folder.mkdir(mode=0o700)
        jsonl_path, sqlite_path = folder / "records.jsonl", folder / "records.sqlite"
        jsonl = RemoteMemoryStore(jsonl_path, user_id=USER)
        sqlite_store = open_store(f"sqlite:{sqlite_path}", user_id=USER)
        for batch in corpus.records(n):
            jsonl.append_many(batch)
            sqlite_store.append_many(batch)
        close(sqlite_store)
        out["rows"].append(cold_rows(n, jsonl_path, sqlite_path, rankers, log, rounds))
        shutil.rmtree(folder, ignore_errors=True)
    return out
