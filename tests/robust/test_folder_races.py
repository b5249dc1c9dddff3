"""A store folder somebody else can move, and files with a second name (issue 32, 4, 5, 9c).

- 4: while three writers appended, another process of the same user kept swapping two
  store folders. Appends reported saved were in neither folder, and one id was
  reported saved to three writers though only two folders exist: the lock and the log
  were each found by a fresh path lookup, so a writer could hold one folder's lock and
  append to the other's log. Now each operation opens the folder once and everything
  relative to it.
- 5: a lock hard-linked to another file of the user's was truncated by a two-record
  import, a hard-linked log lost its text after the last newline as a "torn tail".
  Every file a store writes with a second name is now refused before a byte moves.
- 9c: only the store's own folder was checked; another account that could write a
  folder above it moved the whole store away, and recall searched 0 records without a
  word. Every folder above now counts too (OpenSSH's StrictModes).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import multiprocessing
import os
import random
import stat
import subprocess
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memlib import RemoteMemoryDuplicateError, RemoteMemoryStore, RemoteMemoryUnsafePathError
from memlib.errors import RemoteMemoryError
from memlib.stores.sql._sqlite import SqliteMemoryStore

USER = "alice"
NOBODY = 65534
SOURCE = {"source_id": "a", "source_type": "b", "title": "t", "captured_at": "2026-01-01T00:00:00Z"}
WRITERS = 3
RACE_SECONDS = 3.0
STRESS_RACE_SECONDS = 60.0


def _item(memory_id: str, content: str = "c") -> dict:
    return {
        "kind": "conversation",
        "memory_id": memory_id,
        "content": content,
        "summary": "s",
        "source": SOURCE,
    }


def _line(memory_id: str) -> str:
    return json.dumps({"memory_id": memory_id, "content": "c", "summary": "s", "source": SOURCE})


def _tree(root: Path) -> dict[str, tuple]:
    """Every path under ``root`` with what it is: links unresolved, files with bytes."""
    found: dict[str, tuple] = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            found[str(path)] = ("link", os.readlink(path))
        elif stat.S_ISREG(st.st_mode):
            found[str(path)] = (
                "file",
                path.read_bytes(),
                stat.S_IMODE(st.st_mode),
                st.st_uid,
                st.st_nlink,
            )
        else:
            found[str(path)] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid)
    return found


def _memlib(store: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memlib", "--user", USER, "--store", store, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _refused(proc: subprocess.CompletedProcess, path: Path, problem: str) -> None:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert str(path) in proc.stderr and problem in proc.stderr, proc.stderr


def _needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("chown to another account needs root (CI runs as root)")


# -- 4. folders swapped while writers append ---------------------------------------------


def _exchange(a: bytes, b: bytes) -> Any:
    """Swap two folders in one step (Linux ``renameat2(RENAME_EXCHANGE)``), or None."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return None
    at_fdcwd, rename_exchange = -100, 2

    def swap() -> bool:
        return renameat2(at_fdcwd, a, at_fdcwd, b, rename_exchange) == 0

    return swap


def _swapper(root: str, stop: Any, swaps: Any) -> None:
    a, b = os.path.join(root, "a"), os.path.join(root, "b")
    swap = _exchange(a.encode(), b.encode())
    count = 0
    while not stop.is_set():
        if swap is not None:
            count += swap()
            # Back to back, most swaps land inside a writer's read and only make it fail;
            # paced, more of them land between its lock and its log, where ids went
            # missing or twice into one log.
            time.sleep(random.random() * 0.002)
            continue
        # Three renames: for a moment ``a`` is missing, and a writer may make a new
        # one; the check below counts every folder under ``root``.
        try:
            os.rename(a, a + ".t")
            os.rename(b, a)
            os.rename(a + ".t", b)
            count += 1
        except OSError:
            pass
    swaps.value = count


