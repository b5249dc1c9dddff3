"""The JSONL index file: a reader's index, persisted beside the log as packed arrays, so
that a new process loads it without parsing a line. Its layout, and the checks that make
it used only for the very prefix of the log it was built from, are docs/contract.md's
("The JSONL index file"); a stale file costs time, never a wrong answer.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
import sys
import time
import zlib
from array import array
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..._retrieval.strings import PackedStrings, hashed_order, pack_strings
from ..._safejson import loads as load_json
from ...errors import RemoteMemoryCorruptionError, RemoteMemoryError
from .._files import open_private, rename_in, unlink_in, write_all

MAGIC = b"MEMLIBIX"
FORMAT = 6
HEAD_BYTES = 4 << 10
TAIL_BYTES = 64 << 10
_DIGEST = 32
# Bytes of the log read per step to check its covered prefix.
_CRC_CHUNK = 4 << 20
_PREFIX = len(MAGIC) + 8
# The sections, with their array type codes ("B": raw bytes, "s": UTF-8 strings joined by
# "\n"); each has its CRC-32, so a reader reads and checks only what it uses.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("ids", "B"),
    ("id_ends", "Q"),
    ("id_order", "I"),
    ("id_hashes", "I"),
    ("kinds", "B"),
    ("live", "B"),
    ("timestamps", "d"),
    ("micros", "q"),
    ("tokens", "I"),
    ("content_tokens", "I"),
    ("starts", "Q"),
    ("digests", "Q"),
    ("stored", "q"),
    ("retracted", "s"),
    ("terms", "B"),
    ("term_text_ends", "Q"),
    ("term_ends", "Q"),
    ("postings_crcs", "I"),
    ("tfs_crcs", "I"),
    ("postings", "I"),
    ("tfs", "I"),
    ("source_names", "B"),
    ("source_name_ends", "Q"),
    ("source_order", "I"),
    ("source_hashes", "I"),
    ("source_last", "I"),
    ("source_of", "I"),
    ("source_before", "I"),
    ("source_after", "I"),
)
_ITEMSIZE = {"B": 1, "s": 1, "d": 8, "q": 8, "I": 4, "Q": 8}
# Read when a query first asks for the term, checked by the CRC-32s of the BLOCK-byte
# blocks of its list (a CRC per term cost more to write than the lists themselves).
_BY_TERM = frozenset({"postings", "tfs"})
BLOCK = 1 << 16
# Read when a reader is first asked for neighbours in a source (or writes the file).
_PER_SOURCE = ("source_order", "source_hashes", "source_last")
_SOURCE_PER_RECORD = ("source_of", "source_before", "source_after")
_SOURCES = ("source_names", "source_name_ends", *_PER_SOURCE, *_SOURCE_PER_RECORD)
_PER_RECORD = (
    "kinds",
    "live",
    "timestamps",
    "micros",
    "tokens",
    "content_tokens",
    "starts",
    "digests",
    "stored",
    "id_ends",
    "id_order",
    "id_hashes",
)


def index_path_for(log_path: str) -> str:
    return log_path + ".index"


class IndexDamagedError(RemoteMemoryCorruptionError):
    """A part of an index file read after it was loaded does not match its checksum (the
    store that meets it rebuilds from the log)."""


class LogChangedError(IndexDamagedError):
    """A line read from the log is not the line its reader indexed there (its BLAKE2b-8
    differs): the log was rewritten in place under a warm reader. The reader drops what
    it had read and reads the log again."""


@dataclass
class IndexImage:
    """Everything a ``_Cache`` needs, as packed arrays and counters. Read from a file,
    ``sections`` holds ``ids`` and ``terms`` as ``PackedStrings`` and, instead of
    ``postings`` / ``tfs``, ``fetch(n)``: term ``n``'s lists, read and checked then."""

    scope: str
    covered_bytes: int
    covered_lines: int
    log_crc: int
    counters: dict[str, int]
    sections: dict[str, Any]  # name → array / bytes / list[str] / PackedStrings / fetch


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


def _crc_of_range(fd: int, start: int, stop: int) -> int | None:
    """The CRC-32 of bytes ``start:stop`` of ``fd`` (None if it is shorter). No mmap: a log
    cut while mapped would kill the process with SIGBUS."""
    crc, offset = 0, start
    while offset < stop:
        data = os.pread(fd, min(_CRC_CHUNK, stop - offset), offset)
        if not data:
            return None
        crc = zlib.crc32(data, crc)
        offset += len(data)
    return crc


