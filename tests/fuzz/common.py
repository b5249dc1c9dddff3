"""Shared parts of the fuzz targets: seeded generators, the per-case time bound, the
typed-error check and the case counts.

Every case is drawn from its own ``random.Random(f"{seed}:{target}:{number}")``, so one
failing case is replayed alone from the numbers its report prints
(``MEMLIB_FUZZ_ONLY=number``). Values are a weighted mix of valid, near-valid and
hostile ones, because a generator of pure noise exercises only the first check a
parser makes.

Environment: ``MEMLIB_FUZZ_SEED`` (default 32, the issue), ``MEMLIB_FUZZ_SCALE`` (a
factor on every count; the stress run's counts sum to over a million cases at 1),
``MEMLIB_FUZZ_ONLY`` (one case number), ``MEMLIB_FUZZ_CASE_SECONDS`` (when a case counts
as a hang; default 20), ``MEMLIB_FUZZ_REPORT`` (where the counts, times, outcome mix and
failure kinds of the session are written as JSON; default
``memlib-fuzz-report.json`` in the temp folder).

The invariant of every target: the documented result, or a typed memlib error
(``RemoteMemoryError``) with a one-line message — never another exception, never a
hang, never a wrong answer. A target collects its failures by kind and fails once at
the end, printing the smallest case of each kind.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import signal
import tempfile
import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlib.errors import RemoteMemoryError

SEED = int(os.environ.get("MEMLIB_FUZZ_SEED", "32"))
SCALE = float(os.environ.get("MEMLIB_FUZZ_SCALE", "1"))
ONLY = os.environ.get("MEMLIB_FUZZ_ONLY")
# Seconds one case may take before it counts as a hang. Generous: the machine is shared,
# and a hang is a case that never ends, not a slow one.
CASE_SECONDS = float(os.environ.get("MEMLIB_FUZZ_CASE_SECONDS", "20"))
# Distinct failures kept per target: the first of each kind is the one reported.
KEPT = 40

# Counts of this session, per target: what the terminal summary and the report print.
COUNTS: dict[str, dict[str, Any]] = {}


def cases(sample: int, full: int, *, stress: bool) -> range:
    """The case numbers of one run: ``full`` under ``-m stress``, ``sample`` otherwise."""
    if ONLY is not None:
        number = int(ONLY)
        return range(number, number + 1)
    count = max(1, int((full if stress else sample) * SCALE))
    return range(count)


def rng(target: str, number: int) -> random.Random:
    return random.Random(f"{SEED}:{target}:{number}")


class CaseTimeout(BaseException):
    """A case ran past ``CASE_SECONDS`` (BaseException: no ``except Exception`` eats it)."""


@contextlib.contextmanager
def bounded(seconds: float = CASE_SECONDS) -> Iterator[None]:
    """Raise ``CaseTimeout`` in the main thread if the body runs longer than ``seconds``."""

    def expire(signum: int, frame: Any) -> None:
        raise CaseTimeout(f"no answer within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def one_line(message: str) -> bool:
    """One line as a terminal or an editor shows it (``splitlines`` knows them all)."""
    return len(message.splitlines()) == 1 and message == message.strip()


def typed_problem(exc: BaseException) -> str | None:
    """Why ``exc`` breaks the error contract, or None: a memlib error with one line."""
    if not isinstance(exc, RemoteMemoryError):
        return f"untyped {type(exc).__name__}"
    if not one_line(str(exc)):
        return f"{type(exc).__name__} message not one line"
    return None


def brief(value: Any, size: int = 400) -> str:
    """``repr(value)`` cut to ``size``; a value too deep or too long for repr says so."""
    try:
        text = repr(value)
    except (RecursionError, ValueError) as exc:  # deep nesting, an int of 4,300+ digits
        return f"<{type(value).__name__} that repr refuses: {type(exc).__name__}>"
    return text if len(text) <= size else f"{text[:size]}…({len(text):,} chars)"


_DIGITS = re.compile(r"\d+")


def signature(kind: str, exc: BaseException | None = None) -> str:
    """What makes two failures the same kind: the check and the error, numbers cut."""
    if exc is None:
        return kind
    # Up to the first quoted value (or 50 characters): one defect, one kind, whatever
    # value the message goes on to quote.
    text = re.split("['\"]", _DIGITS.sub("N", str(exc).split("\n")[0]), maxsplit=1)[0][:50]
    return f"{kind}: {type(exc).__name__}: {text}"


@dataclass
class Failures:
    """The failures of one target run: counted by kind, the smallest case of each kept."""

    target: str
    seen: dict[str, tuple[int, int, str]] = field(default_factory=dict)
    total: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    def note(self, outcome: str) -> None:
        """Count an outcome ("ok", an error class): the mix says what a run exercised."""
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def add(self, kind: str, number: int, detail: str, size: int | None = None) -> None:
        self.total += 1
        size = len(detail) if size is None else size
        known = self.seen.get(kind)
        if known is None and len(self.seen) >= KEPT:
            return
        if known is None or size < known[1]:
            self.seen[kind] = (number, size, detail)

    def report(self) -> str:
        lines = [
            f"{self.total} failing cases of {self.target}, {len(self.seen)} kinds "
            f"(seed {SEED}; replay one with MEMLIB_FUZZ_ONLY=case):"
        ]
        for kind, (number, _, detail) in sorted(self.seen.items()):
            lines.append(f"- {kind}\n    case {number}: {detail[:600]}")
        return "\n".join(lines)


class Run:
    """One target's loop: counts, the time it took, the failures; asserts none at the end."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.failures = Failures(target)
        self.count = 0
        self.started = time.monotonic()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: Any) -> None:
        seconds = time.monotonic() - self.started
        entry = COUNTS.setdefault(self.target, {"cases": 0, "seconds": 0.0, "failures": 0})
        entry["cases"] += self.count
        entry["seconds"] = round(entry["seconds"] + seconds, 1)
        entry["failures"] += self.failures.total
        mix = entry.setdefault("outcomes", {})
        for outcome, count in self.failures.outcomes.items():
            mix[outcome] = mix.get(outcome, 0) + count
        entry["kinds"] = sorted(set(entry.get("kinds", [])) | set(self.failures.seen))
        write_report()

    def check(self) -> None:
        assert self.failures.total == 0, self.failures.report()


