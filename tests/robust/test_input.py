"""Issue 13: what hostile or careless input can do at the edges (points 3, 5, 6 and 7).

- JSON past memlib's limits (nested a thousand deep, a 4,301-digit number) or with a
  key given twice, on stdin, in an import file, in a store line the doctor checks: one
  line naming the line, never a traceback.
- One record may not cost an index unbounded memory: at most ``MAX_TERMS`` distinct
  terms, refused at write on every backend, with the field and the limit named.
- ``--user ""`` is refused for every command; unknown ``source`` keys, timestamps more
  precise than a microsecond and a byte order mark are refused, not dropped or cut.
- ``import -`` and ``import /dev/stdin`` read standard input; a failed import says how
  many records landed; a re-import of many duplicates prints one short line.
- ``doctor --repair`` never cuts a file through a link or a file another user may write.

CLI behaviour runs in real subprocesses (``python -m memlib``), as in test_cli.py.
Names from the modules under test are imported inside the tests, so each test fails
alone (not the whole module) on code without them.
"""

from __future__ import annotations

import errno
import json
import os
import random
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from memlib import (
    MemorySource,
    RemoteMemoryCorruptionError,
    RemoteMemoryError,
    RemoteMemoryValidationError,
    open_store,
)
from memlib.sample import scope_path

USER = "alice"
SOURCE = {
    "source_id": "s",
    "source_type": "import",
    "title": "t",
    "captured_at": "2026-08-01T00:00:00Z",
}
DEEP = "[" * 1000 + "]" * 1000
BIG_INT = "9" * 4301


def _item(memory_id: str, content: str = "layered memory", **extra: Any) -> dict[str, Any]:
    return {
        "kind": "conversation",
        "memory_id": memory_id,
        "content": content,
        "summary": "s",
        "source": dict(SOURCE),
        **extra,
    }


def _line(memory_id: str, **extra: Any) -> str:
    return json.dumps(_item(memory_id, **extra), ensure_ascii=False)


