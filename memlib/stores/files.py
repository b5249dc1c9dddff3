"""Opening a store's files without trusting the folder they are in.

A store folder can hold what somebody else put there: a symbolic link to a file the
user cares about, a FIFO that blocks the first ``open``, another account's file that
account can read, a folder every account can write. memlib writes records, locks and
every derived file only through ``open_private``:

- the folder is opened with ``O_DIRECTORY | O_NOFOLLOW`` and checked on its descriptor,
  and the file is opened relative to that descriptor, so neither can be swapped for a
  link between the check and the open;
- the file is opened with ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO or device opens at once
  instead of blocking) and checked with ``fstat`` on the descriptor before a byte moves:
  a regular file, owned by this user, writable by nobody else.

A refusal is a ``RemoteMemoryUnsafePathError`` whose one line names the path and what
is wrong with it; nothing has been read, written, truncated or created by then.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from typing import Any

from ..errors import RemoteMemoryError, RemoteMemoryStorageError, RemoteMemoryUnsafePathError

__all__ = [
    "write_all",
    "FILE_MODE",
    "DIR_MODE",
    "problem_with",
    "check_folder",
    "check_path",
    "open_private",
    "unsafe",
    "failure",
]

FILE_MODE = 0o600
DIR_MODE = 0o700
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH

_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISREG, "a regular file"),
)


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def problem_with(st: os.stat_result, *, folder: bool = False) -> str | None:
    """What makes ``st`` untrustworthy as a store file (or folder), or None."""
    wanted = stat.S_ISDIR if folder else stat.S_ISREG
    if not wanted(st.st_mode):
        return f"is {_kind(st.st_mode)}, not {'a folder' if folder else 'a regular file'}"
    uid = os.geteuid()
    # A folder of root's, or one where only a file's owner may rename or delete it (the
    # sticky bit, as /tmp has), cannot have our checked file swapped under us: the rule
    # OpenSSH applies to the folders above a key file.
    if st.st_uid != uid and not (folder and st.st_uid == 0):
        return f"is owned by uid {st.st_uid}, not by this user (uid {uid})"
    if st.st_mode & _OTHERS_WRITE and not (folder and st.st_mode & stat.S_ISVTX):
        return f"is writable by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def unsafe(path: str | os.PathLike[str], problem: str) -> RemoteMemoryUnsafePathError:
    """The one-line refusal: ``refusing to use PATH: it PROBLEM``."""
    return RemoteMemoryUnsafePathError(f"refusing to use {os.fspath(path)}: it {problem}")


# The storage itself failing, as opposed to a file refused or a permission missing.
_STORAGE_ERRNOS = frozenset(
    (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EFBIG, errno.ENOMEM)
)


def failure(what: str, exc: OSError) -> RemoteMemoryError:
    """``what: <strerror> (ENOSPC)``, typed as storage when the storage failed."""
    code = errno.errorcode.get(exc.errno or 0, "error")
    cause = "no space left on device" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else exc.strerror
    kind = RemoteMemoryStorageError if exc.errno in _STORAGE_ERRNOS else RemoteMemoryError
    return kind(f"{what}: {cause} ({code})")


def check_folder(path: str) -> None:
    """Refuse a store folder that is a link, not ours, or writable by others.

    A folder that does not exist yet is fine: memlib creates it private.
    """
    try:
        st = os.lstat(path or ".")
    except FileNotFoundError:
        return
    except OSError as exc:
        raise RemoteMemoryError(f"cannot inspect folder {path}: {exc.strerror}") from None
    problem = problem_with(st, folder=True)
    if problem is not None:
        raise unsafe(path, problem)


def check_path(path: str, *, folder_too: bool = True) -> os.stat_result | None:
    """``lstat`` of an existing store file, refused as ``open_private`` would; None if absent.

    For files that another library opens by name (SQLite's database, WAL and shared
    memory): the check runs before that library opens them.
    """
    if folder_too:
        check_folder(os.path.dirname(path))
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RemoteMemoryError(f"cannot inspect {path}: {exc.strerror}") from None
    problem = problem_with(st)
    if problem is not None:
        raise unsafe(path, problem)
    return st


def open_private(path: str, flags: int) -> int:
    """``os.open(path, flags, 0o600)`` that follows no link and blocks on nothing.

    Raises ``FileNotFoundError`` when the folder (or, without ``O_CREAT``, the file)
    does not exist, so that a caller can create the folders and try again; every
    other refusal or failure is a ``RemoteMemoryError`` naming the path.
    """
    folder, name = os.path.split(path)
    try:
        folder_fd = os.open(
            folder or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        )
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise unsafe(folder, _link_or_file(folder)) from None
        raise failure(f"cannot open folder {folder}", exc) from None
    try:
        problem = problem_with(os.fstat(folder_fd), folder=True)
        if problem is not None:
            raise unsafe(folder, problem)
        try:
            fd = os.open(
                name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, FILE_MODE,
                dir_fd=folder_fd,
            )
        except FileNotFoundError:
            raise
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise unsafe(path, "is a symbolic link, not a regular file") from None
            if exc.errno == errno.ENXIO:  # a FIFO with no reader, opened for writing
                raise unsafe(path, "is a FIFO, not a regular file") from None
            if exc.errno == errno.EISDIR:
                raise unsafe(path, "is a folder, not a regular file") from None
            raise failure(f"cannot open {path}", exc) from None
    finally:
        os.close(folder_fd)
    try:
        problem = problem_with(os.fstat(fd))
        if problem is not None:
            raise unsafe(path, problem)
        # Regular files ignore O_NONBLOCK today; clear it so no later call depends on that.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_all(fd: int, data: Any) -> None:
    """Every byte of ``data`` (bytes or a buffer), however short the kernel's writes; a
    write that makes no progress is an ``EIO`` instead of a loop for ever."""
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view)
        if written == 0:
            raise OSError(errno.EIO, "write made no progress")
        view = view[written:]


def _link_or_file(path: str) -> str:
    try:
        st = os.lstat(path)
    except OSError:
        return "is not a folder"
    return f"is {_kind(st.st_mode)}, not a folder"
