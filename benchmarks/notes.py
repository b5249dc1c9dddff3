"""Notes vs turns: how well ``remember``-style notes are recalled, by turn and pair vectors.

``memlib mcp``'s ``remember`` stores every note under the one source ``mcp`` (unless the
caller names another), so a pair embedder (``--embedder e5-pair``) reads each note together
with the note stored before it, related or not. This measures what that costs or gains.

The notes corpus: every session *observation* of the LoCoMo development split (LoCoMo's
own short facts, e.g. "Caroline attended an LGBTQ support group recently…", each with the
dialogue turns it came from), one record per observation, stored as ``remember`` stores it
(content = summary = the observation, source ``mcp`` / ``mcp_tool``, title = the summary,
captured at its session's date), one user scope per conversation. The questions are the
split's (categories 1–4 with evidence, as ``memlib eval locomo``), ranked over their own
conversation's notes at its last session's date, through memlib's stages
(``memlib.eval.locomo.rank_question``; a store with vectors for ``hybrid``).

Truth: a note is a hit for a question when its evidence turns intersect the question's.
R@k = the share of the question's evidence turns covered by the evidence of the top-k
notes (the turn-level R@k, read through notes); H@k = the share of questions with at least
one hit in the top k. Questions none of whose evidence turns is behind any observation
cannot be answered from the notes: ``answerable`` reports the others apart.

Configurations: ``baseline``, ``bm25``, ``bm25+stopwords``; ``hybrid`` with ``e5`` (turn
vectors); ``hybrid`` with ``e5-pair`` and the default source ``mcp`` (what the server does
today with ``--embedder e5-pair``); ``hybrid`` with ``e5-pair`` and a source per session
(what a host gets by passing ``source_id``: each note read with the note before it from
the same conversation session); ``hybrid`` with ``e5-pair``, source ``mcp`` and the notes
stored in a seeded random order (each note read with an unrelated one: notes of many
threads interleaved). In session order, source ``mcp`` pairs a note with the one before
it, which is from the same session for 1,093 of the 1,222 notes. ``--turns`` adds the
same rankers on the split's turns (one record per turn, the README protocol) for reference.

    python -m benchmarks.notes [--data FILE] [--out reports/notes-YYYYMMDD.json] [--turns]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import LOCOMO_DEV, progress_log
from memlib._capabilities import DenseScoring
from memlib.eval.locomo import (
    DATE_FORMAT,
    ConversationIndex,
    ConversationVectors,
    LocomoConversation,
    clean_evidence,
    load_locomo,
    rank_question,
)
from memlib.rankers import get_ranker
from memlib.records import LIMITS, MemoryKind, MemorySource, StoredMemory, format_timestamp

KS = (5, 10)
LEXICAL = ("baseline", "bm25", "bm25+stopwords")
# name -> (ranker, embedder, source of each note: "mcp" or "session")
CONFIGS: dict[str, tuple[str, str | None, str]] = {
    **{name: (name, None, "mcp") for name in LEXICAL},
    "hybrid e5": ("hybrid", "e5", "mcp"),
    "hybrid e5-pair (source mcp)": ("hybrid", "e5-pair", "mcp"),
    "hybrid e5-pair (source per session)": ("hybrid", "e5-pair", "session"),
    "hybrid e5-pair (source mcp; order shuffled)": ("hybrid", "e5-pair", "shuffled"),
}
SHUFFLE_SEED = 7
TURN_CONFIGS: dict[str, tuple[str, str | None]] = {
    **{name: (name, None) for name in LEXICAL},
    "hybrid e5": ("hybrid", "e5"),
    "hybrid e5-pair": ("hybrid", "e5-pair"),
}


def _title(summary: str) -> str:
    """``remember``'s default title: the summary, on one line, cut to the title limit."""
    title = " ".join(summary.split())
    limit = LIMITS["title"]
    return title if len(title) <= limit else title[: limit - 1] + "…"


def note_records(
    sample: dict[str, Any], conversation: LocomoConversation, source: str
) -> tuple[list[StoredMemory], dict[str, frozenset[str]]]:
    """One conversation's observations as ``remember`` notes, and each note's evidence
    (memory ids of turns). ``source``: ``"mcp"`` (the default, notes stored in the order
    of the sessions), ``"session"`` (a source per session) or ``"shuffled"`` (source
    ``mcp``, stored in a seeded random order: the note before is any other note)."""
    sample_id = conversation.sample_id
    turn_ids = {r.memory_id.split("/", 1)[1] for r in conversation.records}
    dialogue = sample["conversation"]
    notes: list[StoredMemory] = []
    evidence: dict[str, frozenset[str]] = {}
    sessions = sorted(
        (int(key.split("_")[1]), value)
        for key, value in sample["observation"].items()
        if key.startswith("session_") and isinstance(value, dict)
    )
    for number, by_speaker in sessions:
        date = datetime.strptime(
            dialogue[f"session_{number}_date_time"].strip(), DATE_FORMAT
        ).replace(tzinfo=UTC)
        captured = format_timestamp(date)
        for items in by_speaker.values():
            for item in items:
                text, raw = str(item[0]).strip(), item[1] if len(item) > 1 else ()
                if not text:
                    continue
                raw = raw if isinstance(raw, list) else [raw]
                memory_id = f"{sample_id}/note-{len(notes):04d}"
                notes.append(
                    StoredMemory(
                        memory_id=memory_id,
                        user_scope=conversation.user_scope,
                        kind=MemoryKind.CONVERSATION,
                        content=text,
                        summary=text,
                        source=MemorySource(
                            source_id=f"session-{number}" if source == "session" else "mcp",
                            source_type="mcp_tool",
                            title=_title(text),
                            captured_at=captured,
                        ),
                        stored_at=captured,
                    )
                )
                evidence[memory_id] = frozenset(
                    f"{sample_id}/{e}" for e in clean_evidence(raw, turn_ids)
                )
    if source == "shuffled":
        random.Random(f"{SHUFFLE_SEED}/{sample_id}").shuffle(notes)
    return notes, evidence


