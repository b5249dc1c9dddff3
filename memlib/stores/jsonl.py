"""The JSONL store: the teaching default, one append-only file per user scope (SPEC §2).

Writers serialise on an advisory ``flock`` next to the file. Inside it they bring the
id set up to date, refuse duplicates, and append the whole batch with one ``write`` on
an ``O_APPEND`` descriptor followed by ``fsync``. A line only counts once it ends in
``\\n``: a last line without one is a write whose ``fsync`` never returned, so nobody
was told it succeeded; readers skip it and the next writer cuts it off.

Readers keep what they parsed and, while the file keeps its inode and does not shrink,
read only the bytes appended since — the file is append-only, so that is all that can
have changed.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
from pathlib import Path
from typing import Sequence

from ..errors import (
    RemoteMemoryCorruptionError,
    RemoteMemoryError,
    RemoteMemoryScopeError,
    RemoteMemoryValidationError,
)
from ..records import MemoryKind, StoredMemory
from .base import BaseMemoryStore, Clock

__all__ = ["RemoteMemoryStore", "encode_record"]

FILE_MODE = 0o600
DIR_MODE = 0o700


def encode_record(record: StoredMemory) -> bytes:
    return (
        json.dumps(record.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"
    ).encode("utf-8")


class _Cache:
    """What one reader has parsed so far, and where in which file it stopped."""

    __slots__ = ("identity", "offset", "lines", "records", "kinds", "retracted")

    def __init__(self) -> None:
        self.identity: tuple[int, int] | None = None
        self.offset = 0  # bytes of complete lines consumed
        self.lines = 0
        self.records: list[StoredMemory] = []
        self.kinds: dict[str, MemoryKind] = {}
        self.retracted: set[str] = set()

    def add(self, record: StoredMemory) -> None:
        self.records.append(record)
        self.kinds[record.memory_id] = record.kind
        if record.retracts is not None:
            self.retracted.add(record.retracts)

    # StoreState, for the write rules
    def kind_of(self, memory_id: str) -> MemoryKind | None:
        return self.kinds.get(memory_id)

    def is_retracted(self, memory_id: str) -> bool:
        return memory_id in self.retracted


class RemoteMemoryStore(BaseMemoryStore):
    """``RemoteMemoryStore(path_to_records_jsonl, user_id="alice")``.

    Nothing is created until the first write: opening a store for a path that does
    not exist yet reads as an empty store.
    """

    backend = "jsonl"

    def __init__(self, path: str | os.PathLike[str], *, user_id: str, clock: Clock | None = None):
        super().__init__(user_id=user_id, clock=clock)
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self._cache = _Cache()

    def __repr__(self) -> str:
        return f"RemoteMemoryStore(user_scope={self.user_scope!r})"

    # -- reading --------------------------------------------------------------------

    def _refresh(self) -> _Cache:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._cache = _Cache()
            return self._cache
        except NotADirectoryError:
            raise RemoteMemoryCorruptionError(
                f"cannot open records file {self.path}: a parent is not a folder"
            ) from None
        except PermissionError as exc:
            raise RemoteMemoryError(f"cannot read records file {self.path}: {exc.strerror}") from None
        if not stat.S_ISREG(st.st_mode):
            raise RemoteMemoryCorruptionError(f"records path is not a regular file: {self.path}")
        identity = (st.st_dev, st.st_ino)
        cache = self._cache
        if cache.identity != identity or st.st_size < cache.offset:
            cache = _Cache()
            cache.identity = identity
        if st.st_size > cache.offset:
            self._read_tail(cache, st.st_size)
        self._cache = cache
        return cache

    def _read_tail(self, cache: _Cache, size: int) -> None:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(cache.offset)
                data = handle.read(size - cache.offset)
        except OSError as exc:
            raise RemoteMemoryError(f"cannot read records file {self.path}: {exc.strerror}") from None
        end = data.rfind(b"\n")
        if end < 0:
            return  # only a torn tail so far
        parsed: list[StoredMemory] = []
        seen: set[str] = set()
        line_number = cache.lines
        for raw in data[: end + 1].split(b"\n")[:-1]:
            line_number += 1
            record = self._parse_line(raw, line_number)
            if record.memory_id in cache.kinds or record.memory_id in seen:
                raise RemoteMemoryCorruptionError(
                    f"invalid JSON at line {line_number}: duplicate memory_id {record.memory_id}"
                )
            seen.add(record.memory_id)
            parsed.append(record)
        # Only now, with every new line valid, does the cache move on: a reader that
        # met a bad line raises again next time instead of skipping it.
        for record in parsed:
            cache.add(record)
        cache.lines = line_number
        cache.offset += end + 1

    def _parse_line(self, raw: bytes, line_number: int) -> StoredMemory:
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RemoteMemoryCorruptionError(f"invalid JSON at line {line_number}: {exc}") from None
        try:
            record = StoredMemory.from_dict(data)
        except (RemoteMemoryValidationError, RemoteMemoryCorruptionError) as exc:
            raise RemoteMemoryCorruptionError(f"invalid JSON at line {line_number}: {exc}") from None
        if record.user_scope != self.user_scope:
            raise RemoteMemoryScopeError(f"memory {record.memory_id} belongs to another user scope")
        return record

    def read_all(self) -> tuple[StoredMemory, ...]:
        return tuple(self._refresh().records)

    # -- writing --------------------------------------------------------------------

    def _open(self, path: Path, flags: int) -> int:
        try:
            return os.open(path, flags | os.O_CLOEXEC, FILE_MODE)
        except IsADirectoryError:
            raise RemoteMemoryCorruptionError(f"path is a folder, not a file: {path}") from None
        except OSError as exc:
            raise RemoteMemoryError(f"cannot open {path}: {exc.strerror}") from None

    def _append_batch(self, batch: Sequence[StoredMemory]) -> None:
        payload = b"".join(encode_record(record) for record in batch)
        try:
            self.path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        except OSError as exc:
            raise RemoteMemoryError(f"cannot create folder {self.path.parent}: {exc.strerror}") from None
        lock_fd = self._open(self.lock_path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            fd = self._open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                cache = self._refresh()
                if os.fstat(fd).st_size > cache.offset:
                    # A torn tail from a writer that died before fsync returned.
                    os.ftruncate(fd, cache.offset)
                self.check_batch(batch, cache)
                written = os.write(fd, payload)
                if written != len(payload):
                    # The partial line has no "\n": readers ignore it, the next writer cuts it.
                    raise RemoteMemoryError(
                        f"short write to {self.path}: {written} of {len(payload)} bytes"
                    )
                os.fsync(fd)
                for record in batch:
                    cache.add(record)
                cache.lines += len(batch)
                cache.offset += len(payload)
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    raise RemoteMemoryError(f"no space left to write {self.path}") from None
                raise RemoteMemoryError(f"cannot write {self.path}: {exc.strerror}") from None
            finally:
                os.close(fd)
        finally:
            os.close(lock_fd)  # closing the descriptor releases the flock
