"""``memlib import --format claude-code|chatgpt``: conversations people already have.

The fixtures (tests/fixtures/importers/) are small hand-written files in the formats'
documented shapes: two Claude Code sessions (tool use and results, thinking, a meta
entry, a slash command, a subagent entry, a system entry, a summary entry and a last line
cut short), one with a broken line in the middle, and a ChatGPT ``conversations.json``
(a regenerated answer on another branch, an image part, a code-interpreter call and its
output, hidden system and custom-instruction messages, an untitled conversation whose
messages have no time of their own)."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest

from memlib import RecallEngine, open_store
from memlib.cli import main
from memlib.records import LIMITS, MAX_TERMS
from memlib.sample import SAMPLE_AS_OF

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "importers"
CLAUDE = FIXTURES / "claude-code"
WEBAPP = CLAUDE / "-home-alice-projects-webapp" / "6f1c2a9e-4b7d-4e21-9a3c-0d5e8b7f1a42.jsonl"
CHATGPT = FIXTURES / "chatgpt" / "conversations.json"
USER = "alice"


@pytest.fixture(params=("jsonl", "sqlite"))
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "jsonl":
        return f"jsonl:{tmp_path / 'store' / 'records.jsonl'}"
    return f"sqlite:{tmp_path / 'store.db'}"


def _cli(capsys: pytest.CaptureFixture[str], url: str, *args: str) -> tuple[int, str, str]:
    code = main(["--store", url, "--user", USER, *args])
    out, err = capsys.readouterr()
    return code, out, err


def _records(url: str) -> list[dict[str, Any]]:
    store = open_store(url, user_id=USER)
    try:
        return [r.to_dict() for r in store.read_all()]
    finally:
        store.close()


def test_claude_code_sessions(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, url, "import", "--format", "claude-code", str(CLAUDE))
    assert (code, err) == (0, ""), err
    first, skipped = out.splitlines()
    assert first == "imported 7 records in 1 batches from 2 sources"
    for reason in (
        "tool calls, tool results or thinking only (1)",
        "meta entries (1)",
        "slash commands and their output (1)",
        "subagent (sidechain) entries (1)",
        "summary entries (1)",
        "system entries (1)",
        "incomplete last lines (1)",
    ):
        assert reason in skipped, (reason, skipped)
    records = _records(url)
    assert [r["content"] for r in records if "webapp" in r["source"]["title"]] == [
        "user: The login test fails about one run in five on CI. Can you look at "
        "tests/test_login.py?",
        "assistant: I'll read the test first.",  # its tool_use block left out
        "assistant: The test waits a fixed `sleep(0.5)` for the session cookie; on a slow CI "
        "runner the cookie arrives later. I'll replace the sleep with polling for up to 5 "
        "seconds.",  # its thinking block left out
        "user: Good. Please also add a line to CHANGELOG.md; we keep it in the Keep a "
        "Changelog format.",
        "assistant: Done: the test now polls for the session cookie, and CHANGELOG.md has a "
        '"Fixed" entry for the flaky login test under Unreleased.',
    ]
    webapp = next(r for r in records if r["content"].startswith("assistant: I'll read"))
    assert webapp["kind"] == "conversation"
    assert webapp["summary"] == webapp["content"]
    assert webapp["source"] == {
        "source_id": "6f1c2a9e-4b7d-4e21-9a3c-0d5e8b7f1a42",
        "source_type": "claude_code_session",
        "title": "Claude Code session in /home/alice/projects/webapp",
        "captured_at": "2026-07-14T09:03:44.902Z",
    }
    notes = [r for r in records if r["source"]["source_id"].startswith("2d4f6a8c")]
    assert [r["source"]["captured_at"] for r in notes] == [
        "2026-07-20T01:15:00Z",  # "+00:00" in the file
        "2026-07-20T01:15:04.25Z",
    ]
    result = RecallEngine(open_store(url, user_id=USER)).recall(
        "flaky login cookie", as_of=SAMPLE_AS_OF
    )
    assert result.hits and result.hits[0].provenance.source_type == "claude_code_session"


def test_importing_the_same_files_again_writes_nothing(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cli(capsys, url, "import", "--format", "claude-code", str(CLAUDE))[0] == 0
    assert _cli(capsys, url, "import", "--format", "chatgpt", str(CHATGPT))[0] == 0
    before = _records(url)
    code, out, err = _cli(capsys, url, "import", "--format", "claude-code", str(CLAUDE))
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "nothing new: the 7 records of 2 sources were imported before"
    code, out, err = _cli(capsys, url, "import", "--format", "chatgpt", str(CHATGPT))
    assert out.splitlines()[0] == "nothing new: the 6 records of 2 sources were imported before"
    assert _records(url) == before
    # A session that went on: only its new messages are written.
    grown = tmp_path / "grown" / WEBAPP.name
    grown.parent.mkdir()
    entry = json.loads(WEBAPP.read_text("utf-8").splitlines()[3])
    entry.update(uuid="0f0f0f0f-1111-4222-8333-444455556666", timestamp="2026-07-14T10:00:00Z")
    entry["message"]["content"] = "Thanks, that fixed it."
    grown.write_text(WEBAPP.read_text("utf-8") + json.dumps(entry) + "\n", "utf-8")
    code, out, err = _cli(capsys, url, "import", "--format", "claude-code", str(grown))
    assert out.splitlines()[0] == (
        "imported 1 records in 1 batches from 1 source; 5 imported before, not written again"
    )
    assert _records(url)[:-1] == before
    assert _records(url)[-1]["content"] == "user: Thanks, that fixed it."


def test_ids_depend_on_the_source_and_message_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same message gets the same id in any store; another session, another id."""
    one, two = f"sqlite:{tmp_path / 'a.db'}", f"jsonl:{tmp_path / 'b' / 'records.jsonl'}"
    assert _cli(capsys, one, "import", "--format", "claude-code", str(WEBAPP))[0] == 0
    copy = tmp_path / "copy.jsonl"
    shutil.copy(WEBAPP, copy)
    assert _cli(capsys, two, "import", "--format", "claude-code", str(copy))[0] == 0
    ids = [r["memory_id"] for r in _records(one)]
    assert ids == [r["memory_id"] for r in _records(two)]
    assert len(set(ids)) == len(ids) == 5
    other = tmp_path / "other.jsonl"
    other.write_text(WEBAPP.read_text("utf-8").replace("6f1c2a9e-", "99999999-"), "utf-8")
    three = f"sqlite:{tmp_path / 'c.db'}"
    assert _cli(capsys, three, "import", "--format", "claude-code", str(other))[0] == 0
    assert not set(ids) & {r["memory_id"] for r in _records(three)}


