"""HNSW in PostgreSQL + pgvector against exact search (issue 36, item 1): recall@10, the
index build, and warm hybrid recalls before and after it.

    python -m benchmarks.hnsw_recall --records 1000000 [--queries 100] [--folder DIR]

Synthetic, labelled: 384-dimension unit vectors drawn around 1,000 random centres (the
benchmark's hybrid corpora repeat 10k real ones, which makes exact top-10s a matter of
ties), stored under the e5 model's name so that `hybrid` embeds its queries with e5: the
warm timings are real work, their answers are not (the vectors are not the texts'). The
corpus of benchmarks/corpus.py, vectors written with put_vectors; warm hybrid recalls
(benchmarks.hybrid_scale's), `memlib db init --hnsw` (timed), recall@10 of the index
against exact over fresh query vectors, warm hybrid recalls again.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any
from pathlib import Path

import numpy as np
from benchmarks import corpus
from benchmarks.common import BATCH, USER, progress_log
from benchmarks.stores import memlib_cli, pgvector_server
from memlib.stores import open_store
from memlib.rankers.embeddings import get_embedder
from memlib.stores.sql._postgres import _ServerScores
from benchmarks.hybrid_scale import _warm


def vectors(n: int, rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    picked = centres[rng.integers(0, len(centres), size=n)]
    drawn = picked + rng.normal(0.0, 0.35 / np.sqrt(centres.shape[1]), size=picked.shape)
    return (drawn / np.linalg.norm(drawn, axis=1, keepdims=True)).astype("<f4")


def hnsw_recall(store: Any, queries: np.ndarray, k: int) -> float:
    """The share of the exact ``k`` best that the index finds too."""

    def no_matrix() -> Any:
        raise AssertionError("top() must not load every vector")

    found = wanted = 0
    for vector in queries:
        exact, approximate = (
            {m for m, _ in _ServerScores(store, vector, hnsw, no_matrix).top(k)}
            for hnsw in (False, True)
        )
        found += len(exact & approximate)
        wanted += len(exact)
    return found / wanted


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--folder", default="/tmp/hnsw-pg")
    parser.add_argument("--warm-queries", type=int, default=20)
    args = parser.parse_args()
    log = progress_log(time.monotonic())
    rng = np.random.default_rng(20261205)
    centres = rng.normal(size=(1000, 384))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    server = pgvector_server(Path(args.folder), log)
    url = (
        f"{server.dsn}&schema=hnsw{args.records}"
        if "?" in server.dsn
        else f"{server.dsn}?schema=hnsw{args.records}"
    )
    model = get_embedder("e5")
    memlib_cli("--store", url, "db", "init")
    store = open_store(url, user_id=USER)
    done = 0
    # A store filled by an earlier run is reused (1M records take a while to write).
    filled = store.vector_state().stored == args.records
    for batch in () if filled else corpus.records(args.records, batch=BATCH):
        store.append_many(batch)
        packed = vectors(len(batch), rng, centres)
        store.put_vectors(
            model.name,
            model.dimension,
            {r["memory_id"]: v.tobytes() for r, v in zip(batch, packed, strict=True)},
        )
        done += len(batch)
        log(f"  {done:,} records and vectors")
    store.close()
    sets = corpus.query_sets(args.warm_queries)
    warmup = [q for qs in corpus.query_sets(5, seed=7).values() for q in qs]
    warm: dict[str, Any] = {"exact": {}, "hnsw": {}}
    _warm(url, model, sets, warmup, warm["exact"])
    log(f"  warm hybrid, exact: {json.dumps(warm['exact'])}")
    store = open_store(url, user_id=USER)
    started = time.perf_counter()
    memlib_cli("--store", url, "db", "init", "--hnsw")
    build_s = time.perf_counter() - started
    log(f"  HNSW index built in {build_s:.0f} s")
    queries = vectors(args.queries, rng, centres)
    started = time.perf_counter()
    recall = hnsw_recall(store, queries, k=10)
    log(
        f"  recall@10 {recall:.4f} over {args.queries} queries "
        f"({time.perf_counter() - started:.0f} s)"
    )
    _warm(url, model, sets, warmup, warm["hnsw"])
    log(f"  warm hybrid, HNSW: {json.dumps(warm['hnsw'])}")
    print(
        json.dumps(
            {
                "records": args.records,
                "queries": args.queries,
                "build_s": round(build_s, 1),
                "recall_at_10": round(recall, 4),
                "warm_hybrid": warm,
                "status": memlib_cli("--store", url, "db", "status"),
            },
            indent=1,
        )
    )
    store.close()
    server.stop()


if __name__ == "__main__":
    main()
