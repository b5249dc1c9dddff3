"""Check a JSONL store file and change nothing; cut only a torn tail, after a backup.

``check_store`` reads the file as the store would and reports every problem it finds,
not only the first: a line that is not JSON or not a valid record (bad timestamp,
unknown kind, missing field), records of more than one user scope (or of another scope
than the folder name or the given user says), a memory_id stored twice, a retraction
that names an unknown, a retracted or a retraction record, a torn tail (a last line
without ``\\n``: a write whose ``fsync`` never returned), and file modes (store and lock
file 0600, folder 0700).

Only ``repair_torn_tail`` writes, and only when the file ends in a torn tail. Holding
the store's own lock (so no writer is appending), it copies the whole file to
``records.jsonl.torn-<UTC time>.bak`` (mode 0600, fsynced) and then truncates the file
at the end of its last complete line — exactly what the next writer would have done.
Nothing else is ever changed: a damaged middle line is reported, not "fixed". A file
the store would not trust (a symbolic link, a FIFO, another account's file, one other
users may write, in a folder likewise) is never repaired: ``repair_torn_tail`` raises
``RepairError`` before it opens anything, as the store refuses it.

Checking follows no link and opens nothing that could block (a FIFO at the path or
the lock is reported, not read), and reads every line with memlib's bounded JSON
parser, so a line nested a thousand deep is one more problem, not a crash.

The derived files beside the log are reported, never counted as problems of the store:
the index file (``rebuild_index_file``) and the vectors file, whose rows are checked
against the log as a reader checks them (``vector_lines``); ``repair_vectors_file``
rewrites it keeping only the rows in use. ``vector_state_of`` and ``describe_vectors``
report the stored vectors of any ``VectorStoring`` store.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..._safejson import loads
from ..._vectors import VectorState
from ..._visible import first_hidden, shown_name
from ...errors import RemoteMemoryCorruptionError, RemoteMemoryError, RemoteMemoryValidationError
from ...records import MemoryKind, StoredMemory, user_scope_for
from .._base import VectorStoring
from .._files import check_path, open_private
from ._index import (
    IndexState,
    index_path_for,
    inspect_index,
    remove_stale_temps,
    stale_temps,
)
from ._store import RemoteMemoryStore, pending_batch_offset
from ._vectors import VectorFileState, vectors_path_for

__all__ = [
    "check_store", "repair_torn_tail", "rebuild_index_file", "remove_temp_files",
    "repair_vectors_file",
    "vector_lines", "vector_state_of", "describe_vectors", "DoctorReport", "Problem",
    "RepairError",
]

FILE_MODE = 0o600
DIR_MODE = 0o700
LOCK_WAIT_SECONDS = 10.0


@dataclass(frozen=True)
class Problem:
    kind: str  # parse, scope, duplicate, retraction, torn_tail, permissions, path, temp_file
    message: str
    line: int | None = None

    def format(self) -> str:
        return f"problem: {self.message}"


@dataclass
class DoctorReport:
    path: Path
    lines: int = 0  # complete lines
    records: int = 0  # complete lines that are valid records
    scopes: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, int] = field(default_factory=dict)
    torn_bytes: int = 0
    good_size: int = 0  # bytes up to the end of the last complete line
    problems: list[Problem] = field(default_factory=list)
    # The index file beside the log (derived: its state is never a problem of the store).
    index: IndexState | None = None
    scope: str | None = None  # the scope the index file was checked against
    # The vectors file beside the log, and the vectors in use (derived, like the index).
    vectors_file: VectorFileState | None = None
    vectors: VectorState | None = None
    vectors_unchecked: str = ""  # why the vectors could not be checked

    @property
    def healthy(self) -> bool:
        return not self.problems

    def add(self, kind: str, message: str, line: int | None = None) -> None:
        self.problems.append(Problem(kind, message, line))


def _mode_problem(report: DoctorReport, path: Path, what: str, expected: int) -> None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        report.add("permissions", f"cannot stat {what} {path}: {exc.strerror}")
        return
    mode = stat.S_IMODE(st.st_mode)
    if mode & ~expected:
        report.add(
            "permissions",
            f"{what} {path} has mode {mode:04o}; expected {expected:04o} "
            f"(fix: chmod {expected:o} {path})",
        )


def _describe(exc: Exception) -> str:
    return " ".join(str(exc).split())


def _owner_problem(report: DoctorReport, st: os.stat_result, what: str, path: Path) -> None:
    uid = os.geteuid()
    if st.st_uid != uid:
        report.add("permissions", f"{what} {path} is owned by uid {st.st_uid}, not by this "
                   f"user (uid {uid}); the store refuses it")


def _open_to_read(path: Path) -> int:
    """A descriptor on ``path`` if it is a regular file: no link followed, no FIFO waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fd