def write_report() -> Path:
    path = Path(
        os.environ.get("MEMLIB_FUZZ_REPORT")
        or Path(tempfile.gettempdir()) / "memlib-fuzz-report.json"
    )
    total = sum(entry["cases"] for entry in COUNTS.values())
    data = {"seed": SEED, "scale": SCALE, "total_cases": total, "targets": COUNTS}
    with contextlib.suppress(OSError):  # ASCII: a failure's kind may hold a lone surrogate
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="ascii")
    return path


def work_folder(base: Path) -> Path:
    """A private folder for store files: on tmpfs when there is one, where an fsync
    costs nothing (the cases are about what is read back, not about durability)."""
    shm = Path("/dev/shm")
    root = shm if shm.is_dir() and os.access(shm, os.W_OK) else base
    return Path(tempfile.mkdtemp(prefix="memlib-fuzz-", dir=root))


def hidden_or_not_nfc(memory_id: object) -> bool:
    """An id no new record may have (docs/contract.md): not NFC, or holding a control
    or format character (the rule's escaped set also has other default-ignorables)."""
    return isinstance(memory_id, str) and (
        not unicodedata.is_normalized("NFC", memory_id)
        or any(unicodedata.category(c) in ("Cc", "Cf") for c in memory_id)
    )


def refused_user_id(user_id: object) -> bool:
    """A user id every store refuses (docs/contract.md): not NFKC, or holding a control
    or format character, once its ends are stripped."""
    if not isinstance(user_id, str):
        return True
    stripped = user_id.strip()
    return (
        not stripped
        or unicodedata.normalize("NFKC", stripped) != stripped
        or any(unicodedata.category(c) in ("Cc", "Cf", "Cs") for c in stripped)
    )


# -- values -------------------------------------------------------------------------------

