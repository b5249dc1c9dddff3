"""``memlib doctor``: check a JSONL store file and change nothing; cut only a torn tail.

``check_store`` reads the file as the store would (no link followed, nothing opened that
could block, memlib's bounded JSON parser) and reports every problem, not only the first.
``repair_torn_tail`` alone writes the log: it cuts a torn tail as the next writer would,
under the store's lock, after a backup (a damaged line is only reported; a file the store
would not trust is never repaired). The derived files (index, vectors) are never problems.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ..._safejson import loads
from ..._vectors import VectorState
from ..._visible import first_hidden, shown_name
from ...errors import RemoteMemoryCorruptionError, RemoteMemoryError, RemoteMemoryValidationError
from ...records import MemoryKind, StoredMemory, user_scope_for
from .._files import DIR_MODE, FILE_MODE, check_path, open_folder, open_private, write_all
from ._index import IndexState, index_path_for, inspect_index, remove_stale_temps, stale_temps
from ._store import RemoteMemoryStore, note_pending, pending_batch_offset
from ._vectors import VectorFileState, fsync_folder, vectors_path_for

LOCK_WAIT_SECONDS = 10.0


@dataclass(frozen=True)
class Problem:
    kind: str  # parse, scope, duplicate, retraction, torn_tail, permissions, path, temp_file, text
    message: str
    line: int | None = None


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
    project: str | None = None  # the project of the log's first record (None: none)
    # The vectors file beside the log, and the vectors in use (derived, like the index).
    vectors_file: VectorFileState | None = None
    vectors: VectorState | None = None
    vectors_unchecked: str = ""  # why the vectors could not be checked

    @property
    def healthy(self) -> bool:
        return not self.problems

    def add(self, kind: str, message: str, line: int | None = None) -> None:
        self.problems.append(Problem(kind, message, line))


class RepairError(Exception):
    """--repair could not run; nothing was changed."""


def describe(exc: Exception) -> str:
    """An exception's text on one line."""
    return " ".join(str(exc).split())


def _mode_problem(
    report: DoctorReport, st: os.stat_result, what: str, path: Path, expected: int
) -> None:
    mode = stat.S_IMODE(st.st_mode)
    if mode & ~expected:
        report.add(
            "permissions",
            f"{what} {path} has mode {mode:04o}; expected {expected:04o} "
            f"(fix: chmod {expected:o} {path})",
        )


def _owner_problem(report: DoctorReport, st: os.stat_result, what: str, path: Path) -> None:
    uid = os.geteuid()
    if st.st_uid != uid:
        report.add(
            "permissions",
            f"{what} {path} is owned by uid {st.st_uid}, not by this "
            f"user (uid {uid}); the store refuses it",
        )


def _open_to_read(path: Path) -> int:
    """A descriptor on ``path`` if it is a regular file: no link followed, no FIFO waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fd


def _log_stat(report: DoctorReport, path: Path) -> os.stat_result | None:
    """The log's ``lstat`` when it is a regular file, else None and the problem."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        report.add("path", f"no such file: {path}")
        return None
    except OSError as exc:
        report.add("path", f"cannot open {path}: {exc.strerror}")
        return None
    if stat.S_ISREG(st.st_mode):
        return st
    if stat.S_ISLNK(st.st_mode):
        report.add("path", f"path is a symbolic link, which the store never follows: {path}")
    elif stat.S_ISDIR(st.st_mode):
        report.add("path", f"path is a folder, not a records file: {path}")
    else:
        report.add("path", f"path is not a regular file: {path}")
    return None


def _check_folder(report: DoctorReport, folder: Path) -> None:
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return
    except OSError as exc:
        report.add("permissions", f"cannot stat folder {folder}: {exc.strerror}")
        return
    if stat.S_ISLNK(st.st_mode):
        report.add("path", f"folder {folder} is a symbolic link; the store never follows one")
        return
    _mode_problem(report, st, "folder", folder, DIR_MODE)
    _owner_problem(report, st, "folder", folder)


def _check_lock(report: DoctorReport, lock_path: Path) -> int | None:
    """Check the lock file; where a batch whose writer died before its fsync returned
    begins, as the lock notes it (the store ignores everything from there on)."""
    try:
        st = os.lstat(lock_path)
    except OSError:  # absent, or out of reach: no note to read
        return None
    if stat.S_ISLNK(st.st_mode):
        report.add("path", f"lock file is a symbolic link: {lock_path}")
        return None
    if not stat.S_ISREG(st.st_mode):
        report.add("path", f"lock file is not a regular file: {lock_path}")
        return None
    _owner_problem(report, st, "lock file", lock_path)
    _mode_problem(report, st, "lock file", lock_path, FILE_MODE)
    try:
        fd = _open_to_read(lock_path)
        try:
            return pending_batch_offset(fd)
        finally:
            os.close(fd)
    except OSError:
        return None


