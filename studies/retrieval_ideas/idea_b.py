"""Idea B: neighbouring turns at ranking time, beyond hybrid's context_weight, on the shipped
configuration's top 50. (Shipped already: pair vectors hold the turn before; the dense
part averages in the next pair's cosine; context_weight 0.5 adds the best own score of
the turn before or after.) Three families:

  B1 window BM25: total' = total + w * BM25 of the window text (the turn + the next turn,
     or the turn before + the turn + the next), scaled by the best window's, as hybrid
     scales BM25 (memlib's bm25_scores over a ConversationIndex of window texts).
  B2 wider context: total' = total + w * the best own score (0.3 BM25 + 0.7 dense, as
     hybrid's context reads it) of the turns two before and two after.
  B3 propagation: total' = max(total, l * the best total of the turns before and after),
     so a turn next to a strong one rises with it (second-order smoothing).

Plus, for the multi-hop misses of step 1 (not a neighbour idea; measured because the
features were there):
  C  session cap: at most m turns of one session in the top 10 (the rest move down).

    cd /work/main && .venv/bin/python studies/retrieval_ideas/idea_b.py     (writes idea_b.json)"""

from __future__ import annotations

import pickle
from typing import Any

from common import HERE, POOL, build_features, crossval, neighbours_of, rank_key, write
from memlib.eval.locomo import ConversationIndex, session_of
from memlib.normalize import normalize_recall_query
from memlib.rankers.bm25 import DEFAULT_B, DEFAULT_K1, bm25_scores
from memlib.records import MemoryKind, MemorySource, StoredMemory
from memlib.rankers.hybrid import PAIR_BM25_WEIGHT

WINDOWS = HERE / "windows.pkl"
DENSE_WEIGHT = round(1 - PAIR_BM25_WEIGHT, 2)


def _window_records(conv: dict[str, Any], scope: str, before: bool) -> list[StoredMemory]:
    text = {r["id"]: r["content"] for r in conv["records"]}
    around = neighbours_of(conv["records"])
    out = []
    for r in conv["records"]:
        prev, nxt = around[r["id"]]
        parts = ([text[prev]] if before and prev else []) + [r["content"]]
        parts += [text[nxt]] if nxt else []
        out.append(
            StoredMemory(
                memory_id=r["id"],
                user_scope=scope,
                kind=MemoryKind.CONVERSATION,
                content="\n".join(parts),
                summary="\n".join(parts)[:2000],
                source=MemorySource(
                    source_id=r["source"], source_type="locomo_turn", title=r["source"],
                    captured_at=r["captured_at"],
                ),
                stored_at=r["captured_at"],
            )
        )
    return out


def window_bm25(features: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """{window: {question id: {turn id: BM25 of its window text / the best}}}, kept on disk."""
    if WINDOWS.exists():
        with open(WINDOWS, "rb") as handle:
            return pickle.load(handle)
    from datetime import UTC, datetime

    from memlib.eval.locomo import load_locomo
    from common import DATA

    scopes = {c.sample_id: c.user_scope for c in load_locomo(DATA)}
    out: dict[str, dict[str, dict[str, float]]] = {"next": {}, "both": {}}
    for conv in features["conversations"]:
        scope = scopes[conv["sample_id"]]
        as_of = datetime.fromtimestamp(conv["as_of"], UTC)
        for window, before in (("next", False), ("both", True)):
            index = ConversationIndex(_window_records(conv, scope, before))
            for q in conv["questions"]:
                query = normalize_recall_query(
                    q["question"], user_scope=scope, limit=10, query_id=q["id"], issued_at=as_of
                )
                scan = index.scan(query)
                scores = bm25_scores(query, scan, k1=DEFAULT_K1, b=DEFAULT_B, stopwords=True)
                best = max(scores.totals, default=0.0)
                out[window][q["id"]] = {
                    c.record.memory_id: (t / best if best > 0 else 0.0)
                    for c, t in zip(scan.candidates, scores.totals, strict=True)
                }
    with open(WINDOWS, "wb") as handle:
        pickle.dump(out, handle)
    return out


def _own(c: dict[str, Any]) -> float:
    return PAIR_BM25_WEIGHT * c["bm25"] + DENSE_WEIGHT * c["dense"]


_AROUND: dict[str, dict[str, tuple[str | None, str | None]]] = {}


def _around(conv: dict[str, Any]) -> dict[str, tuple[str | None, str | None]]:
    if conv["sample_id"] not in _AROUND:
        _AROUND[conv["sample_id"]] = neighbours_of(conv["records"])
    return _AROUND[conv["sample_id"]]


def _reorder(q: dict[str, Any], totals: dict[str, float]) -> list[str]:
    cands = q["candidates"]
    pool = sorted((rank_key(c, totals[c["id"]]), c["id"]) for c in cands[:POOL])
    return [m for _, m in pool] + [c["id"] for c in cands[POOL:]]


def make_rerank(windows: dict[str, dict[str, dict[str, float]]]) -> Any:
    def rerank(conv: dict[str, Any], q: dict[str, Any], p: dict[str, Any]) -> list[str]:
        cands = q["candidates"]
        family = p.get("family")
        if family is None or not p.get("w"):
            return [c["id"] for c in cands[:10]]
        w = p["w"]
        if family == "C":
            return _session_cap(cands, int(w))
        by_id = {c["id"]: c for c in cands}
        around = _around(conv)
        floor = min((_own(c) for c in cands), default=0.0)  # a turn no path reached
        totals = {}
        for c in cands[:POOL]:
            m = c["id"]
            if family == "B1":
                extra = w * windows[p["window"]][q["id"]].get(m, 0.0)
                totals[m] = c["total"] + extra
            elif family == "B2":
                prev, nxt = around[m]
                far = [around[prev][0] if prev else None, around[nxt][1] if nxt else None]
                owns = [_own(by_id[f]) if f in by_id else floor for f in far if f]
                totals[m] = c["total"] + w * max(owns, default=0.0)
            else:  # B3
                near = [n for n in around[m] if n]
                best = max((by_id[n]["total"] for n in near if n in by_id), default=-9.0)
                totals[m] = max(c["total"], w * best)
        return _reorder(q, totals)

    return rerank


def _session_cap(cands: list[dict[str, Any]], cap: int) -> list[str]:
    top, rest, seen = [], [], {}
    for c in cands:
        s = session_of(c["id"])
        if seen.get(s, 0) < cap and len(top) < 10:
            top.append(c["id"])
            seen[s] = seen.get(s, 0) + 1
        else:
            rest.append(c["id"])
    return top + rest


GRIDS = {
    "B1 window BM25": [{}]
    + [
        {"family": "B1", "window": window, "w": w}
        for window in ("next", "both")
        for w in (0.05, 0.1, 0.15, 0.2, 0.3)
    ],
    "B2 context two turns away": [{}] + [{"family": "B2", "w": w} for w in (0.05, 0.1, 0.2, 0.3, 0.4, 0.5)],
    "B3 propagation": [{}] + [{"family": "B3", "w": w} for w in (0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)],
    "C session cap": [{}] + [{"family": "C", "w": m} for m in (6, 5, 4, 3, 2)],
}


if __name__ == "__main__":
    features = build_features()
    rerank = make_rerank(window_bm25(features))
    uncovered = sum(
        len(conv["records"]) - len(q["candidates"])
        for conv in features["conversations"]
        for q in conv["questions"]
    )
    report: dict[str, Any] = {"pool": POOL, "turns_outside_candidates": uncovered, "families": {}}
    for name, grid in GRIDS.items():
        report["families"][name] = crossval(features, rerank, grid)
    write("idea_b.json", report)