WORDS = (
    "amber",
    "river",
    "lantern",
    "quiet",
    "harbor",
    "copper",
    "garden",
    "notes",
    "meeting",
    "budget",
    "the",
    "of",
    "memory",
    "layered",
    "sqlite",
    "recall",
    "café",
    "Torstraße",
    "москва",
    "메모리",
    "记忆",
    "分层记忆",
    "メモリ設計",
    "llm记忆",
    "v2_index",
    "42",
    "naïve",
    "ΣΊΣΥΦΟΣ",
    "ﬁle",
    "ＬＡＹＥＲＥＤ",
)
HOSTILE_CHARS = (
    "\x00",
    "\x01",
    "\x07",
    "\x08",
    "\t",
    "\n",
    "\r",
    "\x0b",
    "\x0c",
    "\x1b",
    "\x1b[31m",
    "\x1b]0;title\x07",
    "\x7f",
    "\x85",
    "\u00a0",
    "\u200b",
    "\u200d",
    "\u2028",
    "\u2029",
    "\u202e",
    "\u2066",
    "\u061c",
    "\ufeff",
    "\ufffd",
    "\ufffe",
    "\U000e0041",
    "\U0001f600",
    "\U0001f469\u200d\U0001f4bb",
    "e\u0301",
    "\u00e9",
    "\u212b",
    "A\u030a",
    "\u0130",
    "\ud800",
    "\udfff",
    "\\",
    '"',
    "'",
    "<",
    ">",
    "&",
    "%s",
    "{0}",
    "\u3000",
    "\u0000\u0000",
)
TIMESTAMPS_OK = (
    "2026-08-01T12:00:00Z",
    "2026-08-09T12:00:00.5Z",
    "2026-07-15T08:30:00+02:00",
    "2025-12-31T23:59:59.999999Z",
    "2026-08-10T12:00:00Z",
    "2026-09-01T00:00:00Z",
    "2026-08-01T12:00:00-11:30",
)
TIMESTAMPS_HOSTILE = (
    "",
    "yesterday",
    "2026-08-01",
    "2026-08-01T12:00:00",
    "2026-13-01T00:00:00Z",
    "2026-02-30T00:00:00Z",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "0000-01-01T00:00:00Z",
    "2026-08-01T12:00:00.1234567Z",
    "2026-08-01T24:00:00Z",
    "2026-08-01T12:00:00+24:00",
    "2026-08-01T12:00:00+99:99",
    "2026-08-01T12:00:00z",
    "2026-08-01 12:00:00Z",
    "2026-08-01T12:00:00Z\x00",
    " 2026-08-01T12:00:00Z",
    "２０２６-08-01T12:00:00Z",
    "2026-08-01T12:00:00\u2212 02:00",
    "+12026-08-01T00:00:00Z",
    "2026-W31-1T12:00:00Z",
    "2026-213T12:00:00Z",
    "2026-08-01T12:00Z",
    "1e400",
    "2026-08-01T12:00:00.Z",
    "2026-08-01T12:00:60Z",
    "\u202e2026-08-01T12:00:00Z",
)


def word(r: random.Random) -> str:
    return r.choice(WORDS)


