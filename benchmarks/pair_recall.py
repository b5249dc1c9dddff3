"""What pair vectors cost ``hybrid`` recalls: ``python -m benchmarks.pair_recall``.

A store of pair vectors (model name ending in ``+pair``, ``memlib/_vectors.py``) keeps for
each conversation record the embedding of the turn before it in its source + the turn.
``hybrid`` on such a store (``HybridRanker.score_stored``) also asks the store for every
candidate's neighbours in its source (``store.source_neighbours`` of up to ~1,000 ids)
and reads the next turn's stored similarity too. This measures that extra work on the
path a user takes, against turn vectors on the same records, at 10k, 100k and 1M records
(``--sizes``) on JSONL, SQLite and PostgreSQL (``--backends``).

**Stores**: the real-session stores of ``benchmarks/source_lookup.py`` (sessions of 20
turns, four interleaved, one record in 2,000 retracted), built there once per size in
``--sessions`` (default ``/tmp/srcbench``; built by its own ``build`` when missing). For
each size, backend and vector kind this run makes a copy of that store in ``--workdir``
(files copied; PostgreSQL: a schema ``pairbench_<kind>_<n>`` filled from
``srcbench_<n>`` by ``INSERT … SELECT``, in the same cluster, which
``source_lookup.start_postgres`` starts and this run stops; both copies' vectors tables
are ``ANALYZE``d before they are measured, see ``pg_analyze``) and puts vectors into it
with ``store.put_vectors`` in batches of 10,000: **turn** under ``memlib-hashing-384``,
**pair** under ``memlib-hashing-384+pair`` with the ``previous`` map the store's own
``source_neighbours`` gives. A marker file per copy says it is built (and with which
record count and model); a copy is reused while it does.

**Vectors**: exactly what ``HashingEmbedder(384)`` (and ``PairEmbedder`` over it) would
store, computed without running it on a million texts: its vector of a text is the
normalised sum of its words' (un-normalised) trigram vectors, so each vocabulary word is
hashed once and a record's vector is a sparse product; a pair's is the normalised sum of
the turn before's and the turn's. A sample is checked against ``HashingEmbedder.encode``
of the real texts (``vectors_check``). The contents matter little for latency (one
matrix-vector product whatever they hold); with real hashing vectors the dense path
overlaps the lexical one as it would for a user of that model.

Per size and backend:

1. **warm**: ``RecallEngine(store, ranker=HybridRanker(model=EMB))`` on the store opened
   with ``embedder=EMB`` (``HashingEmbedder(384)`` or ``PairEmbedder`` over it), limit
   10, ``--queries`` queries of 3 words (half ``corpus.queries``: one common, one middle,
   one rare word; half three of the 100 most common words), after one warm-up recall,
   turn and pair timed query by query, alternately first (the machine is shared:
   both see the same load). p50 / p95 and the ratio. **Floor** of the extra work: the
   ids the pair recall passed to ``source_neighbours`` (recorded in an untimed recall),
   given to ``store.source_neighbours`` alone (median of 3 per query; p50 / p95 over the
   queries).
2. **fresh process**: ``memlib --store URL --user U recall QUERY --ranker hybrid --json``
   (``benchmarks/cold.py``'s arguments), turn and pair alternately, median wall of
   ``--cold-rounds`` (3) and peak RSS (the child's ``VmHWM``). The CLI opens the store
   with no embedder, so the query is embedded by the store's recorded model
   (``recorded_embedder``: both names are known to ``get_embedder``); the answer's ids
   are compared with the warm engine's for the same query (``same_as_warm``). Beside it,
   Python's start + ``import memlib`` alone.

A printed table and a JSON report (``--out``, default ``reports/pair-recall-YYYYMMDD.json``),
never timed assertions. The figures are those of the machine the report names.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import corpus, source_lookup
from benchmarks.cold import recall_args
from benchmarks.common import (
    BATCH,
    LIMIT,
    USER,
    Log,
    cold_run,
    dated_report,
    progress_log,
    sizes_arg,
    timed,
    write_report,
)

SIZES = "10000,100000,1000000"
BACKENDS = source_lookup.BACKENDS
KINDS = ("turn", "pair")
DIMENSION = 384
QUERIES = 30
COLD_ROUNDS = 3
NEIGHBOUR_ROUNDS = 3
CHECKED_VECTORS = 50
WORKDIR = Path(tempfile.gettempdir()) / "pairbench"


def embedder(kind: str) -> Any:
    from memlib.rankers.embeddings import HashingEmbedder, PairEmbedder

    turn = HashingEmbedder(DIMENSION)
    return turn if kind == "turn" else PairEmbedder(turn)


# -- the vectors: HashingEmbedder's, by words ------------------------------------------------

def word_matrix(words: Sequence[str], dimension: int) -> np.ndarray:
    """Each word's un-normalised ``HashingEmbedder`` vector (its trigrams' signed buckets)."""
    import hashlib

    matrix = np.zeros((len(words), dimension), dtype=np.float32)
    for row, word in enumerate(words):
        padded = f"<{word}>"
        for i in range(max(1, len(padded) - 2)):
            digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % dimension
            matrix[row, bucket] += 1.0 if digest[4] & 1 else -1.0
    return matrix


def raw_vectors(n: int, log: Log) -> tuple[np.ndarray, dict[str, Any]]:
    """The un-normalised hashing vectors of the corpus's ``n`` records, in append order,
    and the check of a sample against ``HashingEmbedder(DIMENSION).encode``."""
    from scipy import sparse

    words = corpus.vocabulary()
    column = {word: i for i, word in enumerate(words)}
    per_word = word_matrix(words, DIMENSION)
    out = np.zeros((n, DIMENSION), dtype=np.float32)
    sample: list[str] = []
    done = 0
    for batch in corpus.records(n, batch=BATCH):
        cols = [[column[w] for w in item["content"].split()] for item in batch]
        indptr = np.cumsum([0, *(len(c) for c in cols)])
        flat = np.fromiter((c for row in cols for c in row), dtype=np.int64, count=indptr[-1])
        counts = sparse.csr_matrix((np.ones(len(flat), dtype=np.float32), flat, indptr),
                                   shape=(len(batch), len(words)))
        out[done : done + len(batch)] = counts @ per_word
        if not sample:
            sample = [item["content"] for item in batch[:CHECKED_VECTORS]]
        done += len(batch)
        if done % 200_000 == 0:
            log(f"  N={n:,}: {done:,} vectors")
    expected = embedder("turn").encode(sample)
    got = normalised(out[: len(sample)])
    error = float(np.abs(expected - got).max()) if len(sample) else 0.0
    if error > 1e-5:
        raise RuntimeError(f"the vectors differ from HashingEmbedder's by {error}")
    return out, {"records": len(sample), "max_abs_difference": error}


def normalised(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms > 0, norms, 1.0)).astype("<f4")


# -- the stores: a copy of the session store per kind, with its vectors ----------------------

def pg_copy(source_url: str, target_url: str) -> None:
    """The target schema made anew and filled with the source schema's rows."""
    import psycopg

    from memlib.stores.sql._postgres import split_url

    dsn, source = split_url(source_url)
    _, target = split_url(target_url)
    source_lookup.pg_reset(target_url)
    with psycopg.connect(dsn) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "AND table_type = 'BASE TABLE' ORDER BY table_name", (source,)).fetchall()]
        order = sorted(tables, key=lambda t: t != "records")  # vectors reference records
        for table in order:
            cols = ", ".join(f'"{r[0]}"' for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = %s ORDER BY ordinal_position", (source, table)).fetchall())
            conn.execute(f'INSERT INTO "{target}"."{table}" ({cols}) SELECT {cols} FROM '
                         f'"{source}"."{table}" ON CONFLICT DO NOTHING')
        conn.execute(f"SELECT setval(pg_get_serial_sequence('\"{target}\".records', 'id'), "
                     f'(SELECT max(id) FROM "{target}".records))')
        conn.commit()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'ANALYZE "{target}".records')
        conn.execute(f'ANALYZE "{target}".postings')