def _writer(path: str, who: int, seconds: float, start: Any, out: str) -> None:
    """Alternately a shared id (all writers race for it) and one of its own, each
    appended once; writes down what each append reported."""
    told: dict[str, str] = {}
    try:
        store = RemoteMemoryStore(path, user_id=USER)
        start.wait()
        deadline = time.monotonic() + seconds
        k = 0
        while time.monotonic() < deadline:
            for memory_id in (f"s-{k}", f"w{who}-{k}"):
                try:
                    store.append(**_item(memory_id, f"writer {who}"))
                    told[memory_id] = "saved"
                except RemoteMemoryDuplicateError:
                    told[memory_id] = "duplicate"
                except RemoteMemoryError as exc:
                    # Written or not, nobody was told it was saved: counted as not saved,
                    # and failed below unless the ids show worse.
                    told[memory_id] = f"error: {exc}"
            k += 1
    except BaseException:
        told["crash"] = traceback.format_exc()
    Path(out).write_text(json.dumps(told))


def _race(tmp_path: Path, seconds: float) -> None:
    root = tmp_path / "home"
    for name in ("a", "b"):
        (root / name).mkdir(parents=True, mode=0o700)
    root.chmod(0o700)
    context = multiprocessing.get_context("fork")
    start, stop = context.Event(), context.Event()
    swaps = context.Value("q", 0)
    outs = [tmp_path / f"writer-{who}.json" for who in range(WRITERS)]
    writers = [
        context.Process(
            target=_writer, args=(str(root / "a" / "records.jsonl"), who, seconds, start, str(out))
        )
        for who, out in enumerate(outs)
    ]
    swapper = context.Process(target=_swapper, args=(str(root), stop, swaps))
    for process in writers:
        process.start()
    swapper.start()
    start.set()
    for process in writers:
        process.join(seconds + 120)
    stop.set()
    swapper.join(30)
    for process in (*writers, swapper):
        if process.is_alive():
            process.kill()
            pytest.fail("a writer or the swapper hung")
    assert swaps.value > 100, f"only {swaps.value} swaps: no race was run"

    told = [json.loads(out.read_text()) for out in outs]
    for who, answers in enumerate(told):
        assert "crash" not in answers, f"writer {who}: {answers['crash']}"
    saved = Counter(m for answers in told for m, said in answers.items() if said == "saved")
    # Where each id is now, read from the raw bytes of every log under ``root``: a log
    # can hold an id once at most, so an id can be saved once per folder at most.
    stored: Counter[str] = Counter()
    for log in root.rglob("records.jsonl"):
        ids = [json.loads(line)["memory_id"] for line in log.read_bytes().splitlines()]
        twice = [m for m, n in Counter(ids).items() if n > 1]
        assert not twice, f"{log} holds {twice[:5]} twice"
        stored.update(ids)
    lost = sorted(m for m in saved if stored[m] < saved[m])
    extra = sorted(m for m in stored if stored[m] > saved[m])
    assert not lost, (
        f"{len(lost)} ids reported saved more often than they are stored "
        f"(e.g. {[(m, saved[m], stored[m]) for m in lost[:5]]}), {swaps.value} swaps"
    )
    errors = [said for answers in told for said in answers.values() if said.startswith("error")]
    assert not errors, f"{len(errors)} appends failed, e.g. {errors[0]}"
    assert not extra, f"stored but never reported saved: {extra[:5]}"
    assert sum(saved.values()) > 100, "too few appends to mean anything"


def test_the_issue_repro_folders_swapped_under_three_writers(tmp_path: Path) -> None:
    _race(tmp_path, RACE_SECONDS)


@pytest.mark.stress
def test_folders_swapped_under_three_writers_for_a_minute(tmp_path: Path) -> None:
    _race(tmp_path, STRESS_RACE_SECONDS)


# -- 5. hard links --------------------------------------------------------------------


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    made = tmp_path / "st"
    made.mkdir(mode=0o700)
    return made