def test_chatgpt_current_branch(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, url, "import", "--format", "chatgpt", str(CHATGPT))
    assert (code, err) == (0, ""), err
    assert out.splitlines()[0] == "imported 6 records in 1 batches from 2 sources"
    for reason in (
        "system messages (1)",
        "tool messages (1)",
        "calls to a tool (1)",
        "hidden messages (1)",
        "non-text parts (images, files) (1)",
    ):
        assert reason in out.splitlines()[1], reason
    records = _records(url)
    contents = [r["content"] for r in records]
    assert "assistant: Feed it Friday at 9 pm." not in contents  # the branch not shown
    assert contents[:4] == [
        "user: My sourdough starter doubles in 6 hours at 24 °C. When should I feed it if I "
        "bake on Saturday morning?",
        "assistant: Feed it Friday around 10 pm. At 24 °C it peaks about 6 hours later, so "
        "mix the dough on Saturday between 4 and 6 am.",
        "user: Here is the starter this morning. Is that enough rise?",
        "assistant: Yes: it has roughly doubled and the top is domed, so it is ready to use.",
    ]
    assert records[0]["source"] == {
        "source_id": "66951d00-7a1c-8004-b3e2-5f0c9d1a2b3c",
        "source_type": "chatgpt_conversation",
        "title": "Sourdough starter schedule",
        "captured_at": "2024-07-15T08:00:12.734Z",  # 1721030412.734
    }
    untitled = records[4]["source"]
    assert untitled["title"] == "Untitled ChatGPT conversation"
    assert untitled["captured_at"] == "2024-07-17T08:00:00.5Z"  # the conversation's time


def test_chatgpt_export_folder_and_zip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.write(CHATGPT, "conversations.json")
        out.writestr("chat.html", "<html></html>")
    one, two = f"sqlite:{tmp_path / 'a.db'}", f"sqlite:{tmp_path / 'b.db'}"
    assert _cli(capsys, one, "import", "--format", "chatgpt", str(archive))[0] == 0
    assert _cli(capsys, two, "import", "--format", "chatgpt", str(CHATGPT.parent))[0] == 0
    strip = [{k: v for k, v in r.items() if k != "stored_at"} for r in _records(one)]
    assert strip == [{k: v for k, v in r.items() if k != "stored_at"} for r in _records(two)]
    assert len(strip) == 6


def _refused(
    capsys: pytest.CaptureFixture[str], url: str, fmt: str, path: Path, *fragments: str
) -> str:
    before = _records(url)
    code, out, err = _cli(capsys, url, "import", "--format", fmt, str(path))
    assert code == 2 and out == "", (out, err)
    assert err.startswith(f"memlib: error: {path}"), err
    assert err.count("\n") == 1 and "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    assert _records(url) == before  # nothing half-imported
    return err