def pg_analyze(urls: dict[str, str]) -> None:
    """``ANALYZE`` each copy's vectors table, as autovacuum does a while after a load.

    Measured right after ``put_vectors``, a table autovacuum has not reached yet has no
    statistics: the planner then guesses ~8,000 rows for the scope's vectors and loads
    them by a hash join and an external sort (1.2 s instead of 0.26 s at 100k, in a fresh
    process). Whichever copy autovacuum happened to reach first would look faster.
    """
    import psycopg

    from memlib.stores.sql._postgres import split_url

    for url in urls.values():
        dsn, schema = split_url(url)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'ANALYZE "{schema}".vectors')


def file_copy(name: str, source: Path, target: Path) -> None:
    """The session store's files copied to ``target`` (a folder made anew)."""
    from memlib.stores.jsonl._store import RemoteMemoryStore

    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True, mode=0o700)
    if name == "sqlite":
        shutil.copyfile(source / "records.sqlite", target / "records.sqlite")
        return
    for stem in ("records.jsonl", "records.jsonl.index"):
        shutil.copyfile(source / stem, target / stem)
    # The copied index names the original log's inode, so every open of the copy would
    # check a CRC of the whole log. Loaded once (that check), it is written again for
    # the copy's own inode.
    store = RemoteMemoryStore(target / "records.jsonl", user_id=USER)
    store._refresh()  # loads the copied index (the one check of the whole log)
    store.index_path.unlink()
    if not store.write_index_file():
        raise RuntimeError(f"the index of {target} was not written again")
    store.close()