@dataclass
class _Lines:
    """What the lines read so far hold, for the rules on the next one."""

    report: DoctorReport
    expected: tuple[str, str] | None  # (scope, why) every record must have
    first_line: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, MemoryKind] = field(default_factory=dict)
    retracted: dict[str, int] = field(default_factory=dict)
    first_scope: tuple[str, int] | None = None
    # Reported after every line's own problems, in line order.
    retraction_problems: list[Problem] = field(default_factory=list)

    def take(self, number: int, raw: bytes) -> None:
        record = self._parse(number, raw)
        if record is None:
            return
        report = self.report
        report.records += 1
        _text_rule_problem(report, number, record)
        report.kinds[record.kind.value] = report.kinds.get(record.kind.value, 0) + 1
        report.scopes[record.user_scope] = report.scopes.get(record.user_scope, 0) + 1
        self._check_scope(number, record)
        if report.records == 1:
            report.project = record.project
        elif record.project != report.project:
            report.add(
                "scope",
                f"line {number}: memory {record.memory_id} belongs to project "
                f"{record.project!r}, but the first line to {report.project!r}",
                number,
            )
        if record.memory_id in self.first_line:
            report.add(
                "duplicate",
                f"line {number}: duplicate memory_id {record.memory_id} "
                f"(first at line {self.first_line[record.memory_id]})",
                number,
            )
            return
        self.first_line[record.memory_id] = number
        self.kinds[record.memory_id] = record.kind
        if record.kind is MemoryKind.RETRACTION:
            self._check_retraction(number, record)

    def _parse(self, number: int, raw: bytes) -> StoredMemory | None:
        try:
            data = loads(raw)
        except ValueError as exc:  # bad UTF-8, bad JSON, or past safejson's limits
            self.report.add("parse", f"line {number}: invalid JSON: {describe(exc)}", number)
            return None
        try:
            return StoredMemory.from_dict(data)
        except (RemoteMemoryValidationError, RemoteMemoryCorruptionError) as exc:
            self.report.add("parse", f"line {number}: invalid record: {describe(exc)}", number)
            return None

    def _check_scope(self, number: int, record: StoredMemory) -> None:
        scope = record.user_scope
        head = f"line {number}: memory {record.memory_id} belongs to user scope {scope}"
        if self.expected is not None:
            if scope != self.expected[0]:
                self.report.add(
                    "scope", f"{head}, not {self.expected[0]} ({self.expected[1]})", number
                )
        elif self.first_scope is None:
            self.first_scope = (scope, number)
        elif scope != self.first_scope[0]:
            first, at = self.first_scope
            self.report.add("scope", f"{head}, but line {at} to {first}", number)

    def _check_retraction(self, number: int, record: StoredMemory) -> None:
        """The store's retraction rules (``check_batch``), against the lines before."""
        target = record.retracts or ""
        kind = self.kinds.get(target)
        if kind is None:
            message = f"retraction {record.memory_id} names unknown memory_id {target}"
        elif kind is MemoryKind.RETRACTION:  # itself included, as check_batch has it
            message = f"retraction {record.memory_id} retracts a retraction ({target})"
        elif target in self.retracted:
            message = f"{target} is already retracted at line {self.retracted[target]}"
        else:
            self.retracted[target] = number
            return
        self.retraction_problems.append(Problem("retraction", f"line {number}: {message}", number))

    def searched(self) -> int:
        """Conversation records not retracted: the ones a vector is kept for."""
        conversation = MemoryKind.CONVERSATION
        return sum(1 for kind in self.kinds.values() if kind is conversation) - sum(
            1 for target in self.retracted if self.kinds[target] is conversation
        )


def _expected_scope(path: Path, user_id: str | None) -> tuple[str, str] | None:
    if user_id is not None:
        return user_scope_for(user_id), f"user {user_id!r}"
    name = path.parent.name
    if len(name) == 16 and all(c in "0123456789abcdef" for c in name):
        return name, "its folder name"
    return None


