"""The floor of ``remember``'s "similar" (``memlib.agent.mcp_server.SIMILAR_FLOOR``),
measured on pairs of notes made from LoCoMo.

    .venv/bin/python -m benchmarks.similar_notes [--data PATH] [--out FILE] [--all-terms]

The method is ``PROTOCOL`` (and docs/mcp.md, "How similar is similar"). Each pair is
scored with the server's own function (``note_similarity`` of ``note_terms``); the
end-to-end check also runs the server's candidate step (``SIMILAR_RANKER``, top
``SIMILAR_CANDIDATES``) over a store of the whole conversation. ``--all-terms`` scores
with every term, stopwords included (the alternative the server does not use).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_FLOOR, Decimal
from pathlib import Path
from typing import Any

from benchmarks.common import LOCOMO_DEV, ROOT
from memlib import RecallEngine
from memlib._tokens import tokenize_all
from memlib.agent.mcp_server import SIMILAR_CANDIDATES, SIMILAR_RANKER
from memlib.agent.tools import note_similarity, note_terms
from memlib.stores import open_store

CALIBRATION = 3  # the first three conversations in file order; the rest are held out
SIMILAR = ("duplicate", "paraphrase")
PROTOCOL = (
    "Pairs of notes per LoCoMo conversation. paraphrase = (an observation, one of its "
    "evidence turns): the observation restates the turn. duplicate = (an evidence turn, "
    "the same turn lightly edited: two of delete one word, insert a filler word, lower "
    "case, change the end punctuation, seeded by the turn id). related = (an observation, "
    "another turn of the same session that is not its evidence, seeded): same people, "
    "same day, another fact. 'similar' = duplicate or paraphrase. Score = cosine of the "
    "content-word counts (memlib terms without English stopwords). Floor = the one that "
    "maximises F1 of 'similar' on the first three conversations (file order), rounded "
    "down to two decimals; precision and recall at it are reported on the other two "
    "(held out). End to end: the second note of a similar pair is searched among every "
    "turn of its conversation (bm25+stopwords, top 10, as the server does; a turn's "
    "summary is its first 200 characters); it counts only if found there and its score "
    "against the stored record (summary and content) is at or over the floor."
)
FILLERS = ("really", "actually", "just", "also")
_TURN_ID = re.compile(r"D\d+:\d+")


# The terms a note is scored on: the server's (content words), or every term.
def all_terms(text: str) -> Counter[str]:
    return Counter(tokenize_all(text))


TERMS: Mapping[str, Callable[[str], Counter[str]]] = {"content": note_terms, "all": all_terms}


@dataclass(frozen=True)
class Pair:
    conversation: str
    label: str  # duplicate, paraphrase or related
    first: str
    second: str
    second_id: str  # the dia_id of the turn in the pair (its stored record)
    score: float


def light_edit(text: str, seed: str) -> str:
    """``text`` with two small edits chosen by ``seed``: what a retried or re-typed note
    looks like."""
    rng = random.Random(seed)
    words = text.split()
    for edit in rng.sample(range(4), 2):
        if edit == 0 and len(words) > 3:
            del words[rng.randrange(len(words))]
        elif edit == 1:
            words.insert(rng.randrange(len(words) + 1), rng.choice(FILLERS))
        elif edit == 2:
            words = [w.lower() for w in words]
        elif words:
            last = words[-1].rstrip(".!?")
            words[-1] = last + rng.choice(("", ".", "!"))
    return " ".join(words) or text


def turns_of(conversation: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """dia_id -> (session key, text) of every turn."""
    talk = conversation["conversation"]
    out: dict[str, tuple[str, str]] = {}
    for key, turns in talk.items():
        if key.startswith("session_") and isinstance(turns, list):
            for turn in turns:
                out[turn["dia_id"]] = (key, turn["text"])
    return out


def observations_of(conversation: Mapping[str, Any]) -> Iterator[tuple[str, str, list[str]]]:
    """(session key, observation, evidence dia_ids) in file order."""
    for key, by_speaker in conversation.get("observation", {}).items():
        session = key.removesuffix("_observation")
        for items in by_speaker.values():
            for text, evidence in items:
                yield session, text, _TURN_ID.findall(json.dumps(evidence))


def make_pairs(conversation: Mapping[str, Any], terms: str = "content") -> list[Pair]:
    name = conversation["sample_id"]
    turns = turns_of(conversation)
    by_session: dict[str, list[str]] = {}
    for dia_id, (session, _) in turns.items():
        by_session.setdefault(session, []).append(dia_id)
    pairs: list[Pair] = []
    edited: set[str] = set()

    def pair(label: str, first: str, dia_id: str, second: str | None = None) -> None:
        second = turns[dia_id][1] if second is None else second
        score = note_similarity(TERMS[terms](first), TERMS[terms](second))
        pairs.append(Pair(name, label, first, second, dia_id, score))

    for number, (session, text, evidence) in enumerate(observations_of(conversation)):
        found = [e for e in evidence if e in turns]
        for dia_id in found:
            pair("paraphrase", text, dia_id)
            if dia_id not in edited:
                edited.add(dia_id)
                original = turns[dia_id][1]
                pair("duplicate", light_edit(original, f"{name}:{dia_id}"), dia_id, original)
        others = [d for d in by_session.get(session, []) if d not in evidence]
        if found and others:
            other = random.Random(f"{name}:{number}").choice(others)
            pair("related", text, other)
    return pairs


def figures(pairs: Sequence[Pair], floor: float) -> dict[str, Any]:
    flagged = [p for p in pairs if p.score >= floor]
    positives = sum(p.label in SIMILAR for p in pairs)
    true = sum(p.label in SIMILAR for p in flagged)
    precision = true / len(flagged) if flagged else 1.0
    recall = true / positives if positives else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    shares = {
        label: round(
            sum(p.score >= floor for p in pairs if p.label == label)
            / max(1, sum(p.label == label for p in pairs)),
            4,
        )
        for label in ("duplicate", "paraphrase", "related")
    }
    return {
        "floor": floor,
        "pairs": len(pairs),
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "flagged_share": shares,
    }


def best_floor(pairs: Sequence[Pair]) -> float:
    """The floor that maximises F1 on ``pairs`` (the smallest of equal ones), rounded
    down to two decimals."""
    grid = sorted({p.score for p in pairs if p.score > 0})
    best = max(grid, key=lambda f: (figures(pairs, f)["f1"], -f))
    return float(Decimal(repr(best)).quantize(Decimal("0.01"), rounding=ROUND_FLOOR))


def end_to_end(
    conversation: Mapping[str, Any], pairs: Sequence[Pair], floor: float, terms: str
) -> dict[str, list[int]]:
    """Share of each label that the server would name: its second turn is among the
    candidates of the first note in a store of the conversation, at or over the floor."""
    turns = turns_of(conversation)
    with tempfile.TemporaryDirectory() as folder:
        store = open_store(f"jsonl:{Path(folder) / 'records.jsonl'}", user_id="similar")
        store.append_many(
            {
                "kind": "conversation",
                "memory_id": dia_id,
                "content": text,
                "summary": text[:200],  # the turn's first 200 characters
                "source": {
                    "source_id": conversation["sample_id"],
                    "source_type": "locomo",
                    "title": session,
                    "captured_at": "2026-01-01T00:00:00Z",
                },
            }
            for dia_id, (session, text) in turns.items()
        )
        engine = RecallEngine(store, ranker=SIMILAR_RANKER)
        counts: dict[str, list[int]] = {}
        for p in pairs:
            hits = engine.recall(p.first, limit=SIMILAR_CANDIDATES).hits
            found = any(h.memory_id == p.second_id for h in hits)
            # Scored as the server scores a candidate: against its summary and content.
            summary, content = p.second[:200], p.second
            scored = TERMS[terms]
            stored = note_similarity(scored(p.first), scored(f"{summary} {content}"))
            named = found and stored >= floor
            counts.setdefault(p.label, [0, 0, 0])
            counts[p.label][0] += 1
            counts[p.label][1] += found
            counts[p.label][2] += named
        store.close()
    return counts


def run(data: Path, terms: str = "content") -> dict[str, Any]:
    began = time.perf_counter()
    text = data.read_text(encoding="utf-8")
    conversations = json.loads(text)
    per = [(c, make_pairs(c, terms)) for c in conversations]
    calibration = [p for c, ps in per[:CALIBRATION] for p in ps]
    held_out = [p for c, ps in per[CALIBRATION:] for p in ps]
    floor = best_floor(calibration)
    counts: dict[str, list[int]] = {}
    for conversation, ps in per[CALIBRATION:]:
        for label, (n, found, named) in end_to_end(conversation, ps, floor, terms).items():
            total = counts.setdefault(label, [0, 0, 0])
            total[0] += n
            total[1] += found
            total[2] += named
    e2e = {
        label: {
            "pairs": n,
            "candidate_found": round(found / n, 4),
            "named_similar": round(named / n, 4),
        }
        for label, (n, found, named) in sorted(counts.items())
    }
    curve = [
        figures(held_out, f / 100) | {"calibration_f1": figures(calibration, f / 100)["f1"]}
        for f in range(5, 100, 5)
    ]
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "data": str(data.name),
        "data_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "protocol": PROTOCOL,
        "similarity": "note_similarity(note_terms(a), note_terms(b))"
        if terms == "content"
        else "cosine of the counts of every term (stopwords included)",
        "candidates": {"ranker": SIMILAR_RANKER, "top": SIMILAR_CANDIDATES},
        "calibration": [c["sample_id"] for c, _ in per[:CALIBRATION]],
        "held_out": [c["sample_id"] for c, _ in per[CALIBRATION:]],
        "suggested_floor": floor,
        "at_floor": {
            "calibration": figures(calibration, floor),
            "held_out": figures(held_out, floor),
        },
        "held_out_end_to_end": e2e,
        "held_out_curve": curve,
        "seconds": round(time.perf_counter() - began, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=LOCOMO_DEV)
    day = datetime.now(UTC).strftime("%Y%m%d")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / f"similar-notes-{day}.json")
    parser.add_argument("--all-terms", action="store_true", help="score with stopwords too")
    args = parser.parse_args(argv)
    try:
        report = run(args.data, "all" if args.all_terms else "content")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"similar_notes: cannot read {args.data}: {exc}", file=sys.stderr)
        return 2
    at = report["at_floor"]
    print(f"suggested floor {report['suggested_floor']}")
    for part in ("calibration", "held_out"):
        row = at[part]
        print(
            f"  {part}: {row['pairs']} pairs, precision {row['precision']}, recall "
            f"{row['recall']}, F1 {row['f1']}, flagged {row['flagged_share']}"
        )
    for label, row in report["held_out_end_to_end"].items():
        print(f"  end to end, held out, {label}: {row}")
    try:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        print(f"similar_notes: cannot write {args.out}: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({report['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
