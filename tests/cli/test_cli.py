"""The ``memlib`` command line, run as a real subprocess (``python -m memlib``).

Commands that only read are started together against one shared store and collected
afterwards, so a slow machine pays the interpreter start-up once, not thirty times.
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memlib import RecallEngine, RemoteMemoryStore, render_recall_context, render_remote_profile
from memlib.sample import SAMPLE_AS_OF, SAMPLE_USER_ID, open_sample_store, scope_path

AS_OF_TEXT = "2026-08-10T12:00:00Z"


def _env(base: dict[str, str], home: Path, tmp: Path) -> dict[str, str]:
    tmp.mkdir(parents=True, exist_ok=True)
    return {
        **base,
        "WORKBUDDY_HOME": str(home),
        "WORKBUDDY_USER_ID": SAMPLE_USER_ID,
        "TMPDIR": str(tmp),
    }


def _start(python: str, env: dict[str, str], cwd: Path, args, stdin: str = "") -> subprocess.Popen:
    proc = subprocess.Popen(
        [python, "-m", "memlib", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=cwd,
    )
    proc.stdin_text = stdin  # type: ignore[attr-defined]
    return proc


def _finish(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    out, err = proc.communicate(proc.stdin_text, timeout=90)  # type: ignore[attr-defined]
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stdout


def _one_line_error(proc: subprocess.CompletedProcess, message: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.endswith("\n"), proc.stderr
    assert message in proc.stderr
    assert proc.stdout == ""


# -- read-only commands on one shared sample store, run concurrently ---------------------

READ_ONLY: dict[str, tuple[Any, ...]] = {
    "json": (("recall", "layered memory", "--json", "--as-of", AS_OF_TEXT, "--query-id", "q-cli"),),
    "limit_as_of": (
        (
            "recall",
            "memory",
            "--json",
            "--limit",
            "2",
            "--as-of",
            "2026-09-30T00:00:00+02:00",
            "--query-id",
            "q-lim",
        ),
    ),
    "naive_as_of": (
        (
            "recall",
            "layered memory",
            "--json",
            "--as-of",
            "2026-08-10T12:00:00",
            "--query-id",
            "q-cli",
        ),
    ),
    "render": (("recall", "分层记忆", "--as-of", AS_OF_TEXT, "--query-id", "q-zh"),),
    "no_hits": (("recall", "kubernetes", "--as-of", AS_OF_TEXT),),
    "profile": (("profile",),),
    "demo_1": (("demo",),),
    "demo_2": (("demo",),),
}

BAD_INPUT: dict[str, tuple[Any, ...]] = {
    "punctuation": (("recall", "!!!"), "recall query has no searchable terms"),
    "limit_0": (("recall", "memory", "--limit", "0"), "limit must be between 1 and 10"),
    "limit_11": (("recall", "memory", "--limit", "11"), "limit must be between 1 and 10"),
    "limit_5x": (("recall", "memory", "--limit", "5x"), "limit must be an integer"),
    "as_of": (("recall", "memory", "--as-of", "yesterday"), "yesterday"),
    "as_of_out_of_range": (("recall", "memory", "--as-of", "0001-01-01T00:00:00+01:00"), "as_of"),
    "captured_at_out_of_range": (
        (
            "append",
            "--memory-id",
            "m-far",
            "--content",
            "c",
            "--summary",
            "s",
            "--source-id",
            "t",
            "--source-type",
            "x",
            "--title",
            "t",
            "--captured-at",
            "0001-01-01T00:00:00+01:00",
        ),
        "invalid timestamp: '0001-01-01T00:00:00+01:00'",
    ),
    "retract_unknown": (("retract", "no-such-id", "--reason", "x"), "no-such-id"),
    "duplicate": (
        (
            "append",
            "--memory-id",
            "conversation-001",
            "--content",
            "c",
            "--summary",
            "s",
            "--source-id",
            "t",
            "--source-type",
            "x",
            "--title",
            "t",
            "--captured-at",
            AS_OF_TEXT,
        ),
        "duplicate memory_id: conversation-001",
    ),
    "stdin_not_json": (("append",), "line 1", "not json\n"),
    "stdin_surrogate": (
        ("append",),
        "content",
        json.dumps(
            {
                "memory_id": "x",
                "content": "a\ud800b",
                "summary": "s",
                "source": {
                    "source_id": "t",
                    "source_type": "x",
                    "title": "t",
                    "captured_at": "2026-08-01T00:00:00Z",
                },
            }
        )
        + "\n",
    ),
    "stdin_timestamp": (
        ("append",),
        "invalid timestamp: 'yesterday'",
        json.dumps(
            {
                "memory_id": "x",
                "content": "c",
                "summary": "s",
                "source": {
                    "source_id": "t",
                    "source_type": "x",
                    "title": "t",
                    "captured_at": "yesterday",
                },
            }
        )
        + "\n",
    ),
}


@pytest.fixture(scope="module")
def shared(tmp_path_factory, clean_env, python):
    root = tmp_path_factory.mktemp("cli-shared")
    home = root / "workbuddy"
    store = open_sample_store(home / "remote-memory")
    assert store.path == scope_path(home / "remote-memory", SAMPLE_USER_ID)
    before = store.path.read_bytes()
    env = _env(clean_env(root / "home"), home, root / "tmp")
    commands: dict[str, tuple[Any, ...]] = dict(READ_ONLY)
    commands.update(
        {name: (spec[0], spec[2] if len(spec) > 2 else "") for name, spec in BAD_INPUT.items()}
    )
    started = {name: _start(python, env, root, *spec) for name, spec in commands.items()}
    results = {name: _finish(proc) for name, proc in started.items()}
    return {"store": store, "results": results, "before": before, "tmp": root / "tmp"}


def test_demo_is_offline_and_byte_identical(shared):
    first, second = shared["results"]["demo_1"], shared["results"]["demo_2"]
    out = _ok(first)
    assert out.encode() == _ok(second).encode()
    assert "0.995161" in out
    assert "<recalled_context" in out and "<remote_profile" in out
    assert list(shared["tmp"].iterdir()) == []  # the temporary demo stores are cleaned up


def test_recall_json_matches_the_library(shared):
    out = _ok(shared["results"]["json"])
    expected = RecallEngine(shared["store"]).recall(
        "layered memory", as_of=SAMPLE_AS_OF, query_id="q-cli"
    )
    assert out == expected.to_json() + "\n"
    payload = json.loads(out)
    assert payload["hits"][0]["score"] == 0.995161
    assert all(h["source"] == h["provenance"] for h in payload["hits"])
    assert _ok(shared["results"]["naive_as_of"]) == out  # a naive --as-of is UTC


def test_recall_limit_and_as_of(shared):
    out = _ok(shared["results"]["limit_as_of"])
    payload = json.loads(out)
    assert len(payload["hits"]) == 2
    assert payload["query"]["limit"] == 2
    assert payload["query"]["issued_at"] == "2026-09-29T22:00:00Z"
    expected = RecallEngine(shared["store"]).recall(
        "memory", limit=2, as_of=datetime(2026, 9, 29, 22, tzinfo=UTC), query_id="q-lim"
    )
    assert out == expected.to_json() + "\n"


def test_recall_renders_context_by_default(shared):
    out = _ok(shared["results"]["render"])
    expected = RecallEngine(shared["store"]).recall("分层记忆", as_of=SAMPLE_AS_OF, query_id="q-zh")
    assert expected.hits
    assert out == render_recall_context(expected) + "\n"


def test_recall_without_hits_says_why(shared):
    out = _ok(shared["results"]["no_hits"])
    assert "no_matching_terms" in out
    assert "<recalled_context" not in out


def test_profile_of_the_sample_store(shared):
    out = _ok(shared["results"]["profile"])
    assert out == render_remote_profile(shared["store"].latest_profile()) + "\n"


@pytest.mark.parametrize("name", sorted(BAD_INPUT))
def test_bad_input_is_one_line_exit_2(shared, name):
    _one_line_error(shared["results"][name], BAD_INPUT[name][1])


def test_bad_input_and_reads_left_the_store_unchanged(shared):
    assert shared["store"].path.read_bytes() == shared["before"]


# -- commands that write: each on its own home --------------------------------------------


@pytest.fixture
def cli(tmp_path: Path, subprocess_env: dict[str, str], python: str):
    """Run ``python -m memlib ARGS`` with WORKBUDDY_HOME in tmp_path and user alice."""
    home = tmp_path / "workbuddy"
    env = _env(subprocess_env, home, tmp_path / "tmp")

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return _finish(_start(python, env, tmp_path, args, stdin or ""))

    run.home = home  # type: ignore[attr-defined]
    run.records = scope_path(home / "remote-memory", SAMPLE_USER_ID)  # type: ignore[attr-defined]
    return run


def test_reading_an_empty_home_creates_nothing(cli):
    out = _ok(cli("recall", "layered memory", "--json"))
    assert json.loads(out)["hits"] == []
    no_profile = cli("profile")
    assert no_profile.returncode != 0 and "Traceback" not in no_profile.stderr
    assert not cli.home.exists()


def test_append_from_flags_then_recall(cli):
    proc = cli(
        "append",
        "--memory-id",
        "cli-1",
        "--content",
        "We chose  layered memory.",
        "--summary",
        "Layered memory chosen",
        "--source-id",
        "t-cli",
        "--source-type",
        "conversation_transcript",
        "--title",
        "CLI transcript",
        "--captured-at",
        "2026-08-09T14:00:00+02:00",
    )
    printed = json.loads(_ok(proc))
    (record,) = RemoteMemoryStore(cli.records, user_id=SAMPLE_USER_ID).read_all()
    assert printed == record.to_dict()
    assert record.memory_id == "cli-1"
    assert record.content == "We chose layered memory."
    assert record.source.captured_at == "2026-08-09T12:00:00Z"
    assert record.kind.value == "conversation"
    hits = json.loads(_ok(cli("recall", "layered memory", "--json", "--as-of", AS_OF_TEXT)))["hits"]
    assert [h["memory_id"] for h in hits] == ["cli-1"]
    assert hits[0]["score"] == 0.995161  # both terms, one day old: docs/reference.md "Score"


def test_append_from_a_json_line_on_stdin_then_profile(cli):
    line = json.dumps(
        {
            "kind": "profile",
            "memory_id": "profile-cli",
            "content": "Prefers answers in 中文 & English <short>.",
            "summary": "Bilingual",
            "source": {
                "source_id": "snap-1",
                "source_type": "profile_snapshot",
                "title": "Snapshot",
                "captured_at": "2026-08-09T12:00:00Z",
            },
        },
        ensure_ascii=False,
    )
    conversation = json.dumps(
        {
            "memory_id": "conv-cli",
            "content": "stdin conversation",
            "summary": "from stdin",
            "source": {
                "source_id": "t",
                "source_type": "x",
                "title": "t",
                "captured_at": "2026-08-09T12:00:00Z",
            },
        }
    )
    printed = _ok(cli("append", stdin=f"{line}\n\n{conversation}\n"))
    assert [json.loads(x)["memory_id"] for x in printed.splitlines()] == ["profile-cli", "conv-cli"]
    store = RemoteMemoryStore(cli.records, user_id=SAMPLE_USER_ID)
    assert [(r.memory_id, r.kind.value) for r in store.read_all()] == [
        ("profile-cli", "profile"),
        ("conv-cli", "conversation"),
    ]
    out = _ok(cli("profile"))
    assert out == render_remote_profile(store.latest_profile()) + "\n"
    assert "&amp;" in out and "&lt;short&gt;" in out


def test_retract_hides_the_record(cli):
    store = open_sample_store(cli.home / "remote-memory")
    _ok(
        cli(
            "retract",
            "conversation-003",
            "--reason",
            "Summary was wrong",
            "--captured-at",
            AS_OF_TEXT,
        )
    )
    payload = json.loads(_ok(cli("recall", "layered memory", "--json", "--as-of", AS_OF_TEXT)))
    assert "conversation-003" not in [h["memory_id"] for h in payload["hits"]]
    assert payload["retracted_records"] == 1
    assert store.read_all()[-1].retracts == "conversation-003"
    _one_line_error(cli("retract", "conversation-003", "--reason", "again"), "conversation-003")