def check_store(path: str | os.PathLike[str], *, user_id: str | None = None) -> DoctorReport:
    """Read ``path`` (never write it) and list everything wrong with it."""
    path = Path(path)
    report = DoctorReport(path=path)
    st = _log_stat(report, path)
    if st is None:
        return report
    _owner_problem(report, st, "records file", path)
    _mode_problem(report, st, "records file", path, FILE_MODE)
    _check_folder(report, path.parent)
    pending = _check_lock(report, path.with_name(path.name + ".lock"))
    try:
        handle = os.fdopen(_open_to_read(path), "rb")
    except OSError as exc:
        report.add("path", f"cannot read {path}: {exc.strerror}")
        return report
    lines = _Lines(report, _expected_scope(path, user_id))
    with handle:
        for raw in handle:
            if pending is not None and report.good_size >= pending:
                report.torn_bytes = st.st_size - report.good_size
                break
            if not raw.endswith(b"\n"):
                report.torn_bytes = len(raw)
                break
            report.lines += 1
            report.good_size += len(raw)
            lines.take(report.lines, raw[:-1])
        report.problems += lines.retraction_problems
        if report.torn_bytes:
            report.add(
                "torn_tail",
                f"torn tail: {report.torn_bytes} bytes after line {report.lines} have no "
                "trailing newline (a write that never finished; `memlib doctor PATH --repair` "
                "removes it after writing a backup)",
            )
        _check_index(report, handle.fileno(), user_id)
    _check_vectors(report, lines.searched())
    return report


def _text_rule_problem(report: DoctorReport, number: int, record: StoredMemory) -> None:
    """A record an older version let in that a new one may not be (docs/contract.md,
    "Smaller input rules"): it stays readable, but PostgreSQL cannot hold its U+0000,
    and an id that is not NFC or holds an invisible character can be shown like another."""
    source = record.source
    texts = (
        ("content", record.content),
        ("summary", record.summary),
        ("source_id", source.source_id),
        ("source_type", source.source_type),
        ("title", source.title),
    )
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
        report.add(
            "text",
            f"line {number}: memory {label}: {'; '.join(found)} "
            "(readable, but a new record may not be written so)",
            number,
        )


def _check_index(report: DoctorReport, log_fd: int, user_id: str | None) -> None:
    if user_id is not None:
        report.scope = user_scope_for(user_id)
    elif len(report.scopes) == 1:
        report.scope = next(iter(report.scopes))
    # The next index writer removes those of dead writers; a store nobody recalls keeps them.
    path = str(report.path)
    for temp, size in stale_temps(path):
        report.add(
            "temp_file",
            f"stale temporary file {temp} ({size:,} bytes) of a writer "
            "that died (`memlib doctor PATH --repair` removes it)",
        )
    scope = report.scope if report.project is None else f"{report.scope}/{report.project}"
    report.index = inspect_index(
        index_path_for(path), scope, log_fd, report.good_size, report.lines
    )


def _reader(report: DoctorReport) -> RemoteMemoryStore:
    """A store reading the log as any reader would, that writes no index file."""
    assert report.scope is not None
    store = RemoteMemoryStore.for_scope(report.path, report.scope, report.project)
    store.INDEX_WRITE_MIN = store.INDEX_WRITE_ALWAYS = 1 << 62  # checking changes nothing
    return store


def _check_vectors(report: DoctorReport, searched: int) -> None:
    if not os.path.lexists(vectors_path_for(str(report.path))):
        # No store is opened: a big log without an index file would be read again for nothing.
        report.vectors_file = VectorFileState("absent")
        report.vectors = VectorState(None, 0, 0, searched)
    elif report.scope is None:
        report.vectors_unchecked = "the log's user scope is not known"
    else:
        store = _reader(report)
        try:
            report.vectors_file = store.vectors_file_state()
            report.vectors = store.vector_state()
        except RemoteMemoryError as exc:
            report.vectors_unchecked = describe(exc)


def describe_vectors(state: VectorState) -> str:
    """``vectors: 1,190 stored, 12 missing (MODEL, 384 dimensions)``."""
    if state.model is None:
        return f"vectors: none stored, {state.missing} records without one"
    return (
        f"vectors: {state.stored} stored, {state.missing} missing ({state.model}, "
        f"{state.dimension} dimensions)"
    )


def _vectors_file_line(state: VectorFileState) -> str:
    if state.status == "absent":
        return "vectors file: absent"
    if state.status == "fresh":
        return (
            f"vectors file: fresh ({state.rows} rows, {state.model}, {state.dimension} dimensions)"
        )
    if state.status == "unreadable":
        return f"vectors file: unreadable, not used: {state.reason}"
    torn = f", and a torn last row of {state.torn_bytes} bytes" if state.torn_bytes else ""
    damaged = f", {state.damaged} of them damaged" if state.damaged else ""
    return (
        f"vectors file: {state.rows - state.used} of {state.rows} rows not used (not matching"
        f" the log{damaged}){torn}; --repair drops them"
    )