def put_all(store: Any, kind: str, raw: np.ndarray, plan: source_lookup.Layout,
            log: Log, label: str) -> dict[str, Any]:
    """Vectors for every record of ``plan`` (retracted ones are skipped by the store)."""
    model = embedder(kind)
    row_of = {memory_id: i for i, memory_id in enumerate(plan.ids)}
    stored, spent, shown = 0, 0.0, 0
    for start in range(0, len(plan.ids), BATCH):
        chunk = plan.ids[start : start + BATCH]
        previous: dict[str, str | None] | None = None
        rows = np.array([row_of[m] for m in chunk])
        matrix = raw[rows]
        if kind == "pair":
            around = store.source_neighbours(chunk)
            previous = {m: around[m].previous for m in chunk if m in around}
            chunk = list(previous)
            rows = np.array([row_of[m] for m in chunk])
            matrix = raw[rows].copy()
            for i, m in enumerate(chunk):
                before = previous[m]
                if before is not None:
                    matrix[i] += raw[row_of[before]]
        unit = normalised(matrix)
        packed = {m: unit[i].tobytes() for i, m in enumerate(chunk)}
        seconds, put = timed(partial(store.put_vectors, model.name, DIMENSION, packed,
                                     previous=previous))
        stored += put
        spent += seconds
        if stored - shown >= 200_000:
            shown = stored
            log(f"  {label}: {stored:,} vectors put ({stored / spent:,.0f}/s)")
    return {"model": model.name, "stored": stored, "put_seconds": round(spent, 1),
            "put_per_s": round(stored / spent) if spent else None}


