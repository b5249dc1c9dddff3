"""Stored embeddings of a JSONL store: ``records.jsonl.vectors``, derived from the log
(docs/contract.md, "Stored vectors"). A row names its record by doc number and line digest,
so a reader checks a whole file with one gather against its index and scores it as one
float32 matrix, without copying it. Only writers, under the store's lock, change it."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..._safejson import loads as load_json
from ..._vectors import require_numpy
from ...errors import RemoteMemoryError
from .._files import open_private, rename_in, unlink_in, write_all
from ._index import remove_stale_temps, write_temp

MAGIC = b"MEMLIBVE"
FORMAT = 1
_PREFIX = struct.Struct("<8sIIII")  # magic, version, header length, header CRC, row bytes
_BODY_HEAD = struct.Struct("<IQQ")  # zero, doc, digest: the row after its CRC
ROW_HEAD = 24
_HEADER_MAX = 1 << 16
# Rows of headroom a loaded table keeps for the appends that follow, at least.
_SLACK_ROWS = 256


def vectors_path_for(log_path: str) -> str:
    return log_path + ".vectors"


def line_digest(raw: bytes | memoryview) -> int:
    """The digest a row names its record's line by (the line without its newline)."""
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little")


def row_bytes(dimension: int) -> int:
    return (ROW_HEAD + 4 * dimension + 7) & ~7


@dataclass(frozen=True)
class Header:
    scope: str
    model: str
    dimension: int

    @property
    def row_bytes(self) -> int:
        return row_bytes(self.dimension)


class Unreadable(Exception):
    """The file's header cannot be used (the message says why)."""


def encode_header(header: Header) -> bytes:
    text = json.dumps(
        {"scope": header.scope, "model": header.model, "dimension": header.dimension},
        sort_keys=True,
    ).encode("utf-8")
    text += b" " * (-(_PREFIX.size + len(text)) % 8)
    return _PREFIX.pack(MAGIC, FORMAT, len(text), zlib.crc32(text), header.row_bytes) + text


def decode_header(data: bytes, scope: str) -> tuple[Header, int]:
    """``(header, where the rows begin)`` from the file's first bytes, or ``Unreadable``."""
    if len(data) < _PREFIX.size or data[: len(MAGIC)] != MAGIC:
        raise Unreadable("not a memlib vectors file")
    _, version, size, crc, rows = _PREFIX.unpack_from(data)
    if version != FORMAT:
        raise Unreadable(f"format {version}, this memlib reads format {FORMAT}")
    end = _PREFIX.size + size
    if size > _HEADER_MAX or len(data) < end:
        raise Unreadable("its header is cut short")
    text = data[_PREFIX.size : end]
    if zlib.crc32(text) != crc or end % 8:
        raise Unreadable("its header's checksum does not match (damaged)")
    try:
        fields = load_json(text.rstrip(b" "))
    except ValueError:
        raise Unreadable("its header is not valid") from None
    if not isinstance(fields, dict):
        raise Unreadable("its header is not valid")
    model, dimension, owner = fields.get("model"), fields.get("dimension"), fields.get("scope")
    if (
        not isinstance(model, str)
        or not model
        or type(dimension) is not int
        or not 0 < dimension <= 1 << 16
        or not isinstance(owner, str)
    ):
        raise Unreadable("its header is not valid")
    if rows != row_bytes(dimension):
        raise Unreadable("its row size does not match its dimension")
    if owner != scope:
        raise Unreadable("it belongs to another user scope")
    return Header(scope=owner, model=model, dimension=dimension), end


def read_header(fd: int, scope: str) -> tuple[Header, int]:
    """The header of the open vectors file ``fd``, or ``Unreadable``."""
    return decode_header(os.pread(fd, _PREFIX.size + _HEADER_MAX, 0), scope)


def pack_row(doc: int, digest: int, vector: bytes, dimension: int) -> bytes:
    """One row: its CRC-32, the record's doc and line digest, the packed vector."""
    body = _BODY_HEAD.pack(0, doc, digest) + vector
    body += b"\0" * (row_bytes(dimension) - 4 - len(body))
    return zlib.crc32(body).to_bytes(4, "little") + body


