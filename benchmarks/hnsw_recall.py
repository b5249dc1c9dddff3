"""HNSW's recall@10 against exact search in PostgreSQL + pgvector (issue 36, item 1).

    python -m benchmarks.hnsw_recall --records 100000 [--queries 100] [--folder DIR]

Synthetic, labelled: 384-dimension unit vectors drawn around 1,000 random centres (the
LoCoMo vectors repeat 10k real ones, which makes exact top-10s a matter of ties). The
corpus of benchmarks/corpus.py, vectors written with put_vectors, then `memlib db init
--hnsw` (timed), then memlib's own `hnsw_recall` over fresh query vectors.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from benchmarks import corpus
from benchmarks.common import BATCH, USER, progress_log
from benchmarks.stores import memlib_cli, pgvector_server
from memlib.stores import open_store
from memlib.stores.sql._postgres import hnsw_recall


def vectors(n: int, rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    picked = centres[rng.integers(0, len(centres), size=n)]
    drawn = picked + rng.normal(0.0, 0.35 / np.sqrt(centres.shape[1]), size=picked.shape)
    return (drawn / np.linalg.norm(drawn, axis=1, keepdims=True)).astype("<f4")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--folder", default="/tmp/hnsw-pg")
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
    memlib_cli("--store", url, "db", "init")
    store = open_store(url, user_id=USER)
    done = 0
    for batch in corpus.records(args.records, batch=BATCH):
        store.append_many(batch)
        packed = vectors(len(batch), rng, centres)
        store.put_vectors(
            "synthetic-384",
            384,
            {r["memory_id"]: v.tobytes() for r, v in zip(batch, packed, strict=True)},
        )
        done += len(batch)
        log(f"  {done:,} records and vectors")
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
    print(
        json.dumps(
            {
                "records": args.records,
                "queries": args.queries,
                "build_s": round(build_s, 1),
                "recall_at_10": round(recall, 4),
                "status": memlib_cli("--store", url, "db", "status"),
            },
            indent=1,
        )
    )
    store.close()
    server.stop()


if __name__ == "__main__":
    main()
