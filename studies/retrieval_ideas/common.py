"""Shared parts of the issue-37 study (item 4): cached e5 vectors, the shipped configuration's
candidates with their signals, metrics, leave-one-conversation-out CV and paired bootstrap.

Run from /work/main with its .venv:  .venv/bin/python studies/retrieval_ideas/<script>.py
Everything ranks through memlib's own code (ConversationVectors, HybridRanker.score_stored,
rank_question, _metrics, leave_one_out, bootstrap_interval); only the re-ranking is new."""

from __future__ import annotations

import json
import os
import pickle
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memlib.eval.crossval import bootstrap_interval, leave_one_out
from memlib.eval.locomo import (
    HEADLINE_CATEGORIES,
    ConversationVectors,
    LocomoConversation,
    _metrics,
    load_locomo,
    question_recall,
    rank_question,
    session_of,
)
from memlib.normalize import LIMIT_MAX, normalize_recall_query
from memlib.rankers import get_ranker
from memlib.rankers.embeddings import E5_PAIR_DEVIATION, E5_PAIR_MEAN, E5Model, PairEmbedder
from memlib.rankers.hybrid import natural_key

HERE = Path(__file__).resolve().parent
DATA = Path("/work/shared/data/locomo/locomo-dev.json")
VECTORS = HERE / "vectors.npz"  # text -> e5 vector, passages and queries apart
# pair vectors (the shipped best configuration), or STUDY37_VECTORS=turn: e5 turn vectors
# (plain `hybrid`), to see whether a change holds on the default store too.
KIND = os.environ.get("STUDY37_VECTORS", "pair")
FEATURES = HERE / f"features-{KIND}.pkl"
POOL = 50  # the re-rankings reorder the shipped ranker's top 50
DRAWS, SEED = 2_000, 20261205  # the paired bootstrap of reports/paired-recall-dev-split-5.json
KS = (5, 10)


class CachedE5(E5Model):
    """E5Model whose vectors are kept on disk between runs (the same vectors: a miss is
    embedded by E5Model itself)."""

    def __init__(self) -> None:
        self.cache: dict[tuple[bool, str], Any] = {}
        if VECTORS.exists():
            held = np.load(VECTORS, allow_pickle=False)
            keys = json.loads(str(held["keys"]))
            for (query, text), vector in zip(keys, held["matrix"], strict=True):
                self.cache[(bool(query), text)] = vector
        self.dirty = False

    def _encode(self, texts: Sequence[str], query: bool) -> Any:
        missing = [t for t in dict.fromkeys(texts) if (query, t) not in self.cache]
        if missing:
            fresh = super().encode_query(missing) if query else super().encode(missing)
            for text, vector in zip(missing, fresh, strict=True):
                self.cache[(query, text)] = np.asarray(vector, dtype=np.float32)
            self.dirty = True
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self.cache[(query, t)] for t in texts])

    def encode(self, texts: Sequence[str]) -> Any:
        return self._encode(texts, False)

    def encode_query(self, texts: Sequence[str]) -> Any:
        return self._encode(texts, True)

    def save(self) -> None:
        if not self.dirty:
            return
        keys = list(self.cache)
        matrix = np.stack([self.cache[k] for k in keys]) if keys else np.zeros((0, 384))
        np.savez(VECTORS, keys=json.dumps(keys), matrix=matrix)
        self.dirty = False


def pair_model(base: E5Model) -> PairEmbedder:
    """What ``get_embedder("e5-pair")`` gives, over the cached E5."""
    return PairEmbedder(base, similarity_mean=E5_PAIR_MEAN, similarity_deviation=E5_PAIR_DEVIATION)


def shipped_ranker(model: Any) -> Any:
    """``memlib --embedder e5-pair eval locomo --ranker hybrid``'s ranker (or on e5 turns)."""
    return get_ranker("hybrid").with_model(model)


def conversations() -> tuple[LocomoConversation, ...]:
    return load_locomo(DATA)


def _query(conversation: LocomoConversation, question: Any, limit: int) -> Any:
    return normalize_recall_query(
        question.question,
        user_scope=conversation.user_scope,
        limit=min(limit, LIMIT_MAX),
        query_id=question.question_id,
        issued_at=conversation.as_of,
    )


def _signals(breakdown: Any) -> dict[str, float]:
    return {s.name: s.value for s in breakdown.signals}


