"""The JSONL index file: a reader's index, persisted beside the log (docs/contract.md).

``records.jsonl.index`` holds what a reader builds from the log (the id set, kinds,
retractions, times, per-record term counts, byte offsets, line digests and the
postings) as packed
arrays, so that a new process loads it with one read instead of parsing every line.
The log stays the one source of truth: the index file names the prefix of the log it
covers and is used only when that prefix is provably the one it was built from;
otherwise it is ignored (and, once a reader has rebuilt, replaced). A stale file costs
time, never a wrong answer.

Layout (little-endian, version ``FORMAT``)::

    b"MEMLIBIX"  u32 version  u32 header length  header (JSON, UTF-8)
    sections, in the order the header lists them, each padded to 8 bytes
    sha256 of every byte before it (32 bytes)

The header names the user scope, the covered prefix (bytes, lines, its CRC-32, the
SHA-256 of its first 4 KiB and of its last 64 KiB), the log's device and inode (a hint
only), the index's counters and each section's type and length.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import secrets
import sys
import zlib
from array import array
from dataclasses import dataclass
from typing import Any

from ..errors import RemoteMemoryError
from ..safejson import loads as load_json
from .files import open_private, write_all

__all__ = [
    "FORMAT",
    "IndexImage",
    "IndexState",
    "MAGIC",
    "index_path_for",
    "inspect_index",
    "read_index",
    "write_index",
]

MAGIC = b"MEMLIBIX"
FORMAT = 3
HEAD_BYTES = 4 << 10
TAIL_BYTES = 64 << 10
_DIGEST = 32
_PREFIX = len(MAGIC) + 8
# The sections of version 3 (1 had no "tfs": each posting's term frequency, parallel to
# "postings"; 2 had no "digests": each record's line digest, which the vectors file's
# rows are checked against), with their array type codes ("B": raw bytes, "s": UTF-8
# strings joined by "\n").
SECTIONS: tuple[tuple[str, str], ...] = (
    ("ids", "s"),
    ("kinds", "B"),
    ("live", "B"),
    ("timestamps", "d"),
    ("micros", "q"),
    ("tokens", "I"),
    ("content_tokens", "I"),
    ("starts", "Q"),
    ("retracted", "s"),
    ("terms", "s"),
    ("term_ends", "Q"),
    ("postings", "I"),
    ("tfs", "I"),
    ("digests", "Q"),
)
_ITEMSIZE = {"B": 1, "s": 1, "d": 8, "q": 8, "I": 4, "Q": 8}
# Sections handed over as read-only views of the file's bytes (memoryview), not arrays.
_SHARED = frozenset({"postings", "tfs"})


def index_path_for(log_path: str) -> str:
    return log_path + ".index"


@dataclass
class IndexImage:
    """Everything a ``_Cache`` needs, as packed arrays and counters."""

    scope: str
    covered_bytes: int
    covered_lines: int
    log_crc: int
    counters: dict[str, int]
    sections: dict[str, Any]  # name → array / bytes / list[str]


@dataclass(frozen=True)
class IndexState:
    """What ``inspect_index`` found: ``fresh``, ``stale``, ``invalid`` or ``absent``."""

    status: str
    covered_lines: int = 0
    reason: str = ""


class _Invalid(Exception):
    """The index file cannot be used (the message says why)."""


def _window_hashes(fd: int, covered: int) -> tuple[str, str]:
    head = os.pread(fd, min(HEAD_BYTES, covered), 0)
    start = max(0, covered - TAIL_BYTES)
    tail = os.pread(fd, covered - start, start)
    if len(head) != min(HEAD_BYTES, covered) or len(tail) != covered - start:
        raise _Invalid("the log is shorter than the prefix it covers")
    return hashlib.sha256(head).hexdigest(), hashlib.sha256(tail).hexdigest()


def _crc_of_prefix(fd: int, covered: int) -> int:
    crc, offset = 0, 0
    while offset < covered:
        data = os.pread(fd, min(8 << 20, covered - offset), offset)
        if not data:
            raise _Invalid("the log is shorter than the prefix it covers")
        crc = zlib.crc32(data, crc)
        offset += len(data)
    return crc


def _parse_header(data: bytes | memoryview) -> tuple[dict[str, Any], int]:
    """``(header, where its sections begin)``; checks magic, version and the checksum."""
    if len(data) < _PREFIX + _DIGEST or bytes(data[: len(MAGIC)]) != MAGIC:
        raise _Invalid("not a memlib index file")
    version = int.from_bytes(data[len(MAGIC): len(MAGIC) + 4], "little")
    if version != FORMAT:
        raise _Invalid(f"format {version}, this memlib reads format {FORMAT}")
    if hashlib.sha256(data[:-_DIGEST]).digest() != bytes(data[-_DIGEST:]):
        raise _Invalid("its checksum does not match its content (damaged)")
    size = int.from_bytes(data[len(MAGIC) + 4: _PREFIX], "little")
    try:
        header = load_json(bytes(data[_PREFIX: _PREFIX + size]))
    except ValueError:
        raise _Invalid("its header is not valid") from None
    if not isinstance(header, dict) or header.get("byteorder") != sys.byteorder:
        raise _Invalid("written on a machine of another byte order")
    return header, _PREFIX + size


def _check_log(header: dict[str, Any], log_fd: int, log_size: int, scope: str | None) -> None:
    if scope is not None and header.get("scope") != scope:
        raise _Invalid("it belongs to another user scope")
    covered = int(header["covered_bytes"])
    if covered > log_size:
        raise _Invalid(f"it covers {covered} bytes, the log has only {log_size} (truncated?)")
    head, tail = _window_hashes(log_fd, covered)
    if head != header["log_head_sha256"] or tail != header["log_tail_sha256"]:
        raise _Invalid("the log's covered prefix is not the one it was built from")
    st = os.fstat(log_fd)
    # Another file (restored, copied, replaced): check the whole covered prefix.
    if [st.st_dev, st.st_ino] != header.get("log_identity") and (
        _crc_of_prefix(log_fd, covered) != int(header["log_crc32"])
    ):
        raise _Invalid("the log's covered prefix is not the one it was built from")


def _read_file(path: str) -> bytes | None:
    """The index file's bytes, None if absent; a link or foreign file is refused."""
    try:
        fd = open_private(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    except OSError as exc:
        raise RemoteMemoryError(f"cannot read index file {path}: {exc.strerror}") from None
    finally:
        os.close(fd)


def read_index(
    path: str, scope: str, log_fd: int, log_size: int
) -> tuple[IndexImage | None, str]:
    """The image in ``path`` if it provably describes a prefix of the log, and why not.

    ``log_fd`` is a read descriptor on the log; ``log_size`` the bytes readers may use.
    """
    data = _read_file(path)
    if data is None:
        return None, "absent"
    try:
        view = memoryview(data)
        header, at = _parse_header(view)
        _check_log(header, log_fd, log_size, scope)
        sections: dict[str, Any] = {}
        end = len(data) - _DIGEST
        for name, code in SECTIONS:
            nbytes = int(header["sections"][name])
            if at + nbytes > end:
                raise _Invalid("its sections are cut short")
            chunk = view[at: at + nbytes]
            if code == "s":
                text = bytes(chunk).decode("utf-8")
                sections[name] = text.split("\n") if text else []
            elif code == "B":
                sections[name] = bytearray(chunk)
            elif name in _SHARED:
                # Most of the file, read by slices: a view of the bytes read, not a copy
                # (the index copies a term's list out when a query first asks for it).
                if len(chunk) % _ITEMSIZE[code]:
                    raise _Invalid("its sections are cut short")
                sections[name] = chunk.cast(code)  # type: ignore[call-overload]
            else:
                values = array(code)
                if values.itemsize != _ITEMSIZE[code]:
                    raise _Invalid("array sizes differ on this machine")
                values.frombytes(chunk)
                sections[name] = values
            at += (nbytes + 7) & ~7
        n = int(header["covered_lines"])
        for name in ("ids", "kinds", "live", "timestamps", "micros", "tokens",
                     "content_tokens", "starts", "digests"):
            if len(sections[name]) != n:
                raise _Invalid("its sections disagree on the number of records")
        if len(sections["terms"]) != len(sections["term_ends"]):
            raise _Invalid("its sections disagree on the number of terms")
        if len(sections["tfs"]) != len(sections["postings"]):
            raise _Invalid("its term frequencies disagree with its postings")
        image = IndexImage(
            scope=header["scope"],
            covered_bytes=int(header["covered_bytes"]),
            covered_lines=n,
            log_crc=int(header["log_crc32"]),
            counters={k: int(v) for k, v in header["counters"].items()},
            sections=sections,
        )
    except _Invalid as exc:
        return None, str(exc)
    except (KeyError, TypeError, ValueError, UnicodeError) as exc:
        return None, f"its header is not valid ({type(exc).__name__})"
    return image, "fresh"


def inspect_index(
    path: str, scope: str | None, log_fd: int, log_size: int, log_lines: int
) -> IndexState:
    """The index file's state against the log, for ``memlib doctor``."""
    try:
        data = _read_file(path)
    except RemoteMemoryError as exc:
        return IndexState("invalid", reason=str(exc))
    if data is None:
        return IndexState("absent")
    try:
        header, _ = _parse_header(data)
        _check_log(header, log_fd, log_size, scope)
        covered = int(header["covered_lines"])
    except _Invalid as exc:
        return IndexState("invalid", reason=str(exc))
    except (KeyError, TypeError, ValueError) as exc:
        return IndexState("invalid", reason=f"its header is not valid ({type(exc).__name__})")
    if covered < log_lines:
        return IndexState("stale", covered, f"{log_lines - covered} records behind the log")
    return IndexState("fresh", covered)


def _pack(image: IndexImage, log_fd: int, identity: tuple[int, int]) -> bytes | None:
    blobs: list[bytes] = []
    lengths: dict[str, int] = {}
    for name, code in SECTIONS:
        value = image.sections[name]
        if code == "s":
            if any("\n" in s for s in value):
                return None  # not representable: stay in memory only
            blob = "\n".join(value).encode("utf-8")
        elif code == "B":
            blob = bytes(value)
        else:
            blob = value.tobytes()
        lengths[name] = len(blob)
        blobs.append(blob + b"\0" * (-len(blob) % 8))
    head, tail = _window_hashes(log_fd, image.covered_bytes)
    header = {
        "scope": image.scope,
        "covered_bytes": image.covered_bytes,
        "covered_lines": image.covered_lines,
        "log_crc32": image.log_crc,
        "log_head_sha256": head,
        "log_tail_sha256": tail,
        "log_identity": list(identity),
        "byteorder": sys.byteorder,
        "counters": image.counters,
        "sections": lengths,
    }
    encoded = json.dumps(header, sort_keys=True).encode("utf-8")
    parts = [MAGIC, FORMAT.to_bytes(4, "little"), len(encoded).to_bytes(4, "little"), encoded,
             *blobs]
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    parts.append(digest.digest())
    return b"".join(parts)


def _covers_at_least(path: str, log_fd: int, log_size: int, scope: str, lines: int) -> bool:
    """Whether the file at ``path`` is valid for this log and covers ``lines`` or more."""
    try:
        fd = open_private(path, os.O_RDONLY)
    except (FileNotFoundError, RemoteMemoryError):
        return False
    try:
        data = os.pread(fd, 1 << 16, 0)
        if len(data) < _PREFIX or data[: len(MAGIC)] != MAGIC:
            return False
        size = int.from_bytes(data[len(MAGIC) + 4: _PREFIX], "little")
        if int.from_bytes(data[len(MAGIC): len(MAGIC) + 4], "little") != FORMAT:
            return False
        header = load_json(data[_PREFIX: _PREFIX + size])
        if int(header["covered_lines"]) < lines:
            return False
        # It covers more: only a whole, undamaged file for this very log counts.
        with os.fdopen(fd, "rb", closefd=False) as handle:
            header, _ = _parse_header(handle.read())
        _check_log(header, log_fd, log_size, scope)
        return True
    except (_Invalid, KeyError, TypeError, ValueError, OSError):
        return False
    finally:
        os.close(fd)


def write_index(
    path: str, image: IndexImage, log_fd: int, log_size: int, identity: tuple[int, int]
) -> bool:
    """Write ``image`` to ``path`` atomically (temp, fsync, rename, fsync the folder).

    True when the file at ``path`` now covers the image: written, or already there and
    covering as much or more (a newer file is never replaced by an older one). False,
    changing nothing, when the folder cannot be written (a read-only store still
    recalls).
    """
    data = _pack(image, log_fd, identity)
    if data is None:
        return False
    folder, name = os.path.split(path)
    temp = os.path.join(folder, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = open_private(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except (FileNotFoundError, RemoteMemoryError):
        return False
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        dir_fd = os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            # Writers of index files take turns on the folder, so that one never
            # replaces a file that covers more than its own.
            fcntl.flock(dir_fd, fcntl.LOCK_EX)
            now = os.fstat(log_fd).st_size  # the log as it is now, not as we read it
            if _covers_at_least(path, log_fd, now, image.scope, image.covered_lines):
                return True  # as new as ours or newer: left as it is
            os.rename(temp, path)
            temp = ""
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)  # releases the flock
        return True
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT,
                         errno.EIO, errno.ENOENT):
            return False
        raise
    finally:
        if temp:
            with contextlib.suppress(OSError):
                os.unlink(temp)
