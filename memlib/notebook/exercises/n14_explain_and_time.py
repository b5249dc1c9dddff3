"""Exercises of ``14_explain_and_time.ipynb``."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...engine import RecallEngine
from ...errors import RemoteMemoryError
from ...records import MemoryKind, StoredMemory
from ...result import RecallHit
from ...sample import SAMPLE_AS_OF, fixed_clock, open_sample_store
from ...stores._base import MemoryStore
from ...stores.jsonl._store import RemoteMemoryStore
from .._common import QUERY_ID
from ..history import LATER_AS_OF, RETENTION_ITEM, history_store
from . import Verdict, exercise, right, wrong
from ._common import as_function, as_number, missing_keys, shape_error

# 14.1: a fresh sample store; conversation-006 for "embedding reranker" at limit 1.
TIE_QUERY = "embedding reranker"
TIE_RECORD = "conversation-006"
EXPLAINED = ("verdict", "rank", "deciding")
# 14.2: the notebook's history, as known at KNOWN_AT.
PAST_QUERY = "layered memory design"
KNOWN_AT = datetime(2026, 8, 11, 9, 30, tzinfo=UTC)
PAST_LIMIT = 3
# 14.3: replace conversation-009 by RETENTION_ITEM, stored at REPLACED_AT.
REPLACED = "conversation-009"
REPLACED_AT = datetime(2026, 8, 11, 12, 0, tzinfo=UTC)
RETENTION_QUERY = "conversation memory kept"
# 14.4: a floor for PAST_QUERY over the whole history.
FLOOR_LIMIT = 5


# -- 14.1 -------------------------------------------------------------------------------------


def _tie_explained() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        said = RecallEngine(open_sample_store(root)).explain(
            TIE_QUERY, TIE_RECORD, limit=1, as_of=SAMPLE_AS_OF, query_id=QUERY_ID
        )
    return {"verdict": said.verdict, "rank": said.rank, "deciding": said.deciding}


@exercise(
    "14.1",
    "explain a record tied out of the only place",
    hints=(
        "explain names the first stage that stopped the record. Does conversation-006 share a "
        "term with “embedding reranker”? Is it retracted?",
        "Compare conversation-005 and conversation-006 key by key: total, lexical_coverage, "
        "captured_at, memory_id (notebook 05).",
        'Confirm in a scratch cell: history.explain(fresh_store, "embedding reranker", '
        '"conversation-006", SAMPLE_AS_OF, 1) on a new open_sample_store.',
    ),
    solution=(
        "# Exercise 14.1 — solution\n"
        'answer = {"verdict": "below_cut", "rank": 2,\n'
        '          "deciding": "memory_id (tie-breaker)"}'
    ),
    wrong_answers=(
        ({"verdict": "no_shared_term", "rank": None, "deciding": None}, "it is a candidate"),
        ({"verdict": "retracted", "rank": 2, "deciding": None}, "nothing is retracted"),
        ({"verdict": "hit", "rank": 1, "deciding": None}, "keeps one hit"),
        ({"verdict": "below_cut", "rank": 3, "deciding": "memory_id"}, "count the candidates"),
        ({"verdict": "below_cut", "rank": 2, "deciding": "recency"}, "same instant"),
        (
            {"verdict": "below_cut", "rank": 2, "deciding": "lexical_coverage (tie-breaker)"},
            "coverage is equal",
        ),
        ({"verdict": "below_cut"}, "needs the keys"),
        ("below_cut", "should be a dict"),
    ),
)
def _predict_explain(answer: Any) -> Verdict:
    missing = missing_keys(answer, EXPLAINED)
    if missing is not None:
        return missing
    want = _tie_explained()
    verdict = answer["verdict"]
    if verdict != want["verdict"]:
        if verdict == "no_shared_term":
            return wrong(
                "{tie_record} holds both “embedding” and “reranker”: it is a "
                "candidate, and it was scored",
                tie_record=TIE_RECORD,
            )
        if verdict in ("retracted", "superseded"):
            return wrong("nothing is retracted or superseded in a fresh sample store")
        if verdict == "hit":
            return wrong("limit=1 keeps one hit, and it is not this record")
        return wrong(
            "{verdict!r} is not the verdict: which stage does a scored candidate reach "
            "when another one takes the only place?",
            verdict=verdict,
        )
    rank = answer["rank"]
    if rank != want["rank"]:
        return wrong(
            "rank {rank!r}: count the candidates that hold both terms; this one is the "
            "last of them",
            rank=rank,
        )
    deciding = str(answer["deciding"])
    if not deciding.startswith("memory_id"):
        if deciding.startswith(("recency", "captured_at")):
            return wrong(
                "conversation-005 and conversation-006 were captured at the same "
                "instant: their recency and captured_at are equal"
            )
        if deciding.startswith(("lexical", "lexical_coverage")):
            return wrong("both records cover both terms: their coverage is equal")
        return wrong(
            "{deciding!r} did not decide: the totals are equal, so stage 4's "
            "tie-breakers are read in order — which is the first that differs?",
            deciding=deciding,
        )
    return right(
        "a perfect tie down to the last key: memory_id, the one key that is unique, "
        "puts conversation-005 first"
    )


# -- 14.2 -------------------------------------------------------------------------------------


def _later_hits(
    store: MemoryStore, query: str, limit: int, **options: Any
) -> tuple[RecallHit, ...]:
    """A recall at ``LATER_AS_OF`` with the notebooks' query id (``options``: known_at …)."""
    engine = RecallEngine(store)
    return engine.recall(query, limit=limit, as_of=LATER_AS_OF, query_id=QUERY_ID, **options).hits


