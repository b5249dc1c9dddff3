"""Fuzz target: import files, through ``memlib._bulk.import_jsonl`` into a new JSONL store.

Documented result (``memlib/_bulk.py``): every line is checked before the first write,
so a bad file raises a typed error of one line and leaves the store empty; a good one
imports every non-blank line, in order, each record as ``append`` would store it
(whitespace runs collapsed), and the store reads back what was imported.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from memlib import RemoteMemoryStore, user_scope_for
from memlib._bulk import import_jsonl
from memlib.sample import fixed_clock

from . import common

TARGET = "import"
SCOPE = user_scope_for("alice")


def _item(r: random.Random, number: int, line: int) -> dict[str, Any]:
    return {
        "memory_id": f"im-{number}-{line}",
        "content": f"imported {line} " + " ".join(common.word(r) for _ in range(3)),
        "summary": f"summary {line}",
        "source": {
            "source_id": f"s-{line}",
            "source_type": "import",
            "title": "t",
            "captured_at": r.choice(common.TIMESTAMPS_OK),
        },
    }


def _dumps(data: Any, r: random.Random) -> bytes:
    try:
        text = json.dumps(data, ensure_ascii=r.random() < 0.3, default=repr)
    except (RecursionError, ValueError, TypeError):
        text = "[" * 40 + "]" * 40
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data, ensure_ascii=True, default=repr).encode()


def _line(r: random.Random, number: int, line: int) -> bytes:
    item = _item(r, number, line)
    roll = r.random()
    if roll < 0.35:
        return _dumps(item, r)
    if roll < 0.6:
        for _ in range(r.randint(1, 2)):
            key = r.choice(
                (
                    "memory_id",
                    "content",
                    "summary",
                    "kind",
                    "source",
                    "source_id",
                    "source_type",
                    "title",
                    "captured_at",
                    "user_scope",
                    "stored_at",
                    "retracts",
                    "extra",
                )
            )
            if key in ("source_id", "source_type", "title", "captured_at"):
                held = item.get("source")
                source = dict(held) if isinstance(held, dict) else {}
                source[key] = (
                    common.timestamp(r) if key == "captured_at" else common.value(r, limit=1_000)
                )
                item["source"] = source
            elif key == "kind":
                item[key] = r.choice(
                    ("conversation", "profile", "retraction", "Profile", "", None, 1)
                )
            elif key == "user_scope":
                item[key] = r.choice((SCOPE, user_scope_for("bob"), SCOPE.upper(), 7))
            elif key == "stored_at":
                item[key] = common.timestamp(r)
            elif key == "memory_id":
                item[key] = common.memory_id(r, number)
            else:
                item[key] = common.value(r, limit=20_000)
        if r.random() < 0.1:
            del item[r.choice(list(item))]
        return _dumps(item, r)
    if roll < 0.8:
        return common.mutate_bytes(r, _dumps(item, r), keep_newlines=r.random() < 0.8)
    if roll < 0.85:
        return b""  # a blank line
    if roll < 0.9:
        return r.choice(
            (
                b"   ",
                b"\t",
                b"\r",
                b"\xef\xbb\xbf" + _dumps(item, r),
                _dumps(item, r) + b"\r",
                b"null",
                b"[]",
                b"1e400",
                b'"x"',
            )
        )
    if roll < 0.95:
        return (
            b'{"memory_id": "a", "memory_id": "b"}'
            if r.random() < 0.5
            else (b'{"k":' + b"[" * r.choice((31, 33, 3_000)) + b"]" * 3 + b"}")
        )
    return _dumps(common.deep(r), r)


def one_case(base: Path, number: int, failures: common.Failures) -> None:
    r = common.rng(TARGET, number)
    lines = [_line(r, number, i) for i in range(r.choice((1, 1, 2, 3, 4)))]
    if r.random() < 0.2:
        lines.append(lines[0])  # an id twice in one file
    data = b"\n".join(lines) + (b"\n" if r.random() < 0.9 else b"")
    folder = Path(tempfile.mkdtemp(dir=base))
    source = folder / "import.jsonl"
    source.write_bytes(data)
    log = folder / "st" / "records.jsonl"
    store = RemoteMemoryStore(log, user_id="alice", clock=fixed_clock())
    batch = r.choice((1, 2, 5_000))
    report, exc = common.timed(lambda: import_jsonl(store, source, batch_size=batch))
    failures.note("ok" if exc is None else type(exc).__name__)
    detail = f"batch {batch}, file {data[:400]!r}"

    def fail(what: str, error: BaseException | None = None) -> None:
        failures.add(
            common.signature(what, error),
            number,
            f"{detail} -> {error!r}" if error else detail,
            size=len(data),
        )

    try:
        reader = RemoteMemoryStore(log, user_id="alice")
        stored, read_error = common.timed(reader.read_all)
        if read_error is not None:
            return fail("the store does not read back after the import", read_error)
        if exc is not None:
            problem = common.typed_problem(exc)
            if problem is not None:
                return fail(problem, exc)
            if stored:
                fail("a refused import left records behind", exc)
            return
        expected = [json.loads(raw) for raw in data.split(b"\n") if raw.strip()]
        if report.records != len(expected) or len(stored) != len(expected):
            return fail(f"imported {report.records} of {len(expected)} lines")
        for item, record in zip(expected, stored, strict=True):
            if common.hidden_or_not_nfc(record.memory_id):
                return fail("an id that is not NFC or not visible was imported")
            want = {k: " ".join(item[k].split()) for k in ("content", "summary")}
            if (
                record.memory_id != item["memory_id"]
                or record.content != want["content"]
                or record.summary != want["summary"]
                or record.kind.value != item.get("kind", "conversation")
            ):
                return fail(f"record {record.memory_id!r} is not what the file said")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run(tmp_path: Path, *, stress: bool) -> None:
    base = common.work_folder(tmp_path)
    try:
        with common.Run(TARGET) as run:
            for number in common.cases(1_000, 200_000, stress=stress):
                one_case(base, number, run.failures)
                run.count += 1
        run.check()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_import_sample(tmp_path: Path) -> None:
    _run(tmp_path, stress=False)


@pytest.mark.stress
def test_import_full(tmp_path: Path) -> None:
    _run(tmp_path, stress=True)
