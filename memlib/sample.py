"""The sample corpus that the tests, ``memlib demo`` and every notebook share, with fixed
timestamps and store clock so every recall over it is reproducible. 003 is the worked
example (0.995161); 005 and 006 tie; 009 is old; 002, 007, 010, 011 are Chinese, mixed and
Japanese; 008 has accents and ß. ``lang="zh"``: the same 15 records in Chinese."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._runtime import scope_path
from .errors import RemoteMemoryValidationError
from .records import MemoryKind, MemorySource, StoredMemory
from .stores.jsonl._store import RemoteMemoryStore

__all__ = [
    "SAMPLE_USER_ID",
    "SAMPLE_AS_OF",
    "SAMPLE_STORED_AT",
    "SAMPLE_QUERY",
    "SAMPLE_QUERY_ZH",
    "sample_records",
    "open_sample_store",
    "fixed_clock",
    "scope_path",
    "chinese_check_set_path",
]

SAMPLE_USER_ID = "alice"
SAMPLE_AS_OF = datetime(2026, 8, 10, 12, 0, tzinfo=UTC)
SAMPLE_STORED_AT = datetime(2026, 8, 10, 8, 0, tzinfo=UTC)
SAMPLE_QUERY = "layered memory"
SAMPLE_QUERY_ZH = "分层记忆"

# (kind, memory_id, captured_at, title, summary, content) per record, per language.
_Row = tuple[MemoryKind, str, str, str, str, str]
_CORPORA: dict[str, tuple[_Row, ...]] = {
    lang: tuple((MemoryKind(kind), *rest) for kind, *rest in rows)
    for lang, rows in json.loads(
        (Path(__file__).parent / "data" / "sample.json").read_text(encoding="utf-8")
    ).items()
}


def _rows(lang: str) -> tuple[_Row, ...]:
    rows = _CORPORA.get(lang) if isinstance(lang, str) else None
    if rows is None:
        raise RemoteMemoryValidationError(
            f"no sample corpus in {lang!r}; there are {', '.join(_CORPORA)}"
        )
    return rows


def sample_records(lang: str = "en") -> tuple[dict[str, Any], ...]:
    """The corpus in ``lang`` (``en`` or ``zh``) as ``append_many`` items, in a fixed order."""
    items = []
    for kind, memory_id, captured_at, title, summary, content in _rows(lang):
        talk = kind is MemoryKind.CONVERSATION
        source = MemorySource(
            f"{'transcript' if talk else 'profile-snapshot'}-{memory_id.split('-')[-1]}",
            "conversation_transcript" if talk else "profile_snapshot",
            title,
            captured_at,
        )
        item = dict(kind=kind, memory_id=memory_id, content=content, summary=summary)
        items.append(item | {"source": source})
    return tuple(items)


def fixed_clock(moment: datetime = SAMPLE_STORED_AT) -> Callable[[], datetime]:
    """A store clock that always says ``moment``, so ``stored_at`` is reproducible."""
    return lambda: moment


def _check_language(records: tuple[StoredMemory, ...], lang: str) -> None:
    # Both corpora live at the same scope path: the other ``lang`` would be handed back.
    own = {content for *_, content in _rows(lang)}
    for other, rows in _CORPORA.items():
        theirs = {content for *_, content in rows} - own
        if other != lang and any(record.content in theirs for record in records):
            raise RemoteMemoryValidationError(
                f"this store holds the {other!r} sample corpus; "
                f"open the {lang!r} one under another root"
            )


def open_sample_store(
    root: str | Path, *, user_id: str = SAMPLE_USER_ID, load: bool = True, lang: str = "en"
) -> RemoteMemoryStore:
    """A JSONL store under ``root`` with a fixed clock, holding the sample corpus in
    ``lang`` (``en`` or ``zh``; one corpus per root and user)."""
    _rows(lang)  # a bad ``lang`` is refused before anything is created
    store = RemoteMemoryStore(scope_path(root, user_id), user_id=user_id, clock=fixed_clock())
    if load:
        records = store.read_all()
        if not records:
            store.append_many(sample_records(lang))
        else:
            _check_language(records, lang)
    return store


def chinese_check_set_path() -> Path:
    """The packaged Chinese recall check set (LoCoMo format; module docstring)."""
    return Path(__file__).parent / "data" / "zh-check.json"
