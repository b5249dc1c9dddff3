"""The JSONL index file (issue 15, item 2): derived, checked, never trusted blindly.

A new reader loads ``records.jsonl.index`` instead of parsing the log, catches up from
the tail, and answers exactly as a reader without the file would, whatever happened to
the file or the log since it was written (stale, truncated, bit-flipped, another
scope's, an older format; the log truncated, replaced or restored).
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import shutil
import stat
import subprocess
import sys
from array import array
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlib import (
    RecallEngine,
    RemoteMemoryCorruptionError,
    RemoteMemoryStore,
    RemoteMemoryUnsafePathError,
)
from memlib.records import user_scope_for
from memlib.stores._files import failure, open_private
from memlib.stores.jsonl import _index as jsonl_index
from memlib.stores.jsonl._doctor import check_store

USER = "alice"
AS_OF = datetime(2026, 8, 10, 12, tzinfo=UTC)
RANKERS = ("baseline", "bm25", "bm25+stopwords")
QUERIES = ("amber river lantern", "the quiet harbor", "copper garden notes meeting", "zzz")
WORDS = (
    "amber",
    "river",
    "lantern",
    "quiet",
    "harbor",
    "copper",
    "garden",
    "notes",
    "meeting",
    "the",
    "of",
    "budget",
    "travel",
    "window",
    "orbit",
    "cedar",
)
N = 1_200  # over INDEX_WRITE_MIN, and a log well over the hashed 4 KiB + 64 KiB windows


def _item(i: int, tag: str = "") -> dict[str, Any]:
    words = " ".join(WORDS[(i * k + len(tag)) % len(WORDS)] for k in (1, 3, 7, 11, 13))
    return {
        "kind": "conversation",
        "memory_id": f"m{tag}-{i:05d}",
        "content": f"record {i} {tag} about {words}",
        "summary": f"{WORDS[i % len(WORDS)]} {tag}",
        "source": {
            "source_id": f"s-{i % 7}",
            "source_type": "test",
            "title": f"t {i}",
            "captured_at": f"2026-0{1 + i % 8}-{1 + i % 27:02d}T{i % 24:02d}:00:00Z",
        },
    }


def _recall(store: RemoteMemoryStore, text: str, limit: int = 5) -> Any:
    return RecallEngine(store).recall(text, limit=limit, as_of=AS_OF, query_id="q")


def _fill(path: Path, count: int = N, tag: str = "", user: str = USER) -> None:
    store = RemoteMemoryStore(path, user_id=user)
    items = [_item(i, tag) for i in range(count)]
    for start in range(0, count, 400):
        store.append_many(items[start : start + 400])


def _extras(path: Path) -> None:
    store = RemoteMemoryStore(path, user_id=USER)
    store.retract("m-00003", reason="wrong", source=_item(0)["source"])
    store.append(
        kind="profile",
        memory_id="p-1",
        content="likes amber harbors",
        summary="profile",
        source=_item(1)["source"],
    )


def _answers(path: Path) -> dict[tuple[str, str], str]:
    """Every ranker's ``to_json()`` for every query, from a new reader of ``path``."""
    out = {}
    for ranker in RANKERS:
        store = RemoteMemoryStore(path, user_id=USER)
        for text in QUERIES:
            result = RecallEngine(store, ranker=ranker).recall(
                text, limit=5, as_of=AS_OF, query_id="q"
            )
            out[ranker, text] = result.to_json()
    profile = RemoteMemoryStore(path, user_id=USER).latest_profile()
    out["profile", ""] = repr(profile)
    return out


def _reference(path: Path, tmp: Path) -> dict[tuple[str, str], str]:
    """The same answers from a copy of the log with no index file beside it."""
    folder = tmp / "reference"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=0o700)
    copy = folder / "records.jsonl"
    copy.write_bytes(path.read_bytes())
    copy.chmod(0o600)
    saved = RemoteMemoryStore.INDEX_WRITE_MIN
    RemoteMemoryStore.INDEX_WRITE_MIN = 10**12  # the reference never writes one
    try:
        return _answers(copy)
    finally:
        RemoteMemoryStore.INDEX_WRITE_MIN = saved


def _index_of(path: Path) -> Path:
    return path.with_name(path.name + ".index")


@pytest.fixture
def log(folder: Path) -> Path:
    path = folder / "records.jsonl"
    _fill(path)
    _extras(path)
    assert RemoteMemoryStore(path, user_id=USER).write_index_file()
    return path