def _known_hits() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        hits = _later_hits(history_store(root), PAST_QUERY, PAST_LIMIT, known_at=KNOWN_AT)
    return [h.memory_id for h in hits]


@exercise(
    "14.2",
    "recall the history as known at 09:30 on 11 August",
    hints=(
        "known_at keeps the records and retractions with stored_at at or before it; as_of "
        "only scores. List the three later writes with their stored_at.",
        "At 09:30: the supersede (09:00) is in, the retraction of conversation-008 (10:00) and "
        "the import of conversation-015 (12 August) are not.",
        'Confirm with history.known_at_view(store, "layered memory design", LATER_AS_OF, 3, '
        "[...]) in a scratch cell.",
    ),
    solution=(
        "# Exercise 14.2 — solution\n"
        'answer = ["conversation-003", "conversation-014", "conversation-008"]'
    ),
    wrong_answers=(
        (["conversation-003", "conversation-015", "conversation-014"], "stored on 12 August"),
        (["conversation-003", "conversation-001", "conversation-008"], "superseded at 09:00"),
        (["conversation-003", "conversation-014", "conversation-009"], "still stood"),
        (["conversation-003", "conversation-008", "conversation-009"], "stored at 09:00"),
        (["conversation-014", "conversation-003", "conversation-008"], "rank order"),
        ("conversation-003", "list of hit memory ids"),
    ),
)
def _predict_known_at(answer: Any) -> Verdict:
    if isinstance(answer, str) or not isinstance(answer, list | tuple):
        raise shape_error("the answer should be the list of hit memory ids, in rank order")
    hits = list(answer)
    want = _known_hits()
    if hits == want:
        return right(
            "at 09:30 on 11 August the supersede had happened, the café retraction and "
            "the late import had not: known_at filters by stored_at alone"
        )
    if "conversation-015" in hits:
        return wrong(
            "conversation-015 was stored on 12 August, after known_at: it did not "
            "exist yet, however old its captured_at"
        )
    if "conversation-001" in hits:
        return wrong(
            "conversation-001 was superseded at 09:00, before known_at: its retraction "
            "was already stored"
        )
    if "conversation-008" not in hits:
        return wrong(
            "conversation-008 was retracted at 10:00, after known_at: at 09:30 it still stood"
        )
    if "conversation-014" not in hits:
        return wrong(
            "conversation-014 was stored at 09:00, before known_at, and it shares "
            "“memory”; captured the day before as_of, it is very recent"
        )
    return wrong(
        "the right records, but not in rank order (or not {past_limit} of them): score "
        "them at as_of, the later clock",
        past_limit=PAST_LIMIT,
    )


# -- 14.3 -------------------------------------------------------------------------------------


def _copy_of(folder: Path) -> RemoteMemoryStore:
    store = open_sample_store(folder)
    return RemoteMemoryStore(store.path, user_id=store.user_id, clock=fixed_clock(REPLACED_AT))


def _withdraw(store: MemoryStore) -> StoredMemory:
    """A wrong answer to 14.3, alone or before an append: only the retraction."""
    return store.retract(REPLACED, reason="r", source=RETENTION_ITEM["source"])


@exercise(
    "14.3",
    "replace a memory and keep its history",
    hints=(
        "Replacing is two facts: the new record, and the old one withdrawn. Written apart, "
        "they could be half done, and nothing would link them.",
        "store.supersede(old_id, new_item, reason=...) writes both in one batch and links "
        "them: new.supersedes and the retraction's superseded_by.",
        'def replace(store): store.supersede("conversation-009", RETENTION_ITEM, reason="...")',
    ),
    solution=(
        "# Exercise 14.3 — solution\n"
        "def replace_retention(store):\n"
        "    # One batch: the new record and the old one's retraction, naming each other.\n"
        '    store.supersede("conversation-009", RETENTION_ITEM,\n'
        '                    reason="The retention period changed to six months.")\n'
        "\n\n"
        "answer = replace_retention"
    ),
    wrong_answers=(
        (lambda s: s.append(**RETENTION_ITEM), "still stands"),
        (lambda s: (_withdraw(s), s.append(**RETENTION_ITEM)), "do not name each other"),
        (_withdraw, "nothing replaces it"),
        (
            lambda s: s.supersede("conversation-001", dict(RETENTION_ITEM), reason="r"),
            "not conversation-009",
        ),
        ("conversation-009", "takes a store"),
    ),
)
def _replace_retention(answer: Any) -> Verdict:
    as_function(answer, "takes a store and acts on it")
    new_id = RETENTION_ITEM["memory_id"]
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        store = _copy_of(Path(root))
        before = store.read_all()
        try:
            answer(store)
        except RemoteMemoryError as exc:
            return wrong("your function raised {kind}: {exc}", kind=type(exc).__name__, exc=exc)
        verdict = _replaced(store, before, new_id)
    return verdict


