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
    COLD_TIMEOUT_S,
    USER,
    ColdRunError,
    Log,
    bench_recall,
    cold_run,
    drop,
    mcp_args,
    mcp_cold_run,
    mcp_floor_run,
    new_store_url,
    p50_p95,
    recall_args,
    recall_series,
    same_as_first,
    timed,
)
from benchmarks.report import BACKENDS
from benchmarks.stores import Shelf
from memlib import RecallEngine
from memlib.stores import open_store

CHUNK = 10_000
# Seconds the first warm hybrid recall may take before the warm hybrid rows are skipped
# (a ranker that embeds at query time).
BUDGET_S = 60.0


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
    return {"vectors": {**state.to_dict(), "put_vectors_rps": round(stored / put_s, 1)}}


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
    url: str, queries: Mapping[str, str], floors: Mapping[str, float], args: Any, log: Log
) -> dict[str, Any]:
    """A fresh ``memlib recall --ranker hybrid`` per query, and a fresh ``memlib mcp
    --embedder`` session (its default ranker is then hybrid) on the rare query (``mcp``)."""
    out: dict[str, Any] = {}
    runs = {
        name: partial(cold_run, recall_args(url, query, "hybrid"), timeout=COLD_TIMEOUT_S)
        for name, query in queries.items()
    }
    runs["mcp"] = partial(
        mcp_cold_run, mcp_args(url, args.embedder), queries["rare"], timeout=COLD_TIMEOUT_S
    )
    for name, run in runs.items():
        try:
            cold = run(rounds=args.cold_rounds)
        except ColdRunError as exc:
            out[name] = {"error": str(exc)}
            log(f"    cold hybrid ({name}): {exc}")
            continue
        floor = floors["mcp" if name == "mcp" else "recall"]
        cold["over_floor_s"] = round(cold["wall_s"] - floor, 3)
        out[name] = cold
        what = "`memlib mcp` session" if name == "mcp" else f"recall ({name})"
        log(
            f"    cold hybrid {what}: {cold['wall_s']:.2f} s, {cold['peak_rss_mb']} MB "
            f"(floor + {cold['over_floor_s']:.2f} s)"
        )
    return out


class _Corpus:
    """The corpus of N records and each record's packed vector, made on first use (a
    size whose stores are all kept needs neither)."""

    def __init__(self, n: int, model: Any, embed_max: int, cache: Path, log: Log) -> None:
        self.n, self.model, self.cache, self.log = n, model, cache, log
        self.rows = embed_max if 0 < embed_max < n else n
        self.made: tuple[list[dict[str, Any]], dict[str, bytes]] | None = None

    def build(self, url: str) -> dict[str, Any]:
        if self.made is None:
            from memlib._vectors import pack

            items = [item for batch in corpus.records(self.n) for item in batch]
            matrix = corpus_vectors(items[: self.rows], self.model, self.cache, self.log)
            packed = {m["memory_id"]: pack(matrix[i % self.rows]) for i, m in enumerate(items)}
            self.made = items, packed
        items, packed = self.made
        return _filled(url, items, self.model, packed)


def hybrid_rows(model: Any, args: Any, shelf: Shelf, log: Log) -> dict[str, Any]:
    """Rows at each N of ``args.hybrid_sizes`` (PostgreSQL's, with and without pgvector, up
    to ``args.db_max``), every backend holding the corpus and its vectors: ``hybrid`` warm
    (each query embedded on the spot) and as a fresh ``memlib recall`` and a fresh
    ``memlib mcp`` session, beside their floors (the model loaded, one query).

    ``args.hybrid_embed_max`` (0: no limit) embeds only the first records of a larger
    corpus and gives record ``i`` the vector of record ``i mod hybrid_embed_max``: the
    dense search costs the same (one product with every stored vector, then a top-k), the
    answers are not those of real vectors. The row says so (``vectors_embedded``).
    """
    sets = corpus.query_sets(args.queries)
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
    mcp_floor = mcp_floor_run([model.name, cold_q["rare"]], args.cold_rounds)
    log(f"hybrid MCP floor (that + the MCP server and SDK): {mcp_floor['wall_s']:.2f} s")
    floors = {"recall": floor["wall_s"], "mcp": mcp_floor["wall_s"]}
    out: dict[str, Any] = {
        "model": model.name,
        "dimension": model.dimension,
        "queries": {name: len(qs) for name, qs in sets.items()},
        "cold_queries": cold_q,
        "floor": floor,
        "mcp_floor": mcp_floor,
        "rows": [],
    }
    too_slow: dict[str, str] = {}  # per backend: larger N would be slower still
    for n in args.hybrid_sizes:
        log(f"hybrid N={n:,}: the corpus and its vectors")
        servers = [b for b in ("postgresql", "pgvector") if b in shelf.servers]
        backends = ["jsonl", "sqlite", *(servers if n <= args.db_max else [])]
        made = _Corpus(n, model, args.hybrid_embed_max, cache, log)
        key = f"hybrid-{n}-{model.name}-{model.dimension}-{made.rows}"
        row: dict[str, Any] = {"n": n, "vectors_embedded": made.rows}
        if made.rows < n:
            row["vectors_note"] = (
                f"only the first {made.rows:,} records were embedded; record i "
                f"holds the vector of record i mod {made.rows:,}"
            )
        digests: dict[str, list[str]] = {}
        for backend in backends:
            log(f"  {BACKENDS[backend]}")
            url, cell = shelf.store(backend, key, made.build)
            if backend not in too_slow:
                digests[backend], first_s = _warm(url, model, sets, warmup, cell)
                if "warm" in cell:
                    log(f"    {backend} warm hybrid: {p50_p95(cell['warm'], 1)}")
                else:
                    too_slow[backend] = (
                        f"the first warm recall at N={n:,} took {first_s:.0f} s "
                        f"(budget {BUDGET_S:.0f} s)"
                    )
                    log(f"    {too_slow[backend]}: its warm hybrid rows skipped from here on")
            cell.setdefault("warm", {"skipped": too_slow.get(backend)})
            cell["cold"] = _cold(url, cold_q, floors, args, log)
            row[backend] = cell
        digests = {b: d for b, d in digests.items() if d}
        if len(digests) > 1:
            row["parity"] = same_as_first(digests)
        if len(backends) > 1:
            answers = {b: row[b]["cold"] for b in backends}
            row["cold_same_answer"] = same_as_first(
                {b: [c[q].get("answer") for q in cold_q] for b, c in answers.items()}
            )
            row["mcp_same_answer"] = same_as_first(
                {b: c["mcp"].get("answer") for b, c in answers.items()}
            )
        out["rows"].append(row)
        del made
        gc.collect()
        shelf.done(key, backends)
    return out