def _han(count: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    return "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(count))


def _distinct_han(count: int, seed: int = 1) -> str:
    """``count`` characters whose ``count - 1`` bigrams are all different."""
    rng = random.Random(seed)
    text, seen = [chr(rng.randint(0x4E00, 0x9FFF))], set()
    while len(text) < count:
        char = chr(rng.randint(0x4E00, 0x9FFF))
        if text[-1] + char not in seen:
            seen.add(text[-1] + char)
            text.append(char)
    return "".join(text)


@pytest.fixture
def run(tmp_path: Path, subprocess_env: dict[str, str], python: str):
    """``run(*args, stdin=b"")``: ``python -m memlib`` with its home in tmp_path."""
    env = {
        **subprocess_env,
        "WORKBUDDY_HOME": str(tmp_path / "home"),
        "WORKBUDDY_USER_ID": USER,
        "TMPDIR": str(tmp_path),
    }

    def call(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [python, "-m", "memlib", *args],
            input=stdin,
            capture_output=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
        return subprocess.CompletedProcess(
            proc.args,
            proc.returncode,
            proc.stdout.decode("utf-8", "replace"),
            proc.stderr.decode("utf-8", "replace"),
        )

    call.records = scope_path(tmp_path / "home" / "remote-memory", USER)  # type: ignore[attr-defined]
    return call


def _one_line(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert proc.returncode != 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.endswith("\n"), proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, (fragment, proc.stderr)
    return proc.stderr


# -- point 3 and 7: JSON on stdin and in import files ------------------------------------

STDIN_CASES = {
    "nested": (DEEP + "\n", "stdin line 1", "nested 1,000 levels deep"),
    "big_int": ('{"memory_id": ' + BIG_INT + "}\n", "stdin line 1", "4,301 characters"),
    "duplicate_key": (
        _line("a") + "\n" + _line("b")[:-1] + ', "content": "again"}\n',
        "stdin line 2",
        "duplicate key 'content'",
    ),
    "bom": ("\ufeff" + _line("a") + "\n", "stdin line 1", "byte order mark"),
    "not_utf8": (None, "stdin line 1", "not UTF-8"),
}


@pytest.mark.parametrize("name", sorted(STDIN_CASES))
def test_bad_json_on_stdin_is_one_line_and_writes_nothing(run, name: str) -> None:
    text, *fragments = STDIN_CASES[name]
    data = text.encode("utf-8") if text is not None else _line("a").encode()[:-3] + b'\xff"}\n'
    _one_line(run("append", stdin=data), *fragments)
    assert not run.records.exists()


IMPORT_CASES = {
    "nested": (DEEP, "line 2: invalid JSON: nested 1,000 levels deep"),
    "big_int": ('{"memory_id": ' + BIG_INT + "}", "line 2: invalid JSON: a number of 4,301"),
    "duplicate_key": (
        _line("b")[:-1] + ', "memory_id": "c"}',
        "line 2: invalid JSON: duplicate key 'memory_id'",
    ),
    "source_key": (
        _line("b", source={**SOURCE, "url": "x"}),
        "line 2: source has unknown fields: url",
    ),
    "seven_digits": (
        _line("b", source={**SOURCE, "captured_at": "2026-08-01T00:00:00.1234567Z"}),
        "line 2: invalid timestamp: '2026-08-01T00:00:00.1234567Z'",
    ),
}


@pytest.mark.parametrize("name", sorted(IMPORT_CASES))
def test_bad_import_line_names_the_line_and_writes_nothing(tmp_path: Path, name: str) -> None:
    from memlib._bulk import import_jsonl

    bad, message = IMPORT_CASES[name]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join([_line("a"), bad, _line("z")]) + "\n", encoding="utf-8")
    store = open_store(f"jsonl:{scope_path(tmp_path, USER)}", user_id=USER)
    with pytest.raises(RemoteMemoryError) as info:
        import_jsonl(store, path)
    assert str(info.value).startswith(message), str(info.value)
    assert store.read_all() == ()


def test_import_refuses_a_bom_as_the_store_does(tmp_path: Path, run) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (_line("a") + "\n").encode())
    _one_line(run("import", str(path)), "line 1: invalid JSON", "byte order mark")
    assert not run.records.exists()
    # What the store says of the same bytes as its own file: refused too.
    run.records.parent.mkdir(parents=True, mode=0o700)
    store = open_store(f"jsonl:{run.records}", user_id=USER)
    run.records.write_bytes(
        b"\xef\xbb\xbf" + (json.dumps(store.append_many([_item("x")])[0].to_dict()) + "\n").encode()
    )
    run.records.chmod(0o600)
    with pytest.raises(RemoteMemoryCorruptionError, match="line 1"):
        open_store(f"jsonl:{run.records}", user_id=USER).read_all()


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_import_reads_standard_input(run, name: str) -> None:
    lines = "".join(_line(f"m-{i}") + "\n" for i in range(7))
    proc = run("import", name, "--batch-size", "3", stdin=lines.encode())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "imported 7 records in 3 batches\n"
    stored = open_store(f"jsonl:{run.records}", user_id=USER).read_all()
    assert [r.memory_id for r in stored] == [f"m-{i}" for i in range(7)]


def test_a_failed_reimport_prints_one_short_line(run, tmp_path: Path) -> None:
    path = tmp_path / "many.jsonl"
    path.write_text("".join(_line(f"record-{i:05d}") + "\n" for i in range(2000)), encoding="utf-8")
    assert run("import", str(path)).returncode == 0
    err = _one_line(
        run("import", str(path)),
        "duplicate memory_id: record-00000, ",
        "… and 1,995 more (2,000 in all)",
    )
    assert len(err) < 200


class _FailingStore:
    """Delegates to a real store; the ``fail_at``-th ``append_many`` raises ``error``."""

    def __init__(self, store: Any, fail_at: int, error: BaseException) -> None:
        self._store, self._fail_at, self._error, self.calls = store, fail_at, error, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def append_many(self, items: Any) -> Any:
        self.calls += 1
        if self.calls == self._fail_at:
            raise self._error
        return self._store.append_many(items)


def test_an_import_that_fails_midway_says_how_many_records_landed(tmp_path: Path) -> None:
    from memlib._bulk import import_jsonl

    path = tmp_path / "in.jsonl"
    path.write_text("".join(_line(f"m-{i}") + "\n" for i in range(10)), encoding="utf-8")
    real = open_store(f"jsonl:{scope_path(tmp_path, USER)}", user_id=USER)
    store = _FailingStore(real, 3, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "disk"))
    with pytest.raises(RemoteMemoryError) as info:
        import_jsonl(store, path, batch_size=4)
    message = str(info.value)
    assert "No space left on device" in message
    assert "8 records in 2 batches were imported before the failure" in message
    assert "the first record not imported is m-8" in message
    assert len(real.read_all()) == 8


