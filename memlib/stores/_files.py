"""Opening a store's files without trusting their folder (docs/contract.md, "Store files
and folders"): every file goes through ``open_private``, relative to a folder descriptor
``open_folder`` checked; a refusal names the path before a byte moves."""

from __future__ import annotations

import errno
import fcntl
import os
import stat
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


# What ``os.open`` with ``O_NOFOLLOW | O_NONBLOCK`` met instead of a regular file
# (ENXIO: a FIFO with no reader, opened for writing).
_NOT_REGULAR = {errno.ELOOP: "a symbolic link", errno.ENXIO: "a FIFO", errno.EISDIR: "a folder"}


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
    # A folder of root's, or a sticky one (only a file's owner may rename it, as in /tmp),
    # cannot have our checked file swapped under us (OpenSSH's rule for key folders).
    if st.st_uid != uid and not (folder and st.st_uid == 0):
        return f"is owned by uid {st.st_uid}, not by this user (uid {uid})"
    if st.st_mode & _OTHERS_WRITE and not (folder and st.st_mode & stat.S_ISVTX):
        return f"is writable by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    if not folder and st.st_nlink > 1:
        # Another name for the same inode may be any file of this user's, cut with it.
        return f"has {st.st_nlink} hard links, not 1 (another name for the same file)"
    return None


def unsafe(path: str | os.PathLike[str], problem: str) -> RemoteMemoryUnsafePathError:
    return RemoteMemoryUnsafePathError(f"refusing to use {os.fspath(path)}: it {problem}")


def refuse_unsafe(
    path: str | os.PathLike[str], st: os.stat_result, *, folder: bool = False
) -> None:
    problem = problem_with(st, folder=folder)
    if problem is not None:
        raise unsafe(path, problem)


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
    """``open_folder``'s refusals; a folder that does not exist yet is fine (memlib
    creates it private) as long as the folders above it that do exist pass."""
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
    while (parent := os.path.dirname(current)) != current:
        current = parent
        try:
            st = os.lstat(current)
        except OSError:
            continue  # missing or out of reach: the open below words that
        if stat.S_ISDIR(st.st_mode):
            refuse_unsafe(current, st, folder=True)


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
    """A read descriptor on the store folder ``path``, checked with every folder above it;
    ``FileNotFoundError`` when it does not exist (so that a caller can create it),
    ``NotADirectoryError`` when a folder above it is a file, else ``RemoteMemoryError``."""
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
        refuse_unsafe(path, os.fstat(fd), folder=True)
        _check_real_parents(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_path(path: str, *, folder_too: bool = True) -> os.stat_result | None:
    """``lstat`` of an existing store file, refused as ``open_private`` would; None if absent
    (for the files SQLite opens by name: checked before it opens them)."""
    if folder_too:
        check_folder(os.path.dirname(path))
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RemoteMemoryError(f"cannot inspect {path}: {exc.strerror}") from None
    refuse_unsafe(path, st)
    return st


def open_private(path: str, flags: int, *, folder_fd: int | None = None) -> int:
    """``os.open(path, flags, 0o600)`` that follows no link and blocks on nothing,
    relative to ``folder_fd`` (``open_folder``'s; without it the folder is opened for this
    one file). ``FileNotFoundError`` when the folder (or, without ``O_CREAT``, the file)
    does not exist; every other refusal or failure is a ``RemoteMemoryError``."""
    if flags & os.O_TRUNC:
        raise ValueError("open_private never truncates before its checks: ftruncate after")
    if folder_fd is None:
        parent = os.path.dirname(path)
        try:
            folder_fd = open_folder(parent)
        except NotADirectoryError:
            raise unsafe(parent, "is not a folder") from None
        try:
            return open_private(path, flags, folder_fd=folder_fd)
        finally:
            os.close(folder_fd)
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
        if exc.errno in _NOT_REGULAR:
            raise unsafe(path, f"is {_NOT_REGULAR[exc.errno]}, not a regular file") from None
        raise failure(f"cannot open {path}", exc) from None
    try:
        refuse_unsafe(path, os.fstat(fd))
        # Regular files ignore O_NONBLOCK today; clear it so no later call depends on that.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def name_in(folder_fd: int | None, path: str) -> str:
    """``path`` as a system call relative to ``folder_fd`` (None: the working folder) takes it."""
    return path if folder_fd is None else os.path.basename(path)


def rename_in(folder_fd: int | None, source: str, target: str) -> None:
    s, t = name_in(folder_fd, source), name_in(folder_fd, target)
    os.rename(s, t, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)


def unlink_in(folder_fd: int | None, path: str) -> None:
    os.unlink(name_in(folder_fd, path), dir_fd=folder_fd)


def write_all(fd: int, data: Any) -> None:
    """Every byte of ``data`` (bytes or a buffer), however short the kernel's writes; a
    write that makes no progress is an ``EIO`` instead of a loop for ever."""
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view)
        if written == 0:
            raise OSError(errno.EIO, "write made no progress")
        view = view[written:]
