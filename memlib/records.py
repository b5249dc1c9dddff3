"""Stored records: the durable evidence a store keeps (docs/reference.md#records).

A record is validated when built, and so is what a store reads back, but for the few
rules only a new record keeps (no U+0000, an NFC and visible id): old stores stay readable."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from functools import lru_cache
from json.encoder import encode_basestring as _quote
from typing import Any, Literal

from ._tokens import MAX_GROWTH, normalize_text, terms_of_normalized
from ._visible import first_hidden, shown_name
from .errors import RemoteMemoryCorruptionError, RemoteMemoryValidationError

__all__ = [
    "LIMITS",
    "MAX_TERMS",
    "MemoryKind",
    "MemorySource",
    "SourceNeighbours",
    "StoredMemory",
    "format_timestamp",
    "parse_timestamp",
    "project_name",
    "user_scope_for",
]

# Characters per field. The numbers are a teaching limit, not a storage one: they keep
# a single record small enough to read in a notebook cell and to render into a prompt.
LIMITS: Mapping[str, int] = {
    "content": 20_000,
    "summary": 2_000,
    "source_id": 500,
    "source_type": 100,
    "title": 1_000,
}
MEMORY_ID_MAX = 200
PROJECT_MAX = 100
# Distinct terms of a record's summary and content: an index keeps a posting list per
# term, so this bounds what one record costs (20,000 random Han characters are 20,000
# bigrams). A LoCoMo turn has at most 66; the course's whole Chinese chapter 1,534.
MAX_TERMS = 4_096
# Text this short cannot reach MAX_TERMS in any script (see check_terms).
_TERMS_SHORT = MAX_TERMS // MAX_GROWTH
_SURROGATE = re.compile("[\ud800-\udfff]")
# Any character an id may not hold (``\s`` is ``str.isspace``); only a refused id takes
# the slow path that words the error.
_ID_REFUSED = re.compile("[\\s\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_HEX16 = re.compile("[0-9a-f]{16}")
# The form ``format_timestamp`` writes. A string already in it (the usual case: records
# read back, ``captured_at`` made by memlib) is its own normal form once it parses.
_CANONICAL_TIMESTAMP = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{0,5}[1-9])?Z"
)
# Digits of a fraction past the sixth: ``fromisoformat`` drops them without a word, and
# a stored instant must be the one given (fractional seconds are kept: docs/reference.md#records).
_PAST_MICROSECONDS = re.compile(r"[0-9]{2}:[0-9]{2}:[0-9]{2}[.,][0-9]{6}([0-9]+)")


class MemoryKind(str, Enum):  # noqa: UP042 (StrEnum would change format() of members)
    CONVERSATION = "conversation"
    PROFILE = "profile"
    RETRACTION = "retraction"

    def __str__(self) -> str:
        return self.value


def collapse_whitespace(value: str) -> str:
    """Fold every run of Unicode whitespace into one space and strip the ends."""
    return " ".join(value.split())


def reason_text(value: object) -> str:
    """A retraction's reason, checked under its own name before it becomes the
    retraction's content (with content's limit): a caller never saw a "content"."""
    return _text("reason", value, LIMITS["content"])


# PostgreSQL's text and jsonb cannot hold U+0000, so no backend takes it in a new record
# (one rule for all three); a record an older version stored keeps it and stays readable.
_NUL_REFUSED = "{} must not contain U+0000 (the NUL character)"


def check_unicode(field_name: str, text: str) -> None:
    """Refuse lone surrogates (from a "\\ud800" JSON escape): UTF-8 cannot write them."""
    if not text.isascii() and _SURROGATE.search(text):
        raise RemoteMemoryValidationError(
            f"{field_name} must be valid Unicode (no lone surrogates)"
        )


def _text(field_name: str, value: object, limit: int | None = None, new: bool = True) -> str:
    if not isinstance(value, str):
        raise RemoteMemoryValidationError(f"{field_name} must be a string")
    text = " ".join(value.split())  # collapse_whitespace, inlined: every record pays it
    if not text:
        raise RemoteMemoryValidationError(f"{field_name} must not be empty")
    limit = limit or LIMITS.get(field_name)
    if limit is not None and len(text) > limit:
        raise RemoteMemoryValidationError(
            f"{field_name} exceeds the {limit:,}-character teaching limit"
        )
    check_unicode(field_name, text)
    if new and "\x00" in text:
        raise RemoteMemoryValidationError(_NUL_REFUSED.format(field_name))
    return text


def memory_id_of(value: object, field_name: str = "memory_id") -> str:
    """``value`` if it can name a stored memory (a new one's id: ``_new_memory_id``)."""
    if not isinstance(value, str):
        raise RemoteMemoryValidationError(f"{field_name} must be a string")
    if not value:
        raise RemoteMemoryValidationError(f"{field_name} must not be empty")
    if len(value) > MEMORY_ID_MAX:
        raise RemoteMemoryValidationError(
            f"{field_name} exceeds the {MEMORY_ID_MAX}-character limit"
        )
    if _ID_REFUSED.search(value) is None:
        return value
    # An id ends up in file names, SQL keys and XML attributes: keep it one visible token.
    if any(ch.isspace() or ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 for ch in value):
        raise RemoteMemoryValidationError(
            f"{field_name} must not contain whitespace or control characters: {value!r}"
        )
    check_unicode(field_name, value)
    return value


_memory_id = memory_id_of


def _new_id_ok(memory_id: str) -> bool:
    """A non-ASCII id that passed ``_memory_id`` passes ``_new_memory_id``."""
    return first_hidden(memory_id) is None and unicodedata.is_normalized("NFC", memory_id)


def _new_memory_id(value: object) -> str:
    """``_memory_id`` plus a new id's rules: visible and NFC (docs/contract.md)."""
    memory_id = _memory_id(value)
    _visible_normal("memory_id", memory_id, "NFC")
    return memory_id


@lru_cache(maxsize=65_536)
def _parse_canonical(value: str) -> datetime | None:
    try:
        return datetime.fromisoformat(value)  # "…Z" parses straight to UTC
    except ValueError:
        return None  # the right form, not a real instant (30 February)


def _canonical(value: object) -> datetime | None:
    """The instant of a timestamp already in ``format_timestamp``'s form, else None."""
    if type(value) is str and _CANONICAL_TIMESTAMP.fullmatch(value):
        return _parse_canonical(value)
    return None


def parse_timestamp(value: object) -> datetime:
    """An aware ISO-8601 instant, converted to UTC; anything else is corruption."""
    moment = _canonical(value)
    if moment is not None:
        return moment
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise RemoteMemoryCorruptionError(f"invalid timestamp: {value!r}") from None
        lost = _PAST_MICROSECONDS.search(value)
        if lost is not None and lost.group(1).strip("0"):
            raise RemoteMemoryCorruptionError(
                f"invalid timestamp: {value!r} (more precise than a microsecond)"
            )
    else:
        raise RemoteMemoryCorruptionError(f"invalid timestamp: {value!r}")
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise RemoteMemoryCorruptionError(f"invalid timestamp: {value!r}")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise RemoteMemoryCorruptionError(f"invalid timestamp: {value!r}") from None


def format_timestamp(moment: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ``; fractional seconds only when the instant has them."""
    # isoformat pads the year to four digits (strftime("%Y") does not below year 1000)
    # and leaves the fraction out when it is zero; every append pays this once.
    text = moment.astimezone(UTC).isoformat()[:-6]  # without "+00:00"
    if len(text) > 19:
        text = text.rstrip("0")
    return text + "Z"


def normalize_timestamp(value: object) -> str:
    if _canonical(value) is not None:
        return value  # type: ignore[return-value]  # a str, checked by _canonical
    return format_timestamp(parse_timestamp(value))


def user_scope_for(user_id: str) -> str:
    """The first 16 hex digits of sha256 of the stripped, casefolded user id, which must
    be NFKC and visible (docs/contract.md): two ids that look alike name one scope."""
    if not isinstance(user_id, str) or not user_id.strip():
        raise RemoteMemoryValidationError("user_id must not be empty")
    check_unicode("user_id", user_id)
    user_id = user_id.strip()
    _visible_normal("user_id", user_id, "NFKC")
    return hashlib.sha256(user_id.casefold().encode("utf-8")).hexdigest()[:16]


def project_name(value: object) -> str:
    """``value`` if it can name a project (docs/contract.md, "Projects"): at most
    ``PROJECT_MAX`` visible NFKC characters, spaces only single and inside; compared as is."""
    if not isinstance(value, str):
        raise RemoteMemoryValidationError("project must be a string")
    if not value.strip():
        raise RemoteMemoryValidationError("project must not be empty")
    if len(value) > PROJECT_MAX:
        raise RemoteMemoryValidationError(f"project exceeds the {PROJECT_MAX}-character limit")
    check_unicode("project", value)
    if value != value.strip() or "  " in value or any(ch.isspace() and ch != " " for ch in value):
        raise RemoteMemoryValidationError(
            f"project must hold no whitespace but single spaces between words: {shown_name(value)}"
        )
    _visible_normal("project", value, "NFKC")
    return value


def _visible_normal(field_name: str, value: str, form: Literal["NFC", "NFKC"]) -> None:
    """A name that must look like what it is: visible, and in ``form`` (names take NFKC, not
    only NFC: a fullwidth form, "ａｌｉｃｅ", would name something apart from "alice")."""
    hidden = first_hidden(value)
    if hidden is not None:
        raise RemoteMemoryValidationError(
            f"{field_name} must not contain invisible or format characters: "
            f"{shown_name(value)} holds U+{ord(hidden):04X}"
        )
    if not value.isascii() and not unicodedata.is_normalized(form, value):
        raise RemoteMemoryValidationError(
            f"{field_name} must be in Unicode {form} form: {ascii(value)} is "
            f"{shown_name(unicodedata.normalize(form, value))} in {form}"
        )


def _scope(value: object) -> str:
    if not isinstance(value, str) or not _HEX16.fullmatch(value):
        raise RemoteMemoryValidationError(f"user_scope must be 16 hex digits: {value!r}")
    return value


def _kind(value: object) -> MemoryKind:
    if value.__class__ is MemoryKind:
        return value
    try:
        return MemoryKind(value)
    except ValueError:
        raise RemoteMemoryValidationError(f"unknown memory kind: {value!r}") from None


@dataclass(frozen=True)
class MemorySource:
    """Where a record came from: the transcript or snapshot, and when it happened."""

    source_id: str
    source_type: str
    title: str
    captured_at: str

    def __post_init__(self) -> None:
        self._check(new=True)

    def _check(self, *, new: bool) -> None:
        """The constructor's checks; ``new=False`` for a source read back, which may
        hold what only a new record refuses (U+0000)."""
        for name in ("source_id", "source_type", "title"):
            object.__setattr__(self, name, _text(name, getattr(self, name), new=new))
        object.__setattr__(self, "captured_at", normalize_timestamp(self.captured_at))

    @property
    def captured_datetime(self) -> datetime:
        return parse_timestamp(self.captured_at)

    def to_dict(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in _SOURCE_FIELDS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemorySource:
        """The source of a new record (``StoredMemory.from_dict`` reads a stored one)."""
        return _source_of(data, new=True)


@dataclass(frozen=True)
class StoredMemory:
    """One durable record. Only a store creates these for real; recall never does.
    [beyond] ``supersedes`` and ``superseded_by`` link a supersede's two records."""

    memory_id: str
    user_scope: str
    kind: MemoryKind
    content: str
    summary: str
    source: MemorySource
    stored_at: str
    retracts: str | None = field(default=None)
    supersedes: str | None = field(default=None)
    superseded_by: str | None = field(default=None)
    # [beyond] The project (a namespace inside the user) it was written in; None: none.
    project: str | None = field(default=None)

    def __post_init__(self) -> None:
        self._check(new=True)

    def _check(self, *, new: bool) -> None:
        """The constructor's checks; ``new=True`` adds the rules older versions lacked
        (an NFC, visible id; no U+0000), so a store stays readable (``from_dict``)."""
        # So does the id memlib makes for a retraction from its target's (``retract-`` +
        # id): retracting a record an older version stored must still work.
        derived = self.retracts is not None and self.memory_id == f"retract-{self.retracts}"
        put = self.__dict__.__setitem__  # the fields of a frozen dataclass, as __init__ sets them
        put("memory_id", (_new_memory_id if new and not derived else _memory_id)(self.memory_id))
        put("user_scope", _scope(self.user_scope))
        kind = _kind(self.kind)
        put("kind", kind)
        put("content", _text("content", self.content, new=new))
        put("summary", _text("summary", self.summary, new=new))
        if not isinstance(self.source, MemorySource):
            put("source", _source_of(self.source, new=new))
        elif new:
            # A source read back from an older store may still hold U+0000.
            for name in ("source_id", "source_type", "title"):
                if "\x00" in getattr(self.source, name):
                    raise RemoteMemoryValidationError(_NUL_REFUSED.format(name))
        put("stored_at", normalize_timestamp(self.stored_at))
        retraction = kind is MemoryKind.RETRACTION
        if retraction and self.retracts is None:
            raise RemoteMemoryValidationError("a retraction must name the memory it retracts")
        for name, allowed, refusal in (
            ("retracts", retraction, "only a retraction record may name 'retracts'"),
            ("superseded_by", retraction, "only a retraction record may name 'superseded_by'"),
            ("supersedes", not retraction, "a retraction cannot supersede a record"),
        ):
            if (link := getattr(self, name)) is not None:
                if not allowed:
                    raise RemoteMemoryValidationError(refusal)
                put(name, _memory_id(link, name))
        if self.project is not None:
            put("project", project_name(self.project))

    @property
    def captured_at(self) -> str:
        return self.source.captured_at

    @property
    def captured_datetime(self) -> datetime:
        return self.source.captured_datetime

    def to_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in _RECORD_FIELDS}
        data.update(kind=self.kind.value, source=self.source.to_dict())  # in their places
        for name in _LINKS:
            if (link := getattr(self, name)) is not None:
                data[name] = link
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StoredMemory:
        if type(data) is dict and ((keys := data.keys()) == _RECORD_KEYS or keys == _IN_PROJECT):
            # Every record a store reads back: checked inline (see _fast_record).
            scope, stored = data["user_scope"], data["stored_at"]
            if type(scope) is str and _HEX16.fullmatch(scope) and _canonical(stored):
                record = _fast_record(data, scope, stored)
                if record is not None:
                    if "project" in data:
                        record.__dict__["project"] = _project(data["project"])
                    return record
        if not isinstance(data, Mapping):
            raise RemoteMemoryValidationError("a record must be a JSON object")
        _check_keys("record", data, _RECORD_FIELDS, _RECORD_KEYS | _LINK_KEYS)
        record = _new(cls)
        fields = {k: data.get(k) for k in (*_RECORD_FIELDS, *_LINKS)}
        record.__dict__.update(fields, source=_source_of(data["source"], new=False))
        record._check(new=False)
        return record


def _check_keys(
    what: str, data: Mapping[str, Any], required: tuple[str, ...], allowed: frozenset[str]
) -> None:
    missing = [k for k in required if k not in data]
    if missing:
        raise RemoteMemoryValidationError(f"{what} is missing {', '.join(missing)}")
    # shown_name: a key may hold a line break or be invisible.
    extra = sorted(str(k) for k in data if k not in allowed)
    if extra:
        names = ", ".join(map(shown_name, extra))
        raise RemoteMemoryValidationError(f"{what} has unknown fields: {names}")


def _source_of(data: Mapping[str, Any], *, new: bool) -> MemorySource:
    if isinstance(data, MemorySource):
        return data
    if not isinstance(data, Mapping):
        raise RemoteMemoryValidationError("source must be an object")
    _check_keys("source", data, _SOURCE_FIELDS, _SOURCE_KEYS)
    source = _new(MemorySource)
    source.__dict__.update({k: data[k] for k in _SOURCE_FIELDS})
    source._check(new=new)
    return source


# Optional keys, each written only when set (``project`` last).
_LINKS = ("retracts", "supersedes", "superseded_by", "project")
_LINK_KEYS = frozenset(_LINKS)
_RECORD_FIELDS = ("memory_id", "user_scope", "kind", "content", "summary", "source", "stored_at")
_RECORD_KEYS = frozenset(_RECORD_FIELDS)
_IN_PROJECT = _RECORD_KEYS | {"project"}
_project = lru_cache(maxsize=1_024)(project_name)


# A member is found as its value: a str enum hashes and compares as one.
_FAST_KINDS = {"conversation": MemoryKind.CONVERSATION, "profile": MemoryKind.PROFILE}
_SOURCE_FIELDS = ("source_id", "source_type", "title", "captured_at")
_SOURCE_KEYS = frozenset(_SOURCE_FIELDS)
_LIMIT_SOURCE_ID, _LIMIT_SOURCE_TYPE, _LIMIT_TITLE, _LIMIT_CONTENT, _LIMIT_SUMMARY = (
    LIMITS[k] for k in ("source_id", "source_type", "title", "content", "summary")
)
_new = object.__new__


def _fast_record(
    item: Mapping[str, Any], user_scope: str, stored_at: str, new: bool = False
) -> StoredMemory | None:
    """The constructor's checks inlined for the usual record, else None (the constructor
    then decides and words any error); a property test holds both paths equal."""
    source = item["source"]
    kind = _FAST_KINDS.get(item["kind"]) if type(item["kind"]) in (str, MemoryKind) else None
    memory_id = item["memory_id"]
    if not (
        kind is not None
        and type(source) is dict
        and source.keys() == _SOURCE_KEYS
        and type(memory_id) is str
        and 0 < len(memory_id) <= MEMORY_ID_MAX
        and _ID_REFUSED.search(memory_id) is None
    ):
        return None
    # Unrolled (one durable append pays this): each field as _text would return it.
    try:
        source_id = " ".join(source["source_id"].split())
        source_type = " ".join(source["source_type"].split())
        title = " ".join(source["title"].split())
        content = " ".join(item["content"].split())
        summary = " ".join(item["summary"].split())
    except (AttributeError, TypeError):
        return None  # not a string: the constructor words it
    if not (
        type(source["source_id"])
        is type(source["source_type"])
        is type(source["title"])
        is type(item["content"])
        is type(item["summary"])
        is str
        and 0 < len(source_id) <= _LIMIT_SOURCE_ID
        and 0 < len(source_type) <= _LIMIT_SOURCE_TYPE
        and 0 < len(title) <= _LIMIT_TITLE
        and 0 < len(content) <= _LIMIT_CONTENT
        and 0 < len(summary) <= _LIMIT_SUMMARY
    ):
        return None
    every = source_id + source_type + title + content + summary
    if not every.isascii() and _SURROGATE.search(every):
        return None
    if new and ("\x00" in every or not (memory_id.isascii() or _new_id_ok(memory_id))):
        return None
    captured = source["captured_at"]
    if _canonical(captured) is None:
        return None  # the constructor normalizes it, or says "invalid timestamp"
    made_source = _new(MemorySource)
    made_source.__dict__.update(
        source_id=source_id, source_type=source_type, title=title, captured_at=captured
    )
    record = _new(StoredMemory)
    record.__dict__.update(
        memory_id=memory_id,
        user_scope=user_scope,
        kind=kind,
        content=content,
        summary=summary,
        source=made_source,
        stored_at=stored_at,
        **dict.fromkeys(_LINKS),  # no links; a caller sets the project
    )
    return record


def record_from_item(
    item: Mapping[str, Any], user_scope: str, stored_at: str, project: str | None = None
) -> StoredMemory:
    """``StoredMemory(...)`` of an append item, for a store's own scope, project and clock."""
    record = _fast_record(item, user_scope, stored_at, new=True)
    if record is not None:
        record.__dict__["project"] = project  # checked when the store was opened
    else:
        record = StoredMemory(
            memory_id=item["memory_id"],
            user_scope=user_scope,
            kind=item["kind"],
            content=item["content"],
            summary=item["summary"],
            source=_source_of(item["source"], new=True),
            stored_at=stored_at,
            project=project,
        )
    summary, content = record.summary, record.content
    # check_terms's own first test, inlined: every append pays it.
    size = len(summary) + len(content)
    if size > _TERMS_SHORT and (size > MAX_TERMS or not (content.isascii() and summary.isascii())):
        check_terms(summary, content)
    return record


def check_terms(summary: str, content: str) -> None:
    """Refuse a new record with more than ``MAX_TERMS`` distinct terms (a short or ASCII
    one never has: normalizing makes at most ``MAX_GROWTH`` characters of one)."""
    size = len(summary) + len(content)
    if size <= MAX_TERMS and (
        size * MAX_GROWTH <= MAX_TERMS or (summary.isascii() and content.isascii())
    ):
        return
    normalized = normalize_text(f"{summary} {content}")
    if len(normalized) <= MAX_TERMS:
        return
    count = len(set(terms_of_normalized(normalized)))
    if count > MAX_TERMS:
        raise RemoteMemoryValidationError(
            f"content exceeds the {MAX_TERMS:,}-distinct-term limit per record "
            f"({count:,} distinct terms with its summary)"
        )


# ``json.dumps(record.to_dict(), ensure_ascii=False, separators=(",", ":"))`` with the
# same C escaper, without a dict and an encoder per record (a property test checks it).
_JSON = (
    '{"memory_id":%s,"user_scope":%s,"kind":%s,"content":%s,"summary":%s,'
    '"source":{"source_id":%s,"source_type":%s,"title":%s,"captured_at":%s},'
    '"stored_at":%s'
)


def record_json(record: StoredMemory) -> str:
    """A record's compact JSON, as the JSONL line and the SQL ``body`` column hold it."""
    source = record.source
    text = _JSON % (
        _quote(record.memory_id),
        _quote(record.user_scope),
        _quote(record.kind.value),
        _quote(record.content),
        _quote(record.summary),
        _quote(source.source_id),
        _quote(source.source_type),
        _quote(source.title),
        _quote(source.captured_at),
        _quote(record.stored_at),
    )
    for name in _LINKS:
        if (link := getattr(record, name)) is not None:
            text += f',"{name}":' + _quote(link)
    return text + "}"


@dataclass(frozen=True)
class SourceNeighbours:
    """[beyond] The ``memory_id`` of the turn before and after a conversation record in
    its source (None: none)."""

    previous: str | None
    next: str | None