def test_an_oserror_at_the_cli_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from memlib import cli
    from memlib.cli import profile

    def fail(args: Any) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", "/somewhere/records.jsonl")

    monkeypatch.setattr(profile, "cmd_profile", fail)
    assert cli.main(["profile"]) != 0
    err = capsys.readouterr().err
    assert err == "memlib: error: /somewhere/records.jsonl: Permission denied\n"


# -- point 6: an empty user -------------------------------------------------------------


@pytest.mark.parametrize("user", ["", "   "])
@pytest.mark.parametrize(
    "command",
    [
        ("recall", "layered memory"),
        ("profile",),
        (
            "append",
            "--memory-id",
            "m",
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
            "2026-08-01T00:00:00Z",
        ),
        ("demo",),
    ],
)
def test_an_empty_user_is_refused_by_every_command(
    run, user: str, command: tuple[str, ...]
) -> None:
    _one_line(run("--user", user, *command), "--user must not be empty")
    assert not (run.records.parent.parent.parent).exists()  # no home, no scope folder


# -- point 7: records --------------------------------------------------------------------


def test_unknown_source_keys_are_refused_like_top_level_ones() -> None:
    with pytest.raises(
        RemoteMemoryValidationError, match="^source has unknown fields: title2, url$"
    ):
        MemorySource.from_dict({**SOURCE, "url": "x", "title2": "y"})


@pytest.mark.parametrize("url", ["jsonl", "sqlite"])
def test_a_store_refuses_unknown_source_keys(tmp_path: Path, url: str) -> None:
    target = (
        f"jsonl:{scope_path(tmp_path, USER)}" if url == "jsonl" else f"sqlite:{tmp_path / 'm.db'}"
    )
    store = open_store(target, user_id=USER)
    with pytest.raises(RemoteMemoryValidationError, match="source has unknown fields: url"):
        store.append_many([_item("a", source={**SOURCE, "url": "x"})])
    assert store.read_all() == ()


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-08-01T00:00:00.1234567Z",
        "2026-08-01T00:00:00.0000001+02:00",
        "2026-08-01T00:00:00,12345678Z",
    ],
)
def test_fractions_past_the_microsecond_are_refused_not_cut(stamp: str) -> None:
    with pytest.raises(RemoteMemoryCorruptionError, match="invalid timestamp: .*microsecond"):
        MemorySource.from_dict({**SOURCE, "captured_at": stamp})


def test_fractions_to_the_microsecond_are_kept() -> None:
    for given, kept in [
        ("2026-08-01T00:00:00.123456Z", "2026-08-01T00:00:00.123456Z"),
        ("2026-08-01T00:00:00.1234560Z", "2026-08-01T00:00:00.123456Z"),
        ("2026-08-01T02:00:00.5+02:00", "2026-08-01T00:00:00.5Z"),
    ]:
        assert MemorySource.from_dict({**SOURCE, "captured_at": given}).captured_at == kept


# -- point 5: what one record may cost ------------------------------------------------