def prepare(n: int, name: str, kind: str, source_url: str, workdir: Path, pg: Any,
            plan: source_lookup.Layout, raw: Callable[[], np.ndarray],
            log: Log) -> tuple[str, dict[str, Any]]:
    """The URL of the ``kind`` copy of the session store, built unless its marker says so."""
    from memlib.stores import open_store

    folder = workdir / f"n-{n}"
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / f"built-{name}-{kind}"
    live = len(plan.ids) - len(plan.retracted)
    appended = len(plan.ids) + len(plan.retracted)  # each retraction is a record too
    if name == "postgresql":
        url = f"{pg.dsn}?schema=pairbench_{kind}_{n}"
    else:
        target = folder / f"{name}-{kind}"
        url = f"{name}:{target / ('records.jsonl' if name == 'jsonl' else 'records.sqlite')}"
    model = embedder(kind).name
    expected = f"{len(plan.ids)} {model}"
    lines = marker.read_text().splitlines() if marker.exists() else []
    if lines[:1] == [expected] and (
            name != "postgresql" or source_lookup.pg_records(url) == appended):
        # The marker's second line: the figures of the build that made this copy.
        return url, {"reused": True, **(json.loads(lines[1]) if len(lines) > 1 else {})}
    marker.unlink(missing_ok=True)
    label = f"N={n:,} {name} {kind}"
    log(f"{label}: copying the session store")
    if name == "postgresql":
        copy_s, _ = timed(lambda: pg_copy(source_url, url))
    else:
        source = Path(source_url.split(":", 1)[1]).parent
        copy_s, _ = timed(lambda: file_copy(name, source, target))
    store: Any = open_store(url, user_id=USER)
    if store.vector_state().stored:
        store.drop_vectors()
    log(f"{label}: copied in {copy_s:.0f} s; putting {model} vectors")
    built = put_all(store, kind, raw(), plan, log, label)
    state = store.vector_state()
    store.close()
    if state.model != model or state.stored != live or state.missing:
        raise RuntimeError(f"{label}: {state.stored:,} vectors of {state.model} stored, "
                           f"{state.missing:,} missing, for {live:,} live records")
    built = {"copy_seconds": round(copy_s, 1), **built}
    marker.write_text(f"{expected}\n{json.dumps(built)}\n")
    log(f"{label}: {state.stored:,} vectors ({built['put_per_s']:,}/s)")
    return url, built


# -- measuring -------------------------------------------------------------------------------

