"""Opening a store's files without trusting the folder they are in.

A store folder can hold what somebody else put there: a symbolic link to a file the
user cares about, a FIFO that blocks the first ``open``, another account's file that
account can read, a folder every account can write. memlib writes records, locks and
every derived file only through ``open_private``:

- the folder is opened with ``O_DIRECTORY | O_NOFOLLOW`` and checked on its descriptor,
  and the file is opened relative to that descriptor, so neither can be swapped for a
  link between the check and the open. A store opens its folder once per operation
  (``open_folder``) and every file of that operation relative to it, so a folder renamed
  meanwhile cannot hand it the lock of one folder and the log of another;
- every folder above it, by name and by its descriptor's ``..``, must be root's or this
  user's and writable by nobody else unless sticky: whoever may rename one of them can
  move the store away, or swap another in (OpenSSH's ``StrictModes``);
- the file is opened with ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO or device opens at once
  instead of blocking) and checked with ``fstat`` on the descriptor before a byte moves:
  a regular file, owned by this user, writable by nobody else, with no other name (a
  hard link makes a write to it a write to whatever else has that inode). Nothing is
  opened with ``O_TRUNC``: a file is cut only after that check.

A refusal is a ``RemoteMemoryUnsafePathError`` whose one line names the path and what
is wrong with it; nothing has been read, written, truncated or created by then.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from typing import Any

from ..errors import RemoteMemoryError, RemoteMemoryStorageError, RemoteMemoryUnsafePathError

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
    if not folder and st.st_nlink > 1:
        # Another name for the same inode may be any file of this user's: truncating or
        # cutting a "torn tail" here would change that file too.
        return f"has {st.st_nlink} hard links, not 1 (another name for the same file)"
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
    """Refuse a store folder that is a link, not ours, or writable by others, or that
    sits in a folder somebody else could rename it out of.

    A folder that does not exist yet is fine (memlib creates it private) as long as the
    folders above it that do exist pass.
    """
    try:
        fd = open_folder(path)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise RemoteMemoryError(f"cannot inspect folder {path}: a parent is not a folder") from None
    os.close(fd)


# A path of this many levels is far past PATH_MAX: a loop, not a folder tree.
_MAX_DEPTH = 1024


def _check_names_above(path: str) -> None:
    """The folders above ``path`` as it is spelled: the ones a link on the way lives in,
    and the ones above a folder that is missing (moved away, or not made yet)."""
    current = os.path.abspath(path or ".")
    while True:
        parent = os.path.dirname(current)
        if parent == current:
            return
        current = parent
        try:
            st = os.lstat(current)
        except OSError:
            continue  # missing or out of reach: the open below words that
        if stat.S_ISDIR(st.st_mode):
            problem = problem_with(st, folder=True)
            if problem is not None:
                raise unsafe(current, problem)


def _check_real_parents(fd: int, path: str) -> None:
    """The folders above the one open at ``fd``, found through ``..`` from it: where it
    really is now, whatever links its path went through."""
    here = os.fstat(fd)
    up = ".."
    for level in range(1, _MAX_DEPTH):
        try:
            st = os.stat(up, dir_fd=fd, follow_symlinks=False)
        except OSError as exc:
            raise RemoteMemoryError(
                f"cannot inspect the folders above {path}: {exc.strerror}"
            ) from None
        if (st.st_dev, st.st_ino) == (here.st_dev, here.st_ino):
            return  # "/" is its own parent
        problem = problem_with(st, folder=True)
        if problem is not None:
            name = os.path.realpath(path or ".")
            for _ in range(level):
                name = os.path.dirname(name)
            raise unsafe(name, problem)
        here = st
        up += "/.."
    raise RemoteMemoryError(f"cannot inspect the folders above {path}: too deep")


def open_folder(path: str) -> int:
    """A read descriptor on the store folder ``path``, checked with every folder above it.

    Raises ``FileNotFoundError`` when the folder does not exist (after the folders above
    it that do exist passed), so that a caller can create it, and ``NotADirectoryError``
    when a folder above it is a file; every other refusal or failure is a
    ``RemoteMemoryError`` naming the folder.
    """
    _check_names_above(path)
    try:
        fd = os.open(path or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                st = os.lstat(path or ".")
            except NotADirectoryError:
                raise NotADirectoryError(exc.errno, "a parent is not a folder", path) from None
            except OSError:
                raise unsafe(path, "is not a folder") from None
            raise unsafe(path, f"is {_kind(st.st_mode)}, not a folder") from None
        raise failure(f"cannot open folder {path}", exc) from None
    try:
        problem = problem_with(os.fstat(fd), folder=True)
        if problem is not None:
            raise unsafe(path, problem)
        _check_real_parents(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def folder(path: str) -> Iterator[int]:
    """``open_folder`` for the length of a ``with`` block."""
    fd = open_folder(path)
    try:
        yield fd
    finally:
        os.close(fd)


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


def open_private(path: str, flags: int, *, folder_fd: int | None = None) -> int:
    """``os.open(path, flags, 0o600)`` that follows no link and blocks on nothing.

    ``folder_fd``: the descriptor ``open_folder`` gave for ``path``'s folder; the file is
    opened relative to it, and the folder is not checked again. Without it the folder is
    opened (and checked) for this one file.

    Raises ``FileNotFoundError`` when the folder (or, without ``O_CREAT``, the file)
    does not exist, so that a caller can create the folders and try again; every
    other refusal or failure is a ``RemoteMemoryError`` naming the path.
    """
    if flags & os.O_TRUNC:
        raise ValueError("open_private never truncates before its checks: ftruncate after")
    if folder_fd is None:
        parent = os.path.dirname(path)
        try:
            with folder(parent) as fd:
                return open_private(path, flags, folder_fd=fd)
        except NotADirectoryError:
            raise unsafe(parent, "is not a folder") from None
    try:
        fd = os.open(
            os.path.basename(path),
            flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            FILE_MODE,
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


def rename_in(folder_fd: int | None, source: str, target: str) -> None:
    """``os.rename`` of two names of one folder, relative to ``folder_fd`` when given."""
    if folder_fd is None:
        os.rename(source, target)
    else:
        os.rename(
            os.path.basename(source),
            os.path.basename(target),
            src_dir_fd=folder_fd,
            dst_dir_fd=folder_fd,
        )


def unlink_in(folder_fd: int | None, path: str) -> None:
    """``os.unlink``, relative to ``folder_fd`` when given."""
    if folder_fd is None:
        os.unlink(path)
    else:
        os.unlink(os.path.basename(path), dir_fd=folder_fd)


def write_all(fd: int, data: Any) -> None:
    """Every byte of ``data`` (bytes or a buffer), however short the kernel's writes; a
    write that makes no progress is an ``EIO`` instead of a loop for ever."""
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view)
        if written == 0:
            raise OSError(errno.EIO, "write made no progress")
        view = view[written:]