def text(r: random.Random, *, limit: int = 60) -> str:
    """A string: mostly words, sometimes hostile characters, forms or lengths."""
    roll = r.random()
    if roll < 0.45:
        return " ".join(word(r) for _ in range(r.randint(1, 6)))
    if roll < 0.75:
        parts = [
            r.choice(WORDS) if r.random() < 0.6 else r.choice(HOSTILE_CHARS)
            for _ in range(r.randint(1, 8))
        ]
        joined = r.choice(("", " ")).join(parts)
        return (
            unicodedata.normalize(r.choice(("NFC", "NFD", "NFKC", "NFKD")), joined)
            if r.random() < 0.3
            else joined
        )
    if roll < 0.82:
        return r.choice(("", " ", "   ", "\t\n", "!!!", "?", "\u3000", "—", "🙂"))
    if roll < 0.9:
        size = r.choice((limit - 1, limit, limit + 1, 2_000, 2_001, 20_000, 20_001, 100_000))
        return (word(r) + " ") * (size // 6) + "x" * (size % 6)
    if roll < 0.96:
        return "".join(chr(r.randint(0, 0x2FFF)) for _ in range(r.randint(1, 20)))
    return "".join(
        chr(r.choice((r.randint(0, 0x10FFFF), r.randint(0xD800, 0xDFFF))))
        for _ in range(r.randint(1, 5))
    )


def number(r: random.Random) -> Any:
    return r.choice(
        (
            0,
            1,
            -1,
            5,
            10,
            11,
            2**31,
            2**63,
            -(2**63),
            10**400,
            1.5,
            -0.0,
            math.nan,
            math.inf,
            -math.inf,
            1e308,
            5e-324,
            True,
            False,
        )
    )


def deep(r: random.Random, depth: int | None = None) -> Any:
    depth = r.choice((2, 31, 32, 33, 100, 5_000)) if depth is None else depth
    value: Any = word(r)
    for _ in range(depth):
        value = [value] if r.random() < 0.5 else {"k": value}
    return value


def value(r: random.Random, *, limit: int = 60) -> Any:
    """Any JSON-able value (and some that are not): the wrong type as often as the right."""
    roll = r.random()
    if roll < 0.55:
        return text(r, limit=limit)
    if roll < 0.7:
        return number(r)
    if roll < 0.78:
        return None
    if roll < 0.86:
        return [text(r)] if r.random() < 0.5 else {"text": text(r)}
    if roll < 0.92:
        return deep(r)
    return r.choice((b"bytes", (1, 2), {1, 2}, object())) if r.random() < 0.2 else []


def timestamp(r: random.Random) -> Any:
    roll = r.random()
    if roll < 0.6:
        return r.choice(TIMESTAMPS_OK)
    if roll < 0.9:
        return r.choice(TIMESTAMPS_HOSTILE)
    return value(r)


def memory_id(r: random.Random, number: int) -> Any:
    roll = r.random()
    if roll < 0.7:
        return f"m-{number}-{r.randint(0, 9)}"
    if roll < 0.8:
        return unicodedata.normalize(r.choice(("NFC", "NFD")), f"café-{r.randint(0, 3)}")
    if roll < 0.9:
        return text(r, limit=200)
    return value(r, limit=200)


# -- bytes ---------------------------------------------------------------------------------


def mutate_bytes(r: random.Random, data: bytes, *, keep_newlines: bool = False) -> bytes:
    """``data`` damaged once or a few times: flipped bits, cut, inserted, repeated bytes."""
    out = bytearray(data)
    for _ in range(r.choice((1, 1, 1, 2, 3, 8))):
        if not out:
            out += bytes([r.randrange(256)])
            continue
        at = r.randrange(len(out))
        roll = r.random()
        if roll < 0.35:
            out[at] ^= 1 << r.randrange(8)
        elif roll < 0.5:
            out[at] = r.choice((0, 0xFF, 0x80, 0xC0, 0xEF, ord('"'), ord("\\"), ord("{")))
        elif roll < 0.65:
            del out[at : at + r.choice((1, 2, 5, 50))]
        elif roll < 0.8:
            out[at:at] = r.choice(
                (
                    b"\x00",
                    b"\xef\xbb\xbf",
                    b"\xc3",
                    b'"',
                    b"\\u0000",
                    b"\\ud800",
                    b"[" * 40,
                    b"1" * 70,
                    b"\r",
                    b"\x1b[2J",
                )
            )
        elif roll < 0.9:
            end = min(len(out), at + r.randint(1, 64))
            out[at:at] = out[at:end]
        else:
            del out[at:]
        if keep_newlines:
            out = bytearray(out.replace(b"\n", b" "))
    return bytes(out)


def timed(function: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    """``(result, None)`` or ``(None, the exception)``, within the case's time bound."""
    try:
        with bounded():
            return function(), None
    except CaseTimeout as exc:
        return None, exc
    except Exception as exc:  # noqa: BLE001 (every exception is an outcome to judge)
        return None, exc
