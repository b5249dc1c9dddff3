"""Embeddings kept with the records: import throughput, and ``hybrid`` warm and cold at scale.

``embedding_throughput``: ``store.append_many`` in batches on a store opened with the
embedding model (``open_store(url, user_id=..., embedder=model)``: every conversation
record is embedded and its vector written with it) against the model's own batch
throughput, ``model.encode(texts)`` on the same texts, in records/s; the ratio says
what the store adds to the embedding.

``hybrid_rows``: for each N, a store on every backend holding the corpus and a vector
for every record, then ``RecallEngine(store, ranker="hybrid")`` warm (p50 / p95 over
both query sets, each query embedded on the spot) and a fresh ``memlib recall --ranker
hybrid`` process (median of 3, wall and peak RSS) beside its floor: Python's start,
``import memlib``, loading the model and embedding one query, as a fresh process too.

Embedding 100k records with MiniLM on 2 cores takes minutes, so the corpus's texts are
embedded once per chunk of ``CHUNK`` records and cached as ``.npy`` files keyed by the
model and a digest of the chunk's texts (the corpus of 10k is the first chunk of the
corpus of 100k: it costs nothing more); the vectors go in with ``store.put_vectors``,
which is what ``memlib embed`` backfills with. The store's own embedding at write time
is what ``embedding_throughput`` measures.
"""

from __future__ import annotations

import gc
import hashlib
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks import corpus
from benchmarks.cold import recall_args
from benchmarks.common import (
    BATCH,
    LIMIT,
    USER,
    ColdRunError,
    Log,
    cold_run,
    recall_series,
    timed,
)
from memlib import RecallEngine
from memlib.stores import open_store

__all__ = ["corpus_vectors", "embedding_throughput", "hybrid_floor", "hybrid_rows"]

CHUNK = 10_000


def forget(model: Any) -> None:
    """Empty the model's per-process cache of texts already embedded.

    ``EmbeddingModel`` keeps the vectors of texts it has seen; a figure that must embed
    every text (the raw throughput, the store's, a query asked again on another backend)
    starts from an empty cache, or it would time dictionary look-ups.
    """
    from memlib.rankers.embeddings import LazyEmbeddingModel, get_embedding_model

    # ``get_embedder("minilm")`` hands out the lazy wrapper: the cache is its model's.
    target = get_embedding_model() if isinstance(model, LazyEmbeddingModel) else model
    cache = getattr(target, "_cache", None)
    if cache is not None:
        cache.clear()


def _close(store: Any) -> None:
    close = getattr(store, "close", None)
    if close is not None:
        close()


def _url(backend: str, folder: Path, pg: Any, tag: str) -> tuple[str, str | None]:
    """A new store's URL, and the PostgreSQL schema to drop afterwards (None otherwise)."""
    if backend == "jsonl":
        return f"jsonl:{folder / f'{tag}.jsonl'}", None
    if backend == "sqlite":
        return f"sqlite:{folder / f'{tag}.sqlite'}", None
    from memlib.stores.sql._postgres import init_schema

    schema = f"bench_{uuid.uuid4().hex[:8]}"
    url = f"{pg.dsn}?schema={schema}"
    init_schema(url)
    return url, schema


def _drop_schema(store: Any, schema: str | None) -> None:
    if schema is not None:
        store._connection().execute(f"DROP SCHEMA {schema} CASCADE")
    _close(store)


# -- embedding throughput ------------------------------------------------------------------

