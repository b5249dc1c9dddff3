"""``--project``, ``$MEMLIB_PROJECT`` and ``--all-projects`` on the command line
(docs/contract.md, "Projects"), run in process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlib.cli import main

AS_OF = "2026-08-10T12:00:00Z"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WORKBUDDY_HOME", str(tmp_path))
    monkeypatch.setenv("WORKBUDDY_USER_ID", "alice")
    for name in ("MEMLIB_STORE", "MEMLIB_PROJECT", "MEMLIB_EMBEDDER"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _append(capsys: pytest.CaptureFixture[str], memory_id: str, *options: str) -> dict:
    code, out, err = _run(
        capsys,
        "append",
        *options,
        "--memory-id",
        memory_id,
        "--content",
        f"layered memory {memory_id}",
        "--summary",
        f"layered {memory_id}",
        "--source-id",
        "t-1",
        "--source-type",
        "conversation_transcript",
        "--title",
        "T",
        "--captured-at",
        "2026-08-01T00:00:00Z",
    )
    assert (code, err) == (0, "")
    return dict(json.loads(out))


def _hits(capsys: pytest.CaptureFixture[str], *options: str) -> list[str]:
    code, out, err = _run(capsys, "recall", "layered", "--as-of", AS_OF, "--json", *options)
    assert (code, err) == (0, ""), err
    return [hit["memory_id"] for hit in json.loads(out)["hits"]]


def test_project_option_and_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "project" not in _append(capsys, "n-1")
    assert _append(capsys, "a-1", "--project", "alpha")["project"] == "alpha"
    monkeypatch.setenv("MEMLIB_PROJECT", "beta")
    assert _append(capsys, "b-1")["project"] == "beta"
    assert _hits(capsys) == ["b-1"]
    assert _hits(capsys, "--project", "alpha") == ["a-1"]  # the option wins
    assert sorted(_hits(capsys, "--all-projects")) == ["a-1", "b-1", "n-1"]
    monkeypatch.setenv("MEMLIB_PROJECT", "")  # empty: no project
    assert _hits(capsys) == ["n-1"]
    code, out, err = _run(capsys, "explain", "layered", "--memory-id", "a-1", "--as-of", AS_OF)
    assert (code, out.split(":")[0]) == (0, "not_in_scope")
    code, out, err = _run(
        capsys, "explain", "layered", "--memory-id", "a-1", "--as-of", AS_OF, "--all-projects"
    )
    assert (code, out.split(":")[0]) == (0, "hit")
    code, out, err = _run(capsys, "retract", "a-1", "--reason", "no")
    assert (code, err) == (2, "memlib: error: cannot retract unknown memory_id: a-1\n")
    code, out, err = _run(capsys, "retract", "a-1", "--reason", "no", "--project", "alpha")
    assert code == 0 and json.loads(out)["project"] == "alpha"
    assert _hits(capsys, "--project", "alpha") == []
    code, out, err = _run(
        capsys, "supersede", "b-1", "--memory-id", "b-2", "--content", "x", "--reason", "r"
    )
    assert code == 2 and "no such memory in this scope" in err
    code, out, err = _run(capsys, "profile", "--project", "alpha")
    assert (code, err) == (1, "no profile stored for this user\n")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "project must not be empty"),
        (
            "a\u202eb",
            "project must not contain invisible or format characters: 'a\\u202eb' holds U+202E",
        ),
        ("a\nb", "project must hold no whitespace but single spaces between words: 'a\\nb'"),
    ],
)
def test_a_bad_project_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str, message: str
) -> None:
    code, out, err = _run(capsys, "recall", "layered", "--project", name)
    assert (code, out, err) == (2, "", f"memlib: error: {message}\n")
    if name:
        monkeypatch.setenv("MEMLIB_PROJECT", name)
        assert _run(capsys, "profile") == (2, "", f"memlib: error: {message}\n")
