"""A log replaced, rewritten, cut and grown again, or restored under the same size, inode
and mtime (issue 32, items 1 and 8b).

The index file and the vectors file are derived from the log and name the prefix of it
they cover. Neither may be trusted because the log *looks* the same: ext4 hands a
removed file's inode number to the next file, ``cp -p`` and ``os.utime`` set the mtime
back, and an edit of one word keeps the size. Whatever happened, a recall answers as a
reader of the log alone would (or fails with a typed error), and a dense score is the
one of the record the log holds now.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.index_files import resign

from memlib import RecallEngine, RemoteMemoryError, RemoteMemoryStore
from memlib._vectors import pack
from memlib.cli import main
from memlib.normalize import normalize_recall_query
from memlib.rankers.embeddings import HashingEmbedder
from memlib.sample import fixed_clock
from memlib.stores.jsonl import _index as jsonl_index
from memlib.stores.jsonl import _vectors as jsonl_vectors
from memlib.stores.jsonl._doctor import check_store

USER = "alice"
AS_OF = datetime(2026, 8, 10, 12, tzinfo=UTC)
EMBEDDER = HashingEmbedder(64)
# All six letters: swapping one for another keeps every line's length.
WORDS = (
    "needle",
    "pinned",
    "harbor",
    "copper",
    "garden",
    "cedars",
    "orbits",
    "window",
    "travel",
    "budget",
    "kettle",
    "rivers",
    "ambers",
    "lights",
)
SOURCE = {
    "source_id": "s-1",
    "source_type": "test",
    "title": "t",
    "captured_at": "2026-08-01T12:00:00Z",
}
# Over the 4 KiB and 64 KiB the index file hashes at both ends of the log, so that an
# edit in the middle is seen by nothing but a check of every byte.
N = 420
RANKERS = ("baseline", "bm25")
# A record neither hashed window holds (lines are about 300 bytes).
MIDDLE = 120


def _item(i: int) -> dict[str, Any]:
    step = 1 + i % (len(WORDS) - 1)  # never a multiple of len(WORDS): two words at least
    words = " ".join(WORDS[(i + j * step) % len(WORDS)] for j in range(5))
    return {
        "kind": "conversation",
        "memory_id": f"m-{i:05d}",
        "content": f"record {i:05d} about {words} and more text to fill the line",
        "summary": f"summary {i:05d}",
        "source": SOURCE,
    }


def _store(path: Path, embedder: Any = None) -> RemoteMemoryStore:
    return RemoteMemoryStore(path, user_id=USER, clock=fixed_clock(), embedder=embedder)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log of N records with a vector each, and an index file that covers all of it."""
    folder = tmp_path_factory.mktemp("template")
    folder.chmod(0o700)
    path = folder / "records.jsonl"
    store = _store(path, EMBEDDER)
    for start in range(0, N, 100):
        store.append_many([_item(i) for i in range(start, min(N, start + 100))])
    assert _store(path).write_index_file()
    return path


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("scratch")


def _copy(template: Path, scratch: Path) -> Path:
    folder = Path(tempfile.mkdtemp(dir=scratch))
    folder.chmod(0o700)
    for name in ("records.jsonl", "records.jsonl.vectors"):
        shutil.copy2(template.with_name(name), folder / name)
    path = folder / "records.jsonl"
    # The index file as if written for this very copy: its log's device and inode.
    log = os.stat(path)
    index = template.with_name("records.jsonl.index").read_bytes()
    (folder / "records.jsonl.index").write_bytes(
        resign(index, header={"log_identity": [log.st_dev, log.st_ino]})
    )
    os.chmod(folder / "records.jsonl.index", 0o600)
    return path


def _swap_word(line: bytes, new: str) -> tuple[bytes, str]:
    """``line`` with the first of WORDS in its content (but ``new``) replaced by
    ``new``, and the word replaced. Only the content holds any of WORDS."""
    old = next(w for w in WORDS if f" {w} ".encode() in line and w != new)
    changed = line.replace(f" {old} ".encode(), f" {new} ".encode(), 1)
    assert len(changed) == len(line) and changed != line
    return changed, old


def _edited(data: bytes, docs: list[int], word: str) -> bytes:
    lines = data.split(b"\n")
    for doc in docs:
        lines[doc], _ = _swap_word(lines[doc], word)
    return b"\n".join(lines)


