"""Exercises of ``08_profile.ipynb``."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...errors import RemoteMemoryError
from ...records import MemoryKind, MemorySource
from ...sample import fixed_clock, open_sample_store
from ...stores._base import MemoryStore
from ...stores.jsonl._store import RemoteMemoryStore
from ..language import tr
from ..views import recall
from . import Verdict, exercise, right, wrong
from ._common import as_function, missing_keys, shape_error

# 08.2: a fresh sample store, two retractions, then a session that starts on SESSION_DAY.
RETRACTED = ("profile-001", "conversation-005")
SESSION_DAY = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)
SESSION_QUERY = "embedding reranker"
SESSION_LIMIT = 5
PREDICTED = ("injected", "hits", "searched_records", "retracted_records")
_REQUEST = MemorySource(
    source_id="grader-request",
    source_type="user_request",
    title="Withdraw a record",
    captured_at="2026-08-10T07:00:00Z",
)


def _copy_of(store: Any, folder: Path) -> RemoteMemoryStore:
    """A JSONL store over a byte copy of ``store``'s file: the learner's store is only read."""
    if not isinstance(store, RemoteMemoryStore):
        raise shape_error("store= should be the notebook's JSONL store")
    target = folder / "records.jsonl"
    folder.mkdir(parents=True)
    if store.path.exists():
        target.write_bytes(store.path.read_bytes())
    return RemoteMemoryStore(target, user_id=store.user_id, clock=fixed_clock())


def _withdraws_every_profile(
    action: Callable[[MemoryStore], Any], copy: RemoteMemoryStore, label: str
) -> Verdict | None:
    """What is wrong after ``action`` ran on ``copy`` (None when nothing is)."""
    label = tr(label)
    before_bytes = copy.path.read_bytes() if copy.path.exists() else b""
    before = copy.read_all()
    try:
        action(copy)
    except RemoteMemoryError as exc:
        if "already retracted" in str(exc):
            return wrong(
                "on {label}: {exc} — retract only the profiles that still stand "
                "(store.latest_profile() names the one injected now)",
                label=label,
                exc=exc,
            )
        return wrong(
            "on {label} your function raised {kind}: {exc}",
            label=label,
            kind=type(exc).__name__,
            exc=exc,
        )
    after_bytes = copy.path.read_bytes() if copy.path.exists() else b""
    if not after_bytes.startswith(before_bytes):
        return wrong(
            "on {label} the file lost or changed lines: a store is never edited — "
            "retract(...) appends a record that withdraws another",
            label=label,
        )
    added = copy.read_all()[len(before) :]
    appended = [r.memory_id for r in added if r.kind is not MemoryKind.RETRACTION]
    if appended:
        return wrong(
            "on {label} your function appended {appended}: only a retraction withdraws a record",
            label=label,
            appended=", ".join(appended),
        )
    kinds = {r.memory_id: r.kind for r in before}
    conversations = [
        r.retracts
        for r in added
        if r.retracts is not None and kinds.get(r.retracts) is MemoryKind.CONVERSATION
    ]
    if conversations:
        return wrong(
            "on {label} you retracted {conversations}: a conversation is never "
            "injected at session start — it is gone from the hits, and the profile "
            "block is unchanged",
            label=label,
            conversations=", ".join(conversations),
        )
    latest = copy.latest_profile()
    if latest is not None:
        withdrew = [r.retracts for r in added if r.retracts is not None]
        after = "after retracting {withdrew}, " if withdrew else ""
        return wrong(
            "on {label}, {after}{memory_id} still stands, so it is injected: the "
            "latest standing profile takes the place of a retracted one",
            label=label,
            after=tr(after, withdrew=", ".join(withdrew)),
            memory_id=latest.memory_id,
        )
    return None


@exercise(
    "08.1",
    "a function that makes any store inject no profile",
    hints=(
        "Nothing is ever deleted: what withdraws a record is store.retract(memory_id, "
        "reason=..., source=...).",
        "Retracting the injected profile makes the next latest one the injected profile; and "
        "retracting a record twice is an error.",
        "Loop: while store.latest_profile() is not None, retract it.",
    ),
    solution=(
        "# Exercise 08.1 — solution\n"
        "def withdraw_every_profile(store):\n"
        "    # Each retraction exposes the next latest snapshot, so retract until none "
        "stands.\n"
        "    while (profile := store.latest_profile()) is not None:\n"
        '        store.retract(profile.memory_id, reason="The user asked to start without '
        'a profile.",\n'
        "                      source=request)\n"
        "\n\n"
        "answer = withdraw_every_profile"
    ),
    wrong_answers=(
        (lambda s: s.retract("profile-002", reason="r", source=_REQUEST), "profile-001 still"),
        (lambda s: s.retract("profile-001", reason="r", source=_REQUEST), "profile-002 still"),
        (lambda s: s.retract("conversation-003", reason="r", source=_REQUEST), "never injected"),
        (lambda s: s.path.write_bytes(b""), "lost or changed lines"),
        (
            lambda s: [
                s.retract(m, reason="r", source=_REQUEST)
                for m in ("profile-002", "profile-001", "profile-002")
            ],
            "already retracted",
        ),
        ("profile-001", "takes a store"),
    ),
)
def _inject_no_profile(answer: Any, store: Any = None) -> Verdict:
    as_function(answer, "takes a store and acts on it")
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        copies = {}
        if store is not None:
            copies["a copy of store as it stands"] = _copy_of(store, Path(root) / "yours")
        copies["a fresh sample store"] = open_sample_store(Path(root) / "fresh")
        for label, copy in copies.items():
            verdict = _withdraws_every_profile(answer, copy, label)
            if verdict is not None:
                return verdict
    where = "either copy" if len(copies) > 1 else "the copy"
    return right(
        "no profile stands in {where}: the session block is the empty string, and "
        "every profile is still in the file",
        where=tr(where),
    )


def _session() -> dict[str, Any]:
    """What 08.2 asks about, computed: the scenario run on a fresh sample store."""
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        store = open_sample_store(root)
        for memory_id in RETRACTED:
            store.retract(memory_id, reason="Withdrawn for the exercise.", source=_REQUEST)
        latest = store.latest_profile()
        result = recall(store, SESSION_QUERY, SESSION_DAY, SESSION_LIMIT)
    return {
        "injected": None if latest is None else latest.memory_id,
        "hits": [h.memory_id for h in result.hits],
        "searched_records": result.searched_records,
        "retracted_records": result.retracted_records,
    }


# 08.2's answer, of which each wrong answer below changes one value.
_SESSION = {
    "injected": "profile-002",
    "hits": ["conversation-006"],
    "searched_records": 12,
    "retracted_records": 1,
}


@exercise(
    "08.2",
    "a session after two retractions, predicted",
    hints=(
        "Two roads: the profile block (latest standing profile, no query, no as_of) and the "
        "recall (conversation records that stand, scored at as_of).",
        "A retraction removes its target from both roads; the counts of the recall count "
        "conversation records only.",
        "Which conversations hold “embedding” or “reranker”? The records table of 01 or 03 "
        "has their text.",
    ),
    solution=(
        "# Exercise 08.2 — solution\n"
        'answer = {"injected": "profile-002", "hits": ["conversation-006"], '
        '"searched_records": 12,\n'
        '          "retracted_records": 1}'
    ),
    wrong_answers=(
        ({**_SESSION, "injected": None}, "takes no as_of"),
        ({**_SESSION, "hits": ["conversation-005", "conversation-006"]}, "never a hit"),
        ({**_SESSION, "searched_records": 13}, "left out before the search"),
        ({**_SESSION, "searched_records": 11}, "not searched at all"),
        ({**_SESSION, "retracted_records": 2}, "not counted"),
        ({"injected": "profile-001"}, "needs the keys"),
        ({**_SESSION, "injected": "profile-001", "hits": []}, "is retracted"),
        (["profile-002"], "should be a dict"),
    ),
)
def _session_prediction(answer: Any) -> Verdict:
    missing = missing_keys(answer, PREDICTED)
    if missing is not None:
        return missing
    want = _session()
    injected = answer["injected"]
    if injected != want["injected"]:
        if injected is None:
            return wrong(
                "the profile block takes no as_of: a session gets the latest standing "
                "snapshot, even one captured after the day the session starts"
            )
        if injected in RETRACTED:
            return wrong("{injected} is retracted: it is never injected again", injected=injected)
        return wrong("{injected!r} is not the latest profile that still stands", injected=injected)
    hits = answer["hits"]
    if isinstance(hits, str) or not isinstance(hits, (list, tuple)):
        return wrong("“hits” should be the list of memory ids recall returns, in rank order")
    if list(hits) != want["hits"]:
        retracted_hits = [h for h in hits if h in RETRACTED]
        if retracted_hits:
            return wrong(
                "{retracted_hits} is retracted: a retracted record is never a hit",
                retracted_hits=", ".join(retracted_hits),
            )
        return wrong(
            "the hits are not {hits}: which conversations share a term with "
            "“{session_query}” and still stand?",
            hits=list(hits),
            session_query=SESSION_QUERY,
        )
    searched, retracted = answer["searched_records"], answer["retracted_records"]
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (searched, retracted)):
        return wrong("searched_records and retracted_records are whole numbers")
    if searched != want["searched_records"]:
        if searched > want["searched_records"]:
            return wrong(
                "searched_records counts the conversation records that still stand: a "
                "retracted one is left out before the search"
            )
        return wrong(
            "the retracted profile was never among the searched records: profiles are "
            "not searched at all"
        )
    if retracted != want["retracted_records"]:
        return wrong(
            "retracted_records counts the withdrawn conversation records only: a "
            "profile is never searched, so its retraction is not counted"
        )
    return right(
        "the profile block ignores as_of and retractions only remove: "
        "{searched_records} searched, {retracted_records} retracted",
        searched_records=want["searched_records"],
        retracted_records=want["retracted_records"],
    )