# CRC-32 arithmetic (zlib's crc32_combine, which Python's zlib does not offer): the
# reflected polynomial and x^(2^k) mod p for k = 0..31.
_POLY = 0xEDB88320


def _times_mod_p(a: int, b: int) -> int:
    """``a(x) · b(x) mod p(x)``, both reflected."""
    m, product = 1 << 31, 0
    while a:
        if a & m:
            product ^= b
            a ^= m
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
    return product


_X_2_TO_THE = [1 << 30]  # x^1
for _ in range(31):
    _X_2_TO_THE.append(_times_mod_p(_X_2_TO_THE[-1], _X_2_TO_THE[-1]))


def crc32_combine(first: int, second: int, second_bytes: int) -> int:
    """The CRC-32 of ``A + B`` from ``crc32(A)``, ``crc32(B)`` and ``len(B)``."""
    shift, k, n = 1 << 31, 3, second_bytes  # x^0; 2^3 bits a byte
    while n:
        if n & 1:
            shift = _times_mod_p(_X_2_TO_THE[k & 31], shift)
        n >>= 1
        k += 1
    return _times_mod_p(shift, first) ^ second


# Under this many bytes a second thread costs more than it saves.
_SPLIT_BYTES = 16 << 20


def crc_of_prefix(fd: int, covered: int) -> int | None:
    """The CRC-32 of the first ``covered`` bytes of ``fd`` (None if it is shorter); a big
    prefix in two halves on two threads, combined."""
    if covered < _SPLIT_BYTES:
        return _crc_of_range(fd, 0, covered)
    middle = covered // 2
    with ThreadPoolExecutor(1) as pool:
        second = pool.submit(_crc_of_range, fd, middle, covered)
        first = _crc_of_range(fd, 0, middle)
        last = second.result()
    if first is None or last is None:
        return None
    return crc32_combine(first, last, covered - middle)


# The bytes a warm reader looks at again when the log changed under it (``log_window``).
WINDOW_BYTES = 4 << 10


def log_window(fd: int, at: int) -> tuple[int, int, int]:
    """``(at, CRC-32 of the first 4 KiB, CRC-32 of the 4 KiB before at)`` of the log:
    what a reader that has read ``at`` bytes compares when the log's ctime moved."""
    head = os.pread(fd, min(WINDOW_BYTES, at), 0)
    start = max(0, at - WINDOW_BYTES)
    tail = os.pread(fd, at - start, start)
    return at, zlib.crc32(head), zlib.crc32(tail)


