"""Embeddings kept with the records: import throughput, and ``hybrid`` warm and cold at scale.

Embedding 100k records on 2 cores takes minutes, so the corpus's vectors are cached per
chunk of ``CHUNK`` records (keyed by the model and a digest of the texts) and go in with
``put_vectors``, as ``memlib embed`` backfills them.
"""

from __future__ import annotations

import gc
import hashlib
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks import corpus
from benchmarks.common import (
    BATCH,
    USER,
    ColdRunError,
    Log,
    bench_recall,
    cold_run,
    drop,
    new_store_url,
    p50_p95,
    recall_args,
    recall_series,
    timed,
)
from memlib import RecallEngine
from memlib.stores import open_store

CHUNK = 10_000
# Seconds the first warm hybrid recall may take before the warm hybrid rows are skipped
# (a ranker that embeds at query time), and a cold hybrid recall before it counts as failed.
BUDGET_S, COLD_TIMEOUT_S = 60.0, 300.0


def forget(model: Any) -> None:
    """Empty the model's cache of texts already embedded: a figure that must embed every
    text (the raw throughput, the store's, a query asked again on another backend) would
    otherwise time dictionary look-ups."""
    model = getattr(model, "base", model)  # a PairEmbedder's cache is its turn model's
    if hasattr(model, "forget"):
        model.forget()


def embedding_throughput(
    model: Any, count: int, batch: int, backends: Sequence[str], workdir: Path, pg: Any, log: Log
) -> dict[str, Any]:
    """``append_many`` on a store opened with the model (each record embedded and its
    vector written with it) against ``model.encode`` of the same texts."""
    items = next(corpus.records(count, seed=21, batch=count, prefix="embed"))
    texts = [item["content"] for item in items]  # what a store embeds
    # A model's first passes over new input shapes are slow: warm it on other texts.
    model.encode([item["content"] for item in next(corpus.records(128, seed=22, batch=128))])
    forget(model)
    raw_s, _ = timed(lambda: model.encode(texts))
    forget(model)
    out: dict[str, Any] = {
        "records": count,
        "batch": batch,
        "model": model.name,
        "dimension": model.dimension,
        "raw_encode_rps": round(count / raw_s, 1),
        "stores": {},
    }
    log(f"  model.encode, {count:,} texts in one call: {out['raw_encode_rps']:,.0f} records/s")
    folder = workdir / "embed"
    folder.mkdir(mode=0o700)
    chunks = [items[i : i + batch] for i in range(0, count, batch)]
    for backend in backends:
        url, schema = new_store_url(backend, folder, pg, "embed")
        store: Any = open_store(url, user_id=USER, embedder=model)
        seconds, _ = timed(lambda: [store.append_many(c) for c in chunks])  # noqa: B023
        forget(model)
        state = store.vector_state()
        rps = count / seconds
        out["stores"][backend] = {
            "rps": round(rps, 1),
            "over_raw": round(rps / out["raw_encode_rps"], 3),
            "vectors": state.to_dict(),
        }
        log(
            f"  {backend} append_many with the embedder: {rps:,.0f} records/s "
            f"({out['stores'][backend]['over_raw']:.2f}x the raw encode); {state.stored:,} "
            f"vectors stored, {state.missing:,} missing"
        )
        drop(store, schema)
    shutil.rmtree(folder, ignore_errors=True)
    return out


def corpus_vectors(items: Sequence[dict[str, Any]], model: Any, cache: Path, log: Log) -> Any:
    """An ``(len(items), dimension)`` float32 matrix of the items' contents, cached."""
    import numpy as np

    cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    parts = []
    for start in range(0, len(items), CHUNK):
        texts = [item["content"] for item in items[start : start + CHUNK]]
        key = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:20]
        path = cache / f"{model.name}-{model.dimension}-{len(texts)}-{key}.npy"
        if path.exists():
            parts.append(np.load(path))
            continue
        seconds, matrix = timed(partial(model.encode, texts))
        forget(model)
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        temporary = path.with_suffix(".tmp.npy")
        np.save(temporary, matrix)
        temporary.replace(path)
        log(
            f"    embedded records {start:,}-{start + len(texts):,}: "
            f"{len(texts) / seconds:,.0f} records/s (cached in {cache})"
        )
        parts.append(matrix)
    return np.concatenate(parts) if parts else np.zeros((0, model.dimension), dtype=np.float32)


