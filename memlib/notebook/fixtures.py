"""Fixtures: stores and files built for the course, some of them destructive: each writes
only under the folder or file it is given, so point them at a temporary folder.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import RemoteMemoryDuplicateError, RemoteMemoryError
from ..records import MemoryKind, MemorySource
from ..sample import SAMPLE_USER_ID, fixed_clock, sample_records, scope_path
from ..stores.jsonl._store import RemoteMemoryStore
from ._common import pandas

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


def conversation_item(
    memory_id: str = "conversation-new",
    *,
    content: str = "A new conversation about layered memory.",
    summary: str = "New conversation.",
    title: str = "New conversation",
    captured_at: str = "2026-08-10T10:00:00Z",
) -> dict[str, Any]:
    """A valid ``append`` item; change one keyword to break one rule (a bad source fails
    here, before anything reaches the store)."""
    return {
        "kind": MemoryKind.CONVERSATION,
        "memory_id": memory_id,
        "content": content,
        "summary": summary,
        "source": MemorySource(
            source_id=f"transcript-{memory_id}",
            source_type="conversation_transcript",
            title=title,
            captured_at=captured_at,
        ),
    }


def conversation_store(
    root: str | os.PathLike[str],
    name: str,
    rows: Iterable[Sequence[str]],
    *,
    user_id: str = SAMPLE_USER_ID,
) -> RemoteMemoryStore:
    """A fresh JSONL store under ``root/name``, one conversation record per row
    ``(memory_id, captured_at, text)``, the text both summary and content."""
    store = RemoteMemoryStore(
        scope_path(Path(root) / name, user_id), user_id=user_id, clock=fixed_clock()
    )
    store.append_many(
        conversation_item(
            memory_id, content=text, summary=text, title=memory_id, captured_at=captured_at
        )
        for memory_id, captured_at, text in rows
    )
    return store


def shuffled_sample_store(
    root: str | os.PathLike[str], seed: int | None, *, user_id: str = SAMPLE_USER_ID
) -> RemoteMemoryStore:
    """The sample corpus shuffled by ``random.Random(seed)``, a folder per seed."""
    items = list(sample_records())
    if seed is not None:
        random.Random(seed).shuffle(items)
    folder = Path(root) / ("original" if seed is None else f"seed-{seed}")
    store = RemoteMemoryStore(scope_path(folder, user_id), user_id=user_id, clock=fixed_clock())
    store.append_many(items)
    return store


def damaged_copy(
    source: str | os.PathLike[str],
    folder: str | os.PathLike[str],
    line: int,
    garbage: bytes = b"{not json",
    *,
    user_id: str = SAMPLE_USER_ID,
) -> RemoteMemoryStore:
    """A store over a copy of ``source`` in ``folder``, ``line`` (1-based) now ``garbage``."""
    copy = Path(folder) / "records.jsonl"
    copy.parent.mkdir(parents=True, exist_ok=True)
    lines = Path(source).read_bytes().split(b"\n")
    lines[line - 1] = garbage
    copy.write_bytes(b"\n".join(lines))
    return RemoteMemoryStore(copy, user_id=user_id)


def tear_last_line(path: str | os.PathLike[str], keep: float = 0.5) -> int:
    """Append the first ``keep`` fraction of the last record, no newline: what a writer that
    died before ``fsync`` returned leaves. Returns the bytes appended."""
    target = Path(path)
    last = target.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    torn = last[: max(1, int(len(last) * keep))]
    with open(target, "ab") as handle:
        handle.write(torn)
    return len(torn)


def _race_worker(path: str, user_id: str, memory_id: str, barrier: Any, results: Any) -> None:
    store = RemoteMemoryStore(path, user_id=user_id, clock=fixed_clock())
    saw_free = all(r.memory_id != memory_id for r in store.read_all())
    item = conversation_item(
        memory_id,
        content="Two writers submitted this record at the same moment.",
        summary="Racing append.",
        title="Racing append",
        captured_at="2026-08-10T11:00:00Z",
    )
    barrier.wait(timeout=60)
    try:
        store.append_many([item])
        outcome = "success"
    except RemoteMemoryDuplicateError:
        outcome = "RemoteMemoryDuplicateError"
    except (RemoteMemoryError, OSError) as exc:  # reported, not hidden: the table shows it
        outcome = type(exc).__name__
    results.put((saw_free, outcome))


def race_duplicate_append(
    path: str | os.PathLike[str],
    *,
    user_id: str = SAMPLE_USER_ID,
    rounds: int = 3,
    processes: int = 2,
) -> pd.DataFrame:
    """``processes`` real processes per round append the same memory_id at once (a barrier
    releases them). One row per round, counts only, so the table never varies."""
    # spawn: each writer is a fresh interpreter, as two separate programs would be (and
    # forking a kernel that runs threads is unsafe).
    context = multiprocessing.get_context("spawn")
    rows = []
    for number in range(1, rounds + 1):
        memory_id = f"race-{number:02d}"
        barrier = context.Barrier(processes)
        results = context.Queue()
        workers = [
            context.Process(
                target=_race_worker, args=(str(path), user_id, memory_id, barrier, results)
            )
            for _ in range(processes)
        ]
        for worker in workers:
            worker.start()
        outcomes = [results.get(timeout=120) for _ in workers]
        for worker in workers:
            worker.join(timeout=120)
        lines = [json.loads(raw) for raw in Path(path).read_bytes().splitlines() if raw]
        saw_free = sum(saw for saw, _ in outcomes)
        said = Counter(outcome for _, outcome in outcomes)
        successes, duplicates = said["success"], said["RemoteMemoryDuplicateError"]
        others = len(outcomes) - successes - duplicates
        same_id = sum(line.get("memory_id") == memory_id for line in lines)
        rows.append(
            (number, memory_id, processes, saw_free, successes, duplicates, others, same_id)
        )
    columns = ["round", "memory_id", "processes", "saw_id_free_before", "successes"]
    columns += ["duplicate_errors", "other_outcomes", "lines_with_this_id"]
    return pandas().DataFrame(rows, columns=columns)