def query_set(count: int) -> list[str]:
    """``count`` queries of 3 words: half one common, one middle and one rare word; half
    three of the 100 most common words (more candidates)."""
    rng = np.random.default_rng(5)
    words = corpus.vocabulary()
    mixed = corpus.queries(count - count // 2)
    common = [" ".join(words[int(i)] for i in rng.choice(100, size=3, replace=False))
              for _ in range(count // 2)]
    out = []
    for i in range(max(len(mixed), len(common))):
        out += [q[i] for q in (mixed, common) if i < len(q)]
    return out


def ms(seconds: Sequence[float]) -> dict[str, Any]:
    ordered = sorted(seconds)
    if not ordered:
        return {}
    return {"p50_ms": round(statistics.median(ordered) * 1e3, 2),
            "p95_ms": round(ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
                            * 1e3, 2),
            "n": len(ordered)}


class Recorder:
    """Wraps a store's ``source_neighbours`` to keep the ids each call asked for."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.original = store.source_neighbours
        self.asked: list[list[str]] = []

    def __enter__(self) -> Recorder:
        def recording(ids: Sequence[str]) -> Any:
            self.asked.append(list(ids))
            return self.original(ids)

        self.store.source_neighbours = recording
        return self

    def __exit__(self, *_: object) -> None:
        del self.store.source_neighbours  # the instance attribute: the method again


def warm(n: int, name: str, urls: dict[str, str], queries: Sequence[str],
         log: Log) -> dict[str, Any]:
    from memlib import RecallEngine
    from memlib.rankers.hybrid import HybridRanker
    from memlib.stores import open_store

    stores: dict[str, Any] = {}
    engines: dict[str, RecallEngine] = {}
    for kind in KINDS:
        model = embedder(kind)
        stores[kind] = open_store(urls[kind], user_id=USER, embedder=model)
        engines[kind] = RecallEngine(stores[kind], ranker=HybridRanker(model=model))

    def recall(kind: str, text: str) -> Any:
        return engines[kind].recall(text, limit=LIMIT, as_of=corpus.AS_OF, query_id="bench")

    first = {kind: timed(partial(recall, kind, queries[0]))[0] for kind in KINDS}
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    hits: dict[str, int] = dict.fromkeys(KINDS, 0)
    candidates: dict[str, list[int]] = {kind: [] for kind in KINDS}
    answers: dict[str, dict[str, list[str]]] = {kind: {} for kind in KINDS}
    for i, text in enumerate(queries):
        for kind in (KINDS if i % 2 == 0 else KINDS[::-1]):
            seconds, result = timed(partial(recall, kind, text))
            times[kind].append(seconds)
            hits[kind] += bool(result.hits)
            candidates[kind].append(int(result.candidate_records))
            answers[kind][text] = [h.memory_id for h in result.hits]
    # The floor: source_neighbours of the ids the pair recall asked for, alone.
    pair_store = stores["pair"]
    floors: list[float] = []
    asked_sizes: list[int] = []
    calls_per_recall: list[int] = []
    for text in queries:
        with Recorder(pair_store) as recorder:
            recall("pair", text)
        calls_per_recall.append(len(recorder.asked))
        for ids in recorder.asked:
            asked_sizes.append(len(ids))
        rounds = [sum(timed(partial(pair_store.source_neighbours, ids))[0]
                      for ids in recorder.asked) for _ in range(NEIGHBOUR_ROUNDS)]
        floors.append(statistics.median(rounds))
    for store in stores.values():
        store.close()
    out: dict[str, Any] = {
        "queries": len(queries), "first_recall_ms": {k: round(v * 1e3, 1)
                                                     for k, v in first.items()},
        **{kind: {**ms(times[kind]), "with_hits": hits[kind],
                  "candidates_mean": round(statistics.mean(candidates[kind]), 1)}
           for kind in KINDS},
        "floor_source_neighbours": {**ms(floors),
                                    "ids_mean": round(statistics.mean(asked_sizes), 1)
                                    if asked_sizes else 0,
                                    "calls_per_recall": sorted(set(calls_per_recall))},
        "same_top_ids": sum(answers["turn"][q] == answers["pair"][q] for q in queries),
    }
    out["ratio_p50"] = round(out["pair"]["p50_ms"] / out["turn"]["p50_ms"], 2)
    out["ratio_p95"] = round(out["pair"]["p95_ms"] / out["turn"]["p95_ms"], 2)
    out["extra_p50_ms"] = round(out["pair"]["p50_ms"] - out["turn"]["p50_ms"], 2)
    out["_answers"] = answers
    log(f"N={n:,} {name} warm: turn p50 {out['turn']['p50_ms']} ms, pair p50 "
        f"{out['pair']['p50_ms']} ms ({out['ratio_p50']}x); source_neighbours alone "
        f"{out['floor_source_neighbours']['p50_ms']} ms for "
        f"{out['floor_source_neighbours']['ids_mean']:.0f} ids")
    return out


def fresh(n: int, name: str, urls: dict[str, str], query: str, warm_ids: dict[str, list[str]],
          rounds: int, log: Log) -> dict[str, Any]:
    """``memlib … recall QUERY --ranker hybrid --json``, turn and pair alternately."""
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    outputs: dict[str, str] = {}
    for i in range(rounds):
        for kind in (KINDS if i % 2 == 0 else KINDS[::-1]):
            args = [*recall_args(urls[kind], query, "hybrid"), "--json"]
            if i == 0:
                outputs[kind] = _stdout(args)
            runs[kind].append(cold_run(args, rounds=1, timeout=900))
    out: dict[str, Any] = {"query": query, "rounds": rounds}
    for kind in KINDS:
        walls = [w for r in runs[kind] for w in r["walls_s"]]
        ids = [h["memory_id"] for h in json.loads(outputs[kind])["hits"]]
        out[kind] = {"wall_s": round(statistics.median(walls), 3),
                     "walls_s": walls,
                     "peak_rss_mb": max(r["peak_rss_mb"] for r in runs[kind]),
                     "hits": len(ids), "same_as_warm": ids == warm_ids[kind]}
    out["ratio"] = round(out["pair"]["wall_s"] / out["turn"]["wall_s"], 2)
    log(f"N={n:,} {name} fresh: turn {out['turn']['wall_s']} s "
        f"{out['turn']['peak_rss_mb']} MB, pair {out['pair']['wall_s']} s "
        f"{out['pair']['peak_rss_mb']} MB")
    return out


def _stdout(args: Sequence[str]) -> str:
    import subprocess

    from benchmarks.common import ROOT

    done = subprocess.run([sys.executable, "-m", "memlib", *args], capture_output=True,
                          text=True, cwd=ROOT, check=False, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"memlib {' '.join(args)} failed: {done.stderr.strip()[-800:]}")
    return done.stdout


# -- the report ------------------------------------------------------------------------------

def tables(report: dict[str, Any]) -> str:
    lines = [f"hybrid recall, warm (limit {LIMIT}, {report['settings']['queries']} queries; "
             "floor: source_neighbours of the pair recall's candidate ids, alone)",
             f"{'records':>10}  {'backend':<10}  {'turn p50':>9}  {'p95':>8}  {'pair p50':>9}  "
             f"{'p95':>8}  {'ratio':>5}  {'extra':>7}  {'floor p50':>9}  {'ids':>5}  "
             f"{'hits t/p':>8}"]
    for size in report["sizes"]:
        for name, row in size["backends"].items():
            w = row["warm"]
            f = w["floor_source_neighbours"]
            lines.append(
                f"{size['records']:>10,}  {name:<10}  {w['turn']['p50_ms']:>9.1f}  "
                f"{w['turn']['p95_ms']:>8.1f}  {w['pair']['p50_ms']:>9.1f}  "
                f"{w['pair']['p95_ms']:>8.1f}  {w['ratio_p50']:>4.2f}x  "
                f"{w['extra_p50_ms']:>7.1f}  {f['p50_ms']:>9.1f}  {f['ids_mean']:>5.0f}  "
                f"{w['turn']['with_hits']:>3}/{w['pair']['with_hits']:<3}")
    lines += ["", f"fresh process: memlib recall --ranker hybrid --json (median of "
              f"{report['settings']['cold_rounds']}; python + import memlib alone: "
              f"{report.get('import_floor', {}).get('wall_s', float('nan')):.2f} s)",
              f"{'records':>10}  {'backend':<10}  {'turn s':>7}  {'MB':>7}  {'pair s':>7}  "
              f"{'MB':>7}  {'ratio':>5}  {'as warm':>7}"]
    for size in report["sizes"]:
        for name, row in size["backends"].items():
            c = row["fresh_process"]
            same = "yes" if c["turn"]["same_as_warm"] and c["pair"]["same_as_warm"] else "NO"
            lines.append(
                f"{size['records']:>10,}  {name:<10}  {c['turn']['wall_s']:>7.2f}  "
                f"{c['turn']['peak_rss_mb']:>7.0f}  {c['pair']['wall_s']:>7.2f}  "
                f"{c['pair']['peak_rss_mb']:>7.0f}  {c['ratio']:>4.2f}x  {same:>7}")
    lines += ["", "the copies (reused: figures of the run that built them)",
              f"{'records':>10}  {'store':<16}  {'copy s':>7}  {'put s':>7}  {'vectors/s':>10}  "
              f"{'this run':>8}"]
    for size in report["sizes"]:
        for key, built in size["builds"].items():
            if "put_seconds" in built:
                lines.append(f"{size['records']:>10,}  {key:<16}  {built['copy_seconds']:>7.1f}  "
                             f"{built['put_seconds']:>7.1f}  {built['put_per_s']:>10,}  "
                             f"{'no' if built.get('reused') else 'yes':>8}")
            else:
                lines.append(f"{size['records']:>10,}  {key:<16}  {'reused':>7}")
    skipped = list(report.get("skipped", []))
    if skipped:
        lines += ["", *[f"skipped: {s}" for s in skipped]]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=sizes_arg, default=SIZES,
                        help=f"comma-separated store sizes (default {SIZES})")
    parser.add_argument("--backends", type=source_lookup.backends_arg,
                        default=",".join(BACKENDS))
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument("--cold-rounds", type=int, default=COLD_ROUNDS)
    parser.add_argument("--workdir", type=Path, default=WORKDIR,
                        help="where the copies with vectors are kept (built once per size)")
    parser.add_argument("--sessions", type=Path, default=source_lookup.WORKDIR,
                        help="benchmarks.source_lookup's workdir: the session stores "
                             "(and its PostgreSQL cluster)")
    parser.add_argument("--pg-url", default=None,
                        help="a PostgreSQL server to use (default: the cluster in --sessions)")
    parser.add_argument("--skip", default="",
                        help="SIZE:BACKEND pairs not to measure, e.g. 1000000:postgresql")
    parser.add_argument("--out", default=None, help="the JSON report to write")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)

    began = time.monotonic()
    log = progress_log(began, args.quiet)
    out = dated_report(args.out, "pair-recall")
    queries = query_set(args.queries)
    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                    "sqlite": sqlite3.sqlite_version, "load_average_at_start": os.getloadavg(),
                    "note": "2 cores shared with other work (other engineers' evaluations, "
                            "tests and builds); turn and pair are timed alternately so "
                            "both see the same load"},
        "settings": {"queries": len(queries), "limit": LIMIT, "cold_rounds": args.cold_rounds,
                     "neighbour_rounds": NEIGHBOUR_ROUNDS, "dimension": DIMENSION,
                     "models": {kind: embedder(kind).name for kind in KINDS},
                     "batch": BATCH, "turns_per_source": source_lookup.TURNS,
                     "interleaved_sources": source_lookup.INTERLEAVED,
                     "sessions": str(args.sessions), "workdir": str(args.workdir)},
        "query_set": queries,
        "sizes": [], "skipped": [],
    }
    skip = {tuple(part.split(":", 1)) for part in args.skip.split(",") if ":" in part}
    args.workdir.mkdir(parents=True, exist_ok=True)
    args.sessions.mkdir(parents=True, exist_ok=True)
    backends = list(args.backends)
    pg: Any = None
    if "postgresql" in backends:
        pg, version, reason = source_lookup.postgres_or_skip(args.pg_url, args.sessions, log)
        if pg is None:
            report["skipped"].append(f"postgresql: {reason}")
            backends.remove("postgresql")
        else:
            report["machine"]["postgresql"] = version
    try:
        report["import_floor"] = cold_run([], rounds=args.cold_rounds)
        for n in args.sizes:
            plan = source_lookup.layout(n)
            here = [b for b in backends if (str(n), b) not in skip]
            for b in backends:
                if (str(n), b) in skip:
                    report["skipped"].append(f"N={n:,} {b}: --skip")
            sessions = args.sessions / f"n-{n}"
            source_urls = source_lookup.urls_for(n, sessions, pg, here)
            size: dict[str, Any] = {
                "records": n, "retracted": len(plan.retracted),
                "sources": len(set(plan.sources)),
                "session_stores": source_lookup.build(n, plan, source_urls, sessions, log),
                "builds": {}, "backends": {}}
            cache: dict[str, Any] = {}

            def raw(n: int = n, cache: dict[str, Any] = cache) -> np.ndarray:
                if "raw" not in cache:
                    log(f"N={n:,}: computing the hashing vectors")
                    cache["raw"], cache["check"] = raw_vectors(n, log)
                return cache["raw"]  # type: ignore[no-any-return]

            for name in here:
                urls: dict[str, str] = {}
                for kind in KINDS:
                    urls[kind], size["builds"][f"{name}-{kind}"] = prepare(
                        n, name, kind, source_urls[name], args.workdir, pg, plan, raw, log)
                row: dict[str, Any] = {"urls": dict(urls),
                                       "load_average_before": os.getloadavg()}
                if name == "postgresql":
                    pg_analyze(urls)
                row["warm"] = warm(n, name, urls, queries, log)
                answers = row["warm"].pop("_answers")
                row["fresh_process"] = fresh(
                    n, name, urls, queries[0], {k: answers[k][queries[0]] for k in KINDS},
                    args.cold_rounds, log)
                size["backends"][name] = row
                gc.collect()
            if "check" in cache:
                size["vectors_check"] = cache["check"]
            cache.clear()
            gc.collect()
            report["sizes"].append(size)
    finally:
        if pg is not None:
            pg.stop()
    report["machine"]["load_average_at_end"] = os.getloadavg()
    write_report(out, report, began, tables, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