def _filled(
    url: str, items: list[dict[str, Any]], model: Any, packed: dict[str, bytes]
) -> dict[str, Any]:
    """Write the corpus and its vectors to a new store: its vector state."""
    store: Any = open_store(url, user_id=USER)
    for i in range(0, len(items), BATCH):
        store.append_many(items[i : i + BATCH])
    pairs = list(packed.items())
    chunks = [dict(pairs[i : i + BATCH]) for i in range(0, len(pairs), BATCH)]
    put_s, stored = timed(
        lambda: sum(store.put_vectors(model.name, model.dimension, c) for c in chunks)
    )
    state = store.vector_state()
    store.close()
    if state.stored != len(items) or state.missing:
        raise RuntimeError(
            f"{url}: {state.stored:,} vectors stored, {state.missing:,} missing, "
            f"for {len(items):,} records"
        )
    return {**state.to_dict(), "put_vectors_rps": round(stored / put_s, 1)}


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 1) if values else None


def _keep_retrieval(paths: list[Mapping[str, int]], result: Any) -> None:
    if getattr(result, "retrieval", None) is not None:
        paths.append(result.retrieval)


def _warm(
    url: str, model: Any, sets: Mapping[str, list[str]], warmup: list[str], cell: dict[str, Any]
) -> tuple[list[str], float]:
    """Warm hybrid rows into ``cell`` (none when the first recall is over budget): the
    answers' digests and the first recall's seconds."""
    store = open_store(url, user_id=USER, embedder=model)
    recall = bench_recall(RecallEngine(store, ranker="hybrid"))
    first_s, _ = timed(partial(recall, warmup[0]))
    cell["first_recall_s"] = round(first_s, 3)
    digests: list[str] = []
    if first_s <= BUDGET_S:
        for text in warmup[1:]:
            recall(text)
        cell["warm"] = {}
        for name, qs in sets.items():
            counts: list[int] = []
            paths: list[Mapping[str, int]] = []
            stats, d = recall_series(
                recall,
                qs,
                warmup=0,
                candidates=counts,
                before=partial(forget, model),
                inspect=partial(_keep_retrieval, paths),
            )
            stats["candidates_mean"] = _mean(counts)
            if paths:  # how many records each path gave (lexical, dense, both, ...)
                stats["retrieval_mean"] = {
                    key: _mean([p.get(key, 0) for p in paths])
                    for key in sorted({k for p in paths for k in p})
                }
            cell["warm"][name] = stats
            digests.extend(d)
    store.close()
    return digests, first_s


