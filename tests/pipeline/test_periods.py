"""Periods a question names, and hybrid's credit to a record captured in one."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.locations import BACKENDS, Location, location
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

from memlib import RecallEngine
from memlib._periods import named_periods
from memlib.candidates import scan_recall_candidates
from memlib.normalize import normalize_recall_query
from memlib.rank import rank_scored_candidates
from memlib.rankers.embeddings import HashingEmbedder
from memlib.rankers.hybrid import PERIOD_WEIGHT, HybridRanker
from memlib.records import MemoryKind, MemorySource, StoredMemory, user_scope_for
from memlib.sample import SAMPLE_AS_OF

SCOPE = user_scope_for("tester")
AS_OF = datetime(2023, 11, 1, tzinfo=UTC)


def day(year: int, month: int, d: int) -> datetime:
    return datetime(year, month, d, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What did she paint on October 13, 2023?", [(day(2023, 10, 13), day(2023, 10, 14))]),
        ("What did he find on 1 February, 2023?", [(day(2023, 2, 1), day(2023, 2, 2))]),
        ("What happened in December 2023?", [(day(2023, 12, 1), day(2024, 1, 1))]),
        (
            "When did she go camping in June?",
            [(day(2023, 6, 1), day(2023, 7, 1)), (day(2022, 6, 1), day(2022, 7, 1))],
        ),
        ("What changed in 2022?", [(day(2022, 1, 1), day(2023, 1, 1))]),
        ("What did I read last week?", [(day(2023, 10, 25), AS_OF)]),
        ("May I ask what she painted?", []),
        ("Did they march in the parade?", []),
        (
            "What did they do in March?",
            [(day(2023, 3, 1), day(2023, 4, 1)), (day(2022, 3, 1), day(2022, 4, 1))],
        ),
        ("When did Caroline go to the support group?", []),
        # No such day (nor year 0): the month alone, and no error.
        (
            "What happened on 30 February, 2023, or 1 June, 0000?",
            [(day(2023, 2, 1), day(2023, 3, 1)), (day(2022, 2, 1), day(2022, 3, 1))]
            + [(day(2023, 6, 1), day(2023, 7, 1)), (day(2022, 6, 1), day(2022, 7, 1))],
        ),
        ("卡罗琳在2023年10月13日画了什么？", []),
    ],
)
def test_named_periods(text, expected):
    assert list(named_periods(text, AS_OF)) == expected
    assert named_periods(text, AS_OF.replace(tzinfo=None)) == named_periods(text, AS_OF)


def record(memory_id: str, captured_at: str) -> StoredMemory:
    return StoredMemory(
        memory_id=memory_id,
        user_scope=SCOPE,
        kind=MemoryKind.CONVERSATION,
        content="I painted a sunset with my kids",
        summary="s",
        stored_at=captured_at,
        source=MemorySource(
            source_id=f"src-{memory_id}", source_type="test", title="t", captured_at=captured_at
        ),
    )


def ranked(question: str, weight: float = PERIOD_WEIGHT) -> list[tuple[str, dict[str, float]]]:
    pytest.importorskip("numpy")
    records = (record("a", "2023-10-13T10:00:00Z"), record("b", "2023-10-20T10:00:00Z"))
    query = normalize_recall_query(question, user_scope=SCOPE, limit=2, query_id="q")
    scan = scan_recall_candidates(query, records)
    ranker = HybridRanker(model=HashingEmbedder(), period_weight=weight)
    breakdowns = ranker.score_candidates(query, scan, as_of=AS_OF)
    hits = rank_scored_candidates(query, zip(scan.candidates, breakdowns, strict=True))
    return [
        (h.memory_id, {s.name: s.contribution for s in h.score_breakdown.signals}) for h in hits
    ]


def test_hybrid_credits_a_record_captured_in_the_named_period():
    # Equal otherwise, the later record ranks first; the named day puts the earlier first.
    assert [m for m, _ in ranked("what did you paint with your kids?")] == ["b", "a"]
    assert all("period" not in signals for _, signals in ranked("what did you paint?"))
    dated = ranked("what did you paint with your kids on October 13, 2023?")
    assert [m for m, _ in dated] == ["a", "b"]
    assert dated[0][1]["period"] == PERIOD_WEIGHT
    assert dated[1][1]["period"] == 0.0
    # At weight 0 (a point of the cross-validation grid) the day names no preference.
    unweighted = ranked("what did you paint with your kids on October 13, 2023?", 0.0)
    assert [m for m, _ in unweighted] == ["b", "a"]


@pytest.fixture(params=BACKENDS)
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Location]:
    yield from location(request, tmp_path)


@pytest.mark.parametrize(
    ("question", "credited"),
    [
        ("what did we paint on August 3, 2026?", {"t-3"}),
        ("what did we paint last week?", {"t-3", "t-4", "t-5", "t-6", "t-7", "t-8"}),
        ("what did we paint in June?", set()),
    ],
)
def test_every_backend_credits_the_period_as_the_reference_does(
    opener: Location, question: str, credited: set[str]
) -> None:
    pytest.importorskip("numpy")
    embedder = HashingEmbedder()
    store = opener(embedder=embedder)
    store.append_many(
        {
            "kind": MemoryKind.CONVERSATION,
            "memory_id": f"t-{n}",
            "content": f"we paint the {word} together",
            "summary": word,
            "source": MemorySource(
                source_id="session-1",
                source_type="conversation_transcript",
                title="Session 1",
                captured_at=f"2026-08-{n:02d}T12:00:00Z",
            ),
        }
        for n, word in enumerate(("fence", "sunset", "lake", "boat", "barn", "dog", "sky"), 2)
    )
    ranker = HybridRanker(model=embedder)
    hits = (
        RecallEngine(store, ranker=ranker)
        .recall(question, limit=7, as_of=SAMPLE_AS_OF, query_id="q")
        .to_dict()["hits"]
    )
    query = normalize_recall_query(
        question, user_scope=store.user_scope, limit=7, query_id="q", issued_at=SAMPLE_AS_OF
    )
    scan = store.scan_candidates(query)
    chosen = ranker.score_top(query, scan, as_of=SAMPLE_AS_OF, limit=7)
    reference = rank_scored_candidates(query, [(scan.candidates[i], b) for i, b in chosen])
    assert hits == [hit.to_dict() for hit in reference]
    assert {h["memory_id"] for h in hits[: len(credited)]} == credited
    # By the signal too: "in June" names a period that holds none of them.
    period = {
        h["memory_id"]: s["value"]
        for h in hits
        for s in h["score_breakdown"]["signals"]
        if s["name"] == "period"
    }
    assert len(period) == len(hits)
    assert {m for m, value in period.items() if value == 1.0} == credited