def check_store(path: str | os.PathLike[str], *, user_id: str | None = None) -> DoctorReport:
    """Read ``path`` (never write it) and list everything wrong with it."""
    path = Path(path)
    report = DoctorReport(path=path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        report.add("path", f"no such file: {path}")
        return report
    except OSError as exc:
        report.add("path", f"cannot open {path}: {exc.strerror}")
        return report
    if stat.S_ISLNK(st.st_mode):
        report.add("path", f"path is a symbolic link, which the store never follows: {path}")
        return report
    if stat.S_ISDIR(st.st_mode):
        report.add("path", f"path is a folder, not a records file: {path}")
        return report
    if not stat.S_ISREG(st.st_mode):
        report.add("path", f"path is not a regular file: {path}")
        return report

    lock_path = path.with_name(path.name + ".lock")
    _owner_problem(report, st, "records file", path)
    _mode_problem(report, path, "records file", FILE_MODE)
    try:
        folder_st = os.lstat(path.parent)
    except OSError:
        folder_st = None
    if folder_st is not None and stat.S_ISLNK(folder_st.st_mode):
        report.add("path", f"folder {path.parent} is a symbolic link; the store never follows one")
    else:
        _mode_problem(report, path.parent, "folder", DIR_MODE)
        if folder_st is not None:
            _owner_problem(report, folder_st, "folder", path.parent)
    lock_regular = False
    if os.path.lexists(lock_path):
        try:
            lock_st = os.lstat(lock_path)
        except OSError as exc:
            report.add("permissions", f"cannot stat lock file {lock_path}: {exc.strerror}")
        else:
            if stat.S_ISLNK(lock_st.st_mode):
                report.add("path", f"lock file is a symbolic link: {lock_path}")
            elif not stat.S_ISREG(lock_st.st_mode):
                report.add("path", f"lock file is not a regular file: {lock_path}")
            else:
                lock_regular = True
                _owner_problem(report, lock_st, "lock file", lock_path)
                _mode_problem(report, lock_path, "lock file", FILE_MODE)

    # A multi-record batch whose writer died before its fsync returned: the store
    # ignores everything from its first byte on, so the doctor does too.
    pending: int | None = None
    if lock_regular:
        try:
            lock_fd = _open_to_read(lock_path)
        except OSError:
            pass
        else:
            try:
                pending = pending_batch_offset(os.pread(lock_fd, 64, 0))
            except OSError:
                pass
            finally:
                os.close(lock_fd)

    expected_scope: str | None = None
    expected_why = ""
    if user_id is not None:
        expected_scope = user_scope_for(user_id)
        expected_why = f"user {user_id!r}"
    elif len(path.parent.name) == 16 and all(c in "0123456789abcdef" for c in path.parent.name):
        expected_scope = path.parent.name
        expected_why = "its folder name"

    first_line: dict[str, int] = {}
    kinds: dict[str, MemoryKind] = {}
    retracted: dict[str, int] = {}
    retractions: list[tuple[int, StoredMemory]] = []
    first_scope: tuple[str, int] | None = None
    try:
        handle = os.fdopen(_open_to_read(path), "rb")
    except OSError as exc:
        report.add("path", f"cannot read {path}: {exc.strerror}")
        return report
    with handle:
        offset = 0
        number = 0
        for raw in handle:
            if pending is not None and offset >= pending:
                report.torn_bytes = st.st_size - offset
                break
            if not raw.endswith(b"\n"):
                report.torn_bytes = len(raw)
                break
            number += 1
            offset += len(raw)
            report.lines = number
            report.good_size = offset
            try:
                data = loads(raw[:-1])
            except ValueError as exc:  # bad UTF-8, bad JSON, or past safejson's limits
                report.add("parse", f"line {number}: invalid JSON: {_describe(exc)}", number)
                continue
            try:
                record = StoredMemory.from_dict(data)
            except (RemoteMemoryValidationError, RemoteMemoryCorruptionError) as exc:
                report.add("parse", f"line {number}: invalid record: {_describe(exc)}", number)
                continue
            report.records += 1
            _text_rule_problem(report, number, record)
            report.kinds[record.kind.value] = report.kinds.get(record.kind.value, 0) + 1
            report.scopes[record.user_scope] = report.scopes.get(record.user_scope, 0) + 1
            if expected_scope is not None:
                if record.user_scope != expected_scope:
                    report.add(
                        "scope",
                        f"line {number}: memory {record.memory_id} belongs to user scope "
                        f"{record.user_scope}, not {expected_scope} ({expected_why})",
                        number,
                    )
            elif first_scope is None:
                first_scope = (record.user_scope, number)
            elif record.user_scope != first_scope[0]:
                report.add(
                    "scope",
                    f"line {number}: memory {record.memory_id} belongs to user scope "
                    f"{record.user_scope}, but line {first_scope[1]} to {first_scope[0]}",
                    number,
                )
            if record.memory_id in first_line:
                report.add(
                    "duplicate",
                    f"line {number}: duplicate memory_id {record.memory_id} "
                    f"(first at line {first_line[record.memory_id]})",
                    number,
                )
                continue
            first_line[record.memory_id] = number
            kinds[record.memory_id] = record.kind
            if record.kind is MemoryKind.RETRACTION:
                retractions.append((number, record))

    for number, record in retractions:
        target = record.retracts or ""
        if target not in kinds or first_line[target] > number:
            report.add("retraction", f"line {number}: retraction {record.memory_id} names "
                       f"unknown memory_id {target}", number)
        elif kinds[target] is MemoryKind.RETRACTION:
            report.add("retraction", f"line {number}: retraction {record.memory_id} retracts "
                       f"a retraction ({target})", number)
        elif target in retracted:
            report.add("retraction", f"line {number}: {target} is already retracted at line "
                       f"{retracted[target]}", number)
        else:
            retracted[target] = number

    if report.torn_bytes:
        report.add(
            "torn_tail",
            f"torn tail: {report.torn_bytes} bytes after line {report.lines} have no "
            "trailing newline (a write that never finished; `memlib doctor PATH --repair` "
            "removes it after writing a backup)",
        )
    _check_index(report, path, user_id)
    conversation = MemoryKind.CONVERSATION
    searched = sum(1 for kind in kinds.values() if kind is conversation) - sum(
        1 for target in retracted if kinds[target] is conversation)
    _check_vectors(report, searched)
    return report


def _text_rule_problem(report: DoctorReport, number: int, record: StoredMemory) -> None:
    """A record an older version let in that a new one may not be (docs/contract.md,
    "Smaller input rules"): it stays readable, but PostgreSQL cannot hold its U+0000,
    and an id that is not NFC or holds an invisible character can be shown like another."""
    source = record.source
    texts = (("content", record.content), ("summary", record.summary),
             ("source_id", source.source_id), ("source_type", source.source_type),
             ("title", source.title))
    found = [f"{name} holds U+0000" for name, text in texts if "\x00" in text]
    memory_id = record.memory_id
    label = shown_name(memory_id)
    if not memory_id.isascii():
        hidden = first_hidden(memory_id)
        if hidden is not None:
            found.append(f"its id holds U+{ord(hidden):04X}, an invisible or format character")
        if not unicodedata.is_normalized("NFC", memory_id):
            nfc = shown_name(unicodedata.normalize("NFC", memory_id))
            found.append(f"its id is not NFC ({nfc} in NFC)")
            label = ascii(memory_id)  # else it would read as the NFC id it is not
    if found:
        report.add("text", f"line {number}: memory {label}: {'; '.join(found)} "
                   "(readable, but a new record may not be written so)", number)


def _check_index(report: DoctorReport, path: Path, user_id: str | None) -> None:
    if user_id is not None:
        report.scope = user_scope_for(user_id)
    elif len(report.scopes) == 1:
        report.scope = next(iter(report.scopes))
    # A writer of the index or vectors file killed mid-way leaves its temporary file
    # (as big as the file); the next index writer removes those of dead writers, but a
    # store nobody recalls from keeps them.
    for temp, size in stale_temps(str(path)):
        report.add("temp_file", f"stale temporary file {temp} ({size:,} bytes) of a writer "
                   "that died (`memlib doctor PATH --repair` removes it)")
    try:
        fd = _open_to_read(path)
    except OSError:
        return
    try:
        report.index = inspect_index(
            index_path_for(str(path)), report.scope, fd, report.good_size, report.lines
        )
    finally:
        os.close(fd)


def _reader(report: DoctorReport) -> RemoteMemoryStore:
    """A store reading the log as any reader would, that writes no index file."""
    assert report.scope is not None
    store = RemoteMemoryStore.for_scope(report.path, report.scope)
    store.INDEX_WRITE_MIN = store.INDEX_WRITE_ALWAYS = 1 << 62  # checking changes nothing
    return store


def _check_vectors(report: DoctorReport, searched: int) -> None:
    vectors_path = Path(vectors_path_for(str(report.path)))
    if not os.path.lexists(vectors_path):
        # Nothing to check against the log: no store is opened (a big log without an
        # index file would be read a second time for nothing).
        report.vectors_file = VectorFileState("absent")
        report.vectors = VectorState(None, 0, 0, searched)
        return
    if report.scope is None:
        report.vectors_unchecked = "the log's user scope is not known"
        return
    store = _reader(report)
    try:
        report.vectors_file = store.vectors_file_state()
        report.vectors = vector_state_of(store)
    except RemoteMemoryError as exc:
        report.vectors_unchecked = _describe(exc)


def vector_state_of(store: Any) -> VectorState | None:
    """The stored vectors of any store that keeps them (``VectorStoring``), else None."""
    return store.vector_state() if isinstance(store, VectorStoring) else None


def describe_vectors(state: VectorState) -> str:
    """``vectors: 1,190 stored, 12 missing (MODEL, 384 dimensions)``."""
    if state.model is None:
        return f"vectors: none stored, {state.missing} records without one"
    return (f"vectors: {state.stored} stored, {state.missing} missing ({state.model}, "
            f"{state.dimension} dimensions)")


def vector_lines(report: DoctorReport) -> list[str]:
    """The report's lines about the vectors file and the vectors, in doctor's style."""
    lines: list[str] = []
    state = report.vectors_file
    if state is not None and (state.status != "absent" or not report.vectors_unchecked):
        detail = {
            "absent": "absent",
            "fresh": f"fresh ({state.rows} rows, {state.model}, {state.dimension} dimensions)",
            "unreadable": f"unreadable, not used: {state.reason}",
        }.get(state.status)
        if detail is None:
            unused = state.rows - state.used
            torn = f", and a torn last row of {state.torn_bytes} bytes" if state.torn_bytes else ""
            damaged = f", {state.damaged} of them damaged" if state.damaged else ""
            detail = (f"{unused} of {state.rows} rows not used (not matching the log"
                      f"{damaged}){torn}; --repair drops them")
        lines.append(f"vectors file: {detail}")
    if report.vectors_unchecked:
        lines.append(f"vectors: not checked: {report.vectors_unchecked}")
    elif report.vectors is not None:
        lines.append(describe_vectors(report.vectors))
    return lines


def repair_vectors_file(report: DoctorReport) -> tuple[int, int] | None:
    """Rewrite a stale vectors file keeping only the rows in use, or remove an unreadable
    one, under the store's lock: ``(rows kept, rows dropped)``; None when nothing to do."""
    state = report.vectors_file
    if report.scope is None or state is None or state.status in ("absent", "fresh"):
        return None
    try:
        return _reader(report).repair_vectors_file()
    except RemoteMemoryError as exc:
        raise RepairError(_describe(exc)) from None


def remove_temp_files(report: DoctorReport) -> list[tuple[str, int]]:
    """``--repair``: remove the stale temporary files the report found; ``(path, bytes)``
    of each one removed."""
    if not any(p.kind == "temp_file" for p in report.problems):
        return []
    return remove_stale_temps(str(report.path))


def rebuild_index_file(report: DoctorReport) -> bool:
    """Rebuild the index file of a healthy one-scope log when it is not fresh (stale
    temporary files do not stop it: they are no part of the log)."""
    state = report.index
    healthy = all(p.kind == "temp_file" for p in report.problems)
    if not healthy or report.scope is None or state is None or state.status == "fresh":
        return False
    if state.status == "absent" and report.lines < RemoteMemoryStore.INDEX_WRITE_MIN:
        return False  # a small log is read faster than any index file
    if state.status == "invalid":
        try:  # the log is the truth: an invalid file goes first
            os.unlink(index_path_for(str(report.path)))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise RepairError(f"cannot remove the index file: {exc.strerror}") from None
    store = RemoteMemoryStore.for_scope(report.path, report.scope)
    return store.write_index_file()


class RepairError(Exception):
    """--repair could not run; nothing was changed."""


def _lock(lock_path: Path) -> int:
    try:
        fd = open_private(str(lock_path), os.O_RDWR | os.O_CREAT)
    except FileNotFoundError:
        raise RepairError(f"cannot open lock file {lock_path}: no such folder") from None
    except RemoteMemoryError as exc:
        raise RepairError(str(exc)) from None
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise RepairError(f"cannot lock {lock_path}: {exc.strerror}") from None
        if time.monotonic() > deadline:
            os.close(fd)
            raise RepairError(
                f"the store is busy: a writer held {lock_path} for {LOCK_WAIT_SECONDS:.0f} s"
            )
        time.sleep(0.05)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def repair_torn_tail(path: str | os.PathLike[str]) -> tuple[Path, int] | None:
    """Cut a torn tail under the store's lock, after a backup; ``(backup, bytes cut)``.

    None when there is no torn tail (then nothing was written, not even a backup).
    """
    path = Path(path)
    lock_path = path.with_name(path.name + ".lock")
    # Refused before anything is opened or created: a link, a FIFO, a file of another
    # account or one others may write is not the store's to cut. open_private checks
    # the descriptors again, so nothing swapped in after this check is written either.
    try:
        check_path(str(path))
        check_path(str(lock_path), folder_too=False)
    except RemoteMemoryError as exc:
        raise RepairError(str(exc)) from None
    lock_fd = _lock(lock_path)
    try:
        try:
            fd = open_private(str(path), os.O_RDWR)
        except FileNotFoundError:
            raise RepairError(f"cannot open {path}: no such file") from None
        except RemoteMemoryError as exc:
            raise RepairError(str(exc)) from None
        try:
            size = os.fstat(fd).st_size
            # Where does the last complete line end? Read backwards from the end.
            end = size
            good = 0
            while end > 0:
                start = max(0, end - (1 << 16))
                chunk = os.pread(fd, end - start, start)
                at = chunk.rfind(b"\n")
                if at >= 0:
                    good = start + at + 1
                    break
                end = start
            pending = pending_batch_offset(os.pread(lock_fd, 64, 0))
            if pending is not None:
                good = min(good, pending)
            if good == size:
                return None
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            backup = path.with_name(f"{path.name}.torn-{stamp}.bak")
            try:
                out = open_private(str(backup), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            except FileNotFoundError:
                raise RepairError(f"cannot write backup {backup}: no such folder") from None
            except RemoteMemoryError as exc:
                raise RepairError(f"cannot write backup {backup}: {exc}") from None
            try:
                copied = 0
                while copied < size:
                    data = os.pread(fd, min(1 << 20, size - copied), copied)
                    if not data:
                        break
                    view = memoryview(data)
                    while view:
                        written = os.write(out, view)
                        view = view[written:]
                    copied += len(data)
                os.fsync(out)
            except OSError as exc:
                os.close(out)
                os.unlink(backup)
                raise RepairError(f"cannot write backup {backup}: {exc.strerror}") from None
            os.close(out)
            if copied != size:
                os.unlink(backup)
                raise RepairError(f"{path} changed while it was being backed up")
            _fsync_dir(path.parent)
            try:
                os.ftruncate(fd, good)
                os.fsync(fd)
                if pending is not None:
                    os.ftruncate(lock_fd, 0)
                    os.fsync(lock_fd)
            except OSError as exc:
                raise RepairError(f"cannot truncate {path}: {exc.strerror}") from None
            return backup, size - good
        finally:
            os.close(fd)
    finally:
        os.close(lock_fd)
