"""Warm lexical rows: every lexical ranker on a loaded store, beside bm25s on the same texts.

For one store already holding the corpus, each ranker of ``RANKERS`` answers the two
query sets of ``corpus.query_sets`` (rare-term queries, and the same with 3 common words
in front) through ``RecallEngine(store, ranker=...)``, one engine per ranker made before
the clock starts (a warm process has its ranker). p50 / p95 per set, the candidates each
set makes (from the results themselves), and a digest of every answer so that backends
can be compared for exact parity.

bm25s is timed in the same run on the same texts and the same two sets
(``bm25s_peer``); ``over_bm25s`` divides memlib's p50 by bm25s's.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks import corpus
from benchmarks.common import LIMIT, Log, recall_series, timed
from memlib import RecallEngine

__all__ = ["RANKERS", "bm25s_peer", "over_bm25s", "warm_rows"]

RANKERS = ("baseline", "bm25", "bm25+stopwords")


def warm_rows(
    store: Any, sets: Mapping[str, Sequence[str]], log: Log, label: str,
    rankers: Sequence[str] = RANKERS,
) -> tuple[dict[str, Any], dict[str, dict[str, list[str]]]]:
    """``({ranker: {set: stats}, "candidates": {set: {...}}}, digests[ranker][set])``."""
    out: dict[str, Any] = {}
    digests: dict[str, dict[str, list[str]]] = {}
    counted: dict[str, list[int]] = {}
    for ranker in rankers:
        engine = RecallEngine(store, ranker=ranker)

        def recall(text: str, engine: RecallEngine = engine) -> Any:
            return engine.recall(text, limit=LIMIT, as_of=corpus.AS_OF, query_id="bench")

        out[ranker], digests[ranker] = {}, {}
        for name, queries in sets.items():
            counts: list[int] = []
            out[ranker][name], digests[ranker][name] = recall_series(
                recall, queries, candidates=counts
            )
            counted.setdefault(name, counts)
        log(f"    {label} {ranker}: " + "; ".join(
            f"{name} p50 {stats['p50_ms']:.2f} ms p95 {stats['p95_ms']:.2f} ms"
            for name, stats in out[ranker].items()
        ))
    out["candidates"] = {
        name: {"mean": round(statistics.fmean(c), 1), "median": statistics.median(c),
               "min": min(c), "max": max(c)}
        for name, c in counted.items() if c
    }
    return out, digests


def bm25s_peer(
    texts: list[str], queries: list[str], sets: Mapping[str, Sequence[str]] | None = None
) -> dict[str, Any]:
    """bm25s indexed once on ``texts``; ``recall`` times ``queries``, ``sets`` each set."""
    import bm25s

    index_s, retriever = timed(lambda: _bm25s_index(bm25s, texts))

    def retrieve(text: str) -> Any:
        tokens = bm25s.tokenize([text], stopwords=None, show_progress=False, return_ids=False)
        docs, scores = retriever.retrieve(tokens, k=LIMIT, show_progress=False)
        return docs

    stats, _ = recall_series(retrieve, queries)
    out: dict[str, Any] = {"index_s": index_s, "recall": stats}
    if sets:
        out["sets"] = {name: recall_series(retrieve, list(qs))[0] for name, qs in sets.items()}
    return out


def _bm25s_index(bm25s: Any, texts: list[str]) -> Any:
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords=None, show_progress=False), show_progress=False)
    return retriever


def over_bm25s(
    warm: Mapping[str, Any], peer: Mapping[str, Any], backends: Sequence[str]
) -> dict[str, Any]:
    """memlib p50 / bm25s p50, per backend, ranker and query set (bm25s = 1)."""
    out: dict[str, Any] = {}
    for backend in backends:
        rows = warm.get(backend)
        if not isinstance(rows, Mapping):
            continue
        out[backend] = {
            ranker: {
                name: round(stats["p50_ms"] / peer[name]["p50_ms"], 3)
                for name, stats in by_set.items()
                if name in peer and peer[name].get("p50_ms")
            }
            for ranker, by_set in rows.items()
            if ranker in RANKERS
        }
    return out