def candidates_of(ranker: Any, index: ConversationVectors, conversation: Any, question: Any) -> list[dict[str, Any]]:
    """Every candidate of one question as the shipped ranker scores it, best first by
    stage 4's key: id, total, lexical coverage, captured_at and the signals."""
    query = _query(conversation, question, 10)
    scan, chosen, _ = ranker.score_stored(
        query,
        index.postings,
        index.dense,
        index.fetch,
        embedder=index.embedder,
        as_of=conversation.as_of,
        limit=10**6,
        neighbours=index.source_neighbours,
    )
    rows = []
    for i, breakdown in chosen:
        candidate = scan.candidates[i]
        rows.append(
            {
                "id": candidate.record.memory_id,
                "total": breakdown.total,
                "coverage": breakdown.lexical_coverage,
                "ts": candidate.captured_at.timestamp(),
                **_signals(breakdown),
            }
        )
    return rows


def build_features(progress: bool = True) -> dict[str, Any]:
    """Per conversation: its records' texts and times, and per question (categories 1-5)
    its category, evidence and every candidate's signals (checked against rank_question)."""
    if FEATURES.exists():
        with open(FEATURES, "rb") as handle:
            return pickle.load(handle)
    base = CachedE5()
    model = pair_model(base) if KIND == "pair" else base
    ranker = shipped_ranker(model)
    out: dict[str, Any] = {"conversations": []}
    for conversation in conversations():
        index = ConversationVectors(conversation.records, model)
        base.save()
        questions = []
        for question in conversation.questions:
            cands = candidates_of(ranker, index, conversation, question)
            shipped = rank_question(ranker, index, conversation, question, 10)
            assert tuple(c["id"] for c in cands[:10]) == shipped, question.question_id
            questions.append(
                {
                    "id": question.question_id,
                    "question": question.question,
                    "category": question.category,
                    "evidence": question.evidence,
                    "candidates": cands,
                }
            )
        base.save()
        out["conversations"].append(
            {
                "sample_id": conversation.sample_id,
                "as_of": conversation.as_of.timestamp(),
                "records": [
                    {
                        "id": r.memory_id,
                        "content": r.content,
                        "source": r.source.source_id,
                        "captured_at": r.source.captured_at,
                    }
                    for r in conversation.records
                ],
                "questions": questions,
            }
        )
        if progress:
            print(f"{conversation.sample_id}: {len(questions)} questions", file=sys.stderr)
    with open(FEATURES, "wb") as handle:
        pickle.dump(out, handle)
    return out


def neighbours_of(records: Sequence[dict[str, Any]]) -> dict[str, tuple[str | None, str | None]]:
    """Each turn's turn before and after in its session (natural id order, as hybrid)."""
    by_source: dict[str, list[str]] = {}
    for r in records:
        by_source.setdefault(r["source"], []).append(r["id"])
    out: dict[str, tuple[str | None, str | None]] = {}
    for ids in by_source.values():
        ids.sort(key=natural_key)
        for i, m in enumerate(ids):
            out[m] = (ids[i - 1] if i else None, ids[i + 1] if i + 1 < len(ids) else None)
    return out


def rank_key(c: dict[str, Any], total: float) -> tuple[float, float, float, str]:
    """Stage 4's key (memlib.rank.rank_key) with a re-ranked total, rounded as a breakdown's."""
    return (-round(total, 6), -c["coverage"], -c["ts"], c["id"])


Row = tuple[int, tuple[str, ...], tuple[str, ...]]
# A re-ranking: (conversation features, question features, params) -> ranked ids.
Rerank = Callable[[dict[str, Any], dict[str, Any], dict[str, float]], list[str]]


def rows_for(features: dict[str, Any], rerank: Rerank, params: dict[str, float]) -> list[list[Row]]:
    """Per conversation, each question's (category, evidence, top-10 ids) under ``rerank``."""
    out = []
    for conv in features["conversations"]:
        out.append(
            [
                (q["category"], tuple(q["evidence"]), tuple(rerank(conv, q, params)[:10]))
                for q in conv["questions"]
            ]
        )
    return out


def shipped_rows(features: dict[str, Any]) -> list[list[Row]]:
    return rows_for(features, lambda conv, q, p: [c["id"] for c in q["candidates"][:10]], {})


def headline(rows: Sequence[Row]) -> list[Row]:
    return [r for r in rows if r[0] in HEADLINE_CATEGORIES]


def metrics(rows: Sequence[Row]) -> dict[str, Any]:
    """R@5, R@10, Sany@10 (and the rest of memlib's set): categories 1-4, each, and 5 apart,
    1-5 together."""
    rows = list(rows)
    return {
        "overall": _metrics(headline(rows), KS),
        "by_category": {str(c): _metrics([r for r in rows if r[0] == c], KS) for c in (1, 2, 3, 4)},
        "category_5": _metrics([r for r in rows if r[0] == 5], KS),
        "categories_1_5": _metrics(rows, KS),
    }


