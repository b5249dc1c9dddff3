"""Query latency of the ``hybrid`` ranker on a 700-record conversation, model loaded.

    .venv/bin/python -m benchmarks.bench_hybrid [--records 700] [--queries 50]
                                                [--locomo PATH/locomo-dev.json]

Builds a JSONL store in a temporary folder with one synthetic conversation of
``--records`` turns (or, with ``--locomo``, the turns of the largest conversation of
that file), loads the model, runs one recall to embed the records (reported apart:
a real deployment would embed at write time), then ``--warmup`` recalls of other
questions (reported apart too: torch's first passes over new input shapes are slow),
then times ``--queries`` recalls of questions never asked before — each one's
embedding is computed, not cached — through ``RecallEngine(store, ranker="hybrid")``:
normalize, candidate scan, score, rank. Prints the median, p95 and max, and the share
of the ranker itself. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memlib import RecallEngine, RemoteMemoryStore
from memlib.rankers import get_ranker

TOPICS = ("pottery", "guitar", "hiking", "painting", "adoption", "camping", "school",
          "running", "concert", "garden", "puppy", "library", "museum", "beach", "recipe",
          "charity", "violin", "marathon", "photography", "volunteering")
VERBS = ("loved", "started", "finished", "planned", "talked about", "remembered", "tried",
         "signed up for", "gave up", "shared photos of")
FILLER = ("yesterday", "last week", "with my kids", "with friends", "after work",
          "on the weekend", "for the first time", "again", "in the park", "downtown")
SPEAKERS = ("Caroline", "Melanie")


def synthetic_items(n: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    start = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    items = []
    for i in range(n):
        session = i // 25
        text = (f"{SPEAKERS[i % 2]}: I {rng.choice(VERBS)} {rng.choice(TOPICS)} "
                f"{rng.choice(FILLER)}, and it reminded me of {rng.choice(TOPICS)} "
                f"{rng.choice(FILLER)}. How about you?")
        items.append(_item(f"conv-bench/D{session + 1}:{i % 25 + 1}", text, session,
                           start + timedelta(days=7 * session)))
    return items


def _item(memory_id: str, text: str, session: int, when: datetime) -> dict:
    return {
        "kind": "conversation", "memory_id": memory_id, "content": text, "summary": text[:2000],
        "source": {"source_id": f"session-{session + 1}", "source_type": "benchmark",
                   "title": f"session {session + 1}",
                   "captured_at": when.strftime("%Y-%m-%dT%H:%M:%SZ")},
    }


def locomo_items(path: str) -> tuple[list[dict], list[str]]:
    from memlib.eval.locomo import load_locomo

    conv = max(load_locomo(path), key=lambda c: len(c.records))
    items = [
        {"kind": "conversation", "memory_id": r.memory_id, "content": r.content,
         "summary": r.summary, "source": r.source}
        for r in conv.records
    ]
    return items, [q.question for q in conv.questions]


def _timing(method: Callable[..., Any], spent: list[float]) -> Callable[..., Any]:
    """``method``, adding the seconds each call takes to ``spent[0]``."""
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - start
    return timed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=700)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--locomo", help="use the largest conversation of this LoCoMo file")
    args = parser.parse_args()

    wanted = args.warmup + args.queries
    if args.locomo:
        items, questions = locomo_items(args.locomo)
        questions = list(dict.fromkeys(questions))
    else:
        items = synthetic_items(args.records)
        rng = random.Random(11)
        questions = []
        while len(questions) < wanted and len(questions) < 10 * wanted:
            question = (f"When did Caroline {rng.choice(VERBS)} {rng.choice(TOPICS)} "
                        f"{rng.choice(FILLER)}?")
            if question not in questions:
                questions.append(question)
    if len(questions) < wanted:
        raise SystemExit(f"only {len(questions)} distinct questions for {wanted} recalls")
    warmup, questions = questions[: args.warmup], questions[args.warmup : wanted]

    with tempfile.TemporaryDirectory(prefix="memlib-bench-") as root:
        store = RemoteMemoryStore(Path(root) / "records.jsonl", user_id="bench")
        store.append_many(items)
        ranker: Any = get_ranker("hybrid")
        engine = RecallEngine(store, ranker=ranker)
        as_of = datetime(2024, 1, 1, tzinfo=UTC)

        t0 = time.perf_counter()
        _ = ranker.model  # load the model once
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        engine.recall(warmup[0] if warmup else questions[0], limit=10, as_of=as_of,
                      query_id="warm-up")
        first_s = time.perf_counter() - t0
        warm_ms = []
        for text in warmup[1:]:
            t0 = time.perf_counter()
            engine.recall(text, limit=10, as_of=as_of, query_id="warm-up")
            warm_ms.append((time.perf_counter() - t0) * 1000)

        total_ms, ranker_ms = [], []
        # What the engine calls: score_stored on a store that keeps vectors (the
        # engine's dense path), score_top otherwise; both are timed, one is called.
        originals = {name: getattr(ranker, name) for name in ("score_stored", "score_top")
                     if hasattr(ranker, name)}
        for i, text in enumerate(questions):
            spent = [0.0]
            for name, method in originals.items():
                setattr(ranker, name, _timing(method, spent))
            t0 = time.perf_counter()
            result = engine.recall(text, limit=10, as_of=as_of, query_id=f"q-{i}")
            total_ms.append((time.perf_counter() - t0) * 1000)
            ranker_ms.append(spent[0] * 1000)
        for name, method in originals.items():
            setattr(ranker, name, method)

    total_ms.sort()
    p95 = total_ms[min(len(total_ms) - 1, int(0.95 * len(total_ms)))]
    print(f"records: {len(items)}  queries: {len(total_ms)}  "
          f"candidates in the last query: {result.candidate_records}")
    print(f"model load: {load_s:.2f} s; first recall (embeds every record): {first_s:.2f} s")
    if warm_ms:
        print(f"{len(warm_ms)} warm-up recalls: " + ", ".join(f"{ms:.0f}" for ms in warm_ms)
              + " ms")
    print(f"recall latency after load: median {statistics.median(total_ms):.1f} ms, "
          f"p95 {p95:.1f} ms, max {total_ms[-1]:.1f} ms "
          f"(ranker alone, query embedding included: median {statistics.median(ranker_ms):.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