class _Counting:
    """Counts the store's line parser (``RemoteMemoryStore._parse_line``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = RemoteMemoryStore._parse_line

        def counted(store: RemoteMemoryStore, raw: bytes, line: int) -> Any:
            self.calls += 1
            return original(store, raw, line)

        monkeypatch.setattr(RemoteMemoryStore, "_parse_line", counted)


# -- loading without parsing -------------------------------------------------------------


def test_a_reader_writes_the_index_once_it_has_read_enough(folder: Path) -> None:
    path = folder / "records.jsonl"
    _fill(path, 300)
    _recall(RemoteMemoryStore(path, user_id=USER), "amber")
    assert not _index_of(path).exists()  # a small log: read faster than any index file
    _fill(path, N, tag="b")
    _recall(RemoteMemoryStore(path, user_id=USER), "amber")
    index = _index_of(path)
    assert index.exists() and stat.S_IMODE(index.stat().st_mode) == 0o600
    assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []


def test_a_new_reader_parses_only_the_records_it_returns(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parser = _Counting(monkeypatch)
    store = RemoteMemoryStore(log, user_id=USER)
    result = _recall(store, "amber river", limit=3)
    assert result.hits
    # The extras (one profile, one retraction) and at most the candidates walked.
    assert parser.calls < 50, parser.calls
    parser.calls = 0
    RemoteMemoryStore.INDEX_WRITE_MIN = 10**12
    try:
        _index_of(log).unlink()
        _recall(RemoteMemoryStore(log, user_id=USER), "amber river", limit=3)
    finally:
        RemoteMemoryStore.INDEX_WRITE_MIN = 1_000
    assert parser.calls > N  # without the file, every line is parsed


def test_a_line_rewritten_in_the_middle_is_seen(log: Path) -> None:
    # Overwrite a line in the middle (same length, same inode, outside the hashed
    # windows) with bytes that raise if parsed: the whole covered prefix is checked, so
    # the index is not trusted and the reader parses the log, meeting the damage.
    data = bytearray(log.read_bytes())
    lines = data.split(b"\n")
    middle = len(lines) // 2
    start = sum(len(line) + 1 for line in lines[:middle])
    assert "m-00003" not in lines[middle].decode()
    data[start : start + len(lines[middle])] = b"{" * len(lines[middle])
    with open(log, "r+b") as handle:
        handle.write(data)
    with pytest.raises(RemoteMemoryCorruptionError, match="invalid JSON at line"):
        _recall(RemoteMemoryStore(log, user_id=USER), "zzz-nothing-matches")


# -- exact parity, whatever happened ----------------------------------------------------


def test_fresh_index_answers_exactly_like_the_log(log: Path, tmp_path: Path) -> None:
    assert _answers(log) == _reference(log, tmp_path)


@pytest.mark.parametrize("block", [4, 12, 64])
def test_lists_across_many_checksum_blocks(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    # Blocks of a few bytes: every list of the small log spans many of them, starts and
    # ends inside one, or fills one exactly; each is read and checked like 64 KiB ones.
    monkeypatch.setattr(jsonl_index, "BLOCK", block)
    path = folder / "records.jsonl"
    _fill(path, 300)
    _extras(path)
    assert RemoteMemoryStore(path, user_id=USER).write_index_file()
    expected = _reference(path, tmp_path)
    assert _answers(path) == expected
    state = check_store(path, user_id=USER).index
    assert state is not None and state.status == "fresh", state
    # One flipped bit inside a list that spans blocks: found when read, and by doctor.
    index = _index_of(path)
    data = bytearray(index.read_bytes())
    data[_term_list_at(index, "amber", "postings") + 4 * 10 + 3] ^= 0x01  # doc + 2**24
    index.write_bytes(bytes(data))
    state = check_store(path, user_id=USER).index
    assert state is not None and state.status == "invalid", state
    assert _answers(path) == expected


def test_a_copied_folder_keeps_its_index(log: Path, tmp_path: Path) -> None:
    # Another inode (a copy, a restore of the same bytes): the whole prefix is checked.
    copy = tmp_path / "copy"
    shutil.copytree(log.parent, copy)
    state = check_store(copy / "records.jsonl", user_id=USER).index
    assert state is not None and state.status == "fresh", state
    assert _answers(copy / "records.jsonl") == _reference(log, tmp_path)


def test_stale_index_catches_up_from_the_tail(log: Path, tmp_path: Path) -> None:
    before = _index_of(log).read_bytes()
    # Another process appends after the index file was written.
    code = (
        "import sys; sys.path[:0] = [sys.argv[2]]; from test_index_file import _fill; "
        "from pathlib import Path; _fill(Path(sys.argv[1]), 30, tag='late')"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(log), str(Path(__file__).parent)], check=True, timeout=120
    )
    assert _index_of(log).read_bytes() == before
    state = check_store(log, user_id=USER).index
    assert state is not None and state.status == "stale" and state.covered_lines == N + 2
    assert _answers(log) == _reference(log, tmp_path)


def _damaged(kind: str, log: Path, tmp_path: Path) -> None:
    from support.index_files import resign  # not at import: a child imports this file

    index = _index_of(log)
    data = index.read_bytes()
    if kind == "truncated":
        index.write_bytes(data[: len(data) // 2])
    elif kind == "bit-flipped":
        flipped = bytearray(data)
        flipped[len(data) // 3] ^= 0x10
        index.write_bytes(bytes(flipped))
    elif kind == "other-scope":
        index.write_bytes(resign(data, header={"scope": user_scope_for("bob")}))
    elif kind == "older-format":
        index.write_bytes(resign(data, version=jsonl_index.FORMAT - 1))
    elif kind == "bob's file":
        bob = tmp_path / "bob"
        bob.mkdir(mode=0o700)
        _fill(bob / "records.jsonl", N, user="bob")
        RemoteMemoryStore(bob / "records.jsonl", user_id="bob").write_index_file()
        index.write_bytes((bob / "records.jsonl.index").read_bytes())
    elif kind == "log-truncated":
        # What `doctor --repair`-style cuts and a restore from an older backup leave.
        raw = log.read_bytes()
        cut = raw[: raw.index(b"\n", len(raw) // 2) + 1]
        with open(log, "r+b") as handle:
            handle.truncate(len(cut))
    elif kind == "log-truncated-then-appended":
        raw = log.read_bytes()
        with open(log, "r+b") as handle:
            handle.truncate(raw.index(b"\n", len(raw) // 2) + 1)
        _fill(log, 700, tag="new")
        assert log.stat().st_size > len(raw)  # past the covered prefix again
    elif kind == "log-replaced-same-size":
        lines = log.read_bytes().split(b"\n")[:-1]
        head, conversation = lines[-2:], lines[:-2]
        replaced = b"\n".join([*reversed(conversation), *head]) + b"\n"
        assert len(replaced) == log.stat().st_size
        temp = log.with_name("new.jsonl")
        temp.write_bytes(replaced)
        temp.chmod(0o600)
        os.rename(temp, log)
    elif kind == "log-replaced-middle-changed":
        # A new file whose hashed windows (first 4 KiB, last 64 KiB) are the same bytes:
        # only the whole-prefix CRC (checked for another inode) tells it apart.
        raw = log.read_bytes()
        low, high = 8 << 10, len(raw) - (80 << 10)
        replaced = raw[:low] + raw[low:high].replace(b"amber", b"cedar") + raw[high:]
        assert replaced != raw and len(replaced) == len(raw)
        temp = log.with_name("new.jsonl")
        temp.write_bytes(replaced)
        temp.chmod(0o600)
        os.rename(temp, log)
    elif kind == "log-rewritten-in-place":
        lines = log.read_bytes().split(b"\n")[:-1]
        swapped = lines[:-4] + [lines[-3], lines[-4]] + lines[-2:]
        with open(log, "r+b") as handle:
            handle.write(b"\n".join(swapped) + b"\n")
    elif kind == "log-restored-from-backup":
        backup = log.read_bytes()
        _fill(log, 1_500, tag="later")
        RemoteMemoryStore(log, user_id=USER).write_index_file()
        temp = log.with_name("restore.jsonl")
        temp.write_bytes(backup)
        temp.chmod(0o600)
        os.rename(temp, log)
    else:
        raise AssertionError(kind)


DAMAGE = (
    "truncated",
    "bit-flipped",
    "other-scope",
    "older-format",
    "bob's file",
    "log-truncated",
    "log-truncated-then-appended",
    "log-replaced-same-size",
    "log-replaced-middle-changed",
    "log-rewritten-in-place",
    "log-restored-from-backup",
)


@pytest.mark.parametrize("kind", DAMAGE)
def test_a_damaged_or_foreign_index_is_never_used(log: Path, tmp_path: Path, kind: str) -> None:
    _damaged(kind, log, tmp_path)
    expected = _reference(log, tmp_path)
    state = check_store(log, user_id=USER).index
    assert state is not None and state.status == "invalid", state
    assert _answers(log) == expected
    # The reader rebuilt from the log and replaced the file: fresh again.
    RemoteMemoryStore(log, user_id=USER).write_index_file()
    state = check_store(log, user_id=USER).index
    assert state is not None and state.status == "fresh", state
    assert _answers(log) == expected


def _term_list_at(index: Path, term: str, section: str) -> int:
    """Where ``term``'s list begins in ``section`` of the index file (white box: format 5)."""
    from memlib._retrieval.strings import PackedStrings, SortedPositions

    file = jsonl_index._open_file(os.fspath(index))
    assert file is not None
    places = jsonl_index._places(jsonl_index._parse_header(file), file)
    blob = file.read(*places["terms"][:2])
    text_ends = array("Q", file.read(*places["term_text_ends"][:2]))
    term_ends = array("Q", file.read(*places["term_ends"][:2]))
    n = SortedPositions(PackedStrings(blob, text_ends))[term]
    return places[section][0] + 4 * (term_ends[n - 1] if n else 0)