def replace_file(
    path: str, parts: Sequence[Any], *, folder_fd: int | None = None
) -> os.stat_result:
    """Write ``parts`` (bytes or buffers) to ``path`` atomically (temporary file, ``fsync``,
    ``rename``, ``fsync`` of the folder); the new file's stat."""
    # Under the store's lock: a temporary file of a writer killed mid-way goes now.
    remove_stale_temps(path.removesuffix(".vectors"), kinds=(".vectors",), folder_fd=folder_fd)
    temp, st = write_temp(path, parts, folder_fd=folder_fd)
    try:
        rename_in(folder_fd, temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            unlink_in(folder_fd, temp)
        raise
    fsync_folder(os.path.dirname(path), folder_fd=folder_fd)
    return st


def fsync_folder(folder: str, *, folder_fd: int | None = None) -> None:
    if folder_fd is not None:
        os.fsync(folder_fd)
        return
    dir_fd = os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


@dataclass(frozen=True)
class Matched:
    """The rows in use against one state of the log's index, in file order: ``rows[i]``
    a row position, ``docs[i]`` its record's doc, ``ids[i]`` its memory_id."""

    rows: Any  # numpy intp
    docs: Any  # numpy intp
    ids: list[str]

    @functools.cached_property
    def positions(self) -> dict[str, int]:
        """``memory_id → i``, built once for every query against this state."""
        return {memory_id: i for i, memory_id in enumerate(self.ids)}


@dataclass(frozen=True)
class VectorFileState:
    """``absent``, ``fresh``, ``stale`` (some rows not in use: ignored, and dropped at the
    next rewrite) or ``unreadable``."""

    status: str
    model: str | None = None
    dimension: int = 0
    rows: int = 0
    used: int = 0
    damaged: int = 0
    torn_bytes: int = 0
    reason: str = ""


class VectorTable:
    """What one reader has read of the vectors file, and which rows it may use."""

    def __init__(self) -> None:
        self.identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the file read
        self.size = 0  # the file's size when last read
        self.mtime_ns = 0
        self.present = False
        self.header: Header | None = None
        self.problem = ""  # why a present file's header cannot be used
        self.start = 0  # where the rows begin
        self.count = 0  # whole rows read
        self.torn = 0  # bytes after the last whole row
        self.buf: Any = None  # numpy uint8: the file's bytes, with room to grow
        self.ok: Any = None  # numpy bool per row: its checksum matches
        self._matched: Matched | None = None
        self._matched_key: tuple[Any, ...] | None = None

    @classmethod
    def load(
        cls, path: str, scope: str, known: VectorTable, *, folder_fd: int | None
    ) -> VectorTable:
        """The file at ``path`` as it is now: ``known`` while it still holds, read on from
        where ``known`` stopped when it grew (appends are all that happen in place)."""
        try:
            fd = open_private(path, os.O_RDONLY, folder_fd=folder_fd)
        except FileNotFoundError:
            return cls()
        try:
            st = os.fstat(fd)
            identity = (st.st_dev, st.st_ino)
            if known.present and known.identity == identity:
                if st.st_size == known.size and st.st_mtime_ns == known.mtime_ns:
                    return known
                end = known.start + known.count * known.row_size
                if known.header is not None and st.st_size > known.size >= end:
                    known._read_tail(fd, st)
                    return known
            table = cls()
            table._read_whole(fd, st, scope)
            return table
        except OSError as exc:
            raise RemoteMemoryError(f"cannot read vectors file {path}: {exc.strerror}") from None
        finally:
            os.close(fd)

    @property
    def row_size(self) -> int:
        return self.header.row_bytes if self.header is not None else 8

    def _read_whole(self, fd: int, st: os.stat_result, scope: str) -> None:
        self.identity, self.present = (st.st_dev, st.st_ino), True
        self.size, self.mtime_ns = st.st_size, st.st_mtime_ns
        try:
            self.header, self.start = read_header(fd, scope)
        except Unreadable as exc:
            self.problem = str(exc)
            return
        np = require_numpy()
        size = st.st_size
        self.buf = np.empty(size + _SLACK_ROWS * self.row_size, dtype=np.uint8)
        got = _read_into(fd, memoryview(self.buf)[:size], 0)  # the one read
        self.ok = np.zeros(0, dtype=bool)
        self._take_rows(max(0, got - self.start) // self.row_size, got)

    def _read_tail(self, fd: int, st: os.stat_result) -> None:
        np = require_numpy()
        end = self.start + self.count * self.row_size
        size = st.st_size
        if self.buf is None or len(self.buf) < size or not self.buf.flags.writeable:
            grown = np.empty(size + max(size // 4, _SLACK_ROWS * self.row_size), np.uint8)
            if self.buf is not None:
                grown[:end] = self.buf[:end]
            self.buf = grown
        got = _read_into(fd, memoryview(self.buf)[end:size], end)
        self.size, self.mtime_ns = st.st_size, st.st_mtime_ns
        self._take_rows(self.count + (got // self.row_size), end + got)

    def _take_rows(self, count: int, read: int) -> None:
        """Rows up to ``count`` are read: check each one's CRC-32."""
        np = require_numpy()
        rb = self.row_size
        view = memoryview(self.buf)
        checks = [
            zlib.crc32(view[at + 4 : at + rb]) == int.from_bytes(view[at : at + 4], "little")
            for at in range(self.start + self.count * rb, self.start + count * rb, rb)
        ]
        self.ok = np.concatenate([self.ok, np.array(checks, dtype=bool)])
        self.count = count
        self.torn = max(0, read - self.start - count * rb)
        self._matched = self._matched_key = None

    def _rows(self, dtype: str) -> Any:
        """The rows as a ``(count, row bytes / item size)`` view of ``dtype`` (no copy)."""
        rows = self.buf[self.start : self.start + self.count * self.row_size].view(dtype)
        return rows.reshape(self.count, self.row_size // rows.itemsize)

    def matrix(self) -> Any:
        """The vectors as a ``(count, dimension)`` float32 view over the rows (no copy)."""
        assert self.header is not None
        return self._rows("<f4")[:, ROW_HEAD // 4 : ROW_HEAD // 4 + self.header.dimension]

    def matched(
        self, key: tuple[Any, ...], digests: Any, kinds: Any, live: Any, ids: Sequence[str]
    ) -> Matched:
        """The rows in use against the log's index (``digests``, ``kinds``, ``live`` per
        doc); cached under ``key`` until the index or the table changes."""
        if self._matched is not None and self._matched_key == key:
            return self._matched
        np = require_numpy()
        n = len(kinds)
        empty = np.zeros(0, dtype=np.intp)
        if self.header is None or not self.count:
            matched = Matched(empty, empty, [])
        else:
            # Views of the log's arrays, only for the gathers below (which copy): they
            # are dropped before returning, so the arrays can grow with the next append.
            line_digests = np.frombuffer(digests, dtype=np.uint64)
            kind_codes = np.frombuffer(kinds, dtype=np.uint8)
            live_flags = np.frombuffer(live, dtype=np.uint8)
            try:
                words = self._rows("<u8")
                docs_column = words[:, 1]
                rows = np.flatnonzero(self.ok & (docs_column < n))
                docs = docs_column[rows].astype(np.intp)
                same = (line_digests[docs] == words[rows, 2]) & (kind_codes[docs] == 0)
                rows, docs = rows[same], docs[same]
                if len(docs) and int(np.bincount(docs).max()) > 1:
                    # A replaced vector: the last row of a record is its vector.
                    _, first_from_end = np.unique(docs[::-1], return_index=True)
                    keep = np.sort(len(docs) - 1 - first_from_end)
                    rows, docs = rows[keep], docs[keep]
                searched = live_flags[docs] == 1
            finally:
                del line_digests, kind_codes, live_flags
            rows, docs = rows[searched], docs[searched]
            matched = Matched(rows, docs, [ids[d] for d in docs.tolist()])
        self._matched, self._matched_key = matched, key
        return matched

    def scores(self, matched: Matched, vector: Any) -> Any:
        """``vector``'s dot product with every row in use, in ``matched`` order."""
        # Rows not in use (damaged, of a log since changed) may hold any bits, NaN
        # included: their products are computed and dropped, never warned about.
        with require_numpy().errstate(all="ignore"):
            scores = self.matrix() @ vector
        if len(matched.rows) != self.count:
            scores = scores[matched.rows]
        return scores

    def state(self, matched: Matched | None) -> VectorFileState:
        if not self.present:
            return VectorFileState("absent")
        if self.header is None:
            return VectorFileState("unreadable", reason=self.problem)
        used = 0 if matched is None else len(matched.rows)
        damaged = int(self.count - int(self.ok.sum())) if self.count else 0
        status = "fresh" if used == self.count and not self.torn else "stale"
        model, dimension = self.header.model, self.header.dimension
        return VectorFileState(status, model, dimension, self.count, used, damaged, self.torn)

    def rewrite(
        self, path: str, rows: Any, extra: Sequence[bytes] = (), *, folder_fd: int | None = None
    ) -> None:
        """Replace ``path`` by this table's header, its rows at ``rows`` (increasing, all
        with a matching checksum) and the ``extra`` rows; this table then describes it.
        Written from memory run by run and compacted in place (a ``memmove`` per run), so
        a retraction in a big file costs one write of it."""
        assert self.header is not None
        np = require_numpy()
        rb = self.row_size
        head = encode_header(self.header)
        rows = np.asarray(rows, dtype=np.intp)
        runs: list[tuple[int, int]] = []
        if len(rows):
            breaks = np.flatnonzero(np.diff(rows) != 1) + 1
            firsts = rows[np.concatenate(([0], breaks))].tolist()
            ends = (rows[np.concatenate((breaks - 1, [len(rows) - 1]))] + 1).tolist()
            runs = list(zip(firsts, ends, strict=True))
        view = memoryview(self.buf)
        parts = [head, *(view[self.start + a * rb : self.start + b * rb] for a, b in runs), *extra]
        st = replace_file(path, parts, folder_fd=folder_fd)
        del view, parts
        count = len(rows) + len(extra)
        total = len(head) + count * rb
        target = self.buf
        if len(head) > self.start or len(self.buf) < total:
            # (A header longer than the one read, or no room for the extra rows.)
            target = np.empty(total + _SLACK_ROWS * rb, dtype=np.uint8)
        at = len(head)
        for a, b in runs:  # in place, every run moves towards the start: a memmove
            target[at : at + (b - a) * rb] = self.buf[self.start + a * rb : self.start + b * rb]
            at += (b - a) * rb
        self.buf = target
        self.buf[: len(head)] = np.frombuffer(head, dtype=np.uint8)
        for part in extra:
            self.buf[at : at + rb] = np.frombuffer(part, dtype=np.uint8)
            at += rb
        self.identity, self.size, self.mtime_ns = (st.st_dev, st.st_ino), st.st_size, st.st_mtime_ns
        self.start, self.count, self.torn = len(head), count, 0
        self.ok = np.ones(count, dtype=bool)
        self._matched = self._matched_key = None


def _read_into(fd: int, view: memoryview, offset: int) -> int:
    got = 0
    while got < len(view):
        n = os.preadv(fd, [view[got:]], offset + got)
        if n <= 0:
            break
        got += n
    return got


def append_rows(fd: int, header_end: int, row_size: int, rows: Sequence[bytes]) -> None:
    """Append whole rows to the open (``O_APPEND``) vectors file, after cutting a torn
    last row; on failure the file is cut back to where it was."""
    size = os.fstat(fd).st_size
    whole = header_end + max(0, size - header_end) // row_size * row_size
    if size != whole:
        os.ftruncate(fd, whole)
    try:
        write_all(fd, b"".join(rows))
    except BaseException:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, whole)
        raise