@pytest.mark.parametrize("url", ["jsonl", "sqlite"])
def test_a_record_past_the_distinct_term_limit_is_refused_at_write(
    tmp_path: Path, url: str
) -> None:
    from memlib.records import LIMITS, MAX_TERMS

    target = (
        f"jsonl:{scope_path(tmp_path, USER)}" if url == "jsonl" else f"sqlite:{tmp_path / 'm.db'}"
    )
    store = open_store(target, user_id=USER)
    # The record: 20,000 random Han characters, all valid, ~20,000 bigrams.
    with pytest.raises(RemoteMemoryValidationError) as info:
        store.append_many([_item("huge", content=_han(LIMITS["content"]))])
    message = str(info.value)
    assert message.startswith(f"content exceeds the {MAX_TERMS:,}-distinct-term limit per record")
    assert store.read_all() == ()
    # At the limit exactly (summary "s" is one term), at the full content length: accepted.
    at_limit = _distinct_han(MAX_TERMS)  # MAX_TERMS - 1 bigrams
    padded = (at_limit + " ") * (LIMITS["content"] // (MAX_TERMS + 1))
    store.append_many([_item("at-limit", content=padded.strip())])
    with pytest.raises(RemoteMemoryValidationError, match=f"{MAX_TERMS + 1:,} distinct terms"):
        store.append(
            kind="conversation",
            memory_id="over",
            content=_distinct_han(MAX_TERMS + 1),
            summary="s",
            source=SOURCE,
        )
    assert [r.memory_id for r in store.read_all()] == ["at-limit"]


def test_the_term_limit_counts_words_and_the_summary_too(tmp_path: Path) -> None:
    from memlib.records import MAX_TERMS

    store = open_store(f"jsonl:{scope_path(tmp_path, USER)}", user_id=USER)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = [letters[i // 676] + letters[i // 26 % 26] + letters[i % 26] for i in range(MAX_TERMS)]
    store.append_many([_item("words", content=" ".join(words[:-1]), summary=words[-1])])
    with pytest.raises(RemoteMemoryValidationError, match="distinct-term limit"):
        store.append_many([_item("more", content=" ".join(words), summary="extra")])
    # Repeats are no new terms: a long text of few words is fine.
    store.append_many([_item("long", content=" ".join(words[:100] * 30))])


def test_an_import_of_a_record_past_the_term_limit_names_its_line(tmp_path: Path) -> None:
    from memlib._bulk import import_jsonl

    path = tmp_path / "in.jsonl"
    path.write_text(
        "\n".join([_line("a"), _line("b", content=_han(20_000))]) + "\n", encoding="utf-8"
    )
    store = open_store(f"jsonl:{scope_path(tmp_path, USER)}", user_id=USER)
    with pytest.raises(RemoteMemoryValidationError, match="^line 2: content exceeds the"):
        import_jsonl(store, path)
    assert store.read_all() == ()


def test_no_character_normalizes_past_max_growth() -> None:
    # check_terms skips cutting text shorter than MAX_TERMS / MAX_GROWTH characters:
    # sound only while no character normalizes to more than MAX_GROWTH.
    from memlib._tokens import MAX_GROWTH, normalize_text

    worst = 1
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF or (
            not unicodedata.decomposition(char) and char.casefold() == char
        ):
            continue
        worst = max(worst, len(normalize_text(char)))
    assert worst == MAX_GROWTH


def test_the_term_check_agrees_with_counting_every_term(monkeypatch: pytest.MonkeyPatch) -> None:
    # With a limit of 12, short texts of characters that normalize to many (U+FDFA is
    # four words, U+3300 a katakana word, ß two letters) cross it: the shortcuts of
    # check_terms must refuse exactly what counting every term refuses.
    from memlib import records
    from memlib.normalize import tokenize

    monkeypatch.setattr(records, "MAX_TERMS", 12)
    alphabet = [
        "\ufdfa",
        "\u3300",
        "\u3301",
        "\ufb03",
        "ß",
        "a",
        "b",
        "7",
        " ",
        " ",
        "记",
        "忆",
        "层",
        "\u2474",
        "\u337f",
    ]
    rng = random.Random(13)
    refused = 0
    for _ in range(3000):
        summary = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))).strip() or "s"
        content = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 16))).strip() or "c"
        over = len(tokenize(f"{summary} {content}")) > 12
        try:
            records.check_terms(summary, content)
        except RemoteMemoryValidationError:
            refused += 1
            assert over, (summary, content)
        else:
            assert not over, (summary, content)
    assert refused > 100


# -- point 3 and the repair rule: doctor ---------------------------------------------