def vector_lines(report: DoctorReport) -> list[str]:
    """The report's lines about the vectors file and the vectors, in doctor's style."""
    state = report.vectors_file
    lines = []
    if state is not None and (state.status != "absent" or not report.vectors_unchecked):
        lines.append(_vectors_file_line(state))
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
        raise RepairError(describe(exc)) from None


def remove_temp_files(report: DoctorReport) -> list[tuple[str, int]]:
    """Remove the stale temporary files the report found; ``(path, bytes)`` of each."""
    if not any(p.kind == "temp_file" for p in report.problems):
        return []
    try:  # through the folder the store would use: never through a link or a shared one
        folder = open_folder(str(report.path.parent))
    except (OSError, RemoteMemoryError) as exc:
        raise RepairError(describe(exc)) from None
    try:
        return remove_stale_temps(str(report.path), folder_fd=folder)
    finally:
        os.close(folder)


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
    return _reader(report).write_index_file()  # one write: the reader's refresh writes none


def _open_or_refuse(path: Path, flags: int, missing: str, refused: str = "") -> int:
    """``open_private``, a missing folder or file and a refusal as ``RepairError``s."""
    try:
        return open_private(str(path), flags)
    except FileNotFoundError:
        raise RepairError(missing) from None
    except RemoteMemoryError as exc:
        raise RepairError(f"{refused}{exc}") from None


def _lock(lock_path: Path) -> int:
    missing = f"cannot open lock file {lock_path}: no such folder"
    fd = _open_or_refuse(lock_path, os.O_RDWR | os.O_CREAT, missing)
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


def _last_line_end(fd: int, size: int) -> int:
    """Where the last complete line ends: read backwards from the end."""
    end = size
    while end > 0:
        start = max(0, end - (1 << 16))
        at = os.pread(fd, end - start, start).rfind(b"\n")
        if at >= 0:
            return start + at + 1
        end = start
    return 0


def _backup(path: Path, fd: int, size: int) -> Path:
    """The whole file copied to a new backup beside it, fsynced, folder included."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    backup = path.with_name(f"{path.name}.torn-{stamp}.bak")
    cannot = f"cannot write backup {backup}: "
    out = _open_or_refuse(
        backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, cannot + "no such folder", cannot
    )
    copied = 0
    try:
        while copied < size:
            data = os.pread(fd, min(1 << 20, size - copied), copied)
            if not data:
                break
            write_all(out, data)
            copied += len(data)
        os.fsync(out)
    except OSError as exc:
        os.unlink(backup)
        raise RepairError(f"{cannot}{exc.strerror}") from None
    finally:
        os.close(out)
    if copied != size:
        os.unlink(backup)
        raise RepairError(f"{path} changed while it was being backed up")
    with contextlib.suppress(OSError):
        fsync_folder(str(path.parent))
    return backup


def _cut(path: Path, fd: int, lock_fd: int) -> tuple[Path, int] | None:
    size = os.fstat(fd).st_size
    good = _last_line_end(fd, size)
    pending = pending_batch_offset(lock_fd)
    if pending is not None:
        good = min(good, pending)
    if good == size:
        return None
    backup = _backup(path, fd, size)
    try:
        os.ftruncate(fd, good)
        os.fsync(fd)
        if pending is not None:
            note_pending(lock_fd, None)
    except OSError as exc:
        raise RepairError(f"cannot truncate {path}: {exc.strerror}") from None
    return backup, size - good


def repair_torn_tail(path: str | os.PathLike[str]) -> tuple[Path, int] | None:
    """Cut a torn tail under the store's lock, after a backup: ``(backup, bytes cut)``, or
    None when there is none (then nothing was written, not even a backup)."""
    path = Path(path)
    lock_path = path.with_name(path.name + ".lock")
    # Refused before anything is opened or created, as the store refuses it; open_private
    # checks the descriptors again, so nothing swapped in after this is written either.
    try:
        check_path(str(path))
        check_path(str(lock_path), folder_too=False)
    except RemoteMemoryError as exc:
        raise RepairError(str(exc)) from None
    lock_fd = _lock(lock_path)
    try:
        fd = _open_or_refuse(path, os.O_RDWR, f"cannot open {path}: no such file")
        try:
            return _cut(path, fd, lock_fd)
        finally:
            os.close(fd)
    finally:
        os.close(lock_fd)
