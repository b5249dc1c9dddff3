"""``memlib export`` and ``memlib import`` of what it wrote: the same store, byte for byte.

A store is built on one backend with a clock that moves (every write its own
``stored_at``), with retractions, a supersede, a profile and text a terminal must not get
raw; exported; imported into an empty store of another backend; and compared: the two
exports, every recall (three rankers, several queries, with and without ``known_at``) and
every record's ``explain``, as ``to_json()``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.pgserver import pg_dsn, pg_url  # noqa: F401  (fixtures)

from memlib import RecallEngine, RemoteMemoryDuplicateError, open_store
from memlib._bulk import ReplayClock, import_jsonl
from memlib.cli import main
from memlib.sample import SAMPLE_AS_OF, sample_records

USER = "alice"
RANKERS = ("baseline", "bm25", "bm25+stopwords")
QUERIES = ("layered memory", "login test cookie", "passport", "分层记忆", "retrieval ranking")
KNOWN_AT = ("2026-08-02T00:00:00Z", "2026-08-05T12:00:00Z", None)
EVIL = "rtl \u202e override and zero\u200bwidth, café 中文"


def _ticking(start: datetime) -> Callable[[], datetime]:
    """A clock one day and 0.25 s later at every write."""
    moments: Iterator[datetime] = (
        start + timedelta(days=n, microseconds=250_000 * n) for n in range(1_000)
    )
    return lambda: next(moments)


def _source(source_id: str, captured_at: str, title: str = "a session") -> dict[str, str]:
    return {
        "source_id": source_id,
        "source_type": "conversation_transcript",
        "title": title,
        "captured_at": captured_at,
    }


def _item(memory_id: str, content: str, source_id: str, captured_at: str) -> dict[str, Any]:
    return {
        "kind": "conversation",
        "memory_id": memory_id,
        "content": content,
        "summary": content[:80],
        "source": _source(source_id, captured_at),
    }


def _fill(url: str) -> None:
    """The origin store: each write at its own time."""
    store = open_store(url, user_id=USER, clock=_ticking(datetime(2026, 8, 1, tzinfo=UTC)))
    store.append_many(sample_records())
    store.append_many(
        [
            _item("login-1", "user: the login test fails on CI", "s-1", "2026-07-14T09:00:00Z"),
            _item("login-2", "assistant: poll for the cookie", "s-1", "2026-07-14T09:01:00.5Z"),
            _item("passport-1", "user: my passport expires in 2027", "s-2", "2026-07-17T08:00:00Z"),
            _item("evil-1", f"user: {EVIL} layered memory", EVIL, "2026-07-18T08:00:00Z"),
        ]
    )
    store.retract(
        "login-1", reason="said by mistake", source=_source("cli", "2026-08-03T00:00:00Z")
    )
    store.supersede(
        "passport-1",
        _item(
            "passport-2", "user: my passport expires in March 2028", "s-2", "2026-07-19T00:00:00Z"
        ),
        reason="renewed",
    )
    store.append(
        kind="profile",
        memory_id="profile-003",
        content="Prefers short answers; lives in Lyon.",
        summary="profile",
        source=_source("profile-snapshot-003", "2026-08-04T00:00:00Z", "profile"),
    )
    store.retract(
        "conversation-003",
        reason="out of date",
        source=_source("cli", "2026-08-05T00:00:00Z"),
        retraction_id="retract-custom-id",
    )
    store.close()


def _answers(url: str) -> list[str]:
    """Every recall and explain we compare, as ``to_json()``."""
    store = open_store(url, user_id=USER)
    ids = [r.memory_id for r in store.read_all()]
    out: list[str] = []
    for ranker in RANKERS:
        engine = RecallEngine(store, ranker=ranker)
        for query in QUERIES:
            for known_at in KNOWN_AT:
                out.append(
                    engine.recall(
                        query, limit=10, as_of=SAMPLE_AS_OF, query_id="q-1", known_at=known_at
                    ).to_json()
                )
        for memory_id in ids:
            for query in QUERIES[:3]:
                out.append(
                    engine.explain(
                        query, memory_id, limit=3, as_of=SAMPLE_AS_OF, query_id="q-1"
                    ).to_json()
                )
            out.append(
                engine.explain(
                    "layered memory",
                    memory_id,
                    as_of=SAMPLE_AS_OF,
                    query_id="q-1",
                    known_at="2026-08-03T12:00:00Z",
                ).to_json()
            )
    store.close()
    return out


def _url(kind: str, tmp_path: Path, name: str, request: pytest.FixtureRequest) -> str:
    if kind == "jsonl":
        return f"jsonl:{tmp_path / name / 'records.jsonl'}"
    if kind == "sqlite":
        return f"sqlite:{tmp_path / (name + '.db')}"
    return str(request.getfixturevalue("pg_url"))


def _cli(capsys: pytest.CaptureFixture[str], url: str, *args: str) -> tuple[int, str, str]:
    code = main(["--store", url, "--user", USER, *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("origin", "target"),
    [
        ("jsonl", "sqlite"),
        ("sqlite", "jsonl"),
        ("jsonl", "jsonl"),
        ("postgresql", "jsonl"),
        ("jsonl", "postgresql"),
    ],
)
def test_export_then_import_gives_the_same_store(
    origin: str,
    target: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source_url = _url(origin, tmp_path, "origin", request)
    target_url = _url(target, tmp_path, "target", request)
    _fill(source_url)
    exported = tmp_path / "export.jsonl"
    code, out, err = _cli(capsys, source_url, "export", "--out", str(exported))
    assert (code, err) == (0, ""), err
    records = open_store(source_url, user_id=USER).read_all()
    assert out == f"exported {len(records)} records to {exported}\n"
    assert exported.stat().st_mode & 0o777 == 0o600
    # Standard output carries the same lines.
    code, printed, err = _cli(capsys, source_url, "export")
    assert printed.encode() == exported.read_bytes()
    assert "\\u202e" in printed and "\u202e" not in printed  # escaped, never raw

    code, out, err = _cli(capsys, target_url, "import", str(exported), "--no-progress")
    assert (code, err) == (0, ""), err
    assert out.startswith(f"imported {len(records)} records in ")

    assert open_store(target_url, user_id=USER).read_all() == records
    code, again, err = _cli(capsys, target_url, "export")
    assert again == printed  # byte for byte
    assert _answers(target_url) == _answers(source_url)


def test_the_comparison_sees_a_lost_stored_at(tmp_path: Path) -> None:
    """Without the replay clock the records land at import time: the same check fails."""
    source_url = f"jsonl:{tmp_path / 'o' / 'records.jsonl'}"
    _fill(source_url)
    exported = tmp_path / "export.jsonl"
    assert main(["--store", source_url, "--user", USER, "export", "--out", str(exported)]) == 0
    target_url = f"sqlite:{tmp_path / 't.db'}"
    target = open_store(target_url, user_id=USER)
    import_jsonl(target, exported)  # no clock: stored now
    assert [r.memory_id for r in target.read_all()] == [
        r.memory_id for r in open_store(source_url, user_id=USER).read_all()
    ]
    assert _answers(target_url) != _answers(source_url)


def test_import_of_an_export_twice_writes_nothing_the_second_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source_url = f"jsonl:{tmp_path / 'o' / 'records.jsonl'}"
    _fill(source_url)
    exported = tmp_path / "export.jsonl"
    assert _cli(capsys, source_url, "export", "--out", str(exported))[0] == 0
    target_url = f"sqlite:{tmp_path / 't.db'}"
    assert _cli(capsys, target_url, "import", str(exported), "--no-progress")[0] == 0
    before = open_store(target_url, user_id=USER).read_all()
    code, out, err = _cli(capsys, target_url, "import", str(exported), "--no-progress")
    assert code == 2 and out == ""
    assert err.startswith("memlib: error: duplicate memory_id: ") and err.count("\n") == 1
    assert open_store(target_url, user_id=USER).read_all() == before


def _export_lines(tmp_path: Path) -> list[dict[str, Any]]:
    source_url = f"jsonl:{tmp_path / 'o' / 'records.jsonl'}"
    _fill(source_url)
    store = open_store(source_url, user_id=USER)
    return [r.to_dict() for r in store.read_all()]


def _edit(lines: list[dict[str, Any]], memory_id: str, **changes: Any) -> list[dict[str, Any]]:
    return [{**line, **changes} if line["memory_id"] == memory_id else line for line in lines]


@pytest.mark.parametrize(
    "name",
    ["summary", "split_pair", "late_target", "unknown_target", "stored_at", "links", "twice"],
)
def test_a_bad_export_line_names_file_line_and_field_and_writes_nothing(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _export_lines(tmp_path)
    number = {line["memory_id"]: n for n, line in enumerate(lines, start=1)}
    if name == "summary":
        bad = _edit(lines, "retract-login-1", summary="withdrawn")
        expected = f"line {number['retract-login-1']}: summary: "
    elif name == "split_pair":
        bad = [line for line in lines if line["memory_id"] != "retract-passport-1"]
        bad.insert(0, next(x for x in lines if x["memory_id"] == "retract-passport-1"))
        expected = "line 1: superseded_by: passport-2 must come on the line before"
    elif name == "late_target":
        first = next(x for x in lines if x["memory_id"] == "retract-login-1")
        bad = [first] + [x for x in lines if x is not first]
        expected = "line 1: retracts: memory login-1 comes later in the file"
    elif name == "unknown_target":
        bad = _edit(lines, "retract-login-1", retracts="nobody", summary="Retracts nobody")
        expected = f"line {number['retract-login-1']}: retracts: cannot retract unknown memory_id"
    elif name == "stored_at":
        bad = _edit(lines, "login-2", stored_at="yesterday")
        expected = f"line {number['login-2']}: stored_at: invalid timestamp: 'yesterday'"
    elif name == "links":
        bad = _edit(lines, "login-2", retracts="login-1")
        expected = f"line {number['login-2']}: retracts: only a retraction record may name"
    else:
        bad = lines + [
            {**next(x for x in lines if x["memory_id"] == "retract-login-1"), "memory_id": "r-2"}
        ]
        expected = f"line {len(lines) + 1}: retracts: memory login-1 is already retracted"
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in bad), "utf-8")
    target_url = f"sqlite:{tmp_path / 't.db'}"
    open_store(target_url, user_id=USER).append(
        **_item("kept", "kept", "s-0", "2026-07-01T00:00:00Z")
    )
    before = open_store(target_url, user_id=USER).read_all()
    code, out, err = _cli(capsys, target_url, "import", str(path), "--no-progress")
    assert code == 2 and out == "", err
    assert err.startswith(f"memlib: error: {path}: {expected}"), err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert open_store(target_url, user_id=USER).read_all() == before


def test_retraction_of_a_record_already_in_the_store(tmp_path: Path) -> None:
    """An export's retraction may name a record the target holds already."""
    lines = _export_lines(tmp_path)
    retraction = next(x for x in lines if x["memory_id"] == "retract-login-1")
    target = open_store(f"sqlite:{tmp_path / 't.db'}", user_id=USER, clock=ReplayClock())
    target.append_many(
        [
            {k: v for k, v in x.items() if k not in ("user_scope", "stored_at")}
            for x in lines
            if x["memory_id"] == "login-1"
        ]
    )
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(retraction) + "\n", "utf-8")
    clock = ReplayClock()
    store = open_store(f"sqlite:{tmp_path / 't.db'}", user_id=USER, clock=clock)
    assert import_jsonl(store, path, clock=clock).records == 1
    assert store.read_all()[-1].to_dict() == retraction
    with pytest.raises(RemoteMemoryDuplicateError):
        import_jsonl(store, path, clock=clock)