def _cold(
    url: str, queries: Mapping[str, str], floor_s: float, rounds: int, log: Log, label: str
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, query in queries.items():
        try:
            cold = cold_run(recall_args(url, query, "hybrid"), rounds, timeout=COLD_TIMEOUT_S)
        except ColdRunError as exc:
            out[name] = {"error": str(exc)}
            log(f"    {label} cold hybrid ({name}): {exc}")
            continue
        cold["over_floor_s"] = round(cold["wall_s"] - floor_s, 3)
        out[name] = cold
        log(
            f"    {label} cold hybrid ({name}): {cold['wall_s']:.2f} s, "
            f"{cold['peak_rss_mb']} MB (floor + {cold['over_floor_s']:.2f} s)"
        )
    return out


def _same(by_backend: Mapping[str, Any]) -> dict[str, bool]:
    first = next(iter(by_backend.values()))
    return {b: v == first for b, v in by_backend.items()}


def hybrid_rows(model: Any, args: Any, workdir: Path, pg: Any, log: Log) -> dict[str, Any]:
    """Rows at each N of ``args.hybrid_sizes`` (PostgreSQL's up to ``args.db_max``), every
    backend holding the corpus and its vectors: ``hybrid`` warm (each query embedded on the
    spot) and as a fresh ``memlib recall`` beside its floor (the model loaded, one query).

    ``args.hybrid_embed_max`` (0: no limit) embeds only the first records of a larger
    corpus and gives record ``i`` the vector of record ``i mod hybrid_embed_max``: the
    dense search costs the same (one product with every stored vector, then a top-k), the
    answers are not those of real vectors. The row says so (``vectors_embedded``).
    """
    from memlib._vectors import pack

    sets = corpus.query_sets(args.queries)
    embed_max = args.hybrid_embed_max
    # The corpus's vectors, cached across runs (embedding 100k records takes minutes).
    cache = Path(args.workdir or tempfile.gettempdir()) / "memlib-bench-vectors"

    # Other questions first, untimed: a model's first passes over new shapes are slow.
    warmup = [q for qs in corpus.query_sets(5, seed=7).values() for q in qs]
    cold_q = {name: qs[0] for name, qs in sets.items()}
    floor = cold_run(["--embed-floor", model.name, cold_q["rare"]], args.cold_rounds)
    log(
        f"hybrid floor (python + import memlib + model load + one query embedding): "
        f"{floor['wall_s']:.2f} s, {floor['peak_rss_mb']} MB"
    )
    out: dict[str, Any] = {
        "model": model.name,
        "dimension": model.dimension,
        "queries": {name: len(qs) for name, qs in sets.items()},
        "cold_queries": cold_q,
        "floor": floor,
        "rows": [],
    }
    too_slow: str | None = None
    for n in args.hybrid_sizes:
        log(f"hybrid N={n:,}: the corpus and its vectors")
        backends = ["jsonl", "sqlite", *(["postgresql"] if pg and n <= args.db_max else [])]
        items = [item for batch in corpus.records(n) for item in batch]
        matrix = corpus_vectors(
            items[:embed_max] if 0 < embed_max < n else items, model, cache, log
        )
        rows = len(matrix)
        packed = {item["memory_id"]: pack(matrix[i % rows]) for i, item in enumerate(items)}
        del matrix
        folder = workdir / f"hybrid-{n}"
        folder.mkdir(mode=0o700)
        row: dict[str, Any] = {"n": n, "vectors_embedded": rows}
        if rows < n:
            row["vectors_note"] = (
                f"only the first {rows:,} records were embedded; record i "
                f"holds the vector of record i mod {rows:,}"
            )
        digests: dict[str, list[str]] = {}
        for backend in backends:
            url, schema = new_store_url(backend, folder, pg, "records")
            cell: dict[str, Any] = {"vectors": _filled(url, items, model, packed)}
            if too_slow is None:
                digests[backend], first_s = _warm(url, model, sets, warmup, cell)
                if "warm" in cell:
                    log(f"    {backend} warm hybrid: {p50_p95(cell['warm'], 1)}")
                else:
                    too_slow = (
                        f"the first warm recall at N={n:,} on {backend} took "
                        f"{first_s:.0f} s (budget {BUDGET_S:.0f} s)"
                    )
                    log(f"    {too_slow}: warm hybrid rows skipped from here on")
            cell.setdefault("warm", {"skipped": too_slow})
            cell["cold"] = _cold(url, cold_q, floor["wall_s"], args.cold_rounds, log, backend)
            row[backend] = cell
            if schema is not None:
                drop(open_store(url, user_id=USER), schema)
        digests = {b: d for b, d in digests.items() if d}
        if len(digests) > 1:
            row["parity"] = _same(digests)
        answers = {
            b: {name: c.get("answer") for name, c in row[b]["cold"].items()} for b in backends
        }
        if len(answers) > 1:
            row["cold_same_answer"] = _same(answers)
        out["rows"].append(row)
        del items, packed
        gc.collect()
        shutil.rmtree(folder, ignore_errors=True)
    return out