class _IndexFile:
    """An open index file, read by ``pread`` (closed when no term is left to fetch)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.size = os.fstat(fd).st_size

    def read(self, offset: int, nbytes: int) -> bytes:
        data = os.pread(self.fd, nbytes, offset)
        if len(data) != nbytes:
            raise _Invalid("its sections are cut short")
        return data

    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _parse_header(file: _IndexFile) -> dict[str, Any]:
    """The header; checks magic, version, its checksum and the byte order."""
    if file.size < _PREFIX + _DIGEST:
        raise _Invalid("not a memlib index file")
    first = os.pread(file.fd, 1 << 16, 0)
    if first[: len(MAGIC)] != MAGIC:
        raise _Invalid("not a memlib index file")
    version = int.from_bytes(first[len(MAGIC) : len(MAGIC) + 4], "little")
    if version != FORMAT:
        raise _Invalid(f"format {version}, this memlib reads format {FORMAT}")
    size = int.from_bytes(first[len(MAGIC) + 4 : _PREFIX], "little")
    if _PREFIX + size + _DIGEST > file.size:
        raise _Invalid("its header is cut short")
    head = first[: _PREFIX + size] if _PREFIX + size <= len(first) else file.read(0, _PREFIX + size)
    # The trailer is the SHA-256 of the head, which names each section's CRC-32.
    if hashlib.sha256(head).digest() != file.read(file.size - _DIGEST, _DIGEST):
        raise _Invalid("its checksum does not match its content (damaged)")
    try:
        header = load_json(head[_PREFIX:])
    except ValueError:
        raise _Invalid("its header is not valid") from None
    if not isinstance(header, dict) or header.get("byteorder") != sys.byteorder:
        raise _Invalid("written on a machine of another byte order")
    header["_sections_at"] = (_PREFIX + size + 7) & ~7
    return header


def _check_log(header: dict[str, Any], log_fd: int, log_size: int, scope: str | None) -> None:
    if scope is not None and header.get("scope") != scope:
        raise _Invalid("it belongs to another user scope")
    covered = int(header["covered_bytes"])
    if covered > log_size:
        raise _Invalid(f"it covers {covered} bytes, the log has only {log_size} (truncated?)")
    head, tail = _window_hashes(log_fd, covered)  # a cheap first look, not the proof
    if head != header["log_head_sha256"] or tail != header["log_tail_sha256"]:
        raise _Invalid("the log's covered prefix is not the one it was built from")
    # The proof: every covered byte, whatever the log's inode, size or mtime say
    # (docs/contract.md: a file replaced or restored keeps all three as often as not).
    if crc_of_prefix(log_fd, covered) != int(header["log_crc32"]):
        raise _Invalid("the log's covered prefix is not the one it was built from")


def _open_file(path: str, folder_fd: int | None = None) -> _IndexFile | None:
    """The index file, None if absent; a link or foreign file is refused."""
    try:
        fd = open_private(path, os.O_RDONLY, folder_fd=folder_fd)
    except FileNotFoundError:
        return None
    try:
        return _IndexFile(fd)
    except OSError as exc:
        os.close(fd)
        raise RemoteMemoryError(f"cannot read index file {path}: {exc.strerror}") from None


def _places(header: dict[str, Any], file: _IndexFile) -> dict[str, tuple[int, int, int]]:
    """``name → (offset in the file, bytes, CRC-32)`` of every section, checked to lie
    in the file."""
    places: dict[str, tuple[int, int, int]] = {}
    end = file.size - _DIGEST
    base = header["_sections_at"]
    for name, code in SECTIONS:
        offset, nbytes, crc = (int(v) for v in header["sections"][name])
        offset += base
        if offset < base or nbytes < 0 or offset + nbytes > end or nbytes % _ITEMSIZE[code]:
            raise _Invalid("its sections are cut short")
        places[name] = (offset, nbytes, crc)
    return places


def _section(file: _IndexFile, name: str, code: str, place: tuple[int, int, int]) -> Any:
    offset, nbytes, crc = place
    data = file.read(offset, nbytes)
    if zlib.crc32(data) != crc:
        raise _Invalid(f"its {name} do not match their checksum (damaged)")
    if code == "s":
        text = data.decode("utf-8")
        return text.split("\n") if text else []
    if code == "B":
        return data if name in ("ids", "terms", "source_names") else bytearray(data)
    values = array(code)
    if values.itemsize != _ITEMSIZE[code]:
        raise _Invalid("array sizes differ on this machine")
    values.frombytes(data)
    return values


def _block_crcs(data: memoryview) -> array[int]:
    return array("I", (zlib.crc32(data[at : at + BLOCK]) for at in range(0, len(data), BLOCK)))


def _fetcher(
    file: _IndexFile,
    places: dict[str, tuple[int, int, int]],
    ends: array[int],
    crcs: dict[str, array[int]],
) -> Callable[[int], tuple[array[int], array[int]]]:
    def read(name: str, start: int, stop: int) -> array[int]:
        """Bytes ``start:stop`` of section ``name``, every block they touch checked."""
        values = array("I")
        if stop <= start:
            return values
        at, nbytes, _ = places[name]
        low = start // BLOCK * BLOCK
        high = min(nbytes, -(-stop // BLOCK) * BLOCK)  # whole blocks around the list
        try:
            view = memoryview(file.read(at + low, high - low))
        except (_Invalid, OSError):
            raise IndexDamagedError("the index file was cut short since it was loaded") from None
        for offset in range(0, high - low, BLOCK):
            if zlib.crc32(view[offset : offset + BLOCK]) != crcs[name][(low + offset) // BLOCK]:
                raise IndexDamagedError("a posting list of the index file is damaged")
        values.frombytes(view[start - low : stop - low])
        return values

    def fetch(n: int) -> tuple[array[int], array[int]]:
        """Term ``n``'s postings and term frequencies, their blocks checked."""
        start = 4 * (ends[n - 1] if n else 0)
        stop = 4 * ends[n]
        return read("postings", start, stop), read("tfs", start, stop)

    return fetch


def _check_blocks(
    file: _IndexFile, places: dict[str, tuple[int, int, int]], crcs: dict[str, array[int]]
) -> None:
    """Every block of the posting lists against its CRC-32 (``memlib doctor``)."""
    for name in _BY_TERM:
        at, nbytes, _ = places[name]
        for block, low in enumerate(range(0, nbytes, BLOCK)):
            if zlib.crc32(file.read(at + low, min(BLOCK, nbytes - low))) != crcs[name][block]:
                raise _Invalid(f"its {name} do not match their checksums (damaged)")