def _put(path: Path, data: bytes, how: str) -> None:
    """Make ``path`` hold ``data`` (as long as what it holds), keeping its mtime."""
    before = os.stat(path)
    assert len(data) == before.st_size
    if how == "rewrite":  # in place: same inode
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    elif how == "replace":  # rm and a new file: ext4 usually hands it the same inode
        os.unlink(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    else:  # "regrow": cut where the change begins, and append the rest again
        old = path.read_bytes()
        cut = next(i for i in range(len(data)) if data[i] != old[i])
        cut = old.rfind(b"\n", 0, cut) + 1
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, cut)
            os.pwrite(fd, data[cut:], cut)
        finally:
            os.close(fd)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def _answers(
    path: Path, queries: list[str], store: RemoteMemoryStore | None = None
) -> dict[tuple[str, str], Any]:
    out = {}
    for ranker in RANKERS:
        reader = store or _store(path)
        for text in queries:
            out[ranker, text] = (
                RecallEngine(reader, ranker=ranker)
                .recall(text, limit=5, as_of=AS_OF, query_id="q")
                .to_json()
            )
    return out


def _log_alone(path: Path, scratch: Path, queries: list[str]) -> dict[tuple[str, str], Any]:
    """The answers of a reader of a copy of the log with no index or vectors file."""
    folder = Path(tempfile.mkdtemp(dir=scratch))
    folder.chmod(0o700)
    shutil.copyfile(path, folder / "records.jsonl")
    reader = _store(folder / "records.jsonl")
    reader.INDEX_WRITE_MIN = reader.INDEX_WRITE_ALWAYS = 1 << 62
    return _answers(folder / "records.jsonl", queries, reader)


def _dense_is_right(store: RemoteMemoryStore, text: str) -> None:
    """Every dense score given is the one of the record the log holds now."""
    query = normalize_recall_query(
        text, user_scope=store.user_scope, limit=5, query_id="q", issued_at=AS_OF
    )
    scores = store.dense_scores(
        query, EMBEDDER.encode([text])[0], model=EMBEDDER.name, dimension=EMBEDDER.dimension
    )
    now = {r.memory_id: r.content for r in _store(store.path).read_all()}
    expected = EMBEDDER.encode([now[m] for m in scores.ids]) @ EMBEDDER.encode([text])[0]
    assert scores.scores.tolist() == pytest.approx(expected.tolist(), abs=1e-5)


def _same_or_typed(
    path: Path, reader: RemoteMemoryStore | None, expected: Any, queries: list[str]
) -> None:
    try:
        got = _answers(path, queries, reader)
    except RemoteMemoryError:
        got = _answers(path, queries, reader)  # a typed error, then the right answer
    assert got == expected


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    how=st.sampled_from(["rewrite", "replace", "regrow", "restore"]),
    # Records in the middle (neither hashed window sees them), and some near the ends.
    docs=st.lists(
        st.one_of(st.integers(MIDDLE - 20, MIDDLE + 40), st.integers(0, N - 1)),
        min_size=1,
        max_size=3,
        unique=True,
    ),
    word=st.sampled_from(WORDS[:4]),
    warm=st.booleans(),
)
def test_the_answer_is_the_logs_whatever_the_inode_size_and_mtime_say(
    template: Path, scratch: Path, how: str, docs: list[int], word: str, warm: bool
) -> None:
    path = _copy(template, scratch)
    original = path.read_bytes()
    edited = _edited(original, docs, word)
    if how == "restore":
        # The index and vectors were made from an edited log; an older copy (the
        # original) is put back over it.
        _put(path, edited, "rewrite")
        made = _store(path, EMBEDDER)
        assert made.write_index_file()
        missing = made.records_without_vectors(10)
        assert {r.memory_id for r in missing} == {f"m-{d:05d}" for d in docs}
        made.put_vectors(
            EMBEDDER.name,
            EMBEDDER.dimension,
            {r.memory_id: pack(EMBEDDER.encode([r.content])[0]) for r in missing},
        )
        new, how = original, "rewrite"
    else:
        new = edited
    queries = [word, f"{word} harbor"]
    reader = None
    if warm:
        reader = _store(path)
        _answers(path, queries, reader)
        _dense_is_right(reader, word)
    _put(path, new, how)
    expected = _log_alone(path, scratch, queries)
    _same_or_typed(path, reader, expected, queries)
    _dense_is_right(reader or _store(path), word)
    # And a new reader after it (the index file may have been rewritten by now).
    _same_or_typed(path, None, expected, queries)


