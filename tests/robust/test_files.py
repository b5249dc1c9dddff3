"""A hostile or careless store folder: planted links, FIFOs, other accounts' files.

Each case is what issue 13 found: memlib followed a link planted at the lock and
truncated its target, "repaired" a linked records file, used a folder or file another
account could read or write, and hung on a FIFO. Every case must now be refused with
one line naming the path, and leave every byte where it was.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from memlib import RemoteMemoryStore, RemoteMemoryUnsafePathError
from memlib.errors import RemoteMemoryCorruptionError

USER = "alice"
NOBODY = 65534
SOURCE = {"source_id": "a", "source_type": "b", "title": "t", "captured_at": "2026-01-01T00:00:00Z"}


def _item(memory_id: str) -> dict:
    return {
        "kind": "conversation",
        "memory_id": memory_id,
        "content": "c",
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
            found[str(path)] = ("file", path.read_bytes(), stat.S_IMODE(st.st_mode), st.st_uid)
        else:
            found[str(path)] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid)
    return found


def _memlib(
    store: Path, *args: str, stdin: str = "", timeout: float = 60
) -> subprocess.CompletedProcess:
    # A hang is the failure these tests exist for: the timeout turns it into an error.
    return subprocess.run(
        [sys.executable, "-m", "memlib", "--user", USER, "--store", f"jsonl:{store}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _refused(proc: subprocess.CompletedProcess, path: Path, problem: str) -> None:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert str(path) in proc.stderr and problem in proc.stderr, proc.stderr


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    made = tmp_path / "st"
    made.mkdir(mode=0o700)
    return made


# -- 1. links --------------------------------------------------------------------------


def test_the_issue_repro_a_link_at_the_lock_truncates_nothing(tmp_path: Path, folder: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("important\n")
    lock = folder / "records.jsonl.lock"
    lock.symlink_to(victim)
    before = _tree(tmp_path)
    proc = _memlib(folder / "records.jsonl", "append", stdin=_line("a") + "\n" + _line("b") + "\n")
    _refused(proc, lock, "symbolic link")
    assert victim.read_text() == "important\n"
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("how", ["append", "append_many", "retract"])
def test_a_link_at_the_lock_is_refused_by_every_write(
    tmp_path: Path, folder: Path, how: str
) -> None:
    path = folder / "records.jsonl"
    RemoteMemoryStore(path, user_id=USER).append(**_item("m-0"))
    victim = tmp_path / "victim.txt"
    victim.write_text("important\n")
    (folder / "records.jsonl.lock").unlink()
    (folder / "records.jsonl.lock").symlink_to(victim)
    before = _tree(tmp_path)
    store = RemoteMemoryStore(path, user_id=USER)
    write = {
        "append": lambda: store.append(**_item("m-1")),
        "append_many": lambda: store.append_many([_item("m-1"), _item("m-2")]),
        "retract": lambda: store.retract("m-0", reason="r", source=SOURCE),
    }[how]
    with pytest.raises(RemoteMemoryUnsafePathError, match="symbolic link"):
        write()
    assert _tree(tmp_path) == before


def test_import_through_a_linked_lock_is_refused(tmp_path: Path, folder: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("important\n")
    (folder / "records.jsonl.lock").symlink_to(victim)
    data = tmp_path / "in.jsonl"
    data.write_text("".join(_line(f"m-{i}") + "\n" for i in range(3)))
    before = _tree(tmp_path)
    proc = _memlib(folder / "records.jsonl", "import", str(data))
    _refused(proc, folder / "records.jsonl.lock", "symbolic link")
    assert _tree(tmp_path) == before


def test_a_linked_records_file_is_never_repaired(tmp_path: Path, folder: Path) -> None:
    # A file without a final newline looks like a torn tail: it used to be cut.
    target = tmp_path / "notes.txt"
    target.write_bytes(b"line one\nno final newline")
    path = folder / "records.jsonl"
    path.symlink_to(target)
    before = _tree(tmp_path)
    store = RemoteMemoryStore(path, user_id=USER)
    with pytest.raises(RemoteMemoryUnsafePathError, match="symbolic link"):
        store.read_all()
    with pytest.raises(RemoteMemoryUnsafePathError, match="symbolic link"):
        store.append(**_item("m-1"))
    proc = _memlib(path, "recall", "anything")
    _refused(proc, path, "symbolic link")
    assert _tree(tmp_path) == before


def test_a_linked_scope_folder_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmp_path / "st").symlink_to(elsewhere)
    before = _tree(tmp_path)
    store = RemoteMemoryStore(tmp_path / "st" / "records.jsonl", user_id=USER)
    with pytest.raises(RemoteMemoryUnsafePathError, match="symbolic link"):
        store.append(**_item("m-1"))
    assert _tree(tmp_path) == before


# -- 1. other accounts' folders and files -----------------------------------------------


def _foreign_folder(folder: Path) -> None:
    os.chown(folder, NOBODY, NOBODY)
    folder.chmod(0o777)


def _world_writable_folder(folder: Path) -> None:
    folder.chmod(0o777)


def _foreign_records(folder: Path) -> None:
    path = folder / "records.jsonl"
    path.write_bytes(b"")
    os.chown(path, NOBODY, NOBODY)
    path.chmod(0o666)


def _world_writable_records(folder: Path) -> None:
    path = folder / "records.jsonl"
    path.write_bytes(b"")
    path.chmod(0o666)


def _foreign_lock(folder: Path) -> None:
    lock = folder / "records.jsonl.lock"
    lock.write_bytes(b"")
    os.chown(lock, NOBODY, NOBODY)


FOREIGN = {
    "folder of another account, 0777": (_foreign_folder, "", "owned by uid 65534"),
    "our folder, 0777": (_world_writable_folder, "", "writable by other users"),
    "records of another account, 0666": (_foreign_records, "records.jsonl", "owned by uid 65534"),
    "our records, 0666": (_world_writable_records, "records.jsonl", "writable by other users"),
    "lock of another account": (_foreign_lock, "records.jsonl.lock", "owned by uid 65534"),
}


@pytest.mark.parametrize("case", list(FOREIGN))
def test_folders_and_files_others_can_touch_are_refused(
    tmp_path: Path, folder: Path, case: str
) -> None:
    if os.geteuid() != 0:
        pytest.skip("chown to another account needs root (CI runs as root)")
    plant, name, problem = FOREIGN[case]
    plant(folder)
    named = folder / name if name else folder
    before = _tree(tmp_path)
    store = RemoteMemoryStore(folder / "records.jsonl", user_id=USER)
    with pytest.raises(RemoteMemoryUnsafePathError) as caught:
        store.append_many([_item("m-1"), _item("m-2")])
    assert str(named) in str(caught.value) and problem in str(caught.value)
    assert "\n" not in str(caught.value)
    assert _tree(tmp_path) == before


def test_a_sticky_shared_folder_like_tmp_is_fine(tmp_path: Path) -> None:
    # Others may create files there but not rename or delete ours: the file itself is
    # what is checked.
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    path = shared / "records.jsonl"
    RemoteMemoryStore(path, user_id=USER).append_many([_item("m-1"), _item("m-2")])
    assert [r.memory_id for r in RemoteMemoryStore(path, user_id=USER).read_all()] == ["m-1", "m-2"]


def test_a_records_path_that_is_a_folder_says_so(tmp_path: Path) -> None:
    with pytest.raises(RemoteMemoryUnsafePathError, match="it is a folder, not a regular file"):
        RemoteMemoryStore(tmp_path, user_id=USER).read_all()


def test_others_can_write_a_records_file_readers_refuse_it(folder: Path) -> None:
    path = folder / "records.jsonl"
    RemoteMemoryStore(path, user_id=USER).append(**_item("m-1"))
    path.chmod(0o662)
    with pytest.raises(RemoteMemoryUnsafePathError, match="writable by other users"):
        RemoteMemoryStore(path, user_id=USER).read_all()


def test_the_refusal_is_still_corruption_for_callers_that_catch_it(folder: Path) -> None:
    (folder / "records.jsonl").symlink_to(folder / "nowhere")
    with pytest.raises(RemoteMemoryCorruptionError):
        RemoteMemoryStore(folder / "records.jsonl", user_id=USER).read_all()


# -- 4. FIFOs never block ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["records.jsonl", "records.jsonl.lock"])
def test_a_fifo_is_refused_without_hanging(tmp_path: Path, folder: Path, name: str) -> None:
    if name == "records.jsonl.lock":
        RemoteMemoryStore(folder / "records.jsonl", user_id=USER).append(**_item("m-0"))
        (folder / name).unlink()
    os.mkfifo(folder / name, 0o600)
    before = _tree(tmp_path)
    proc = _memlib(folder / "records.jsonl", "append", stdin=_line("a") + "\n")
    _refused(proc, folder / name, "FIFO")
    proc = _memlib(folder / "records.jsonl", "append", stdin=_line("a") + "\n" + _line("b") + "\n")
    _refused(proc, folder / name, "FIFO")
    assert _tree(tmp_path) == before


def test_a_fifo_lock_does_not_stop_readers(folder: Path) -> None:
    path = folder / "records.jsonl"
    RemoteMemoryStore(path, user_id=USER).append(**_item("m-0"))
    (folder / "records.jsonl.lock").unlink()
    os.mkfifo(folder / "records.jsonl.lock", 0o600)
    # Readers take no lock; a lock that holds no note of ours is no batch in progress.
    # (In a child process: the old reader blocked in open() for ever.)
    proc = _memlib(path, "recall", "c", "--json")
    assert proc.returncode == 0, proc.stderr
    assert [hit["memory_id"] for hit in json.loads(proc.stdout)["hits"]] == ["m-0"]


def test_a_fifo_records_file_fails_readers_at_once(folder: Path) -> None:
    os.mkfifo(folder / "records.jsonl", 0o600)
    proc = _memlib(folder / "records.jsonl", "recall", "anything")
    _refused(proc, folder / "records.jsonl", "FIFO")