def _source_loader(
    file: _IndexFile, places: dict[str, tuple[int, int, int]]
) -> Callable[[], dict[str, Any]]:
    codes = dict(SECTIONS)

    def load() -> dict[str, Any]:
        """The source sections, each checked against its CRC-32 (``source_names`` as
        ``PackedStrings``)."""
        try:
            sections = {name: _section(file, name, codes[name], places[name]) for name in _SOURCES}
        except OSError:
            raise IndexDamagedError("the index file was cut short since it was loaded") from None
        except _Invalid:
            raise IndexDamagedError("the sources of the index file are damaged") from None
        ends = sections.pop("source_name_ends")
        if (ends[-1] if ends else 0) != len(sections["source_names"]):
            raise IndexDamagedError("the sources of the index file are damaged")
        sections["source_names"] = PackedStrings(sections["source_names"], ends)
        return sections

    return load


def _load(file: _IndexFile, header: dict[str, Any], *, every_term: bool) -> dict[str, Any]:
    """The sections of a file whose header was checked; ``every_term``: check every
    posting list and the sources now (``memlib doctor``), not only when read."""
    places = _places(header, file)
    sections: dict[str, Any] = {}
    for name, code in SECTIONS:
        if name not in _BY_TERM and name not in _SOURCES:
            sections[name] = _section(file, name, code, places[name])
    n = int(header["covered_lines"])
    # The source sections are read later; their sizes are checked now, from the header.
    if any(places[name][1] != 4 * n for name in _SOURCE_PER_RECORD):
        raise _Invalid("its sections disagree on the number of records")
    sources = places["source_name_ends"][1] // 8
    if any(places[name][1] != 4 * sources for name in _PER_SOURCE):
        raise _Invalid("its sections disagree on the number of sources")
    if any(len(sections[name]) != n for name in _PER_RECORD):
        raise _Invalid("its sections disagree on the number of records")
    id_ends, term_ends = sections["id_ends"], sections["term_ends"]
    text_ends = sections["term_text_ends"]
    if (id_ends and id_ends[-1] != len(sections["ids"])) or (
        text_ends and text_ends[-1] != len(sections["terms"])
    ):
        raise _Invalid("its sections disagree on the length of their strings")
    if len(term_ends) != len(text_ends):
        raise _Invalid("its sections disagree on the number of terms")
    # A checked CRC-32 vouches for what the writer wrote (sorted terms and ids, ascending
    # ends): checking order here would cost a 1M-record reader more than its whole load.
    total = term_ends[-1] if term_ends else 0
    if any(places[name][1] != 4 * total for name in _BY_TERM):
        raise _Invalid("its term frequencies disagree with its postings")
    crcs = {name: sections.pop(f"{name}_crcs") for name in _BY_TERM}
    if any(len(crcs[name]) != -(-places[name][1] // BLOCK) for name in _BY_TERM):
        raise _Invalid("its block checksums disagree with its postings")
    load_sources = _source_loader(file, places)
    if every_term:
        _check_blocks(file, places, crcs)
        try:
            load_sources()
        except IndexDamagedError as exc:
            raise _Invalid(str(exc)) from None
    sections["ids"] = PackedStrings(sections["ids"], id_ends)
    sections["terms"] = PackedStrings(sections.pop("terms"), sections.pop("term_text_ends"))
    sections.update(fetch=_fetcher(file, places, term_ends, crcs), sources=load_sources)
    return sections


def read_index(
    path: str, scope: str, log_fd: int, log_size: int, *, folder_fd: int | None = None
) -> tuple[IndexImage | None, str]:
    """The image in ``path`` if it provably describes a prefix of the log (``log_size``:
    the bytes readers may use), and why not. A posting list stays in the file until a
    query asks for it; one found damaged then raises ``IndexDamagedError``."""
    file = _open_file(path, folder_fd)
    if file is None:
        return None, "absent"
    try:
        header = _parse_header(file)
        # The check of every covered byte runs while the sections load (a third of
        # the time at 1M records), and is waited for before anything is used.
        with ThreadPoolExecutor(1) as pool:
            checked = pool.submit(_check_log, header, log_fd, log_size, scope)
            try:
                sections = _load(file, header, every_term=False)
            finally:
                checked.result()
        image = IndexImage(
            scope=header["scope"],
            covered_bytes=int(header["covered_bytes"]),
            covered_lines=int(header["covered_lines"]),
            log_crc=int(header["log_crc32"]),
            counters={k: int(v) for k, v in header["counters"].items()},
            sections=sections,
        )
    except _Invalid as exc:
        return None, str(exc)
    except (KeyError, TypeError, ValueError, UnicodeError, OSError) as exc:
        return None, f"its header is not valid ({type(exc).__name__})"
    return image, "fresh"


def inspect_index(
    path: str,
    scope: str | None,
    log_fd: int,
    log_size: int,
    log_lines: int,
    *,
    folder_fd: int | None = None,
    quick_stale: bool = False,
) -> IndexState:
    """The index file's state against the log, every byte of it checked (``memlib doctor``;
    ``quick_stale``: a file behind the log is called stale before any check)."""
    try:
        file = _open_file(path, folder_fd)
    except RemoteMemoryError as exc:
        return IndexState("invalid", reason=str(exc))
    if file is None:
        return IndexState("absent")
    try:
        header = _parse_header(file)
        if quick_stale and int(header["covered_lines"]) < log_lines:
            return IndexState("stale")
        _check_log(header, log_fd, log_size, scope)
        _load(file, header, every_term=True)
        covered = int(header["covered_lines"])
    except _Invalid as exc:
        return IndexState("invalid", reason=str(exc))
    except (KeyError, TypeError, ValueError, UnicodeError, OSError) as exc:
        return IndexState("invalid", reason=f"its header is not valid ({type(exc).__name__})")
    if covered < log_lines:
        return IndexState("stale", covered, f"{log_lines - covered} records behind the log")
    return IndexState("fresh", covered)


def _blob(code: str, value: Any) -> bytes:
    if code == "s":
        return "\n".join(value).encode("utf-8")
    if code == "B":
        return bytes(value)
    return value.tobytes()  # type: ignore[no-any-return]


def _pack(image: IndexImage, log_fd: int, identity: tuple[int, int]) -> bytes | None:
    """The file's bytes; ``image.sections`` as ``InvertedIndex.packed()`` gives them
    (``ids``, ``terms`` sorted, ``term_ends``, ``postings``, ``tfs``, ``source_names``
    and the other ``source_*``) plus ``starts`` and ``digests``."""
    given = image.sections
    if any("\n" in s for s in given["retracted"]):
        return None  # not representable: stay in memory only
    ids, names = list(given["ids"]), list(given["source_names"])
    sections = dict(given)
    sections["ids"], sections["id_ends"] = pack_strings(ids)
    sections["id_order"], sections["id_hashes"] = hashed_order(ids)
    sections["terms"], sections["term_text_ends"] = pack_strings(given["terms"])
    sections["source_names"], sections["source_name_ends"] = pack_strings(names)
    sections["source_order"], sections["source_hashes"] = hashed_order(names)
    for name in _BY_TERM:
        sections[f"{name}_crcs"] = _block_crcs(memoryview(given[name]).cast("B"))
    blobs = [_blob(code, sections[name]) for name, code in SECTIONS]
    # Offsets count from the first section (the first 8-byte boundary after the header).
    places: dict[str, list[int]] = {}
    at = 0
    for (name, _), blob in zip(SECTIONS, blobs, strict=True):
        places[name] = [at, len(blob), zlib.crc32(blob)]
        at += (len(blob) + 7) & ~7
    log_head, log_tail = _window_hashes(log_fd, image.covered_bytes)
    header = {
        "scope": image.scope,
        "covered_bytes": image.covered_bytes,
        "covered_lines": image.covered_lines,
        "log_crc32": image.log_crc,
        "log_head_sha256": log_head,
        "log_tail_sha256": log_tail,
        "log_identity": list(identity),
        "byteorder": sys.byteorder,
        "counters": image.counters,
        "sections": places,
    }
    encoded = json.dumps(header, sort_keys=True).encode("utf-8")
    head = MAGIC + FORMAT.to_bytes(4, "little") + len(encoded).to_bytes(4, "little") + encoded
    parts = [head, b"\0" * (-len(head) % 8)]
    for blob in blobs:
        parts += [blob, b"\0" * (-len(blob) % 8)]
    parts.append(hashlib.sha256(head).digest())
    return b"".join(parts)


# A temporary file of the index or vectors file; one whose writer is gone (by its pid, or
# over an hour old: a pid may be reused) is garbage nothing else would ever remove.
_TEMP = re.compile(r"\.(?P<name>.+)\.(?P<pid>[0-9]{1,10})\.[0-9a-f]{8}\.tmp")
STALE_TEMP_SECONDS = 3600


def write_temp(
    path: str, parts: Iterable[Any], *, folder_fd: int | None
) -> tuple[str, os.stat_result]:
    """A new temporary file beside ``path``, named as ``_TEMP`` says, holding ``parts``
    (bytes or buffers) and fsynced: its path and stat. Removed again if writing failed."""
    folder, name = os.path.split(path)
    temp = os.path.join(folder, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = open_private(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, folder_fd=folder_fd)
    try:
        for part in parts:
            write_all(fd, part)
        os.fsync(fd)
        return temp, os.fstat(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            unlink_in(folder_fd, temp)
        raise
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True  # another account's process: alive
    except (OverflowError, OSError):  # ProcessLookupError: none of that pid
        return False
    return True


def stale_temps(
    log_path: str, *, kinds: tuple[str, ...] = (".index", ".vectors"), folder_fd: int | None = None
) -> list[tuple[str, int]]:
    """``(path, bytes)`` of each temporary file of the derived files ``kinds`` beside the
    log whose writer is not alive (by its pid) or that is over an hour old."""
    folder, base = os.path.split(log_path)
    names = {base + kind for kind in kinds}
    found: list[tuple[str, int]] = []
    now = time.time()
    try:
        entries = list(os.scandir(folder or "." if folder_fd is None else folder_fd))
    except OSError:
        return found
    for entry in entries:
        match = _TEMP.fullmatch(entry.name)
        if match is None or match["name"] not in names:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue  # not one memlib wrote: left to whoever made it
        if _alive(int(match["pid"])) and now - st.st_mtime < STALE_TEMP_SECONDS:
            continue
        found.append((os.path.join(folder, entry.name), st.st_size))
    return sorted(found)


def remove_stale_temps(
    log_path: str, *, kinds: tuple[str, ...] = (".index", ".vectors"), folder_fd: int | None = None
) -> list[tuple[str, int]]:
    """Remove what ``stale_temps`` finds; what was removed."""
    removed = []
    for path, size in stale_temps(log_path, kinds=kinds, folder_fd=folder_fd):
        try:
            unlink_in(folder_fd, path)
        except OSError:
            continue  # gone already, or not ours to remove: doctor still reports it
        removed.append((path, size))
    return removed


# A folder that cannot take the file (or is gone): the store still recalls, from the log.
_UNWRITABLE = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EIO}


def write_index(
    path: str,
    image: IndexImage,
    log_fd: int,
    identity: tuple[int, int],
    *,
    folder_fd: int | None = None,
) -> bool:
    """Write ``image`` to ``path`` atomically: True when the file there now covers it (a
    file covering as much or more is left as it is); False, changing nothing, when the
    folder cannot be written (a read-only store still recalls)."""
    data = _pack(image, log_fd, identity)
    if data is None:
        return False
    temp = ""
    try:
        temp, _ = write_temp(path, [data], folder_fd=folder_fd)
        # A descriptor of its own on the folder: closing it releases the flock.
        dir_fd = os.open(
            (os.path.dirname(path) or ".") if folder_fd is None else ".",
            os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
            dir_fd=folder_fd,
        )
        try:
            # Writers of index files take turns on the folder, so that one never
            # replaces a file that covers more than its own.
            fcntl.flock(dir_fd, fcntl.LOCK_EX)
            # A writer killed mid-way left its temporary file: the next one cleans up.
            remove_stale_temps(path.removesuffix(".index"), kinds=(".index",), folder_fd=folder_fd)
            # Left as it is when whole, undamaged, for this very log (as it is now, not as
            # we read it) and as new as ours or newer.
            now = os.fstat(log_fd).st_size
            args = (path, image.scope, log_fd, now, image.covered_lines)
            if inspect_index(*args, folder_fd=folder_fd, quick_stale=True).status == "fresh":
                return True
            rename_in(folder_fd, temp, path)
            temp = ""
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)  # releases the flock
        return True
    except RemoteMemoryError:  # the temporary file refused (link, foreign file)
        return False
    except OSError as exc:
        if exc.errno in _UNWRITABLE or exc.errno == errno.ENOENT:
            return False
        raise
    finally:
        if temp:
            with contextlib.suppress(OSError):
                unlink_in(folder_fd, temp)