def paired(a: list[list[Row]], b: list[list[Row]], metric: str, categories: Sequence[int]) -> dict[str, Any]:
    """benchmarks/paired_recall.py at 56ba18c: per-question differences, each conversation's
    questions drawn again with replacement, 2,000 draws, seed 20261205."""

    def value(row: Row) -> float:
        if metric == "R@10":
            return question_recall(row, 10)
        reached = {session_of(e) for e in row[1]} & {session_of(m) for m in row[2][:10]}
        return float(bool(reached))

    folds = [
        [value(x) - value(y) for x, y in zip(fa, fb, strict=True) if x[0] in categories]
        for fa, fb in zip(a, b, strict=True)
    ]
    n = sum(len(f) for f in folds)
    rng, draws = random.Random(SEED), []
    for _ in range(DRAWS):
        total = sum(f[int(rng.random() * len(f))] for f in folds for _ in f)
        draws.append(total / n)
    draws.sort()
    return {
        "difference": round(sum(map(sum, folds)) / n, 4),
        "interval_95": [round(draws[int(0.025 * DRAWS) - 1], 4), round(draws[int(0.975 * DRAWS) - 1], 4)],
        "share_of_draws_at_or_below_0": round(sum(d <= 0 for d in draws) / DRAWS, 4),
        "questions": n,
    }


def crossval(
    features: dict[str, Any], rerank: Rerank, grid: Sequence[dict[str, float]]
) -> dict[str, Any]:
    """memlib.eval.crossval's protocol over a re-ranking's grid: each conversation judged at
    the setting with the best R@10 (categories 1-4) on the other four, ties to the earlier
    setting (the grid starts at the shipped configuration); the CV figure is the mean of
    the folds; the interval memlib's bootstrap of the held-out questions. Then the
    held-out rows against the shipped ones, paired."""
    names = [c["sample_id"] for c in features["conversations"]]
    per_setting = [rows_for(features, rerank, p) for p in grid]

    def r10(setting: int, members: Sequence[int]) -> float:
        return _metrics(headline([r for m in members for r in per_setting[setting][m]]), KS)["R@10"]

    everyone = list(range(len(names)))
    held_rows: list[list[Row]] = []
    folds = []
    for held, train in leave_one_out(everyone):
        chosen = max(range(len(grid)), key=lambda s: (r10(s, train), -s))
        held_rows.append(per_setting[chosen][held])
        folds.append(
            {
                "held_out": names[held],
                "chosen": dict(grid[chosen]),
                "train_R@10": round(r10(chosen, train), 4),
                "held_out_metrics": metrics(per_setting[chosen][held]),
            }
        )
    keys = ("R@5", "R@10", "Sany@10", "Sall@10")

    def fold_mean(block: str, key: str) -> float:
        return round(sum(f["held_out_metrics"][block][key] for f in folds) / len(folds), 4)

    cv: dict[str, Any] = {
        block: {k: fold_mean(block, k) for k in keys} for block in ("overall", "category_5", "categories_1_5")
    }
    # Per category: the held-out questions pooled (a fold may hold none of a category).
    pooled = metrics([r for rows in held_rows for r in rows])
    cv["by_category_pooled"] = {
        c: {k: pooled["by_category"][c][k] for k in (*keys, "n")} for c in ("1", "2", "3", "4")
    }
    cv["R@10_interval_95"] = bootstrap_interval(
        [[question_recall(r, 10) for r in headline(rows)] for rows in held_rows]
    )
    best = max(range(len(grid)), key=lambda s: (r10(s, everyone), -s))
    base = shipped_rows(features)
    return {
        "grid": [dict(p) for p in grid],
        "folds": folds,
        "cross_validated": cv,
        "in_sample_by_setting": [
            {**dict(p), "R@10": r10(s, everyone)} for s, p in enumerate(grid)
        ],
        "in_sample": {"chosen": dict(grid[best]), **metrics([r for rows in per_setting[best] for r in rows])},
        "paired_vs_shipped": {
            "R@10 1-4": paired(held_rows, base, "R@10", HEADLINE_CATEGORIES),
            "Sany@10 1-4": paired(held_rows, base, "Sany@10", HEADLINE_CATEGORIES),
            "R@10 5": paired(held_rows, base, "R@10", (5,)),
            "R@10 1-5": paired(held_rows, base, "R@10", (1, 2, 3, 4, 5)),
        },
    }


def write(name: str, report: Any) -> None:
    if KIND != "pair":
        name = name.replace(".json", f"-{KIND}.json")
    report = {"vectors": KIND, **report}
    (HERE / name).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {HERE / name}", file=sys.stderr)