@pytest.mark.parametrize("section", ["postings", "tfs"])
def test_a_posting_list_damaged_after_load_is_never_used(
    log: Path, tmp_path: Path, section: str
) -> None:
    # The per-record sections are checked at load; a term's list only when a query first
    # asks for it: a reader that already trusts the file meets the damage mid-way,
    # rebuilds from the log and answers exactly as the log does.
    index = _index_of(log)
    data = bytearray(index.read_bytes())
    at = _term_list_at(index, "amber", section)
    data[at] ^= 0x01
    expected = _reference(log, tmp_path)
    reader = RemoteMemoryStore(log, user_id=USER)
    assert reader.index.searched == N - 1  # loaded from the file: the damage is not read yet
    index.write_bytes(bytes(data))
    state = check_store(log, user_id=USER).index
    assert state is not None and state.status == "invalid", state
    assert "damaged" in state.reason
    for ranker in RANKERS:
        result = RecallEngine(reader, ranker=ranker).recall(
            QUERIES[0], limit=5, as_of=AS_OF, query_id="q"
        )
        assert result.to_json() == expected[ranker, QUERIES[0]]
    assert _answers(log) == expected


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_an_older_format_index_is_rebuilt(log: Path, tmp_path: Path, version: int) -> None:
    from support.index_files import older_format  # not at import: a child imports this file

    # Format 2 added each posting's term frequency (BM25 scores from the postings), format
    # 3 each record's line digest (the vectors file's rows are checked against it), 4 a
    # checksum per section and per term, 5 each record's place in its source, 6 each
    # record's stored_at (a JSONL known_at view cuts the log there): an older
    # file, whole and for this very log, is never used, and a reader replaces it.
    assert jsonl_index.FORMAT == 6
    index = _index_of(log)
    index.write_bytes(older_format(index.read_bytes(), version))
    expected = _reference(log, tmp_path)
    state = check_store(log, user_id=USER).index
    assert state is not None and state.status == "invalid", state
    assert f"format {version}" in (state.reason or ""), state
    assert _answers(log) == expected
    RemoteMemoryStore(log, user_id=USER).write_index_file()
    state = check_store(log, user_id=USER).index
    assert state is not None and state.status == "fresh", state
    assert _answers(log) == expected