def test_the_issue_repro_a_hard_linked_lock_truncates_nothing(tmp_path: Path, folder: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("important\n")
    lock = folder / "records.jsonl.lock"
    os.link(victim, lock)
    data = tmp_path / "in.jsonl"
    data.write_text(_line("m-1") + "\n" + _line("m-2") + "\n")
    before = _tree(tmp_path)
    proc = _memlib(f"jsonl:{folder / 'records.jsonl'}", "import", str(data))
    _refused(proc, lock, "hard links")
    assert victim.read_text() == "important\n"
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("how", ["append", "append_many", "retract"])
def test_a_hard_linked_lock_is_refused_by_every_write(
    tmp_path: Path, folder: Path, how: str
) -> None:
    path = folder / "records.jsonl"
    RemoteMemoryStore(path, user_id=USER).append(**_item("m-0"))
    victim = tmp_path / "victim.txt"
    victim.write_text("important\n")
    (folder / "records.jsonl.lock").unlink()
    os.link(victim, folder / "records.jsonl.lock")
    before = _tree(tmp_path)
    store = RemoteMemoryStore(path, user_id=USER)
    write = {
        "append": lambda: store.append(**_item("m-1")),
        "append_many": lambda: store.append_many([_item("m-1"), _item("m-2")]),
        "retract": lambda: store.retract("m-0", reason="r", source=SOURCE),
    }[how]
    with pytest.raises(RemoteMemoryUnsafePathError, match="has 2 hard links"):
        write()
    assert _tree(tmp_path) == before


def test_the_issue_repro_a_hard_linked_log_keeps_its_last_line(
    tmp_path: Path, folder: Path
) -> None:
    victim = tmp_path / "notes.txt"
    victim.write_bytes(b"first line\nno newline at the end")
    log = folder / "records.jsonl"
    os.link(victim, log)
    before = _tree(tmp_path)
    proc = _memlib(f"jsonl:{log}", "append", stdin=_line("m-1") + "\n")
    _refused(proc, log, "hard links")
    store = RemoteMemoryStore(log, user_id=USER)
    with pytest.raises(RemoteMemoryUnsafePathError, match="has 2 hard links"):
        store.append_many([_item("m-1"), _item("m-2")])
    with pytest.raises(RemoteMemoryUnsafePathError, match="has 2 hard links"):
        store.read_all()
    assert victim.read_bytes() == b"first line\nno newline at the end"
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("name", ["memlib.sqlite", "memlib.sqlite-wal"])
def test_a_hard_linked_sqlite_file_is_refused(tmp_path: Path, folder: Path, name: str) -> None:
    db = folder / "memlib.sqlite"
    if name != "memlib.sqlite":
        SqliteMemoryStore(db, user_id=USER).append(**_item("m-0"))
        (folder / name).unlink(missing_ok=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("important\n")
    os.link(victim, folder / name)
    before = _tree(tmp_path)
    with pytest.raises(RemoteMemoryUnsafePathError, match="has 2 hard links") as caught:
        SqliteMemoryStore(db, user_id=USER).append(**_item("m-1"))
    assert str(folder / name) in str(caught.value)
    assert _tree(tmp_path) == before


# -- 9c. the folders above the store -------------------------------------------------------


def _store_under(shared: Path) -> Path:
    """A store three folders below ``shared``, made while ``shared`` was still private."""
    path = shared / "home" / "scopes" / "st" / "records.jsonl"
    RemoteMemoryStore(path, user_id=USER).append_many([_item("m-1"), _item("m-2")])
    return path


def test_the_issue_repro_a_store_moved_away_by_another_account_is_not_read_as_empty(
    tmp_path: Path,
) -> None:
    _needs_root()
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    path = _store_under(shared)
    os.chown(shared, NOBODY, NOBODY)
    shared.chmod(0o777)
    (shared / "home").rename(shared / "elsewhere")  # what that account could do
    before = _tree(tmp_path)
    store = RemoteMemoryStore(path, user_id=USER)
    with pytest.raises(RemoteMemoryUnsafePathError) as caught:
        store.read_all()
    assert str(caught.value) == (
        f"refusing to use {shared}: it is owned by uid {NOBODY}, not by this user (uid 0)"
    )
    proc = _memlib(f"jsonl:{path}", "recall", "c")
    _refused(proc, shared, f"owned by uid {NOBODY}")
    with pytest.raises(RemoteMemoryUnsafePathError, match=str(shared)):
        store.append(**_item("m-3"))
    assert _tree(tmp_path) == before  # nothing made under the folder others control


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o755])
def test_a_folder_above_owned_by_another_account_is_refused(tmp_path: Path, mode: int) -> None:
    # Sticky or not, the folder's owner may rename anything in it.
    _needs_root()
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    path = _store_under(shared)
    os.chown(shared, NOBODY, NOBODY)
    shared.chmod(mode)
    before = _tree(tmp_path)
    for action in (lambda s: s.read_all(), lambda s: s.append(**_item("m-3"))):
        with pytest.raises(RemoteMemoryUnsafePathError) as caught:
            action(RemoteMemoryStore(path, user_id=USER))
        assert str(caught.value).startswith(f"refusing to use {shared}: it is owned by uid")
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o720])
def test_a_folder_above_others_may_write_is_refused(tmp_path: Path, mode: int) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    path = _store_under(shared)
    shared.chmod(mode)
    before = _tree(tmp_path)
    for action in (lambda s: s.read_all(), lambda s: s.append(**_item("m-3"))):
        with pytest.raises(RemoteMemoryUnsafePathError) as caught:
            action(RemoteMemoryStore(path, user_id=USER))
        assert str(caught.value) == (
            f"refusing to use {shared}: it is writable by other users (mode {mode:04o})"
        )
    assert _tree(tmp_path) == before


