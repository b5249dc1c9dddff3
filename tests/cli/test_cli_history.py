"""[beyond] ``memlib supersede``, ``memlib explain``, ``recall --known-at`` and
``recall --min-score``, run as real subprocesses on a JSONL and a SQLite store.

Per backend: two writes in order (an append of two records, then a supersede), then
every read and every refused command started together and collected afterwards, so the
module pays the interpreter start-up a dozen times, not thirty.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from memlib import RecallEngine
from memlib.records import format_timestamp, parse_timestamp
from memlib.stores import open_store

USER = "alice"
AS_OF = "2026-08-10T12:00:00Z"
QUERY = "billing deploys"
QUERY_ID = "q-history"
OLD, OTHER, NEW = "hist-old", "hist-other", "hist-new"
REASON = "The deploy day moved to Tuesday"
APPENDED: tuple[dict[str, Any], ...] = (
    {
        "memory_id": OLD,
        "content": "The team deploys the billing service on Fridays.",
        "summary": "Billing deploys on Fridays",
        "source": {
            "source_id": "t-1",
            "source_type": "conversation_transcript",
            "title": "Ops sync",
            "captured_at": "2026-08-01T12:00:00Z",
        },
    },
    {
        "memory_id": OTHER,
        "content": "Billing invoices go out monthly.",
        "summary": "Monthly billing invoices",
        "source": {
            "source_id": "t-2",
            "source_type": "conversation_transcript",
            "title": "Finance sync",
            "captured_at": "2026-08-02T12:00:00Z",
        },
    },
)
NEW_CONTENT = "The team deploys the billing service on Tuesdays now."
NEW_CAPTURED_AT = "2026-08-05T12:00:00Z"


def _start(
    python: str, env: dict[str, str], cwd: Path, url: str, args: Sequence[str], stdin: str = ""
) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [python, "-m", "memlib", "--store", url, "--user", USER, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=cwd,
    )
    return proc, stdin


def _finish(started: tuple[subprocess.Popen[str], str]) -> subprocess.CompletedProcess[str]:
    proc, stdin = started
    out, err = proc.communicate(stdin, timeout=90)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stdout


def _json_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def _midpoint(first: str, second: str) -> str:
    a, b = parse_timestamp(first), parse_timestamp(second)
    return format_timestamp(a + (b - a) / 2)


def _reads(s1: str, middle: str) -> dict[str, tuple[tuple[str, ...], str]]:
    """name → (argv, what a refused one must say; "" when it must succeed)."""
    recall = ("recall", QUERY, "--as-of", AS_OF, "--query-id", QUERY_ID)
    explain = ("explain", QUERY, "--as-of", AS_OF, "--query-id", QUERY_ID)
    return {
        "recall": ((*recall, "--json"), ""),
        "recall_known_at": ((*recall, "--json", "--known-at", middle), ""),
        "recall_min_score": ((*recall, "--min-score", "2"), ""),
        "explain_old": ((*explain, "--memory-id", OLD), ""),
        "explain_old_known_at": ((*explain, "--memory-id", OLD, "--known-at", s1), ""),
        "explain_new_known_at": ((*explain, "--memory-id", NEW, "--known-at", s1, "--json"), ""),
        "supersede_unknown": (
            ("supersede", "no-such-id", "--memory-id", "hist-x", "--content", "x", "--reason", "r"),
            "no-such-id",
        ),
        "supersede_again": (
            ("supersede", OLD, "--memory-id", "hist-y", "--content", "y", "--reason", "r"),
            "already retracted",
        ),
        "known_at_bad": ((*recall, "--known-at", "yesterday"), "yesterday"),
        "min_score_bad": ((*recall, "--min-score", "abc"), "abc"),
    }


@pytest.fixture(scope="module", params=["jsonl", "sqlite"])
def history(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    clean_env: Callable[[Path], dict[str, str]],
    python: str,
) -> dict[str, Any]:
    backend: str = request.param
    root = tmp_path_factory.mktemp(f"history-{backend}")
    url = f"jsonl:{root / 'records.jsonl'}" if backend == "jsonl" else f"sqlite:{root / 'm.db'}"
    (root / "tmp").mkdir()
    env = {
        **clean_env(root / "home"),
        "WORKBUDDY_HOME": str(root / "workbuddy"),
        "TMPDIR": str(root / "tmp"),
    }

    def start(args: Sequence[str], stdin: str = "") -> tuple[subprocess.Popen[str], str]:
        return _start(python, env, root, url, args, stdin)

    lines = "".join(json.dumps(item) + "\n" for item in APPENDED)
    appended = _json_lines(_ok(_finish(start(["append"], lines))))
    superseded = _json_lines(
        _ok(
            _finish(
                start(
                    [
                        "supersede",
                        OLD,
                        "--memory-id",
                        NEW,
                        "--content",
                        NEW_CONTENT,
                        "--reason",
                        REASON,
                        "--captured-at",
                        NEW_CAPTURED_AT,
                    ]
                )
            )
        )
    )
    s1, s2 = appended[0]["stored_at"], superseded[0]["stored_at"]
    middle = _midpoint(s1, s2)
    reads = _reads(s1, middle)
    started = {name: start(args) for name, (args, _) in reads.items()}
    results = {name: _finish(proc) for name, proc in started.items()}
    return {
        "backend": backend,
        "url": url,
        "appended": appended,
        "superseded": superseded,
        "s1": s1,
        "s2": s2,
        "middle": middle,
        "reads": reads,
        "results": results,
    }


def _out(history: dict[str, Any], name: str) -> str:
    return _ok(history["results"][name])


def _engine(history: dict[str, Any]) -> RecallEngine:
    return RecallEngine(open_store(history["url"], user_id=USER))


def _as_of() -> datetime:
    return parse_timestamp(AS_OF)


def test_the_two_writes_printed_what_the_store_holds(history: dict[str, Any]) -> None:
    appended, superseded = history["appended"], history["superseded"]
    assert [r["memory_id"] for r in appended] == [OLD, OTHER]
    assert appended[0]["stored_at"] == appended[1]["stored_at"]  # one batch
    assert [r["source"]["captured_at"] for r in appended] == [
        item["source"]["captured_at"] for item in APPENDED
    ]
    store = open_store(history["url"], user_id=USER)
    # The refused commands (started after the supersede) wrote nothing.
    assert [r.to_dict() for r in store.read_all()] == [*appended, *superseded]


def test_supersede_prints_both_records_linked_both_ways(history: dict[str, Any]) -> None:
    new, retraction = history["superseded"]
    assert new["memory_id"] == NEW and new["kind"] == "conversation"
    assert new["content"] == NEW_CONTENT and new["summary"] == NEW_CONTENT
    assert new["supersedes"] == OLD and "superseded_by" not in new
    assert new["source"]["captured_at"] == NEW_CAPTURED_AT
    assert retraction["kind"] == "retraction"
    assert retraction["retracts"] == OLD and retraction["superseded_by"] == NEW
    assert retraction["content"] == REASON
    assert "supersedes" not in retraction
    assert new["stored_at"] == retraction["stored_at"] == history["s2"]  # one batch
    assert parse_timestamp(history["s1"]) < parse_timestamp(history["s2"])


def test_recall_shows_the_new_record_not_the_old(history: dict[str, Any]) -> None:
    out = _out(history, "recall")
    payload = json.loads(out)
    ids = [h["memory_id"] for h in payload["hits"]]
    assert NEW in ids and OLD not in ids
    assert payload["retracted_records"] == 1
    assert "known_at" not in payload and "min_score" not in payload
    expected = _engine(history).recall(QUERY, as_of=_as_of(), query_id=QUERY_ID)
    assert out == expected.to_json() + "\n"


def test_explain_says_who_superseded_the_old_record(history: dict[str, Any]) -> None:
    out = _out(history, "explain_old")
    assert out == f"superseded: memory {OLD} was superseded by {NEW} at {history['s2']}: {REASON}\n"


def test_recall_known_at_before_the_supersede_shows_the_old_record(history: dict[str, Any]) -> None:
    middle = history["middle"]
    assert parse_timestamp(history["s1"]) < parse_timestamp(middle) < parse_timestamp(history["s2"])
    out = _out(history, "recall_known_at")
    payload = json.loads(out)
    ids = [h["memory_id"] for h in payload["hits"]]
    assert OLD in ids and NEW not in ids
    assert payload["retracted_records"] == 0
    assert payload["known_at"] == middle
    expected = _engine(history).recall(QUERY, as_of=_as_of(), query_id=QUERY_ID, known_at=middle)
    assert out == expected.to_json() + "\n"


def test_explain_known_at_the_first_write(history: dict[str, Any]) -> None:
    # At or before: known at its own stored_at, the old record is there, not yet retracted.
    line = _out(history, "explain_old_known_at")
    assert line.startswith(f"hit: memory {OLD} is hit "), line
    payload = json.loads(_out(history, "explain_new_known_at"))
    assert payload["verdict"] == "not_yet_stored"
    assert payload["stage"] == "known_at"
    assert payload["memory_id"] == NEW
    assert payload["stored_at"] == history["s2"]
    assert payload["known_at"] == history["s1"]
    assert payload["message"] == (
        f"memory {NEW} was stored at {history['s2']}, after known_at {history['s1']}"
    )


def test_min_score_above_every_hit_says_so(history: dict[str, Any]) -> None:
    hits = json.loads(_out(history, "recall"))["hits"]
    assert hits and all(h["score"] < 2 for h in hits)
    out = _out(history, "recall_min_score")
    assert out == f"no hits (below_min_score): {len(hits)} scored under min_score 2\n"
    assert "<recalled_context" not in out


@pytest.mark.parametrize(
    "name", ["supersede_unknown", "supersede_again", "known_at_bad", "min_score_bad"]
)
def test_bad_input_is_one_line_exit_2(history: dict[str, Any], name: str) -> None:
    proc = history["results"][name]
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("memlib: error: ")
    assert proc.stderr.count("\n") == 1 and proc.stderr.endswith("\n"), proc.stderr
    assert history["reads"][name][1] in proc.stderr
    assert proc.stdout == ""