def _replaced(store: MemoryStore, before: tuple[Any, ...], new_id: str) -> Verdict:
    added = store.read_all()[len(before) :]
    by_id = {r.memory_id: r for r in added}
    retractions = [r for r in added if r.kind is MemoryKind.RETRACTION]
    if new_id not in by_id:
        if retractions:
            return wrong(
                "{replaced} is withdrawn, but nothing replaces it: where is {new_id}?",
                replaced=REPLACED,
                new_id=new_id,
            )
        return wrong("{new_id} was not written: pass the prepared item to the store", new_id=new_id)
    if not any(r.retracts == REPLACED for r in retractions):
        others = [r.retracts for r in retractions]
        if others:
            return wrong(
                "you replaced {others}, not {replaced}",
                others=", ".join(map(str, others)),
                replaced=REPLACED,
            )
        return wrong(
            "{replaced} still stands: append adds a record beside it, and recall now shows both",
            replaced=REPLACED,
        )
    new = by_id[new_id]
    link = next(r for r in retractions if r.retracts == REPLACED)
    if new.supersedes != REPLACED or link.superseded_by != new_id:
        return wrong(
            "the two records do not name each other: a retract and an append are two "
            "writes, and nothing links them — supersede writes both in one batch, "
            "linked both ways"
        )
    now = [h.memory_id for h in _later_hits(store, RETENTION_QUERY, 5)]
    then = [h.memory_id for h in _later_hits(store, RETENTION_QUERY, 5, known_at=SAMPLE_AS_OF)]
    if REPLACED in now or new_id not in now or REPLACED not in then:
        return wrong("recall should show the new record now and the old one before the change")
    return right(
        "{new_id} supersedes {replaced}: recall shows it, known_at before the change "
        "still shows {replaced}, and explain names the successor",
        new_id=new_id,
        replaced=REPLACED,
    )


# -- 14.4 -------------------------------------------------------------------------------------


def _floor_facts() -> list[tuple[str, float, float]]:
    """The unfloored hits of 14.4's recall: (memory_id, score, lexical coverage)."""
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        hits = _later_hits(history_store(root), PAST_QUERY, FLOOR_LIMIT)
    return [(h.memory_id, h.score, h.score_breakdown.lexical_coverage) for h in hits]


@exercise(
    "14.4",
    "a floor that keeps only the full matches",
    hints=(
        "With the baseline, total = 0.85 × coverage + 0.15 × recency. What is the least a "
        "record that matches all three terms can score? The most one that matches two?",
        'history.floor_view(store, "layered memory design", LATER_AS_OF, 5, [None]) shows '
        "the scores; any floor between the best partial and the worst full match works.",
    ),
    solution=(
        "# Exercise 14.4 — solution\n"
        "answer = 0.85  # full coverage alone gives 0.85; two of three terms at most 0.7167"
    ),
    wrong_answers=(
        (0.3, "keeps partial matches"),
        (0.99, "drops a hit"),
        ("suggested", "tuned on LoCoMo"),
        ("0.85", "should be a number"),
    ),
)
def _full_coverage_floor(answer: Any) -> Verdict:
    if answer == "suggested":
        return wrong(
            "the suggested floor (0.34 for the baseline) is tuned on LoCoMo to keep "
            "98% of its recall: here it keeps weak partial matches — pick your own"
        )
    floor = as_number(answer, "min_score")
    facts = _floor_facts()
    full = [m for m, _, coverage in facts if coverage == 1.0]
    lowest_full = min(score for _, score, coverage in facts if coverage == 1.0)
    partial = [score for _, score, coverage in facts if coverage < 1.0]
    kept = [m for m, score, _ in facts if score >= floor]
    if kept == full:
        return right(
            "every hit under {floor:g} covers fewer terms: with all three terms the "
            "lexical part alone is 0.85, and recency adds at most 0.15",
            floor=floor,
        )
    if floor > lowest_full:
        return wrong(
            "{floor:g} drops a hit that matches all three terms (the lowest of them "
            "scores {lowest_full:.6f})",
            floor=floor,
            lowest_full=lowest_full,
        )
    return wrong(
        "{floor:g} keeps partial matches (the best of them scores {partial:.6f}): raise it",
        floor=floor,
        partial=max(partial),
    )