def test_a_cold_reader_checks_every_byte_even_when_nothing_else_changed(
    template: Path, scratch: Path
) -> None:
    """The red team's case, at the library: one word in the middle, same inode."""
    path = _copy(template, scratch)
    ino = os.stat(path).st_ino
    at = path.read_bytes().find(f'"m-{MIDDLE:05d}"'.encode())
    assert 2 * jsonl_index.HEAD_BYTES < at < os.stat(path).st_size - jsonl_index.TAIL_BYTES - 1024
    _put(path, _edited(path.read_bytes(), [MIDDLE], "pinned"), "rewrite")
    assert os.stat(path).st_ino == ino
    fd = os.open(path, os.O_RDONLY)
    try:
        image, why = jsonl_index.read_index(
            str(path) + ".index", _store(path).user_scope, fd, os.stat(path).st_size
        )
    finally:
        os.close(fd)
    assert image is None and why == "the log's covered prefix is not the one it was built from"
    report = check_store(path)
    assert report.index is not None and report.index.status == "invalid"
    hits = RecallEngine(_store(path)).recall(f"pinned {MIDDLE:05d}", limit=1, as_of=AS_OF).hits
    assert [h.memory_id for h in hits] == [f"m-{MIDDLE:05d}"]


def test_a_warm_reader_reads_again_when_a_line_it_reads_is_not_the_one_it_indexed(
    template: Path, scratch: Path
) -> None:
    """A rewrite in the middle of a log that also grew is the one change a warm reader's
    cheap checks do not see; the line digests of the records it parses still do: a typed
    error (bm25 reads its hits after scoring) or the right answer, never an IndexError."""
    path = _copy(template, scratch)
    reader = _store(path)
    doc = MIDDLE
    word = f"{doc:05d}"  # in this record's content and summary only
    data = path.read_bytes()
    # Warm, but not on this record: one it had parsed would be served as parsed (the
    # log as it stood when read, the documented gap), not read again.
    for ranker in RANKERS:
        RecallEngine(reader, ranker=ranker).recall(f"{doc + 1:05d}", limit=10, as_of=AS_OF)
    fd = os.open(path, os.O_WRONLY)
    try:
        for text in ("record", "summary"):
            os.pwrite(fd, f"{text} 99999".encode(), data.find(f"{text} {word}".encode()))
    finally:
        os.close(fd)
    _store(path).append(**_item(N + 1))  # and the log grows: only its windows are looked at
    for ranker in RANKERS:
        try:
            result = RecallEngine(reader, ranker=ranker).recall(
                word, limit=10, as_of=AS_OF, query_id="q"
            )
        except RemoteMemoryError as exc:
            assert "changed under its index" in str(exc)
            result = RecallEngine(reader, ranker=ranker).recall(
                word, limit=10, as_of=AS_OF, query_id="q"
            )
        expected = RecallEngine(_store(path), ranker=ranker).recall(
            word, limit=10, as_of=AS_OF, query_id="q"
        )
        assert result.to_json() == expected.to_json()
        assert result.hits == ()