def _ranker(name: str, embedder: str | None) -> Any:
    ranker: Any = get_ranker(name)
    if embedder:
        from memlib.rankers.embeddings import get_embedder

        ranker = ranker.with_model(get_embedder(embedder))
    return ranker


def _index(ranker: Any, records: Sequence[StoredMemory]) -> Any:
    if isinstance(ranker, DenseScoring):
        return ConversationVectors(records, ranker.model)  # type: ignore[attr-defined]
    return ConversationIndex(records)


def _metrics(rows: list[tuple[set[str], list[set[str]]]]) -> dict[str, float]:
    """``rows``: (question evidence, evidence turns of each ranked record, best first)."""
    out: dict[str, float] = {"n": len(rows)}
    for k in KS:
        recall = hit = 0.0
        for truth, ranked in rows:
            found = set().union(*ranked[:k]) & truth if ranked else set()
            recall += len(found) / len(truth)
            hit += 1.0 if found else 0.0
        out[f"R@{k}"] = round(recall / len(rows), 4) if rows else 0.0
        out[f"H@{k}"] = round(hit / len(rows), 4) if rows else 0.0
    return out


def run_notes(data: Path, log: Any, configs: Sequence[str] = tuple(CONFIGS)) -> dict[str, Any]:
    samples = json.loads(data.read_text(encoding="utf-8"))
    conversations = load_locomo(data)
    by_id = {s["sample_id"]: s for s in samples}
    results: dict[str, Any] = {}
    corpus: dict[str, Any] = {}
    for config in configs:
        name, embedder, source = CONFIGS[config]
        began = time.perf_counter()
        ranker = _ranker(name, embedder)
        rows: list[tuple[set[str], list[set[str]]]] = []
        answerable: list[tuple[set[str], list[set[str]]]] = []
        notes_total = 0
        for conversation in conversations:
            notes, evidence = note_records(by_id[conversation.sample_id], conversation, source)
            notes_total += len(notes)
            covered = set().union(*evidence.values())
            holder = replace(conversation, records=tuple(notes))
            index = _index(ranker, notes)
            for question in conversation.questions:
                if question.category not in (1, 2, 3, 4):
                    continue
                ranked = rank_question(ranker, index, holder, question, max(KS))
                row = (set(question.evidence), [set(evidence[m]) for m in ranked])
                rows.append(row)
                if covered & row[0]:
                    answerable.append(row)
        results[config] = {
            "ranker": name,
            "embedder": embedder,
            "note_source": source,
            "all": _metrics(rows),
            "answerable": _metrics(answerable),
            "seconds": round(time.perf_counter() - began, 1),
        }
        corpus = {"notes": notes_total, "questions": len(rows), "answerable": len(answerable)}
        log(f"notes {config}: {results[config]['all']} ({results[config]['seconds']} s)")
    return {"corpus": corpus, "results": results}


def run_turns(data: Path, log: Any) -> dict[str, Any]:
    conversations = load_locomo(data)
    results: dict[str, Any] = {}
    for config, (name, embedder) in TURN_CONFIGS.items():
        began = time.perf_counter()
        ranker = _ranker(name, embedder)
        rows: list[tuple[set[str], list[set[str]]]] = []
        for conversation in conversations:
            index = _index(ranker, conversation.records)
            for question in conversation.questions:
                if question.category in (1, 2, 3, 4):
                    ranked = rank_question(ranker, index, conversation, question, max(KS))
                    rows.append((set(question.evidence), [{m} for m in ranked]))
        results[config] = {
            "ranker": name,
            "embedder": embedder,
            "all": _metrics(rows),
            "seconds": round(time.perf_counter() - began, 1),
        }
        log(f"turns {config}: {results[config]['all']} ({results[config]['seconds']} s)")
    return {"results": results}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.notes", description=__doc__)
    parser.add_argument("--data", type=Path, default=LOCOMO_DEV)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--turns", action="store_true", help="also rank the split's turns")
    parser.add_argument(
        "--configs", default="", help=f"comma-separated, of {list(CONFIGS)} (default: all)"
    )
    args = parser.parse_args(argv)
    configs = [c.strip() for c in args.configs.split(",") if c.strip()] or list(CONFIGS)
    if unknown := [c for c in configs if c not in CONFIGS]:
        parser.error(f"unknown configs {unknown}; known: {list(CONFIGS)}")
    log = progress_log(time.monotonic())
    report: dict[str, Any] = {
        "benchmark": "notes-vs-turns",
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "data": str(args.data),
        "ks": list(KS),
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "truth": (
            "a note is a hit when its observation's evidence turns intersect the question's; "
            "R@k = share of the question's evidence turns covered by the top-k notes"
        ),
        "notes": run_notes(args.data, log, configs),
    }
    if args.turns:
        report["turns"] = run_turns(args.data, log)
    text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
