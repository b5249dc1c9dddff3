"""Fuzz target: store lines. A JSONL log of valid records with one fuzzed line among them.

Documented result (docs/reference.md#stores): a reader returns every record in append
order; a torn last line (no ``\\n``) is ignored; another scope's line raises
``RemoteMemoryScopeError``; a line that is not a valid record, or repeats an id, raises
``RemoteMemoryCorruptionError`` naming its line, and raises again on the next read.
Anything else — another exception, a message of two lines, a hang, a record that does
not read back as itself, a valid line refused — is a failure.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from memlib import RecallEngine, RemoteMemoryStore, StoredMemory, user_scope_for
from memlib.candidates import scan_recall_candidates
from memlib.errors import (
    RemoteMemoryCorruptionError,
    RemoteMemoryScopeError,
    RemoteMemoryUnsafePathError,
)
from memlib.normalize import normalize_recall_query
from memlib.rank import stable_rank_recall_candidates
from memlib.records import record_from_item
from memlib.result import RecallResult
from memlib.sample import SAMPLE_AS_OF, fixed_clock
from memlib.stores.jsonl._store import encode_record

from . import common

TARGET = "store_lines"
SCOPE = user_scope_for("alice")
STORED_AT = "2026-08-10T08:00:00Z"


def _item(i: int, **changes: Any) -> dict[str, Any]:
    item = {
        "kind": "conversation" if i != 1 else "profile",
        "memory_id": f"base-{i}",
        "content": f"record {i} about amber river lantern",
        "summary": f"summary {i}",
        "source": {
            "source_id": f"s-{i}",
            "source_type": "test",
            "title": f"t {i}",
            "captured_at": "2026-08-01T12:00:00Z",
        },
    }
    item.update(changes)
    return item


BASE = [record_from_item(_item(i), SCOPE, STORED_AT) for i in range(3)]
BASE_LINES = [encode_record(record) for record in BASE]


def _dumps(data: Any, r: random.Random) -> bytes:
    try:
        text = json.dumps(data, ensure_ascii=r.random() < 0.3, default=repr, separators=(",", ":"))
    except (RecursionError, ValueError, TypeError):
        text = '"' + "[" * 40 + '"'
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, only writable escaped
        return json.dumps(data, ensure_ascii=True, default=repr).encode()


def _record_dict(number: int) -> dict[str, Any]:
    data = BASE[0].to_dict()
    data["memory_id"] = f"fz-{number}"
    return data


def _fuzzed_line(r: random.Random, number: int) -> tuple[str, bytes, dict[str, Any] | None]:
    """``(kind, line without its newline, the record's dict when it is valid as written)``."""
    roll = r.random()
    if roll < 0.3:  # a record with a few fields changed to anything
        data = _record_dict(number)
        for _ in range(r.randint(1, 3)):
            where = r.random()
            if where < 0.55:
                key = r.choice(
                    ("memory_id", "kind", "content", "summary", "stored_at", "user_scope")
                )
                data[key] = (
                    common.timestamp(r)
                    if key == "stored_at"
                    else common.memory_id(r, number)
                    if key == "memory_id"
                    else common.value(r, limit=2_000)
                )
            elif where < 0.8:
                held = data.get("source")
                source = dict(held) if isinstance(held, dict) else BASE[0].to_dict()["source"]
                key = r.choice(("source_id", "source_type", "title", "captured_at"))
                source[key] = common.timestamp(r) if key == "captured_at" else common.value(r)
                if r.random() < 0.1:
                    source[common.text(r)] = "x"
                data["source"] = source if r.random() < 0.9 else common.value(r)
            elif where < 0.9:
                data.pop(r.choice(list(data)), None)
            else:
                data[
                    r.choice(
                        ("retracts", "supersedes", "superseded_by", "extra", "memory_id\n", "Kind")
                    )
                ] = common.value(r)
        return "record", _dumps(data, r), None
    if roll < 0.55:  # a valid line damaged byte by byte
        line = r.choice(BASE_LINES)[:-1]
        return "mutated", common.mutate_bytes(r, line, keep_newlines=r.random() < 0.9), None
    if roll < 0.65:
        size = r.choice((1, 5, 40, 300))
        return "raw", bytes(r.randrange(256) for _ in range(size)).replace(b"\n", b" "), None
    if roll < 0.7:
        other = record_from_item(
            _item(9, memory_id=f"bob-{number}"), user_scope_for("bob"), STORED_AT
        )
        return "scope", encode_record(other)[:-1], None
    if roll < 0.75:
        return "duplicate", r.choice(BASE_LINES)[:-1], None
    # A valid record made of hostile but allowed text: it must read back as written.
    item = _item(number, memory_id=f"ok-{number}-{r.randint(0, 99)}")
    for key in ("content", "summary"):
        candidate = common.text(r, limit=2_000)
        if isinstance(candidate, str) and candidate.strip():
            item[key] = candidate
    try:
        record = record_from_item(item, SCOPE, STORED_AT)
        line = encode_record(record)[:-1]
    except Exception:  # noqa: BLE001 (the text was not allowed: a plain record instead)
        record = record_from_item(_item(number, memory_id=f"ok-{number}"), SCOPE, STORED_AT)
        line = encode_record(record)[:-1]
    return "valid", line, record.to_dict()


def _check_read_back(record: StoredMemory) -> str | None:
    """A record a reader returned is a record: it survives its own line, and the
    reader's fast path and the full one (taken for any mapping but a plain dict) agree."""
    data = record.to_dict()
    again = StoredMemory.from_dict(json.loads(encode_record(record)))
    if again != record:
        return "a returned record does not read back as itself"
    slow = StoredMemory.from_dict(MappingProxyType(data))
    if slow != record:
        return "the full reader builds another record than the fast one"
    return None


def one_case(folder: Path, number: int, failures: common.Failures) -> None:
    r = common.rng(TARGET, number)
    kind, line, valid = _fuzzed_line(r, number)
    at = r.randint(0, len(BASE_LINES))
    torn = r.random() < 0.15
    lines = list(BASE_LINES)
    if torn:
        at = len(lines)
        data = b"".join(lines) + line
    else:
        lines.insert(at, line + b"\n")
        data = b"".join(lines)
    path = folder / "records.jsonl"
    path.write_bytes(data)
    store = RemoteMemoryStore(path, user_id="alice", clock=fixed_clock())
    records, exc = common.timed(store.read_all)
    failures.note(f"{kind}: {'ok' if exc is None else type(exc).__name__}")
    detail = f"{kind} line {at + 1}{' (torn)' if torn else ''}: {line[:300]!r}"

    def fail(what: str, error: BaseException | None = None) -> None:
        failures.add(
            common.signature(f"{kind}: {what}", error),
            number,
            f"{detail} -> {error!r}" if error else detail,
            size=len(line),
        )

    whole_line = b"\n" not in line and b"\r" not in line
    if torn and whole_line:
        if exc is not None:
            fail("a torn last line was not ignored", exc)
        elif [rec.to_dict() for rec in records] != [rec.to_dict() for rec in BASE]:
            fail("a torn last line changed what was read")
        elif r.random() < 0.2:
            # The next writer cuts the torn line off before it appends.
            item = _item(7, memory_id=f"after-{number}")
            _, error = common.timed(lambda: store.append(**item))
            if error is not None:
                fail("a writer after a torn line failed", error)
            else:
                after = path.read_bytes()
                ids = [rec.memory_id for rec in RemoteMemoryStore(path, user_id="alice").read_all()]
                if not (
                    after.startswith(b"".join(BASE_LINES))
                    and after.endswith(b"\n")
                    and after.count(b"\n") == len(BASE_LINES) + 1
                    and ids == [*(rec.memory_id for rec in BASE), item["memory_id"]]
                ):
                    fail("a writer after a torn line did not cut it off")
        return
    if exc is not None:
        problem = common.typed_problem(exc)
        if problem is not None:
            return fail(problem, exc)
        if isinstance(exc, RemoteMemoryUnsafePathError) or not isinstance(
            exc, RemoteMemoryCorruptionError | RemoteMemoryScopeError
        ):
            return fail(f"a bad line raised {type(exc).__name__}", exc)
        if kind == "valid":
            return fail("a valid record was refused", exc)
        if kind == "scope" and not isinstance(exc, RemoteMemoryScopeError):
            return fail("another scope's line was not a scope error", exc)
        if whole_line and isinstance(exc, RemoteMemoryCorruptionError):
            named = re.search(r"\bline (\d+):", str(exc))
            # A repeated id is the later of its two lines, which may be the base one.
            first = at + 1
            if named is None or not (
                int(named[1]) == first
                or ("duplicate memory_id" in str(exc) and int(named[1]) > first)
            ):
                return fail("the error does not name the line", exc)
        # Never skipped in silence: the same reader raises again.
        _, again = common.timed(store.read_all)
        if again is None or str(again) != str(exc):
            fail("a second read did not raise the same error", again or exc)
        return
    if kind in ("scope", "duplicate"):
        return fail(f"a {kind} line was accepted")
    if not whole_line:
        return  # the damage made lines of its own; each was judged valid on its own
    expected = [rec.to_dict() for rec in BASE]
    got = [rec.to_dict() for rec in records]
    if len(got) != len(expected) + 1 or got[:at] + got[at + 1 :] != expected:
        return fail("the valid lines around the fuzzed one did not read back as written")
    extra = records[at]
    if valid is not None and extra.to_dict() != valid:
        return fail("a valid record read back changed")
    try:
        problem = _check_read_back(extra)
    except Exception as error:  # noqa: BLE001
        return fail("a returned record is refused when read again", error)
    if problem is not None:
        return fail(problem)
    if r.random() < 0.3:
        # The engine's indexed path finds the fuzzed record as the plain scan does.
        text = " ".join(extra.summary.split()[:3])
        fresh = RemoteMemoryStore(path, user_id="alice", clock=fixed_clock())
        got, recall_error = common.timed(lambda: _recall_pair(fresh, text, records))
        if recall_error is not None and not str(recall_error).startswith("recall query"):
            fail("a recall over the read records failed", recall_error)
        elif recall_error is None:
            failures.note(
                "recall compared" if '"hits": []' not in got[0] else "recall compared, no hit"
            )
            if got[0] != got[1]:
                fail("the engine's recall differs from the scan of the records read")


def _recall_pair(store: RemoteMemoryStore, text: str, records: Any) -> tuple[str, str]:
    """The engine's ``to_json()`` and the one the stages give by hand over ``records``."""
    query = normalize_recall_query(
        text, user_scope=SCOPE, limit=10, query_id="q", issued_at=SAMPLE_AS_OF
    )
    scan = scan_recall_candidates(query, records)
    hits = stable_rank_recall_candidates(query, scan.candidates, as_of=SAMPLE_AS_OF)
    by_hand = RecallResult(
        query, hits, scan.searched_records, scan.candidate_records, scan.retracted_records
    ).to_json()
    engine = RecallEngine(store).recall(text, limit=10, as_of=SAMPLE_AS_OF, query_id="q")
    return engine.to_json(), by_hand


def _run(tmp_path: Path, *, stress: bool) -> None:
    folder = common.work_folder(tmp_path)
    try:
        with common.Run(TARGET) as run:
            for number in common.cases(3_000, 700_000, stress=stress):
                one_case(folder, number, run.failures)
                run.count += 1
        run.check()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_store_lines_sample(tmp_path: Path) -> None:
    _run(tmp_path, stress=False)


@pytest.mark.stress
def test_store_lines_full(tmp_path: Path) -> None:
    _run(tmp_path, stress=True)
