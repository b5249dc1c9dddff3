"""Shared fixtures for the memlib core suite.

Helpers are exposed as fixtures (factories), so no test module imports this file.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fuzz.common import COUNTS, SCALE, SEED, write_report

from memlib import MemoryKind, MemorySource, RemoteMemoryStore, StoredMemory, user_scope_for
from memlib.sample import SAMPLE_AS_OF, fixed_clock, open_sample_store, sample_records

AS_OF = SAMPLE_AS_OF


@pytest.fixture(autouse=True)
def _course_speaks_english() -> Any:
    """Every test starts in English: the course's language is process state, and an
    edition's notebook replayed in-process (the browser tests' oracle) switches it."""
    from memlib.notebook.language import use_language

    use_language("en")
    yield
    use_language("en")


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


@pytest.fixture
def make_source() -> Callable[..., MemorySource]:
    def make(
        source_id: str = "t-1",
        *,
        captured_at: str | datetime = "2026-08-01T12:00:00Z",
        source_type: str = "conversation_transcript",
        title: str = "A transcript",
    ) -> MemorySource:
        if isinstance(captured_at, datetime):
            captured_at = _iso(captured_at)
        return MemorySource(
            source_id=source_id, source_type=source_type, title=title, captured_at=captured_at
        )

    return make


@pytest.fixture
def make_item(make_source: Callable[..., MemorySource]) -> Callable[..., dict[str, Any]]:
    """An ``append_many`` item; ``days_before`` places captured_at relative to AS_OF."""

    def make(
        memory_id: str,
        summary: str = "a summary",
        content: str = "some content",
        *,
        kind: MemoryKind = MemoryKind.CONVERSATION,
        captured_at: str | datetime | None = None,
        days_before: float | None = None,
        title: str = "A transcript",
    ) -> dict[str, Any]:
        if captured_at is None:
            captured_at = AS_OF - timedelta(days=days_before if days_before is not None else 1)
        return {
            "kind": kind,
            "memory_id": memory_id,
            "content": content,
            "summary": summary,
            "source": make_source(f"src-{memory_id}", captured_at=captured_at, title=title),
        }

    return make


@pytest.fixture
def make_record(make_item: Callable[..., dict[str, Any]]) -> Callable[..., StoredMemory]:
    """A ``StoredMemory`` built in memory (no store), scoped to ``user_id``."""

    def make(memory_id: str, *args: Any, user_id: str = "alice", **kwargs: Any) -> StoredMemory:
        item = make_item(memory_id, *args, **kwargs)
        return StoredMemory(
            memory_id=item["memory_id"],
            user_scope=user_scope_for(user_id),
            kind=item["kind"],
            content=item["content"],
            summary=item["summary"],
            source=item["source"],
            stored_at="2026-08-10T08:00:00Z",
        )

    return make


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "users" / "alice" / "records.jsonl"


@pytest.fixture
def make_store(tmp_path: Path) -> Callable[..., RemoteMemoryStore]:
    counter = iter(range(1_000_000))

    def make(path: Path | None = None, *, user_id: str = "alice") -> RemoteMemoryStore:
        if path is None:
            path = tmp_path / f"store-{next(counter)}" / "records.jsonl"
        return RemoteMemoryStore(path, user_id=user_id, clock=fixed_clock())

    return make


@pytest.fixture
def store(make_store: Callable[..., RemoteMemoryStore], store_path: Path) -> RemoteMemoryStore:
    return make_store(store_path)


@pytest.fixture
def sample_store(tmp_path: Path) -> RemoteMemoryStore:
    return open_sample_store(tmp_path / "sample-root")


@pytest.fixture
def sample_items() -> tuple[dict[str, Any], ...]:
    return sample_records()


def _clean_env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("WORKBUDDY_", "MEMLIB_", "ANTHROPIC_", "PYTEST_"))
        and k not in ("MODEL_ID", "HOME")
    }
    home.mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(home)
    env["PYTHONIOENCODING"] = "utf-8"
    return env


@pytest.fixture(scope="session")
def clean_env() -> Callable[[Path], dict[str, str]]:
    """``clean_env(home)``: the environment with nothing of ours leaking in, HOME=home."""
    return _clean_env


@pytest.fixture
def subprocess_env(tmp_path: Path) -> dict[str, str]:
    """A clean environment for ``python -m memlib`` / ``python -c``: nothing leaks in."""
    return _clean_env(tmp_path / "home")


@pytest.fixture(scope="session")
def python() -> str:
    return sys.executable


# -- the fuzz targets' case counts at the end of the session (terminal and JSON) ----------
# Under pytest-xdist each worker counts its own targets and hands them to the controller,
# which prints them: here, in the root conftest, because only it is loaded there.


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["memlib_fuzz_counts"] = json.dumps(COUNTS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    counted = json.loads(getattr(node, "workeroutput", {}).get("memlib_fuzz_counts", "{}"))
    for target, entry in counted.items():
        mine = COUNTS.setdefault(target, {"cases": 0, "seconds": 0.0, "failures": 0})
        mine["cases"] += entry["cases"]
        mine["seconds"] = round(mine["seconds"] + entry["seconds"], 1)
        mine["failures"] += entry["failures"]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not COUNTS:
        return
    path = write_report()
    total = sum(entry["cases"] for entry in COUNTS.values())
    write = terminalreporter.write_line
    terminalreporter.section("memlib fuzz")
    for target, entry in sorted(COUNTS.items()):
        write(
            f"{target}: {entry['cases']:,} cases in {entry['seconds']:.1f} s, "
            f"{entry['failures']} failing"
        )
    write(f"total: {total:,} cases (seed {SEED}, scale {SCALE:g}); counts in {path}")