def test_markdown_export_has_one_file_per_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source_url = f"jsonl:{tmp_path / 'o' / 'records.jsonl'}"
    _fill(source_url)
    records = open_store(source_url, user_id=USER).read_all()
    sources = {r.source.source_id for r in records}
    folder = tmp_path / "md"
    code, out, err = _cli(
        capsys, source_url, "export", "--format", "markdown", "--out", str(folder)
    )
    assert (code, err) == (0, ""), err
    files = sorted(folder.iterdir())
    assert out == f"exported {len(records)} records in {len(sources)} files to {folder}\n"
    assert len(files) == len(sources)
    assert all(f.suffix == ".md" and f.stat().st_mode & 0o777 == 0o600 for f in files)
    texts = [f.read_text("utf-8") for f in files]
    # Each record appears under exactly one source's file, by id.
    for record in records:
        holders = [t for t in texts if f" · {record.memory_id.replace('_', chr(92) + '_')}\n" in t]
        assert len(holders) == 1, record.memory_id
    session = next(t for t in texts if "passport-2" in t)
    assert "**Superseded by passport\\-2**" not in session  # ids are escaped only where needed
    assert "**Superseded by passport-2** at " in session and ": renewed" in session
    evil = "".join(texts)
    assert "\u202e" not in evil and "\\u202e" in evil
    # Never over an existing export.
    code, out, err = _cli(
        capsys, source_url, "export", "--format", "markdown", "--out", str(folder)
    )
    assert code == 2 and "not an empty folder" in err
    code, out, err = _cli(capsys, source_url, "export", "--format", "markdown")
    assert code == 2 and "--format markdown needs --out DIR" in err