def test_a_broken_line_in_the_middle_stops_everything(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    malformed = next((FIXTURES / "claude-code-malformed").iterdir())
    # Two good files and one bad one: not one record of the good ones is written.
    before = _records(url)
    code, out, err = _cli(
        capsys, url, "import", "--format", "claude-code", str(CLAUDE), str(malformed)
    )
    assert code == 2 and f"{malformed}: line 3: invalid JSON" in err
    assert _records(url) == before == []
    _refused(capsys, url, "claude-code", malformed, ": line 3: invalid JSON")


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"timestamp": "yesterday"}, "line 4: timestamp: invalid timestamp: 'yesterday'"),
        ({"timestamp": "2026-07-14T09:03:40"}, "line 4: timestamp: invalid timestamp"),
        ({"uuid": None}, "line 4: uuid: must be a non-empty string"),
        ({"sessionId": ""}, "line 4: sessionId: must be a non-empty string"),
        ({"message": "hello"}, "line 4: message: must be an object"),
        ({"message": {"role": "user", "content": 7}}, "line 4: message.content: must be a"),
        (
            {"message": {"role": "user", "content": [{"type": "text", "text": 3}]}},
            "line 4: message.content[0].text: must be a string",
        ),
    ],
)
def test_a_bad_claude_code_field_is_named(
    change: dict[str, Any], fragment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = WEBAPP.read_text("utf-8").splitlines()
    entry = json.loads(lines[3])
    entry.update(change)
    lines[3] = json.dumps(entry)
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(lines) + "\n", "utf-8")
    url = f"sqlite:{tmp_path / 's.db'}"
    _refused(capsys, url, "claude-code", path, f"{path}: {fragment}")


def _conversations() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(CHATGPT.read_text("utf-8"))
    return data


@pytest.mark.parametrize("case", ["json", "role", "current", "loop", "time", "list"])
def test_a_bad_chatgpt_field_is_named(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data: Any = _conversations()
    path = tmp_path / "conversations.json"
    node = '.mapping["u-0001"]'
    if case == "json":
        text = json.dumps(data, indent=1)
        path.write_text(text.replace('"title": null', '"title": nul'), "utf-8")
        line = text[: text.index('"title": null')].count("\n") + 1
        fragment = f"{path}: line {line}, column "
    else:
        if case == "role":
            data[0]["mapping"]["u-0001"]["message"]["author"] = {"name": "x"}
            fragment = f"{path}: conversations[0]{node}.message.author.role: must be a string"
        elif case == "current":
            data[1]["current_node"] = "missing"
            fragment = f"{path}: conversations[1].current_node: must name a node of mapping"
        elif case == "loop":
            data[0]["mapping"]["sys-0001"]["parent"] = "a-0002"
            fragment = "parent: the parents form a loop"
        elif case == "time":
            data[0]["mapping"]["u-0001"]["message"]["create_time"] = "soon"
            fragment = f"conversations[0]{node}.message.create_time: invalid timestamp: 'soon'"
        else:
            data = {"conversations": data}
            fragment = f"{path}: must be a JSON list of conversations"
        path.write_text(json.dumps(data), "utf-8")
    url = f"sqlite:{tmp_path / 's.db'}"
    _refused(capsys, url, "chatgpt", path, fragment)


def test_a_long_message_becomes_parts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Past a record's 20,000 characters or 4,096 distinct terms: parts, each a record."""
    words = " ".join(f"word{i}" for i in range(6_000))  # 6,000 distinct terms, 53,890 chars
    han = "".join(chr(0x4E00 + i) for i in range(9_000))  # 8,999 distinct bigrams
    lines = WEBAPP.read_text("utf-8").splitlines()
    entries = []
    for n, text in enumerate((words, han)):
        entry = json.loads(lines[3])
        entry.update(uuid=f"long-{n}")
        entry["message"]["content"] = text
        entries.append(json.dumps(entry, ensure_ascii=False))
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(entries) + "\n", "utf-8")
    url = f"sqlite:{tmp_path / 's.db'}"
    code, out, err = _cli(capsys, url, "import", "--format", "claude-code", str(path))
    assert (code, err) == (0, ""), err
    records = _records(url)
    by_message: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_message.setdefault(record["memory_id"].rsplit(".", 1)[0], []).append(record)
    assert len(by_message) == 2
    for parts, text in zip(by_message.values(), (words, han), strict=True):
        assert len(parts) > 1
        assert [p["memory_id"].rsplit(".", 1)[1] for p in parts] == [
            str(i) for i in range(1, len(parts) + 1)
        ]
        assert all(len(p["content"]) <= LIMITS["content"] for p in parts)
        pieces = [p["content"].removeprefix("user: ") for p in parts]
        assert (" " if text is words else "").join(pieces) == text
    assert MAX_TERMS < 6_000


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:{tmp_path / 's.db'}"
    code, out, err = _cli(capsys, url, "import", "--format", "chatgpt", "-")
    assert code == 2 and "reads files, not -" in err
    code, out, err = _cli(capsys, url, "import", str(WEBAPP), str(CHATGPT))
    assert code == 2 and "one FILE (or -) at a time" in err
    code, out, err = _cli(capsys, url, "import", "--format", "claude-code", str(tmp_path / "no"))
    assert code == 2 and "no such file or folder" in err