def test_a_sticky_folder_above_like_tmp_is_fine(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    path = _store_under(shared)
    shared.chmod(0o1777)
    store = RemoteMemoryStore(path, user_id=USER)
    store.append(**_item("m-3"))
    assert [r.memory_id for r in store.read_all()] == ["m-1", "m-2", "m-3"]
    # A new store below it is made too.
    fresh = shared / "new" / "st" / "records.jsonl"
    RemoteMemoryStore(fresh, user_id=USER).append(**_item("m-1"))
    assert len(RemoteMemoryStore(fresh, user_id=USER).read_all()) == 1


def test_a_root_owned_sticky_folder_above_is_fine(tmp_path: Path) -> None:
    _needs_root()
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)
    os.chown(shared, 0, 0)
    path = shared / "alice" / "records.jsonl"
    RemoteMemoryStore(path, user_id=USER).append_many([_item("m-1"), _item("m-2")])
    assert len(RemoteMemoryStore(path, user_id=USER).read_all()) == 2


def test_a_link_on_the_way_is_followed_to_the_folders_really_above(tmp_path: Path) -> None:
    # The path names only private folders; the link leads into one others may write.
    safe = tmp_path / "safe"
    safe.mkdir(mode=0o700)
    shared = tmp_path / "shared"
    (shared / "inner").mkdir(parents=True, mode=0o700)
    shared.chmod(0o700)
    (safe / "link").symlink_to(shared / "inner")
    path = safe / "link" / "st" / "records.jsonl"
    RemoteMemoryStore(path, user_id=USER).append(**_item("m-1"))
    shared.chmod(0o777)
    with pytest.raises(RemoteMemoryUnsafePathError) as caught:
        RemoteMemoryStore(path, user_id=USER).read_all()
    assert str(caught.value) == (
        f"refusing to use {shared.resolve()}: it is writable by other users (mode 0777)"
    )


def test_a_link_in_a_folder_others_may_write_is_refused(tmp_path: Path) -> None:
    # Whoever may write ``shared`` may point its link somewhere else between two calls.
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    (shared / "link").symlink_to(real)
    path = shared / "link" / "st" / "records.jsonl"
    RemoteMemoryStore(path, user_id=USER).append(**_item("m-1"))
    shared.chmod(0o777)
    with pytest.raises(RemoteMemoryUnsafePathError, match=f"refusing to use {shared}: "):
        RemoteMemoryStore(path, user_id=USER).read_all()


@pytest.mark.parametrize("mode", [0o777, 0o1777])
def test_sqlite_checks_the_folders_above_too(tmp_path: Path, mode: int) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    db = shared / "home" / "memlib.sqlite"
    first = SqliteMemoryStore(db, user_id=USER)
    first.append(**_item("m-1"))
    # Closed now, not whenever the garbage collector frees it: closing the last
    # connection checkpoints the WAL, which would change the tree during the check.
    first.close()
    shared.chmod(mode)
    if mode & stat.S_ISVTX:
        assert len(SqliteMemoryStore(db, user_id=USER).read_all()) == 1
        return
    before = _tree(tmp_path)
    for action in (lambda s: s.read_all(), lambda s: s.append(**_item("m-2"))):
        with pytest.raises(RemoteMemoryUnsafePathError) as caught:
            action(SqliteMemoryStore(db, user_id=USER))
        assert str(caught.value) == (
            f"refusing to use {shared}: it is writable by other users (mode 0777)"
        )
    assert _tree(tmp_path) == before