def test_a_project_round_trips_alone_or_with_all_projects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exported records name their project; import puts them back in it, and refuses them
    in a store of another project (file, line, field), writing nothing."""
    origin = f"jsonl:{tmp_path / 'o' / 'records.jsonl'}"
    _fill(origin)
    alpha = open_store(origin, user_id=USER, project="alpha", clock=_ticking(SAMPLE_AS_OF))
    alpha.append_many(
        [_item("login-1", "alpha: layered memory plan", "s-a", "2026-07-20T00:00:00Z")]
    )
    alpha.retract("login-1", reason="wrong", source=_source("cli", "2026-08-11T00:00:00Z"))
    alpha.append(**_item("a-2", "alpha: layered memory again", "s-a", "2026-07-21T00:00:00Z"))
    exported = tmp_path / "alpha.jsonl"
    assert _cli(capsys, origin, "export", "--project", "alpha", "--out", str(exported))[0] == 0
    lines = [json.loads(line) for line in exported.read_text("utf-8").splitlines()]
    assert [line["project"] for line in lines] == ["alpha"] * 3

    target = f"sqlite:{tmp_path / 't.db'}"
    code, out, err = _cli(capsys, target, "import", str(exported), "--no-progress")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err == (
        f"memlib: error: {exported}: line 1: project: memory login-1 is of project alpha; "
        "the store is opened in no project\n"
    )
    code, _, err = _cli(capsys, target, "import", str(exported), "--project", "beta")
    assert code == 2 and err.endswith("opened in project beta\n")
    assert open_store(target, user_id=USER, project="beta").read_all() == ()
    assert open_store(target, user_id=USER).read_all() == ()
    code, _, err = _cli(capsys, target, "import", str(exported), "--project", "alpha")
    assert (code, err) == (0, "")
    assert open_store(target, user_id=USER, project="alpha").read_all() == alpha.read_all()

    every = tmp_path / "every.jsonl"
    assert _cli(capsys, origin, "export", "--all-projects", "--out", str(every))[0] == 0
    copy = f"jsonl:{tmp_path / 'c' / 'records.jsonl'}"
    code, out, err = _cli(capsys, copy, "import", str(every), "--all-projects", "--no-progress")
    assert (code, err) == (0, ""), err
    for project in (None, "alpha"):
        theirs = open_store(copy, user_id=USER, project=project)
        ours = open_store(origin, user_id=USER, project=project)
        assert theirs.read_all() == ours.read_all()
        copied, original = (
            RecallEngine(s).recall("layered memory", 10, SAMPLE_AS_OF, "q") for s in (theirs, ours)
        )
        assert copied.hits and copied.to_json() == original.to_json()
    code, again, _ = _cli(capsys, copy, "export", "--all-projects")
    assert again.encode() == every.read_bytes()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(every.read_text("utf-8").replace('"project":"alpha"', '"project":" a"'), "utf-8")
    code, _, err = _cli(capsys, target, "import", str(bad), "--all-projects", "--no-progress")
    assert code == 2 and err.startswith(f"memlib: error: {bad}: line ") and err.count("\n") == 1
    assert ": project: project must hold no whitespace but single spaces" in err