def _torn_store(run) -> Path:
    store = open_store(f"jsonl:{run.records}", user_id=USER)
    store.append_many([_item("a"), _item("b")])
    with open(run.records, "ab") as handle:
        handle.write(b'{"memory_id": "torn"')
    return run.records


def test_doctor_reports_a_deeply_nested_line_without_crashing(run) -> None:
    path = _torn_store(run)
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size - len(b'{"memory_id": "torn"'))
        handle.seek(0, os.SEEK_END)
        handle.write((DEEP + "\n" + '{"n": ' + BIG_INT + "}\n").encode())
    proc = run("doctor", str(path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "problem: line 3: invalid JSON: nested 1,000 levels deep" in proc.stdout
    assert "problem: line 4: invalid JSON: a number of 4,301 characters" in proc.stdout


def test_doctor_repair_never_cuts_through_a_link(run, tmp_path: Path) -> None:
    real = _torn_store(run)
    victim = tmp_path / "victim.jsonl"
    os.replace(real, victim)
    before = victim.read_bytes()
    real.symlink_to(victim)
    proc = run("doctor", str(real), "--repair")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert victim.read_bytes() == before
    assert not list(real.parent.glob("*.bak"))


def test_doctor_repair_refuses_a_lock_link_and_a_file_others_may_write(run, tmp_path: Path) -> None:
    path = _torn_store(run)
    before = path.read_bytes()
    lock = path.with_name("records.jsonl.lock")
    victim = tmp_path / "victim.txt"
    victim.write_text("important\n")
    lock.unlink()
    lock.symlink_to(victim)
    _one_line(run("doctor", str(path), "--repair"), "refusing to use", "symbolic link")
    assert victim.read_text() == "important\n" and path.read_bytes() == before
    lock.unlink()
    path.chmod(0o666)
    _one_line(run("doctor", str(path), "--repair"), "refusing to use", "writable by other users")
    assert path.read_bytes() == before
    assert not list(path.parent.glob("*.bak"))


def test_doctor_does_not_hang_on_a_fifo_lock(run) -> None:
    path = _torn_store(run)
    lock = path.with_name("records.jsonl.lock")
    lock.unlink()
    os.mkfifo(lock, 0o600)
    proc = run("doctor", str(path))  # run() times out (and fails) rather than hang
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "lock file is not a regular file" in proc.stdout


# -- point 3: the same JSON in a store line (JSONL), met by recall, append and chat -------

STORE_LINE_CASES = {
    "nested": ('{"memory_id": ' + DEEP + "}", "levels deep (at most"),
    "big_int": ('{"memory_id": ' + BIG_INT + "}", "4,301 characters"),
}


def _store_with_bad_line(run, line: str) -> Path:
    assert run("append", stdin=(_line("m-1") + "\n").encode()).returncode == 0
    path: Path = run.records
    with path.open("ab") as handle:
        handle.write(line.encode() + b"\n")
    return path


@pytest.mark.parametrize("name", sorted(STORE_LINE_CASES))
@pytest.mark.parametrize(
    "command",
    [
        ("recall", "layered memory"),
        ("append",),
        ("--user", USER, "chat", "--scripted", "-m", "layered memory?"),
    ],
)
def test_a_pathological_store_line_is_one_line_naming_it(run, name: str, command) -> None:
    line, fragment = STORE_LINE_CASES[name]
    path = _store_with_bad_line(run, line)
    before = path.read_bytes()
    stdin = (_line("m-2") + "\n").encode() if command == ("append",) else b""
    proc = run(*command, stdin=stdin)
    # chat: the profile is read at session start, before the model is asked anything.
    _one_line(proc, "invalid JSON at line 2", fragment)
    assert path.read_bytes() == before


def test_a_pathological_store_line_is_corruption_in_the_library(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    store = open_store(f"jsonl:{path}", user_id=USER)
    store.append(**_item("m-1"))
    with path.open("ab") as handle:
        handle.write(('{"a": ' + DEEP + "}\n").encode())
    with pytest.raises(RemoteMemoryCorruptionError, match="invalid JSON at line 2"):
        open_store(f"jsonl:{path}", user_id=USER).read_all()