def embedding_throughput(
    model: Any, count: int, batch: int, backends: Sequence[str], workdir: Path, pg: Any,
    log: Log,
) -> dict[str, Any]:
    items = next(corpus.records(count, seed=21, batch=count, prefix="embed"))
    texts = [item["content"] for item in items]  # what a store embeds (base._vectors_of)
    # torch's first passes over new input shapes are slow: warm it on other texts.
    warm = next(corpus.records(2 * 64, seed=22, batch=2 * 64, prefix="warm"))
    model.encode([item["content"] for item in warm])
    forget(model)
    raw_s, _ = timed(lambda: model.encode(texts))
    forget(model)
    out: dict[str, Any] = {
        "records": count, "batch": batch, "model": model.name, "dimension": model.dimension,
        "raw_encode_rps": round(count / raw_s, 1),
        "stores": {},
    }
    log(f"  model.encode, {count:,} texts in one call: {out['raw_encode_rps']:,.0f} records/s")
    folder = workdir / "embed"
    folder.mkdir(mode=0o700)
    for backend in backends:
        url, schema = _url(backend, folder, pg, "embed")
        store: Any = open_store(url, user_id=USER, embedder=model)

        def append_all(store: Any = store) -> None:
            for i in range(0, count, batch):
                store.append_many(items[i : i + batch])

        seconds, _ = timed(append_all)
        forget(model)
        state = store.vector_state()
        rps = count / seconds
        out["stores"][backend] = {
            "rps": round(rps, 1), "over_raw": round(rps / out["raw_encode_rps"], 3),
            "vectors": state.to_dict(),
        }
        log(f"  {backend} append_many with the embedder: {rps:,.0f} records/s "
            f"({out['stores'][backend]['over_raw']:.2f}x the raw encode); {state.stored:,} "
            f"vectors stored, {state.missing:,} missing")
        _drop_schema(store, schema)
    shutil.rmtree(folder, ignore_errors=True)
    return out


# -- the corpus's vectors, embedded once ---------------------------------------------------

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
        log(f"    embedded records {start:,}-{start + len(texts):,}: "
            f"{len(texts) / seconds:,.0f} records/s (cached in {cache})")
        parts.append(matrix)
    return np.concatenate(parts) if parts else np.zeros((0, model.dimension), dtype=np.float32)


# -- hybrid, warm and cold -----------------------------------------------------------------

def hybrid_floor(model_name: str, query: str, log: Log) -> dict[str, Any]:
    """Python's start, ``import memlib``, the model loaded, one query embedded."""
    floor = cold_run(["--embed-floor", model_name, query], rounds=3)
    log(f"hybrid floor (python + import memlib + model load + one query embedding): "
        f"{floor['wall_s']:.2f} s, {floor['peak_rss_mb']} MB")
    return floor