@settings(
    max_examples=8,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    where=st.floats(min_value=0, max_value=1, exclude_max=True),
    bit=st.integers(min_value=0, max_value=7),
    cut=st.booleans(),
)
def test_any_flipped_bit_or_cut_means_rebuild(
    tmp_path_factory: pytest.TempPathFactory, where: float, bit: int, cut: bool
) -> None:
    tmp = tmp_path_factory.mktemp("prop")
    folder = tmp / "st"
    folder.mkdir(mode=0o700)
    log = folder / "records.jsonl"
    if not _PROPERTY_LOG:
        made = tmp / "made"
        made.mkdir(mode=0o700)
        _fill(made / "records.jsonl")
        RemoteMemoryStore(made / "records.jsonl", user_id=USER).write_index_file()
        _PROPERTY_LOG.extend(
            [
                (made / "records.jsonl").read_bytes(),
                (made / "records.jsonl.index").read_bytes(),
                sorted(_reference(made / "records.jsonl", tmp).items()),
            ]
        )
    raw, index, expected = _PROPERTY_LOG
    log.write_bytes(raw)
    log.chmod(0o600)
    at = int(where * len(index))
    damaged = (
        index[:at] if cut else (index[:at] + bytes([index[at] ^ (1 << bit)]) + index[at + 1 :])
    )
    _index_of(log).write_bytes(damaged)
    _index_of(log).chmod(0o600)
    assert sorted(_answers(log).items()) == expected


