"""The JSONL store: the teaching default, one append-only file per user scope
(docs/reference.md "Stores").

Writers append a whole batch under a ``flock`` with one ``write`` and an ``fsync``; a last
line without ``\\n`` was never acknowledged, so readers skip it and the next writer cuts it.
A reader keeps an index (ids, postings, each line's offset) and the vectors (``_vectors``),
and parses a record again from its line when a recall needs it (docs/contract.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import threading
import zlib
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import partial
from itertools import compress, islice
from operator import le
from pathlib import Path
from typing import Any

from ..._capabilities import ScoreBound
from ..._retrieval import InvertedIndex, lexical_from_index, micros_of, scan_from_index
from ..._retrieval._prefix import index_prefix
from ..._safejson import loads as load_json
from ..._vectors import (
    DenseScores,
    Embedder,
    NumpyMissing,
    VectorState,
    check_model,
    check_previous,
    check_sizes,
    reads_pairs,
    require_numpy,
)
from ...candidates import CandidateScan, LexicalPostings
from ...errors import (
    RemoteMemoryCorruptionError,
    RemoteMemoryError,
    RemoteMemoryScopeError,
    RemoteMemoryValidationError,
)
from ...normalize import RecallQuery
from ...records import MemoryKind, StoredMemory, parse_timestamp, record_json
from .._base import Clock, IndexedMemoryStore, MemoryStore, latest_profile_of, make_private_folders
from .._files import (
    DIR_MODE,
    failure,
    name_in,
    open_folder,
    open_private,
    refuse_unsafe,
    unlink_in,
    write_all,
)
from .._known_at import KnownAtVectorStore
from .._sources import SourceNeighbours
from ._index import (
    IndexDamagedError,
    IndexImage,
    LogChangedError,
    crc_of_prefix,
    index_path_for,
    log_window,
    read_index,
    write_index,
)
from ._vectors import (
    Header,
    Matched,
    Unreadable,
    VectorFileState,
    VectorTable,
    append_rows,
    encode_header,
    fsync_folder,
    line_digest,
    pack_row,
    read_header,
    replace_file,
    vectors_path_for,
)

# The lock file holds this note while a multi-record batch is being written.
_PENDING = b"pending "
_NOT_CONVERSATION = re.compile(rb"[^\x00]")
_PROJECT_FILE = re.compile(r"[0-9a-f]{16}\.jsonl")


def projects_folder(log: Path) -> Path:
    return log.with_name(log.name + ".projects")


def project_path(log: Path, project: str) -> Path:
    """``PATH.projects/HEX.jsonl``, HEX from the SHA-256 of the name: a safe file name."""
    digest = hashlib.sha256(project.encode("utf-8")).hexdigest()[:16]
    return projects_folder(log) / f"{digest}.jsonl"


def pending_batch_offset(lock_fd: int) -> int | None:
    """Where an unacknowledged multi-record batch begins, as the open lock file notes it."""
    data = os.pread(lock_fd, 64, 0)
    if not data.startswith(_PENDING):
        return None
    try:
        return int(data[len(_PENDING) :].split()[0])
    except (ValueError, IndexError):
        return None


def note_pending(lock_fd: int, offset: int | None) -> None:
    """Note (None: clear) where a multi-record batch begins. Durable before the batch's
    first byte and until its fsync returned, so that neither a crash nor a power cut can
    leave part of the batch looking written."""
    os.ftruncate(lock_fd, 0)
    if offset is not None:
        os.pwrite(lock_fd, _PENDING + str(offset).encode() + b"\n", 0)
    os.fsync(lock_fd)


def _stamp_of(st: os.stat_result) -> tuple[int, int, int]:
    # ctime is the one a user cannot set back (touch, cp -p and utime set the mtime).
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns


def encode_record(record: StoredMemory) -> bytes:
    return (record_json(record) + "\n").encode("utf-8")


class _Cache:
    """What one reader has parsed so far, and where in which file it stopped."""

    # Records parsed for recalls are kept for the next one, up to this many (then the
    # cache starts over): a million-record file does not grow a copy of itself.
    PARSED_MAX = 50_000

    def __init__(self) -> None:
        self.identity: tuple[int, int] | None = None
        self.offset = 0  # bytes of complete lines consumed
        self.lines = 0
        self.index = InvertedIndex()  # ids, kinds, retractions, postings
        self.starts = array("Q")  # byte offset of each record's line
        self.digests = array("Q")  # each record's line digest (what a vector row names)
        self.stored = array("q")  # each record's stored_at in whole microseconds
        # How many of ``stored`` are known never to decrease, and whether all so far do.
        self._in_order = (0, True)
        self.records: list[StoredMemory] | None = None  # only once read_all() is asked
        self.extras: list[StoredMemory] = []  # profiles and retractions, in order
        self.parsed: dict[int, StoredMemory] = {}  # doc → record, see PARSED_MAX
        self.crc = 0  # CRC-32 of the bytes consumed (the index file names it)
        self.covered = 0  # lines the index file on disk covers (as far as we know)
        # The log's (size, mtime, ctime) when this cache last made sure of it, and
        # ``log_window`` then: see ``_still_the_log``.
        self.stamp: tuple[int, int, int] | None = None
        self.window: tuple[int, int, int] | None = None
        # A read descriptor on the log, open as long as the cache: its inode cannot be
        # given to another file meanwhile (docs/contract.md, "A warm reader").
        self.held: int | None = None

    def __del__(self) -> None:
        if self.held is not None:
            with contextlib.suppress(OSError):
                os.close(self.held)

    def add_many(
        self, records: Sequence[StoredMemory], sizes: Iterable[int], digests: Iterable[int]
    ) -> None:
        """Take ``records``, whose lines of ``sizes`` bytes (newline included) follow."""
        self.index.add_many(records)
        self.digests.extend(digests)
        self.stored.extend(micros_of(parse_timestamp(r.stored_at)) for r in records)
        start = self.offset
        for size in sizes:
            self.starts.append(start)
            start += size
        self.extras.extend(r for r in records if r.kind is not MemoryKind.CONVERSATION)
        if self.records is not None:
            self.records.extend(records)
        self.lines += len(records)
        self.offset = start

    def stored_in_order(self) -> bool:
        """Whether ``stored_at`` never decreases in log order (each record checked once)."""
        checked, ordered = self._in_order
        stored = self.stored
        if ordered and checked < len(stored):
            start = max(checked - 1, 0)
            ordered = all(map(le, islice(stored, start, None), islice(stored, start + 1, None)))
            self._in_order = (len(stored), ordered)
        return ordered

    def line_span(self, doc: int) -> tuple[int, int]:
        end = self.starts[doc + 1] if doc + 1 < len(self.starts) else self.offset
        return self.starts[doc], end


class RemoteMemoryStore(IndexedMemoryStore):
    """``RemoteMemoryStore(path_to_records_jsonl, user_id="alice")``; nothing is created
    until the first write (a path that does not exist yet reads as an empty store)."""

    backend = "jsonl"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        user_id: str,
        clock: Clock | None = None,
        embedder: Embedder | None = None,
        project: str | None = None,
    ):
        super().__init__(user_id=user_id, clock=clock, embedder=embedder, project=project)
        self._log = Path(path)  # the user's log; a project's is a file of PATH.projects/
        self.path = self._log if self.project is None else project_path(self._log, self.project)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        # The strings the system calls take (a Path converts itself on every call).
        self._path = os.fspath(self.path)
        self._lock_path = os.fspath(self.lock_path)
        self._folder = os.path.dirname(self._path)
        self._vectors_path = vectors_path_for(self._path)
        self._cache = _Cache()
        self._vectors = VectorTable()
        # The store folder while an operation has it open, per thread: a descriptor
        # another thread closed and the kernel handed out again would be some other file.
        self._operation = threading.local()

    def __repr__(self) -> str:
        project = "" if self.project is None else f", project={self.project!r}"
        return f"RemoteMemoryStore(user_scope={self.user_scope!r}{project})"

    def in_project(self, project: str | None) -> RemoteMemoryStore:
        return RemoteMemoryStore(
            self._log,
            user_id=self._user_id,
            clock=self._clock,
            embedder=self.embedder,
            project=project,
        )

    def projects(self) -> tuple[str | None, ...]:
        """This user's projects: the log's own (None) and each file of ``PATH.projects/``
        named for its project, which its first record names (read without a lock)."""
        folder = projects_folder(self._log)
        try:
            names = sorted(n for n in os.listdir(folder) if _PROJECT_FILE.fullmatch(n))
        except FileNotFoundError:
            names = []
        found = []
        for name in names:
            first = RemoteMemoryStore(folder / name, user_id=self._user_id)._first_record()
            if first is None:
                continue  # no complete line yet
            if first.project is None or project_path(self._log, first.project).name != name:
                raise RemoteMemoryScopeError(f"memory {first.memory_id} belongs to another project")
            found.append(first.project)
        return (None, *sorted(found))

    def _first_record(self) -> StoredMemory | None:
        """The log's first complete record, read alone, unchecked for its owner."""
        with self._in_folder() as folder_fd:
            if folder_fd is None:
                return None
            try:
                fd = self._open_in(self._path, os.O_RDONLY)
            except FileNotFoundError:
                return None
            try:
                head = b""
                while b"\n" not in head and (chunk := os.pread(fd, 1 << 16, len(head))):
                    head += chunk
            finally:
                os.close(fd)
        line, newline, _ = head.partition(b"\n")
        if not newline:
            return None
        try:
            return StoredMemory.from_dict(load_json(line))
        except (ValueError, RemoteMemoryError) as exc:
            raise RemoteMemoryCorruptionError(
                f"invalid JSON at line 1 of {self.path}: {exc}"
            ) from None

    @classmethod
    def for_scope(
        cls, path: str | os.PathLike[str], user_scope: str, project: str | None = None
    ) -> RemoteMemoryStore:
        """A store of the scope ``user_scope`` (16 hex digits) reading ``path`` as the log
        of ``project``, for ``memlib doctor``."""
        if len(user_scope) != 16 or any(c not in "0123456789abcdef" for c in user_scope):
            raise RemoteMemoryValidationError(f"user_scope must be 16 hex digits: {user_scope!r}")
        store = cls(path, user_id=user_scope)
        store._user_scope, store.project = user_scope, project
        return store

    def _refresh(self, st: os.stat_result | None = None, *, index_file: bool = True) -> _Cache:
        """The cache, brought up to date with the file (``st``: its stat, if known;
        ``index_file=False``: a new cache is read from the log alone)."""
        with self._in_folder():
            opened = st is not None  # a writer's fstat: open_private checked file and folder
            try:
                if st is None:
                    # lstat: a link planted at the records path is refused below, not followed.
                    st = self._lstat(self._path)
            except FileNotFoundError:
                self._cache = _Cache()
                return self._cache
            except NotADirectoryError:
                raise RemoteMemoryCorruptionError(
                    f"cannot open records file {self.path}: a parent is not a folder"
                ) from None
            except PermissionError as exc:
                raise RemoteMemoryError(
                    f"cannot read records file {self.path}: {exc.strerror}"
                ) from None
            refuse_unsafe(self.path, st)
            identity = (st.st_dev, st.st_ino)
            cache = self._cache
            if (
                cache.identity == identity
                and st.st_size >= cache.offset
                and (cache.stamp != _stamp_of(st) and not self._still_the_log(cache, st))
            ):
                cache = self._cache = _Cache()  # not the bytes it was read from: read again
            size = st.st_size
            if size > cache.offset or cache.identity != identity:
                # Bytes past the start of a batch still being written (or whose writer
                # died) are not records yet: the batch is all or nothing.
                pending = self._pending_batch()
                if pending is not None:
                    size = min(size, pending)
            if cache.identity != identity or size < cache.offset:
                cache = _Cache()
                cache.identity = identity
                if index_file:
                    self._load_index_file(cache, size)
            if size > cache.offset:
                self._read_tail(cache, size)
            self._note_stamp(cache, st)
            self._cache = cache
            # Never on a writer's path (a durable append stays as fast).
            behind = cache.lines - cache.covered
            enough = behind * 10 >= cache.lines or behind >= self.INDEX_WRITE_ALWAYS
            if not opened and behind >= self.INDEX_WRITE_MIN and enough:
                self.write_index_file(cache)
            return cache

    def _still_the_log(self, cache: _Cache, st: os.stat_result) -> bool:
        """Whether the log, changed since ``cache`` last made sure of it, still begins with
        the bytes ``cache`` was read from: its two windows, and every byte read when the
        log did not grow (no append explains the change then; docs/contract.md)."""
        if cache.held is None or cache.window is None or cache.stamp is None:
            return False  # never made sure of: read again
        fd = cache.held
        try:
            if log_window(fd, cache.window[0]) != cache.window:
                return False
            return st.st_size > cache.stamp[0] or crc_of_prefix(fd, cache.offset) == cache.crc
        except OSError:
            return False

    def _note_stamp(self, cache: _Cache, st: os.stat_result) -> None:
        """Remember the log's stamp as of ``st`` (taken before the reads that brought
        ``cache`` up to date, so that any later change moves it) and its window."""
        stamp = _stamp_of(st)
        if cache.stamp == stamp:
            return
        cache.stamp = cache.window = None
        try:
            if cache.held is None:
                cache.held = self._open_cached(cache)
            cache.window = log_window(cache.held, cache.offset)
        except (OSError, RemoteMemoryError):
            return  # looked at again, and read again, next time
        cache.stamp = stamp

    # A reader writes the index file once it has caught up this many records beyond
    # what the file covers, and at least a tenth of the log (or INDEX_WRITE_ALWAYS).
    INDEX_WRITE_MIN = 1_000
    INDEX_WRITE_ALWAYS = 10_000

    @property
    def index_path(self) -> Path:
        """The index file beside the log (``records.jsonl.index``)."""
        return Path(index_path_for(self._path))

    def _load_index_file(self, cache: _Cache, size: int) -> None:
        """Fill the new ``cache`` from the index file if it provably covers a prefix of the log."""
        if size <= 0:
            return
        try:
            fd = self._open_cached(cache)
        except RemoteMemoryError:
            return  # the reads that follow word the error
        try:
            image, _ = read_index(
                index_path_for(self._path), self._key, fd, size, folder_fd=self._dir_fd
            )
        finally:
            os.close(fd)
        if image is None:
            return
        try:
            cache.index = InvertedIndex.from_packed(image.counters, image.sections)
        except (KeyError, ValueError):
            return
        cache.offset, cache.crc = image.covered_bytes, image.log_crc
        cache.lines = cache.covered = image.covered_lines
        cache.starts, cache.digests = image.sections["starts"], image.sections["digests"]
        cache.stored = image.sections["stored"]
        # Profiles and retractions (kind ≠ 0), found at C speed among 100k+ kinds.
        others = [m.start() for m in _NOT_CONVERSATION.finditer(cache.index.kinds)]
        cache.extras = self._read_docs(cache, others)

    def write_index_file(self, cache: _Cache | None = None) -> bool:
        """Persist the index of the log as read so far; True if the file covers it now
        (``write_index``). Whatever happens, this reader does not try again until it has
        caught up another ``INDEX_WRITE_MIN`` records."""
        if cache is None:
            cache = self._refresh()
        if cache.identity is None or not cache.lines:
            return False
        try:
            counters, sections = cache.index.packed()
        except IndexDamagedError:
            cache = self._rebuild()
            counters, sections = cache.index.packed()
        if cache.identity is None:
            return False
        cache.covered = cache.lines
        sections.update(starts=cache.starts, digests=cache.digests, stored=cache.stored)
        image = IndexImage(self._key, cache.offset, cache.lines, cache.crc, counters, sections)
        try:
            fd = self._open_cached(cache)
        except RemoteMemoryError:
            return False
        path = index_path_for(self._path)
        try:
            return write_index(path, image, fd, cache.identity, folder_fd=self._dir_fd)
        except (OSError, RemoteMemoryError):
            return False  # a derived file: failing to write it costs time, not answers
        finally:
            os.close(fd)

    def _pending_batch(self) -> int | None:
        """Where an unacknowledged multi-record batch begins, as its writer noted it."""
        try:
            fd = self._open_in(self._lock_path, os.O_RDONLY)
        except (FileNotFoundError, RemoteMemoryError):
            # No lock file, or one that is a link, a FIFO or somebody else's: no note of
            # ours. Readers take no lock, so they read on; the next writer refuses it.
            return None
        try:
            return pending_batch_offset(fd)
        finally:
            os.close(fd)

    # Bytes read and parsed per step: a big file is indexed chunk by chunk, so what a
    # reader holds is the index, never every parsed record at once.
    READ_CHUNK = 4 << 20

    def _open_cached(self, cache: _Cache) -> int:
        """A read descriptor on the very file ``cache`` describes, or corruption."""
        try:
            fd = self._open_in(self._path, os.O_RDONLY)
        except FileNotFoundError:
            raise RemoteMemoryCorruptionError(
                f"records file {self.path} was removed while it was being read"
            ) from None
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != cache.identity or st.st_size < cache.offset:
            os.close(fd)
            raise RemoteMemoryCorruptionError(
                f"records file {self.path} was replaced while it was being read"
            )
        return fd

    def _read_tail(self, cache: _Cache, size: int) -> None:
        fd = self._open_cached(cache)
        try:
            while cache.offset < size:
                data = os.pread(fd, min(self.READ_CHUNK, size - cache.offset), cache.offset)
                end = data.rfind(b"\n")
                if end < 0 and data and cache.offset + len(data) < size:
                    # One line longer than a chunk: read on until its end.
                    at = cache.offset + len(data)
                    data += os.pread(fd, size - at, at)
                    end = data.rfind(b"\n")
                if end < 0:
                    return  # only a torn tail so far
                self._take_lines(cache, data[: end + 1])
        except OSError as exc:
            raise RemoteMemoryError(
                f"cannot read records file {self.path}: {exc.strerror}"
            ) from None
        finally:
            os.close(fd)

    def _take_lines(self, cache: _Cache, data: bytes) -> None:
        parsed: list[StoredMemory] = []
        seen: set[str] = set()
        known = cache.index.doc_of
        line_number = cache.lines
        raws = data.split(b"\n")[:-1]
        for raw in raws:
            line_number += 1
            record = self._parse_line(raw, line_number)
            if record.memory_id in known or record.memory_id in seen:
                raise RemoteMemoryCorruptionError(
                    f"invalid JSON at line {line_number}: duplicate memory_id {record.memory_id}"
                )
            seen.add(record.memory_id)
            parsed.append(record)
        # Only now, with every new line valid, does the cache move on: a reader that
        # met a bad line raises again next time instead of skipping it.
        cache.crc = zlib.crc32(data, cache.crc)
        cache.add_many(parsed, [len(raw) + 1 for raw in raws], map(line_digest, raws))

    def _parse_line(self, raw: bytes, line_number: int) -> StoredMemory:
        try:
            data = load_json(raw)
        except ValueError as exc:  # invalid UTF-8 or JSON, or past safejson's limits
            raise RemoteMemoryCorruptionError(
                f"invalid JSON at line {line_number}: {exc}"
            ) from None
        try:
            record = StoredMemory.from_dict(data)
        except (RemoteMemoryValidationError, RemoteMemoryCorruptionError) as exc:
            raise RemoteMemoryCorruptionError(
                f"invalid JSON at line {line_number}: {exc}"
            ) from None
        return self._check_owner(record)

    def read_all(self) -> tuple[StoredMemory, ...]:
        cache = self._refresh()
        if cache.records is None:
            cache.records = self._load_docs(cache, range(len(cache.starts)))
        return tuple(cache.records)

    def _load_docs(self, cache: _Cache, docs: Sequence[int]) -> list[StoredMemory]:
        """Parse the records of ``docs`` again from their lines (already validated once)."""
        if cache.records is not None:
            return [cache.records[d] for d in docs]
        if len(docs) > cache.PARSED_MAX:
            return self._read_docs(cache, docs)  # too many to keep: read, keep nothing
        parsed = cache.parsed
        missing = [d for d in docs if d not in parsed]
        if missing:
            if len(parsed) + len(missing) > cache.PARSED_MAX:
                parsed.clear()
                missing = list(dict.fromkeys(docs))
            parsed.update(zip(missing, self._read_docs(cache, missing), strict=True))
        return [parsed[d] for d in docs]

    def _read_docs(self, cache: _Cache, docs: Sequence[int]) -> list[StoredMemory]:
        fd = self._open_cached(cache)
        try:
            docs = list(docs)
            if len(docs) > 64 and docs == list(range(docs[0], docs[-1] + 1)):
                first, _ = cache.line_span(docs[0])
                _, last = cache.line_span(docs[-1])
                raws = os.pread(fd, last - first, first).split(b"\n")[:-1]
            else:
                spans = map(cache.line_span, docs)
                raws = [os.pread(fd, end - start - 1, start) for start, end in spans]
        finally:
            os.close(fd)
        digests = cache.digests
        if list(map(line_digest, raws)) != [digests[doc] for doc in docs]:
            # The log was rewritten under this reader in a way its checks did not see
            # (docs/contract.md): never answer from an index of other lines.
            if self._cache is cache:
                self._cache = _Cache()
            raise LogChangedError(
                f"records file {self.path} changed under its index (a line is not the one "
                "indexed); it is read again on the next call"
            )
        return [self._parse_line(raw, doc + 1) for doc, raw in zip(docs, raws, strict=True)]

    def records(self, kind: MemoryKind | str | None = None) -> tuple[StoredMemory, ...]:
        if kind is not None and MemoryKind(kind) is not MemoryKind.CONVERSATION:
            wanted = MemoryKind(kind)
            return tuple(r for r in self._refresh().extras if r.kind is wanted)
        return super().records(kind)

    def latest_profile(self) -> StoredMemory | None:
        # Profiles and retractions are kept as records: that is all the rule looks at.
        return latest_profile_of(self._refresh().extras)

    def _with_terms(self, terms: Sequence[str]) -> _Cache:
        """The cache with ``terms``' posting lists read (and checked) now."""
        cache = self._refresh()
        try:
            cache.index.load_terms(terms)
        except IndexDamagedError:
            cache = self._rebuild()
        return cache

    def _rebuild(self) -> _Cache:
        """The cache read again from the log alone (a part of the index file proved damaged)."""
        self._cache = _Cache()
        return self._refresh(index_file=False)

    def _scan(self, query: RecallQuery, *, top: ScoreBound | None) -> CandidateScan:
        cache = self._with_terms(query.terms)
        cache.index.check_scope(query, self.user_scope)
        try:
            return scan_from_index(cache.index, query, partial(self._load_docs, cache), top=top)
        except LogChangedError:
            cache = self._rebuild()
            cache.index.load_terms(query.terms)
            return scan_from_index(cache.index, query, partial(self._load_docs, cache), top=top)

    def lexical_postings(self, query: RecallQuery, terms: Sequence[str]) -> LexicalPostings:
        """``LexicalScanning``: the index's postings with tf; only the hits get parsed."""
        cache = self._with_terms(query.terms)
        cache.index.check_scope(query, self.user_scope)
        return lexical_from_index(cache.index, query, terms, partial(self._load_docs, cache))

    def existing_ids(self, memory_ids: Sequence[str]) -> set[str]:
        known = self._refresh().index.doc_of
        return {memory_id for memory_id in memory_ids if memory_id in known}

    def source_neighbours(self, memory_ids: Sequence[str]) -> dict[str, SourceNeighbours]:
        """``SourceOrdering`` from the index: a few array reads, no record parsed."""
        cache = self._refresh()
        try:
            found = cache.index.neighbours(memory_ids)
        except IndexDamagedError:
            found = self._rebuild().index.neighbours(memory_ids)
        return {memory_id: SourceNeighbours(*pair) for memory_id, pair in found.items()}

    def known_at_view(self, known_at: datetime) -> JsonlKnownAt | None:
        """The store as it stood at ``known_at``: the log's prefix stored by then, cut from
        this reader's index (None when a record's ``stored_at`` goes back in log order:
        that set is no prefix, and ``store_known_at`` reads every record instead)."""
        cache = self._refresh()
        if not cache.stored_in_order():
            return None
        return JsonlKnownAt(self, known_at, cache)

    @property
    def index(self) -> InvertedIndex:
        """The inverted index, up to date with the file (for teaching and tests)."""
        return self._refresh().index

    @property
    def vectors_path(self) -> Path:
        """The vectors file beside the log (``records.jsonl.vectors``)."""
        return Path(self._vectors_path)

    def _vector_table(self) -> VectorTable:
        """The vectors file as it is now (what this store read of it is kept)."""
        self._vectors = VectorTable.load(
            self._vectors_path, self._key, self._vectors, folder_fd=self._dir_fd
        )
        return self._vectors

    @staticmethod
    def _matched(cache: _Cache, table: VectorTable) -> Matched:
        index = cache.index
        # Live flags change only by retraction: lines and retractions name the index.
        key = (cache, cache.lines, len(index.retracted))
        return table.matched(key, cache.digests, index.kinds, index.live, index.ids)

    def vector_state(self) -> VectorState:
        """``VectorStoring``: the model of the vectors file, rows in use, records without."""
        cache = self._refresh()
        searched = cache.index.searched
        table = self._vector_table()
        if table.header is None:
            return VectorState(None, 0, 0, searched)
        stored = len(self._matched(cache, table).rows)
        return VectorState(table.header.model, table.header.dimension, stored, searched - stored)

    def dense_scores(
        self, query: RecallQuery, vector: Any, *, model: str, dimension: int
    ) -> DenseScores:
        """``VectorStoring``: ``vector``'s dot product with every searched record's vector
        (warm, one product over the rows held in memory; cold, one read of the file)."""
        cache = self._refresh()
        cache.index.check_scope(query, self.user_scope)
        np = require_numpy()
        table = self._vector_table()
        searched = cache.index.searched
        if table.header is None:
            return DenseScores((), np.zeros(0, dtype=np.float32), searched)
        check_model(table.header.model, table.header.dimension, model, dimension)
        query_vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query_vector.shape[0] != dimension:
            raise RemoteMemoryValidationError(
                f"the query vector has {query_vector.shape[0]} dimensions, not {dimension}"
            )
        matched = self._matched(cache, table)
        matrix, rows = table.matrix(), matched.rows
        return DenseScores(
            matched.ids,
            table.scores(matched, query_vector),
            searched - len(matched.rows),
            vector_of=lambda i: matrix[rows[i]],
            positions=matched.positions,
        )

    def records_without_vectors(self, limit: int) -> tuple[StoredMemory, ...]:
        """``VectorStoring``: searched conversation records with no row in use, in log order."""
        cache = self._refresh()
        if limit <= 0:
            return ()
        live = cache.index.live  # 1: a searched conversation record
        table = self._vector_table()
        if table.header is None:
            docs = list(islice(compress(range(len(live)), live), limit))
        else:
            np = require_numpy()
            wanted = np.frombuffer(live, dtype=np.uint8) == 1  # a copy: live may grow
            wanted[self._matched(cache, table).docs] = False
            docs = np.flatnonzero(wanted)[:limit].tolist()
        return tuple(self._load_docs(cache, docs))

    def records_by_id(self, memory_ids: Sequence[str]) -> list[StoredMemory]:
        """``VectorStoring``: the records of those ids that exist, in the order asked."""
        cache = self._refresh()
        known = cache.index.doc_of
        return self._load_docs(cache, [known[m] for m in memory_ids if m in known])

    def put_vectors(
        self,
        model: str,
        dimension: int,
        vectors: Mapping[str, bytes],
        *,
        previous: Mapping[str, str | None] | None = None,
    ) -> int:
        """``VectorStoring``: keep vectors of searched conversation records (appended, or
        the file rewritten when one replaces a stored vector); a pair vector only while
        its record's turn before, under the lock, is still ``previous[memory_id]``."""
        if not isinstance(model, str) or not model:
            raise RemoteMemoryValidationError("model must be a non-empty string")
        if type(dimension) is not int or not 0 < dimension <= 1 << 16:
            raise RemoteMemoryValidationError(f"dimension must be 1 to 65536: {dimension!r}")
        check_previous(model, previous)
        check_sizes(vectors, dimension, model)
        if not vectors or not self._refresh().lines:
            return 0
        with self._locked():
            cache = self._refresh()
            table = self._vector_table()
            header = table.header
            if header is not None:
                check_model(header.model, header.dimension, model, dimension)
            if previous is not None:
                asked = [m for m in vectors if m in previous]
                now = self._neighbours(cache, asked)
                vectors = {m: vectors[m] for m in asked if m in now and now[m][0] == previous[m]}
            rows = self._rows(cache, vectors, dimension)
            if not rows:
                return 0
            if header is None:
                self._new_vectors_file(model, dimension, rows.values())
                return len(rows)
            matched = self._matched(cache, table)
            replaced = require_numpy().isin(matched.docs, list(rows))
            if replaced.any():
                kept = matched.rows[~replaced]
                table.rewrite(self._vectors_path, kept, list(rows.values()), folder_fd=self._dir_fd)
            else:
                self._append_rows(header, table.start, list(rows.values()))
            return len(rows)

    @staticmethod
    def _rows(cache: _Cache, vectors: Mapping[str, bytes], dimension: int) -> dict[int, bytes]:
        """``doc → row`` of the searched conversation records of ``vectors`` (others skipped)."""
        index = cache.index
        rows: dict[int, bytes] = {}
        for memory_id, packed in vectors.items():
            doc = index.doc_of.get(memory_id)
            if doc is not None and index.live[doc]:
                rows[doc] = pack_row(doc, cache.digests[doc], bytes(packed), dimension)
        return rows

    def drop_vectors(self) -> int:
        """``VectorStoring``: remove the vectors file; how many vectors in use it held."""
        with self._locked():
            cache = self._refresh()
            try:
                table = self._vector_table()
                dropped = 0 if table.header is None else len(self._matched(cache, table).rows)
            except NumpyMissing:
                dropped = 0
            self._remove_vectors_file()
            return dropped

    def vectors_file_state(self) -> VectorFileState:
        """The vectors file against the log, for ``memlib doctor`` (writes nothing)."""
        cache = self._refresh()
        table = self._vector_table()
        return table.state(None if table.header is None else self._matched(cache, table))

    def repair_vectors_file(self) -> tuple[int, int] | None:
        """Rewrite the vectors file keeping only the rows in use: ``(kept, dropped)``; an
        unreadable file is removed (``(0, 0)``); None when there is nothing to do."""
        with self._locked():
            cache = self._refresh()
            table = self._vector_table()
            if not table.present:
                return None
            if table.header is None:
                self._remove_vectors_file()
                return 0, 0
            matched = self._matched(cache, table)
            if len(matched.rows) == table.count and not table.torn:
                return None
            count = table.count
            table.rewrite(self._vectors_path, matched.rows, folder_fd=self._dir_fd)
            return len(matched.rows), count - len(matched.rows)

    @contextlib.contextmanager
    def _lock(self) -> Iterator[int]:
        """The writers' lock file, locked (closing it releases the ``flock``)."""
        with self._in_folder(create=True):
            lock_fd = self._open_in(self._lock_path, os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX)
                yield lock_fd
            finally:
                os.close(lock_fd)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The store's lock, as a writer of the log takes it (a pending batch is left to the
        next writer of the log); a storage failure under it names the vectors file."""
        try:
            with self._lock():
                yield
        except OSError as exc:
            raise failure(f"cannot write {self._vectors_path}", exc) from None

    def _vectors_header(self) -> tuple[Header, int] | None:
        """The vectors file's header and where its rows begin; None if absent or unreadable
        (its rows then go into a new file). A link or foreign file there is refused."""
        try:
            fd = self._open_in(self._vectors_path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            return read_header(fd, self._key)
        except Unreadable:
            return None
        finally:
            os.close(fd)

    def _vectors_before_write(
        self, cache: _Cache, vectors: Mapping[str, bytes] | None, targets: Sequence[str]
    ) -> tuple[Header, int] | None:
        """Under the lock, before the log is written: refuse another model's vectors, then
        take every retracted record's vector out of the file (a log write that then fails
        has cost its record a vector, which backfill makes again)."""
        found = self._vectors_header()
        if vectors is not None:
            embedder = self.embedder
            assert embedder is not None  # ``_vectors_of`` embeds only with one
            if found is not None:
                check_model(found[0].model, found[0].dimension, embedder.name, embedder.dimension)
            check_sizes(vectors, embedder.dimension, embedder.name)
        # Only a conversation record has a vector: retracting a profile (or a record
        # this index has not seen) needs no look at the vectors file.
        index = cache.index
        if any(index.kinds[d] == 0 for d in map(index.doc_of.get, targets) if d is not None):
            try:
                found = self._retract_vectors(cache, targets)
            except OSError as exc:
                error = failure(f"cannot write {self._vectors_path}", exc)
                raise type(error)(f"{error}; nothing of this write was kept") from None
        return found

    def _retract_vectors(self, cache: _Cache, targets: Sequence[str]) -> tuple[Header, int] | None:
        try:
            table = self._vector_table()
        except NumpyMissing:
            # Its rows cannot be told apart here: the whole file goes, nothing of the
            # retracted record's vector stays behind.
            self._remove_vectors_file()
            return None
        if not table.present:
            return None
        if table.header is None:
            self._remove_vectors_file()  # unreadable: whose bytes are whose is unknown
            return None
        header = table.header
        doc_of = cache.index.doc_of
        docs = [d for d in map(doc_of.get, targets) if d is not None]
        if reads_pairs(header.model):
            # Each target's successor embedded the target's text with its own: its row
            # goes too (found before this batch's retractions reach the index).
            docs += [
                doc_of[following]
                for _, following in self._neighbours(cache, targets).values()
                if following is not None
            ]
        matched = self._matched(cache, table)
        clean = len(matched.rows) == table.count and not table.torn
        retracted = require_numpy().isin(matched.docs, docs)
        # A row not in use could still hold the vector (a damaged doc field): a file
        # that is not clean is rewritten too, with the rows in use only.
        if docs and (not clean or retracted.any()):
            table.rewrite(self._vectors_path, matched.rows[~retracted], folder_fd=self._dir_fd)
        return header, table.start

    def _neighbours(
        self, cache: _Cache, memory_ids: Sequence[str]
    ) -> dict[str, tuple[str | None, str | None]]:
        """``cache.index.neighbours``; when an index file's links prove damaged, those of
        the log read again into a cache of their own (a writer goes on with ``cache``,
        whose docs are the same lines)."""
        try:
            return cache.index.neighbours(memory_ids)
        except IndexDamagedError:
            fresh = _Cache()
            fresh.identity = cache.identity
            self._read_tail(fresh, cache.offset)
            return fresh.index.neighbours(memory_ids)

    def _vectors_after_write(
        self, cache: _Cache, vectors: Mapping[str, bytes], found: tuple[Header, int] | None
    ) -> None:
        """Under the lock, the log written (never before): append the batch's rows."""
        embedder = self.embedder
        assert embedder is not None
        rows = list(self._rows(cache, vectors, embedder.dimension).values())
        if not rows:
            return
        # The records are written and acknowledged; their vectors are derived, so failing
        # here costs vectors only, which ``missing`` reports until backfill.
        with contextlib.suppress(OSError, RemoteMemoryError):
            if found is None:
                self._new_vectors_file(embedder.name, embedder.dimension, rows)
            else:
                self._append_rows(found[0], found[1], rows)

    def _new_vectors_file(self, model: str, dimension: int, rows: Iterable[bytes]) -> None:
        header = encode_header(Header(self._key, model, dimension))
        replace_file(self._vectors_path, [header, *rows], folder_fd=self._dir_fd)
        self._vectors = VectorTable()  # read back when next asked

    def _append_rows(self, header: Header, start: int, rows: Sequence[bytes]) -> None:
        fd = self._open_in(self._vectors_path, os.O_WRONLY | os.O_APPEND)
        try:
            append_rows(fd, start, header.row_bytes, rows)
        finally:
            os.close(fd)

    def _remove_vectors_file(self) -> None:
        try:
            unlink_in(self._dir_fd, self._vectors_path)
        except FileNotFoundError:
            pass
        else:
            fsync_folder(self._folder, folder_fd=self._dir_fd)
        self._vectors = VectorTable()

    @contextlib.contextmanager
    def _in_folder(self, *, create: bool = False) -> Iterator[int | None]:
        """The store folder, opened and checked once for a whole operation, whose files
        are all opened relative to it (docs/contract.md, "Store files and folders").
        None when there is no folder yet and ``create`` is false."""
        if self._dir_fd is not None:
            yield self._dir_fd
            return
        try:
            fd = open_folder(self._folder)
        except NotADirectoryError:
            raise RemoteMemoryCorruptionError(
                f"cannot open records file {self.path}: a parent is not a folder"
            ) from None
        except FileNotFoundError:
            if not create:
                yield None
                return
            # The first write (or the folder was removed since): make the folders,
            # private all the way up, and open again.
            try:
                make_private_folders(self.path.parent, DIR_MODE)
            except OSError as exc:
                raise RemoteMemoryError(
                    f"cannot create folder {self.path.parent}: {exc.strerror}"
                ) from None
            try:
                fd = open_folder(self._folder)
            except FileNotFoundError:
                raise RemoteMemoryError(f"cannot open {self._folder}: no such folder") from None
        self._operation.fd = fd
        try:
            yield fd
        finally:
            self._operation.fd = None
            os.close(fd)

    @property
    def _dir_fd(self) -> int | None:
        return getattr(self._operation, "fd", None)

    def _open_in(self, path: str, flags: int) -> int:
        # Every file this store writes is opened here, in the operation's folder.
        return open_private(path, flags, folder_fd=self._dir_fd)

    def _lstat(self, path: str) -> os.stat_result:
        fd = self._dir_fd
        return os.stat(name_in(fd, path), dir_fd=fd, follow_symlinks=False)

    def _append_batch(
        self, batch: Sequence[StoredMemory], vectors: Mapping[str, bytes] | None = None
    ) -> None:
        lines = [encode_record(record) for record in batch]
        payload = b"".join(lines)
        targets = [r.retracts for r in batch if r.kind is MemoryKind.RETRACTION and r.retracts]
        digests = [line_digest(memoryview(line)[:-1]) for line in lines]
        with self._in_folder(create=True):
            # The records file is looked at before the lock is made, so that a write
            # refused for an unsafe records file leaves no new lock file behind either.
            with contextlib.suppress(OSError):  # absent or unreadable: the opens below say so
                refuse_unsafe(self.path, self._lstat(self._path))
            with self._lock() as lock_fd:
                fd = self._open_in(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
                try:
                    pending = pending_batch_offset(lock_fd)
                    if pending is not None:
                        # A batch whose writer died before its fsync returned: never
                        # acknowledged, so it goes whole.
                        if os.fstat(fd).st_size > pending:
                            os.ftruncate(fd, pending)
                        note_pending(lock_fd, None)
                    # The file just opened under the lock is the one to append to: its
                    # fstat serves the cache as well as a stat of the path would.
                    st = os.fstat(fd)
                    cache = self._refresh(st)
                    if st.st_size > cache.offset:
                        # A torn tail from a writer that died before fsync returned.
                        os.ftruncate(fd, cache.offset)
                    self.check_batch(batch, cache.index)
                    header = None
                    if vectors is not None or targets:
                        header = self._vectors_before_write(cache, vectors, targets)
                    self._write_all_or_nothing(fd, lock_fd, payload, cache.offset, len(batch) > 1)
                    cache.crc = zlib.crc32(payload, cache.crc)
                    cache.add_many(batch, map(len, lines), digests)
                except OSError as exc:
                    error = failure(f"cannot write {self.path}", exc)
                    raise type(error)(f"{error}; nothing of this write was kept") from None
                finally:
                    os.close(fd)
                if vectors:
                    self._vectors_after_write(cache, vectors, header)

    def _write_all_or_nothing(
        self, fd: int, lock_fd: int, payload: bytes, start: int, several: bool
    ) -> None:
        """One write and one fsync; on any failure the file is cut back to ``start``. A
        line cut short has no final newline, and readers skip it; several could be cut
        between two of them, so the lock notes where they began until the fsync returned."""
        if several:
            note_pending(lock_fd, start)
        try:
            write_all(fd, payload)
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):  # the note stays; the next writer cuts it
                os.ftruncate(fd, start)
                if several:
                    note_pending(lock_fd, None)
            raise
        if several:
            note_pending(lock_fd, None)