def hybrid_rows(
    model: Any, sizes: Sequence[int], backends_at: Callable[[int], Sequence[str]],
    workdir: Path, pg: Any, cache: Path, log: Log, *, queries: int, budget_s: float,
    cold_timeout_s: float, embed_max: int = 0,
) -> dict[str, Any]:
    """``backends_at(n)``: the backends to measure at ``n``.

    ``embed_max`` (0: no limit) embeds only the first ``embed_max`` records of a larger
    corpus and gives record ``i`` the vector of record ``i mod embed_max``: the dense
    search costs the same (one product with every stored vector, then a top-k), the
    answers are not those of real vectors. The row says so (``vectors_embedded``).
    """
    from memlib._vectors import pack

    sets = corpus.query_sets(queries)
    # Other questions first, untimed: torch's first passes over new shapes are slow.
    warmup = [q for qs in corpus.query_sets(5, seed=7).values() for q in qs]
    cold_q = {name: qs[0] for name, qs in sets.items()}
    out: dict[str, Any] = {"model": model.name, "dimension": model.dimension,
                           "queries": {name: len(qs) for name, qs in sets.items()},
                           "cold_queries": cold_q,
                           "floor": hybrid_floor(model.name, cold_q["rare"], log), "rows": []}
    too_slow: str | None = None
    for n in sizes:
        log(f"hybrid N={n:,}: the corpus and its vectors")
        items = [item for batch in corpus.records(n) for item in batch]
        embedded = items[:embed_max] if 0 < embed_max < n else items
        matrix = corpus_vectors(embedded, model, cache, log)
        rows = len(matrix)
        packed = {item["memory_id"]: pack(matrix[i % rows]) for i, item in enumerate(items)}
        del matrix
        folder = workdir / f"hybrid-{n}"
        folder.mkdir(mode=0o700)
        row: dict[str, Any] = {"n": n, "vectors_embedded": rows}
        if rows < n:
            row["vectors_note"] = (f"only the first {rows:,} records were embedded; record i "
                                   f"holds the vector of record i mod {rows:,}")
        digests: dict[str, list[str]] = {}
        for backend in backends_at(n):
            url, schema = _url(backend, folder, pg, "records")
            cell: dict[str, Any] = {}
            writer: Any = open_store(url, user_id=USER)
            for i in range(0, n, BATCH):
                writer.append_many(items[i : i + BATCH])
            put_s, stored = timed(partial(_put_all, writer, model, packed))
            state = writer.vector_state()
            cell["vectors"] = {**state.to_dict(), "put_vectors_rps": round(stored / put_s, 1)}
            _close(writer)
            if state.stored != n or state.missing:
                raise RuntimeError(f"{backend}: {state.stored:,} vectors stored, "
                                   f"{state.missing:,} missing, for {n:,} records")
            if too_slow is None:
                store = open_store(url, user_id=USER, embedder=model)
                engine = RecallEngine(store, ranker="hybrid")

                def recall(text: str, engine: RecallEngine = engine) -> Any:
                    return engine.recall(text, limit=LIMIT, as_of=corpus.AS_OF,
                                         query_id="bench")

                first_s, _ = timed(partial(recall, warmup[0]))
                cell["first_recall_s"] = round(first_s, 3)
                if first_s > budget_s:
                    too_slow = (f"the first warm recall at N={n:,} on {backend} took "
                                f"{first_s:.0f} s (budget {budget_s:.0f} s)")
                    log(f"    {too_slow}: warm hybrid rows skipped from here on")
                else:
                    for text in warmup[1:]:
                        recall(text)
                    cell["warm"] = {}
                    for name, qs in sets.items():
                        counts: list[int] = []
                        paths: list[Mapping[str, int]] = []
                        cell["warm"][name], d = recall_series(
                            recall, qs, warmup=0, candidates=counts,
                            before=partial(forget, model),
                            inspect=partial(_retrieval_of, into=paths),
                        )
                        cell["warm"][name]["candidates_mean"] = _mean(counts)
                        if paths:
                            # How many records each path gave (lexical, dense, both, ...).
                            cell["warm"][name]["retrieval_mean"] = {
                                key: _mean([p.get(key, 0) for p in paths])
                                for key in sorted({k for p in paths for k in p})
                            }
                        digests.setdefault(backend, []).extend(d)
                    log(f"    {backend} warm hybrid: " + "; ".join(
                        f"{name} p50 {s['p50_ms']:.1f} ms p95 {s['p95_ms']:.1f} ms"
                        for name, s in cell["warm"].items()))
                _close(store)
            if too_slow is not None and "warm" not in cell:
                cell["warm"] = {"skipped": too_slow}
            cell["cold"] = {}
            for name, query in cold_q.items():
                try:
                    cold = cold_run(recall_args(url, query, "hybrid"), rounds=3,
                                    timeout=cold_timeout_s)
                except ColdRunError as exc:
                    cell["cold"][name] = {"error": str(exc)}
                    log(f"    {backend} cold hybrid ({name}): {exc}")
                    continue
                cold["over_floor_s"] = round(cold["wall_s"] - out["floor"]["wall_s"], 3)
                cell["cold"][name] = cold
                log(f"    {backend} cold hybrid ({name}): {cold['wall_s']:.2f} s, "
                    f"{cold['peak_rss_mb']} MB (floor + {cold['over_floor_s']:.2f} s)")
            row[backend] = cell
            if schema is not None:
                _drop_schema(open_store(url, user_id=USER), schema)
        if len(digests) > 1:
            first = next(iter(digests.values()))
            row["parity"] = {b: d == first for b, d in digests.items()}
        answers = {b: {name: c.get("answer") for name, c in row[b]["cold"].items()}
                   for b in backends_at(n)}
        if len(answers) > 1:
            first_answers = next(iter(answers.values()))
            row["cold_same_answer"] = {b: a == first_answers for b, a in answers.items()}
        out["rows"].append(row)
        del items, packed
        gc.collect()
        shutil.rmtree(folder, ignore_errors=True)
    return out


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 1) if values else None


def _retrieval_of(result: Any, *, into: list[Mapping[str, int]]) -> None:
    retrieval = getattr(result, "retrieval", None)
    if retrieval is not None:
        into.append(retrieval)


def _put_all(store: Any, model: Any, packed: dict[str, bytes]) -> int:
    ids = list(packed)
    stored = 0
    for i in range(0, len(ids), BATCH):
        chunk = {m: packed[m] for m in ids[i : i + BATCH]}
        stored += store.put_vectors(model.name, model.dimension, chunk)
    return stored