_PROPERTY_LOG: list[Any] = []


# -- several processes --------------------------------------------------------------------


def _worker(path: str, who: int, rounds: int, barrier: Any, errors: Any) -> None:
    try:
        RemoteMemoryStore.INDEX_WRITE_MIN = 50  # write index files often
        barrier.wait(timeout=60)
        for r in range(rounds):
            store = RemoteMemoryStore(path, user_id=USER)
            store.append_many([_item(i, f"w{who}r{r}") for i in range(40)])
            _recall(RemoteMemoryStore(path, user_id=USER), "amber harbor", limit=3)
    except BaseException:  # noqa: BLE001 (reported to the parent)
        import traceback

        errors.put(traceback.format_exc())


def test_writers_and_readers_in_several_processes(folder: Path, tmp_path: Path) -> None:
    path = folder / "records.jsonl"
    _fill(path, 200)
    ctx = multiprocessing.get_context("fork")
    barrier, errors = ctx.Barrier(4), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(str(path), who, 6, barrier, errors)) for who in range(4)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=300)
    assert errors.empty(), errors.get()
    assert all(proc.exitcode == 0 for proc in procs)
    assert _index_of(path).exists()
    assert [p.name for p in folder.iterdir() if p.name.endswith(".tmp")] == []
    state = check_store(path, user_id=USER).index
    assert state is not None and state.status in ("fresh", "stale"), state
    assert _answers(path) == _reference(path, tmp_path)
    assert len(RemoteMemoryStore(path, user_id=USER).read_all()) == 200 + 4 * 6 * 40


def test_an_older_index_never_replaces_a_newer_one(log: Path) -> None:
    old = RemoteMemoryStore(log, user_id=USER)
    _recall(old, "amber")
    _fill(log, 1_100, tag="more")
    newer = RemoteMemoryStore(log, user_id=USER)
    _recall(newer, "amber")
    written = _index_of(log).read_bytes()
    assert check_store(log, user_id=USER).index.status == "fresh"  # type: ignore[union-attr]
    assert old.write_index_file(old._cache)  # the newer file covers more: kept
    assert _index_of(log).read_bytes() == written


# -- the folder ----------------------------------------------------------------------------


def test_a_read_only_folder_still_recalls(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = folder / "records.jsonl"
    _fill(path)
    expected = _reference(path, tmp_path)
    if os.geteuid() == 0:  # root writes anyway: make the folder refuse creation
        real = open_private  # what the index module calls, until patched below

        def read_only(name: str, flags: int, **kw: Any) -> int:
            if flags & os.O_CREAT:
                raise failure(f"cannot open {name}", OSError(errno.EROFS, "Read-only file system"))
            return real(name, flags, **kw)

        monkeypatch.setattr(jsonl_index, "open_private", read_only)
    folder.chmod(0o500)
    try:
        assert _answers(path) == expected
        assert sorted(p.name for p in folder.iterdir()) == ["records.jsonl", "records.jsonl.lock"]
    finally:
        folder.chmod(0o700)


def test_a_link_at_the_index_path_is_refused(log: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(_index_of(log).read_bytes())
    _index_of(log).unlink()
    _index_of(log).symlink_to(victim)
    before = victim.read_bytes()
    with pytest.raises(RemoteMemoryUnsafePathError, match="symbolic link"):
        _recall(RemoteMemoryStore(log, user_id=USER), "amber")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "memlib",
            "--user",
            USER,
            "--store",
            f"jsonl:{log}",
            "recall",
            "amber",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert str(_index_of(log)) in proc.stderr and "symbolic link" in proc.stderr
    assert victim.read_bytes() == before and _index_of(log).is_symlink()


# -- doctor ----------------------------------------------------------------------------------


def _doctor(path: Path, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "memlib", "doctor", str(path), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.stdout


def test_doctor_reports_the_index_and_repair_rebuilds_it(log: Path) -> None:
    assert "index file: fresh (covers all 1202 records)" in _doctor(log)
    _fill(log, 5, tag="x")
    assert "index file: stale by 5 records" in _doctor(log)
    data = bytearray(_index_of(log).read_bytes())
    data[100] ^= 1
    _index_of(log).write_bytes(bytes(data))
    out = _doctor(log)
    assert "index file: invalid, not used:" in out and "status: healthy" in out
    out = _doctor(log, "--repair")
    assert "rebuilt the index file" in out and "index file: fresh (covers all 1207" in out
    _index_of(log).unlink()
    assert "index file: absent" in _doctor(log)