# A JSONL store as it stood at a past time, cut from its reader's index.
#
# ``stored_at`` never decreases in log order (the store checks it before it offers this
# view), so the records stored by ``known_at`` are a prefix of the log: the index is cut
# there (``_retrieval/_prefix.py``) and only the records a recall needs are parsed. Every
# read answers as ``KnownAtVectorStore``'s does over the same records.
class JsonlKnownAt(KnownAtVectorStore):
    """``store`` at ``known_at``, read through ``cache`` (its reader's, in stored order)."""

    def __init__(self, store: RemoteMemoryStore, known_at: datetime, cache: _Cache) -> None:
        self._jsonl, self._cache = store, cache
        self._all: tuple[StoredMemory, ...] | None = None
        super().__init__(store, known_at)

    def _read(self, store: MemoryStore) -> None:
        self._cut(bisect_right(self._cache.stored, micros_of(self.known_at)))

    def _cut(self, count: int) -> None:
        """The view of the log's first ``count`` records."""
        cache = self._cache
        # Profiles and retractions, in log order: those of the prefix come first.
        known = count - cache.index.kinds.count(0, 0, count)
        self._extras = tuple(cache.extras[:known])
        self._retracted_later = frozenset(_targets(cache.extras[known:]))
        self.index = index_prefix(cache.index, count, _targets(self._extras))

    def _again(self) -> None:
        """Cut again from the log read anew (a part of the index file proved damaged);
        the same prefix, whatever has been appended since."""
        self._cache = self._jsonl._rebuild()
        self._cut(len(self.index))

    def read_all(self) -> tuple[StoredMemory, ...]:
        if self._all is None:
            self._all = tuple(self._load(range(len(self.index))))
        return self._all

    def records(self, kind: MemoryKind | str | None = None) -> tuple[StoredMemory, ...]:
        if kind is not None and MemoryKind(kind) is not MemoryKind.CONVERSATION:
            return tuple(r for r in self._extras if r.kind is MemoryKind(kind))
        return super().records(kind)

    def latest_profile(self) -> StoredMemory | None:
        return latest_profile_of(self._extras)

    def _load(self, docs: Sequence[int]) -> list[StoredMemory]:
        return self._jsonl._load_docs(self._cache, docs)

    def _scan(self, query: RecallQuery, *, top: ScoreBound | None) -> CandidateScan:
        self._with_terms(query.terms)
        return super()._scan(query, top=top)

    def lexical_postings(self, query: RecallQuery, terms: Sequence[str]) -> LexicalPostings:
        self._with_terms(query.terms)
        return super().lexical_postings(query, terms)

    def _with_terms(self, terms: Sequence[str]) -> None:
        """``terms``' posting lists read (and checked) now, as the store's own recall does."""
        try:
            self._cache.index.load_terms(terms)
        except IndexDamagedError:
            self._again()

    def source_neighbours(self, memory_ids: Sequence[str]) -> dict[str, SourceNeighbours]:
        try:
            return super().source_neighbours(memory_ids)
        except IndexDamagedError:
            self._again()
            return super().source_neighbours(memory_ids)


def _targets(records: Sequence[StoredMemory]) -> list[str]:
    """What the retractions among ``records`` retract."""
    return [
        r.retracts for r in records if r.kind is MemoryKind.RETRACTION and r.retracts is not None
    ]