# -- the red team's reproduction, through the CLI -------------------------------------


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "cli"
    folder.mkdir(mode=0o700)
    monkeypatch.delenv("MEMLIB_STORE", raising=False)
    monkeypatch.delenv("MEMLIB_EMBEDDER", raising=False)
    yield folder


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memlib", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_red_team_sed_then_rm_and_cp_over_the_log(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = cli_env / "records.jsonl"
    data = cli_env / "import.jsonl"
    with data.open("w", encoding="utf-8") as out:
        for i in range(1, 1501):
            word = "needle" if i == 700 else "hay"
            out.write(
                json.dumps(
                    {
                        "memory_id": f"m-{i:05d}",
                        "content": f"record {i} about {word} stack",
                        "summary": f"s{i}",
                        "source": {**SOURCE, "source_id": f"c{i % 9}"},
                    }
                )
                + "\n"
            )
    store = ["--store", f"jsonl:{log}", "--user", USER]
    assert main([*store, "import", str(data), "--no-progress"]) == 0
    assert main([*store, "recall", "needle", "--json"]) == 0
    assert (log.parent / "records.jsonl.index").exists()
    capsys.readouterr()
    inode = os.stat(log).st_ino
    copy = cli_env / "copy.jsonl"
    done = subprocess.run(["sed", "s/needle/pinned/", str(log)], capture_output=True, check=True)
    copy.write_bytes(done.stdout)
    os.chmod(copy, 0o600)
    os.unlink(log)
    subprocess.run(["cp", str(copy), str(log)], check=True)
    print("same inode:", os.stat(log).st_ino == inode)
    # doctor first: the index file is no longer the log's.
    doctor = _cli("doctor", str(log))
    assert "index file: invalid, not used: the log's covered prefix is not the one" in (
        doctor.stdout
    ), doctor.stdout + doctor.stderr
    for ranker in ("baseline", "bm25"):
        capsys.readouterr()
        assert main([*store, "recall", "pinned", "--ranker", ranker, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert [h["memory_id"] for h in out["hits"]] == ["m-00700"], ranker
        recall = _cli(*store, "recall", "needle", "--ranker", ranker)
        assert recall.returncode == 0 and "Traceback" not in recall.stderr, recall.stderr
        assert "m-00700" not in recall.stdout


# -- temporary files of writers killed mid-way (item 8b) -----------------------------


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_stale_temporary_files_are_reported_and_removed(template: Path, scratch: Path) -> None:
    path = _copy(template, scratch)
    folder = path.parent
    dead = folder / f".records.jsonl.index.{_dead_pid()}.0123abcd.tmp"
    old = folder / f".records.jsonl.vectors.{os.getppid()}.89abcdef.tmp"
    live = folder / f".records.jsonl.index.{os.getpid()}.fedcba98.tmp"
    other = folder / f".notes.txt.index.{_dead_pid()}.01234567.tmp"
    for made in (dead, old, live, other):
        made.write_bytes(b"\0" * 4096)
    hours_ago = time.time() - 2 * 3600  # past STALE_TEMP_SECONDS
    os.utime(old, (hours_ago, hours_ago))

    report = check_store(path)
    stale = [p for p in report.problems if p.kind == "temp_file"]
    assert sorted(p.message.split()[3] for p in stale) == sorted([str(dead), str(old)])
    assert not report.healthy
    doctor = _cli("doctor", str(path))
    assert doctor.returncode == 1 and f"stale temporary file {dead}" in doctor.stdout

    # The next writer of the index file removes the dead writer's (under its folder
    # lock); the vectors file's own writer removes its kind.
    assert _store(path).write_index_file()
    assert not dead.exists() and old.exists() and live.exists() and other.exists()
    assert [p.message.split()[3] for p in check_store(path).problems] == [str(old)]
    from memlib.stores.jsonl._doctor import remove_temp_files  # (not in 478c4ac: imported here)

    removed = remove_temp_files(check_store(path))
    assert removed == [(str(old), 4096)]
    assert live.exists() and other.exists()
    live.unlink()
    report = check_store(path)
    assert report.healthy, report.problems

    # A vectors writer (under the store's lock) removes its dead writers' files too.
    dead_vectors = folder / f".records.jsonl.vectors.{_dead_pid()}.00000000.tmp"
    dead_vectors.write_bytes(b"x")
    store = _store(path, EMBEDDER)
    store.retract("m-00005", reason="wrong", source=SOURCE)
    assert not dead_vectors.exists()
    assert jsonl_vectors.vectors_path_for(str(path)) == str(path) + ".vectors"


def test_temporary_files_are_never_removed_through_a_linked_folder(
    template: Path, scratch: Path
) -> None:
    from memlib.stores.jsonl._doctor import RepairError, remove_temp_files

    real = _copy(template, scratch).parent
    dead = real / f".records.jsonl.index.{_dead_pid()}.0123abcd.tmp"
    dead.write_bytes(b"\0" * 16)
    link = scratch / "linked"
    link.symlink_to(real, target_is_directory=True)
    report = check_store(link / "records.jsonl")
    assert any(p.kind == "temp_file" for p in report.problems)
    with pytest.raises(RepairError, match="symbolic link"):
        remove_temp_files(report)
    assert dead.exists()
    assert remove_temp_files(check_store(real / "records.jsonl")) == [(str(dead), 16)]
